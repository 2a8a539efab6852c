"""ptxkit.cfg.values.registers: register values at instructions, through loops, branches, calls."""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit import parse_statement
from ptxkit.cfg.flow.graph import flow_graph
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.flow.operands import destinations
from ptxkit.cfg.values import registers
from ptxkit.cfg.values.idioms import remainder
from ptxkit.cfg.values.registers import analyse_registers, register_values
from ptxkit.cfg.values.values import number, show
from ptxkit.isa import NO_DESTINATION
from test_values import contains_number

ROOT = pathlib.Path(__file__).resolve().parent.parent

HEAD = (".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 1024 .b8 dyn[];\n"
        ".global .align 4 .b32 gvar[4];\n")
REGS = ".reg .pred %p<8>;\n.reg .b16 %rs<8>;\n.reg .b32 %r<32>;\n.reg .b64 %rd<32>;\n"


def value_at(body: str, register: str, params: str = "", directives: str = "", extra: str = "",
             inline: bool = False, head: str = HEAD) -> str:
    """The value of `register` just before the instruction after a ``// here`` comment
    (or before the final ``ret``), as `show` writes it."""
    return show(raw_value_at(body, register, params, directives, extra, inline, head))


def raw_value_at(body: str, register: str, params: str = "", directives: str = "", extra: str = "",
                 inline: bool = False, head: str = HEAD) -> tuple:
    """`value_at`'s value itself (a tuple of atoms, for `contains_number`)."""
    text = f"{head}{extra}.visible .entry k({params}){directives}\n{{\n{REGS}{body}\tret;\n}}\n"
    function = ptxkit.parse(text, "k.ptx").function("k")
    flow = inlined_graph(function) if inline else flow_graph(function)
    points = [(b.index, i) for b in flow.blocks for i, _ in enumerate(b.instructions)]
    marked = [(b, i) for b, i in points if "// here" in flow.blocks[b].instructions[i].prefix]
    block, position = (marked or [p for p in points if flow.blocks[p[0]].instructions[p[1]].text == "ret;"][-1:])[0]
    operand = parse_statement(f"mov.u32 %x, {register};").operands[1]
    return register_values(flow, {"q": (block, position, operand)})["q"]


def test_symbols_and_kernel_parameters():
    body = ("\tmov.u32 %r1, dyn;\n\tadd.s32 %r2, %r1, 160;\n\tld.param.u64 %rd1, [k_p];\n"
            "\tld.param.u32 %r3, [k_n];\n\tld.param.u64 %rd2, [k_s];\n\tmov.u64 %rd3, gvar;\n")
    params = ".param .u64 k_p, .param .u32 k_n, .param .u64 .ptr .shared .align 4 k_s"
    assert value_at(body, "%r2", params) == "dynamic shared+160 (shared::cta window)"
    assert value_at(body, "%rd1", params) == "somewhere (global generic)"
    assert value_at(body, "%r3", params) == "[0, 4294967295]"
    assert value_at(body, "%rd2", params) == "somewhere (shared::cta generic)"
    assert value_at(body, "%rd3", params) == "gvar+0 (global window)"


def test_cvta_mapa_and_special_registers():
    body = ("\tmov.u32 %r1, %tid.x;\n\tshl.b32 %r2, %r1, 4;\n\tmov.u64 %rd1, dyn;\n\tcvta.shared.u64 %rd2, %rd1;\n"
            "\tcvta.to.shared.u64 %rd3, %rd2;\n\tmov.u32 %r3, dyn;\n\tmapa.shared::cluster.u32 %r4, %r3, 1;\n")
    assert value_at(body, "%r2") == "[0, 16368] step 16"
    assert value_at(body, "%rd2") == "dynamic shared+0 (shared::cta generic)"
    assert value_at(body, "%rd3") == "dynamic shared+0 (shared::cta window)"
    assert value_at(body, "%r4") == "dynamic shared+0 (shared::cluster window)"
    # a grid has at most 2^31 - 1 CTAs along x and 65535 along y and z (PTX ISA, %nctaid)
    grid = "\tmov.u32 %r1, %ctaid.z;\n\tshl.b32 %r2, %r1, 8;\n\tmov.u32 %r3, %nctaid.x;\n"
    assert (value_at(grid, "%r2"), value_at(grid, "%r3")) == ("[0, 16776704] step 256", "[1, 2147483647]")


def test_descriptor_built_like_cutlass():
    body = ("\tmov.u32 %r1, dyn;\n\tadd.s32 %r2, %r1, 32768;\n\tshr.u32 %r3, %r2, 4;\n\tand.b32 %r4, %r3, 16383;\n"
            "\tcvt.u64.u32 %rd1, %r4;\n\tor.b64 %rd2, %rd1, 4611686293305360384;\n"
            "\tmov.b64 {%r5, %r6}, %rd2;\n\tadd.s32 %r7, %r5, 2;\n\tmov.b64 %rd3, {%r7, %r6};\n")
    # 4611686293305360384 is 0x4000004000010000: 128-byte swizzle, SBO 1024 bytes, LBO 16 bytes
    assert value_at(body, "%rd3") == "dynamic shared+32800 (shared::cta window) >> 4 | 0x4000004000010000"


def test_ring_index_stays_in_its_range():
    body = ("\tmov.u32 %r1, 0;\nL:\n\tshl.b32 %r2, %r1, 10;\n\tadd.s32 %r3, %r1, 1;\n\tsetp.eq.s32 %p1, %r1, 6;\n"
            "\tselp.b32 %r1, 0, %r3, %p1;\n\tsetp.lt.u32 %p2, %r2, 99;\n\t@%p2 bra L;\n")
    assert value_at(body, "%r1") == "[0, 6]"
    assert value_at(body, "%r2") == "[99, 6144]"  # leaving the loop: the branch was not taken
    guarded = body.replace("\tsetp.eq.s32 %p1", "\t@%p5 setp.eq.s32 %p1")  # p1 may be an older test's
    assert value_at(guarded, "%r1") == "[0, inf]"


def test_a_ring_index_advanced_in_one_block_and_selected_in_another():
    # x = s + 1 and p = (x == 2) are each set once, together in block L: a later
    # selp s, 0, x, p sees the p of the same x (CUTLASS's two-stage pipeline state)
    body = ("\tmov.u32 %r1, 0;\nL:\n\tadd.s32 %r2, %r1, 1;\n\tsetp.eq.s32 %p1, %r2, 2;\n\tshl.b32 %r3, %r1, 8;\n"
            "\tsetp.lt.u32 %p2, %r9, 7;\n\t@%p2 bra M;\n\tadd.s32 %r4, %r3, 4;\nM:\n\tselp.b32 %r1, 0, %r2, %p1;\n"
            "\tsetp.lt.u32 %p3, %r10, 9;\n\t@%p3 bra L;\n")
    assert value_at(body, "%r1") == "[0, 1]"
    assert value_at(body, "%r3") == "[0, 256] step 256"
    guarded = body.replace("\tsetp.eq.s32 %p1", "\t@%p4 setp.eq.s32 %p1")  # may keep an older p: no pairing
    assert value_at(guarded, "%r1") == "[0, inf]"


def test_a_ring_index_advanced_tested_and_selected_in_three_blocks():
    # x = s + 1 in L, p = (x == 2) in T after a wait loop, selp s, 0, x, p in S after
    # another: every path from L to S passes T, so S reads the p of the x it selects
    # (FlashMLA's sm100 backward kernel, CUTLASS's pipeline state across mbarrier waits)
    body = ("\tmov.u32 %r1, 1;\nL:\n\tadd.s32 %r2, %r1, 1;\nW1:\n\tsetp.lt.u32 %p2, %r9, 7;\n\t@%p2 bra W1;\n"
            "T:\n\tsetp.eq.s32 %p1, %r2, 2;\nW2:\n\tsetp.lt.u32 %p3, %r10, 7;\n\t@%p3 bra W2;\n"
            "S:\n\tselp.b32 %r1, 0, %r2, %p1;\n\tsetp.lt.u32 %p4, %r11, 9;\n\t@%p4 bra L;\n")
    assert value_at(body, "%r1") == "[0, 1]"
    # a way from L to S around T: S may read the p of an earlier x
    around = body.replace("\t@%p2 bra W1;\n", "\t@%p2 bra W1;\n\t@%p5 bra S;\n")
    assert value_at(around, "%r1") == "[0, inf]"


@pytest.mark.parametrize("guarded", [
    "\t@%p6 setp.lt.u32 %p1, %r1, 4;\n\t@%p1 bra L;\n",  # the setp may not run: p1 keeps an older value
    "\tsetp.lt.u32 %p2, %r1, 4;\n\t@%p6 not.pred %p1, %p2;\n\t@!%p1 bra L;\n",  # nor may the not
])
def test_a_guarded_test_narrows_nothing(guarded):
    body = "\tld.param.u32 %r1, [k_n];\n" + guarded + "\tret;\nL:\n\t// here\n\tmov.u32 %r2, %r1;\n"
    assert value_at(body, "%r1", params=".param .u32 k_n") == "[0, 4294967295]"
    unguarded = body.replace("@%p6 ", "")
    assert value_at(unguarded, "%r1", params=".param .u32 k_n") == "[0, 3]"


def test_a_test_does_not_narrow_a_register_set_again_after_the_one_it_read():
    """r3 = r2 is tested, then r2 is set anew in the same block: past the branch r2 holds
    the new value, which the test says nothing of (no register set only after it is read
    joins the chain of what a test bounds)."""
    body = ("\tbra.uni B;\nB:\n\tadd.s32 %r3, %r2, 0;\n\tsetp.lt.u32 %p1, %r3, 4;\n"
            "\tand.b32 %r2, %r9, 255;\n\t@%p1 bra T;\n\tbra.uni B;\nT:\n\tmov.u32 %r4, %r2;\n")
    assert value_at(body, "%r4") == "[0, 255]"


def test_a_counter_without_a_bound_is_widened():
    body = "\tmov.u32 %r1, 0;\nL:\n\tadd.s32 %r1, %r1, 1;\n\tsetp.lt.u32 %p2, %r1, %r9;\n\t@%p2 bra L;\n"
    assert value_at(body, "%r1") == "[1, inf]"


@pytest.mark.parametrize("copy, shown", [
    ("\tmov.u64 %rd1, %rd4;\n", "[0, 252] step 4"),  # -G: the tested value copied into the carried one
    ("\t@%p5 mov.u64 %rd1, %rd4;\n", "[0, inf] step 4"),  # may keep the old value: nothing bounds it
])
def test_a_loop_tested_at_its_bottom_is_bounded_by_its_back_edge(copy, shown):
    body = ("\tmov.u64 %rd1, 0;\nL:\n\tmov.u64 %rd2, %rd1;\n\tshl.b64 %rd3, %rd2, 2;\n\t// here\n"
            "\tadd.s64 %rd4, %rd2, 1;\n\tsetp.lt.u64 %p1, %rd4, 64;\n" + copy + "\t@%p1 bra L;\n")
    assert value_at(body, "%rd3") == shown


def test_a_counter_tested_at_the_bottom_of_its_loop_is_bounded():
    counter = "\tmov.u32 %r1, 0;\nL:\n\tshl.b32 %r2, %r1, 4;\n\t// here\n\tadd.s32 %r1, %r1, 1;\n" \
              "\tsetp.lt.s32 %p1, %r1, 10;\n\t@%p1 bra L;\n"
    assert value_at(counter, "%r2") == "[0, 144] step 16"


FRAME = (".local .align 8 .b8 __local_depot0[64];\n.reg .b64 %SP;\n.reg .b64 %SPL;\n\tmov.u64 %SPL, __local_depot0;\n"
         "\tcvta.local.u64 %SP, %SPL;\n\tmov.u64 %rd1, dyn;\n\tcvta.shared.u64 %rd2, %rd1;\n")
TAKEN = "\tadd.u64 %rd3, %SP, 16;\n"  # the frame's address leaves its [%SP+c] operands
RELOAD = "\tld.u64 %rd4, [%SP+8];\n\tadd.s64 %rd5, %rd4, 64;\n"


@pytest.mark.parametrize("body, shown", [
    ("\tst.u64 [%SP+8], %rd2;\n" + TAKEN + RELOAD, "dynamic shared+64 (shared::cta generic)"),
    # two stores in turn: the load after the second sees the second (cells are versioned like registers)
    ("\tst.u64 [%SP+8], 0;\n" + TAKEN + "\tst.u64 [%SP+8], %rd2;\n" + RELOAD,
     "dynamic shared+64 (shared::cta generic)"),
    # the pointer to the slot stored in another slot and followed back
    ("\tst.u64 [%SP+8], %rd2;\n\tadd.u64 %rd3, %SP, 8;\n\tst.u64 [%SP+16], %rd3;\n\tld.u64 %rd6, [%SP+16];\n"
     "\tld.u64 %rd4, [%rd6];\n\tadd.s64 %rd5, %rd4, 64;\n", "dynamic shared+64 (shared::cta generic)"),
    # overwritten through a pointer to it with a value not known: not known either
    ("\tst.u64 [%SP+8], %rd2;\n\tadd.u64 %rd3, %SP, 8;\n\tst.u64 [%rd3], %rd9;\n" + RELOAD, "top"),
    # a store through a pointer loaded from global memory may write any frame whose address is out
    ("\tst.u64 [%SP+8], %rd2;\n" + TAKEN + "\tld.global.u64 %rd6, [%rd9];\n\tst.u64 [%rd6], %rd9;\n" + RELOAD,
     "top"),
    # ... but not a sealed one
    ("\tst.u64 [%SP+8], %rd2;\n\tld.global.u64 %rd6, [%rd9];\n\tst.u64 [%rd6], %rd9;\n" + RELOAD,
     "dynamic shared+64 (shared::cta generic)"),
    # an atomic through a pointer to it writes it too
    ("\tst.u64 [%SP+8], %rd2;\n\tadd.u64 %rd3, %SP, 8;\n\tatom.add.u64 %rd6, [%rd3], 1;\n" + RELOAD, "top"),
    # a narrower store of an unknown value into the slot: its high half may be anything,
    # and the pointer is no longer one (an access through a number may land anywhere)
    ("\tst.u64 [%SP+8], %rd2;\n" + TAKEN + "\tst.u32 [%SP+12], %r1;\n" + RELOAD, "[64, 18446744073709551679]"),
    # a narrower store of a known high half: the low half stays, as a number (the frame follows it)
    ("\tst.u64 [%SP+8], %rd2;\n" + TAKEN + "\tst.u32 [%SP+12], 0;\n" + RELOAD, "[64, 4294967359]"),
])
def test_values_kept_in_a_debug_build_stack_frame(body, shown):
    assert value_at(FRAME + body, "%rd5") == shown


