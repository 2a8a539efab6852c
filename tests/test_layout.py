"""The layout algebra, with the worked examples of docs/reduction.md §2."""

from __future__ import annotations

import pytest

from ptxkit.generators.layout import (
    ComposeLayout,
    Iter,
    LayoutError,
    R,
    S,
    SwizzleLayout,
    TileLayout,
    axis,
    laneid,
    m,
    row_major,
    tid_in_wg,
    warpid,
    wg_local_layout,
)


def test_builders_spell_layouts_like_tvm():
    layout = TileLayout(S[(32, 4) : (1 @ laneid, 1)])
    assert layout.shard == (Iter(32, 1, laneid), Iter(4, 1, m))
    assert TileLayout(S[(4,)]).shard == (Iter(4, 1),)
    assert TileLayout(S[(2, 3, 4)]).shard == (Iter(2, 12), Iter(3, 4), Iter(4, 1))
    assert TileLayout(S[8 : 1 @ laneid]).shard == (Iter(8, 1, laneid),)
    # a string axis (stride 1), a (stride, axis) pair and a plain number
    assert TileLayout(S[(2, 2, 2) : ("laneid", (4, "warpid"), 3)]).shard == (
        Iter(2, 1, laneid), Iter(2, 4, warpid), Iter(2, 3, m))


def test_replicas_and_offsets_combine_with_plus():
    layout = TileLayout(S[1:1] + R[32 : 1 @ laneid] + 5 @ warpid + 3)
    assert layout.replica == (Iter(32, 1, laneid),)
    assert dict(layout.offset) == {warpid: 5, m: 3}
    assert repr(layout) == "S[1 : 1] + R[32 : 1@laneid] + 5@warpid + 3"
    assert TileLayout(layout) == layout and hash(TileLayout(layout)) == hash(layout)


def test_bad_layouts_are_refused():
    with pytest.raises(LayoutError, match="2 extents but 1 strides"):
        S[(2, 2) : (1,)]
    with pytest.raises(LayoutError, match="need a tuple"):
        S[(2, 2) : 1]
    with pytest.raises(LayoutError, match="extent must be at least 1"):
        Iter(0, 1)
    with pytest.raises(LayoutError, match="must be an integer"):
        Iter(2.5, 1)


def test_axes_know_which_are_thread_axes():
    assert [a.is_thread for a in (m, laneid, warpid, tid_in_wg)] == [False, True, True, True]
    assert axis("laneid") is laneid
    assert axis("Bank").is_thread is False  # unknown names become memory axes


def test_size_span_and_storage_of_the_gapped_layout():
    src = TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)])
    assert src.size() == 128 and src.size("m") == 4 and src.size(laneid) == 32
    storage = src.storage()
    assert storage.size() == 4 and storage.span() == 7
    assert [p["m"] for i in range(4) for p in storage.apply(i, shape=[4])] == [0, 4, 2, 6]
    dst = TileLayout(S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid])
    assert dst.storage() == TileLayout(S[(2, 2) : (2, 4)])
    assert dst.span() == 1 + 2 + 4 + 31


def test_span_includes_offsets():
    assert TileLayout(S[4:1] + 3).span() == 7
    assert TileLayout(S[4:1] + 3 + 2 @ laneid).span("m") == 7


def test_apply_expands_every_replica_copy():
    places = TileLayout(S[4:1] + R[32 : 1 @ laneid]).apply(2, shape=[4])
    assert len(places) == 32
    assert {p["laneid"] for p in places} == set(range(32)) and {p["m"] for p in places} == {2}
    # element (row, col) of the WGMMA accumulator: lane 4·(row%8) + (col%8)//2,
    # slot 2·(row//8) + 4·(col//8) + col%2 (docs/reduction.md §2.5)
    acc = TileLayout(S[(2, 8, 16, 4, 2) : (2, 4 @ laneid, 4, 1 @ laneid, 1)])
    for row, col in [(0, 0), (9, 3), (15, 127), (7, 64)]:
        (place,) = acc.apply((row, col), shape=[16, 128])
        assert place == {"m": 2 * (row // 8) + 4 * (col // 8) + col % 2, "laneid": 4 * (row % 8) + (col % 8) // 2}


def test_apply_checks_coordinates():
    layout = TileLayout(S[(4, 8)])
    with pytest.raises(LayoutError, match="outside shape"):
        layout.apply((4, 0), shape=[4, 8])
    with pytest.raises(LayoutError, match="has 16 elements"):
        layout.apply(0, shape=[16])


def test_canonicalize_removes_units_fuses_and_sorts():
    assert TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]).canonicalize() == TileLayout(S[32 : 1 @ laneid])
    assert TileLayout(S[(1, 1) : (1 @ laneid, 1)]).canonicalize() == TileLayout(S[1 : 1 @ laneid])
    assert TileLayout(S[(4, 8) : (8 @ laneid, 1)] + 0).canonicalize().offset == ()
    # a chain fuses only while next.extent·next.stride equals the previous stride
    assert TileLayout(S[(2, 4, 2) : (8, 2, 1)]).canonicalize() == TileLayout(S[16:1])
    assert TileLayout(S[(2, 4, 2) : (16, 2, 1)]).canonicalize() == TileLayout(S[(2, 8) : (16, 1)])
    replica = TileLayout(S[1:1] + R[2 : 16 @ laneid] + R[2 : 1 @ laneid]).canonicalize().replica
    assert replica == (Iter(2, 1, laneid), Iter(2, 16, laneid))
    # different axes never fuse
    assert len(TileLayout(S[(4, 8) : (8, 1 @ laneid)]).canonicalize().shard) == 2


