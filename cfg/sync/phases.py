"""Named-barrier operations that cannot share a phase (docs/fence.md §4.2).

The hand-off rule matches every arrive with every wait on the same object, whatever the
phase. For a named barrier some phases are certain. Each operation on a barrier counts
once towards its thread's phase. An operation that every path from the kernel's entry
reaches after the same number of operations on that barrier, none of them in a loop
(the ``__syncthreads()`` of a prologue), belongs to that same phase in every thread
that runs it: two such operations with different counts never meet. A thread that
reaches an operation such a one dominates went through it already, so its arrival there
counts for a later phase: the prologue's ``bar.sync`` does not hear the epilogue's.

The same holds around a loop that every thread entering it runs the same number of
times (its one exit tests values the whole CTA shares: parameters, ``%ctaid``, a
counter): a ``bar.sync`` run once in every iteration belongs to the loop's phases, and an
operation on the same barrier that exactly the threads entering the loop run, after the
loop (or before it), to a later (or earlier) one, provided the threads that use the
barrier keep its phases in step, which a correct kernel does. An operation that only
some of them run, or that threads which skip the loop run (one role's code after
another's, in two ``if``s), may meet any iteration.

A loop that threads leave on their own (Triton's warp-specialization loop, which reads
each warp's partition from shared memory in every round) has no such count. Where all
the operations on a barrier lie in one region of it, entered at one block, and every
visit of the region runs the same sequence of them (`_visited_regions`), the operations
are counted from the region's entry instead: visit after visit, every thread runs that
sequence, so an operation that comes before another in it never shares its phase.

A barrier whose operations every thread of the CTA runs in the same sequence (each an
unguarded ``bar.sync`` of that id alone with no thread count, in code that only
CTA-uniform branches and loops decide) needs no count: the k-th phase is the k-th
operation of every thread, so two different operations never share one
(`_apart_in_step`: an epilogue after a region that some CTAs skip).

The cluster barrier is counted apart (`_apart_on_the_cluster_barrier`): every thread
of the cluster arrives once per phase and waits after its arrive, so where every path
reaches an operation after the same numbers of arrives and waits, an arrive and a wait
of different phases never meet (the ``barrier.cluster`` pair at a kernel's end does not
hand its reads back to the TMA issued after the first pair).
"""

from __future__ import annotations

import functools

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.dataflow import bits, solve_forward
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.loops import find_loops, reachable
from ptxkit.cfg.flow.operands import destinations
from ptxkit.cfg.sync.events import Kind, on_an_mbarrier, on_a_named_barrier
from ptxkit.cfg.values.divergence import conditional, cta_uniform, definitions, guard_of, qualified
from ptxkit.isa import SyncObject, is_special_register

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from typing import Final, Literal

    from ptxkit.cfg.flow.graph import FlowGraph, HeadTuple
    from ptxkit.cfg.flow.loops import Loop, LoopForest
    from ptxkit.cfg.sync.events import Definitions, Event, SyncKey
    from ptxkit.cfg.sync.protocols import NamedBarrierOp
    from ptxkit.syntax import Instruction

    #: Whether two hand-off objects may be the same barrier (`separate_phases`).
    Matches = Callable[[SyncKey, SyncKey], bool]
    #: A counted phase: the operations on the barrier before it outside loops, and the
    #: loops (their headers) before it that every thread runs alike.
    Count = tuple[int, frozenset[int]]
    #: An operation's place in a visit of a region (`_visited_regions`): its `Count` and
    #: the header of the region's loop around it, if any.
    Place = tuple[int, frozenset[int], int | None]
    #: The arrives and waits on the cluster barrier before a point: a number of each,
    #: `_MANY` where the ways there disagree, None before any way is known.
    ClusterCount = tuple[int, int] | Literal["many"] | None

    #: ``(block, index among the block's events, operation)`` of each named-barrier operation.
    Named = list[tuple[int, int, NamedBarrierOp]]

__all__ = ["counted_phases", "separate_phases"]


def separate_phases(flow: FlowGraph, events: list[list[Event]], matches: Matches) -> set[tuple[int, int]]:
    """``(id(wait), id(arrive))`` pairs of named-barrier and cluster-barrier events that
    cannot meet in one phase; `matches(a, b)` says whether two sync keys may name the
    same barrier.

    >>> import ptxkit
    >>> from ptxkit.cfg.sync.events import classify, EventOptions
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> from ptxkit.cfg.sync.locations import SHARED
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     "\\tbar.sync 0;\\n\\tbar.sync 0;\\n\\tret;\\n}\\n")
    >>> flow = inlined_graph(m.function("k"))
    >>> by_block = classify(flow, EventOptions(SHARED)).by_block
    >>> first, second = by_block[0]
    >>> sorted(separate_phases(flow, by_block, lambda a, b: a == b)) == sorted([(id(first), id(second)),
    ...                                                                         (id(second), id(first))])
    True
    """
    pairs = _apart_on_the_cluster_barrier(flow, events)
    named = _named(events)
    if not named:
        return pairs
    dominators = DominatorTree.of(flow)
    forest = find_loops(flow, dominators)
    threads = _Threads(flow, dominators, forest.innermost())
    pairs |= _around_uniform_loops(flow, named, matches, forest, threads)
    pairs |= _apart_across_arms(flow, named, dominators, threads)
    pairs |= _apart_in_step(flow, named, threads)
    counted = _counted_phases(flow, named, forest, dominators, threads)
    pairs |= _apart_across_a_cta_sync(flow, events, named, counted, dominators, threads)
    for visited in _visited_regions(flow, named, forest, dominators, threads):
        for one, place in visited.items():
            for another, other_place in visited.items():
                if _apart_in_a_visit(place, other_place):
                    pairs.add((one, another))
    for block, index, event in named:
        for other_block, other_index, other in named:
            if other is event or not matches(event.sync, other.sync):
                continue
            mine, theirs = counted.get(id(event)), counted.get(id(other))
            if mine is not None and theirs is not None:
                apart = _before(mine, theirs) or _before(theirs, mine)
            else:  # one with a counted phase ran before the other in the thread that runs both
                first = (block, index) if mine is not None else (other_block, other_index) if theirs is not None \
                    else None
                second = (other_block, other_index) if first == (block, index) else (block, index)
                apart = first is not None and (second[1] > first[1] if first[0] == second[0]
                                               else dominators.dominates(first[0], second[0]))
            if apart:
                pairs.add((id(event), id(other)))
    return pairs


