"""What PTX integer and predicate instructions compute: the one concrete evaluator.

`operation(opcode)` decodes an opcode with its modifiers (``"mul.hi.s32"``) once and
returns an `Operation` whose ``apply(*sources)`` gives the destination's value from the
sources' values; every analysis that evaluates integer code on numbers (thread sets,
the once-analysis's constants, the register analysis's constant folding, the division
check of the idioms) and the generators' simulator go through it. The semantics are
the PTX ISA's ("Integer Arithmetic Instructions", "Comparison and Selection",
"Logic and Shift", "Data Movement and Conversion"):

- A value is a Python ``int``; a source is read at its operand's width (its low bits),
  signed or not as the instruction's type says. A result is the destination's bits as
  an unsigned number (``0 <= result < 2**bits``); a predicate is 0 or 1.
- Arithmetic wraps around at the type's width (``add.s32`` of ``2**31 - 1`` and 1 is
  ``0x80000000``); ``.sat`` clamps to the signed range instead.
- Shift amounts are unsigned 32-bit numbers; a shift by the width or more gives 0, or
  the sign in every bit for ``shr.s*`` (the ISA clamps the amount to the width).
- ``div``/``rem`` by zero are left unspecified by the ISA: ``apply`` answers None
  ("unknown"), never raises. So do the 64-bit ``bfe``/``bfi`` where ``pos`` or ``len``
  has bits above its low 8: the ISA reads only those 8 bits, but ptxas (13.0, sm_90a)
  compiles the 64-bit forms into code that reads the whole 32-bit operand (on an H100,
  ``bfe.u64`` of 1 at ``pos`` 0x100 gives 0, not 1), so neither answer can be trusted. ``div.s*`` rounds towards zero, ``rem.s*`` takes the
  dividend's sign (``div.s32`` of ``-2**31`` and ``-1`` wraps to ``-2**31``).

>>> operation("add.s32").apply(0x7FFFFFFF, 1) == 0x80000000
True
>>> operation("shr.s32").apply(-8, 40), operation("div.u32").apply(7, 0), operation("setp.lo.u32").apply(-1, 1)
(4294967295, None, 0)
>>> operation("add.cc.u32") is None, operation("add.f32") is None  # what the evaluator does not model
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from ._records import Record
from .isa import COMPARISONS, INTEGER_TYPES, TYPE_WIDTHS, UNSIGNED_COMPARISONS

#: An operation on each thread's sources: its result, None where the ISA leaves it unspecified.
_Apply = Callable[..., int | None]
#: The same on a list of values per source (one per thread), all threads at once.
_Each = Callable[..., Sequence[int | None]]
#: One step on a source's bits.
_Step = Callable[[int], int]
#: What a family's builder makes of an opcode: `Operation`'s ``(arity, bits, apply)``, and ``each`` when it has one.
_Built = tuple[int, int, _Apply] | tuple[int, int, _Apply, _Each]


class Operation(Record):
    """One decoded opcode: `arity` sources in, the destination's `bits` out.

    apply:
        ``apply(*sources) -> int | None``: the first destination's value (a ``setp``'s
        ``p``), None where the ISA leaves the result unspecified.
    each:
        the same, a list of values per source in and a list out, for the instructions
        a thread's index usually goes through (`_pipeline`, shifts, ``selp``), else None.

    >>> mad = operation("mad.wide.u16")
    >>> mad.arity, mad.bits, mad.apply(0xFFFF, 0xFFFF, 1)
    (3, 32, 4294836226)
    """

    opcode: str
    arity: int
    bits: int
    apply: _Apply
    each: _Each | None = None


def operation(opcode: str) -> Operation | None:
    """The `Operation` of `opcode`, or None for one the evaluator does not model
    (floating point, carries, memory, an unknown modifier); decoded once per opcode.

    >>> operation("bfe.s32").apply(0xF0, 4, 4), operation("cvt.sat.u8.s32").apply(300)
    (4294967295, 255)
    """
    found = _CACHE.get(opcode, _MISSING)
    if found is _MISSING:
        found = _CACHE[opcode] = _decode(opcode)
    return found  # type: ignore[return-value]  # mypy cannot narrow `found is not _MISSING`


def evaluate(opcode: str, *sources: int) -> int | None:
    """`opcode` applied to `sources` (see the module docstring); ValueError for an opcode
    the evaluator does not model or the wrong number of sources.

    >>> evaluate("mul.hi.u32", 0x10000, 0x30000), evaluate("rem.s32", -7, 2)
    (3, 4294967295)
    """
    found = operation(opcode)
    if found is None:
        raise ValueError(f"{opcode}: not an integer instruction the evaluator models")
    if len(sources) != found.arity:
        raise ValueError(f"{opcode} takes {found.arity} sources, got {len(sources)}")
    return found.apply(*sources)


def evaluate_each(found: Operation, sources: list[int | list[int]]) -> Sequence[int | None]:
    """`found` applied thread by thread: each source is a list (a value per thread) or
    one int that every thread has; the result is a list (None where a thread's value is
    unspecified).

    >>> evaluate_each(operation("shl.b32"), [[1, 2, 3], 4])
    [16, 32, 48]
    """
    length = next(len(source) for source in sources if isinstance(source, list))
    columns = [source if isinstance(source, list) else [source] * length for source in sources]
    if found.each is not None:
        return found.each(*columns)
    return list(map(found.apply, *columns))


# -- decoding ----------------------------------------------------------------------------------

_MISSING = object()
_CACHE: dict[str, Operation | None] = {}

_COMBINE: dict[str, Callable[[int, int], int]] = {"and": int.__and__, "or": int.__or__, "xor": int.__xor__}


def _decode(opcode: str) -> Operation | None:
    base, *modifiers = opcode.split(".")
    build = _BUILDERS.get(base)
    if build is None:
        return None
    types = [m for m in modifiers if m in TYPE_WIDTHS]
    rest = [m for m in modifiers if m not in TYPE_WIDTHS]
    made = build(types, rest)
    if made is None:
        return None
    return Operation(opcode, *made)


#: The types each family takes (PTX ISA: what ptxas accepts for the opcode).
_NUMBERS = frozenset(f"{kind}{bits}" for kind in "su" for bits in (16, 32, 64))
_BITS = frozenset(("b16", "b32", "b64"))
_WORDS = frozenset(("b32", "b64"))
_WORD_NUMBERS = frozenset(("u32", "s32", "u64", "s64"))
_SIGNED = frozenset(("s16", "s32", "s64"))
_COPIED = _NUMBERS | _BITS | frozenset(("f32", "f64"))


def _integer(types: list[str], allowed: frozenset[str] = _NUMBERS) -> tuple[int, bool] | None:
    """``(bits, signed)`` of the one type of `types`, when it is one of `allowed`."""
    if len(types) != 1 or types[0] not in allowed:
        return None
    return TYPE_WIDTHS[types[0]], types[0][0] == "s"


def _reader(bits: int, signed: bool) -> Callable[[int], int]:
    """How an instruction reads a source of `bits` bits: its low bits, as a signed
    number when `signed` (two's complement)."""
    mask = (1 << bits) - 1
    if not signed:
        return mask.__and__
    half = 1 << (bits - 1)
    return lambda value: ((value + half) & mask) - half


def _ordered(bits: int) -> tuple[tuple[_Step, _Step], _Step]:
    """``(key, back)``: the steps `key` take a source's low `bits` bits to a number that
    orders as the signed numbers they stand for (the sign bit flipped), `back` takes such
    a number to the bits again; plain ``int`` methods, so a list goes through them at C
    speed.

    >>> (low, flip), back = _ordered(8)
    >>> sorted([0x7F, 0x80, 0xFF, 0x00], key=lambda v: flip(low(v))), back(flip(low(0x1FF)))
    ([128, 255, 0, 127], 255)
    """
    half = 1 << (bits - 1)
    return (((1 << bits) - 1).__and__, half.__xor__), half.__xor__


def _pipeline(arity: int, bits: int, finish: _Step, combine: Callable[..., int] | None = None,
              read: tuple[_Step, ...] = ()) -> _Built:
    """An instruction made of steps: each of two sources through the `read` steps, the
    sources through `combine` (a lone source too; none: the source itself), the result
    through `finish`; the ``(arity, bits, apply, each)`` of `Operation`, both from the same
    steps."""
    if arity == 1:
        if combine is None:
            return 1, bits, finish, lambda a: list(map(finish, a))
        return 1, bits, lambda a: finish(combine(a)), lambda a: list(map(finish, map(combine, a)))
    assert combine is not None, "two sources are combined"  # for mypy: every caller gives one
    if not read:
        return 2, bits, lambda a, b: finish(combine(a, b)), lambda a, b: list(map(finish, map(combine, a, b)))
    if len(read) == 1:
        step = read[0]
        return (2, bits, lambda a, b: finish(combine(step(a), step(b))),
                lambda a, b: list(map(finish, map(combine, map(step, a), map(step, b)))))
    first, then = read
    return (2, bits, lambda a, b: finish(combine(then(first(a)), then(first(b)))),
            lambda a, b: list(map(finish, map(combine, map(then, map(first, a)), map(then, map(first, b))))))


def _saturated(value: int, bits: int) -> int:
    """`value` clamped to the signed `bits`-bit range, as that range's bits."""
    half = 1 << (bits - 1)
    return max(-half, min(half - 1, value)) & ((1 << bits) - 1)


def _add_sub(types: list[str], rest: list[str], subtract: bool) -> _Built | None:
    kind = _integer(types)
    if kind is None or rest not in ([], ["sat"]) or rest and kind != (32, True):
        return None
    bits, _ = kind
    mask = (1 << bits) - 1
    if rest:  # add.sat.s32 / sub.sat.s32
        read = _reader(32, True)
        if subtract:
            return 2, bits, lambda a, b: _saturated(read(a) - read(b), 32)
        return 2, bits, lambda a, b: _saturated(read(a) + read(b), 32)
    return _pipeline(2, bits, mask.__and__, int.__sub__ if subtract else int.__add__)


def _mul(types: list[str], rest: list[str]) -> _Built | None:
    kind = _integer(types)
    if kind is None or len(rest) != 1 or rest[0] not in ("lo", "hi", "wide") or rest[0] == "wide" and kind[0] > 32:
        return None
    mode = rest[0]
    bits, signed = kind
    mask, read = (1 << bits) - 1, _reader(bits, signed)
    if mode == "lo":
        return _pipeline(2, bits, mask.__and__, int.__mul__)
    if mode == "hi":
        return 2, bits, lambda a, b: (read(a) * read(b) >> bits) & mask
    wide = (1 << 2 * bits) - 1
    return 2, 2 * bits, lambda a, b: (read(a) * read(b)) & wide


def _mad(types: list[str], rest: list[str]) -> _Built | None:
    kind = _integer(types)
    saturate = "sat" in rest
    modes = [m for m in rest if m != "sat"]
    if kind is None or len(modes) != 1 or modes[0] not in ("lo", "hi", "wide") or modes[0] == "wide" and kind[0] > 32 \
            or saturate and (modes[0], kind) != ("hi", (32, True)):
        return None
    mode = modes[0]
    bits, signed = kind
    mask, read = (1 << bits) - 1, _reader(bits, signed)
    if mode == "lo":
        return 3, bits, lambda a, b, c: (a * b + c) & mask
    if mode == "hi":
        if saturate:  # mad.hi.sat.s32: the high half plus c, clamped to the s32 range
            return 3, bits, lambda a, b, c: _saturated((read(a) * read(b) >> bits) + read(c), bits)
        return 3, bits, lambda a, b, c: ((read(a) * read(b) >> bits) + c) & mask
    wide = (1 << 2 * bits) - 1
    return 3, 2 * bits, lambda a, b, c: (read(a) * read(b) + c) & wide


def _division(types: list[str], rest: list[str], remainder: bool) -> _Built | None:
    kind = _integer(types)
    if kind is None or rest:
        return None
    bits, signed = kind
    mask, read = (1 << bits) - 1, _reader(bits, signed)
    if not signed:
        if remainder:
            return 2, bits, lambda a, b: (a & mask) % (b & mask) if b & mask else None
        return 2, bits, lambda a, b: (a & mask) // (b & mask) if b & mask else None

    def divide(a: int, b: int) -> int | None:  # towards zero; the remainder takes the dividend's sign
        x, y = read(a), read(b)
        if not y:
            return None
        quotient = abs(x) // abs(y)
        if (x < 0) != (y < 0):
            quotient = -quotient
        return (x - quotient * y if remainder else quotient) & mask

    return 2, bits, divide


def _extreme(types: list[str], rest: list[str], pick: Callable[[int, int], int]) -> _Built | None:
    kind = _integer(types)
    relu = rest == ["relu"]
    if kind is None or rest and not (relu and kind == (32, True)):
        return None
    bits, signed = kind
    mask, read = (1 << bits) - 1, _reader(bits, signed)
    if relu:  # max.relu / min.relu: negative results become 0
        return 2, bits, lambda a, b: max(pick(read(a), read(b)), 0) & mask
    if signed:  # picked in the order of the signed numbers, which `_ordered` keeps
        key, back = _ordered(bits)
        return _pipeline(2, bits, back, pick, key)
    return _pipeline(2, bits, mask.__and__, pick, (mask.__and__,))


def _unary(types: list[str], rest: list[str], allowed: frozenset[str],
           compute: Callable[[int, int], int]) -> _Built | None:
    """An opcode of one source and a result of its type: `compute(read value, bits)`."""
    kind = _integer(types, allowed)
    if kind is None or rest:
        return None
    bits, signed = kind
    mask, read = (1 << bits) - 1, _reader(bits, signed)
    return 1, bits, lambda a: compute(read(a), bits) & mask


def _bitwise(types: list[str], rest: list[str], combine: Callable[[int, int], int]) -> _Built | None:
    if types == ["pred"] and not rest:
        return _pipeline(2, 1, (1).__and__, combine)
    kind = _integer(types, _BITS)
    if kind is None or rest:
        return None
    return _pipeline(2, kind[0], ((1 << kind[0]) - 1).__and__, combine)


def _not(types: list[str], rest: list[str]) -> _Built | None:
    if types == ["pred"] and not rest:
        return _pipeline(1, 1, (1).__and__, int.__invert__)
    kind = _integer(types, _BITS)
    if kind is None or rest:
        return None
    return _pipeline(1, kind[0], ((1 << kind[0]) - 1).__and__, int.__invert__)


def _cnot(types: list[str], rest: list[str]) -> _Built | None:
    return _unary(types, rest, _BITS, lambda a, bits: int(a == 0))


def _shift(types: list[str], rest: list[str], left: bool) -> _Built | None:
    kind = _integer(types, _BITS if left else _BITS | _NUMBERS)
    if kind is None or rest:
        return None
    bits, signed = kind
    mask = (1 << bits) - 1
    amount = _reader(32, False)
    if left:
        return (2, bits, lambda a, b: (a << (b & 0xFFFFFFFF)) & mask if b & 0xFFFFFFFF < bits else 0,
                lambda a, b: [(x << n) & mask if n < bits else 0 for x, n in zip(a, map(amount, b))])
    read = _reader(bits, signed)  # shr.s fills with the sign; Python's >> does, for any amount
    return (2, bits, lambda a, b: (read(a) >> min(b & 0xFFFFFFFF, bits)) & mask,
            lambda a, b: [(x >> min(n, bits)) & mask for x, n in zip(map(read, a), map(amount, b))])


def _counting(types: list[str], rest: list[str], count: Callable[[int, int], int]) -> _Built | None:
    """popc, clz: a count of the source's bits, as a .u32."""
    kind = _integer(types, _WORDS)
    if kind is None or rest:
        return None
    bits = kind[0]
    mask = (1 << bits) - 1
    return 1, 32, lambda a: count(a & mask, bits)


def _brev(types: list[str], rest: list[str]) -> _Built | None:
    kind = _integer(types, _WORDS)
    if kind is None or rest:
        return None
    bits = kind[0]
    mask = (1 << bits) - 1
    return 1, bits, lambda a: int(format(a & mask, f"0{bits}b")[::-1], 2)


def _bfind(types: list[str], rest: list[str]) -> _Built | None:
    """bfind: the position of the most significant bit that differs from the sign
    (unsigned: the most significant 1), 0xFFFFFFFF when there is none; ``.shiftamt``
    gives the left shift that moves it to the top instead."""
    kind = _integer(types, _WORD_NUMBERS)
    if kind is None or rest not in ([], ["shiftamt"]):
        return None
    bits, signed = kind
    mask, sign = (1 << bits) - 1, 1 << (bits - 1)
    shift_amount = bool(rest)

    def find(a: int) -> int:
        a &= mask
        if signed and a & sign:
            a ^= mask
        if not a:
            return 0xFFFFFFFF
        position = a.bit_length() - 1
        return bits - 1 - position if shift_amount else position

    return 1, 32, find


def _bfe(types: list[str], rest: list[str]) -> _Built | None:
    """bfe d, a, pos, len: ``len`` bits of a from ``pos`` (each the low 8 bits of its
    operand), zero-extended, or sign-extended from the field's last bit that lies inside
    a for a signed type (PTX ISA, bfe); None for a 64-bit type where `_departs`."""
    kind = _integer(types, _WORD_NUMBERS)
    if kind is None or rest:
        return None
    bits, signed = kind
    mask = (1 << bits) - 1

    def extract(a: int, position: int, length: int) -> int | None:
        if bits == 64 and _departs(position, length):
            return None
        a &= mask
        position, length = position & 0xFF, length & 0xFF
        kept = min(length, max(bits - position, 0))
        field = a >> position & ((1 << kept) - 1) if kept else 0
        if not signed or not length:
            return field
        sign = a >> min(position + length - 1, bits - 1) & 1
        return field | (mask ^ ((1 << kept) - 1) if sign else 0)

    return 3, bits, extract


def _departs(position: int, length: int) -> bool:
    """Whether a 64-bit bfe/bfi's ``pos`` or ``len`` (read as .u32) has bits above its
    low 8, where ptxas-compiled code departs from the ISA (module docstring)."""
    return (position | length) & 0xFFFFFFFF > 0xFF


def _bfi(types: list[str], rest: list[str]) -> _Built | None:
    """bfi f, a, b, pos, len: b with ``len`` bits from ``pos`` (each the low 8 bits of
    its operand) replaced by a's low bits; bits past the width are not written; None for
    the 64-bit type where `_departs`."""
    kind = _integer(types, _WORDS)
    if kind is None or rest:
        return None
    bits = kind[0]
    mask = (1 << bits) - 1

    def insert(a: int, b: int, position: int, length: int) -> int | None:
        if bits == 64 and _departs(position, length):
            return None
        position, length = position & 0xFF, length & 0xFF
        if position >= bits or not length:
            return b & mask
        field = ((1 << min(length, bits - position)) - 1) << position
        return (b & mask & ~field) | (a << position & field)

    return 4, bits, insert


def _prmt(types: list[str], rest: list[str]) -> _Built | None:
    """prmt.b32 d, a, b, c (the generic mode: no .f4e, .b4e, …): byte i of d is byte
    ``c[4i+2 : 4i]`` of the eight bytes ``{b, a}``, or that byte's sign in all 8 bits when
    ``c[4i+3]`` is set."""
    if types != ["b32"] or rest:
        return None

    def permute(a: int, b: int, c: int) -> int:
        source = (b & 0xFFFFFFFF) << 32 | a & 0xFFFFFFFF
        result = 0
        for i in range(4):
            select = c >> 4 * i & 0xF
            byte = source >> 8 * (select & 7) & 0xFF
            if select & 8:
                byte = 0xFF if byte & 0x80 else 0
            result |= byte << 8 * i
        return result

    return 3, 32, permute


def _setp(types: list[str], rest: list[str]) -> _Built | None:
    """setp.cmp{.and,.or,.xor}.type p, a, b{, c}: the comparison of a and b read as the
    type says, combined with predicate c when a boolean operation is named. Bit types
    compare for equality only; lo/ls/hi/hs are the unsigned types' names for lt/le/gt/ge."""
    kind = _integer(types, _NUMBERS | _BITS)
    compare = [m for m in rest if m in COMPARISONS]
    combine = [m for m in rest if m in _COMBINE]
    if kind is None or len(compare) != 1 or len(combine) > 1 or len(rest) != len(compare) + len(combine):
        return None
    if types[0][0] == "b" and compare[0] not in ("eq", "ne") or types[0][0] == "s" and compare[0] in \
            UNSIGNED_COMPARISONS:
        return None
    bits, signed = kind
    test = COMPARISONS[compare[0]]
    if combine:
        join, read = _COMBINE[combine[0]], _reader(bits, signed)
        return 3, 1, lambda a, b, c: join(int(test(read(a), read(b))), c & 1)
    if signed:  # compared in the order of the signed numbers, which `_ordered` keeps
        return _pipeline(2, 1, int, test, _ordered(bits)[0])
    return _pipeline(2, 1, int, test, (((1 << bits) - 1).__and__,))


def _selp(types: list[str], rest: list[str]) -> _Built | None:
    """selp.type d, a, b, c: a when predicate c is true, else b."""
    if len(types) != 1 or rest or types[0] not in _COPIED:
        return None
    mask = (1 << TYPE_WIDTHS[types[0]]) - 1
    return (3, TYPE_WIDTHS[types[0]], lambda a, b, c: (a if c & 1 else b) & mask,
            lambda a, b, c: [(x if p & 1 else y) & mask for x, y, p in zip(a, b, c)])


def _slct(types: list[str], rest: list[str]) -> _Built | None:
    """slct.dtype.s32 d, a, b, c: a when c >= 0, else b."""
    if len(types) != 2 or types[1] != "s32" or rest or types[0] not in _COPIED:
        return None
    mask = (1 << TYPE_WIDTHS[types[0]]) - 1
    return 3, TYPE_WIDTHS[types[0]], lambda a, b, c: (b if c & 0x80000000 else a) & mask


def _mov(types: list[str], rest: list[str]) -> _Built | None:
    """mov.type d, a: a's bits (a packed vector operand is the caller's to assemble)."""
    if len(types) != 1 or rest or types[0] not in _COPIED and types[0] not in ("pred", "b128"):
        return None
    return _pipeline(1, TYPE_WIDTHS[types[0]], ((1 << TYPE_WIDTHS[types[0]]) - 1).__and__)


def _cvt(types: list[str], rest: list[str]) -> _Built | None:
    """cvt{.sat}.dtype.atype between integer types: the source read as atype (sign- or
    zero-extended), cut to dtype's bits, or with .sat clamped to dtype's range."""
    if len(types) != 2 or any(t not in INTEGER_TYPES or t[0] == "b" for t in types) or rest not in ([], ["sat"]):
        return None
    (bits, signed), source = (INTEGER_TYPES[types[0]], types[0][0] == "s"), _reader(INTEGER_TYPES[types[1]],
                                                                                        types[1][0] == "s")
    mask = (1 << bits) - 1
    if rest:
        low, high = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, mask)
        return 1, bits, lambda a: max(low, min(high, source(a))) & mask
    return _pipeline(1, bits, mask.__and__, source)


