"""ptxkit.cfg.provenance: where generic pointers may point."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.graph import flow_graph
from ptxkit.cfg.provenance import (
    GENERIC_CLUSTER, GENERIC_CTA, GENERIC_GLOBAL, NOT_POINTER, OTHER, UNKNOWN, WINDOW_CLUSTER, WINDOW_CTA,
    address_spaces, describe, pointer_provenance, shared_spaces,
)

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n.global .align 4 .b32 gvar[4];\n"


def provenance(body: str, *names: str, params: str = ".param .u64 k_p, .param .u64 .ptr .shared .align 4 k_s, "
               ".param .u32 k_n", kind: str = "entry") -> int:
    """The provenance of `names` just before the instruction that a ``// here`` comment
    follows, or else before the final ``ret``."""
    text = (f"{HEAD}.visible .{kind} k({params})\n{{\n.reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n"
            f".shared .align 8 .b8 smem[256];\n{body}\tret;\n}}\n")
    flow = flow_graph(ptxkit.parse(text, "k.ptx").function("k"))
    points = [(block.index, position) for block in flow.blocks for position, _ in enumerate(block.instructions)]
    marked = [(b, p - 1) for b, p in points if p and "// here" in flow.blocks[b].instructions[p].prefix]
    block, position = (marked or points[-1:])[0]
    return pointer_provenance(flow, {"q": (block, position, list(names))})["q"]


at_ret = provenance


def test_shared_symbol_through_cvta_and_offsets():
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd2, %rd1;\n\tmul.wide.u32 %rd3, %r1, 4;\n"
            "\tadd.s64 %rd4, %rd2, %rd3;\n\tadd.s64 %rd5, %rd4, 16;\n")
    assert at_ret(body, "%rd1") == WINDOW_CTA
    assert at_ret(body, "%rd3") == NOT_POINTER
    assert at_ret(body, "%rd5") == GENERIC_CTA


def test_cvta_and_mapa_forms():
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.to.shared.u64 %rd2, %rd1;\n\tcvta.shared::cluster.u64 %rd3, %rd1;\n"
            "\tmapa.u64 %rd4, %rd3, 1;\n\tmapa.shared::cluster.u32 %r2, %r1, 1;\n\tcvta.global.u64 %rd5, %rd1;\n")
    assert [at_ret(body, r) for r in ("%rd2", "%rd3", "%rd4", "%r2", "%rd5")] == [
        WINDOW_CTA, GENERIC_CLUSTER, GENERIC_CLUSTER, WINDOW_CLUSTER, GENERIC_GLOBAL]


def test_parameters():
    body = "\tld.param.u64 %rd1, [k_p];\n\tld.param.u64 %rd2, [k_s];\n\tld.param.u32 %r1, [k_n];\n"
    assert [at_ret(body, r) for r in ("%rd1", "%rd2", "%r1")] == [GENERIC_GLOBAL, GENERIC_CTA, NOT_POINTER]
    func = at_ret("\tld.param.u64 %rd1, [k_p];\n", "%rd1", params=".param .u64 k_p", kind="func")
    assert func == UNKNOWN  # a .func parameter may hold any pointer


def test_loads_bit_operations_and_pointer_sums_are_unknown():
    body = ("\tld.param.u64 %rd1, [k_p];\n\tld.global.u64 %rd2, [%rd1];\n\tand.b64 %rd3, %rd1, -16;\n"
            "\tmov.u64 %rd4, smem;\n\tcvta.shared.u64 %rd5, %rd4;\n\tadd.s64 %rd6, %rd5, %rd1;\n"
            "\tsub.s64 %rd7, %rd5, 8;\n")
    assert [at_ret(body, r) for r in ("%rd2", "%rd3", "%rd6", "%rd7")] == [UNKNOWN, UNKNOWN, UNKNOWN, GENERIC_CTA]


def test_paths_join_and_selp_unions():
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd2, %rd1;\n\tld.param.u64 %rd3, [k_p];\n"
            "\tsetp.eq.u32 %p1, %r1, 0;\n\tselp.b64 %rd4, %rd2, %rd3, %p1;\n"
            "\tmov.u64 %rd5, %rd2;\n\t@%p1 bra J;\n\tmov.u64 %rd5, %rd3;\nJ:\n")
    assert at_ret(body, "%rd4") == GENERIC_CTA | GENERIC_GLOBAL
    assert at_ret(body, "%rd5") == GENERIC_CTA | GENERIC_GLOBAL


def test_loop_carried_increments_keep_the_space():
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd2, %rd1;\nL:\n\tadd.s64 %rd2, %rd2, 4;\n"
            "\tsetp.lt.u64 %p1, %rd2, 64;\n\t@%p1 bra L;\n")
    assert at_ret(body, "%rd2") == GENERIC_CTA


def test_the_state_before_the_instruction():
    body = "\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd1, %rd1; // here\n\tmov.u64 %rd9, 0;\n"
    assert provenance(body, "%rd1") == WINDOW_CTA  # just before the cvta: still the window address


def test_call_arguments_and_symbols():
    body = ("\tmov.u32 %r1, smem;\n\t{\n\t.param .b32 param0;\n\tst.param.b32 [param0], %r1;\n"
            "\tcall.uni f, (param0); // here\n\t}\n")
    assert provenance(body, "param:param0") == WINDOW_CTA
    assert at_ret("", "symbol:smem") == GENERIC_CTA and at_ret("", "symbol:gvar") == GENERIC_GLOBAL
    assert at_ret("", "%rd9") == 0  # never written


@pytest.mark.parametrize("mask, spaces, certain", [
    (GENERIC_CTA, ("shared::cta",), True),
    (GENERIC_CTA | GENERIC_GLOBAL, ("shared::cta", "global"), False),
    (GENERIC_CLUSTER, ("shared::cluster",), True),
    (OTHER, (), True),
    (0, ("shared::cta", "shared::cluster", "global"), False),
    (NOT_POINTER, ("shared::cta", "shared::cluster", "global"), False),
    (WINDOW_CTA, ("shared::cta", "shared::cluster", "global"), False),  # a window address is not generic
])
def test_address_spaces(mask, spaces, certain):
    assert address_spaces(mask) == (spaces, certain)


def test_shared_spaces_and_describe():
    assert shared_spaces(WINDOW_CTA | GENERIC_CLUSTER) == ("shared::cta", "shared::cluster")
    assert shared_spaces(GENERIC_GLOBAL | UNKNOWN) == ()
    assert describe(0) == "undefined" and describe(UNKNOWN) == "unknown"
