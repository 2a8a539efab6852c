"""Loops that make a bounded number of trips, and the registers they step
(docs/fence.md §3.1).

A loop whose one latch adds a constant ``U`` to a counter ``c`` and goes round again
only while ``c != L`` (``c < L`` counting up, ``c > L`` counting down) makes at most
``T`` trips: where ``L - c0`` is a positive multiple of ``U`` for every start ``c0``
and limit ``L`` it may be entered with, ``c`` meets ``L`` on trip ``(L - c0) / U`` and
the test fails there (`Count.most`); an ordered test fails on the first trip past
``L``, where no step wraps (`_ordered`). Every register the loop steps once a trip by
a constant ``A`` (``x = x + A`` in a block of the loop itself that every trip passes)
then holds ``x0 + A * [0, T - 1]`` from the header on, ``x0`` what it entered with;
where the test is ``!=`` it leaves the loop holding ``x0 + A * t`` (`trip_bounds`), and
``x - s``, ``x`` entered as a copy of ``s``, is ``A * [0, T - 1]`` (`stepped_offset`).

The limits found are those a compiler writes: a register set before the loop (its
values where the loop is entered), the start plus a constant (``for (i = s; i < s + 2;
i++)``), and LLVM's loop over a runtime count ``n`` unrolled ``U`` times, which runs
to ``n & -U`` (written ``n - (n & (U - 1))``) and tests ``c + ((n & (U - 1)) - n) !=
0`` or counts a second register down to 0; ``n`` is read as the branch conditions
narrow it (LLVM enters the unrolled loop only where ``n - 1 >= U - 1``).
ThunderKittens issues a TMA load per consumer warp in such a loop:

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> from ptxkit.cfg.values.registers import register_values
>>> from ptxkit.cfg.values.values import show
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
...     ".visible .entry k(.param .u32 n)\\n{\\n.reg .b32 %r<12>;\\n.reg .pred %p<3>;\\n"
...     ".shared .align 1024 .b8 buf[65536];\\n\\tld.param.u32 %r1, [n];\\n\\tmin.s32 %r2, %r1, 8;\\n"
...     "\\tmax.s32 %r3, %r2, 1;\\n\\tadd.s32 %r4, %r3, -1;\\n\\tand.b32 %r5, %r3, 3;\\n"
...     "\\tsub.s32 %r6, %r5, %r3;\\n\\tsetp.lt.u32 %p1, %r4, 3;\\n\\t@%p1 bra DONE;\\n"
...     "\\tmov.u32 %r7, 0;\\n\\tmov.u32 %r8, buf;\\nLOOP:\\n\\tst.shared.u32 [%r8], %r7;\\n"
...     "\\tadd.s32 %r7, %r7, 4;\\n\\tadd.s32 %r8, %r8, 8192;\\n\\tadd.s32 %r9, %r6, %r7;\\n"
...     "\\tsetp.ne.s32 %p2, %r9, 0;\\n\\t@%p2 bra LOOP;\\nDONE:\\n\\tret;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> store = flow.blocks[2].instructions[0]
>>> show(register_values(flow, {"address": (2, 0, store.operands[0])})["address"])
'buf+[0, 8192] step 8192 (shared::cta window)'
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.flow.dominance import DOMINATORS
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.flow.loops import LOOPS
from ptxkit.cfg.values.arithmetic import compared_as
from ptxkit.cfg.values.conditions import nearest_write, unwritten_between
from ptxkit.cfg.values.definitions import REGISTER_DEFINITIONS
from ptxkit.cfg.values.values import NUM, add, is_top, join, number, within
from ptxkit.isa import INTEGER_TYPES, NEGATED_COMPARISONS, SWAPPED_COMPARISONS

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    from ptxkit.cfg.flow.dominance import DominatorTree
    from ptxkit.cfg.flow.graph import FlowGraph, Site
    from ptxkit.cfg.flow.loops import Loop
    from ptxkit.cfg.values.conditions import Narrow, Narrowings, Point
    from ptxkit.cfg.values.counters import Compute, Refined
    from ptxkit.cfg.values.protocols import Counting, Solved, Solving, Tripping
    from ptxkit.cfg.values.values import Value
    from ptxkit.instruction import Operand

    Definitions = Mapping[str, Sequence[Site]]
    #: The joins of the renamed registers: ``{version: [(predecessor, input version)]}``.
    Joins = Mapping[str, list[tuple[int, str]]]

#: The comparisons that fail where the counter meets the limit, by the sign of its step.
_FAILS_AT_LIMIT = {1: ("ne", "lt", "lo"), -1: ("ne", "gt", "hi")}
#: The most values of a count taken one by one.
_FEW = 4096


class Term(Record):
    """A number a trip loop starts or ends its counter at: ``value`` ("constant"), the
    value the counter enters the loop with, when it is a few numbers ("entered"), ``sign *
    key`` ("register"), ``sign * (key & ~mask)`` ("masked", set at `site` from the
    ``key`` it reads, through ``a`` set at `via` in a block before), or the counter's
    start plus ``value`` ("from start", `site` the ``add`` that computes it from the
    start before the loop)."""

    kind: str
    key: str = ""
    value: int = 0
    sign: int = 1
    mask: int = 0
    site: "Site" = (0, 0)
    #: Where ``a = n & m`` is set for a masked term's ``sub``, when not in its block, and ``a``.
    via: "Site | None" = None
    via_key: str = ""

    def negated(self) -> Term:
        return self._replace(sign=-self.sign, value=-self.value)


class Stepped(Record):
    """A register a trip loop steps once a trip: its `key`, `step`, the `site` of the
    ``add``, and the register the loop's entry block copies into it last (`moved_from`,
    set once outside the loop and not after the copy; "" where none is)."""

    key: str
    step: int
    site: "Site"
    moved_from: str = ""


class TripLoop(Record):
    """A loop whose trips a counter bounds (the module docstring): its `header`, its one
    `latch`, the one block that enters it (`entry`) and the block the latch leaves to
    (`exit`); the test's `comparison` (the loop goes on where it holds: ``ne``, where
    the counter equals the limit at the exit, ``lt``, ``lo``, ``gt`` or ``hi``) and the
    type it compares (`kind`, such as ``s32``); the `counter`'s key, its `step`, `start`
    (`set_at`: the ``mov`` of the entry block that sets it, if one does) and `limit`; the
    registers stepped once a trip (`Stepped`); the loop's `blocks`; and the keys the
    bound reads (sliced in wherever a stepped register is followed)."""

    header: int
    latch: int
    entry: int
    exit: int
    comparison: str
    kind: str
    counter: str
    step: int
    start: Term
    set_at: "Site | None"
    limit: Term
    stepped: tuple[Stepped, ...]
    blocks: frozenset[int]
    reads: tuple[str, ...]


def _find(flow: FlowGraph) -> tuple[TripLoop, ...]:
    """The graph's `TripLoop`s."""
    definitions = REGISTER_DEFINITIONS.of(flow)
    dominators = DOMINATORS.of(flow)
    innermost = LOOPS.of(flow).innermost()
    found = []
    for loop in LOOPS.of(flow).loops:
        if len(loop.latches) != 1 or len(flow.pred[loop.header]) != 2:
            continue
        latch = loop.latches[0]
        entry = next((p for p in flow.pred[loop.header] if p not in loop.blocks), None)
        test = None if entry is None else _exit_test(flow, loop, latch, definitions)
        if entry is None or test is None:
            continue
        counter, step, limit, comparison, kind = test
        exit = next(block for block in flow.succ[latch] if block not in loop.blocks)
        stepped = tuple(_stepped(flow, loop, latch, entry, definitions, dominators, innermost))
        if not any(found.key == counter and found.step == step for found in stepped):
            continue
        set_at = _last_write(definitions, counter, entry, len(flow.blocks[entry].instructions))
        start = _start(flow, (entry, set_at), definitions, loop) if set_at is not None else Term("entered")
        reads = {counter, start.key, limit.key, _key_at(flow, limit.site) if limit.kind == "from start" else ""}
        found.append(TripLoop(loop.header, latch, entry, exit, comparison, kind, counter, step, start,
                              (entry, set_at) if set_at is not None else None, limit, stepped,
                              frozenset(loop.blocks), tuple(sorted(reads - {""}))))
    return tuple(found)