_MANY: Final = "many"  # the ways into a block disagree on the count


def _apart_on_the_cluster_barrier(flow: FlowGraph, events: list[list[Event]]) -> set[tuple[int, int]]:
    """``(id(wait), id(arrive))`` pairs of ``barrier.cluster`` operations of different
    phases. Every non-exited thread of the cluster arrives once per phase and waits for
    the phase it arrived in before it arrives again (PTX ISA, ``barrier.cluster``), so an
    arrive that every path reaches after `a` arrives belongs to phase ``a + 1``, and a
    wait reached after `a` arrives to phase `a`. A count is certain where every path
    brings the same numbers of arrives and waits, none of them guarded (a loop around
    an operation makes it uncertain). A kernel whose certain counts break the
    alternation is left as it is: nothing is separated.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow import inline
    >>> from ptxkit.cfg.sync import events, locations
    >>> flow = inline.inlined_graph(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".visible .entry k()\\n{\\n\\tbarrier.cluster.arrive;\\n\\tbarrier.cluster.wait;\\n"
    ...     "\\tbarrier.cluster.arrive;\\n\\tbarrier.cluster.wait;\\n\\tret;\\n}\\n").function("k"))
    >>> (arrive1, wait1, arrive2, wait2), = events.classify(flow, events.EventOptions(locations.SHARED)).by_block
    >>> pairs = _apart_on_the_cluster_barrier(flow, [[arrive1, wait1, arrive2, wait2]])
    >>> sorted(pairs) == sorted([(id(wait1), id(arrive2)), (id(wait2), id(arrive1))])
    True
    """
    ops = {block: [e for e in found if e.sync is not None and e.sync[0] is SyncObject.CLUSTER_BARRIER]
           for block, found in enumerate(events)}
    ops = {block: found for block, found in ops.items() if found}
    if not any(e.kind is Kind.WAIT for found in ops.values() for e in found):
        return set()
    counted: dict[int, ClusterCount] = {}  # id(event) -> (arrives, waits) before it, once solved
    start: ClusterCount = (0, 0)
    ins = solve_forward(flow, functools.partial(_cluster_count, ops, None), entry=start, bottom=None,
                        join=_join_counts).ins
    for block in ops:
        _cluster_count(ops, counted, block, ins[block])
    arrives: list[tuple[int, Event]] = []  # (phase, operation)
    waits: list[tuple[int, Event]] = []
    for block, found in ops.items():
        for event in found:
            count = counted.get(id(event))
            if not isinstance(count, tuple):
                continue
            arrived, waited = count
            if arrived != waited + (event.kind is Kind.WAIT):
                return set()  # not arrive, wait, arrive, ...: a kernel this rule does not describe
            (arrives if event.kind is Kind.ARRIVE else waits).append((arrived + (event.kind is Kind.ARRIVE), event))
    return {(id(wait), id(arrive)) for phase, wait in waits for other, arrive in arrives if phase != other}


def _cluster_count(ops: dict[int, list[Event]], counted: dict[int, ClusterCount] | None, block: int,
                   count: ClusterCount) -> ClusterCount:
    """The (arrives, waits) count after `block`'s cluster barrier operations `ops`, from
    `count` before them; each operation's count before it goes into `counted`, if given.

    >>> _cluster_count({}, None, 0, (1, 1))
    (1, 1)
    """
    for event in ops.get(block, ()):
        if counted is not None:
            counted[id(event)] = count
        if not isinstance(count, tuple):
            continue
        count = _MANY if event.guard is not None else \
            (count[0] + 1, count[1]) if event.kind is Kind.ARRIVE else (count[0], count[1] + 1)
    return count


def _join_counts(one: ClusterCount, other: ClusterCount) -> ClusterCount:
    if one is None:
        return other
    if other is None or one == other:
        return one
    return _MANY


def counted_phases(flow: FlowGraph, events: list[list[Event]]) -> dict[int, Count]:
    """``id(event) -> (n, loops)`` for the named-barrier operations whose phase is the
    same in every thread that runs them: after `n` operations on their barrier outside
    loops and the loops `loops` (headers), which every thread entering runs alike. A
    ``bar.sync`` in a loop that a thread-dependent test leaves has none:

    >>> import ptxkit
    >>> from ptxkit.cfg.flow import inline
    >>> from ptxkit.cfg.sync import events, locations
    >>> flow = inline.inlined_graph(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".visible .entry k()\\n{\\n.reg .pred %p<2>;\\n\\tbar.sync 0;\\nL:\\n\\tbar.sync 0;\\n"
    ...     "\\tsetp.eq.u32 %p1, %tid.x, 0;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n").function("k"))
    >>> list(counted_phases(flow, events.classify(flow, events.EventOptions(locations.SHARED)).by_block).values())
    [(0, frozenset())]
    """
    named = _named(events)
    if not named:
        return {}
    dominators = DominatorTree.of(flow)
    forest = find_loops(flow, dominators)
    return _counted_phases(flow, named, forest, dominators, _Threads(flow, dominators, forest.innermost()))


