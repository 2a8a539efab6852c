"""ptxkit.trace: timeline and count buffers, written here byte by byte as the format says
(docs/instrument.md), decoded into spans, Chrome trace events, phases and counts."""

from __future__ import annotations

import json

import numpy as np
import pytest

from ptxkit.instrument.layout import END, MAGIC, VALID, WARP_SHIFT, CountedBlock, Instr, Layout, Point
from ptxkit.trace import Counts, Trace, as_bytes, cta_coordinates, decode

POINTS = [Point("kernel", "function", 10), Point("wait", "mbarrier", 20, "k.cu:7"), Point("mma", "wgmma", 30)]


class Writer:
    """Writes a timeline buffer as the kernel would: per CTA a header, records in slots."""

    def __init__(self, ctas: int, capacity: int, chunk: int = 4, warps: int = 8):
        self.capacity, self.chunk, self.warps = capacity, chunk, warps
        self.words = np.zeros((ctas, capacity + 1, 4), np.uint32)
        self.cursor = {}

    def run(self, cta: int, sm: int):
        self.words[cta, 0, 2:] = [sm, MAGIC]

    def record(self, cta: int, warp: int, point: int, end: bool, ns: int, cycles: int):
        slot, stop = self.cursor.get((cta, warp), (warp * self.chunk, (warp + 1) * self.chunk))
        if slot == stop:  # a new chunk from the CTA's counter, after every warp's first chunk
            slot = int(self.words[cta, 0, 0]) + self.warps * self.chunk
            self.words[cta, 0, 0] += self.chunk
            stop = slot + self.chunk
        if slot < self.capacity:
            tag = VALID | (END if end else 0) | warp << WARP_SHIFT | point
            self.words[cta, 1 + slot] = [ns & 0xFFFFFFFF, ns >> 32, cycles & 0xFFFFFFFF, tag]
        else:
            self.words[cta, 0, 1] += 1
        self.cursor[(cta, warp)] = (slot + 1, stop)


def layout(capacity=16, chunk=4):
    return Layout.timeline("k", POINTS, capacity=capacity, chunk=chunk)


def test_spans_pair_begin_and_end_per_warp_and_nest():
    w = Writer(ctas=1, capacity=32, warps=5)
    w.run(0, sm=3)
    for warp in (0, 4):  # 6 records each: a first chunk of 4, then 4 slots from the counter
        w.record(0, warp, 0, False, 1000 + warp, 100)
        w.record(0, warp, 1, False, 1100 + warp, 250)
        w.record(0, warp, 1, True, 1300 + warp, 550)
        w.record(0, warp, 2, False, 1400 + warp, 700)
        w.record(0, warp, 2, True, 1600 + warp, 1000)
        w.record(0, warp, 0, True, 1800 + warp, 1300)
    assert w.words[0, 0, 0] == 8
    trace = decode(w.words, layout(capacity=32), clock_ghz=1.5)
    assert trace.unmatched == 0 and int(trace.dropped.sum()) == 0 and trace.ran.tolist() == [True]
    assert sorted({int(s) for s in trace.spans["warp"]}) == [0, 4]
    warp0 = trace.spans[trace.spans["warp"] == 0]
    assert [int(p) for p in warp0["point"]] == [0, 1, 2]
    assert [int(d) for d in warp0["depth"]] == [0, 1, 1]
    assert [int(c) for c in warp0["cycles"]] == [1200, 300, 300]
    assert np.allclose(warp0["end"] - warp0["start"], [800, 200, 200])  # cycles / 1.5 GHz
    assert set(trace.spans["sm"].tolist()) == {3}


def test_records_past_the_capacity_are_counted_not_decoded():
    w = Writer(ctas=2, capacity=5, chunk=2, warps=2)  # warp 0: slots 0-1, then 4-5 (5 is past the end)
    for cta in range(2):
        w.run(cta, sm=cta)
        for i in range(4):
            w.record(cta, 0, 1, False, 100 * i, 100 * i)
            w.record(cta, 0, 1, True, 100 * i + 50, 100 * i + 50)
    trace = decode(w.words, layout(capacity=5, chunk=2), clock_ghz=1.0)
    assert trace.dropped.tolist() == [5, 5] and trace.records == 6
    assert len(trace.spans) == 2 and trace.unmatched == 2  # each CTA's second begin lost its end


def test_clock_wraps_within_an_sm_and_ctas_of_one_sm_share_it():
    w = Writer(ctas=2, capacity=8)
    base = (1 << 32) - 500  # the SM's 32-bit clock wraps between the records
    for cta in range(2):
        w.run(cta, sm=7)
        w.record(cta, 0, 1, False, 10_000 + 1000 * cta, base + 1000 * cta)
        w.record(cta, 0, 1, True, 10_400 + 1000 * cta, base + 1000 * cta + 400)
    trace = decode(w.words, layout(), clock_ghz=1.0)
    assert [int(c) for c in trace.spans["cycles"]] == [400, 400]
    assert np.allclose(trace.spans["start"], [0, 1000]) and np.allclose(trace.spans["end"], [400, 1400])


def test_the_clock_is_measured_from_globaltimer_on_a_long_trace():
    w = Writer(ctas=3, capacity=64)
    rng = np.random.default_rng(3)
    for cta in range(3):  # three SMs whose clocks started at unrelated values, ticking 1.8 per ns
        w.run(cta, sm=cta)
        offset = int(rng.integers(0, 1 << 31))
        for i in range(10):
            ns = 1_000_000 * cta + 100_000 * i
            w.record(cta, 1, 1, i % 2 == 1, ns - ns % 1000, offset + int(1.8 * ns))  # globaltimer ticks by 1 us
    trace = decode(w.words, layout(capacity=64), clock_ghz=1.0)
    assert trace.clock_ghz == pytest.approx(1.8, rel=1e-3)
    assert np.allclose(trace.spans["end"] - trace.spans["start"], 100_000, rtol=1e-6)
    assert np.allclose(np.sort(trace.spans["start"])[::5], [0, 1_000_000, 2_000_000], atol=1500)