def _key_at(flow: FlowGraph, site: Site) -> str:
    """The key the instruction at `site` writes first (its block's copy's)."""
    block = flow.blocks[site[0]]
    return _prefix(flow, site[0]) + str(block.instructions[site[1]].operands[0].name)


def _prefix(flow: FlowGraph, block: int) -> str:
    context = flow.blocks[block].context
    return context.prefix if context is not None else ""


def _start(flow: FlowGraph, site: Site, definitions: Definitions, loop: Loop) -> Term:
    """The counter's start where the entry block sets it at `site`: a ``mov`` of a
    constant or of a register set outside the loop, or ``n & ~m`` computed there; else
    the value it enters with."""
    block = flow.blocks[site[0]]
    guard, _, base, _ = block.heads[site[1]]
    operands = block.instructions[site[1]].operands
    if guard is not None or base != "mov" or len(operands) != 2:
        return (_masked(flow, site, definitions) if guard is None else None) or Term("entered")
    start = _term(flow, loop, operands[1], _prefix(flow, site[0]), definitions)
    if start is None or start.kind == "from start":  # a sum of another start: what it enters with
        return Term("entered")
    return start


def _exit_test(flow: FlowGraph, loop: Loop, latch: int,
               definitions: Definitions) -> tuple[str, int, Term, str, str] | None:
    """``(counter key, step, limit, comparison, type)`` of the test that ends `latch`
    when it bounds the trips: ``@p bra`` to the header or out of the loop, ``p`` set in
    `latch` by an integer ``setp`` of the counter (stepped in the loop before it)
    against a limit set outside the loop, or of ``c + k`` against 0."""
    block = flow.blocks[latch]
    guard = block.heads[-1][0] if block.terminator is not None and block.heads[-1][2] == "bra" else None
    successors = set(flow.succ[latch])
    if guard is None or len(successors) != 2 or len(successors - loop.blocks) != 1:
        return None
    continue_taken = "taken" in flow.kinds.get((latch, loop.header), "")
    prefix = _prefix(flow, latch)
    at = _last_write(definitions, prefix + guard.register, latch, len(block.instructions) - 1)
    if at is None or block.heads[at][0] is not None or block.heads[at][2] != "setp":
        return None
    parts = block.heads[at][1].split(".")
    operands = block.instructions[at].operands
    if len(parts) != 3 or len(operands) != 3 or parts[2] not in INTEGER_TYPES:
        return None
    comparison = parts[1] if continue_taken != guard.negated else NEGATED_COMPARISONS.get(parts[1], "")
    for left, right, compared in ((operands[1], operands[2], comparison),
                                  (operands[2], operands[1], SWAPPED_COMPARISONS.get(comparison, ""))):
        found = _counter_against(flow, loop, (latch, at), left, right, compared, definitions)
        if found is not None:
            return (*found, parts[2])
    return None


