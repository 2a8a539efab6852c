"""Branch conditions in the register analysis: what a ``setp`` and the branch on it say
of the registers it compared (docs/fence.md §3.2).

A condition narrows the compared register, and the registers it was computed from
through steps that can be undone (an added constant, a shift, a copy, ``x % N == 0``),
along an edge that dominates its target; a block that a dominating condition rules out
is dead. These functions find them for the register analysis (`ptxkit.cfg.values.registers`),
which they are handed as an argument and read through protocols (`Code`,
`Tests`, `Renamed`, `Solved`, `Narrowed` of `ptxkit.cfg.values.protocols`); the analysis's tests show them at work (``tests/test_registers.py``,
``tests/test_conditions.py``). Past ``if ((tid >> 4) < 3)`` the thread index is below 48:

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> from ptxkit.cfg.values.registers import register_values
>>> from ptxkit.cfg.values.values import show
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .b32 %r<4>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tshr.u32 %r2, %r1, 4;\\n"
...     "\\tsetp.lt.u32 %p1, %r2, 3;\\n\\t@!%p1 bra OUT;\\n\\tshl.b32 %r3, %r1, 2;\\nOUT:\\n\\tret;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> shift = flow.blocks[1].instructions[0]
>>> show(register_values(flow, {"tid": (1, 0, shift.operands[1])})["tid"])
'[0, 47]'
"""

from __future__ import annotations

from functools import partial

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.flow.ssa import blocks_between, cell_key
from ptxkit.cfg.values.arithmetic import compared_as, identity, off_multiples, rounded_up_to
from ptxkit.cfg.values.specials import is_fixed_special, one_dimensional
from ptxkit.cfg.values.values import INF, TOP, Atom, constant, join, may_be, meet, number, refine, refine_by, sub
from ptxkit.isa import FIXED_SPECIALS, SWAPPED_COMPARISONS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence
    from typing import TypeAlias

    from ptxkit.cfg.flow.graph import FlowGraph
    from ptxkit.cfg.values.protocols import Code, Narrowed, Renamed, Solved, Tests
    from ptxkit.instruction import Guard, Operand

    from ptxkit.cfg.values.values import Value
    #: ``(block, position)``: where an instruction is.
    Site = tuple[int, int]
    #: Where a register's version is read: an instruction's `Site`, or a branch's or a
    #: query's point (``("branch", block, block)``, ``("query", name, block)``).
    Point = Site | tuple[str, object, int]
    #: Key -> the `Site` of every instruction that defines it.
    Definitions = Mapping[str, Sequence[Site]]
    #: What a test bounds a register by, from what it bounds the register computed from it:
    #: a value, or `_MultipleOf` (after ``x % N == 0``).
    Limit: TypeAlias = "Value | _MultipleOf"
    #: The inverse of one defining step (`_inverse`).
    Inverse = Callable[[Value], Limit]
    #: A register a test bounds through its chain: its key, or ``(key, point)`` where the
    #: version read at that point is bounded (`_inverse_chain`).
    Source = str | tuple[str, Point]
    Chain = list[tuple[Source, Inverse]]
    #: ``(negated, (key, comparison, bound, kind, chain), setp position)`` of a branch
    #: (`branch_conditions`): `bound` a constant or the key of the register compared against.
    Condition = tuple[bool, tuple[str, str, int | str, str, Chain], int]
    #: How a condition narrows a version's value, handed the analysis as it solves.
    Narrow = Callable[["Solved", Value], Value]
    #: ``[(version, narrow)]``: the narrowings that hold somewhere.
    Narrowings = list[tuple[str, Narrow]]


class _MultipleOf(Record):
    """What a test ``x % modulus == 0`` bounds ``x`` by: rounding it up to `modulus` leaves
    it as it is (`_narrowing` rounds the value it narrows); with `holds` false, what
    ``x % modulus != 0`` bounds it by: an end of its range that is a multiple moves in."""

    modulus: int
    holds: bool = True


#: The value a step that cannot be undone leaves: any number.
_ANY_NUMBER: Value = (Atom(0, None, None, -INF, INF),)


def _immediate(operands: Sequence[Operand]) -> int | None:
    """The integer of a three-operand instruction's last operand, when it is one."""
    if len(operands) == 3 and operands[2].kind == "immediate" and isinstance(operands[2].value, int):
        return operands[2].value
    return None


