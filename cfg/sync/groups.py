"""Which ``cp.async`` writes a thread may still have in flight, by commit group and
ring stage (docs/fence.md §3.7).

``cp.async.wait_group N`` waits for every group of copies but the newest N, so a
pipelined ring (Triton's pointer matmuls) keeps its next stages in flight while an async
op reads the stage it waited for. The proxy analysis counts no groups: any write not yet
waited for with ``wait_group 0`` or ``wait_all`` is in flight for it. `overlapping_in_flight`
looks closer at the async ops it would warn about. It runs each thread's code with

- the *ring registers* as numbers: the registers the addresses of the copies and of those
  ops are computed from whose every definition is integer arithmetic on numbers and
  ring registers (`ptxkit.isa_eval`), a stage index such as ``s = s + 1 > 2 ? 0 : s + 1``,
  and the numbers they held on the last entry into each join;
- each copy it issued and not yet saw complete, with the number of groups committed
  after it and the ring registers' numbers when it was issued.

A branch or a guard it cannot decide takes both ways. Each copy still in flight at an op
is then located with the ring registers' numbers of its issue, the op with those of its
own run (`Events.relocate`, the register analysis's `pinned`), and only where the two
may share a byte is the op reported.

>>> import ptxkit
>>> from ptxkit.cfg.flow.inline import inlined_graph
>>> from ptxkit.cfg.sync.events import EventOptions, Kind, classify
>>> text = (".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k(.param .u64 a)\\n{\\n"
...         ".reg .b32 %r<4>;\\n.reg .b64 %rd<4>;\\n.shared .align 1024 .b8 s[8192];\\n"
...         "\\tld.param.u64 %rd1, [a];\\n\\tmov.u32 %r1, s;\\n"
...         "\\tcp.async.ca.shared.global [%r1], [%rd1], 16;\\n\\tcp.async.commit_group;\\n"
...         "\\tcp.async.ca.shared.global [%r1+4096], [%rd1], 16;\\n\\tcp.async.commit_group;\\n"
...         "\\tcp.async.wait_group 1;\\n\\tshr.u32 %r2, %r1, 4;\\n\\tcvt.u64.u32 %rd2, %r2;\\n"
...         "\\tor.b64 %rd3, %rd2, 68720001024;\\n"
...         "\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r2,%r3}, %rd3, %rd3, 1, 1, 1, 0, 0;\\n"
...         "\\tret;\\n}\\n")
>>> def reported(text):
...     flow = inlined_graph(ptxkit.parse(text).function("k"))
...     events = classify(flow, EventOptions())
...     ops = [(0, e) for e in events.by_block[0] if e.kind is Kind.ASYNC]
...     return [(e.position, copy[1].position) for _, e, copy in overlapping_in_flight(flow, events, ops)]
>>> reported(text)  # only the copy into [4096, 4112) may be pending: the wgmma reads [0, 2048)
[]
>>> reported(text.replace("wait_group 1", "wait_group 2"))  # the first copy may be pending too
[(10, 2)]
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.operands import destinations, integer_computation, is_register, operand_reads
from ptxkit.cfg.sync.events import Kind
from ptxkit.cfg.sync.locations import overlaps
from ptxkit.cfg.values.divergence import definitions, qualified
from ptxkit.cfg.values.symbols import PLAIN_REGISTERS

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from ptxkit.cfg.flow.graph import FlowGraph
    from ptxkit.cfg.sync.events import Event, Events
    from ptxkit.cfg.sync.locations import Location
    from ptxkit.syntax import Instruction

    #: The ring registers' numbers (None: not known) in `_Rings.names` order, then the
    #: numbers they held on the last entry into each join, in `_Rings.joins` order.
    Numbers = tuple[int | None, ...]
    #: A copy in flight: its index in `_Rings.copies`, the groups committed after it
    #: (-1: its group not yet committed) and the `Numbers` when it was issued.
    Copy = tuple[int, int, Numbers]
    #: What a thread may hold at a point: `Numbers` -> the copies in flight with them.
    State = dict[Numbers, frozenset[Copy]]
    #: How a definition computes its register: the operation's ``apply``, its bits, and
    #: each source (a number, or a qualified register name).
    Decoded = tuple[Callable[..., int | None], int, tuple[int | str, ...]]
    #: The same with each source ``(False, number)`` or ``(True, ring register index)``.
    Computation = tuple[Callable[..., int | None], int, tuple[tuple[bool, int], ...]]

__all__ = ["overlapping_in_flight"]

#: Different `Numbers` a block may start with before the search gives up (a register
#: that counts trips without bound), and instructions it may run in all (a state run
#: through an instruction counts one: Triton's rings take under 10,000, a CUTLASS kernel
#: whose addresses read counters 0.4-2 million before the first limit, 0.1-0.5 s); then
#: every op keeps its report.
_STATES, _STEPS = 64, 100_000


def overlapping_in_flight(flow: FlowGraph, events: Events, ops: Sequence[tuple[int, Event]]
                          ) -> list[tuple[int, Event, tuple[int, Event] | None]]:
    """The ``(block, event)`` async ops of `ops`, of `events` (`ptxkit.cfg.sync.events`),
    that may touch bytes a ``cp.async`` of their own thread is still writing when they run,
    each with the ``(block, event)`` of one such copy (all of `ops`, with None, where the
    search gives up); see the module docstring."""
    rings = _Rings(flow, events, ops)
    reached = rings.search()
    if reached is None:
        return [(block, event, None) for block, event in ops]
    found: list[tuple[int, Event, tuple[int, Event] | None]] = []
    for block, event in ops:
        copy = rings.overlapping(block, event, reached)
        if copy is True:
            found.append((block, event, None))
        elif copy is not False:
            found.append((block, event, copy))
    return found


class _Rings:
    """One search: the copies, the ring registers and how they are computed."""

    def __init__(self, flow: FlowGraph, events: Events, ops: Sequence[tuple[int, Event]]) -> None:
        self.flow = flow
        self.relocate = events.relocate
        # (block, position, numbers entering the joins) -> the bytes an access touches with them
        self.touched: dict[tuple[int, int, Numbers], tuple[Location, ...]] = {}
        # the copies whose bytes for all trips meet some op's: no other copy can matter
        reach = [location for _, op in ops for location in (*op.locations, *op.writes)]
        self.copies: list[tuple[int, Event]] = [
            (block, event) for block, found in enumerate(events.by_block) for event in found
            if event.kind is Kind.CP_ASYNC and any(overlaps(a, b) for a in event.locations for b in reach)]
        self.copy_at = {(block, event.position): index for index, (block, event) in enumerate(self.copies)}
        self.ops_at = {(block, event.position) for block, event in ops}
        plain = PLAIN_REGISTERS.of(flow)
        self.defined = definitions(flow)
        pinnable = {pair for block, event in [*self.copies, *ops] for pair in events.joins_feeding(block, event)}
        fed = self._feeding({name for name, _ in pinnable}, plain)
        self.computations = {name: self._computations(name, plain) for name in fed}
        names = _closed({name for name, found in self.computations.items() if found is not None},
                        self.computations)
        self.names = sorted(names)
        self.index = {name: i for i, name in enumerate(self.names)}
        self.joins = sorted((block, name) for name, block in pinnable if name in names)
        # join block -> (slot in `Numbers`, ring register index) of each number entering it sets
        self.join_slots: dict[int, list[tuple[int, int]]] = {}
        for slot, (block, name) in enumerate(self.joins):
            self.join_slots.setdefault(block, []).append((len(self.names) + slot, self.index[name]))
        # (block, position) -> (ring register index, guard, computation) for each ring definition
        self.steps: dict[tuple[int, int], tuple[int, tuple[int, bool] | None, Computation]] = {}
        for name in self.names:
            for (block, position), computation in zip(self.defined[name], self.computations[name] or ()):
                guard = flow.blocks[block].heads[position][0]
                decided = None if guard is None else \
                    (self.index.get(qualified(flow, block, guard.register), -1), guard.negated)
                self.steps[(block, position)] = (self.index[name], decided, self._resolved(computation))
        # the groups committed after a copy are counted up to the largest N a wait_group leaves
        self.most = max([_waited(flow.blocks[b].instructions[p]) or 0
                         for b in range(len(flow)) for p, head in enumerate(flow.blocks[b].heads)
                         if head[1].startswith("cp.async.wait_group")] or [0])

    def _feeding(self, names: Iterable[str], plain: list[frozenset[str]]) -> set[str]:
        """`names` and the registers they are computed from, through every definition."""
        flow = self.flow
        work = list(names)
        fed: set[str] = set()
        while work:
            name = work.pop()
            if name in fed:
                continue
            fed.add(name)
            for block, position in self.defined.get(name, ()):
                instruction, head = flow.blocks[block].instructions[position], flow.blocks[block].heads[position]
                written = set(destinations(instruction, head, plain[block]))
                work.extend(qualified(flow, block, read) for operand in instruction.operands
                            for read in operand_reads(operand, plain[block]) if read not in written)
                if head[0] is not None:
                    work.append(qualified(flow, block, head[0].register))
        return fed

    def _computations(self, name: str, plain: list[frozenset[str]]) -> list[Decoded] | None:
        """How each definition of `name` computes it, its sources numbers or qualified
        register names; None where one is no integer operation on numbers and registers."""
        flow = self.flow
        found: list[Decoded] = []
        for block, position in self.defined.get(name, ()):
            instruction, head = flow.blocks[block].instructions[position], flow.blocks[block].heads[position]
            if len(destinations(instruction, head, plain[block])) != 1:
                return None
            decoded = integer_computation(head[1], instruction.operands,
                                          lambda operand: qualified(flow, block, operand.name)
                                          if operand.name is not None and is_register(operand, plain[block])
                                          else None)
            if decoded is None:
                return None
            found.append(decoded)
        return found or None

    def _resolved(self, decoded: Decoded) -> Computation:
        apply, bits, sources = decoded
        return apply, bits, tuple((False, s) if isinstance(s, int) else (True, self.index[s]) for s in sources)

    # -- the search ------------------------------------------------------------------------------
    def search(self) -> dict[tuple[int, int], State] | None:
        """(block, position) of each op of interest -> what a thread may hold just before
        it; None when some block starts with more than `_STATES` different numbers, or
        the search would run more than `_STEPS` instructions."""
        flow = self.flow
        width = len(self.names) + len(self.joins)
        entry: list[State] = [{} for _ in range(len(flow))]
        entry[0] = {(None,) * width: frozenset()}
        reached: dict[tuple[int, int], State] = {}
        work = [0]
        queued = {0}
        steps = 0
        while work:
            block = work.pop()
            queued.discard(block)
            steps += len(entry[block]) * len(flow.blocks[block].heads)
            if steps > _STEPS:
                return None
            for successor, numbers, copies in self._run(block, entry[block], reached):
                numbers = self._entered(successor, numbers)
                old = entry[successor].get(numbers)
                if old is not None and copies <= old:
                    continue
                entry[successor][numbers] = copies if old is None else old | copies
                if len(entry[successor]) > _STATES:
                    return None
                if successor not in queued:
                    queued.add(successor)
                    work.append(successor)
        return reached

    def _entered(self, block: int, numbers: Numbers) -> Numbers:
        slots = self.join_slots.get(block)
        if not slots:
            return numbers
        entered = list(numbers)
        for slot, register in slots:
            entered[slot] = numbers[register]
        return tuple(entered)

    def _run(self, block: int, state: State, reached: dict[tuple[int, int], State]
             ) -> list[tuple[int, Numbers, frozenset[Copy]]]:
        """Run `block` from each of `state`'s numbers: (successor, numbers, copies) at its end."""
        flow = self.flow
        heads = flow.blocks[block].heads
        runs = [(list(numbers), set(copies)) for numbers, copies in state.items()]
        for position, head in enumerate(heads):
            at = (block, position)
            if at in self.ops_at:
                found = reached.setdefault(at, {})
                for numbers, copies in runs:
                    key = tuple(numbers)
                    found[key] = found.get(key, frozenset()) | frozenset(copies)
            opcode, guarded = head[1], head[0] is not None
            if at in self.copy_at:
                for numbers, copies in runs:
                    copies.add((self.copy_at[at], -1, tuple(numbers)))
            elif opcode == "cp.async.commit_group":
                for _, copies in runs:  # a guarded commit may not run: its copies keep either count
                    aged = {(i, min(age + 1, self.most), issued) for i, age, issued in copies}
                    if not guarded:
                        copies.clear()
                    copies |= aged
            elif opcode.startswith("cp.async.wait_all") and not guarded:
                for _, copies in runs:
                    copies.clear()
            elif opcode.startswith("cp.async.wait_group") and not guarded:
                newest = _waited(flow.blocks[block].instructions[position])
                for _, copies in runs:  # every group but the newest N is complete; an uncommitted copy is in none
                    if newest is not None:
                        copies.intersection_update({c for c in copies if c[1] < newest})
            step = self.steps.get(at)
            if step is not None:
                runs = [run for numbers, copies in runs for run in _stepped(numbers, copies, step)]
        return [(successor, tuple(numbers), frozenset(copies))
                for successor in flow.succ[block] for numbers, copies in runs]

    # -- the answer ------------------------------------------------------------------------------
    def overlapping(self, block: int, event: Event, reached: dict[tuple[int, int], State]
                    ) -> tuple[int, Event] | bool:
        """A copy still in flight whose bytes the op `event` of `block` may touch there, as
        ``(block, event)``; False where none may (True for an op the search never reached)."""
        found = reached.get((block, event.position))
        if found is None:
            return True
        for numbers, copies in found.items():
            if not copies:
                continue
            touched = self._bytes(block, event, numbers)
            for index, _, issued in sorted(copies, key=lambda copy: copy[0]):
                written = self._bytes(*self.copies[index], issued)
                if any(overlaps(a, b) for a in touched for b in written):
                    return self.copies[index]
        return False

    def _bytes(self, block: int, event: Event, numbers: Numbers) -> tuple[Location, ...]:
        """The bytes `event` of `block` touches where the joins were entered with the
        numbers of `numbers` (its own locations where they narrow nothing)."""
        key = (block, event.position, numbers[len(self.names):])
        found = self.touched.get(key)
        if found is None:
            width = len(self.names)
            entry_values = {(name, join): value for (join, name), value in zip(self.joins, numbers[width:])
                            if value is not None}
            found = self.relocate(block, event, entry_values) or (*event.locations, *event.writes)
            self.touched[key] = found
        return found


