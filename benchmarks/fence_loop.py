"""Benchmark: the fence pass called again and again in one process, the collector left as
Python sets it, as a library caller or the Triton hook calls it.

For each file: parsed once, fenced once to warm the caches, then `--calls` calls of
``fence_module(module, rewrite=False)`` with the collector off, each after a
``gc.collect()`` outside the timing ("no collector", the anchor, in the same run), and as
many with the collector on and nothing collected between them ("loop"). Medians per call,
and their ratio: what the collector costs a caller that fences again and again. A pass
that leaves reference cycles behind (docs/architecture.md §5) shows here: what it left
waits for the collector, whose full collections then walk it inside later calls. Run it on
the compiled tree as on the pure one (``PYTHONPATH=<unpacked wheel> python -P
benchmarks/fence_loop.py ...``).

    python benchmarks/fence_loop.py KERNELS... [--calls 7]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

from ptxkit import parse
from ptxkit.cfg.fence.fence import fence_module


def median_call(module, calls: int, collector: bool) -> float:
    """The median seconds of `calls` calls of the pass on `module`: with the `collector` on
    and nothing collected between them, or off, each call after a ``gc.collect()``
    outside the timing."""
    times = []
    for _ in range(calls):
        if not collector:
            gc.collect()
            gc.disable()
        start = time.perf_counter()
        fence_module(module, rewrite=False)
        times.append(time.perf_counter() - start)
        gc.enable()
    return statistics.median(times)


def row(name: str, off: float, loop: float) -> str:
    """One line of the table, times in ms.

    >>> row("k.ptx", 0.2, 0.3)
    'k.ptx                                           200.0     300.0   1.50'
    """
    return f"{name[:40]:40} {off * 1e3:12.1f} {loop * 1e3:9.1f} {loop / off:6.2f}"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+")
    parser.add_argument("--calls", type=int, default=7, help="calls timed per file and way (default 7)")
    args = parser.parse_args(argv)
    import ptxkit.cfg.values.registers as core

    print(f"fence_loop: median ms per call; the core from {Path(core.__file__).name}")
    print(f"{'file':40} {'no collector':>12} {'loop ms':>9} {'ratio':>6}")
    for path in args.files:
        module = parse(Path(path).read_text(), path)
        fence_module(module, rewrite=False)  # imports and caches
        off = median_call(module, args.calls, collector=False)
        loop = median_call(module, args.calls, collector=True)
        print(row(Path(path).name, off, loop))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
