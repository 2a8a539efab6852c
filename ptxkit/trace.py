"""Read the buffers that instrumented kernels write (`ptxkit.instrument`): timelines as
`Trace` (spans per warp, a Chrome/Perfetto trace, a picture, time per phase) and block
counts as `Counts` (per block, PTX line, source line and opcode).

>>> import numpy as np
>>> from ptxkit.instrument.layout import Layout, Point, MAGIC, VALID, END
>>> layout = Layout.timeline("k", [Point("kernel", "function", 7)], capacity=2)
>>> region = np.zeros(8 + 2 * 2, np.uint32)            # one CTA: a 32-byte header, 2 records
>>> region[:8] = [0, 0, 5, MAGIC, 1000, 0, 100, 0]      # SM 5, at entry: 1000 ns and cycle 100
>>> region[8:10] = [400, VALID | 1 << 24]               # warp 1 begins at cycle 400
>>> region[10:12] = [3400, VALID | END | 1 << 24]       # and ends 3000 cycles later
>>> trace = decode(region, layout, clock_ghz=1.5)
>>> [(int(s["warp"]), int(s["sm"]), float(s["end"] - s["start"]), int(s["cycles"])) for s in trace.spans]
[(1, 5, 2000.0, 3000)]

The buffer may be bytes, a numpy array, a torch tensor or a `ptxkit.runtime.DeviceArray`;
the layout comes from the pass (`InstrumentResult.layouts`), from the instrumented PTX
(`ptxkit.instrument.layout.read_layouts`) or from the ``.ptxkit.json`` that the ptxas
wrapper writes beside its output.
"""

from __future__ import annotations

import json

import numpy as np

from .instrument.layout import END, HEADER_BYTES, MAGIC, POINT_MASK, VALID, WARP_MASK, WARP_SHIFT, Layout

#: the SM clock assumed when a trace is too short to measure it (H100/H200 SXM: 1.755 GHz
#: is the clock under load that ptxkit's GPU runs reported; pass `clock_ghz` to override)
DEFAULT_CLOCK_GHZ = 1.755
#: a trace whose per-SM clock spans this many cycles measures the clock itself
_FIT_CYCLES = 200_000

SPAN = np.dtype([("cta", np.int64), ("sm", np.int32), ("warp", np.int32), ("point", np.int32),
                 ("start", np.float64), ("end", np.float64), ("cycles", np.int64), ("depth", np.int32)])


def as_bytes(buffer) -> np.ndarray:
    """The bytes of `buffer` (bytes, numpy array, torch tensor, `DeviceArray`) as uint8."""
    if hasattr(buffer, "to_numpy"):  # ptxkit.runtime.DeviceArray
        buffer = buffer.to_numpy()
    elif hasattr(buffer, "detach") and hasattr(buffer, "cpu"):  # a torch tensor
        buffer = buffer.detach().cpu().contiguous().view(-1).numpy()
    if isinstance(buffer, (bytes, bytearray, memoryview)):
        return np.frombuffer(buffer, np.uint8)
    return np.ascontiguousarray(buffer).reshape(-1).view(np.uint8)


def decode(buffer, layout: Layout, grid=None, clock_ghz: float | None = None):
    """A `Trace` (timeline layouts) or `Counts` (count layouts) from a kernel's buffer.

    `grid`: the launch's grid in CTAs (to name CTAs by their coordinates; the number of
    CTAs is read off the buffer's size otherwise); `clock_ghz`: the SM clock, used only
    when the trace is too short to measure it from ``%globaltimer``.
    """
    data = as_bytes(buffer)
    dims = _dims(grid)
    if layout.kind == "timeline":
        return Trace(data, layout, dims, clock_ghz)
    return Counts(data, layout, dims)


def _dims(grid) -> tuple[int, int, int] | None:
    if grid is None:
        return None
    values = (int(grid),) if np.ndim(grid) == 0 else tuple(int(g) for g in grid)
    return values + (1,) * (3 - len(values))


