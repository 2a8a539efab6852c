"""The instrumentation buffers: their byte layout, and the record a pass leaves for the
decoder (`Layout`: which kernel, which points or blocks, how big, where the buffer comes
from). docs/instrument.md describes the format; `ptxkit.trace` reads it.

**Timeline** (``instrument timeline``): one region per CTA, in the order of the linear
CTA id ``ctaid.x + nctaid.x * (ctaid.y + nctaid.y * ctaid.z)``, each
``32 + capacity * 8`` bytes: a 32-byte header, then `capacity` records of 8 bytes.

- header: u32 slots the CTA's counter handed out (by `chunk`, one ``atom.global.add`` a
  time, to warps that used up their first chunk), u32 records dropped for want of a
  slot, u32 ``%smid``, u32 `MAGIC`, u64 ``%globaltimer`` (ns) and u64 ``%clock64``
  (cycles) read together at entry (the last four written by the CTA's thread 0). Each
  warp's first slots are its own (``min(chunk, capacity / warps)`` of them, from
  ``warp * that`` on); the counter's slots come after all of those.
- record: u32 the low half of ``%clock64`` (cycles of the SM's clock; the header's
  reading at entry gives the high half), u32 tag = ``VALID | end << 30 | warp << 24 |
  point``.

**Count** (``instrument count``): `rows` rows of `counters` u64 counters, row = linear
CTA id (``per_cta``) or a single row that every CTA adds into.

>>> layout = Layout.timeline("k", [Point("kernel", "function", 10)], capacity=255)
>>> layout.buffer_bytes(grid=(4, 2, 1)), layout.cta_bytes
(16576, 2072)
>>> Layout.from_json(layout.to_json()) == layout
True
"""

from __future__ import annotations

import json
import math

from .._records import Record

#: bytes of one timeline record and of a CTA's header
RECORD_BYTES = 8
HEADER_BYTES = 32
#: the timeline header's last word once the CTA has run the instrumented entry ("PTKT")
MAGIC = 0x50544B54
#: tag bits of a timeline record
VALID = 1 << 31
END = 1 << 30
WARP_SHIFT = 24
WARP_MASK = 0x3F
POINT_MASK = (1 << WARP_SHIFT) - 1
#: bytes of one block counter
COUNTER_BYTES = 8

KINDS = ("timeline", "count")


class Point(Record):
    """What a pair of timeline records (begin, end) brackets.

    `category`: ``function`` (entry to exit), ``region`` (a named region), ``barrier``
    (``bar.sync``/``barrier.sync``/``barrier.cluster.wait``), ``mbarrier`` (an mbarrier
    wait), ``wgmma`` (``wgmma.wait_group``), ``tma`` (TMA and bulk-copy issue); `line`:
    the input line of what is bracketed; `source`: its ``.loc`` as ``file:line``.
    """

    name: str
    category: str
    line: int | None = None
    source: str | None = None


class Instr(Record):
    """One instruction of a counted block: its input line, opcode and ``.loc`` source
    (``file:line``, or None)."""

    line: int
    opcode: str
    source: str | None = None


class CountedBlock(Record):
    """A basic block of an instrumented function and the counter that counts it (blocks
    that always run together share one)."""

    name: str
    counter: int
    instructions: tuple = ()