@pytest.mark.pure
def test_a_second_analysis_of_a_graph_starts_from_the_stack_model_the_first_settled_on(monkeypatch):
    """The tensor copies' pre-pass and the main analysis both probe every stack access;
    the second starts from the model the first settled on, so it solves once where the
    first took rounds, and finds the same values (docs/fence.md §3.2)."""
    from ptxkit.cfg.values import registers
    body = FRAME + "\tst.u64 [%SP+8], %rd2;\n\tadd.u64 %rd3, %SP, 8;\n\tst.u64 [%SP+16], %rd3;\n" \
        "\tld.u64 %rd6, [%SP+16];\n\tld.u64 %rd4, [%rd6];\n\tadd.s64 %rd5, %rd4, 64;\n"
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}{body}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text).function("k"))
    last = flow.blocks[-1]
    query = {"q": (last.index, len(last.instructions) - 1, parse_statement("mov.u64 %x, %rd5;").operands[1])}
    solves = []
    fixpoint = registers._Analysis.fixpoint
    monkeypatch.setattr(registers._Analysis, "fixpoint", lambda self, q: solves.append(1) or fixpoint(self, q))
    first = analyse_registers(flow, query).values
    rounds, solves[:] = len(solves), []
    again = analyse_registers(flow, query).values
    assert show(first["q"]) == show(again["q"]) == "dynamic shared+64 (shared::cta generic)"
    assert rounds > 1 and len(solves) == 1


#: A pointer to a pointer to a slot, each kept in the frame: each round follows one more load
CHAIN = ("\tst.u64 [%SP+8], %rd2;\n\tadd.u64 %rd3, %SP, 8;\n\tst.u64 [%SP+16], %rd3;\n\tadd.u64 %rd10, %SP, 16;\n"
         "\tst.u64 [%SP+24], %rd10;\n\tld.u64 %rd11, [%SP+24];\n\tld.u64 %rd6, [%rd11];\n\tld.u64 %rd4, [%rd6];\n"
         "\tmov.u32 %r10, %tid.x;\n\tshl.b32 %r11, %r10, 4;\n\tcvt.u64.u32 %rd12, %r11;\n\tadd.s64 %rd5, %rd4, %rd12;\n")


def _chain_and_ring_graph():
    """A kernel with `CHAIN` and a ring index in its frame, and queries for ``%rd5`` and
    ``%r5`` at its end: its graph and the queries."""
    ring = RING.format(reload="\tld.u32 %r2, [%SP+0];\n")
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}{FRAME}{CHAIN}{ring}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text).function("k"))
    last = flow.blocks[-1]
    return flow, {r: (last.index, len(last.instructions) - 1, parse_statement(f"mov.u64 %x, {r};").operands[1])
                  for r in ("%rd5", "%r5")}


def _chain_and_ring(monkeypatch, solves: list, made: list | None = None):
    """The register analysis of a kernel with `CHAIN` and a ring index in its frame, asked
    for ``%rd5`` and ``%r5`` at its end: the answer, the graph and the queries; `solves`
    gets each round's ``(model, queries, values, dead, rules)``, `made` the `_rule_key` of each
    rule made, with the number of rounds solved before it."""
    from ptxkit.cfg.values import registers
    flow, queries = _chain_and_ring_graph()
    fixpoint, rule = registers._Analysis.fixpoint, registers._Analysis._rule

    def solved(self, asked):  # every query answered, whether the round holds or not
        dead = fixpoint(self, asked)
        solves.append((self.stack, asked, self.answers(asked, dead), dead, self.rules))
        return dead

    def making(self, block, position):
        made.append((len(solves), self._rule_key(block, position)))
        return rule(self, block, position)
    monkeypatch.setattr(registers._Analysis, "fixpoint", solved)
    if made is not None:
        monkeypatch.setattr(registers._Analysis, "_rule", making)
    return analyse_registers(flow, queries), flow, queries


@pytest.mark.pure
def test_the_rounds_of_a_debug_build_make_each_rule_once_and_solve_as_anew(monkeypatch):
    """The rounds of a -G build share one analysis: an instruction's rule is made once,
    a stack access's once for each cell it is followed to, and every round finds what a
    new analysis solving under that round's model alone finds (docs/fence.md §3.2)."""
    from ptxkit.cfg.values import registers
    solves, made = [], []
    answer, flow, _ = _chain_and_ring(monkeypatch, solves, made)
    assert len(solves) == 3
    assert show(answer.values["%rd5"]) == "dynamic shared+[0, 16368] step 16 (shared::cta generic)"
    assert show(answer.values["%r5"]) == "[0, 65536] step 16384"
    keys = [key for _, key in made]
    assert len(keys) == len(set(keys))  # nothing made twice
    later = [key for rounds, key in made if rounds > 0]
    assert 0 < len(later) < sum(len(rules) for *_, rules in solves[1:])  # most rules are the first round's
    assert any(len(key) == 3 for key in later)  # a load followed to its cell from the second round on
    monkeypatch.undo()
    for model, asked, values, dead, _ in solves:
        anew = registers._Analysis(flow_graph(flow.function), stack=model)  # a graph of its own: rules of its own
        assert anew.solve(asked) == (values, dead)


@pytest.mark.pure
def test_only_a_round_whose_values_hold_answers_the_queries(monkeypatch):
    """Each round of a -G build answers the stack accesses' probes, which decide the next
    model; the queries are answered only in a round whose model its values bear out (the
    others' answers would be thrown away), and those answers are what the analysis gives."""
    from ptxkit.cfg.values import registers
    from ptxkit.cfg.values.frames import StackModel
    asked, held = [], []
    answers, holds = registers._Analysis.answers, StackModel.holds_for

    def answering(self, keys, dead):
        found = answers(self, keys, dead)
        asked.append((len(held), found))
        return found

    def holding(self, found):  # the first round's values do not hold; `settled` asks again after one that does
        held.append(bool(held) and holds(self, found))
        return held[-1]
    monkeypatch.setattr(registers._Analysis, "answers", answering)
    monkeypatch.setattr(StackModel, "holds_for", holding)
    flow, queries = _chain_and_ring_graph()
    answer = analyse_registers(flow, queries)
    probed = [checked for checked, found in asked if all(key[0] == "stack" for key in found)]
    answered = [(checked, found) for checked, found in asked if found.keys() == queries.keys()]
    assert len(probed) + len(answered) == len(asked) and 0 < len(answered) < len(probed)
    assert all(held[checked - 1] for checked, _ in answered)  # each right after a round that held
    assert answered[-1][1] == answer.values


@pytest.mark.pure
def test_an_earlier_rounds_answer_comes_back_with_its_values_by_thread(monkeypatch):
    """When the last round that held is not the last solved, the analysis takes that
    round's solution back: its values, and its values for a range of threads."""
    from ptxkit.cfg.values import registers
    from ptxkit.cfg.values.frames import StackModel
    holds, checked = StackModel.holds_for, []

    def first_only(self, found):  # only the first round holds
        checked.append(found)
        return len(checked) == 1 and holds(self, found)
    monkeypatch.setattr(StackModel, "holds_for", first_only)
    solves = []
    answer, flow, queries = _chain_and_ring(monkeypatch, solves)
    assert len(solves) == 8  # no later round holds: every round is solved
    monkeypatch.undo()
    model, asked, values, dead, _ = solves[0]
    assert answer.values == {key: values[key] for key in queries} and answer.dead == dead
    first, last = (registers._Analysis(flow_graph(flow.function), stack=solves[at][0]) for at in (0, -1))
    first.solve(asked)
    last.solve(asked)
    assert answer.by_thread("%rd5", 0, 31) == first.by_thread("%rd5", 0, 31) != last.by_thread("%rd5", 0, 31)


@pytest.mark.pure
def test_a_second_analysis_of_a_graph_takes_the_rules_the_first_made(monkeypatch):
    """The tensor copies' first analysis and the one after it (docs/fence.md §3.3) share
    the graph's rules (`MADE_RULES`): the second makes none the first made, and answers
    what an analysis of a graph of its own answers, alignment given or not."""
    from ptxkit.cfg.values import registers
    module = ptxkit.parse((ROOT / "samples/fence/06b_tma_store_after_shared_store.ptx").read_text())
    function = module.function("k")
    flow = inlined_graph(function)
    queries = {(b.index, i, n): (b.index, i, operand) for b in flow.blocks for i, x in enumerate(b.instructions)
               for n, operand in enumerate(x.operands) if operand.kind in ("memory", "register")}
    made = []
    rule = registers._Analysis._rule
    monkeypatch.setattr(registers._Analysis, "_rule",
                        lambda self, block, position: made.append((block, position)) or rule(self, block, position))
    first = analyse_registers(flow, queries)
    count = len(made)
    region = next(v[0].region for v in first.values.values() if v and getattr(v[0], "region", None) is not None)
    second = analyse_registers(flow, queries, aligned={region: 2048})
    assert count > 5 and len(made) == count  # the second analysis made no rule
    monkeypatch.undo()
    for aligned in (None, {region: 2048}):
        alone = analyse_registers(inlined_graph(function), queries, aligned=aligned)
        assert alone.values == (first if aligned is None else second).values and alone.dead == first.dead


@pytest.mark.pure
@pytest.mark.nvcc
def test_the_rounds_on_nvcc_debug_build_output_solve_as_anew(monkeypatch, tmp_path):
    """nvcc -G keeps a struct and the shared-memory pointer in it in stack frames: each
    round of the fence pass's register analyses (the pre-pass that finds the alignment
    the wgmma descriptors show, then the main one) finds what a new analysis solving
    under that round's model alone finds, and the pass still finds its one missing fence."""
    from ptxkit.cfg.values import registers
    from ptxkit.cfg.fence.fence import fence_text
    from test_fence_nvcc import FENCE, TWO_BUFFERS, nvcc_ptx
    made, solves = [], []
    start, fixpoint = registers._Analysis.__init__, registers._Analysis.fixpoint

    def solved(self, asked):  # every query answered, whether the round holds or not (by the latest analysis)
        dead = fixpoint(self, asked)
        solves.append((made[-1], self.stack, asked, (self.answers(asked, dead), dead)))
        return dead
    monkeypatch.setattr(registers._Analysis, "__init__", lambda self, *args: made.append(args) or start(self, *args))
    monkeypatch.setattr(registers._Analysis, "fixpoint", solved)
    ptx = nvcc_ptx(TWO_BUFFERS.replace("SECOND", "tile"), tmp_path, "-G")
    assert [fence.text for fence in fence_text(ptx, "kernel.ptx")[1].fences] == [FENCE]
    monkeypatch.undo()
    assert len(made) == 2 and len(solves) > 2  # two analyses, several rounds
    for (flow, *options), model, asked, found in solves:
        assert registers._Analysis(inlined_graph(flow.function), *options, stack=model).solve(asked) == found


TEMPLATE = ".global .align 8 .b8 desc$1[8];\n"
DESCRIPTOR = (  # nvcc -G: a descriptor copied from a zero-filled template, then set field by field
    "\tmov.u64 %rd6, desc$1;\n\tcvta.global.u64 %rd7, %rd6;\n\tld.u64 %rd8, [%rd7];\n\tadd.u64 %rd3, %SP, 8;\n"
    "\tst.u64 [%rd3], %rd8;\n\tmov.u32 %r1, dyn;\n\tadd.s32 %r1, %r1, 2048;\n\tshr.u32 %r2, %r1, 4;\n"
    "\tcvt.u16.u32 %rs1, %r2;\n\tand.b16 %rs2, %rs1, 16383;\n\tld.u16 %rs3, [%rd3];\n\tand.b16 %rs4, %rs3, -16384;\n"
    "\tor.b16 %rs5, %rs4, %rs2;\n\tst.u16 [%rd3], %rs5;\n\tld.u8 %rs6, [%rd3+7];\n\tand.b16 %rs7, %rs6, 63;\n"
    "\tor.b16 %rs7, %rs7, 64;\n\tst.u8 [%rd3+7], %rs7;\n\tld.u16 %rs1, [%rd3+2];\n\tld.u64 %rd9, [%SP+8];\n")


@pytest.mark.parametrize("extra, body, register, shown", [
    (TEMPLATE, DESCRIPTOR, "%rd9", "dynamic shared+2048 (shared::cta window) >> 4 | 0x4000000000000000"),
    (TEMPLATE, DESCRIPTOR, "%rs1", "0"),  # a field read back alone
    # a variable C++ can name may have been set by the host: its bits are not known, so
    # the descriptor is a number (a footprint of all shared memory), not the address
    (TEMPLATE.replace("$", "_"), DESCRIPTOR.replace("$", "_"), "%rd9", None),
    # nor is a template the module writes, or one another module defines
    (TEMPLATE, DESCRIPTOR + "\tst.global.u64 [desc$1], 1;\n", "%rd9", None),
    (".extern " + TEMPLATE, DESCRIPTOR, "%rd9", None),
])
def test_a_descriptor_set_field_by_field_in_a_debug_build_stack_frame(extra, body, register, shown):
    value = value_at(FRAME + body, register, extra=extra)
    assert value == shown if shown is not None else "shared" not in value and value.startswith("[")


RING = ("\tst.u32 [%SP+0], 0;\n\tst.u32 [%SP+4], 0;\nL:\n\tld.u32 %r1, [%SP+0];\n\tsetp.eq.s32 %p1, %r1, 4;\n"
        "\t@%p1 bra Z;\n{reload}\tadd.s32 %r3, %r2, 1;\n\tbra.uni J;\nZ:\n\tmov.u32 %r3, 0;\nJ:\n"
        "\tst.u32 [%SP+0], %r3;\n\tst.u32 [%SP+4], %r3;\n\tld.u32 %r4, [%SP+0];\n\tshl.b32 %r5, %r4, 14;\n"
        "\t// here\n\tsetp.lt.u32 %p2, %r9, 100;\n\t@%p2 bra L;\n")