def _popcount(value: int, bits: int) -> int:
    return value.bit_count()


def _leading_zeros(value: int, bits: int) -> int:
    return bits - value.bit_length()


def _absolute(value: int, bits: int) -> int:
    return abs(value)


def _negated(value: int, bits: int) -> int:
    return -value


_BUILDERS: dict[str, Callable[[list[str], list[str]], _Built | None]] = {
    "add": lambda t, r: _add_sub(t, r, False), "sub": lambda t, r: _add_sub(t, r, True), "mul": _mul, "mad": _mad,
    "div": lambda t, r: _division(t, r, False), "rem": lambda t, r: _division(t, r, True),
    "min": lambda t, r: _extreme(t, r, min), "max": lambda t, r: _extreme(t, r, max),
    "abs": lambda t, r: _unary(t, r, _SIGNED, _absolute),
    "neg": lambda t, r: _unary(t, r, _SIGNED, _negated),
    "and": lambda t, r: _bitwise(t, r, int.__and__), "or": lambda t, r: _bitwise(t, r, int.__or__),
    "xor": lambda t, r: _bitwise(t, r, int.__xor__), "not": _not, "cnot": _cnot,
    "shl": lambda t, r: _shift(t, r, True), "shr": lambda t, r: _shift(t, r, False),
    "popc": lambda t, r: _counting(t, r, _popcount), "clz": lambda t, r: _counting(t, r, _leading_zeros),
    "brev": _brev, "bfind": _bfind, "bfe": _bfe, "bfi": _bfi, "prmt": _prmt,
    "setp": _setp, "selp": _selp, "slct": _slct, "mov": _mov, "cvt": _cvt,
}