def _counter_against(flow: FlowGraph, loop: Loop, test: Site, left: Operand, right: Operand, comparison: str,
                     definitions: Definitions) -> tuple[str, int, Term, str] | None:
    """`_exit_test` for ``left <comparison> right`` at `test` (the loop goes on where it
    holds): `left` the counter, or ``c + k`` compared with 0 (``c`` runs to ``-k``)."""
    if left.kind != "register":
        return None
    prefix = _prefix(flow, test[0])
    key = prefix + str(left.name)
    step = _step_before(flow, loop, key, definitions, test)
    if step is not None:
        limit = _term(flow, loop, right, prefix, definitions)
        return (key, step, limit, comparison) \
            if limit is not None and comparison in _FAILS_AT_LIMIT[(step > 0) - (step < 0)] else None
    at = _last_write(definitions, key, test[0], test[1])
    if comparison != "ne" or right.kind != "immediate" or right.value != 0 or at is None:
        return None
    head, operands = flow.blocks[test[0]].heads[at], flow.blocks[test[0]].instructions[at].operands
    if head[0] is not None or head[2] != "add" or len(operands) != 3:
        return None
    for counter, other in ((operands[1], operands[2]), (operands[2], operands[1])):
        if counter.kind != "register" or other.kind != "register":
            continue
        step = _step_before(flow, loop, prefix + str(counter.name), definitions, (test[0], at))
        limit = _term(flow, loop, other, prefix, definitions)
        if step is not None and limit is not None and limit.kind != "from start":
            return prefix + str(counter.name), step, limit.negated(), "ne"
    return None


def _step_before(flow: FlowGraph, loop: Loop, key: str, definitions: Definitions, reading: Site) -> int | None:
    """`_step_in_loop` where the step comes before `reading` (an instruction of the
    latch) in a trip: the test reads the counter after its step."""
    inside = [site for site in definitions.get(key, ()) if site[0] in loop.blocks]
    if len(inside) != 1 or inside[0][0] == reading[0] and inside[0][1] >= reading[1]:
        return None
    return _constant_step(flow, inside[0], key)


