"""Path 1, the thread-wise sequential reduction: its instruction stream, its refusals, and
its parity cases run on the simulator and assembled by ptxas."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.generators import harness, parity
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.layout import S, TileLayout, laneid
from ptxkit.generators.regtile import RegTile
from ptxkit.generators.thread import gen_reduce_thread

GROUPS = {"thread_wise", "maxmin_fallback", "axes", "identity", "fallback"}
CASES = [c for c in parity.all_cases() if c.group in GROUPS or c.name.startswith("thread_region")]


def test_fold_starts_from_the_identity_in_row_major_order():
    b = PtxBuilder()
    src, dst = RegTile(b, (4,), "f32"), RegTile(b, (1,), "f32")
    gen_reduce_thread(dst, src, op="sum")
    assert b.instructions() == ["mov.f32 %f4, 0f00000000;", "add.f32 %f4, %f4, %f0;", "add.f32 %f4, %f4, %f1;",
                                "add.f32 %f4, %f4, %f2;", "add.f32 %f4, %f4, %f3;"]


def test_accum_folds_into_the_old_value():
    b = PtxBuilder()
    src, dst = RegTile(b, (2,), "f32"), RegTile(b, (1,), "f32")
    gen_reduce_thread(dst, src, op="min", accum=True)
    assert b.instructions() == ["min.NaN.f32 %f2, %f2, %f0;", "min.NaN.f32 %f2, %f2, %f1;"]


def test_spatial_order_follows_src_and_fills_the_dst_region_row_major():
    b = PtxBuilder()
    src = RegTile(b, (2, 3), "f32")  # %f0..%f5
    dst = RegTile(b, (3,), "f32")  # %f6..%f8
    gen_reduce_thread(dst, src, axes=0, op="max")
    reads = [line.split()[-1].rstrip(";") for line in b.instructions() if line.startswith("max")]
    assert reads == ["%f0", "%f3", "%f1", "%f4", "%f2", "%f5"]
    targets = [line.split()[1].rstrip(",") for line in b.instructions() if line.startswith("mov")]
    assert targets == ["%f6", "%f7", "%f8"]


def test_regions_offset_the_reads_and_writes():
    b = PtxBuilder()
    src, dst = RegTile(b, (4, 4), "f32"), RegTile(b, (8,), "f32")
    gen_reduce_thread(dst[5:7], src[1:3, 2:4], axes=-1)
    reads = [line.split()[-1].rstrip(";") for line in b.instructions() if line.startswith("add")]
    assert reads == ["%f6", "%f7", "%f10", "%f11"]
    assert b.instructions()[0] == "mov.f32 %f21, 0f00000000;"  # dst[5] is %f16 + 5


def test_refusals():
    b = PtxBuilder()
    with pytest.raises(ReductionError, match="dst region has 2 elements but the reduction has 4 spatial positions"):
        gen_reduce_thread(RegTile(b, (2,), "f32"), RegTile(b, (4, 3), "f32"), axes=1)
    with pytest.raises(ReductionError, match="dtype mismatch: src=f32 dst=f16"):
        gen_reduce_thread(RegTile(b, (1,), "f16"), RegTile(b, (4,), "f32"))
    with pytest.raises(ReductionError, match="reduce axis 2 out of range for ndim=2"):
        gen_reduce_thread(RegTile(b, (1,), "f32"), RegTile(b, (4, 3), "f32"), axes=2)
    with pytest.raises(ValueError, match="thread-local layout"):
        gen_reduce_thread(RegTile(b, (1,), "f32"), RegTile(b, (32,), "f32", TileLayout(S[32 : 1 @ laneid])))
    with pytest.raises(ReductionError, match="unsupported reduce op: prod"):
        gen_reduce_thread(RegTile(b, (1,), "f32"), RegTile(b, (4,), "f32"), op="prod")


@pytest.fixture(scope="module")
def simulated():
    return harness.simulator(harness.module_text([c.case for c in CASES]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_parity_on_the_simulator(case, simulated):
    case.run_and_check(simulated)


@pytest.mark.ptxas
def test_parity_kernels_assemble():
    cubin = ptxkit.assemble(harness.module_text([c.case for c in CASES]), arch="sm_90a")
    assert len(cubin.resources) == len(CASES)
    assert all(r.spill_stores == 0 for r in cubin.resources.values())
