"""`placement`: where a tile's elements are, the check that a warp reduction leaves each
result where dst's layout puts it, and the property it guarantees: every (src, dst) pair
that `reduce_local` accepts computes, in the simulator, what numpy computes in float64,
on every lane and slot that dst's layout says holds a value."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.generators import harness
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.dispatch import reduce_local
from ptxkit.generators.harness import ImageCase, TileSpec
from ptxkit.generators.layout import Iter, LayoutError, R, S, TileLayout, laneid, warpid
from ptxkit.generators.placement import NOWHERE, Holdings, Meaning, check_results, placements
from ptxkit.generators.regtile import RegTile

GAPPED_SUM = TileLayout(S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid])


def tile(shape, layout=None):
    return RegTile(PtxBuilder(), shape, "f32", layout)


def test_placements_of_shards_replicas_and_thread_axes():
    thread, slot = placements(TileLayout(S[(2, 32) : (1 @ warpid, 1 @ laneid)]), (2, 32))
    assert thread.tolist() == [list(range(64))] and slot.tolist() == [[0] * 64]
    thread, slot = placements(GAPPED_SUM, (2, 2))
    assert thread.shape == (32, 4) and slot[0].tolist() == [0, 4, 2, 6] and thread[:, 0].tolist() == list(range(32))
    with pytest.raises(LayoutError, match="cannot place axis Bank"):
        placements(TileLayout(S[4 : (1, "Bank")]), (4,))


def test_holdings_map_places_to_elements_and_back():
    held = Holdings(tile((8, 4), TileLayout(S[(8, 4) : (1 @ laneid, 8 @ laneid)])), "dst")
    assert held.element(9, 0) == 5 and held.coord(5) == (1, 1) and held.places(5) == [(9, 0)]
    assert held.element(9, 1) == NOWHERE and held.element(40, 0) == NOWHERE and held.warps == 1
    replicated = Holdings(tile((2, 2), GAPPED_SUM), "dst")
    assert replicated.places(1) == [(lane, 4) for lane in range(32)] and replicated.element(7, 3) == NOWHERE
    assert Holdings(tile((2, 32), TileLayout(S[(2, 32) : (1 @ warpid, 1 @ laneid)])), "src").element(33, 0) == 33
    with pytest.raises(ReductionError, match=r"the src layout .* puts elements \(0, 1\) and \(1, 0\) in one register "
                                             r"\(slot 1 of thread 0\)"):
        Holdings(tile((2, 2), TileLayout(S[(2, 2) : (1, 1)])), "src")


def test_meaning_pairs_spatial_dims_relative_to_each_region():
    src, dst = tile((4, 6)), tile((8,))
    meaning = Meaning(src[1:3, 2:5], dst[5:7], [1], [(0, 0)])
    assert meaning.expected == {0: [8, 9, 10], 1: [14, 15, 16]}
    assert meaning.dst_key(6) == 1 and meaning.dst_key(4) == -1 and meaning.src_key(0) == -1
    assert meaning.dst_elements() == [5, 6] and meaning.position(1) == (1,)
    assert meaning.describe([14, 16, 15]) == "the 3 src elements at spatial position (1,)"
    assert meaning.describe([8, 14, 14, 0, NOWHERE]) == (
        "5 src values (1 at spatial position (0,), 2 at spatial position (1,), 1 from outside the src region, "
        "1 from registers that hold no src element; 1 counted twice or more)")
    assert Meaning.by_extents(tile((4, 1, 8)), tile((1, 4)), [2]).pairs == [(0, 1)]
    assert Meaning.by_extents(tile((4, 8)), tile((4,)), [0]) is None


def test_check_results_each_and_together():
    src, dst = tile((2, 3)), tile((2,))
    meaning, held = Meaning(src, dst, [1], [(0, 0)]), Holdings(dst, "dst")
    check_results(meaning, held, lambda t, s: [3 * s + 2, 3 * s, 3 * s + 1], "the fold")
    with pytest.raises(ReductionError, match=r"dst element \(0,\) is held by lane 0 \(slot 0\); after the fold, lane 0 "
                                             r"holds 4 src values .*1 counted twice"):
        check_results(meaning, held, lambda t, s: [3 * s, 3 * s, 3 * s + 1, 3 * s + 2], "the fold")
    # partials: dst (row, j) on lane 4·row + j holds that lane's part of the row
    src = tile((2, 8), TileLayout(S[(2, 4, 2) : (4 @ laneid, 1 @ laneid, 1)]))
    dst = tile((2, 4), TileLayout(S[(2, 4) : (4 @ laneid, 1 @ laneid)]))
    meaning, held = Meaning(src, dst, [1], [(0, 0)]), Holdings(dst, "dst")
    check_results(meaning, held, lambda t, s: [8 * (t // 4) + 2 * (t % 4), 8 * (t // 4) + 2 * (t % 4) + 1],
                  "each thread's fold", together=True)
    with pytest.raises(ReductionError, match=r"the dst elements at spatial position \(0,\) are held by lanes 0-3 "
                                             r"\(slot 0\), which after each thread's fold hold 5 src values \(5 at "
                                             r"spatial position \(0,\); 1 counted twice or more\); reducing axes \[1\] "
                                             r"they must together hold the 8 src elements at spatial position \(0,\)"):
        check_results(meaning, held, lambda t, s: [8 * (t // 4) + 2 * (t % 4)] * (1 + (t % 4 == 0)),
                      "each thread's fold", together=True)


# ---- the two pairs validation let through (docs/reduction.md §2.13) -----------------------------
VIEW_SRC = TileSpec((8, 32), "f32", TileLayout(S[(8, 4, 8) : (4 @ laneid, 1 @ laneid, 1)]))  # rows on lanes 4r + c
VIEW_DST = TileSpec((8, 4), "f32", TileLayout(S[(8, 4) : (1 @ laneid, 8 @ laneid)]))  # (r, c) on lane r + 8c
SHUFFLE_SRC = TileSpec((4, 8), "f32", TileLayout(S[(4, 8) : (1 @ laneid, 4 @ laneid)]))  # (g, w) on lane g + 4w
SHUFFLE_DST = TileSpec((4,), "f32", TileLayout(S[4 : 8 @ laneid] + R[8 : 1 @ laneid]))  # g on lanes 8g..8g+7


def _view(d, s):
    reduce_local(d, s, scope="warp", thread_reduce=True)


def _shuffle(d, s):
    reduce_local(d, s, scope="warp")


MISPLACED = [
    ("view", VIEW_SRC, VIEW_DST, _view, lambda a: np.broadcast_to(a.sum(axis=2, keepdims=True), (1, 8, 4)), 28,
     "dst element (0, 1) is held by lane 8 (slot 0); after the fold and the shuffles over lane masks 1, 2, lane 8 "
     "holds the 32 src elements at spatial position (2,); reducing axes [1] it must hold the 32 src elements at "
     "spatial position (0,), each once"),
    ("shuffle", SHUFFLE_SRC, SHUFFLE_DST, _shuffle, lambda a: a.sum(axis=2), 32,
     "dst element (0,) is held by lanes 0-7 (slot 0); after the butterfly over lane masks 4, 2, 1, lane 0 holds 8 "
     "src values (2 at spatial position (0,), 2 at spatial position (1,), 2 at spatial position (2,), 2 at spatial "
     "position (3,)); reducing axes [1] it must hold the 8 src elements at spatial position (0,), each once"),
]


@pytest.mark.parametrize("path, src, dst, generate, reference, wrong, message", MISPLACED,
                         ids=[m[0] for m in MISPLACED])
def test_misplaced_results_are_refused(path, src, dst, generate, reference, wrong, message):
    b = PtxBuilder()
    d, s = RegTile(b, dst.shape, "f32", dst.layout), RegTile(b, src.shape, "f32", src.layout)
    with pytest.raises(ReductionError) as refused:
        generate(d, s)
    assert str(refused.value) == "the results do not land where the dst layout puts them: " + message


@pytest.mark.parametrize("path, src, dst, generate, reference, wrong, message", MISPLACED,
                         ids=[m[0] for m in MISPLACED])
def test_without_the_check_those_pairs_compute_wrong_values(path, src, dst, generate, reference, wrong, message,
                                                           monkeypatch):
    """What the check refuses is a wrong answer: with it switched off the code runs and
    `wrong` of the values differ from numpy's (the two cases docs/reduction.md §2.13 opens with)."""
    from ptxkit.generators import shuffle, view

    monkeypatch.setattr(shuffle, "check_shuffle_results", lambda *args: None)
    monkeypatch.setattr(view, "_check_results", lambda *args: None)
    case = ImageCase(f"unchecked_{path}", src, dst, generate)
    a, b = case.inputs(np.random.default_rng(5))
    run = case.run(a, b, harness.simulator(harness.module_text([case])))
    want = np.broadcast_to(np.asarray(reference(a), np.float64).reshape(1, 1, -1), run.values.shape)
    assert np.sum(~np.isclose(run.values, want, atol=1e-4)) == wrong