def _step_in_loop(flow: FlowGraph, loop: Loop, key: str, definitions: Definitions) -> int | None:
    """The constant the loop adds to `key`, where its one write in the loop is ``add key,
    key, U`` or ``sub key, key, U`` (where it is, `_stepped` checks)."""
    inside = [site for site in definitions.get(key, ()) if site[0] in loop.blocks]
    return _constant_step(flow, inside[0], key) if len(inside) == 1 else None


def _constant_step(flow: FlowGraph, site: Site, key: str) -> int | None:
    """``U`` of an unguarded ``add key, key, U`` (``-U`` of a ``sub``) at `site`."""
    block = flow.blocks[site[0]]
    guard, _, base, _ = block.heads[site[1]]
    operands = block.instructions[site[1]].operands
    if guard is not None or base not in ("add", "sub") or len(operands) != 3 or operands[1].kind != "register" \
            or _prefix(flow, site[0]) + str(operands[1].name) != key or operands[2].kind != "immediate" \
            or not isinstance(operands[2].value, int) or not operands[2].value:
        return None
    return operands[2].value if base == "add" else -operands[2].value


def _term(flow: FlowGraph, loop: Loop, operand: Operand, prefix: str, definitions: Definitions) -> Term | None:
    """`operand` as a `Term`: a constant, or a register no instruction of the loop writes."""
    if operand.kind == "immediate" and isinstance(operand.value, int):
        return Term("constant", value=operand.value)
    if operand.kind != "register":
        return None
    key = prefix + str(operand.name)
    sites = definitions.get(key, ())
    if len(sites) != 1 or sites[0][0] in loop.blocks:
        return None
    block = flow.blocks[sites[0][0]]
    guard, _, base, _ = block.heads[sites[0][1]]
    operands = block.instructions[sites[0][1]].operands
    if guard is None and base == "add" and len(operands) == 3 and operands[1].kind == "register" \
            and operands[2].kind == "immediate" and isinstance(operands[2].value, int):
        return Term("from start", prefix + str(operands[1].name), operands[2].value, site=sites[0])
    masked = _masked(flow, sites[0], definitions)
    return masked if masked is not None else Term("register", key, site=sites[0])


def _masked(flow: FlowGraph, site: Site, definitions: Definitions) -> Term | None:
    """``n & ~m`` (sign 1) or its negation, set at `site` by ``and d, n, ~m``, ``sub d,
    n, a`` or ``sub d, a, n`` with ``a = n & m`` set before it: in the same block, ``n``
    not written between, or in a block that dominates it (`_terms_hold` checks that no
    way between writes ``a`` or ``n``); ``m = 2^j - 1``, ``n`` set once (its value is
    read where the loop is entered)."""
    block, prefix = flow.blocks[site[0]], _prefix(flow, site[0])
    base, operands = block.heads[site[1]][2], block.instructions[site[1]].operands
    if len(operands) != 3 or operands[1].kind != "register":
        return None
    if base == "and" and operands[2].kind == "immediate" and isinstance(operands[2].value, int):
        mask = ~operands[2].value & 0xFFFFFFFF
        n_key = prefix + str(operands[1].name)
        return Term("masked", n_key, mask=mask, site=site) \
            if mask < 1 << 16 and not mask & (mask + 1) and len(definitions.get(n_key, ())) == 1 else None
    if base != "sub" or operands[2].kind != "register":
        return None
    for n, a, sign in ((operands[1], operands[2], 1), (operands[2], operands[1], -1)):
        n_key, a_key = prefix + str(n.name), prefix + str(a.name)
        at = nearest_write(flow, definitions, a_key, site)
        if at is None:
            continue
        head, anded = flow.blocks[at[0]].heads[at[1]], flow.blocks[at[0]].instructions[at[1]].operands
        if head[0] is not None or head[2] != "and" or len(anded) != 3 or anded[1].kind != "register" \
                or anded[1].name != n.name or anded[2].kind != "immediate" or not isinstance(anded[2].value, int):
            continue
        mask = anded[2].value
        if mask > 0 and not mask & (mask + 1) and len(definitions.get(n_key, ())) == 1 and \
                not any(b == site[0] and at[1] < p < site[1] for b, p in definitions.get(n_key, ())):
            return Term("masked", n_key, sign=sign, mask=mask, site=site,
                        via=at if at[0] != site[0] else None, via_key=a_key)
    return None


def _last_write(definitions: Definitions, key: str, block: int, position: int) -> int | None:
    """The last position before `position` in `block` that writes `key`, or None."""
    found = [p for b, p in definitions.get(key, ()) if b == block and p < position]
    return max(found) if found else None


