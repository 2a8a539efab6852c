"""Arrives on an mbarrier that completes once (docs/fence.md §4.5).

CUTLASS's Blackwell kernels start their C loads only after the first A/B loads: the
producer arrives on a "load-order" mbarrier in the first trip of its tile loop alone (a
do-once predicate, false on entry and set on every way round), and the loader waits on
it once, for parity 0. Whatever the producer has pending there, it made before that
barrier completed, so no access that must follow the completion (the epilogue's reads of
C, which wait for loads that wait for the barrier) is handed over by that arrive.

`export_limits` finds, for every mbarrier B whose arrives each run at most once per
thread (such a barrier completes one phase, docs/fence.md §8, and each of its arrives
comes before that completion), the blocks a run of the CTA can reach before B completes:
from the entry, over the edges the do-once predicates allow, and past a wait only when
it can pass. A wait for parity 0 (the first time each thread reaches it) on B never
passes there; one on another mbarrier passes once an arrive on that mbarrier is
reachable, or when another CTA may arrive on it. The arrives on B then hand over only
the accesses made in those blocks.

An arrive that a thread runs once, in the first trip of a loop, hands over none of the
accesses that thread makes only after it: the graph's back edge brings the later trips'
accesses to it, but no thread runs it again. Its own accesses it hands over are those
made in the blocks reached from the entry without it (over the edges the do-once
predicates allow, and run by some of its threads: `ptxkit.cfg.values.thread_sets`) and before
it in its block; of what other threads handed to it, only what the waits it passes
before it import (those threads may have made it in any trip).

>>> import ptxkit
>>> from ptxkit.cfg.flow.inline import inlined_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .pred %p<3>;\\n\\tmov.pred %p1, 0;\\nL:\\n\\t@%p1 bra N;\\n\\tbar.sync 1;\\nN:\\n"
...     "\\tmov.pred %p1, -1;\\n\\t@%p2 bra L;\\n\\tret;\\n}\\n")
>>> flow = inlined_graph(m.function("k"))
>>> trips = Trips(flow)
>>> [(block, trips.runs_once(block)) for block in range(len(flow))]
[(0, True), (1, False), (2, True), (3, False), (4, True)]
"""

from __future__ import annotations

from itertools import product

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.dataflow import bits
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.loops import loop_forest
from ptxkit.cfg.flow.operands import destinations, integer_computation
from ptxkit.cfg.sync.events import Kind, on_an_mbarrier
from ptxkit.cfg.sync.locations import CLUSTER, overlaps
from ptxkit.cfg.values.divergence import conditional, definitions, guard_of, qualified
from ptxkit.cfg.values.thread_sets import runners
from ptxkit.isa import INTEGER_TYPES
from ptxkit.isa_eval import operation

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Iterable, Sequence, Set

    from ptxkit.cfg.flow.graph import FlowGraph, HeadTuple
    from ptxkit.cfg.flow.loops import Loop
    from ptxkit.cfg.sync.events import Definitions, Event
    from ptxkit.cfg.sync.protocols import Fact, MbarrierOp
    from ptxkit.cfg.sync.locations import Location
    from ptxkit.instruction import Operand

    #: Constants `Trips.reach` follows: qualified register -> its value.
    State = dict[str, int]
    #: How `Trips._run` computes a one-target instruction's value (`_folding`): the
    #: operation's ``apply`` and each source, a number or the qualified register it reads;
    #: `_GENERAL` for what `_fold` works out (a ``selp``); None where it is never known.
    Folding = tuple[Callable[..., int | None], tuple[int | str, ...]] | str | None
    #: An instruction that writes what `Trips.reach` follows: its position, the result
    #: predicate when it is an mbarrier wait, the registers it writes, its guard
    #: (qualified predicate, negated), its named operands (name -> qualified name) and how
    #: its value is computed (`Folding`), decoded once.
    Followed = tuple[int, str | None, list[str], tuple[str, bool] | None, dict[str, str], Folding]
    #: `export_limits`'s answer for an arrive: the facts it may hand over, those its own
    #: thread may have made before it, and the waits it may have passed (None: any).
    Limit = tuple[int, int, tuple[int, ...] | None]
    #: An instruction, by its block and position.
    Site = tuple[int, int]

__all__ = ["Trips", "export_limits"]