@pytest.mark.parametrize("reload, shown", [
    ("\tld.u32 %r2, [%SP+0];\n", "[0, 65536] step 16384"),  # -G loads the tested stage again
    ("\tadd.u64 %rd3, %SP, 0;\n\tld.u32 %r2, [%rd3];\n", "[0, 65536] step 16384"),  # through a pointer
    ("\tld.u32 %r2, [%SP+4];\n", "[0, 70368744161280] step 16384"),  # a copy elsewhere: not bounded (32 bits)
])
def test_a_ring_index_kept_in_a_debug_build_stack_frame(reload, shown):
    # stage = stage == 4 ? 0 : stage + 1 with the stage in a stack cell, loaded again
    # after the test: the cell version the test read is bounded where the test holds
    assert value_at(FRAME + RING.format(reload=reload), "%r5") == shown
    # a guarded load may leave an older value in the tested register: the cell is not bounded
    guarded = RING.replace("\tld.u32 %r1, [%SP+0];", "\t@%p5 ld.u32 %r1, [%SP+0];").format(reload=reload)
    assert value_at(FRAME + guarded, "%r5") == "[0, 70368744161280] step 16384"


@pytest.mark.parametrize("count, shown", [
    ("\tand.b32 %r3, %r9, 1;\n\tadd.s32 %r4, %r3, 1;\n\tshl.b32 %r5, %r4, 4;\n", "[0, 124] step 4"),  # n: 16 or 32
    ("\tmov.u32 %r5, %r9;\n", "[0, 17179869176] step 4"),  # any 32-bit n: i below 2^32 - 1
])
def test_a_loop_bounded_by_a_register_is_bounded_by_its_value(count, shown):
    # for (i = tid - 32; i < n; i += 128): i < n bounds i by the largest n
    body = ("\tmov.u32 %r1, %tid.x;\n\tadd.s32 %r2, %r1, -32;\n\tld.param.u32 %r9, [k_n];\n" + count +
            "L:\n\tsetp.lt.u32 %p1, %r2, %r5;\n\t@!%p1 bra E;\n\tshl.b32 %r6, %r2, 2;\n\t// here\n"
            "\tadd.s32 %r2, %r2, 128;\n\tbra.uni L;\nE:\n")
    assert value_at(body, "%r6", params=".param .u32 k_n") == shown


@pytest.mark.parametrize("operation, shown", [
    ("div.u32 %r3, %r2, 8", "[0, 1]"), ("rem.u32 %r3, %r2, 4", "[0, 3]"), ("min.u32 %r3, %r2, 9", "[0, 9]"),
])
def test_an_operand_not_known_yet_leaves_nothing_behind(operation, shown):
    # the loop's join is evaluated after the body on the first pass: an operation that
    # saw its operand empty then must give nothing, not a top that stays
    body = ("\tmov.u32 %r1, 0;\nL:\n\tmov.u32 %r2, %r1;\n\tsetp.lt.s32 %p1, %r2, 16;\n\t@!%p1 bra E;\n"
            f"\t{operation};\n\t// here\n\tadd.s32 %r1, %r2, 1;\n\tbra.uni L;\nE:\n")
    assert value_at(body, "%r3") == shown


def test_branch_conditions_narrow_and_dead_paths_are_found():
    body = ("\tmov.u32 %r1, %tid.x;\n\tadd.s32 %r2, %r1, -32;\n\tsetp.gt.u32 %p1, %r2, 15;\n\t@%p1 bra OUT;\n"
            "\tshl.b32 %r3, %r1, 2;\n\t// here\n\tadd.s32 %r4, %r1, 192;\n\tsetp.gt.u32 %p2, %r4, 15;\n"
            "\t@%p2 bra OUT;\n\tmov.u32 %r5, %r4;\nOUT:\n")
    assert value_at(body, "%r1") == "[32, 47]"
    assert value_at(body, "%r3") == "[128, 188] step 4"
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}{body}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text).function("k"))
    dead_block = next(b.index for b in flow.blocks if b.instructions and b.instructions[0].text == "mov.u32 %r5, %r4;")
    operand = flow.blocks[dead_block].instructions[0].operands[1]
    answers = analyse_registers(flow, {"q": (dead_block, 0, operand)})
    values, dead = answers.values, answers.dead
    assert dead == {dead_block} and values["q"] == ()



def test_a_condition_on_a_register_loaded_beside_a_followed_one_is_followed():
    """``ld.param.v2`` gives r3 a value with the r2 asked about; ``r3 + 510 < 511`` then
    narrows r3 past the branch, through r4, which must be solved too: read unsolved it
    left nothing, and the block where r2 is asked looked dead (CUTLASS 72b's producer
    loop did)."""
    body = ("\tld.param.v2.u32 {%r2, %r3}, [k_p];\n\tadd.s32 %r4, %r3, 510;\n\tsetp.lt.u32 %p1, %r4, 511;\n"
            "\t@%p1 bra OUT;\n\tmov.u32 %r5, %r2;\n\t// here\n\tbar.sync 0;\nOUT:\n")
    assert value_at(body, "%r2", params=".param .align 8 .b8 k_p[8]") == "[0, 4294967295]"

def test_everything_an_unreachable_block_dominates_is_unreachable():
    """A branch condition no thread meets (tid.x + 192 <= 15) cuts off a region whose
    blocks are dominated one by the next; the block where the paths meet again is not."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tadd.s32 %r4, %r1, 192;\n\tsetp.gt.u32 %p2, %r4, 15;\n\t@%p2 bra OUT;\n"
            "\tmov.u32 %r5, %r4;\n\tsetp.eq.u32 %p3, %r5, 7;\n\t@%p3 bra INNER;\n"
            "\tmov.u32 %r6, 1;\n\tsetp.eq.u32 %p4, %r5, 9;\n\t@%p4 bra INNER;\n"
            "\tmov.u32 %r8, 2;\nINNER:\n\tmov.u32 %r7, %r5;\nOUT:\n\tmov.u32 %r9, %r1;\n")
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}{body}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text).function("k"))
    first = {b.instructions[0].text: b.index for b in flow.blocks if b.instructions}
    last = flow.blocks[first["mov.u32 %r9, %r1;"]].instructions[0]
    dead = analyse_registers(flow, {"q": (first["mov.u32 %r9, %r1;"], 0, last.operands[1])}).dead
    assert dead == {first[text] for text in ("mov.u32 %r5, %r4;", "mov.u32 %r6, 1;", "mov.u32 %r8, 2;",
                                              "mov.u32 %r7, %r5;")}


def test_a_test_of_a_copy_of_the_thread_index_bounds_every_later_read_of_it():
    """A -G build copies %tid.x afresh for each use: the test on one copy bounds the next
    copy past the branch (the thread's index never changes), but not %warpid, which may."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 2;\n\tnot.pred %p2, %p1;\n\t@%p2 bra OUT;\n"
            "\tmov.u32 %r2, %tid.x;\n\tshl.b32 %r3, %r2, 14;\n\t// here\n\tbar.sync 0;\nOUT:\n")
    assert value_at(body, "%r3") == "[0, 16384] step 16384"
    assert value_at(body.replace("// here\n", ""), "%tid.x") == "[0, 1023]"  # after the paths meet again
    assert value_at(body.replace("%tid.x", "%warpid"), "%r3") == "[0, 1032192] step 16384"


def test_warp_group_index_from_a_uniform_shuffle_bounds_the_thread_index():
    body = ("\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 7;\n\tmov.u32 %r3, 0;\n"
            "\tshfl.sync.idx.b32 %r4|%p1, %r2, %r3, 31, -1;\n\tsetp.eq.s32 %p2, %r4, 0;\n\t@%p2 bra OUT;\n"
            "\tadd.s32 %r5, %r1, -128;\n\t// here\n\tbar.sync 0;\nOUT:\n")
    # .maxntid 384: %tid.x < 384, and past the branch it is at least 128
    assert value_at(body, "%r5", directives=" .maxntid 384, 1, 1") == "[0, 255]"
    # without the one-dimensional block the lanes' shuffled value says nothing of their own index
    assert value_at(body, "%r5") == "[-128, 895]"


@pytest.mark.parametrize("body, expected", [
    # x % 7 through a multiply-high sequence
    ("\tmul.wide.u32 %rd1, %r9, 613566757;\n\tshr.u64 %rd2, %rd1, 32;\n\tcvt.u32.u64 %r2, %rd2;\n"
     "\tsub.s32 %r3, %r9, %r2;\n\tshr.u32 %r4, %r3, 1;\n\tadd.s32 %r5, %r4, %r2;\n\tshr.u32 %r6, %r5, 2;\n"
     "\tmul.lo.s32 %r7, %r6, 7;\n\tsub.s32 %r8, %r9, %r7;\n", "[0, 6]"),
    # a signed remainder by 8 of a non-negative value
    ("\tmov.u32 %r1, %tid.x;\n\tshr.s32 %r2, %r1, 31;\n\tshr.u32 %r3, %r2, 29;\n\tadd.s32 %r4, %r1, %r3;\n"
     "\tand.b32 %r5, %r4, -8;\n\tsub.s32 %r8, %r1, %r5;\n", "[0, 7]"),
])
def test_remainder_idioms(body, expected):
    assert value_at(body, "%r8") == expected


#: Gluon's ring of three stages counted by a signed i: s = i - 3 * (i / 3) by LLVM's signed
#: division, then the stage's barrier at 8 * s and its tile at 16376 * s past that
SIGNED_RING = ("\tmul.hi.s32 %r2, %r9, 1431655766;\n\tshr.u32 %r3, %r2, 31;\n\tadd.s32 %r4, %r2, %r3;\n"
               "\tmul.lo.s32 %r5, %r4, 3;\n\tsub.s32 %r8, %r9, %r5;\n\tshl.b32 %r10, %r8, 3;\n"
               "\tmov.u32 %r11, dyn;\n\tadd.s32 %r12, %r11, %r10;\n\tmad.lo.s32 %r13, %r8, 16376, %r12;\n")


#: ``%rs1`` holds the low 16 bits of ``%tid.x - 128``: the number ``[-128, 895]`` stands
#: for them (`ptxkit.cfg.values.values.wrap`; the threads below 128 set the sign bit, so an unsigned
#: reader sees ``[0, 65535]``), ``%rs2`` the sum of two of them (more than 16 bits as a
#: number: only its low 16 bits are the register's).
NARROW = ("\tmov.u32 %r1, %tid.x;\n\tadd.s32 %r2, %r1, -128;\n\tcvt.u16.u32 %rs1, %r2;\n"
          "\tadd.s16 %rs2, %rs1, %rs1;\n")


@pytest.mark.parametrize("extra, register, shown", [
    ("\tshr.s16 %rs3, %rs1, 15;\n", "%rs3", "[-1, 0]"),  # the sign, spread: -1 for the low threads
    ("\tshr.u16 %rs3, %rs1, 15;\n", "%rs3", "[0, 1]"),
    ("\tcvt.s32.s16 %r3, %rs1;\n", "%r3", "[-128, 895]"),  # sign-extended: tid - 128 again
    ("\tcvt.u32.u16 %r3, %rs2;\n", "%r3", "[0, 65535]"),  # zero-extended: the sum's low 16 bits
    ("\tmul.wide.s16 %r3, %rs1, 2;\n", "%r3", "[-256, 1790] step 2"),
    ("\tcvt.u32.u16 %r3, %rs1;\n", "%r3", "[0, 65535]"),  # zero-extended: 65408 for thread 0
    ("\tsetp.lt.s16 %p1, %rs1, 0;\n\tselp.u32 %r3, 1, 0, %p1;\n", "%r3", "[0, 1]"),
    ("\tmin.u32 %r3, %r2, 64;\n", "%r3", "[0, 64]"),  # -128 is a large unsigned number: 64 is the least
])
def test_an_instruction_reads_its_operands_with_its_types_sign(extra, register, shown):
    """A number stands for the register's bits; signed and unsigned instructions read them
    differently once the top bit may be set (`ptxkit.cfg.values.values.signed`, `truncate`)."""
    assert value_at(NARROW + extra, register) == shown


@pytest.mark.parametrize("extremum, shown", [
    ("max.s32 %r3, %r2, 0", "[0, 2147483647]"),  # FlashMLA's max(valid_window_size, 0)
    ("max.s32 %r3, 0, %r2", "[0, 2147483647]"),
    ("min.s32 %r3, %r2, 64", "[-2147483648, 64]"),
    ("max.u32 %r3, %r2, 7", "[7, 4294967295]"),
    ("min.u32 %r3, %r2, 64", "[0, 64]"),
    ("max.s64 %rd3, %rd2, -1", "[-1, 9223372036854775807]"),
])
def test_an_unknown_operand_of_min_or_max_is_a_number_of_its_type(extremum, shown):
    """What ``min``/``max`` compare is a number of their type, whatever the register held:
    one bound of the result is the known operand's (PTX ISA, max: the larger of the two
    as the type reads them)."""
    body = "\tld.global.u32 %r2, [%rd1];\n\tld.global.u64 %rd2, [%rd1];\n\t" + extremum + ";\n"
    assert value_at(body, extremum.split()[1].rstrip(",")) == shown


def test_a_signed_test_of_a_narrow_register_bounds_it_as_signed():
    body = NARROW + "\tsetp.gt.s16 %p1, %rs1, 3;\n\t@%p1 bra DONE;\n\tmov.u16 %rs4, %rs1;\n\t// here\n\tret;\nDONE:\n"
    assert value_at(body, "%rs4") == "[-128, 3]"  # not [0, 3]: the low threads' bits are negative


def test_a_signed_remainder_has_the_sign_of_its_dividend():
    counted = "\tmov.u32 %r9, %tid.x;\n" + SIGNED_RING
    assert value_at(counted, "%r8") == "[0, 2]"
    # the tile address: the sum 16384 * s is not expanded through the remainder's inputs
    assert value_at(counted, "%r13") == "dynamic shared+[0, 32768] step 16384 (shared::cta window)"
    # a dividend that may be negative: (-3, 3)
    assert value_at("\tld.param.u32 %r9, [n];\n" + SIGNED_RING, "%r8", params=".param .u32 n") == "[-2, 2]"


