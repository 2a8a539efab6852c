"""ptxkit.cfg.values.counters: values that move together (docs/fence.md §3.1), through the
register analysis's public entry point. The kernels that tests/test_registers.py already
has for an idiom (the ``s == N - 1 ? 0 : s + 1`` ring, counters kept beside a stage count,
the descriptor stepped round a ring, the allocator's rounding) are reused by import, and
the cases it has are not repeated here: these are the other ways to write an idiom, and
the kernels where it must not apply."""

from __future__ import annotations

import pytest

from test_registers import COUNTERS, LOW_ALIGNED, ROUNDED, SCALED, value_at

#: a ring index ``s`` advanced by ``selp s, A, B, p`` on a test of s against 6 (ARMS and
#: the comparison say which way), in a loop that leaves on a test of another register
RING = ("\tmov.u32 %r1, 0;\nL:\n\tadd.s32 %r3, %r1, 1;\n\tsetp.{comparison}.s32 %p1, %r1, {bound};\n"
        "\tselp.b32 %r1, {arms}, %p1;\n\tsetp.lt.u32 %p2, %r9, 99;\n\t@%p2 bra L;\n")


@pytest.mark.parametrize("comparison, arms, shown", [
    ("ne", "%r3, 0", "[0, 6]"),  # s != 6 ? s + 1 : 0, the arms the other way round
    ("ge", "0, %r3", "[0, 6]"),  # s >= 6 ? 0 : s + 1
    ("gt", "0, %r3", "[0, 7]"),  # s > 6 ? 0 : s + 1 wraps one stage later
])
def test_a_ring_index_wraps_whichever_way_its_test_is_written(comparison, arms, shown):
    assert value_at(RING.format(comparison=comparison, bound=6, arms=arms), "%r1") == shown


def test_a_ring_wrapped_at_a_count_known_only_at_run_time_is_not_bounded():
    """``s == n ? 0 : s + 1`` with n a parameter: the ring may be as long as n is."""
    body = "\tld.param.u32 %r20, [k_n];\n" + RING.format(comparison="eq", bound="%r20", arms="0, %r3")
    assert value_at(body, "%r1", params=".param .u32 k_n") == "[0, inf]"


@pytest.mark.parametrize("advance, shown", [
    # i < n (unsigned) ends the loop before i passes 2^32 - 2 (docs/fence.md §3.1, trips):
    # 24 * (i / 3) is at most 24 * 1431655764
    ("\tadd.s32 %r9, %r9, 8;\n", "[-34359738336, inf] step 8"),
    # i advanced under a guard counts no trips: i / 3 up to (2^32 - 1) / 3
    ("\tadd.s32 %r10, %r10, 1;\n", "[-34359738360, inf] step 8"),
], ids=["multiple", "counter"])
def test_a_counter_advanced_under_a_guard_is_not_kept_in_lockstep(advance, shown):
    """SCALED's 8 * i - 24 * (i / 3) is 8 * (i % 3) while 8 * i and i advance together;
    with either advance guarded, one may move on without the other."""
    assert value_at(SCALED, "%r5", params=".param .u32 n") == "[0, 16] step 8"
    guarded = SCALED.replace(advance, "\t@%p3 " + advance.lstrip("\t"))
    assert value_at(guarded, "%r5", params=".param .u32 n") == shown


def test_a_select_whose_terms_do_not_add_up_to_the_modulus_is_not_a_rounding():
    """``p & 1023 ? p + 512 - (p & 1023) : p`` is no rounding up to 1024: p's offset moves
    by [-496, 512] (the base is 16-byte aligned), not to the next multiple of 1024."""
    assert value_at(ROUNDED, "%rd6", head=LOW_ALIGNED) == "dynamic shared aligned 1024+0 (shared::cta generic)"
    half = ROUNDED.replace("\tmov.u64 %rd9, 1024;\n", "\tmov.u64 %rd9, 512;\n")
    assert value_at(half, "%rd6", head=LOW_ALIGNED) == "dynamic shared+[-511, 512] (shared::cta generic)"


@pytest.mark.parametrize("offset, shown", [
    (0, "[0, 16384]"),
    # x = tid - 64 may be negative: rem.s32 then is too, and so is the slice
    (-64, "[-114688, 114688]"),
])
def test_a_slice_of_a_remainder_is_in_the_box_only_for_a_dividend_not_below_zero(offset, shown):
    """``(16384 / n) * (x % n)`` with n the cluster's height (tests/test_registers.py has it
    for x the CTA's rank, which is never negative)."""
    body = (f"\tmov.u32 %r6, %tid.x;\n\tadd.s32 %r1, %r6, {offset};\n\tmov.u32 %r2, %cluster_nctaid.y;\n"
            "\tdiv.s32 %r3, 16384, %r2;\n"
            "\trem.s32 %r4, %r1, %r2;\n\tmul.lo.s32 %r5, %r3, %r4;\n")
    assert value_at(body, "%r5") == shown