#: Constant sets kept per block before they merge, and registers followed at most.
_SETS, _TRACKED = 8, 4096
#: Operand kinds that name a register (one declared inside an inline-asm scope, such as
#: CUTLASS's ``.reg .pred P1``, has no ``%`` and reads as a symbol).
_NAMED = ("register", "symbol")
#: How many definitions deep a wait's parity is followed, and how many values it may take.
_DEPTH, _WIDTH = 24, 8
#: The arithmetic `_fold` evaluates on sets of at most `_WIDTH` combinations of values.
_ARITHMETIC = frozenset(("xor", "and", "or", "add", "sub"))
#: The opcodes `_fold` evaluates (through `ptxkit.isa_eval`); `reach` leaves out the
#: additive ones (a loop counter would take a new constant every trip).
_FOLDED = frozenset(("mov", "selp", "setp", "not", *_ARITHMETIC))
_PROPAGATED = _FOLDED - {"add", "sub"}


class Trips:
    """What runs once per thread, which waits cannot pass before a barrier completes,
    and what a wait's parity is, on one (inlined) flow graph.

    `reach` propagates constants: of the predicates the branches test, the results
    and parities of mbarrier waits, and the registers they are computed from (``mov``,
    ``selp``, ``setp``, logic), a few sets of them per block, so that a do-once
    predicate keeps a loop's later trips out of its first-trip code and a wait that
    fails keeps the code behind it out.
    """

    def __init__(self, flow: FlowGraph) -> None:
        self.flow = flow
        self.definitions: Definitions = definitions(flow)
        self.dominators = DominatorTree.of(flow)
        self.forest = loop_forest(flow)
        self.innermost = self.forest.innermost()
        self.waits: dict[Site, str] = {}  # (block, position) of an mbarrier wait -> its result predicate
        self._roots: set[str] = set()  # what the branches test, and the waits' parities
        self.tests: dict[int, tuple[str, bool]] = {}  # block -> (predicate, negated) of the branch ending it
        for block in range(len(flow)):
            if conditional(flow, block):  # a guarded branch: its guard and `guard_of` are there
                guard = flow.blocks[block].heads[-1][0]
                self.tests[block] = (guard_of(flow, block), guard.negated)  # type: ignore[assignment, union-attr]
                self._roots.add(self.tests[block][0])
            for position, head in enumerate(flow.blocks[block].heads):
                if head[2] == "mbarrier" and (".try_wait" in head[1] or ".test_wait" in head[1]):
                    operands = flow.blocks[block].instructions[position].operands
                    if operands and operands[0].kind in _NAMED:
                        self.waits[(block, position)] = qualified(flow, block, operands[0].name)
                    if len(operands) > 2 and operands[2].kind in _NAMED:
                        self._roots.add(qualified(flow, block, operands[2].name))
        self._effects: dict[int, list[Followed]] | None = None  # `effects`, once asked for
        self._live: list[frozenset[str]] | None = None
        self._entry_states: _Reached | None = None
        self._parities: dict[Site, int | None] = {}
        self._flags: dict[int, set[str]] = {}  # loop header -> the predicates it tests and sets to constants
        self._once: dict[int, bool] = {}  # block -> `runs_once`

    @property
    def effects(self) -> dict[int, list[Followed]]:
        """Block -> [(position, wait result, targets, guard, names)]: the instructions that
        write what `reach` follows (built the first time a reach needs them)."""
        if self._effects is None:
            flow = self.flow
            self._effects = {}
            tracked = self._closure(self._roots)
            sites = {site for name in tracked for site in self.definitions.get(name, ())} | set(self.waits)
            for block, position in sorted(sites):
                instruction, head = flow.blocks[block].instructions[position], flow.blocks[block].heads[position]
                names = {o.name: qualified(flow, block, o.name) for o in instruction.operands if o.kind in _NAMED}
                targets = [qualified(flow, block, n) for n in destinations(instruction, head, frozenset())]
                guard = None if head[0] is None else (qualified(flow, block, head[0].register), head[0].negated)
                folding = _folding(head, instruction.operands, names) if len(targets) == 1 else None
                self._effects.setdefault(block, []).append((position, self.waits.get((block, position)), targets,
                                                            guard, names, folding))
        return self._effects

    @property
    def live(self) -> list[frozenset[str]]:
        """`_liveness`, computed once."""
        if self._live is None:
            self._live = self._liveness()
        return self._live

    def _liveness(self) -> list[frozenset[str]]:
        """Block -> the followed registers read on some way from its entry before being
        written: only those are kept in its constants (fewer, and fewer different, sets).
        Solved on bit masks, one bit per register; blocks with the same registers live
        share one set (a few hundred distinct sets of hundreds of registers on graphs of
        a thousand blocks)."""
        flow = self.flow
        bit_of: dict[str, int] = {}

        def mask(names: Iterable[str]) -> int:
            found = 0
            for name in names:
                found |= 1 << bit_of.setdefault(name, len(bit_of))
            return found

        uses = [0] * len(flow)
        kills = [0] * len(flow)
        for block, effects in self.effects.items():
            for position, wait, targets, guard, names, _ in effects:
                operands = flow.blocks[block].instructions[position].operands
                read = mask(names[o.name] for o in (operands[2:3] if wait is not None else operands[1:])
                            if o.kind in _NAMED)
                if guard is not None:
                    read |= mask((guard[0],))
                uses[block] |= read & ~kills[block]
                if guard is None:
                    kills[block] |= mask((wait,) if wait is not None else targets)
        for block, (name, _) in self.tests.items():
            uses[block] |= mask((name,)) & ~kills[block]
        live = list(uses)
        work = list(range(len(flow)))
        while work:
            block = work.pop()
            out = 0
            for successor in flow.succ[block]:
                out |= live[successor]
            new = uses[block] | (out & ~kills[block])
            if new != live[block]:
                live[block] = new
                work.extend(flow.pred[block])
        registers = list(bit_of)
        sets: dict[int, frozenset[str]] = {}
        for found in live:
            if found not in sets:
                sets[found] = frozenset({registers[i] for i in bits(found)})  # from a set: sized to fit
        return [sets[found] for found in live]

    def _closure(self, roots: set[str]) -> set[str]:
        """The registers `roots` are computed from through the operations `reach` follows."""
        tracked: set[str] = set()
        work = list(roots)
        while work and len(tracked) < _TRACKED:
            name = work.pop()
            if name in tracked:
                continue
            tracked.add(name)
            for block, position in self.definitions.get(name, ()):
                if self.flow.blocks[block].heads[position][2] in _PROPAGATED:
                    for operand in self.flow.blocks[block].instructions[position].operands[1:]:
                        if operand.kind in _NAMED:
                            work.append(qualified(self.flow, block, operand.name))
        return tracked

    def _run(self, block: int, state: State, blocked: Container[Site] = frozenset(), stop: int | None = None) -> State:
        """`state` after the instructions of `block` (before position `stop`, when given)."""
        effects = self.effects.get(block)
        if not effects:
            return state
        state = dict(state)
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        for position, wait, targets, guard, names, folding in effects:
            if stop is not None and position >= stop:
                break
            if wait is not None:
                if (block, position) in blocked:
                    state[wait] = 0
                else:
                    state.pop(wait, None)
                continue
            taken = None if guard is None else state.get(guard[0])
            if guard is not None and taken == guard[1]:
                continue  # a guard known false: the instruction does nothing
            new: int | None = None
            if isinstance(folding, tuple):  # every source one number or unknown: one value, or none
                apply, sources = folding
                args = [source if isinstance(source, int) else state.get(source) for source in sources]
                new = None if None in args else apply(*args)
            elif folding is not None:  # `_GENERAL`
                value = _fold(heads[position], instructions[position].operands,
                              lambda operand: _constant(operand, names, state), _PROPAGATED)
                new = next(iter(value)) if value is not None and len(value) == 1 else None
            for name in targets:
                if new is None or (guard is not None and taken is None and new != state.get(name)):
                    state.pop(name, None)
                else:
                    state[name] = new
        return state

    def _edges(self, block: int, state: State) -> list[tuple[int, State]]:
        """(successor, constants on the edge) for the edges the constants allow; a branch
        on a predicate whose value is open tells each edge its value."""
        test = self.tests.get(block)
        live = self.live
        if test is None:
            return [(successor, _kept(state, live[successor])) for successor in self.flow.succ[block]]
        name, negated = test
        value = state.get(name)
        edges: list[tuple[int, State]] = []
        for successor in self.flow.succ[block]:
            implied = int((self.flow.kinds.get((block, successor)) == "taken") != negated)
            if value is None:
                edges.append((successor, _kept({**state, name: implied}, live[successor])))
            elif value == implied:
                edges.append((successor, _kept(state, live[successor])))
        return edges

    def reach(self, starts: dict[int, State], blocked: Container[Site] = frozenset(),
              inside: Container[int] | None = None, resume: _Reached | None = None, again: Iterable[int] = (),
              until: int | None = None) -> _Reached:
        """Block -> the sets of constants on entry (at most `_SETS`; more are merged), for
        the blocks reached from `starts` (block -> a set of constants there) over the edges
        the constants allow, staying in `inside` when given; the waits at `blocked`
        positions fail. `resume` continues an earlier result (fewer waits blocked), running
        the blocks `again` anew. With `until`, the search stops once it reaches that
        block (the result then holds it, and only part of the rest).

        >>> import ptxkit
        >>> from ptxkit.cfg.flow.inline import inlined_graph
        >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
        ...     ".reg .pred %p<2>;\\n\\tmov.pred %p1, 0;\\n\\t@%p1 bra N;\\n\\tbar.sync 1;\\nN:\\n\\tret;\\n}\\n")
        >>> flow = inlined_graph(m.function("k"))
        >>> Trips(flow).reach({0: {}})  # %p1 is not read after the branch: it is not kept
        {0: [{}], 1: [{}], 2: [{}]}
        """
        if resume is None:
            states = _Reached({block: [dict(state)] for block, state in starts.items()})
            work = [(block, state) for block, found in states.items() for state in found]
        else:
            states = resume
            work = [(block, state) for block in again for state in states.get(block, ())]
        merged = states.merged
        while work:
            block, state = work.pop()
            for successor, out in self._edges(block, self._run(block, state, blocked)):
                if inside is not None and successor not in inside:
                    continue
                old = states.get(successor)
                if old is None:
                    states[successor] = [out]
                elif out in old:
                    continue
                elif len(old) >= _SETS or successor in merged:  # one set from now on: what they share
                    merged.add(successor)
                    out = {k: v for k, v in out.items() if all(o.get(k) == v for o in old)}
                    if [out] == old:
                        continue
                    states[successor] = [out]
                else:
                    old.append(out)
                if successor == until:
                    return states
                work.append((successor, out))
        return states

    def runs_once(self, block: int) -> bool:
        """True when no thread runs `block` twice: no way leads from it back to it over
        the edges the constants it starts with allow."""
        found = self._once.get(block)
        if found is None:
            found = self._once[block] = self._runs_once(block)
        return found

    def before_once(self, block: int) -> set[int]:
        """The blocks a thread may run before its one run of `block` (one that
        `runs_once`, in a loop): those of the outermost loop around it reached from the
        loop's entry without it, over the edges the constants allow, and every block
        outside that loop (a thread that leaves the loop never comes back to `block`)."""
        around = max((loop for loop in self.forest.loops if block in loop.blocks), key=lambda loop: len(loop.blocks))
        if self._entry_states is None:
            self._entry_states = self.reach({self.flow.start: {}})
        inside = frozenset(around.blocks) - {block}
        before = set(range(len(self.flow.blocks))) - around.blocks
        for outer in self.flow.pred[around.header]:
            if outer in around.blocks:
                continue
            for state in self._entry_states.get(outer, ()):
                for successor, out in self._edges(outer, self._run(outer, state)):
                    if successor in inside:
                        before.update(self.reach({successor: out}, inside=inside))
        return before

    def _runs_once(self, block: int) -> bool:
        if block not in self.innermost and block not in self.forest.irreducible:
            return True
        loops = [loop for loop in self.forest.loops if block in loop.blocks]
        if block in self.forest.irreducible or not all(self._guarded(block, loop) for loop in loops):
            return False
        if self._entry_states is None:
            self._entry_states = self.reach({self.flow.start: {}})
        around = max((loop.blocks for loop in self.forest.loops if block in loop.blocks), key=len, default=None)
        for state in self._entry_states.get(block, ()):
            for successor, out in self._edges(block, self._run(block, state)):
                if block in self.reach({successor: out}, inside=around, until=block):
                    return False
        return True

    def _guarded(self, block: int, loop: Loop) -> bool:
        """True when a branch inside `loop` on a predicate the loop also sets to a constant
        leads to `block` (the edge dominates it): what a do-once predicate needs, the
        cheap test before `runs_once` follows the loop."""
        flags = self._flags.get(loop.header)
        if flags is None:
            flags = self._flags[loop.header] = {
                name for name, _ in (self.tests[b] for b in loop.blocks if b in self.tests)
                if any(b in loop.blocks and self.flow.blocks[b].heads[p][1] == "mov.pred"
                       and self.flow.blocks[b].instructions[p].operands[1].kind == "immediate"
                       for b, p in self.definitions.get(name, ()))}
        node = block
        while node != loop.header:
            parent = self.dominators.idom.get(node)
            if not isinstance(parent, int) or parent == node:
                return False
            if parent in self.tests and self.tests[parent][0] in flags and all(
                    p == parent or self.dominators.dominates(node, p) for p in self.flow.pred[node]):
                return True
            node = parent
        return False

    def remote(self, block: int, event: Event) -> bool:
        """True when the arrive `event` may land on another CTA's mbarrier (by symmetry, other
        CTAs' copies of it may land on this CTA's): one that crosses CTAs (through the
        cluster window to a rank other than the CTA's own, a multicast commit) or a
        CTA-pair ``tcgen05.commit``."""
        if "cta_group::2" in self.flow.blocks[block].heads[event.position][1]:
            return True
        return event.cross and not self.own_cta(block, event.position)

    def own_cta(self, block: int, position: int) -> bool:
        """True when the mbarrier operand at (block, position) is made in its block by
        ``mapa`` of the CTA's own rank (``%cluster_ctarank``): CUTLASS's arrive through
        ``shared::cluster`` on its own CTA's barrier."""
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        memory = [o for o in instructions[position].operands if o.kind == "memory"]
        if len(memory) != 1 or memory[0].value:
            return False
        for at in range(position - 1, -1, -1):
            operands = instructions[at].operands
            if operands and operands[0].kind in _NAMED and operands[0].name == memory[0].name:
                if heads[at][2] != "mapa" or len(operands) != 3 or operands[2].kind != "register":
                    return False
                sites = self.definitions.get(qualified(self.flow, block, operands[2].name), ())
                return bool(sites) and all(_reads_own_rank(self.flow, site) for site in sites)
        return False

    # -- a wait's parity ---------------------------------------------------------------------
    def waits_for_zero(self, block: int, position: int, states: list[State],
                       blocked: Container[Site] = frozenset()) -> bool:
        """True when the wait at (block, position), reached with constant `states` at its
        block's entry, waits for parity 0 every time a thread runs it: by the constants,
        or because its parity is 0 the first time (`first_parity`) and no loop around
        the wait changes it."""
        guard, opcode, _, _ = self.flow.blocks[block].heads[position]
        operands = self.flow.blocks[block].instructions[position].operands
        if guard is not None or ".parity" not in opcode or len(operands) < 3:
            return False
        parity = operands[2]
        names = {parity.name: qualified(self.flow, block, parity.name)} if parity.kind in _NAMED else {}
        if all(_constant(parity, names, self._run(block, state, blocked, stop=position)) == frozenset({0})
               for state in states):
            return True
        if parity.kind not in _NAMED or self.first_parity(block, position) != 0:
            return False
        loops = [loop.blocks for loop in self.forest.loops if block in loop.blocks]
        return not any(site[0] in blocks for site in self.definitions.get(qualified(self.flow, block, parity.name), ())
                       for blocks in loops)

    def first_parity(self, block: int, position: int) -> int | None:
        """The phase parity an unguarded ``mbarrier.try_wait.parity``/``test_wait.parity``
        waits for the first time each thread reaches it, when every thread that reaches it
        waits for the same one; else None. Definitions are followed on the paths that take
        no back edge of a loop around the wait, and a register that the branches leading
        to the wait compare with a constant (a role's warp index) has that constant."""
        key = (block, position)
        if key in self._parities:
            return self._parities[key]
        guard, opcode, _, _ = self.flow.blocks[block].heads[position]
        operands = self.flow.blocks[block].instructions[position].operands
        parity = None
        if guard is None and ".parity" in opcode and len(operands) >= 3:
            cut = {(latch, loop.header) for loop in self.forest.loops if block in loop.blocks
                   for latch in loop.latches}
            values = _Evaluation(self, cut, self._branch_facts(block)).operand(operands[2], block, position, _DEPTH)
            if values is not None and len({v & 1 for v in values}) == 1:
                parity = next(iter(values)) & 1
        self._parities[key] = parity
        return parity

    def _branch_facts(self, block: int) -> dict[str, int]:
        """Registers known equal to a constant in `block` because every way there takes
        one edge of a branch (other edges into its target come back from inside) whose
        predicate, through ``not``/``and``/``or``, says so of a ``setp.eq``/``setp.ne`` of
        that register and a constant (each defined once, outside loops: one value per
        thread)."""
        facts: dict[str, int] = {}
        idom = self.dominators.idom
        node = block
        while True:
            parent = idom.get(node)
            if not isinstance(parent, int) or parent == node:
                return facts
            kind = self.flow.kinds.get((parent, node))
            entered = all(p == parent or self.dominators.dominates(node, p) for p in self.flow.pred[node])
            if entered and parent in self.tests and kind in ("taken", "fallthrough"):  # a conditional branch
                predicate, negated = self.tests[parent]
                self._implied(predicate, (kind == "taken") != negated, facts, 8, parent)
            node = parent

    def _implied(self, predicate: str, holds: bool, facts: dict[str, int], depth: int, used: int) -> None:
        """Add to `facts` what `predicate` having the value `holds` where block `used` reads
        it says of registers (each definition must come before its reader on every way)."""
        site = self._defined_before(predicate, used)
        if site is None or depth <= 0:
            return
        block, position = site
        _, opcode, base, _ = self.flow.blocks[block].heads[position]
        parts = opcode.split(".")
        operands = self.flow.blocks[block].instructions[position].operands
        names = [qualified(self.flow, block, o.name) for o in operands[1:] if o.kind in _NAMED]
        if base == "not" and len(operands) == 2 and len(names) == 1:
            self._implied(names[0], not holds, facts, depth - 1, block)
        elif (base, holds) in (("and", True), ("or", False)) and len(operands) == 3 and len(names) == 2:
            for name in names:
                self._implied(name, holds, facts, depth - 1, block)
        elif base == "setp" and len(parts) == 3 and parts[1] in ("eq", "ne") and len(operands) == 3:
            left, right = operands[1], operands[2]
            if left.kind == "immediate":
                left, right = right, left
            if left.kind == "register" and right.kind == "immediate" and isinstance(right.value, int) \
                    and (parts[1] == "eq") == holds:
                register = qualified(self.flow, block, left.name)
                if self._defined_before(register, block) is not None and parts[2] in INTEGER_TYPES:
                    facts.setdefault(register, right.value & ((1 << INTEGER_TYPES[parts[2]]) - 1))

    def _defined_before(self, register: str, used: int) -> Site | None:
        """The one definition of `register`, outside loops, when it dominates block `used`."""
        site = self._single_outside_loops(register)
        return site if site is not None and self.dominators.dominates(site[0], used) else None

    def _single_outside_loops(self, register: str) -> Site | None:
        sites = self.definitions.get(register, ())
        if len(sites) != 1 or sites[0][0] in self.innermost or sites[0][0] in self.forest.irreducible:
            return None
        return sites[0]


