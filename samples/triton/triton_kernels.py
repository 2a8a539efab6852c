"""Triton kernels written for ptxkit: the PTX samples in this folder, the Triton hook's
tests and the Triton benchmarks compile these. They are plain functions: wrap one with
``triton.jit`` for a fresh jit function (with its own in-memory cache).

- `matmul_pointer`: C = A @ B from pointer tensors; Triton pipelines the loads with
  ``cp.async`` into shared memory and feeds ``wgmma`` (``cp.async`` writes through the
  generic proxy).
- `matmul_tma`: C = A @ B^T from host-side tensor descriptors: TMA loads, ``wgmma``, and a
  TMA store of C (``stmatrix`` then ``cp.async.bulk.tensor``).
- `softmax`, `layernorm`: row kernels without async-proxy operations.

`launch_pointer` and `launch_tma` run the matmuls on torch tensors; `strip_fences` is a
pipeline hook that removes Triton's own ``fence.proxy.async`` (to see what ptxkit puts back).
"""

from __future__ import annotations  # the kernels' `tl.constexpr` annotations stay strings

import re

import triton
import triton.language as tl

#: the tiles and compile options of the benchmarks and tests
TILE = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}
OPTIONS = {"num_warps": 4, "num_stages": 4}
#: a fence.proxy.async line of PTX
FENCE = re.compile(r"^[ \t]*fence\.proxy\.async[^;\n]*;[ \t]*\n", re.M)


def matmul_pointer(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                   stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr):
    """C = A @ B from pointer tensors (cp.async into shared memory, then wgmma)."""
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


def matmul_tma(a_desc, b_desc, c_desc, M, N, K, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
               BLOCK_K: tl.constexpr):
    """C = A @ B^T from host-side tensor descriptors (TMA loads, wgmma, a TMA store)."""
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


def softmax(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols, BLOCK: tl.constexpr):
    """Row-wise softmax, rows strided over the programs."""
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=2):
        offs = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + offs, mask=offs < n_cols, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        tl.store(out_ptr + row * out_stride + offs, num / tl.sum(num, axis=0), mask=offs < n_cols)


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


def _grid(m: int, n: int, tile: dict) -> tuple[int]:
    return (triton.cdiv(m, tile["BLOCK_M"]) * triton.cdiv(n, tile["BLOCK_N"]),)


def launch_pointer(kernel, a, b, tile=TILE, options=OPTIONS):
    """Launch jit function `kernel` (of `matmul_pointer`) on fp16 CUDA tensors into a
    zeroed C; returns (C, the compiled kernel)."""
    import torch

    m, n = a.shape[0], b.shape[1]
    c = torch.zeros(m, n, device=a.device, dtype=torch.float16)
    compiled = kernel[_grid(m, n, tile)](a, b, c, m, n, a.shape[1], a.stride(0), a.stride(1), b.stride(0),
                                         b.stride(1), c.stride(0), c.stride(1), **tile, **options)
    return c, compiled


def launch_tma(kernel, a, b, tile=TILE, options=OPTIONS):
    """Launch jit function `kernel` (of `matmul_tma`) on fp16 CUDA tensors into a zeroed
    C, with host-side descriptors; returns (C, the compiled kernel)."""
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor

    m, n = a.shape[0], b.shape[1]
    c = torch.zeros(m, n, device=a.device, dtype=torch.float16)
    descriptors = (TensorDescriptor.from_tensor(a, [tile["BLOCK_M"], tile["BLOCK_K"]]),
                   TensorDescriptor.from_tensor(b.T.contiguous(), [tile["BLOCK_N"], tile["BLOCK_K"]]),
                   TensorDescriptor.from_tensor(c, [tile["BLOCK_M"], tile["BLOCK_N"]]))
    return c, kernel[_grid(m, n, tile)](*descriptors, m, n, a.shape[1], **tile, **options)


def strip_fences(*args):
    """A pipeline hook of Triton's own kind (``knobs.runtime.add_stages_inspection_hook``)
    that removes Triton's fence.proxy.async lines from the PTX. Called with no arguments
    (Triton 3.7 and later) it gives its part of the cache key."""
    if not args:
        return "strip-fences", "strip-fences"
    stages = args[1]
    make_ptx = stages["ptx"]
    stages["ptx"] = lambda src, metadata: FENCE.sub("", make_ptx(src, metadata))
    return None


def hopper_unavailable_reason() -> str | None:
    """Why the matmuls cannot run here (no torch, no GPU, not a Hopper GPU), or None."""
    try:
        import torch
    except ImportError:
        return "needs torch"
    if not torch.cuda.is_available():
        return "no CUDA GPU visible to torch"
    if torch.cuda.get_device_capability() != (9, 0):
        return f"needs a Hopper GPU (sm_90), found {torch.cuda.get_device_name()}"
    return None
