"""ptxkit.instrument.layout: buffer sizes, the layout as JSON and as a PTX comment."""

from __future__ import annotations

import pytest

from ptxkit.instrument.layout import (COMMENT_PREFIX, CountedBlock, Instr, Layout, Point, layout_comment,
                                      read_layouts)


def test_timeline_and_count_sizes():
    timeline = Layout.timeline("k", [Point("kernel", "function", 3)], capacity=1023, chunk=8)
    assert timeline.cta_bytes == 32 + 1023 * 8 and timeline.buffer_bytes((3, 2, 2)) == 12 * (32 + 1023 * 8)
    assert timeline.buffer_bytes(5) == 5 * (32 + 1023 * 8)
    count = Layout.count("k", [], counters=7)
    assert count.buffer_bytes((10, 2)) == 20 * 7 * 8
    assert count._replace(per_cta=False).buffer_bytes((10, 2)) == 7 * 8
    assert Layout.count("k", [], counters=0).buffer_bytes(4) == 8  # never an empty allocation


def test_round_trips_through_dict_and_json():
    count = Layout.count("k", [CountedBlock("L", 1, (Instr(4, "bra", "a.cu:9"), Instr(5, "ret")))], 2,
                         per_cta=False, buffer=("global", "ptxkit_trace_k"))
    timeline = Layout.timeline("t", [Point("w", "mbarrier", 8, "a.cu:3")], 16, 4, ("param", "p"), warps=4)
    for layout in (count, timeline):
        assert Layout.from_json(layout.to_json()) == layout
        assert Layout.from_dict(layout.to_dict()) == layout and Layout.from_dict(layout) is layout
    with pytest.raises(ValueError, match="not an instrumentation layout"):
        Layout.from_json('{"kind": "fence"}')


def test_layouts_ride_in_ptx_comments():
    a = Layout.count("a", [], 1)
    b = Layout.timeline("b", [Point("kernel", "function", 1)], 8)
    text = ".version 8.0\n" + layout_comment(a) + "\n.target sm_90a\n" + layout_comment(b)  # the last without \n
    assert read_layouts(text) == {"a": a, "b": b}
    assert read_layouts(".version 8.0\n// ptxkit: nothing here\n") == {}
    assert layout_comment(a).startswith(COMMENT_PREFIX) and "\n" not in layout_comment(a)