class _Reached(dict[int, list[dict[str, int]]]):
    """`Trips.reach`'s answer: block -> constant sets, and the blocks whose sets were
    merged into one (they stay one when the reach is resumed)."""

    def __init__(self, states: dict[int, list[State]]) -> None:
        super().__init__(states)
        self.merged: set[int] = set()


class _Evaluation:
    """The values a register may have the first time a thread reaches one point: its
    definitions on the paths that avoid the `cut` edges, folded where they are constants,
    copies, ``selp``, ``setp`` or bitwise and additive arithmetic; None when unknown."""

    def __init__(self, trips: Trips, cut: set[tuple[int, int]], facts: dict[str, int]) -> None:
        self.trips, self.flow, self.cut, self.facts = trips, trips.flow, cut, facts
        self.sites: dict[str, dict[int, list[int]]] = {}  # register -> block -> its definitions' positions
        self.values: dict[Site, frozenset[int] | None] = {}  # definition site -> its values (None while it runs)

    def operand(self, operand: Operand, block: int, position: int, depth: int) -> frozenset[int] | None:
        if operand.kind == "immediate":
            return frozenset((operand.value,)) if isinstance(operand.value, int) else None
        if operand.kind != "register" or depth <= 0:
            return None
        name = qualified(self.flow, block, operand.name)  # type: ignore[arg-type]  # a register has a name
        if name in self.facts:
            return frozenset((self.facts[name],))
        values: set[int] = set()
        for site in self._reaching(name, block, position):
            found = self._defined(site, depth - 1)
            if found is None:
                return None
            values |= found
            if len(values) > _WIDTH:
                return None
        return frozenset(values) if values else None

    def _reaching(self, name: str, block: int, position: int) -> list[Site | None]:
        """The definitions of `name` that reach (block, position) avoiding `cut`; a way
        back to the function's start without one adds None."""
        by_block = self.sites.get(name)
        if by_block is None:
            by_block = self.sites[name] = {}
            for site_block, site_position in self.trips.definitions.get(name, ()):
                by_block.setdefault(site_block, []).append(site_position)
        earlier = [p for p in by_block.get(block, ()) if p < position]
        if earlier:
            return [(block, max(earlier))]
        found: list[Site | None] = []
        seen: set[int] = set()
        work = [block]
        while work:
            at = work.pop()
            if at == self.flow.start or not self.flow.pred[at]:
                found.append(None)
            for previous in self.flow.pred[at]:
                if (previous, at) in self.cut or previous in seen:
                    continue
                seen.add(previous)
                positions = by_block.get(previous)
                if positions:
                    found.append((previous, max(positions)))
                else:
                    work.append(previous)
        return found

    def _defined(self, site: Site | None, depth: int) -> frozenset[int] | None:
        if site is None:
            return None
        if site in self.values:  # a definition met again on its own way: unknown
            return self.values[site]
        block, position = site
        head = self.flow.blocks[block].heads[position]
        self.values[site] = None
        if head[0] is None:
            self.values[site] = _fold(head, self.flow.blocks[block].instructions[position].operands,
                                      lambda operand: self.operand(operand, block, position, depth))
        return self.values[site]