#: Gluon's ring of three stages: i counts rounds, LLVM keeps 8 * i and 32768 * i as counters
#: of their own and takes i / 3 by a multiply-high; 8 * i - 24 * (i / 3) is 8 * (i % 3)
SCALED = ("\tld.param.u32 %r1, [n];\n\tmov.b32 %r7, 0;\n\tmov.b32 %r8, %r7;\n\tmov.b32 %r9, %r7;\n"
          "\tmov.b32 %r10, %r7;\nLOOP:\n\tmul.hi.u32 %r2, %r10, -1431655765;\n\tshr.u32 %r3, %r2, 1;\n"
          "\tmul.lo.s32 %r4, %r3, 24;\n\tsub.s32 %r5, %r9, %r4;\n\tmul.lo.s32 %r6, %r3, 98304;\n"
          "\tsub.s32 %r11, %r8, %r6;\n\tmov.u32 %r12, dyn;\n\tadd.s32 %r13, %r12, %r11;\n"
          "\tadd.s32 %r10, %r10, 1;\n\tadd.s32 %r9, %r9, 8;\n\tadd.s32 %r8, %r8, 32768;\n"
          "\tsetp.lt.u32 %p1, %r10, %r1;\n\t@%p1 bra LOOP;\n")


@pytest.mark.parametrize("old, new", [
    # the multiple steps by 16, not 8
    ("\tadd.s32 %r9, %r9, 8;\n", "\tadd.s32 %r9, %r9, 16;\n"),
    # the multiple starts at 8, not 0
    ("\tmov.b32 %r9, %r7;\n", "\tmov.b32 %r9, 8;\n"),
    # the multiple advances in another block than the counter
    ("\tadd.s32 %r9, %r9, 8;\n", "\tbra.uni NEXT;\nNEXT:\n\tadd.s32 %r9, %r9, 8;\n"),
    # the counter advances between the division and the subtraction
    ("\tmul.lo.s32 %r4, %r3, 24;\n", "\tadd.s32 %r10, %r10, 1;\n\tmul.lo.s32 %r4, %r3, 24;\n"),
], ids=["other-step", "other-start", "other-block", "counter-moved"])
def test_a_remainder_of_a_counter_kept_scaled_in_another(old, new):
    assert value_at(SCALED, "%r5", params=".param .u32 n") == "[0, 16] step 8"
    assert value_at(SCALED, "%r13", params=".param .u32 n") == \
        "dynamic shared+[0, 65536] step 32768 (shared::cta window)"
    assert old in SCALED
    assert value_at(SCALED.replace(old, new, 1), "%r5", params=".param .u32 n") != "[0, 16] step 8"


LOW_ALIGNED = ".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 16 .b8 low[];\n"
#: ThunderKittens' allocator: the dynamic base rounded up to 1024 through a select, then
#: the next buffer 32 KB on, rounded up again (a no-op once the start is aligned)
ROUNDED = ("\tmov.u32 %r1, low;\n\tcvt.u64.u32 %rd1, %r1;\n\tcvta.shared.u64 %rd2, %rd1;\n"
           "\tmov.u64 %rd9, 1024;\n"
           "\tand.b64 %rd3, %rd2, 1023;\n\tsub.s64 %rd4, %rd9, %rd3;\n\tadd.s64 %rd5, %rd4, %rd2;\n"
           "\tsetp.eq.s64 %p1, %rd3, 0;\n\tselp.b64 %rd6, %rd2, %rd5, %p1;\n"
           "\tadd.s64 %rd10, %rd6, 32768;\n"
           "\tand.b64 %rd11, %rd10, 1023;\n\tsub.s64 %rd12, %rd9, %rd11;\n\tadd.s64 %rd13, %rd12, %rd10;\n"
           "\tsetp.eq.s64 %p2, %rd11, 0;\n\tselp.b64 %rd14, %rd10, %rd13, %p2;\n")


#: nvcc's loop over a ring of three 16 KB stages, unrolled four times: ``%r3`` advances by four
#: stages' bytes beside the stage count ``%r4``, and the stage is ``%r3 - 49152 * (%r4 / 3)``
#: plus a constant (CUTLASS 93). OUTER is where the settings of the two counters go.
COUNTERS = ("\tmov.u32 %r1, dyn;\n\tld.param.u32 %r20, [k_n];\n\tadd.s32 %r3, %r1, 50176;\n{OUTER}"
            "\tmov.u32 %r4, 1;\n\tmov.u32 %r5, 0;\nLOOP:\n\tmul.hi.u32 %r6, %r4, -1431655765;\n\tshr.u32 %r7, %r6, 1;\n"
            "\tmul.lo.s32 %r8, %r7, 49152;\n\tsub.s32 %r9, 66560, %r8;\n\tadd.s32 %r10, %r3, %r9;\n"
            "\tst.shared.u32 [%r10], %r5;\n\t// here\n\tadd.s32 %r3, %r3, 65536;\n\tadd.s32 %r4, %r4, 4;\n"
            "\tadd.s32 %r5, %r5, 1;\n\tsetp.lt.s32 %p2, %r5, %r20;\n\t@%p2 bra LOOP;\n{AFTER}")


@pytest.mark.parametrize("outer, after, shown", [
    # x - 16384 * z stays dyn + 33792: the stage is dyn + 100352 + 16384 * (z % 3)
    ("", "", "dynamic shared+[100352, 133120] step 16384 (shared::cta window)"),
    ("\tsetp.eq.s32 %p1, %r20, 0;\n\t@%p1 bra DONE;\n", "DONE:\n",
     "dynamic shared+[100352, 133120] step 16384 (shared::cta window)"),  # set in two blocks
    # an outer loop sets z again but not x, which the inner loop advanced: no relation
    ("OUTER:\n", "\tbra.uni OUTER;\n", None),
])
def test_a_counter_kept_beside_a_stage_count_gives_the_stage(outer, after, shown):
    body = COUNTERS.format(OUTER=outer, AFTER=after)
    found = value_at(body, "%r10", ".param .u32 k_n")
    assert found == shown if shown is not None else found.endswith("inf] step 16384 (shared::cta window)")


#: CUTLASS 93's K/V producer: the stage count ``%r4`` starts at a join (1, or a value from
#: an unrolled loop before), ``%r3`` is set beside it to ``(%r4 << 14) + base + 50176``, both
#: advance together, and the stage is ``%r3 - 49152 * (%r4 / 3)``.
SCALED_START = ("\tmov.u32 %r1, dyn;\n\tld.param.u32 %r20, [k_n];\n\tmov.u32 %r4, 1;\n"
                "\tsetp.eq.s32 %p1, %r20, 0;\n\t@%p1 bra SET;\n\tadd.s32 %r4, %r20, -1;\nSET:\n"
                "\tshl.b32 %r11, %r4, 14;\n\tadd.s32 %r12, %r11, %r1;\n\tadd.s32 %r3, %r12, 50176;\n"
                "\tmov.u32 %r5, 0;\nLOOP:\n\tmul.hi.u32 %r6, %r4, -1431655765;\n\tshr.u32 %r7, %r6, 1;\n"
                "\tmul.lo.s32 %r8, %r7, 49152;\n\tsub.s32 %r10, %r3, %r8;\n"
                "\tst.shared.u32 [%r10], %r5;\n\t// here\n\tadd.s32 %r3, %r3, 16384;\n\tadd.s32 %r4, %r4, 1;\n"
                "\tadd.s32 %r5, %r5, 1;\n\tsetp.lt.s32 %p2, %r5, %r20;\n\t@%p2 bra LOOP;\n")


@pytest.mark.parametrize("change, shown", [
    (None, "dynamic shared+[50176, 82944] step 16384 (shared::cta window)"),  # x - 16384 z = dyn + 50176
    # z set again inside the loop, away from its advance: x - 16384 z changes
    (("\tadd.s32 %r5, %r5, 1;\n", "\tadd.s32 %r5, %r5, 1;\n\tadd.s32 %r4, %r5, 7;\n"), None),
    # x set from 8192 * z: not the ratio of the two advances
    (("shl.b32 %r11, %r4, 14", "shl.b32 %r11, %r4, 13"), None),
])
def test_a_counter_set_from_a_stage_count_of_any_start_gives_the_stage(change, shown):
    body = SCALED_START if change is None else SCALED_START.replace(*change)
    assert change is None or change[0] in SCALED_START
    found = value_at(body, "%r10", ".param .u32 k_n")
    assert found == shown if shown is not None else found != "dynamic shared+[50176, 82944] step 16384 (shared::cta window)"


#: CUTLASS 93's mbarrier of a stage: T = (z << 3) + 1024 is set from the stage count's start
#: z0 (a join), x beside it from the barriers' base, and the barrier is T + x - 24 * (z / 3),
#: read in a block after the loop head that computes 24 * (z / 3) (SPLIT: or in that block).
PARTNER = ("\tmov.u32 %r1, dyn;\n\tld.param.u32 %r20, [k_n];\n\tmov.u32 %r4, 1;\n"
           "\tsetp.eq.s32 %p1, %r20, 0;\n\t@%p1 bra SET;\n\tadd.s32 %r4, %r20, -1;\nSET:\n"
           "\tshl.b32 %r11, %r4, 3;\n\tadd.s32 %r12, %r11, 1024;\n\tmov.u32 %r3, dyn;\n\tmov.u32 %r5, 0;\n"
           "LOOP:\n\tmul.hi.u32 %r6, %r4, -1431655765;\n\tshr.u32 %r7, %r6, 1;\n\tmul.lo.s32 %r8, %r7, 24;\n"
           "\tsub.s32 %r13, 0, %r8;\n{SPLIT}\tadd.s32 %r9, %r12, %r3;\n\tadd.s32 %r10, %r9, %r13;\n"
           "\tst.shared.u32 [%r10], %r5;\n\t// here\n\tadd.s32 %r3, %r3, 8;\n\tadd.s32 %r4, %r4, 1;\n"
           "\tadd.s32 %r5, %r5, 1;\n\tsetp.lt.s32 %p2, %r5, %r20;\n\t@%p2 bra LOOP;\n")


@pytest.mark.parametrize("split", ["", "\tsetp.eq.s32 %p3, %r5, 7;\n\t@%p3 bra ON;\nON:\n"])
def test_a_term_set_from_a_stage_count_start_cancels_the_counter_beside_it(split):
    """``T + x - 24 * (z / 3)`` with ``T = 8 * z0 + 1024`` and x counting 8 per stage from
    the base: ``T + x - 8 * z`` is base + 1024, so the barrier is the stage's. In a later
    block, ``24 * (z / 3)`` still comes from the loop head while T, whose z changes on
    the way, is kept as a term."""
    body = PARTNER.format(SPLIT=split)
    assert value_at(body, "%r10", ".param .u32 k_n") == "dynamic shared+[1024, 1040] step 8 (shared::cta window)"
    moved = body.replace("\tadd.s32 %r12, %r11, 1024;\n", "\tadd.s32 %r12, %r11, 1024;\n\tadd.s32 %r4, %r4, 1;\n")
    assert value_at(moved, "%r10", ".param .u32 k_n") != \
        "dynamic shared+[1024, 1040] step 8 (shared::cta window)"  # z moved on after T read it


#: Triton 3.6's persistent warp-specialized GEMM: the 64-bit stage count ``%rd1`` starts at 0
#: before the tile loop and counts on across tiles; each tile sets ``%r3 = cvt(z) << 13`` and
#: ``%r12 = cvt(z) << 3`` beside a barrier counter ``%r14`` from 0, all advancing with z;
#: ``q = z / 3`` by ``mul.hi.u64`` and the stage is ``%r3 - 24576 * q`` (8 KB stages), its
#: barrier ``%r14 + %r12 - 24 * q``, both read before the advances.
PERSISTENT = ("\tmov.u32 %r1, dyn;\n\tld.param.u32 %r20, [k_n];\n\tmov.b64 %rd1, 0;\n\tmov.u32 %r21, 0;\n"
              "TILE:\n\tcvt.u32.u64 %r2, %rd1;\n\tshl.b32 %r12, %r2, 3;\n\tshl.b32 %r3, %r2, 13;\n"
              "\tmov.u32 %r14, 0;\n\tmov.u32 %r5, %r20;\n"
              "LOOP:\n\tmul.hi.u64 %rd2, %rd1, -6148914691236517205;\n\tshr.u64 %rd3, %rd2, 1;\n"
              "\tcvt.u32.u64 %r6, %rd3;\n\tmul.lo.s32 %r7, %r6, 24;\n\tsub.s32 %r8, %r12, %r7;\n"
              "\tmul.lo.s32 %r9, %r6, 24576;\n\tsub.s32 %r10, %r3, %r9;\n\tadd.s32 %r11, %r1, %r10;\n"
              "\tadd.s32 %r13, %r14, %r8;\n\tadd.s32 %r15, %r1, %r13;\n"
              "\tst.shared.u32 [%r11], %r15;\n\t// here\n\tadd.s64 %rd1, %rd1, 1;\n\tadd.s32 %r14, %r14, 8;\n"
              "\tadd.s32 %r3, %r3, 8192;\n\tadd.s32 %r5, %r5, -1;\n\tsetp.ne.s32 %p2, %r5, 0;\n\t@%p2 bra LOOP;\n"
              "\tadd.s32 %r21, %r21, 132;\n\tsetp.lt.s32 %p3, %r21, %r20;\n\t@%p3 bra TILE;\n")


@pytest.mark.parametrize("change, stage, barrier", [
    (None, "dynamic shared+[0, 16384] step 8192 (shared::cta window)",
     "dynamic shared+[0, 16] step 8 (shared::cta window)"),
    # x advances two stages' bytes per stage: x - 8192 * z is no longer the tile's start
    (("add.s32 %r3, %r3, 8192", "add.s32 %r3, %r3, 16384"), None, "dynamic shared+[0, 16] step 8 (shared::cta window)"),
    # the barrier's term shifts the 32-bit copy of another register than the stage count
    (("shl.b32 %r12, %r2, 3", "shl.b32 %r12, %r21, 3"), "dynamic shared+[0, 16384] step 8192 (shared::cta window)",
     None),
    # a saturating cut is no copy of z modulo 2**32
    (("cvt.u32.u64 %r2, %rd1;", "cvt.sat.u32.u64 %r2, %rd1;"), None, None),
    # a copy through 16 bits keeps z only modulo 2**16: 8192 * it is not 8192 * z modulo 2**32
    (("cvt.u32.u64 %r2, %rd1;", "cvt.u16.u64 %rs1, %rd1;\n\tcvt.u32.u16 %r2, %rs1;"), None, None),
])
def test_a_stage_count_counting_on_across_tiles_gives_the_stage(change, stage, barrier):
    """The counter idiom of docs/fence.md §3.1 where the stage count is set once before an
    outer loop and the counters beside it from its 32-bit copy each time round: ``x - s * z``
    is 0 modulo 2**32 where x is set, and stays so while both advance."""
    body = PERSISTENT if change is None else PERSISTENT.replace(*change)
    assert change is None or change[0] in PERSISTENT
    found = (value_at(body, "%r11", ".param .u32 k_n"), value_at(body, "%r15", ".param .u32 k_n"))
    exact = ("dynamic shared+[0, 16384] step 8192 (shared::cta window)",
             "dynamic shared+[0, 16] step 8 (shared::cta window)")
    for value, shown, narrowed in zip(found, (stage, barrier), exact):
        assert value == shown if shown is not None else value != narrowed


