"""ptxkit.cfg.values.values: every operation over-approximates the concrete one.

The property tests draw concrete operands inside abstract values and check that the
concrete result is inside the abstract result (soundness), which is what the fence
pass's correctness rests on.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.values.values import (
    GENERIC, INF, NUM, SHARED_CTA_SPACE, TOP, WINDOW, Atom, Region, _or_bounds, _xor_bounds, add, address,
    aligned_start, and_, anywhere, bits_of, compare, constant, field, join, meet, mul, number, or_, pack, refine,
    shl, shr, show, signed, sub, truncate, unpack, widen, wrap, xor,
)

SMEM = Region("smem", SHARED_CTA_SPACE, 8192, 1024)


def _member(atom, n: int) -> bool:
    """`n` is in the atom's range and congruent to its low end modulo its step."""
    return atom.lo <= n <= atom.hi and (atom.hi >= INF or atom.lo <= -INF or (n - atom.lo) % atom.step == 0)


def contains_number(value: tuple, n: int) -> bool:
    return any(a.form != NUM or _member(a, n) for a in value) if value else False


def contains_offset(value: tuple, offset: int, shift: int = 0, high: int = 0, region: Region = SMEM) -> bool:
    """True when the address `region + offset` (shifted, with `high`) is in `value`."""
    for atom in value:
        if atom.form not in (NUM, WINDOW, GENERIC) or atom.form == NUM and atom.lo == -INF:
            return True
        if atom.form != NUM and atom.region in (region, None) and atom.shift == shift and atom.high == high \
                and _member(atom, offset):
            return True
    return any(a is TOP[0] for a in value)


#: ``(lo, hi, step)``: the values lo, lo + step, ... up to hi.
intervals = st.tuples(st.integers(-300, 300), st.integers(0, 40), st.sampled_from([1, 2, 4, 16, 32])).map(
    lambda t: (t[0], t[0] + t[1] * t[2], t[2]))