def _reads_own_rank(flow: FlowGraph, site: Site) -> bool:
    """True when the instruction at `site` is ``mov R, %cluster_ctarank``."""
    block, position = site
    operands = flow.blocks[block].instructions[position].operands
    return (flow.blocks[block].heads[position][2] == "mov" and len(operands) == 2 and operands[1].kind == "special"
            and operands[1].name == "%cluster_ctarank")


def _kept(state: State, live: frozenset[str]) -> State:
    return {name: value for name, value in state.items() if name in live}


#: `Folding`'s mark for an instruction `_fold` computes (a ``selp``, which may pick an arm
#: whose value is unknown).
_GENERAL = "general"


def _folding(head: HeadTuple, operands: Sequence[Operand], names: dict[str, str]) -> Folding:
    """How `Trips._run` computes the value of a one-target instruction, decoded once: what
    `_fold` with `_PROPAGATED` gives when every source is one number or unknown (its only
    case but ``selp``'s), as ``(apply, sources)``; `_GENERAL` for a ``selp``; None where
    `_fold` gives None whatever the state.

    >>> from ptxkit import parse_statement
    >>> from ptxkit.instruction import head_of
    >>> node = parse_statement("xor.pred %p2, %p1, 1;")
    >>> apply, sources = _folding(head_of(node), node.operands, {"%p1": "3:%p1", "%p2": "3:%p2"})
    >>> sources, apply(0, 1), _folding(head_of(node), node.operands[:2], {})
    (('3:%p1', 1), 1, None)
    """
    _, opcode, base, _ = head
    if base not in _PROPAGATED or not operands or operands[0].kind not in _NAMED:
        return None
    if base == "selp":
        return _GENERAL
    found = integer_computation(opcode, operands, lambda operand: names[operand.name]
                                if operand.kind in _NAMED and operand.name is not None else None)
    return None if found is None else (found[0], found[2])


