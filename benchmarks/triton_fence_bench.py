"""Triton on Hopper, built through ptxkit's ptxas wrapper: which fences are missing, and
what adding them costs.

The two fp16 matmuls of ``samples/triton/triton_kernels.py`` (C = A @ B, fp32
accumulation, 128 x 128 x 64 tiles, 4 stages):

- ``pointer``: ``tl.load`` of pointer tensors. Triton pipelines them with ``cp.async``
  into shared memory and feeds ``wgmma``; ``cp.async`` writes through the generic proxy.
- ``tma``: host-side ``TensorDescriptor`` loads (TMA + mbarrier) into ``wgmma``, and a
  TMA store of C (``stmatrix`` then ``cp.async.bulk.tensor``).

Each kernel is compiled in four builds, all with ``TRITON_PTXAS_PATH`` pointing at the
wrapper, which runs Triton's own bundled ptxas (``PTXKIT_REAL_PTXAS``):

- ``triton``: ``PTXKIT_FENCE_MODE=off``, Triton's PTX as it is (the anchor);
- ``ptxkit``: ``PTXKIT_FENCE_MODE=fence``, ptxkit adds the fences it finds missing;
- ``stripped``: Triton's own ``fence.proxy.async`` lines removed, nothing added;
- ``stripped+ptxkit``: Triton's fences removed, then ptxkit places its own.

For every build it prints the fences ptxkit added (from ``PTXKIT_FENCE_LOG``), the
``FENCE.VIEW.ASYNC`` count in the SASS, the largest error against ``torch.matmul`` over
CHECKS launches and how many of them were wrong, and the median time of
``triton.testing.do_bench`` (interleaved rounds in one process) with the ratio to the
``triton`` build. The target: a fenced build within 2% of the unfenced one.

    python benchmarks/triton_fence_bench.py [SIZE]     # default 4096 (M = N = K)

Needs ptxkit installed in the running Python (``pip install -e .``: the wrapper runs as
Triton's ptxas in a child process). Without a GPU, torch or triton it says so and exits
0. The wrapper is not part of Triton's cache key, so every build gets a fresh
``TRITON_CACHE_DIR`` and ``TRITON_ALWAYS_COMPILE=1``.
"""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "samples" / "triton"))
try:  # without triton the script only reports a skip
    import triton
    from triton_kernels import hopper_unavailable_reason, matmul_pointer, matmul_tma
except ImportError:
    triton = None

BUILDS = ("triton", "ptxkit", "stripped", "stripped+ptxkit")
BLOCK_M, BLOCK_N, BLOCK_K, STAGES, WARPS = 128, 128, 64, 4, 4
ROUNDS = 15  # interleaved timing rounds (5 left 1-3% between identical builds on an H200)
CHECKS = 100  # launches per build compared with torch (C zeroed before each)

#: The executable Triton runs as ptxas: strips Triton's fences when asked, then hands the
#: arguments to ptxkit's wrapper (in process).
SHIM = """#!{python}
import os, re, sys
from ptxkit.cli.ptxas_cmd import input_files, main
arguments = sys.argv[1:]
if os.environ.get("BENCH_STRIP_FENCES") == "1":
    for index in input_files(arguments):  # Triton's own temporary .ptx
        with open(arguments[index]) as handle:
            text = handle.read()
        with open(arguments[index], "w") as handle:
            handle.write(re.sub(r"(?m)^[ \\t]*fence\\.proxy\\.async[^;\\n]*;[ \\t]*\\n", "", text))
sys.exit(main(arguments))
"""


