"""The structured view of instructions: guard, opcode, modifiers, operands."""

from __future__ import annotations

import math

import pytest

import ptxkit
from ptxkit.instruction import Guard, instruction_head, parse_number


def view(text: str):
    return ptxkit.parse_statement(text)


def kinds(inst) -> list[str]:
    return [op.kind for op in inst.operands]


def test_guard_and_opcode_split():
    inst = view("@!%p3 cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                "[%r1], [%rd2, {%r3, %r4}], [%r5];")
    assert inst.guard == Guard("%p3", True) and str(inst.guard) == "@!%p3"
    assert inst.base == "cp"
    assert inst.modifiers == ("async", "bulk", "tensor", "2d", "shared::cluster", "global", "tile",
                              "mbarrier::complete_tx::bytes")
    assert inst.state_space == "shared::cluster"
    assert inst.view.state_spaces == ("shared::cluster", "global")
    tensor = inst.operands[1]
    assert tensor.kind == "memory" and tensor.name == "%rd2"
    assert [e.kind for e in tensor.elements] == ["register", "vector"]
    assert tensor.registers == ("%rd2", "%r3", "%r4")


def test_inline_asm_guards_and_unguarded():
    assert view("@P1 bra DONE;").guard == Guard("P1", False)
    assert view("ret;").guard is None and view("ret;").operands == ()


@pytest.mark.parametrize(
    "text, expected",
    [
        ("mov.u32 %r1, 42;", 42),
        ("mov.u32 %r1, 0x2A;", 42),
        ("mov.u32 %r1, 052;", 42),
        ("mov.u32 %r1, 0b101010;", 42),
        ("mov.s32 %r1, -42;", -42),
        ("mov.u32 %r1, 4294967295U;", 4294967295),
        ("mov.f32 %f1, 0f3F800000;", 1.0),
        ("mov.f32 %f1, 0fBF000000;", -0.5),
        ("mov.f64 %fd1, 0d400921FB54442D18;", math.pi),
        ("mov.f32 %f1, 1.5e1;", 15.0),
        ("mov.u32 %r1, 0;", 0),
    ],
)
def test_immediates(text, expected):
    operand = view(text).operands[1]
    assert operand.kind == "immediate" and operand.value == expected


def test_float_infinities_and_nan_bit_patterns():
    assert parse_number("0f7F800000") == math.inf
    assert math.isnan(parse_number("0f7FC00000"))


@pytest.mark.parametrize(
    "text, expected_kinds",
    [
        ("mov.u32 %r1, %tid.x;", ["register", "special"]),
        ("mov.u32 %r1, %cluster_ctarank;", ["register", "special"]),
        ("mov.u64 %rd1, %clock64;", ["register", "special"]),
        ("mov.u32 %r1, %tidy;", ["register", "register"]),
        ("mov.u32 %r1, smem;", ["register", "symbol"]),
        ("mov.u64 %rd1, $str+8;", ["register", "symbol"]),
        ("ld.shared.v2.f32 {%f1, _}, [%r1+8];", ["vector", "memory"]),
        ("shfl.sync.bfly.b32 %r1|%p1, %r2, 16, 0x1f, -1;", ["pair", "register", "immediate", "immediate", "immediate"]),
        ("setp.eq.and.s32 %p1, %r1, %r2, !%p2;", ["register", "register", "register", "register"]),
        ("call.uni (retval0), vprintf, (param0, param1);", ["list", "symbol", "list"]),
        ("call (r), %rd1, (a), prototype_0;", ["list", "register", "list", "symbol"]),
        ("call.uni stop, ();", ["symbol", "list"]),
        ("brx.idx %r1, targets;", ["register", "symbol"]),
        ("mbarrier.arrive.shared::cta.b64 _, [bar];", ["sink", "memory"]),
        ("ld.global.u32 %r1, [0x100];", ["register", "memory"]),
        ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0, %f1, %f2, %f3}, %rd1, %rd2, %p1, 1, 1, 0, 0;",
         ["vector", "register", "register", "register", "immediate", "immediate", "immediate", "immediate"]),
    ],
)
def test_operand_kinds(text, expected_kinds):
    assert kinds(view(text)) == expected_kinds


def test_memory_operands_split_base_and_displacement():
    ops = view("st.global.v2.u32 [%rd1+-16], {%r1, %r2};").operands
    assert (ops[0].name, ops[0].value, ops[0].elements[0].kind) == ("%rd1", -16, "register")
    ops = view("ld.shared.u32 %r1, [tile + 20];").operands
    assert (ops[1].name, ops[1].value, ops[1].elements[0].kind) == ("tile", 20, "symbol")
    ops = view("ld.shared.u32 %r1, [%r2 - 4];").operands
    assert (ops[1].name, ops[1].value) == ("%r2", -4)
    ops = view("ld.global.u32 %r1, [256];").operands
    assert ops[1].name is None and ops[1].elements[0].value == 256


def test_negated_and_symbol_offsets():
    ops = view("setp.eq.and.s32 %p1, %r1, %r2, !%p2;").operands
    assert ops[3].negated and ops[3].name == "%p2" and ops[3].text == "!%p2"
    ops = view("mov.u64 %rd1, $str+8;").operands
    assert (ops[1].name, ops[1].value) == ("$str", 8)