def _constant(operand: Operand, names: dict[str, str], state: State) -> frozenset[int] | None:
    """An operand's value under constant `state` ({value}), or None when unknown."""
    if operand.kind == "immediate":
        return frozenset((operand.value,)) if isinstance(operand.value, int) else None
    # a register or symbol has a name (None names nothing in `names` or `state`)
    value = state.get(names.get(operand.name)) if operand.kind in _NAMED else None  # type: ignore[arg-type]
    return None if value is None else frozenset((value,))


def _fold(head: HeadTuple, operands: Sequence[Operand], value: Callable[[Operand], Set[int] | None],
          folded: frozenset[str] = _FOLDED) -> frozenset[int] | None:
    """The values the instruction's first operand may get, from `value(operand)` (a set
    of numbers, or None when unknown) of its sources, each combination evaluated by
    `ptxkit.isa_eval`; None when unknown. A ``selp`` whose predicate is unknown may
    pick either arm, and an arm it never picks need not be known.

    >>> from ptxkit import parse_statement
    >>> from ptxkit.instruction import head_of
    >>> node = parse_statement("selp.b32 %r1, 1, 0, %p1;")
    >>> sorted(_fold(head_of(node), node.operands, lambda o: None if o.kind == "register" else {o.value}))
    [0, 1]
    """
    _, opcode, base, _ = head
    if base not in folded or not operands or operands[0].kind not in _NAMED:
        return None
    evaluated = operation(opcode)
    if evaluated is None or evaluated.arity != len(operands) - 1:
        return None
    if base == "selp":  # the predicate first: an arm it never picks is not followed
        picks = value(operands[3])
        chosen = _PREDICATE if picks is None else frozenset(v & 1 for v in picks)
        sources = [value(operands[1]) if 1 in chosen else _UNPICKED,
                   value(operands[2]) if 0 in chosen else _UNPICKED, chosen]
    else:
        sources = [value(operand) for operand in operands[1:]]
    known = [source for source in sources if source is not None]
    if len(known) < len(sources):
        return None
    if all(len(source) == 1 for source in known):  # one value each: one result
        one = evaluated.apply(*(next(iter(source)) for source in known))
        return None if one is None else frozenset((one,))
    if base in _ARITHMETIC and len(known[0]) * len(known[1]) > _WIDTH:
        return None
    found: set[int] = set()
    for combination in product(*known):
        result = evaluated.apply(*combination)
        if result is None:
            return None
        found.add(result)
    return frozenset(found)


