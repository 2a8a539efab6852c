"""What every subcommand shares: reading input and turning errors into
``file:line:col: error: …`` diagnostics with the right exit code (writing output:
`ptxkit.cli.output`).
"""

from __future__ import annotations

import os
import sys

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 101
#: Ctrl-C, and a reader that went away (``ptxkit parse … | head -1``): the statuses a shell
#: reports for a program killed by SIGINT or SIGPIPE, as for ``cat`` or ``grep``.
EXIT_INTERRUPTED, EXIT_CLOSED_PIPE = 130, 141

#: The exit codes every command shares (`help_epilog`).
COMMON_EXIT_CODES = {
    EXIT_INTERNAL: "an internal error: a bug in ptxkit (the traceback says where; please report it)",
    EXIT_INTERRUPTED: "interrupted (Ctrl-C)",
    EXIT_CLOSED_PIPE: "standard output was closed before the end (e.g. | head): the command stops quietly, "
                      "as a program killed by SIGPIPE does",
}


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
    except BrokenPipeError:  # e.g. `ptxkit parse samples/ | head -1`: before OSError, its base
        return closed_pipe()
    except OSError as err:
        name = f"{err.filename}: " if err.filename else ""
        print(f"ptxkit: error: {name}{err.strerror or err}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except Exception:  # a bug in ptxkit: say so, with the traceback
        import traceback

        traceback.print_exc()
        print("ptxkit: internal error (this is a bug in ptxkit; please report it)", file=sys.stderr)
        return EXIT_INTERNAL


def closed_pipe() -> int:
    """The reader of standard output went away: point standard output and error at the
    null device (what is still buffered goes nowhere, so the interpreter's last flush
    cannot complain) and return `EXIT_CLOSED_PIPE`, quietly.

    >>> closed_pipe()  # doctest: +SKIP
    141
    """
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        for stream in (sys.stdout, sys.stderr):
            os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):  # no descriptors (an embedding, a test's capture)
        pass
    return EXIT_CLOSED_PIPE


def flush_at_exit(status: int) -> int:
    """Flush standard output before the process ends; a reader gone by then is a closed
    pipe (`closed_pipe`), not a traceback.

    >>> flush_at_exit(0)
    0
    """
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        return closed_pipe()
    return status


def help_epilog(exit_codes: dict[int, str], environment: dict[str, str] | None = None, after: str = "") -> Epilog:
    """The closing sections of a command's ``--help``: its exit codes (then the ones every
    command shares) and the environment variables it reads, then `after`. Laid out when
    help is printed (`Epilog`), not in every run that builds the parser.

    >>> print(help_epilog({0: "written"}, {"PTXKIT_CACHE_MAX": "the cache's cap"}))
    exit codes:
      0    written
      101  an internal error: a bug in ptxkit (the traceback says where; please
           report it)
      130  interrupted (Ctrl-C)
      141  standard output was closed before the end (e.g. | head): the command
           stops quietly, as a program killed by SIGPIPE does
    <BLANKLINE>
    environment:
      PTXKIT_CACHE_MAX  the cache's cap
    """
    return Epilog(exit_codes, environment or {}, after)


class Epilog:
    """A `help_epilog`, kept as its parts until `str` lays it out (``ptxkit.cli.main.
    HelpFormatter`` does, as it prints help): a ``ptxkit fence`` run that prints no help
    then never imports ``textwrap`` nor fills the lines (about 1 ms of every process,
    measured here).

    >>> print(Epilog({0: "done"}, {}, "\\n\\nmore"))  # doctest: +ELLIPSIS
    exit codes:
      0    done
    ...
    <BLANKLINE>
    more
    """

    __slots__ = ("exit_codes", "environment", "after")

    def __init__(self, exit_codes: dict[int, str], environment: dict[str, str], after: str) -> None:
        self.exit_codes, self.environment, self.after = exit_codes, environment, after

    def __str__(self) -> str:
        import textwrap

        sections = [("exit codes", {str(code): text for code, text in {**self.exit_codes, **COMMON_EXIT_CODES}.items()})]
        if self.environment:
            sections.append(("environment", self.environment))
        blocks = []
        for title, items in sections:
            column = max(map(len, items)) + 2
            lines = [f"{title}:"]
            for name, text in items.items():
                lines.append(textwrap.fill(text, 78, initial_indent=f"  {name:<{column}}",
                                           subsequent_indent=" " * (column + 2)))
            blocks.append("\n".join(lines))
        return "\n\n".join(blocks) + self.after


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
