"""Path 2, the lane shard→replica butterfly: masks, packing, widths, accum, redux, and
its parity cases on the simulator and ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import ptxkit
from ptxkit.generators import harness, parity
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.dispatch import reduce_local
from ptxkit.generators.harness import ImageCase, TileSpec
from ptxkit.generators.layout import R, S, TileLayout, laneid
from ptxkit.generators.regtile import RegTile
from ptxkit.generators.shuffle import gen_reduce_warp_shuffle, xor_allreduce

GROUPS = {"warp_shuffle", "warp_shuffle_multi", "warp_shuffle_gapped", "partial_width", "strided_replica", "width1",
          "packed_half", "integer", "in_place"}
CASES = [c for c in parity.all_cases() if c.group in GROUPS]
FULL = TileLayout(S[32 : 1 @ laneid])
ONE = TileLayout(S[1:1] + R[32 : 1 @ laneid])


def shuffle(src_shape, src_layout, dst_shape, dst_layout, dt="f32", target="sm_90a", select_for=None, **options):
    b = PtxBuilder(target, select_for)
    src = RegTile(b, src_shape, dt, TileLayout(src_layout))
    dst = RegTile(b, dst_shape, dt, TileLayout(dst_layout))
    gen_reduce_warp_shuffle(dst, src, **options)
    return b.instructions()


def shfl_masks(lines):
    return [int(line.split(", ")[2]) for line in lines if line.startswith("shfl")]


def test_full_warp_sum_is_tvms_descending_butterfly():
    lines = shuffle((32,), FULL, (1,), ONE)
    assert lines[0] == "mov.f32 %f1, %f0;"
    assert lines[1:] == [x for m in (16, 8, 4, 2, 1) for x in (
        f"shfl.sync.bfly.b32 %f2, %f1, {m}, 0x1f, 0xffffffff;", "add.f32 %f1, %f1, %f2;")]


def test_masks_follow_the_replica_strides():
    assert shfl_masks(shuffle((8, 4), S[(8, 4) : (4 @ laneid, 1 @ laneid)], (4,), S[4 : 1 @ laneid] + R[8 : 4 @ laneid])) \
        == [16, 8, 4]
    assert shfl_masks(shuffle((4, 8), S[(4, 8) : (8 @ laneid, 1 @ laneid)], (4,), S[4 : 8 @ laneid] + R[8 : 1 @ laneid])) \
        == [4, 2, 1]


def test_width_one_is_a_copy():
    lines = shuffle((32,), FULL, (32,), S[32 : 1 @ laneid] + R[1 : 1 @ laneid])
    assert lines == ["mov.f32 %f1, %f0;"]


def test_storage_coordinates_map_to_physical_slots():
    lines = shuffle((32, 2, 2), S[(32, 2, 2) : (1 @ laneid, 2, 4)], (2, 2), S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid])
    # src slots %f0..%f6, dst %f7..%f13: storage order visits slots 0, 4, 2, 6
    assert [line for line in lines if line.startswith("mov")] == [
        "mov.f32 %f7, %f0;", "mov.f32 %f11, %f4;", "mov.f32 %f9, %f2;", "mov.f32 %f13, %f6;"]


@pytest.mark.parametrize("dt, elems, pack, words", [("f32", 4, True, 4), ("f16", 4, True, 2), ("f16", 3, True, 2),
                                                    ("bf16", 2, True, 1), ("f16", 4, False, 4), ("f16", 1, True, 1)])
def test_one_shuffle_per_32_bit_word_and_mask(dt, elems, pack, words):
    lines = shuffle((32, elems), S[(32, elems) : (1 @ laneid, 1)], (elems,), S[elems:1] + R[32 : 1 @ laneid], dt,
                    pack=pack)
    assert len(shfl_masks(lines)) == 5 * words


def test_packed_pairs_combine_two_halves_per_instruction():
    lines = shuffle((32, 2), S[(32, 2) : (1 @ laneid, 1)], (2,), S[2:1] + R[32 : 1 @ laneid], "bf16", op="max")
    assert lines[2] == "mov.b32 %r0, {%h2, %h3};" and lines[-1] == "mov.b32 {%h2, %h3}, %r0;"
    assert sum(line.startswith("max.NaN.bf16x2 %r0, %r0, %r1;") for line in lines) == 5
    ignoring = shuffle((32, 2), S[(32, 2) : (1 @ laneid, 1)], (2,), S[2:1] + R[32 : 1 @ laneid], "bf16", op="max",
                       nan="ignore")
    assert sum(line.startswith("max.bf16x2 %r0, %r0, %r1;") for line in ignoring) == 5
    fallback = shuffle((32, 2), S[(32, 2) : (1 @ laneid, 1)], (2,), S[2:1] + R[32 : 1 @ laneid], "bf16",
                       select_for="sm_80")
    assert not any("bf16x2" in line for line in fallback) and sum("add.f32" in line for line in fallback) == 10


def test_integers_use_redux_on_sm80_with_group_masks():
    lines = shuffle((4, 8), S[(4, 8) : (8 @ laneid, 1 @ laneid)], (4,), S[4 : 8 @ laneid] + R[8 : 1 @ laneid], "s32",
                    op="max")
    # each lane's group: the 8 lanes that share its lane bits 3-4
    assert lines[1:] == ["mov.u32 %r2, %laneid;", "and.b32 %r2, %r2, 24;", "mov.b32 %r3, 0x000000ff;",
                         "shl.b32 %r3, %r3, %r2;", "redux.sync.max.s32 %r1, %r1, %r3;"]
    full = shuffle((32,), FULL, (1,), ONE, "u32", op="sum")
    assert full[-1] == "redux.sync.add.u32 %r1, %r1, 0xffffffff;"
    assert not any("redux" in x for x in shuffle((32,), FULL, (1,), ONE, "s32", select_for="sm_75"))


ACCUM_CASES = [
    ImageCase("accum", TileSpec((32,), "f32", FULL), TileSpec((1,), "f32", ONE),
              lambda d, s: reduce_local(d, s, op="sum", accum=True, scope="warp")),
    ImageCase("no_accum", TileSpec((32,), "f32", FULL), TileSpec((1,), "f32", ONE),
              lambda d, s: reduce_local(d, s, op="sum", scope="warp")),
]


def test_accum_folds_the_old_value_in_unlike_tvm():
    """accum means the same on every path (and in ``ptxkit gen``): TVM's Path 2 would
    overwrite dst."""
    case, plain = ACCUM_CASES
    run = harness.simulator(harness.module_text(ACCUM_CASES))
    a, b = case.inputs(np.random.default_rng(1))
    case.run(a, b, run).assert_close(a.sum(axis=1, keepdims=True) + b, atol=1e-4)
    plain.run(a, b, run).assert_close(a.sum(axis=1, keepdims=True), atol=1e-4)
    b_ = PtxBuilder()
    tile = RegTile(b_, (32,), "f32", FULL)
    with pytest.raises(ReductionError, match=r"accum=True on a dst that shares registers with src \(a region of the "
                                             r"same tile\) would fold src's own values in again"):
        gen_reduce_warp_shuffle(tile, tile, accum=True)


LANES_BY_FOUR = TileSpec((128,), "f32", TileLayout(S[(32, 4) : (1 @ laneid, 1)]))


def test_regions_are_refused():
    """Path 2 walks every storage coordinate of both tiles: a region of src was reduced
    whole and a region of dst written whole (64 of 128 values wrong for the columns 0-1
    of (32, 4) into dst[0:2])."""
    b = PtxBuilder()
    src = RegTile(b, LANES_BY_FOUR.shape, "f32", TileLayout(S[(32, 4) : (1 @ laneid, 1)]))
    dst = RegTile(b, (4,), "f32", TileLayout(S[4:1] + R[32 : 1 @ laneid]))
    with pytest.raises(ReductionError, match=r"^the lane shard -> replica reduction \(Path 2\) reduces whole tiles; "
                                             r"src is the region start=\(0,\) extent=\(64,\) of a \(128,\) tile$"):
        reduce_local(dst, src[0:64], scope="warp")
    with pytest.raises(ReductionError, match=r"dst is the region start=\(2,\) extent=\(2,\) of a \(4,\) tile$"):
        gen_reduce_warp_shuffle(dst[2:4], src)
    assert b.instructions() == []


def test_accum_on_a_view_of_src_is_refused():
    """A view of src's own registers is another buffer, so only a region of the same tile
    was refused: the view's old values are each lane's inputs, which the butterfly already
    counts, and a sum came out as the total plus the lane's own value."""
    b = PtxBuilder()
    src = RegTile(b, LANES_BY_FOUR.shape, "f32", LANES_BY_FOUR.layout)
    view = src.view((4,), TileLayout(S[4:1] + R[32 : 1 @ laneid]))
    with pytest.raises(ReductionError, match=r"^accum=True on a dst that shares registers with src \(a view of its "
                                             r"registers\) would fold src's own values in again, as old dst values; "
                                             r"reduce into another buffer or pass accum=False$"):
        reduce_local(view, src, scope="warp", accum=True)


