"""``ptxkit ptxas [ptxas arguments]`` (also installed as ``ptxkit-ptxas``): a drop-in ptxas
that runs the proxy-fence pass on its PTX input first.

The arguments go to NVIDIA's ptxas unchanged, except that a PTX input that needs fences is
replaced by a fenced copy in a private temporary directory (the caller's file is never
written; PTX on standard input, ``-``, is read first and always given to ptxas as a
copy, named ``<stdin>`` in messages). ptxas's messages about that copy are mapped back to
the caller's file name and line numbers, so the output files, stdout, stderr and exit
code are ptxas's own.
``--version`` (which Triton parses) and calls without an input file go straight
through; ``--help`` prints ptxas's help, then the wrapper's (`wrapper_help`).

ptxas starts at once, before the fence pass is even imported, on the caller's unchanged
input and with its output file redirected into a private folder; the pass runs meanwhile.
When no input needs a fence (and always in ``check`` mode) that run is the answer: its
output file is copied where the caller asked and its messages are replayed. Otherwise
it is stopped and ptxas runs again on the fenced copy. So an input that needs nothing
costs ptxas's time or the pass's, whichever is longer, not their sum. An input with no
async-proxy opcode and no call (`ptxkit.isa.may_need_fence`) cannot need a fence: the
pass is not even loaded for it.

ptxas-style arguments must stay untouched, so the wrapper is configured through the
environment:

``PTXKIT_FENCE_MODE``
    ``fence`` (default): insert the missing ``fence.proxy.async`` before assembling;
    ``check``: assemble the input as it is and print one warning per missing fence on
    stderr (``file:line:col: warning: … [ptxkit]``); ``off``: run ptxas as it is.
``PTXKIT_FENCE_LOG``
    append one JSON line per PTX input (file, mode, the fences added or missing) to this
    file (``-``: to stderr).
``PTXKIT_ON_ERROR``
    what happens when the fence pass cannot run on an input (PTX it cannot read, or a bug
    in ptxkit): ``fail`` (default) reports it as a ptxas error (``ptxas k.ptx, line 12;
    error   : … [ptxkit]``), exits 255 and writes no output file, so a build never ships
    a kernel that was meant to be fenced and was not; ``ptxas`` assembles that input
    without the pass, with a warning. The argument ``--ptxkit-on-error=fail|ptxas`` (taken
    out before ptxas sees the arguments) says the same and wins. When ptxas itself
    rejects the input, its own messages are the answer.
``PTXKIT_PASSES``
    rewrite passes to run on every PTX input first, comma-separated specs
    (``strip-fences``, ``mypkg.passes:count --every 2``: `ptxkit.rewrite.pipeline`); the
    fence mode then says what the fence pass does after them (``off``: passes only). The
    rewritten copy is what ptxas assembles; the log entry names the passes and the kernel
    parameters they added. A bad spec stops the build (exit 255); a pass that fails on an
    input is an error as ``PTXKIT_ON_ERROR`` says. Instrumentation passes (``timeline
    --buffer global``, ``count --buffer global``) leave their buffers' layouts beside the
    output, in ``OUTPUT.ptxkit.json``, which ``ptxkit trace`` reads (docs/instrument.md,
    section 4).
``PTXKIT_REAL_PTXAS``
    the ptxas to run. Otherwise: ``$PTXAS``, ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``, every
    ``ptxas`` on ``PATH``, then ``cuda.pathfinder``, skipping this wrapper (which may be
    installed as ``ptxas`` earlier on ``PATH``).

As Triton's ptxas: ``TRITON_PTXAS_PATH=$(command -v ptxkit-ptxas)`` (with a fresh
``TRITON_CACHE_DIR`` or ``TRITON_ALWAYS_COMPILE=1``: the wrapper is not in Triton's key).

>>> input_files(["-lineinfo", "-v", "--gpu-name=sm_90a", "k.ptx", "-o", "k.ptx.o"])
[3]
>>> input_files(["-arch", "sm_90a", "-O3", "--maxrregcount", "64", "a.ptx"])
[5]
"""

from __future__ import annotations

import os
import sys