# ---- the property ---------------------------------------------------------------------------------------
OPS = {"sum": np.sum, "max": np.max}
IDENTITY = {"sum": 0.0, "max": -3.4028234663852886e38}


@st.composite
def pairs(draw):
    """A random src tile over one warp and a dst for it, with dst's lanes placed at random.

    src: the lane bits used (all five, or fewer) are cut into strided lane iters, mixed
    with up to two local iters and cut into 1-3 dims. dst: each spatial dim keeps its
    extents, each reduced dim held by lanes becomes a pure-lane dim (Path 3) or a replica
    (Path 2), and dst's lane bits are src's sent through a permutation that is the identity
    half of the time (those pairs are right) and random otherwise (mostly refused).
    """
    shuffle_path = draw(st.booleans())
    bits = list(range(5)) if shuffle_path or draw(st.booleans()) else sorted(
        draw(st.sets(st.integers(0, 4), min_size=1, max_size=4)))
    lane_iters, run = [], [bits[0]]
    for bit in bits[1:]:
        if bit == run[-1] + 1 and draw(st.booleans()):
            run.append(bit)
        else:
            lane_iters.append(run)
            run = [bit]
    lane_iters.append(run)
    local_extents = draw(st.lists(st.integers(2, 3), max_size=2))
    iters = [("lane", r) for r in lane_iters] + [("local", i) for i in range(len(local_extents))]
    iters = draw(st.permutations(iters))
    ndim = draw(st.integers(1, min(3, len(iters))))
    cuts = sorted(draw(st.permutations(range(1, len(iters))))[: ndim - 1])
    dims = [iters[a:b] for a, b in zip([0, *cuts], [*cuts, len(iters)])]
    src_strides = _local_strides(local_extents, draw(st.permutations(range(len(local_extents)))))

    def extent(part):
        return 2 ** len(part[1]) if part[0] == "lane" else local_extents[part[1]]

    def shard(parts, bit_of, strides):
        out = []
        for kind, value in parts:
            if kind == "lane":  # a run of lane bits, most significant first, through bit_of
                out += [Iter(2, 1 << bit_of[b], laneid) for b in reversed(value)]
            else:
                out.append(Iter(local_extents[value], strides[value]))
        return out

    src_shape = tuple(math.prod(extent(p) for p in dim) for dim in dims)
    src_layout = TileLayout(shard([p for dim in dims for p in dim], list(range(5)), src_strides))
    reduce_dims = sorted(draw(st.sets(st.integers(0, ndim - 1), min_size=1)))
    permute = draw(st.booleans())
    bit_of = draw(st.permutations(range(5))) if permute else list(range(5))
    dst_strides = _local_strides(local_extents, draw(st.permutations(range(len(local_extents)))))
    dst_dims, replica = [], []
    for d, dim in enumerate(dims):
        lanes = [p for p in dim if p[0] == "lane"]
        if d not in reduce_dims:
            dst_dims.append(dim)
        elif shuffle_path:
            replica += [b for _, run in lanes for b in run]
        elif lanes:
            dst_dims.append(lanes)
        elif draw(st.booleans()):
            dst_dims.append([])  # keepdims: a unit dim
    dst_shape = tuple(math.prod(extent(p) for p in dim) for dim in dst_dims) or (1,)
    dst_iters = shard([p for dim in dst_dims for p in dim], bit_of, dst_strides) or [Iter(1, 1)]
    dst_layout = TileLayout(dst_iters, [Iter(2, 1 << bit_of[b], laneid) for b in sorted(replica)])
    options = {"op": draw(st.sampled_from(sorted(OPS))), "accum": draw(st.booleans()),
               "thread_reduce": draw(st.booleans())}
    return (TileSpec(src_shape, "f32", src_layout), TileSpec(dst_shape, "f32", dst_layout), reduce_dims,
            dst_dims, dims, options)