def test_group_splits_iters_at_dim_boundaries():
    grouped, seps = TileLayout(S[64]).group([4, 16])
    assert grouped == TileLayout(S[(4, 16) : (16, 1)]) and seps == [0, 1, 2]
    grouped, seps = TileLayout(S[(2, 8) : (1, 1 @ laneid)]).group([4, 4])
    assert grouped.shard == (Iter(2, 1), Iter(2, 4, laneid), Iter(4, 1, laneid)) and seps == [0, 2, 3]


def test_group_unit_dims_take_the_current_iter():
    # docs/reduction.md §2.3: a pure-thread unit dim, then a local unit dim
    grouped, seps = TileLayout(S[(32, 1) : (1 @ laneid, 1)]).group([32, 1])
    assert grouped.shard[seps[1] : seps[2]] == (Iter(1, 1, laneid),)
    grouped, seps = TileLayout(S[(32, 4, 1) : (1 @ laneid, 1, 1)]).group([32, 4, 1])
    assert grouped.shard[seps[2] : seps[3]] == (Iter(1, 1, m),)
    grouped, seps = TileLayout(S[2:1]).group([1, 2])
    assert seps == [0, 1, 2] and grouped.shard[0].extent == 1


def test_group_refuses_impossible_shapes():
    with pytest.raises(LayoutError, match="can not be grouped"):
        TileLayout(S[(4, 6)]).group([3, 8])
    with pytest.raises(LayoutError, match="can not be grouped"):
        TileLayout(S[12]).group([4, 4])


def test_group_of_the_wgmma_layouts():
    acc = TileLayout(S[(2, 8, 16, 4, 2) : (2, 4 @ laneid, 4, 1 @ laneid, 1)])
    grouped, seps = acc.group([16, 128])
    assert seps == [0, 2, 5] and grouped == acc
    red = TileLayout(S[(2, 32) : (1, 1 @ laneid)])
    grouped, seps = red.group([16, 4])
    assert grouped.shard == (Iter(2, 1), Iter(8, 4, laneid), Iter(4, 1, laneid)) and seps == [0, 2, 3]


def test_tile_builds_the_wgmma_accumulator():
    atom = TileLayout(S[(1, 2) : (2, 1)])
    warp = TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)])
    inner = atom.tile(warp, (8, 4), (1, 2))
    assert inner == TileLayout(S[(32, 2) : (1 @ laneid, 1)])
    acc = inner.tile(TileLayout(S[(2, 16) : (1, 2)]), (2, 16), (8, 8))
    assert acc == TileLayout(S[(2, 8, 16, 4, 2) : (2, 4 @ laneid, 4, 1 @ laneid, 1)])
    assert atom.tile(TileLayout(S[(2, 16) : (1, 2)]), (2, 16), (1, 2)) == TileLayout(S[(2, 16, 2) : (2, 4, 1)])


def test_tile_sums_offsets_and_keeps_replicas():
    inner = TileLayout(S[2:1] + R[2 : 1 @ laneid] + 1)
    outer = TileLayout(S[2:1] + R[2 : 2 @ laneid] + 4)
    tiled = inner.tile(outer, (2,), (2,))
    assert dict(tiled.offset) == {m: 5}
    assert tiled.replica == (Iter(2, 1, laneid), Iter(2, 2, laneid))
    with pytest.raises(LayoutError, match="same rank"):
        inner.tile(outer, (2,), (1, 2))


def test_slice_gives_a_region_layout():
    layout = TileLayout(S[(2, 8, 4, 2) : (8, 2 @ laneid, 2, 1)])
    sliced = layout.slice([16, 8], [(8, 16), (0, 8)])
    assert sliced.shard == (Iter(1, 8), Iter(8, 2, laneid), Iter(4, 2), Iter(2, 1))
    assert dict(sliced.offset) == {m: 8}
    assert TileLayout(S[64]).slice([64], [(16, 32)]) == TileLayout(S[16:1] + 16)
    # not a box: crosses a row boundary part way
    assert TileLayout(S[(4, 8)]).slice([32], [(3, 10)]) is None
    assert TileLayout(S[(4, 8)]).slice([32], [(8, 24)]) == TileLayout(S[(2, 8) : (8, 1)] + 8)


def test_storage_drops_thread_parts():
    layout = TileLayout(S[(32, 4) : (1 @ laneid, 1)] + R[2 : 4 @ warpid] + 3 + 2 @ laneid)
    assert layout.storage() == TileLayout(S[4:1] + 3)


def test_helpers():
    assert row_major((2, 3, 4)) == (12, 4, 1)
    assert wg_local_layout(16) == TileLayout(S[(128, 16) : (1 @ tid_in_wg, 1)])
    assert wg_local_layout(8, rows=64).size() == 512


def test_swizzles_are_described_not_tile_layouts():
    swizzle = SwizzleLayout(1, 3, 3, 64)
    assert swizzle.is_swizzle() and isinstance(swizzle, TileLayout)
    composed = ComposeLayout(swizzle, TileLayout(S[(8, 8) : (8, 1)]))
    assert not isinstance(composed, TileLayout) and not composed.is_swizzle()
