"""ptxkit.cfg.values.escape: where a generic address of shared memory may flow."""

from __future__ import annotations

import ptxkit
from ptxkit.cfg.flow.graph import flow_graph
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.values.escape import shared_pointer_registers

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n.shared .align 8 .b8 smem[64];\n"
REGS = ".reg .b32 %r<8>;\n.reg .b64 %rd<16>;\n"


def tainted(body: str, params: str = ".param .u64 k_p", extra: str = "", inline: bool = False) -> list[str]:
    function = ptxkit.parse(f"{HEAD}{extra}.visible .entry k({params})\n{{\n{REGS}{body}\tret;\n}}\n").function("k")
    flow = inlined_graph(function) if inline else flow_graph(function)
    return sorted(shared_pointer_registers(flow))


def test_sources_and_arithmetic():
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd2, %rd1;\n\tand.b64 %rd3, %rd2, -16;\n"
            "\tmov.u32 %r1, smem;\n\tmapa.u32 %r2, %r1, 1;\n\tmapa.shared::cluster.u32 %r3, %r1, 1;\n"
            "\tcvta.to.shared.u64 %rd4, %rd2;\n")
    # window addresses (mov of a symbol, mapa.shared::cluster, cvta.to, even of a generic
    # shared address) are not generic ones
    assert tainted(body) == ["%r2", "%rd2", "%rd3"]


def test_loads_are_tainted_only_once_such_an_address_is_stored():
    body = "\tld.param.u64 %rd1, [k_p];\n\tld.global.u64 %rd2, [%rd1];\n\tld.u64 %rd3, [%rd2];\n"
    assert tainted(body) == []
    stored = body + "\tmov.u64 %rd4, smem;\n\tcvta.shared.u64 %rd5, %rd4;\n\tst.global.u64 [%rd1], %rd5;\n"
    assert tainted(stored) == ["%rd2", "%rd3", "%rd5"]
    atom = body + "\tmov.u64 %rd4, smem;\n\tcvta.shared.u64 %rd5, %rd4;\n\tatom.global.exch.b64 %rd6, [%rd1], %rd5;\n"
    assert "%rd6" in tainted(atom) and "%rd2" in tainted(atom)


def test_parameters():
    assert tainted("\tld.param.u64 %rd1, [k_s];\n", params=".param .u64 .ptr .shared .align 8 k_s") == ["%rd1"]
    assert tainted("\tld.param.u64 %rd1, [k_p];\n") == []
    extra = (".func f(.param .b64 f_p)\n{\n.reg .b64 %rd<4>;\n\tld.param.b64 %rd1, [f_p];\n\tld.u32 %r0, [%rd1];\n"
             "\tret;\n}\n").replace("%r0", "%rd2")
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd2, %rd1;\n\t{\n\t.param .b64 param0;\n"
            "\tst.param.b64 [param0], %rd2;\n\tcall.uni f, (param0);\n\t}\n")
    assert "1:%rd1" in tainted(body, extra=extra, inline=True)  # the callee's copy of its parameter


def test_the_debug_stack_keeps_spilled_pointers_apart():
    spill = ("\tmov.u64 %SPL, __local_depot0;\n\tcvta.local.u64 %SP, %SPL;\n\tmov.u64 %rd1, smem;\n"
             "\tcvta.shared.u64 %rd2, %rd1;\n\tst.u64 [%SP+8], %rd2;\n\tadd.u64 %rd3, %SP, 32;\n"
             "\tst.u64 [%SP+16], %rd3;\n\tld.u64 %rd4, [%SP+16];\n\tld.u64 %rd5, [%SP+8];\n\tld.u32 %r1, [%SP+12];\n")
    regs = ".local .align 8 .b8 __local_depot0[64];\n.reg .b64 %SP;\n.reg .b64 %SPL;\n"
    # the shared pointer went to bytes 8-15: their loads may hold it, the other slot's may not
    assert tainted(regs + spill) == ["%r1", "%rd2", "%rd5"]
    # a shared pointer stored through an unknown address may land in any slot
    unknown = spill + "\tld.param.u64 %rd6, [k_p];\n\tst.u64 [%rd6], %rd2;\n"
    assert "%rd4" in tainted(regs + unknown)


