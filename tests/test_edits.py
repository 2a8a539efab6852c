"""ptxkit.edits: edits touch only their lines, and the line map says where lines went."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.edits import Insert, LineMap, Retarget, apply_edits

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
