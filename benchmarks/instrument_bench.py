"""What instrumentation costs on the GPU: each kernel timed as it is and instrumented, in
the same run, with the results of every build checked against numpy in float64.

Kernels (fresh random data each run):

* ``ws_tma_pipeline`` (samples/hopper): C = A B^T, f16 in, f32 out, M = N = 2048, K = 4096,
  a CTA per 64 x 64 tile, producer warpgroup issuing TMA into 4 stages, consumer wgmma;
* ``ws_mbarrier`` and ``ws_named_barrier`` (samples/hopper): one 64 x 64 x 256 tile per CTA,
  launched as 528 CTAs (4 per SM) that all compute it: kernels of a few microseconds;
* ``rowreduce``: ``ptxkit gen rowreduce --cols 4096 --dtype f32 --op sum`` over 65536 rows
  (1 GiB), one CTA per two rows.

Builds: ``plain``; ``timeline`` at region level (the kernel's span and named regions:
the producer's and consumer's loops and the epilogue for the GEMMs, the row loop for the
reduction: a few records per warp, the buffer sized to them); ``timeline all`` (also every barrier, mbarrier and
wgmma wait and TMA issue: several records per warp per K block, no target); ``count``
(every block, per CTA). Targets: region-level timeline <= 3% and count <= 10% of the
plain kernel's time.

Each build's time is the median of `rounds` medians of ``runtime.time_launch`` (the
builds of one kernel interleaved round by round, the buffer zero-filled before every
launch outside the timed events). Each instrumented build's output must equal the plain
build's bit for bit, and every build's must match numpy; its buffer is decoded once
(spans, records dropped, counts).

    python benchmarks/instrument_bench.py [--rounds 7] [--out DIR]   # DIR: the trace, pictures, phases, figures.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

#: the GEMMs' named regions: the producer's loop to its return, the consumer's loop, the epilogue
REGIONS = ["produce=$produce_loop:", "consume=$consume_loop:$epilogue", "epilogue=$epilogue:"]
TARGETS = {"timeline": 0.03, "count": 0.10}


def builds(text: str, regions: list[str], chunk: int) -> dict[str, str]:
    """name -> PTX of each build (the instrumentation passes, then the fence pass). The
    region-level timeline's buffer is sized to its records: a `chunk` that holds each
    warp's records and a capacity of one chunk per warp (8 warps: every kernel here runs
    256 threads; the buffer is zero-filled
    before each launch, and the kernel's memory traffic pays for writing it back)."""
    from ptxkit.instrument import instrument
    from ptxkit.rewrite import run

    return {
        "plain": run(text, []).text,  # fenced, as the instrumented builds are
        "timeline": instrument(text, "timeline", points="function", region=regions, capacity=8 * chunk,
                               chunk=chunk),
        "timeline all": instrument(text, "timeline", region=regions, capacity=2048),
        "count": instrument(text, "count"),
    }


def gemm_case(name: str, m: int, n: int, k: int, ctas: int | None, seed: int):
    """(builds, launch(kernel) -> output, reference, launch shape) of a Hopper sample."""
    import test_hopper_samples as hopper

    from ptxkit import runtime

    sample = hopper.SAMPLES[name]
    a, b = hopper.inputs(sample, seed, m=m, n=n, k=k)
    arguments, out = hopper.device_arguments(sample, a, b)
    shape = hopper.launch_shape(sample, a, b)
    if ctas is not None:
        shape["grid"] = ctas
    reference = hopper.reference(a, b)
    poison = np.full(out.shape, np.nan, out.dtype)

    def run(kernel):
        out.copy_from_numpy(poison)
        result = kernel.launch(*arguments, **shape)
        return out.to_numpy(), result

    def timed(kernel, repeat):
        return runtime.time_launch(kernel, *arguments, **shape, warmup=3, repeat=repeat)

    return builds(sample.text, REGIONS, chunk=8), run, timed, reference, hopper.tolerance(sample), shape


def rowreduce_case(rows: int, seed: int):
    from ptxkit import runtime
    from ptxkit.generators.rowreduce import row_reduce_kernel

    kernel = row_reduce_kernel(4096, "f32", "sum")
    x = np.random.default_rng(seed).standard_normal((rows, 4096), dtype=np.float32)
    src = runtime.DeviceArray.from_numpy(x)
    out = runtime.DeviceArray.empty(rows, np.float32)
    reference = x.sum(axis=1, dtype=np.float64)
    shape = {"grid": kernel.grid(rows), "block": kernel.block}
    label = next(line.rstrip(":") for line in kernel.ptx.splitlines() if line.startswith("$rows"))
    done = next(line.rstrip(":") for line in kernel.ptx.splitlines() if line.startswith("$done"))
    poison = np.full(rows, np.nan, np.float32)

    def run(launchable):
        out.copy_from_numpy(poison)
        result = launchable.launch(src, out, np.uint32(rows), **shape)
        return out.to_numpy(), result

    def timed(launchable, repeat):
        return runtime.time_launch(launchable, src, out, np.uint32(rows), **shape, warmup=3, repeat=repeat)

    tolerance = {"rtol": 0, "atol": 1e-4 * float(np.abs(x).sum(axis=1).max()) / 4096 * 64}
    return builds(kernel.ptx, [f"rows={label}:{done}"], chunk=4), run, timed, reference, tolerance, shape


