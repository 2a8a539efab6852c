"""ptxkit.cfg.values.idioms: remainder and align-up idioms are recognised only when they compute one."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.flow.graph import flow_graph
from ptxkit.cfg.values.idioms import Linear, Remainder, _alignment_mask, _divides, _tree, align_up, linear, remainder


def block_of(body: str):
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n"
            f".reg .b32 %r<16>;\n.reg .b64 %rd<8>;\n.reg .b16 %rs<8>;\n{body}\tret;\n}}\n")
    return flow_graph(ptxkit.parse(text).function("k")).blocks[0]


MAGIC_7 = ("\tmul.wide.u32 %rd1, %r1, 613566757;\n\tshr.u64 %rd2, %rd1, 32;\n\tcvt.u32.u64 %r2, %rd2;\n"
           "\tsub.s32 %r3, %r1, %r2;\n\tshr.u32 %r4, %r3, 1;\n\tadd.s32 %r5, %r4, %r2;\n\tshr.u32 %r6, %r5, 2;\n")


def test_division_by_a_magic_number():
    block = block_of(MAGIC_7 + "\tmul.lo.s32 %r7, %r6, 7;\n\tsub.s32 %r8, %r1, %r7;\n")
    found = remainder(block.instructions, block.heads, 8, frozenset())
    assert (found.x, found.modulus, found.kind) == ("%r1", 7, "division")
    block = block_of(MAGIC_7 + "\tmad.lo.s32 %r8, %r6, -7, %r1;\n")
    assert remainder(block.instructions, block.heads, 7, frozenset()).modulus == 7


def test_a_wrong_divisor_or_a_changed_x_is_not_a_remainder():
    block = block_of(MAGIC_7 + "\tmul.lo.s32 %r7, %r6, 6;\n\tsub.s32 %r8, %r1, %r7;\n")
    assert remainder(block.instructions, block.heads, 8, frozenset()) is None  # q is x/7, not x/6
    block = block_of(MAGIC_7 + "\tmul.lo.s32 %r7, %r6, 7;\n\tadd.s32 %r1, %r1, 1;\n\tsub.s32 %r8, %r1, %r7;\n")
    assert remainder(block.instructions, block.heads, 9, frozenset()) is None
    block = block_of("\tshr.u32 %r6, %r1, 3;\n\tmul.lo.s32 %r7, %r6, 7;\n\tsub.s32 %r8, %r1, %r7;\n")
    assert remainder(block.instructions, block.heads, 2, frozenset()) is None  # x/8*7 leaves more than x % 7


#: LLVM's signed i / 3: the high word of i * 0x55555556, plus its sign bit
SIGNED_THIRD = ("\tmul.hi.s32 %r2, %r1, 1431655766;\n\tshr.u32 %r3, %r2, 31;\n\tadd.s32 %r4, %r2, %r3;\n"
                "\tmul.lo.s32 %r5, %r4, 3;\n\tsub.s32 %r6, %r1, %r5;\n")


def test_a_signed_division_by_a_magic_number():
    """A quotient that truncates a signed dividend leaves a remainder with its sign: the
    idiom says so, and the register analysis bounds it by what the dividend may be."""
    block = block_of(SIGNED_THIRD)
    assert remainder(block.instructions, block.heads, 4, frozenset()) == \
        Remainder("%r1", None, 3, "division", signed=True)
    # the unsigned reading of the same sequence fails for dividends of 2**31 and more
    used: list = []
    tree = _tree(block.instructions, block.heads, 3, "%r4", "%r1", used, 0)
    assert _divides(tree, 3, signed=True) and not _divides(tree, 3)
    # a magic number one off is no division by 3
    block = block_of(SIGNED_THIRD.replace("1431655766", "1431655765"))
    assert remainder(block.instructions, block.heads, 4, frozenset()) is None


#: TileLang's ``k % 3`` on a 16-bit stage counter: ``k * 0xAAAB >> 17`` by ``mul.wide.u16``
#: (the immediate read at 16 bits), then ``k - 3 * (k / 3)`` in ``.s16``
SIXTEEN_BIT_THIRD = ("\tcvt.u16.u32 %rs1, %r1;\n\tand.b16 %rs2, %rs1, 255;\n\tmul.wide.u16 %r2, %rs2, -21845;\n"
                     "\tshr.u32 %r3, %r2, 17;\n\tcvt.u16.u32 %rs3, %r3;\n\tmul.lo.s16 %rs4, %rs3, 3;\n"
                     "\tsub.s16 %rs5, %rs2, %rs4;\n")


def test_a_16_bit_division_by_a_magic_number():
    """The check divides 16-bit dividends where the subtraction is 16-bit: the sequence is
    ``x // 3`` for every 16-bit x, and not for 32-bit ones (the multiply reads 16 bits)."""
    block = block_of(SIXTEEN_BIT_THIRD)
    assert remainder(block.instructions, block.heads, 6, frozenset()) == Remainder("%rs2", None, 3, "division")
    used: list = []
    tree = _tree(block.instructions, block.heads, 5, "%rs3", "%rs2", used, 0)
    assert _divides(tree, 3, bits=16) and not _divides(tree, 3) and not _divides(tree, 5, bits=16)
    # one off in the magic number: wrong for some 16-bit dividend
    block = block_of(SIXTEEN_BIT_THIRD.replace("-21845", "-21846"))
    assert remainder(block.instructions, block.heads, 6, frozenset()) is None