def _stepped(flow: FlowGraph, loop: Loop, latch: int, entry: int, definitions: Definitions,
             dominators: DominatorTree, innermost: Mapping[int, Loop]) -> list[Stepped]:
    """The registers whose one write in `loop` is ``x = x + A`` in a block of the loop
    itself (no inner loop runs it twice a trip) that dominates the latch (every trip
    runs it once)."""
    found = []
    for index in sorted(loop.blocks):
        if innermost.get(index) is not loop or not dominators.dominates(index, latch):
            continue
        block, prefix = flow.blocks[index], _prefix(flow, index)
        for position, head in enumerate(block.heads):
            if head[2] not in ("add", "sub"):  # before the operands, which are parsed when first read
                continue
            operands = block.instructions[position].operands
            if len(operands) != 3 or operands[0].kind != "register":
                continue
            key = prefix + str(operands[0].name)
            step = _constant_step(flow, (index, position), key)
            if step is not None and _step_in_loop(flow, loop, key, definitions) == step:
                found.append(Stepped(key, step, (index, position), _moved_from(flow, loop, entry, key, definitions)))
    return found


def _moved_from(flow: FlowGraph, loop: Loop, entry: int, key: str, definitions: Definitions) -> str:
    """The register the last write of `key` in block `entry` copies, where that is an
    unguarded ``mov`` of a register set once, outside `loop`, and not after it in
    `entry`; else ""."""
    at = _last_write(definitions, key, entry, len(flow.blocks[entry].instructions))
    if at is None:
        return ""
    head, operands = flow.blocks[entry].heads[at], flow.blocks[entry].instructions[at].operands
    if head[0] is not None or head[2] != "mov" or len(operands) != 2 or operands[1].kind != "register":
        return ""
    source = _prefix(flow, entry) + str(operands[1].name)
    sites = definitions.get(source, ())
    if len(sites) != 1 or sites[0][0] in loop.blocks or sites[0][0] == entry and sites[0][1] > at:
        return ""
    return source


#: A graph's `TripLoop`s, found from its code alone.
TRIP_LOOPS: Fact[tuple[TripLoop, ...]] = Fact("trip loops", _find, needs=(LOOPS, DOMINATORS, REGISTER_DEFINITIONS))


def trip_loops(flow: FlowGraph) -> tuple[TripLoop, ...]:
    """The loops of `flow` whose trips a counter may bound (`TripLoop`), once per graph.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<4>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tadd.s32 %r2, %r1, 2;\\n"
    ...     "L:\\n\\tadd.s32 %r1, %r1, 1;\\n\\tsetp.lt.u32 %p1, %r1, %r2;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> [(t.counter, t.step, t.limit.kind, t.limit.value) for t in trip_loops(flow_graph(m.function("k")))]
    [('%r1', 1, 'from start', 2)]
    """
    return TRIP_LOOPS.of(flow)


class TripBounds(Record):
    """What `trip_bounds` hands the solver: narrowings of the registers a loop steps and
    of what leaves it, by the block where they start to hold; key -> the versions whose
    narrowings read it; and ``(key, header)`` -> the trips of a loop entered with `key`
    copied from another register, and the versions of `key` before and after a trip's
    step (`stepped_offset`)."""

    narrowing: "dict[int, Narrowings]"
    depends: dict[str, set[str]]
    offsets: "dict[tuple[str, int], tuple[Count, str, str]]"


