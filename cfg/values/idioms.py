"""Remainder and rounding idioms whose range intervals alone cannot see.

A ring-buffer index advanced by a run-time count is reduced modulo the number of
stages, and nvcc spells ``x % C`` as ``x - (x / C) * C`` with the division done by a
multiply-high ("magic number") sequence, or, for a signed power of two, as
``x - ((x + bias) & -2**m)``. Interval arithmetic loses the relation between the
two ``x`` and answers "anything"; these patterns give the exact range (docs/fence.md
§3.2):

- ``sub d, x, y`` with ``y = and(x + c, -2**m)`` (or ``and(x, -2**m)``):
  ``d = (x + c) mod 2**m - c``, so ``d`` is in ``[-max(c), 2**m - 1 - min(c)]``; a
  mask such as ``2**26 - 16`` does the same for ``x + c`` in ``[0, 2**26)``;
- ``sub d, x, y`` (or ``mad.lo d, q, -C, x``) with ``y = q * C`` and ``q`` computed
  from ``x`` alone: when ``q`` equals ``x // C`` on every probe value (`PROBES`:
  both ends of the 32-bit range, around every multiple of ``C`` near them, and
  evenly spread values), ``d = x mod C`` is in ``[0, C - 1]`` for ``x >= 0``;
- the same with ``q = z // D`` computed from another register ``z`` and ``C = k * D``:
  ``d = k * (z mod D)`` when ``x`` is ``k * z`` (LLVM keeps ``8 * i`` as a counter of its
  own beside ``i``; the register analysis checks how both are set, `counts_alike`).

The second check evaluates the division sequence on concrete numbers; the
sequences compilers emit are exact for every input or wrong on whole ranges, which
the probes cover.

Offsets that LLVM adds and takes back again (`linear`): ``t = a + 8184 * i`` then
``u = t - 8184 * i`` (Triton's warp-specialized loaders move from an mbarrier's
address to a tile's and back) leave ``u = a``, but intervals add the two ranges of
``8184 * i`` instead of cancelling them:

- an ``add``/``sub``/``mad.lo``/``mul.lo``/``shl`` of 32-bit integers is expanded
  through the definitions earlier in its block (each read where nothing redefines its
  own operands in between) into a sum of registers times constants; when a register
  comes twice, the register analysis values the sum instead, each register once.

A pointer rounded up to a power of two without the ``(x + N - 1) & -N`` form
(ThunderKittens' shared-memory allocator) is recognised too (`align_up`):

- ``selp d, x, y, p`` with ``p = (x & (N - 1)) == 0`` and ``y = x - (x & (N - 1)) + N``
  computed by ``add``/``sub`` in the block: ``d`` is ``x`` rounded up to ``N``.

>>> from ptxkit import parse
>>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n.reg .b32 %r<9>;\\n"
...           ".reg .b64 %rd<3>;\\n\\tmul.wide.u32 %rd1, %r1, 613566757;\\n\\tshr.u64 %rd2, %rd1, 32;\\n"
...           "\\tcvt.u32.u64 %r2, %rd2;\\n\\tsub.s32 %r3, %r1, %r2;\\n\\tshr.u32 %r4, %r3, 1;\\n"
...           "\\tadd.s32 %r5, %r4, %r2;\\n\\tshr.u32 %r6, %r5, 2;\\n\\tmul.lo.s32 %r7, %r6, 7;\\n"
...           "\\tsub.s32 %r8, %r1, %r7;\\n\\tret;\\n}\\n")
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> block = flow_graph(m.function("k")).blocks[0]
>>> remainder(block.instructions, block.heads, 8, frozenset())
Remainder(x='%r1', bias=None, modulus=7, kind='division', limit=None, counter=None, scale=1, signed=False)
"""

from __future__ import annotations

import functools

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.isa_eval import operation

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterator, Sequence
    from typing import TypeGuard

    from ptxkit.cfg.flow.graph import HeadTuple
    from ptxkit.instruction import Operand
    from ptxkit.syntax import Instruction

    #: A block's instructions, and their heads (`ptxkit.cfg.flow.graph.BasicBlock`).
    Instructions = Sequence[Instruction]
    Heads = Sequence[HeadTuple]
    #: An expression of a division sequence (`_tree`): ``("x",)``, ``("imm", value)`` or
    #: ``(opcode, *operands)``.
    Tree = tuple["str | int | Tree", ...]
    #: A definition `align_up` finds: ``(block, instructions, heads, position)``, block None for the select's own.
    Placed = tuple[int | None, Instructions, Heads, int]
    #: What `_alignment_test` finds: ``(x, r, N, where the and is, "eq" or "ne")``.
    AlignmentTest = tuple[str, str, int, Placed, str]
    #: A block's code as `linear` expands it: ``(instructions, heads, block)``.
    Code = tuple[Instructions, Heads, int | None]
    #: A definition `linear` expanded from another block: ``(block read in, block defined in, the
    #: registers its expansion reads, the register it defines)``.
    Crossing = tuple[int | None, int, frozenset[str], str]
    #: A sum as `_Expansion.expand` finds it: ``(terms, constant, registers read)``.
    Expanded = tuple[dict[str, int], int, set[str]]
    #: `linear`'s ``outside(block, register)``: ``(instructions, heads, position, block)`` of a definition elsewhere.
    Outside = Callable[[int | None, str], "tuple[Instructions, Heads, int, int] | None"]
    #: `linear`'s ``defining(code, position, register)``: where the code last defines a register before a position.
    Defining = Callable[[Code, int, str], "int | None"]
    #: `linear`'s ``remainders(code, position)``: the `remainder` the code computes at a position.
    Remainders = Callable[[Code, int], "Remainder | None"]
    #: What `quotient_of` finds: ``(z, divides)``.
    Quotient = tuple[str, Callable[[int], bool]]