def main(argv: list[str]) -> int:
    size = int(argv[0]) if argv else 4096
    missing = _missing_requirements()
    if missing:
        print(f"triton_fence_bench: skipped ({missing})")
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="ptxkit-triton-bench-"))
    try:
        results = _run_all(size, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    _print_table(results, size)
    return 0 if all(r["ok"] for r in results) else 1


def _missing_requirements() -> str | None:
    """Why the benchmark cannot run here (a string), or None."""
    if triton is None:
        return "needs triton"
    try:  # the shim runs ptxkit in this interpreter
        importlib.import_module("ptxkit.cfg.fence.fence")
    except ImportError:
        return "needs ptxkit installed in this Python (pip install -e . from the repository)"
    return hopper_unavailable_reason()


def _run_all(size: int, workdir: Path) -> list[dict]:
    shim = workdir / "ptxas"
    shim.write_text(SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    os.environ.update(
        TRITON_PTXAS_PATH=str(shim),
        PTXKIT_REAL_PTXAS=str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "ptxas"),
        TRITON_ALWAYS_COMPILE="1",
    )
    import torch

    torch.manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    expected = torch.matmul(a.float(), b.float())
    results = []
    for kernel_name, make in (("pointer", _pointer_launcher), ("tma", _tma_launcher)):
        runs = {}
        for build in BUILDS:
            log = workdir / f"{kernel_name}-{build}.jsonl"
            os.environ.update(
                TRITON_CACHE_DIR=str(workdir / f"cache-{kernel_name}-{build}"),
                PTXKIT_FENCE_MODE="fence" if build.endswith("ptxkit") else "off",
                PTXKIT_FENCE_LOG=str(log),
                BENCH_STRIP_FENCES="1" if build.startswith("stripped") else "0",
            )
            launch, compiled = make(a, b)  # compiles now, under this build's environment
            errors = [_relative_error(launch, expected) for _ in range(CHECKS)]
            entries = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
            fenced = build.endswith("ptxkit")
            runs[build] = {
                "kernel": kernel_name,
                "build": build,
                "launch": launch,
                "error": max(errors),
                "wrong": sum(error >= 1e-2 for error in errors),
                # builds without ptxkit's fences may race: their wrong results are reported, not
                # failed; a ptxkit build fails if wrong, or if Triton did not run the wrapper
                # (it silently falls back to its own ptxas when TRITON_PTXAS_PATH fails)
                "ok": not fenced or (max(errors) < 1e-2 and bool(entries)),
                "log": entries,
                "triton_fences": compiled().asm["ptx"].count("fence.proxy.async"),
                "sass_fences": _sass_fences(compiled().asm["cubin"]),
            }
        _time_interleaved(runs)
        results.extend(runs.values())
    return results


def _relative_error(launch, expected) -> float:
    """Launch once into a zeroed C; the largest error relative to the largest |expected|."""
    import torch

    c = launch(zero=True)
    torch.cuda.synchronize()
    return ((c.float() - expected).abs().max() / expected.abs().max()).item()


def _pointer_launcher(a, b):
    """A fresh JIT copy of `matmul_pointer` (its own in-memory cache), compiled now."""
    import torch

    m, k = a.shape
    n = b.shape[1]
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    return _launcher(triton.jit(matmul_pointer), c, a, b, c, m, n, k, *strides)


def _tma_launcher(a, b):
    """A fresh JIT copy of `matmul_tma` with host-side tensor descriptors, compiled now."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, k = a.shape
    n = b.shape[1]
    b_t = b.T.contiguous()  # N x K, K contiguous
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    descriptors = (
        TensorDescriptor.from_tensor(a, [BLOCK_M, BLOCK_K]),
        TensorDescriptor.from_tensor(b_t, [BLOCK_N, BLOCK_K]),
        TensorDescriptor.from_tensor(c, [BLOCK_M, BLOCK_N]),
    )
    return _launcher(triton.jit(matmul_tma), c, *descriptors, m, n, k)


def _launcher(kernel, c, *args):
    """Compile `kernel` for the benchmark's tiles now; returns (launch(zero=False) -> c,
    the compiled kernel). `c` is the output, zeroed first when asked."""
    m, n = c.shape
    grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
    holder = {}

    def launch(zero=False):
        if zero:
            c.zero_()
        holder["compiled"] = kernel[grid](*args, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, BLOCK_K=BLOCK_K,
                                          num_warps=WARPS, num_stages=STAGES)
        return c

    launch()
    return launch, lambda: holder["compiled"]


def _sass_fences(cubin: bytes) -> int | None:
    """FENCE.VIEW.ASYNC instructions in a cubin (Triton's bundled cuobjdump); None without it."""
    tool = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
    tool = str(tool) if tool.exists() else shutil.which("cuobjdump")
    if not tool:
        return None
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "k.cubin")
        Path(path).write_bytes(cubin)
        done = subprocess.run([tool, "-sass", path], capture_output=True, text=True, timeout=300)
    return done.stdout.count("FENCE.VIEW.ASYNC") if done.returncode == 0 else None


def _time_interleaved(runs: dict) -> None:
    """Median of do_bench medians over ROUNDS rounds that visit every build in turn."""
    import statistics

    from triton.testing import do_bench

    times = {build: [] for build in runs}
    for _ in range(ROUNDS):
        for build, run in runs.items():
            times[build].append(do_bench(run["launch"], warmup=25, rep=100, return_mode="median"))
    for build, run in runs.items():
        run["ms"] = statistics.median(times[build])
        run["spread"] = (max(times[build]) - min(times[build])) / run["ms"]
        del run["launch"]


def _fence_summary(run: dict) -> str:
    added = [fence for entry in run["log"] for fence in entry["fences"]]
    if not run["build"].endswith("ptxkit"):
        return "-"
    if not run["log"]:
        return "WRAPPER NOT RUN"
    return f"{len(added)} added" if added else "none missing"


def _print_table(results: list[dict], size: int) -> None:
    print(f"Triton fp16 matmul {size}x{size}x{size}, tiles {BLOCK_M}x{BLOCK_N}x{BLOCK_K}, "
          f"{STAGES} stages, {WARPS} warps; do_bench median of {ROUNDS} interleaved rounds")
    header = (f"{'kernel':<8} {'build':<16} {'PTX fences':>10} {'ptxkit':>16} {'SASS FENCE':>10} "
              f"{'max rel. err':>12} {'wrong':>9} {'ms':>9} {'spread':>7} {'vs triton':>9}")
    print(header)
    print("-" * len(header))
    anchors = {r["kernel"]: r["ms"] for r in results if r["build"] == "triton"}
    for r in results:
        sass = "?" if r["sass_fences"] is None else str(r["sass_fences"])
        print(f"{r['kernel']:<8} {r['build']:<16} {r['triton_fences']:>10} {_fence_summary(r):>16} {sass:>10} "
              f"{r['error']:>12.2e} {r['wrong']:>5}/{CHECKS:<3} {r['ms']:>9.4f} {100 * r['spread']:>6.1f}% {r['ms'] / anchors[r['kernel']]:>9.3f}")
    print("PTX fences: fence.proxy.async in Triton's PTX (before the wrapper strips or adds any);"
          " anchor: the 'triton' build of the same kernel, timed in the same rounds")
    for r in results:
        for entry in r["log"]:
            for fence in entry["fences"]:
                print(f"  {r['kernel']}/{r['build']}: {fence['variant']} {fence['where']} line {fence['line']}"
                      f" ({fence['placement']}): {fence['reason']}")
    times = {(r["kernel"], r["build"]): r["ms"] for r in results}
    for kernel in anchors:
        for fenced, unfenced in (("ptxkit", "triton"), ("stripped+ptxkit", "stripped")):
            ratio = times[kernel, fenced] / times[kernel, unfenced]
            verdict = "met" if ratio <= 1.02 else "NOT met"
            print(f"target {kernel}: {fenced} / {unfenced} = {ratio:.3f} (within 2%: {verdict})")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