def _inverse(opcode: str, base: str, operands: Sequence[Operand], uniform: bool) -> Inverse | None:
    """The inverse of one defining step for branch refinement (see `_inverse_chain`)."""
    immediate = _immediate(operands)
    modulus = None
    if immediate is not None and opcode.startswith("rem.u"):
        modulus = immediate
    elif immediate is not None and base == "and":
        modulus = immediate + 1  # x & (N - 1) is x % N
    if modulus is not None and modulus >= 2 and not modulus & (modulus - 1):
        multiple, other = _MultipleOf(modulus), _MultipleOf(modulus, False)
        return lambda value: multiple if constant(value) == 0 else other if value and not may_be(value, 0) \
            else _ANY_NUMBER
    if base in ("add", "sub") and immediate is not None:
        step = immediate if base == "add" else -immediate
        return lambda value: sub(value, number(step))
    if opcode.startswith("shr.u") and len(operands) == 3 and operands[2].kind == "immediate":
        count = operands[2].value
        return None if not isinstance(count, int) else lambda value: _widened_back(value, count)
    if base == "mov" and len(operands) == 2 or base == "shfl" and uniform:
        return identity
    return None


def _widened_back(value: Value, count: int) -> Value:
    """Every x whose ``x >> count`` is in `value` (one range of numbers), else any number."""
    if len(value) == 1 and value[0].form == 0 and value[0].lo >= 0 and value[0].hi < INF:
        return number(value[0].lo << count, (value[0].hi << count) + (1 << count) - 1)
    return _ANY_NUMBER


class Refinements(Record):
    """Where the branch conditions hold (`refinements`): the narrowings that start at each
    block's entry, and on each edge ``(block, successor)``; the site of each version's
    definition; and key -> the keys whose narrowings read it (the solver reevaluates what
    reads them when it changes)."""

    narrowing: "dict[int, Narrowings]"
    edge_narrowing: "dict[tuple[int, int], Narrowings]"
    site_of: "dict[str, Point]"
    depends: dict[str, set[str]]


def refinements(analysis: Renamed, conditions: Mapping[int, Condition], definitions: Definitions) -> Refinements:
    """Where each branch condition holds: along an edge that dominates its target (the
    target's other predecessors are inside its loops), in every block the target
    dominates. The compared register is narrowed as the version the test read; the
    registers it was computed from only when defined once."""
    flow, uses = analysis.flow, analysis.uses
    found = Refinements({}, {}, {version: point for (point, _), version in analysis.defs.items()}, {})
    depends = found.depends
    for branch, (negated, (key, comparison, bound, kind, chain), _) in conditions.items():
        key = uses.get((("branch", branch, branch), key), key)
        bounded = [(uses.get((source[1], source[0]), source[0]) if isinstance(source, tuple) else source,
                    inverse) for source, inverse in chain
                   if isinstance(source, tuple) or len(definitions.get(source, ())) == 1 or is_fixed_special(source)]
        sources = [source for source, _ in bounded]
        against = bound if isinstance(bound, int) else (bound, uses.get((("branch", branch, branch), bound), bound))
        if isinstance(against, tuple):  # the other register's version at the test; narrowing follows it
            depends.setdefault(against[1], set()).update([key, *sources])
        for successor in set(flow.succ[branch]):
            kinds = flow.kinds.get((branch, successor), "").split(",")
            if ("taken" in kinds) == ("fallthrough" in kinds):
                continue
            holds = ("taken" in kinds) != negated
            narrow = _narrowing(branch, key, comparison, against, kind, holds, bounded)
            found.edge_narrowing[(branch, successor)] = narrow
            depends.setdefault(key, set()).update(sources)
            if any(p != branch and not analysis.dominators.dominates(successor, p) for p in flow.pred[successor]):
                continue  # the edge must dominate the successor (other edges in are its loops' back edges)
            found.narrowing.setdefault(successor, []).extend(narrow)
            depends.setdefault(key, set()).update(sources)
    return found


