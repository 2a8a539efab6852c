"""The PTX that the instrumentation passes insert, as lists of statements.

Registers are the pass's fresh names (`TimelineRegisters`, `CountRegisters`); the buffer
layout is `ptxkit.instrument.layout`'s. Everything here is ordinary PTX ISA 8.0 (sm_70
and newer): special registers ``%globaltimer``, ``%clock64``, ``%smid``,
``%lanemask_eq``; ``activemask``; ``atom``/``red.global.add``.

Timeline: every thread runs the set-up at entry (its CTA's region, its warp's tag, the
writer predicate: lane 0 of a recorded warp) and every record's instructions, but only
the writer reserves slots and stores, so the other lanes pay issue slots, never memory
traffic. A record is the SM's cycle count (``%clock64``, a fast read) and a tag, one
8-byte store. ``%globaltimer``, a slow read, is read once per CTA, with ``%clock64``, by
thread 0 at entry and stored at its return, so no warp waits for it (the decoder places
each SM's cycles by these pairs). Warp w owns its first slots from the start (`chunk` of
them, fewer when the capacity cannot give every warp the block may have that many: a
constant, from ``.maxntid``/``.reqntid`` or 1024 threads); when it has used them, one
``atom.global.add`` on the CTA's counter gives it `chunk` more, after all the warps'
first ones. So a warp that writes at most `chunk` records needs no atomic at all. A
record past the CTA's capacity is not written, and counted.

Count: at a block's entry the lowest active lane of the warp adds 1 to the block's u64
counter (``red``, no return value): one atomic per warp execution, none per thread.

>>> r = TimelineRegisters(*(f"%{n}" for n in TimelineRegisters._fields))
>>> for line in timeline_record(r, point=3, end=True, capacity=255, chunk=8, first_shared=64)[:3]: print(line)
mov.u64 %time, %clock64;
setp.eq.and.u32 %pred, %slot, %slot_end, %writer;
@%pred atom.global.add.u32 %slot, [%region], 8;
"""

from __future__ import annotations

from .._records import Record
from .layout import END, HEADER_BYTES, MAGIC, RECORD_BYTES, VALID, WARP_SHIFT


class TimelineRegisters(Record):
    """Registers of the timeline code: kept from entry to exit (`region`, `entry_time`,
    `entry_clock` .b64, `tag`, `slot`, `slot_end` .b32, `writer`, `first_thread` .pred)
    and scratch (`time`, `address` .b64, `a`, `b`, `clock`, `low`, `high` .b32, `pred`,
    `dropped` .pred)."""

    region: str
    entry_time: str
    entry_clock: str
    tag: str
    slot: str
    slot_end: str
    writer: str
    first_thread: str
    time: str
    address: str
    a: str
    b: str
    clock: str
    low: str
    high: str
    pred: str
    dropped: str

    TYPES = {"region": ".b64", "entry_time": ".b64", "entry_clock": ".b64", "time": ".b64", "address": ".b64",
             "writer": ".pred", "first_thread": ".pred", "pred": ".pred", "dropped": ".pred"}


class CountRegisters(Record):
    """Registers of the count code: `row` (.b64, this CTA's counters) and `lane_bit`
    (.b32, ``%lanemask_eq``) kept; `mask`, `low` (.b32), `first` (.pred) scratch; `a`,
    `b` (.b32) and `offset` (.b64) for the set-up."""

    row: str
    lane_bit: str
    mask: str
    low: str
    first: str
    a: str
    b: str
    offset: str

    TYPES = {"row": ".b64", "offset": ".b64", "first": ".pred"}


def register_types(registers) -> dict[str, str]:
    """Field -> PTX register type of a registers record (``.b32`` unless it says).

    >>> register_types(CountRegisters)["row"], register_types(CountRegisters)["mask"]
    ('.b64', '.b32')
    """
    return {name: registers.TYPES.get(name, ".b32") for name in registers._fields}


def load_buffer(target: str, buffer: tuple) -> list[str]:
    """Load the buffer's global address into `target` (.b64): from kernel parameter
    ``("param", NAME)`` or from module variable ``("global", SYMBOL)``.

    >>> load_buffer("%rd9", ("global", "ptxkit_buffer"))
    ['ld.global.u64 %rd9, [ptxkit_buffer];', 'cvta.to.global.u64 %rd9, %rd9;']
    """
    kind, name = buffer
    space = {"param": "param", "global": "global"}[kind]
    return [f"ld.{space}.u64 {target}, [{name}];", f"cvta.to.global.u64 {target}, {target};"]


def linear_index(target: str, scratch: str, what: str) -> list[str]:
    """`target` = the linear thread (``what="tid"``) or CTA (``"ctaid"``) index:
    ``x + nx * (y + ny * z)``.

    >>> linear_index("%r1", "%r2", "ctaid")[:2]
    ['mov.u32 %r1, %ctaid.z;', 'mov.u32 %r2, %nctaid.y;']
    """
    count = {"tid": "ntid", "ctaid": "nctaid"}[what]
    return [f"mov.u32 {target}, %{what}.z;", f"mov.u32 {scratch}, %{count}.y;",
            f"mul.lo.u32 {target}, {target}, {scratch};", f"mov.u32 {scratch}, %{what}.y;",
            f"add.u32 {target}, {target}, {scratch};", f"mov.u32 {scratch}, %{count}.x;",
            f"mul.lo.u32 {target}, {target}, {scratch};", f"mov.u32 {scratch}, %{what}.x;",
            f"add.u32 {target}, {target}, {scratch};"]


