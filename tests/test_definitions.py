"""ptxkit.cfg.values.definitions: the two tables of who writes each register, from one scan."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.flow.operands import destinations
from ptxkit.cfg.values.definitions import DEFINITIONS, REGISTER_DEFINITIONS
from ptxkit.cfg.values.symbols import PLAIN_REGISTERS
from ptxkit.isa import NO_DESTINATION

from conftest import SAMPLES

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def _graph(body: str, declarations: str = ".reg .b32 %r<4>;") -> object:
    module = ptxkit.parse(HEADER + ".visible .entry k()\n{\n" + declarations + "\n" + body + "\tret;\n}\n")
    return inlined_graph(module.function("k"))


def test_a_register_declared_without_percent_is_followed_but_not_in_the_divergence_table():
    flow = _graph("\tmov.u32 n, 4;\n\tadd.s32 %r1, n, 1;\n", ".reg .b32 %r<4>;\n.reg .b32 n;")
    assert PLAIN_REGISTERS.of(flow)[0] == {"n"}
    assert DEFINITIONS.of(flow) == {"%r1": ((0, 1),)}
    assert REGISTER_DEFINITIONS.of(flow) == {"n": ((0, 0),), "%r1": ((0, 1),)}


def test_an_instruction_without_a_destination_is_only_in_the_divergence_table():
    flow = _graph("\tmov.u32 %r1, %tid.x;\n\tbar.sync %r1, 64;\n\tst.shared.u32 [%r1], %r2;\n")
    # divergence's table takes the first operand of every instruction, bar.sync's (a read) too: a
    # write that is not there can only make a register look less uniform (conservative)
    assert DEFINITIONS.of(flow) == {"%r1": ((0, 0), (0, 1))}
    assert REGISTER_DEFINITIONS.of(flow) == {"%r1": ((0, 0),)}


def _reference(flow) -> tuple[dict, dict]:
    """The two tables as each analysis used to scan them on its own."""
    anywhere: dict[str, list] = {}
    followed: dict[str, list] = {}
    plains = PLAIN_REGISTERS.of(flow)
    for block in flow.blocks:
        prefix = block.context.prefix if block.context is not None else ""
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            for name in destinations(instruction, head, frozenset()):
                anywhere.setdefault(prefix + name, []).append((block.index, position))
            if head[2] in NO_DESTINATION or head[1].startswith("st.param"):
                continue
            for name in destinations(instruction, head, plains[block.index]):
                followed.setdefault(prefix + name, []).append((block.index, position))
    return anywhere, followed


CASES = sorted((SAMPLES / "fence").glob("*.ptx"))[::4] + sorted((SAMPLES / "nvcc").rglob("*.ptx"))


def _graphs(path):
    return [inlined_graph(function) for function in ptxkit.parse_file(path).functions if function.body is not None]


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_the_tables_are_those_of_separate_scans(path):
    for flow in _graphs(path):
        anywhere, followed = _reference(flow)
        found = REGISTER_DEFINITIONS.of(flow)
        assert {k: list(v) for k, v in DEFINITIONS.of(flow).items()} == anywhere
        assert list(DEFINITIONS.of(flow)) == list(anywhere)  # in the order the graph writes them
        assert {k: list(v) for k, v in found.items() if "param:" not in k} == followed


@pytest.mark.pure  # compiled code keeps a site as two machine integers and makes a tuple each time it stores one
@pytest.mark.parametrize("path", CASES[::3], ids=lambda p: p.name)
def test_the_two_tables_share_their_site_tuples(path):
    """One tuple per site in both tables, and one tuple of sites for a key the two give the same sites."""
    for flow in _graphs(path):
        anywhere = DEFINITIONS.of(flow)
        shared = {id(site) for sites in anywhere.values() for site in sites}
        assert all(id(site) in shared for key, sites in REGISTER_DEFINITIONS.of(flow).items() if key in anywhere
                   for site in sites)
        same = [key for key, sites in REGISTER_DEFINITIONS.of(flow).items() if anywhere.get(key) == sites]
        assert same and all(REGISTER_DEFINITIONS.of(flow)[key] is anywhere[key] for key in same)