def test_the_division_check_is_exact():
    tree = ("shr.u32", ("x",), ("imm", 3))
    assert _divides(tree, 8) and not _divides(tree, 7)
    assert not _divides(("add.s32", ("x",), ("imm", 1)), 2)
    used: list = []
    block = block_of(MAGIC_7)
    assert _tree(block.instructions, block.heads, 7, "%r6", "%r1", used, 0) is not None
    assert sorted(set(used)) == list(range(7))  # every instruction of the sequence


@pytest.mark.parametrize("mask, expected", [(-16, (16, None)), (0xFFFFFFF0, (16, None)), (67108848, (16, 67108864)),
                                            (-1, (1, None)), (0xF0F0, None), (0, None)])
def test_alignment_masks(mask, expected):
    assert _alignment_mask(mask) == expected


def test_alignment_remainders():
    block = block_of("\tshr.s32 %r2, %r1, 31;\n\tshr.u32 %r3, %r2, 28;\n\tadd.s32 %r4, %r1, %r3;\n"
                     "\tand.b32 %r5, %r4, -16;\n\tsub.s32 %r6, %r1, %r5;\n")
    found = remainder(block.instructions, block.heads, 4, frozenset())
    assert (found.x, found.modulus, found.kind, found.bias.name) == ("%r1", 16, "alignment", "%r3")
    block = block_of("\tand.b32 %r5, %r1, -128;\n\tsub.s32 %r6, %r1, %r5;\n")
    assert remainder(block.instructions, block.heads, 1, frozenset()).bias is None


#: ``(x & 1023) == 0 ? x : x + (1024 - (x & 1023))``, as nvcc spells ThunderKittens' allocator
ALIGN_UP = ("\tand.b64 %rd2, %rd1, 1023;\n\tmov.u64 %rd3, 1024;\n\tsub.s64 %rd4, %rd3, %rd2;\n"
            "\tadd.s64 %rd5, %rd1, %rd4;\n\tsetp.eq.s64 %p1, %rd2, 0;\n")


def align_up_block(body: str):
    return block_of(".reg .pred %p<3>;\n" + body)


def test_align_up_through_a_select():
    block = align_up_block(ALIGN_UP + "\tselp.b64 %rd6, %rd1, %rd5, %p1;\n")
    found = align_up(block.instructions, block.heads, 5, frozenset())
    assert (found.x, found.modulus, found.constant, found.others) == ("%rd1", 1024, 1024, ())
    negated = align_up_block(ALIGN_UP.replace("setp.eq", "setp.ne") + "\tselp.b64 %rd6, %rd5, %rd1, %p1;\n")
    assert align_up(negated.instructions, negated.heads, 5, frozenset()).modulus == 1024