# each lane's four values into a view whose storage is transposed: dst[k] sits in another
# src element's register, which the copies of the zero-copy in-place form would overwrite
TRANSPOSED = TileSpec((2, 2), "f32", TileLayout(S[(2, 2) : (1, 2)] + R[32 : 1 @ laneid]))
PERMUTED_VIEW = ImageCase("permuted_view", LANES_BY_FOUR, None,
                          lambda d, s: reduce_local(s.view(TRANSPOSED.shape, TRANSPOSED.layout), s, scope="warp"),
                          read_as=TRANSPOSED)


def test_a_view_that_moves_elements_between_registers_is_computed_apart():
    a, _ = PERMUTED_VIEW.inputs(np.random.default_rng(4))
    text = harness.module_text([PERMUTED_VIEW])
    run = PERMUTED_VIEW.run(a, None, harness.simulator(text))
    run.assert_close(a.reshape(1, 32, 2, 2).sum(axis=1), atol=1e-4)  # before: 32 of 128 values wrong
    assert text.count("shfl.sync.bfly.b32") == 20  # one butterfly per element, on the fresh registers


def test_tvms_adjacent_lane_masks_are_wrong_for_a_strided_replica():
    """The harness catches TVM's bug: masks 4, 2, 1 where the replica needs 16, 8, 4."""
    src = TileSpec((8, 4), "f32", TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]))
    dst = TileSpec((4,), "f32", TileLayout(S[4 : 1 @ laneid] + R[8 : 4 @ laneid]))

    def tvm_masks(d, s):
        d.builder.ins("mov.f32", d.regs[0], s.regs[0])
        xor_allreduce(d.builder, "sum", "f32", d.regs[:1], (4, 2, 1), "0xffffffff")

    case = ImageCase("tvm_masks", src, dst, tvm_masks)
    a, b = case.inputs(np.random.default_rng(2))
    run = case.run(a, b, harness.simulator(harness.module_text([case])))
    with pytest.raises(AssertionError):
        run.assert_close(a.sum(axis=1), atol=1e-4)


