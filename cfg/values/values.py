"""Abstract values of registers: integer intervals and addresses into memory regions.

The fence pass needs to know *which bytes* of shared memory an instruction touches
(docs/fence.md §3). A register's abstract value is a small set of atoms, each one of:

- a **number** in an interval ``[lo, hi]`` (``%tid.x`` is ``[0, 1023]``);
- an **address**: the start of a memory `Region` (a ``.shared`` variable, the dynamic
  shared memory of ``extern .shared`` arrays, a ``.local`` stack depot…) plus a byte
  offset in ``[lo, hi]``, in a state space (``shared::cta``, ``shared::cluster``,
  ``global``, ``local``), either as a *window* address (what ``mov r, smem`` and the
  ``.shared`` opcodes use) or a *generic* one (after ``cvta``). Matrix descriptors are
  addresses too: ``shift`` says the value is the address shifted right (wgmma's 14-bit
  start-address field is ``addr >> 4``) and ``high`` holds constant bits OR-ed above it
  (the descriptor's strides and swizzle mode), ``loose`` the bits above it that may be
  either (a field built from a value the analysis does not know);
- **top**: anything.

Numbers and offsets also carry a `step`: every value is congruent to ``lo`` modulo
``step`` (a stage ring ``base + s * 16384`` is ``base+[0, 49152] step 16384``). A tensor
copy's box can then be bounded by the stride of the ring it is issued into
(docs/fence.md §3.3), and ``x | y`` is ``x + y`` when ``y`` fits below ``x``'s step.

Every operation over-approximates: the set a result atom stands for contains every
value the instruction can produce from operands in the argument sets. Offsets past a
region's end are undefined behaviour in the source program, so locations are clamped
to the region (`Atom.location`).

>>> smem = Region("smem", SHARED_CTA_SPACE, 4096, 1024)
>>> base = address(smem)
>>> stage = number(0, 3)
>>> value = add(base, mul(stage, number(1024)))
>>> show(value)
'smem+[0, 3072] step 1024 (shared::cta window)'
>>> show(or_(shr(value, number(4)), number(0x4000004000000000)))
'smem+[0, 3072] step 1024 (shared::cta window) >> 4 | 0x4000004000000000'
>>> show(join(number(1), number(5))), show(add(base, base))
('[1, 5] step 4', 'top')
"""

from __future__ import annotations

from functools import partial
from math import gcd

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.isa import NEGATED_COMPARISONS, UNSIGNED_COMPARISONS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence
    from typing import TypeAlias

    #: An abstract value: the atoms it may be (the empty tuple: none, not known yet).
    Value: TypeAlias = "tuple[Atom, ...]"
    #: ``(space, region, start, end)`` of an access (`Atom.location`).
    Location: TypeAlias = "tuple[str | None, Region | None, int, int]"
    #: What atoms that merge into their hull share (`_key`): form, space, region, shift, high, loose.
    _Kind: TypeAlias = "tuple[int, str | None, Region | None, int, int, int]"

#: A bound larger than any offset or integer the analysis meets.
INF = 1 << 80

SHARED_CTA_SPACE, SHARED_CLUSTER_SPACE, GLOBAL_SPACE_NAME, LOCAL_SPACE, OTHER_SPACE = (
    "shared::cta", "shared::cluster", "global", "local", "other")

#: Shared-memory window addresses of one CTA are below 2**18 (at most 228 KB per CTA on
#: sm_90 and sm_100, PTX ISA §5.1.7 and the CUDA programming guide's limits).
SHARED_WINDOW_LIMIT = 1 << 18
#: The largest dynamic shared memory a CTA can have (sm_90: 227 KB).
MAX_DYNAMIC_SHARED = 232448
_MAX_ATOMS = 8

#: The bits of a 64-bit register.
_WORD = (1 << 64) - 1

NUM, WINDOW, GENERIC, TOP_FORM = 0, 1, 2, 3
_FORM_NAMES = {WINDOW: "window", GENERIC: "generic"}


class Region(Record):
    """One memory object whose address the analysis follows.

    `size` in bytes (None when unknown, as for dynamic shared memory), `align` the
    alignment of its start in bytes. A region with a `parent` is that object's start
    rounded up to `align` (`aligned_start`): it begins up to `slack` bytes after its
    parent and keeps offsets from the rounded start exact (docs/fence.md §3.1).

    >>> Region("smem", SHARED_CTA_SPACE, 1024, 128).limit, Region("dyn", SHARED_CTA_SPACE, None, 16).limit
    (1024, 232448)
    """

    name: str
    space: str
    size: int | None
    align: int
    parent: Region | None = None

    @property
    def root(self) -> Region:
        """The object itself (the region a rounded start belongs to)."""
        return self.parent or self

    @property
    def slack(self) -> int:
        """The most bytes this region's start may lie past its root's."""
        return self.align - self.parent.align if self.parent is not None else 0

    @property
    def limit(self) -> int:
        """The end of the region: its size, or the most a dynamic region can hold."""
        if self.size is not None:
            return self.size
        return MAX_DYNAMIC_SHARED if self.space.startswith("shared") else INF


class Atom(Record):
    """One member of an abstract value (see the module docstring).

    >>> Atom(WINDOW, SHARED_CTA_SPACE, None, 0, INF).location(4)
    ('shared::cta', None, 0, 232448)
    """

    form: int
    space: str | None = None
    region: Region | None = None
    lo: int = 0
    hi: int = 0
    shift: int = 0
    high: int = 0
    step: int = 1
    loose: int = 0

    @property
    def above(self) -> int:
        """The bits above a (shifted) address that may be set: `high`'s and `loose`'s."""
        return self.high | self.loose

    @property
    def is_address(self) -> bool:
        return self.form == WINDOW or self.form == GENERIC

    def location(self, width: int) -> Location:
        """``(space, region, start, end)`` of an access of `width` bytes through this
        address, clamped to the region; region None means anywhere in the space."""
        region = self.region
        if region is None or self.shift or self.above:
            return self.space, None, 0, MAX_DYNAMIC_SHARED if (self.space or "").startswith("shared") else INF
        limit = region.limit
        return self.space, region, max(self.lo, 0), min(self.hi + width, limit)


TOP_ATOM = Atom(TOP_FORM)
#: The value that may be anything.
TOP: Value = (TOP_ATOM,)


def number(lo: int, hi: int | None = None, step: int = 1) -> Value:
    """The integers in ``[lo, hi]`` (one integer when `hi` is None), those congruent to
    `lo` modulo `step`.

    >>> show(number(7)), show(number(-1, 4)), show(number(0, 96, 32))
    ('7', '[-1, 4]', '[0, 96] step 32')
    """
    return _num(lo, lo if hi is None else hi, step)


def address(region: Region, lo: int = 0, hi: int | None = None, form: int = WINDOW, space: str | None = None) -> Value:
    """The addresses ``region + [lo, hi]`` as window (default) or generic addresses.

    >>> show(address(Region("tile", SHARED_CTA_SPACE, 256, 16), 16, form=GENERIC))
    'tile+16 (shared::cta generic)'
    """
    return (Atom(form, space or region.space, region, lo, lo if hi is None else hi),)


