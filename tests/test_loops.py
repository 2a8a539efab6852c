"""ptxkit.cfg.flow.loops: natural loops and nesting, irreducible flow, preheaders, branch regions."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import EXIT, flow_graph
from ptxkit.cfg.flow.loops import branch_region, closures, find_loops, find_preheader, on_cycles

from test_dominance import as_networkx, flow_graphs

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def flow(body: str):
    text = f"{HEAD}.visible .entry k()\n{{\n.reg .pred %p<4>;\n.reg .b32 %r<8>;\n{body}}}\n"
    return flow_graph(ptxkit.parse(text, "k.ptx").function("k"))


def names(graph, blocks) -> list[str]:
    return sorted(graph.blocks[b].name for b in blocks)


NESTED = """\tmov.u32 %r1, 0;
OUTER:
\tmov.u32 %r2, 0;
INNER:
\tadd.u32 %r2, %r2, 1;
\t@%p1 bra INNER;
\tadd.u32 %r1, %r1, 1;
\t@%p2 bra OUTER;
\tret;
"""


def test_nested_loops_outermost_first():
    g = flow(NESTED)
    forest = find_loops(g)
    outer, inner = forest.loops
    assert (g.blocks[outer.header].name, g.blocks[inner.header].name) == ("OUTER", "INNER")
    assert names(g, outer.blocks) == ["B3", "INNER", "OUTER"] and names(g, inner.blocks) == ["INNER"]
    assert inner.parent is outer and outer.parent is None and (outer.depth, inner.depth) == (1, 2)
    assert forest.innermost()[inner.header] is inner and not forest.irreducible


def test_two_back_edges_to_one_header_make_one_loop():
    g = flow("L:\n\t@%p1 bra A;\n\t@%p2 bra L;\nA:\n\t@%p3 bra L;\n\tret;\n")
    (loop,) = find_loops(g).loops
    assert sorted(loop.latches) == [1, 2] and loop.blocks == {0, 1, 2}


def test_irreducible_cycles_are_reported_not_looped():
    g = flow("\t@%p1 bra B;\nA:\n\tmov.u32 %r1, 1;\nB:\n\t@%p2 bra A;\n\tret;\n")
    forest = find_loops(g)
    assert forest.loops == [] and names(g, forest.irreducible) == ["A", "B"]


@settings(max_examples=150, deadline=None)
@given(flow_graphs())
def test_loop_bodies_are_cycles_through_their_header(graph):
    forest = find_loops(graph)
    reachable = set(graph.rpo)
    nxg = as_networkx(graph).subgraph(reachable)
    for loop in forest.loops:
        for block in loop.blocks:  # the header reaches the block and the block the header, inside the loop
            inside = nxg.subgraph(loop.blocks)
            assert nx.has_path(inside, loop.header, block) and nx.has_path(inside, block, loop.header)
        if loop.parent is not None:
            assert loop.blocks < loop.parent.blocks
    cyclic = {n for c in nx.strongly_connected_components(nxg) for n in c if len(c) > 1 or nxg.has_edge(n, n)}
    covered = set().union(*(l.blocks for l in forest.loops)) | forest.irreducible
    assert cyclic <= covered


def test_an_existing_preheader():
    g = flow("\tmov.u32 %r1, 0;\nL:\n\t@%p1 bra L;\n\tret;\n")
    pre = find_preheader(g, find_loops(g).loops[0])
    assert pre.block == 0 and not pre.needs_label


def test_a_preheader_to_create_with_a_label_and_redirected_branches():
    g = flow("\t@%p1 bra L;\n\tmov.u32 %r1, 0;\nL:\n\t@%p2 bra L;\n\tret;\n")
    loop = find_loops(g).loops[0]
    pre = find_preheader(g, loop)
    assert pre.block is None and pre.before is g.blocks[loop.header].labels[0]
    assert pre.retarget == [0] and pre.needs_label


def test_a_preheader_reached_only_by_fall_through_needs_no_label():
    g = flow("\t@%p1 bra X;\nL:\n\t@%p2 bra L;\nX:\n\tret;\n")
    pre = find_preheader(g, find_loops(g).loops[0])
    assert pre.block is None and pre.retarget == [] and not pre.needs_label


def test_a_loop_at_the_function_start():
    g = flow("L:\n\t@%p2 bra L;\n\tret;\n")
    pre = find_preheader(g, find_loops(g).loops[0])
    assert pre.block is None and pre.before.name == "L" and not pre.needs_label


def test_no_preheader_when_the_latch_falls_into_the_header():
    g = flow("\tbra.uni H;\nB:\n\tmov.u32 %r1, 1;\nH:\n\t@%p1 bra B;\n\tret;\n")
    (loop,) = find_loops(g).loops
    assert g.blocks[loop.header].name == "H" and find_preheader(g, loop).block == 0  # the bra.uni block
    g = flow("\t@%p3 bra H;\n\tbra.uni H;\nB:\n\tmov.u32 %r1, 1;\nH:\n\t@%p1 bra B;\n\tret;\n")
    (loop,) = find_loops(g).loops
    assert find_preheader(g, loop) is None  # two ways in, and a new block above H would run every trip


def test_no_preheader_for_brx_entries_or_invisible_labels():
    g = flow("ts: .branchtargets L, X;\n\tbrx.idx %r1, ts;\nL:\n\t@%p2 bra L;\nX:\n\tret;\n")
    assert find_preheader(g, find_loops(g).loops[0]) is None
    # the header's first label L1 is in a scope that the outside branch to L2 cannot see
    g = flow("\t@%p1 bra L2;\n\tmov.u32 %r1, 1;\n\t{\nL1:\n\t}\nL2:\n\t@%p2 bra L2;\n\tret;\n")
    (loop,) = find_loops(g).loops
    assert [l.name for l in g.blocks[loop.header].labels] == ["L1", "L2"] and find_preheader(g, loop) is None


def test_branch_regions():
    g = flow("\t@%p1 bra E;\n\tmov.u32 %r1, 1;\n\tbra.uni X;\nE:\n\tmov.u32 %r1, 2;\nX:\n\tret;\n")
    dom, post = DominatorTree.of(g), DominatorTree.post_of(g)
    region = branch_region(g, 0, dom, post)
    assert region.join == 3 and sorted(region.arms) == [1, 2] and region.blocks == {1, 2}
    assert branch_region(g, 1, dom, post) is None  # one successor
    assert branch_region(g, 0, dom, post, reject=lambda b: b == 2) is None


def test_branch_regions_with_an_empty_arm_a_loop_or_a_side_entry():
    g = flow("\t@%p1 bra X;\n\tmov.u32 %r1, 1;\nX:\n\tret;\n")
    region = branch_region(g, 0, DominatorTree.of(g), DominatorTree.post_of(g))
    assert region.join == 2 and region.blocks == {1} and 2 in region.arms
    g = flow("L:\n\t@%p1 bra L;\n\tret;\n")
    assert branch_region(g, 0, DominatorTree.of(g), DominatorTree.post_of(g)) is None
    g = flow("\t@%p1 bra A;\n\t@%p2 bra B;\n\tbra.uni X;\nA:\n\tmov.u32 %r1, 1;\nB:\n\tmov.u32 %r1, 2;\nX:\n\tret;\n")
    assert branch_region(g, 0, DominatorTree.of(g), DominatorTree.post_of(g)) is not None
    assert branch_region(g, 1, DominatorTree.of(g), DominatorTree.post_of(g)) is None  # B is entered from A
    g = flow("\t@%p1 ret;\n\tmov.u32 %r1, 1;\n\tret;\n")
    region = branch_region(g, 0, DominatorTree.of(g), DominatorTree.post_of(g))
    assert region.join == EXIT and EXIT in region.arms


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=30))
def test_on_cycles_finds_the_nodes_networkx_finds_on_cycles(edges):
    graph = {node: [] for node in range(12)}
    for source, target in edges:
        graph[source].append(target)
    reference = nx.DiGraph(edges)
    reference.add_nodes_from(graph)
    expected = {node for component in nx.strongly_connected_components(reference) for node in component
                if len(component) > 1 or reference.has_edge(node, node)}
    assert on_cycles(graph) == expected


def test_on_cycles_goes_deep_without_recursion():
    chain = {i: [i + 1] for i in range(20000)}
    chain[20000] = [0]
    assert len(on_cycles(chain)) == 20001 and on_cycles({0: [1], 1: [2]}) == frozenset()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11)), max_size=30), st.sets(st.integers(0, 11)))
def test_closures_are_the_nodes_networkx_finds_reachable(edges, roots):
    graph = [[] for _ in range(12)]
    for source, target in edges:
        graph[source].append(target)
    reference = nx.DiGraph(edges)
    reference.add_nodes_from(range(12))
    found = closures(sorted(roots), graph.__getitem__)
    reached = set(roots).union(*(nx.descendants(reference, root) for root in roots))
    assert set(found) == reached
    for node, mask in found.items():
        assert mask == sum(1 << other for other in nx.descendants(reference, node) | {node})


def test_closures_go_deep_without_recursion():
    chain = [[i + 1] for i in range(20000)] + [[]]
    found = closures([0], chain.__getitem__)
    assert found[0] == (1 << 20001) - 1 and found[20000] == 1 << 20000