@settings(max_examples=600)
@given(intervals, intervals, st.data())
def test_arithmetic_is_sound(a, b, data):
    x = a[0] + a[2] * data.draw(st.integers(0, (a[1] - a[0]) // a[2]))
    y = b[0] + b[2] * data.draw(st.integers(0, (b[1] - b[0]) // b[2]))
    va, vb = number(*a), number(*b)
    assert contains_number(add(va, vb), x + y)
    assert contains_number(sub(va, vb), x - y)
    assert contains_number(mul(va, vb), x * y)
    assert contains_number(join(va, vb), x) and contains_number(join(va, vb), y)
    if x >= 0 and y >= 0:
        assert contains_number(xor(va, vb), x ^ y)
        assert contains_number(or_(va, vb), x | y)
        assert contains_number(and_(va, vb, 32), x & y)
    shift = data.draw(st.integers(0, 8))
    assert contains_number(shl(va, number(shift)), x << shift)
    if x >= 0:
        assert contains_number(shr(va, number(shift)), x >> shift)


@settings(max_examples=300)
@given(st.integers(0, 4000), st.integers(0, 2000), st.integers(0, 127), st.data())
def test_address_operations_are_sound(lo, width, small, data):
    offset = data.draw(st.integers(lo, lo + width))
    base = 1024 * data.draw(st.integers(0, 100))  # the region's (unknown) aligned start
    value = address(SMEM, lo, lo + width)
    absolute = base + offset
    assert contains_offset(add(value, number(small)), offset + small)
    # swizzles: an XOR / OR of low bits keeps the address inside the aligned span
    assert contains_offset(xor(value, number(0, small)), (absolute ^ small) - base)
    assert contains_offset(or_(value, number(small)), (absolute | small) - base)
    # alignment masks round down
    assert contains_offset(and_(value, number(-64), 32), (absolute & -64) - base)
    # descriptor fields: (addr >> 4) & 0x3FFF, then constant bits above it
    descriptor = or_(and_(shr(value, number(4)), number(0x3FFF), 64), number(0x40000040 << 32))
    assert contains_offset(descriptor, offset, shift=4, high=0x40000040 << 32)


@settings(max_examples=400)
@given(intervals, st.sampled_from([8, 16]), st.integers(-70000, 70000), st.data())
def test_a_cut_number_stands_for_its_low_bits(a, bits, shift, data):
    """`wrap` (a ``cvt`` to `bits` bits) keeps numbers congruent to the true low bits: read
    as signed or as unsigned, the value holds what the register holds."""
    lo, hi, step = a[0] + shift, a[1] + shift, a[2]
    x = lo + step * data.draw(st.integers(0, (hi - lo) // step))
    cut = wrap(number(lo, hi, step), bits)
    low = x & ((1 << bits) - 1)
    as_signed = low - (1 << bits) if low >> (bits - 1) else low
    assert contains_number(truncate(cut, bits), low)
    assert contains_number(signed(cut, bits), as_signed)


@settings(max_examples=300)
@given(intervals, st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge"]), st.integers(-320, 320), st.data())
def test_a_refined_value_keeps_every_number_that_passes_the_test(a, comparison, bound, data):
    x = a[0] + a[2] * data.draw(st.integers(0, (a[1] - a[0]) // a[2]))
    holds = {"eq": x == bound, "ne": x != bound, "lt": x < bound, "le": x <= bound, "gt": x > bound,
             "ge": x >= bound}[comparison]
    assert contains_number(refine(number(*a), comparison, bound, holds), x)


@settings(max_examples=300)
@given(intervals, intervals, st.lists(st.integers(-400, 400), max_size=4), st.data())
def test_widening_holds_the_new_value(old, new, thresholds, data):
    """Widening may round a threshold in to the value's step, never inside the new value."""
    lo, hi = min(old[0], new[0]), max(old[1], new[1])
    grown = number(lo, hi, new[2])
    x = lo + new[2] * data.draw(st.integers(0, (hi - lo) // new[2]))
    assert contains_number(widen(number(*old), grown, sorted(thresholds)), x)


@settings(max_examples=200)
@given(st.integers(0, 4000), st.integers(0, 3), st.integers(0, 1 << 14), st.data())
def test_a_field_of_a_generic_shared_address_is_its_window_address_field(lo, width, window_base, data):
    """Bits 4-17 of a generic shared address, the window taken to start at a multiple of
    2**18 in the generic space (docs/fence.md §8): those of its window address."""
    offset = data.draw(st.integers(lo, lo + 16 * width))
    generic_base = data.draw(st.integers(1, 1 << 20)) << 18
    start = 1024 * (window_base % 100)  # the region's start in the window
    value = field(address(SMEM, lo, lo + 16 * width, form=GENERIC), 4, 14)
    concrete = (((generic_base + start + offset) >> 4) & 0x3FFF)
    assert concrete == ((start + offset) >> 4) & 0x3FFF
    assert contains_offset(value, offset, shift=4)


#: Writes, for each CTA, the window and generic addresses of its dynamic and its static
#: shared memory: ``[window dyn, generic dyn, window stat, generic stat]``.
WINDOW_PROBE = """.version 8.0
.target sm_90a
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.shared .align 8 .b8 stat[64];
.visible .entry probe(.param .u64 out)
{
  .reg .b32 %r<2>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %ctaid.x;
  mul.wide.u32 %rd2, %r1, 32;
  add.s64 %rd3, %rd1, %rd2;
  mov.u64 %rd4, dyn;
  cvta.shared.u64 %rd5, %rd4;
  mov.u64 %rd6, stat;
  cvta.shared.u64 %rd7, %rd6;
  st.global.v2.u64 [%rd3], {%rd4, %rd5};
  st.global.v2.u64 [%rd3+16], {%rd6, %rd7};
  ret;
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("dynamic", [0, 100 * 1024, 200 * 1024])
def test_the_generic_shared_window_starts_at_a_multiple_of_2_18(dynamic):
    """The assumption `field` rests on (docs/fence.md §8), on this GPU: every CTA's
    generic shared addresses are its window addresses plus a multiple of 2**18."""
    from ptxkit import runtime

    kernel = runtime.load(ptxkit.assemble(WINDOW_PROBE, arch="sm_90a", filename="window_probe.ptx")).kernel("probe")
    out = np.zeros((264, 4), np.uint64)
    kernel.launch(runtime.Out(out), grid=264, block=32, shared_mem=dynamic)
    windows, generics = out[:, [0, 2]].astype(object), out[:, [1, 3]].astype(object)
    assert all(w < 1 << 18 for w in windows.flat) and all(g >= 1 << 18 for g in generics.flat)  # all written
    assert all((g - w) % (1 << 18) == 0 for g, w in zip(generics.flat, windows.flat))


@settings(max_examples=300)
@given(st.integers(0, 90), st.integers(0, 90), st.integers(0, 90), st.integers(0, 90))
def test_or_and_xor_bounds_are_exact(a, width_a, c, width_c):
    """The bounds of ``x | y`` and ``x ^ y`` over two intervals are the true extremes."""
    b, d = a + width_a, c + width_c
    ors = [x | y for x in range(a, b + 1) for y in range(c, d + 1)]
    xors = [x ^ y for x in range(a, b + 1) for y in range(c, d + 1)]
    assert _or_bounds(a, b, c, d) == (min(ors), max(ors))
    assert _xor_bounds(a, b, c, d) == (min(xors), max(xors))


@settings(max_examples=300)
@given(st.integers(-40, 300), st.integers(0, 90), st.integers(0, 1023))
def test_a_mask_of_an_interval_has_its_true_extremes(lo, width, mask):
    """``x & mask`` over an interval of non-negative numbers is bounded by the true least
    and greatest results (and holds every result for negative ones too)."""
    hi = lo + width
    results = [(x & 0xFFFFFFFF) & mask for x in range(lo, hi + 1)]
    value = and_(number(lo, hi), number(mask), 32)
    assert all(contains_number(value, r) for r in results)
    if lo >= 0:
        assert (value[0].lo, value[0].hi) == (min(results), max(results))


@settings(max_examples=300)
@given(st.integers(-50, 50), st.integers(0, 40), st.integers(-60, 60),
       st.sampled_from(["eq", "ne", "lt", "le", "gt", "ge", "lo", "ls", "hi", "hs"]), st.booleans())
def test_a_comparison_is_decided_only_when_every_number_agrees(lo, width, bound, comparison, unsigned):
    """`compare` is 1 (or 0) only when the comparison holds (or fails) for every number."""
    outcomes = set()
    for x in range(lo, lo + width + 1):
        a, b = (x & 0xFFFFFFFF, bound & 0xFFFFFFFF) if unsigned or comparison in ("lo", "ls", "hi", "hs") \
            else (x, bound)
        outcomes.add({"eq": a == b, "ne": a != b, "lt": a < b, "lo": a < b, "le": a <= b, "ls": a <= b,
                      "gt": a > b, "hi": a > b, "ge": a >= b, "hs": a >= b}[comparison])
    value = compare(number(lo, lo + width), comparison, bound, unsigned)
    assert all(contains_number(value, int(outcome)) for outcome in outcomes)


@settings(max_examples=600)
@given(st.integers(0, 63), st.integers(0, 3000), st.integers(0, 40), st.sampled_from([1, 4, 16]),
       st.sampled_from([32, 128, 1024]), st.integers(0, 127), st.data())
def test_rounding_an_object_aligned_less(start, lo, count, step, alignment, small, data):
    """``(p + N - 1) & -N`` and a swizzle XOR on an object only 16-byte aligned: the
    result is an offset from the object's start rounded up to N (`aligned_start`)."""
    dyn = Region("dyn", SHARED_CTA_SPACE, None, 16)
    base = 16 * start  # where the object happens to start
    offset = lo + step * data.draw(st.integers(0, count))
    value = add(address(dyn, lo, lo + count * step), number(0))
    if step > 1:
        value = (value[0]._replace(step=step),)
    rounded = and_(add(value, number(alignment - 1)), number(-alignment), 32)
    up = aligned_start(dyn, alignment)
    rounded_start = -(-base // alignment) * alignment
    result = (base + offset + alignment - 1) & -alignment
    assert contains_offset(rounded, result - rounded_start, region=up)
    assert 0 <= rounded_start - base <= up.slack
    swizzled = xor(rounded, number(0, small, 16))
    assert contains_offset(swizzled, (result ^ (small & -16)) - rounded_start, region=up)


def test_forms_spaces_and_text():
    assert show(address(SMEM, 16, form=GENERIC)) == "smem+16 (shared::cta generic)"
    assert show(anywhere(SHARED_CTA_SPACE, WINDOW)) == "somewhere (shared::cta window)"
    assert show(add(address(SMEM), address(SMEM))) == "top"  # a sum of two addresses is no address
    assert show(sub(address(SMEM, 40), address(SMEM, 8))) == "32"
    assert constant(number(3)) == 3 and constant(number(3, 4)) is None and constant(TOP) is None


def has_descriptor(value: tuple, offset: int, high: int) -> bool:
    """True when the word ``(smem + offset) >> 4 | high`` is in `value` as a descriptor of
    SMEM (not as top): an atom shifted by 4 holding the offset, whose known bits are
    `high`'s outside its loose ones."""
    return any(a.form == WINDOW and a.region == SMEM and a.shift == 4 and _member(a, offset)
               and not a.high & a.loose and high & ~a.loose == a.high for a in value)


@settings(max_examples=300)
@given(st.integers(0, 4000), st.sampled_from([0, 0x3F, 0x3FFF]), st.data())
def test_a_descriptor_field_not_known_keeps_the_address(lo, most, data):
    """A descriptor whose LBO field (bits 16-29) is a number the analysis only bounds
    (CUTLASS's sm103 grouped GEMM) still names its matrix: the field's bits stay loose
    through the packing and unpacking a descriptor goes through, the address exact."""
    offset = data.draw(st.integers(lo, lo + 2048))
    lbo = data.draw(st.integers(0, most))
    fields = 1 << 62 | 0x40 << 32
    start = and_(shr(address(SMEM, lo, lo + 2048), number(4)), number(0x3FFF), 64)
    descriptor = or_(start, or_(shl(number(0, most), number(16)), number(fields)))
    high = fields | lbo << 16
    assert has_descriptor(descriptor, offset, high)
    low, upper = unpack(descriptor, 2, 32)
    assert contains_number(upper, high >> 32)
    assert has_descriptor(pack([add(low, number(2)), upper], 32), offset + 32, high)  # a K step of 32 bytes
    assert contains_number(bits_of(descriptor, 16, 16), lbo)
    assert show(and_(descriptor, number(0x3FFF))) == show(start)  # the start field alone
    if most:
        assert show(descriptor).endswith(f"| {fields:#x} | any of {most << 16:#x}")
        assert add(descriptor, number(fields)) == TOP  # a carry through loose bits


def test_packing_descriptor_halves():
    low = shr(address(SMEM, 32), number(4))
    packed = pack([low, number(0x40000040)], 32)
    assert show(packed) == "smem+32 (shared::cta window) >> 4 | 0x4000004000000000"
    assert [show(v) for v in unpack(packed, 2, 32)] == ["smem+32 (shared::cta window) >> 4", "1073741888"]
    # adding to the start-address field moves the address by 16 bytes a step
    assert show(add(packed, number(2))) == "smem+64 (shared::cta window) >> 4 | 0x4000004000000000"
    # the fields added rather than or-ed in, with the step (Triton's later k-steps): the same descriptor
    assert show(add(low, number(0x4000004000000002))) == "smem+64 (shared::cta window) >> 4 | 0x4000004000000000"
    assert show(add(add(low, number(0x4000004000000000)), number(0x10000))) == \
        "smem+32 (shared::cta window) >> 4 | 0x4000004000010000"
    # with the 128-byte swizzle in bits 62-63 the constant is negative as an s64 immediate
    # (Triton's `add.s64 d, d, -9223371899415822334`): the same word, not a step back
    assert show(add(low, number(0x8000002000000002 - (1 << 64)))) == \
        "smem+64 (shared::cta window) >> 4 | 0x8000002000000000"
    assert show(add(low, number(-2))) == "smem+0 (shared::cta window) >> 4"  # a step back stays one
    assert show(pack([number(5), number(1)], 16)) == "65541"
    assert unpack(TOP, 2, 32) == [TOP, TOP]
    # a half written as a negative immediate (``mov.b32 %r, -2147467232``) is the bits its register
    # holds, 0x80004020; so is a negative 64-bit word's
    assert show(pack([low, number(-2147467232)], 32)) == "smem+32 (shared::cta window) >> 4 | 0x8000402000000000"
    assert [show(v) for v in unpack(number(0x8000402000000000 - (1 << 64)), 2, 32)] == ["0", "2147500064"]
    assert pack([low, number(-(1 << 31) - 1)], 32) == TOP  # no 32-bit register holds it


def test_truncation_and_widening():
    assert show(truncate(number(-1, 5), 16)) == "[0, 65535]"
    assert show(truncate(shr(address(SMEM, 64), number(4)), 16)) == "smem+64 (shared::cta window) >> 4"
    assert truncate(address(SMEM, 0, form=GENERIC), 32) == TOP  # a generic address does not fit in 32 bits
    assert show(widen(number(0, 3), number(0, 4))) == "[0, inf]"
    assert show(widen(address(SMEM, 0, 8), address(SMEM, 0, 16))).startswith("smem+[0, inf]")


def test_refinement_and_meet():
    assert show(refine(number(0, 7), "ne", 0, True)) == "[1, 7]"
    assert show(refine(number(0, 7), "lt", 3, False)) == "[3, 7]"
    assert refine(number(5, 7), "lt", 3, True) == ()  # impossible: the branch never goes there
    assert show(refine(number(-8, 100), "le", 15, True, unsigned=True)) == "[0, 15]"
    assert show(refine(address(SMEM), "eq", 0, True)) == show(address(SMEM))  # only numbers are narrowed
    assert show(meet(number(0, 10), number(5, 20))) == "[5, 10]"


def test_joins_stay_small():
    value = ()
    for i in range(20):
        value = join(value, address(Region(f"b{i}", SHARED_CTA_SPACE, 64, 8)))
    assert len(value) <= 8 and all(a.region is None for a in value if a.form != NUM)
    assert Atom(WINDOW, SHARED_CTA_SPACE, SMEM, 8000, 9000).location(16) == (SHARED_CTA_SPACE, SMEM, 8000, 8192)
