"""Named-barrier operations that cannot share a phase (docs/fence.md §4.2).

The hand-off rule matches every arrive with every wait on the same object, whatever the
phase. For a named barrier one case is certain: a ``bar.sync`` that no operation on the
same barrier can precede, outside any loop (the ``__syncthreads()`` after a kernel's
prologue), is the first operation on that barrier of every thread that runs it, so it
belongs to phase 1. A thread that reaches an operation a first one dominates went
through that first one already, so its arrival there counts for phase 2 or after: no
first ``bar.sync`` hears the epilogue's ``bar.sync``, nor the epilogue a first one.

The same holds around a loop that every thread of a CTA runs the same number of times
(its one exit tests values the whole CTA shares: parameters, ``%ctaid``, a counter):
a ``bar.sync`` run once in every iteration belongs to the loop's phases, an operation on
the same barrier after the loop (or before it) to a later (or earlier) one, provided
the threads that use the barrier keep its phases in step, which a correct kernel does.
"""

from __future__ import annotations

from ptxkit.cfg.divergence import cta_uniform, definitions
from ptxkit.cfg.dominance import DominatorTree
from ptxkit.cfg.events import Kind
from ptxkit.cfg.loops import find_loops
from ptxkit.isa import SyncObject

__all__ = ["separate_phases"]


def separate_phases(flow, events: list[list], matches) -> set[tuple[int, int]]:
    """``(id(wait), id(arrive))`` pairs of named-barrier events that cannot meet in one
    phase; `matches(a, b)` says whether two sync keys may name the same barrier.

    >>> import ptxkit
    >>> from ptxkit.cfg.events import classify, EventOptions
    >>> from ptxkit.cfg.inline import inlined_graph
    >>> from ptxkit.cfg.locations import SHARED
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     "\\tbar.sync 0;\\n\\tbar.sync 0;\\n\\tret;\\n}\\n")
    >>> flow = inlined_graph(m.function("k"))
    >>> by_block = classify(flow, EventOptions(SHARED)).by_block
    >>> first, second = by_block[0]
    >>> sorted(separate_phases(flow, by_block, lambda a, b: a == b)) == sorted([(id(first), id(second)),
    ...                                                                         (id(second), id(first))])
    True
    """
    named = [(block, index, event) for block, found in enumerate(events) for index, event in enumerate(found)
             if event.sync is not None and event.sync[0] is SyncObject.NAMED_BARRIER]
    if len(named) < 2:
        return set()
    dominators = DominatorTree.of(flow)
    pairs = _around_uniform_loops(flow, named, matches, dominators)
    firsts = [(block, index, event) for block, index, event in named
              if event.kind is Kind.ARRIVE_WAIT and event.guard is None
              and _first_on_its_barrier(flow, events, block, index, event, matches)]
    if not firsts:
        return pairs
    later = [event for block, index, event in named  # a first of the same barrier ran before them
             if any(f is not event and matches(f.sync, event.sync)
                    and (index > i if block == b else dominators.dominates(b, block)) for b, i, f in firsts)]
    for _, _, first in firsts:
        for event in later:
            if matches(first.sync, event.sync):
                pairs.add((id(first), id(event)))
                pairs.add((id(event), id(first)))
    return pairs


def _around_uniform_loops(flow, named: list, matches, dominators) -> set[tuple[int, int]]:
    """Pairs of a ``bar.sync`` run once per iteration of a CTA-uniform loop and an
    operation on the same barrier outside it, before or after (not around) it."""
    pairs: set[tuple[int, int]] = set()
    if not any(e.kind is Kind.ARRIVE_WAIT for _, _, e in named):
        return pairs
    forest = find_loops(flow, dominators)
    innermost = forest.innermost()
    defined = None
    for loop in forest.loops:
        inside = [e for block, _, e in named if innermost.get(block) is loop and e.kind is Kind.ARRIVE_WAIT
                  and e.guard is None and all(dominators.dominates(block, latch) for latch in loop.latches)]
        if not inside:
            continue
        exits = [(u, v) for u in loop.blocks for v in flow.succ[u] if v not in loop.blocks]
        if len(exits) != 1 or any(u in flow.exits for u in loop.blocks) or len(flow.succ[exits[0][0]]) != 2:
            continue
        guard = flow.blocks[exits[0][0]].heads[-1][0]
        defined = definitions(flow) if defined is None else defined
        if guard is None or not cta_uniform(guard.register, defined, flow):
            continue
        after = _reach(flow.succ, exits[0][1])
        before = _reach(flow.pred, loop.header)
        for block, _, event in named:
            if block in loop.blocks or (block in after) == (block in before):
                continue  # in the loop, around it, or unrelated
            for inner in inside:
                if matches(inner.sync, event.sync):
                    pairs.add((id(inner), id(event)))
                    pairs.add((id(event), id(inner)))
    return pairs


def _reach(adjacency, start: int) -> set[int]:
    seen, stack = {start}, [start]
    while stack:
        for nxt in adjacency[stack.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def _first_on_its_barrier(flow, events, block: int, index: int, first, matches) -> bool:
    """True when no operation on `first`'s barrier can run before it, and it is in no
    loop (nothing leads from it back to itself)."""
    if any(_on_barrier(e, first, matches) for e in events[block][:index]):
        return False
    seen = set()
    stack = list(flow.pred[block])
    while stack:
        current = stack.pop()
        if current == block:
            return False  # a loop through the first
        if current in seen:
            continue
        seen.add(current)
        if any(_on_barrier(e, first, matches) for e in events[current]):
            return False
        stack.extend(flow.pred[current])
    return True


def _on_barrier(event, first, matches) -> bool:
    return event.sync is not None and event.sync[0] is SyncObject.NAMED_BARRIER and matches(first.sync, event.sync)