def cta_coordinates(cta: int, grid: tuple[int, int, int] | None) -> str:
    """``(x, y, z)`` of the CTA with linear id `cta` (just the id without a grid).

    >>> cta_coordinates(7, (4, 2, 1)), cta_coordinates(7, None)
    ('(3, 1, 0)', '7')
    """
    if grid is None:
        return str(cta)
    x, rest = cta % grid[0], cta // grid[0]
    return f"({x}, {rest % grid[1]}, {rest // grid[1]})"


class Trace:
    """The decoded timeline of one launch.

    `spans`: a numpy record array (`SPAN`) with one row per begin/end pair: CTA (linear
    id), SM, warp in the CTA, point (index into `points`), start and end in ns from the
    first record of the launch, the cycles between them and the nesting depth;
    `dropped`: records lost for want of a slot, per CTA; `unmatched`: begin or end
    records without their other half; `clock_ghz`: the SM clock the times use
    (measured, or the one given); `ran`: CTAs that ran the instrumented entry (a CTA
    whose thread 0 never returned, so never stored its clocks, gives no spans).
    """

    def __init__(self, data: np.ndarray, layout: Layout, grid=None, clock_ghz: float | None = None):
        self.layout = layout
        self.points = layout.points
        self.grid = grid
        region = layout.cta_bytes
        if data.size < region:
            raise ValueError(f"a timeline buffer of {data.size} bytes holds no whole CTA region of {region} bytes")
        ctas = data.size // region
        regions = data[: ctas * region].reshape(ctas, region)
        header = np.ascontiguousarray(regions[:, :HEADER_BYTES]).view(np.uint32)
        self.ran = header[:, 3] == MAGIC
        self.dropped = header[:, 1].astype(np.int64)
        self.slots = header[:, 0].astype(np.int64)
        self.sm_of_cta = header[:, 2].astype(np.int32)
        entry = header[:, 4:8].copy().view(np.uint64)  # (%globaltimer, %clock64) at the CTA's entry
        self.entry_ns, self.entry_cycles = entry[:, 0].astype(np.int64), entry[:, 1].astype(np.int64)
        records = np.ascontiguousarray(regions[:, HEADER_BYTES:]).view(np.uint32).reshape(ctas, -1, 2)
        anchored = self.ran & (self.entry_cycles != 0)  # thread 0 stores the pair at its return
        cta, slot = np.nonzero((records[:, :, 1] & VALID) != 0)
        keep = anchored[cta]
        cta, slot = cta[keep], slot[keep]
        clock, tag = records[cta, slot, 0], records[cta, slot, 1]
        self.records = len(tag)
        warp = ((tag >> WARP_SHIFT) & WARP_MASK).astype(np.int32)
        order = np.lexsort((slot, warp, cta))  # each warp's records in the order it wrote them
        cta, warp, clock, tag = cta[order], warp[order], clock[order], tag[order]
        cycles = _unwrap(clock, self.entry_cycles[cta])
        self.clock_ghz, offset = _clocks(self.sm_of_cta[anchored], self.entry_ns[anchored],
                                         self.entry_cycles[anchored], clock_ghz)
        sm = self.sm_of_cta[cta]
        ns = np.array([offset[int(s)] for s in sm], np.float64) + cycles / self.clock_ghz if len(sm) else np.zeros(0)
        self.origin_ns = float(ns.min()) if len(ns) else 0.0
        self.spans, self.unmatched = _pair(cta, sm, warp, (tag & POINT_MASK).astype(np.int32),
                                           (tag & END) != 0, ns - self.origin_ns, cycles)

    @property
    def ctas(self) -> int:
        return len(self.ran)

    def point(self, index: int):
        return self.points[index]

    def summary(self) -> str:
        """A few lines: CTAs, warps, spans, dropped records, the clock."""
        warps = len({(int(c), int(w)) for c, w in zip(self.spans["cta"], self.spans["warp"])})
        return (f"{self.layout.kernel}: {self.ctas} CTAs ({int(self.ran.sum())} ran), {warps} warps recorded, "
                f"{len(self.spans)} spans from {self.records} records, {int(self.dropped.sum())} dropped, "
                f"{self.unmatched} unmatched, SM clock {self.clock_ghz:.3f} GHz")

    # -- Chrome / Perfetto -----------------------------------------------------------------
    def to_chrome(self, ctas=None) -> dict:
        """The trace as Chrome's trace-event JSON (open it in Perfetto or chrome://tracing):
        one process per SM, one track per warp named by its CTA and warp, a complete
        event ("X") per span with the point's line and ``.loc`` source in its args.
        `ctas`: only these CTAs (a big launch's whole trace can be hundreds of MB)."""
        events = []
        spans = self.spans if ctas is None else self.spans[np.isin(self.spans["cta"], list(ctas))]
        sms = sorted({int(s) for s in spans["sm"]})
        for sm in sms:
            events.append({"ph": "M", "name": "process_name", "pid": sm, "args": {"name": f"SM {sm}"}})
            events.append({"ph": "M", "name": "process_sort_index", "pid": sm, "args": {"sort_index": sm}})
        tracks = sorted({(int(s), int(c), int(w)) for s, c, w in zip(spans["sm"], spans["cta"], spans["warp"])})
        for sm, cta, warp in tracks:
            tid = cta * 64 + warp
            name = f"CTA {cta_coordinates(cta, self.grid)} warp {warp}"
            events.append({"ph": "M", "name": "thread_name", "pid": sm, "tid": tid, "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": sm, "tid": tid, "args": {"sort_index": tid}})
        for span in spans:
            point = self.points[span["point"]]
            args = {"cycles": int(span["cycles"])}
            if point.line is not None:
                args["line"] = point.line
            if point.source:
                args["source"] = point.source
            events.append({"ph": "X", "name": point.name, "cat": point.category, "pid": int(span["sm"]),
                           "tid": int(span["cta"]) * 64 + int(span["warp"]), "ts": span["start"] / 1000.0,
                           "dur": (span["end"] - span["start"]) / 1000.0, "args": args})
        return {"traceEvents": events, "displayTimeUnit": "ns",
                "otherData": {"kernel": self.layout.kernel, "clock_ghz": self.clock_ghz,
                              "origin_globaltimer_ns": self.origin_ns, "dropped": int(self.dropped.sum())}}

    def write_chrome(self, path: str, ctas=None) -> None:
        """Write `to_chrome` (of `ctas`, or all) to `path` (``.json``)."""
        with open(path, "w") as handle:
            json.dump(self.to_chrome(ctas), handle)

    # -- figures ---------------------------------------------------------------------------
    def phases(self, warps_per_group: int = 4) -> list[dict]:
        """Time in each phase per warpgroup (`warps_per_group` warps, 4 by default): one
        dict per (group, point) with ``group``, ``phase``, ``category``, ``warps`` (the
        warps of the group, over all CTAs, that recorded it), ``spans`` (per such warp),
        ``us`` (µs per such warp) and ``share`` (of those warps' time from their first
        record to their last)."""
        spans = self.spans
        if not len(spans):
            return []
        track = spans["cta"] * 64 + spans["warp"]
        tracks, index = np.unique(track, return_inverse=True)
        first = np.full(len(tracks), np.inf)
        last = np.full(len(tracks), -np.inf)
        np.minimum.at(first, index, spans["start"])
        np.maximum.at(last, index, spans["end"])
        lifetime = last - first
        group = spans["warp"] // warps_per_group
        rows = []
        for g in np.unique(group):
            for point in np.unique(spans["point"][group == g]):
                chosen = (group == g) & (spans["point"] == point)
                recorded = np.unique(index[chosen])
                total = float((spans["end"][chosen] - spans["start"][chosen]).sum())
                alive = float(lifetime[recorded].sum())
                info = self.points[point]
                rows.append({"group": int(g), "phase": info.name, "category": info.category,
                             "warps": len(recorded), "spans": int(chosen.sum()) / len(recorded),
                             "us": total / len(recorded) / 1000.0, "share": total / alive if alive > 0 else 0.0})
        return rows

    def phase_table(self, warps_per_group: int = 4) -> str:
        """`phases` as a text table."""
        lines = [f"{'warpgroup':>9}  {'phase':<28} {'warps':>6} {'spans/warp':>10} {'us/warp':>10} {'share':>7}"]
        for row in self.phases(warps_per_group):
            lines.append(f"{row['group']:>9}  {row['phase'][:28]:<28} {row['warps']:>6} {row['spans']:>10.1f} "
                         f"{row['us']:>10.3f} {100 * row['share']:>6.1f}%")
        return "\n".join(lines)

    def plot(self, path: str, ctas=None, title: str | None = None, width: float = 11.0, warps=None,
             window=None) -> None:
        """Draw the timeline of some CTAs (default: up to two that ran on one SM) to `path`,
        PNG or SVG by its extension: one row per warp (only `warps` when given), CTAs
        grouped, a colour per point, nested spans drawn inside their parents; `window`:
        ``(start, stop)`` in µs from the first record of those CTAs. Needs matplotlib
        (``pip install ptxkit[plot]``)."""
        from .plot import draw_timeline

        draw_timeline(self, path, ctas=ctas, title=title, width=width, warps=warps, window=window)