def trip_bounds(analysis: Tripping, loops: Sequence[TripLoop], joins: Joins, narrowed: Iterable[int]) -> TripBounds:
    """The narrowings of the registers each of `loops` steps, where their joins are in
    `joins` (the analysis's, after renaming): from the header on, the version the header
    joins is ``x0 + A * [0, T - 1]`` (however far the join itself widened); and where
    an exact test (``!=``) leaves the loop, ``x0 + A * t`` for the trips ``t`` the count
    allows in the block that reads it (the exit block, and each block of `narrowed`,
    where conditions narrow registers, that it dominates)."""
    found = TripBounds({}, {}, {})
    narrowed = sorted(narrowed)
    for loop in loops:
        entered = dict(joins.get(f"{loop.counter}@join{loop.header}", ())).get(loop.entry)
        if entered is None or not _terms_hold(analysis, loop, entered):
            continue
        count = Count(loop, entered)
        read = {entered} | {term.key for term in (loop.start, loop.limit) if term.kind in ("register", "masked")}
        after = [block for block in [loop.exit, *narrowed] if analysis.dominators.dominates(loop.exit, block) and
                 all(_kept(analysis, term.site, block, term.key) for term in (loop.start, loop.limit)
                     if term.kind == "masked")] if loop.comparison == "ne" else []
        after = list(dict.fromkeys(after))
        definitions = analysis.definitions()
        for key, step, site, moved_from in loop.stepped:
            version = f"{key}@join{loop.header}"
            inputs = dict(joins.get(version, ()))
            back, start = inputs.get(loop.latch), inputs.get(loop.entry)
            if back is None or start is None:
                continue
            copied = _last_write(definitions, key, loop.entry, len(analysis.flow.blocks[loop.entry].instructions))
            if moved_from and copied is not None and analysis.defs.get(((loop.entry, copied), key)) == start:
                found.offsets[(key, loop.header)] = count, version, back
            found.narrowing.setdefault(loop.header, []).append((version, _stepped_by(count, loop.entry, start, step)))
            for source in read | {start}:
                found.depends.setdefault(source, set()).add(version)
            leaving = f"{key}@join{loop.exit}"
            if leaving not in joins and analysis.flow.pred[loop.exit] != [loop.latch]:
                continue
            if leaving not in joins:
                leaving = back
            for block in after:
                found.narrowing.setdefault(block, []).append(
                    (leaving, _leaving(count, block, loop, start, step, back, joins.get(leaving, ()))))
            for source in read | {start, *(source for _, source in joins.get(leaving, ()))}:
                found.depends.setdefault(source, set()).add(leaving)
    return found


def _terms_hold(analysis: Tripping, loop: TripLoop, entered: str) -> bool:
    """Whether the start and limit are those of the loop's entry with the counter's
    version `entered`: a ``mov`` in the entry block sets that version; a limit that is
    the start plus a constant is computed from it; ``n & ~m`` is computed before the
    loop from the ``n`` that reaches it (no way from there writes ``n`` again)."""
    if loop.set_at is not None and analysis.defs.get((loop.set_at, loop.counter)) != entered:
        return False
    limit = loop.limit
    if limit.kind == "from start" and not (
            limit.key == loop.counter and analysis.uses.get((limit.site, limit.key)) == entered or
            limit.key == _copied_into(loop, loop.counter) and _kept(analysis, limit.site, loop.entry, limit.key)):
        return False
    return all(analysis.dominators.dominates(term.site[0], loop.entry) and
               (term.kind == "register" or _set_before(analysis, term.key, term.site) and
                _kept(analysis, term.site, loop.entry, term.key)) and
               (term.via is None or
                all(_kept(analysis, term.via, term.site[0], key) for key in (term.via_key, term.key)))
               for term in (loop.start, limit) if term.kind in ("register", "masked"))


def _set_before(analysis: Tripping, key: str, site: Site) -> bool:
    """Whether the one write of `key` comes before `site` on every way there."""
    written = analysis.definitions().get(key, ())
    return len(written) == 1 and (written[0][1] < site[1] if written[0][0] == site[0] else
                                  analysis.dominators.dominates(written[0][0], site[0]))


def _kept(analysis: Tripping, site: Site, entry: int, key: str) -> bool:
    """Whether no instruction writes `key` after `site` on the way to the end of block
    `entry` (the instruction at `site` reads the `key` that reaches there): none later
    in its block, none on a way from there to `entry` that does not pass it again."""
    if any(block == site[0] and position > site[1] for block, position in analysis.definitions().get(key, ())):
        return False
    if site[0] == entry:
        return True
    prefix = analysis.prefix(entry)
    return key.startswith(prefix) and unwritten_between(analysis, site[0], entry, [key[len(prefix):]])


def _copied_into(loop: TripLoop, key: str) -> str:
    """The register the loop's entry block copies into `key` (`Stepped.moved_from`)."""
    return next((stepped.moved_from for stepped in loop.stepped if stepped.key == key), "")