def joined_at_merges(flow: FlowGraph, dominators: DominatorTree, narrowing: Mapping[int, Narrowings],
                     edge_narrowing: Mapping[tuple[int, int], Narrowings]) -> dict[int, Narrowings]:
    """At each block where paths meet (no loop's head), a narrowing of every register
    that each way in narrows beyond what the block's dominators hold (`narrowing`):
    the join of what each way brings, by the conditions that hold from the block's
    immediate dominator down to the predecessor and on the edge in. A way no run
    takes brings nothing, so past ``switch (warp) {case 4: case 5: default}`` joined
    with the way of ``warp >= 8``, where ``warp`` was known to be below 6 in the
    default case, the warp is 8 or more (docs/fence.md §3.2).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> from ptxkit.cfg.values.registers import register_values
    >>> from ptxkit.cfg.values.values import show
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<4>;\\n.reg .pred %p<4>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tsetp.lt.u32 %p1, %r1, 8;\\n"
    ...     "\\t@%p1 bra LOW;\\n\\tsetp.gt.u32 %p2, %r1, 15;\\n\\t@%p2 bra USE;\\n\\tbra.uni OUT;\\nLOW:\\n"
    ...     "\\tsetp.gt.u32 %p3, %r1, 9;\\n\\t@%p3 bra USE;\\n\\tbra.uni OUT;\\nUSE:\\n\\tshl.b32 %r3, %r1, 2;\\n"
    ...     "OUT:\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> use, shift = next((b, i) for b, block in enumerate(flow.blocks) for i in block.instructions
    ...                   if i.opcode == "shl.b32")
    >>> show(register_values(flow, {"tid": (use, 0, shift.operands[1])})["tid"])
    '[16, 1023]'

    (``tid < 8`` and ``tid > 9`` leave nothing: the one way in is ``tid > 15``.)
    """
    joined: dict[int, Narrowings] = {}
    for block in flow.rpo:
        predecessors = sorted({p for p in flow.pred[block] if p in dominators})
        top = dominators.idom.get(block)
        if len(predecessors) < 2 or not isinstance(top, int) or \
                any(dominators.dominates(block, p) for p in predecessors):  # a loop's head
            continue
        ways = [_narrowings_on_way(joined, narrowing, edge_narrowing, dominators, top, p, block) for p in predecessors]
        common = set(ways[0]).intersection(*ways[1:])
        split = {id(narrow) for successor in flow.succ[top] for _, narrow in edge_narrowing.get((top, successor), ())}
        for key in sorted(common):
            steps = tuple(tuple(way[key]) for way in ways)
            if all(id(narrow) in split for way in steps for narrow in way):
                continue  # each way narrowed by a side of the test at `top` alone: together they leave all
            joined.setdefault(block, []).append((key, partial(_joined_ways, steps)))
    return joined


def _narrowings_on_way(joined: Mapping[int, Narrowings], narrowing: Mapping[int, Narrowings],
                       edge_narrowing: Mapping[tuple[int, int], Narrowings], dominators: DominatorTree, top: int,
                       predecessor: int, block: int) -> dict[str, list[Narrow]]:
    """key -> the narrowings that hold on the way from `top` (not included) down the
    dominator tree to `predecessor` and along the edge into `block`, outermost first."""
    path = []
    at = predecessor
    while at != top:  # `top` dominates `predecessor`: the walk up meets it
        path.append(at)
        parent = dominators.idom.get(at)
        if not isinstance(parent, int) or parent == at:
            break
        at = parent
    found: dict[str, list[Narrow]] = {}
    for at in reversed(path):
        for key, narrow in (*narrowing.get(at, ()), *joined.get(at, ())):
            found.setdefault(key, []).append(narrow)
    for key, narrow in edge_narrowing.get((predecessor, block), ()):
        found.setdefault(key, []).append(narrow)
    return found


def _joined_ways(ways: tuple[tuple[Narrow, ...], ...], a: Solved, value: Value) -> Value:
    """The join, over the ways into a block, of `value` narrowed along each (`ways`)."""
    out: Value = ()
    for steps in ways:
        incoming = value
        for narrow in steps:
            if not incoming:
                break
            incoming = narrow(a, incoming)
        if incoming:
            out = join(out, incoming) if out else incoming
    return out


