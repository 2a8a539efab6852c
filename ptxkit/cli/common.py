"""What every subcommand shares: reading input and turning errors into
``file:line:col: error: …`` diagnostics with the right exit code (writing output:
`ptxkit.cli.output`).
"""

from __future__ import annotations

import os
import sys

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 101


class UsageError(Exception):
    """A problem with how the command was called or with its input (exit code 2).

    >>> import contextlib, sys
    >>> def run(args): raise UsageError("reading standard input needs -o OUT")
    >>> with contextlib.redirect_stderr(sys.stdout):
    ...     run_command(run, None)
    ptxkit: error: reading standard input needs -o OUT
    2
    """


def run_command(run, args) -> int:
    """Call a subcommand's `run(args)`, mapping exceptions to diagnostics and exit codes.

    >>> import contextlib, sys, ptxkit
    >>> def run(args): ptxkit.parse("ret;", "k.ptx")
    >>> with contextlib.redirect_stderr(sys.stdout):
    ...     run_command(run, None)
    k.ptx:1:1: error: expected a directive at module level
    ret;
    ^
    2
    """
    from ptxkit.errors import PtxSyntaxError

    try:
        return run(args)
    except PtxSyntaxError as err:
        print(err.format(), file=sys.stderr)
        return EXIT_BAD_INPUT
    except UsageError as err:
        print(f"ptxkit: error: {err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except OSError as err:
        name = f"{err.filename}: " if err.filename else ""
        print(f"ptxkit: error: {name}{err.strerror or err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # pragma: no cover - e.g. `ptxkit fence x.ptx | head`
        return EXIT_OK
    except Exception:  # a bug in ptxkit: say so, with the traceback
        import traceback

        traceback.print_exc()
        print("ptxkit: internal error (this is a bug in ptxkit; please report it)", file=sys.stderr)
        return EXIT_INTERNAL


def plural(count: int, noun: str) -> str:
    """``1 file``, ``2 files``.

    >>> plural(1, "fence"), plural(0, "fence")
    ('1 fence', '0 fences')
    """
    return f"{count} {noun}{'s' * (count != 1)}"


def read_input(path: str) -> tuple[bytes, str]:
    """Read a file, or standard input for ``-``; returns (bytes, display name).

    >>> data, name = read_input("samples/toolchain/empty.ptx")
    >>> name, data.splitlines()[1]
    ('samples/toolchain/empty.ptx', b'.version 8.0')
    """
    if path == "-":
        return sys.stdin.buffer.read(), "<stdin>"
    with open(path, "rb") as handle:
        return handle.read(), path


def parse_input(path: str):
    """Read and parse a PTX input (file or ``-``) into a `Module`; one that does not start
    with ``.version``, as an empty or comment-only file, is an error (`check_module_start`).

    >>> module = parse_input("samples/toolchain/vector_add.ptx")
    >>> module.filename, module.function("vector_add").kind
    ('samples/toolchain/vector_add.ptx', 'entry')
    """
    from ptxkit.parser import check_module_start, parse

    data, name = read_input(path)
    module = parse(data, name)
    check_module_start(module.source.text, name)
    return module