def _named(events: list[list[Event]]) -> Named:
    """``(block, index, event)`` of every named-barrier operation."""
    return [(block, index, event) for block, found in enumerate(events) for index, event in enumerate(found)
            if on_a_named_barrier(event)]


def _around_uniform_loops(flow: FlowGraph, named: Named, matches: Matches, forest: LoopForest,
                          threads: _Threads) -> set[tuple[int, int]]:
    """Pairs of a ``bar.sync`` in a CTA-uniform loop, run by the threads that run the
    loop (in the iterations the CTA-uniform branches in it choose), and an operation on
    the same barrier outside it, before or after (not around) it, that those threads run;
    and pairs of two such ``bar.sync`` (`_apart_in_the_body`)."""
    pairs: set[tuple[int, int]] = set()
    if not any(e.kind is Kind.ARRIVE_WAIT for _, _, e in named):
        return pairs
    innermost = threads.innermost
    for loop in forest.loops:
        syncs = [(block, e) for block, _, e in named if innermost.get(block) is loop and e.kind is Kind.ARRIVE_WAIT
                 and e.guard is None]
        if not syncs:
            continue
        exit_edge = threads.uniform_exit(loop)
        if exit_edge is None or not _visits_in_step(flow, named, loop, forest, threads):
            continue  # threads may meet in it from different rounds of a loop around it
        # run by the threads that run the loop, in the rounds the CTA-uniform branches in it choose
        inside = [e for block, e in syncs if threads.same(block, loop.header)]
        if not inside:
            continue
        pairs |= _apart_in_the_body(named, loop, inside + _in_step_inner_loops(flow, named, loop, threads), matches)
        after = reachable(flow.succ, [exit_edge[1]])
        before = reachable(flow.pred, [loop.header])
        for block, _, event in named:
            if block in loop.blocks or (block in after) == (block in before):
                continue  # in the loop, around it, or unrelated
            heard = [inner for inner in inside if matches(inner.sync, event.sync)]
            if not heard or not threads.same(block, loop.header):
                continue  # some threads run one and not the other (two roles, one after the other)
            for inner in heard:
                pairs.add((id(inner), id(event)))
                pairs.add((id(event), id(inner)))
    return pairs


def _visits_in_step(flow: FlowGraph, named: Named, loop: Loop, forest: LoopForest, threads: _Threads) -> bool:
    """Whether threads that meet on a barrier in `loop` (a loop with a CTA-uniform exit)
    are in the same round of every loop around it, so that a value the CTA shares (a
    round counter) is the same in both and they run the loop alike: each loop around
    it run alike by its threads, which visit the next one in every round
    (`_runs_alike`); or, inside the outermost, loops left by CTA-uniform exits the threads
    that enter take, and the outermost's rounds held in step by a CTA-wide barrier
    (`_rounds_in_step`). Otherwise one thread's visit in one round may meet another's in
    a later round, whose counts differ (docs/fence.md §4.2: Triton's dispatch loop
    without its ``bar.sync 1`` at the top of each round)."""
    chain = [loop, *loop.enclosing()]
    outermost = chain[-1]
    if all(_runs_alike(flow, inner, outer, threads) for inner, outer in zip(chain, chain[1:])) \
            and _left_alike(flow, outermost, threads):
        return True
    return all(_left_alike(flow, around, threads) for around in chain[1:-1]) \
        and _rounds_in_step(flow, named, outermost, loop, forest, threads)


def _left_alike(flow: FlowGraph, loop: Loop, threads: _Threads) -> bool:
    """`loop` has one CTA-uniform exit, taken by the threads that enter it."""
    exit_edge = threads.uniform_exit(loop)
    return exit_edge is not None and threads.same(loop.header, exit_edge[1])


def _rounds_in_step(flow: FlowGraph, named: Named, outer: Loop, loop: Loop, forest: LoopForest,
                    threads: _Threads) -> bool:
    """Whether two threads blocked on a barrier in `loop` are always in the same round of
    `outer` (a loop in no other): some barrier that only unguarded ``bar.sync`` of its id
    alone with no thread count use (each phase holds one arrival of every thread not
    exited, `_in_step_op`) is passed by every thread as often, `c` times, before it enters
    `outer`, `m` >= 1 times in each round of it, and at least once in a round before
    `loop`. A thread in round `r` has then passed it `c + (r-1)m + a` times (1 <= a <=
    m) and one in an earlier round at most `c + (r-1)m`: the first completed a phase the
    second has not arrived at, which cannot be (Triton's dispatch loop syncs the CTA at
    the top of each round, docs/fence.md §4.2)."""
    dominators = threads.dominators
    for barrier, on in _by_barrier(named).items():  # `on` holds every operation that may be on it
        if not all(event.sync[1] == frozenset({barrier}) and _in_step_op(flow, block, event)
                   for block, events in on.items() for event in events):
            continue
        counts = _count(flow, on, barrier, forest, dominators, threads)[1]
        entering = _join([counts.get(p) for p in flow.pred[outer.header] if p not in outer.blocks], outer.header,
                         threads)
        # counted from the top of a round: `m` where it goes round, `a` where it enters `loop`
        rounds = _count(flow, on, barrier, forest, dominators, threads, outer.header, frozenset(outer.blocks))[1]
        per_round = {rounds.get(latch) for latch in outer.latches}
        at_loop = rounds.get(loop.header)
        if entering is not None and len(per_round) == 1 and at_loop is not None and not at_loop[1]:
            step = per_round.pop()
            if step is not None and not step[1] and 1 <= at_loop[0] <= step[0]:
                return True
    return False