def _narrowing(branch: int, key: str, comparison: str, bound: int | tuple[str, str], kind: str, holds: bool,
               chain: Sequence[tuple[str, Inverse]]) -> Narrowings:
    """``[(key, narrow)]`` for the compared register and each register of its chain
    (`kind`: the ``setp`` type, such as ``s32``; `bound` a constant or the key and the
    version of the register compared against)."""
    unsigned, view = kind[0] in "ub", compared_as(kind)

    def compared(a: Solved, value: Value) -> Value:
        if isinstance(bound, tuple):  # (key, version) of the register compared against
            other = a.values.get(bound[1])
            other = (() if bound[0] in a.defined else TOP) if other is None else other
            return refine_by(view(value), comparison, view(a._narrowed(branch, bound[1], other)), holds, unsigned)
        return refine(view(value), comparison, bound, holds, unsigned)

    out: Narrowings = [(key, compared)]
    steps: list[Inverse] = []
    for source, inverse in chain:
        steps.append(inverse)
        out.append((source, _bounded(branch, key, compared, tuple(steps))))
    return out


def _bounded(branch: int, key: str, compared: Narrow, steps: tuple[Inverse, ...]) -> Narrow:
    """The narrowing of a register the compared one (`key`) was computed from through
    `steps`: the compared register's bound, with each step undone in turn."""

    def bounded(a: Solved, value: Value) -> Value:
        limit: Limit = compared(a, a._narrowed(branch, key, a.values.get(key, ())))
        for step in steps:
            if not limit:
                return ()
            if not isinstance(limit, _MultipleOf):  # past a remainder only copies follow (`_inverse_chain`)
                limit = step(limit)
        if isinstance(limit, _MultipleOf):  # x % N == 0: x is x rounded up to N
            if not value:
                return ()
            return rounded_up_to(value, limit.modulus) if limit.holds else off_multiples(value, limit.modulus)
        return meet(value, limit) if value and limit else ()

    return bounded


def narrowed_at(memo: dict[int, dict[str, list[Narrow]]], narrowing: Mapping[int, Narrowings],
                dominators: DominatorTree, block: int) -> dict[str, list[Narrow]]:
    """key -> the narrowings that hold in `block` (from its dominators, outermost first),
    kept in `memo` for `block` and the dominators on the way."""
    found = memo.get(block)
    if found is not None:
        return found
    chain = []  # the dominators not yet memoised, innermost first (no recursion: trees get deep)
    while found is None:
        chain.append(block)
        parent = dominators.idom.get(block)
        if not isinstance(parent, int) or parent == block:
            found = {}
            break
        block = parent
        found = memo.get(block)
    for block in reversed(chain):
        own = narrowing.get(block)
        if own:
            found = {key: list(value) for key, value in found.items()}
            for key, narrow in own:
                found.setdefault(key, []).append(narrow)
        memo[block] = found
    return found


def dead_blocks(analysis: Narrowed, tested: Mapping[int, Narrowings]) -> set[int]:
    """Blocks that some dominating branch condition says no run ever reaches (`tested`:
    where each condition's narrowings start to hold, `Refinements.narrowing`)."""
    dead_starts = set()
    idom = analysis.dominators.idom
    for block, narrowings in tested.items():
        parent = idom.get(block)
        for version, narrow in narrowings:
            base = analysis.values.get(version, ())
            if isinstance(parent, int):
                base = analysis._narrowed(parent, version, base)
            if base and not narrow(analysis, base):
                dead_starts.add(block)
    if not dead_starts:
        return set()
    dead: set[int] = set()
    for block in analysis.flow.rpo:  # a block's immediate dominator comes before it
        parent = idom.get(block)
        if block in dead_starts or (parent in dead and parent != block):
            dead.add(block)
    return dead


