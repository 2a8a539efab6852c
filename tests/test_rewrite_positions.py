"""ptxkit.rewrite.positions: code put on a CFG edge runs exactly when the edge is taken.

Random branchy kernels (`rewrite_programs`) get a counter incremented on one edge and
stored at every return; the SIMT simulator runs them, and each thread's count must be
the number of times the reference interpreter takes that edge.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.flow.graph import ENTRY, EXIT, flow_graph
from ptxkit.generators.simulate import launch
from ptxkit.rewrite import Plan, apply
from ptxkit.rewrite.facts import FunctionFacts
from ptxkit.rewrite.positions import after, before_returns, block_exit, function_entry, on_edge

from rewrite_programs import programs

THREADS = 64


def count_on(text: str, *places) -> str:
    """The kernel with a counter that the positions `place(function plan)` increment:
    by 1 for the first place, 256 for the second, 65536 for the third (a count stays
    below 256: every back edge of a random program is taken at most three times)."""
    module = ptxkit.parse(text)
    plan = Plan(module)
    k = plan.function("k")
    count = k.fresh_register(".u32", "count")
    k.insert(k.entry(), f"mov.u32 {count}, 0;")
    for number, place in enumerate(places):
        k.insert(place(k), f"add.u32 {count}, {count}, {1 << 8 * number};")
    k.insert(k.returns(), f"st.global.u32 [%rd3], {count};")
    apply(plan)
    return str(module)


def counts(text: str) -> list[int]:
    out = np.full(THREADS, 0xDEAD, np.uint32)
    launch(text, "k", out, block=THREADS)
    return out.tolist()


def edges_of(text: str) -> list:
    flow = flow_graph(ptxkit.parse(text).function("k"))
    return sorted((edge for edge in flow.kinds if edge[0] != ENTRY), key=str)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_code_on_edges_runs_exactly_when_the_edge_is_taken(program, data):
    """One to three edges at once, so that code for several edges meets at one place."""
    chosen = data.draw(st.lists(st.sampled_from(edges_of(program.text)), min_size=1, max_size=3, unique=True))
    counted = count_on(program.text, *(lambda k, edge=edge: k.on_edge(*edge) for edge in chosen))
    expected = [sum(program.edges(tid).get(edge, 0) << 8 * n for n, edge in enumerate(chosen))
                for tid in range(THREADS)]
    assert counts(counted) == expected
    assert ptxkit.parse(counted).function("k")  # and it parses again


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_block_entry_and_exit_run_once_per_visit(program, data):
    flow = flow_graph(ptxkit.parse(program.text).function("k"))
    block = data.draw(st.integers(0, len(flow.blocks) - 1))
    visits = [sum(n for (u, _), n in program.edges(tid).items() if u == block) for tid in range(THREADS)]
    assert counts(count_on(program.text, lambda k: k.block_exit(block))) == visits
    entered = [sum(n for (_, v), n in program.edges(tid).items() if v == block) + (block == 0)
               for tid in range(THREADS)]
    assert counts(count_on(program.text, lambda k: k.block_entry(block))) == entered


@pytest.mark.ptxas
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.data())
def test_edge_code_assembles(program, data):
    from ptxkit.ptxas import assemble

    edges = edges_of(program.text)
    chosen = data.draw(st.lists(st.sampled_from(edges), min_size=1, max_size=4, unique=True))
    text = count_on(program.text, *(lambda k, edge=edge: k.on_edge(*edge) for edge in chosen))
    assemble(text, "sm_90a", options=("-c",), cache=False)


SAMPLE = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 out)
{
	.reg .b32 %r<4>;
	.reg .pred %p<3>;
	.reg .b64 %rd<4>;
LOOP:
	ld.param.u64 %rd1, [out];
	mov.u32 %r1, %tid.x;
	mul.wide.u32 %rd2, %r1, 4;
	add.s64 %rd3, %rd1, %rd2;
	and.b32 %r2, %r1, 1;
	setp.eq.u32 %p1, %r2, 1;
	@%p1 bra ODD;
	add.u32 %r3, %r1, 1;
ODD:
	setp.lt.u32 %p2, %r1, 8;
	@%p2 ret;
	ret;
}
"""


def test_the_placements_the_docs_promise():
    facts = FunctionFacts(ptxkit.parse(SAMPLE).function("k"))
    assert function_entry(facts).node.text == "LOOP:"
    taken = on_edge(facts, 0, 2)  # @%p1 bra ODD, while the even block falls into ODD
    assert (taken.kind, taken.node.text, taken.edge) == ("edge", "ODD:", (0, 2))
    assert on_edge(facts, 0, 1).kind == "before"  # the even block has one predecessor
    assert [p.kind for p in before_returns(facts)] == ["exit", "before"]
    assert block_exit(facts, 2).node.text == "@%p2 ret;"
    with pytest.raises(ValueError, match="never run"):
        after(facts.flow.blocks[3].terminator)
    with pytest.raises(ValueError, match="no CFG edge"):
        on_edge(facts, 0, EXIT)


def test_an_edge_block_into_the_first_label_jumps_over_itself_at_entry():
    """The function starts at LOOP: an edge block put before it must not run on entry."""
    text = SAMPLE.replace("\tret;\n}", "\t@%p2 bra LOOP;\n\tret;\n}").replace("@%p2 ret;", "setp.lt.u32 %p2, %r1, 0;")
    counted = count_on(text, lambda k: k.on_edge(2, 0))
    assert "bra.uni LOOP;" in counted
    assert counts(counted) == [0] * THREADS
    entry = count_on(text, lambda k: k.entry())
    assert counts(entry) == [1] * THREADS