MODES = ("fence", "check", "off")
#: PTXKIT_ON_ERROR: stop with a ptxas-style error, or assemble without the pass
ON_ERROR = ("fail", "ptxas")
ON_ERROR_OPTION = "--ptxkit-on-error"
#: Exit status of ptxas for every failure; the wrapper's own fatal errors use it too.
EXIT_FATAL = 255
#: Set in the environment of the ptxas the wrapper runs: seeing it means that "ptxas"
#: was this wrapper again (an undetected shim), which must stop instead of recursing.
_ACTIVE = "PTXKIT_PTXAS_ACTIVE"
#: ptxas's output file when no -o is given.
DEFAULT_OUTPUT = "elf.o"

#: ptxas options (13.0) whose value is the next argument when not written ``--opt=value``.
TAKES_VALUE = frozenset(
    {
        "--Ofast-compile", "-Ofc",
        "--allow-expensive-optimizations", "-allow-expensive-optimizations",
        "--def-load-cache", "-dlcm", "--def-store-cache", "-dscm",
        "--force-load-cache", "-flcm", "--force-store-cache", "-fscm",
        "--device-function-maxrregcount", "-func-maxrregcount",
        "--device-stack-protector", "-device-stack-protector",
        "--entry", "-e",
        "--fmad", "-fmad",
        "--gpu-name", "-arch",
        "--input-as-string", "-ias",
        "--machine", "-m",
        "--maxntid", "-maxntid",
        "--maxrregcount", "-maxrregcount",
        "--minnctapersm", "-minnctapersm",
        "--opt-level", "-O",
        "--options-file", "-optf",
        "--output-file", "-o",
        "--position-independent-code", "-pic",
        "--register-usage-level", "-regUsageLevel",
        "--sanitize", "-sanitize",
        "--split-compile", "-split-compile",
    }
)  # fmt: skip
_OUTPUT_OPTIONS = ("-o", "--output-file")


class WrapperError(Exception):
    """The wrapper cannot run ptxas (reported as ``ptxkit-ptxas: error: …``, exit 255).

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_REAL_PTXAS="/nonexistent/ptxas"):
    ...     real_ptxas()
    Traceback (most recent call last):
    ptxkit.cli.ptxas_cmd.WrapperError: $PTXKIT_REAL_PTXAS (/nonexistent/ptxas) is not NVIDIA's ptxas
    """


def add_arguments(parser) -> None:
    """Every argument after ``ptxkit ptxas`` belongs to ptxas, options included."""
    import argparse

    parser.prefix_chars = "\0"  # nothing is an option of ours, not even -h or --version
    parser.add_argument("ptxas_args", nargs=argparse.REMAINDER, metavar="PTXAS_ARGUMENT")


def run(args) -> int:
    return wrap(args.ptxas_args)


def main(argv: list[str] | None = None) -> int:
    """The ``ptxkit-ptxas`` console script: ``main(["--version"])`` prints ptxas's version.

    Run as a program (no `argv`), a call with nothing to fence becomes ptxas itself
    (``exec``). A bug in ptxkit prints a traceback and exits 101, as every ptxkit command
    does.
    """
    from .common import run_command

    arguments = sys.argv[1:] if argv is None else list(argv)
    return run_command(lambda _: wrap(arguments, become_ptxas=argv is None), None)


def wrap(argv: list[str], become_ptxas: bool = False) -> int:
    """Run the real ptxas with `argv`, fencing (or checking) its PTX inputs first.

    Returns ptxas's exit status (255 when the wrapper itself cannot run ptxas). With
    `become_ptxas`, a call with nothing to fence replaces this process by ptxas.

    >>> import os, shutil, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_REAL_PTXAS=shutil.which("false")):
    ...     wrap(["-arch", "sm_90a"])  # no input file: straight through, with "ptxas"'s status
    1
    """
    asks_help = "--help" in argv or "-h" in argv
    try:
        if os.environ.get(_ACTIVE):
            raise WrapperError(
                f"the ptxas found ({os.environ[_ACTIVE]}) runs ptxkit-ptxas again; "
                "set PTXKIT_REAL_PTXAS to NVIDIA's ptxas"
            )
        mode = os.environ.get("PTXKIT_FENCE_MODE", "fence").strip().lower() or "fence"
        if mode not in MODES:
            raise WrapperError(f"PTXKIT_FENCE_MODE must be one of {', '.join(MODES)} (got {mode!r})")
        on_error, argv = on_error_policy(argv)
        ptxas = real_ptxas()
        passes = _passes()
    except WrapperError as err:
        print(f"ptxkit-ptxas: error: {err}", file=sys.stderr)
        if asks_help:
            sys.stdout.write(wrapper_help())
        return EXIT_FATAL
    inputs = input_files(argv)
    if asks_help and not inputs:
        status = _run(ptxas, argv)
        sys.stdout.write(wrapper_help())
        return status
    if (mode == "off" and not passes) or not inputs:
        if become_ptxas:
            _become(ptxas, argv)
        return _run(ptxas, argv)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="ptxkit-ptxas-") as private:
        early = None if passes else _start_early(ptxas, argv, inputs, private)  # passes change the input
        try:
            return _fence_and_assemble(ptxas, argv, inputs, mode, on_error, private, early, passes)
        finally:
            if early is not None:
                early.stop()


