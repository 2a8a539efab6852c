"""Row-reduction bandwidth on the GPU, next to torch and a device-to-device copy, and the
SHFL count of the warp strategies' SASS.

For every cols in {256 … 262144}, f32 and bf16, sum and max, over one 4 GiB tensor viewed
as [rows, cols]:

* ours: ptxkit's generated row reduction (bytes read per second): its default
  configuration, and the best of a few variants of threads per row and cluster size
  (``rowreduce.variants``), each on the grid ``RowReduceKernel.grid`` gives;
* torch: ``torch.sum`` / ``torch.amax`` over the last dim of the same tensor;
* copy: ``y.copy_(x)`` of the same tensor (bytes read + written per second);

all measured in the same run, as TB/s and ratios (target: ours ≥ 0.9 × copy and ≥ torch).
Each result is checked against torch. Then each warp-reduction kernel's SASS is searched
for SHFL: there must be log2(width) per 32-bit word reduced.

Run on the GPU machine: ``python benchmarks/reduce_bench.py`` (``--quick`` uses 256 MiB).
Without a GPU or torch it says so and exits 0.
"""

from __future__ import annotations

import argparse
import statistics
import sys

COLS = (256, 1024, 4096, 16384, 65536, 262144)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="256 MiB instead of 4 GiB")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args(argv)
    from ptxkit import runtime

    if not runtime.gpu_available():
        print("reduce_bench: skipped (no GPU usable through cuda-python)")
        return 0
    try:
        import torch
    except ImportError:
        print("reduce_bench: skipped (torch is not installed)")
        return 0
    if not torch.cuda.is_available():
        print("reduce_bench: skipped (torch sees no GPU)")
        return 0
    bandwidth_table(torch, (256 if args.quick else 4096) << 20, args.repeat)
    print()
    return shfl_table()


def bandwidth_table(torch, nbytes: int, repeat: int) -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"row reduction over {nbytes / 2**30:g} GiB on {torch.cuda.get_device_name(0)} ({sms} SMs); "
          "TB/s = 1e12 bytes/s; ours and torch count bytes read, copy counts bytes read + written")
    print("TxC: threads per row in each CTA x CTAs per cluster (x1: a plain launch); ours: the default; "
          "best: the best variant")
    header = (f"{'dtype':5} {'op':3} {'cols':>6} {'rows':>8} | {'ours':>5} {'TxC':>6} | {'best':>5} {'TxC':>6} | "
              f"{'torch':>5} {'copy':>5} | {'ours/copy':>9} {'ours/torch':>10} | {'max err':>8}")
    print(header)
    print("-" * len(header))
    met = shapes = 0
    for name, torch_dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        x = torch.empty(nbytes // torch_dtype.itemsize, dtype=torch_dtype, device="cuda").uniform_(-1, 1)
        copy = _copy_rate(torch, x, repeat)
        for op in ("sum", "max"):
            for cols in COLS:
                rows = x.numel() // cols
                view = x.view(rows, cols)
                torch_op = (lambda v: torch.sum(v, dim=-1)) if op == "sum" else (lambda v: torch.amax(v, dim=-1))
                theirs = nbytes / _torch_time(torch, lambda: torch_op(view), repeat) / 1e12
                results = _time_variants(torch, view, name, op, torch_op(view).float(), repeat)
                ours, ours_shape, _ = results[0]
                best, best_shape, _ = max(results)
                shapes += 1
                met += ours >= 0.9 * copy and ours >= theirs
                print(f"{name:5} {op:3} {cols:>6} {rows:>8} | {ours:5.2f} {ours_shape:>6} | {best:5.2f} "
                      f"{best_shape:>6} | {theirs:5.2f} {copy:5.2f} | {ours / copy:9.2f} {ours / theirs:10.2f} | "
                      f"{max(r[2] for r in results):8.1e}")
        del x
        torch.cuda.empty_cache()
    print(f"target (>= 0.9 x copy and >= torch): the default meets it on {met}/{shapes} shapes")


def _time_variants(torch, view, dtype: str, op: str, expected, repeat: int) -> list:
    """[(TB/s, "TxC", error)] of every variant of `rowreduce.variants` on `view` ([rows, cols]),
    the default first; error is the largest difference from torch, relative to the largest value."""
    import numpy as np

    import ptxkit
    from ptxkit import runtime
    from ptxkit.generators.rowreduce import row_reduce_kernel, variants

    rows, cols = view.shape
    nbytes = view.numel() * view.element_size()
    out = torch.empty(rows, dtype=view.dtype, device="cuda")
    args = (np.uint64(view.data_ptr()), np.uint64(out.data_ptr()), np.uint32(rows))
    results = []
    for threads, cluster in variants(cols, dtype, op):
        kernel = row_reduce_kernel(cols, dtype, op, threads_per_row=threads, cluster=cluster)
        launchable = runtime.load(ptxkit.assemble(kernel.ptx)).kernel(kernel.name)
        out.zero_()
        torch.cuda.synchronize()
        ms = runtime.time_launch(launchable, *args, grid=kernel.grid(rows), block=kernel.block,
                                 cluster=kernel.launch_cluster, warmup=3, repeat=repeat)
        error = (out.float() - expected).abs().max().item() / max(1.0, expected.abs().max().item())
        results.append((nbytes / (ms * 1e-3) / 1e12, f"{threads}x{cluster}", error))
    return results


def _copy_rate(torch, x, repeat: int) -> float:
    """TB/s of a device-to-device copy of `x`, counting bytes read and written."""
    y = torch.empty_like(x)
    return 2 * x.numel() * x.element_size() / _torch_time(torch, lambda: y.copy_(x), repeat) / 1e12


def _torch_time(torch, fn, repeat: int) -> float:
    """Median seconds of one call, from CUDA events, after warm-up."""
    for _ in range(3):
        fn()
    times = []
    for _ in range(repeat):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop) * 1e-3)
    return statistics.median(times)


def shfl_table() -> int:
    import ptxkit
    from ptxkit.generators import harness, parity

    cases = parity.shuffle_count_cases()
    try:
        counts = harness.sass_counts(ptxkit.assemble(harness.module_text([c for c, _ in cases])).data)
    except FileNotFoundError as err:
        print(f"SHFL count: skipped ({err})")
        return 0
    print("SHFL per warp reduction (SASS, cuobjdump -sass): expected log2(width) per 32-bit word")
    print(f"{'kernel':28} {'expected':>8} {'SASS':>5}")
    failures = 0
    for case, expected in cases:
        got = counts.get(case.name)
        failures += got != expected
        print(f"{case.name:28} {expected:>8} {got!s:>5}{'' if got == expected else '  MISMATCH'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
