"""Path 1, the thread-wise sequential reduction: its instruction stream, its refusals, and
its parity cases run on the simulator and assembled by ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import ptxkit
from ptxkit.generators import harness, parity
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.dispatch import reduce_local
from ptxkit.generators.harness import ImageCase, TileSpec
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


ALIASED = [  # (name, tile, generate, expected from the tile's values a)
    ("first_of_itself", TileSpec((4,)), lambda d, s: reduce_local(s[0:1], s),
     lambda a: np.concatenate([a.sum(axis=1, keepdims=True), a[:, 1:]], axis=1)),
    ("rows_onto_their_first_column", TileSpec((3, 4)), lambda d, s: reduce_local(s[:, 0:1], s, axes=1, op="max"),
     lambda a: np.concatenate([a.max(axis=2, keepdims=True), a[:, :, 1:]], axis=2)),
    ("each_element_onto_itself", TileSpec((4, 1)), lambda d, s: reduce_local(s, s, axes=1), lambda a: a),
    ("a_view_of_itself", TileSpec((2, 3)), lambda d, s: reduce_local(s.view((6,))[3:5], s, axes=1),
     lambda a: np.concatenate([a.reshape(1, 6)[:, :3], a.sum(axis=2), a.reshape(1, 6)[:, 5:]], axis=1)),
]


@pytest.mark.parametrize("name, spec, generate, expected", ALIASED, ids=[x[0] for x in ALIASED])
def test_a_dst_in_src_s_registers_is_computed_apart(name, spec, generate, expected):
    """Path 1 wrote the identity into dst before folding, so a dst inside src lost the
    src value it overwrote (the first case gave sum(a[1:]) in a[0])."""
    case = ImageCase(name, spec, None, generate)
    a, _ = case.inputs(np.random.default_rng(7))
    text = harness.module_text([case])
    case.run(a, None, harness.simulator(text)).assert_close(expected(a), atol=1e-5)
    assert text.count("mov.f32 %f0, %f") == 1 or name == "a_view_of_itself"  # computed apart, then copied in


def test_disjoint_regions_of_one_tile_need_no_copy():
    b = PtxBuilder()
    t = RegTile(b, (4,), "f32")
    gen_reduce_thread(t[0:1], t[1:4])
    assert b.instructions()[0] == "mov.f32 %f0, 0f00000000;" and len(b.instructions()) == 4
    with pytest.raises(ReductionError, match="would fold src's own values in again"):
        gen_reduce_thread(t[0:1], t, accum=True)


@pytest.mark.ptxas
def test_aliased_kernels_assemble():
    cases = [ImageCase(name, spec, None, generate) for name, spec, generate, _ in ALIASED]
    assert len(ptxkit.assemble(harness.module_text(cases)).resources) == len(cases)


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
