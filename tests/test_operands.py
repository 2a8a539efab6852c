"""Which registers an instruction writes and reads (`ptxkit.cfg.flow.operands`)."""

from __future__ import annotations

import pathlib

import ptxkit
from ptxkit import parse_statement
from ptxkit.cfg.flow.operands import destinations, operand_reads, operand_targets, type_width, written_and_read
from ptxkit.instruction import head_of
from ptxkit.isa import is_special_register


def test_written_and_read_from_the_text_agree_with_the_parsed_operands():
    # every instruction of the repository's PTX samples: the text scan names what the
    # parsed operands name (a special register by its name before the dot)
    plain = frozenset({"P1", "x1f"})  # registers declared without '%' (inline assembly)
    checked = 0
    for path in sorted(pathlib.Path(__file__).parent.parent.glob("samples/*/*.ptx")):
        for function in ptxkit.parse(path.read_text()).functions:
            for node in function.instructions() if not function.is_declaration else ():
                found = written_and_read(node, head_of(node), plain)
                if found is None or any(is_special_register(name) for name in found[0]):
                    continue  # the parser takes a register named like %pm1 for the special one
                operands = node.operands
                parsed_written = operand_targets(operands[0], plain) if operands else []
                parsed_read = [name.split(".")[0] for operand in operands[1:]
                               for name in operand_reads(operand, plain)]
                assert found == (parsed_written, parsed_read), node.text
                checked += 1
    for text in ("mad.lo.s32 %r1, %r2, 0x1f, %r3;", "selp.b32 x1f, P1, 0f3F800000, %p1;",
                 "shfl.sync.bfly.b32 %r1|%p1, %r2, 1, 31, -1;", "mov.u32 %r1, %tid.x;",
                 "tex.2d.v4.f32.f32 {%f1, %f2, %f3, %f4}, [tex0, {%f5, %f6}];"):
        node = parse_statement(text)
        operands = node.operands
        assert written_and_read(node, head_of(node), plain) == (
            operand_targets(operands[0], plain), [n.split(".")[0] for o in operands[1:]
                                               for n in operand_reads(o, plain)]), text
    assert checked > 5000


def test_a_call_writes_only_the_registers_its_results_name():
    plain = frozenset({"out"})
    for text, written in (("call.uni (%r2), f, (%r1);", ["%r2"]), ("call (%1, out), f, (%2);", ["%1", "out"]),
                          ("call (retval0), f, (param0);", []), ("call %rd1, (%r1), prototype;", []),
                          ("call.uni f, (%r1);", [])):
        node = parse_statement(text)
        assert destinations(node, head_of(node), plain) == written, text
        assert written_and_read(node, head_of(node), plain) is None


def test_a_register_plus_a_constant_reads_the_register():
    node = parse_statement("add.u32 %1, %2+1, %r3 + -1;")
    assert [operand_reads(operand, frozenset()) for operand in node.operands] == [["%1"], ["%2"], ["%r3"]]
    assert written_and_read(node, head_of(node), frozenset()) == (["%1"], ["%2", "%r3"])


def test_the_width_is_the_last_type_named():
    assert type_width(["wide", "s32"]) == 32 and type_width(["shared", "b128"]) == 128
    assert type_width(["rn", "f16", "f32"]) == 32  # cvt: the source's type comes last
