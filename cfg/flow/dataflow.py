"""A generic forward dataflow solver: worklist in reverse post-order over a lattice.

The graph is anything with ``succ`` and ``pred`` lists indexed by node number, an
``rpo`` (reverse post-order of the reachable nodes) and a ``start`` node, such as a
`FlowGraph`. The lattice is given by a `join` (least upper bound), a `bottom` and an
equality test; the transfer function maps ``(node, in_state)`` to ``out_state``. The
result is the least fixpoint of ``in[n] = join(out[p] for p in pred[n])`` (joined
with `entry` at the start node) and ``out[n] = transfer(n, in[n])``, provided the
transfer functions are monotone and the lattice has finite height.

>>> from types import SimpleNamespace
>>> loop = SimpleNamespace(succ=[[1], [1, 2], []], pred=[[], [0, 1], [1]], rpo=[0, 1, 2], start=0)
>>> gens = {0: 1, 1: 2, 2: 0}
>>> result = solve_forward(loop, lambda n, x: x | gens[n], entry=0, bottom=0, join=int.__or__)
>>> result.ins, result.outs
([0, 3, 3], [1, 3, 3])
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Callable, Iterable, Iterator

from ptxkit._records import TYPE_CHECKING, Record

if TYPE_CHECKING:
    from typing import Any, TypeVar

    from ptxkit.cfg.flow.protocols import ForwardGraph

    #: A state of the lattice.
    State = TypeVar("State")


class DataflowResult(Record):
    """In- and out-states by node number (`bottom` for unreachable nodes).

    >>> from types import SimpleNamespace
    >>> graph = SimpleNamespace(succ=[[1], [], []], pred=[[], [0], []], rpo=[0, 1], start=0)
    >>> solve_forward(graph, lambda n, x: x + 1, entry=0, bottom=0, join=max)
    DataflowResult(ins=[0, 1, 0], outs=[1, 2, 0])
    """

    # a state per node; Any, as a record cannot be generic in its lattice
    ins: "list[Any]"
    outs: "list[Any]"


def solve_forward(graph: ForwardGraph, transfer: Callable[[int, State], State], *, entry: State, bottom: State,
                  join: Callable[[State, State], State],
                  equal: Callable[[State, State], bool] = operator.eq, max_rounds: int | None = None,
                  merges: dict[int, Callable[[dict[int, State]], State]] | None = None,
                  since: DataflowResult | None = None, changed: Iterable[int] = ()) -> DataflowResult:
    """Solve a forward dataflow problem to its least fixpoint (see the module doc).

    Every reachable node is visited at least once, in reverse post-order; afterwards
    a node is revisited only when the out-state of a predecessor changed. The
    worklist is a heap of reverse post-order ranks, so inner loops settle before
    the code after them is looked at again.

    `max_rounds` (visits per node) turns a non-terminating problem (a non-monotone
    transfer or an infinite lattice) into a `RuntimeError` instead of a hang.
    `merges` maps a node to a function of its predecessors' out-states (a dict by
    predecessor) that replaces the join there.

    `since` resumes from an earlier solution after the transfers of the nodes in
    `changed` grew (monotone problems only): only those nodes, and what their new
    out-states reach, are visited again. The answer is the least fixpoint of the new
    problem, since the old one lies below it.

    >>> from types import SimpleNamespace
    >>> line = SimpleNamespace(succ=[[1], []], pred=[[], [0]], rpo=[0, 1], start=0)
    >>> solve_forward(line, lambda n, x: x + [n], entry=[], bottom=[], join=lambda a, b: a or b).outs
    [[0], [0, 1]]
    >>> loop = SimpleNamespace(succ=[[1], [1, 2], []], pred=[[], [0, 1], [1]], rpo=[0, 1, 2], start=0)
    >>> gens = [1, 0, 4]
    >>> make = lambda n, x: x | gens[n]
    >>> first = solve_forward(loop, make, entry=0, bottom=0, join=int.__or__)
    >>> gens[1] = 2  # node 1 now makes more: resumed or started over, the same answer
    >>> solve_forward(loop, make, entry=0, bottom=0, join=int.__or__, since=first, changed=[1])
    DataflowResult(ins=[0, 3, 3], outs=[1, 3, 7])
    >>> _ == solve_forward(loop, make, entry=0, bottom=0, join=int.__or__)
    True
    """
    n = len(graph.succ)
    order = graph.rpo
    rank = {node: i for i, node in enumerate(order)}
    if since is None:
        ins = [bottom] * n
        outs = [bottom] * n
        queued = set(order)
        heap = list(range(len(order)))
    else:
        ins, outs = list(since.ins), list(since.outs)
        queued = {node for node in changed if node in rank}
        heap = sorted(rank[node] for node in queued)
    start = graph.start
    pred = graph.pred
    succ = graph.succ
    visits = [0] * n
    while heap:
        node = order[heapq.heappop(heap)]
        queued.discard(node)
        state = entry if node == start else bottom
        if merges is not None and node in merges:
            state = join(state, merges[node]({p: outs[p] for p in pred[node]}))
        else:
            for p in pred[node]:
                state = join(state, outs[p])
        ins[node] = state
        out = transfer(node, state)
        if max_rounds is not None:
            visits[node] += 1
            if visits[node] > max_rounds:
                raise RuntimeError(f"dataflow did not converge within {max_rounds} rounds at node {node}")
        if equal(out, outs[node]):
            continue  # every reachable node starts queued, so nothing downstream is missed
        outs[node] = out
        for s in succ[node]:
            if s not in queued and s in rank:
                queued.add(s)
                heapq.heappush(heap, rank[s])
    return DataflowResult(ins, outs)


def bits(mask: int) -> Iterator[int]:
    """The positions of the set bits of `mask` (a set of small numbers as an int),
    lowest first.

    >>> list(bits(0b10110))
    [1, 2, 4]
    """
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def mask_of(numbers: Iterable[int]) -> int:
    """`numbers` (small, not negative) as a bit mask, the set `bits` reads back.

    >>> bin(mask_of([0, 3])), list(bits(mask_of([4, 1, 4])))
    ('0b1001', [1, 4])
    """
    mask = 0
    for number in numbers:
        mask |= 1 << number
    return mask