def _passes() -> list:
    """The passes ``PTXKIT_PASSES`` names, loaded (`ptxkit.rewrite.pipeline.load_pass`); a
    bad spec is a `WrapperError`.

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_PASSES="strip-fences, strip --opcode bar.sync"):
    ...     [(spec.name, spec.options) for spec in _passes()]
    [('strip-fences', {}), ('strip', {'opcode': 'bar.sync'})]
    """
    text = os.environ.get("PTXKIT_PASSES", "").strip()
    if not text:
        return []
    from ptxkit.rewrite.pipeline import PassError, load_pass, split_specs

    try:
        return [load_pass(spec) for spec in split_specs(text)]
    except PassError as err:
        raise WrapperError(f"PTXKIT_PASSES: {err}") from None


def _fence_and_assemble(ptxas: str, argv: list[str], inputs: list[int], mode: str, on_error: str, private: str,
                        early, passes=()) -> int:
    """Prepare every input, then keep the early ptxas run or assemble the fenced copies;
    an input the pass could not run on stops everything (unless `on_error` is ``ptxas``)."""
    command, copies, notes, failures = list(argv), [], [], []
    for index in inputs:
        prepared = _prepare(argv[index], mode, private, passes)
        if prepared.failure is not None:
            (notes if on_error == "ptxas" else failures).append(prepared.failure)
        if prepared.copy:
            command[index] = prepared.copy
            copies.append(prepared)
    if failures:
        return _fail_closed(failures, early)
    if copies:
        if early is not None:
            early.stop()
        status = _run_mapped(ptxas, command, copies, private, notes)
        layouts = {name: layout for prepared in copies for name, layout in prepared.layouts.items()}
        if status == 0 and layouts:
            _write_layouts(argv, layouts)
        return status
    if early is not None:
        status = early.wait()
        if early.deliver():
            early.replay()
            _print_notes(status, notes)
            return _status(status)
    return _run(ptxas, command, quiet_notes=notes)


def wrapper_help() -> str:
    """What ``ptxkit ptxas --help`` prints after ptxas's own help: what the wrapper does,
    its exit codes and every environment variable it reads.

    >>> "PTXKIT_ON_ERROR" in wrapper_help() and "255" in wrapper_help()
    True
    """
    import textwrap

    from .common import help_epilog

    about = textwrap.fill("ptxkit-ptxas (also ptxkit ptxas) runs the ptxas above on its PTX inputs after ptxkit's "
                          "proxy-fence pass (on a private fenced copy: the input files are never written). Every "
                          f"argument is ptxas's, except {ON_ERROR_OPTION}=fail|ptxas, which is taken out before "
                          "ptxas sees them.", 78)
    codes = {
        0: "ptxas succeeded",
        255: "ptxas failed (its messages), the fence pass could not run on an input (unless PTXKIT_ON_ERROR=ptxas), "
             "or the wrapper could not run ptxas (a bad PTXKIT_* setting, no ptxas found)",
        "128+N": "ptxas was killed by signal N",
    }
    environment = {
        "PTXKIT_FENCE_MODE": "fence (default): insert the missing fence.proxy.async; check: assemble the input as "
                             "it is and warn (FILE:LINE:COL: warning: missing … [ptxkit]); off: plain ptxas",
        "PTXKIT_ON_ERROR": "when the fence pass cannot run on an input (PTX it cannot read, a bug): fail (default): "
                           "a ptxas error, exit 255, no output file; ptxas: assemble it without the pass, with a "
                           f"warning ({ON_ERROR_OPTION}=... says the same and wins)",
        "PTXKIT_FENCE_LOG": "append one JSON line per input (file, kernels, mode, fences and why) to this file; "
                            "-: standard error",
        "PTXKIT_PASSES": "rewrite passes to run on every input before the fence pass: comma-separated specs "
                         "(strip-fences, module:function --option value); ptxas assembles the rewritten copy",
        "PTXKIT_REAL_PTXAS": "NVIDIA's ptxas to run; else $PTXAS, $CUDA_HOME/bin, $CUDA_PATH/bin, every ptxas on "
                             "PATH, then cuda.pathfinder, skipping this wrapper",
        _ACTIVE: "set by the wrapper for the ptxas it runs, so that a ptxas which runs the wrapper again stops "
                 "(exit 255) instead of recursing; not to be set by hand",
    }
    return f"\n{about}\n\n{help_epilog(codes, environment)}\n"