def aligned_start(region: Region, alignment: int) -> Region:
    """The start of `region`'s object rounded up to `alignment` (a power of two):
    `region` itself when it is aligned that far already.

    >>> dyn = Region("dyn", SHARED_CTA_SPACE, None, 16)
    >>> up = aligned_start(dyn, 1024)
    >>> up.name, up.align, up.slack, aligned_start(up, 128) is up, aligned_start(dyn, 8) is dyn
    ('dyn aligned 1024', 1024, 1008, True, True)
    """
    if region.align >= alignment:
        return region
    root = region.root
    return Region(f"{root.name} aligned {alignment}", root.space, root.size, alignment, root)


def anywhere(space: str, form: int) -> Value:
    """Some address in `space` (the region is unknown).

    >>> show(anywhere(SHARED_CTA_SPACE, GENERIC))
    'somewhere (shared::cta generic)'
    """
    return (Atom(form, space, None, 0, INF),)


def is_top(value: Value) -> bool:
    """True when the value may be anything.

    >>> is_top(TOP), is_top(number(3))
    (True, False)
    """
    return any(atom.form == TOP_FORM for atom in value)


def register_bits(value: int | None, bits: int) -> int | None:
    """The bits a register of `bits` bits holds when its value is the number `value`, as a
    non-negative number (a negative number is its two's complement: ``mov.b32 %r, -1``
    holds 0xffffffff), or None when `value` is None or no such register holds it.

    >>> hex(register_bits(-2147467232, 32)), register_bits(7, 32), register_bits(1 << 32, 32), register_bits(None, 8)
    ('0x80004020', 7, None, None)
    """
    if value is None or not -(1 << (bits - 1)) <= value < 1 << bits:
        return None
    return value % (1 << bits)


def constant(value: Value) -> int | None:
    """The single integer a value stands for, or None.

    >>> constant(number(9)), constant(number(1, 2)), constant(TOP)
    (9, None, None)
    """
    if len(value) == 1:
        atom = value[0]
        if atom.form == NUM and atom.lo == atom.hi:
            return atom.lo
    return None


def may_be(value: Value, n: int) -> bool:
    """Whether `value` holds the number `n` (a number atom whose interval and step take it).

    >>> may_be(number(-1, 2), -1), may_be(number(0, 8, 4), 2), may_be(TOP, 2)
    (True, False, False)
    """
    return any(atom.form == NUM and atom.lo <= n <= atom.hi and (n - atom.lo) % max(atom.step, 1) == 0
               for atom in value)


def integers(value: Value, limit: int) -> frozenset[int] | None:
    """The integers a value may stand for, when they are all in ``[0, limit)``; else None.

    >>> sorted(integers(number(4, 6), 16)), integers(number(0, 40), 16), integers(TOP, 16)
    ([4, 5, 6], None, None)
    """
    found: set[int] = set()
    for atom in value:
        if atom.form != NUM or atom.lo < 0 or atom.hi >= limit:
            return None
        found.update(range(atom.lo, atom.hi + 1, max(atom.step, 1)))
    return frozenset(found) if found else None


def show(value: Value) -> str:
    """A value in words (for messages and tests).

    >>> show(join(number(1), address(Region("s", SHARED_CTA_SPACE, 64, 8), 0, 8)))
    '1 or s+[0, 8] (shared::cta window)'
    """
    parts = []
    for atom in value:
        if atom.form == TOP_FORM:
            return "top"
        span = f"{atom.lo}" if atom.lo == atom.hi else f"[{atom.lo}, {'inf' if atom.hi >= INF else atom.hi}]"
        if atom.lo != atom.hi and atom.step > 1:
            span += f" step {atom.step}"
        if atom.form == NUM:
            parts.append(span)
            continue
        where = f"{atom.region.name}+{span}" if atom.region is not None else "somewhere"
        text = f"{where} ({atom.space} {_FORM_NAMES[atom.form]})"
        if atom.shift:
            text += f" >> {atom.shift}"
        if atom.high:
            text += f" | {atom.high:#x}"
        if atom.loose:
            text += f" | any of {atom.loose:#x}"
        parts.append(text)
    return " or ".join(parts)


# -- lattice -----------------------------------------------------------------------------


def _key(atom: Atom) -> _Kind:
    return atom.form, atom.space, atom.region, atom.shift, atom.high, atom.loose


def join(a: Value, b: Value) -> Value:
    """The least value containing both (atoms of one kind merge into their hull).

    >>> show(join(number(1, 2), number(8)))
    '[1, 8]'
    """
    if a == b or not b:
        return a
    if not a:
        return b
    if a is TOP or b is TOP:
        return TOP
    merged: dict[_Kind, Atom] = {}
    for atom in a + b:
        if atom.form == TOP_FORM:
            return TOP
        key = _key(atom)
        old = merged.get(key)
        merged[key] = atom if old is None else _hull(old, atom)
    anywhere_keys = {(a.form, a.space, a.shift, a.high, a.loose) for a in merged.values()
                     if a.region is None and a.form != NUM}
    atoms = [a for a in merged.values()
             if a.region is None or (a.form, a.space, a.shift, a.high, a.loose) not in anywhere_keys]
    if len(atoms) > _MAX_ATOMS:
        return _collapse(atoms)
    return _canonical(atoms)


def _stride(atom: Atom) -> int:
    """The step of an atom for gcd arithmetic: 0 for a single value."""
    return 0 if atom.lo == atom.hi else atom.step


def _common_step(x: Atom, y: Atom) -> int:
    """The step of the hull of two atoms of one kind."""
    return gcd(_stride(x), _stride(y), abs(x.lo - y.lo)) or 1


def _hull(x: Atom, y: Atom) -> Atom:
    return x._replace(lo=min(x.lo, y.lo), hi=max(x.hi, y.hi), step=_common_step(x, y))


def _canonical(atoms: Iterable[Atom]) -> Value:
    return tuple(sorted(atoms, key=lambda atom: (atom.form, atom.space or "", atom.region or ("",), atom.shift,
                                                 atom.high, atom.loose, atom.lo)))


def _collapse(atoms: Iterable[Atom]) -> Value:
    """Too many atoms: keep only the form and space of each address."""
    out: dict[tuple[int] | tuple[int, str | None], Atom] = {}
    for atom in atoms:
        if atom.form == NUM:
            key = (NUM,)
            old = out.get(key)
            out[key] = atom if old is None else _hull(old, atom)
        else:
            out[(atom.form, atom.space)] = Atom(atom.form, atom.space, None, 0, INF)
    return _canonical(out.values())


def widen(old: Value, new: Value, thresholds: Sequence[int] | None = None) -> Value:
    """Widening for loops: a bound that grew from `old` to `new` jumps to the next of
    the sorted `thresholds` (the constants the code compares against), else to
    infinity (an address's to the end of its region, or down to its start; to minus
    infinity once below it, lest the bound move back up and the loop never settle), so
    every loop settles after a few rounds and a ring index still lands on its bound.

    >>> show(widen(number(0, 1), number(0, 2))), show(widen(number(5), number(5)))
    ('[0, inf]', '5')
    >>> show(widen(number(0, 3), number(0, 4), [0, 5, 6, 7]))
    '[0, 5]'
    >>> show(widen(number(0, 2, 2), number(0, 4, 2), [11, 12, 13]))  # a ring stepped by 2, tested at 12
    '[0, 10] step 2'
    >>> r = Region("s", SHARED_CTA_SPACE, 65536, 1024)
    >>> widen(address(r, 0, 8192), address(r, -8192, 8192))[0].lo == -INF, show(widen(address(r, 64), address(r, 32, 64)))
    (True, 's+[0, 64] (shared::cta window)')
    """
    if old == new or is_top(new):
        return new
    previous = {_key(atom): atom for atom in old}
    out = []
    for atom in new:
        before = previous.get(_key(atom))
        if before is None:
            out.append(atom)
            continue
        lo, hi, step = atom.lo, atom.hi, _common_step(before, atom)
        if lo < before.lo:
            below = [t for t in thresholds or () if t <= lo] if atom.form == NUM else []
            lo = below[-1] if below else (-INF if atom.form == NUM or lo < 0 else 0)
        if hi > before.hi:
            above = [t for t in thresholds or () if t >= hi] if atom.form == NUM else []
            hi = above[0] if above else INF
        lo, hi = _inward(lo, hi, atom.lo, step)  # stay congruent: the first values inside widened bounds
        out.append(atom._replace(lo=lo, hi=hi, step=step))
    return tuple(out)


