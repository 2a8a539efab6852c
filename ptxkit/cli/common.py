"""What every subcommand shares: reading input, writing output atomically, and
turning errors into ``file:line:col: error: …`` diagnostics with the right exit code.
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
    """Read and parse a PTX input (file or ``-``) into a `Module`.

    >>> module = parse_input("samples/toolchain/vector_add.ptx")
    >>> module.filename, module.function("vector_add").kind
    ('samples/toolchain/vector_add.ptx', 'entry')
    """
    from ptxkit import parse

    data, name = read_input(path)
    return parse(data, name)


def write_output(text: str, path: str | None) -> None:
    """Write `text` to `path` atomically (temporary file + rename), or to stdout.

    On any error the destination is left as it was: never a partial file.

    >>> write_output(".version 8.0\\n", None)
    .version 8.0
    """
    if path is None or path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    write_atomically(path, text.encode("utf-8"))


def write_atomically(path: str, data: bytes) -> None:
    """Replace `path` with `data` in one rename. An existing file keeps its mode; a new one
    gets the mode the umask gives (0644 under umask 022), as a compiler's output does.

    >>> import os, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "k.cubin")
    ...     write_atomically(path, b"cubin")
    ...     open(path, "rb").read(), os.listdir(folder), os.stat(path).st_mode & 0o777 == new_file_mode()
    (b'cubin', ['k.cubin'], True)
    """
    import tempfile

    directory = os.path.dirname(os.path.abspath(path))
    try:
        mode = os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        mode = new_file_mode()
    fd, temporary = tempfile.mkstemp(prefix=".ptxkit-", dir=directory)  # mode 0600 until chmod
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, mode)
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def new_file_mode() -> int:
    """The mode ``open(path, "w")`` gives a new file: 0666 less the process's umask.

    >>> import os
    >>> old = os.umask(0o022); mode = new_file_mode(); _ = os.umask(old)
    >>> oct(mode)
    '0o644'
    """
    mask = os.umask(0o022)  # the only portable way to read the umask is to set it
    os.umask(mask)
    return 0o666 & ~mask