#: Opcodes a division sequence is built from (each evaluated on concrete integers by
#: `ptxkit.isa_eval`).
_ARITHMETIC = frozenset("mul mad shr shl add sub cvt mov div and".split())
_MAX_DEPTH = 12


class Remainder(Record):
    """A recognised remainder: ``kind`` is ``alignment`` (``x - align_down(x + bias,
    modulus)``, `bias` the operand holding ``c`` or None; when `limit` is set the mask
    keeps bits only below it, so ``x + c`` must lie in ``[0, limit)``) or
    ``division`` (``x mod modulus``; with `signed`, the division truncates a signed `x`,
    so the remainder has the sign of `x`)."""

    x: str
    bias: "Operand | None"
    modulus: int
    kind: str
    limit: int | None = None
    counter: str | None = None  # a division of this register instead, `x` its multiple by `scale`
    scale: int = 1
    signed: bool = False


def _defining(instructions: Instructions, heads: Heads, position: int, register: str,
              plain: Container[str]) -> int | None:
    """The instruction before `position` in the block that last defines `register`."""
    for index in range(position - 1, -1, -1):
        if register not in instructions[index].text:  # most instructions of a long block do not name it
            continue
        operands = instructions[index].operands
        if operands and heads[index][2] not in ("st", "bar", "barrier", "bra", "call", "red"):
            first = operands[0]
            if first.kind in ("register", "symbol") and first.name == register:
                return index
            if first.kind in ("vector", "pair") and any(e.name == register for e in first.elements):
                return index
    return None


def _unchanged(instructions: Instructions, heads: Heads, start: int, stop: int, register: str,
               plain: Container[str]) -> bool:
    at = _defining(instructions, heads, stop, register, plain)
    return at is None or at < start


def remainder(instructions: Instructions, heads: Heads, position: int, plain: Container[str]) -> Remainder | None:
    """The remainder idiom computed by the ``sub``/``mad`` at `position`, or None."""
    head = heads[position]
    operands = instructions[position].operands
    if head[0] is not None:
        return None
    bits = 16 if head[1].endswith("16") else 32  # the width x is read at
    if head[2] == "sub" and len(operands) == 3 and operands[1].kind == "register" and operands[2].kind == "register":
        x, y = operands[1].name, operands[2].name
        at = _defining(instructions, heads, position, y, plain)
        if at is None or heads[at][0] is not None:
            return None
        found = _alignment(instructions, heads, at, x, position, plain)
        if found is not None:
            return found
        if heads[at][2] == "mul" and ".lo" in heads[at][1]:
            factors = instructions[at].operands[1:]
            return _division(instructions, heads, at, x, factors, 1, position, plain, bits)
        return None
    if head[2] == "mad" and ".lo" in head[1] and len(operands) == 4 and operands[3].kind == "register":
        return _division(instructions, heads, position, operands[3].name, operands[1:3], -1, position, plain, bits)
    return None


def _alignment(instructions: Instructions, heads: Heads, at: int, x: str, position: int,
               plain: Container[str]) -> Remainder | None:
    if heads[at][2] != "and":
        return None
    operands = instructions[at].operands
    if len(operands) != 3 or operands[2].kind != "immediate" or operands[1].kind != "register":
        return None
    shape = _alignment_mask(operands[2].value)
    if shape is None:
        return None
    step, limit = shape
    z = operands[1].name
    if z == x:
        if not _unchanged(instructions, heads, at, position, x, plain):
            return None
        return Remainder(x, None, step, "alignment", limit)
    add_at = _defining(instructions, heads, at, z, plain)
    if add_at is None or heads[add_at][2] != "add" or heads[add_at][0] is not None:
        return None
    summands = instructions[add_at].operands[1:]
    if len(summands) != 2:
        return None
    for a, b in (summands, summands[::-1]):
        if a.kind == "register" and a.name == x and _unchanged(instructions, heads, add_at, position, x, plain):
            return Remainder(x, b, step, "alignment", limit)
    return None