def on_error_policy(argv: list[str]) -> tuple[str, list[str]]:
    """What to do when the pass cannot run (``fail`` or ``ptxas``) and the arguments
    for ptxas: ``--ptxkit-on-error=…`` taken out, else ``$PTXKIT_ON_ERROR``, else fail.

    >>> on_error_policy(["--ptxkit-on-error=ptxas", "k.ptx"])
    ('ptxas', ['k.ptx'])
    """
    policy = os.environ.get("PTXKIT_ON_ERROR", "").strip().lower() or "fail"
    source = "PTXKIT_ON_ERROR"
    rest = []
    for argument in argv:
        if argument.startswith(ON_ERROR_OPTION + "="):
            policy, source = argument.split("=", 1)[1].strip().lower(), ON_ERROR_OPTION
        else:
            rest.append(argument)
    if policy not in ON_ERROR:
        raise WrapperError(f"{source} must be one of {', '.join(ON_ERROR)} (got {policy!r})")
    return policy, rest


def _fail_closed(failures: list[_PassFailure], early) -> int:
    """The answer when the pass could not run on an input: ptxas's own when it rejects
    the input too (the early run says so), else the failures as ptxas errors, exit 255
    and no output file."""
    if early is not None and early.wait() != 0:
        early.replay()
        return _status(early.status)
    for failure in failures:
        if failure.trace:
            sys.stderr.write(failure.trace)
        print(failure.ptxas_message("error"), file=sys.stderr)
    print("ptxas fatal   : Ptx assembly aborted: the proxy-fence pass could not run "
          f"(PTXKIT_ON_ERROR=ptxas or {ON_ERROR_OPTION}=ptxas assembles without it) [ptxkit]", file=sys.stderr)
    return EXIT_FATAL


def input_files(argv: list[str]) -> list[int]:
    """Positions in a ptxas argument list that name input files.

    >>> input_files(["-lineinfo", "-v", "--gpu-name=sm_90a", "k.ptx", "-o", "k.ptx.o"])
    [3]
    >>> input_files(["-arch", "sm_90a", "a.ptx", "-", "-o", "a.o"])
    [2, 3]
    """
    positions, value_next = [], False
    for index, argument in enumerate(argv):
        if value_next:
            value_next = False
        elif argument.startswith("-") and argument != "-":
            value_next = argument in TAKES_VALUE
        else:
            positions.append(index)
    return positions


def redirect_output(argv: list[str], private_output: str) -> tuple[list[str], str] | None:
    """`argv` with ptxas's output file moved to `private_output`, and the file the caller
    asked for; None when the output cannot be redirected safely (standard input, an
    options file, several outputs).

    >>> redirect_output(["-arch=sm_90a", "k.ptx", "-o", "k.o"], "/p/out")
    (['-arch=sm_90a', 'k.ptx', '-o', '/p/out'], 'k.o')
    >>> redirect_output(["k.ptx", "--output-file=k.o"], "/p/out")
    (['k.ptx', '--output-file=/p/out'], 'k.o')
    >>> redirect_output(["k.ptx"], "/p/out")
    (['k.ptx', '-o', '/p/out'], 'elf.o')
    """
    command, destinations = list(argv), []
    positions = set(input_files(argv))
    for index, argument in enumerate(argv):
        if index in positions:
            if argument == "-":
                return None
            continue
        if argument.split("=", 1)[0] in ("--options-file", "-optf"):
            return None
        if argument in _OUTPUT_OPTIONS and index + 1 < len(argv):
            destinations.append(argv[index + 1])
            command[index + 1] = private_output
        elif argument.startswith(tuple(option + "=" for option in _OUTPUT_OPTIONS)):
            option, value = argument.split("=", 1)
            destinations.append(value)
            command[index] = f"{option}={private_output}"
    if len(destinations) > 1 or destinations == ["-"]:
        return None
    if not destinations:
        return command + ["-o", private_output], DEFAULT_OUTPUT
    return command, destinations[0]


