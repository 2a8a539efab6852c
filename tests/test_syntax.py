"""Editing the tree: every edit re-emits all other bytes unchanged."""

from __future__ import annotations

import difflib

import pytest

import ptxkit
from ptxkit.syntax import Block, Instruction, Label

from conftest import SAMPLES

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def changed_lines(before: str, after: str) -> list[str]:
    """The +/- lines of a unified diff (without headers)."""
    diff = difflib.unified_diff(before.splitlines(True), after.splitlines(True), n=0)
    return [line for line in diff if line[:1] in "+-" and line[:3] not in ("+++", "---")]


def kernel(body: str) -> ptxkit.Module:
    return ptxkit.parse(HEADER + ".visible .entry k()\n{\n" + body + "}\n")


def instruction(module, opcode_prefix: str) -> Instruction:
    return next(i for i in module.instructions() if i.opcode.startswith(opcode_prefix))


def test_insert_before_copies_indentation_and_changes_one_line():
    module = kernel("\t// load it\n\tld.shared.u32 %r1, [%r2];\n\tret;\n")
    before = str(module)
    new = instruction(module, "ld").insert_before("fence.proxy.async.shared::cta;")
    after = str(module)
    assert changed_lines(before, after) == ["+\tfence.proxy.async.shared::cta;\n"]
    assert after.index("// load it") < after.index("fence.proxy") < after.index("ld.shared")
    assert new.parent is module.functions[0].body and new.offset is None and new.line is None


def test_insert_after_goes_below_a_trailing_comment():
    module = kernel("    bar.sync 0; // all threads\n    ret;\n")
    before = str(module)
    instruction(module, "bar").insert_after("wgmma.fence.sync.aligned;")
    assert changed_lines(before, str(module)) == ["+    wgmma.fence.sync.aligned;\n"]
    assert "bar.sync 0; // all threads\n    wgmma.fence" in str(module)


def test_insert_after_the_last_statement_of_a_scope():
    module = kernel("\t{\n\t\tmov.u32 %r1, 1;\n\t}\n\tret;\n")
    before = str(module)
    instruction(module, "mov").insert_after("add.u32 %r1, %r1, 1;")
    assert changed_lines(before, str(module)) == ["+\t\tadd.u32 %r1, %r1, 1;\n"]


def test_edits_keep_crlf_line_endings():
    text = (HEADER + ".visible .entry k()\n{\n\tbar.sync 0;\n\tret;\n}\n").replace("\n", "\r\n")
    module = ptxkit.parse(text)
    instruction(module, "ret").insert_before("membar.cta;")
    instruction(module, "bar").insert_after("membar.gl;")
    assert str(module) == text.replace("\tret;", "\tmembar.gl;\r\n\tmembar.cta;\r\n\tret;")


def test_insert_on_a_line_shared_with_a_label():
    module = kernel("done: ret;\n")
    instruction(module, "ret").insert_before("exit;")
    assert "done: exit; ret;\n" in str(module)


def test_replace_keeps_the_prefix():
    module = kernel("\t/* c */ fence.proxy.async;\n\tret;\n")
    before = str(module)
    new = instruction(module, "fence").replace("fence.proxy.async.shared::cta;")
    assert str(module) == before.replace("fence.proxy.async;", "fence.proxy.async.shared::cta;")
    assert new.opcode == "fence.proxy.async.shared::cta"


def test_delete_removes_the_line_and_keeps_comments():
    module = kernel("\tbar.sync 0;\n\t// about the fence\n\tfence.proxy.async;\n\tret;\n")
    before = str(module)
    instruction(module, "fence").delete()
    assert changed_lines(before, str(module)) == ["-\tfence.proxy.async;\n"]


def test_delete_then_insert_restores_the_text():
    module = kernel("\tbar.sync 0;\n\tmembar.cta;\n\tret;\n")
    before = str(module)
    instruction(module, "membar").delete()
    instruction(module, "ret").insert_before("membar.cta;")
    assert str(module) == before


def test_module_level_insert_and_label_insert():
    module = ptxkit.parse(HEADER + ".shared .align 8 .b64 bar;\n.visible .entry k()\n{\n\tret;\n}\n")
    before = str(module)
    module.directives(".shared")[0].insert_after(".shared .align 16 .b8 extra[64];")
    label = instruction(module, "ret").insert_before("$L_new:")
    assert isinstance(label, Label) and label.name == "$L_new"
    assert changed_lines(before, str(module)) == ["+.shared .align 16 .b8 extra[64];\n", "+\t$L_new:\n"]
    assert module.functions[0].body.resolve_label("$L_new") is label


@pytest.mark.parametrize("bad", ["", "ret; ret;", "  ret;", "{", "ret"])
def test_only_single_statements_can_be_inserted(bad):
    module = kernel("\tret;\n")
    with pytest.raises(ptxkit.PtxSyntaxError):
        instruction(module, "ret").insert_before(bad)
    assert str(module).count("ret;") == 1


def test_a_node_can_only_live_in_one_place():
    module = kernel("\tbar.sync 0;\n\tret;\n")
    ret = instruction(module, "ret")
    with pytest.raises(ValueError, match="already belongs"):
        ret.insert_before(instruction(module, "bar"))


def test_edits_work_on_every_sample_without_touching_other_lines():
    for path in sorted((SAMPLES / "syntax").glob("*.ptx")):
        module = ptxkit.parse_file(path)
        before = str(module)
        targets = [i for i in module.instructions() if i.base in ("ret", "bar", "st")]
        for inst in targets:
            inst.insert_before("membar.cta;")
        added = changed_lines(before, str(module))
        assert len(added) == len(targets) and all(line[0] == "+" and line[1:].strip() == "membar.cta;" for line in added), path


def test_str_of_nodes_and_walk_order():
    module = kernel("\tmov.u32 %r1, 1;\n\t{\n\t\tret;\n\t}\n")
    function = module.functions[0]
    assert str(function) == ".visible .entry k()\n{\n\tmov.u32 %r1, 1;\n\t{\n\t\tret;\n\t}\n}"
    kinds = [type(node).__name__ for node in function.walk()]
    assert kinds == ["Instruction", "Block", "Instruction"]
    scope = next(n for n in function.walk() if isinstance(n, Block))
    assert str(scope) == "{\n\t\tret;\n\t}"
    assert repr(instruction(module, "mov")) == "<Instruction 'mov.u32 %r1, 1;'>"
