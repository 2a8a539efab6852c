"""How often do the Hopper samples give a wrong answer without their proxy fences?

Each kernel in ``samples/hopper`` is assembled twice: as shipped (no
``fence.proxy.async``) and after ``ptxkit fence``. Both are launched RUNS times with CTAS
copies of the CTA (every copy computes the same tile and stores the same values, so one
launch gives CTAS chances to race; a wrong copy shows unless a right one overwrites all of
its wrong elements later), alternating between two random data sets so that shared memory
left over from the previous launch is the wrong data, into a zeroed output, and every
result is compared with a float64 numpy reference. The table gives the wrong launches of
each build and the median launch time (``ptxkit.runtime.time_launch``, CUDA events) of the
fenced build against the unfenced one, the anchor measured in the same run.

The warp-specialized samples (``ws_*``: a producer warpgroup hands st.shared tiles to a
wgmma warpgroup) get a third build, ``fence_side="writer"`` (the fence in the producer,
before the arrive), timed against the issuer-side build (the fence in the consumer,
after the wait) and the same unfenced anchor; the other samples show "-" there.

    python benchmarks/hopper_race_bench.py [RUNS [CTAS [SAMPLE ...]]]   # default 2000 launches of 132 CTAs, every sample

Needs an NVIDIA Hopper GPU, ptxas and cuda-python; without a GPU it says so and exits 0.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the samples' shapes and launch helpers live with their tests


def main(argv: list[str]) -> int:
    runs = int(argv[0]) if argv else 2000
    ctas = int(argv[1]) if len(argv) > 1 else 132  # one per SM of an H200
    only = argv[2:]
    import ptxkit
    from ptxkit import runtime

    if not runtime.gpu_available():
        print("hopper_race_bench: skipped (no NVIDIA GPU usable through cuda-python)")
        return 0
    import test_hopper_samples as hopper

    unknown = sorted(set(only) - set(hopper.NAMES))
    if unknown:
        print(f"hopper_race_bench: no sample {', '.join(unknown)} (samples: {', '.join(hopper.NAMES)})")
        return 2
    rows = []
    for name in only or hopper.NAMES:
        sample = hopper.SAMPLES[name]
        if sample.tiled:  # one tile per CTA (and nothing to fence): not run as the same tile many times
            continue
        fenced, report = hopper.fence(sample)
        datasets = [hopper.inputs(sample, seed) for seed in (11, 12)]
        prepared = [(hopper.device_arguments(sample, a, b), hopper.reference(a, b)) for a, b in datasets]
        blank = np.zeros((64, sample.n), sample.out_dtype)
        row = {"name": name, "fences": len(report.fences)}
        builds = [("unfenced", sample.text), ("fenced", fenced)]
        if sample.warp_specialized:
            writer, writer_report = hopper.fence(sample, "writer")
            builds.append(("writer", writer))
            row["writer fences"] = len(writer_report.fences)
        for label, text in builds:
            cubin = ptxkit.assemble(text, arch="sm_90a", filename=sample.path)
            kernel = runtime.load(cubin).kernel(name)
            wrong, worst = 0, 0.0
            started = time.perf_counter()
            for run in range(runs):
                (arguments, out), expected = prepared[run % 2]
                out.copy_from_numpy(blank)  # a launch that writes nothing cannot pass
                kernel.launch(*arguments, grid=ctas, block=sample.threads)
                got = out.to_numpy().astype(np.float64)
                error = float(np.max(np.abs(got - expected)))
                worst = max(worst, error)
                wrong += not np.allclose(got, expected, **hopper.tolerance(sample))
            row[label] = {
                "wrong": wrong,
                "worst": worst,
                "ms": runtime.time_launch(
                    kernel, *prepared[0][0][0], grid=ctas, block=sample.threads, warmup=20, repeat=200
                ),
                "seconds": time.perf_counter() - started,
            }
        rows.append(row)
    print_table(rows, runs, ctas)
    return 0


def print_table(rows: list[dict], runs: int, ctas: int) -> None:
    print(f"Hopper samples on the GPU: {runs} launches of {ctas} CTAs per build, two alternating data sets")
    header = (
        f"{'sample':<22} {'fences':>6} {'wrong unfenced':>15} {'wrong fenced':>13} "
        f"{'max err unf.':>12} {'unfenced ms':>12} {'fenced ms':>10} {'fenced/unf.':>12} "
        f"{'writer fences':>13} {'wrong writer':>13} {'writer ms':>10} {'writer/unf.':>12} {'writer/fenced':>13}"
    )
    print(header)
    print("-" * len(header))
    for row in rows:
        unfenced, fenced = row["unfenced"], row["fenced"]
        line = (
            f"{row['name']:<22} {row['fences']:>6} {unfenced['wrong']:>9}/{runs:<5} {fenced['wrong']:>7}/{runs:<5} "
            f"{unfenced['worst']:>12.2e} {unfenced['ms']:>12.4f} {fenced['ms']:>10.4f} "
            f"{fenced['ms'] / unfenced['ms']:>12.3f}"
        )
        writer = row.get("writer")
        if writer is None:
            line += f" {'-':>13} {'-':>13} {'-':>10} {'-':>12} {'-':>13}"
        else:
            line += (
                f" {row['writer fences']:>13} {writer['wrong']:>7}/{runs:<5} {writer['ms']:>10.4f} "
                f"{writer['ms'] / unfenced['ms']:>12.3f} {writer['ms'] / fenced['ms']:>13.3f}"
            )
        print(line)
    print("anchor: the unfenced build of the same sample, timed in the same run (median of 200 launches);")
    print("fenced = issuer side (ptxkit fence's default); writer = --fence-side writer (warp-specialized samples)")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
