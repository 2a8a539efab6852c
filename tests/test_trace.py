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
    """Writes a timeline buffer as the kernel would: per CTA a header with the SM and the
    (timer, cycles) pair at entry, records (low 32 bits of the cycles, tag) in slots."""

    def __init__(self, ctas: int, capacity: int, chunk: int = 4, warps: int = 8):
        self.capacity, self.chunk, self.warps = capacity, chunk, warps
        self.first = min(chunk, capacity // warps)  # each warp's own first slots
        self.header = np.zeros((ctas, 8), np.uint32)
        self.records = np.zeros((ctas, capacity, 2), np.uint32)
        self.cursor = {}

    @property
    def buffer(self) -> np.ndarray:
        regions = [np.concatenate([h, r.reshape(-1)]) for h, r in zip(self.header, self.records)]
        return np.concatenate(regions)

    def run(self, cta: int, sm: int, ns: int = 0, cycles: int = 1):  # a real %clock64 is never 0
        self.header[cta, 2:] = [sm, MAGIC, ns & 0xFFFFFFFF, ns >> 32, cycles & 0xFFFFFFFF, cycles >> 32]

    def record(self, cta: int, warp: int, point: int, end: bool, cycles: int):
        start = warp * self.first
        slot, stop = self.cursor.get((cta, warp), (start, start + self.first))
        if slot == stop:  # more slots from the CTA's counter, after every warp's first ones
            slot = int(self.header[cta, 0]) + self.warps * self.first
            self.header[cta, 0] += self.chunk
            stop = slot + self.chunk
        if slot < self.capacity:
            self.records[cta, slot] = [cycles & 0xFFFFFFFF, VALID | (END if end else 0) | warp << WARP_SHIFT | point]
        else:
            self.header[cta, 1] += 1
        self.cursor[(cta, warp)] = (slot + 1, stop)


def layout(capacity=16, chunk=4):
    return Layout.timeline("k", POINTS, capacity=capacity, chunk=chunk)


def test_spans_pair_begin_and_end_per_warp_and_nest():
    w = Writer(ctas=1, capacity=40, warps=5)
    w.run(0, sm=3, ns=5000, cycles=90)
    for warp in (0, 4):  # 6 records each: 4 first slots, then 4 from the counter
        w.record(0, warp, 0, False, 100)
        w.record(0, warp, 1, False, 250)
        w.record(0, warp, 1, True, 550)
        w.record(0, warp, 2, False, 700)
        w.record(0, warp, 2, True, 1000)
        w.record(0, warp, 0, True, 1300)
    assert w.header[0, 0] == 8
    trace = decode(w.buffer, layout(capacity=40), clock_ghz=1.5)
    assert trace.unmatched == 0 and int(trace.dropped.sum()) == 0 and trace.ran.tolist() == [True]
    assert sorted({int(s) for s in trace.spans["warp"]}) == [0, 4]
    warp0 = trace.spans[trace.spans["warp"] == 0]
    assert [int(p) for p in warp0["point"]] == [0, 1, 2]
    assert [int(d) for d in warp0["depth"]] == [0, 1, 1]
    assert [int(c) for c in warp0["cycles"]] == [1200, 300, 300]
    assert np.allclose(warp0["end"] - warp0["start"], [800, 200, 200])  # cycles / 1.5 GHz
    assert np.allclose(warp0["start"], [0, 100, 400])  # from the launch's first record
    assert set(trace.spans["sm"].tolist()) == {3}


def test_records_past_the_capacity_are_counted_not_decoded():
    w = Writer(ctas=2, capacity=5, chunk=2, warps=2)  # warp 0: slots 0-1, then 4-5 (5 is past the end)
    for cta in range(2):
        w.run(cta, sm=cta)
        for i in range(4):
            w.record(cta, 0, 1, False, 100 * i)
            w.record(cta, 0, 1, True, 100 * i + 50)
    trace = decode(w.buffer, layout(capacity=5, chunk=2), clock_ghz=1.0)
    assert trace.dropped.tolist() == [5, 5] and trace.records == 6
    assert len(trace.spans) == 2 and trace.unmatched == 2  # each CTA's second begin lost its end


def test_a_small_capacity_still_gives_every_warp_its_first_slot():
    w = Writer(ctas=1, capacity=6, chunk=8, warps=6)  # min(8, 6 // 6): one slot each
    w.run(0, sm=0)
    for warp in range(6):
        w.record(0, warp, 1, False, 10 * warp)
    trace = decode(w.buffer, layout(capacity=6, chunk=8))
    assert trace.records == 6 and int(trace.dropped.sum()) == 0 and trace.unmatched == 6


def test_the_clock_wraps_after_the_ctas_entry():
    w = Writer(ctas=2, capacity=8, warps=1)
    base = (1 << 32) - 500  # the SM's low 32 bits wrap between the entry and the records
    for cta in range(2):
        w.run(cta, sm=7, ns=10_000 + 1000 * cta, cycles=base + 1000 * cta)
        w.record(cta, 0, 1, False, base + 1000 * cta + 300)
        w.record(cta, 0, 1, True, base + 1000 * cta + 700)
    trace = decode(w.buffer, layout(capacity=8), clock_ghz=1.0)
    assert [int(c) for c in trace.spans["cycles"]] == [400, 400]
    assert np.allclose(trace.spans["start"], [0, 1000]) and np.allclose(trace.spans["end"], [400, 1400])


def test_the_clock_is_measured_from_globaltimer_and_sms_are_aligned():
    w = Writer(ctas=30, capacity=8, warps=2)
    rng = np.random.default_rng(3)
    starts = {}
    for sm in range(3):  # SMs whose cycle counters started at unrelated values, ticking 1.8 per ns
        offset = int(rng.integers(0, 1 << 40))
        for i in range(10):
            cta = 10 * sm + i
            ns = 1_000_000 + 70_000 * i + 13_000 * sm
            w.run(cta, sm=sm, ns=ns - ns % 1000, cycles=offset + int(1.8 * ns))  # the timer ticks by 1 us
            w.record(cta, 1, 1, False, offset + int(1.8 * (ns + 200)))
            w.record(cta, 1, 1, True, offset + int(1.8 * (ns + 20_200)))
            starts[cta] = ns + 200
    trace = decode(w.buffer, layout(capacity=8), clock_ghz=1.0)
    assert trace.clock_ghz == pytest.approx(1.8, rel=1e-3)
    assert np.allclose(trace.spans["end"] - trace.spans["start"], 20_000, rtol=1e-6)
    expected = np.array([starts[int(c)] for c in trace.spans["cta"]]) - min(starts.values())
    assert np.allclose(trace.spans["start"], expected, atol=1000)  # SMs aligned to the timer's tick


def test_ctas_that_never_ran_and_an_empty_buffer():
    w = Writer(ctas=3, capacity=4, chunk=2, warps=2)
    w.run(1, sm=0)
    w.record(1, 1, 0, False, 5)
    w.record(1, 1, 0, True, 9)
    trace = decode(w.buffer.tobytes(), layout(capacity=4, chunk=2), grid=(3, 1))
    assert trace.ran.tolist() == [False, True, False] and trace.ctas == 3
    assert len(trace.spans) == 1 and "3 CTAs (1 ran)" in trace.summary()
    assert len(decode(np.zeros(2 * (8 + 8), np.uint32), layout(capacity=4)).spans) == 0
    w.header[1, 4:] = 0  # thread 0 never returned: no clocks, no spans from that CTA
    assert len(decode(w.buffer, layout(capacity=4, chunk=2)).spans) == 0
    with pytest.raises(ValueError, match="no whole CTA region"):
        decode(np.zeros(10, np.uint32), layout(capacity=4))


def chrome_trace():
    w = Writer(ctas=4, capacity=8, warps=2)
    for cta in range(4):
        w.run(cta, sm=cta % 2, ns=100 * cta, cycles=100 * cta + 1)
        for warp in range(2):
            w.record(cta, warp, 0, False, 100 * cta)
            w.record(cta, warp, 1, False, 100 * cta + 10)
            w.record(cta, warp, 1, True, 100 * cta + 30)
            w.record(cta, warp, 0, True, 100 * cta + 50)
    return decode(w.buffer, layout(capacity=8), grid=(2, 2), clock_ghz=1.0)


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
    some = chrome_trace().to_chrome(ctas=[1, 3])["traceEvents"]
    assert {e["pid"] for e in some if e["ph"] == "X"} == {1} and sum(e["ph"] == "X" for e in some) == 8


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
    trace.plot(str(tmp_path / "w.svg"), ctas=[0], warps=[1], window=(0.0, 0.02))
    one = (tmp_path / "w.svg").read_text()
    assert "CTA 0 warp 1" in one and "CTA 0 warp 0" not in one
    with pytest.raises(ValueError, match="no spans"):
        trace.plot(str(tmp_path / "x.svg"), ctas=[0], warps=[7])


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
