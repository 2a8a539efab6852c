"""ptxkit.cfg.flow.dominance: the list-based dominator trees agree with networkx and with the
definition (every path from the root passes the dominator)."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from ptxkit.cfg.flow.dominance import DominatorTree, compute_idoms, immediate_dominators, immediate_post_dominators
from ptxkit.cfg.flow.graph import ENTRY, EXIT, BasicBlock, FlowGraph


@st.composite
def flow_graphs(draw) -> FlowGraph:
    """Random CFGs: n blocks, arbitrary edges (loops, irreducible cycles, dead code)."""
    n = draw(st.integers(1, 12))
    edges = [(ENTRY, 0, "entry")]
    for u in range(n):
        for v in draw(st.lists(st.integers(0, n - 1), max_size=3, unique=True)):
            edges.append((u, v, "branch"))
        if draw(st.booleans()):
            edges.append((u, EXIT, "return"))
    return FlowGraph(None, [BasicBlock(i) for i in range(n)], edges, {})


def as_networkx(flow: FlowGraph) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(flow)))
    graph.add_node(EXIT)
    for u in range(len(flow)):
        graph.add_edges_from((u, v) for v in flow.succ[u])
    graph.add_edges_from((u, EXIT) for u in flow.exits)
    return graph


def reaches_without(graph: nx.DiGraph, start, target, removed) -> bool:
    if start == removed:
        return False
    return target in nx.descendants(graph.subgraph(n for n in graph if n != removed), start) | {start}


@settings(max_examples=200, deadline=None)
@given(flow_graphs())
def test_dominators_agree_with_networkx_and_the_definition(flow):
    graph = as_networkx(flow)
    tree = DominatorTree.of(flow)
    assert tree.idom == {n: d for n, d in immediate_dominators(graph, 0).items() if n != EXIT}
    for a in tree.idom:
        for b in tree.idom:
            assert tree.dominates(a, b) == (a == b or not reaches_without(graph, 0, b, a))


@settings(max_examples=200, deadline=None)
@given(flow_graphs())
def test_post_dominators_agree_with_networkx(flow):
    graph = as_networkx(flow)
    tree = DominatorTree.post_of(flow)
    expected = immediate_post_dominators(graph, EXIT)
    assert tree.idom == expected
    reversed_graph = graph.reverse()
    for a in expected:
        for b in expected:
            assert tree.dominates(a, b) == (a == b or not reaches_without(reversed_graph, EXIT, b, a))


def test_the_start_node_maps_to_itself_whatever_networkx_does():
    graph = nx.DiGraph([(0, 1), (1, 2), (0, 2)])
    assert immediate_dominators(graph, 0) == {0: 0, 1: 0, 2: 0}
    assert list(immediate_dominators(graph, 0)) == [0, 1, 2]  # in the graph's node order


def test_unreachable_and_exitless_nodes_are_left_out():
    flow = FlowGraph(None, [BasicBlock(i) for i in range(4)],
                     [(ENTRY, 0, "entry"), (0, 1, "branch"), (1, 1, "branch"), (0, EXIT, "return"),
                      (3, EXIT, "return")], {})
    dom, post = DominatorTree.of(flow), DominatorTree.post_of(flow)
    assert set(dom.idom) == {0, 1} and 3 not in dom
    assert set(post.idom) == {EXIT, 0, 3} and 1 not in post  # block 1 loops forever
    assert not dom.dominates(0, 3) and not dom.dominates(2, 0)


def test_compute_idoms_on_dicts():
    succ = {"a": ["b", "c"], "b": ["d"], "c": ["d"], "d": []}
    pred = {"a": [], "b": ["a"], "c": ["a"], "d": ["b", "c"]}
    assert compute_idoms(succ, pred, "a") == {"a": "a", "c": "a", "b": "a", "d": "a"}


def test_many_branches_into_one_block_stay_fast():
    """Bounds checks branching to one exit block: the iterative Cooper-Harvey-Kennedy
    algorithm walks the whole dominator chain once per branch there (20 000 branches:
    minutes); Lengauer-Tarjan does not."""
    import time

    n = 20_000
    edges = [(ENTRY, 0, "entry")] + [(i, i + 1, "fallthrough") for i in range(n)]
    edges += [(i, n, "taken") for i in range(n - 1)] + [(n, EXIT, "return")]
    flow = FlowGraph(None, [BasicBlock(i) for i in range(n + 1)], edges, {})
    start = time.perf_counter()
    tree, post = DominatorTree.of(flow), DominatorTree.post_of(flow)
    assert time.perf_counter() - start < 5
    assert tree.idom[n] == 0 and tree.idom[n - 1] == n - 2 and post.idom[0] == n