def _alignment_mask(mask: int | float) -> tuple[int, int | None] | None:
    """``(step, limit)`` when `mask` clears the bits below ``step`` and keeps those up
    to ``limit`` (None: every higher bit, as ``-16`` does); None for other masks.

    >>> _alignment_mask(-16), _alignment_mask(67108848), _alignment_mask(0xF0F0)
    ((16, None), (16, 67108864), None)
    """
    if isinstance(mask, float) or mask == 0:
        return None
    for width in (32, 64):
        value = mask & ((1 << width) - 1)
        step = value & -value
        ones = value + step  # ones above the step carry out to a single bit
        if ones & (ones - 1) == 0:
            limit = ones if ones < 1 << width else None
            if limit is None or mask >= 0:
                return step, limit
    return None


def _division(instructions: Instructions, heads: Heads, at: int, x: str, factors: Sequence[Operand], sign: int,
              position: int, plain: Container[str], bits: int = 32) -> Remainder | None:
    """``x - (x / C) * C``, or ``x - (z / D) * (k * D)`` where the division reads another
    register `z` (LLVM keeps ``x = k * z`` as a counter of its own, Gluon's ``8 * (i % 3)``):
    the remainder of `z` scaled by `k`, which holds when `x` is `k` times `z` (the caller
    checks, `Remainder.counter`). `bits`: the width the subtraction reads `x` at (a 16-bit
    ``sub.s16`` divides only 16-bit dividends: TileLang's ``k % 3`` by ``mul.wide.u16``)."""
    if len(factors) != 2:
        return None
    for q, c in (factors, factors[::-1]):
        if c.kind != "immediate" or not isinstance(c.value, int) or q.kind != "register" or q.name is None \
                or c.value * sign <= 1:  # (a register has a name)
            continue
        total = c.value * sign
        for z in _dividends(instructions, heads, at, q.name, x):
            used: list[int] = []
            tree = _tree(instructions, heads, at, q.name, z, used, 0)
            if tree is None or not used:
                continue
            if any(index is not None and index >= min(used)
                   for index in (_defining(instructions, heads, position, name, plain) for name in {x, z})):
                continue  # x or z changed between the division and the subtraction
            for signed in (False, True):
                if z == x and _divides(tree, total, signed, bits):
                    return Remainder(x, None, total, "division", signed=signed)
                for divisor in _divisors(total) if z != x else ():
                    if 1 < divisor < total and _divides(tree, divisor, signed, bits):
                        return Remainder(x, None, divisor, "division", counter=z, scale=total // divisor,
                                         signed=signed)
    return None


def quotient_of(instructions: Instructions, heads: Heads, position: int, register: str) -> Quotient | None:
    """``(z, divides)`` when `register`, as the instruction at `position` reads it, is
    computed in the block from one register `z` alone (not set again since), by a
    sequence `divides(D)` says is the unsigned ``z // D`` (`_divides`); else None.

    >>> from ptxkit import parse
    >>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n.reg .b32 %r<4>;\\n"
    ...           "\\tmul.hi.u32 %r2, %r1, -1431655765;\\n\\tshr.u32 %r3, %r2, 1;\\n\\tret;\\n}\\n")
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> block = flow_graph(m.function("k")).blocks[0]
    >>> z, divides = quotient_of(block.instructions, block.heads, 2, "%r3")
    >>> z, divides(3), divides(5)
    ('%r1', True, False)
    """
    leaves: set[str] = set()
    if not _leaves(instructions, heads, position, register, leaves, 0) or len(leaves) != 1:
        return None
    z = leaves.pop()
    used: list[int] = []
    tree = _tree(instructions, heads, position, register, z, used, 0)
    changed = _defining(instructions, heads, position, z, frozenset())
    if tree is None or not used or changed is not None and changed >= min(used):
        return None
    return z, lambda divisor: divisor > 1 and _divides(tree, divisor)


def _dividends(instructions: Instructions, heads: Heads, at: int, quotient: str, x: str) -> Iterator[str]:
    """`x`, then the one other register the expression for `quotient` starts from."""
    yield x
    leaves: set[str] = set()
    if _leaves(instructions, heads, at, quotient, leaves, 0) and len(leaves) == 1 and x not in leaves:
        yield leaves.pop()


