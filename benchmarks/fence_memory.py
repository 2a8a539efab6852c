"""Benchmark: the fence pass's memory, against the parsed module it analyses (issue 35's
goal: peak resident memory at most twice what the parsed module takes).

Each file is checked in a fresh process (``fence_module(..., rewrite=False)``, what
``ptxkit fence --check`` runs), which reports, above the interpreter with the pass
imported (its resident memory before parsing):

- ``parsed``: what the parsed module takes, every instruction's operands read once
  (the pass reads them all) — the anchor;
- ``peak``: the process's peak resident memory while it parses and checks the file;
- ``peak/parsed``: the ratio the goal bounds by 2.

Then all the files are checked one after the other in one process, each module released
when its check is done (`Module.release`, as the command line does), the collector left
as Python sets it (no ``gc`` call anywhere in the run): its peak against the largest
single-file peak shows whether a batch's memory stays bounded by its largest file.

Peaks come from Linux's ``VmHWM`` (``/proc/self/status``), reset after the imports
through ``/proc/self/clear_refs``; elsewhere the benchmark says it cannot measure and
exits 0. The package's bytecode is compiled first, as an installed package has it: an
interpreter that compiles the sources as it imports them frees that work's memory to
its allocator, which the parse then reuses, and every figure came out 0.3-2.6 MB lower
than with the bytecode there (CUTLASS 67: 9.3 MB peak against 11.9).

    python benchmarks/fence_memory.py KERNELS...
"""

from __future__ import annotations

import argparse
import compileall
import json
import subprocess
import sys
from pathlib import Path

STATUS = Path("/proc/self/status")


def status_bytes(field: str, status: str | None = None) -> int:
    """A memory field of ``/proc/self/status`` (or of `status`, its text) in bytes.

    >>> status_bytes("VmHWM", "Name:\\tpython3\\nVmHWM:\\t   2048 kB\\nVmRSS:\\t 1024 kB\\n")
    2097152
    """
    text = STATUS.read_text() if status is None else status
    for line in text.splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(field)


def reset_peak() -> None:
    """Make ``VmHWM`` start again from the current resident memory."""
    Path("/proc/self/clear_refs").write_text("5")


def measure(paths: list[str]) -> dict[str, int]:
    """Parse and check `paths` in this process, one after the other: the resident memory
    above the starting point that the largest parsed module took (``parsed``, measured
    on a file's own run only when it is the only one) and the peak over the whole run
    (``peak``)."""
    from ptxkit import parse
    from ptxkit.cfg.fence.fence import FenceOptions, fence_module

    reset_peak()
    base = status_bytes("VmRSS")
    parsed = 0
    for path in paths:
        module = parse(Path(path).read_text(), path)
        for function in module.functions:
            for instruction in function.instructions():
                instruction.operands  # noqa: B018  # what the pass reads of every instruction
        parsed = max(parsed, status_bytes("VmRSS") - base)
        fence_module(module, FenceOptions(), rewrite=False)
        module.release()
        del module
    return {"parsed": parsed, "peak": status_bytes("VmHWM") - base}


def compile_bytecode() -> None:
    """Write the bytecode of the package's modules where Python looks for it, so that no
    measured interpreter compiles a source (`PYTHONDONTWRITEBYTECODE` or not)."""
    import ptxkit.cfg

    for package in (ptxkit, ptxkit.cfg):
        compileall.compile_dir(Path(package.__file__).parent, quiet=1)


def run_child(paths: list[str]) -> dict[str, int]:
    """`measure` in a fresh interpreter."""
    done = subprocess.run([sys.executable, __file__, "--child", *paths], capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def row(name: str, parsed: int, peak: int) -> str:
    """One line of the table, sizes in MB.

    >>> row("k.ptx", 4 << 20, 9 << 20)
    'k.ptx                                         4.2       9.4        2.25'
    """
    return f"{name[:40]:40} {parsed / 1e6:8.1f} {peak / 1e6:9.1f} {peak / parsed:11.2f}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="+")
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(measure(args.files)))
        return 0
    if not STATUS.exists():
        print("fence_memory: skipped (needs Linux's /proc/self/status)")
        return 0
    compile_bytecode()
    print(f"{'file':40} {'parsed MB':>8} {'peak MB':>9} {'peak/parsed':>11}")
    largest = 0
    for path in args.files:
        found = run_child([path])
        largest = max(largest, found["peak"])
        print(row(Path(path).name, found["parsed"], found["peak"]))
    batch = run_child(args.files)
    print(f"one process, {len(args.files)} files: peak {batch['peak'] / 1e6:.1f} MB, "
          f"{batch['peak'] / largest:.2f}x the largest single-file peak")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
