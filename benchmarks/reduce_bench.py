"""Row-reduction bandwidth on the GPU, next to torch's best single call for the same result
and a device-to-device copy, and the SHFL count of the warp strategies' SASS.

For every op (sum, sumsq, max, min, logsumexp, meanvar, argmax, argmin), f32, f16 and
bf16, and cols in {1, 7, 100, 1000, 4097, 32000, 50257, 128256, 151936, 262144} plus a
strided case (4096 columns of rows 4097 elements apart: every row starts at another
alignment), over one 4 GiB tensor per dtype viewed as [rows, cols]:

* ours: ptxkit's generated row reduction, its default configuration (and with
  ``--variants`` the best of `rowreduce.variants`), on the grid ``RowReduceKernel.grid``
  gives;
* torch: the single call that gives the same result: ``sum``, ``(x.float() ** 2).sum``,
  ``amax``, ``amin``, ``logsumexp``, ``var_mean(correction=0)``, ``argmax``, ``argmin``
  over the last dim;
* copy: ``y.copy_(x)`` of the whole tensor;

all in the same run, as TB/s of bytes read + written (the row elements once, the results
once), with the ratios (the goal: ours ≥ torch everywhere, ≥ 0.9 × copy wherever a row is
1 KiB or more). Each of our results is checked against torch's: exact for max, min,
argmax and argmin (``mismatch`` counts the rows that differ), relative error otherwise.
Then each warp-reduction kernel's SASS is searched for SHFL: there must be log2(width)
per 32-bit word reduced.

Run on the GPU machine: ``python benchmarks/reduce_bench.py`` (``--quick``: 256 MiB;
``--log FILE``: every measurement as a JSON line). Without a GPU or torch it says so and
exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys

COLS = (1, 7, 100, 1000, 4097, 32000, 50257, 128256, 151936, 262144)
#: (cols, row stride): rows of a larger tensor, each starting at another alignment
STRIDED = (4096, 4097)
OPS = ("sum", "sumsq", "max", "min", "logsumexp", "meanvar", "argmax", "argmin")
EXACT = ("max", "min", "argmax", "argmin")


def anchors(torch):
    """op → (what torch runs, the call): torch's best single call for the op's result."""
    return {
        "sum": ("sum", lambda v: v.sum(-1)),
        "sumsq": ("(x.float()**2).sum", lambda v: (v.float() ** 2).sum(-1)),
        "max": ("amax", lambda v: v.amax(-1)),
        "min": ("amin", lambda v: v.amin(-1)),
        "logsumexp": ("logsumexp", lambda v: v.logsumexp(-1)),
        "meanvar": ("var_mean", lambda v: torch.var_mean(v, -1, correction=0)[::-1]),
        "argmax": ("argmax", lambda v: v.argmax(-1)),
        "argmin": ("argmin", lambda v: v.argmin(-1)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="256 MiB instead of 4 GiB")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--variants", action="store_true", help="also time the variants of each kernel")
    parser.add_argument("--ops", default=",".join(OPS))
    parser.add_argument("--dtypes", default="f32,f16,bf16")
    parser.add_argument("--cols", default=",".join(map(str, COLS)))
    parser.add_argument("--log", help="write every measurement to this file as JSON lines")
    parser.add_argument("--jobs", type=int, default=16, help="processes that run ptxas before the timing")
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
    shapes = [(int(c), int(c)) for c in args.cols.split(",")] + [STRIDED]
    ops, dtypes = args.ops.split(","), args.dtypes.split(",")
    compile_all(shapes, ops, dtypes, args.variants, args.jobs)
    log = open(args.log, "w") if args.log else None
    try:
        bandwidth_table(torch, (256 if args.quick else 4096) << 20, args.repeat, shapes, ops, dtypes, args.variants,
                        log)
    finally:
        if log:
            log.close()
    print()
    return shfl_table()


def _kernels(cols, stride, dtype, op, variants: bool):
    from ptxkit.generators.rowreduce import row_reduce_kernel, variants as configs

    shapes = configs(cols, dtype, op) if variants else [(None, None)]
    return [row_reduce_kernel(cols, dtype, op, threads_per_row=t, rows_per_thread=r, row_stride=stride)
            for t, r in shapes]


def _assemble(ptx: str) -> None:
    import ptxkit

    ptxkit.assemble(ptx)


def compile_all(shapes, ops, dtypes, variants: bool, jobs: int) -> None:
    """Run ptxas on every kernel in `jobs` processes: the cubin cache then has them all."""
    from concurrent.futures import ProcessPoolExecutor

    texts = [k.ptx for cols, stride in shapes for dt in dtypes for op in ops
             for k in _kernels(cols, stride, dt, op, variants)]
    with ProcessPoolExecutor(jobs) as pool:
        list(pool.map(_assemble, texts, chunksize=8))


def bandwidth_table(torch, nbytes: int, repeat: int, shapes, ops, dtypes, variants: bool, log) -> None:
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print(f"row reduction over {nbytes / 2**30:g} GiB on {torch.cuda.get_device_name(0)} ({sms} SMs); "
          "TB/s = 1e12 bytes read + written per second (rows once, results once)")
    print("TxK: threads per row x rows per thread; ours: the default configuration; best: the best variant; "
          "err: mismatching rows (exact ops) or the largest error relative to torch's largest value")
    header = (f"{'dtype':5} {'op':9} {'cols':>11} {'rows':>10} | {'ours':>5} {'TxK':>5} | "
              + (f"{'best':>5} {'TxK':>5} | " if variants else "")
              + f"{'torch':>5} {'copy':>5} | {'/copy':>5} {'/torch':>6} | {'err':>8} | goal")
    print(header)
    print("-" * len(header))
    met = total = 0
    calls = anchors(torch)
    for name in dtypes:
        torch_dtype = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}[name]
        x = torch.empty(nbytes // torch_dtype.itemsize, dtype=torch_dtype, device="cuda").uniform_(-1, 1)
        copy = _copy_rate(torch, x, repeat)
        for cols, stride in shapes:
            rows = x.numel() // stride
            view = x[: rows * stride].view(rows, stride)[:, :cols]
            for op in ops:
                what, call = calls[op]
                expected = call(view)
                expected = list(expected) if isinstance(expected, (tuple, list)) else [expected]
                moved = view.numel() * view.element_size() + sum(e.numel() * e.element_size() for e in expected)
                theirs = moved / _torch_time(torch, lambda: call(view), repeat) / 1e12
                results = _time_kernels(torch, view, name, op, stride, expected, variants, repeat, moved)
                del expected
                ours, ours_shape, error = results[0]
                best, best_shape, _ = max(results)
                goal = ours >= theirs and (cols * x.element_size() < 1024 or ours >= 0.9 * copy)
                met += goal
                total += 1
                label = f"{cols}" if stride == cols else f"{cols}/{stride}"
                error_text = f"{int(error):8d}" if op in EXACT else f"{error:8.1e}"
                print(f"{name:5} {op:9} {label:>11} {rows:>10} | {ours:5.2f} {ours_shape:>5} | "
                      + (f"{best:5.2f} {best_shape:>5} | " if variants else "")
                      + f"{theirs:5.2f} {copy:5.2f} | {ours / copy:5.2f} {ours / theirs:6.2f} | {error_text} | "
                      f"{'met' if goal else 'SHORT'}", flush=True)
                if log:
                    log.write(json.dumps({"dtype": name, "op": op, "cols": cols, "stride": stride, "rows": rows,
                                          "torch_call": what, "torch": theirs, "copy": copy, "error": error,
                                          "ours": [{"tbs": r, "config": s} for r, s, _ in results]}) + "\n")
                    log.flush()
        del x
        torch.cuda.empty_cache()
    print(f"goal (>= torch, and >= 0.9 x copy where a row is 1 KiB or more): the default meets it on "
          f"{met}/{total} shapes")


def _time_kernels(torch, view, dtype, op, stride, expected, variants, repeat, moved) -> list:
    """[(TB/s, "TxK", error)] of the default kernel (and its variants) on `view`; the error
    is against torch's results `expected` (rows that differ, for the exact ops)."""
    import numpy as np

    import ptxkit
    from ptxkit import runtime

    rows = view.shape[0]
    results = []
    for kernel in _kernels(view.shape[1], stride, dtype, op, variants):
        outs = [torch.empty(rows, dtype=_torch_dtype(torch, kind), device="cuda") for _, kind in kernel.outputs]
        launchable = runtime.load(ptxkit.assemble(kernel.ptx)).kernel(kernel.name)
        args = (np.uint64(view.data_ptr()), *(np.uint64(o.data_ptr()) for o in outs), np.uint32(rows))
        for out in outs:
            out.fill_(float("nan") if out.is_floating_point() else -1)
        torch.cuda.synchronize()
        ms = runtime.time_launch(launchable, *args, grid=kernel.grid(rows), block=kernel.block,
                                 cluster=kernel.launch_cluster, warmup=3, repeat=repeat)
        error = _error(torch, op, outs, expected)
        results.append((moved / (ms * 1e-3) / 1e12, f"{kernel.threads_per_row}x{kernel.rows_per_thread}", error))
        del outs
    return results


def _torch_dtype(torch, kind):
    return {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16, "s64": torch.int64}[kind]


def _error(torch, op, outs, expected) -> float:
    """Rows that differ (exact ops), else the largest difference over the largest |value|."""
    if op in EXACT:
        return float(sum(int((o != e).sum().item()) for o, e in zip(outs, expected)))
    worst = 0.0
    for out, want in zip(outs, expected):
        diff = (out.double() - want.double()).abs().max().item()
        worst = max(worst, diff / max(1.0, want.double().abs().max().item()))
    return worst


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