def _divisors(number: int) -> list[int]:
    """The divisors of a positive `number`, smallest first.

    >>> _divisors(24)
    [1, 2, 3, 4, 6, 8, 12, 24]
    """
    small = [d for d in range(1, int(number ** 0.5) + 1) if number % d == 0]
    return small + [number // d for d in reversed(small) if d * d != number]


def _leaves(instructions: Instructions, heads: Heads, position: int, register: str, found: set[str],
            depth: int) -> bool:
    """Collect into `found` the registers an arithmetic expression for `register` in the
    block starts from; False when it is not one."""
    if depth > _MAX_DEPTH:
        return False
    at = _defining(instructions, heads, position, register, frozenset())
    if at is None or heads[at][0] is not None or heads[at][2] not in _ARITHMETIC:
        found.add(register)
        return depth > 0
    for operand in instructions[at].operands[1:]:
        if operand.kind == "register" and not _leaves(instructions, heads, at, operand.name, found, depth + 1):
            return False
        if operand.kind not in ("register", "immediate"):
            return False
    return True


def _tree(instructions: Instructions, heads: Heads, position: int, register: str, x: str, used: list[int],
          depth: int) -> Tree | None:
    """The expression computing `register` from `x` and constants inside the block
    (`used` collects the instructions it reads), or None when something else feeds it."""
    if register == x:
        return ("x",)
    if depth > _MAX_DEPTH:
        return None
    at = _defining(instructions, heads, position, register, frozenset())
    if at is None or heads[at][0] is not None or heads[at][2] not in _ARITHMETIC:
        return None
    used.append(at)
    args: list[Tree] = []
    for operand in instructions[at].operands[1:]:
        if operand.kind == "immediate" and isinstance(operand.value, int):
            args.append(("imm", operand.value))
        elif operand.kind == "register":
            sub = _tree(instructions, heads, at, operand.name, x, used, depth + 1)
            if sub is None:
                return None
            args.append(sub)
        else:
            return None
    return (heads[at][1],) + tuple(args)


def _compile(tree: Tree) -> Callable[[int], int | None]:
    """A function of x computing `tree` on concrete integers (`ptxkit.isa_eval`); it
    gives None where a step's result is unspecified (a division by zero) or not modelled.

    >>> _compile(("shr.u32", ("mul.hi.u32", ("x",), ("imm", -1431655765)), ("imm", 1)))(100)
    33
    """
    op = tree[0]
    if op == "x":
        return lambda x: x
    if op == "imm":
        value = tree[1]
        assert isinstance(value, int), "a constant's value"  # for mypy: `_tree` makes ("imm", int)
        return lambda x: value
    operands = tree[1:]
    assert isinstance(op, str) and _trees(operands), "an opcode and its operands"  # for mypy: `_tree` makes them so
    args = [_compile(a) for a in operands]
    found = operation(op)
    if found is None or found.arity != len(args):
        return lambda x: None
    apply = found.apply
    if len(args) == 1:
        only = args[0]
        return lambda x: None if (value := only(x)) is None else apply(value)
    if len(args) == 2:
        first, second = args

        def binary(x: int) -> int | None:
            a, b = first(x), second(x)
            return None if a is None or b is None else apply(a, b)

        return binary

    def compute(x: int) -> int | None:
        values = [arg(x) for arg in args]
        return None if None in values else apply(*values)

    return compute


def _trees(items: tuple[str | int | Tree, ...]) -> TypeGuard[tuple[Tree, ...]]:
    """True when every item is a `Tree` (the operands of an operation)."""
    return all(isinstance(item, tuple) for item in items)


#: Evenly spread inputs the division check tries, besides those near the ends of the range.
PROBES = 256


@functools.lru_cache(maxsize=256)
def _divides(tree: Tree, divisor: int, signed: bool = False, bits: int = 32) -> bool:
    """True when `tree` computes ``x // divisor`` on every probe value of x, an integer
    of `bits` bits (32 or 16): the small ones, the ones around the last few multiples of
    `divisor` below 2**(bits-1) and 2**bits, and evenly spread ones (every one for 16
    bits). `signed`: x is a signed integer and the quotient truncates towards zero (C's
    ``/``, LLVM's ``sdiv`` by a constant: ``mul.hi.s32``, then adding the sign bit).

    >>> third = ("add.s32", ("mul.hi.s32", ("x",), ("imm", 1431655766)),
    ...          ("shr.u32", ("mul.hi.s32", ("x",), ("imm", 1431655766)), ("imm", 31)))
    >>> _divides(third, 3), _divides(third, 3, signed=True)
    (False, True)
    """
    values = set(range(0, 2 * divisor + 2))
    for top in (1 << (bits - 1), 1 << bits):
        last = top - 1 - (top - 1) % divisor
        for k in range(4):
            values.update(range(max(last - k * divisor - 1, 0), min(last - k * divisor + 2, top)))
        values.update(range(top - 4, top))
    values.update(range(0, 1 << bits, 1 if bits <= 16 else (1 << bits) // PROBES + 1))
    function = _compile(tree)
    mask = (1 << bits) - 1
    if not signed:
        return all((y := function(x)) is not None and y & mask == x // divisor for x in values)
    as_signed = (x - (1 << bits) if x >> (bits - 1) else x for x in values)
    return all((y := function(x & mask)) is not None and y & mask == _truncated(x, divisor) & mask
               for x in as_signed)


def _truncated(x: int, divisor: int) -> int:
    """``x / divisor`` rounded towards zero, as PTX's ``div.s32`` does."""
    quotient = abs(x) // divisor
    return quotient if x >= 0 else -quotient


class AlignUp(Record):
    """A recognised ``selp`` that rounds register `x` up to a multiple of `modulus`.
    The rounded arm adds `constant` and each ``(coefficient, register)`` of `others`
    to ``x - (x & (modulus - 1))``; the idiom holds when they add up to `modulus`,
    which only the registers' values can tell."""

    x: str
    modulus: int
    constant: int
    others: tuple[tuple[int, str], ...]


def align_up(instructions: Instructions, heads: Heads, position: int, plain: Container[str],
             elsewhere: Callable[[str], Placed | None] | None = None) -> AlignUp | None:
    """The align-up idiom computed by the ``selp`` at `position`, or None: ``r = x &
    (N - 1)``, ``p = r == 0``, the select of ``x`` and a sum ``x - r + ...``. Its parts
    may lie in another block when `elsewhere` finds them: ``elsewhere(register)`` gives
    ``(block, instructions, heads, position)`` of the one definition of a register in a
    block the caller knows runs before this one on every way to it, or None. ``x``, ``r``
    and the sum (unless this block computes it) must then all be set in that block and
    not in this one (nvcc rounds the dynamic shared base once and tests or selects it
    again in later blocks).

    >>> from ptxkit import parse
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...           ".reg .b64 %rd<9>;\\n.reg .pred %p<2>;\\n\\tand.b64 %rd2, %rd1, 1023;\\n"
    ...           "\\tsub.s64 %rd3, %rd8, %rd2;\\n\\tadd.s64 %rd4, %rd3, %rd1;\\n\\tsetp.eq.s64 %p1, %rd2, 0;\\n"
    ...           "\\tselp.b64 %rd5, %rd1, %rd4, %p1;\\n\\tret;\\n}\\n")
    >>> block = flow_graph(m.function("k")).blocks[0]
    >>> align_up(block.instructions, block.heads, 4, frozenset())
    AlignUp(x='%rd1', modulus=1024, constant=0, others=((1, '%rd8'),))
    """
    operands = instructions[position].operands
    if heads[position][0] is not None or heads[position][2] != "selp" or len(operands) != 4 \
            or operands[3].kind != "register":
        return None
    here: tuple[None, Instructions, Heads] = (None, instructions, heads)

    def site(register: str, before: int) -> Placed | None:
        """Where `register`, read at `before` in this block, was set: here or elsewhere."""
        at = _defining(instructions, heads, before, register, plain)
        if at is not None:
            return here + (at,)
        return elsewhere(register) if elsewhere is not None else None

    predicate = operands[3]
    setp = site(predicate.name, position)
    test = _alignment_test(*setp, plain, site if setp[0] is None else None) if setp is not None else None
    if test is None:
        return None
    x, remainder_register, modulus, home, comparison = test
    _, code, code_heads, and_at = home
    if home[0] is None:  # all in this block: x and r unchanged from the test to the select
        if not _unchanged(instructions, heads, and_at, position, x, plain) \
                or _defining(instructions, heads, position, remainder_register, plain) != and_at:
            return None
    else:  # x and r each set once, in the test's block, x first
        assert elsewhere is not None, "`site` found the test there"  # for mypy
        x_site, r_site = elsewhere(x), elsewhere(remainder_register)
        if x_site is None or x_site[0] != home[0] or x_site[3] > and_at \
                or r_site is None or r_site[0] != home[0] or r_site[3] != and_at \
                or _defining(instructions, heads, position, x, plain) is not None \
                or _defining(instructions, heads, position, remainder_register, plain) is not None:
            return None
    aligned, rounded = operands[1], operands[2]
    if (comparison == "ne") != predicate.negated:
        aligned, rounded = rounded, aligned
    if aligned.kind != "register" or aligned.name != x or rounded.kind != "register":
        return None
    terms: dict[str | None, int] = {}
    summed = site(rounded.name, position)
    if summed is None:
        return None
    if summed[0] is None:  # the sum is computed here
        span, where = ((and_at, position) if home[0] is None else (-1, position)), (instructions, heads, position)
    elif summed[0] == home[0] and summed[3] > and_at:
        span, where = (and_at, summed[3] + 1), (code, code_heads, summed[3] + 1)
    else:
        return None
    if not _linear(*where[:2], where[2], rounded.name, 1, span, (x, remainder_register), terms, 0):
        return None
    if terms.pop(x, 0) != 1 or terms.pop(remainder_register, 0) != -1:
        return None
    constant = terms.pop(None, 0)
    others = tuple((coefficient, name) for name, coefficient in sorted(_registers(terms).items()) if coefficient)
    if others and summed[0] is not None:
        return None  # read where the select is, they may no longer be what the sum added
    return AlignUp(x, modulus, constant, others)


def _alignment_test(block: int | None, instructions: Instructions, heads: Heads, setp_at: int, plain: Container[str],
                    site: Callable[[str, int], Placed | None] | None = None) -> AlignmentTest | None:
    """``(x, r, N, home, comparison)`` for the ``setp.eq/ne p, r, 0`` at `setp_at` of
    `block` (None: the select's) of ``r = x & (N - 1)`` (N a power of two) set before
    it in that block, or through ``site(r, setp_at)`` (`align_up`); `home` is ``(block,
    instructions, heads, position)`` of the ``and``. None when it is no such test."""
    if heads[setp_at][2] != "setp" or heads[setp_at][0] is not None:
        return None
    compare = instructions[setp_at].operands
    comparison = heads[setp_at][1].split(".")[1]
    if len(compare) != 3 or comparison not in ("eq", "ne") or compare[1].kind != "register" \
            or compare[2].kind != "immediate" or compare[2].value != 0:
        return None
    remainder_register = compare[1].name
    at = _defining(instructions, heads, setp_at, remainder_register, plain)
    home = (block, instructions, heads, at) if at is not None else \
        site(remainder_register, setp_at) if site is not None else None
    if home is None:
        return None
    _, code, code_heads, and_at = home
    if code_heads[and_at][2] != "and" or code_heads[and_at][0] is not None:
        return None
    masked = code[and_at].operands
    if len(masked) != 3 or masked[1].kind != "register" or masked[2].kind != "immediate" \
            or not isinstance(masked[2].value, int):
        return None
    modulus = masked[2].value + 1
    x = masked[1].name
    if modulus < 2 or modulus & (modulus - 1) or x == remainder_register:
        return None
    return x, remainder_register, modulus, home, comparison


class Rounding(Record):
    """A recognised ``add`` that rounds register `x` up past a multiple of `modulus`:
    ``x + (modulus - r)`` with ``r = x % modulus`` (or ``x & (modulus - 1)``) in
    register `remainder`. Where ``r`` is not 0 the sum is ``x`` rounded up."""

    x: str
    remainder: str
    modulus: int


def rounding_add(instructions: Instructions, heads: Heads, position: int, plain: Container[str]) -> Rounding | None:
    """The rounding idiom the ``add`` at `position` computes (a ``-G`` build's
    ``if (p % 1024) p += 1024 - p % 1024``, ThunderKittens' allocator), or None.

    >>> from ptxkit import parse
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...           ".reg .b64 %rd<9>;\\n\\trem.u64 %rd4, %rd1, 1024;\\n\\tmov.u64 %rd5, 1024;\\n"
    ...           "\\tsub.s64 %rd6, %rd5, %rd4;\\n\\tadd.s64 %rd7, %rd1, %rd6;\\n\\tret;\\n}\\n")
    >>> block = flow_graph(m.function("k")).blocks[0]
    >>> rounding_add(block.instructions, block.heads, 3, frozenset())
    Rounding(x='%rd1', remainder='%rd4', modulus=1024)
    """
    operands = instructions[position].operands
    if heads[position][0] is not None or heads[position][2] != "add" or len(operands) != 3 \
            or any(operand.kind != "register" for operand in operands):
        return None
    for x, difference in ((operands[1].name, operands[2].name), (operands[2].name, operands[1].name)):
        sub_at = _defining(instructions, heads, position, difference, plain)
        if sub_at is None or heads[sub_at][0] is not None or heads[sub_at][2] != "sub":
            continue
        subtracted = instructions[sub_at].operands
        if len(subtracted) != 3 or subtracted[2].kind != "register":
            continue
        remainder = subtracted[2].name
        at = _defining(instructions, heads, sub_at, remainder, plain)
        if at is None or heads[at][0] is not None or not (heads[at][1].startswith("rem.u") or heads[at][2] == "and"):
            continue
        found = instructions[at].operands
        if len(found) != 3 or found[1].kind != "register" or found[1].name != x or found[2].kind != "immediate" \
                or not isinstance(found[2].value, int) or x == remainder \
                or not _unchanged(instructions, heads, at, position, x, plain):
            continue
        modulus = found[2].value + (heads[at][2] == "and")
        if modulus < 2 or modulus & (modulus - 1) \
                or constant_operand(instructions, heads, sub_at, subtracted[1], plain) != modulus:
            continue
        return Rounding(x, remainder, modulus)
    return None


def constant_operand(instructions: Instructions, heads: Heads, position: int, operand: Operand,
                     plain: Container[str] = frozenset()) -> int | None:
    """The value of `operand` at `position`: an immediate, or a register whose last
    definition before `position` in the block moves one into it."""
    if operand.kind == "immediate":
        return operand.value if isinstance(operand.value, int) else None
    at = _defining(instructions, heads, position, operand.name, plain) \
        if operand.kind == "register" and operand.name is not None else None  # a register has a name
    if at is None or heads[at][0] is not None or heads[at][2] != "mov":
        return None
    source = instructions[at].operands[1]
    return source.value if source.kind == "immediate" and isinstance(source.value, int) else None


def _linear(instructions: Instructions, heads: Heads, before: int, register: str, coefficient: int,
            span: tuple[int, int], kept: Container[str], terms: dict[str | None, int], depth: int) -> bool:
    """Add ``coefficient * register`` (as read at `before`) to `terms` as a sum of
    registers (by name) and a constant (key None), expanding the ``add``/``sub``/``mov``
    that define it inside `span` (``(start, stop)`` positions); the registers in `kept`
    and those defined before `start` are not expanded and must keep their value to `stop`."""
    start, stop = span
    at = _defining(instructions, heads, before, register, frozenset())
    if at is not None and at > start and register not in kept and depth < _MAX_DEPTH \
            and heads[at][0] is None and heads[at][2] in ("add", "sub", "mov"):
        parts = _summands(instructions[at].operands, heads[at][2])
        if parts is None:
            return False
        for sign, operand in parts:
            if operand.kind == "immediate" and isinstance(operand.value, int):
                terms[None] = terms.get(None, 0) + sign * coefficient * operand.value
            elif operand.kind != "register" or operand.name is None or not _linear(
                    instructions, heads, at, operand.name, sign * coefficient, span, kept, terms, depth + 1):
                return False
        return True
    if at is not None and at > start and register not in kept or \
            _defining(instructions, heads, stop, register, frozenset()) != at:
        return False  # computed some other way, or changed before the selp reads the sum
    terms[register] = terms.get(register, 0) + coefficient
    return True


# -- sums of registers times constants ---------------------------------------------------------

#: The 32-bit integer types a `linear` expansion goes through (wrap-around aside, the
#: register analysis's sums are the same whatever the spelling).
_WORD_TYPES = frozenset(("s32", "u32", "b32"))
#: The opcodes a `linear` expansion starts from (a ``mov`` is gone through, not started from).
SUM_OPCODES = frozenset(("add", "sub", "mad", "mul", "shl"))
#: How many definitions deep, and how many in all, one `linear` expansion goes.
_LINEAR_DEPTH, _LINEAR_BUDGET = 16, 64


class Linear(Record):
    """``constant + sum(coefficient * register)``: `terms` maps each register (as
    named at the instruction that was expanded) to its coefficient. `crossed` lists the
    definitions expanded from other blocks, each as ``(block read in, block defined in,
    the registers its expansion reads, the register it defines)``: the caller must check
    that those registers hold the same values along every way between the two blocks."""

    terms: dict[str, int]
    constant: int
    crossed: "tuple[Crossing, ...]" = ()
    repeats: bool = True  # some register met more than once (or a coefficient cancelled)


def linear(instructions: Instructions, heads: Heads, position: int, plain: Container[str],
           outside: Outside | None = None, block: int | None = None, defining: Defining | None = None,
           holds: Callable[[int | None, int, Remainder], bool] | None = None,
           remainders: Remainders | None = None) -> Linear | None:
    """The instruction at `position` as a `Linear` sum over the definitions earlier in
    its block (None when it is no sum); `Linear.repeats` says whether that sum names
    some register fewer times than the instruction's own operands and the definitions
    behind them do (a register met twice, or a coefficient that cancels), where the sum
    is tighter than intervals of its parts. `outside(block, register)`, when given,
    may offer a register's one definition in another block, as ``(instructions, heads,
    position, block)``, for a register the block does not define before reading it
    (`block` names the instruction's own block to it). `defining(block, position,
    register)`, when given, answers where the block last defines a register before a
    position (else the block's instructions are scanned). `holds(block, position,
    found)`, when given, says whether a `Remainder` that scales another register's
    quotient holds there (`Remainder.counter`); one that does not is expanded as a sum.
    `remainders(code, position)`, when given, answers what `remainder` finds there (a
    caller that expands many sums keeps them).

    >>> from ptxkit import parse
    >>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...           ".reg .b32 %r<9>;\\n\\tmul.lo.s32 %r3, %r2, 8184;\\n\\tadd.s32 %r4, %r1, %r3;\\n"
    ...           "\\tmad.lo.s32 %r5, %r2, -8184, %r4;\\n\\tret;\\n}\\n")
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> block = flow_graph(m.function("k")).blocks[0]
    >>> linear(block.instructions, block.heads, 2, frozenset())
    Linear(terms={'%r1': 1}, constant=0, crossed=(), repeats=True)
    """
    if heads[position][0] is not None or not _word(heads[position]):
        return None
    expansion = _Expansion(plain, outside, defining, holds, remainders)
    found = expansion.expand((instructions, heads, block), position, position, _LINEAR_DEPTH)
    if found is None:
        return None
    every, constant, _ = found
    terms = {name: coefficient for name, coefficient in every.items() if coefficient}
    return Linear(terms, constant, tuple(expansion.crossed), expansion.counted > len(terms))


def _summands(operands: Sequence[Operand], base: str) -> list[tuple[int, Operand]] | None:
    """``[(coefficient, operand)]`` whose sum an ``add``/``sub``/``mov``/``mul``/``mad``/
    ``shl`` (a constant multiplier or shift) computes; None for anything else.

    >>> from ptxkit import parse_statement
    >>> [(c, o.text) for c, o in _summands(parse_statement("mad.lo.s32 %r3, %r1, -8, %r2;").operands, "mad")]
    [(-8, '%r1'), (1, '%r2')]
    """
    if base in ("add", "sub") and len(operands) == 3:
        return [(1, operands[1]), (-1 if base == "sub" else 1, operands[2])]
    if base == "mov" and len(operands) == 2:
        return [(1, operands[1])]
    if base in ("mul", "mad", "shl") and len(operands) == (4 if base == "mad" else 3):
        factor, other = (operands[2], operands[1]) if operands[2].kind == "immediate" else (operands[1], operands[2])
        if factor.kind != "immediate" or not isinstance(factor.value, int) or \
                (base == "shl" and not 0 <= factor.value < 32):
            return None
        scale = 1 << factor.value if base == "shl" else factor.value
        return [(scale, other)] + ([(1, operands[3])] if base == "mad" else [])
    return None


def _word(head: HeadTuple) -> bool:
    """An integer ``add``/``sub``/``mad.lo``/``mul.lo``/``shl``/``mov`` of 32 bits that
    does not saturate."""
    parts = head[1].split(".")
    return (head[2] in SUM_OPCODES or head[2] == "mov") and parts[-1] in _WORD_TYPES and \
        (head[2] not in ("mad", "mul") or "lo" in parts) and "sat" not in parts


def _after(position: int | None, where: int) -> bool:
    return position is not None and position >= where


class _Expansion:
    """One `linear` expansion: how many register occurrences it met, and what it
    expanded from other blocks."""

    def __init__(self, plain: Container[str], outside: Outside | None, defining: Defining | None,
                 holds: Callable[[int | None, int, Remainder], bool] | None = None,
                 remainders: Remainders | None = None) -> None:
        self.outside, self.holds = outside, holds
        self.defining: Defining = defining or (lambda code, at, register: _defining(code[0], code[1], at, register,
                                                                                    plain))
        self.remainders: Remainders = remainders or (lambda code, at: remainder(code[0], code[1], at, plain))
        self.counted = 0
        self.crossed: list[Crossing] = []
        self.budget = _LINEAR_BUDGET

    def expand(self, code: Code, at: int, top: int, depth: int) -> Expanded | None:
        """``(terms, constant, registers read)`` of the instruction at `at` of `code`
        (``(instructions, heads, block)``); its register operands are expanded further
        when defined earlier in the block by such an instruction whose own registers
        nothing redefines before `top`, or (through `outside`) in another block. None
        when it is not a sum."""
        parts = _summands(code[0][at].operands, code[1][at][2])
        if parts is None:
            return None
        terms: dict[str, int] = {}
        constant = 0
        read: set[str] = set()
        for coefficient, operand in parts:
            if operand.kind == "immediate" and isinstance(operand.value, int):
                constant += coefficient * operand.value
                continue
            if operand.kind != "register" or operand.name is None:  # (a register has a name)
                return None
            inner = self._inner(code, at, top, operand.name, depth)
            if inner is None:
                self.counted += 1
                terms[operand.name] = terms.get(operand.name, 0) + coefficient
                read.add(operand.name)
                continue
            for name, value in inner[0].items():
                terms[name] = terms.get(name, 0) + coefficient * value
            constant += coefficient * inner[1]
            read |= inner[2]
        return terms, constant, read

    def _inner(self, code: Code, at: int, top: int, register: str, depth: int) -> Expanded | None:
        """The expansion of `register` as the instruction at `at` reads it, or None to
        keep it as it is."""
        if depth <= 0 or self.budget <= 0:
            return None
        self.budget -= 1
        block = code[2]
        where = self.defining(code, at, register)
        if where is None:
            offered = self.outside(block, register) if self.outside is not None else None
            if offered is None:
                return None
            there = offered[:2] + offered[3:]
            return self._from(there, offered[2], len(offered[0]), depth,
                              lambda read: self.crossed.append((block, offered[3], frozenset(read), register)))
        return self._from(code, where, top, depth, None)

    def _from(self, code: Code, where: int, top: int, depth: int,
              crossing: Callable[[set[str]], None] | None) -> Expanded | None:
        heads = code[1]
        if heads[where][0] is not None or not _word(heads[where]):
            return None
        idiom = self.remainders(code, where)
        if idiom is not None and (idiom.counter is None or self.holds is None or self.holds(code[2], where, idiom)):
            return None  # a remainder: its own range is tighter than any sum of what it reads
        counted, crossed = self.counted, len(self.crossed)
        self.counted = 0
        found = self.expand(code, where, top, depth - 1)
        if found is None or any(_after(self.defining(code, top, name), where) for name in found[2]):
            self.counted = counted  # one of its registers holds another value at `top` than where it was read
            del self.crossed[crossed:]
            return None
        self.counted += counted
        if crossing is not None:
            crossing(found[2])
        return found


def _registers(terms: dict[str | None, int]) -> dict[str, int]:
    """The registers' coefficients of a sum `_linear` made (its constant left out)."""
    return {name: coefficient for name, coefficient in terms.items() if name is not None}