def _local_strides(extents, order):
    strides, step = [0] * len(extents), 1
    for i in reversed(order):
        strides[i], step = step, step * extents[i]
    return strides


def _reference(src, dst, reduce_dims, dst_dims, src_dims, op, partial, a, b):
    """float64 numpy: each dst element is `op` over its src elements (only those on its
    own lane when it is a per-lane partial), then `op` with the old value under accum."""
    spatial = [d for d in range(len(src.shape)) if d not in reduce_dims]
    src_coords = np.indices(src.shape).reshape(len(src.shape), -1)
    src_lane = placements(src.layout, src.shape)[0][0]
    dst_lane = placements(dst.layout, dst.shape)[0][0]
    kept = [i for i, dim in enumerate(dst_dims) if dim in [src_dims[d] for d in spatial]]
    dst_coords = np.indices(dst.shape).reshape(len(dst.shape), -1)
    values = a.reshape(-1)
    out = np.empty(dst_coords.shape[1])
    for y in range(dst_coords.shape[1]):
        mine = np.ones(src_coords.shape[1], bool)
        for d, i in zip(spatial, kept):
            mine &= src_coords[d] == dst_coords[i, y]
        if partial:
            mine &= src_lane == dst_lane[y]
        out[y] = OPS[op](values[mine]) if mine.any() else IDENTITY[op]
    return out