def branch_conditions(analysis: Tests, definitions: Definitions) -> dict[int, Condition]:
    """Block -> (negated, (key, comparison, bound, unsigned, chain), setp position)
    for blocks ending in ``@p bra`` whose ``p`` comes from a ``setp`` of a register
    and a constant: in the same block, or anywhere when ``p`` and the register are
    each defined once (a test made early and branched on later). In the same block
    the bound may be another register too (`bound` is then its key: ``i < n`` bounds
    ``i`` by what ``n`` may be, `ptxkit.cfg.values.values.refine_by`). The `chain` lists
    ``(key, inverse)`` for the registers the compared one was computed from (see
    `_inverse_chain`): each is narrowed too."""
    found = {}
    for block in analysis.flow.blocks:
        guard = block.heads[-1][0] if block.terminator is not None and block.heads[-1][2] == "bra" else None
        if guard is None:
            continue
        instructions, heads = block.instructions, block.heads
        position = len(instructions) - 1
        negated = guard.negated
        at = analysis.last_definition(block.index, position, guard.register)
        if at is None:
            found_elsewhere = _single_setp(analysis, block.index, guard, negated, definitions)
            if found_elsewhere is not None:
                found[block.index] = found_elsewhere
            continue
        if heads[at][0] is not None:  # a guarded definition may leave an older predicate
            continue
        if heads[at][1] == "not.pred":
            source = instructions[at].operands[1]
            if source.kind != "register" or analysis.redefined(block.index, at + 1, position, register_name(source)):
                continue
            negated = not negated
            position, at = at, analysis.last_definition(block.index, at, register_name(source))
        if at is None or heads[at][2] != "setp" or heads[at][0] is not None:
            continue
        compare = instructions[at].operands
        parts = heads[at][1].split(".")
        if len(compare) != 3 or len(parts) != 3 or compare[0].kind != "register":
            continue
        test = _compared(analysis, block.index, at, compare, parts[1])
        if test is None:
            continue
        register, bound, comparison = test
        if isinstance(bound, int):
            analysis.thresholds.update((bound - 1, bound, bound + 1))
        prefix = analysis.prefix(block.index)
        chain = _inverse_chain(analysis, block.index, at, prefix + register, definitions, branch=True)
        found[block.index] = (negated, (prefix + register, comparison, bound, parts[2], chain), at)
    return found


def _compared(analysis: Code, block: int, at: int, compare: Sequence[Operand],
              comparison: str) -> tuple[str, int | str, str] | None:
    """``(register, bound, comparison)`` of the ``setp`` at `at` in `block`, the branch
    at its end: a register against a constant (either way round) or, where the other is
    not set again before the branch, against another register (`bound` its key); None
    otherwise, or when the register is set again before the branch."""
    last = len(analysis.flow.blocks[block].instructions) - 1
    found: str | None = comparison
    bound: object
    if compare[1].kind == "register" and compare[2].kind == "immediate":
        register, bound = register_name(compare[1]), compare[2].value
    elif compare[2].kind == "register" and compare[1].kind == "immediate":
        register, bound, found = register_name(compare[2]), compare[1].value, SWAPPED_COMPARISONS.get(comparison)
    elif compare[1].kind == "register" and compare[2].kind == "register" \
            and not analysis.redefined(block, at + 1, last, register_name(compare[2])):
        register, bound = register_name(compare[1]), analysis.prefix(block) + register_name(compare[2])  # bounded by its value
    else:
        return None
    if found is None or not isinstance(bound, (int, str)) or analysis.redefined(block, at + 1, last, register):
        return None
    return register, bound, found


def register_name(operand: Operand) -> str:
    """The name of a register operand (every register has one)."""
    assert operand.name is not None, operand
    return operand.name


def paired_setp(analysis: Code, block: int, predicate: str) -> tuple[Operand, Operand, Operand, str, str] | None:
    """``(p, x, C, comparison, type)`` of the ``setp p, x, C`` that defines
    `predicate` in another block, when `p` and `x` are each defined once, unguarded,
    and `block` reads the `x` that the last ``setp`` compared: `x` set first in the
    same block (every execution of that block sets both), or in a third block that
    lies on no way from the ``setp``'s to `block` (`unwritten_between`: a ring index
    advanced in one block, tested in a later one and selected in a third, FlashMLA's
    sm100 backward kernel)."""
    prefix = analysis.prefix(block)
    site = only_site(analysis, prefix, predicate)
    if site is None:
        return None
    where, at = site
    head = analysis.flow.blocks[where].heads[at]
    compare = analysis.flow.blocks[where].instructions[at].operands
    if head[2] != "setp" or head[0] is not None or len(compare) != 3 or compare[1].kind != "register":
        return None
    x_site = only_site(analysis, prefix, register_name(compare[1]))
    if x_site is None or analysis.flow.blocks[x_site[0]].heads[x_site[1]][0] is not None:
        return None
    if x_site[0] == where and x_site[1] > at:
        return None
    if x_site[0] != where and (block in (where, x_site[0])
                               or not unwritten_between(analysis, where, block, (register_name(compare[1]),))):
        return None
    parts = head[1].split(".")
    return compare[0], compare[1], compare[2], parts[1], parts[-1]


