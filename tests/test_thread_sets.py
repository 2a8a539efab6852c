"""ptxkit.cfg.values.thread_sets: the threads that may run each block, branches on the thread
index evaluated thread by thread."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.values.thread_sets import _apply, runners

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def threads_of(body: str, directives: str = "") -> dict[str, list[int]]:
    """Block name (B<index> when it has no label) -> the ``%tid.x`` values of the threads that may run it."""
    text = (f"{HEAD}.visible .entry k(.param .u32 n) {directives}\n{{\n.reg .b32 %r<9>;\n.reg .pred %p<5>;\n"
            f"{body}DONE:\n\tret;\n}}\n")
    flow = inlined_graph(ptxkit.parse(text, "k.ptx").function("k"))
    sets = runners(flow)
    return {block.name: [t for t in range(sets[block.index].bit_length())
                                             if sets[block.index] >> t & 1] for block in flow.blocks}


def test_roles_written_one_after_the_other_are_run_by_their_own_threads():
    found = threads_of("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 128;\n\t@!%p1 bra END_A;\n"
                       "\tbar.arrive 1, 256;\nEND_A:\n\t@%p1 bra DONE;\n\tbar.arrive 2, 256;\n",
                       ".maxntid 256, 1, 1")
    assert found["B0"] == list(range(256))
    assert found["B1"] == list(range(128))  # role A
    assert found["END_A"] == list(range(256))  # both roles meet
    assert found["B3"] == list(range(128, 256))  # role B
    assert found["DONE"] == list(range(256))


def test_the_lane_and_warp_arithmetic_of_compiled_code():
    # nvcc's warp index: tid / 32 through a shift, lane 0 of each warp by a mask
    found = threads_of("\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 5;\n\tand.b32 %r3, %r1, 31;\n"
                       "\tsetp.ne.s32 %p1, %r3, 0;\n\tsetp.ne.s32 %p2, %r2, 2;\n\tor.pred %p3, %p1, %p2;\n"
                       "\t@%p3 bra DONE;\n\tbar.arrive 1, 64;\n", ".reqntid 128, 1, 1")
    assert found["B1"] == [64]  # lane 0 of warp 2
    lanes = threads_of("\tmov.u32 %r1, %laneid;\n\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 64;\n",
                       ".maxntid 64, 1, 1")
    assert lanes["B1"] == [t for t in range(64) if t % 32]


def test_a_branch_on_anything_but_the_thread_index_sends_every_thread_both_ways():
    found = threads_of("\tld.param.u32 %r1, [n];\n\tmov.u32 %r2, %tid.x;\n\tadd.u32 %r3, %r2, %r1;\n"
                       "\tsetp.lt.u32 %p1, %r3, 64;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 64;\n", ".maxntid 128, 1, 1")
    assert found["B1"] == list(range(128))


def test_a_guard_that_is_no_predicate_sends_every_thread_both_ways():
    # invalid PTX (ptxas rejects a .b32 guard), but the pass must not fail on it: the
    # thread index itself as a guard has values other than 0 and 1 (found by mutation)
    found = threads_of("\tmov.u32 %r1, %tid.x;\n\t@%r1 bra DONE;\n\tbar.arrive 1, 64;\n", ".maxntid 64, 1, 1")
    assert found["B1"] == list(range(64))


def test_without_a_declared_shape_every_thread_index_is_possible():
    found = threads_of("\tmov.u32 %r1, %tid.x;\n\tsetp.gt.u32 %p1, %r1, 1000;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 64;\n")
    assert found["B1"] == list(range(1001))
    # %laneid of a block that may have more than one dimension: not followed
    lanes = threads_of("\tmov.u32 %r1, %laneid;\n\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 64;\n")
    assert len(lanes["B1"]) == 1024


@pytest.mark.parametrize("opcode, sources, expected", [
    ("setp.lt.s32", [[-1, 5], [0, 0]], [1, 0]),
    ("setp.lt.u32", [[-1, 5], [0, 6]], [0, 1]),  # -1 is 0xffffffff unsigned
    ("setp.hs.u32", [[-1, 5], [0, 6]], [1, 0]),  # -1 is 0xffffffff
    ("shr.s32", [[-64, 64], [4, 4]], [(-4) & 0xFFFFFFFF, 4]),
    ("shr.u32", [[-64, 64], [4, 4]], [0x0FFFFFFC, 4]),
    ("shl.b32", [[3, 3], [31, 40]], [0x80000000, 0]),
    ("div.s32", [[-7, 7], [2, 2]], [(-3) & 0xFFFFFFFF, 3]),  # truncates toward zero
    ("rem.s32", [[-7, 7], [2, 2]], [(-1) & 0xFFFFFFFF, 1]),
    ("mad.lo.u32", [[3, 4], [5, 5], [1, 2]], [16, 22]),
    ("cvt.u16.u32", [[0x12345, 7]], [0x2345, 7]),
    ("cvt.s32.s16", [[0xFFFF, 7]], [0xFFFFFFFF, 7]),
    ("min.s32", [[-1, 5], [0, 0]], [0xFFFFFFFF, 0]),
    ("and.pred", [[1, 0], [1, 1]], [1, 0]),
])
def test_integer_opcodes_thread_by_thread(opcode, sources, expected):
    assert _apply(opcode, sources) == expected


@pytest.mark.parametrize("opcode, sources, expected", [
    ("mul.hi.u32", [[0x10000, 3], 0x30000], [3, 0]), ("bfe.u32", [[0xF0, 0x70], 4, 4], [15, 7]),
    ("setp.lt.and.u32", [[1, 1], 2, [1, 0]], [1, 0]), ("selp.b32", [7, 9, [1, 0]], [7, 9]),
])
def test_every_opcode_of_the_evaluator_is_followed(opcode, sources, expected):
    assert _apply(opcode, sources) == expected


@pytest.mark.parametrize("opcode, sources", [
    ("add.f32", [[1], [2]]), ("div.u32", [[1, 1], [3, 0]]), ("add.cc.u32", [[1], [2]]), ("add.u32", [[1], [2], [3]]),
])
def test_what_is_not_followed(opcode, sources):
    assert _apply(opcode, sources) is None


def test_a_selp_on_the_thread_index_splits_the_threads():
    found = threads_of("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 32;\n\tselp.b32 %r2, 1, 0, %p1;\n"
                       "\tsetp.ne.s32 %p2, %r2, 0;\n\t@%p2 bra DONE;\n\tbar.arrive 1, 64;\n", ".maxntid 64, 1, 1")
    assert found["B1"] == list(range(32, 64))


def test_a_value_broadcast_from_a_lane_is_that_lanes_value_in_every_lane_of_its_warp():
    # warpgroup index from lane 0 (FlashMLA's `shfl(tid >> 7, 0)`): threads 0-127 run the block
    group = "\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 7;\n\tshfl.sync.idx.b32 %r3, %r2, 0, 31, -1;\n"
    found = threads_of(group + "\tsetp.ne.s32 %p1, %r3, 0;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 128;\n",
                       ".maxntid 384, 1, 1")
    assert found["B1"] == list(range(128))
    # each lane reads lane 5's index: only lane 5 of each warp has 5 there, and all its warp's lanes get it
    lane = ("\tmov.u32 %r1, %tid.x;\n\tshfl.sync.idx.b32 %r2, %r1, 5, 31, -1;\n\tand.b32 %r3, %r2, 63;\n"
            "\tsetp.ne.s32 %p1, %r3, 37;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 32;\n")
    assert threads_of(lane, ".maxntid 128, 1, 1")["B1"] == list(range(32, 64)) + list(range(96, 128))


@pytest.mark.parametrize("shuffle, runners", [
    # segments of 4 lanes (segmask 0x1c): lane l reads lane l & 28, in its own warp, so its warpgroup index
    ("shfl.sync.idx.b32 %r3, %r2, 0, 0x1c1f, -1", list(range(128))),
    # down 1: lane l reads lane l + 1, lane 31 its own (l + 1 past the clamp 31): the same warp again
    ("shfl.sync.down.b32 %r3, %r2, 1, 31, -1", list(range(128))),
    # with its predicate written too (what nvcc emits for CUTLASS's `__shfl_sync(-1, tid / 128, 0)`)
    ("shfl.sync.idx.b32 %r3|%p2, %r2, 0, 31, -1", list(range(128))),
])
def test_every_shuffle_mode_reads_the_lane_the_isa_names(shuffle, runners):
    found = threads_of(f"\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 7;\n\t{shuffle};\n"
                       "\tsetp.ne.s32 %p1, %r3, 0;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 128;\n", ".maxntid 384, 1, 1")
    assert found["B1"] == runners


@pytest.mark.parametrize("shuffle, runners", [
    # up 1 with clamp 0: lane l > 0 reads l - 1; lane 0 (0 - 1 below maxLane 0) its own. Thread 64 is lane 0
    # of warp 2 and keeps 64; thread 65 reads it
    ("shfl.sync.up.b32 %r2, %r1, 1, 0, -1", [64, 65]),
    # bfly 1: lane l reads l ^ 1, so 64 reaches thread 65 alone
    ("shfl.sync.bfly.b32 %r2, %r1, 1, 31, -1", [65]),
    # idx 3 with clamp 1: lane 3 is past the clamp, so every lane reads its own value
    ("shfl.sync.idx.b32 %r2, %r1, 3, 1, -1", [64]),
])
def test_a_shuffled_thread_index_reaches_the_threads_the_isa_names(shuffle, runners):
    found = threads_of(f"\tmov.u32 %r1, %tid.x;\n\t{shuffle};\n\tsetp.ne.s32 %p1, %r2, 64;\n\t@%p1 bra DONE;\n"
                       "\tbar.arrive 1, 32;\n", ".maxntid 128, 1, 1")
    assert found["B1"] == runners


@pytest.mark.parametrize("shuffle, directives", [
    ("shfl.sync.idx.b32 %r3, %r2, 0, 0x1f, 0xffff", ".maxntid 384, 1, 1"),  # half the warp: lanes 16-31 left out
    ("shfl.sync.idx.b32 %r3, %r2, 0, 31, -1", ".maxntid 384, 2, 1"),  # two rows: a warp may span them
])
def test_shuffles_not_followed_send_every_thread_both_ways(shuffle, directives):
    found = threads_of(f"\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 7;\n\t{shuffle};\n"
                       "\tsetp.ne.s32 %p1, %r3, 0;\n\t@%p1 bra DONE;\n\tbar.arrive 1, 128;\n", directives)
    assert len(found["B1"]) == 384
