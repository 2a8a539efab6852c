"""The PTX builder, constants, dtypes, register tiles, and the combine table (native
instruction or f32 with conversions, per dtype and target)."""

from __future__ import annotations

import numpy as np
import pytest

import ptxkit
from ptxkit.generators.builder import PtxBuilder, f32_literal, module_text
from ptxkit.generators.combine import combine, combine_pair, is_native, set_identity
from ptxkit.generators.dtypes import bits_of, dtype, from_bits, round_to, to_bits
from ptxkit.generators.layout import LayoutError, R, S, TileLayout, laneid
from ptxkit.generators.regtile import RegTile


def test_registers_are_numbered_per_type_and_declared():
    b = PtxBuilder()
    assert [b.reg(".f32"), b.reg(".f32"), b.reg(".b16"), b.reg(".b64"), b.reg(".pred")] == [
        "%f0", "%f1", "%h0", "%rd0", "%p0"]
    assert b.regs(".b32", 2) == ["%r0", "%r1"]
    assert b.declarations() == [".reg .f32 %f<2>;", ".reg .b16 %h<1>;", ".reg .b32 %r<2>;", ".reg .b64 %rd<1>;",
                                ".reg .pred %p<1>;"]
    with pytest.raises(ValueError, match="unsupported register type"):
        b.reg(".f64")


def test_instructions_labels_and_guards():
    b = PtxBuilder()
    p = b.reg(".pred")
    label = b.label("skip")
    b.ins("bra.uni", label, guard=p)
    b.ins("bar.sync", 0)
    b.place(label)
    b.ins("ret")
    assert b.instructions() == ["@%p0 bra.uni $skip_0;", "bar.sync 0;", "$skip_0:", "ret;"]
    assert [getattr(s, "opcode", None) or s.name for s in b.statements()] == ["bra.uni", "bar.sync", "$skip_0", "ret"]


def test_constants_are_exact_bit_patterns():
    assert f32_literal(1.0) == "0f3F800000" and f32_literal(-0.0) == "0f80000000"
    assert f32_literal(float("inf")) == "0f7F800000"
    b = PtxBuilder()
    b.mov_const("f32", "%f0", -3.4028234663852886e38)
    b.mov_const("f16", "%h0", 65504.0)
    b.mov_const("bf16", "%h1", 1.0)
    b.mov_const("s32", "%r0", -5)
    b.mov_const("u32", "%r1", 2**32 - 1)
    assert b.instructions() == ["mov.f32 %f0, 0fFF7FFFFF;", "mov.b16 %h0, 0x7BFF;", "mov.b16 %h1, 0x3F80;",
                                "mov.b32 %r0, -5;", "mov.b32 %r1, 4294967295;"]


def test_entries_and_modules_assemble_and_parse():
    b = PtxBuilder()
    x = b.reg(".f32")
    b.mov_const("f32", x, 2.0)
    b.shared("scratch", 64, 16)
    text = module_text([b.entry("k", [(".u64", "out")])], b.target, b.version)
    module = ptxkit.parse(text)
    assert module.version == (8, 0) and module.targets == ["sm_90a"]
    assert module.function("k").signature.params[0].name == "out"
    assert ".shared .align 16 .b8 scratch[64];" in text


def test_targets_versions_and_feature_gates():
    assert PtxBuilder("sm_90a").version == (8, 0)
    assert PtxBuilder("sm_100a").version == (8, 6) and PtxBuilder("sm_120").version == (8, 7)
    b = PtxBuilder("sm_90a")
    b.require_version((8, 8))
    b.require_version((8, 6))
    assert b.version == (8, 8)
    with pytest.raises(ValueError, match="needs sm_100a or newer; the target is sm_90a"):
        b.require_sm(100, "add.f32x2", arch_specific=True)
    with pytest.raises(ValueError, match="needs sm_100a"):
        PtxBuilder("sm_100").require_sm(100, "redux.f32", arch_specific=True)
    with pytest.raises(ValueError, match="unknown target"):
        PtxBuilder("compute_90")


def test_select_for_picks_instructions_of_an_older_target():
    b = PtxBuilder("sm_90a", select_for="sm_80")
    assert b.target == "sm_90a" and b.sm == 80
    with pytest.raises(ValueError, match="no newer than"):
        PtxBuilder("sm_80", select_for="sm_90")


@pytest.mark.parametrize(
    "op, name, sm, native",
    [("sum", "f32", 75, True), ("sum", "f16", 75, True), ("max", "f16", 75, False), ("max", "f16", 80, True),
     ("sum", "bf16", 80, False), ("sum", "bf16", 90, True), ("min", "bf16", 80, True), ("max", "s32", 75, True)],
)
def test_combine_table(op, name, sm, native):
    assert is_native(op, name, sm) is native


