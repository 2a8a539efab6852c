"""The fence pass on real compiler output: sm_90a PTX that nvcc generates in the test.

One kernel stores a tile to shared memory in C++ and runs wgmma on it through inline
assembly; the other fills the tile with cp.async (and waits for it) before the wgmma.
Checks: exactly the expected fence, in the right place; every other byte of nvcc's
PTX unchanged; the pass is idempotent; ptxas accepts the result.
"""

from __future__ import annotations

import difflib
import subprocess

import pytest

from ptxkit.cfg.fence.fence import fence_text

pytestmark = [pytest.mark.nvcc, pytest.mark.ptxas]

PRELUDE = r"""
#include <cuda_fp16.h>
#include <cstdint>
__device__ __forceinline__ uint64_t desc_of(const void* smem) {
  uint64_t address = static_cast<uint64_t>(__cvta_generic_to_shared(smem));
  return ((address & 0x3FFFF) >> 4) | (1ull << 62);
}
__device__ __forceinline__ void wgmma(float (&d)[4], uint64_t desc) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %5, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %4, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "l"(desc), "r"(0));
  asm volatile("wgmma.commit_group.sync.aligned;\nwgmma.wait_group.sync.aligned 0;" ::: "memory");
}
"""

STORE_THEN_WGMMA = PRELUDE + r"""
__global__ void store_then_wgmma(float* out, const __half* in) {
  __shared__ __align__(128) __half tile[64 * 16];
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) tile[i] = in[i];
  __syncthreads();
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  wgmma(d, desc_of(tile));
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
"""

CP_ASYNC_THEN_WGMMA = PRELUDE + r"""
__global__ void cp_async_then_wgmma(float* out, const __half* in) {
  __shared__ __align__(128) __half tile[64 * 16];
  for (int i = threadIdx.x * 8; i < 64 * 16; i += blockDim.x * 8) {
    uint32_t dst = static_cast<uint32_t>(__cvta_generic_to_shared(tile + i));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(dst), "l"(in + i) : "memory");
  }
  asm volatile("cp.async.commit_group;\ncp.async.wait_group 0;" ::: "memory");
  __syncthreads();
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  wgmma(d, desc_of(tile));
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
"""

# A struct passed by value: a -G build keeps it, and the pointer in it, in stack frames
# (the kernel's frame lets its address out, for `d`). The first fill of `tile` is fenced
# by hand; the second fill writes `scratch`, another buffer: nothing is missing. Written
# into `tile` instead, the second fill needs a fence before the wgmma (PTX ISA, proxies:
# a generic write, then an async-proxy read of the same bytes).
TWO_BUFFERS = PRELUDE + r"""
struct View { __half* p; int n; };
__device__ void fill(View v, const __half* in) {
  for (int i = threadIdx.x; i < v.n; i += blockDim.x) v.p[i] = in[i];
}
__global__ void two_buffers(float* out, const __half* in) {
  __shared__ __align__(128) __half tile[64 * 16];
  __shared__ __align__(16) __half scratch[256];
  fill(View{tile, 64 * 16}, in);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  fill(View{SECOND, 256}, in);
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  wgmma(d, desc_of(tile));
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3] + __half2float(scratch[threadIdx.x % 256]);
}
"""

FENCE = "fence.proxy.async.shared::cta;"


def nvcc_ptx(source: str, tmp_path, *flags: str) -> str:
    cu = tmp_path / "kernel.cu"
    cu.write_text(source)
    subprocess.run(["nvcc", "-arch=sm_90a", *flags, "-ptx", str(cu), "-o", str(tmp_path / "kernel.ptx")], check=True)
    return (tmp_path / "kernel.ptx").read_text()


def check(ptx: str, tmp_path) -> list[str]:
    """Fence nvcc's PTX; check the round trip and ptxas; return the fenced statements."""
    from ptxkit.ptxas import assemble

    fenced, report = fence_text(ptx, "kernel.ptx")
    assert [f.text for f in report.fences] == [FENCE]
    assert fenced.replace(FENCE + "\n", "", 1) == ptx  # every other byte as nvcc wrote it
    assert fence_text(fenced, "kernel.ptx")[0] == fenced
    assemble(fenced, "sm_90a", filename="kernel.ptx", cache=False)
    return [line.strip() for line in fenced.splitlines() if line.strip()]


def test_shared_store_then_wgmma(tmp_path):
    lines = check(nvcc_ptx(STORE_THEN_WGMMA, tmp_path), tmp_path)
    at = lines.index(FENCE)
    assert lines[at + 1].startswith("wgmma.mma_async")  # inside nvcc's inline-asm { } scope
    assert any(line.startswith("st.shared") for line in lines[:at]) and "bar.sync \t0;" in lines[:at]


def test_cp_async_then_wgmma(tmp_path):
    ptx = nvcc_ptx(CP_ASYNC_THEN_WGMMA, tmp_path)
    assert "st.shared" not in ptx  # the only generic writes are the cp.async ones
    lines = check(ptx, tmp_path)
    at = lines.index(FENCE)
    assert lines[at + 1].startswith("wgmma.mma_async")
    wait = next(i for i, line in enumerate(lines) if line.startswith("cp.async.wait_group"))
    assert wait < at  # after the wait that completes the cp.async writes


@pytest.mark.parametrize("flags", [(), ("-G",)])
def test_a_struct_passed_by_value_keeps_its_buffer_apart(flags, tmp_path):
    ptx = nvcc_ptx(TWO_BUFFERS.replace("SECOND", "scratch"), tmp_path, *flags)
    assert ("%SP" in ptx) == bool(flags)  # -G: the View and its pointer go through stack frames
    fenced, report = fence_text(ptx, "kernel.ptx")
    assert report.fences == [] and fenced == ptx
    from ptxkit.ptxas import assemble

    ptx = nvcc_ptx(TWO_BUFFERS.replace("SECOND", "tile"), tmp_path, *flags)
    fenced, report = fence_text(ptx, "kernel.ptx")
    assert [f.text for f in report.fences] == [FENCE]
    changed = [line for line in difflib.ndiff(ptx.splitlines(), fenced.splitlines()) if line[:2] in ("+ ", "- ")]
    assert [line.strip() for line in changed] == ["+ " + FENCE]  # one line added, every other byte kept
    lines = [line.strip() for line in fenced.splitlines()]
    assert lines[len(lines) - 1 - lines[::-1].index(FENCE) + 1].startswith("wgmma.mma_async")
    assemble(fenced, "sm_90a", filename="kernel.ptx", cache=False)