#: A predicate's values; the stand-in for the arm of a ``selp`` that its predicate never picks.
_PREDICATE, _UNPICKED = frozenset((0, 1)), frozenset((0,))


def export_limits(flow: FlowGraph, events: list[list[Event]], facts: Sequence[Fact]) -> dict[int, Limit]:
    """id(arrive event) -> ``(allowed, own, heard)``: the facts (bits) that arrive may
    hand to threads of its own CTA; of the accesses its own thread made, those it may
    have made before it; and the ids of the waits its thread may pass before it, whose
    imports alone it may hold (None: any wait's); see the module docstring. For the
    arrives on an mbarrier that completes once and those a thread runs once in a loop.
    Facts in the cluster window are never limited: they may come from another CTA.

    >>> export_limits(None, [[]], [])
    {}
    """
    arrives: list[tuple[int, MbarrierOp]] = []
    waits: list[tuple[int, MbarrierOp]] = []
    for block, found in enumerate(events):
        for event in found:
            if not on_an_mbarrier(event):
                continue
            if event.kind in (Kind.ARRIVE, Kind.ARRIVE_WAIT):
                arrives.append((block, event))
            if event.kind in (Kind.WAIT, Kind.ARRIVE_WAIT):
                waits.append((block, event))
    # only an arrive in a loop (behind a do-once predicate) is worth the cost: what an
    # arrive outside loops hands over the phases of docs/fence.md §4.2 mostly settle
    looped = set(loop_forest(flow).innermost()) if arrives else set()
    in_loops = [(block, event) for block, event in arrives if block in looped]
    if not in_loops or not _tests_a_flag(flow, looped):
        return {}  # no loop sets a predicate it branches on: no do-once predicate
    trips = Trips(flow)
    everything = (1 << len(facts)) - 1
    limits: dict[int, Limit] = {}
    barriers = {event.sync[1] for _, event in in_loops
                if event.sync[1].region is not None and event.sync[1].end - event.sync[1].start <= 8}
    for barrier in barriers:
        if not any(event.sync[1] == barrier and trips.first_parity(block, event.position) == 0
                   for block, event in waits):
            continue  # no wait on it stops a run before it completes: the limit would be everything
        on_it = [(block, event) for block, event in arrives if overlaps(event.sync[1], barrier)]
        if not all(trips.runs_once(block) for block, _ in on_it):
            continue
        reached = _before_completion(trips, barrier, arrives, waits)
        allowed = 0
        for fact in facts:
            if fact.location.space & CLUSTER or any(block in reached for block, _ in fact.origins):
                allowed |= 1 << fact.index
        for block, event in on_it:  # an arrive on another CTA's barrier: that CTA's run is not this one
            if event.sync[1] == barrier and not trips.remote(block, event):
                limits[id(event)] = (allowed, everything, None)
    reached_without: dict[int, set[int]] = {}
    for block, event in in_loops:
        if not trips.runs_once(block):
            continue
        if block not in reached_without:  # what this block's threads may run before it
            threads = runners(flow)
            reached_without[block] = {other for other in trips.before_once(block) if threads[other] & threads[block]}
        reached = reached_without[block]
        own = 0
        for fact in facts:
            if any(origin in reached or origin == block and made.position < event.position
                   for origin, made in fact.origins):
                own |= 1 << fact.index
        heard = tuple(id(wait) for other, found in enumerate(events) for wait in found
                      if wait.kind in (Kind.WAIT, Kind.ARRIVE_WAIT)
                      and (other in reached or other == block and wait.position < event.position))
        limits[id(event)] = (limits.get(id(event), (everything,))[0], own, heard)
    return limits