class Count:
    """The trips of a `TripLoop` entered with the counter's version `entered`, read from
    the analysis as it solves."""

    def __init__(self, loop: TripLoop, entered: str) -> None:
        self.loop, self.entered = loop, entered

    def distances(self, a: Solved, block: int) -> list[int] | None:
        """``L - c0`` for the values start and limit may have in `block` (paired where
        both come from one count); None where they are not a few numbers, empty where
        they have no value yet."""
        start, limit = self.loop.start, self.loop.limit
        if limit.kind == "from start":
            return [limit.value]
        starts, limits = _numbers(a, start, block, self.entered), _numbers(a, limit, block, self.entered)
        if starts is None or limits is None:
            return None
        if start.key == limit.key and start.key:
            return [limits[n] - starts[n] for n in limits]
        return [end - first for end in limits.values() for first in starts.values()]

    def most(self, a: Solved) -> int | None:
        """The most trips: None where unbounded, 0 where not known yet. Where every
        distance is a positive multiple of the step, the counter meets the limit (in
        the register's bits, whatever wraps on the way) on the trip the distance says,
        and the test fails there; else an ordered test (``lt``, ``gt``) ends the loop on
        the first trip that steps past the limit, where no step wraps (`_ordered`)."""
        distances = self.distances(a, self.loop.entry)
        step = self.loop.step
        if distances is not None and not any(distance % step or distance // step < 1 for distance in distances):
            return max((distance // step for distance in distances), default=0)
        return None if self.loop.comparison == "ne" else _ordered(a, self.loop, self.entered)

    def made(self, a: Solved, block: int) -> list[int] | None:
        """The trips a run that left through the latch made, as `block` narrows the count:
        the distances in `block` that are a positive multiple of the step (no run left
        through the latch with another); None where the loop is not bounded, none where
        no count has a value yet (no run enters the loop, or none is known to)."""
        most = self.most(a)
        if not most:
            return None if most is None else []
        distances = self.distances(a, block)
        step = self.loop.step
        return None if distances is None else \
            sorted({d // step for d in distances if d % step == 0 and d // step >= 1})


def _stepped_by(count: Count, entry: int, start: str, step: int) -> Narrow:
    """What the header's join holds of a register stepped by `step`: its value on entry
    (the version `start`, as it holds in block `entry`) plus ``step * [0, T - 1]``."""

    def narrow(a: Solved, value: Value) -> Value:
        most = count.most(a)
        if most is None:
            return value
        first = a._narrowed(entry, start, a.values.get(start, ()))
        if not most or not first:  # not known yet
            return ()
        if is_top(first):
            return value
        low, high = sorted((0, step * (most - 1)))
        return within(value, add(first, number(low, high, abs(step))))

    return narrow


def _leaving(count: Count, block: int, loop: TripLoop, start: str, step: int, back: str,
             inputs: Sequence[tuple[int, str]]) -> Narrow:
    """What a register stepped by `step` holds in `block` (the loop's exit or a block it
    dominates) where it left the loop through its exact test: its value on entry plus
    `step` times the trips made; with `inputs`, the join at the exit block, whose other
    inputs keep their values."""

    def narrow(a: Solved, value: Value) -> Value:
        made = count.made(a, block)
        first = a._narrowed(loop.entry, start, a.values.get(start, ()))
        if made is None or not first or is_top(first):
            return value
        out: Value = ()
        for trips in made:
            out = join(out, add(first, number(step * trips)))
        for predecessor, source in inputs:
            if predecessor != loop.latch:
                out = join(out, a._narrowed(predecessor, source, a.values.get(source, ())))
        return within(value, out)

    return narrow


def _ordered(a: Solved, loop: TripLoop, entered: str) -> int | None:
    """The most trips of a loop that goes on while ``c < L`` (``c > L`` stepping down):
    ``max(1, ceil((L - c0) / U))`` over the start's and limit's ranges as the test's
    type reads them, where no step leaves that type (the first reaches ``c0 + U``, the
    others at most ``L + U - 1``); None otherwise, 0 where not known yet."""
    start, limit = (_range(a, term, loop, entered) for term in (loop.start, loop.limit))
    if start is None or limit is None:
        return None
    if not start or not limit:
        return 0
    bits = int(loop.kind[1:])
    low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if loop.kind[0] == "s" else (0, (1 << bits) - 1)
    step = loop.step
    if step > 0 and start[1] + step <= high and limit[1] + step - 1 <= high:
        return max(1, -(-(limit[1] - start[0]) // step))
    if step < 0 and start[0] + step >= low and limit[0] + step + 1 >= low:
        return max(1, -(-(start[1] - limit[0]) // -step))
    return None


def _range(a: Solved, term: Term, loop: TripLoop, entered: str) -> tuple[int, ...] | None:
    """``(lowest, highest)`` of what `term` may be where the loop is entered, as the
    test's type reads it; None where unbounded or no number, ``()`` where not known yet."""
    if term.kind == "constant":
        return term.value, term.value
    if term.kind not in ("entered", "register"):
        return None
    key = entered if term.kind == "entered" else term.key
    value = a._narrowed(loop.entry, key, a.values.get(key, ()))
    if not value:
        return ()
    value = compared_as(loop.kind)(value)
    bits = int(loop.kind[1:])
    low, high = (-(1 << bits - 1), (1 << bits - 1) - 1) if loop.kind[0] == "s" else (0, (1 << bits) - 1)
    if any(atom.form != NUM or atom.lo < low or atom.hi > high for atom in value):
        return None
    lowest, highest = min(atom.lo for atom in value), max(atom.hi for atom in value)
    return (lowest, highest) if term.sign > 0 else (-highest, -lowest)


def _numbers(a: Solved, term: Term, block: int, entered: str) -> dict[int, int] | None:
    """What `term` may be in `block` (where the loop is entered, or a block after it),
    by the value of the register it is computed from (a constant by 0); None where they
    are many or not numbers, empty where they have no value yet."""
    if term.kind == "constant":
        return {0: term.value}
    key = entered if term.kind == "entered" else term.key
    value = a._narrowed(block, key, a.values.get(key, ()))
    if not value:
        return {}
    found = _few_integers(value)
    if found is None:
        return None
    return {n: term.sign * (n & ~term.mask if term.kind == "masked" else n) for n in found}


def _few_integers(value: Value) -> list[int] | None:
    """The integers a value of numbers may be, when there are at most `_FEW`."""
    found: list[int] = []
    for atom in value:
        if atom.form != NUM or (atom.hi - atom.lo) // max(atom.step, 1) >= _FEW - len(found):
            return None
        found.extend(range(atom.lo, atom.hi + 1, max(atom.step, 1)))
    return found


def stepped_offset(analysis: Counting, block: int, operands: Sequence[Operand], otherwise: Compute) -> Refined | None:
    """``(compute, sources)`` for ``sub d, x, s`` in a trip loop that steps ``x`` by ``A``
    and is entered with ``x`` copied from ``s``: ``d`` is ``A * [0, T - 1]`` where the
    trip has not stepped ``x`` yet and ``A * [1, T]`` where it has (`otherwise` where
    the loop's bound does not hold); None for another ``sub``. ThunderKittens' FFT
    convolution addresses its loads so, ``base + ((i - i0) << 13)``.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> from ptxkit.cfg.values.registers import register_values
    >>> from ptxkit.cfg.values.values import show
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k(.param .u32 n)\\n"
    ...     "{\\n.reg .b32 %r<8>;\\n.reg .pred %p<2>;\\n\\tld.param.u32 %r1, [n];\\n\\tadd.s32 %r2, %r1, 2;\\n"
    ...     "\\tmov.u32 %r3, %r1;\\nL:\\n\\tsub.s32 %r4, %r3, %r1;\\n\\tshl.b32 %r5, %r4, 13;\\n"
    ...     "\\tadd.s32 %r3, %r3, 1;\\n\\tsetp.lt.u32 %p1, %r3, %r2;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> shift = flow.blocks[1].instructions[1]
    >>> show(register_values(flow, {"offset": (1, 1, shift.operands[0])})["offset"])
    '[0, 8192] step 8192'
    """
    if len(operands) != 3 or operands[1].kind != "register" or operands[2].kind != "register":
        return None
    prefix = analysis.prefix(block)
    x, s = prefix + str(operands[1].name), prefix + str(operands[2].name)
    for loop in trip_loops(analysis.flow):
        stepped = next((found for found in loop.stepped if found.key == x and found.moved_from == s), None)
        if block in loop.blocks and stepped is not None:
            return _offset(loop.header, stepped.key, stepped.step, otherwise), list(loop.reads)
    return None


def _offset(header: int, key: str, step: int, otherwise: Compute) -> Compute:
    """`stepped_offset`'s computation, reading the loop's trips as the analysis solves."""

    def compute(a: Solving, at: Point) -> list[Value]:
        found = a.trip_offsets.get((key, header))
        most = found[0].most(a) if found is not None else None
        version = a.uses.get((at, key))
        if found is None or most is None or version not in found[1:]:
            return otherwise(a, at)
        if not most:
            return [()]
        first, last = (0, most - 1) if version == found[1] else (1, most)
        low, high = sorted((step * first, step * last))
        return [number(low, high, abs(step))]

    return compute
