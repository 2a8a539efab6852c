"""Benchmark: ``ptxkit fence --diff`` next to ``ptxkit fence --check`` on a multi-megabyte ``-G`` build.

The workload is nvcc's ``-G`` PTX for the wgmma GEMM of ``fence_bench.py``, instantiated
for many (stages, k-tiles) pairs (200 kernels, about 5.4 MB; nvcc builds it in the run,
so the benchmark needs nvcc): once as nvcc writes it, where the pass plans a fence in
every kernel (a diff of 200 hunks), and once fenced, where it plans nothing (an empty
diff). Each command runs as its own process with bytecode caching on, interleaved; the
table shows the best wall time and the best CPU time (user + system, steadier on a busy
machine) of each, and the ratio ``--diff`` / ``--check`` (the anchor): the goal is 1.

    python benchmarks/fence_diff_bench.py [--repeat 2] [--baseline PYTHON] [--limit 300]

``--baseline PYTHON`` also times ``PYTHON -m ptxkit`` (another installation, e.g. the code
before a change) in the same rounds. A run is stopped after ``--limit`` seconds and shown
as more than that.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from fence_bench import GEMM_CU


def many_gemms_g(workdir: Path, stages: int, ktiles: int) -> Path:
    """nvcc -G PTX of the GEMM instantiated for every (stages, k-tiles) up to the bounds."""
    head = GEMM_CU[: GEMM_CU.index("template __global__ void gemm<")]
    instances = "".join(f"template __global__ void gemm<{s}, {k}>(float*, const __half*, const __half*, int, float);\n"
                        for s in range(1, stages + 1) for k in range(1, ktiles + 1))
    source = workdir / "gemms.cu"
    source.write_text(head + instances)
    out = workdir / "gemmsG.ptx"
    subprocess.run(["nvcc", "-arch=sm_90a", "-ptx", "-G", str(source), "-o", str(out)], check=True)
    return out


def run_timed(command: list[str], environment: dict, limit: float, folder: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child) of one run of `command`; both infinite when
    it runs past `limit` seconds (it is stopped)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    try:
        done = subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              timeout=limit, cwd=folder)
    except subprocess.TimeoutExpired:
        return float("inf"), float("inf")
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr.decode()}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def shown(value: float, bound: float, width: int) -> str:
    """`value`, or ``>bound`` for a run that was stopped."""
    return f"{value:{width}.2f}" if value != float("inf") else f"{f'>{bound:.3g}':>{width}}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=2, help="runs of each command (best is kept)")
    parser.add_argument("--stages", type=int, default=8, help="instantiate stages 1..N")
    parser.add_argument("--ktiles", type=int, default=25, help="instantiate k-tiles 1..N")
    parser.add_argument("--baseline", metavar="PYTHON", help="also time PYTHON -m ptxkit in the same rounds")
    parser.add_argument("--limit", type=float, default=300.0, help="stop a run after this many seconds")
    args = parser.parse_args(argv)
    if shutil.which("nvcc") is None:
        print("fence_diff_bench: needs nvcc on PATH", file=sys.stderr)
        return 2
    environment = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    installations = {"this": [sys.executable, "-m", "ptxkit"]}
    if args.baseline:
        installations["baseline"] = [args.baseline, "-m", "ptxkit"]
    with tempfile.TemporaryDirectory(prefix="ptxkit-diff-bench-") as scratch:
        workdir = Path(scratch)
        unfenced = many_gemms_g(workdir, args.stages, args.ktiles)
        fenced = workdir / "gemmsG.fenced.ptx"
        subprocess.run(installations["this"] + ["fence", str(unfenced), "-o", str(fenced)], env=environment,
                       check=True, cwd=workdir)
        workloads = {f"-G GEMMs: {args.stages * args.ktiles} fences planned": unfenced,
                     "the same, fenced: none planned": fenced}
        best: dict[tuple, list[float]] = {}
        for _ in range(args.repeat):
            for label, path in workloads.items():
                for who, command in installations.items():
                    for mode in ("--check", "--diff"):
                        wall, cpu = run_timed(command + ["fence", mode, str(path)], environment, args.limit,
                                              workdir)  # not the checkout: -m would import its code
                        key = (label, who, mode)
                        old = best.get(key, [float("inf"), float("inf")])
                        best[key] = [min(old[0], wall), min(old[1], cpu)]
        size = unfenced.stat().st_size / 1e6
    print(f"ptxkit fence --diff against --check (the anchor), whole processes, {size:.1f} MB of nvcc -G PTX; "
          f"best of {args.repeat}")
    head = f"{'workload':<34} {'code':<9} {'--check s':>10} {'--diff s':>9} {'ratio':>6} {'CPU --check':>12} " \
           f"{'CPU --diff':>11} {'ratio':>6}"
    print(head)
    print("-" * len(head))
    for label in workloads:
        for who in installations:
            (check_wall, check_cpu), (diff_wall, diff_cpu) = best[(label, who, "--check")], best[(label, who, "--diff")]
            print(f"{label:<34} {who:<9} {shown(check_wall, args.limit, 10)} {shown(diff_wall, args.limit, 9)} "
                  f"{shown(diff_wall / check_wall, args.limit / check_wall, 6)} {shown(check_cpu, args.limit, 12)} "
                  f"{shown(diff_cpu, args.limit, 11)} {shown(diff_cpu / check_cpu, args.limit / check_cpu, 6)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