def first_slots(capacity: int, chunk: int, max_threads: int) -> int:
    """The slots each warp owns from the start: `chunk`, or fewer when `capacity` cannot
    give that many to every warp of a block of `max_threads` threads.

    >>> first_slots(1024, 8, 1024), first_slots(100, 8, 1024), first_slots(100, 8, 256)
    (8, 3, 8)
    """
    return min(chunk, capacity // -(-max_threads // 32))


def timeline_setup(r: TimelineRegisters, buffer: tuple, region_bytes: int, warps: int | None, first: int) -> list[str]:
    """Entry code: `r.region` = this CTA's region, `r.tag` = the warp's tag bits,
    `r.writer` = lane 0 of a recorded warp (every `warps`-th warp; all when None), the
    warp's own `first` slots; thread 0 writes the header's SM id and magic word and reads
    ``%globaltimer`` and ``%clock64`` (stored at its return: `timeline_exit`)."""
    code = load_buffer(r.region, buffer)
    code += linear_index(r.a, r.b, "ctaid")
    code += [f"mul.wide.u32 {r.address}, {r.a}, {region_bytes};", f"add.u64 {r.region}, {r.region}, {r.address};"]
    code += linear_index(r.a, r.b, "tid")
    code += [f"and.b32 {r.b}, {r.a}, 31;", f"setp.eq.u32 {r.writer}, {r.b}, 0;",
             f"shr.u32 {r.b}, {r.a}, 5;"]
    if warps is not None and warps > 1:
        code += [f"rem.u32 {r.clock}, {r.b}, {warps};", f"setp.eq.and.u32 {r.writer}, {r.clock}, 0, {r.writer};"]
    return code + [
        f"shl.b32 {r.tag}, {r.b}, {WARP_SHIFT};", f"or.b32 {r.tag}, {r.tag}, {VALID:#010x};",
        f"mul.lo.u32 {r.slot}, {r.b}, {first};", f"add.u32 {r.slot_end}, {r.slot}, {first};",
        f"setp.eq.u32 {r.first_thread}, {r.a}, 0;", f"mov.u32 {r.b}, %smid;",
        f"@{r.first_thread} st.global.v2.u32 [{r.region}+8], {{{r.b}, {MAGIC:#010x}}};",
        f"@{r.first_thread} mov.u64 {r.entry_time}, %globaltimer;",
        f"@{r.first_thread} mov.u64 {r.entry_clock}, %clock64;"]


def timeline_exit(r: TimelineRegisters) -> list[str]:
    """Before a return: thread 0 stores the (``%globaltimer``, ``%clock64``) pair it read
    at entry into the header (the read's latency hidden by the whole kernel)."""
    return [f"@{r.first_thread} st.global.u64 [{r.region}+16], {r.entry_time};",
            f"@{r.first_thread} st.global.u64 [{r.region}+24], {r.entry_clock};"]


def timeline_record(r: TimelineRegisters, point: int, end: bool, capacity: int, chunk: int,
                    first_shared: int) -> list[str]:
    """One record: the SM's cycle count, then (writer only) a slot from the warp's own
    ones (`chunk` more from the CTA's counter, after the `first_shared` slots the warps
    own, when they are used up), the 8-byte store if the slot is within `capacity`, else
    the header's dropped count raised."""
    tag = point | (END if end else 0)
    return [
        f"mov.u64 {r.time}, %clock64;",
        f"setp.eq.and.u32 {r.pred}, {r.slot}, {r.slot_end}, {r.writer};",
        f"@{r.pred} atom.global.add.u32 {r.slot}, [{r.region}], {chunk};",
        f"@{r.pred} add.u32 {r.slot}, {r.slot}, {first_shared};",
        f"@{r.pred} add.u32 {r.slot_end}, {r.slot}, {chunk};",
        f"setp.lt.and.u32 {r.pred}|{r.dropped}, {r.slot}, {capacity}, {r.writer};",
        f"mul.wide.u32 {r.address}, {r.slot}, {RECORD_BYTES};",
        f"add.u64 {r.address}, {r.region}, {r.address};",
        f"or.b32 {r.a}, {r.tag}, {tag:#x};",
        f"mov.b64 {{{r.low}, {r.high}}}, {r.time};",
        f"@{r.pred} st.global.v2.b32 [{r.address}+{HEADER_BYTES}], {{{r.low}, {r.a}}};",
        f"@{r.dropped} red.global.add.u32 [{r.region}+4], 1;",
        f"add.u32 {r.slot}, {r.slot}, 1;",
    ]


def count_setup(r: CountRegisters, buffer: tuple, row_bytes: int, per_cta: bool) -> list[str]:
    """Entry code: `r.row` = this CTA's counters (or the one shared row), `r.lane_bit`."""
    code = load_buffer(r.row, buffer)
    if per_cta:
        code += linear_index(r.a, r.b, "ctaid")
        code += [f"mul.wide.u32 {r.offset}, {r.a}, {row_bytes};", f"add.u64 {r.row}, {r.row}, {r.offset};"]
    return code + [f"mov.u32 {r.lane_bit}, %lanemask_eq;"]


def count_increment(r: CountRegisters, counter: int) -> list[str]:
    """Add 1 to counter `counter` from the warp's lowest active lane.

    >>> r = CountRegisters(*(f"%{n}" for n in CountRegisters._fields))
    >>> count_increment(r, 2)[-1]
    '@%first red.global.add.u64 [%row+16], 1;'
    """
    return [f"activemask.b32 {r.mask};", f"neg.s32 {r.low}, {r.mask};", f"and.b32 {r.low}, {r.low}, {r.mask};",
            f"setp.eq.u32 {r.first}, {r.low}, {r.lane_bit};",
            f"@{r.first} red.global.add.u64 [{r.row}+{8 * counter}], 1;"]
