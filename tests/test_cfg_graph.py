"""ptxkit.cfg.flow.graph: basic blocks, edges and their kinds, label scopes, the DiGraph form,
the facts a graph keeps."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import networkx as nx
import pytest

import ptxkit
import ptxkit.cfg
from ptxkit.cfg.flow.graph import ENTRY, EXIT, Fact, build_cfg, flow_graph, reverse_postorder
from ptxkit.cfg.flow.inline import inlined_graph

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def function(body: str, name: str = "k"):
    text = f"{HEAD}.visible .entry {name}()\n{{\n.reg .pred %p<4>;\n.reg .b32 %r<8>;\n{body}}}\n"
    return ptxkit.parse(text, "k.ptx").function(name)


def edges(graph) -> set:
    return {(u, v, kind) for u, v, kind in graph.edges(data="kind")}


def test_straight_line_is_one_block():
    g = build_cfg(function("\tmov.u32 %r1, 0;\n\tcall.uni f, ();\n\tadd.u32 %r1, %r1, 1;\n\tret;\n"))
    assert edges(g) == {(ENTRY, 0, "entry"), (0, EXIT, "return")}
    assert [str(s) for s in g.nodes[0]["statements"]] == ["mov.u32 %r1, 0;", "call.uni f, ();",
                                                          "add.u32 %r1, %r1, 1;", "ret;"]


def test_guarded_and_unguarded_branches():
    g = build_cfg(function(
        "\t@%p1 bra A;\n\tbra.uni B;\nA:\n\t@!%p2 ret;\n\texit;\nB:\n\t@%p3 trap;\nC:\n\tbra C;\n"))
    assert edges(g) == {
        (ENTRY, 0, "entry"), (0, 2, "taken"), (0, 1, "fallthrough"), (1, 4, "branch"),
        (2, EXIT, "return"), (2, 3, "fallthrough"), (3, EXIT, "exit"),
        (4, EXIT, "trap"), (4, 5, "fallthrough"), (5, 5, "branch"),
    }
    assert [g.nodes[n]["labels"] for n in range(6)] == [[], [], ["A"], [], ["B"], ["C"]]


def test_a_branch_to_the_next_block_has_both_kinds():
    g = build_cfg(function("\t@%p1 bra A;\nA:\n\tret;\n"))
    assert g.edges[0, 1]["kind"] == "taken,fallthrough"


def test_falling_off_the_end_reaches_exit_and_consecutive_labels_share_a_block():
    g = build_cfg(function("\tmov.u32 %r1, 0;\nA:\nB:\n\tmov.u32 %r2, 0;\n"))
    assert edges(g) == {(ENTRY, 0, "entry"), (0, 1, "fallthrough"), (1, EXIT, "fallthrough")}
    assert g.nodes[1]["labels"] == ["A", "B"]


def test_code_after_an_unconditional_branch_is_an_unreachable_block():
    g = build_cfg(function("\tbra.uni A;\n\tmov.u32 %r1, 0;\nA:\n\tret;\n"))
    assert list(g.predecessors(1)) == [] and (0, 2) in g.edges
    assert flow_graph(g.graph["function"]).rpo == [0, 2]


def test_brx_idx_uses_its_branchtargets_list():
    g = build_cfg(function("ts: .branchtargets A, B;\n\tbrx.idx %r1, ts;\nA:\n\tret;\nB:\n\tret;\n"))
    assert edges(g) == {(ENTRY, 0, "entry"), (0, 1, "indirect"), (0, 2, "indirect"),
                        (1, EXIT, "return"), (2, EXIT, "return")}  # no fall-through after brx.idx


def test_labels_resolve_in_their_innermost_scope():
    body = (
        "\t{\n\tLAB: mov.u32 %r1, 0;\n\t@%p1 bra LAB;\n\t}\n"
        "\t{\n\tLAB: mov.u32 %r2, 0;\n\t@%p1 bra LAB;\n\t}\n"
        "OUT:\n\t@%p2 bra OUT;\n\tret;\n"
    )
    g = build_cfg(function(body))
    first, second = g.graph["blocks"][0], g.graph["blocks"][1]
    assert first.labels[0] is not second.labels[0] and first.name == second.name == "LAB"
    assert {(u, v) for u, v, kind in edges(g) if kind == "taken"} == {(0, 0), (1, 1), (2, 2)}


def test_a_label_in_a_sibling_scope_is_not_visible():
    body = "\t{\n\tIN: mov.u32 %r1, 0;\n\t}\n\tbra IN;\n"
    with pytest.raises(ptxkit.PtxSyntaxError) as err:
        build_cfg(function(body))
    assert (err.value.line, err.value.column) == (11, 6) and "'IN' is not a label in scope" in err.value.message


def test_brx_idx_with_a_bad_table():
    with pytest.raises(ptxkit.PtxSyntaxError, match="does not name a .branchtargets list"):
        build_cfg(function("ts:\n\tmov.u32 %r1, 0;\n\tbrx.idx %r1, ts;\n\tret;\n"))


@pytest.mark.parametrize("text, fewest", [("cvta.to.shared.u64 %rd1;", 2), ("shl.b32 %r1, %r2;", 3),
                                          ("wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {%r1}, %rd1, %rd2;", 4),
                                          ("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1];", 3),
                                          ("ld.global.v2.u32 {%r1, %r2};", 2),  # the commas of a vector
                                          ("mbarrier.inval.shared::cta.b64 ;", 1)])
def test_an_instruction_short_of_operands_is_an_error_at_its_line(text, fewest):
    """The analyses read operands by position (PTX ISA syntax); one missing is bad input,
    reported where it is, not an internal error later (found by mutating samples)."""
    with pytest.raises(ptxkit.PtxSyntaxError) as err:
        build_cfg(function(f"\tmov.u32 %r1, 0;\n\t{text}\n\tret;\n"))
    assert (err.value.line, err.value.column) == (9, 2)
    assert f"takes at least {fewest} operand{'s' if fewest > 1 else ''}, not {fewest - 1}" in err.value.message


def test_declarations_have_no_graph():
    module = ptxkit.parse(HEAD + ".extern .func f();\n")
    with pytest.raises(ValueError, match="declaration"):
        build_cfg(module.functions[0])


def test_networkx_graph_matches_the_flow_graph():
    f = function("\t@%p1 bra A;\n\tmov.u32 %r1, 1;\nA:\n\t@%p2 bra A;\n\tret;\n")
    flow = flow_graph(f)
    g = flow.to_networkx()
    assert isinstance(g, nx.DiGraph) and g.graph["function"] is f
    for block in range(len(flow)):
        assert sorted(flow.succ[block]) == sorted(v for v in g.successors(block) if v != EXIT)
        assert sorted(flow.pred[block]) == sorted(u for u in g.predecessors(block) if u != ENTRY)
        assert (block in flow.exits) == g.has_edge(block, EXIT)


def test_with_blocks_before_redirects_the_outside_edges_of_a_copy():
    flow = flow_graph(function("\t@%p1 bra L;\n\tmov.u32 %r1, 1;\nL:\n\t@%p2 bra L;\n\tret;\n"))
    succ, pred, kinds = [list(s) for s in flow.succ], [list(p) for p in flow.pred], dict(flow.kinds)
    made = flow.with_blocks_before([(2, [0, 1])])
    assert len(made) == 5 and made.succ[4] == [2] and sorted(made.pred[2]) == [2, 4] and made.pred[4] == [0, 1]
    assert sorted(made.succ[0]) == [1, 4] and made.succ[1] == [4]
    assert made.kinds[(4, 2)] == "fallthrough" and (0, 2) not in made.kinds and made.rpo[0] == 0
    assert (flow.succ, flow.pred, flow.kinds, len(flow)) == (succ, pred, kinds, 4)  # the graph stays as it was
    flow = flow_graph(function("L:\n\t@%p2 bra L;\n\tret;\n"))
    made = flow.with_blocks_before([(0, [ENTRY])])
    new = len(flow)
    assert made.start == new and made.rpo[0] == new and made.kinds[(ENTRY, new)] == "entry"
    assert flow.start == 0 and flow.rpo[0] == 0 and (ENTRY, new) not in flow.kinds


def test_reverse_postorder_on_a_deep_chain_does_not_recurse():
    n = 50_000
    succ = [[i + 1] for i in range(n)] + [[]]
    assert reverse_postorder(succ, 0)[:3] == [0, 1, 2]
    assert reverse_postorder({7: [8, 9], 8: [6], 9: [6], 6: []}, 7) == [7, 9, 8, 6]


def recording(name: str, made: list[str], value=None) -> Fact:
    """A fact whose compute notes its name in `made` and answers `value` (its name by default)."""
    return Fact(name, lambda flow: made.append(name) or (name if value is None else value))


def test_a_fact_is_computed_once_per_graph_after_what_it_needs():
    made: list[str] = []
    needed = recording("needed", made)
    fact = Fact("fact", lambda flow: made.append("fact") or len(flow), needs=(needed,))
    flow = flow_graph(function("\t@%p1 bra L;\n\tmov.u32 %r1, 1;\nL:\n\tret;\n"))
    assert fact.of(flow) == 3 and fact.of(flow) == 3 and needed.of(flow) == "needed"
    assert made == ["needed", "fact"]  # the need first, though the compute does not read it
    assert flow.facts == {needed: "needed", fact: 3} and repr(fact) == "<Fact fact>"


def test_none_is_an_answer_kept_like_any_other():
    made: list[str] = []
    nothing = Fact("nothing", lambda flow: made.append("nothing"))
    flow = flow_graph(function("\tret;\n"))
    assert nothing.of(flow) is None and nothing.of(flow) is None and made == ["nothing"]


def test_facts_of_two_graphs_are_not_shared():
    made: list[str] = []
    fact = Fact("blocks", lambda flow: made.append("blocks") or len(flow))
    body = "L:\n\t@%p2 bra L;\n\tret;\n"
    flow, other = flow_graph(function(body)), flow_graph(function(body))
    assert fact.of(flow) == 2 and fact.of(other) == 2 and made == ["blocks", "blocks"]
    made_before = flow.with_blocks_before([(0, [ENTRY])])  # a copy starts with no facts
    assert made_before.facts == {} and fact.of(made_before) == 3 and fact.of(flow) == 2


def test_a_stand_in_without_the_store_gets_the_fact_computed_each_time():
    class StandIn:  # a graph-like object without `facts`
        pass

    made: list[str] = []
    needed = recording("needed", made)
    fact = Fact("fact", lambda flow: needed.of(flow) + "!", needs=(needed,))
    stand_in = StandIn()
    assert fact.of(stand_in) == "needed!" and fact.of(stand_in) == "needed!" and made == ["needed", "needed"]
    assert not hasattr(stand_in, "facts")


def test_a_fact_whose_compute_fails_keeps_nothing():
    answers = iter([ValueError("not yet"), 7])

    def compute(flow):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    fact = Fact("flaky", compute)
    flow = flow_graph(function("\tret;\n"))
    with pytest.raises(ValueError, match="not yet"):
        fact.of(flow)
    assert fact not in flow.facts
    assert fact.of(flow) == 7 and flow.facts[fact] == 7


def declared_facts() -> dict[str, Fact]:
    """Every fact the modules of `ptxkit.cfg` declare, by name."""
    found: dict[int, Fact] = {}
    for info in pkgutil.walk_packages(ptxkit.cfg.__path__, "ptxkit.cfg."):
        module = importlib.import_module(info.name)
        found.update((id(value), value) for value in vars(module).values() if isinstance(value, Fact))
    return {fact.name: fact for fact in found.values()}


def closure(fact: Fact) -> set[Fact]:
    """`fact` and every fact it needs, through any chain."""
    found, work = set(), [fact]
    while work:
        current = work.pop()
        if current not in found:
            found.add(current)
            work.extend(current.needs)
    return found


#: Samples with inlined calls, loops, branches on the thread index, stack frames and templates of -G builds.
FACT_SAMPLES = ("01_async_to_generic_no_double_fence.ptx", "14b_hoist_out_of_loop.ptx",
                "h21a_debug_descriptor_from_template.ptx", "h21b_debug_descriptor_write_inside_tile.ptx")


@pytest.mark.parametrize("sample", FACT_SAMPLES)
def test_every_declared_fact_reads_only_the_facts_it_needs(sample):
    """Computed on a fresh graph, a fact leaves in the graph's store only itself and what
    it declares it needs (through any chain): whatever its compute reads is declared."""
    facts = declared_facts()
    assert {"dominators", "loops", "register definitions", "symbol tables", "definitions"} <= set(facts)
    assert len(facts) == len({id(fact) for fact in facts.values()})  # one declaration per name
    module = ptxkit.parse((Path(__file__).parent.parent / "samples" / "fence" / sample).read_text(), sample)
    kernel = next(f for f in module.functions if f.kind == "entry" and not f.is_declaration)
    for fact in facts.values():
        flow = inlined_graph(kernel)
        fact.of(flow)
        assert set(flow.facts) <= closure(fact), (fact, set(flow.facts) - closure(fact))
