"""``ptxkit.suppressions``: the ``// ptxkit: ignore[...]`` comments of a PTX text."""

from __future__ import annotations

import pytest

from ptxkit.suppressions import CLASSES, Suppression, find_suppressions


@pytest.mark.parametrize("comment, classes, unknown, reason", [
    ("// ptxkit: ignore[war]", ("war",), (), None),
    ("//ptxkit:ignore[war,raw]", ("war", "raw"), (), None),
    ("// ptxkit: ignore[ war , mbarrier-init-cluster ] -- the init is released by the cluster barrier",
     ("war", "mbarrier-init-cluster"), (), "the init is released by the cluster barrier"),
    ("/* ptxkit: ignore[in-flight] -- waited for in the caller */", ("in-flight",), (), "waited for in the caller"),
    ("// ptxkit: ignore[ptxkit.fence.raw, wat]", ("raw",), ("wat",), None),
    ("// ptxkit: ignore[] -- nothing named", (), (), "nothing named"),
])
def test_a_comment_names_classes_and_a_reason(comment, classes, unknown, reason):
    (found,) = find_suppressions(f".version 8.0\n\tret; {comment}\n")
    assert (found.line, found.column, found.classes, found.unknown, found.reason) == (
        2, 7, classes, unknown, reason)


def test_text_that_is_no_suppression_is_not_one():
    text = "// ptxkit fence inserted this\n// ptxkit: ignore war\n\tmov.u32 %r1, 0; // ignore[war]\n"
    assert find_suppressions(text) == []


def test_it_covers_its_own_line_and_the_next_only():
    suppression = Suppression(10, 2, ("war", "raw"))
    assert [line for line in range(8, 13) if suppression.covers(line, "war")] == [10, 11]
    assert not suppression.covers(11, "mbarrier-init-cluster") and not suppression.covers(None, "war")


def test_several_comments_in_order_with_their_lines():
    text = "a\n// ptxkit: ignore[raw]\nb\nc /* ptxkit: ignore[war] */ d // ptxkit: ignore[in-flight]\n"
    assert [(s.line, s.column, s.classes) for s in find_suppressions(text)] == [
        (2, 1, ("raw",)), (4, 3, ("war",)), (4, 31, ("in-flight",))]


def test_the_classes_are_the_hazards_and_warning_kinds_the_pass_reports():
    from ptxkit.cfg.fence.proxy import Hazard

    assert set(CLASSES) == {hazard.value for hazard in Hazard} | {"in-flight", "unknown-opcode"}
