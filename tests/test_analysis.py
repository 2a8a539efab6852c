"""The analysis helpers with the worked examples of docs/reduction.md §2.4–§2.12, and every
validation message (docs/reduction.md §2.12)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest

from ptxkit.generators.analysis import (
    DimInfo,
    ReductionError,
    analyze_axes,
    analyze_layout_dims,
    analyze_shuffle_reduce,
    build_local_dim_map,
    compute_shuffle_masks,
    get_indices,
    get_local_region,
    identity,
    match_reduction_dims,
    shuffle_plan,
    validate_reduction_layout,
    validate_reduction_local,
    view_shuffle_masks,
)
from ptxkit.generators.layout import ComposeLayout, R, S, SwizzleLayout, TileLayout, laneid, warpid, wg_local_layout

ACC = TileLayout(S[(2, 8, 16, 4, 2) : (2, 4 @ laneid, 4, 1 @ laneid, 1)])
RED = TileLayout(S[(2, 32) : (1, 1 @ laneid)])


def test_analyze_axes_normalises_and_merges():
    assert analyze_axes(3, (-1,)) == ([2], [0, 1])
    assert analyze_axes(3, (0, 2)) == ([0, 2], [1])
    assert analyze_axes(3, (2, -1, 2)) == ([2], [0, 1])
    assert analyze_axes(2, -2) == ([0], [1])
    with pytest.raises(ReductionError, match=r"^reduce axis 5 out of range for ndim=2$"):
        analyze_axes(2, (5,))
    with pytest.raises(ReductionError, match=r"^reduce axis -3 out of range for ndim=2$"):
        analyze_axes(2, (-3,))


def test_get_indices_unravels_row_major():
    assert get_indices(0, [3], [4]) == [3]
    assert get_indices(7, [0, 0, 0], [2, 3, 4]) == [0, 1, 3]
    assert get_indices(5, [1, 2], [2, 3]) == [2, 4]


def test_layout_dims_of_the_wgmma_example():
    # docs/reduction.md §2.5
    assert analyze_layout_dims(ACC, [16, 128]) == [(8, 2, [(4, 8)]), (4, 32, [(1, 4)])]
    assert get_local_region(ACC, [16, 128], [0, 0], [16, 128]) == ([2, 32], [0, 0], [2, 32])
    assert build_local_dim_map(ACC, [16, 128]) == {0: 0, 1: 1}
    assert analyze_layout_dims(RED, [16, 4]) == [(8, 2, [(4, 8)]), (4, 1, [(1, 4)])]
    assert get_local_region(RED, [16, 4], [0, 0], [16, 4]) == ([2], [0], [2])
    assert build_local_dim_map(RED, [16, 4]) == {0: 0, 1: None}


def test_local_regions_of_the_view_basic_layouts():
    src = TileLayout(S[(32, 64) : (1 @ laneid, 1)])
    assert get_local_region(src, [32, 64], [0, 16], [32, 16]) == ([64], [16], [16])
    dst = TileLayout(S[(32, 1) : (1 @ laneid, 1)])
    assert get_local_region(dst, [32, 1], [0, 0], [32, 1]) == ([1], [0], [1])  # no local dim at all
    keep = TileLayout(S[(32, 4, 1) : (1 @ laneid, 1, 1)])
    assert get_local_region(keep, [32, 4, 1], [0, 0, 0], [32, 4, 1]) == ([4, 1], [0, 0], [4, 1])
    assert build_local_dim_map(keep, [32, 4, 1]) == {0: None, 1: 0, 2: 1}
    unit = TileLayout(S[(32, 1, 8) : (1 @ laneid, 8, 1)])
    assert build_local_dim_map(unit, [32, 1, 8]) == {0: None, 1: None, 2: 0}


def test_get_local_region_accepts_a_single_local_value():
    # the docstring example TVM's own code rejects (its `end - st == 1` typo)
    layout = TileLayout(S[(2, 8, 4, 2) : (8, 2 @ laneid, 2, 1)])
    assert get_local_region(layout, [16, 8], [8, 0], [8, 8]) == ([2, 8], [1, 0], [1, 8])
    assert get_local_region(layout, [16, 8], [0, 0], [8, 8]) == ([2, 8], [0, 0], [1, 8])
    assert get_local_region(layout, [16, 8], [0, 2], [16, 4]) == ([2, 8], [0, 2], [2, 4])


def test_get_local_region_needs_boxes_that_cover_the_threads():
    layout = TileLayout(S[(2, 8, 4, 2) : (8, 2 @ laneid, 2, 1)])
    assert get_local_region(layout, [16, 8], [4, 0], [8, 8]) is None  # cuts the lane iter
    assert get_local_region(layout, [16, 8], [0, 0], [4, 8]) is None
    mixed = TileLayout(S[(4, 8) : (1, 1 @ laneid)])  # local outer, lanes inner: 4 × 8
    assert get_local_region(mixed, [32], [8], [16]) == ([4], [1], [2])  # a partial outer range is a box
    assert get_local_region(mixed, [32], [8], [12]) is None  # not a box
    assert get_local_region(TileLayout(S[(4, 8) : (8, 1 @ laneid)]), [32], [0], [8]) == ([4], [0], [1])
    assert get_local_region(TileLayout(S[(8, 4) : (1 @ laneid, 1)]), [32], [0], [16]) is None
    # a pure-thread dim must be covered too (TVM skips it unchecked)
    rows = TileLayout(S[(32, 64) : (1 @ laneid, 1)])
    assert get_local_region(rows, [32, 64], [8, 0], [16, 64]) is None


def test_compute_shuffle_masks_examples():
    # docs/reduction.md §2.7
    assert compute_shuffle_masks([DimInfo(4, 1, [(1, 4)])], [0]) == [1, 2]
    assert compute_shuffle_masks([DimInfo(8, 1, [(16, 2), (1, 4)])], [0]) == [1, 2, 16]
    assert compute_shuffle_masks([DimInfo(32, 1, [(1, 32)])], [0]) == [1, 2, 4, 8, 16]
    assert compute_shuffle_masks([DimInfo(1, 8, [])], [0]) == []
    assert compute_shuffle_masks([DimInfo(8, 1, [(4, 8)])], [0]) == [4, 8, 16]
    assert compute_shuffle_masks(analyze_layout_dims(ACC, [16, 128]), [1]) == [1, 2]
    # TVM floors a non-power-of-two extent: 6 lanes give 2 masks (wrong)
    assert compute_shuffle_masks([DimInfo(6, 1, [(1, 6)])], [0]) == [1, 2]


def test_view_shuffle_masks_refuses_what_compute_shuffle_masks_gets_wrong():
    assert view_shuffle_masks(ACC, [16, 128], [1]) == [1, 2]
    several = TileLayout(S[(4, 2, 4, 8) : (4 @ laneid, 16 @ laneid, 1 @ laneid, 1)])
    assert view_shuffle_masks(several, [4, 64], [1]) == [1, 2, 16]
    with pytest.raises(ReductionError, match="cannot shuffle-reduce over 6 lanes"):
        view_shuffle_masks(TileLayout(S[(6, 4) : (4 @ laneid, 1)]), [6, 4], [0])
    with pytest.raises(ReductionError, match="cannot shuffle-reduce over 4 lanes"):
        view_shuffle_masks(TileLayout(S[(4, 4) : (3 @ laneid, 1)]), [4, 4], [0])
    with pytest.raises(ReductionError, match="over warpid"):
        view_shuffle_masks(TileLayout(S[(4, 32) : (1 @ warpid, 1 @ laneid)]), [4, 32], [0])
    with pytest.raises(ReductionError, match="overlap or leave the warp"):
        view_shuffle_masks(TileLayout(S[(2, 32) : (16 @ laneid, 1 @ laneid)]), [64], [0])


@pytest.mark.parametrize(
    "src, dst, result",
    [
        (S[32 : 1 @ laneid], S[1:1] + R[32 : 1 @ laneid], (32, 1)),
        (S[(32, 4) : (1 @ laneid, 1)], S[4:1] + R[32 : 1 @ laneid], (32, 4)),
        (S[(32, 2, 2) : (1 @ laneid, 2, 4)], S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid], (32, 4)),
        (S[(4, 8) : (8 @ laneid, 1 @ laneid)], S[4 : 8 @ laneid] + R[8 : 1 @ laneid], (8, 1)),
        (S[16 : 1 @ laneid], S[1:1] + R[16 : 1 @ laneid], None),
        (S[32 : 2 @ laneid], S[1:1] + R[32 : 1 @ laneid], None),
        (S[32 : 1 @ laneid], S[32 : 1 @ laneid], None),
        (S[32 : 1 @ laneid], S[1:1] + R[3 : 1 @ laneid], None),
        (S[32 : 1 @ laneid], S[32 : 1 @ laneid] + R[1 : 1 @ laneid], (1, 1)),
    ],
)
def test_analyze_shuffle_reduce_table(src, dst, result):
    # docs/reduction.md §2.8
    assert analyze_shuffle_reduce(TileLayout(src), TileLayout(dst)) == result


def test_analyze_shuffle_reduce_ignores_strides_and_swizzles_give_none():
    # TVM accepts the strided replica (and then shuffles the wrong lanes)
    assert analyze_shuffle_reduce(TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]),
                                  TileLayout(S[4 : 1 @ laneid] + R[8 : 4 @ laneid])) == (8, 1)
    assert analyze_shuffle_reduce(SwizzleLayout(1, 3, 3, 32), TileLayout(S[1:1] + R[32 : 1 @ laneid])) is None


def test_shuffle_plan_takes_masks_from_the_replica_strides():
    plan = shuffle_plan(TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]), TileLayout(S[4 : 1 @ laneid] + R[8 : 4 @ laneid]))
    assert plan.masks == (16, 8, 4) and plan.width == 8 and plan.replica_bits == 0b11100
    plan = shuffle_plan(TileLayout(S[(4, 8) : (8 @ laneid, 1 @ laneid)]), TileLayout(S[4 : 8 @ laneid] + R[8 : 1 @ laneid]))
    assert plan.masks == (4, 2, 1) and plan.local_elems == 1
    plan = shuffle_plan(TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]), TileLayout(S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid]))
    assert plan.masks == (16, 8, 4, 2, 1) and plan.local_elems == 4
    assert shuffle_plan(TileLayout(S[32 : 1 @ laneid]), TileLayout(S[32 : 1 @ laneid] + R[1 : 1 @ laneid])).masks == ()
    two = shuffle_plan(TileLayout(S[(2, 8, 2) : (16 @ laneid, 2 @ laneid, 1 @ laneid)]),
                       TileLayout(S[8 : 2 @ laneid] + R[(2, 2) : (16 @ laneid, 1 @ laneid)]))
    assert two.masks == (16, 1)
    # other thread axes pass through when src and dst agree on them
    warps = shuffle_plan(TileLayout(S[(4, 32) : (1 @ warpid, 1 @ laneid)]),
                         TileLayout(S[4 : 1 @ warpid] + R[32 : 1 @ laneid]))
    assert warps.local_elems == 1 and warps.masks == (16, 8, 4, 2, 1)


@pytest.mark.parametrize(
    "src, dst, message",
    [
        (S[(32, 2) : (1 @ laneid, 1)], S[1:1] + R[32 : 1 @ laneid], "src holds 2 elements per lane but dst holds 1"),
        (S[32 : 1 @ laneid], S[2 : 16 @ laneid] + R[32 : 1 @ laneid], "do not partition the warp"),
        (S[32 : 1 @ laneid], S[1:1] + R[16 : 1 @ laneid], "do not partition the warp"),
        (S[32 : 1 @ laneid], S[1:1] + R[(4, 8) : (1 @ laneid, 3 @ laneid)], "power-of-two extent and stride"),
        (S[(2, 16) : (1 @ laneid, 1 @ laneid)], S[1:1] + R[32 : 1 @ laneid], "src shard: lane iters overlap"),
        (S[(4, 32) : (1 @ warpid, 1 @ laneid)], S[4:1] + R[32 : 1 @ laneid], "other thread axes differently"),
        (S[32 : 1 @ laneid], S[1:1] + R[32 : 1 @ laneid] + R[2 : 1 @ warpid], "thread axis in replica for dst"),
    ],
)
def test_shuffle_plan_refuses_patterns_it_cannot_reduce(src, dst, message):
    with pytest.raises(ReductionError, match=message):
        shuffle_plan(TileLayout(src), TileLayout(dst))


def test_validate_reduction_layout_compares_extents():
    src = TileLayout(S[(32, 4, 8) : (1 @ laneid, 8, 1)])
    keep = TileLayout(S[(32, 4, 1) : (1 @ laneid, 1, 1)])
    assert validate_reduction_layout(src, keep, [32, 4, 8], [32, 4, 1], [2]) == (True, None)
    assert validate_reduction_layout(ACC, RED, [16, 128], [16, 4], [1]) == (True, None)
    wrong = TileLayout(S[(32, 8, 1) : (1 @ laneid, 1, 1)])
    assert validate_reduction_layout(src, wrong, [32, 4, 8], [32, 8, 1], [2]) == (
        False, "mismatch dst/src layout for reduction")
    # too many dst dims: TVM indexes past its list here; ptxkit reports the mismatch
    extra = TileLayout(S[(32, 4, 2) : (1 @ laneid, 2, 1)])
    assert validate_reduction_layout(src, extra, [32, 4, 8], [32, 4, 2], [2])[0] is False


def test_match_reduction_dims_pairs_dims_in_order():
    src = TileLayout(S[(32, 4, 8) : (1 @ laneid, 8, 1)])
    assert match_reduction_dims(src, TileLayout(S[(32, 4) : (1 @ laneid, 1)]), [32, 4, 8], [32, 4], [2]) == {0: 0, 1: 1}
    assert match_reduction_dims(src, TileLayout(S[(32, 8) : (1 @ laneid, 1)]), [32, 4, 8], [32, 8], [1]) == {0: 0, 2: 1}
    assert match_reduction_dims(ACC, RED, [16, 128], [16, 4], [1]) == {0: 0, 1: 1}


def test_identities_are_tvms():
    assert identity("sum", "f32") == 0.0
    assert identity("max", "f32") == -3.4028234663852886e38 and identity("min", "f32") == 3.4028234663852886e38
    assert identity("max", "f16") == -65504.0 and identity("min", "f16") == 65504.0
    # FLT_MAX rounds to nearest even in bf16: infinity
    assert identity("max", "bf16") == -math.inf and identity("min", "bf16") == math.inf
    assert identity("max", "s32") == -(2**31) and identity("min", "u32") == 2**32 - 1
    with pytest.raises(ReductionError, match="unsupported reduce op: prod"):
        identity("prod", "f32")


def _buffer(shape, layout=None, dtype="f32", scope="local", start=None, extent=None):
    return SimpleNamespace(shape=shape, layout=layout, dtype=dtype, scope=scope,
                           start=start or (0,) * len(shape), extent=extent or shape)


LANE_ROWS = TileLayout(S[(32, 64) : (1 @ laneid, 1)])
LANE_ONE = TileLayout(S[(32, 1) : (1 @ laneid, 1)])


@pytest.mark.parametrize(
    "dst, src, kwargs, message",
    [
        (_buffer((1,)), _buffer((4,), scope="shared"), {}, "expected local scope and CUDA target"),
        (_buffer((1,), dtype="f16"), _buffer((4,)), {}, "dtype mismatch: src=float32 dst=float16"),
        (_buffer((32, 1), LANE_ONE), _buffer((32, 64), LANE_ROWS), {"scope": "cta"},
         "unsupported exec_scope cta for local reduction"),
        (_buffer((128, 1), wg_local_layout(1)), _buffer((128, 16), wg_local_layout(16)),
         {"scope": "warpgroup", "thread_reduce": True},
         "thread_reduce=True is only supported in warp scope; warpgroup local reduction is thread-local only"),
        (_buffer((32, 1)), _buffer((32, 64), LANE_ROWS), {"scope": "warp"},
         "layouts required for view-based local reduction"),
        (_buffer((32, 1), LANE_ONE), _buffer((32, 64), ComposeLayout(SwizzleLayout(1, 3, 3, 64), LANE_ROWS)),
         {"scope": "warp"}, "TileLayout required for view-based local reduction"),
        (_buffer((64,), SwizzleLayout(1, 3, 3, 64)), _buffer((64,), SwizzleLayout(1, 3, 3, 64)), {"scope": "warp"},
         "swizzle layout unsupported for local reduction"),
        (_buffer((32, 1), LANE_ONE), _buffer((32, 64), TileLayout(S[(32, 64) : (0 @ laneid, 1)])), {"scope": "warp"},
         "thread dim with zero stride in src"),
        (_buffer((32, 1), TileLayout(S[(32, 1) : (1 @ laneid, 1)] + R[2 : 1 @ warpid])),
         _buffer((32, 64), LANE_ROWS), {"scope": "warp"}, "thread axis in replica for dst"),
        (_buffer((32, 1), LANE_ONE), _buffer((32, 64), LANE_ROWS, start=(8, 0), extent=(16, 64)), {"scope": "warp"},
         "get_local_region failed for src"),
        (_buffer((32, 1), LANE_ONE), _buffer((32, 64), LANE_ROWS), {"scope": "warp", "axes": (5,)},
         "reduce axis 5 out of range for ndim=2"),
        (_buffer((32, 2), TileLayout(S[(32, 2) : (1 @ laneid, 1)])), _buffer((32, 64), LANE_ROWS), {"scope": "warp"},
         "mismatch dst/src layout for reduction"),
    ],
)
def test_every_validation_message(dst, src, kwargs, message):
    assert validate_reduction_local(dst, src, **kwargs) == (False, message)


def test_validation_accepts_what_tvm_accepts():
    # thread scope checks nothing more, even an impossible axis
    assert validate_reduction_local(_buffer((1,)), _buffer((4,)), axes=(7,)) == (True, None)
    # warp scope: the shuffle pattern is accepted before the replica check
    assert validate_reduction_local(_buffer((1,), TileLayout(S[1:1] + R[32 : 1 @ laneid])),
                                    _buffer((32,), TileLayout(S[32 : 1 @ laneid])), scope="warp") == (True, None)
    assert validate_reduction_local(_buffer((32, 1), LANE_ONE), _buffer((32, 64), LANE_ROWS, start=(0, 16),
                                                                        extent=(32, 16)), scope="warp") == (True, None)
    assert validate_reduction_local(_buffer((16, 4), RED), _buffer((16, 128), ACC), scope="warp",
                                    thread_reduce=True) == (True, None)