@pytest.fixture(scope="module")
def simulated():
    return harness.simulator(harness.module_text([c.case for c in CASES]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_parity_on_the_simulator(case, simulated):
    case.run_and_check(simulated)


@pytest.mark.ptxas
def test_accum_kernels_assemble():
    assert len(ptxkit.assemble(harness.module_text(ACCUM_CASES + [PERMUTED_VIEW])).resources) == 3


@pytest.mark.ptxas
def test_parity_kernels_assemble():
    cubin = ptxkit.assemble(harness.module_text([c.case for c in CASES]), arch="sm_90a")
    assert len(cubin.resources) == len(CASES)


@pytest.mark.parametrize("case, count", parity.shuffle_count_cases(), ids=lambda x: getattr(x, "name", str(x)))
def test_shfl_count_in_ptx(case, count):
    entry, _ = case.entry()
    assert sum(line.strip().startswith("shfl.sync.bfly.b32") for line in entry.splitlines()) == count


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_a_wrong_packed_shuffle_mask_fails_the_exact_check(dt):
    """With TVM's tolerances (0.1, 0.25) a wrong mask in a packed f16/bf16 max left lanes
    wrong and passed; compared exactly, it fails. The correct kernel passes."""
    (case,) = [c for c in parity.packed_half_cases() if c.name == f"packed_{dt}_native_max_pack"]
    text = harness.module_text([case.case])
    case.run_and_check(harness.simulator(text))
    first = text.index("shfl.sync.bfly.b32")
    wrong = text[:first] + text[first:].replace(", 4, 0x1f", ", 16, 0x1f", 1)  # mask 4 → 16: other groups' lanes
    assert wrong != text
    with pytest.raises(AssertionError, match="values off"):
        case.run_and_check(harness.simulator(wrong))
