"""Regenerate the Triton-sized PTX samples in this folder from the Triton kernels below.

The kernels (`triton_kernels`: a pointer and a TMA matmul, a softmax, a layer norm) are
written for ptxkit; Triton compiles them for an explicit ``GPUTarget("cuda", 90, 32)``,
which needs no GPU. The PTX is what Triton hands to ptxas: 20-45 KB, the size of a small
kernel that an autotuning run compiles in hundreds of variants. ``ws/`` holds three more
for the fence pass's tests: two matmuls Triton warp-specializes and a flash-attention
forward (40-60 KB).

    python samples/triton/generate.py      # needs `pip install triton==3.6.0`

Each file is written only when its text changed, so a rerun with the same Triton keeps
the committed files as they are.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import triton
from triton.backends.compiler import GPUTarget

from triton_kernels import layernorm, matmul_pointer, matmul_tma, softmax
from ws_kernels import attention_forward, matmul_in_kernel_descriptors, matmul_persistent

HERE = Path(__file__).resolve().parent
TARGET = GPUTarget("cuda", 90, 32)

_POINTERS = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
# row-major operands, as `kernel[grid](...)` specializes them: unit strides become constants
_STRIDES = {"stride_am": "i32", "stride_ak": "constexpr", "stride_bk": "i32", "stride_bn": "constexpr",
            "stride_cm": "i32", "stride_cn": "constexpr"}
_UNIT_STRIDES = {"stride_ak": 1, "stride_bn": 1, "stride_cn": 1}
_TILE = {"BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "BLOCK_K": "constexpr"}
TILE_128 = {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}


def _descriptors(m: int, n: int, k: int) -> dict:
    """The signature of `matmul_tma`'s host-side descriptors for an m x n x k tile."""
    return {"a_desc": f"tensordesc<fp16[{m}, {k}]>", "b_desc": f"tensordesc<fp16[{n}, {k}]>",
            "c_desc": f"tensordesc<fp16[{m}, {n}]>", "M": "i32", "N": "i32", "K": "i32", **_TILE}


#: file stem -> (kernel, signature, constexprs, compile options)
SAMPLES = {
    "matmul_pointer_64x64x32": (matmul_pointer, {**_POINTERS, **_STRIDES, **_TILE},
                                {**_UNIT_STRIDES, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 32},
                                {"num_warps": 4, "num_stages": 3}),
    "matmul_pointer_64x64x64": (matmul_pointer, {**_POINTERS, **_STRIDES, **_TILE},
                                {**_UNIT_STRIDES, "BLOCK_M": 64, "BLOCK_N": 64, "BLOCK_K": 64},
                                {"num_warps": 4, "num_stages": 3}),
    "matmul_tma_128x64x64": (matmul_tma, _descriptors(128, 64, 64),
                             {"BLOCK_M": 128, "BLOCK_N": 64, "BLOCK_K": 64}, {"num_warps": 4, "num_stages": 3}),
    "matmul_tma_128x128x64": (matmul_tma, _descriptors(128, 128, 64),
                              {"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64}, {"num_warps": 4, "num_stages": 4}),
    "softmax_4096": (softmax, {"out_ptr": "*fp32", "in_ptr": "*fp32", "in_stride": "i32", "out_stride": "i32",
                               "n_rows": "i32", "n_cols": "i32", "BLOCK": "constexpr"},
                     {"BLOCK": 4096}, {"num_warps": 8}),
    "layernorm_1024": (layernorm, {"x_ptr": "*fp16", "y_ptr": "*fp16", "w_ptr": "*fp32", "b_ptr": "*fp32",
                                   "stride": "i32", "N": "i32", "eps": "fp32", "BLOCK": "constexpr"},
                       {"BLOCK": 1024}, {"num_warps": 8}),
}
_WS = {**_TILE, "WARP_SPECIALIZE": "constexpr"}
#: the samples of ``ws/``, as `SAMPLES`
WARP_SPECIALIZED = {
    "ws/matmul_in_kernel_descriptors_ws": (matmul_in_kernel_descriptors, {**_POINTERS, **_WS},
                                           {**TILE_128, "WARP_SPECIALIZE": True}, {"num_warps": 4, "num_stages": 4}),
    "ws/matmul_persistent_ws": (matmul_persistent, {**_POINTERS, **_WS, "NUM_SMS": "constexpr"},
                                {**TILE_128, "NUM_SMS": 132, "WARP_SPECIALIZE": True},
                                {"num_warps": 4, "num_stages": 3}),
    "ws/attention_forward_128": (attention_forward, {
        "q_desc": "tensordesc<fp16[128, 128]>", "k_desc": "tensordesc<fp16[64, 128]>",
        "v_desc": "tensordesc<fp16[64, 128]>", "o_desc": "tensordesc<fp16[128, 128]>", "N_CTX": "i32",
        "sm_scale": "fp32", "HEAD": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr"},
        {"HEAD": 128, "BLOCK_M": 128, "BLOCK_N": 64}, {"num_warps": 8, "num_stages": 2}),
}


def compile_sample(name: str):
    """Triton's compiled kernel for sample `name` (sm_90, no GPU needed), through
    Triton's cache and pipeline hooks like any compile."""
    kernel, signature, constexprs, options = {**SAMPLES, **WARP_SPECIALIZED}[name]
    # pointers and integer arguments divisible by 16, as Triton specializes sizes like 4096
    aligned = {(index,): [["tt.divisibility", 16]]
               for index, kind in enumerate(signature.values()) if kind.startswith("*") or kind == "i32"}
    source = triton.compiler.ASTSource(fn=triton.jit(kernel), signature=signature, constexprs=constexprs,
                                       attrs=aligned)
    return triton.compile(source, target=TARGET, options=options)


def main() -> int:
    with tempfile.TemporaryDirectory() as cache:
        triton.knobs.cache.dir = cache  # a fresh cache: compile every sample now
        for name in {**SAMPLES, **WARP_SPECIALIZED}:
            text = compile_sample(name).asm["ptx"]
            path = HERE / f"{name}.ptx"
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
            print(f"{path.name}: {len(text.encode())} bytes, {text.count('fence.proxy.async')} fence.proxy.async")
    return 0


if __name__ == "__main__":
    sys.exit(main())