@pytest.mark.parametrize("body, shown", [
    # CUTLASS 77's MLA: a K-block counter advanced by 2 that leaves its loop at 8, tested
    # with == in the middle of the loop: 8 is the last value at the top (before 0..8, widened away)
    ("\tmov.u32 %r1, 0;\nLOOP:\n\tshl.b32 %r9, %r1, 9;\n// here\n\tsetp.eq.s32 %p1, %r1, 8;\n\t@%p1 bra OUT;\n"
     "\tadd.s32 %r1, %r1, 2;\n\tbra.uni LOOP;\nOUT:\n", "[0, 8] step 2"),
    # its ring of 12 stages, advanced twice a turn: the widening stops at 10, the last even stage
    ("\tmov.u32 %r1, 0;\nLOOP:\n\tadd.s32 %r2, %r1, 1;\n\tsetp.eq.s32 %p1, %r2, 12;\n\tselp.b32 %r3, 0, %r2, %p1;\n"
     "\tadd.s32 %r4, %r3, 1;\n\tsetp.eq.s32 %p2, %r4, 12;\n\tselp.b32 %r1, 0, %r4, %p2;\n"
     "\tsetp.lt.u32 %p3, %r20, 99;\n\t@%p3 bra LOOP;\n", "[0, 10] step 2"),
])
def test_a_counter_stepped_past_one_keeps_its_step_through_tests_and_widening(body, shown):
    """A test ``x != C`` takes C off an end of x's numbers only as x's step allows (8 off
    ``[0, 8] step 2`` leaves ``[0, 6] step 2``), and widening stops at the last number of
    x's step below a threshold, not the first above it (docs/fence.md §3.1)."""
    assert value_at(body, "%r1") == shown


def test_a_value_computed_from_a_ring_keeps_its_bound_however_often_the_ring_changes():
    """A ring of 24 stages in a loop that compares its index with many constants: the
    join widens through each of them in turn (more than twelve changes), and the stage
    address computed from it, from which the next stage is computed, changes as often.
    It is no join, and every cycle through it passes the join, so it keeps the ring's
    bound (CUTLASS 92's 24-stage TMA ring)."""
    tests = "".join(f"\tsetp.eq.s32 %p2, %r2, {k};\n\t@%p2 bra SKIP{k};\n\tadd.s32 %r9, %r9, 1;\nSKIP{k}:\n"
                    for k in range(2, 22))
    body = ("\tmov.u32 %r1, dyn;\n\tmov.u32 %r2, 0;\n\tmov.u32 %r9, 0;\nLOOP:\n\tshl.b32 %r3, %r2, 13;\n"
            "\tadd.s32 %r4, %r1, %r3;\n\tst.shared.u32 [%r4], %r9;\n\t// here\n" + tests +
            "\tshr.u32 %r6, %r3, 13;\n\tadd.s32 %r5, %r6, 1;\n\tsetp.eq.s32 %p1, %r5, 24;\n"
            "\tselp.b32 %r2, 0, %r5, %p1;\n\tbra.uni LOOP;\n")  # the next stage from the address: %r3 changes with the join
    assert value_at(body, "%r4") == "dynamic shared+[0, 188416] step 8192 (shared::cta window)"


def test_a_base_rounded_up_keeps_offsets_exact():
    assert value_at(ROUNDED, "%rd6", head=LOW_ALIGNED) == "dynamic shared aligned 1024+0 (shared::cta generic)"
    assert value_at(ROUNDED, "%rd14", head=LOW_ALIGNED) == "dynamic shared aligned 1024+32768 (shared::cta generic)"
    # (p + 1023) & -1024 is the same start
    assert value_at(ROUNDED + "\tadd.s64 %rd15, %rd2, 1023;\n\tand.b64 %rd16, %rd15, -1024;\n", "%rd16",
                    head=LOW_ALIGNED) == "dynamic shared aligned 1024+0 (shared::cta generic)"
    # a select whose other arm does not add up to 1024 is only a select
    assert value_at(ROUNDED.replace("mov.u64 %rd9, 1024", "mov.u64 %rd9, 1040"), "%rd6",
                    head=LOW_ALIGNED) == "dynamic shared+[0, 1040] (shared::cta generic)"


#: A -G build's align-up, as ThunderKittens' allocator writes it: `if (p % 1024) p += 1024 -
#: p % 1024;`, the remainder computed again on the rounding path
ROUNDED_BY_BRANCH = (
    "\tmov.u64 %rd10, low;\n\tcvta.shared.u64 %rd2, %rd10;\n\tadd.s64 %rd1, %rd2, 4096;\n\tmov.b64 %rd8, %rd1;\n"
    "\trem.u64 %rd3, %rd1, 1024;\n\tsetp.ne.s64 %p1, %rd3, 0;\n\tnot.pred %p2, %p1;\n\t@%p2 bra L3;\n"
    "\trem.u64 %rd4, %rd1, 1024;\n\tmov.u64 %rd5, 1024;\n\tsub.s64 %rd6, %rd5, %rd4;\n\tadd.s64 %rd7, %rd1, %rd6;\n"
    "\t// here\n\tmov.b64 %rd8, %rd7;\nL3:\n\tadd.s64 %rd9, %rd8, 32768;\n")


@pytest.mark.parametrize("body, register, shown", [
    # the remainder computed again is the tested one: not 0 on the rounding path
    (ROUNDED_BY_BRANCH, "%rd4", "[1, 1023]"),
    # where it is not 0, p + (1024 - p % 1024) is p rounded up
    (ROUNDED_BY_BRANCH, "%rd7", "dynamic shared aligned 1024+4096 (shared::cta generic)"),
    # where it is 0, p is p rounded up: after the paths meet, one exact offset from the rounded base
    (ROUNDED_BY_BRANCH.replace("\t// here\n", ""), "%rd9", "dynamic shared aligned 1024+36864 (shared::cta generic)"),
    # p changed between the two remainders: they are two values
    (ROUNDED_BY_BRANCH.replace("\trem.u64 %rd4", "\tadd.s64 %rd1, %rd1, 16;\n\trem.u64 %rd4"), "%rd4", "[0, 1023]"),
])
def test_a_pointer_rounded_up_on_a_branch(body, register, shown):
    assert value_at(body, register, head=LOW_ALIGNED) == shown


def test_every_extern_shared_array_is_one_region_as_aligned_as_the_most_aligned():
    two = LOW_ALIGNED + ".extern .shared .align 128 .b8 high[];\n"
    assert value_at("\tmov.u32 %r1, low;\n", "%r1", head=two) == value_at("\tmov.u32 %r1, high;\n", "%r1", head=two)
    assert value_at("\tmov.u32 %r1, low;\n\tand.b32 %r2, %r1, 127;\n", "%r2", head=two) == "0"


def test_a_signed_remainder_shifted_past_its_mask_is_exact():
    """nvcc's ``(k % 2) << 14`` for a signed k: ``k - ((k + (k >>u 31)) & 0x3FFFE)``, then
    a shift that moves the mask's limit (2**18) out of 32 bits: whatever k is, the
    result is -16384, 0 or 16384, so an address built from it stays near its base."""
    counter = "\tmov.u32 %r9, 0;\nLOOP:\n\tadd.s32 %r9, %r9, 1;\n"
    body = (counter + "\tshr.u32 %r2, %r9, 31;\n\tadd.s32 %r3, %r9, %r2;\n\tand.b32 %r4, %r3, 262142;\n"
            "\tsub.s32 %r5, %r9, %r4;\n\tshl.b32 %r6, %r5, 14;\n// here\n\tbra.uni LOOP;\n")
    assert value_at(body, "%r2") == "[0, 1]"  # a logical shift leaves at most 32 - 31 bits
    assert value_at(body, "%r6") == "[-16384, 16384] step 16384"
    assert value_at(body.replace("14;", "13;"), "%r6") == "top"  # 2**18 << 13 stays in 32 bits


def test_a_signed_remainder_cut_to_its_mask_is_exact():
    """nvcc's ``k % 2`` for a 16-bit signed k (CUTLASS 93's warp parity): ``k - ((k + ((k
    >>u 7) & 1)) & 254)``, then ``cvt.s16.s8``, which keeps the 8 bits below the mask's
    limit (256): whatever k is, the result is -1, 0 or 1."""
    body = (NARROW + "\tshr.s16 %rs3, %rs1, 5;\n\tshr.u16 %rs4, %rs3, 7;\n\tand.b16 %rs5, %rs4, 1;\n"
            "\tadd.s16 %rs6, %rs3, %rs5;\n\tand.b16 %rs7, %rs6, 254;\n\tsub.s16 %rs8, %rs3, %rs7;\n"
            "\tcvt.s16.s8 %rs9, %rs8;\n\tcvt.u32.u8 %r3, %rs8;\n")
    assert value_at(body, "%rs3") == "[-4, 27]"  # (tid - 128) >> 5, as signed
    assert value_at(body, "%rs8") == "top"  # -4 + 4 is negative: the mask may keep more than the remainder
    assert value_at(body, "%rs9") == "[-1, 1]"
    assert value_at(body, "%r3") == "[0, 255]"  # the same bits, zero-extended: -1 is 255
    assert value_at(body.replace("254;", "126;"), "%rs9") == "top"  # a multiple of 128 is not cut off


@pytest.mark.parametrize("take, shown", [
    ("\tshr.u64 %rd3, %rd2, 4;\n\tand.b64 %rd4, %rd3, 16383;\n", "dynamic shared+1024 (shared::cta window) >> 4"),
    ("\tbfe.u64 %rd4, %rd2, 4, 14;\n", "dynamic shared+1024 (shared::cta window) >> 4"),
    ("\tshr.u64 %rd3, %rd2, 4;\n\tand.b64 %rd4, %rd3, 65535;\n", "[0, 65535]"),  # bits 18 and up: the window's base
])
def test_a_descriptor_field_of_a_generic_shared_address_is_its_window_address(take, shown):
    """ThunderKittens builds a ``tcgen05.cp`` descriptor from a generic address: bits 4 to
    17 of it are those of the window address (the window starts at a multiple of 2**18)."""
    body = "\tmov.u64 %rd1, dyn;\n\tcvta.shared.u64 %rd2, %rd1;\n\tadd.s64 %rd2, %rd2, 1024;\n" + take
    assert value_at(body, "%rd4") == shown


#: ThunderKittens' allocator: the generic base rounded up to 1024 on a branch, as
#: ``if (p & 1023) p = (p & -1024) + 1024``, the rounding taking ``p`` again with its own ``cvta``.
ALLOCATOR = ("\tmov.u64 %rd1, low;\n\tcvta.shared.u64 %rd2, %rd1;\n\tand.b64 %rd3, %rd2, 1023;\n"
             "\tsetp.eq.s64 %p1, %rd3, 0;\n\t@%p1 bra DONE;\n\tcvta.shared.u64 %rd4, %rd1;\n"
             "\tand.b64 %rd5, %rd4, -1024;\n\tadd.s64 %rd2, %rd5, 1024;\nDONE:\n")
LOW_HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 16 .b8 low[];\n"


def test_an_allocator_rounding_up_on_a_branch_gives_the_rounded_start():
    """Where ``p & 1023`` is 0, p is a multiple of 1024 (the edge into the join); where it
    is not, ``(p & -1024) + 1024`` is p rounded up: both ways, the rounded start itself,
    not a kilobyte of slack after it."""
    assert value_at(ALLOCATOR, "%rd2", head=LOW_HEAD) == "dynamic shared aligned 1024+0 (shared::cta generic)"
    unguarded = ALLOCATOR.replace("\t@%p1 bra DONE;\n", "")  # no test: p may have been aligned already
    assert value_at(unguarded, "%rd2", head=LOW_HEAD) == \
        "dynamic shared aligned 1024+[0, 1024] step 1024 (shared::cta generic)"
    again = ALLOCATOR.replace("\tcvta.shared.u64 %rd4, %rd1;\n", "\tcvta.shared.u64 %rd4, %rd1;\n\tadd.s64 %rd4, %rd4, 16;\n")
    assert value_at(again, "%rd2", head=LOW_HEAD) != value_at(ALLOCATOR, "%rd2", head=LOW_HEAD)  # not the same p


def test_a_ring_index_wrapped_by_subtracting_keeps_its_range():
    """ThunderKittens' ``s + 1 < 5 ? s + 1 : s - 4``: both arms are ``s + 1`` plus a constant."""
    body = ("\tmov.u32 %r1, 0;\nLOOP:\n\tadd.s32 %r2, %r1, 1;\n\tadd.s32 %r3, %r1, -4;\n"
            "\tsetp.lt.u32 %p1, %r2, 5;\n\tselp.b32 %r1, %r2, %r3, %p1;\n// here\n\tbra.uni LOOP;\n")
    assert value_at(body, "%r1") == "[0, 4]"
    moved = body.replace("\tadd.s32 %r3, %r1, -4;\n", "\tadd.s32 %r3, %r1, -4;\n\tadd.s32 %r1, %r1, 1;\n")
    assert value_at(moved, "%r1") != "[0, 4]"  # s moved on between the two arms: no relation