def _closed(names: set[str], computations: dict[str, list[Decoded] | None]) -> set[str]:
    """The largest part of `names` whose definitions read only numbers and registers of it."""
    changed = True
    while changed:
        changed = False
        for name in sorted(names):
            if any(isinstance(source, str) and source not in names
                   for _, _, sources in computations[name] or () for source in sources):
                names.discard(name)
                changed = True
    return names


def _waited(instruction: Instruction) -> int | None:
    """N of ``cp.async.wait_group N``, or None when it is not a number."""
    operands = instruction.operands
    if operands and operands[0].kind == "immediate" and isinstance(operands[0].value, int):
        return int(operands[0].value)
    return None


def _stepped(numbers: list[int | None], copies: set[Copy], step: tuple[int, tuple[int, bool] | None, Computation]
             ) -> list[tuple[list[int | None], set[Copy]]]:
    """The runs after one ring register's definition: its number set, or, under a guard
    not known, set and kept."""
    target, guard, (apply, bits, sources) = step
    args = [numbers[s] if is_register else s for is_register, s in sources]
    value = None if None in args else apply(*args)
    if value is not None and bits > 1 and value >> (bits - 1):
        value -= 1 << bits  # the signed reading: the number an immediate such as -1 gives
    if guard is not None:
        held = numbers[guard[0]] if guard[0] >= 0 else None
        if held is None:  # either way
            kept = list(numbers)
            numbers = list(numbers)
            numbers[target] = value
            return [(numbers, copies), (kept, set(copies))]
        if bool(held) == guard[1]:
            return [(numbers, copies)]
    numbers = list(numbers)
    numbers[target] = value
    return [(numbers, copies)]