class Layout(Record):
    """What the decoder needs to know about one instrumented kernel's buffer.

    `buffer`: ``("param", NAME)`` when the buffer's address is kernel parameter NAME
    (added by the pass, or one the kernel had, such as Triton's profile scratch), or
    ``("global", SYMBOL)`` when it is the ``.u64`` module variable SYMBOL (nvcc builds,
    whose launch code cannot pass one more parameter).
    """

    kind: str
    kernel: str
    buffer: tuple = ("param", "")
    points: tuple = ()
    capacity: int = 0
    chunk: int = 0
    warps: int | None = None
    blocks: tuple = ()
    counters: int = 0
    per_cta: bool = True

    @classmethod
    def timeline(cls, kernel: str, points, capacity: int, chunk: int = 8, buffer=("param", ""),
                 warps: int | None = None) -> "Layout":
        """A timeline layout; `warps`: every how many warps one records (None: all)."""
        return cls("timeline", kernel, tuple(buffer), tuple(points), capacity, chunk, warps)

    @classmethod
    def count(cls, kernel: str, blocks, counters: int, per_cta: bool = True, buffer=("param", "")) -> "Layout":
        return cls("count", kernel, tuple(buffer), blocks=tuple(blocks), counters=counters, per_cta=per_cta)

    @property
    def cta_bytes(self) -> int:
        """Bytes of one CTA's part of the buffer (a timeline region, or a counter row)."""
        if self.kind == "timeline":
            return HEADER_BYTES + self.capacity * RECORD_BYTES
        return self.counters * COUNTER_BYTES

    def rows(self, ctas: int) -> int:
        """CTA regions (or counter rows) that a launch of `ctas` CTAs writes."""
        return ctas if self.kind == "timeline" or self.per_cta else 1

    def buffer_bytes(self, grid) -> int:
        """Bytes of zero-filled device memory a launch over `grid` (CTAs: an int or up to
        three ints) needs."""
        ctas = math.prod(grid) if isinstance(grid, (tuple, list)) else int(grid)
        return max(self.rows(ctas) * self.cta_bytes, COUNTER_BYTES)

    def to_dict(self) -> dict:
        """The layout as JSON-ready data (what a pass leaves in ``plan.info``)."""
        fields = self._asdict()
        fields["buffer"] = list(self.buffer)
        fields["points"] = [list(point) for point in self.points]
        fields["blocks"] = [[b.name, b.counter, [list(i) for i in b.instructions]] for b in self.blocks]
        return fields

    @classmethod
    def from_dict(cls, fields: dict) -> "Layout":
        """The layout that `to_dict` gave (or `Layout` itself, returned as it is)."""
        if isinstance(fields, cls):
            return fields
        if fields.get("kind") not in KINDS:
            raise ValueError(f"not an instrumentation layout: kind {fields.get('kind')!r}")
        fields = dict(fields)
        fields["buffer"] = tuple(fields["buffer"])
        fields["points"] = tuple(Point(*point) for point in fields["points"])
        fields["blocks"] = tuple(CountedBlock(name, counter, tuple(Instr(*i) for i in instructions))
                                 for name, counter, instructions in fields["blocks"])
        return cls(**fields)

    def to_json(self) -> str:
        """The layout as one line of JSON (what the PTX comment and the sidecar hold)."""
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "Layout":
        return cls.from_dict(json.loads(text))


#: how an instrumented PTX file carries its layouts: one comment line per kernel
#: (`ptxkit.rewrite.plan.Plan.comment` writes ``// `` and this, then the layout's JSON)
MARK = "ptxkit-instrument: "
COMMENT_PREFIX = "// " + MARK


def layout_comment(layout: Layout) -> str:
    """The PTX comment line that carries `layout` (ptxas ignores it; `read_layouts` finds it).

    >>> layout_comment(Layout.count("k", [], 0))[:37]
    '// ptxkit-instrument: {"kind":"count"'
    """
    return COMMENT_PREFIX + layout.to_json()


def read_layouts(ptx: str) -> dict[str, Layout]:
    """The layouts that an instrumented PTX text carries, by kernel name.

    >>> text = ".version 8.0\\n" + layout_comment(Layout.count("k", [], 3)) + "\\n"
    >>> read_layouts(text)["k"].counters
    3
    """
    found = {}
    start = ptx.find(COMMENT_PREFIX)
    while start >= 0:
        end = ptx.find("\n", start)
        layout = Layout.from_json(ptx[start + len(COMMENT_PREFIX): end if end >= 0 else len(ptx)])
        found[layout.kernel] = layout
        start = ptx.find(COMMENT_PREFIX, start + 1)
    return found
