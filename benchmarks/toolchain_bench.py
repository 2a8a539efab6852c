"""Toolchain costs: assembling with ptxas versus a cubin-cache hit, and launch overhead.

CPU (needs ptxas), per sample in ``samples/toolchain``: the median wall time of running
``ptxas`` directly on the file (the anchor), of ``ptxkit.assemble`` with the cache off
(cold), and of ``ptxkit.assemble`` answered from a warm cache; the ratios cold/ptxas
(ptxkit's overhead around ptxas) and cold/hit (what the cache saves).

GPU (skipped without one): the median wall time of one launch + synchronize of the empty
kernel through ``Kernel.launch`` versus the same through raw cuda.core
(``launch(stream, config, kernel); stream.sync()``), and their ratio.

Run: ``python benchmarks/toolchain_bench.py [--repeat 15] [--launches 2000]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import ptxkit
from ptxkit import runtime
from ptxkit.ptxas import find_ptxas

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "toolchain"


def median_seconds(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def assembly_table(repeat: int) -> None:
    ptxas = find_ptxas()
    print(f"ptxas {ptxas.full_version} ({ptxas.path}), arch sm_90a, median of {repeat} runs\n")
    print(f"{'sample':<18}{'ptxas (ms)':>12}{'cold (ms)':>12}{'hit (ms)':>11}{'cold/ptxas':>12}{'cold/hit':>10}")
    saved = os.environ.get("PTXKIT_CACHE_DIR")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["PTXKIT_CACHE_DIR"] = os.path.join(scratch, "cache")  # a cache of our own
        for path in sorted(SAMPLES.glob("*.ptx")):
            text = path.read_text()
            command = [ptxas.path, "-arch", "sm_90a", "-v", str(path), "-o", os.path.join(scratch, "x.cubin")]
            raw = median_seconds(lambda: subprocess.run(command, capture_output=True, check=True), repeat)
            cold = median_seconds(lambda: ptxkit.assemble(text, cache=False), repeat)
            ptxkit.assemble(text)  # fill the cache
            hit = median_seconds(lambda: ptxkit.assemble(text), repeat * 20)
            assert ptxkit.assemble(text).cached
            print(f"{path.stem:<18}{raw * 1e3:>12.2f}{cold * 1e3:>12.2f}{hit * 1e3:>11.3f}"
                  f"{cold / raw:>12.2f}{cold / hit:>10.0f}")
    if saved is None:
        del os.environ["PTXKIT_CACHE_DIR"]
    else:
        os.environ["PTXKIT_CACHE_DIR"] = saved


def launch_table(launches: int) -> None:
    if not runtime.gpu_available():
        print(f"\nGPU part skipped: {runtime.gpu_unavailable_reason()}")
        return
    from cuda.core import Device, LaunchConfig, ObjectCode, launch

    cubin = ptxkit.assemble((SAMPLES / "empty.ptx").read_text(), arch="sm_90a")
    ours = runtime.load(cubin).kernel("empty")
    device = Device(0)
    device.set_current()
    stream = device.create_stream()
    raw_kernel = ObjectCode.from_cubin(cubin.data, name="empty").get_kernel("empty")
    config = LaunchConfig(grid=1, block=32)

    def raw_launch():
        launch(stream, config, raw_kernel)
        stream.sync()

    def ptxkit_launch():
        ours.launch(grid=1, block=32)

    for action in (raw_launch, ptxkit_launch):  # warm up both paths
        median_seconds(action, 200)
    raw = statistics.median(median_seconds(raw_launch, launches) for _ in range(5))
    mine = statistics.median(median_seconds(ptxkit_launch, launches) for _ in range(5))
    events = runtime.time_launch(ours, grid=1, block=32, repeat=launches)
    print(f"\n{device.name}: empty kernel, launch + synchronize, median of {launches} launches x 5 rounds\n")
    print(f"{'path':<34}{'per launch (us)':>16}{'ratio':>8}")
    print(f"{'raw cuda.core (anchor)':<34}{raw * 1e6:>16.1f}{1:>8.2f}")
    print(f"{'ptxkit Kernel.launch':<34}{mine * 1e6:>16.1f}{mine / raw:>8.2f}")
    print(f"{'(GPU time by CUDA events)':<34}{events * 1e3:>16.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=15, help="runs per cold measurement")
    parser.add_argument("--launches", type=int, default=2000, help="launches per GPU round")
    args = parser.parse_args()
    assembly_table(args.repeat)
    launch_table(args.launches)


if __name__ == "__main__":
    main()