def _run_pair(pair, assemble=False):
    src, dst, reduce_dims, dst_dims, src_dims, options = pair
    taken = []

    def generate(d, s):
        taken.append(reduce_local(d, s, axes=reduce_dims, scope="warp", **options))

    case = ImageCase("pair", src, dst, generate)
    try:
        text = harness.module_text([case])
    except ReductionError:
        event("refused")
        return
    event(f"accepted: {taken[0]}")
    if assemble:
        ptxkit.assemble(text, arch="sm_90a")
    rng = np.random.default_rng(0)
    a = rng.integers(-1000, 1000, size=(1, *src.shape)).astype(np.float64)
    b = rng.integers(-1000, 1000, size=(1, *dst.shape)).astype(np.float64)
    run = case.run(a, b, harness.simulator(text))
    partial = taken[0] == "view" and not options["thread_reduce"]
    want = _reference(src, dst, reduce_dims, dst_dims, src_dims, options["op"], partial, a, b)
    if options["accum"]:
        want = (np.add if options["op"] == "sum" else np.maximum)(want, b.reshape(-1))
    run.assert_close(want.reshape(1, -1))


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_every_accepted_pair_computes_the_reduction(pair):
    """The property the check of docs/reduction.md §2.13 exists for. Without it (validation
    compares extents only) this test finds, within a few dozen examples, pairs whose lanes
    disagree on both paths: shrunk, src ``S[2 : 1@laneid]`` into dst ``S[2 : 2@laneid]``
    (lane 2 folds a register that holds nothing), and Path 2 from a (4, 8) src on lanes
    ``b0 + 2·b1`` (dim 0) and ``4·b2 + 2·b3 + b4`` (dim 1) over axis 0 into a dst whose
    element ``4·b2 + 2·b4 + b3`` swaps lane bits 3 and 4 (16 of 32 values wrong)."""
    _run_pair(pair)


@pytest.mark.ptxas
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_every_accepted_pair_assembles(pair):
    _run_pair(pair, assemble=True)