#: The modes of ``shfl.sync`` (PTX ISA): how operand ``b`` names the lane read.
SHUFFLE_MODES = ("up", "down", "bfly", "idx")
#: The lanes of a warp.
WARP_LANES = 32


def shuffle_source(mode: str, lane: int, b: int, c: int) -> tuple[int, bool]:
    """``(j, p)`` for lane `lane` of ``shfl.sync.<mode> d|p, a, b, c, membermask``: the
    lane whose ``a`` it reads, and its predicate ``p``, true where the computed lane is
    in range (PTX ISA, ``shfl.sync``): ``c`` packs a clamp in bits 0-4 and a segment
    mask in bits 8-12; ``maxLane = (lane & segmask) | (clamp & ~segmask)``, ``minLane =
    lane & segmask``; ``.up`` computes ``lane - b`` (in range at or above ``maxLane``),
    ``.down`` ``lane + b``, ``.bfly`` ``lane ^ b``, ``.idx`` ``minLane | (b & ~segmask)``
    (in range at or below ``maxLane``); out of range, a lane reads its own ``a``. Only
    bits 0-4 of ``b`` count. Whether the lane read is a member is the caller's question
    (the ISA leaves the result undefined where it is not).

    >>> shuffle_source("idx", 7, 35, 31), shuffle_source("up", 2, 3, 0), shuffle_source("bfly", 5, 1, 31)
    ((3, True), (2, False), (4, True))
    >>> shuffle_source("idx", 13, 1, 0x181F), shuffle_source("down", 30, 4, 0x181F)  # segments of 8 lanes
    ((9, True), (30, False))
    """
    lane, b = lane & 31, b & 31
    segment, clamp = c >> 8 & 31, c & 31
    highest = lane & segment | clamp & ~segment
    if mode == "up":
        j = lane - b
        return (j, True) if j >= highest else (lane, False)
    if mode == "down":
        j = lane + b
    elif mode == "bfly":
        j = lane ^ b
    elif mode == "idx":
        j = lane & segment | b & ~segment
    else:
        raise ValueError(f"no shfl.sync mode {mode!r}")
    return (j, True) if j <= highest else (lane, False)


def reads_lane_b(c: int) -> bool:
    """True when ``shfl.sync.idx`` with clamp operand `c` reads lane ``b & 31`` in
    every lane, for every ``b`` (`shuffle_source`: no segment mask and the clamp 31).

    >>> reads_lane_b(31), reads_lane_b(0x1C1F), reads_lane_b(15)
    (True, False, False)
    """
    found = _READS_LANE_B.get(c)
    if found is None:
        found = _READS_LANE_B[c] = all(shuffle_source("idx", lane, b, c) == (b, True)
                                       for lane in range(WARP_LANES) for b in range(WARP_LANES))
    return found


_READS_LANE_B: dict[int, bool] = {}


def opcodes() -> Iterable[str]:
    """The base opcodes the evaluator knows (each with the types and modifiers the
    ISA gives it).

    >>> sorted(opcodes())[:4]
    ['abs', 'add', 'and', 'bfe']
    """
    return _BUILDERS.keys()