# -- arithmetic ---------------------------------------------------------------------------


def _lift(value: Value, operation: Callable[[Atom], Value]) -> Value:
    """Apply `operation(atom) -> tuple` to each atom and join the results."""
    if len(value) == 1:
        return operation(value[0])
    out: Value = ()
    for atom in value:
        out = join(out, operation(atom))
        if out is TOP:
            return TOP
    return out


def _lift2(a: Value, b: Value, operation: Callable[[Atom, Atom], Value]) -> Value:
    if len(a) == 1 and len(b) == 1:
        return operation(a[0], b[0])
    out: Value = ()
    for x in a:
        for y in b:
            out = join(out, operation(x, y))
            if out is TOP:
                return TOP
    return out


def _num(lo: int, hi: int, step: int = 1) -> Value:
    if lo <= -INF and hi >= INF:
        return TOP
    return (Atom(NUM, None, None, max(lo, -INF), min(hi, INF), step=step if lo < hi else 1),)


def _shifted(atom: Atom, lo: int, hi: int, step: int = 1) -> Value:
    """The address atom moved to offsets ``[lo, hi]`` (in bytes), every one congruent
    to `lo` modulo `step`."""
    return (atom._replace(lo=max(lo, -INF), hi=min(hi, INF), step=step if lo < hi else 1),)


def add(a: Value, b: Value) -> Value:
    """``a + b``: numbers add; an address plus a number moves the address.

    >>> show(add(number(2), number(3, 4))), show(add(number(0, 64, 32), number(0, 32, 16)))
    ('[5, 6]', '[0, 96] step 16')
    """
    return _lift2(a, b, _add_atoms)


def _add_atoms(x: Atom, y: Atom) -> Value:
    if x.form == TOP_FORM or y.form == TOP_FORM:
        return TOP
    if x.form == NUM and y.form == NUM:
        return _num(x.lo + y.lo, x.hi + y.hi, gcd(_stride(x), _stride(y)))
    if x.form == NUM:
        x, y = y, x
    if y.form != NUM:
        return TOP  # address + address: no longer an address into one region
    bits = _limit_bits(x)
    # a constant with bits above the address field: fields added with a step of the start
    # field, read as the 64-bit word where its sign bit is one of those fields (a negative
    # number too large to be a step back within the field)
    word = y.lo & _WORD if bits is not None and y.lo < 0 and -y.lo >> bits else y.lo
    if bits is not None and y.lo == y.hi and word >> bits > 0:
        if x.loose:  # a carry out of a bit that may be either: unknown
            return TOP
        low = word & ((1 << bits) - 1)  # (A >> s | h) + (u + l) == (A + l * 2**s) >> s | (h + u)
        moved = _add_atoms(x, Atom(NUM, lo=low, hi=low))
        return tuple(atom._replace(high=(atom.high + word - low) & _WORD) for atom in moved)
    scale = 1 << x.shift  # (A + k) >> s  +  n  ==  (A + k + n * 2**s) >> s
    return _shifted(x, x.lo + y.lo * scale, x.hi + y.hi * scale, gcd(_stride(x), _stride(y) * scale))


def neg(a: Value) -> Value:
    """``-a`` (numbers only).

    >>> show(neg(number(1, 3)))
    '[-3, -1]'
    """
    return _lift(a, lambda x: _num(-x.hi, -x.lo, x.step) if x.form == NUM else TOP)


def sub(a: Value, b: Value) -> Value:
    """``a - b``; two addresses into the same region give their distance.

    >>> r = Region("s", SHARED_CTA_SPACE, 64, 8)
    >>> show(sub(address(r, 40), address(r, 8))), show(sub(address(r, 40), number(8)))
    ('32', 's+32 (shared::cta window)')
    """
    return _lift2(a, b, _sub_atoms)


def _sub_atoms(x: Atom, y: Atom) -> Value:
    if y.form == NUM:
        return _add_atoms(x, Atom(NUM, None, None, -y.hi, -y.lo, step=y.step))
    if x.is_address and _key(x) == _key(y) and x.region is not None and not x.shift and not x.loose:
        return _num(x.lo - y.hi, x.hi - y.lo, gcd(_stride(x), _stride(y)))
    return TOP


def mul(a: Value, b: Value) -> Value:
    """``a * b`` (numbers only).

    >>> show(mul(number(-2, 3), number(4)))
    '[-8, 12] step 4'
    """
    return _lift2(a, b, _mul_atoms)


def _mul_atoms(x: Atom, y: Atom) -> Value:
    if x.form != NUM or y.form != NUM:
        return TOP
    corners = [p * q for p in (x.lo, x.hi) for q in (y.lo, y.hi) if abs(p) < INF and abs(q) < INF]
    if y.lo == y.hi:
        step = _stride(x) * abs(y.lo)
    elif x.lo == x.hi:
        step = _stride(y) * abs(x.lo)
    else:
        step = 1
    if len(corners) < 4:
        if x.lo >= 0 and y.lo >= 0:
            return _num(x.lo * y.lo, INF, step)
        return TOP
    return _num(min(corners), max(corners), step)


def shl(a: Value, amount: Value) -> Value:
    """``a << amount`` for a constant amount (numbers only).

    >>> show(shl(number(1, 3), number(4)))
    '[16, 48] step 16'
    """
    count = constant(amount)
    if count is None or not 0 <= count < 64:
        return TOP
    return a if count == 0 else mul(a, number(1 << count))


def shr(a: Value, amount: Value, arithmetic: bool = False) -> Value:
    """``a >> amount`` for a constant amount; a window address becomes a shifted one
    (a matrix descriptor's address field). A logical shift (the default) of a negative
    number gives a large one: every non-negative number may come out (the caller knows
    the width, `ptxkit.cfg.values.registers` bounds it); an `arithmetic` one keeps the sign.

    >>> show(shr(number(16, 47), number(4))), show(shr(number(0, 896, 128), number(3)))
    ('[1, 2]', '[0, 112] step 16')
    >>> show(shr(number(-16, 16), number(2), arithmetic=True)), show(shr(number(-16, 16), number(2)))
    ('[-4, 4]', '[0, inf]')
    """
    count = constant(amount)
    if count is None or not 0 <= count < 64:
        return TOP

    def one(x: Atom) -> Value:
        if x.form == NUM:
            if x.lo < 0 and count:
                return _num(x.lo >> count, x.hi if x.hi >= INF else x.hi >> count) if arithmetic else _num(0, INF)
            step = x.step >> count if x.lo % (1 << count) == 0 and x.step % (1 << count) == 0 else 1
            return _num(x.lo >> count, x.hi if x.hi >= INF else x.hi >> count, step)
        if x.form == WINDOW and not x.shift and not x.above:
            return (x._replace(shift=count),)
        return TOP

    return _lift(a, one)


