"""ptxkit.cfg.values.specials: what a kernel's declarations say of its special registers,
and, on the GPU, what the driver holds a launch to (docs/fence.md §8, block shape)."""

from __future__ import annotations

import subprocess

import numpy as np
import pytest

import ptxkit
from ptxkit.cfg.values.specials import one_dimensional, special_ranges

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def kernel(directive: str) -> str:
    """A kernel that stores ``%tid.y << 16 | %laneid`` at its thread's linear index."""
    return (f"{HEAD}.visible .entry k(.param .u64 out) {directive}\n{{\n.reg .b32 %r<8>;\n.reg .b64 %rd<4>;\n"
            "\tld.param.u64 %rd1, [out];\n\tcvta.to.global.u64 %rd1, %rd1;\n\tmov.u32 %r1, %tid.x;\n"
            "\tmov.u32 %r2, %tid.y;\n\tmov.u32 %r3, %ntid.x;\n\tmad.lo.u32 %r4, %r2, %r3, %r1;\n"
            "\tmul.wide.u32 %rd2, %r4, 4;\n\tadd.u64 %rd3, %rd1, %rd2;\n\tmov.u32 %r5, %laneid;\n"
            "\tshl.b32 %r6, %r2, 16;\n\tor.b32 %r7, %r6, %r5;\n\tst.global.u32 [%rd3], %r7;\n\tret;\n}\n")


@pytest.mark.parametrize("directive, x, y, flat", [
    (".maxntid 384, 1, 1", (0, 383), (0, 0), True),
    (".maxntid 384", (0, 383), (0, 383), False),  # a bound on the threads: each dimension may take it all
    (".maxntid 128, 3, 1", (0, 127), (0, 2), False),
    (".maxntid 128, 3", (0, 127), (0, 2), False),
    (".reqntid 256, 1, 1", (0, 255), (0, 0), True),
    (".reqntid 256", (0, 255), (0, 0), True),  # the dimensions left out are 1, as the driver holds them
])
def test_what_a_declared_block_size_bounds(directive, x, y, flat):
    function = ptxkit.parse(kernel(directive)).function("k")
    ranges = special_ranges(function)
    assert (ranges["%tid.x"], ranges["%tid.y"], one_dimensional(function)) == (x, y, flat)


@pytest.mark.nvcc
def test_what_nvcc_writes_for_one_launch_bound_and_how_the_pass_reads_it(tmp_path):
    """nvcc 13 writes `__launch_bounds__(384)` as `.maxntid 384, 1, 1` for sm_90a, read as
    a one-dimensional block, and as a lone `.maxntid 384` for sm_100a, read as a bound on
    the threads alone (docs/fence.md §8 says why the two are not read alike yet)."""
    (tmp_path / "k.cu").write_text("__global__ void __launch_bounds__(384) k(int *p) { p[threadIdx.x] = 1; }\n")
    found = {}
    for arch in ("sm_90a", "sm_100a"):
        subprocess.run(["nvcc", f"-arch={arch}", "-ptx", "k.cu", "-o", f"{arch}.ptx"], cwd=tmp_path, check=True)
        function = ptxkit.parse((tmp_path / f"{arch}.ptx").read_text()).functions[0]
        declared = [args for name, args in function.signature.directives if name == ".maxntid"]
        found[arch] = (declared, special_ranges(function)["%tid.y"], one_dimensional(function))
    assert found == {"sm_90a": (["384, 1, 1"], (0, 0), True), "sm_100a": (["384"], (0, 383), False)}


@pytest.mark.gpu
@pytest.mark.parametrize("declared", ["384, 1, 1", "384"])
def test_the_driver_holds_a_launch_to_reqntid_but_not_to_the_shape_of_maxntid(declared):
    """`.maxntid 384, 1, 1` and `.maxntid 384` (what nvcc writes for `__launch_bounds__(384)`
    for sm_90a and for sm_100a) run with rows, their lanes numbered by the linear thread
    index; `.reqntid` of the same refuses them: the driver reads a lone 384 as 384 x 1 x 1.
    The pass reads `.maxntid 384, 1, 1` and both `.reqntid` as one-dimensional blocks: its
    answers hold for launches of that shape."""
    from ptxkit import runtime

    rows = runtime.load(ptxkit.assemble(kernel(f".maxntid {declared}"), arch="sm_90a")).kernel("k")
    out = np.full(384, 0xFFFFFFFF, np.uint32)
    rows.launch(runtime.Out(out), grid=1, block=(128, 3, 1))
    assert list(out >> 16) == [t // 128 for t in range(384)]
    assert list(out & 0xFFFF) == [t % 32 for t in range(384)]
    required = runtime.load(ptxkit.assemble(kernel(f".reqntid {declared}"), arch="sm_90a")).kernel("k")
    with pytest.raises(runtime.CudaError, match="INVALID_VALUE"):
        required.launch(runtime.Out(out), grid=1, block=(128, 3, 1))
    required.launch(runtime.Out(out), grid=1, block=(384, 1, 1))
    assert list(out >> 16) == [0] * 384