@pytest.mark.parametrize("body", [
    ALIGN_UP + "\tselp.b64 %rd6, %rd5, %rd1, %p1;\n",  # the arms swapped: x when it is not aligned
    ALIGN_UP.replace("1023;", "1000;") + "\tselp.b64 %rd6, %rd1, %rd5, %p1;\n",  # not a power of two
    ALIGN_UP.replace("add.s64 %rd5, %rd1, %rd4", "add.s64 %rd5, %rd7, %rd4") + "\tselp.b64 %rd6, %rd1, %rd5, %p1;\n",
    ALIGN_UP + "\tadd.s64 %rd1, %rd1, 16;\n\tselp.b64 %rd6, %rd1, %rd5, %p1;\n",  # x changed before the select
    ALIGN_UP.replace("sub.s64 %rd4, %rd3, %rd2", "add.s64 %rd4, %rd3, %rd2") + "\tselp.b64 %rd6, %rd1, %rd5, %p1;\n",
])
def test_what_is_not_an_align_up(body):
    block = align_up_block(body)
    assert align_up(block.instructions, block.heads, len(block.instructions) - 2, frozenset()) is None


#: Triton's warp-specialized loader: from an mbarrier's address (a + 8 * i) to a tile's
#: (a + 8192 * i) and back, LLVM adding 8184 * i and taking it away again
MOVED = ("\tshl.b32 %r3, %r2, 3;\n\tadd.s32 %r4, %r1, %r3;\n\tmul.lo.s32 %r5, %r2, 8184;\n"
         "\tadd.s32 %r6, %r4, %r5;\n\tmad.lo.s32 %r7, %r2, -8184, %r6;\n")


def test_offsets_added_and_taken_back_cancel():
    block = block_of(MOVED)
    assert linear(block.instructions, block.heads, 4, frozenset()) == Linear({"%r1": 1, "%r2": 8}, 0)
    assert linear(block.instructions, block.heads, 3, frozenset()) == Linear({"%r1": 1, "%r2": 8192}, 0)
    block = block_of(MOVED + "\tadd.s32 %r8, %r7, 164096;\n\tsub.s32 %r9, %r8, %r7;\n")
    assert linear(block.instructions, block.heads, 6, frozenset()) == Linear({}, 164096)


def test_a_sum_keeps_whole_the_remainders_its_caller_names():
    """x % 7 plus 7 * (x / 7) is a sum of the remainder and the quotient: the remainder's
    own range is tighter. `linear` asks the caller's `remainders` where one is given (the
    register analysis keeps what it found at each site), the same answer as its own."""
    block = block_of(MAGIC_7 + "\tmul.lo.s32 %r7, %r6, 7;\n\tsub.s32 %r8, %r1, %r7;\n\tadd.s32 %r9, %r8, %r7;\n")
    kept = Linear({"%r8": 1, "%r6": 7}, 0, repeats=False)
    assert linear(block.instructions, block.heads, 9, frozenset()) == kept
    asked = []

    def found(code, at):
        asked.append(at)
        return remainder(code[0], code[1], at, frozenset())

    assert linear(block.instructions, block.heads, 9, frozenset(), remainders=found) == kept and 8 in asked
    # named no remainder, it expands x - 7 * (x / 7) + 7 * (x / 7) to x
    assert linear(block.instructions, block.heads, 9, frozenset(), remainders=lambda code, at: None) == \
        Linear({"%r1": 1}, 0)


@pytest.mark.parametrize("body, position", [
    (MOVED.replace("\tadd.s32 %r4", "\t@%p1 add.s32 %r4").replace("\tmul.lo.s32 %r5", "\t@%p1 mul.lo.s32 %r5")
     .replace("\tadd.s32 %r6", "\t@%p1 add.s32 %r6"), 4),  # guarded definitions: the old value may stay
    (MOVED.replace("\tmad.lo.s32 %r7", "\tadd.s32 %r2, %r2, 1;\n\tmad.lo.s32 %r7"), 5),  # i moved on
    ("\tadd.s32 %r3, %r1, %r2;\n\tmul.lo.s32 %r4, %r2, 4;\n\tadd.s32 %r5, %r1, %r4;\n", 2),  # no register twice
    ("\tmul.hi.s32 %r3, %r2, 8184;\n\tsub.s32 %r4, %r3, %r2;\n", 1),  # mul.hi is not a sum
    ("\tadd.s64 %rd1, %rd2, %rd3;\n\tsub.s64 %rd4, %rd1, %rd3;\n", 1),  # 64-bit: not followed
    ("\tadd.sat.s32 %r3, %r1, %r2;\n\tsub.s32 %r4, %r3, %r2;\n", 1),  # a saturating add is not a sum
])
def test_what_does_not_cancel(body, position):
    block = block_of(body)
    found = linear(block.instructions, block.heads, position, frozenset())
    assert found is None or not found.repeats, found  # no sum, or one whose parts' intervals are as tight