def only_site(analysis: Code, prefix: str, name: str, definitions: Definitions | None = None) -> Site | None:
    """``(block, position)`` of the one definition of register `name` of the inlined
    copy `prefix`, when it has one and it is in that copy; else None (`definitions`:
    the analysis's, where the caller has them)."""
    sites = (definitions or analysis.definitions()).get(prefix + name, ())
    return sites[0] if len(sites) == 1 and analysis.prefix(sites[0][0]) == prefix else None


def _single_setp(analysis: Tests, block: int, guard: Guard, negated: bool,
                 definitions: Definitions) -> Condition | None:
    """The condition of a branch on a predicate set once, by a ``setp`` in another
    block of a register that is also set once, against a constant (or None). The
    register, and those its chain bounds, must hold at the branch what they held at
    the test: none is set again on a way from the ``setp`` to the branch (in a loop,
    the branch may read a predicate set one turn earlier, `unwritten_between`)."""
    prefix = analysis.prefix(block)
    site = only_site(analysis, prefix, guard.register, definitions)
    if site is None:
        return None
    where, at = site
    head = analysis.flow.blocks[where].heads[at]
    compare = analysis.flow.blocks[where].instructions[at].operands
    parts = head[1].split(".")
    if head[0] is not None or head[2] != "setp" or len(compare) != 3 or len(parts) != 3 \
            or compare[0].kind != "register" \
            or compare[1].kind != "register" or compare[2].kind != "immediate" \
            or not isinstance(compare[2].value, int) or compare[1].name == guard.register \
            or len(definitions.get(prefix + register_name(compare[1]), ())) != 1:
        return None
    key = prefix + register_name(compare[1])
    x_site = definitions[key][0]
    if x_site[0] == where and x_site[1] > at:
        return None  # set after the test: the branch reads a newer value
    chain = _inverse_chain(analysis, where, at, key, definitions)
    bounded = [key] + [source if isinstance(source, str) else source[0] for source, _ in chain]
    names = [name[len(prefix):] for name in bounded if name.startswith(prefix)]
    if not unwritten_between(analysis, where, block, names):
        return None
    bound = compare[2].value
    analysis.thresholds.update((bound - 1, bound, bound + 1))
    return negated, (key, parts[1], bound, parts[2], chain), at