def _in_step_op(flow: FlowGraph, block: int, event: NamedBarrierOp) -> bool:
    """A ``bar.sync``/``barrier.sync`` on one barrier id with no thread count, unguarded:
    every thread of the CTA that runs it arrives on it."""
    instruction = flow.blocks[block].instructions[event.position]
    return event.kind is Kind.ARRIVE_WAIT and event.guard is None and event.sync[1] is not None \
        and len(event.sync[1]) == 1 and flow.blocks[block].heads[event.position][2] in ("bar", "barrier") \
        and ".red" not in instruction.opcode and len(instruction.operands) == 1


def _apart_in_step(flow: FlowGraph, named: Named, threads: _Threads) -> set[tuple[int, int]]:
    """Pairs of two different operations on a barrier that every thread of the CTA
    runs in the same sequence: each operation on it a ``bar.sync``/``barrier.sync`` of
    that one id with no thread count, unguarded, in a block that every thread runs or
    none does (`_Threads.same` as the entry: only CTA-uniform branches decide it), and
    every loop around it left by one CTA-uniform exit that the threads entering it
    take. The i-th operation of every thread is then the same instruction, so the i-th
    phase is made of that instruction alone and two different ones never share a phase:
    an epilogue's ``bar.sync`` does not meet one in code that a CTA-uniform branch
    skips before it (Triton's attention with its causal band, docs/fence.md §4.2)."""
    pairs: set[tuple[int, int]] = set()
    for barrier, on in _by_barrier(named).items():
        ops = [event for block, events in on.items() for event in events]
        if len(ops) > 1 and all(_in_step(flow, block, event, barrier, threads)
                                for block, events in on.items() for event in events):
            pairs.update((id(one), id(other)) for one in ops for other in ops if other is not one)
    return pairs


def _in_step(flow: FlowGraph, block: int, event: NamedBarrierOp, barrier: int, threads: _Threads) -> bool:
    """Whether every thread of the CTA runs `event` (an operation on `barrier`) alike:
    a ``bar.sync``/``barrier.sync`` of `barrier` alone with no thread count, unguarded,
    run by every thread or by none, in loops that CTA-uniform exits end (`_apart_in_step`)."""
    if event.sync[1] != frozenset({barrier}) or not _in_step_op(flow, block, event) \
            or not threads.same(block, flow.start):
        return False
    loop = threads.innermost.get(block)
    for around in ([loop, *loop.enclosing()] if loop is not None else []):
        exit_edge = threads.uniform_exit(around)
        if exit_edge is None or not threads.same(around.header, exit_edge[1]):
            return False
    return True


def _apart_across_a_cta_sync(flow: FlowGraph, events: list[list[Event]], named: Named, counted: dict[int, Count],
                             dominators: DominatorTree, threads: _Threads) -> set[tuple[int, int]]:
    """``(id(wait), id(arrive))`` pairs of mbarrier operations that a ``bar.sync`` keeps
    apart: one that every thread of the CTA runs once (with no thread count, unguarded,
    outside loops, in a phase counted the same in every thread), after the wait on every
    path from it and before the arrive on every path to it. Each thread that waits
    arrives there afterwards, so the wait has returned before that phase completes, and
    the arrive comes only after it: the wait cannot be waiting for it (Triton's attention
    invalidates and initialises its stage barriers again between its two loops, behind
    a ``bar.sync``; the second loop's copies do not complete the first loop's waits)."""
    syncs = [(block, event) for block, _, event in named
             if id(event) in counted and threads.innermost.get(block) is None and _in_step_op(flow, block, event)
             and threads.same(block, flow.start)]
    if not syncs:
        return set()
    waits, arrives = [], []
    for block, found in enumerate(events):
        for event in found:
            if on_an_mbarrier(event):
                if event.kind in (Kind.WAIT, Kind.ARRIVE_WAIT):
                    waits.append((block, event))
                if event.kind in (Kind.ARRIVE, Kind.ARRIVE_WAIT):
                    arrives.append((block, event))
    post = threads.post_dominators
    apart = [0] * len(waits)  # wait -> the arrives (a bit mask over `arrives`) some sync keeps apart from it
    for block, sync in syncs:
        after = sum(1 << index for index, (b, e) in enumerate(arrives)
                    if (b == block and e.position > sync.position) or (b != block and dominators.dominates(block, b)))
        for index, (b, e) in enumerate(waits):
            if (b == block and e.position < sync.position) or (b != block and post.dominates(block, b)):
                apart[index] |= after
    return {(id(wait), id(arrives[index][1])) for (_, wait), mask in zip(waits, apart) for index in bits(mask)}