def test_the_stack_pointer_and_its_local_window_name_one_frame():
    regs = ".local .align 8 .b8 __local_depot0[64];\n.reg .b64 %SP;\n.reg .b64 %SPL;\n"
    body = ("\tmov.u64 %SPL, __local_depot0;\n\tcvta.local.u64 %SP, %SPL;\n\tmov.u64 %rd1, smem;\n"
            "\tcvta.shared.u64 %rd2, %rd1;\n\tst.local.u64 [%SPL+8], %rd2;\n\tld.u64 %rd3, [%SP+8];\n"
            "\tld.u64 %rd4, [%SP+16];\n")
    # bytes 8-15 of the frame, written through the window and read through the generic pointer
    assert tainted(regs + body) == ["%rd2", "%rd3"]


def test_arguments_go_to_the_call_they_are_passed_to():
    """Two calls in one caller both name their argument ``param0``: the shared pointer
    passed to f does not taint g's parameter."""
    extra = (".func f(.param .b64 f_p)\n{\n.reg .b64 %rd<4>;\n\tld.param.b64 %rd1, [f_p];\n\tret;\n}\n"
             ".func g(.param .b64 g_p)\n{\n.reg .b64 %rd<4>;\n\tld.param.b64 %rd1, [g_p];\n\tret;\n}\n")
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd2, %rd1;\n\t{\n\t.param .b64 param0;\n"
            "\tst.param.b64 [param0], %rd2;\n\tcall.uni f, (param0);\n\t}\n\tld.param.u64 %rd3, [k_p];\n"
            "\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd3;\n\tcall.uni g, (param0);\n\t}\n")
    found = tainted(body, extra=extra, inline=True)
    assert "1:%rd1" in found and "2:%rd1" not in found


def test_pointers_to_the_debug_stack_are_stack_slots():
    """``add %rd, %SP, 32`` names bytes 32.. of the stack, passed on by value or to a
    callee (a lambda's captures): a store through it fills that slot only."""
    regs = ".local .align 8 .b8 __local_depot0[64];\n.reg .b64 %SP;\n.reg .b64 %SPL;\n"
    start = ("\tmov.u64 %SPL, __local_depot0;\n\tcvta.local.u64 %SP, %SPL;\n\tmov.u64 %rd1, smem;\n"
             "\tcvta.shared.u64 %rd2, %rd1;\n\tadd.u64 %rd3, %SP, 32;\n\tmov.u64 %rd6, %rd3;\n")
    loads = "\tld.u64 %rd4, [%SP+16];\n\tld.u64 %rd5, [%SP+40];\n"
    assert tainted(regs + start + "\tst.u64 [%rd6+8], %rd2;\n" + loads) == ["%rd2", "%rd5"]
    extra = (".func f(.param .b64 f_p, .param .b64 f_v)\n{\n.reg .b64 %rd<4>;\n\tld.param.b64 %rd1, [f_p];\n"
             "\tld.param.b64 %rd2, [f_v];\n\tst.u64 [%rd1+8], %rd2;\n\tret;\n}\n")
    call = ("\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd3;\n\t.param .b64 param1;\n"
            "\tst.param.b64 [param1], %rd2;\n\tcall.uni f, (param0, param1);\n\t}\n")
    found = tainted(regs + start + call + loads, extra=extra, inline=True)
    assert "%rd5" in found and "%rd4" not in found


def test_what_a_call_that_stays_a_call_returns_may_be_what_it_was_given():
    """An extern function handed a shared pointer may hand it back."""
    extra = ".extern .func (.param .b64 r) pass_through(.param .b64 p);\n"
    body = ("\tmov.u64 %rd1, smem;\n\tcvta.shared.u64 %rd2, %rd1;\n\t{\n\t.param .b64 param0;\n"
            "\tst.param.b64 [param0], %rd2;\n\t.param .b64 retval0;\n\tcall.uni (retval0), pass_through, (param0);\n"
            "\tld.param.b64 %rd3, [retval0];\n\t}\n")
    assert "%rd3" in tainted(body, extra=extra, inline=True)
    assert "%rd3" not in tainted(body.replace("%rd2;", "%rd1;").replace("cvta.shared.u64 %rd2, %rd1", "mov.u64 %rd2, 0"),
                                 extra=extra, inline=True)