def test_descriptor_built_like_triton_for_tcgen05():
    body = ("\tmov.u32 %r1, dyn;\n\tadd.s32 %r2, %r1, 98304;\n\tbfe.u32 %r3, %r2, 4, 14;\n"
            "\tcvt.u64.u32 %rd1, %r3;\n\tor.b64 %rd2, %rd1, 4611756662049472512;\n")
    # the start field extracted with bfe (bits 4..17 of the address); 0x4000404000000000 is
    # tcgen05's 128-byte swizzle, version 1, SBO 1024 bytes
    assert value_at(body, "%rd2") == "dynamic shared+98304 (shared::cta window) >> 4 | 0x4000404000000000"
    assert value_at("\tmov.u32 %r1, %tid.x;\n\tbfe.u32 %r2, %r1, 2, 3;\n", "%r2") == "[0, 7]"
    assert value_at("\tmov.u32 %r1, %tid.x;\n\tbfe.s32 %r2, %r1, 2, 3;\n", "%r2") == "[-4, 3]"  # sign-extended


def test_bit_field_insert():
    body = ("\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 3;\n\tshr.u32 %r3, %r1, 6;\n\tand.b32 %r4, %r3, 3;\n"
            "\tbfi.b32 %r5, %r4, %r2, 10, 22;\n")
    assert value_at(body, "%r5") == "[0, 3075]"


def test_values_cross_inlined_calls():
    extra = (".func (.param .b32 f_ret) f(.param .b32 f_p)\n{\n.reg .b32 %r<4>;\n\tld.param.b32 %r1, [f_p];\n"
             "\tadd.s32 %r2, %r1, 64;\n\tst.param.b32 [f_ret], %r2;\n\tret;\n}\n")
    body = ("\tmov.u32 %r1, dyn;\n\t{\n\t.param .b32 param0;\n\t.param .b32 retval0;\n"
            "\tst.param.b32 [param0], %r1;\n\tcall.uni (retval0), f, (param0);\n\tld.param.b32 %r2, [retval0];\n"
            "\t}\n")
    assert value_at(body, "%r2", extra=extra, inline=True) == "dynamic shared+64 (shared::cta window)"
    assert value_at(body, "%r2", extra=extra) == "top"  # without inlining nothing is known of the result


def test_registers_declared_without_percent():
    body = ("\tmov.u32 %r1, dyn;\n\t{\n\t.reg .b32 remote;\n\tmapa.shared::cluster.u32 remote, %r1, 1;\n"
            "\t// here\n\tmbarrier.arrive.shared::cluster.b64 _, [remote];\n\t}\n")
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}{body}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text).function("k"))
    block = flow.blocks[0]
    at = next(i for i, ins in enumerate(block.instructions) if ins.text.startswith("mbarrier"))
    value = register_values(flow, {"q": (0, at, block.instructions[at].operands[1])})["q"]
    assert show(value) == "dynamic shared+0 (shared::cluster window)"


@pytest.mark.parametrize("directives, shown", [
    ("", "[0, 7]"),  # the portable limit
    (" .reqnctapercluster 2, 1, 1", "[0, 1]"),
    (" .maxclusterrank 4", "[0, 3]"),
])
def test_the_cluster_rank_is_bounded_by_the_cluster_size(directives, shown):
    assert value_at("\tmov.u32 %r1, %cluster_ctarank;\n", "%r1", directives=directives) == shown


def test_a_select_on_a_decided_comparison_takes_one_arm():
    body = ("\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 32;\n\tsetp.eq.s32 %p1, %r2, 0;\n"
            "\tselp.b32 %r3, 144, 112, %p1;\n\tmov.u32 %r4, 40;\n\tsetp.lt.u32 %p2, %r4, 64;\n"
            "\tselp.b32 %r5, 16, -16, %p2;\n\tsetp.eq.s32 %p3, %r4, 40;\n\tselp.b32 %r6, 0, 7, %p3;\n")
    assert value_at(body, "%r3") == "[112, 144] step 32"  # bit 5 of the thread index: either
    assert value_at(body, "%r5") == "16"
    assert value_at(body, "%r6") == "0"  # the ring form, a constant on the side that cannot happen dropped


def _thread_program(body: str, registers: list[str], directives: str = " .maxntid 256, 1, 1"):
    """The values of `registers` before the final ``ret`` of a kernel made of `body`, and
    the `by_thread` of the analysis (queries named by register)."""
    text = f"{HEAD}.visible .entry k(){directives}\n{{\n{REGS}{body}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text, "k.ptx").function("k"))
    block = flow.blocks[-1]
    queries = {name: (block.index, len(block.instructions) - 1,
                      parse_statement(f"mov.u32 %x, {name};").operands[1]) for name in registers}
    answers = analyse_registers(flow, queries)
    return answers.values, answers.by_thread


def test_values_by_thread_keep_terms_that_follow_one_bit_together():
    # o = (tid << 1) & 16 and s = (tid & 8) == 0 ? 16 : -16 follow bit 3: o + s is 16 or 0
    body = ("\tmov.u32 %r1, %tid.x;\n\tshl.b32 %r2, %r1, 1;\n\tand.b32 %r3, %r2, 16;\n\tand.b32 %r4, %r1, 8;\n"
            "\tsetp.eq.s32 %p1, %r4, 0;\n\tselp.b32 %r5, 16, -16, %p1;\n\tadd.s32 %r6, %r3, %r5;\n"
            "\tmov.u32 %r7, 12;\n")
    values, by_thread = _thread_program(body, ["%r6", "%r7"])
    assert show(values["%r6"]) == "[-16, 32] step 16"
    assert show(by_thread("%r6", 0, 7)) == "16" and show(by_thread("%r6", 8, 15)) == "0"
    assert show(by_thread("%r6", 0, 255)) == "[-16, 32] step 16"
    assert by_thread("%r7", 0, 7) is None  # no thread index in it
    assert show(values["%r6"]) == "[-16, 32] step 16"  # the fixpoint's values are kept


def test_a_shuffled_value_by_thread_is_another_lane_s():
    """``shfl.sync.idx d, tid, 0`` gives every lane lane 0's index: thread 1 holds 0, not
    1, so d does not follow the range's own index and keeps its value for all threads (a
    store at ``buf + 16 * d`` by lanes 1-31 lands on lane 0's slot; read as thread 1's
    own, it missed a race). The warp index broadcast from lane 0 in a one-dimensional
    block is every lane's own; in a block whose rows may split a warp it is not."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tshfl.sync.idx.b32 %r2, %r1, 0, 31, -1;\n\tshl.b32 %r3, %r2, 4;\n"
            "\tshr.u32 %r4, %r1, 5;\n\tshfl.sync.idx.b32 %r5, %r4, 0, 31, -1;\n\tshl.b32 %r6, %r5, 4;\n")
    values, by_thread = _thread_program(body, ["%r3", "%r6"])
    assert by_thread("%r3", 1, 1) is None and show(values["%r3"]) == "[0, 4080] step 16"  # all threads' stands
    assert show(by_thread("%r6", 40, 40)) == "16"  # warp 1
    _, by_thread = _thread_program(body, ["%r6"], directives=" .maxntid 256")  # rows may split a warp
    assert by_thread("%r6", 40, 40) is None


_BITWISE = {"and": lambda x, c: x & c, "or": lambda x, c: x | c, "xor": lambda x, c: x ^ c,
            "shl": lambda x, c: x << c, "shr": lambda x, c: x >> c}
_CHAIN = st.lists(st.tuples(st.sampled_from(sorted(_BITWISE)), st.integers(0, 255), st.integers(0, 7)),
                  min_size=1, max_size=3)
#: a term: a chain of bitwise steps from %tid.x, or a select on one bit of such a chain
_TERM = st.tuples(_CHAIN, st.none() | st.tuples(st.integers(0, 7), st.integers(-64, 64)))


@settings(max_examples=150, deadline=None)
@given(st.lists(_TERM, min_size=1, max_size=4), st.data())
def test_values_by_thread_hold_every_thread_value(terms, data):
    """An address offset as kernels compute one: a sum of terms, each a chain of bitwise
    steps from %tid.x (swizzles, lane and row parts) or a ``selp`` on one bit of such a
    chain (``(x & 2^b) == 0 ? s : -s``). The value by thread of each range of threads
    holds what every thread of it computes."""
    body, names, count = ["\tmov.u32 %r1, %tid.x;\n"], [], 1
    for chain, select in terms:
        source = "%r1"
        for step, constant, bits in chain:
            count += 1
            body.append(f"\t{step}.b32 %r{count}, {source}, {bits if step in ('shl', 'shr') else constant};\n")
            source = f"%r{count}"
        if select is not None:
            bit, small = select
            body.append(f"\tand.b32 %r{count + 1}, {source}, {1 << bit};\n\tsetp.eq.s32 %p1, %r{count + 1}, 0;\n"
                        f"\tselp.b32 %r{count + 2}, {small}, {-small}, %p1;\n")
            count += 2
            source = f"%r{count}"
        names.append(source)
    total = names[0]
    for name in names[1:]:
        count += 1
        body.append(f"\tadd.s32 %r{count}, {total}, {name};\n")
        total = f"%r{count}"

    def concrete(t: int) -> int:
        out = 0
        for chain, select in terms:
            x = t
            for step, constant, bits in chain:
                x = _BITWISE[step](x, bits if step in ("shl", "shr") else constant)
            out += x if select is None else (select[1] if x & (1 << select[0]) == 0 else -select[1])
        return out

    values, by_thread = _thread_program("".join(body), [total])
    low = data.draw(st.integers(0, 255))
    high = data.draw(st.integers(low, min(255, low + 40)))
    answer = by_thread(total, low, high)
    assert answer is not None  # every term follows the thread index
    for t in range(low, high + 1):
        assert contains_number(answer, concrete(t)) and contains_number(values[total], concrete(t)), \
            (t, concrete(t), show(answer))
    if low == high:
        assert show(answer) == str(concrete(low))  # one thread: exact


def test_division_and_remainder_by_a_bounded_divisor():
    body = ("\tmov.u32 %r1, %cluster_ctarank;\n\tmov.u32 %r2, %cluster_nctaid.x;\n\tdiv.u32 %r3, %r1, %r2;\n"
            "\trem.u32 %r4, %r1, %r2;\n\tld.param.u32 %r5, [k_n];\n\trem.s32 %r6, %r5, 4;\n")
    params = ".param .u32 k_n"
    assert value_at(body, "%r3", params) == "[0, 7]"  # rank < 8 (the portable cluster), divisor >= 1
    assert value_at(body, "%r4", params) == "[0, 7]"
    # rem.s32 reads the parameter's bits as signed: 32 bits loaded as u32 may still have the sign bit set
    assert value_at(body, "%r6", params.replace("u32", "s32")) == "[-3, 3]"
    # an even column stays even modulo 32 (ThunderKittens' -G tile stores, 8 bytes a thread)
    even = "\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 63;\n\tshl.b32 %r3, %r2, 1;\n\trem.s32 %r4, %r3, 32;\n"
    assert value_at(even, "%r4") == "[0, 30] step 2"
    # one thread's lane (a constant) and a range inside one period keep their remainder
    assert value_at("\tmov.u32 %r1, 31;\n\trem.s32 %r2, %r1, 4;\n", "%r2") == "3"
    inside = "\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 7;\n\tadd.s32 %r3, %r2, 36;\n\trem.u32 %r4, %r3, 32;\n"
    assert value_at(inside, "%r4") == "[4, 11]"


def test_a_per_rank_slice_of_a_multicast_box_stays_in_the_box():
    # (16384 / n) * (rank % n), the remainder as rem and as nvcc's x - (x / n) * n
    body = ("\tmov.u32 %r1, %cluster_ctarank;\n\tmov.u32 %r2, %cluster_nctaid.y;\n\tdiv.s32 %r3, 16384, %r2;\n"
            "\trem.u32 %r4, %r1, %r2;\n\tmul.lo.s32 %r5, %r3, %r4;\n\tdiv.u32 %r6, %r1, %r2;\n"
            "\tmul.lo.s32 %r7, %r6, %r2;\n\tsub.s32 %r8, %r1, %r7;\n\tmul.lo.s32 %r9, %r8, %r3;\n"
            "\tmul.lo.s32 %r10, %r3, %r1;\n")
    assert value_at(body, "%r5") == "[0, 16384]"
    assert value_at(body, "%r9") == "[0, 16384]"
    assert value_at(body, "%r10") != "[0, 16384]"  # rank itself is not a remainder by n


def test_only_joins_widen_early():
    # a value that grows one step per round (what a definition below a ring's join sees
    # while the join settles) is widened at once at a join, after many rounds where a
    # definition reads itself (a cycle no join breaks), and not at all elsewhere
    from ptxkit.cfg.values.registers import _PATIENCE, _Analysis

    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}\tadd.s32 %r3, %r3, 1;\n\tret;\n}}\n"
    analysis = _Analysis(flow_graph(ptxkit.parse(text).function("k")))
    analysis.values, analysis.updates, analysis.kept, analysis.defs, analysis.dirty = {}, {}, {}, {}, []
    analysis.thresholds_sorted = [99]
    analysis.rules = {(0, 0): (None, ("%r3",))}  # %r3's one definition reads %r3: a cycle no join breaks
    analysis._self_fed = None
    for step in range(_PATIENCE + 2):
        analysis.assign(("phi", "s@join1", 1), "s@join1", number(0, step), True, versioned=True)
        analysis.assign((0, 1), "%r2", number(0, step * 16384, 16384), True)
        analysis.assign((0, 0), "%r3", number(0, step), True)
        # the cycles are looked for once a definition that is no join passes _PATIENCE updates
        assert analysis._self_fed == (None if step < _PATIENCE else frozenset({"%r3"}))
    assert show(analysis.values["s@join1"]) == "[0, 99]"
    assert show(analysis.values["%r2"]) == f"[0, {(_PATIENCE + 1) * 16384}] step 16384"
    assert show(analysis.values["%r3"]) == "[0, 99]"


@pytest.mark.parametrize("between, shown", [
    ("", "dynamic shared+[0, 24] step 8 (shared::cta window)"),  # 8184 * i added and taken back
    # across blocks, through a register's one definition in a block that dominates the use
    ("\tbra.uni NEXT;\nNEXT:\n", "dynamic shared+[0, 24] step 8 (shared::cta window)"),
    ("\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra SKIP;\n\tmov.u32 %r20, 1;\nSKIP:\n",
     "dynamic shared+[0, 24] step 8 (shared::cta window)"),
    # i written on a way between the two blocks: each keeps its own range
    ("\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bra SKIP;\n\tmov.u32 %r2, 1;\nSKIP:\n",
     "dynamic shared+[-24552, 24576] step 8 (shared::cta window)"),
])
def test_an_offset_added_and_taken_back(between, shown):
    body = ("\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 3;\n\tmov.u32 %r9, dyn;\n\tshl.b32 %r3, %r2, 3;\n"
            "\tadd.s32 %r4, %r9, %r3;\n\tmad.lo.s32 %r6, %r2, 8184, %r4;\n" + between +
            "\tmad.lo.s32 %r7, %r2, -8184, %r6;\n")
    assert value_at(body, "%r7") == shown


def test_an_offset_taken_back_after_the_index_moved_on_is_not_cancelled():
    """i + 1 between the two: the real value is a + 8 * i - 8184, which the range must hold."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 3;\n\tmov.u32 %r9, dyn;\n\tshl.b32 %r3, %r2, 3;\n"
            "\tadd.s32 %r4, %r9, %r3;\n\tmad.lo.s32 %r6, %r2, 8184, %r4;\n\tadd.s32 %r2, %r2, 1;\n"
            "\tmad.lo.s32 %r7, %r2, -8184, %r6;\n")
    low, high = map(int, re.search(r"\[(-?\d+), (-?\d+)\]", value_at(body, "%r7")).groups())
    assert low <= -8184 and high >= 8 * 3 - 8184