def _inverse_chain(analysis: Tests, block: int, position: int, key: str, definitions: Definitions,
                   branch: bool = False) -> Chain:
    """``[(source key, inverse)]``: how the value compared at (block, position) bounds
    the registers it was computed from. A step needs the register's only definition
    in the function (so the relation holds wherever it is read; the registers it reads
    not set only after it in its block) to be ``add``/``sub``
    of a constant, ``shr`` by a constant, ``mov``, or the warp-uniform broadcast
    ``shfl.sync.idx`` from lane 0 of ``%tid.x >> k`` (k >= 5) in a kernel whose
    blocks are one-dimensional, where every lane holds the same value. A register
    loaded from a followed ``-G`` stack cell ends the chain with ``((cell key, load
    site), identity)``: the version of the cell that load read holds the same value
    (`refinements` narrows that version, so a second load of it is bounded too). For
    the test of a `branch`, a register set more than once that the test's block reads
    unchanged up to the test ends the chain with ``((key, branch point), inverse)``:
    the version of it the branch sees is bounded. The compared register itself may be set
    more than once where one write reaches the test (`_reaching_write`): the chain goes on
    from it with the registers no way from it to the test writes."""
    chain: Chain = []
    current = key
    rounding = False  # the chain went through a remainder (`_MultipleOf`)
    reached: Site | None = None  # the write of the compared register reaching the test, when set more than once
    for _ in range(8):
        sites = definitions.get(current, ())
        if len(sites) != 1 and current == key and branch:
            found = _reaching_write(analysis, block, position, key, definitions)
            sites, reached = ((found,), found) if found is not None else ((), None)
        if len(sites) != 1:
            break
        where, at = sites[0]
        head = analysis.flow.blocks[where].heads[at]
        if head[0] is not None or where == block and at > position:
            break  # a guarded definition may leave an older value; a later one, a newer
        cell = analysis._read_cell(where, at)
        if cell is not None:  # reloaded from a -G stack cell: the version it read is bounded too
            chain.append(((cell_key(cell), (where, at)), identity))
            break
        operands = analysis.flow.blocks[where].instructions[at].operands
        if head[2] == "mov" and len(operands) == 2 and operands[1].kind == "special" \
                and operands[1].name in FIXED_SPECIALS:  # a copy of the thread's own index
            chain.append((analysis.prefix(where) + register_name(operands[1]), identity))
            break
        if len(operands) < 2 or operands[1].kind != "register":
            break
        source = analysis.prefix(where) + register_name(operands[1])
        if reached is not None and not _kept_from(analysis, reached, block, position, register_name(operands[1])):
            break  # set again from the write that reaches the test to the test (or by that write)
        reached = None
        source_sites = definitions.get(source, ())
        read_here = False  # set more than once, but the test's block reads it unchanged: its version there
        if len(source_sites) != 1 or source_sites[0][0] == where and source_sites[0][1] > at:
            if not (branch and where == block and _kept_in_block(analysis, block, at, position, register_name(operands[1]))):
                break  # set more than once, or only after it is read here (an older value then)
            read_here = True
        inverse = _inverse(head[1], head[2], operands, uniform_broadcast(analysis, where, at, definitions))
        remainder = head[2] in ("rem", "and")  # the only `and` with an inverse: a low-bits mask
        if inverse is None or rounding and inverse is not identity or remainder and chain:
            break  # a remainder's test bounds its dividend, and its copies, only
        rounding = rounding or remainder
        if read_here:
            chain.append(((source, ("branch", block, block)), inverse))
            break
        chain.append((source, inverse))
        current = source
    return chain


def nearest_write(flow: FlowGraph, definitions: Definitions, key: str, site: Site) -> Site | None:
    """The write of `key` nearest before the instruction at `site`: the last before it in
    its block, else the last in the nearest block that dominates it (whether another write
    lies on a way between, the caller asks); None where no write comes before on every way.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> from ptxkit.cfg.values.definitions import REGISTER_DEFINITIONS
    >>> flow = flow_graph(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<3>;\\n\\tmov.u32 %r1, 1;\\nL:\\n\\tmov.u32 %r2, %r1;\\n\\tadd.s32 %r1, %r1, 1;\\n"
    ...     "\\tbra.uni L;\\n}\\n").function("k"))
    >>> written = REGISTER_DEFINITIONS.of(flow)
    >>> nearest_write(flow, written, "%r1", (1, 0)), nearest_write(flow, written, "%r1", (1, 2))
    ((0, 0), (1, 1))
    """
    here = [write for write in definitions.get(key, ()) if write[0] == site[0] and write[1] < site[1]]
    if here:
        return max(here)
    dominators = DominatorTree.of(flow)
    above = [write for write in definitions.get(key, ())
             if write[0] != site[0] and dominators.dominates(write[0], site[0])]
    nearest = [write for write in above if all(dominators.dominates(other[0], write[0]) for other in above)]
    return max(nearest) if nearest else None


def _reaching_write(analysis: Code, block: int, position: int, key: str, definitions: Definitions) -> Site | None:
    """The one write of `key` (set more than once) that every run reaching the
    instruction at (block, position) last made: `nearest_write`, with no write of `key` on
    a way from its block to there."""
    found = nearest_write(analysis.flow, definitions, key, (block, position))
    if found is None or found[0] == block:
        return found
    return found if unwritten_between(analysis, found[0], block, [key[len(analysis.prefix(block)):]], position) \
        else None


def _kept_from(analysis: Code, site: Site, block: int, position: int, register: str) -> bool:
    """Whether no instruction writes `register` from `site` (itself included: a register
    stepped there is a newer one at the test) to the instruction at (block, position)."""
    if site[0] == block:
        return not analysis.redefined(block, site[1], position, register)
    return not analysis.redefined(site[0], site[1], len(analysis.flow.blocks[site[0]].instructions), register) \
        and unwritten_between(analysis, site[0], block, [register], position)


