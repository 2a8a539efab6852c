"""``ptxkit ptxas [ptxas arguments]`` (also installed as ``ptxkit-ptxas``): a drop-in ptxas
that runs the proxy-fence pass on its PTX input first.

The arguments go to NVIDIA's ptxas unchanged, except that a PTX input that needs fences is
replaced by a fenced copy in a private temporary directory (the caller's file is never
written). ptxas's messages about that copy are mapped back to the caller's file name and
line numbers, so the output files, stdout, stderr and exit code are ptxas's own.
``--version`` (which Triton parses), ``--help`` and calls without an input file go
straight through.

ptxas-style arguments must stay untouched, so the wrapper is configured through the
environment:

``PTXKIT_FENCE_MODE``
    ``fence`` (default): insert the missing ``fence.proxy.async`` before assembling;
    ``check``: assemble the input as it is and print one warning per missing fence on
    stderr (``file:line:col: warning: … [ptxkit]``); ``off``: run ptxas as it is.
``PTXKIT_FENCE_LOG``
    append one JSON line per PTX input (file, mode, the fences added or missing) to this
    file (``-``: to stderr).
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

import argparse
import dataclasses
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

MODES = ("fence", "check", "off")
#: Exit status of ptxas for every failure; the wrapper's own fatal errors use it too.
EXIT_FATAL = 255
#: Set in the environment of the ptxas the wrapper runs: seeing it means that "ptxas"
#: was this wrapper again (an undetected shim), which must stop instead of recursing.
_ACTIVE = "PTXKIT_PTXAS_ACTIVE"

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
    parser.prefix_chars = "\0"  # nothing is an option of ours, not even -h or --version
    parser.add_argument("ptxas_args", nargs=argparse.REMAINDER, metavar="PTXAS_ARGUMENT")


def run(args) -> int:
    return wrap(args.ptxas_args)


def main(argv: list[str] | None = None) -> int:
    """The ``ptxkit-ptxas`` console script: ``main(["--version"])`` prints ptxas's version.

    A bug in ptxkit prints a traceback and exits 101, as every ptxkit command does.
    """
    from .common import run_command

    arguments = sys.argv[1:] if argv is None else list(argv)
    return run_command(lambda _: wrap(arguments), None)


def wrap(argv: list[str]) -> int:
    """Run the real ptxas with `argv`, fencing (or checking) its PTX inputs first.

    Returns ptxas's exit status (255 when the wrapper itself cannot run ptxas).

    >>> import os, shutil, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXKIT_REAL_PTXAS=shutil.which("false")):
    ...     wrap(["-arch", "sm_90a"])  # no input file: straight through, with "ptxas"'s status
    1
    """
    try:
        if os.environ.get(_ACTIVE):
            raise WrapperError(
                f"the ptxas found ({os.environ[_ACTIVE]}) runs ptxkit-ptxas again; "
                "set PTXKIT_REAL_PTXAS to NVIDIA's ptxas"
            )
        mode = os.environ.get("PTXKIT_FENCE_MODE", "fence").strip().lower() or "fence"
        if mode not in MODES:
            raise WrapperError(f"PTXKIT_FENCE_MODE must be one of {', '.join(MODES)} (got {mode!r})")
        ptxas = real_ptxas()
    except WrapperError as err:
        print(f"ptxkit-ptxas: error: {err}", file=sys.stderr)
        return EXIT_FATAL
    if mode == "off":
        return _run(ptxas, argv)
    with tempfile.TemporaryDirectory(prefix="ptxkit-ptxas-") as private:
        command, copies, notes = list(argv), [], []
        for index in input_files(argv):
            prepared = _prepare(argv[index], mode, private)
            if prepared.note:
                notes.append(prepared.note)
            if prepared.copy:
                command[index] = prepared.copy
                copies.append(prepared)
        if not copies:
            return _run(ptxas, command, quiet_notes=notes)
        return _run_mapped(ptxas, command, copies)


def input_files(argv: list[str]) -> list[int]:
    """Positions in a ptxas argument list that name input files (see the module example).

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


@dataclasses.dataclass(frozen=True)
class _Prepared:
    """One input after the fence pass: the fenced copy ptxas reads instead (with, for each
    of its lines, the original line), or a note saying why the input was left alone."""

    original: str
    copy: str | None = None
    lines: tuple[int, ...] = ()
    note: str | None = None


def _prepare(path: str, mode: str, private: str) -> _Prepared:
    """Fence (or check) one input file; ptxas reads a copy only when fences were added."""
    import ptxkit
    from ptxkit.cfg.fence import FenceOptions, fence_module
    from ptxkit.errors import PtxSyntaxError

    try:
        data = Path(path).read_bytes()
    except OSError:
        return _Prepared(path)  # ptxas reports the missing file itself
    try:
        module = ptxkit.parse(data, path)
        report = fence_module(module, FenceOptions(), rewrite=(mode == "fence"))
    except (PtxSyntaxError, UnicodeDecodeError) as err:
        where = (err.format() if isinstance(err, PtxSyntaxError) else f"{path}: {err}").splitlines()[0]
        _log(path, mode, [], f"not read as PTX: {where}")
        return _Prepared(path, note=f"{where} (assembled without the fence pass)")
    fences = [_describe(fence) for fence in report.fences]
    _log(path, mode, fences, str(report.skipped) if report.skipped else None)
    if mode == "check":
        for fence in fences:
            print(
                f"{path}:{fence['line']}:{fence['column']}: warning: missing {fence['variant']} "
                f"{fence['where']} this statement: {fence['reason']} [ptxkit]",
                file=sys.stderr,
            )
        return _Prepared(path)
    if not report.changed:
        return _Prepared(path)
    directory = tempfile.mkdtemp(dir=private)  # one directory per input keeps names apart
    copy = os.path.join(directory, os.path.basename(path) or "input.ptx")
    fenced = str(module)
    Path(copy).write_text(fenced, encoding="utf-8")
    return _Prepared(path, copy, tuple(line_map(data.decode("utf-8"), fenced)))