def measure(name, case, rounds: int, repeat: int, out_dir: Path | None) -> list[dict]:
    import ptxkit
    from ptxkit import runtime

    texts, run, timed, reference, tolerance, shape = case
    kernels = {label: runtime.load(ptxkit.assemble(text, arch="sm_90a")).kernel(_entry(text))
               for label, text in texts.items()}
    rows = {label: {"kernel": name, "build": label} for label in kernels}
    plain_output = None
    for label, kernel in kernels.items():
        output, decoded = run(kernel)
        np.testing.assert_allclose(output.astype(np.float64), reference, **tolerance)
        if plain_output is None:
            plain_output = output
        rows[label]["same as plain"] = bool(np.array_equal(output, plain_output, equal_nan=False))
        rows[label].update(_describe(decoded))
        if out_dir is not None and name == "ws_tma_pipeline" and label == "timeline all":
            rows[label]["phases"] = _pictures(decoded, out_dir)
    times = {label: [] for label in kernels}
    for _ in range(rounds):
        for label, kernel in kernels.items():
            times[label].append(timed(kernel, repeat))
    plain = statistics.median(times["plain"])
    for label in kernels:
        ms = statistics.median(times[label])
        rows[label].update({"ms": ms, "overhead": ms / plain - 1, "spread": (max(times[label]) - min(times[label])) / ms})
    return list(rows.values())


def _entry(text: str) -> str:
    import ptxkit

    return next(f.name for f in ptxkit.parse(text).functions if f.kind == "entry")


def _describe(decoded) -> dict:
    from ptxkit.trace import Counts, Trace

    if isinstance(decoded, Trace):
        return {"spans": len(decoded.spans), "records": decoded.records, "dropped": int(decoded.dropped.sum()),
                "unmatched": decoded.unmatched, "clock_ghz": decoded.clock_ghz}
    if isinstance(decoded, Counts):
        return {"warp instructions": sum(decoded.by_opcode.values())}
    return {}


def _pictures(trace, out_dir: Path) -> list[dict]:
    """The Chrome trace of the CTAs of one SM, the picture of two of them (PNG) and a close
    view of the first stages of one (the producer's warp and the consumers', PNG and
    SVG), and the time per phase per warpgroup (phases.txt; returned)."""
    on_sm = sorted({int(c) for c in trace.spans["cta"][trace.spans["sm"] == trace.sm_of_cta[0]]})
    trace.write_chrome(str(out_dir / "ws_tma_pipeline.trace.json"), ctas=on_sm)  # the CTAs of one SM
    title = "ws_tma_pipeline (2048 x 2048 x 4096, 4 TMA stages): two CTAs on one SM"
    trace.plot(str(out_dir / "timeline.png"), ctas=on_sm[:2], title=title)
    close = "ws_tma_pipeline: the producer warp (0) and the consumer warpgroup (4-7) of one CTA, first 8 us"
    for suffix in ("png", "svg"):
        trace.plot(str(out_dir / f"zoom.{suffix}"), ctas=on_sm[:1], warps=[0, 4, 5, 6, 7], window=(0.0, 8.0),
                   title=close, width=9.0)
    (out_dir / "phases.txt").write_text(trace.summary() + "\n" + trace.phase_table() + "\n")
    return trace.phases()


def print_table(rows: list[dict], device: str) -> None:
    print(f"instrumentation overhead on {device} (median of medians; each build checked against numpy float64)")
    header = (f"{'kernel':<18} {'build':<13} {'ms':>9} {'overhead':>9} {'target':>7} {'spread':>7} "
              f"{'same':>5} {'records':>8} {'dropped':>8}")
    print(header)
    print("-" * len(header))
    for row in rows:
        target = TARGETS.get(row["build"])
        print(f"{row['kernel']:<18} {row['build']:<13} {row['ms']:>9.4f} {100 * row['overhead']:>8.2f}% "
              f"{(f'{100 * target:.0f}%' if target else '-'):>7} {100 * row['spread']:>6.1f}% "
              f"{('yes' if row['same as plain'] else 'NO'):>5} {row.get('records', '-'):>8} {row.get('dropped', '-'):>8}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--repeat", type=int, default=30)
    parser.add_argument("--out", type=Path, default=None, help="folder for the trace, pictures and figures")
    parser.add_argument("--quick", action="store_true", help="smaller shapes (a smoke test)")
    args = parser.parse_args(argv)
    from ptxkit import runtime

    if not runtime.gpu_available():
        print("instrument_bench: skipped (no NVIDIA GPU usable through cuda-python)")
        return 0
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
    seed = int(time.time())
    m, k, rows = (512, 1024, 4096) if args.quick else (2048, 4096, 65536)
    cases = [("ws_tma_pipeline", lambda: gemm_case("ws_tma_pipeline", m, m, k, None, seed)),
             ("ws_mbarrier", lambda: gemm_case("ws_mbarrier", 64, 64, 256, 528, seed + 1)),
             ("ws_named_barrier", lambda: gemm_case("ws_named_barrier", 64, 64, 256, 528, seed + 2)),
             ("rowreduce", lambda: rowreduce_case(rows, seed + 3))]
    results = []
    for name, make in cases:
        results += measure(name, make(), args.rounds, args.repeat, args.out)
    device = os.environ.get("PTXKIT_DEVICE_NAME") or _device_name()
    print_table(results, device)
    if args.out is not None:
        (args.out / "figures.json").write_text(json.dumps({"device": device, "seed": seed, "rows": results}, indent=1))
    return 0


def _device_name() -> str:
    from cuda.core import Device

    return Device(0).name


if __name__ == "__main__":
    sys.exit(main())