class _EarlyRun:
    """ptxas on the caller's unchanged arguments, its output file and messages kept in a
    private folder until the fence pass says whether they are the answer."""

    def __init__(self, ptxas: str, command: list[str], output: str, destination: str, private: str):
        self.output = output
        self.destination = destination
        self.streams = (os.path.join(private, "stdout"), os.path.join(private, "stderr"))
        self.process = _Process(ptxas, command, self.streams)
        self.status: int | None = None

    def wait(self) -> int:
        self.status = self.process.wait()
        return self.status

    def stop(self) -> None:
        self.process.stop()

    def deliver(self) -> bool:
        """Copy the output file where the caller asked, as ptxas writes it (through
        links, keeping an existing file's mode). False when that place cannot be
        written: ptxas must then run there itself to say so in its own words."""
        if self.status != 0 or not os.path.exists(self.output):
            return True  # ptxas failed: it leaves the caller's output as it was
        try:
            with open(self.output, "rb") as source, open(self.destination, "wb") as target:
                target.write(source.read())
        except OSError:
            return False
        return True

    def replay(self) -> None:
        """Print ptxas's stdout and stderr, naming the caller's output file."""
        private, public = os.fsencode(self.output), os.fsencode(self.destination)
        for stream, path in zip((sys.stdout, sys.stderr), self.streams):
            with open(path, "rb") as handle:
                data = handle.read().replace(private, public)
            if data:
                stream.flush()
                stream.buffer.write(data)
                stream.flush()


def _start_early(ptxas: str, argv: list[str], inputs: list[int], private: str) -> _EarlyRun | None:
    """Start ptxas on the unchanged input now, its output redirected (None when it cannot be)."""
    output = os.path.join(private, "early", "output")
    redirected = redirect_output(argv, output)
    if redirected is None:
        return None
    os.mkdir(os.path.dirname(output))
    command, destination = redirected
    try:
        return _EarlyRun(ptxas, command, output, destination, private)
    except OSError:
        return None  # ptxas cannot start: the plain run below reports it


