"""Path 3, the view reduction: the worked example's instruction stream, TVM's accum table
row by row, refusals, and its parity cases on the simulator and ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import ptxkit
from ptxkit.generators import harness, parity
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.dispatch import reduce_local
from ptxkit.generators.harness import ImageCase, TileSpec
from ptxkit.generators.layout import S, TileLayout, laneid, warpid, wg_local_layout
from ptxkit.generators.regtile import RegTile
from ptxkit.generators.view import gen_reduce_view

GROUPS = {"view_basic", "view_complex", "warpgroup", "view_masks", "squeezed"}
CASES = [c for c in parity.all_cases() if c.group in GROUPS or c.name.startswith("view_region")]
ACC = parity.wgmma_acc_layout()


def test_worked_example_folds_then_shuffles_with_masks_1_and_2():
    b = PtxBuilder()
    acc, red = RegTile(b, (16, 128), "f32", ACC), RegTile(b, (16, 4), "f32", parity.RED_VIEW)
    gen_reduce_view(red, acc, op="sum", thread_reduce=True)
    lines = b.instructions()
    # dst element 0 (%f64) folds slots 2·0 + 4·(red//2) + red%2: 0, 1, 4, 5, 8, …
    assert lines[0] == "mov.f32 %f64, 0f00000000;"
    assert [x.split()[-1].rstrip(";") for x in lines[1:5]] == ["%f0", "%f1", "%f4", "%f5"]
    assert sum(x.startswith("add.f32") for x in lines) == 2 * 32 + 2 * 2
    tail = lines[lines.index("activemask.b32 %r0;"):]
    assert [x for x in tail if x.startswith("shfl")] == [
        "shfl.sync.bfly.b32 %f66, %f64, 1, 0x1f, %r0;", "shfl.sync.bfly.b32 %f66, %f64, 2, 0x1f, %r0;",
        "shfl.sync.bfly.b32 %f67, %f65, 1, 0x1f, %r0;", "shfl.sync.bfly.b32 %f67, %f65, 2, 0x1f, %r0;"]


def test_warpgroup_scope_is_thread_local():
    b = PtxBuilder()
    src, dst = RegTile(b, (128, 16), "f32", wg_local_layout(16)), RegTile(b, (128, 1), "f32", wg_local_layout(1))
    gen_reduce_view(dst, src, axes=[-1], op="max", scope="warpgroup")
    assert not any(x.startswith(("shfl", "activemask")) for x in b.instructions())
    with pytest.raises(ReductionError, match="^thread_reduce=True is only supported in warp scope; warpgroup local "
                                             "reduction is thread-local only$"):
        gen_reduce_view(dst, src, axes=[-1], scope="warpgroup", thread_reduce=True)


# ---- TVM's accum table, one row at a time: 8 lanes × 4 values, lanes 4r + c hold row r ----
SRC = TileSpec((8, 16), "f32", TileLayout(S[(8, 4, 4) : (4 @ laneid, 1 @ laneid, 1)]))
DST = TileSpec((8, 4), "f32", TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]))


def _table_case(accum, thread_reduce, in_place=False):
    def generate(d, s):
        if in_place:
            gen_reduce_view(s, s, op="sum", accum=accum, thread_reduce=thread_reduce)
        else:
            gen_reduce_view(d, s, op="sum", accum=accum, thread_reduce=thread_reduce)

    name = f"table_{int(accum)}{int(thread_reduce)}{int(in_place)}"
    return ImageCase(name, DST if in_place else SRC, None if in_place else DST, generate)


def _table_run(accum, thread_reduce, in_place=False, seed=3):
    case = _table_case(accum, thread_reduce, in_place)
    a, b = case.inputs(np.random.default_rng(seed))
    run = case.run(a, b, harness.simulator(harness.module_text([case])))
    return a, b, run


def test_accum_table_partial_per_lane():
    a, b, run = _table_run(accum=False, thread_reduce=False)
    run.assert_close(a.reshape(1, 8, 4, 4).sum(axis=3), atol=1e-5)
    a, b, run = _table_run(accum=True, thread_reduce=False)
    run.assert_close(a.reshape(1, 8, 4, 4).sum(axis=3) + b, atol=1e-5)


def test_accum_table_allreduce_and_old_value_once():
    a, b, run = _table_run(accum=False, thread_reduce=True)
    rows = a.reshape(1, 8, 16).sum(axis=2, keepdims=True)
    run.assert_close(np.broadcast_to(rows, (1, 8, 4)), atol=1e-5)
    a, b, run = _table_run(accum=True, thread_reduce=True)
    run.assert_close(np.broadcast_to(a.reshape(1, 8, 16).sum(axis=2, keepdims=True), (1, 8, 4)) + b, atol=1e-5)


def test_accum_table_in_place():
    a, _, run = _table_run(accum=False, thread_reduce=True, in_place=True)
    run.assert_close(np.broadcast_to(a.sum(axis=2, keepdims=True), (1, 8, 4)), atol=1e-5)
    a, _, run = _table_run(accum=True, thread_reduce=False, in_place=True)
    run.assert_close(a, atol=0)  # no-op
    with pytest.raises(ReductionError, match="count each lane's own value twice"):
        _table_run(accum=True, thread_reduce=True, in_place=True)


def test_in_place_without_shuffle_emits_nothing():
    b = PtxBuilder()
    tile = RegTile(b, (8, 4), "f32", DST.layout)
    gen_reduce_view(tile, tile, accum=True)
    assert b.instructions() == []


ROWS = TileSpec((32, 8), "f32", TileLayout(S[(32, 8) : (1 @ laneid, 1)]))
ROW_SUMS = TileSpec((32, 1), "f32", TileLayout(S[(32, 1) : (1 @ laneid, 1)]))
SHARED = [  # (name, generate, expected from the tile's values a [1, 32, 8])
    # another region of the same tile: taken for "in place", so nothing was emitted
    ("column_4_from_columns_0_3", lambda d, s: reduce_local(s[:, 4:5], s[:, 0:4], scope="warp"),
     lambda a: np.concatenate([a[:, :, :4], a[:, :, 0:4].sum(axis=2, keepdims=True), a[:, :, 5:]], axis=2)),
    # a view of src's first register: the identity overwrote a src value before it was read
    ("first_register_view", lambda d, s: reduce_local(s.view(ROW_SUMS.shape, ROW_SUMS.layout), s, scope="warp"),
     lambda a: np.concatenate([a.sum(axis=2, keepdims=True), a[:, :, 1:]], axis=2)),
]


@pytest.mark.parametrize("name, generate, expected", SHARED, ids=[x[0] for x in SHARED])
def test_a_dst_sharing_src_s_registers_is_computed_apart(name, generate, expected):
    case = ImageCase(name, ROWS, None, generate)
    a, _ = case.inputs(np.random.default_rng(6))
    case.run(a, None, harness.simulator(harness.module_text([case]))).assert_close(expected(a), atol=1e-5)


def test_accum_on_a_dst_sharing_src_s_registers_is_refused():
    b = PtxBuilder()
    rows = RegTile(b, ROWS.shape, "f32", ROWS.layout)
    with pytest.raises(ReductionError, match=r"\(a view of its registers\) would fold src's own values in again"):
        gen_reduce_view(rows.view(ROW_SUMS.shape, ROW_SUMS.layout), rows, accum=True, thread_reduce=True)
    with pytest.raises(ReductionError, match=r"\(a region of the same tile\) would fold src's own values in again"):
        gen_reduce_view(rows[:, 3:4], rows[:, 0:4], accum=True)
    gen_reduce_view(rows[:, 7:8], rows[:, 0:4], accum=True)  # no register in common: folds into the old value
    assert b.instructions()[0] == "add.f32 %f7, %f7, %f0;"


@pytest.mark.ptxas
def test_shared_register_kernels_assemble():
    cases = [ImageCase(name, ROWS, None, generate) for name, generate, _ in SHARED]
    assert len(ptxkit.assemble(harness.module_text(cases)).resources) == len(cases)


def test_refusals():
    b = PtxBuilder()
    rows = RegTile(b, (32, 64), "f32", TileLayout(S[(32, 64) : (1 @ laneid, 1)]))
    wrong = RegTile(b, (32, 2), "f32", TileLayout(S[(32, 2) : (1 @ laneid, 1)]))
    with pytest.raises(ReductionError, match="^mismatch dst/src layout for reduction$"):
        gen_reduce_view(wrong, rows)
    with pytest.raises(ReductionError, match="^get_local_region failed for src$"):
        gen_reduce_view(RegTile(b, (16, 1), "f32", TileLayout(S[(16, 1) : (1 @ laneid, 1)])), rows[8:24])
    odd = RegTile(b, (6, 4), "f32", TileLayout(S[(6, 4) : (4 @ laneid, 1)]))
    with pytest.raises(ReductionError, match="cannot shuffle-reduce over 6 lanes"):
        gen_reduce_view(RegTile(b, (6, 4), "f32", odd.layout), odd, axes=0, thread_reduce=True)
    warps = RegTile(b, (4, 32), "f32", TileLayout(S[(4, 32) : (1 @ warpid, 1 @ laneid)]))
    with pytest.raises(ReductionError, match="over warpid"):
        gen_reduce_view(RegTile(b, (4, 32), "f32", warps.layout), warps, axes=0, thread_reduce=True)
    with pytest.raises(ReductionError, match="unsupported exec_scope cta for reduction_local_impl"):
        gen_reduce_view(wrong, rows, scope="cta")


@pytest.fixture(scope="module")
def simulated():
    return harness.simulator(harness.module_text([c.case for c in CASES]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_parity_on_the_simulator(case, simulated):
    case.run_and_check(simulated)


@pytest.mark.ptxas
def test_accum_table_kernels_assemble():
    cases = [_table_case(a, t, p) for a in (False, True) for t in (False, True) for p in (False, True)
             if not (a and t and p)]
    assert len(ptxkit.assemble(harness.module_text(cases)).resources) == len(cases)


@pytest.mark.ptxas
def test_parity_kernels_assemble():
    cubin = ptxkit.assemble(harness.module_text([c.case for c in CASES]), arch="sm_90a")
    assert len(cubin.resources) == len(CASES)