def _apart_across_arms(flow: FlowGraph, named: Named, dominators: DominatorTree,
                       threads: _Threads) -> set[tuple[int, int]]:
    """Pairs of operations on the two sides of a CTA-uniform branch outside loops, each
    side entered from the branch alone: the whole CTA takes one side, so no CTA runs
    both (Triton's persistent GEMM has a path for K = 0 beside its main loop)."""
    pairs: set[tuple[int, int]] = set()
    for branch in range(len(flow.blocks)):
        sides = sorted(set(flow.succ[branch]))
        if len(sides) != 2 or branch in threads.innermost or any(flow.pred[side] != [branch] for side in sides) \
                or not threads.uniform_branch(branch):
            continue
        one, other = ([event for block, _, event in named if dominators.dominates(side, block)] for side in sides)
        for first in one:
            for second in other:
                pairs.add((id(first), id(second)))
                pairs.add((id(second), id(first)))
    return pairs


def _in_step_inner_loops(flow: FlowGraph, named: Named, loop: Loop, threads: _Threads) -> list[NamedBarrierOp]:
    """The unguarded ``bar.sync`` in loops nested in `loop` that every thread running
    `loop` runs alike: each loop from theirs out to `loop` is entered by those threads
    and left by one CTA-uniform exit they all take, and each ``bar.sync`` is run by the
    threads that run its loop (Triton's persistent GEMM syncs in its K loop too)."""
    found: list[NamedBarrierOp] = []
    for block, _, event in named:
        inner = threads.innermost.get(block)
        if inner is None or inner is loop or block not in loop.blocks or event.kind is not Kind.ARRIVE_WAIT \
                or event.guard is not None or not threads.same(block, inner.header):
            continue
        chain = [inner, *inner.enclosing()]
        if loop in chain and all(_runs_alike(flow, nested, loop, threads) for nested in chain[:chain.index(loop)]):
            found.append(event)
    return found


def _runs_alike(flow: FlowGraph, nested: Loop, loop: Loop, threads: _Threads) -> bool:
    """`nested` (inside `loop`) is entered by the threads that run `loop` and left by one
    CTA-uniform exit that they all take: each of them runs it as often."""
    exit_edge = threads.uniform_exit(nested)
    return exit_edge is not None and threads.same(nested.header, exit_edge[1]) \
        and threads.same(nested.header, loop.header)


def _apart_in_the_body(named: Named, loop: Loop, inside: list[NamedBarrierOp],
                       matches: Matches) -> set[tuple[int, int]]:
    """Pairs of two different ``bar.sync`` of `inside` (in a CTA-uniform `loop`, or in
    loops nested in it that its threads run alike, each run by every thread that runs
    the loop, in the iterations the CTA-uniform branches in it choose) on a barrier that
    no other operation in the loop uses: every thread runs them in the same order, so
    the k-th of an iteration never shares a phase with the l-th of any iteration
    (Gluon's loops sync before each TMA issue and after the reads, and fence in between;
    Triton's persistent loops skip a tile the whole CTA skips)."""
    pairs: set[tuple[int, int]] = set()
    in_loop = [event for block, _, event in named if block in loop.blocks]
    kept = {id(event) for event in inside}
    for event in inside:
        same_barrier = [other for other in in_loop if matches(event.sync, other.sync)]
        if any(id(other) not in kept for other in same_barrier):
            continue  # a conditional operation could shift one thread's count
        pairs.update((id(event), id(other)) for other in same_barrier if other is not event)
    return pairs


