"""Real compiler output: PTX that nvcc writes in several modes round-trips exactly."""

from __future__ import annotations

import subprocess

import pytest

import ptxkit
from ptxkit.syntax import Block, Label

pytestmark = pytest.mark.nvcc

SOURCE = r"""
#include <cstdio>
#include <cuda/barrier>

__device__ __noinline__ float helper(float v) { return v * v + 1.0f; }

__global__ void plain(const float* x, float* y, int n) {
  __shared__ float s[256];
  float acc = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) acc += helper(x[i]);
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int k = blockDim.x / 2; k > 0; k >>= 1) {
    if (threadIdx.x < k) s[threadIdx.x] += s[threadIdx.x + k];
    __syncthreads();
  }
  if (threadIdx.x == 0) { y[blockIdx.x] = s[0]; printf("%f\n", s[0]); }
}

__device__ __forceinline__ void wait_parity(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n"
      ".reg .pred P1;\n"
      "LAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\n"
      "bra LAB_WAIT;\n"
      "DONE:\n"
      "}\n" :: "r"(bar), "r"(parity) : "memory");
}

__global__ void hopper(float* out, const void* gmem) {
  __shared__ __align__(1024) unsigned char tile[4096];
  __shared__ __align__(8) unsigned long long bar;
  unsigned bar_addr = static_cast<unsigned>(__cvta_generic_to_shared(&bar));
  unsigned tile_addr = static_cast<unsigned>(__cvta_generic_to_shared(tile));
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(bar_addr));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], 4096;" :: "r"(bar_addr));
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 4096, [%2];"
                 :: "r"(tile_addr), "l"(gmem), "r"(bar_addr) : "memory");
  }
  __syncthreads();
  wait_parity(bar_addr, 0);
  wait_parity(bar_addr, 1);
  reinterpret_cast<float*>(tile)[threadIdx.x] += 1.0f;
  unsigned long long desc = (unsigned long long)((tile_addr & 0x3FFFF) >> 4);
  float d0 = 0.f, d1 = 0.f, d2 = 0.f, d3 = 0.f;
  asm volatile("wgmma.fence.sync.aligned;");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%0, %1, %2, %3}, %4, %4, 0, 1, 1, 0, 0;"
               : "+f"(d0), "+f"(d1), "+f"(d2), "+f"(d3) : "l"(desc));
  asm volatile("wgmma.commit_group.sync.aligned;");
  asm volatile("wgmma.wait_group.sync.aligned 0;");
  out[threadIdx.x] = d0 + d1 + d2 + d3 + reinterpret_cast<float*>(tile)[threadIdx.x];
}
"""

MODES = {
    "plain": ["-arch=sm_90a"],
    "lineinfo": ["-arch=sm_90a", "-lineinfo"],
    "debug": ["-arch=sm_90a", "-G"],
}


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("nvcc")
    source = directory / "kernels.cu"
    source.write_text(SOURCE)
    outputs = {}
    for mode, flags in MODES.items():
        ptx = directory / f"{mode}.ptx"
        subprocess.run(["nvcc", "-ptx", *flags, str(source), "-o", str(ptx)], check=True, capture_output=True)
        outputs[mode] = ptx.read_text()
    return outputs


@pytest.mark.parametrize("mode", MODES)
def test_nvcc_output_round_trips_and_parses_in_full(generated, mode):
    text = generated[mode]
    module = ptxkit.parse(text, f"{mode}.ptx").check()
    assert str(module) == text
    names = " ".join(f.name for f in module.functions)
    assert "5plain" in names and "6hopper" in names and "vprintf" in names


def test_debug_build_keeps_sections_and_loc(generated):
    module = ptxkit.parse(generated["debug"])
    assert "debug" in module.targets
    assert len(module.directives(".section")) >= 3
    assert any(d.name == ".loc" for f in module.functions for d in f.walk())


def test_inline_asm_scopes_resolve_labels_locally(generated):
    module = ptxkit.parse(generated["plain"])
    hopper = next(f for f in module.functions if "hopper" in f.name)
    scopes = [n for n in hopper.walk() if isinstance(n, Block) and any(isinstance(i, Label) for i in n.items)]
    assert len(scopes) >= 2  # the inline asm block was inlined twice
    for scope in scopes:
        branch = next(i for i in scope.items if getattr(i, "base", None) == "bra" and i.guard is None)
        assert branch.scope.resolve_label(branch.operands[0].name).scope is scope
    opcodes = {i.opcode for i in hopper.instructions()}
    assert "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16" in opcodes
    assert "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes" in opcodes


@pytest.mark.ptxas
@pytest.mark.parametrize("mode", MODES)
def test_edited_nvcc_output_still_assembles(generated, mode):
    module = ptxkit.parse(generated[mode])
    before = str(module)
    rets = [i for i in module.instructions() if i.base == "ret"]
    for ret in rets:
        ret.insert_before("membar.cta;")
    after = str(module)
    assert after.count("membar.cta;") == before.count("membar.cta;") + len(rets)
    assert after.replace("\tmembar.cta;\n", "") == before.replace("\tmembar.cta;\n", "")
    ptxkit.assemble(after, arch="sm_90a")