def test_combine_native_and_through_f32():
    b = PtxBuilder("sm_90a", select_for="sm_75")
    combine(b, "max", "f16", "%h0", "%h0", "%h1")
    assert b.instructions() == ["cvt.f32.f16 %f0, %h0;", "cvt.f32.f16 %f1, %h1;", "setp.nan.f32 %p0, %f0, %f1;",
                                "max.f32 %f0, %f0, %f1;", "@%p0 mov.f32 %f0, 0f7FFFFFFF;", "cvt.rn.f16.f32 %h0, %f0;"]
    b = PtxBuilder("sm_90a", select_for="sm_75")
    combine(b, "max", "f16", "%h0", "%h0", "%h1", nan="ignore")
    assert "max.f32 %f0, %f0, %f1;" in b.instructions() and len(b.instructions()) == 4
    b = PtxBuilder("sm_90a")
    combine(b, "sum", "f16", "%h0", "%h0", "%h1")
    combine(b, "min", "s32", "%r0", "%r0", "%r1")
    combine_pair(b, "sum", "bf16", "%r2", "%r2", "%r3")
    assert b.instructions() == ["add.f16 %h0, %h0, %h1;", "min.s32 %r0, %r0, %r1;", "add.bf16x2 %r2, %r2, %r3;"]
    b = PtxBuilder("sm_90a", select_for="sm_80")
    combine_pair(b, "sum", "bf16", "%r0", "%r0", "%r1")
    assert b.instructions()[:2] == ["mov.b32 {%h0, %h1}, %r0;", "mov.b32 {%h2, %h3}, %r1;"]
    assert b.instructions()[-1] == "mov.b32 %r0, {%h0, %h1};"
    with pytest.raises(ValueError, match="bf16 arithmetic"):
        combine(PtxBuilder("sm_75"), "max", "bf16", "%h0", "%h0", "%h1")
    set_identity(b, "min", "f32", "%f9")
    assert b.instructions()[-1] == "mov.f32 %f9, 0f7F7FFFFF;"


@pytest.mark.ptxas
def test_every_combine_assembles_at_its_oldest_target():
    for target, dtypes in (("sm_75", ("f32", "f16", "s32", "u32")), ("sm_80", ("f16", "bf16")),
                           ("sm_90a", ("f16", "bf16", "f32"))):
        b = PtxBuilder(target)
        for name in dtypes:
            t = dtype(name)
            x, y = b.value_reg(t), b.value_reg(t)
            for op in ("sum", "max", "min"):
                set_identity(b, op, t, x)
                combine(b, op, t, x, x, y)
                if t.is_half:
                    p, q = b.regs(".b32", 2)
                    combine_pair(b, op, t, p, p, q)
        ptxkit.assemble(module_text([b.entry("combine", [])], target, b.version), arch=target)


def test_dtypes_and_bit_patterns():
    assert dtype("float16").name == "f16" and dtype("bfloat16").numpy == "uint16" and dtype("int32").name == "s32"
    with pytest.raises(ValueError, match="unsupported dtype 'f64'"):
        dtype("f64")
    assert bits_of("f16", 1.0) == 0x3C00 and bits_of("bf16", -2.0) == 0xC000 and bits_of("s32", -1) == 0xFFFFFFFF
    # bf16 rounds to nearest even: 1 + 2^-8 is a tie and goes to 1.0; 1 + 3·2^-9 rounds up
    assert bits_of("bf16", 1.00390625) == 0x3F80 and bits_of("bf16", 1.005859375) == 0x3F81
    values = np.array([1.0, -2.5, 3.140625, float("inf")])
    assert np.array_equal(from_bits("bf16", to_bits("bf16", values)), values)
    assert to_bits("bf16", np.array([np.nan]))[0] == 0x7FC0
    assert round_to("f16", np.array([65520.0]))[0] == np.inf


def test_register_tiles_slots_regions_and_views():
    b = PtxBuilder()
    gapped = RegTile(b, (32, 2, 2), "f32", TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]))
    assert len(gapped.regs) == 7 and [gapped.storage_slot(k) for k in range(4)] == [0, 4, 2, 6]
    plain = RegTile(b, (3, 4), "f16")
    assert plain.layout is None and plain.element_slot((2, 1)) == 9 and plain.regs[0].startswith("%h")
    region = plain[1:3, 2]
    assert region.start == (1, 2) and region.extent == (2, 1) and region.same_buffer(plain)
    assert region[1, :].start == (2, 2)
    view = plain.view((12,))
    assert view.regs == plain.regs and not view.same_buffer(plain)
    with pytest.raises(LayoutError, match="has 128 elements but shape"):
        RegTile(b, (4,), "f32", TileLayout(S[(32, 4) : (1 @ laneid, 1)]))
    with pytest.raises(LayoutError, match="cannot replicate over register slots"):
        RegTile(b, (1,), "f32", TileLayout(S[1:1] + R[2:1]))
    with pytest.raises(IndexError, match="cannot have a step"):
        plain[::2]
    with pytest.raises(LayoutError, match="spreads the tile over threads"):
        RegTile(b, (32,), "f32", TileLayout(S[32 : 1 @ laneid])).element_slot((3,))
