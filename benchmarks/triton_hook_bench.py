"""The fence pass inside Triton's compiler (`ptxkit.triton_hook`): what it adds to each
kernel, what it costs at compile time, and what the fence is worth at run time.

The two fp16 matmuls of ``samples/triton/triton_kernels.py`` (C = A @ B with fp32
accumulation, 128 x 128 x 64 tiles, 4 stages, 4 warps), each compiled in process in five
builds, every one with a fresh Triton cache:

- ``triton``: no hook (the anchor);
- ``hook fence`` / ``hook check``: ``ptxkit.triton_hook.install("fence"/"check")``;
- ``stripped``: a hook of Triton's kind removes Triton's own ``fence.proxy.async``;
- ``stripped + hook``: that hook, then ptxkit's (fence mode).

For every build it prints the fences ptxkit added (or found missing), the
``FENCE.VIEW.ASYNC`` count in the SASS, how many of CHECKS launches differ from numpy's
float64 product by 1% or more, the median compile time (first launch of a fresh
``@triton.jit`` copy, fresh cache, COMPILES times) and ptxkit's share of it (the pass's
own time from the hook's log), and the time of a compile answered from Triton's cache.

    python benchmarks/triton_hook_bench.py [SIZE]     # default 2048 (M = N = K)

Needs a Hopper GPU, torch and triton (3.6 or newer); without them it says so and exits 0.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "samples" / "triton"))
try:  # without triton the script only reports a skip
    import triton
    from triton_kernels import (hopper_unavailable_reason, launch_pointer, launch_tma, matmul_pointer, matmul_tma,
                                strip_fences)
except ImportError:
    triton = None

BUILDS = ("triton", "hook fence", "hook check", "stripped", "stripped + hook")
COMPILES = 3  # compiles timed per build of the anchor and the fence hook
CHECKS = 100  # launches compared with numpy per build


def main(argv: list[str]) -> int:
    size = int(argv[0]) if argv else 2048
    missing = "needs triton" if triton is None else hopper_unavailable_reason()
    if missing:
        print(f"triton_hook_bench: skipped ({missing})")
        return 0
    import torch

    from ptxkit import triton_hook

    torch.manual_seed(0)
    a = torch.randn(size, size, dtype=torch.float32).to(torch.float16)
    b = torch.randn(size, size, dtype=torch.float32).to(torch.float16)
    expected = torch.from_numpy(a.double().numpy() @ b.double().numpy()).cuda()  # numpy's float64 product
    a, b = a.cuda(), b.cuda()
    rows = []
    for kernel_name, kernel, launch in (("pointer", matmul_pointer, launch_pointer), ("tma", matmul_tma, launch_tma)):
        for build in BUILDS:
            rows.append(measure(kernel_name, kernel, launch, build, a, b, expected, triton_hook))
    print_table(rows, size)
    return 0 if all(row["ok"] for row in rows) else 1


def measure(kernel_name, kernel, launch, build, a, b, expected, triton_hook) -> dict:
    """Compile (COMPILES times for the timed builds), check CHECKS launches, time a cache hit."""
    import torch

    triton.knobs.runtime.add_stages_inspection_hook = strip_fences if build.startswith("stripped") else None
    hook = None
    if build in ("hook fence", "stripped + hook"):
        hook = triton_hook.install("fence")
    elif build == "hook check":
        hook = triton_hook.install("check")
    compile_times, compiled = [], None
    for _ in range(COMPILES if build in ("triton", "hook fence") else 1):
        triton.knobs.cache.dir = tempfile.mkdtemp(prefix="ptxkit-triton-")
        fresh = triton.jit(kernel)
        start = time.perf_counter()
        _, compiled = launch(fresh, a, b)
        torch.cuda.synchronize()
        compile_times.append(time.perf_counter() - start)
    start = time.perf_counter()  # a fresh jit copy against the warm cache: a cache hit
    launch(triton.jit(kernel), a, b)
    torch.cuda.synchronize()
    hit = time.perf_counter() - start
    scale, wrong = expected.abs().max(), 0
    for _ in range(CHECKS):
        c, _ = launch(fresh, a, b)
        wrong += bool(((c.double() - expected).abs().max() / scale).item() >= 1e-2)
    entries = hook.log if hook is not None else []
    triton_hook.uninstall()
    triton.knobs.runtime.add_stages_inspection_hook = None
    fenced = build in ("hook fence", "stripped + hook")
    return {
        "kernel": kernel_name,
        "build": build,
        "ptx_fences": compiled.asm["ptx"].count("fence.proxy.async"),
        "ptxkit": entries[-1]["fences"] if entries else None,
        "pass_s": statistics.median(entry["seconds"] for entry in entries) if entries else 0.0,
        "sass": compiled.asm["sass"].count("FENCE.VIEW.ASYNC"),
        "wrong": wrong,
        "compile_s": statistics.median(compile_times),
        "hit_s": hit,
        "ok": not fenced or wrong == 0,
    }


def print_table(rows: list[dict], size: int) -> None:
    print(f"Triton {triton.__version__} fp16 matmul {size}^3, tiles 128x128x64, 4 stages, 4 warps; "
          f"compile = median of {COMPILES} first launches with a fresh cache (triton, hook fence), one otherwise")
    header = (f"{'kernel':<8}{'build':<17}{'PTX fences':>11}{'ptxkit':>14}{'SASS FENCE':>11}{'wrong':>9}"
              f"{'compile s':>11}{'vs triton':>10}{'pass ms':>9}{'pass/compile':>13}{'cache hit s':>12}")
    print(header)
    print("-" * len(header))
    anchors = {row["kernel"]: row["compile_s"] for row in rows if row["build"] == "triton"}
    for row in rows:
        ptxkit = "-" if row["ptxkit"] is None else (f"{len(row['ptxkit'])} "
                                                   f"{'missing' if row['build'] == 'hook check' else 'added'}")
        print(f"{row['kernel']:<8}{row['build']:<17}{row['ptx_fences']:>11}{ptxkit:>14}{row['sass']:>11}"
              f"{row['wrong']:>5}/{CHECKS:<3}{row['compile_s']:>11.3f}{row['compile_s'] / anchors[row['kernel']]:>10.3f}"
              f"{1e3 * row['pass_s']:>9.1f}{row['pass_s'] / row['compile_s']:>13.4f}{row['hit_s']:>12.3f}")
    print("PTX fences: fence.proxy.async in the PTX ptxas got; wrong: launches off numpy's float64 product by "
          ">= 1%; pass ms: the fence pass inside the ptx stage (the hook's log)")
    for row in rows:
        for fence in row["ptxkit"] or ():
            print(f"  {row['kernel']}/{row['build']}: {fence['variant']} {fence['where']} line {fence['line']}: "
                  f"{fence['reason']}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
