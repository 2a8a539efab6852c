"""Assemble PTX into a cubin with NVIDIA's ``ptxas``.

>>> cubin = assemble(".version 8.0\\n.target sm_80\\n.address_size 64\\n"
...                  ".visible .entry k()\\n{\\n\\tret;\\n}\\n", arch="sm_90a")  # doctest: +SKIP
>>> cubin.arch, sorted(cubin.resources)                                       # doctest: +SKIP
('sm_90a', ['k'])

``ptxas`` is looked up in this order: ``$PTXAS``, ``$CUDA_HOME/bin``, ``$CUDA_PATH/bin``,
``PATH``, then ``cuda.pathfinder`` (which finds the ``nvidia-cuda-nvcc`` wheel); cuobjdump,
which shows the SASS of a cubin, the same way (`find_cuobjdump`). ptxas runs
with an argument list (no shell), in a private temporary directory, with a timeout, and
always with ``-v`` so that every cubin carries its per-kernel resource usage. Its messages
(``ptxas input.ptx, line 12; error   : …``) are mapped back to the caller's file name.
Results are cached on disk (see `ptxkit.cubin_cache`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

from .toolkit import find_tool, tool_candidates

#: The name the input has inside ptxas's private directory (mapped back in messages).
_INPUT = "input.ptx"
_OUTPUT = "output.cubin"
_HOW_TO_GET = (
    "install the CUDA toolkit, or `pip install \"ptxkit[toolkit]\"` (the nvidia-cuda-nvcc wheel), "
    "or set $PTXAS to a ptxas binary"
)
_HOW_TO_GET_CUOBJDUMP = (
    "install the CUDA toolkit, or `pip install \"ptxkit[toolkit]\"` (the nvidia-cuda-cuobjdump wheel), "
    "or set $CUOBJDUMP to a cuobjdump binary"
)
_ARCH = re.compile(r"sm_[1-9]\d[0-9]?[af]?")
_VERSION = re.compile(r"release (\d+\.\d+), V(\d+(?:\.\d+)*)")
_MESSAGE = re.compile(
    r"ptxas (?:(?P<file>.+?), line (?P<line>\d+); )?(?P<severity>[a-z]+)\s*: ?(?P<message>.*)"
)
_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_SHARED = re.compile(r"(\d+) bytes smem")


class PtxasNotFound(FileNotFoundError):
    """No usable ptxas binary; the message says where ptxkit looked and how to get one.

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, PTXAS="/nonexistent/ptxas"):
    ...     find_ptxas()
    Traceback (most recent call last):
    ptxkit.ptxas.PtxasNotFound: $PTXAS is '/nonexistent/ptxas', which is not an executable file; install ...
    """


@dataclasses.dataclass(frozen=True)
class PtxasInfo:
    """A ptxas binary: its path, its release (``"13.0"``) and full version (``"13.0.88"``).

    >>> find_ptxas()  # doctest: +SKIP
    PtxasInfo(path='/usr/local/cuda/bin/ptxas', version='13.0', full_version='13.0.88')
    >>> PtxasInfo("/usr/local/cuda/bin/ptxas", "13.0", "13.0.88").version
    '13.0'
    """

    path: str
    version: str
    full_version: str


@dataclasses.dataclass(frozen=True)
class Diagnostic:
    """One ptxas message, pointing at the caller's file (`line` is None when ptxas gives none).

    >>> print(Diagnostic("k.ptx", 12, "error", "Unknown symbol 'x'").format())
    k.ptx:12:1: error: Unknown symbol 'x' [ptxas]
    """

    filename: str
    line: int | None
    severity: str  # "error" (ptxas "error" and "fatal") or "warning"
    message: str

    def format(self) -> str:
        """``file:line:1: severity: message [ptxas]`` (ptxas reports no column)."""
        where = self.filename if self.line is None else f"{self.filename}:{self.line}:1"
        return f"{where}: {self.severity}: {self.message} [ptxas]"


class PtxasError(RuntimeError):
    """ptxas rejected the input; `diagnostics` holds every message it printed.

    ``str(err)`` is the diagnostics, one per line, in ``file:line:1: error: …`` form.

    >>> log = "ptxas input.ptx, line 9; error   : Unknown symbol 'x'\\nptxas fatal   : Ptx assembly aborted\\n"
    >>> print(PtxasError(parse_diagnostics(log, "k.ptx"), log, 255))
    k.ptx:9:1: error: Unknown symbol 'x' [ptxas]
    k.ptx: error: Ptx assembly aborted [ptxas]
    """

    def __init__(self, diagnostics: list[Diagnostic], log: str = "", returncode: int | None = None):
        self.diagnostics = list(diagnostics)
        self.log = log
        self.returncode = returncode
        super().__init__("\n".join(d.format() for d in self.diagnostics))


@dataclasses.dataclass(frozen=True)
class ResourceUsage:
    """What ``ptxas -v`` reports for one kernel (bytes, except `registers`).

    >>> use = parse_resources("ptxas info    : Compiling entry function 'k' for 'sm_90a'\\n"
    ...                       "ptxas info    : Used 40 registers, 4096 bytes smem\\n")["k"]
    >>> use.registers, use.shared_bytes, use.spill_stores
    (40, 4096, 0)
    """

    registers: int = 0
    shared_bytes: int = 0
    stack_frame: int = 0
    spill_stores: int = 0
    spill_loads: int = 0


@dataclasses.dataclass(frozen=True)
class Cubin:
    """An assembled cubin: its bytes, target, the ptxas release that built it, and per-kernel
    resource usage. `diagnostics` holds ptxas's warnings; `log` is its ``-v`` output with the
    caller's file name; `cached` tells whether it came from the cubin cache; `layouts` maps
    each instrumented kernel to its buffer's `ptxkit.instrument.layout.Layout` (read from
    the PTX's ``// ptxkit-instrument:`` lines), so that `ptxkit.runtime` can allocate and
    decode its buffer.

    `assemble` makes them; one made by hand:

    >>> cubin = Cubin(b"\\x7fELF...", "sm_90a", "13.0", {"empty": ResourceUsage(registers=2)})
    >>> cubin.arch, cubin.resources["empty"].registers, cubin.cached
    ('sm_90a', 2, False)
    """

    data: bytes = dataclasses.field(repr=False)
    arch: str
    ptxas_version: str
    resources: dict[str, ResourceUsage]
    diagnostics: tuple[Diagnostic, ...] = ()
    log: str = dataclasses.field(default="", repr=False)
    cached: bool = False
    layouts: dict = dataclasses.field(default_factory=dict, repr=False)


def find_ptxas() -> PtxasInfo:
    """Find ptxas and read its version; raises `PtxasNotFound` saying where it looked.

    >>> find_ptxas().version  # doctest: +SKIP
    '13.0'
    """
    try:
        return _describe(find_tool("ptxas", _HOW_TO_GET))
    except FileNotFoundError as err:
        raise PtxasNotFound(str(err)) from None


def find_cuobjdump() -> str:
    """The path of cuobjdump, found the way ptxas is (``$CUOBJDUMP`` first); raises
    FileNotFoundError saying where it looked and how to get it.

    >>> find_cuobjdump()  # doctest: +SKIP
    '/usr/local/cuda/bin/cuobjdump'
    """
    return find_tool("cuobjdump", _HOW_TO_GET_CUOBJDUMP)


def ptxas_candidates():
    """Every place ptxkit looks for ptxas, in order, as ``(where, path)`` (see
    `ptxkit.toolkit.tool_candidates`).

    >>> import os, unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, {"PTXAS": "/opt/ptxas", "PATH": "/a:/b"}):
    ...     [place for place in ptxas_candidates()][:3]
    [('$PTXAS', '/opt/ptxas'), ('PATH', '/a/ptxas'), ('PATH', '/b/ptxas')]
    """
    return tool_candidates("ptxas")


def check_arch(arch: str) -> str:
    """Return `arch` if it names a real GPU target (``sm_90a``, ``sm_100f``…), else ValueError.

    >>> check_arch("sm_90a")
    'sm_90a'
    """
    if not isinstance(arch, str) or not _ARCH.fullmatch(arch):
        raise ValueError(f"arch must look like sm_90a or sm_80 (got {arch!r})")
    return arch


def assemble(
    ptx,
    arch: str = "sm_90a",
    opt_level: int | None = None,
    options=(),
    verbose: bool = False,
    *,
    filename: str | None = None,
    cache: bool = True,
    timeout: float = 600.0,
) -> Cubin:
    """Assemble PTX (text, UTF-8 bytes or a parsed `Module`) into a `Cubin`.

    `opt_level` None leaves the choice to ptxas: ``-O3``, except for debug PTX
    (``.target sm_90a, debug``), which ptxas refuses to optimise. `options` are extra
    ptxas arguments (a sequence of strings). Errors raise `PtxasError`
    with diagnostics at `filename` (default: the module's file name, or ``<input>``);
    `verbose` echoes ptxas's ``-v`` report to stderr. With `cache` (the default) the
    result is stored in, and taken from, the cubin cache.

    >>> cubin = assemble(open("samples/toolchain/vector_add.ptx").read())  # doctest: +SKIP
    >>> cubin.resources["vector_add"].registers > 0                        # doctest: +SKIP
    True
    """
    text, name = _source_of(ptx, filename)
    arch = check_arch(arch)
    if opt_level not in (None, 0, 1, 2, 3):
        raise ValueError(f"opt_level must be None, 0, 1, 2 or 3 (got {opt_level!r})")
    if isinstance(options, (str, bytes)) or not all(isinstance(o, str) for o in options):
        raise TypeError("options must be a sequence of strings, e.g. ('--maxrregcount=64',)")
    options = tuple(options)
    if any(o == "-o" or o.startswith("--output-file") for o in options):
        raise ValueError("options must not redirect the output (-o/--output-file): write Cubin.data instead")
    info = find_ptxas()
    level = () if opt_level is None else (f"-O{opt_level}",)
    arguments = ("-arch", arch, *level, "-v", *options)

    store = key = None
    if cache:
        from .cubin_cache import cache_key, default_cache

        store = default_cache()
        if store is not None:
            key = cache_key(text, arch, str(opt_level), *options, info.full_version)
    hit = store.get(key) if store is not None else None
    if hit is not None:
        data, log = hit
    else:
        data, log = run_ptxas(text, arguments, filename=name, timeout=timeout, ptxas=info)
        if store is not None:
            store.put(key, data, log)

    diagnostics = tuple(d for d in parse_diagnostics(log, name) if d.severity == "warning")
    rendered = render_log(log, name)
    if verbose and rendered:
        sys.stderr.write(rendered)
    layouts = {}
    if b"// ptxkit-instrument: " in text:  # an instrumented kernel (ptxkit.instrument)
        from .instrument.layout import read_layouts

        layouts = read_layouts(text.decode("utf-8", "replace"))
    return Cubin(data, arch, info.version, parse_resources(log), diagnostics, rendered, hit is not None, layouts)


def run_ptxas(ptx: bytes, arguments, *, filename: str, timeout: float, ptxas: PtxasInfo) -> tuple[bytes, str]:
    """Run ptxas on `ptx` in a private directory; returns (cubin bytes, ptxas's raw log).

    Raises `PtxasError` (diagnostics at `filename`) when ptxas fails or times out.

    >>> import shutil
    >>> failing = PtxasInfo(shutil.which("false"), "13.0", "13.0.88")  # a "ptxas" that always fails
    >>> run_ptxas(b".version 8.0\\n", ["-arch", "sm_90a"], filename="k.ptx", timeout=60, ptxas=failing)
    Traceback (most recent call last):
    ptxkit.ptxas.PtxasError: k.ptx: error: ptxas exited with status 1: no message [ptxas]
    """
    with tempfile.TemporaryDirectory(prefix="ptxkit-ptxas-") as directory:
        Path(directory, _INPUT).write_bytes(ptx)
        command = [ptxas.path, *arguments, _INPUT, "-o", _OUTPUT]
        try:
            done = subprocess.run(
                command, cwd=directory, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            message = f"ptxas did not finish within {timeout:g} s"
            raise PtxasError([Diagnostic(filename, None, "error", message)]) from None
        log = (done.stdout + done.stderr).decode("utf-8", "replace")
        if done.returncode != 0:
            diagnostics = parse_diagnostics(log, filename)
            if not any(d.severity == "error" for d in diagnostics):
                detail = log.strip() or "no message"
                diagnostics.append(
                    Diagnostic(filename, None, "error", f"ptxas exited with status {done.returncode}: {detail}")
                )
            raise PtxasError(diagnostics, log, done.returncode)
        return Path(directory, _OUTPUT).read_bytes(), log


def parse_diagnostics(log: str, filename: str) -> list[Diagnostic]:
    """The errors and warnings in a ptxas log, pointed at `filename`.

    >>> parse_diagnostics("ptxas input.ptx, line 9; error   : Unknown symbol 'x'\\n", "k.ptx")
    [Diagnostic(filename='k.ptx', line=9, severity='error', message="Unknown symbol 'x'")]
    >>> parse_diagnostics("ptxas input.ptx, line 2; fatal   : Missing .version directive at start of file "
    ...                   "'input.ptx'\\n", "k.ptx")[0].message
    "Missing .version directive at start of file 'k.ptx'"
    """
    found = []
    for line in log.splitlines():
        match = _MESSAGE.fullmatch(line.rstrip())
        if match is None or match["severity"] not in ("error", "fatal", "warning"):
            continue
        severity = "warning" if match["severity"] == "warning" else "error"
        where = match["file"]
        shown = filename if where is None or where == _INPUT else where
        number = int(match["line"]) if match["line"] else None
        message = match["message"].strip().replace(f"'{_INPUT}'", f"'{filename}'")  # ours is private
        found.append(Diagnostic(shown, number, severity, message))
    return found


def render_log(log: str, filename: str) -> str:
    """ptxas's log for people: errors and warnings as ``file:line:1: …``, the rest as is.

    >>> print(render_log("ptxas info    : 0 bytes gmem\\nptxas input.ptx, line 9; warning : x\\n", "k.ptx"), end="")
    ptxas info    : 0 bytes gmem
    k.ptx:9:1: warning: x [ptxas]
    """
    out = []
    for line in log.splitlines():
        diagnostics = parse_diagnostics(line, filename)
        out.append(diagnostics[0].format() if diagnostics else line)
    return "".join(line + "\n" for line in out)


def parse_resources(log: str) -> dict[str, ResourceUsage]:
    """Per-kernel resource usage from a ``ptxas -v`` log.

    >>> log = ("ptxas info    : Compiling entry function 'k' for 'sm_90a'\\n"
    ...        "ptxas info    : Function properties for k\\n"
    ...        "    64 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\\n"
    ...        "ptxas info    : Used 12 registers, used 0 barriers, 1024 bytes smem\\n")
    >>> parse_resources(log)["k"]
    ResourceUsage(registers=12, shared_bytes=1024, stack_frame=64, spill_stores=8, spill_loads=4)
    """
    fields: dict[str, dict[str, int]] = {}
    entry = properties_of = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            entry = m.group(1)
            fields.setdefault(entry, {})
        elif m := _PROPERTIES.search(line):
            properties_of = m.group(1)
        elif (m := _FRAME.search(line)) and properties_of in fields:
            stack, stores, loads = map(int, m.groups())
            fields[properties_of].update(stack_frame=stack, spill_stores=stores, spill_loads=loads)
        elif (m := _REGISTERS.search(line)) and entry is not None:
            shared = _SHARED.search(line)
            fields[entry].update(registers=int(m.group(1)), shared_bytes=int(shared.group(1)) if shared else 0)
    return {name: ResourceUsage(**values) for name, values in fields.items()}


def kernel_names(cubin: bytes) -> list[str]:
    """The kernels (entry functions) a cubin defines, read from its ELF symbol table.

    >>> kernel_names(assemble(open("samples/toolchain/empty.ptx").read()).data)  # doctest: +SKIP
    ['empty']
    """
    if cubin[:4] != b"\x7fELF" or cubin[4:6] != b"\x02\x01":
        raise ValueError("not a 64-bit little-endian ELF file")
    try:
        (section_offset,) = struct.unpack_from("<Q", cubin, 0x28)
        entry_size, count = struct.unpack_from("<HH", cubin, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", cubin, section_offset + i * entry_size) for i in range(count)]
        names = []
        for _, kind, _, _, offset, size, link, _, _, symbol_size in sections:
            if kind != 2 or not symbol_size:  # SHT_SYMTAB
                continue
            strings = sections[link][4]
            for start in range(offset, offset + size, symbol_size):
                name, info, other = struct.unpack_from("<IBB", cubin, start)
                if info & 0xF == 2 and other & 0x10:  # STT_FUNC marked as a CUDA entry
                    end = cubin.index(b"\0", strings + name)
                    names.append(cubin[strings + name : end].decode("utf-8"))
    except (struct.error, IndexError, ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"truncated or damaged ELF file ({err})") from None
    return sorted(names)


def _source_of(ptx, filename: str | None) -> tuple[bytes, str]:
    """(UTF-8 bytes, display name) of a str, bytes or `Module` input."""
    if isinstance(ptx, str):
        return ptx.encode("utf-8"), filename or "<input>"
    if isinstance(ptx, (bytes, bytearray, memoryview)):
        return bytes(ptx), filename or "<input>"
    from .syntax import Module

    if isinstance(ptx, Module):
        return str(ptx).encode("utf-8"), filename or ptx.filename
    raise TypeError(f"expected PTX text, bytes or a parsed Module (got {type(ptx).__name__})")


def _describe(path: str) -> PtxasInfo:
    path = os.path.abspath(path)
    stat = os.stat(path)
    return _version_of(path, stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=16)
def _version_of(path: str, mtime_ns: int, size: int) -> PtxasInfo:
    """Run ``ptxas --version`` once per binary (keyed on its path, mtime and size)."""
    try:
        done = subprocess.run(
            [path, "--version"], stdin=subprocess.DEVNULL, capture_output=True, timeout=60
        )
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PtxasNotFound(f"{path} does not run as ptxas ({err}); {_HOW_TO_GET}") from None
    match = _VERSION.search(done.stdout.decode("utf-8", "replace"))
    if done.returncode != 0 or match is None:
        raise PtxasNotFound(f"{path} did not report a ptxas version; {_HOW_TO_GET}")
    return PtxasInfo(path, match.group(1), match.group(2))
