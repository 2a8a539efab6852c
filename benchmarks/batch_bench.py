"""Benchmark: a whole ``ptxkit fence --check`` batch in one process against worker processes.

Workloads:

- two small files (what starting the workers costs, nearly alone);
- ``samples/fence``: 174 small files (0.38 MB);
- a batch of big files that nvcc builds in the run from a wgmma GEMM written here
  (`fence_bench.GEMM_CU` with 48 tile configurations; release, ``-G`` and ``-lineinfo``:
  5.7 MB in all; skipped without nvcc);
- any PTX files given with ``--real`` (one more batch).

Each batch runs as a whole process (bytecode caching on), in interleaved rounds:
``-j 1`` (the anchor: one process), ``-j 2``, and the default (no ``-j``:
`ptxkit.cli.batch.plan_jobs` decides). The table gives the median wall time of each, its
ratio to the anchor, and the processes the default takes for the batch, as asked in this
process before the rounds: with the tasks that keep CPUs busy then ("now"; it may change
from run to run), and on idle CPUs. The 1-minute load average before and after is
printed too: work of other sessions takes the cores the workers would use (on Linux, a
session's processes share its slice of the CPUs).

    python benchmarks/batch_bench.py [--repeat 7] [--real /tmp/rk/*/*.ptx]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

#: the GEMM's tile configurations: stages x K tiles
CONFIGURATIONS = [(stages, ktiles) for stages in range(1, 7) for ktiles in range(1, 9)]
#: nvcc's flags for each big file
BUILDS = {"release": [], "G": ["-G"], "lineinfo": ["-lineinfo"]}


def big_files(workdir: Path) -> list[str]:
    """nvcc's sm_90a PTX of the GEMM with every configuration, once per entry of `BUILDS`
    (none without nvcc)."""
    from fence_bench import GEMM_CU

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return []
    source = workdir / "gemm48.cu"
    kernel = GEMM_CU.split("template __global__ void gemm<1, 4>")[0]
    source.write_text(kernel + "".join(
        f"template __global__ void gemm<{stages}, {ktiles}>(float*, const __half*, const __half*, int, float);\n"
        for stages, ktiles in CONFIGURATIONS))
    files = []
    for name, flags in BUILDS.items():
        out = workdir / f"gemm48_{name}.ptx"
        subprocess.run([nvcc, "-arch=sm_90a", "-ptx", *flags, str(source), "-o", str(out)], check=True)
        files.append(str(out))
    return files


def child_environment() -> dict:
    """This environment with bytecode caching on."""
    return {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}


def wall_time(command: list[str], environment: dict) -> float:
    start = time.perf_counter()
    subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def ptxkit_command() -> list[str]:
    script = Path(sys.executable).parent / "ptxkit"
    return [str(script)] if script.exists() else [sys.executable, "-m", "ptxkit"]


def default_choices(files: list[str]) -> tuple[int, int]:
    """The processes ``ptxkit fence --check`` without ``-j`` takes for `files` here: with
    the tasks that keep CPUs busy now, and on idle CPUs."""
    from ptxkit.cli import batch

    sizes = [os.path.getsize(path) for path in batch.expand_inputs(files)]
    return batch.plan_jobs(sizes, batch.FENCE_COST), batch.plan_jobs(sizes, batch.FENCE_COST, busy=0)


def measure(batches: dict, repeat: int) -> dict:
    """Median seconds of each batch in each mode, keyed (batch, mode), in interleaved rounds."""
    environment = child_environment()
    modes = {"-j 1": ["-j", "1"], "-j 2": ["-j", "2"], "default": []}
    commands = {(name, mode): [*ptxkit_command(), "fence", "--check", *flags, *files]
                for name, files in batches.items() for mode, flags in modes.items()}
    for command in commands.values():  # warm the page cache and the bytecode cache
        wall_time(command, environment)
    times = {key: [] for key in commands}
    for _ in range(repeat):
        for key, command in commands.items():
            times[key].append(wall_time(command, environment))
    return {key: statistics.median(values) for key, values in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="rounds (default 7)")
    parser.add_argument("--real", nargs="+", default=[], metavar="PTX", help="one more batch: these files")
    options = parser.parse_args()
    from ptxkit.cli import batch

    with tempfile.TemporaryDirectory() as scratch:
        fence = sorted(str(path) for path in (ROOT / "samples" / "fence").rglob("*.ptx"))
        batches = {"2 small files": fence[:2], f"samples/fence ({len(fence)} files)": fence}
        built = big_files(Path(scratch))
        if built:
            batches[f"nvcc GEMMs ({len(built)} files)"] = built
        if options.real:
            batches[f"--real ({len(options.real)} files)"] = options.real
        print(f"{batch._cpus()} CPUs; load average {os.getloadavg()[0]:.2f} before, ", end="", flush=True)
        chosen = {name: default_choices(files) for name, files in batches.items()}
        sizes = {name: sum(os.path.getsize(path) for path in files) / 1e6 for name, files in batches.items()}
        medians = measure(batches, options.repeat)
        print(f"{os.getloadavg()[0]:.2f} after; medians of {options.repeat} interleaved rounds")
    print(f"{'batch':28} {'MB':>5} {'-j 1 s':>7} {'-j 2 s':>7} {'x -j 1':>6} {'default s':>9} {'x -j 1':>6} "
          f"{'default -j: now':>15} {'idle':>4}")
    for name in batches:
        serial, pair, default = (medians[(name, mode)] for mode in ("-j 1", "-j 2", "default"))
        now, idle = chosen[name]
        print(f"{name:28} {sizes[name]:5.2f} {serial:7.3f} {pair:7.3f} {pair / serial:6.2f} {default:9.3f} "
              f"{default / serial:6.2f} {now:15d} {idle:4d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