class _Threads:
    """Which threads of a CTA run a block. Whether a thread runs it is decided by the
    branches it is control dependent on (an edge into the blocks it post-dominates,
    from a block it does not strictly post-dominate). A branch on a CTA-uniform
    predicate sends every thread the same way, so a block decided by one such edge is
    run by the threads that run the branch (or by none), and the uniform back edges of
    a loop around it decide only how often. Two blocks decided by the same edges of the
    other branches are run by the same threads, or one of them by none."""

    def __init__(self, flow: FlowGraph, dominators: DominatorTree, innermost: dict[int, Loop]) -> None:
        self.flow, self.dominators, self.innermost = flow, dominators, innermost
        self._defined: Definitions | None = None
        self._post_dominators: DominatorTree | None = None
        self._branches: list[int] | None = None
        self._uniform: dict[int, bool] = {}
        self._dependences: dict[int, list[tuple[int, int]] | None] = {}  # block -> `_control_dependences`
        self._exits: dict[Loop, tuple[int, int] | None] = {}  # loop -> `uniform_exit`

    @property
    def defined(self) -> Definitions:
        """The definitions of each register (`ptxkit.cfg.values.divergence.definitions`), on demand."""
        if self._defined is None:
            self._defined = definitions(self.flow)
        return self._defined

    @property
    def post_dominators(self) -> DominatorTree:
        if self._post_dominators is None:
            self._post_dominators = DominatorTree.post_of(self.flow)
        return self._post_dominators

    def same(self, one: int, other: int) -> bool:
        """Whether the threads that run block `one` are those that run `other`."""
        if self._equivalent(one, other) or self._equivalent(other, one):
            return True
        mine = self._decided_by(one, frozenset())
        return mine is not None and mine == self._decided_by(other, frozenset())

    def _equivalent(self, first: int, second: int) -> bool:
        """`first` dominates `second` and `second` post-dominates `first`."""
        return self.dominators.dominates(first, second) and self.post_dominators.dominates(second, first)

    def _decided_by(self, block: int, seen: frozenset[int]) -> frozenset[tuple[int, int]] | None:
        """The edges of branches that may split a CTA which decide whether `block` runs,
        through uniform branches that decide it alone; None when that is not known."""
        edges = self._control_dependences(block)
        if edges is None or block in seen:
            return None
        uniform = [edge for edge in edges if self.uniform_branch(edge[0])]
        if not uniform:
            return frozenset(edges)
        if len(edges) == 1:
            return self._decided_by(uniform[0][0], seen | {block})
        return None

    def _control_dependences(self, block: int) -> list[tuple[int, int]] | None:
        """The edges `block` is control dependent on, less the uniform back edges of the
        loops around it; None when it cannot reach the exit. Kept per block: `same`
        asks again for the blocks of every barrier operation and loop header."""
        if block not in self._dependences:
            self._dependences[block] = self._find_control_dependences(block)
        return self._dependences[block]

    def _find_control_dependences(self, block: int) -> list[tuple[int, int]] | None:
        post = self.post_dominators
        if block not in post:
            return None
        if self._branches is None:
            self._branches = [b for b in range(len(self.flow)) if len(set(self.flow.succ[b])) > 1]
        around: list[Loop] = []
        loop = self.innermost.get(block)
        while loop is not None:
            around.append(loop)
            loop = loop.parent
        headers = {loop.header for loop in around}
        found: list[tuple[int, int]] = []
        for branch in self._branches:
            if branch != block and post.dominates(block, branch):
                continue
            for successor in set(self.flow.succ[branch]):
                if not post.dominates(block, successor):
                    continue
                if successor in headers and self.dominators.dominates(successor, branch) \
                        and self.uniform_branch(branch):
                    continue  # another round of a uniform loop around the block
                if self._next_round(block, branch, successor, around):
                    continue
                found.append((branch, successor))
        return found

    def _next_round(self, block: int, branch: int, successor: int, around: list[Loop]) -> bool:
        """Whether the edge is a uniform loop test's way on to another round of a loop
        around `block` that `block` comes before in each round (the test of a ``while``
        loop, after its header): it decides how often the block runs, not which threads."""
        if not self.dominators.dominates(block, branch) or not self.uniform_branch(branch):
            return False
        return any(branch in loop.blocks and successor in loop.blocks
                   and any(other not in loop.blocks for other in self.flow.succ[branch]) for loop in around)

    def uniform_exit(self, loop: Loop) -> tuple[int, int] | None:
        """The one exit edge of `loop` when its branch tests a CTA-uniform predicate;
        kept per loop (asked for each loop around every ``bar.sync`` and barrier)."""
        if loop not in self._exits:
            self._exits[loop] = _uniform_exit(self.flow, loop, self)
        return self._exits[loop]

    def uniform_branch(self, branch: int) -> bool:
        if branch not in self._uniform:
            guard = guard_of(self.flow, branch)
            self._uniform[branch] = guard is not None and cta_uniform(guard, self.defined, self.flow)
        return self._uniform[branch]


def _counted_phases(flow: FlowGraph, named: Named, forest: LoopForest, dominators: DominatorTree,
                    threads: _Threads) -> dict[int, Count]:
    """``id(event) -> (n, loops)`` for the operations on a named barrier with one id that
    every path reaches after exactly `n` operations on it outside loops and after the
    loops in `loops` (their headers): loops that every thread entering runs alike
    (`_alike`), so that they add the same count in every thread."""
    found: dict[int, Count] = {}
    for barrier, on in _by_barrier(named).items():
        found.update(_count(flow, on, barrier, forest, dominators, threads)[0])
    return found


def _by_barrier(named: Named) -> dict[int, dict[int, list[NamedBarrierOp]]]:
    """barrier id -> {block: the operations in it that may be on that barrier}, for the
    ids some operation names alone."""
    by_block: dict[int, list[NamedBarrierOp]] = {}
    for block, _, event in named:
        by_block.setdefault(block, []).append(event)
    out: dict[int, dict[int, list[NamedBarrierOp]]] = {}
    for barrier in {next(iter(e.sync[1])) for _, _, e in named if e.sync[1] is not None and len(e.sync[1]) == 1}:
        on = {block: [e for e in found_here if e.sync[1] is None or barrier in e.sync[1]]
              for block, found_here in by_block.items()}
        out[barrier] = {block: ops for block, ops in on.items() if ops}
    return out


def _count(flow: FlowGraph, on: dict[int, list[NamedBarrierOp]], barrier: int, forest: LoopForest,
           dominators: DominatorTree, threads: _Threads, entry: int | None = None,
           within: frozenset[int] | None = None) -> tuple[dict[int, Count], dict[int, Count | None]]:
    """``(found, counts)``: the counted phases of the operations `on` (block -> events)
    the barrier, from the kernel's entry or from block `entry` through the blocks
    `within` (the loops wholly inside them), and the count at the end of each block
    (None where the ways disagree)."""
    # a loop whose header is the entry is counted one round at a time: the round's blocks
    looping = {loop for loop in forest.loops if any(b in on for b in loop.blocks)
               and (within is None or loop.blocks <= within) and loop.header != entry}
    outermost = [loop for loop in looping if not _inside_any(loop, looping)]
    owner = {block: loop for loop in outermost for block in loop.blocks}
    start = entry if entry is not None else flow.start
    found: dict[int, Count] = {}
    counts: dict[int, Count | None] = {}  # the count at the end of a block; None: not one count
    for block in flow.rpo:
        if within is not None and block not in within:
            continue
        loop = owner.get(block)
        if loop is not None and block != loop.header:
            counts[block] = counts[loop.header]  # what leaves the loop: what its header gives
            continue
        incoming = [counts[p] for p in flow.pred[block] if p in counts and (loop is None or p not in loop.blocks)
                    and block != start]
        state = _join(incoming + [(0, frozenset())] * (block == start), block, threads)
        if loop is not None:
            counts[block] = (state[0], state[1] | {loop.header}) \
                if state is not None and _alike(flow, loop, on, barrier, dominators, threads) else None
            continue
        for event in on.get(block, ()):
            certain = event.guard is None and event.sync[1] == frozenset({barrier})
            if state is not None and certain:
                found[id(event)] = state
            state = (state[0] + 1, state[1]) if state is not None and certain else None
        counts[block] = state
    return found, counts


