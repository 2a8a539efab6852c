"""ptxkit.rewrite.plan: declarations in scope, .loc only when asked, params, globals."""

from __future__ import annotations

import gc
import weakref

import pytest

import ptxkit
from ptxkit.rewrite import Plan, apply, match

TEXT = """.version 8.0
.target sm_90a
.address_size 64
.file 1 "k.cu"
.visible .entry k(
	.param .u64 out
)
{
	.reg .b32 %r<4>;
	.reg .pred %p<2>;
	.loc 1 10 3
	mov.u32 %r1, %tid.x;
	{
		.reg .b32 %inner;
		.loc 1 11 5
		add.u32 %inner, %r1, 1;
	}
	.loc 1 12 3
	bar.sync 0;
	ret;
}
"""


def test_registers_are_declared_once_per_type_in_the_scope_asked_for():
    module = ptxkit.parse(TEXT)
    plan = Plan(module)
    k = plan.function("k")
    a, b = k.fresh_register("u32", "a"), k.fresh_register(".u32", "b")
    nested = next(node for node in k.function.body.items if type(node).__name__ == "Block")
    inner = k.fresh_register(".pred", "q", scope=nested)
    add = k.find(match.opcode("add"))[0]
    k.insert(k.before(add), [f"mov.u32 {a}, 1;", f"setp.eq.u32 {inner}, {a}, {b};"])
    apply(plan)
    lines = str(module).splitlines()
    assert lines[9:11] == ["\t.reg .pred %p<2>;", "\t.reg .u32 %ptxkit_a, %ptxkit_b;"]
    assert lines[14:16] == ["\t\t.reg .b32 %inner;", "\t\t.reg .pred %ptxkit_q;"]
    assert lines[16:19] == ["\t\t.loc 1 11 5", "\t\tmov.u32 %ptxkit_a, 1;",
                            "\t\tsetp.eq.u32 %ptxkit_q, %ptxkit_a, %ptxkit_b;"]


def test_inserted_code_has_no_loc_unless_asked_and_then_the_old_one_comes_back():
    module = ptxkit.parse(TEXT)
    plan = Plan(module)
    k = plan.function("k")
    bar = k.find(match.barrier_wait())[0]
    k.insert(k.before(bar), "membar.cta;")
    k.insert(k.after(bar), "membar.gl;", loc=(1, 99, 1))
    apply(plan)
    body = [line.strip() for line in str(module).splitlines()[17:23]]
    assert body == [".loc 1 12 3", "membar.cta;", "bar.sync 0;", ".loc 1 99 1", "membar.gl;", ".loc 1 12 3"]
    with pytest.raises(ValueError, match="no '.file 2'"):
        Plan(ptxkit.parse(TEXT)).function("k").insert(k.before(bar), "membar.cta;", loc=(2, 1, 1))


def test_bad_code_and_bad_types_are_refused_before_anything_changes():
    module = ptxkit.parse(TEXT)
    k = Plan(module).function("k")
    with pytest.raises(ValueError, match="register type"):
        k.fresh_register(".u33")
    with pytest.raises(ptxkit.PtxSyntaxError):
        k.insert(k.entry(), "mov.u32 %r1, ;")
    with pytest.raises(ValueError, match="not a statement"):
        k.insert(k.entry(), "mov.u32 %r1, 0")
    assert str(module) == TEXT


def test_params_go_last_and_say_their_index():
    module = ptxkit.parse(TEXT)
    plan = Plan(module)
    added = plan.function("k").add_param(".u64", "buf", pointer="global", align=8)
    again = plan.function("k").add_param(".u32", "n")
    assert (added.index, again.index, added.name, again.name) == (1, 2, "ptxkit_buf", "ptxkit_n")
    lines = apply(plan)
    assert [p.name for p in module.function("k").signature.params] == ["out", "ptxkit_buf", "ptxkit_n"]
    assert str(module).splitlines()[5:8] == ["\t.param .u64 out,", "\t.param .u64 .ptr .global .align 8 ptxkit_buf,",
                                            "\t.param .u32 ptxkit_n"]
    assert lines.inserted == [7, 8] and lines.new(7) == 9
    assert plan.params == [added, again]


def test_a_func_gets_no_new_param():
    module = ptxkit.parse(".version 8.0\n.target sm_90a\n.address_size 64\n.func f()\n{\n\tret;\n}\n")
    with pytest.raises(ValueError, match="callers"):
        Plan(module).function("f").add_param()


def test_globals_deletes_and_replacements():
    module = ptxkit.parse(TEXT)
    plan = Plan(module)
    name = plan.declare_global(".u64", "buf", initializer="0")
    bar = plan.function("k").find(match.opcode("bar.sync"))[0]
    plan.replace(bar, "barrier.sync 0;")
    plan.delete(plan.function("k").find(match.opcode("mov"))[0])
    apply(plan)
    text = str(module)
    assert f'.file 1 "k.cu"\n.global .u64 {name} = 0;\n.visible .entry k(' in text
    assert "\tbarrier.sync 0;" in text and "mov.u32 %r1" not in text


def test_a_plan_is_made_once():
    plan = Plan(ptxkit.parse(TEXT))
    k = plan.function("k")
    k.insert(k.entry(), "membar.cta;")
    assert plan.edits() is plan.edits()
    for edit in (lambda: k.insert(k.entry(), "membar.cta;"), lambda: k.delete(k.function.body.items[0]),
                 lambda: k.replace(k.function.body.items[0], "ret;"), lambda: k.add_param()):
        with pytest.raises(RuntimeError, match="already made"):
            edit()


def test_a_made_plan_goes_by_reference_counting():
    # a plan and its function plans refer to each other until its edits are made; then the
    # function plans let go, so a pass's plan and module go with their last reference
    gc.collect()
    gc.disable()
    try:
        module = ptxkit.parse(TEXT)
        plan = Plan(module)
        k = plan.function("k")
        k.insert(k.entry(), "membar.cta;")
        apply(plan)
        module.release()
        gone = weakref.ref(plan)
        del plan, k, module
        assert gone() is None and gc.collect() == 0
    finally:
        gc.enable()


@pytest.mark.ptxas
def test_the_plans_here_assemble():
    from ptxkit.ptxas import assemble

    module = ptxkit.parse(TEXT)
    plan = Plan(module)
    k = plan.function("k")
    t = k.fresh_register(".u64", "t")
    k.insert(k.entry(), f"mov.u64 {t}, %globaltimer;", loc=(1, 1, 1))
    buf = k.add_param(".u64", "buf")
    address = k.fresh_register(".u64", "address")
    k.insert(k.returns(), [f"ld.param.u64 {address}, [{buf.name}];", f"st.global.u64 [{address}], {t};"])
    plan.declare_global(".u32", "flag")
    apply(plan)
    assemble(str(module), "sm_90a", options=("-c",), cache=False)


def test_comments_go_before_the_first_function_after_the_declared_variables():
    module = ptxkit.parse(".version 8.0\n.target sm_90a\n.address_size 64\n\n.visible .entry k()\n{\n\tret;\n}\n")
    plan = Plan(module)
    plan.declare_global(".u64", "buffer")
    plan.comment("layout: {}")
    plan.comment("second")
    lines = apply(plan)
    assert str(module).splitlines()[4:8] == [".global .u64 ptxkit_buffer;", "// layout: {}", "// second",
                                             ".visible .entry k()"]
    assert lines.new(5) == 8 and lines.old(6) is None and lines.old(8) == 5
    with pytest.raises(ValueError, match="one line"):
        Plan(module).comment("two\nlines")