class _Process:
    """A child process running `program` with `arguments`, the caller's stdin, and its
    stdout and stderr sent to the files `streams` (or inherited, for None)."""

    def __init__(self, program: str, arguments: list[str], streams=(None, None)):
        environment = _environment()
        if hasattr(os, "posix_spawn"):
            actions = [(os.POSIX_SPAWN_OPEN, fd, path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                       for fd, path in zip((1, 2), streams) if path is not None]
            self.pid = os.posix_spawn(program, [program, *arguments], environment, file_actions=actions)
            self.popen = None
        else:  # pragma: no cover - Windows
            import subprocess

            handles = [open(path, "wb") if path else None for path in streams]
            self.popen = subprocess.Popen([program, *arguments], env=environment, stdout=handles[0],
                                          stderr=handles[1])
            for handle in handles:
                if handle is not None:
                    handle.close()
        self.returncode: int | None = None

    def wait(self) -> int:
        """The exit status (negative: killed by that signal)."""
        if self.returncode is None:
            if self.popen is not None:  # pragma: no cover - Windows
                self.returncode = self.popen.wait()
            else:
                _, status = os.waitpid(self.pid, 0)
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def stop(self) -> None:
        """Kill the process unless it has finished, and reap it."""
        if self.returncode is not None:
            return
        try:
            if self.popen is not None:  # pragma: no cover - Windows
                self.popen.kill()
            else:
                import signal

                os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.wait()


class _Prepared:
    """One input after the fence pass: the fenced copy ptxas reads instead (with the
    `ptxkit.edits.LineMap` from the input's lines to the copy's), or the `_PassFailure`
    that says why the pass could not run on it."""

    __slots__ = ("original", "copy", "lines", "failure", "layouts")

    def __init__(self, original: str, copy: str | None = None, lines=None, failure: _PassFailure | None = None,
                 layouts=None):
        self.original, self.copy, self.lines, self.failure = original, copy, lines, failure
        self.layouts = layouts or {}  # kernel -> the buffer layout an instrumentation pass left


class _PassFailure:
    """Why the fence pass could not run on the input `path`: PTX it cannot read (at
    `line`), or a bug in ptxkit (with its `trace`), told as ptxas tells its errors.

    >>> _PassFailure("k.ptx", "unexpected '%3'", 12).ptxas_message("error")
    "ptxas k.ptx, line 12; error   : the proxy-fence pass cannot read this PTX: unexpected '%3' [ptxkit]"
    >>> print(_PassFailure("k.ptx", "RecursionError: …", trace="Traceback …\\n").ptxas_message("warning"))
    ptxas warning : the proxy-fence pass failed on k.ptx (a bug in ptxkit; please report it): RecursionError: …; assembled without the pass (on error: ptxas) [ptxkit]
    """

    __slots__ = ("path", "message", "line", "trace", "who")

    def __init__(self, path: str, message: str, line: int | None = None, trace: str | None = None,
                 who: str = "the proxy-fence pass"):
        self.path, self.message, self.line, self.trace, self.who = path, message, line, trace, who

    def ptxas_message(self, severity: str) -> str:
        """One line in ptxas's shape, of `severity` ``error`` or ``warning``."""
        if self.trace is None:
            what = f"{self.who} cannot read this PTX: {self.message}"
        elif self.who != "the proxy-fence pass":
            what = f"{self.who} failed on {self.path}: {self.message}"
        else:
            what = f"{self.who} failed on {self.path} (a bug in ptxkit; please report it): {self.message}"
        if severity == "warning":
            what += "; assembled without the pass (on error: ptxas)"
        where = f"ptxas {self.path}, line {self.line}; " if self.line is not None else "ptxas "
        return f"{where}{severity:<8}: {what} [ptxkit]"


#: How messages and the log name PTX read from standard input (``-``).
STDIN = "<stdin>"


def _prepare(path: str, mode: str, private: str, passes=()) -> _Prepared:
    """Fence (or check) one input file, after `passes` when there are some; ptxas reads a
    copy only when the text changed, and always for standard input (``-``: read here
    once, named `STDIN`)."""
    if path == "-":
        data, path = sys.stdin.buffer.read(), STDIN
    else:
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            return _Prepared(path)  # ptxas reports the missing file itself
    prepared = _rewrite(path, data, mode, private, passes) if passes else _fence(path, data, mode, private)
    if path == STDIN and prepared.copy is None:  # ptxas cannot read standard input again: a copy
        from ptxkit.edits import LineMap

        prepared.copy, prepared.lines = _write_copy(path, data, private), LineMap([])
    return prepared


def _fence(path: str, data: bytes, mode: str, private: str) -> _Prepared:
    """Fence (or check) the input `data` of `path`; ptxas reads a copy when fences were added."""
    from ptxkit.fencelog import describe, entry_names, write_entry
    from ptxkit.isa import may_need_fence

    text = data.decode("latin-1")

    def log(fences: list, skipped: str | None) -> None:
        write_entry({"file": _logged_name(path), "kernels": entry_names(text), "mode": mode, "fences": fences,
                     "skipped": skipped})

    if not may_need_fence(text):  # nothing to fence: the pass is not even loaded
        log([], "no async-proxy operation or call")
        return _Prepared(path)
    import ptxkit
    from ptxkit.cfg.fence.fence import FenceOptions, fence_module
    from ptxkit.errors import PtxSyntaxError

    try:
        module = ptxkit.parse(data, path)
        report = fence_module(module, FenceOptions(), rewrite=(mode == "fence"), warn=False)
    except PtxSyntaxError as err:
        failure = _PassFailure(path, f"{err.message} (column {err.column})", err.line)
    except UnicodeDecodeError as err:
        failure = _PassFailure(path, f"not UTF-8 text ({err.reason} at byte {err.start})")
    except Exception as err:  # a bug in ptxkit: the pass did not run, and that must show
        import traceback

        failure = _PassFailure(path, f"{type(err).__name__}: {err}", trace=traceback.format_exc())
    else:
        failure = None
    if failure is not None:
        log([], f"the pass could not run: {failure.message}"
                + (f" (line {failure.line})" if failure.line is not None else ""))
        return _Prepared(path, failure=failure)
    fences = [describe(site) for site in report.fences]
    log(fences, str(report.skipped) if report.skipped else None)
    if mode == "check":
        _warn(path, fences)
        return _Prepared(path)
    if not report.changed:
        return _Prepared(path)
    return _Prepared(path, _write_copy(path, str(module), private), report.lines)


def _rewrite(path: str, data: bytes, mode: str, private: str, passes) -> _Prepared:
    """Run `passes` on one input, then the fence pass as `mode` says; ptxas reads the
    rewritten copy, and a check's warnings point at the input's lines."""
    import ptxkit
    from ptxkit.errors import PtxSyntaxError
    from ptxkit.fencelog import entry_names, pipeline_fences, write_entry
    from ptxkit.rewrite.pipeline import FENCE, PassError, run

    try:
        module = ptxkit.parse(data, path)
        result = run(module, passes, fence=None if mode == "fence" else mode == "check", check=mode == "check")
    except PtxSyntaxError as err:
        return _Prepared(path, failure=_PassFailure(path, f"{err.message} (column {err.column})", err.line,
                                                    who="PTXKIT_PASSES"))
    except UnicodeDecodeError as err:
        return _Prepared(path, failure=_PassFailure(path, f"not UTF-8 text ({err.reason} at byte {err.start})",
                                                    who="PTXKIT_PASSES"))
    except PassError as err:
        import traceback

        trace = "".join(traceback.format_exception(err.cause)) if err.cause is not None else ""
        return _Prepared(path, failure=_PassFailure(path, str(err), trace=trace, who="PTXKIT_PASSES"))
    fences, skipped = pipeline_fences(result)
    write_entry({"file": _logged_name(path), "kernels": entry_names(result.text), "mode": mode,
                 "fences": fences, "skipped": skipped,
                 "passes": [stage.name for stage in result.stages if stage.name != FENCE],
                 "params": result.to_json()["params"]})
    if mode == "check":
        _warn(path, fences)
    if not result.changed:
        return _Prepared(path)
    layouts = {name: layout for stage in result.stages for name, layout in stage.info.get("layouts", {}).items()}
    return _Prepared(path, _write_copy(path, result.text, private), result.lines, layouts=layouts)


def _write_layouts(argv: list[str], layouts: dict) -> None:
    """``OUTPUT.ptxkit.json`` beside ptxas's output: the layouts of the buffers the passes
    made the kernels write (``{"layouts": {kernel: layout}}``, what ``ptxkit trace``
    reads)."""
    import json

    from .output import write_file

    redirected = redirect_output(argv, os.devnull)
    output = redirected[1] if redirected is not None else DEFAULT_OUTPUT
    write_file(output + ".ptxkit.json", json.dumps({"layouts": layouts}, indent=1).encode() + b"\n")


def _warn(path: str, fences: list[dict]) -> None:
    """One warning per missing fence, at the input's line."""
    for fence in fences:
        print(
            f"{path}:{fence['line']}:{fence['column']}: warning: missing {fence['variant']} "
            f"{fence['where']} this statement: {fence['reason']} [ptxkit]",
            file=sys.stderr,
        )


def _write_copy(path: str, text: str | bytes, private: str) -> str:
    """Write the text ptxas reads instead of `path` into the private folder; its path."""
    directory = os.path.join(private, f"input-{len(os.listdir(private))}")  # one per input keeps names apart
    os.mkdir(directory)
    copy = os.path.join(directory, "stdin.ptx" if path == STDIN else os.path.basename(path) or "input.ptx")
    with open(copy, "wb") as handle:
        handle.write(text.encode("utf-8") if isinstance(text, str) else text)
    return copy


def _logged_name(path: str) -> str:
    """The input as the fence log names it: an absolute path, or `STDIN`."""
    return path if path == STDIN else os.path.abspath(path)


def real_ptxas() -> str:
    """The ptxas the wrapper runs: the first candidate that is not ptxkit itself.

    Candidates are checked by their contents, never run: asking a candidate for
    ``--version`` could start this wrapper again.

    >>> import os, shutil, unittest.mock
    >>> binary = shutil.which("true")  # any executable that is not a ptxkit script
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_REAL_PTXAS=binary):
    ...     real_ptxas() == binary
    True
    """
    from ptxkit.toolkit import is_executable, tool_candidates

    explicit = os.environ.get("PTXKIT_REAL_PTXAS")
    if explicit:
        if not is_executable(explicit) or _is_wrapper(explicit):
            raise WrapperError(f"$PTXKIT_REAL_PTXAS ({explicit}) is not NVIDIA's ptxas")
        return explicit
    looked = []
    for _, candidate in tool_candidates("ptxas"):
        if candidate is None or not is_executable(candidate):
            continue
        if _is_wrapper(candidate):
            looked.append(f"{candidate} (ptxkit itself)")
            continue
        return candidate
    where = "; ".join(looked) or "nowhere it looked"
    raise WrapperError(
        f"NVIDIA's ptxas not found (skipped: {where}); set PTXKIT_REAL_PTXAS, $CUDA_HOME, or put the "
        "CUDA toolkit's bin on PATH"
    )


def _is_wrapper(path: str) -> bool:
    """True for this program, or a script that runs ptxkit (a ``ptxas`` shim or the
    console script); NVIDIA's ptxas is a binary (or a shell script that runs one)."""
    real = os.path.realpath(path)
    own = {os.path.realpath(sys.argv[0])} if sys.argv and sys.argv[0] else set()
    if real in own:
        return True
    try:
        with open(real, "rb") as handle:
            head = handle.read(4096)
    except OSError:
        return False
    return head.startswith(b"#!") and b"ptxkit" in head


def _environment() -> dict:
    return dict(os.environ, **{_ACTIVE: "1"})


def _become(ptxas: str, argv: list[str]) -> None:
    """Replace this process by ptxas (the caller's streams, signals and exit status are
    then ptxas's own); returns only when ptxas cannot be started."""
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execve(ptxas, [ptxas, *argv], _environment())
    except OSError:
        pass  # _run reports it


def _run(ptxas: str, command: list[str], quiet_notes=()) -> int:
    """Run ptxas with the caller's stdin, stdout and stderr; returns its exit status.

    `quiet_notes` (the `_PassFailure` of each input assembled without the pass, under
    ``PTXKIT_ON_ERROR=ptxas``) are printed as warnings only when ptxas succeeds: when it
    fails, its own messages say why.
    """
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        status = _Process(ptxas, command).wait()
    except OSError as err:
        print(f"ptxkit-ptxas: error: cannot run {ptxas}: {err.strerror or err}", file=sys.stderr)
        return EXIT_FATAL
    _print_notes(status, quiet_notes)
    return _status(status)


def _print_notes(status: int, notes) -> None:
    if status == 0:
        for note in notes:
            if note.trace:
                sys.stderr.write(note.trace)
            print(note.ptxas_message("warning"), file=sys.stderr)


def _run_mapped(ptxas: str, command: list[str], copies: list[_Prepared], private: str, notes=()) -> int:
    """Run ptxas on fenced copies and print its output as if it had read the originals
    (then, when it succeeds, the warnings `notes`, as `_run` does)."""
    streams = (os.path.join(private, "mapped.stdout"), os.path.join(private, "mapped.stderr"))
    try:
        status = _Process(ptxas, command, streams).wait()
    except OSError as err:
        print(f"ptxkit-ptxas: error: cannot run {ptxas}: {err.strerror or err}", file=sys.stderr)
        return EXIT_FATAL
    for stream, path in zip((sys.stdout, sys.stderr), streams):
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8", "surrogateescape")
        for prepared in copies:
            text = _map_messages(text, prepared.copy, prepared.original, prepared.lines)
        stream.flush()
        stream.buffer.write(text.encode("utf-8", "surrogateescape"))
        stream.flush()
    _print_notes(status, notes)
    return _status(status)


def _map_messages(text: str, copy: str, original: str, lines) -> str:
    """Replace the copy's path by the original's, and its line numbers by the original's.

    >>> from ptxkit.edits import LineMap
    >>> _map_messages("ptxas /t/k.ptx, line 3; error   : x\\n", "/t/k.ptx", "k.ptx", LineMap([(2, 1)]))
    'ptxas k.ptx, line 2; error   : x\\n'
    """
    import re

    def original_line(match: re.Match) -> str:
        return f"{original}, line {lines.source(int(match.group(1)))}"

    text = re.sub(re.escape(copy) + r", line (\d+)", original_line, text)
    return text.replace(copy, original)


def _status(returncode: int) -> int:
    """ptxas's exit status; killed by signal N gives 128 + N, as a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


def console_main() -> None:
    """The ``ptxkit-ptxas`` console script: `main` as a program under the command
    line's collector policy (`ptxkit._gc.collect_less_often`), then the process ends
    without collecting what the fence pass built (`ptxkit._gc.exit_keeping_objects`)."""
    from ptxkit._gc import collect_less_often, exit_keeping_objects

    collect_less_often()
    exit_keeping_objects(main())


if __name__ == "__main__":
    console_main()