def test_elements_of_vector_registers():
    # CUTLASS's top-k softmax inline asm: `.reg .v2 .f32 mx;` then mx.x and mx.y
    ins = view("selp.f32 %f2099, mx.x, mx.y, p;")
    assert [(o.kind, o.name) for o in ins.operands] == [("register", "%f2099"), ("symbol", "mx.x"),
                                                       ("symbol", "mx.y"), ("symbol", "p")]
    assert [o.name for o in view("mov.f32 %f1, %v.w;").operands] == ["%f1", "%v.w"]
    assert view("mov.u32 %r1, %tid.x;").operands[1].kind == "special"
    with pytest.raises(ptxkit.PtxSyntaxError):
        view("mov.f32 %f1, mx.q;").operands


def test_registers_named_by_digits():
    # PTX ISA "Identifiers": '%' may start a name that goes on with any identifier
    # character, digits first included; ptxas takes %1 and %93 as registers everywhere
    inst = view("@!%5 setp.eq.u32 %1|%2, %93, 0x10;")
    assert inst.guard == Guard("%5", True)
    assert [(o.kind, o.text) for o in inst.operands] == [("pair", "%1|%2"), ("register", "%93"), ("immediate", "0x10")]
    assert inst.operands[0].registers == ("%1", "%2")
    store = view("st.global.v2.u32 [%9+8], {%8, %93};")
    assert (store.operands[0].name, store.operands[0].value) == ("%9", 8)
    assert store.operands[1].registers == ("%8", "%93")
    with pytest.raises(ptxkit.PtxSyntaxError, match="unexpected operand '%'"):
        view("mov.u32 %r1, %;").operands


def test_a_register_plus_a_constant_is_an_offset_operand():
    # ptxas reads `%r1+1` as the register's value plus 1 (its SASS: IADD3 R, R, 0x1); only '+'
    inst = view("add.u32 %r0, %r1+1, %r2+-1;")
    assert [(o.kind, o.name, o.value) for o in inst.operands] == [
        ("register", "%r0", None), ("offset", "%r1", 1), ("offset", "%r2", -1)]
    spaced = view("mul.lo.u32 %93, %7 + 0x10, %8;").operands[1]
    assert (spaced.kind, spaced.name, spaced.value, spaced.text) == ("offset", "%7", 16, "%7 + 0x10")
    assert spaced.registers == ("%7",) and spaced.elements[0].kind == "register"
    with pytest.raises(ptxkit.PtxSyntaxError, match="unexpected operand '%r1-1'"):
        view("mov.u32 %r0, %r1-1;").operands


def test_operand_offsets_point_into_the_text():
    inst = view("add.s32  %r1,  %r2, /* c */ 7;")
    for op in inst.operands:
        assert inst.text[op.offset : op.offset + len(op.text)] == op.text


def test_comments_inside_instructions_are_ignored():
    inst = view("add.f32 %f1, /* x */ %f2, // y\n\t%f3;")
    assert inst.opcode == "add.f32" and kinds(inst) == ["register"] * 3


def test_registers_of_nested_operands():
    inst = view("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f0, %f1, %f2, %f3}, %rd1, %rd2, %p1, 1, 1, 0, 0;")
    assert inst.operands[0].registers == ("%f0", "%f1", "%f2", "%f3")
    assert view("call.uni (r), f, (a, b);").operands[2].registers == ()


def test_state_space_of_memory_instructions():
    assert view("st.shared::cta.u32 [%r1], %r2;").state_space == "shared::cta"
    assert view("st.u32 [%rd1], %r2;").state_space is None
    assert view("ld.param.u64 %rd1, [p];").state_space == "param"
    assert view("add.s32 %r1, %r2, %r3;").state_space is None


def test_views_are_cached():
    inst = view("add.s32 %r1, %r2, %r3;")
    assert inst.view is inst.view


def test_instruction_head_reads_guard_and_opcode_only():
    head = instruction_head(view("@!P1 bra.uni LAB_WAIT;"))
    assert (head.guard.register, head.guard.negated, head.opcode, head.base) == ("P1", True, "bra.uni", "bra")
    assert instruction_head(view("ret;")).guard is None
    odd = instruction_head(view("@ !%p2 st.shared.u32 [%r1], /* c */ %r2;"))  # the regular-expression path
    assert (odd.guard, odd.opcode, odd.end) == (Guard("%p2", True), "st.shared.u32", 20)
    with pytest.raises(ptxkit.PtxSyntaxError, match="expected a predicate register and an opcode"):
        instruction_head(view("@%p1 ;"))


@pytest.mark.parametrize("text, opcode, first", [
    # TileLang's TMA store: ptxas reads a modifier after a blank as part of the opcode
    ("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group .L2::cache_hint [%rd57, {%r1, %r2, %r3, %r4}], "
     "[%r73], %rd58;", "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group.L2::cache_hint", "memory"),
    ("add .s32 %r1, %r2, %r3;", "add.s32", "register"),
    ("@%p1 add.s32\t.sat %r1, %r2, 1;", "add.s32.sat", "register"),
    ("mov.f32 %f1, .5;", "mov.f32", "register"),  # a number after the first operand stays one
])
def test_modifiers_after_blanks_belong_to_the_opcode(text, opcode, first):
    inst = view(text)
    assert inst.opcode == opcode and inst.modifiers == tuple(opcode.split(".")[1:])
    assert inst.operands[0].kind == first
    assert instruction_head(inst).opcode == opcode
