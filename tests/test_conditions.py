"""ptxkit.cfg.values.conditions: what a branch's ``setp`` says of the registers it compared
(docs/fence.md §3.2), through the register analysis's public entry point. The cases that
tests/test_registers.py already has (an ``add`` in the chain, ``not.pred``, a guarded
``setp``, a register bound, dead blocks, the uniform broadcast of ``%tid.x >> 7``) are not
repeated here."""

from __future__ import annotations

import numpy as np
import pytest

from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.values.conditions import narrowed_at
from ptxkit.generators.simulate import launch
from test_registers import HEAD, REGS, raw_value_at, value_at
from test_values import contains_number

#: a thread index and a test of it whose taken side leaves the kernel; the fall-through
#: block (the one ``// here`` marks) is where the test's outcome is known
TESTED = "\tmov.u32 %r1, %tid.x;\n{test}\t@!%p1 bra OUT;\n{then}\t// here\n\tbar.sync 0;\nOUT:\n"


def test_a_test_of_a_shifted_index_bounds_the_index():
    """``(tid >> 4) < 3`` undoes the shift: tid is in [0, 47], the low bits anything."""
    body = TESTED.format(test="\tshr.u32 %r2, %r1, 4;\n\tsetp.lt.u32 %p1, %r2, 3;\n", then="\tmov.u32 %r3, %r1;\n")
    assert value_at(body, "%r1") == "[0, 47]"


@pytest.mark.parametrize("remainder, comparison, shown", [
    # tid % 16 == 0: tid is [0, 127] rounded up to 16, so 4 * tid is a multiple of 64 (up to
    # 4 * 128, the rounding of 127; without the test, [0, 508] step 4)
    ("and.b32 %r2, %r1, 15", "eq", "[0, 512] step 64"),
    ("rem.u32 %r2, %r1, 16", "eq", "[0, 512] step 64"),
    # a remainder not 0 takes away the ends of the range that are multiples: tid 0 goes
    ("and.b32 %r2, %r1, 15", "ne", "[4, 508] step 4"),
    ("rem.u32 %r2, %r1, 16", "ne", "[4, 508] step 4"),
    ("rem.u32 %r2, %r1, 12", "eq", "[0, 508] step 4"),  # 12 is no power of two: not taken up
])
def test_a_zero_remainder_makes_the_dividend_a_multiple(remainder, comparison, shown):
    body = TESTED.format(test=f"\t{remainder};\n\tsetp.{comparison}.u32 %p1, %r2, 0;\n",
                         then="\tshl.b32 %r3, %r1, 2;\n")
    assert value_at(body, "%r3", directives=" .maxntid 128, 1, 1") == shown


@pytest.mark.parametrize("between, after, shown", [
    # r2 = tid & 15 is written again after the test (a loop counting it down, as nvcc's
    # remainder loop does), but its write before the test reaches it: tid 0 goes
    ("", "\tadd.s32 %r2, %r2, -1;\n", "[1, 127]"),
    # the same with the test's write in a block before it
    ("\tbar.sync 0;\n\tbra.uni B;\nB:\n", "\tadd.s32 %r2, %r2, -1;\n", "[1, 127]"),
    # tid written between that write and the test: r2 no longer tells of it
    ("\tadd.s32 %r1, %r1, 3;\n", "\tadd.s32 %r2, %r2, -1;\n", "[3, 130]"),
])
def test_a_register_set_more_than_once_bounds_what_its_write_before_the_test_read(between, after, shown):
    body = ("\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 15;\n" + between +
            "\tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 bra OUT;\n\tmov.u32 %r3, %r1;\n\t// here\n" + after + "OUT:\n")
    assert value_at(body, "%r1", directives=" .maxntid 128, 1, 1") == shown


def test_a_register_stepped_before_its_test_bounds_nothing_it_was():
    """``i = i + 4`` then ``i != 16``: the test is of the new i, and says nothing of the
    i the step read (taking it for the new one would bound i by 12 after the loop)."""
    body = ("\tmov.u32 %r1, 0;\nL:\n\tadd.s32 %r1, %r1, 4;\n\tsetp.ne.s32 %p1, %r1, 16;\n\t@%p1 bra L;\n"
            "\tmov.u32 %r3, %r1;\n\t// here\n")
    assert value_at(body, "%r1") == "16"


def test_a_constant_first_test_is_read_the_other_way_round():
    """``16 > tid`` is ``tid < 16``."""
    body = TESTED.format(test="\tsetp.gt.u32 %p1, 16, %r1;\n", then="\tmov.u32 %r3, %r1;\n")
    assert value_at(body, "%r1") == "[0, 15]"