@pytest.mark.parametrize("x, mask, shown", [
    ("\tmov.u32 %r1, %tid.x;\n", 67108848, "[0, 15]"),  # 2**26 - 16 keeps x's bits 4-25: x below 2**26
    ("\tld.param.u32 %r1, [k_n];\n", 67108848, "top"),  # x may reach 2**26: the mask drops its bit 26
    ("\tld.param.u32 %r1, [k_n];\n", -16, "[0, 15]"),  # -16 keeps every bit from 4 up
])
def test_an_alignment_remainder_is_exact_only_below_its_masks_limit(x, mask, shown):
    body = x + f"\tand.b32 %r4, %r1, {mask};\n\tsub.s32 %r5, %r1, %r4;\n"
    assert value_at(body, "%r5", params=".param .u32 k_n") == shown


#: ``x += x < 512 ? 512 : -512``: a ring of two 512-byte stages stepped by a selected step
#: (the scalar form of the descriptor ring of tests/test_registers.py); MID goes between
#: the select and the step
STEPPED = ("\tmov.u32 %r1, 0;\nL:\n\tsetp.lt.u32 %p1, %r1, 512;\n\tselp.b32 %r2, 512, -512, %p1;\n{mid}"
           "\tadd.s32 %r1, %r1, %r2;\n\tsetp.lt.u32 %p2, %r9, 99;\n\t@%p2 bra L;\n")


@pytest.mark.parametrize("mid, shown", [
    ("", "[0, 1023]"),  # below 512 it steps up, from 512 down: x stays in [0, 1023]
    # x moved on between the test and the step: 0, 513, 2, 515, ... the test bounds nothing
    ("\tadd.s32 %r1, %r1, 1;\n", "top"),
])
def test_a_step_selected_by_a_test_of_what_it_steps(mid, shown):
    assert value_at(STEPPED.format(mid=mid), "%r1") == shown


def test_a_counter_read_between_the_two_advances_is_not_kept_in_lockstep():
    """COUNTERS' stage ``x - 49152 * (z / 3)`` read after x has advanced and before z has:
    x - 16384 * z is four stages on from what it was, so the lockstep is not used."""
    kept = COUNTERS.format(OUTER="", AFTER="")
    assert value_at(kept, "%r10", ".param .u32 k_n") == \
        "dynamic shared+[100352, 133120] step 16384 (shared::cta window)"
    store = "\tadd.s32 %r10, %r3, %r9;\n\tst.shared.u32 [%r10], %r5;\n\t// here\n"
    between = kept.replace(store + "\tadd.s32 %r3, %r3, 65536;\n", "\tadd.s32 %r3, %r3, 65536;\n" + store)
    assert between != kept
    # bounded above only by the loop's trips: z < n (signed) makes at most 2^31 - 1
    assert value_at(between, "%r10", ".param .u32 k_n") == \
        "dynamic shared+[-70368743929856, 140737488406528] step 16384 (shared::cta window)"


#: ``n % 1024`` tested against 0 and computed again past the branch (a -G build); MID goes
#: between the test and the second remainder
RECOMPUTED = ("\tld.param.u32 %r1, [k_n];\n\trem.u32 %r2, %r1, 1024;\n\tsetp.eq.u32 %p1, %r2, 0;\n\t@%p1 bra OUT;\n"
              "{mid}\trem.u32 %r3, %r1, 1024;\n\tmov.u32 %r4, %r3;\n\t// here\n\tbar.sync 0;\nOUT:\n")


@pytest.mark.parametrize("mid, shown", [
    ("", "[1, 1023]"),  # the same remainder as the tested one: not 0
    ("\tbar.sync 0;\n\tbra.uni N;\nN:\n", "[1, 1023]"),  # the first computed in a block that dominates
    ("\tadd.s32 %r1, %r1, 5;\n", "[0, 1023]"),  # n moved on: another remainder
    ("\tadd.s32 %r2, %r2, 5;\n", "[0, 1023]"),  # the first remainder's register holds something else now
])
def test_a_remainder_computed_again_is_the_tested_one_only_while_both_hold(mid, shown):
    assert value_at(RECOMPUTED.format(mid=mid), "%r3", params=".param .u32 k_n") == shown


def test_a_selected_step_is_found_whichever_source_of_the_add_it_is():
    """``x = step + x`` as ``x = x + step``: the ``selp`` may be either source of the add."""
    swapped = STEPPED.format(mid="").replace("add.s32 %r1, %r1, %r2", "add.s32 %r1, %r2, %r1")
    assert swapped != STEPPED.format(mid="")
    assert value_at(swapped, "%r1") == "[0, 1023]"
    # the other source must be the compared register itself (or a part of it): a copy is not followed
    other = swapped.replace("add.s32 %r1, %r2, %r1", "mov.u32 %r5, %r1;\n\tadd.s32 %r1, %r2, %r5")
    assert value_at(other, "%r1") == "top"


def test_a_float_test_selecting_a_constant_is_not_a_ring():
    """``selp`` on a float ``setp`` of a register holding a float's bits (-1.0 < 0.5 is
    true: 16): the comparison is not the integers' (0xBF800000 is no number below 0.5), so
    it refines nothing and both arms stay."""
    body = ("\tmov.b32 %f1, 0xBF800000;\n\tsetp.lt.f32 %p1, %f1, 0f3F000000;\n"
            "\tselp.b32 %r2, 16, 32, %p1;\n")
    assert value_at(body, "%r2") == "[16, 32] step 16"