def _tests_a_flag(flow: FlowGraph, looped: set[int]) -> bool:
    """True when a block in a loop branches on a predicate that a block in a loop sets
    to a constant (``mov.pred %p, 0``): what every do-once predicate looks like, found
    before the constants are followed (`Trips`)."""
    flags = {qualified(flow, block, name) for block in looped
             for instruction, head in zip(flow.blocks[block].instructions, flow.blocks[block].heads)
             if head[1] == "mov.pred" for name in destinations(instruction, head, frozenset())}
    return bool(flags) and any(conditional(flow, block) and guard_of(flow, block) in flags for block in looped)


def _before_completion(trips: Trips, barrier: Location, arrives: list[tuple[int, MbarrierOp]],
                       waits: list[tuple[int, MbarrierOp]]) -> set[int]:
    """The blocks some thread of a CTA may reach before `barrier` completes there: a
    wait for parity 0 fails on `barrier` itself, and on another mbarrier until an
    arrive on it is reachable (or another CTA may arrive on it)."""
    remote = [event.sync[1] for block, event in arrives if trips.remote(block, event)]
    location = {(block, event.position): event.sync[1] for block, event in waits
                if (block, event.position) in trips.waits}
    blocked = set(location)
    states = trips.reach({trips.flow.start: {}}, blocked=frozenset(blocked))
    while True:
        still: set[Site] = set()
        for block, position in blocked:
            on = location[(block, position)]
            if block in states and not trips.waits_for_zero(block, position, states[block], blocked):
                continue
            if on == barrier or not (any(overlaps(other, on) for other in remote) or any(
                    arriving in states and overlaps(event.sync[1], on) for arriving, event in arrives)):
                still.add((block, position))
        if still == blocked:
            return set(states)
        again = {block for block, _ in blocked - still}
        blocked = still
        states = trips.reach({}, blocked=frozenset(blocked), resume=states, again=again)