def test_the_tests_of_every_dominating_branch_hold_together():
    """``tid < 64``, then two blocks on ``tid >= 32``, then a test of another register:
    the block after all three sees both bounds of tid."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 64;\n\t@!%p1 bra OUT;\n\tbar.sync 0;\n"
            "\tsetp.ge.u32 %p2, %r1, 32;\n\t@!%p2 bra OUT;\n\tbar.sync 0;\n\tsetp.eq.u32 %p3, %r9, 0;\n"
            "\t@%p3 bra OUT;\n\tmov.u32 %r3, %r1;\n\t// here\n\tbar.sync 0;\nOUT:\n")
    assert value_at(body, "%r1") == "[32, 63]"


def test_a_test_does_not_narrow_a_block_another_way_also_enters():
    """T is reached from the test ``tid < 16`` and from ``tid < 900``: neither edge
    dominates it, so T sees every thread below 128 (.maxntid)."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 16;\n\t@%p1 bra T;\n\tsetp.lt.u32 %p2, %r1, 900;\n"
            "\t@%p2 bra T;\n\tbra.uni OUT;\nT:\n\tmov.u32 %r3, %r1;\n\t// here\n\tbar.sync 0;\nOUT:\n")
    assert value_at(body, "%r1", directives=" .maxntid 128, 1, 1") == "[0, 127]"



#: T is entered two ways: from the taken side of ``tid < 8`` tested again with `low`,
#: and from its other side tested with `high`. Neither way dominates T; each brings
#: what its two tests leave of tid, and T sees the join of that (docs/fence.md 3.2)
TWO_WAYS = ("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 8;\n\t@%p1 bra LOW;\n\tsetp.{high};\n"
            "\t@%p2 bra T;\n\tbra.uni OUT;\nLOW:\n\tsetp.{low};\n\t@%p3 bra T;\n\tbra.uni OUT;\n"
            "T:\n\tmov.u32 %r3, %r1;\n\t// here\n\tbar.sync 0;\nOUT:\n")


@pytest.mark.parametrize("low, high, shown", [
    ("ge.u32 %p3, %r1, 4", "lt.u32 %p2, %r1, 16", "[4, 15]"),  # [4, 7] and [8, 15]
    ("gt.u32 %p3, %r1, 9", "ge.u32 %p2, %r1, 16", "[16, 127]"),  # below 8 and above 9: that way brings nothing
    ("gt.u32 %p3, %r1, 9", "lt.u32 %p2, %r1, 8", ""),  # neither way is taken: no run reaches T (no value)
    ("lt.u32 %p3, %r1, 4", "ge.u32 %p2, %r1, 16", "[0, 127]"),  # [0, 3] and [16, 127]: an interval holds both
])
def test_a_block_entered_two_ways_sees_what_the_ways_bring(low, high, shown):
    body = TWO_WAYS.format(low=low, high=high)
    assert value_at(body, "%r1", directives=" .maxntid 128, 1, 1") == shown


