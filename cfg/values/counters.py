"""Counter idioms in the register analysis: values that move together (docs/fence.md §3.1).

A stage index and the count of stages it wraps, a term set from a counter's start, a
remainder computed again after its test, an address rounded up past a header: intervals
alone lose how these relate and widen a ring of stages onto its neighbours. These functions
recognise them for the register analysis (`ptxkit.cfg.values.registers`), which they are
handed as an argument and read through protocols (`ptxkit.cfg.values.protocols`: `Counting` as they make an
instruction's rule, `Solving` as the rule runs); the analysis's tests show each on kernels written for them (``tests/test_registers.py``,
``tests/test_counters.py``). A ring of two 512-byte stages stepped by ``x += x < 512 ?
512 : -512`` stays in ``[0, 1023]`` (`selected_step`), where intervals would
let it grow round after round:

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> from ptxkit.cfg.values.registers import register_values
>>> from ptxkit.cfg.values.values import show
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k(.param .u32 n)\\n{\\n"
...     ".reg .b32 %r<5>;\\n.reg .pred %p<3>;\\n\\tld.param.u32 %r4, [n];\\n\\tmov.u32 %r1, 0;\\nL:\\n"
...     "\\tsetp.lt.u32 %p1, %r1, 512;\\n\\tselp.b32 %r2, 512, -512, %p1;\\n\\tadd.s32 %r1, %r1, %r2;\\n"
...     "\\tsetp.lt.u32 %p2, %r1, %r4;\\n\\t@%p2 bra L;\\n\\tmov.u32 %r3, %r1;\\n\\tret;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> copy = flow.blocks[2].instructions[0]
>>> show(register_values(flow, {"x": (2, 0, copy.operands[1])})["x"])
'[0, 1023]'
"""

from __future__ import annotations

import functools

from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.flow.operands import operand_reads, register_and_constant, type_width
from ptxkit.cfg.flow.ssa import version_name
from ptxkit.cfg.values.arithmetic import compared_as, cvt_reading, rounded_up_to
from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.values.conditions import blocks_on_ways, only_site, paired_setp, register_name, unwritten_between
from ptxkit.cfg.values.idioms import align_up, constant_operand, linear
from ptxkit.cfg.values.values import (
    INF, NUM, TOP, add, constant, field, join, mul, number, refine, refine_by, shl, unpack,
)
from ptxkit.isa import INTEGER_TYPES, PURE_OPCODES, SWAPPED_COMPARISONS

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ptxkit.cfg.flow.graph import FlowGraph, HeadTuple
    from ptxkit.cfg.values.conditions import Point, Site
    from ptxkit.cfg.values.idioms import AlignUp, Code as IdiomCode, Linear, Remainder, Rounding
    from ptxkit.cfg.values.protocols import Counting, Solving
    from ptxkit.cfg.values.values import Value
    from ptxkit.instruction import Operand
    from ptxkit.syntax import Instruction

    #: What an instruction computes, handed the analysis and where it runs: a value per target.
    Compute = Callable[[Solving, Point], list[Value]]
    #: A rule refined by an idiom, and the keys the refinement reads besides the instruction's.
    Refined = tuple[Compute, list[str]]
    #: ``(start, step, mov site, add site)`` of a counter (`_counter`; start None: any).
    Counter = tuple[int | None, int, Site, Site]
    #: How `x - s * z` is found (`_lockstep`): the version whose value it starts from (or
    #: None: 0), a constant added, and the keys the sum reads.
    Origin = tuple[Callable[[Solving], str | None], int, list[str]]
    #: ``(s, origin)`` of a counter kept s times beside another (`_lockstep`).
    Lockstep = tuple[int, Origin]


def _copy_of(instruction: Instruction, head: HeadTuple, z: str) -> bool:
    """True for an unguarded ``mov`` of register `z`, or an integer ``cvt`` of it to as
    many bits or fewer that does not saturate: either keeps z modulo the width of a sum
    that reads it."""
    operands = instruction.operands
    if head[0] is not None or len(operands) != 2 or operands[1].kind != "register" or operands[1].name != z:
        return False
    if head[2] == "mov":
        return True
    modifiers = head[1].split(".")[1:]
    types = [m for m in modifiers if m in INTEGER_TYPES]
    return head[2] == "cvt" and cvt_reading(modifiers) is not None and "sat" not in modifiers \
        and INTEGER_TYPES[types[0]] <= INTEGER_TYPES[types[1]]


#: Opcodes whose result depends on their operands alone (`ptxkit.isa.PURE_OPCODES`): computed
#: twice from registers unchanged in between, they give the same value, which
#: `twin_of` finds; arithmetic only (a copy's value is its source's already).
RECOMPUTED = PURE_OPCODES - {"mov", "setp", "bfe"}


def _computation_key(prefix: str, instruction: Instruction, head: HeadTuple) -> tuple[str, str, str] | None:
    """What an instruction with one register target computes, whatever register it puts
    it in (its opcode and the text of what it reads), or None."""
    text = instruction.text
    comma = text.find(",")
    if comma < 0 or "{" in text[:comma] or "|" in text[:comma]:
        return None
    return prefix, head[1], text[comma + 1:].strip()


def _computations(flow: FlowGraph) -> dict[Site, list[Site]]:
    """``(block, position)`` -> the sites of every unguarded instruction of a
    `RECOMPUTED` opcode that computes the same as the one there (`_computation_key`),
    for the instructions that have such others."""
    found: dict[tuple[str, str, str], list[Site]] = {}
    for block in flow.blocks:
        prefix = block.context.prefix if block.context is not None else ""
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            if head[0] is None and head[2] in RECOMPUTED:
                key = _computation_key(prefix, instruction, head)
                if key is not None:
                    found.setdefault(key, []).append((block.index, position))
    return {site: sites for sites in found.values() if len(sites) > 1 for site in sites}


#: A graph's `_computations`.
COMPUTATIONS: Fact[dict[Site, list[Site]]] = Fact("computations", _computations)


def linear_sum(analysis: Counting, block: int, position: int, plain: frozenset[str]) -> Linear | None:
    """`ptxkit.cfg.values.idioms.linear` of the instruction at (block, position), also through
    a register's one definition in a block that dominates where it is read, when no
    register that definition reads is written on any way between the two blocks. (The
    callbacks handed to `linear` read `analysis` during the call; the sum keeps none.)"""
    blocks = analysis.flow.blocks
    instructions, heads, context = blocks[block].instructions, blocks[block].heads, blocks[block].context

    def defining(code: IdiomCode, at: int, register: str) -> int | None:
        return None if code[2] is None else analysis.last_definition(code[2], at, register)

    declined: set[str] = set()  # registers whose definition elsewhere reads one set on the way

    # (no callback here calls another: compiled, a nested function that names a sibling
    # keeps itself in their shared environment, a cycle only the collector frees)
    def offer(reading: int | None, register: str) -> tuple[list[Instruction], list[HeadTuple], int, int] | None:
        if register in declined or reading is None:  # linear is handed `block`, so it names one
            return None
        site = _dominating_site(analysis, reading, register) if blocks[reading].context is context else None
        if site is None:
            return None
        there, at = site
        return blocks[there].instructions, blocks[there].heads, at, there

    def alike(reading: int | None, at: int, found: Remainder) -> bool:
        return reading is not None and counts_alike(analysis, reading, at, found)

    def remainders(code: IdiomCode, at: int) -> Remainder | None:
        return None if code[2] is None else analysis.remainder_at(code[2], at)

    for _ in range(3):
        found = linear(instructions, heads, position, plain, offer, block, defining, alike, remainders)
        bad = {register for reading, there, read, register in (found.crossed if found is not None else ())
               if reading is None or not unwritten_between(analysis, there, reading, read)}
        if not bad:
            return found
        declined |= bad
    return linear(instructions, heads, position, plain, None, block, defining, alike, remainders)