def _visited_regions(flow: FlowGraph, named: Named, forest: LoopForest, dominators: DominatorTree,
                     threads: _Threads) -> list[dict[int, Place]]:
    """For each barrier whose operations have no counted phase because they lie in a loop
    that threads leave on their own (Triton's warp-specialization dispatch loop, which
    reads each warp's partition from shared memory), ``{id(event): (n, loops, inside)}``
    counted from the entry of the region they all lie in (the blocks of that loop
    dominated by the operations' nearest common dominator): the count and the loops
    before the operation, and the header of the region's loop around it, if any (its
    place is then that loop's). Each visit of the region runs the same
    sequence of operations on the barrier when every operation in it is counted, every
    way out of it leaves with the same count, no way leads back to its entry inside it,
    and every CTA-uniform branch in it tests values that are the same at every visit
    (`_Visits`): then an operation counted before another never shares its phase, in
    one visit or across visits (docs/fence.md §4.2)."""
    found: list[dict[int, Place]] = []
    for barrier, on in _by_barrier(named).items():
        entry = _common_dominator(dominators, on)
        loop = threads.innermost.get(entry) if entry is not None else None
        if entry is None or loop is None:
            continue
        region = frozenset(block for block in loop.blocks if dominators.dominates(entry, block))
        if entry == loop.header or any(entry in flow.succ[block] for block in region):
            continue
        counted, counts = _count(flow, on, barrier, forest, dominators, threads, entry, region)
        places: dict[int, Place] = {key: (n, loops, None) for key, (n, loops) in counted.items()}
        for block, ops in on.items():
            inner = threads.innermost.get(block)
            while inner is not None and inner.parent is not None and inner.parent.blocks <= region:
                inner = inner.parent
            after = counts.get(inner.header) if inner is not None and inner.blocks <= region else None
            if inner is None or after is None:
                continue  # only counted operations have a place
            for event in ops:
                if id(event) not in places and event.guard is None and event.sync[1] == frozenset({barrier}):
                    places[id(event)] = (after[0], after[1] - {inner.header}, inner.header)
        if len(places) != sum(len(ops) for ops in on.values()):
            continue  # an operation whose place in the visit is not certain
        ends = {counts.get(block) for block in region for successor in flow.succ[block] if successor not in region}
        looping = [inner for inner in forest.loops if inner.blocks <= region and any(b in on for b in inner.blocks)]
        if len(ends) != 1 or None in ends or not _Visits(flow, threads, entry, region, loop).same_each_time(looping):
            continue
        found.append(places)
    return found


def _apart_in_a_visit(first: Place, second: Place) -> bool:
    """Whether two operations placed in a visit (`_visited_regions`: the count before
    them, the loops before them, and the loop around them or None) come one before the
    other in every visit: counted ones as `_before` says; one in a loop before the
    other when the other follows that loop, or comes before the loop's count."""
    (n1, loops1, in1), (n2, loops2, in2) = first, second
    if in1 is None and in2 is None:
        return _before((n1, loops1), (n2, loops2)) or _before((n2, loops2), (n1, loops1))
    if in1 == in2:
        return False  # in one loop: docs/fence.md §4.2's rule for a loop's body decides
    return _ahead(first, second) or _ahead(second, first)


def _ahead(first: Place, second: Place) -> bool:
    """`first` comes before `second` in every visit."""
    (n1, loops1, in1), (n2, loops2, in2) = first, second
    done = loops1 | {in1} if in1 is not None else loops1  # the loops behind `first` once it is over
    if in1 is not None:
        return done <= loops2 and n1 <= n2  # `second` follows the whole loop of `first`
    return loops1 <= loops2 and n1 < n2 if in2 is not None else _before((n1, loops1), (n2, loops2))


def _common_dominator(dominators: DominatorTree, blocks: Iterable[int]) -> int | None:
    """The nearest block that dominates every one of `blocks`; None when there is none
    (one of them is unreachable from the entry)."""
    blocks = list(blocks)
    chain: list[int] = []
    node = blocks[0]
    while True:
        chain.append(node)
        parent = dominators.idom.get(node, node)
        if not isinstance(parent, int) or parent == node:  # the dominators of blocks: parents are blocks
            break
        node = parent
    return next((candidate for candidate in chain if all(dominators.dominates(candidate, b) for b in blocks)), None)