@pytest.mark.parametrize("then, register, shown", [
    ("\tmov.u32 %r3, %r1;\n", "%r1", "[0, 15]"),
    # the tested register set anew past the branch: set twice, the test made in another
    # block is not taken up (the new value is [100, 115]; this is a loss, not an error)
    ("\tadd.s32 %r1, %r1, 100;\n", "%r1", "[100, 1123]"),
])
def test_a_test_made_in_an_earlier_block_bounds_the_branch_on_it(then, register, shown):
    """``p = tid < 16`` is set before a barrier and branched on in the next block: p and
    the register it tested are each set once, so the branch says what the test did."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 16;\n\tbar.sync 0;\n\tbra.uni B;\nB:\n"
            "\t@!%p1 bra OUT;\n" + then + "\t// here\n\tbar.sync 0;\nOUT:\n")
    assert value_at(body, register) == shown


#: p1 tests the r2 of the previous round (set once, in D); the branch in the block after
#: D reads p1 after D set r2 anew: r2 = 3 * r1 passes the test in round 1 (3 < 4), and
#: the branch of round 2 goes to T with r2 = 6
EARLIER_ROUND = ("\tmov.u32 %r1, 0;\nD:\n\tadd.s32 %r1, %r1, 1;\n\tmul.lo.s32 %r2, %r1, 3;\n"
                 "\tsetp.eq.s32 %p3, %r1, 1;\n\t@%p3 bra L;\n\t@%p1 bra T;\nL:\n\tsetp.lt.u32 %p1, %r2, 4;\n"
                 "\tbra.uni D;\nT:\n\tmov.u32 %r4, %r2;\n\t// here\n")


def test_a_kernel_whose_register_moves_on_after_the_test_computes_six():
    """What the simulator says the kernel below stores (the truth the next test holds to)."""
    text = (f"{HEAD}.visible .entry k(.param .u64 k_out)\n{{\n{REGS}{EARLIER_ROUND}"
            "\tld.param.u64 %rd1, [k_out];\n\tst.global.u32 [%rd1], %r4;\n\tret;\n}\n")
    out = np.zeros(1, np.uint32)
    launch(text, "k", out, grid=1, block=1)
    assert out.tolist() == [6]


def test_a_test_made_before_its_register_moved_on_does_not_bound_the_new_value():
    """The branch reads a predicate set one turn earlier, from the r2 of that turn: its
    test bounds nothing about the r2 the branch sees (it was 3 < 4; r2 is 6 at T)."""
    assert contains_number(raw_value_at(EARLIER_ROUND, "%r2"), 6)


#: The compared r2 stays as the test saw it, but r1, which the test bounds through
#: r2 = r1 + 5, is set again before the branch: 6 < 7 held for r1 = 1; at T r1 is 2
EARLIER_SOURCE = ("\tmov.u32 %r9, 0;\nD:\n\tadd.s32 %r9, %r9, 1;\n\tmov.u32 %r1, %r9;\n"
                  "\tsetp.eq.s32 %p3, %r9, 1;\n\t@%p3 bra L;\n\t@%p1 bra T;\nL:\n\tadd.s32 %r2, %r1, 5;\n"
                  "\tsetp.lt.u32 %p1, %r2, 7;\n\tbra.uni D;\nT:\n\tmov.u32 %r4, %r1;\n\t// here\n")


def test_a_test_made_before_a_source_moved_on_does_not_bound_the_new_source():
    text = (f"{HEAD}.visible .entry k(.param .u64 k_out)\n{{\n{REGS}{EARLIER_SOURCE}"
            "\tld.param.u64 %rd1, [k_out];\n\tst.global.u32 [%rd1], %r4;\n\tret;\n}\n")
    out = np.zeros(1, np.uint32)
    launch(text, "k", out, grid=1, block=1)
    assert out.tolist() == [2]
    assert contains_number(raw_value_at(EARLIER_SOURCE, "%r1"), 2)


@pytest.mark.parametrize("shift, shown", [
    (5, "[0, 95]"),  # lane 0's warp index is every lane's: past ``warp == 0``, tid >= 32
    (4, "[-16, 111]"),  # two halves of a warp hold two indices: lane 0's says nothing of lane 16's
])
def test_a_broadcast_bounds_the_thread_index_only_when_a_warp_shares_it(shift, shown):
    body = (f"\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, {shift};\n\tmov.u32 %r3, 0;\n"
            "\tshfl.sync.idx.b32 %r4|%p1, %r2, %r3, 31, -1;\n\tsetp.eq.s32 %p2, %r4, 0;\n\t@%p2 bra OUT;\n"
            f"\tadd.s32 %r5, %r1, -{1 << shift};\n\t// here\n\tbar.sync 0;\nOUT:\n")
    assert value_at(body, "%r5", directives=" .maxntid 128, 1, 1") == shown


@pytest.mark.parametrize("step, dividend, tid", [
    ("mov.u32 %r4, %r1", "[0, 128] step 16", "[0, 128] step 16"),  # a copy of tid: tid % 16 == 0 too
    # an added constant, even 0, ends the chain there: the test bounds the dividend alone
    ("add.s32 %r4, %r1, 4", "[16, 144] step 16", "[0, 127]"),
    ("add.s32 %r4, %r1, 0", "[0, 128] step 16", "[0, 127]"),
])
def test_a_zero_remainder_bounds_its_dividend_and_what_that_copies(step, dividend, tid):
    """``(d & 15) == 0`` makes d a multiple of 16 (rounded up: intervals do not keep
    which of [0, 127] those are), and the register d copies; not the one d adds to."""
    body = TESTED.format(test=f"\t{step};\n\tand.b32 %r2, %r4, 15;\n\tsetp.eq.u32 %p1, %r2, 0;\n",
                         then="\tshl.b32 %r3, %r1, 2;\n")
    assert value_at(body, "%r4", directives=" .maxntid 128, 1, 1") == dividend
    assert value_at(body, "%r1", directives=" .maxntid 128, 1, 1") == tid


def test_the_narrowings_of_a_block_are_its_dominators_outermost_first():
    """`narrowed_at` gathers what holds at each dominator, from the root down, and keeps
    it for every block on the way (the narrowings stand for themselves here: it never
    calls them)."""
    tree = DominatorTree({0: 0, 1: 0, 2: 1, 3: 0})
    narrowing = {0: [("x", "x < 9")], 2: [("x", "x > 2"), ("y", "y == 0")]}
    memo: dict = {}
    assert narrowed_at(memo, narrowing, tree, 2) == {"x": ["x < 9", "x > 2"], "y": ["y == 0"]}
    assert sorted(memo) == [0, 1, 2] and memo[1] is memo[0]  # nothing new holds in 1
    assert narrowed_at(memo, narrowing, tree, 3) == {"x": ["x < 9"]}
    assert memo[0] == {"x": ["x < 9"]}  # a dominator's list is copied, not extended
