"""Whole-process cost of ptxkit in a build, next to ptxas and plain Python.

For each Triton-sized kernel (``samples/triton/*.ptx``, 20-45 KB of PTX that Triton 3.6
generates from the kernels in ``samples/triton/generate.py``) it runs, interleaved, as
separate processes with bytecode caching on:

- ``ptxas -arch=sm_90a FILE -o OUT`` (the anchor for the wrapper);
- ``ptxkit-ptxas -arch=sm_90a FILE -o OUT`` (the drop-in ptxas, fence mode);
- ``ptxkit fence --check FILE``;
- ``python3 -c pass`` with the same interpreter (the floor no Python program beats).

and prints the median wall time of each, the ratio wrapper/ptxas, what the wrapper adds
to ptxas and both ptxkit costs in units of ``python3 -c pass``. The goals (issue 10): the
check within 1.5x ``python3 -c pass``; the wrapper adding at most 1.2x ``python3 -c pass``
to ptxas (medians over the kernels).

    python benchmarks/startup_bench.py [--repeat 15] [--baseline PYTHON] [FILE.ptx ...]

``--baseline PYTHON`` also times another installation of ptxkit (the ``ptxkit-ptxas`` and
``ptxkit`` scripts beside that interpreter, and its ``-c pass``) in the same rounds, and
prints its table too: before and after, measured together.
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

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "triton"


def console_script(python: str, name: str) -> list[str]:
    """The installed console script `name` of `python`'s environment, or an equivalent
    ``python -m`` command when it is not installed as a script."""
    script = Path(python).parent / name
    if script.exists():
        return [str(script)]
    module = {"ptxkit": "ptxkit", "ptxkit-ptxas": "ptxkit.cli.ptxas_cmd"}[name]
    return [python, "-m", module]


def child_environment() -> dict:
    """This environment with bytecode caching on and no fence log (what a build sees)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PTXKIT_FENCE_LOG")}
    environment["PTXKIT_FENCE_MODE"] = "fence"
    return environment


def wall_time(command: list[str], environment: dict) -> float:
    """Seconds one run of `command` takes, start to exit (its output discarded)."""
    start = time.perf_counter()
    subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def measure(path: Path, ptxas: str, pythons: list[str], repeat: int, scratch: str) -> dict:
    """Median seconds of the commands on `path` for each interpreter in `pythons`, keyed
    (name, python), run in interleaved rounds."""
    environment = child_environment()
    output = os.path.join(scratch, "out.cubin")
    commands = {("ptxas", None): [ptxas, "-arch=sm_90a", str(path), "-o", output]}
    for python in pythons:
        commands.update({
            ("wrapper", python): [*console_script(python, "ptxkit-ptxas"), "-arch=sm_90a", str(path), "-o", output],
            ("check", python): [*console_script(python, "ptxkit"), "fence", "--check", str(path)],
            ("pass", python): [python, "-c", "pass"],
        })
    for command in commands.values():  # warm the page cache and the bytecode cache
        wall_time(command, environment)
    times = {name: [] for name in commands}
    for _ in range(repeat):
        for name, command in commands.items():
            times[name].append(wall_time(command, environment))
    return {name: statistics.median(values) for name, values in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="interleaved rounds per file (default 15)")
    parser.add_argument("--baseline", metavar="PYTHON", help="also time the ptxkit installed for this interpreter")
    parser.add_argument("files", nargs="*", type=Path, help="PTX files (default: samples/triton/*.ptx)")
    args = parser.parse_args(argv)
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        print("startup_bench: skipped (no ptxas on PATH)")
        return 0
    files = args.files or sorted(SAMPLES.glob("*.ptx"))
    pythons = [sys.executable] + ([args.baseline] if args.baseline else [])
    with tempfile.TemporaryDirectory() as scratch:
        times = {path: measure(path, ptxas, pythons, args.repeat, scratch) for path in files}
    for python in pythons:
        print(f"{python} ({'baseline' if python == args.baseline else 'this installation'}), {ptxas}; "
              f"median of {args.repeat} interleaved rounds; bytecode caching on\n")
        print_table({path: {name: t[name, python] for name in ("wrapper", "check", "pass")} | {"ptxas": t["ptxas", None]}
                     for path, t in times.items()})
    return 0


def print_table(times: dict) -> None:
    """One row per file, then the medians against the goals."""
    header = (f"{'file':<28}{'KB':>5}{'ptxas s':>9}{'ptxkit-ptxas s':>16}{'ratio':>7}{'added s':>9}"
              f"{'fence --check s':>17}{'python3 -c pass s':>19}{'added/pass':>12}{'check/pass':>12}")
    print(header)
    print("-" * len(header))
    rows = []
    for path, t in times.items():
        added = t["wrapper"] - t["ptxas"]
        rows.append((added / t["pass"], t["check"] / t["pass"]))
        print(f"{path.name:<28}{path.stat().st_size / 1024:>5.0f}{t['ptxas']:>9.3f}{t['wrapper']:>16.3f}"
              f"{t['wrapper'] / t['ptxas']:>7.2f}{added:>9.3f}{t['check']:>17.3f}{t['pass']:>19.3f}"
              f"{rows[-1][0]:>12.2f}{rows[-1][1]:>12.2f}")
    added_goal = statistics.median(r[0] for r in rows)
    check_goal = statistics.median(r[1] for r in rows)
    print(f"\nmedian over {len(rows)} kernels: the wrapper adds {added_goal:.2f}x python3 -c pass to ptxas "
          f"(goal <= 1.2: {'met' if added_goal <= 1.2 else 'NOT met'}); fence --check takes {check_goal:.2f}x "
          f"python3 -c pass (goal <= 1.5: {'met' if check_goal <= 1.5 else 'NOT met'})\n")


if __name__ == "__main__":
    sys.exit(main())