def _zero_low_bits(x: Atom) -> int:
    """How many low bits are zero in every value of `x` (a number, or an unshifted
    address whose region is aligned at least that far)."""
    if x.form == TOP_FORM or x.above or x.shift or (x.form == NUM and x.lo < 0):
        return 0
    known = x.lo if x.lo == x.hi else gcd(x.lo, x.step)
    bits = (known & -known).bit_length() - 1 if known else 64
    if x.is_address:
        align = x.region.align if x.region is not None else 1
        bits = min(bits, (align & -align).bit_length() - 1)
    return bits


def _bits_below(value: int) -> int:
    """The number of low bits a non-negative value may occupy."""
    return max(value, 0).bit_length()


def _limit_bits(atom: Atom) -> int | None:
    """How many low bits a window address (after its shift) can occupy, or None."""
    if atom.form == WINDOW and atom.space in (SHARED_CTA_SPACE, LOCAL_SPACE):
        return (SHARED_WINDOW_LIMIT >> atom.shift).bit_length() - 1
    return None


def and_(a: Value, b: Value, width: int = 64) -> Value:
    """``a & b``: masks that keep the whole address field are the identity, alignment
    masks (``-1024``) round the offset down (for an object aligned less than that, the
    offset from its start rounded up, `aligned_start`), other masks bound a number.

    >>> r = Region("s", SHARED_CTA_SPACE, 4096, 16)
    >>> show(and_(address(r, 100), number(-64), 32)), show(and_(shr(address(r, 32), number(4)), number(0x3FFF), 32))
    ('s aligned 64+[0, 64] step 64 (shared::cta window)', 's+32 (shared::cta window) >> 4')
    >>> show(and_(number(0, 1000), number(0x7F))), show(and_(address(r, 100), number(1023), 64))
    ('[0, 127]', '[0, 1023]')
    >>> show(and_(TOP, number(3), 32)), show(and_(number(0, 255), number(4), 32))
    ('[0, 3]', '[0, 4] step 4')
    >>> show(and_(number(32), number(224), 32)), show(and_(number(32, 63), number(224), 32))
    ('32', '32')
    >>> show(and_(number(16, INF, 1 << 18), number(0x3FFF0)))  # bits below a power-of-two step
    '16'
    >>> show(and_(address(r, 64, 128), number(0xFEFFFFF8), 32))  # sm_100's peer-CTA bit and 8-byte alignment
    's+[64, 128] step 8 (shared::cta window)'
    >>> show(and_(shr(address(Region("t", SHARED_CTA_SPACE, 65536, 1024), 2048, 2100), number(4)), number(0x3FC0), 32))
    't+2048 (shared::cta window) >> 4'
    >>> stages = add(address(Region("t", SHARED_CTA_SPACE, 65536, 1024)), number(0, 32768, 16384))
    >>> show(and_(shr(stages, number(7)), number(7))), show(and_(shr(stages, number(4)), number(7)))  # bits 7-9, 4-6
    ('0', '0')

    """
    mask = constant(b)
    if mask is None:
        mask = constant(a)
        if mask is not None:
            a, b = b, a
    if mask is None:
        return _lift2(a, b, lambda x, y: _num(0, min(x.hi, y.hi)) if (x.form == NUM == y.form and x.lo >= 0
                                                                      and y.lo >= 0) else TOP)
    full = (1 << width) - 1
    mask &= full

    def one(x: Atom) -> Value:
        if x.form == NUM:
            if x.lo > -INF and mask < _power_of_two_step(x):  # every value has the same bits there
                return number(x.lo & mask)
            if x.lo >= 0 and x.hi <= mask and (mask + 1) & mask == 0:
                return (x,)
            if 0 <= x.lo and x.hi <= full:  # the exact bounds: x & m == ~(~x | ~m)
                lo, hi = _or_bounds(full - x.hi, full - x.lo, full ^ mask, full ^ mask)
                low = mask & -mask or 1
                lo, hi = full - hi, full - lo
                return _num(lo + -lo % low, hi - hi % low, low)
            return _masked(mask if x.lo < 0 or x.hi > mask else x.hi, mask) if mask < INF else TOP
        if x.above and x.is_address:
            limit = _limit_bits(x)
            field = (1 << limit) - 1 if limit is not None else 0
            if field and mask & field in (0, field):  # the mask keeps or clears the whole address field
                if mask & field:
                    return (x._replace(high=x.high & mask, loose=x.loose & mask),)
                return _fields(x.high & mask, x.loose & mask)
        if not x.is_address or x.above:
            return _masked(mask, mask) if mask < 1 << (width - 1) else TOP  # its bits are among the mask's
        return _and_address(x, mask, full, width)

    return _lift(a, one)


def _fields(high: int, loose: int) -> Value:
    """Bits above an address as a number: the `high` ones plus any of the `loose` ones
    (the two share no bit, so each value is a sum).

    >>> show(_fields(1 << 62, 0x3FFF0000))
    '[4611686018427387904, 4611686019501064192] step 65536'
    """
    return _num(high, high | loose, loose & -loose or 1)