class _Visits:
    """Whether the CTA-uniform branches of a `region` (from block `entry`, inside `loop`)
    test values that are the same at every visit: computed from constants, kernel
    parameters and CTA-wide registers, through registers set before every loop around
    the region or set inside it before they are read (no value carried from the
    previous visit)."""

    def __init__(self, flow: FlowGraph, threads: _Threads, entry: int, region: frozenset[int], loop: Loop) -> None:
        self.flow, self.threads, self.entry, self.region = flow, threads, entry, region
        self.around = [loop, *loop.enclosing()]

    def same_each_time(self, looping: list[Loop]) -> bool:
        """Whether the branches that decide how often the `looping` loops (those with
        operations on the barrier) run test values fixed across visits: their exits, and
        the branches before them that may skip them. A branch whose two ways run
        different operations, or that decides a loop inside one of them, leaves no
        count (`_count`), so no other branch changes the sequence."""
        inside = {block for inner in looping for block in inner.blocks}
        before: set[int] = set().union(*(reachable(self.flow.pred, [inner.header]) for inner in looping))
        for block in self.region:
            exits = any(block in inner.blocks and any(s not in inner.blocks for s in self.flow.succ[block])
                        for inner in looping)
            deciding = block in before and block not in inside or exits
            # a `conditional` branch has a guard, which `guard_of` names
            if deciding and conditional(self.flow, block) and self.threads.uniform_branch(block) \
                    and not self._fixed(guard_of(self.flow, block), frozenset()):  # type: ignore[arg-type]
                return False
        return True

    def _fixed(self, register: str, seen: frozenset[str]) -> bool:
        if register in seen or is_special_register(register):
            return True  # special registers: cta_uniform took only CTA-wide ones
        sites = self.threads.defined.get(register, ())
        if not sites:
            return False
        inside = [site for site in sites if site[0] in self.region]
        if any(site[0] in loop.blocks for site in sites if site[0] not in self.region for loop in self.around):
            return False  # set again on the way round, outside the region
        if inside and self._carried(register):
            return False  # a value from the previous visit
        seen = seen | {register}
        for block, position in inside:
            instruction, head = self.flow.blocks[block].instructions[position], self.flow.blocks[block].heads[position]
            reads = _read_registers(instruction, head)
            if not all(self._fixed(qualified(self.flow, block, name), seen) for name in reads):
                return False
        return True

    def _carried(self, register: str) -> bool:
        """Whether some way from the region's entry reads `register` before an unguarded
        instruction of the region sets it."""
        work, seen = [self.entry], {self.entry}
        while work:
            block = work.pop()
            access = self._first_access(block, register)
            if access == "read":
                return True
            if access is None:
                for successor in self.flow.succ[block]:
                    if successor in self.region and successor not in seen:
                        seen.add(successor)
                        work.append(successor)
        return False

    def _first_access(self, block: int, register: str) -> str | None:
        """How the block first touches `register` (a qualified name): "read", "write" (an
        unguarded one) or None; only instructions that name it are parsed."""
        code = self.flow.blocks[block]
        prefix = code.context.prefix if code.context is not None else ""
        if not register.startswith(prefix):
            return None  # a register of another inlined copy
        name = register[len(prefix):]
        for instruction, head in zip(code.instructions, code.heads):
            if name not in instruction.text:
                continue
            if name in _read_registers(instruction, head):
                return "read"
            if head[0] is None and name in destinations(instruction, head, frozenset()):
                return "write"
        return None


def _read_registers(instruction: Instruction, head: HeadTuple) -> list[str]:
    """The registers an instruction reads: its guard, its sources, and those of an
    address it writes through."""
    operands = instruction.operands
    read = [head[0].register] if head[0] is not None else []
    for index, operand in enumerate(operands):
        if index == 0 and operand.kind != "memory":
            continue  # the destination
        read += [e.name for e in (operand, *operand.elements) if e.kind == "register" and e.name is not None]
    return read


def _before(first: Count, second: Count) -> bool:
    """Whether every thread's operation counted `first` comes in an earlier phase than
    any thread's counted `second`: fewer operations outside loops, and loops that the
    second follows too (each adds as many in every thread, zero or more)."""
    return first[1] <= second[1] and first[0] < second[0]


def _inside_any(loop: Loop, loops: set[Loop]) -> bool:
    return any(parent in loops for parent in loop.enclosing())


def _join(states: list[Count | None], block: int, threads: _Threads) -> Count | None:
    """The count where `states` meet: one count; a loop that some ways skip only when
    the threads that run it are those that run `block` (the skip is the whole CTA's).
    One way in gives its own count (most blocks, in `_count`'s walk over every block)."""
    if len(states) == 1:
        return states[0]
    known = [state for state in states if state is not None]
    if not known or len(known) < len(states) or len({n for n, _ in known}) != 1:
        return None
    loops = [found for _, found in known]
    union: frozenset[int] = frozenset().union(*loops)
    common = frozenset.intersection(*loops)
    if any(not threads.same(header, block) for header in union - common):
        return None
    return known[0][0], union


def _alike(flow: FlowGraph, loop: Loop, on: dict[int, list[NamedBarrierOp]], barrier: int,
           dominators: DominatorTree, threads: _Threads) -> bool:
    """Whether every thread entering `loop` runs it alike: one exit on a CTA-uniform
    test, taken by the threads that enter it, and every operation on `barrier` in it
    unguarded and run once in every iteration."""
    exit_edge = threads.uniform_exit(loop)
    if exit_edge is None or not threads.same(loop.header, exit_edge[1]):
        return False
    innermost = threads.innermost
    return all(innermost.get(block) is loop and event.guard is None and event.sync[1] == frozenset({barrier})
               and all(dominators.dominates(block, latch) for latch in loop.latches)
               for block in loop.blocks for event in on.get(block, ()))


def _uniform_exit(flow: FlowGraph, loop: Loop, threads: _Threads) -> tuple[int, int] | None:
    """The one exit edge of `loop` when its branch tests a CTA-uniform predicate
    (`_Threads.uniform_branch`)."""
    exits = [(u, v) for u in loop.blocks for v in flow.succ[u] if v not in loop.blocks]
    if len(exits) != 1 or any(u in flow.exits for u in loop.blocks) or len(flow.succ[exits[0][0]]) != 2:
        return None
    return exits[0] if threads.uniform_branch(exits[0][0]) else None
