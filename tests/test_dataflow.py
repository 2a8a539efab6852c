"""ptxkit.cfg.flow.dataflow: the worklist solver reaches the least fixpoint.

For a gen/kill problem over bit sets (distributive), the least fixpoint equals the
union over all paths, which a brute-force reachability search computes directly.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxkit.cfg.flow.dataflow import bits, solve_forward
from ptxkit.cfg.flow.graph import reverse_postorder

BITS = 4


@st.composite
def problems(draw):
    n = draw(st.integers(1, 10))
    succ = [draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True)) for _ in range(n)]
    pred = [[u for u in range(n) if v in succ[u]] for v in range(n)]
    gen = [draw(st.integers(0, 2**BITS - 1)) for _ in range(n)]
    kill = [draw(st.integers(0, 2**BITS - 1)) & ~gen[i] for i in range(n)]
    entry = draw(st.integers(0, 2**BITS - 1))
    graph = SimpleNamespace(succ=succ, pred=pred, rpo=reverse_postorder(succ, 0), start=0)
    return graph, gen, kill, entry


def brute_force_in(graph, gen, kill, entry) -> list[int]:
    """Bit b is in in(n) iff some path brings it to n: from the start (if in entry) or
    from a reachable block generating it, through blocks that do not kill it."""
    n = len(graph.succ)
    result = [0] * n
    reachable = set(graph.rpo)
    for bit in range(BITS):
        mask = 1 << bit
        sources = [(s, True) for s in reachable if gen[s] & mask]  # the bit leaves a generating block
        if entry & mask:
            sources.append((0, False))  # the bit enters the start block
        reached = set()
        for source, leaving in sources:
            stack = list(graph.succ[source]) if leaving else [source]
            seen = set()
            while stack:
                node = stack.pop()
                if node in seen:
                    continue
                seen.add(node)
                reached.add(node)
                if not kill[node] & mask or gen[node] & mask:
                    stack.extend(graph.succ[node])
        for node in reached:
            result[node] |= mask
    return result


@settings(max_examples=300, deadline=None)
@given(problems())
def test_least_fixpoint_equals_the_union_over_all_paths(problem):
    graph, gen, kill, entry = problem
    result = solve_forward(graph, lambda node, x: (x & ~kill[node]) | gen[node], entry=entry, bottom=0,
                           join=int.__or__)
    assert result.ins == brute_force_in(graph, gen, kill, entry)
    assert all(result.outs[v] == 0 for v in range(len(graph.succ)) if v not in graph.rpo)


def test_other_lattices_work_too():
    """Dict-valued states (as the provenance analysis uses): join by key."""
    graph = SimpleNamespace(succ=[[1, 2], [3], [3], []], pred=[[], [0], [0], [1, 2]], rpo=[0, 2, 1, 3], start=0)
    defs = {1: {"a": 1}, 2: {"a": 2, "b": 4}}

    def join(x, y):
        return {k: x.get(k, 0) | y.get(k, 0) for k in x.keys() | y.keys()}

    result = solve_forward(graph, lambda n, x: {**x, **defs.get(n, {})}, entry={}, bottom={}, join=join)
    assert result.ins[3] == {"a": 3, "b": 4}


def test_a_non_monotone_problem_is_reported_not_looped_forever():
    graph = SimpleNamespace(succ=[[0]], pred=[[0]], rpo=[0], start=0)
    with pytest.raises(RuntimeError, match="did not converge within 10 rounds"):
        solve_forward(graph, lambda n, x: x + 1, entry=0, bottom=0, join=max, max_rounds=10)


def test_a_merge_replaces_the_join_at_its_node():
    """Node 2 is entered from 0 and 1; its merge intersects where the join would unite."""
    graph = SimpleNamespace(succ=[[1, 2], [2], []], pred=[[], [0], [0, 1]], rpo=[0, 1, 2], start=0)
    gens = {0: 0b01, 1: 0b10, 2: 0}
    transfer = lambda n, x: x | gens[n] if n != 1 else (x & ~0b01) | gens[n]  # noqa: E731
    united = solve_forward(graph, transfer, entry=0, bottom=0, join=int.__or__)
    merged = solve_forward(graph, transfer, entry=0, bottom=0, join=int.__or__,
                           merges={2: lambda outs: outs[0] & outs[1]})
    assert united.ins[2] == 0b11 and merged.ins[2] == 0b00


@settings(max_examples=300, deadline=None)
@given(problems(), st.data())
def test_a_solution_resumed_after_gens_grew_is_the_one_solved_from_scratch(problem, data):
    graph, gen, kill, entry = problem

    def solve(**resume):
        return solve_forward(graph, lambda node, state: (state & ~kill[node]) | gen[node], entry=entry, bottom=0,
                             join=int.__or__, **resume)

    before = solve()
    grown = data.draw(st.lists(st.integers(0, len(gen) - 1), unique=True))
    for node in grown:
        gen[node] |= data.draw(st.integers(0, 2**BITS - 1)) & ~kill[node]
    assert solve(since=before, changed=grown) == solve()


@given(st.sets(st.integers(0, 300)))
def test_bits_lists_the_members_of_a_mask_lowest_first(members):
    assert list(bits(sum(1 << member for member in members))) == sorted(members)