def _describe(fence) -> dict:
    """A fence of the report as plain data (for the log and the warnings): it goes
    `where` ("before"/"after") the statement at `line`:`column` of the input."""
    return {
        "line": fence.line,
        "column": fence.column,
        "where": fence.where,
        "variant": fence.variant,
        "placement": fence.placement,
        "reason": fence.reason(),
    }


def _log(path: str, mode: str, fences: list[dict], skipped) -> None:
    target = os.environ.get("PTXKIT_FENCE_LOG")
    if not target:
        return
    line = json.dumps({"file": os.path.abspath(path), "mode": mode, "fences": fences, "skipped": skipped})
    if target == "-":
        print(line, file=sys.stderr)
        return
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def line_map(original: str, edited: str) -> list[int]:
    """For each line of `edited` (0-based), the 1-based line of `original` it comes from.

    The fence pass only inserts lines, so a line that differs from the next original
    line is an inserted one, and maps to the original line that follows it.

    >>> line_map("a\\nb\\nc\\n", "a\\nF\\nb\\nc\\n")
    [1, 2, 2, 3]
    """
    before, after = original.splitlines(), edited.splitlines()
    inserted = len(after) - len(before)
    mapping, i = [], 0
    for line in after:
        if i < len(before) and (line == before[i] or inserted <= 0):
            mapping.append(i + 1)  # the same line (or, with every insertion found, one edited in place)
            i += 1
        else:
            mapping.append(max(1, min(i + 1, len(before))))
            inserted -= 1
    return mapping


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
    from ptxkit.ptxas import is_executable, ptxas_candidates

    explicit = os.environ.get("PTXKIT_REAL_PTXAS")
    if explicit:
        if not is_executable(explicit) or _is_wrapper(explicit):
            raise WrapperError(f"$PTXKIT_REAL_PTXAS ({explicit}) is not NVIDIA's ptxas")
        return explicit
    looked = []
    for _, candidate in ptxas_candidates():
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


def _run(ptxas: str, command: list[str], quiet_notes=()) -> int:
    """Run ptxas with the caller's stdin, stdout and stderr; returns its exit status.

    `quiet_notes` (inputs that were not fenced because ptxkit could not read them) are
    printed only when ptxas succeeds: when it fails, its own messages say why.
    """
    try:
        done = subprocess.run([ptxas, *command], env=_environment())
    except OSError as err:
        print(f"ptxkit-ptxas: error: cannot run {ptxas}: {err.strerror or err}", file=sys.stderr)
        return EXIT_FATAL
    if done.returncode == 0:
        for note in quiet_notes:
            print(f"{note} [ptxkit]", file=sys.stderr)
    return _status(done.returncode)


def _run_mapped(ptxas: str, command: list[str], copies: list[_Prepared]) -> int:
    """Run ptxas on fenced copies and print its output as if it had read the originals."""
    try:
        done = subprocess.run([ptxas, *command], env=_environment(), capture_output=True)
    except OSError as err:
        print(f"ptxkit-ptxas: error: cannot run {ptxas}: {err.strerror or err}", file=sys.stderr)
        return EXIT_FATAL
    for stream, data in ((sys.stdout, done.stdout), (sys.stderr, done.stderr)):
        text = data.decode("utf-8", "surrogateescape")
        for prepared in copies:
            text = _map_messages(text, prepared.copy, prepared.original, prepared.lines)
        stream.flush()
        stream.buffer.write(text.encode("utf-8", "surrogateescape"))
        stream.flush()
    return _status(done.returncode)


def _map_messages(text: str, copy: str, original: str, lines) -> str:
    """Replace the copy's path by the original's, and its line numbers by the original's.

    >>> _map_messages("ptxas /t/k.ptx, line 3; error   : x\\n", "/t/k.ptx", "k.ptx", [1, 2, 2])
    'ptxas k.ptx, line 2; error   : x\\n'
    """
    def original_line(match: re.Match) -> str:
        number = int(match.group(1))
        mapped = lines[number - 1] if 0 < number <= len(lines) else number
        return f"{original}, line {mapped}"

    text = re.sub(re.escape(copy) + r", line (\d+)", original_line, text)
    return text.replace(copy, original)


def _status(returncode: int) -> int:
    """ptxas's exit status; killed by signal N gives 128 + N, as a shell reports it."""
    return 128 - returncode if returncode < 0 else returncode


if __name__ == "__main__":
    sys.exit(main())