def _unwrap(clock: np.ndarray, base: np.ndarray) -> np.ndarray:
    """The SM's 64-bit cycle count of each record from its low 32 bits and the count at
    its CTA's entry (`base`): right for records within 2^31 cycles (over a second) of it.

    >>> _unwrap(np.array([5, 0xFFFFFFF0], np.uint32), np.array([(1 << 32) - 10, (1 << 33) + 3])).tolist()
    [4294967301, 8589934576]
    """
    delta = (clock.astype(np.int64) - (base & 0xFFFFFFFF)) % (1 << 32)
    return base + np.where(delta >= 1 << 31, delta - (1 << 32), delta)


def _clocks(sm: np.ndarray, entry_ns: np.ndarray, entry_cycles: np.ndarray, clock_ghz: float | None):
    """(the SM clock in GHz, SM -> ns at its cycle 0) from each CTA's (``%globaltimer``,
    ``%clock64``) at entry. The clock is the least-squares slope of the timer over the
    cycles within the SMs (one slope for all) when the CTAs of an SM span enough cycles,
    else `clock_ghz` (or `DEFAULT_CLOCK_GHZ`); each SM's offset is the mean over its CTAs."""
    ghz = clock_ghz or DEFAULT_CLOCK_GHZ
    if not len(sm):
        return ghz, {}
    sms, index = np.unique(sm, return_inverse=True)
    counts = np.bincount(index).astype(np.float64)
    x = entry_cycles - (np.bincount(index, entry_cycles.astype(np.float64)) / counts)[index]
    y = entry_ns - (np.bincount(index, entry_ns.astype(np.float64)) / counts)[index]
    if x.max() - x.min() >= _FIT_CYCLES and float(x @ y) > 0:
        measured = float(x @ x) / float(x @ y)
        if 0.3 < measured < 4.0:
            ghz = measured
    offsets = np.bincount(index, entry_ns - entry_cycles / ghz) / counts
    return ghz, {int(s): float(o) for s, o in zip(sms, offsets)}


