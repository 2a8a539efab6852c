"""What integer instructions compute on abstract values (`ptxkit.cfg.values.values`).

The register analysis (`ptxkit.cfg.values.registers`) applies these to the values of an
instruction's operands: the binary operations by opcode (`BINARY`), how a ``cvt`` or a
signed ``setp`` reads its source, ``cvta``/``mapa`` between the state spaces' windows, and
the bit-field instructions (PTX ISA, "Integer Arithmetic Instructions").

>>> from ptxkit.cfg.values.values import show
>>> show(BINARY["div"](number(0, 100), number(4), 32))
'[0, 25]'
"""

from __future__ import annotations

import math

from ptxkit._records import TYPE_CHECKING
from ptxkit.isa import FLOAT_TYPES, INTEGER_TYPES, TYPE_BITS
from ptxkit.cfg.values.values import (
    GENERIC, GLOBAL_SPACE_NAME, INF, LOCAL_SPACE, NUM, OTHER_SPACE, SHARED_CLUSTER_SPACE, SHARED_CTA_SPACE,
    SHARED_WINDOW_LIMIT, TOP, WINDOW, Atom, add, and_, anywhere, constant, join, mul, number, or_, shl, shr, signed,
    sub, truncate, wrap, xor,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from ptxkit.cfg.values.values import Value
    #: How an instruction reads a register's value (`identity`, `compared_as`).
    View = Callable[[Value], Value]
    #: ``f(a, b, width)``: the value of ``op d, a, b`` from its operands' values (`BINARY`).
    Binary = Callable[[Value, Value, int], Value]

#: Any 64-bit pattern read as unsigned.
WORD = (0, (1 << 64) - 1)


def identity(value: Value) -> Value:
    """The value as it is: how an unsigned comparison, or a copy, reads a register.

    >>> identity(number(3)) == number(3)
    True
    """
    return value


def compared_as(kind: str) -> View:
    """How a ``setp`` of type `kind` reads a register's value: a signed one sees a number
    that may have the sign bit set as negative (`ptxkit.cfg.values.values.signed`).

    >>> from ptxkit.cfg.values.values import show
    >>> show(compared_as("s32")(number(0xFFFFFFFF))), show(compared_as("u32")(number(0xFFFFFFFF)))
    ('-1', '4294967295')
    """
    if kind[:1] == "s" and kind[1:] in TYPE_BITS:
        bits = TYPE_BITS[kind[1:]]
        return lambda value: signed(value, bits)
    return identity


def cvt_reading(modifiers: Sequence[str]) -> tuple[int, View] | None:
    """How an integer ``cvt`` reads its source: ``(bits, view)``, the low bits it keeps
    and the function of the source's value it gives; None for a ``cvt`` of other types.
    A sign extension reads them as signed, a zero extension as unsigned, a cut keeps the
    number they are congruent to (`ptxkit.cfg.values.values.wrap`).

    >>> from ptxkit.cfg.values.values import show
    >>> bits, view = cvt_reading(["s64", "s32"])
    >>> bits, show(view(number(0xFFFFFFFF)))
    (32, '-1')
    """
    types = [m for m in modifiers if m in INTEGER_TYPES or m in FLOAT_TYPES]
    if len(types) != 2 or types[0] in FLOAT_TYPES or types[1] in FLOAT_TYPES:
        return None
    bits, source_bits = INTEGER_TYPES[types[0]], INTEGER_TYPES[types[1]]
    if source_bits < bits and types[1][0] == "s":
        return source_bits, lambda value: signed(value, source_bits)
    if bits <= source_bits:
        return bits, lambda value: wrap(value, bits)
    return source_bits, lambda value: truncate(value, source_bits)


def any_number_of_type(view: View, width: int, signed_type: bool) -> View:
    """`view` (how an instruction reads its operands), with top read as any number of the
    `width`-bit type, signed or not: what ``min`` and ``max`` compare is a number of their
    type whatever the register held, so ``max.s32`` of anything and 0 is at least 0.

    >>> from ptxkit.cfg.values.values import show
    >>> show(BINARY["max"](any_number_of_type(identity, 32, True)(TOP), number(0), 32))
    '[0, 2147483647]'
    """
    full = number(-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed_type else number(0, (1 << width) - 1)
    return lambda value: full if value == TOP else view(value)


def rounded_up_to(value: Value, modulus: int, width: int = 64) -> Value:
    """`value` rounded up to a multiple of `modulus`, a power of two: ``(x + N - 1) & -N``.

    >>> from ptxkit.cfg.values.values import show
    >>> show(rounded_up_to(number(1000), 1024))
    '1024'
    """
    return and_(add(value, number(modulus - 1)), number(-modulus), width)


def off_multiples(value: Value, modulus: int) -> Value:
    """`value` where it is no multiple of `modulus`: each range of numbers without the
    ends that are (``x & (N - 1) != 0`` past ``[4, 8]`` leaves ``[5, 7]``).

    >>> from ptxkit.cfg.values.values import show
    >>> show(off_multiples(number(4, 8), 4)), show(off_multiples(number(1, 7), 4)), off_multiples(number(8), 4)
    ('[5, 7]', '[1, 7]', ())
    """
    out: list[Atom] = []
    for atom in value:
        if atom.form != NUM or atom.step != 1:
            out.append(atom)
            continue
        lo = atom.lo + (-INF < atom.lo and atom.lo % modulus == 0)
        hi = atom.hi - (atom.hi < INF and atom.hi % modulus == 0)
        if lo <= hi:
            out.extend(number(lo, hi))
    return tuple(out)


def cvta(value: Value, modifiers: Sequence[str]) -> Value:
    """``cvta`` (or ``cvta.to``) of `value` for the state space its modifiers name: an
    address in that space changes form (generic or window), anything else becomes some
    address of that space. A generic address of another CTA's shared memory (`mapa`, or
    the XOR of `ptxkit.cfg.values.values.xor`) made a window address stays that CTA's: a
    ``.shared::cluster`` window address (docs/fence.md §8).

    >>> from ptxkit.cfg.values.values import Region, address, show
    >>> show(cvta(number(5), ["to", "shared", "u32"]))
    'somewhere (shared::cta window)'
    >>> show(cvta(number(0), ["to", "shared", "u64"]))  # XQA's descriptor template: its low 18 bits are 0
    '[0, 18446744073709289472] step 262144'
    >>> peer = address(Region("s", SHARED_CLUSTER_SPACE, 4096, 16), 64, form=GENERIC)
    >>> show(cvta(peer, ["to", "shared", "u64"]))
    's+64 (shared::cluster window)'
    """
    to_window = "to" in modifiers
    space = next((m for m in modifiers if m.startswith(("shared", "global", "local", "param", "const"))), "")
    target = {"shared": SHARED_CTA_SPACE, "shared::cta": SHARED_CTA_SPACE, "shared::cluster": SHARED_CLUSTER_SPACE,
              "global": GLOBAL_SPACE_NAME, "local": LOCAL_SPACE}.get(space, OTHER_SPACE)
    form = WINDOW if to_window else GENERIC
    out: Value = ()
    for atom in value:
        if atom.is_address and atom.space == target or (target == SHARED_CLUSTER_SPACE and atom.is_address
                                                         and atom.space == SHARED_CTA_SPACE and atom.form == WINDOW):
            out = join(out, (atom._replace(form=form),))
        elif to_window and target == SHARED_CTA_SPACE and atom.is_address and atom.space == SHARED_CLUSTER_SPACE \
                and atom.form == GENERIC:
            out = join(out, (atom._replace(form=WINDOW),))
        elif to_window and target == SHARED_CTA_SPACE and atom.form == NUM and atom.lo == atom.hi == 0:
            # the null pointer: minus the window's start, a multiple of 2**18 (docs/fence.md §8)
            out = join(out, number(0, (1 << 64) - SHARED_WINDOW_LIMIT, SHARED_WINDOW_LIMIT))
        else:
            out = join(out, anywhere(target, form))
    return out


def mapa(value: Value, modifiers: Sequence[str]) -> Value:
    """``mapa`` of `value`: the same offset in another CTA's shared memory of the cluster
    (a window address with ``.shared::cluster``, else generic).

    >>> from ptxkit.cfg.values.values import show
    >>> show(mapa(number(5), ["shared::cluster", "u32"]))
    'somewhere (shared::cluster window)'
    """
    form = WINDOW if "shared::cluster" in modifiers else GENERIC
    out: Value = ()
    for atom in value:
        if atom.is_address and atom.space in (SHARED_CTA_SPACE, SHARED_CLUSTER_SPACE) and not atom.shift:
            out = join(out, (atom._replace(form=form, space=SHARED_CLUSTER_SPACE),))
        else:
            out = join(out, anywhere(SHARED_CLUSTER_SPACE, form))
    return out


def bit_field(length: Value, signed: bool) -> Value:
    """What ``bfe`` extracts: a field of `length` bits, sign-extended when `signed`.

    >>> from ptxkit.cfg.values.values import show
    >>> show(bit_field(number(4), False)), show(bit_field(number(4), True))
    ('[0, 15]', '[-8, 7]')
    """
    bits = constant(length)
    if bits is None or not 0 < bits <= 64:
        return TOP if signed else number(*WORD)
    return number(-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else number(0, (1 << bits) - 1)


def clamped(value: Value, low: int, high: int) -> Value:
    """`value` as an instruction that saturates to ``[low, high]`` leaves it (``.sat``,
    ``.relu``): clamping keeps order, so each interval's ends are clamped; an address or
    top may be any number of the range.

    >>> from ptxkit.cfg.values.values import show
    >>> show(clamped(number(-5, 300, 5), 0, 255)), show(clamped(number(3, 9, 2), 0, 255)), show(clamped(TOP, 0, 1))
    ('[0, 255]', '[3, 9] step 2', '[0, 1]')
    """
    out: Value = ()
    for atom in value:
        if atom.form == NUM:
            lo, hi = min(max(atom.lo, low), high), min(max(atom.hi, low), high)
            atom = atom if (lo, hi) == (atom.lo, atom.hi) else Atom(NUM, None, None, lo, hi)
            out = join(out, (atom,))
        else:
            out = join(out, number(low, high))
    return out


def at_most(value: Value, most: int) -> Value:
    """`value` with its numbers (and top) kept to ``[0, most]``; addresses stay.

    >>> from ptxkit.cfg.values.values import show
    >>> show(at_most(TOP, 1)), show(at_most(number(0, 1 << 40), 1)), show(at_most(number(2, 9, 7), 100))
    ('[0, 1]', '[0, 1]', '[2, 9] step 7')
    """
    out: Value = ()
    for atom in value:
        if atom.form == TOP[0].form:
            atom = Atom(0, None, None, 0, most)
        elif atom.form == 0 and (atom.lo < 0 or atom.hi > most):
            lo, hi = max(atom.lo, 0), min(atom.hi, most)
            atom = Atom(0, None, None, 0, most) if lo > hi or atom.lo < 0 \
                else atom._replace(hi=hi - (hi - lo) % atom.step)
        out = join(out, (atom,))
    return out


def bit_insert(field: Value, into: Value, position: int | None, length: int | None, width: int) -> Value:
    """``bfi d, a, b, pos, len`` with constant `position` and `length`: `into` with bits
    ``[pos, pos + len)`` replaced by the low `length` bits of `field` (PTX ISA, bfi).

    >>> from ptxkit.cfg.values.values import show
    >>> show(bit_insert(number(0, 3), number(0, 3), 10, 22, 32))
    '[0, 3075]'
    """
    if not isinstance(position, int) or not isinstance(length, int) or not 0 <= position < width or length <= 0:
        return TOP
    length = min(length, width - position)
    mask = ((1 << length) - 1) << position
    kept = and_(into, number(((1 << width) - 1) ^ mask), width)
    return or_(kept, shl(and_(field, number((1 << length) - 1), width), number(position)), width)


def _divisor(b: Value) -> tuple[int, int] | None:
    """The bounds of a divisor that is a positive number, else None."""
    if len(b) != 1 or b[0].form != 0 or b[0].lo < 1:
        return None
    return b[0].lo, b[0].hi


def _div(a: Value, b: Value, width: int) -> Value:
    """``a / b`` for a non-negative `a` and a positive `b`."""
    if not a or not b:  # an operand not known yet: nothing yet (TOP would stick)
        return ()
    divisor = _divisor(b)
    if divisor is None or len(a) != 1 or a[0].form != 0 or a[0].lo < 0:
        return TOP
    least, most = divisor
    return number(a[0].lo // most if most < INF else 0, a[0].hi // least if a[0].hi < INF else INF)


def remainder_of(a: Value, b: Value, width: int, signed: bool = False) -> Value:
    """``a % b`` for a positive `b`: below b, and `a` itself when it is already below; a
    signed remainder of a dividend that may be negative is negative or zero too. By a
    constant, the remainder keeps what the dividend's step says of it: ``a % d`` is ``a``
    modulo ``gcd(step, d)`` (an even index stays even).

    >>> from ptxkit.cfg.values.values import show
    >>> show(remainder_of(number(0, 118, 2), number(32), 32))
    '[0, 30] step 2'
    >>> show(remainder_of(number(4, 1000, 24), number(16), 32))
    '[4, 12] step 8'
    >>> show(remainder_of(number(31), number(4), 32)), show(remainder_of(number(36, 44, 4), number(32), 32))
    ('3', '[4, 12] step 4')
    """
    if not a or not b:
        return ()
    divisor = _divisor(b)
    if divisor is None:
        return TOP
    least, most = divisor
    natural = len(a) == 1 and a[0].form == 0 and 0 <= a[0].lo
    if natural and a[0].hi < least:
        return a
    if most >= INF:
        return TOP
    if natural and least == most:
        lo, hi, step = a[0].lo, a[0].hi, a[0].step
        if hi < INF and lo // most == hi // most:  # within one period: no wrap-around
            return number(lo % most, hi % most, step) if lo < hi else number(lo % most)
        if step > 1:
            common = math.gcd(step, most)
            low = lo % common
            return number(low, most - 1 - (most - 1 - low) % common, common)
    return number(0 if natural or not signed else 1 - most, most - 1)


def _extreme(pick: Callable[[int, int], int]) -> Binary:
    """``min`` or ``max`` of two numbers, as `pick` takes them."""
    def combine(a: Value, b: Value, width: int) -> Value:
        if not a or not b:
            return ()
        if len(a) == 1 == len(b) and a[0].form == 0 == b[0].form:
            return number(pick(a[0].lo, b[0].lo), pick(a[0].hi, b[0].hi))
        return TOP
    return combine


#: opcode -> ``f(a, b, width)``: the value of ``op d, a, b`` from its operands' values.
BINARY: dict[str, Binary] = {
    "add": lambda a, b, w: add(a, b), "sub": lambda a, b, w: sub(a, b), "mul": lambda a, b, w: mul(a, b),
    "shl": lambda a, b, w: shl(a, b), "shr": lambda a, b, w: shr(a, b), "and": and_,
    "or": or_, "xor": xor, "div": _div, "rem": remainder_of,
    "min": _extreme(min), "max": _extreme(max),
}