def counter_remainder(analysis: Counting, block: int, position: int, found: Linear) -> Refined | None:
    """``(compute, sources)`` for a sum ``a * x - b * q + ...`` where ``q = z / D`` and
    ``x`` is a counter kept beside ``z`` (each set once before the loop, ``z`` to a
    constant ``c``, and advanced together in one block, ``x`` by ``s`` times ``z``'s
    step) with ``b = a * s * D``: then ``x - s * z`` keeps the value ``v`` it had when set,
    and the sum is ``a * v + a * s * (z mod D) + ...`` (nvcc's unrolled loop over a ring
    of three stages: ``x`` advances by four stages' bytes while ``z`` counts stages,
    CUTLASS 93); None otherwise. `v` is read from the version of ``x`` its setting
    defines (`version_name`). `found`: the instruction at (block, position) as a
    `ptxkit.cfg.values.idioms.Linear` sum."""
    if len(found.terms) < 2:
        return None
    prefix = analysis.prefix(block)
    for q, q_coefficient in found.terms.items():
        site = only_site(analysis, prefix, q)
        if site is None:
            continue
        division = analysis.quotient_at(site[0], site[1] + 1, q)
        if division is None or not _kept_between(analysis, prefix + division[0], site, (block, position)):
            continue
        z, divides = division
        for x, coefficient in found.terms.items():
            pair = None if x == q else _lockstep(analysis, prefix, x, z, (block, position))
            dropped: tuple[str, ...] = (q, x)
            if pair is None and x != q:
                pair, partner = _lockstep_with_partner(analysis, prefix, x, z, found.terms, coefficient,
                                                       (block, position))
                if partner is not None:
                    dropped = (q, x, partner)
            if pair is None:
                continue
            scale, origin = pair
            step = coefficient * scale  # a * s: the sum's step per stage
            if step and -q_coefficient % step == 0 and divides(-q_coefficient // step):
                last = step * (-q_coefficient // step - 1)  # a * s * (D - 1)
                ring = number(min(0, last), max(0, last), abs(step))
                return _counter_remainder_range(analysis, block, found, dropped, origin, ring, coefficient)
    return None


def _counter_remainder_range(analysis: Counting, block: int, found: Linear, dropped: tuple[str, ...], origin: Origin,
                             ring: Value, coefficient: int) -> Refined:
    """The compute of `counter_remainder`: `ring` (``a * s * (z mod D)``) plus `coefficient`
    times the `origin` ``x - s * z`` (`_lockstep`: a version's value plus a constant),
    plus the terms not `dropped`."""
    prefix = analysis.prefix(block)
    version_of, shift, read = origin
    terms = tuple((prefix + name, c) for name, c in found.terms.items() if name not in dropped)
    base = add(number(found.constant), ring)
    summed = functools.partial(_counter_remainder_sum, version_of, shift, base, coefficient, terms)
    return summed, read + [key for key, _ in terms]


def _counter_remainder_sum(version_of: Callable[[Solving], str | None], shift: int, base: Value, coefficient: int,
                           terms: tuple[tuple[str, int], ...], a: Solving, at: Point) -> list[Value]:
    """`_counter_remainder_range`'s computation (a partial of it, where a closure would make
    a reference cycle once compiled: docs/architecture.md §5)."""
    version = version_of(a)
    start = a.values.get(version) if version is not None else number(0)
    if not start:
        return [()]  # not evaluated yet
    kept = add(start, number(shift)) if shift else start  # x0 - s * z0
    total = add(base, kept if coefficient == 1 else mul(kept, number(coefficient)))
    for key, c in terms:
        value = a.lookup(at, key)
        if not value:
            return [()]
        total = add(total, value if c == 1 else mul(value, number(c)))
    return [total]


def _lockstep(analysis: Counting, prefix: str, x: str, z: str, reading: Site) -> Lockstep | None:
    """``(s, origin)`` when registers `x` and `z` are each set twice, once by an add
    ``r, r, step`` in one block (`x`'s step `s` times `z`'s), and once before: `z` to
    the constant `c` and `x` to anything, or `z` to anything and `x` to ``s * z + b``
    (``add x, (z << k), b`` with ``2**k = s``). That earlier pair must run as one: the
    first setting dominates the second and no way between them passes the adds. Then
    where the second setting dominates `reading` (block, position), and `reading` is
    not between the two adds, ``x - s * z`` is what it was when they were set: x's
    first value less ``s * c``, or b's value where x was set. `origin` is
    ``(version of that value, constant added, keys the slice needs)``."""
    x_counter = _counter(analysis, prefix, x, any_start=True)
    if x_counter is None:
        return None
    z_counter = _counter(analysis, prefix, z)
    paired = _paired_lockstep(analysis, prefix, x, x_counter, z_counter, reading) if z_counter is not None else None
    return paired if paired is not None else _scaled_lockstep(analysis, prefix, x, z, x_counter, reading)


def _paired_lockstep(analysis: Counting, prefix: str, x: str, x_counter: Counter, z_counter: Counter,
                     reading: Site) -> Lockstep | None:
    """`_lockstep` where z is set to a constant: the two settings must run as one."""
    if z_counter[0] is None or not z_counter[1] or x_counter[1] % z_counter[1]:
        return None
    (x_set, x_add), (z_set, z_add) = x_counter[2:], z_counter[2:]
    if x_add[0] != z_add[0] or x_add[0] == reading[0] and \
            min(x_add[1], z_add[1]) < reading[1] < max(x_add[1], z_add[1]) + 1:
        return None  # read between the two adds
    dominators = DominatorTree.of(analysis.flow)
    if x_set[0] == z_set[0]:
        first, second = sorted((x_set, z_set), key=lambda site: site[1])
    elif dominators.dominates(x_set[0], z_set[0]) or dominators.dominates(z_set[0], x_set[0]):
        first, second = (x_set, z_set) if dominators.dominates(x_set[0], z_set[0]) else (z_set, x_set)
    else:
        return None
    if x_add[0] in (first[0], second[0]) or \
            first[0] != second[0] and blocks_on_ways(analysis, first[0], second[0]) >> x_add[0] & 1:
        return None  # the settings do not run as one
    if not (dominators.dominates(second[0], reading[0]) if second[0] != reading[0] else second[1] < reading[1]):
        return None
    scale, x_key = x_counter[1] // z_counter[1], prefix + x
    version = version_name(x_key, *x_set)
    return scale, (lambda a: a.defs.get((x_set, x_key), version), -scale * z_counter[0], [x_key, version])


def _scaled_lockstep(analysis: Counting, prefix: str, x: str, z: str, x_counter: Counter,
                     reading: Site) -> Lockstep | None:
    """`_lockstep` where x is set to ``s * z + b + C`` (``add x, (z << k), b``, ``2**k =
    s``; or no b) and z before the loop in any way (at a join: nvcc's remainder loop
    after an unrolled one), or to a constant once outside a loop around x's setting (Triton's
    persistent loop sets x from the stage count z each tile, while z counts on across
    tiles): ``x - s * z`` is b where x was set, as long as z changes on the way from
    there to `reading` only by its add, in the block of x's add (CUTLASS 93's K/V
    producer: ``x - 49152 * (z / 3)`` with x advancing 16384 per stage)."""
    advance = _advance_of(analysis, prefix, z, x_counter, reading)
    if advance is None:
        return None
    scale, z_add = advance
    x_set = x_counter[2]
    found = _scaled_from(analysis, x_set, z, scale)
    if found is None or not _z_kept(analysis, prefix, z, z_add, x_set, found[1], reading):
        return None
    b, _, added, b_site = found
    x_key = prefix + x
    if b is None:  # x = (z << k) + C
        return scale, (lambda a: None, added, [x_key])
    b_key = prefix + b  # x's setting is followed, so b's version where it is read is known
    return scale, (lambda a: a.uses.get((b_site, b_key), b_key), added, [x_key, b_key])


def _lockstep_with_partner(analysis: Counting, prefix: str, x: str, z: str, terms: Mapping[str, int], coefficient: int,
                           reading: Site) -> tuple[Lockstep, str] | tuple[None, None]:
    """``((s, origin), t)`` where z starts anywhere, x beside it starts at any value x0,
    and another term t of the sum, with x's coefficient, is set once to ``(z << k) + c``
    (``2**k = s``) from z's start, in the block that sets x: ``t + x - s * z`` is ``x0 +
    c`` (CUTLASS 93's mbarrier of a stage, ``((z0 << 3) + c) + x - 24 * (z / 3)``, x
    counting 8 per stage from the barriers' base). A term t copied from z there
    (`_copy_of`) with ``s`` times x's coefficient is the same with c = 0 (Triton's
    persistent loop, whose sum went through the shift); ``(None, None)`` otherwise."""
    x_counter = _counter(analysis, prefix, x, any_start=True)
    if x_counter is None:
        return None, None
    advance = _advance_of(analysis, prefix, z, x_counter, reading)
    if advance is None:
        return None, None
    scale, z_add = advance
    x_set = x_counter[2]
    for t, t_coefficient in terms.items():
        site = only_site(analysis, prefix, t) if t not in (x, z) else None
        if site is None or site[0] != x_set[0]:
            continue
        if t_coefficient == coefficient:
            found = _scaled_from(analysis, site, z, scale)
            if found is None or found[0] is not None:
                continue
            _, read_at, added, _ = found
        elif t_coefficient == coefficient * scale and _copy_of(analysis.flow.blocks[site[0]].instructions[site[1]],
                                                               analysis.flow.blocks[site[0]].heads[site[1]], z):
            read_at, added = site[1], 0  # the sum's expansion went through the shift: s * t
        else:
            continue
        if analysis.redefined(site[0], min(read_at, x_set[1]) + 1, max(read_at, x_set[1]), z) \
                or not _z_kept(analysis, prefix, z, z_add, x_set, min(read_at, x_set[1]), reading):
            continue
        x_key = prefix + x
        version = version_name(x_key, *x_set)
        return (scale, (lambda a: a.defs.get((x_set, x_key), version), added, [x_key, version, prefix + t])), t
    return None, None


def _advance_of(analysis: Counting, prefix: str, z: str, x_counter: Counter, reading: Site) -> tuple[int, Site] | None:
    """``(s, z's add site)`` where z's one advance ``add z, z, step`` is in the block of
    x's (`x_counter`), x's step is ``s`` times z's, and `reading` is not between the two."""
    z_sites = analysis.definitions().get(prefix + z, ())
    advances = [site for site in z_sites if _advance_step(analysis, site, z) is not None]
    _, x_step, _, x_add = x_counter
    if len(advances) != 1 or advances[0][0] != x_add[0]:
        return None
    z_add = advances[0]
    z_step = _advance_step(analysis, z_add, z)
    if not z_step or x_step % z_step or x_add[0] == reading[0] and \
            min(x_add[1], z_add[1]) < reading[1] < max(x_add[1], z_add[1]) + 1:
        return None
    return x_step // z_step, z_add


def _z_kept(analysis: Counting, prefix: str, z: str, z_add: Site, setting: Site, read_at: int, reading: Site) -> bool:
    """True when `setting` (block, position) dominates `reading` and nothing but the
    advance at `z_add` sets z after `read_at` in the setting's block or on the way
    from there to `reading`."""
    block = setting[0]
    if not (DominatorTree.of(analysis.flow).dominates(block, reading[0]) if block != reading[0]
            else setting[1] < reading[1]):
        return False
    between = blocks_on_ways(analysis, block, reading[0]) if block != reading[0] else 0
    return not any(site != z_add and (between >> site[0] & 1 or site[0] == block and site[1] > read_at)
                   for site in analysis.definitions().get(prefix + z, ()))


def _advance_step(analysis: Counting, site: Site, name: str) -> int | None:
    """The constant of an unguarded ``add name, name, step`` at `site`, else None."""
    head, args = analysis.flow.blocks[site[0]].heads[site[1]], analysis.flow.blocks[site[0]].instructions[site[1]].operands
    found = register_and_constant(args) if head[0] is None and head[2] == "add" else None
    return found[1] if found is not None and found[0] == name else None


def _scaled_from(analysis: Counting, setting: Site, z: str, scale: int) -> tuple[str | None, int, int, Site | None] | None:
    """``(b, where z is read, C, where b is read)`` where the instruction at `setting`
    sets x to ``(z << k) + b + C`` (``2**k = scale``): ``add x, a, b`` with ``a = z << k``
    set earlier in its block, or ``add x, y, C`` of such a y (z, and each register
    between, not set again before `setting`; b another register), or to ``(z << k) +
    C`` (b and its site None)."""
    block, at = setting
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    added = 0
    operands = instructions[at].operands
    if heads[at][0] is not None:
        return None  # a guarded setting may leave an older value
    while heads[at][2] == "add" and register_and_constant(operands) is not None:
        inner = analysis.last_definition(block, at, operands[1].name)
        if inner is None or heads[inner][0] is not None:
            return None
        added += operands[2].value
        at, operands = inner, instructions[inner].operands
    if _shifts(analysis, block, at, z, scale) and not analysis.redefined(block, at + 1, setting[1], z):
        return None, at, added, None  # (z << k) + C, no register b
    if heads[at][2] != "add" or len(operands) != 3 or any(o.kind != "register" for o in operands[1:]):
        return None
    if any(analysis.redefined(block, at + 1, setting[1], o.name) for o in operands[1:]):
        return None
    for a, b in ((operands[1], operands[2]), (operands[2], operands[1])):
        a_at = analysis.last_definition(block, at, a.name)
        if a_at is None or not _shifts(analysis, block, a_at, z, scale) \
                or b.name in (z, operands[0].name) or analysis.redefined(block, a_at + 1, setting[1], z):
            continue
        return b.name, a_at, added, (block, at)
    return None


def _shifts(analysis: Counting, block: int, at: int, z: str, scale: int) -> bool:
    """True for an unguarded ``shl r, z, k`` at `at` with ``2**k = scale``, or a shift of
    ``w = cvt z`` set just before in the block (an integer ``cvt`` keeps z modulo the
    narrower width, which is all a sum of that width reads: Triton's 64-bit stage count
    shifted as 32 bits)."""
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    head, found = heads[at], register_and_constant(instructions[at].operands)
    if head[0] is not None or head[2] != "shl" or found is None or 1 << found[1] != scale:
        return False
    shifted = found[0]
    if shifted == z:
        return True
    inner = analysis.last_definition(block, at, shifted)
    return inner is not None and _copy_of(instructions[inner], heads[inner], z) \
        and not analysis.redefined(block, inner + 1, at, z)


def _kept_between(analysis: Counting, key: str, site: Site, reading: Site) -> bool:
    """True when `key` is not set after `site` (block, position) and before `reading`:
    both in one block with nothing setting it between them, or `site`'s block
    dominating `reading`'s with nothing setting it on the way."""
    sites = analysis.definitions().get(key, ())
    (there, at), (block, position) = site, reading
    if there == block:
        return at < position and not any(b == block and at < p < position for b, p in sites)
    return DominatorTree.of(analysis.flow).dominates(there, block) and \
        not any(b == there and p > at or b == block and p < position for b, p in sites) and \
        unwritten_between(analysis, there, block, [key[len(analysis.prefix(block)):]], position)


def linear_range(analysis: Counting, block: int, found: Linear) -> Compute:
    """The value of a `ptxkit.cfg.values.idioms.Linear` sum, each register read once where
    the instruction is (nothing redefines them in between, `linear` checked)."""
    prefix = analysis.prefix(block)
    terms = [(prefix + name, coefficient) for name, coefficient in found.terms.items()]
    constant = number(found.constant)

    def summed(a: Solving, at: Point) -> list[Value]:
        total = constant
        for key, coefficient in terms:
            value = a.lookup(at, key)
            if not value:
                return [()]  # not evaluated yet
            total = add(total, value if coefficient == 1 else mul(value, number(coefficient)))
        return [total]

    return summed


def remainder_range(analysis: Counting, block: int, found: Remainder, wrapped: bool = False) -> Compute:
    """The range of a recognised remainder idiom (`ptxkit.cfg.values.idioms`); `wrapped`:
    up to a multiple of the mask's limit, which a following shift discards."""
    x_key = analysis.prefix(block) + found.x
    if found.kind == "division":
        top = found.scale * (found.modulus - 1)
        if not found.signed:
            return lambda a, at: [number(0, top, found.scale)]

        def truncated(a: Solving, at: Point) -> list[Value]:  # the remainder has the sign of x (or of the counter x scales)
            x = a.lookup(at, x_key)
            if not x:
                return [()]  # not evaluated yet
            low = 0 if all(atom.form == NUM and 0 <= atom.lo and atom.hi < 1 << 31 for atom in x) else -top
            return [number(low, top, found.scale)]

        return truncated

    biased = found.bias

    def aligned(a: Solving, at: Point) -> list[Value]:
        bias = a.evaluate(block, biased, at) if biased is not None else number(0)
        x = a.lookup(at, x_key)
        if not bias or not x:
            return [()]  # not evaluated yet
        if len(bias) != 1 or bias[0].form != 0 or bias[0].hi >= INF or bias[0].lo <= -INF:
            return [TOP]
        if found.limit is not None and not wrapped:
            z = add(x, bias)
            if len(z) != 1 or z[0].form != 0 or z[0].lo < 0 or z[0].hi >= found.limit:
                return [TOP]
        return [number(-bias[0].hi, found.modulus - 1 - bias[0].lo)]

    return aligned


def counts_alike(analysis: Counting, block: int, position: int, found: Remainder) -> bool:
    """Whether register ``found.x`` holds ``found.scale`` times ``found.counter`` where
    the instruction at `position` reads them: each is set twice, by a ``mov`` of a
    constant and by an ``add`` of a constant, the two movs in one block and the two
    adds in one block (so they run together), the constants in that ratio, and the
    reads not between the two adds or the two movs."""
    prefix = analysis.prefix(block)
    x_counter = _counter(analysis, prefix, found.x)
    z_counter = _counter(analysis, prefix, found.counter) if found.counter is not None else None
    if x_counter is None or z_counter is None:
        return False
    (start_x, step_x, init_x, add_x), (start_z, step_z, init_z, add_z) = x_counter, z_counter
    if start_x is None or start_z is None:
        return False  # not kept: no counter but one of `any_start` has no start
    mask = (1 << 64) - 1
    if (start_x - found.scale * start_z) & mask or (step_x - found.scale * step_z) & mask:
        return False
    for first, second in ((init_x, init_z), (add_x, add_z)):
        if first[0] != second[0]:
            return False
        if first[0] == block and min(first[1], second[1]) < position < max(first[1], second[1]) + 1:
            return False  # the reads may fall between the two
    return True


def _counter(analysis: Counting, prefix: str, name: str, any_start: bool = False) -> Counter | None:
    """``(start, step, mov site, add site)`` of a register set once by a ``mov`` of a
    constant (or of a register just set to one) and once by ``add r, r, step``; with
    `any_start`, set by any unguarded instruction instead of the ``mov`` (start None)."""
    sites = analysis.definitions().get(prefix + name, [])
    if len(sites) != 2:
        return None
    start: int | None = None
    step: int | None = None
    init: Site | None = None
    increment: Site | None = None
    for site in sites:
        instructions, heads = analysis.flow.blocks[site[0]].instructions, analysis.flow.blocks[site[0]].heads
        head, args = heads[site[1]], instructions[site[1]].operands
        if head[0] is not None or len(args) < 2:
            return None
        advance = _advance_step(analysis, site, name)
        if advance is not None:
            step, increment = advance, site
        elif head[2] == "mov":
            start, init = constant_operand(instructions, heads, site[1], args[1]), site
        elif any_start:
            init = site
    if init is None or start is None and not any_start or step is None or increment is None:
        return None  # (the add sets both `step` and `increment`)
    return start, step, init, increment


def slice_offset(analysis: Counting, block: int, operands: Sequence[Operand], otherwise: Compute) -> Compute | None:
    """``mul d, q, r`` where ``q = C / y`` and ``r = x % y`` (each register set once,
    `y` the same register): ``q * r <= (C / y) * (y - 1) <= C`` for every ``y >= 1`` and
    ``x >= 0``, so d is in ``[0, C]`` where the values say so (CUTLASS's per-rank slice
    of a multicast box, ``(16384 / cluster_dim) * (rank % cluster_dim)``); else what
    `otherwise` computes."""
    prefix = analysis.prefix(block)
    quotient, divisor = (_single_definition(analysis, prefix, operand) for operand in operands[1:])
    if quotient is None or divisor is None:
        return None
    if quotient[0] != "div":
        quotient, divisor = divisor, quotient
    divided = _remainder_divisor(analysis, prefix, divisor)
    bound = quotient[1][1].value
    if quotient[0] != "div" or divided is None or quotient[1][2].kind != "register" \
            or quotient[1][2].name != divided[0] or quotient[1][1].kind != "immediate" or not isinstance(bound, int) \
            or bound < 0 or len(analysis.definitions().get(prefix + divided[0], ())) > 1:
        return None
    y, x = prefix + divided[0], prefix + divided[1]

    def compute(a: Solving, at: Point) -> list[Value]:
        divisor, dividend = a.lookup(at, y), a.lookup(at, x)  # y >= 1, x >= 0: r in [0, y - 1]
        if divisor and dividend and all(atom.form == 0 and atom.lo >= 1 for atom in divisor) \
                and all(atom.form == 0 and atom.lo >= 0 for atom in dividend):
            return [number(0, bound)]
        return otherwise(a, at)

    return compute


def _single_definition(analysis: Counting, prefix: str, operand: Operand) -> tuple[str, Sequence[Operand]] | None:
    """``(base opcode, operands)`` of the one unguarded definition of a register
    operand in the same inlined copy, else None."""
    site = only_site(analysis, prefix, register_name(operand)) if operand.kind == "register" else None
    if site is None:
        return None
    head = analysis.flow.blocks[site[0]].heads[site[1]]
    args = analysis.flow.blocks[site[0]].instructions[site[1]].operands
    return (head[2], args) if head[0] is None and len(args) == 3 else None


def _remainder_divisor(analysis: Counting, prefix: str,
                       definition: tuple[str, Sequence[Operand]]) -> tuple[str, str] | None:
    """The registers ``(y, x)`` of a remainder ``x % y``: ``rem r, x, y``, or ``sub r,
    x, t`` with ``t = (x / y) * y`` (nvcc's form); else None."""
    base, args = definition
    if base == "rem":
        return (register_name(args[2]), register_name(args[1])) if args[2].kind == args[1].kind == "register" else None
    if base != "sub" or args[1].kind != "register":
        return None
    product = _single_definition(analysis, prefix, args[2])
    if product is None or product[0] != "mul":
        return None
    for a, b in (product[1][1:], product[1][2:0:-1]):
        division = _single_definition(analysis, prefix, a)
        if b.kind == "register" and division is not None and division[0] == "div" \
                and division[1][1].name == args[1].name and division[1][2].name == b.name:
            return register_name(b), register_name(args[1])
    return None


def shifted_remainder(analysis: Counting, block: int, position: int, operands: Sequence[Operand],
                      modifiers: list[str]) -> Refined | None:
    """``shl d, r, k`` of a remainder ``x - ((x + c) & m)`` whose mask keeps bits only
    below a limit L (`ptxkit.cfg.values.idioms`): r is the remainder plus a multiple of L, and
    when ``L << k`` wraps to 0 in the register the multiple is gone, so d is the
    remainder shifted, whatever x is (nvcc's ``(k % 2) * stage_bytes`` for a signed k)."""
    if len(operands) != 3 or operands[1].kind != "register" or operands[2].kind != "immediate" \
            or not isinstance(operands[2].value, int):
        return None
    count, width = operands[2].value, type_width(modifiers)
    found = _wrapped_remainder(analysis, block, position, register_name(operands[1]),
                               lambda limit: (limit << count) % (1 << width) == 0)
    if found is None:
        return None
    value, sources = found
    return (lambda a, at: [shl(value(a, at)[0], number(count))]), sources


def narrowed_remainder(analysis: Counting, block: int, position: int, operands: Sequence[Operand],
                       modifiers: list[str]) -> Refined | None:
    """``cvt`` of such a remainder to fewer bits, or from a narrower type (nvcc's
    ``cvt.s16.s8`` of a 16-bit ``k % 2``): it reads only the low bits of r, where a
    multiple of L is gone when L is a multiple of their range, so d is the remainder
    as the ``cvt`` reads it."""
    reading = cvt_reading(modifiers)
    if reading is None or len(operands) != 2 or operands[1].kind != "register":
        return None
    kept, extend = reading
    found = _wrapped_remainder(analysis, block, position, register_name(operands[1]),
                               lambda limit: limit % (1 << kept) == 0)
    if found is None:
        return None
    value, sources = found
    return (lambda a, at: [extend(value(a, at)[0])]), sources


def shifted_field(analysis: Counting, block: int, position: int, operands: Sequence[Operand], modifiers: list[str],
                  otherwise: Compute) -> Refined | None:
    """``and d, r, M`` with `M` one run of ones, bits ``[p, p + n)``, of ``r = x >> k``
    or ``r = x << k`` (k <= p) set earlier in the block (k a constant, x not set again
    in between): d is bits ``[p + k, p + k + n)`` or ``[p - k, p - k + n)`` of x
    (`ptxkit.cfg.values.values.field`) moved up to bit p. So a descriptor's start field taken
    from a generic shared address is its window address's (ThunderKittens'
    ``tcgen05.cp`` source), and bits 7-9 of a stage address moved into a descriptor's
    base-offset field by ``(a << 42) & (7 << 49)`` are known (FlashInfer's fmha_v2).
    A field moved up that is still an address (bits of the start field) is what
    `otherwise` computes."""
    mask = register_and_constant(operands)
    if mask is None or mask[1] <= 0:
        return None
    low = (mask[1] & -mask[1]).bit_length() - 1
    ones = mask[1] >> low
    if ones & (ones + 1):
        return None
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    at = analysis.last_definition(block, position, mask[0])
    if at is None or heads[at][0] is not None or not heads[at][1].startswith(("shr.u", "shr.b", "shl.")):
        return None
    shift = register_and_constant(instructions[at].operands)
    if shift is None or analysis.redefined(block, at + 1, position, shift[0]):
        return None
    source, count = instructions[at].operands[1], shift[1] if heads[at][2] == "shr" else -shift[1]
    length, width = ones.bit_length(), type_width(modifiers)
    if low + count < 0 or low + length > width:
        return None
    sources = [analysis.prefix(block) + source.name]
    if low == 0:
        return (lambda a, at: [field(a.evaluate(block, source, at), count, length, width)]), sources

    def moved_up(a: Solving, at: Point) -> list[Value]:
        bits = field(a.evaluate(block, source, at), low + count, length, width)
        return otherwise(a, at) if any(atom.is_address for atom in bits) else [shl(bits, number(low))]

    return moved_up, sources


def _wrapped_remainder(analysis: Counting, block: int, position: int, register: str,
                       vanishes: Callable[[int], bool]) -> Refined | None:
    """``(compute, sources)`` of an alignment remainder last defined in `block` before
    `position` into `register`, up to a multiple of its mask's limit, where
    `vanishes(limit)` says the reader drops such multiples; None otherwise."""
    heads = analysis.flow.blocks[block].heads
    plain = analysis.plain(block)
    at = analysis.last_definition(block, position, register)
    if at is None or heads[at][2] != "sub" or heads[at][0] is not None:
        return None
    found = analysis.remainder_at(block, at)
    if found is None or found.kind != "alignment" or found.limit is None or not vanishes(found.limit):
        return None
    bias = found.bias
    read = [found.x] + (operand_reads(bias, plain) if bias is not None else [])
    if any(analysis.redefined(block, at + 1, position, name) for name in read):
        return None
    return remainder_range(analysis, block, found, wrapped=True), [analysis.prefix(block) + name for name in read]


#: Block -> `may_round`, filled as it is asked.
ROUNDING_BLOCKS: Fact[dict[int, bool]] = Fact("rounding blocks", lambda flow: {})


def may_round(analysis: Counting, block: int) -> bool:
    """True when `block` has a remainder (or mask) and a ``sub``, as
    `ptxkit.cfg.values.idioms.rounding_add` needs (kept per graph: `ROUNDING_BLOCKS`)."""
    known = ROUNDING_BLOCKS.of(analysis.flow)
    found = known.get(block)
    if found is None:
        heads = analysis.flow.blocks[block].heads
        found = known[block] = any(head[2] == "sub" for head in heads) and \
            any(head[2] == "and" or head[1].startswith("rem.u") for head in heads)
    return found


def rounded_past(analysis: Counting, block: int, found: Rounding, modifiers: list[str], otherwise: Compute) -> Compute:
    """`ptxkit.cfg.values.idioms.rounding_add`: ``x + (N - x % N)`` is ``x`` rounded up to a
    multiple of N wherever the remainder, as the branch conditions narrow it there,
    cannot be 0; else what `otherwise` computes."""
    prefix, width, modulus = analysis.prefix(block), type_width(modifiers), found.modulus

    def compute(a: Solving, at: Point) -> list[Value]:
        rest, x = a.lookup(at, prefix + found.remainder), a.lookup(at, prefix + found.x)
        if not rest or not x:
            return [()]  # not evaluated yet
        if len(rest) == 1 and rest[0].form == NUM and 1 <= rest[0].lo and rest[0].hi < modulus:
            return [rounded_up_to(x, modulus, width)]
        return otherwise(a, at)

    return compute


def stepped_past(analysis: Counting, block: int, position: int, operands: Sequence[Operand], modifiers: list[str],
                 otherwise: Compute) -> Refined | None:
    """``add d, m, N`` of ``m = q & -N`` set earlier in the block (N a power of two)
    where ``r = x & (N - 1)``, x being q or the register an identical computation of q
    set (`twin_of`), is not 0 as the branch conditions narrow it: d is q rounded up to N
    (ThunderKittens' allocator, ``if (p & 1023) p = (p & -1024) + 1024``); else what
    `otherwise` computes. None where the instructions do not have that shape."""
    summand = register_and_constant(operands)
    modulus = summand[1] if summand is not None else 0
    if modulus < 2 or modulus & (modulus - 1):
        return None
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    at = analysis.last_definition(block, position, register_name(operands[1]))
    if at is None or heads[at][0] is not None or heads[at][2] != "and":
        return None
    masked = register_and_constant(instructions[at].operands)
    if masked is None or masked[1] != -modulus \
            or analysis.redefined(block, at + 1, position, masked[0]):
        return None
    q = masked[0]
    prefix = analysis.prefix(block)
    names = {q}
    source = analysis.last_definition(block, at, q)
    twin = twin_of(analysis, block, source) if source is not None else None
    if twin is not None:
        names.add(twin[len(prefix):])
    remainder = _low_bits_of(analysis, block, position, names, modulus)
    if remainder is None:
        return None
    q_key, width = prefix + q, type_width(modifiers)

    def compute(a: Solving, at: Point) -> list[Value]:
        rest, x = a.lookup(at, remainder), a.lookup(at, q_key)
        if not rest or not x:
            return [()]  # not evaluated yet
        if len(rest) == 1 and rest[0].form == NUM and 1 <= rest[0].lo and rest[0].hi < modulus:
            return [rounded_up_to(x, modulus, width)]
        return otherwise(a, at)

    return compute, [remainder, q_key]


def _low_bits_of(analysis: Counting, block: int, position: int, names: set[str], modulus: int) -> str | None:
    """The key of a register set only by ``r = x & (modulus - 1)``, in `block` before
    `position` or in a block that dominates it (at most eight up), x one of `names`
    and not set again on the way to `position`."""
    dominators = DominatorTree.of(analysis.flow)
    prefix = analysis.prefix(block)
    there, stop = block, position
    for _ in range(8):
        code = analysis.flow.blocks[there]
        for at in range(stop - 1, -1, -1):
            head = code.heads[at]
            operands = code.instructions[at].operands
            if head[2] != "and" or head[0] is not None or len(operands) != 3 or operands[1].kind != "register" \
                    or operands[1].name not in names or operands[2].kind != "immediate" \
                    or operands[2].value != modulus - 1:
                continue
            key, x = prefix + register_name(operands[0]), register_name(operands[1])
            if len(analysis.definitions().get(key, ())) != 1 or operands[0].name == x:
                continue
            if there == block:
                if not analysis.redefined(there, at + 1, position, x):
                    return key
            elif not analysis.redefined(there, at + 1, len(code.instructions), x) \
                    and unwritten_between(analysis, there, block, [x], position):
                return key
        up = dominators.idom.get(there)
        if not isinstance(up, int) or up == there or analysis.prefix(up) != prefix:
            return None
        there = up
        stop = len(analysis.flow.blocks[there].instructions)
    return None


def twin_of(analysis: Counting, block: int, position: int) -> str | None:
    """The key of the register an identical unguarded instruction set before this one,
    in this block or one that dominates it, when neither that register nor what the
    instruction reads is written in between (a ``-G`` build computes ``x % 1024``
    again after testing it): both hold the same value."""
    flow = analysis.flow
    computations = COMPUTATIONS.of(flow)
    sites = computations.get((block, position))
    if sites is None:
        return None
    instructions = analysis.flow.blocks[block].instructions
    plain = analysis.plain(block)
    read = [name for operand in instructions[position].operands[1:] for name in operand_reads(operand, plain)]
    if instructions[position].operands[0].name in read:
        return None
    dominators = DominatorTree.of(analysis.flow)
    for there, at in sites:
        if at >= position if there == block else not dominators.dominates(there, block):
            continue
        early = analysis.flow.blocks[there]
        target = register_name(early.instructions[at].operands[0])
        kept = read + [target]
        stop = position if there == block else len(early.instructions)
        if target in read or any(analysis.redefined(there, at + 1, stop, name) for name in kept):
            continue
        if there == block or unwritten_between(analysis, there, block, kept, position):
            return analysis.prefix(block) + target
    return None


def rounded_up(analysis: Counting, block: int, position: int, modifiers: list[str], otherwise: Compute) -> Refined | None:
    """A ``selp`` that rounds a register up to a power of two (`ptxkit.cfg.values.idioms.
    align_up`): ``(x + N - 1) & -N`` when the other terms add up to N, else what
    `otherwise` computes."""
    prefix = analysis.prefix(block)
    found = align_up(analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads, position,
                     analysis.plain(block), functools.partial(_code_before, analysis, block))
    if found is None:
        return None
    # a partial, not a closure: compiled, a closure keeps what its siblings capture (here the
    # analysis, which keeps the rule: a cycle only the collector frees, docs/architecture.md §5)
    compute = functools.partial(_rounded_up_value, found, prefix, type_width(modifiers), otherwise)
    return compute, [prefix + found.x] + [prefix + name for _, name in found.others]


def _code_before(analysis: Counting, block: int, register: str
                 ) -> tuple[int, list[Instruction], list[HeadTuple], int] | None:
    """Where `register` is set in a block that dominates `block` with nothing between
    (`_dominating_site`): the block, its code and the position, for `align_up`."""
    site = _dominating_site(analysis, block, register)
    if site is None:
        return None
    code = analysis.flow.blocks[site[0]]
    return site[0], code.instructions, code.heads, site[1]


def _rounded_up_value(found: AlignUp, prefix: str, width: int, otherwise: Compute, a: Solving,
                      at: Point) -> list[Value]:
    """`rounded_up`'s computation: x rounded up to `found.modulus` where the other terms
    add up to it, else what `otherwise` computes."""
    terms = [a.lookup(at, prefix + name) for _, name in found.others]
    x = a.lookup(at, prefix + found.x)
    if not x or not all(terms):
        return [()]  # not evaluated yet
    values = [value for value in map(constant, terms) if value is not None]
    if len(values) < len(terms) or \
            found.constant + sum(c * v for (c, _), v in zip(found.others, values)) != found.modulus:
        return otherwise(a, at)
    return [rounded_up_to(x, found.modulus, width)]


def _offset_of(analysis: Counting, block: int, position: int, x: str, y: str, read_at: int) -> int | None:
    """k where ``x = y + k`` (an ``add`` of a constant earlier in `block`) holds both
    where x is read at `position` and where y is read at `read_at` (neither set again
    on the way), else None: ``s + 1 < N ? s + 1 : s - (N - 1)`` compares s + 1 and
    selects s - (N - 1)."""
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    at = analysis.last_definition(block, position, x)
    if at is None or heads[at][0] is not None or heads[at][2] != "add":
        return None
    summand = register_and_constant(instructions[at].operands)
    if summand is None or summand[0] != y \
            or analysis.redefined(block, min(at, read_at) + 1, max(at, read_at), y):
        return None
    return summand[1]


def selected_step(analysis: Counting, block: int, position: int, operands: Sequence[Operand]) -> Refined | None:
    """``add r, d, y`` where ``d`` is ``selp d, A, B, p`` of two constants, ``p`` is
    ``setp.<cmp> p, x, b`` (`b` a register or a constant) and ``y`` is ``x`` or a part of
    it (`_part_of`), all in this block: each constant is added to ``x``'s part refined
    by the outcome of the comparison that selects it, so a descriptor stepped round a
    ring of stages by ``lo += desc < start + 512 ? 512 : -512`` stays on the ring
    (FlashInfer's fmha_v2; docs/fence.md §3.1)."""
    selection = _selected_steps(analysis, block, position, operands)
    if selection is None:
        return None
    selp_at, (first, second, predicate), y = selection
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    setp_at = analysis.last_definition(block, selp_at, register_name(predicate))
    if setp_at is None or heads[setp_at][0] is not None or heads[setp_at][2] != "setp" \
            or analysis.redefined(block, setp_at + 1, position, register_name(predicate)):
        return None
    compare = instructions[setp_at].operands
    parts = heads[setp_at][1].split(".")
    if len(compare) != 3 or len(parts) != 3 or parts[1] not in SWAPPED_COMPARISONS \
            or parts[2] not in INTEGER_TYPES:
        return None
    swapped = SWAPPED_COMPARISONS[parts[1]]
    for x, bound, comparison in ((compare[1], compare[2], parts[1]), (compare[2], compare[1], swapped)):
        if x.kind != "register" or bound.kind not in ("register", "immediate") \
                or bound.kind == "register" and analysis.redefined(block, setp_at + 1, position, register_name(bound)):
            continue
        part = _part_of(analysis, block, position, setp_at, y, register_name(x))
        if part is not None and not analysis.redefined(block, setp_at + 1, position, register_name(x)):
            break
    else:
        return None
    prefix = analysis.prefix(block)
    x_key = prefix + register_name(x)
    unsigned, view = parts[2][0] in "ub", compared_as(parts[2])
    sides = ((first, not predicate.negated), (second, predicate.negated))

    def compute(a: Solving, at: Point) -> list[Value]:
        x_value = a.lookup(at, x_key)
        b_value = a.evaluate(block, bound, at)
        if not x_value or not b_value:
            return [()]  # not evaluated yet
        out: Value = ()
        for step, holds in sides:  # an arm only where the comparison can come out its way
            kept = refine_by(view(x_value), comparison, view(b_value), holds, unsigned)
            if kept and part != (0, 1, 0):
                kept = unpack(kept, part[1], part[2])[part[0]]
            out = join(out, add(kept, number(step)) if kept else ())
        return [out if out else TOP]

    return compute, [x_key] + ([prefix + register_name(bound)] if bound.kind == "register" else [])


def _selected_steps(analysis: Counting, block: int, position: int,
                    operands: Sequence[Operand]) -> tuple[int, tuple[int, int, Operand], str] | None:
    """``(selp position, (A, B, p), y)`` where one source of the ``add`` at `position` is
    ``selp d, A, B, p`` of two constants set earlier in `block` (unguarded) and the other
    the register `y` (`selected_step`); else None."""
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    for selected, y in ((operands[1], operands[2]), (operands[2], operands[1])):
        if selected.kind != "register" or y.kind != "register":
            continue
        selp_at = analysis.last_definition(block, position, register_name(selected))
        if selp_at is None or heads[selp_at][0] is not None or heads[selp_at][2] != "selp":
            continue
        arms = instructions[selp_at].operands
        first, second = (arms[1].value, arms[2].value) if len(arms) == 4 else (None, None)
        if len(arms) == 4 and arms[1].kind == arms[2].kind == "immediate" and arms[3].kind == "register" \
                and isinstance(first, int) and isinstance(second, int):
            return selp_at, (first, second, arms[3]), register_name(y)
    return None


def _part_of(analysis: Counting, block: int, position: int, setp_at: int, y: str, x: str) -> tuple[int, int, int] | None:
    """``(index, count, bits)`` when register `y`, read at `position`, holds part `index`
    of the `count` parts of `bits` bits that register `x` held when the ``setp`` at
    `setp_at` read it (``(0, 1, 0)``: `y` is `x`): `y` unpacked from `x`
    (``mov.b64 {y, h}, x``) or `x` packed from `y` (``mov.b64 x, {y, h}``) in this
    block, neither set again on the way, or `x` packed from `y` in a block that
    dominates this one, where each is set once and neither here (fmha_v2 packs the
    descriptor in one block and tests and steps it in the next); None otherwise."""
    if y == x:
        return (0, 1, 0)
    packed, y_at = analysis.last_definition(block, setp_at, x), \
        analysis.last_definition(block, position, y)
    sites = [(block, y_at, 1, 0), (block, packed, 0, 1)]
    if packed is None and y_at is None:
        site, y_site = _dominating_site(analysis, block, x), _dominating_site(analysis, block, y)
        if site is not None and y_site is not None and y_site[0] == site[0] and y_site[1] < site[1]:
            sites.append((site[0], site[1], 0, 1))
    for where, at, whole, vector in sites:
        code = analysis.flow.blocks[where]
        if at is None or code.heads[at][0] is not None or code.heads[at][2] != "mov":
            continue
        moved = code.instructions[at].operands
        if len(moved) != 2 or moved[vector].kind != "vector" or moved[whole].kind != "register" \
                or moved[whole].name != x:
            continue
        names = [element.name if element.kind == "register" else None for element in moved[vector].elements]
        if y not in names or where == block and (
                analysis.redefined(block, min(at, setp_at) + 1, max(at, setp_at), x)
                or analysis.redefined(block, at + 1, position, y)):
            continue
        return names.index(y), len(names), type_width(code.heads[at][1].split(".")[1:]) // len(names)
    return None


def _dominating_site(analysis: Counting, block: int, register: str) -> Site | None:
    """``(block, position)`` of the one definition of `register` (of `block`'s inlined
    copy) when it lies in another block that dominates `block`, else None: wherever
    `block` reads it, it holds what the last run of that block set."""
    site = only_site(analysis, analysis.prefix(block), register)
    if site is None or site[0] == block or not DominatorTree.of(analysis.flow).dominates(site[0], block):
        return None
    return site


def ring_refinement(analysis: Counting, block: int, position: int, operands: Sequence[Operand]) -> Refined | None:
    """``selp d, a, b, p`` where ``p`` is ``setp.<cmp> p, x, C`` and `a`/`b` are
    constants, ``x`` or ``x + k`` computed in the same block: each side is
    evaluated with ``x`` refined by the comparison's outcome (a ring index
    ``(s == N-1) ? 0 : s + 1`` stays in ``[0, N-1]``)."""
    predicate = operands[3]
    if predicate.kind != "register":
        return None
    test = _ring_test(analysis, block, position, register_name(predicate))
    if test is None:
        return None
    x, bound, comparison, kind = test
    analysis.thresholds.update((bound - 1, bound, bound + 1))
    sides = []
    for operand, holds in ((operands[1], not predicate.negated), (operands[2], predicate.negated)):
        side = _ring_side(analysis, block, position, operand, x)
        if side is None:
            return None
        sides.append((*side, holds))
    key = analysis.prefix(block) + x
    unsigned, view = kind[0] in "ub", compared_as(kind)

    def compute(a: Solving, at: Point) -> list[Value]:
        out: Value = ()
        x_value = a.lookup(at, key)
        if not x_value and any(value is None for value, _, _ in sides):
            return [()]  # not evaluated yet
        x_value = view(x_value)
        for value, offset, holds in sides:  # a side only where the comparison can come out its way
            kept = refine(x_value, comparison, bound, holds, unsigned)
            if value is not None:
                out = join(out, value) if kept or not x_value else out
            else:
                out = join(out, add(kept, number(offset)))
        return [out if out else TOP]

    return compute, [key]


def _ring_test(analysis: Counting, block: int, position: int,
               predicate: str) -> tuple[str, int, str, str] | None:
    """``(x, C, comparison, type)`` of the integer ``setp p, x, C`` that sets `predicate`
    for the ``selp`` at `position` (`ring_refinement`): earlier in `block`, unguarded, x not
    set again before the ``selp``; or in another block (`ptxkit.cfg.values.conditions.paired_setp`).
    A float comparison is none: the values here are integers, not what a float register holds."""
    instructions, heads = analysis.flow.blocks[block].instructions, analysis.flow.blocks[block].heads
    setp_at = analysis.last_definition(block, position, predicate)
    compare: Sequence[Operand]
    if setp_at is None:
        paired = paired_setp(analysis, block, predicate)
        if paired is None:
            return None
        compare, comparison, kind = paired[:3], paired[3], paired[4]
    else:
        if heads[setp_at][2] != "setp" or heads[setp_at][0] is not None:  # guarded: p may be older
            return None
        compare = instructions[setp_at].operands
        parts = heads[setp_at][1].split(".")
        comparison, kind = parts[1], parts[-1]
    if (len(compare) < 3 or compare[1].kind != "register" or compare[2].kind != "immediate"
            or kind not in INTEGER_TYPES or not isinstance(bound := compare[2].value, int)):
        return None
    x = register_name(compare[1])
    if setp_at is not None and analysis.redefined(block, setp_at + 1, position, x):
        return None
    return x, bound, comparison, kind


def _ring_side(analysis: Counting, block: int, position: int, operand: Operand,
               x: str) -> tuple[Value | None, int] | None:
    """One side of a ring's ``selp`` (`ring_refinement`): ``(its value, 0)`` for a constant,
    ``(None, k)`` for ``x + k`` (x itself, or an ``add`` of a constant to x, or to a
    register that is x plus a constant, `_offset_of`, earlier in `block`); else None."""
    if operand.kind == "immediate":
        return number(operand.value) if isinstance(operand.value, int) else TOP, 0
    if operand.kind != "register":
        return None
    if operand.name == x:
        return None, 0
    heads = analysis.flow.blocks[block].heads
    add_at = analysis.last_definition(block, position, register_name(operand))
    if add_at is None or heads[add_at][1].split(".")[0] != "add" or heads[add_at][0] is not None:
        return None
    summand = register_and_constant(analysis.flow.blocks[block].instructions[add_at].operands)
    if summand is None:
        return None
    base = 0 if summand[0] == x else _offset_of(analysis, block, position, x, summand[0], add_at)
    if base is None or analysis.redefined(block, add_at + 1, position, summand[0]):
        return None
    return None, summand[1] - base