def test_a_descriptor_unpacked_and_packed_again_in_a_loop_keeps_its_address():
    """FlashMLA's fp8 decode adds a K step to the low word of a wgmma descriptor and packs
    it with the high word again: a pack evaluated before its high word is known waits for
    it (an unknown part would make the descriptor top, and top never goes away)."""
    body = ("\tmov.u32 %r1, 0;\nLOOP:\n\tmov.u32 %r2, dyn;\n\tmad.lo.s32 %r3, %r1, 73728, %r2;\n\tshr.u32 %r4, %r3, 4;\n"
            "\tand.b32 %r5, %r4, 16383;\n\tcvt.u64.u32 %rd1, %r5;\n\tor.b64 %rd2, %rd1, 34363932672;\n"
            "\tmov.b64 {%r6, %r7}, %rd2;\n\tadd.s32 %r8, %r6, 128;\n\tmov.b64 %rd3, {%r8, %r7};\n// here\n"
            "\tadd.s32 %r9, %r1, 1;\n\tsetp.eq.s32 %p1, %r1, 1;\n\tselp.b32 %r1, 0, %r9, %p1;\n\tbra.uni LOOP;\n")
    assert value_at(body, "%rd3") == "dynamic shared+[2048, 75776] step 73728 (shared::cta window) >> 4 | 0x800400000"


def test_a_generic_address_xored_above_the_window_names_a_peer_ctas_bytes():
    """FlashMLA reaches the other CTA of a pair by XORing a generic shared address with
    1 << 24 and converting it back (docs/fence.md §8): the same bytes, in shared::cluster,
    where the XOR used to blur the offset by 32 MB inside the CTA's own memory."""
    body = ("\tmov.u32 %r1, dyn;\n\tcvt.u64.u32 %rd1, %r1;\n\tcvta.shared.u64 %rd2, %rd1;\n\tadd.s64 %rd3, %rd2, 4096;\n"
            "\txor.b64 %rd4, %rd3, 16777216;\n\tcvta.to.shared.u64 %rd5, %rd4;\n\tcvt.u32.u64 %r2, %rd5;\n")
    assert value_at(body, "%rd4") == "dynamic shared+4096 (shared::cluster generic)"
    assert value_at(body, "%r2") == "dynamic shared+4096 (shared::cluster window)"
    low = body.replace("16777216", "16")  # a swizzle's XOR stays in the CTA's own window
    assert value_at(low, "%rd4") == "dynamic shared+4112 (shared::cta generic)"


#: nvcc's rounded base selected again in a later block (FlashInfer's fmha_v2): the entry
#: block rounds the dynamic base up to 1024 once; a later block tests p & 1023 again and
#: selects p or the sum the entry block computed
ROUNDED_EARLIER = (
    "\tmov.u32 %r1, low;\n\tcvt.u64.u32 %rd1, %r1;\n\tcvta.shared.u64 %rd2, %rd1;\n\tand.b64 %rd3, %rd2, 1023;\n"
    "\tmov.u64 %rd9, 1024;\n\tsub.s64 %rd4, %rd9, %rd3;\n\tadd.s64 %rd5, %rd2, %rd4;\n\tsetp.eq.s64 %p1, %rd3, 0;\n"
    "\tselp.b64 %rd6, %rd2, %rd5, %p1;\n\tld.param.u32 %r2, [k_n];\n\tsetp.eq.s32 %p2, %r2, 0;\n\t@%p2 bra LATER;\n"
    "\tst.u32 [%rd6], %r2;\nLATER:\n")
TESTED_LATER = "\tsetp.eq.s64 %p3, %rd3, 0;\n\tselp.b64 %rd7, %rd2, %rd5, %p3;\n\tadd.s64 %rd8, %rd7, 163960;\n"
SUMMED_LATER = ("\tmov.u64 %rd10, 1024;\n\tsub.s64 %rd11, %rd10, %rd3;\n\tadd.s64 %rd12, %rd2, %rd11;\n"
                "\tselp.b64 %rd7, %rd2, %rd12, %p1;\n\tadd.s64 %rd8, %rd7, 163960;\n")


@pytest.mark.parametrize("later", [TESTED_LATER, SUMMED_LATER])
def test_a_base_rounded_up_in_an_earlier_block_keeps_offsets_exact(later):
    shown = value_at(ROUNDED_EARLIER + later, "%rd8", params=".param .u32 k_n", head=LOW_ALIGNED)
    assert shown == "dynamic shared aligned 1024+163960 (shared::cta generic)"
    # p set again on the way (a second definition): the later select is only a select
    moved = ROUNDED_EARLIER.replace("\tst.u32", "\tadd.s64 %rd2, %rd2, 16;\n\tst.u32") + later
    assert value_at(moved, "%rd8", params=".param .u32 k_n", head=LOW_ALIGNED).startswith("dynamic shared+[")
    # so is the remainder: the later block may read another one than the sum took away
    masked = ROUNDED_EARLIER.replace("\tst.u32", "\tand.b64 %rd3, %rd2, 511;\n\tst.u32") + later
    assert value_at(masked, "%rd8", params=".param .u32 k_n", head=LOW_ALIGNED).startswith("dynamic shared+[")


#: FlashInfer's fmha_v2 steps a wgmma descriptor round a ring of two 8 KB stages by
#: comparing it with the ring's end: lo += desc < end ? 512 : -512 (512 descriptor units
#: are 8192 bytes)
DESCRIPTOR_RING = (
    "\tmov.u32 %r1, dyn;\n\tld.param.u32 %r2, [k_n];\n\tshr.u32 %r3, %r1, 4;\n\tcvt.u64.u32 %rd1, %r3;\n"
    "\tor.b64 %rd2, %rd1, 4611686293305294848;\n\tadd.s64 %rd3, %rd2, 512;\n\tmov.u32 %r4, 0;\n"
    "LOOP:\n\t// here\n\tsetp.lt.u64 %p1, %rd2, %rd3;\n\tmov.b64 {%r5, %r6}, %rd2;\n\tselp.b32 %r7, 512, -512, %p1;\n"
    "\tadd.s32 %r8, %r7, %r5;\n\tmov.b64 %rd2, {%r8, %r6};\n\tadd.s32 %r4, %r4, 1;\n\tsetp.lt.u32 %p2, %r4, %r2;\n"
    "\t@%p2 bra LOOP;\n")


@pytest.mark.parametrize("body", [
    DESCRIPTOR_RING,
    # the end compared the other way round, and the descriptor packed from the stepped word
    DESCRIPTOR_RING.replace("\tsetp.lt.u64 %p1, %rd2, %rd3;\n\tmov.b64 {%r5, %r6}, %rd2;\n",
                            "\tmov.b64 {%r5, %r6}, %rd2;\n\tmov.b64 %rd4, {%r5, %r6};\n\tsetp.gt.u64 %p1, %rd3, %rd4;\n"),
    # packed in one block, tested and stepped in the next (each part set once)
    DESCRIPTOR_RING.replace("\tsetp.lt.u64 %p1, %rd2, %rd3;\n\tmov.b64 {%r5, %r6}, %rd2;\n",
                            "\tmov.b64 {%r5, %r6}, %rd2;\n\tmov.b64 %rd4, {%r5, %r6};\n\tsetp.eq.u32 %p3, %r2, 7;\n"
                            "\t@%p3 bra NEXT;\nNEXT:\n\tsetp.lt.u64 %p1, %rd4, %rd3;\n"),
])
def test_a_descriptor_stepped_round_a_ring_by_comparing_with_its_end(body):
    ring = "dynamic shared+[0, 8192] step 8192 (shared::cta window) >> 4 | 0x4000004000000000"
    assert value_at(body, "%rd2", params=".param .u32 k_n") == ring


@pytest.mark.parametrize("change", [
    ("selp.b32 %r7, 512, -512", "selp.b32 %r7, -512, 512"),  # below the end it steps down: no ring
    ("setp.lt.u64 %p1, %rd2, %rd3", "setp.lt.u64 %p1, %rd2, %rd9"),  # an end nothing bounds
])
def test_what_is_not_a_descriptor_ring(change):
    body = DESCRIPTOR_RING.replace(*change)
    assert value_at(body, "%rd2", params=".param .u32 k_n") != value_at(DESCRIPTOR_RING, "%rd2", params=".param .u32 k_n")


def test_an_address_stepped_below_its_region_settles():
    # widening takes an address going down to the region's start; one already below it
    # goes to minus infinity, or its bound would move back up each round and never settle
    body = ("\tmov.u32 %r1, dyn;\n\tld.param.u32 %r2, [k_n];\nLOOP:\n\t// here\n\tadd.s32 %r1, %r1, -8192;\n"
            "\tsetp.lt.u32 %p2, %r1, %r2;\n\t@%p2 bra LOOP;\n")
    assert value_at(body, "%r1", params=".param .u32 k_n").startswith("dynamic shared+[-")


def test_bits_of_an_address_moved_up_into_a_descriptor_field():
    # fmha_v2's base-offset field: (a << 42) & (7 << 49) is bits 7-9 of a at bit 49, none
    # set for a 1024-aligned stage; bits 4-6 of an address 16 bytes in are 1
    body = ("\tmov.u32 %r1, dyn;\n\tadd.s32 %r2, %r1, 98304;\n\tcvt.u64.u32 %rd1, %r2;\n\tshl.b64 %rd2, %rd1, 42;\n"
            "\tand.b64 %rd3, %rd2, 3940649673949184;\n\tadd.s32 %r3, %r1, 16;\n\tshl.b32 %r4, %r3, 1;\n"
            "\tand.b32 %r5, %r4, 224;\n")
    assert value_at(body, "%rd3") == "0"
    assert value_at(body, "%r5") == "32"


#: XQA (FlashInfer) builds a descriptor template from a null pointer and adds the start
#: field to its low word afterwards; its base-offset field (bits 49-51) depends on how
#: the dynamic base is aligned, which the PTX does not say
TEMPLATE = ("\tmov.u32 %r1, dyn;\n\tmov.u64 %rd1, 0;\n\tcvta.to.shared.u64 %rd2, %rd1;\n\tcvt.u32.u64 %r2, %rd2;\n"
            "\tand.b32 %r3, %r2, 262128;\n\tshr.u32 %r4, %r3, 4;\n\tcvt.u64.u32 %rd3, %r4;\n"
            "\tor.b64 %rd4, %rd3, 4611686293305294848;\n\tmov.b64 {%r5, %r6}, %rd4;\n\tshr.u32 %r7, %r1, 4;\n"
            "\tadd.s32 %r8, %r7, %r5;\n\tmov.b64 %rd5, {%r8, %r6};\n")


def test_a_descriptor_from_a_null_template():
    # the shared window starts at a multiple of 2^18 (docs/fence.md §8): a null pointer
    # made a window address has no bit below 2^18, so the template's start field is 0
    assert value_at(TEMPLATE, "%rd3") == "0"
    assert value_at(TEMPLATE, "%rd5") == "dynamic shared+0 (shared::cta window) >> 4 | 0x4000004000000000"
    # a base-offset field of any of eight values: one descriptor per value, each at dyn+0
    field = TEMPLATE.replace("\tor.b64 %rd4, %rd3,", "\tld.param.u32 %r9, [k_n];\n\tand.b32 %r10, %r9, 7;\n"
                             "\tcvt.u64.u32 %rd6, %r10;\n\tshl.b64 %rd7, %rd6, 49;\n\tor.b64 %rd8, %rd7, %rd3;\n"
                             "\tor.b64 %rd4, %rd8,")
    shown = value_at(field, "%rd5", params=".param .u32 k_n").split(" or ")
    assert len(shown) == 8 and all(s.startswith("dynamic shared+0 (shared::cta window) >> 4 | 0x40") for s in shown)
    assert "dynamic shared+0 (shared::cta window) >> 4 | 0x400e004000000000" in shown


def test_a_start_field_rounded_down_to_a_swizzle_atom():
    # TensorRT-LLM: ((base + stage) >> 4) & 0x3FC0 rounds the start down to 1024 bytes
    # within the 14-bit field; a stage ring of 8 KB stays one
    body = ("\tmov.u32 %r1, dyn;\n\tld.param.u32 %r2, [k_n];\n\tand.b32 %r3, %r2, 1;\n\tshl.b32 %r4, %r3, 13;\n"
            "\tadd.s32 %r5, %r1, %r4;\n\tadd.s32 %r6, %r5, 160;\n\tshr.u32 %r7, %r6, 4;\n\tand.b32 %r8, %r7, 16320;\n")
    assert value_at(body, "%r8", params=".param .u32 k_n") == "dynamic shared+[0, 8192] step 8192 (shared::cta window) >> 4"


