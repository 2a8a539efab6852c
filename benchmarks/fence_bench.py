"""Benchmark: ``ptxkit fence`` throughput in process, and its cost next to ptxas.

Workloads: all ``samples/fence`` inputs (tiny); real compiler output: a wgmma GEMM
(64 accumulators, four tile configurations, about 145 KB) that nvcc compiles for
sm_90a in the run, in release and ``-G`` (skipped without nvcc); any PTX files given
with ``--real`` (expert kernels built outside the repository); and synthetic sm_90a kernels shaped like
Hopper code (TMA loads, mbarrier waits, wgmma chains, guarded epilogue stores and TMA
stores, if/else arms, loops, unrolled arithmetic): one kernel of about 120 KB, a
multi-megabyte file of many such kernels, and a single multi-megabyte function
(thousands of blocks, the pass's scaling case; ptxas is not run on it: one huge
function takes it minutes).

For each workload: parse time, pass time (`fence_module`: CFGs, analysis, placement,
rewrite) and print time, in-process throughput (MB/s of input over the three), and
the anchor, ``ptxas -arch=sm_90a`` on the same file, measured in the same run, with
the ratio (target: under 5 % for kernels of 100 KB and more); and for each file given
with ``--real``, the whole ``ptxkit fence -o OUT FILE`` process as a user runs it
(this interpreter, bytecode caching on, ``-P`` passed on), against the same ptxas.
Times are the best of a few runs.

    python benchmarks/fence_bench.py            # full table
    python benchmarks/fence_bench.py --quick    # smaller inputs, no ptxas on the big file
    python benchmarks/fence_bench.py --real /tmp/rk/*/*.ptx   # and these kernels
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ptxkit import parse
from ptxkit.cfg.fence.fence import FenceOptions, fence_module

ROOT = Path(__file__).resolve().parent.parent

WGMMA = "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p7, 1, 1, 0, 0;"


GEMM_CU = r"""
#include <cuda_fp16.h>
#include <cstdint>
#define ACC(i) "+f"(d[i])
__device__ __forceinline__ uint64_t desc_of(const void* smem) {
  uint64_t address = static_cast<uint64_t>(__cvta_generic_to_shared(smem));
  return ((address & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ void wgmma_128(float (&d)[64], uint64_t a, uint64_t b) {
  asm volatile(
    "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
    "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 "
    "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
    "%64, %65, p, 1, 1, 0, 0;\n}\n"
    : ACC(0), ACC(1), ACC(2), ACC(3), ACC(4), ACC(5), ACC(6), ACC(7), ACC(8), ACC(9), ACC(10), ACC(11),
      ACC(12), ACC(13), ACC(14), ACC(15), ACC(16), ACC(17), ACC(18), ACC(19), ACC(20), ACC(21), ACC(22),
      ACC(23), ACC(24), ACC(25), ACC(26), ACC(27), ACC(28), ACC(29), ACC(30), ACC(31), ACC(32), ACC(33),
      ACC(34), ACC(35), ACC(36), ACC(37), ACC(38), ACC(39), ACC(40), ACC(41), ACC(42), ACC(43), ACC(44),
      ACC(45), ACC(46), ACC(47), ACC(48), ACC(49), ACC(50), ACC(51), ACC(52), ACC(53), ACC(54), ACC(55),
      ACC(56), ACC(57), ACC(58), ACC(59), ACC(60), ACC(61), ACC(62), ACC(63)
    : "l"(a), "l"(b), "r"(1));
}
template <int STAGES, int KTILES>
__global__ void __launch_bounds__(128) gemm(float* out, const __half* A, const __half* B, int k_total, float alpha) {
  __shared__ __align__(1024) __half sA[STAGES][64 * 64];
  __shared__ __align__(1024) __half sB[STAGES][128 * 64];
  float d[64];
  #pragma unroll
  for (int i = 0; i < 64; ++i) d[i] = 0.f;
  for (int k0 = 0; k0 < k_total; k0 += 64 * STAGES) {
    #pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      #pragma unroll 4
      for (int i = threadIdx.x; i < 64 * 64; i += 128) sA[s][i] = A[k0 * 64 + s * 4096 + i];
      #pragma unroll 4
      for (int i = threadIdx.x; i < 128 * 64; i += 128) sB[s][i] = B[k0 * 128 + s * 8192 + i];
    }
    __syncthreads();
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
    #pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      #pragma unroll
      for (int kk = 0; kk < KTILES; ++kk) wgmma_128(d, desc_of(&sA[s][kk * 16]), desc_of(&sB[s][kk * 16]));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;" ::: "memory");
    __syncthreads();
  }
  #pragma unroll
  for (int i = 0; i < 64; ++i) {
    int row = (threadIdx.x / 32) * 16 + (i / 32) * 8 + (threadIdx.x % 32) / 4;
    int col = (i % 32) / 2 * 8 + (threadIdx.x % 4) * 2 + (i % 2);
    float prior = out[row * 128 + col];
    out[row * 128 + col] = alpha * d[i] + (prior > 0.f ? prior * 0.5f : prior);
  }
}
template __global__ void gemm<1, 4>(float*, const __half*, const __half*, int, float);
template __global__ void gemm<2, 4>(float*, const __half*, const __half*, int, float);
template __global__ void gemm<3, 4>(float*, const __half*, const __half*, int, float);
template __global__ void gemm<4, 4>(float*, const __half*, const __half*, int, float);
"""


def nvcc_gemm(workdir: Path, *flags: str) -> str | None:
    """nvcc's sm_90a PTX for `GEMM_CU` (with extra `flags`, e.g. ``-G``), or None without nvcc."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    source = workdir / "gemm.cu"
    source.write_text(GEMM_CU)
    out = workdir / f"gemm{''.join(flags)}.ptx"
    subprocess.run([nvcc, "-arch=sm_90a", "-ptx", *flags, str(source), "-o", str(out)], check=True)
    return out.read_text()


def synthetic_kernel(name: str, sections: int, math: int = 24) -> str:
    """One .entry of `sections` GEMM-like sections (about 5 KB each with math=24)."""
    out = [f".visible .entry {name}(", "\t.param .u64 p_out,", "\t.param .u32 p_n,",
           "\t.param .align 64 .b8 p_tmap[128]", ")", ".maxntid 256, 1, 1", "{",
           "\t.reg .pred \t%p<16>;", "\t.reg .b16 \t%h<8>;", "\t.reg .b32 \t%r<64>;", "\t.reg .b64 \t%rd<32>;",
           "\t.reg .f32 \t%f<64>;", "\t.shared .align 1024 .b8 smem[32768];", "\t.shared .align 8 .b64 bars[8];", "",
           "\tmov.u32 \t%r1, smem;", "\tmov.u32 \t%r2, bars;", "\tmov.u64 \t%rd3, p_tmap;",
           "\tld.param.u64 \t%rd4, [p_out];", "\tcvta.to.global.u64 \t%rd5, %rd4;", "\tld.param.u32 \t%r9, [p_n];",
           "\tmov.u32 \t%r3, %tid.x;", "\tmov.b64 \t%rd1, 0;", "\tmov.b64 \t%rd2, 0;", "\tmov.b32 \t%r0, 0;",
           "\tsetp.ne.b32 \t%p7, %r9, 0;", "\tsetp.eq.u32 \t%p1, %r3, 0;", "\tsetp.lt.u32 \t%p2, %r3, 128;",
           "\tmov.f32 \t%f1, 0f00000000;", "\tmov.f32 \t%f2, 0f00000000;", "\tmov.f32 \t%f3, 0f00000000;",
           "\tmov.f32 \t%f4, 0f00000000;", "\t@%p1 mbarrier.init.shared::cta.b64 \t[%r2], 1;",
           "\tfence.mbarrier_init.release.cluster;", "\tbar.sync \t0;"]
    for i in range(sections):
        offset = (i * 128) % 32000
        out += [
            f"$L_load{i}:",
            "\t@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 \t_, [%r2], 4096;",
            f"\t@%p1 cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
            f"[%r1+{offset}], [%rd3, {{%r0}}], [%r2];",
            f"$L_wait{i}:",
            f"\tmbarrier.try_wait.parity.shared::cta.b64 \t%p3, [%r2], {i % 2};",
            f"\t@!%p3 bra \t$L_wait{i};",
            "\tmov.u32 \t%r20, 0;",
            f"$L_k{i}:",
            "\twgmma.fence.sync.aligned;",
            *["\t" + WGMMA] * 4,
            "\twgmma.commit_group.sync.aligned;",
            "\twgmma.wait_group.sync.aligned \t0;",
            "\tadd.s32 \t%r20, %r20, 1;",
            "\tsetp.lt.s32 \t%p4, %r20, 4;",
            f"\t@%p4 bra \t$L_k{i};",
        ]
        for j in range(math):  # the unrolled epilogue arithmetic that dominates real kernels
            a, b = 8 + (i + j) % 40, 8 + (i + 3 * j) % 40
            out += [f"\tfma.rn.f32 \t%f{a}, %f{b}, %f1, %f{a};", f"\tmul.wide.u32 \t%rd{6 + j % 8}, %r3, {4 * (j + 1)};",
                    f"\tcvt.rn.f16.f32 \t%h{j % 4}, %f{b};"]
        out += [
            f"\tst.shared.b16 \t[%r1+{offset}], %h0;",
            f"\t@%p2 st.shared.v2.f32 \t[%r1+{offset + 64}], {{%f8, %f9}};",
            "\tbar.sync \t0;",
            f"\t@%p1 cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd3, {{%r0}}], [%r1+{offset}];",
            "\t@%p1 cp.async.bulk.commit_group;",
            "\t@%p1 cp.async.bulk.wait_group.read \t0;",
            f"\tst.shared.b16 \t[%r1+{offset + 2}], %h1;",
            "\tsetp.gt.u32 \t%p5, %r3, 64;",
            f"\t@!%p5 bra \t$L_else{i};",
            "\twgmma.fence.sync.aligned;",
            "\t" + WGMMA,
            f"\tbra.uni \t$L_join{i};",
            f"$L_else{i}:",
            "\twgmma.fence.sync.aligned;",
            "\t" + WGMMA,
            f"$L_join{i}:",
            "\twgmma.commit_group.sync.aligned;",
            "\twgmma.wait_group.sync.aligned \t0;",
            f"\tadd.f32 \t%f1, %f1, %f{8 + i % 40};",
        ]
    out += ["\tmul.wide.u32 \t%rd30, %r3, 4;", "\tadd.s64 \t%rd31, %rd5, %rd30;", "\tst.global.f32 \t[%rd31], %f1;",
            "\tret;", "}", ""]
    return "\n".join(out)


def synthetic_module(kernels: int, sections: int) -> str:
    head = "//\n// Synthetic sm_90a kernels for benchmarks/fence_bench.py\n//\n\n.version 8.0\n.target sm_90a\n" \
           ".address_size 64\n\n"
    return head + "\n".join(synthetic_kernel(f"k{i}", sections) for i in range(kernels))


def best_of(runs: int, action):
    best = float("inf")
    result = None
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        best = min(best, time.perf_counter() - start)
    return best, result


def measure_pass(text: str, name: str, runs: int) -> dict:
    """Best-of-`runs` parse / fence / print times, as the command line runs them (the
    collector on; the earlier runs' parsed modules, full of parent/child cycles, collected
    before each, outside the timing, as a process that ends after one run never collects
    them). The pass's own analyses go by reference counting when it returns: inside its time.
    Nothing of a run outlives it but its figures and its fence count: a report still held
    would keep its module alive, and every full collection of the next run would walk it."""
    def once() -> tuple[float, float, float, int]:
        gc.collect()
        t0 = time.perf_counter()
        module = parse(text, name)
        for _ in module.walk():  # the front end scans statements lazily: count that as parsing
            pass
        t1 = time.perf_counter()
        fences = len(fence_module(module, FenceOptions()).fences)
        t2 = time.perf_counter()
        str(module)
        t3 = time.perf_counter()
        return t1 - t0, t2 - t1, t3 - t2, fences

    timings = []
    for _ in range(runs):
        parse_s, fence_s, print_s, fences = once()
        timings.append((parse_s + fence_s + print_s, parse_s, fence_s, print_s))
    total, parse_s, fence_s, print_s = min(timings)
    return {"total": total, "parse": parse_s, "fence": fence_s, "print": print_s, "fences": fences}


def ptxas_seconds(path: Path, runs: int) -> float | None:
    """ptxas on `path` for its own target (sm_90a for all but a few samples); ``-c``
    (no linking) when the file calls extern functions."""
    ptxas = shutil.which("ptxas")
    if ptxas is None:
        return None
    text = path.read_text()
    arch = parse(text).targets[0]
    command = [ptxas, f"-arch={arch}", *(["-c"] if ".extern .func" in text else []), str(path), "-o", "/dev/null"]
    seconds, done = best_of(runs, lambda: subprocess.run(command, capture_output=True, text=True, check=False))
    if done.returncode != 0:
        raise SystemExit(f"ptxas failed on {path}:\n{done.stderr}")
    return seconds


def process_seconds(path: Path, out: Path, runs: int) -> float:
    """The whole ``ptxkit fence -o out path`` process with this interpreter (``-P`` when
    this one runs with it, so a compiled tree on ``PYTHONPATH`` stays first), bytecode
    caching on, after one run that writes the bytecode."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    command = [sys.executable, *(["-P"] if sys.flags.safe_path else []), "-m", "ptxkit", "fence", "-o", str(out),
               str(path)]
    seconds, done = best_of(runs + 1, lambda: subprocess.run(command, env=environment, capture_output=True, text=True))
    if done.returncode != 0:
        raise SystemExit(f"ptxkit fence failed on {path}:\n{done.stderr}")
    return seconds


def count_blocks(text: str) -> int:
    from ptxkit.cfg.flow.graph import flow_graph

    module = parse(text)
    return sum(len(flow_graph(f)) for f in module.functions if not f.is_declaration)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller inputs; ptxas only on the small ones")
    parser.add_argument("--real", nargs="*", default=[], metavar="PTX",
                        help="also time these files (real kernels built outside the repository), each on its own")
    args = parser.parse_args(argv)
    runs = 2 if args.quick else 3
    workdir = Path(tempfile.mkdtemp(prefix="ptxkit-fence-bench-"))
    samples = sorted((ROOT / "samples" / "fence").glob("*.ptx"))
    workloads = [(f"samples/fence ({len(samples)} files)", None, [p.read_text() for p in samples], True)]
    gemm = nvcc_gemm(workdir)
    if gemm is not None:
        workloads.append(("nvcc wgmma GEMM (4 kernels)", "gemm", [gemm], True))
        workloads.append(("nvcc wgmma GEMM, -G", "gemmG", [nvcc_gemm(workdir, "-G")], True))
    workloads.append(("synthetic: 1 kernel", "kernel", [synthetic_module(1, 30)], True))
    workloads.append(("synthetic: 16 kernels" if not args.quick else "synthetic: 4 kernels", "many",
                      [synthetic_module(4 if args.quick else 16, 30)], not args.quick))
    workloads.append(("synthetic: 1 huge function", "huge", [synthetic_module(1, 160 if args.quick else 640)], False))
    for path in args.real:
        workloads.append((Path(path).name[:40], Path(path).stem, [Path(path).read_text()], True))
    real = {Path(path).stem: Path(path) for path in args.real}
    rows = []
    for label, stem, texts, with_ptxas in workloads:
        size = sum(len(t.encode()) for t in texts)
        parse_s = fence_s = print_s = 0.0
        fences = blocks = 0
        for index, text in enumerate(texts):
            result = measure_pass(text, f"{stem or 'sample'}{index}.ptx", runs)
            parse_s += result["parse"]
            fence_s += result["fence"]
            print_s += result["print"]
            fences += result["fences"]
            blocks += count_blocks(text)
        anchor = None
        if with_ptxas:
            anchor = 0.0
            for index, text in enumerate(texts):
                path = workdir / f"{stem or 'sample'}{index}.ptx"
                path.write_text(text)
                seconds = ptxas_seconds(path, runs)
                anchor = None if seconds is None or anchor is None else anchor + seconds
        process = process_seconds(real[stem], workdir / "fenced.ptx", runs) if stem in real else None
        rows.append((label, size, blocks, fences, parse_s, fence_s, print_s, anchor, process))
    shutil.rmtree(workdir, ignore_errors=True)
    print_table(rows)
    return 0


def print_table(rows) -> None:
    header = ("workload", "size", "blocks", "fences", "parse ms", "pass ms", "print ms", "MB/s",
              "ptxas s", "pass/ptxas", "all/ptxas", "process/ptxas")
    lines = []
    for label, size, blocks, fences, parse_s, fence_s, print_s, anchor, process in rows:
        total = parse_s + fence_s + print_s
        ratio = f"{100 * fence_s / anchor:.1f} %" if anchor else "-"
        overall = f"{100 * total / anchor:.1f} %" if anchor else "-"
        whole = f"{100 * process / anchor:.1f} %" if anchor and process is not None else "-"
        lines.append((label, _size(size), str(blocks), str(fences), f"{1000 * parse_s:.1f}", f"{1000 * fence_s:.1f}",
                      f"{1000 * print_s:.1f}", f"{size / 1e6 / total:.1f}", f"{anchor:.2f}" if anchor else "-",
                      ratio, overall, whole))
    widths = [max(len(h), *(len(line[i]) for line in lines)) for i, h in enumerate(header)]
    print("ptxkit fence: in-process time (best of runs) vs ptxas -arch=sm_90a on the same file")
    print("  ".join(h.ljust(w) if i == 0 else h.rjust(w) for i, (h, w) in enumerate(zip(header, widths))))
    for line in lines:
        print("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(line, widths))))
    print("parse = ptxkit.parse and the front end's statement scan; pass = fence_module (CFGs, analysis,")
    print("placement, reasons, rewrite); all = parse + pass + print; MB/s over all;")
    print("process = the whole `ptxkit fence -o OUT FILE` process (--real files);")
    print("ptxas: best of the same number of runs, per file")


def _size(size: int) -> str:
    return f"{size / 1e6:.2f} MB" if size >= 1e6 else f"{size / 1e3:.0f} KB"


if __name__ == "__main__":
    sys.exit(main())