def _and_address(x: Atom, mask: int, full: int, width: int) -> Value:
    """``x & mask`` for an address atom (see `and_`). Bits from the window's limit up are
    not offset bits: an address of the CTA window has none there, and in the cluster
    window they pick the CTA (sm_100's peer bit 24), whose copy of the same bytes the
    atom stands for too; so the mask keeps them all."""
    limit = _limit_bits(x)
    if limit is None and x.form == WINDOW and x.space == SHARED_CLUSTER_SPACE and not x.shift:
        limit = SHARED_WINDOW_LIMIT.bit_length() - 1
    if limit is not None:
        low = full ^ (mask | full >> limit << limit)
        if (low + 1) & low == 0:  # an alignment mask once the high bits are kept
            mask = full ^ low
    if limit is not None and (mask + 1) & mask == 0 and mask >= (1 << limit) - 1:
        return (x,)  # keeps every bit an address can have
    if (mask + 1) & mask == 0 and x.region is not None and -INF < x.lo and x.hi < INF:
        # the low bits of the (shifted) address: bits [shift, shift + m) of the offset when
        # the region's start has none there, exact when every offset agrees on them
        span = (mask + 1) << x.shift
        if x.region.align % span == 0 and (x.lo // span == x.hi // span or _stride(x) % span == 0):
            return _num((x.lo >> x.shift) & mask, (x.hi >> x.shift) & mask if _stride(x) % span else
                        (x.lo >> x.shift) & mask)
    if (mask + 1) & mask == 0 and not x.shift:
        return _num(0, mask)
    if mask < 1 << (width - 1):  # some low bits of the address: a number no larger than the mask
        return _masked(mask, mask)
    low = full ^ mask  # an alignment mask keeps the high bits: -2**m (of a shifted address, 2**m << shift)
    if (low + 1) & low == 0:
        step = (low + 1) << x.shift
        if x.region is None:
            return _shifted(x, x.lo - (step - 1), x.hi)
        if x.region.align % step == 0:  # a ring whose stride is a multiple of the step keeps its stride
            return _shifted(x, x.lo - x.lo % step, x.hi - x.hi % step, x.step if x.step % step == 0 else step)
        # rounding an address of a less aligned object: offsets from its start
        # rounded up to the mask's alignment, which lies up to `slack` bytes further
        lo = x.lo - (step - x.region.align)
        lo, hi = lo - lo % step, x.hi - x.hi % step
        return (x._replace(region=aligned_start(x.region, step), lo=lo, hi=hi, step=step if lo < hi else 1),)
    return TOP


def _masked(most: int, mask: int) -> Value:
    """``[0, most]`` kept to the multiples of `mask`'s lowest set bit (what ``& mask``
    leaves of a value no larger than `most`)."""
    low = mask & -mask or 1  # no bit left: 0
    return _num(0, most - most % low if mask else 0, low)


def _small_bits(x: Atom, count: int, kept: int = 0) -> Value:
    """An address whose low `count` bits (of the shifted value) may have been changed,
    all but the lowest `kept` (a swizzle XOR of 16-byte chunks keeps a 4-byte store's
    alignment)."""
    span = 1 << (count + x.shift)  # in bytes
    region_align = x.region.align if x.region is not None else 1
    if region_align % span == 0:
        lo, hi = x.lo - x.lo % span, x.hi - x.hi % span + span - 1
    else:
        lo, hi = x.lo - (span - 1), x.hi + span - 1
    step = gcd(_stride(x), 1 << kept) if kept and not x.shift else 1  # every value keeps its residue
    return _shifted(x, lo + (x.lo - lo) % step, hi - (hi - x.lo) % step, step)


def or_(a: Value, b: Value, width: int = 64) -> Value:
    """``a | b``: constant bits above a (shifted) window address go into its `high`
    field (descriptor fields); small bits blur the offset, as XOR does. A negative
    constant is its `width`-bit pattern (a descriptor's swizzle bits set the sign).

    >>> r = Region("s", SHARED_CTA_SPACE, 4096, 1024)
    >>> show(or_(address(r, 64), number(16))), show(or_(address(r, 64), number(96)))
    ('s+80 (shared::cta window)', 's+[0, 96] step 32 (shared::cta window)')
    >>> show(or_(shr(address(r, 64), number(4)), number(-1 << 62)))
    's+64 (shared::cta window) >> 4 | 0xc000000000000000'
    """
    return _bitwise(_unsigned(a, width), _unsigned(b, width), high_ok=True)


def _unsigned(value: Value, width: int) -> Value:
    """A negative constant as the unsigned number with the same `width` bits."""
    known = constant(value)
    return number(known & ((1 << width) - 1)) if known is not None and known < 0 else value


def xor(a: Value, b: Value, width: int = 64) -> Value:
    """``a ^ b``: XOR with a small number changes only low bits (swizzled addresses).

    >>> r = Region("s", SHARED_CTA_SPACE, 4096, 1024)
    >>> show(xor(address(r, 256, 300), number(0, 112))), show(xor(add(address(r, 4), number(0, 256, 4)),
    ...                                                                number(0, 112, 16)))
    ('s+[256, 383] (shared::cta window)', 's+[0, 380] step 4 (shared::cta window)')
    >>> show(xor(number(0, 5), number(8))), show(or_(number(0, 1024, 512), number(0, 511)))
    ('[8, 13]', '[0, 1535]')
    >>> show(or_(number(0, 1760, 32), number(256)))
    '[256, 2016] step 32'
    >>> show(or_(number(0, 55), number(-64, 0, 64)))  # a small number below a negative one's zero bits
    '[-64, 55]'
    >>> show(or_(number(0, 7 << 49, 1 << 49), number(0x4000004000000000)))  # bits apart: a sum
    '[4611686293305294848, 4615626942979244032] step 562949953421312'
    >>> show(xor(address(r, 64, 96, form=GENERIC), number(1 << 24)))
    's+[64, 96] (shared::cluster generic)'

    """
    return _bitwise(_unsigned(a, width), _unsigned(b, width), high_ok=False)


def _bitwise(a: Value, b: Value, high_ok: bool) -> Value:
    def one(x: Atom, y: Atom) -> Value:
        if x.form == NUM and y.form != NUM:
            x, y = y, x
        if x.form == NUM == y.form and not _possible_bits(x) & _possible_bits(y) \
                or y.form == NUM and 0 <= y.lo and y.hi < 1 << _zero_low_bits(x):
            return _add_atoms(x, y)  # the set bits do not meet: OR and XOR are a sum
        if y.form != NUM or y.lo < 0:
            return TOP
        if x.form == NUM:
            if x.lo < 0:
                return TOP
            zeros = min(_zero_low_bits(x), _zero_low_bits(y), 80)  # no bit below both operands' lowest
            if x.hi >= INF or y.hi >= INF:
                bits = max(_bits_below(x.hi), _bits_below(y.hi))
                return _num(max(x.lo, y.lo) if high_ok else 0, (1 << bits) - 1 if bits < 80 else INF, 1 << zeros)
            bounds = _or_bounds if high_ok else _xor_bounds
            lo, hi = bounds(x.lo >> zeros, x.hi >> zeros, y.lo >> zeros, y.hi >> zeros)
            return _num(lo << zeros, hi << zeros, 1 << zeros)
        if not x.is_address:
            return TOP
        limit = _limit_bits(x)
        if high_ok and limit is not None and y.hi < 1 << 64:
            known, varying = _set_bits(y)
            if (known | varying) >> limit << limit == known | varying:  # all above the address
                if x.above & (known | varying):
                    return TOP
                return (x._replace(high=x.high | known, loose=x.loose | varying),)
        if not high_ok and _peer_window(x, y):
            return (x._replace(space=SHARED_CLUSTER_SPACE),)
        if x.above or y.hi >= INF:
            return TOP
        count = _bits_below(y.hi)
        return _small_bits(x, count, min(_zero_low_bits(y), count))

    return _lift2(a, b, one)


def _set_bits(x: Atom) -> tuple[int, int]:
    """``(known, varying)`` for a bounded non-negative number `x`: the bits every value
    has set, and those that differ between its values (from its step's lowest bit up to
    the highest bit where its bounds differ).

    >>> [hex(bits) for bits in _set_bits(_num(0x40000000, 0x40000000 + (0x3FFF << 16), 1 << 16)[0])]
    ['0x40000000', '0x3fff0000']
    """
    if x.lo == x.hi:
        return x.lo, 0
    low = x.step & -x.step
    varying = ((1 << (x.lo ^ x.hi).bit_length()) - 1) & -low
    return x.lo & ~varying, varying


def _possible_bits(x: Atom) -> int:
    """The bits number `x` may have set, as a two's-complement mask (negative: without
    end upwards): a constant's own; else from the lowest bit its values may have up to
    the top one of a bounded non-negative number, or every one from there up."""
    if x.lo <= -INF:
        return -1
    if x.lo == x.hi:
        return x.lo
    known = gcd(x.lo, x.step)
    lowest = known & -known
    return (1 << x.hi.bit_length()) - lowest if 0 <= x.lo and x.hi < INF else -lowest


def _peer_window(x: Atom, y: Atom) -> bool:
    """True for ``x ^ C`` with `x` a generic address of shared memory and `C` a constant
    that leaves its window bits alone: it is taken to name the same bytes in another CTA
    of the cluster, as a generic ``mapa`` would (FlashMLA's ``addr ^ (1 << 24)``;
    docs/fence.md §8 states the assumption)."""
    return x.form == GENERIC and x.space in (SHARED_CTA_SPACE, SHARED_CLUSTER_SPACE) and not x.shift \
        and not x.high and y.lo == y.hi and 0 < y.lo < 1 << 64 and not y.lo % SHARED_WINDOW_LIMIT


def _or_bounds(a: int, b: int, c: int, d: int) -> tuple[int, int]:
    """The least and the greatest ``x | y`` for ``x`` in ``[a, b]``, ``y`` in ``[c, d]``,
    all non-negative (Hacker's Delight, 4-3).

    >>> _or_bounds(0, 55, 0, 6), _or_bounds(4, 5, 8, 9)
    ((0, 55), (12, 13))
    """
    low_a, low_c, high_b, high_d = _bit_extremes(a, b, c, d, once=True)
    return low_a | low_c, high_b | high_d


def _xor_bounds(a: int, b: int, c: int, d: int) -> tuple[int, int]:
    """The least and the greatest ``x ^ y``, as `_or_bounds` (Hacker's Delight, 4-3).

    >>> _xor_bounds(0, 55, 0, 6), _xor_bounds(4, 5, 4, 5)
    ((0, 55), (0, 1))
    """
    low_a, low_c, high_b, high_d = _bit_extremes(a, b, c, d, once=False)
    return low_a ^ low_c, high_b ^ high_d


def _bit_extremes(a: int, b: int, c: int, d: int, once: bool) -> tuple[int, int, int, int]:
    """The operands that give the extremes of a bitwise OR (`once`) or XOR over ``[a, b]``
    and ``[c, d]``: from the top bit down, a lower bound that lacks a bit the other has
    is raised to the next multiple of that bit when that stays in range, and where both
    upper bounds have a bit, one drops it and sets every bit below when that stays in
    range. OR is done at the first change of each; XOR goes on."""
    low_a, low_c, high_b, high_d = a, c, b, d
    top = 1 << max(b.bit_length(), d.bit_length(), 1)
    raised_once = lowered_once = False
    m = top
    while m:
        if not raised_once:
            if ~low_a & low_c & m and (low_a | m) & -m <= b:
                low_a, raised_once = (low_a | m) & -m, once
            elif low_a & ~low_c & m and (low_c | m) & -m <= d:
                low_c, raised_once = (low_c | m) & -m, once
        if not lowered_once and high_b & high_d & m:
            if (high_b - m) | (m - 1) >= a:
                high_b, lowered_once = (high_b - m) | (m - 1), once
            elif (high_d - m) | (m - 1) >= c:
                high_d, lowered_once = (high_d - m) | (m - 1), once
        m >>= 1
    return low_a, low_c, high_b, high_d


def _inward(lo: int, hi: int, origin: int, step: int) -> tuple[int, int]:
    """``(lo, hi)`` moved inward to the nearest numbers ``origin + k * step`` (infinite
    ends stay)."""
    if lo > -INF:
        lo += (origin - lo) % step
    if hi < INF:
        hi -= (hi - origin) % step
    return lo, hi


def field(a: Value, position: int, length: int, width: int = 64) -> Value:
    """Bits ``[position, position + length)`` of `a` as an unsigned number: ``(a >> position)
    & (2**length - 1)`` or ``bfe.u`` (a descriptor's start field). Below bit 18 a generic
    address of the CTA's shared memory has its window address's bits: the shared window is
    taken to start at a multiple of 2**18 in the generic space (docs/fence.md §8), which
    ThunderKittens' descriptors, built from generic addresses, rely on.

    >>> r = Region("s", SHARED_CTA_SPACE, 4096, 16)
    >>> show(field(address(r, 32, form=GENERIC), 4, 14)), show(field(address(r, 32, form=GENERIC), 4, 20))
    ('s+32 (shared::cta window) >> 4', '[0, 1048575]')
    """
    if position + length <= SHARED_WINDOW_LIMIT.bit_length() - 1:
        a = _lift(a, lambda x: (x._replace(form=WINDOW),) if x.form == GENERIC and x.space == SHARED_CTA_SPACE
                  and not x.shift and not x.high else (x,))
    return and_(shr(a, number(position)), number((1 << length) - 1), width)


def _power_of_two_step(x: Atom) -> int:
    """The largest power of two every value of number `x` is congruent modulo (1 for
    none): its step's, or any for a single value."""
    if x.lo == x.hi:
        return 1 << 80
    return x.step & -x.step


def truncate(a: Value, bits: int) -> Value:
    """Keep the low `bits` bits (``cvt`` to a narrower integer, ``cvt.u16.u32``); a
    number that steps by a power of two keeps its residue modulo that step.

    >>> show(truncate(number(5), 16)), show(truncate(number(0, 70000), 16))
    ('5', '[0, 65535]')
    >>> show(truncate(number(16, INF, 1 << 18), 32))
    '[16, 4294705168] step 262144'
    >>> show(truncate(address(Region("s", SHARED_CLUSTER_SPACE, 64, 8), 8), 32))
    's+8 (shared::cluster window)'
    """
    top = 1 << bits

    def one(x: Atom) -> Value:
        if x.form == NUM:
            if 0 <= x.lo and x.hi < top:
                return (x,)
            step = _power_of_two_step(x)
            if step > top:
                return _num(x.lo % top, x.lo % top)
            if step > 1:  # the low bits keep their residue
                return _num(x.lo % step, top - step + x.lo % step, step)
            return _num(0, top - 1)
        limit = _limit_bits(x)
        if limit is not None and not x.above and limit <= bits:
            return (x,)
        if x.form == GENERIC and bits >= 64 or x.form == WINDOW and bits >= 32 and not x.shift and not x.above:
            return (x,)  # a window address fits 32 bits (``mapa.shared::cluster.u32``, ``cvta.to.shared.u32``)
        if x.above and limit is not None and x.above < top:
            return (x,)
        return TOP

    return _lift(a, one)


def wrap(a: Value, bits: int) -> Value:
    """The `bits`-bit register bits of `a` (``cvt`` to a narrower integer) as a number
    congruent to them, as `signed` reads one: numbers spanning fewer than ``2**bits``
    values keep their span, moved to start in ``[-2**bits, 2**bits)``, so ``tid - 128``
    cut to 16 bits stays ``[-128, 895]`` where `truncate` has every 16-bit pattern;
    `truncate` for the rest. An unsigned reader still takes `truncate` of it.

    >>> show(wrap(number(-128, 895), 16)), show(wrap(number(65536, 65540), 16)), show(wrap(number(0, 70000), 16))
    ('[-128, 895]', '[0, 4]', '[0, 65535]')
    """
    top = 1 << bits

    def one(x: Atom) -> Value:
        if x.form != NUM or x.hi - x.lo >= top or x.lo <= -INF or x.hi >= INF:
            return truncate((x,), bits)
        shift = x.lo // top * top
        if x.hi - shift >= top:
            shift += top
        return _num(x.lo - shift, x.hi - shift, x.step)

    return _lift(a, one)


def signed(a: Value, bits: int) -> Value:
    """`a` as an instruction of a signed `bits`-bit type reads it. A number stands for the
    register bits it is congruent to (`truncate` gives a narrow type's bits as an unsigned
    number), so one that may have the sign bit set may be negative: ``shr.s16`` of
    ``[0, 65535]`` by 15 is -1 or 0. A bound the analysis widened to infinity is taken as
    unbounded, not as wrapping round (docs/fence.md §8).

    >>> show(signed(number(0, 65535), 16)), show(signed(number(65408, 65535), 16)), show(signed(number(-5, 9), 16))
    ('[-32768, 32767]', '[-128, -1]', '[-5, 9]')
    """
    half = 1 << (bits - 1)

    def one(x: Atom) -> Value:
        if x.form != NUM or x.hi < half and x.lo >= -half or x.hi >= INF or x.lo <= -INF:
            return (x,)
        if half <= x.lo and x.hi < 2 * half:
            return _num(x.lo - 2 * half, x.hi - 2 * half, x.step)
        return _num(-half, half - 1)

    return _lift(a, one)


def bits_of(a: Value, position: int, bits: int) -> Value:
    """Bits ``[position, position + bits)`` of `a`, as an unsigned number (a load of part
    of a word kept in memory: a ``-G`` build sets a descriptor's fields through
    ``st.u16``/``st.u8`` into its stack copy and reads them back the same way). A
    shifted address keeps its field when that lies inside the bits, and the bits above
    it are its constant `high` ones.

    >>> r = Region("s", SHARED_CTA_SPACE, 4096, 16)
    >>> desc = or_(shr(address(r, 32), number(4)), number(0x4000004000000000))
    >>> show(bits_of(desc, 0, 16)), show(bits_of(desc, 56, 8)), show(bits_of(desc, 8, 8))
    ('s+32 (shared::cta window) >> 4', '64', '[0, 255]')
    >>> show(bits_of(number(0x12345678), 16, 16)), show(bits_of(number(0, 700), 8, 8)), show(bits_of(TOP, 0, 8))
    ('4660', '[0, 2]', '[0, 255]')
    """
    mask = (1 << bits) - 1

    def one(x: Atom) -> Value:
        if x.form == NUM and x.lo == x.hi:
            return number((x.lo >> position) & mask)
        if x.form == NUM and 0 <= x.lo and x.hi < 1 << (position + bits):
            return _num(x.lo >> position, x.hi >> position)
        limit = _limit_bits(x)
        if x.is_address and limit is not None:
            if position >= limit:
                return _fields((x.high >> position) & mask, (x.loose >> position) & mask)
            if position == 0 and limit <= bits:
                return (x._replace(high=x.high & mask, loose=x.loose & mask),)
        return _num(0, mask)

    return _lift(a, one)


def pack(parts: list[Value], bits: int) -> Value:
    """``mov.b{2*bits}`` of ``{low, …, high}`` parts of `bits` bits each: constant upper
    parts become the `high` field of an address or are added to a number.

    >>> r = Region("s", SHARED_CTA_SPACE, 4096, 16)
    >>> show(pack([shr(address(r, 32), number(4)), number(0x40000040)], 32))
    's+32 (shared::cta window) >> 4 | 0x4000004000000000'
    >>> pack([shr(address(r, 32), number(4)), ()], 32)
    ()
    >>> len(pack([shr(address(r, 32), number(4)), number(0x40000040, 0x40000040 + (1 << 19), 1 << 17)], 32))
    5
    >>> hex(constant(pack([number(-1), number(-2147467232)], 32)))  # parts written as negative numbers: their bits
    '0x80004020ffffffff'
    """
    low, rest = parts[0], parts[1:]
    if not all(rest):  # a part not known yet: nothing yet (top would stick)
        return ()
    if len(rest) == 1 and constant(rest[0]) is None:
        return _pack_each(low, rest[0], bits)
    upper = 0
    for index, part in enumerate(rest, 1):
        value = register_bits(constant(part), bits)
        if value is None:
            return TOP
        upper |= value << (bits * index)
    return _lift(low, partial(_packed_under, bits, upper))


def _packed_under(bits: int, upper: int, x: Atom) -> Value:
    """`pack` of the low part `x` (`bits` bits) under the constant upper parts' bits
    `upper`. A module-level function, handed on as a partial: compiled by mypyc, a
    closure here was a reference cycle with its own environment (docs/architecture.md §5).

    >>> hex(constant(_packed_under(32, 1 << 32, _num(5, 5)[0])))
    '0x100000005'
    """
    if x.form == NUM:
        if 0 <= x.lo and x.hi < 1 << bits:
            return _num(x.lo + upper, x.hi + upper)
        pattern = register_bits(x.lo, bits) if x.lo == x.hi else None
        return TOP if pattern is None else _num(pattern + upper, pattern + upper)
    if upper and x.above & upper:
        return TOP
    limit = _limit_bits(x)
    if limit is None or limit > bits:
        return TOP
    return (x._replace(high=x.high | upper),)


def _pack_each(low: Value, high: Value, bits: int) -> Value:
    """`pack` of `low` under an upper part that is one of a few numbers (a descriptor's
    base-offset field, bits 49-51, not known): the join of each packing, TOP when
    there are more than `_MAX_ATOMS`."""
    if len(high) != 1 or high[0].form != NUM or high[0].lo < 0 or high[0].hi >= 1 << bits \
            or (high[0].hi - high[0].lo) // high[0].step >= _MAX_ATOMS:
        return TOP
    out: Value = ()
    for value in range(high[0].lo, high[0].hi + 1, high[0].step):
        out = join(out, pack([low, number(value)], bits))
    return out


def unpack(a: Value, count: int, bits: int) -> list[Value]:
    """``mov.b64 {lo, hi}, a`` and its 16-bit forms: the `count` parts of `bits` bits.

    >>> r = Region("s", SHARED_CTA_SPACE, 4096, 16)
    >>> [show(p) for p in unpack(pack([shr(address(r, 32), number(4)), number(64)], 32), 2, 32)]
    ['s+32 (shared::cta window) >> 4', '64']
    >>> unpack((), 2, 32)
    [(), ()]
    >>> [show(p) for p in unpack(number(0x4000004000000000, 0x4000004000000000 + (7 << 49), 1 << 49), 2, 32)]
    ['0', '[1073741888, 1074659392] step 131072']
    >>> [show(p) for p in unpack(number(-9223301530671644672), 2, 32)]  # 0x8000402000000000 as an s64
    ['0', '2147500064']
    """
    if not a:  # not known yet: nothing yet
        return [()] * count
    mask = (1 << bits) - 1
    if len(a) == 1:
        x = a[0]
        if x.form == NUM and x.lo == x.hi and x.lo >= -(1 << (bits * count - 1)):  # negative: two's complement
            return [number((x.lo >> (bits * i)) & mask) for i in range(count)]
        if x.form == NUM and 0 <= x.lo and x.hi <= mask:
            return [(x,)] + [number(0)] * (count - 1)
        if x.form == NUM and count == 2 and 0 <= x.lo and x.hi < 1 << (2 * bits) and _power_of_two_step(x) > mask:
            return [number(x.lo & mask), _num(x.lo >> bits, x.hi >> bits, x.step >> bits)]  # the low part is fixed
        limit = _limit_bits(x)
        if x.is_address and limit is not None and limit <= bits:
            return [(x._replace(high=x.high & mask, loose=x.loose & mask),)] + [
                _fields((x.high >> (bits * i)) & mask, (x.loose >> (bits * i)) & mask) for i in range(1, count)]
    return [TOP] * count


def refine(value: Value, comparison: str, bound: int, holds: bool, unsigned: bool = False) -> Value:
    """The numbers of `value` for which ``value <comparison> bound`` is `holds`
    (comparisons as in ``setp``: eq, ne, lt, le, gt, ge and their unsigned forms).
    An unsigned comparison sees a negative number as a huge one, so ``x <= C``
    also rules the negative ones out; the empty tuple means "no such value".

    >>> show(refine(number(0, 4), "eq", 4, False)), show(refine(number(0, 9), "lt", 5, True))
    ('[0, 3]', '[0, 4]')
    >>> show(refine(number(-32, 991), "gt", 15, False, unsigned=True))
    '[0, 15]'
    >>> show(refine(number(0, 8, 2), "ne", 8, True)), show(refine(number(0, 64, 16), "lt", 40, True))
    ('[0, 6] step 2', '[0, 39]')
    """
    unsigned = unsigned or comparison in ("lo", "ls", "hi", "hs")
    if unsigned and bound < 0:  # a huge unsigned bound, of a width not known here
        return value
    if not holds:
        negated = NEGATED_COMPARISONS.get(comparison)
        if negated is None:
            return value
        comparison = negated

    def one(x: Atom) -> Value:
        if x.form != NUM:
            return (x,)
        lo, hi = x.lo, x.hi
        if unsigned and lo < 0:
            if comparison in ("lt", "le", "lo", "ls", "eq") and bound >= 0:
                lo = 0
            elif comparison not in ("ne",):
                return (x,)
        if comparison == "eq":
            lo, hi = max(lo, bound), min(hi, bound)
        elif comparison == "ne":
            if lo == bound:
                lo += 1
            if hi == bound:
                hi -= 1
        elif comparison in ("lt", "lo"):
            hi = min(hi, bound - 1)
        elif comparison in ("le", "ls"):
            hi = min(hi, bound)
        elif comparison in ("gt", "hi"):
            lo = max(lo, bound + 1)
        elif comparison in ("ge", "hs"):
            lo = max(lo, bound)
        # a test that takes a number off an end keeps the step (a counter advanced by 2 and
        # tested != 8 ends at 6); the others keep to whole intervals
        step = x.step if comparison == "ne" and x.lo > -INF else 1
        if step > 1:
            lo, hi = _inward(lo, hi, x.lo, step)
        if lo > hi:
            return ()
        return _num(lo, hi, step)

    return _lift(value, one)


def refine_by(value: Value, comparison: str, other: Value, holds: bool, unsigned: bool = False) -> Value:
    """`refine` against another register, whose value is `other`: ``x < y`` keeps `value`
    below y's largest number, ``x > y`` above its smallest, ``x == y`` between the two;
    `value` as it is when `other` is not one bounded interval, or has no value (a
    register whose definitions seem unreachable still holds something).

    >>> show(refine_by(number(-32, 10**9), "lt", number(16, 32, 16), True, unsigned=True))
    '[0, 31]'
    >>> show(refine_by(number(0, 100), "lt", number(16, 32), False)), show(refine_by(number(0, 9), "lt", (), True))
    ('[16, 100]', '[0, 9]')
    >>> r = Region("s", SHARED_CTA_SPACE, 65536, 1024)
    >>> ring, end = add(address(r), number(0, 16384, 8192)), address(r, 8192)
    >>> show(refine_by(ring, "lo", end, True)), show(refine_by(ring, "lo", end, False))
    ('s+0 (shared::cta window)', 's+[8192, 16384] step 8192 (shared::cta window)')
    """
    if not holds:
        negated = NEGATED_COMPARISONS.get(comparison)
        if negated is None:
            return value
        comparison = negated
    if len(other) != 1:
        return value
    if other[0].is_address:
        return _refine_offsets(value, comparison, other[0])
    if other[0].form != NUM:
        return value
    lo, hi = other[0].lo, other[0].hi
    if (unsigned or comparison in ("lo", "ls", "hi", "hs")) and lo < 0:
        return value  # y may be a huge unsigned number
    if comparison in ("lt", "le", "lo", "ls", "eq") and hi < INF:
        value = refine(value, "le" if comparison == "eq" else comparison, hi, True, unsigned)
    if comparison in ("gt", "ge", "hi", "hs", "eq") and lo > -INF and value:
        value = refine(value, "ge" if comparison == "eq" else comparison, lo, True, unsigned)
    return value


def _refine_offsets(value: Value, comparison: str, other: Atom) -> Value:
    """`refine_by` against an address: the atoms of `value` into the same region, in the
    same form and with the same `high` bits, compare as their offsets do (the address field
    lies below the high bits); a `shift` drops low bits, so ``x >> s >= y >> s`` only says
    ``x > y - 2**s``. Other atoms stay as they are."""
    if other.region is None or other.lo <= -INF or other.hi >= INF:
        return value
    blur = (1 << other.shift) - 1
    least = {"lt": -INF, "le": -INF, "gt": other.lo + 1, "ge": other.lo - blur, "eq": other.lo - blur}
    most = {"lt": other.hi - 1, "le": other.hi + blur, "gt": INF, "ge": INF, "eq": other.hi + blur}
    kind = UNSIGNED_COMPARISONS.get(comparison, comparison)
    if kind not in least:
        return value

    def one(x: Atom) -> Value:
        if _key(x) != _key(other) or x.loose:
            return (x,)
        lo, hi = _inward(max(x.lo, least[kind]), min(x.hi, most[kind]), x.lo, x.step)
        return (x._replace(lo=lo, hi=hi, step=x.step if lo < hi else 1),) if lo <= hi else ()

    return _lift(value, one)


def compare(value: Value, comparison: str, bound: int, unsigned: bool = False) -> Value:
    """What ``setp.<comparison> p, value, bound`` leaves in ``p``: 1 when it holds for
    every number of `value`, 0 when for none, ``[0, 1]`` when it may go either way.

    >>> show(compare(number(32), "eq", 0)), show(compare(number(0, 31), "lt", 32))
    ('0', '1')
    >>> show(compare(number(0, 63), "ne", 0)), compare((), "eq", 0)  # a value not known yet: nothing yet
    ('[0, 1]', ())
    """
    if not value:  # not known yet: nothing yet
        return ()
    holds, fails = refine(value, comparison, bound, True, unsigned), refine(value, comparison, bound, False, unsigned)
    return number(0 if not holds else 1 if not fails else 0, 1 if holds else 0)


def meet(a: Value, b: Value) -> Value:
    """The numbers in both `a` and `b` when both are one interval; otherwise `a`.

    >>> show(meet(number(0, 1023), number(32, 47))), meet(number(0, 3), number(5, 9))
    ('[32, 47]', ())
    """
    if len(a) == 1 == len(b) and a[0].form == NUM == b[0].form:
        lo, hi = max(a[0].lo, b[0].lo), min(a[0].hi, b[0].hi)
        return _num(lo, hi) if lo <= hi else ()
    return a


def within(a: Value, b: Value) -> Value:
    """What `a` and `b` both allow where each is one atom of a kind (numbers, or offsets
    from one start), on `b`'s steps; otherwise `b`: each of them holds every value, and
    `b` is the bound the caller found.

    >>> smem = Region("smem", SHARED_CTA_SPACE, 65536, 1024)
    >>> show(within(address(smem, 0, INF), add(address(smem), number(0, 8192, 8192))))
    'smem+[0, 8192] step 8192 (shared::cta window)'
    >>> show(within(number(0, 5), number(4, 12, 4))), within(number(0, 3), number(4, 12, 4))
    ('4', ())
    """
    if not a or len(a) != 1 or len(b) != 1 or _key(a[0]) != _key(b[0]):
        return b if a else ()
    x, y = a[0], b[0]
    step = max(y.step, 1)
    lo = y.lo + -(-(max(x.lo, y.lo) - y.lo) // step) * step
    hi = y.lo + (min(x.hi, y.hi) - y.lo) // step * step
    return (y._replace(lo=lo, hi=hi, step=step if hi > lo else 1),) if lo <= hi else ()