def test_a_small_number_ored_below_a_negative_ones_zero_bits():
    # TensorRT-LLM's epilogue: (tid bits) | (w << 6) with w in [-1, 0] is their sum
    body = ("\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 63;\n\tshr.u32 %r3, %r1, 7;\n\tadd.s32 %r3, %r3, -1;\n"
            "\tshl.b32 %r4, %r3, 6;\n\tor.b32 %r5, %r2, %r4;\n")
    assert value_at(body, "%r4", directives=".maxntid 256, 1, 1") == "[-64, 0] step 64"
    assert value_at(body, "%r5", directives=".maxntid 256, 1, 1") == "[-64, 63]"


def test_registers_named_by_numbers_and_a_register_plus_a_constant():
    # ptxas takes %1 as a register name and %r1+16 as an operand: the register's value plus 16
    body = ("\t.reg .b32 %7, %93;\n\tmov.u32 %7, dyn;\n\tadd.s32 %93, %7+32, 16;\n"
            "\tmov.u32 %r1, %93+-8;\n\tadd.s32 %r2, %r1 + 0x10, %93+1;\n")
    assert value_at(body, "%93") == "dynamic shared+48 (shared::cta window)"
    assert value_at(body, "%r1") == "dynamic shared+40 (shared::cta window)"
    assert value_at(body, "%93+4") == "dynamic shared+52 (shared::cta window)"
    assert value_at(body, "%r2") == "top"  # two addresses added


REG_RESULT = (".func (.reg .b32 f_out) f(.reg .b32 f_in)\n{\n\tadd.s32 f_out, f_in, 64;\n\tret;\n}\n")


@pytest.mark.parametrize("inline", [False, True])
def test_a_call_writes_the_registers_its_results_name(inline):
    # `call (%r2), f, (%r1)` with .reg parameters: %r2 is f's result, not what it held before
    body = "\tmov.u32 %r1, dyn;\n\tmov.u32 %r2, 0;\n\tcall.uni (%r2), f, (%r1);\n"
    assert value_at(body, "%r2", extra=REG_RESULT, inline=inline) == "top"


def test_numbers_fold_to_what_the_instruction_computes():
    # every operand one number: the evaluator's result (ptxkit.isa_eval), not an interval or top
    body = ("\tmov.u32 %r1, 100;\n\tmul.hi.u32 %r2, %r1, -1431655765;\n\tnot.b32 %r3, %r1;\n\tpopc.b32 %r4, %r1;\n"
            "\tbfe.s32 %r5, %r1, 2, 3;\n\tdiv.s32 %r6, -7, 2;\n\tsub.u32 %r7, 0, 16;\n\tdiv.u32 %r8, %r1, 0;\n")
    assert [value_at(body, f"%r{i}") for i in range(2, 8)] == ["66", "4294967195", "3", "1", "-3", "-16"]
    assert value_at(body, "%r8") == "top"  # a division by zero is unspecified


def test_the_high_half_of_a_product_and_a_wide_addend():
    # mul.hi is the product shifted down by the width; mad.wide adds a 64-bit number as it is
    body = ("\tmov.u32 %r1, %tid.x;\n\tmul.hi.u32 %r2, %r1, -1431655765;\n\tmov.u64 %rd1, 4294967296;\n"
            "\tmad.wide.s32 %rd2, %r1, 4, %rd1;\n\tmad.hi.u32 %r3, %r1, 65536, 7;\n")
    assert value_at(body, "%r2") == "[0, 682]"
    assert value_at(body, "%rd2") == "[4294967296, 4294971388] step 4"
    assert value_at(body, "%r3") == "7"


def test_counts_and_lane_masks_keep_to_what_the_isa_allows():
    body = "\tmov.u32 %r1, %tid.x;\n\tbfind.u32 %r2, %r1;\n\tpopc.b32 %r3, %r1;\n\tactivemask.b32 %r4;\n"
    assert value_at(body, "%r2") == "[0, 4294967295]"  # 0xffffffff when no bit is set
    assert value_at(body, "%r3") == "[0, 64]"
    assert value_at(body, "%r4") == "[0, 4294967295]"


#: Twelve registers that a loop advances, summed into a shared-memory address: twelve
#: joins at the loop's head, which a set of register names used to order
_JOINS_BY_SEED = r"""
import ptxkit
from ptxkit.cfg.flow.graph import flow_graph
from ptxkit.cfg.values import registers
n = range(1, 13)
text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n.reg .b32 %r<41>;\n"
        ".reg .pred %p<2>;\n" + "".join(f"mov.u32 %r{i}, {i};\n" for i in n) + "L:\n"
        + "".join(f"add.u32 %r{i}, %r{i}, {i};\n" for i in n) + "setp.lt.u32 %p1, %r1, 10;\n@%p1 bra L;\n"
        + "mov.u32 %r40, 0;\n" + "".join(f"add.u32 %r40, %r40, %r{i};\n" for i in n)
        + "st.shared.u32 [%r40], 0;\nret;\n}\n")
flow = flow_graph(ptxkit.parse(text).function("k"))
block = flow.blocks[-1]
position = next(p for p, i in enumerate(block.instructions) if i.opcode.startswith("st"))
analysis = registers._Analysis(flow, 8, None)
analysis.solve({"address": (block.index, position, block.instructions[position].operands[0])})
print(list(analysis.values.items()))
"""


def test_the_analysis_solves_in_one_order_whatever_the_hash_seed():
    """The joins are solved in the same order in every process: the order a set of
    register names iterates in changes with PYTHONHASHSEED, and where values widen
    depends on the order (on DeepGEMM's -G build, 3 hash seeds gave 3 different sets
    of values; the reports happened to agree)."""
    runs = {subprocess.run([sys.executable, "-c", _JOINS_BY_SEED], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in range(4)}
    assert len(runs) == 1 and "@join" in runs.pop()


def test_where_a_block_writes_a_register_counts_only_instructions_with_a_destination():
    text = (f"{HEAD}.visible .entry k()\n{{\n{REGS}.reg .b32 n;\n\tmov.u32 %r1, 1;\n\tst.shared.u32 [%r1], %r2;\n"
            "\tbar.sync %r1;\n\tld.shared.v2.u32 {%r3, %r2}, [%r1];\n\tsetp.lt.u32 %p1|%p2, %r2, 4;\n"
            "\tmov.u32 n, %r3;\n\t@%p1 mov.u32 %r1, 2;\n\tret;\n}\n")
    flow = flow_graph(ptxkit.parse(text).function("k"))
    analysis = registers._Analysis(flow)
    assert [analysis.last_definition(0, 7, name) for name in ("%r1", "%r2", "%r3", "%p2", "n", "%r9")] == \
        [6, 3, 3, 4, 5, None]
    assert analysis.last_definition(0, 6, "%r1") == 0  # not the store's address, nor the barrier's count
    assert analysis.redefined(0, 1, 7, "%r1") and not analysis.redefined(0, 1, 6, "%r1")
    assert not analysis.redefined(0, 4, 4, "%p1") and analysis.redefined(0, 4, 5, "%p1")


def test_an_analysis_keeps_the_remainders_and_quotients_it_finds_each_under_its_own_site():
    """`remainder_at` and `quotient_at` answer what the idioms find (found once: asked
    again, the same object); two sites, or two registers read at one, share no answer."""
    text = f"{HEAD}.visible .entry k(.param .u32 n)\n{{\n{REGS}{SCALED}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text).function("k"))
    analysis = registers._Analysis(flow)
    loop = flow.blocks[1]
    for position in range(len(loop.instructions)):
        found = analysis.remainder_at(1, position)
        assert found == remainder(loop.instructions, loop.heads, position, frozenset())
        assert analysis.remainder_at(1, position) is found
    first, second = analysis.remainder_at(1, 3), analysis.remainder_at(1, 5)  # 8 * (i % 3), 32768 * (i % 3)
    assert (first.x, first.scale, second.x, second.scale) == ("%r9", 8, "%r8", 32768)
    quotient = analysis.quotient_at(1, 2, "%r3")  # i / 3
    assert quotient[0] == "%r10" and quotient[1](3) and not quotient[1](5)
    assert analysis.quotient_at(1, 2, "%r3") is quotient
    assert analysis.quotient_at(1, 2, "%r1") is None  # n: read, not computed in the block


@pytest.mark.parametrize("path", sorted((ROOT / "samples" / "fence").glob("*.ptx")), ids=lambda p: p.name)
def test_where_a_block_last_writes_a_register_is_what_a_scan_of_its_instructions_finds(path):
    """The analysis answers from its definitions by block (bisection) what scanning the
    block backwards for an instruction whose destinations name the register finds, in
    the inlined graphs of every sample (callees' blocks included)."""
    module = ptxkit.parse(path.read_text(), path.name)
    for function in module.functions:
        if function.is_declaration:
            continue
        flow = inlined_graph(function)
        analysis = registers._Analysis(flow)
        for block in flow.blocks:
            plain = analysis.plain(block.index)
            written = [[] if head[2] in NO_DESTINATION else destinations(instruction, head, plain)
                       for instruction, head in zip(block.instructions, block.heads)]
            for name in {name for names in written for name in names} | {"%r1", "%unwritten"}:
                last = None
                for position in range(len(block.instructions) + 1):
                    assert analysis.last_definition(block.index, position, name) == last, (path.name, name)
                    assert analysis.redefined(block.index, 0, position, name) == (last is not None)
                    if position < len(written) and name in written[position]:
                        last = position


@pytest.mark.pure
def test_a_solution_keeps_every_attribute_a_solved_analysis_has():
    """`_Analysis.solution` names what it keeps (a class mypyc compiles has no ``__dict__``):
    the names are every attribute the analysis has once it has solved, and `restore` puts
    back each value the solution kept, not a copy."""
    m = ptxkit.parse(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n"
                     ".reg .b32 %r<3>;\n.reg .pred %p<2>;\n\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 4096;\n"
                     "\t@%p1 bra L;\n\tmov.u32 %r2, %r1;\nL:\n\tret;\n}\n")
    flow = flow_graph(m.function("k"))
    analysis = registers._Analysis(flow)
    read = flow.blocks[1].instructions[0].operands[1]  # mov.u32 %r2, %r1 reads %r1
    analysis.solve({"r": (1, 0, read)})
    assert set(vars(analysis)) == set(registers._Analysis._STATE)
    kept = analysis.solution()
    analysis.solve({"s": (1, 0, read)})
    assert analysis.values is not kept["values"]
    analysis.restore(kept)
    assert all(getattr(analysis, name) is value for name, value in kept.items())


def test_a_debug_kernel_that_exits_first_is_analysed():
    """A -G kernel whose first statement is ``exit``: every definition is dead, the
    fixpoint runs no rule, and the stack rounds still keep the solution (found by the
    fence fuzz test: the analysis raised AttributeError)."""
    from ptxkit.cfg.fence.fence import fence_module

    sample = pathlib.Path(__file__).parent.parent / "samples" / "fence" / "h21a_debug_descriptor_from_template.ptx"
    text = sample.read_text()
    exited = text.replace("{\n", "{\n\texit;\n", 1)
    assert exited != text
    report = fence_module(ptxkit.parse(exited, "h21a.ptx"), rewrite=False)
    assert report.fences == [] and report.missing == []


def test_a_16_bit_remainder_bounds_a_stage_offset():
    """TileLang's stage index ``k % 3`` computed in 16 bits (``mul.wide.u16`` by the magic
    number, ``sub.s16``): the offset ``4096 * (k % 3)`` stays within three stages (it
    was any 16-bit multiple of 4096, and a TileLang GEMM got two false WAR reports)."""
    body = ("\tmov.u32 %r1, %tid.x;\n\tcvt.u16.u32 %rs1, %r1;\n\tand.b16 %rs2, %rs1, 255;\n"
            "\tmul.wide.u16 %r2, %rs2, -21845;\n\tshr.u32 %r3, %r2, 17;\n\tcvt.u16.u32 %rs3, %r3;\n"
            "\tmul.lo.s16 %rs4, %rs3, 3;\n\tsub.s16 %rs5, %rs2, %rs4;\n\tmul.wide.u16 %r4, %rs5, 4096;\n"
            "\tmov.u32 %r5, %r4;\n")
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n.reg .b32 %r<8>;\n"
            f".reg .b16 %rs<8>;\n{body}\tret;\n}}\n")
    flow = flow_graph(ptxkit.parse(text).function("k"))
    block = flow.blocks[0]
    position = len(block.instructions) - 2  # the mov reading the offset
    assert show(register_values(flow, {"q": (0, position, block.instructions[position].operands[1])})["q"]) == \
        "[0, 8192] step 4096"



def test_a_value_pinned_where_a_join_held_a_number():
    """`pinned`: the address of a ring's stage for the number its index held on entry to
    the loop head (docs/fence.md §3.7), the fixpoint's value for all trips unchanged."""
    body = ("\tmov.u32 %r1, dyn;\n\tmov.u32 %r10, 2;\nL:\n\tadd.s32 %r12, %r10, 1;\n\tsetp.gt.s32 %p1, %r12, 2;\n"
            "\tselp.b32 %r10, 0, %r12, %p1;\n\tshl.b32 %r13, %r10, 12;\n\tadd.s32 %r14, %r1, %r13;\n"
            "\tst.shared.u32 [%r14], 0;\n\t@%p2 bra L;\n")
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}{body}\tret;\n}}\n"
    flow = flow_graph(ptxkit.parse(text, "k.ptx").function("k"))
    block = next(b for b in flow.blocks if any(i.text.startswith("st.shared") for i in b.instructions))
    position = next(p for p, i in enumerate(block.instructions) if i.text.startswith("st.shared"))
    answers = analyse_registers(flow, {"q": (block.index, position, block.instructions[position].operands[0])})
    assert show(answers.values["q"]) == "dynamic shared+[0, 8192] step 4096 (shared::cta window)"
    assert answers.joins_read("q") == {("%r10", block.index)}
    # index 0 on entry: the trip reads stage 1; 2 wraps round to stage 0
    assert show(answers.pinned("q", {("%r10", block.index): 0})) == "dynamic shared+4096 (shared::cta window)"
    assert show(answers.pinned("q", {("%r10", block.index): 2})) == "dynamic shared+0 (shared::cta window)"
    assert answers.pinned("q", {("%r10", block.index): 7}) is None  # not a number the fixpoint holds there
    assert answers.pinned("q", {("%r10", 0): 1}) is None  # no join the query reads
    assert show(answers.values["q"]) == "dynamic shared+[0, 8192] step 4096 (shared::cta window)"
