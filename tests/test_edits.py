"""ptxkit.edits: edits touch only their lines, and the line map says where lines went."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.edits import AddParam, Delete, Insert, LineMap, Replace, Retarget, apply_edits

TEXT = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n.reg .pred %p<2>;\n"
        "\tbar.sync 0;  // first\n\tbar.sync 1;\nL:\n\tbar.sync 2;\n\t@%p1 bra L;\n\tret;\n}\n")


def statements(module):
    return [node for node in module.functions[0].body.items if hasattr(node, "opcode")]


def test_inserts_before_and_after_keep_everything_else():
    module = ptxkit.parse(TEXT)
    first, second, third, branch, ret = statements(module)
    label = next(node for node in module.functions[0].body.items if type(node).__name__ == "Label")
    lines = apply_edits([Insert(second, "membar.cta;"), Insert(first, "membar.gl;", after=True),
                         Insert(label, "membar.sys;", label="M", indent="\t"), Retarget(branch, "M")])
    new = str(module)
    diff = [line for line in difflib.unified_diff(TEXT.splitlines(), new.splitlines(), lineterm="", n=0)
            if line[:1] in "+-" and not line.startswith(("+++", "---"))]
    assert diff == ["+\tmembar.gl;", "+\tmembar.cta;", "+M:", "+\tmembar.sys;", "-\t@%p1 bra L;", "+\t@%p1 bra M;"]
    assert "\tbar.sync 0;  // first\n\tmembar.gl;\n" in new
    for old in range(1, TEXT.count("\n") + 1):  # every old line is where the map says
        assert new.splitlines()[lines.new(old) - 1] == TEXT.splitlines()[old - 1] or old == 11  # retargeted
    assert lines.inserted == [8, 9, 11, 12]
    assert [lines.old(n) for n in (7, 8, 10, 11, 13, 14)] == [7, None, 8, None, 9, 10]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3)), max_size=8), st.integers(1, 60))
def test_line_map_round_trips(insertions, line):
    lines = LineMap(insertions)
    new = lines.new(line)
    assert lines.old(new) == line
    assert new not in lines.inserted
    assert all(lines.old(n) is None for n in lines.inserted)
    assert lines.source(new) == line
    assert all(lines.new(lines.source(n)) > n for n in lines.inserted)  # the old line an insertion precedes


def test_delete_replace_and_add_param_keep_the_rest_and_map_lines():
    module = ptxkit.parse(TEXT.replace("k()", "k(\n\t.param .u32 n\n)"))
    first, second, third, branch, ret = statements(module)
    lines = apply_edits([Delete(second), Replace(third, "bar.sync 3;"),
                         AddParam(module.functions[0], ".param .u64 buf")])
    new = str(module).splitlines()
    assert new[3:8] == [".visible .entry k(", "\t.param .u32 n,", "\t.param .u64 buf", ")", "{"]
    assert "\tbar.sync 1;" not in new and "\tbar.sync 3;" in new
    old = TEXT.replace("k()", "k(\n\t.param .u32 n\n)").splitlines()
    for number, text in enumerate(old, 1):
        if text == "\tbar.sync 1;":
            assert lines.new(number) is None
        elif text != "\tbar.sync 2;":
            assert new[lines.new(number) - 1] == text.replace("\t.param .u32 n", "\t.param .u32 n,")
    assert lines.inserted == [6]


def test_several_statements_at_one_place_keep_their_order():
    module = ptxkit.parse(TEXT)
    first, second, *_ = statements(module)
    apply_edits([Insert(first, "membar.gl;", after=True), Insert(first, "membar.cta;", after=True),
                 Insert(second, "nanosleep.u32 1;"), Insert(second, "nanosleep.u32 2;")])
    body = [line.strip() for line in str(module).splitlines()[6:12]]
    assert body == ["bar.sync 0;  // first", "membar.gl;", "membar.cta;", "nanosleep.u32 1;", "nanosleep.u32 2;",
                    "bar.sync 1;"]


def test_add_param_to_an_empty_list_and_after_one_on_the_same_line():
    module = ptxkit.parse(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry a()\n{\n\tret;\n}\n"
                          ".visible .entry b(.param .u32 n) .maxntid 32\n{\n\tret;\n}\n")
    lines = apply_edits([AddParam(module.functions[0], ".param .u64 x"),
                         AddParam(module.functions[1], ".param .u64 y")])
    assert ".visible .entry a(.param .u64 x)" in str(module)
    assert ".visible .entry b(.param .u32 n, .param .u64 y) .maxntid 32" in str(module)
    assert [p.name for p in module.functions[1].signature.params] == ["n", "y"]
    assert lines.inserted == []


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(0, 3)), max_size=8),
       st.sets(st.integers(1, 40), max_size=6), st.integers(1, 60))
def test_line_map_with_deletions_round_trips(insertions, deleted, line):
    lines = LineMap(insertions, deleted)
    new = lines.new(line)
    if line in deleted:
        assert new is None
        return
    assert lines.old(new) == line and lines.source(new) == line
    assert new not in lines.inserted
    assert all(lines.old(n) is None for n in lines.inserted)
    kept = [n for n in range(1, 60) if n not in deleted]
    assert [lines.new(n) for n in kept] == sorted(lines.new(n) for n in kept)  # order kept


@settings(max_examples=100)
@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 2)), max_size=5), st.sets(st.integers(1, 30), max_size=4),
       st.lists(st.tuples(st.integers(1, 40), st.integers(0, 2)), max_size=5), st.sets(st.integers(1, 40), max_size=4),
       st.integers(1, 30))
def test_composed_line_maps_follow_both(ins1, del1, ins2, del2, line):
    first, second = LineMap(ins1, del1), LineMap(ins2, del2)
    both = first.then(second)
    middle = first.new(line)
    assert both.new(line) == (None if middle is None else second.new(middle))
    if both.new(line) is not None:
        assert both.old(both.new(line)) == line
    assert all(both.old(n) is None for n in both.inserted)