def _kept_in_block(analysis: Code, block: int, at: int, position: int, register: str) -> bool:
    """True when `register`, read at `at` in `block` before the test at `position`, is
    not set again in the rest of the block: where the block branches, it holds the
    value read at `at`."""
    return at < position and not analysis.redefined(block, at + 1, len(analysis.flow.blocks[block].instructions),
                                                    register)


def _zero(analysis: Code, block: int, operand: Operand, definitions: Definitions) -> bool:
    """True when `operand` is 0: an immediate, or a register whose only definition moves 0."""
    if operand.kind == "immediate":
        return operand.value == 0
    sites = definitions.get(analysis.prefix(block) + register_name(operand), ()) if operand.kind == "register" else ()
    if len(sites) != 1:
        return False
    where, at = sites[0]
    source = analysis.flow.blocks[where].instructions[at].operands
    return analysis.flow.blocks[where].heads[at][2] == "mov" and len(source) == 2 and \
        source[1].kind == "immediate" and source[1].value == 0


def uniform_broadcast(analysis: Code, block: int, position: int, definitions: Definitions) -> bool:
    """True for ``shfl.sync.idx d, x, 0, c, mask`` where ``x = %tid.x >> k``, k >= 5,
    in a kernel with one-dimensional blocks (``.maxntid``/``.reqntid`` N, 1, 1): ``x`` is
    the same in every lane of a warp, and whatever ``c`` says, the lane read is one of the
    thread's own warp (`ptxkit.isa_eval.shuffle_source`), so ``d`` is the thread's ``x``."""
    code = analysis.flow.blocks[block]
    operands = code.instructions[position].operands
    if not code.heads[position][1].startswith("shfl.sync.idx") or len(operands) < 4 \
            or not _zero(analysis, block, operands[2], definitions):
        return False
    sites = definitions.get(analysis.prefix(block) + register_name(operands[1]), ())
    if len(sites) != 1:
        return False
    where, at = sites[0]
    shift = analysis.flow.blocks[where].instructions[at].operands
    count = _immediate(shift)
    if not analysis.flow.blocks[where].heads[at][1].startswith("shr.u32") or count is None or count < 5 \
            or shift[1].kind != "register":
        return False
    origin = definitions.get(analysis.prefix(where) + register_name(shift[1]), ())
    if len(origin) != 1:
        return False
    source = analysis.flow.blocks[origin[0][0]].instructions[origin[0][1]].operands
    function = code.context.function if code.context else analysis.flow.function
    return len(source) == 2 and source[1].kind == "special" and source[1].name == "%tid.x" and one_dimensional(
        function)


def unwritten_between(analysis: Code, there: int, reading: int, registers: Iterable[str],
                      position: int | None = None) -> bool:
    """True when no definition of `registers` lies in a block on a way from block
    `there` to block `reading` (`reading` included) that does not pass `there`
    again (a way through `there` defines them anew before reaching `reading`). With
    `position`, a definition in `reading` at or after it counts only where a way
    leads from `reading` back to it without passing `there`."""
    between = blocks_on_ways(analysis, there, reading)
    prefix = analysis.prefix(reading)
    again = position is None or any(between >> block & 1 for block in analysis.flow.succ[reading])
    return not any(between >> site[0] & 1 and
                   (site[0] != reading or again or position is not None and site[1] < position)
                   for name in registers for site in analysis.definitions().get(prefix + name, ()))


#: ``(there, reading)`` -> `blocks_on_ways`, filled as it is asked.
BLOCKS_BETWEEN: Fact[dict[tuple[int, int], int]] = Fact("blocks between", lambda flow: {})


def blocks_on_ways(analysis: Code, there: int, reading: int) -> int:
    """The blocks on a way from block `there` to block `reading` that does not pass
    `there` again, as a bit mask (`ptxkit.cfg.flow.ssa.blocks_between`), kept per pair
    for the graph (`BLOCKS_BETWEEN`)."""
    regions = BLOCKS_BETWEEN.of(analysis.flow)
    between = regions.get((there, reading))
    if between is None:
        between = regions[(there, reading)] = blocks_between(analysis.flow, DominatorTree.of(analysis.flow), there,
                                                             reading)
    return between