def _pair(cta, sm, warp, point, end, ns, cycles):
    """Match each warp's begin and end records (in the order it wrote them) into spans;
    nested points nest. Returns (spans, records left unmatched)."""
    spans = []
    unmatched = 0
    open_: dict[int, list] = {}
    depth = 0
    for i in range(len(point)):
        if i and (cta[i] != cta[i - 1] or warp[i] != warp[i - 1]):  # the next warp's records
            unmatched += depth
            open_.clear()
            depth = 0
        stack = open_.setdefault(int(point[i]), [])
        if not end[i]:
            stack.append(i)
            depth += 1
        elif stack:
            j = stack.pop()
            depth -= 1
            spans.append((cta[i], sm[i], warp[i], point[i], ns[j], ns[i], cycles[i] - cycles[j], depth))
        else:
            unmatched += 1
    unmatched += depth
    array = np.array(spans, dtype=SPAN) if spans else np.zeros(0, SPAN)
    return array[np.lexsort((array["start"], array["warp"], array["cta"]))], unmatched


class Counts:
    """The decoded block counts of one launch: warp executions of each block (a warp that
    runs a block with some of its threads counts once; a warp whose threads run it at
    different times, once each time).

    `rows`: the counters, one row per CTA (or one row); `blocks`: block name -> count;
    `by_line`: PTX input line -> warp executions of the instruction there;
    `by_source`: ``file:line`` -> instruction executions summed over its PTX
    instructions; `by_opcode`: opcode -> warp-level instructions executed.
    """

    def __init__(self, data: np.ndarray, layout: Layout, grid=None):
        self.layout = layout
        self.grid = grid
        row = layout.cta_bytes
        if row == 0:
            self.rows = np.zeros((1, 0), np.uint64)
        else:
            if data.size < row:
                raise ValueError(f"a count buffer of {data.size} bytes holds no row of {row} bytes")
            rows = data.size // row if layout.per_cta else 1
            self.rows = data[: rows * row].view(np.uint64).reshape(rows, layout.counters)
        totals = self.rows.sum(axis=0, dtype=np.uint64) if layout.counters else np.zeros(0, np.uint64)
        self.counters = [int(t) for t in totals]
        self.blocks = {block.name: self.counters[block.counter] for block in layout.blocks}
        self.by_line: dict[int, int] = {}
        self.by_source: dict[str, int] = {}
        self.by_opcode: dict[str, int] = {}
        for block in layout.blocks:
            count = self.counters[block.counter]
            for instr in block.instructions:
                self.by_line[instr.line] = count
                self.by_opcode[instr.opcode] = self.by_opcode.get(instr.opcode, 0) + count
                if instr.source:
                    self.by_source[instr.source] = self.by_source.get(instr.source, 0) + count

    def cta(self, index: int) -> dict[str, int]:
        """Block name -> count in CTA `index` (per-CTA layouts)."""
        if not self.layout.per_cta:
            raise ValueError("this count layout adds every CTA into one row")
        row = self.rows[index]
        return {block.name: int(row[block.counter]) for block in self.layout.blocks}

    def report(self, top: int = 20) -> str:
        """The most executed blocks, source lines and opcodes, as text."""
        out = [f"{self.layout.kernel}: {sum(self.by_opcode.values())} warp-level instructions executed"]
        for title, table in (("blocks", self.blocks), ("source lines", self.by_source), ("opcodes", self.by_opcode)):
            if not table:
                continue
            out.append(f"  {title}:")
            for key, count in sorted(table.items(), key=lambda item: (-item[1], str(item[0])))[:top]:
                out.append(f"    {count:>14}  {key}")
        return "\n".join(out)

    def to_json(self) -> dict:
        """Counts per block, PTX line, source line and opcode, for ``json.dump``."""
        return {"kernel": self.layout.kernel, "blocks": self.blocks, "lines": {str(k): v for k, v in self.by_line.items()},
                "sources": self.by_source, "opcodes": self.by_opcode}


def buffer_bytes(layout: Layout, grid) -> int:
    """Bytes of zero-filled device memory a launch of `layout`'s kernel over `grid` needs.

    >>> from ptxkit.instrument.layout import Layout
    >>> buffer_bytes(Layout.count("k", [], counters=5), grid=(10, 1))
    400
    """
    return layout.buffer_bytes(grid)