def test_ctas_that_never_ran_and_an_empty_buffer():
    w = Writer(ctas=3, capacity=4, chunk=2, warps=2)
    w.run(1, sm=0)
    w.record(1, 1, 0, False, 5, 5)
    w.record(1, 1, 0, True, 9, 9)
    trace = decode(w.words.tobytes(), layout(capacity=4, chunk=2), grid=(3, 1))
    assert trace.ran.tolist() == [False, True, False] and trace.ctas == 3
    assert len(trace.spans) == 1 and "3 CTAs (1 ran)" in trace.summary()
    assert len(decode(np.zeros((2, 5, 4), np.uint32), layout(capacity=4)).spans) == 0
    with pytest.raises(ValueError, match="no whole CTA region"):
        decode(np.zeros(10, np.uint32), layout(capacity=4))


def chrome_trace():
    w = Writer(ctas=4, capacity=8)
    for cta in range(4):
        w.run(cta, sm=cta % 2)
        for warp in range(2):
            w.record(cta, warp, 0, False, 100 * cta, 100 * cta)
            w.record(cta, warp, 1, False, 100 * cta + 10, 100 * cta + 10)
            w.record(cta, warp, 1, True, 100 * cta + 30, 100 * cta + 30)
            w.record(cta, warp, 0, True, 100 * cta + 50, 100 * cta + 50)
    return decode(w.words, layout(capacity=8), grid=(2, 2), clock_ghz=1.0)


def test_chrome_trace_has_a_process_per_sm_and_a_track_per_warp():
    events = chrome_trace().to_chrome()["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {0: "SM 0", 1: "SM 1"}
    tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert len(tracks) == 8 and tracks[(1, 3 * 64 + 1)] == "CTA (1, 1, 0) warp 1"
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == 16
    wait = next(e for e in spans if e["name"] == "wait" and e["tid"] == 2 * 64)
    assert (wait["pid"], wait["ts"], wait["dur"], wait["cat"]) == (0, pytest.approx(0.21), pytest.approx(0.02),
                                                                   "mbarrier")
    assert wait["args"] == {"cycles": 20, "line": 20, "source": "k.cu:7"}
    json.dumps(chrome_trace().to_chrome())  # plain JSON


def test_phases_per_warpgroup():
    rows = chrome_trace().phases(warps_per_group=1)
    by = {(r["group"], r["phase"]): r for r in rows}
    assert by[(0, "kernel")]["us"] == pytest.approx(0.05) and by[(0, "kernel")]["share"] == pytest.approx(1.0)
    assert by[(1, "wait")]["us"] == pytest.approx(0.02) and by[(1, "wait")]["share"] == pytest.approx(0.4)
    assert by[(1, "wait")]["warps"] == 4 and by[(1, "wait")]["spans"] == 1
    assert "kernel" in chrome_trace().phase_table()


def test_plot_writes_png_and_svg(tmp_path):
    pytest.importorskip("matplotlib")
    trace = chrome_trace()
    trace.plot(str(tmp_path / "t.png"))
    trace.plot(str(tmp_path / "t.svg"), ctas=[0, 2, 3])
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "t.svg").read_text()
    assert "<svg" in svg and "CTA 3 warp 1" in svg and "CTA 1 warp" not in svg


def count_layout(per_cta=True):
    blocks = [CountedBlock("B0", 0, (Instr(5, "mov.u32", "k.cu:3"), Instr(6, "bra"))),
              CountedBlock("LOOP", 1, (Instr(8, "add.s32", "k.cu:4"), Instr(9, "setp.lt.s32", "k.cu:4"),
                                       Instr(10, "bra"))),
              CountedBlock("DONE", 0, (Instr(12, "ret"),))]
    return Layout.count("k", blocks, counters=2, per_cta=per_cta)


def test_counts_per_block_line_source_and_opcode():
    rows = np.array([[4, 40], [4, 36], [2, 6]], np.uint64)
    counts = decode(rows, count_layout(), grid=3)
    assert counts.blocks == {"B0": 10, "LOOP": 82, "DONE": 10}
    assert counts.by_line == {5: 10, 6: 10, 8: 82, 9: 82, 10: 82, 12: 10}
    assert counts.by_source == {"k.cu:3": 10, "k.cu:4": 164}
    assert counts.by_opcode == {"mov.u32": 10, "bra": 92, "add.s32": 82, "setp.lt.s32": 82, "ret": 10}
    assert counts.cta(1) == {"B0": 4, "LOOP": 36, "DONE": 4}
    assert "LOOP" in counts.report() and json.dumps(counts.to_json())


def test_counts_of_one_shared_row():
    counts = decode(np.array([7, 9], np.uint64).tobytes(), count_layout(per_cta=False))
    assert counts.blocks == {"B0": 7, "LOOP": 9, "DONE": 7} and counts.rows.shape == (1, 2)
    with pytest.raises(ValueError, match="one row"):
        counts.cta(0)
    assert isinstance(counts, Counts) and not isinstance(counts, Trace)


def test_buffers_of_every_kind_read_as_bytes():
    data = np.arange(8, dtype=np.uint32)
    assert as_bytes(data).tobytes() == data.tobytes() == as_bytes(data.tobytes()).tobytes()
    assert as_bytes(memoryview(data.tobytes())).size == 32
    assert cta_coordinates(5, (2, 3, 1)) == "(1, 2, 0)"
