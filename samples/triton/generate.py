"""Regenerate the Triton-sized PTX samples in this folder from the Triton kernels below.

The kernels are written for ptxkit's benchmarks (a pointer and a TMA matmul, a softmax, a
layer norm); Triton compiles them for an explicit ``GPUTarget("cuda", 90, 32)``, which
needs no GPU. The PTX is what Triton hands to ptxas: 20-45 KB, the size of a small
kernel that an autotuning run compiles in hundreds of variants.

    python samples/triton/generate.py      # needs `pip install triton==3.6.0`

Each file is written only when its text changed, so a rerun with the same Triton keeps
the committed files as they are.
"""

from __future__ import annotations  # the kernels' `tl.constexpr` annotations stay strings

import sys
import tempfile
from pathlib import Path

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget

HERE = Path(__file__).resolve().parent
TARGET = GPUTarget("cuda", 90, 32)


@triton.jit
def matmul_pointer(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    """C = A @ B from pointer tensors: Triton pipelines the loads with cp.async into wgmma."""
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BLOCK_N)
    offs_m = (pid // num_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = (pid % num_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BLOCK_K, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BLOCK_K, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(tl.float16), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))


@triton.jit
def matmul_tma(a_ptr, b_ptr, c_ptr, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    """C = A @ B^T through device-side tensor descriptors: TMA loads, wgmma, a TMA store."""
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BLOCK_M, BLOCK_K])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[N, K], strides=[K, 1], block_shape=[BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1], block_shape=[BLOCK_M, BLOCK_N])
    pid = tl.program_id(0)
    num_n = tl.cdiv(N, BLOCK_N)
    off_m = (pid // num_n) * BLOCK_M
    off_n = (pid % num_n) * BLOCK_N
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = a_desc.load([off_m, k * BLOCK_K])
        b = b_desc.load([off_n, k * BLOCK_K])
        acc = tl.dot(a, b.T, acc)
    c_desc.store([off_m, off_n], acc.to(tl.float16))


@triton.jit
def softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    """Row-wise softmax, rows strided over the programs."""
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=2):
        offs = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + offs, mask=offs < n_cols, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=offs < n_cols)


@triton.jit
def layernorm(x_ptr, y_ptr, w_ptr, b_ptr, stride, N, eps, BLOCK: tl.constexpr):
    """One row per program: mean, variance, then (x - mean) * rstd * w + b in fp16."""
    row = tl.program_id(0)
    x_ptr += row * stride
    y_ptr += row * stride
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        acc += tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
    mean = tl.sum(acc, axis=0) / N
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + cols, mask=cols < N, other=0.0).to(tl.float32)
        x = tl.where(cols < N, x - mean, 0.0)
        acc += x * x
    rstd = 1 / tl.sqrt(tl.sum(acc, axis=0) / N + eps)
    for off in range(0, N, BLOCK):
        cols = off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        tl.store(y_ptr + cols, ((x - mean) * rstd * w + b).to(tl.float16), mask=mask)


_MATMUL = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
# row-major operands, as `kernel[grid](...)` specializes them: unit strides become constants
_STRIDES = {"stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
            "stride_cm": "i32", "stride_cn": "constexpr"}
_UNIT_STRIDES = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
_TILE = {"BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}

#: file stem -> (kernel, signature, constexprs, compile options)
SAMPLES = {
    "matmul_pointer_64x64x32": (matmul_pointer, {**_MATMUL, **_STRIDES, **_TILE},
                                {**_UNIT_STRIDES, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, {"num_warps": 4, "num_stages": 3}),
    "matmul_pointer_64x64x64": (matmul_pointer, {**_MATMUL, **_STRIDES, **_TILE},
                                {**_UNIT_STRIDES, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64}, {"num_warps": 4, "num_stages": 3}),
    "matmul_tma_64x64x32": (matmul_tma, {**_MATMUL, **_TILE},
                            {"BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32}, {"num_warps": 4, "num_stages": 3}),
    "matmul_tma_128x128x64": (matmul_tma, {**_MATMUL, **_TILE},
                              {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, {"num_warps": 4, "num_stages": 4}),
    "softmax_4096": (softmax, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
                               "n_rows": "i32", "n_cols": "i32", "BLOCK": "constexpr"},
                     {"BLOCK": 4096}, {"num_warps": 8}),
    "layernorm_1024": (layernorm, {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp32", "b_ptr": "*fp32",
                                   "stride": "i32", "N": "i32", "eps": "fp32", "BLOCK": "constexpr"},
                       {"BLOCK": 1024}, {"num_warps": 8}),
}


def compile_to_ptx(name: str) -> str:
    """The PTX Triton generates for sample `name` (sm_90, no GPU needed)."""
    kernel, signature, constexprs, options = SAMPLES[name]
    # pointers and integer arguments divisible by 16, as Triton specializes sizes like 4096
    aligned = {(index,): [["tt.divisibility", 16]]
               for index, kind in enumerate(signature.values()) if kind.startswith("*") or kind == "i32"}
    source = triton.compiler.ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=aligned)
    return triton.compile(source, target=TARGET, options=options).asm["ptx"]


def main() -> int:
    with tempfile.TemporaryDirectory() as cache:
        triton.knobs.cache.dir = cache  # a fresh cache: compile every sample now
        for name in SAMPLES:
            text = compile_to_ptx(name)
            path = HERE / f"{name}.ptx"
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
            print(f"{path.name}: {len(text.encode())} bytes, {text.count('fence.proxy.async')} fence.proxy.async")
    return 0


if __name__ == "__main__":
    sys.exit(main())
