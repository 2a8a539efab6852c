"""``ptxkit.diff``: a unified diff of an edit read from its line map, as ``diff -u`` and
difflib write it, in time that does not grow with look-alike lines."""

from __future__ import annotations

import difflib
import shutil
import subprocess
import time

import pytest

import ptxkit
from ptxkit.cfg.fence.fence import fence_module
from ptxkit.diff import unified_diff
from ptxkit.edits import Insert, LineMap, Retarget, apply_edits

from conftest import SAMPLES

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"


def difflib_diff(old: str, new: str) -> list[str]:
    return list(difflib.unified_diff(old.splitlines(True), new.splitlines(True), "old", "new"))


@pytest.mark.parametrize("path", sorted((SAMPLES / "fence").glob("*.ptx")), ids=lambda path: path.stem)
def test_the_diff_of_a_planned_fence_is_difflibs(path):
    text = path.read_text()
    module = ptxkit.parse(text, path.name)
    report = fence_module(module, rewrite=False)
    lines = report.apply()
    assert unified_diff(text, str(module), lines, "old", "new") == difflib_diff(text, str(module))


def body_module(count: int) -> ptxkit.Module:
    body = "".join(f"\tadd.s32 %r1, %r1, {i};\n" for i in range(count))
    return ptxkit.parse(f"{HEAD}.visible .entry k()\n{{\n\t.reg .b32 %r<2>;\nL:\n{body}\t@%p1 bra L;\n\tret;\n}}\n")


@pytest.mark.parametrize("positions", [[0], [1, 2], [5, 12], [5, 11], [0, 29], [30]],
                         ids=["first", "adjacent", "hunks apart", "one hunk", "both ends", "last"])
def test_insertions_give_difflibs_hunks(positions):
    # two insertions 6 lines apart share a hunk (3 lines of context each), 7 apart do not
    module = body_module(30)
    old = str(module)
    items = module.functions[0].body.items
    instructions = [item for item in items if isinstance(item, ptxkit.Instruction)]
    lines = apply_edits([Insert(instructions[at], "membar.cta;") for at in positions])
    assert unified_diff(old, str(module), lines, "old", "new") == difflib_diff(old, str(module))


def test_a_line_rewritten_in_place_is_removed_and_added():
    module = body_module(8)
    old = str(module)
    items = module.functions[0].body.items
    branch = next(item for item in items if isinstance(item, ptxkit.Instruction) and item.text.startswith("@"))
    lines = apply_edits([Insert(items[5], "membar.cta;", label="NEW"), Retarget(branch, "NEW")])
    diff = unified_diff(old, str(module), lines, "old", "new")
    assert diff == difflib_diff(old, str(module))
    assert "-\t@%p1 bra L;\n" in diff and "+\t@%p1 bra NEW;\n" in diff and "+\tNEW:\n" in diff


def test_nothing_changed_is_no_diff():
    module = body_module(3)
    assert unified_diff(str(module), str(module), LineMap([]), "old", "new") == []


def test_a_last_line_without_a_newline_is_marked_as_diff_does():
    diff = "".join(unified_diff("a\nb", "a\nx\nb", LineMap([(2, 1)]), "old", "new"))
    assert diff == "--- old\n+++ new\n@@ -1,2 +1,3 @@\n a\n+x\n b\n\\ No newline at end of file\n"


@pytest.mark.skipif(shutil.which("patch") is None, reason="no patch program")
@pytest.mark.parametrize("text_end", ["\n", ""], ids=["newline at the end", "none at the end"])
def test_patch_applies_it(text_end, tmp_path):
    module = ptxkit.parse(str(body_module(40)).rstrip("\n") + text_end)
    old = str(module)
    instructions = [item for item in module.functions[0].body.items if isinstance(item, ptxkit.Instruction)]
    lines = apply_edits([Insert(instructions[at], "membar.cta;") for at in (0, 3, 20, 40)])
    (tmp_path / "k.ptx").write_text(old)
    (tmp_path / "k.diff").write_text("".join(unified_diff(old, str(module), lines, "k.ptx", "k.ptx")))
    subprocess.run(["patch", "-s", str(tmp_path / "k.ptx"), str(tmp_path / "k.diff")], check=True)
    assert (tmp_path / "k.ptx").read_text() == str(module)


def test_a_multi_megabyte_edit_is_diffed_in_one_pass():
    """difflib spends minutes on a few megabytes of look-alike lines (a -G build's); the
    line map makes it one pass."""
    module = body_module(200_000)
    old = str(module)
    instructions = [item for item in module.functions[0].body.items if isinstance(item, ptxkit.Instruction)]
    lines = apply_edits([Insert(instructions[at], "membar.cta;") for at in range(0, 200_000, 1000)])
    new = str(module)
    start = time.perf_counter()
    diff = unified_diff(old, new, lines, "old", "new")
    elapsed = time.perf_counter() - start
    assert len(old) > 4_000_000 and sum(line == "+\tmembar.cta;\n" for line in diff) == 200
    assert elapsed < 3.0, elapsed
