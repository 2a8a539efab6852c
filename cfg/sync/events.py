"""What each instruction of a kernel does, as far as the proxy analysis cares.

`classify(flow, options)` turns every instruction of a (possibly inlined) flow graph
into zero or more `Event`s: generic writes and reads with the `Location`s they touch,
``mbarrier.init``, ``cp.async`` and its waits, proxy fences, async-proxy operations
with their footprints, and the arrive/wait sides of hand-offs between threads. The
addresses come from one run of `ptxkit.cfg.values.registers` over all the operands that
matter; the opcode facts from `ptxkit.isa` (docs/fence.md §2, §3).

>>> import ptxkit
>>> from ptxkit.cfg.flow.inline import inlined_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .b32 %r<4>;\\n.shared .align 8 .b8 tile[256];\\n.shared .align 8 .b64 bar;\\n"
...     "\\tmov.u32 %r1, tile;\\n\\tst.shared.u32 [%r1+16], 0;\\n\\tmov.u32 %r2, bar;\\n"
...     "\\tmbarrier.arrive.shared::cta.b64 _, [%r2];\\n\\tbar.sync 1, 64;\\n\\tret;\\n}\\n")
>>> events = classify(inlined_graph(m.function("k")), EventOptions())
>>> [(e.position, e.kind.value, describe(e)) for e in events.by_block[0]]
[(1, 'write', 'tile[16:20]'), (3, 'arrive', 'mbarrier bar[0:8]'), (4, 'arrive+wait', 'named barrier 1')]
"""

from __future__ import annotations

import bisect
import enum
import functools

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit._regex import compile as compile_pattern
from ptxkit.cfg.flow.inline import call_target
from ptxkit.cfg.flow.operands import destinations
from ptxkit.cfg.sync.locations import (
    CLUSTER, CTA, GLOBAL, SHARED, SPACE_BITS, Location, bounded, covers, descriptor_location, descriptor_swizzle,
    everywhere, in_root, of_atom, overlaps, space_bits,
)
from ptxkit.cfg.values.escape import shared_pointer_registers
from ptxkit.cfg.values.frames import stack_frames
from ptxkit.cfg.values.registers import analyse_registers
from ptxkit.cfg.values.specials import PORTABLE_CLUSTER, special_ranges
from ptxkit.cfg.values.symbols import PLAIN_REGISTERS, symbol_regions
from ptxkit.cfg.values.thread_sets import runners
from ptxkit.cfg.values.values import (
    GENERIC, GLOBAL_SPACE_NAME, INF, LOCAL_SPACE, NUM, OTHER_SPACE, SHARED_CLUSTER_SPACE, SHARED_CTA_SPACE, TOP_FORM,
    WINDOW, Atom, constant, integers,
)
from ptxkit.instruction import head_of
from ptxkit.isa import (
    SPACE_OF_MODIFIER, AsyncForm, Effect, Sync, SyncObject, access_width, async_form, is_benign_extern, proxy_effect,
    sync_effect,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
    from typing import Literal, TypeAlias, TypeGuard

    from ptxkit.cfg.flow.graph import FlowGraph, HeadTuple
    from ptxkit.cfg.sync.protocols import ByThread, MbarrierOp, NamedBarrierOp, Pinned
    from ptxkit.cfg.values.registers import RegisterAnswers
    from ptxkit.cfg.values.values import Region, Value
    from ptxkit.instruction import Guard, Operand
    from ptxkit.isa import ProxyEffect, SyncEffect
    from ptxkit.syntax import Instruction, Module

    #: Register -> the ``(block, position)`` pairs that write it (`ptxkit.cfg.values.divergence.definitions`).
    Definitions = dict[str, tuple[tuple[int, int], ...]]
    #: A question put to `ptxkit.cfg.values.registers.analyse_registers` (`_Classifier.ask`):
    #: the block and position of the instruction, and how many were asked before.
    Query = tuple[int, int, int]
    #: The object of a hand-off (`Event.sync`): the ids a named barrier may have (None: any),
    #: an mbarrier's location, the ``id`` of a ``bar.warp.sync`` instruction, or the cluster barrier.
    SyncKey = (tuple[Literal[SyncObject.NAMED_BARRIER], frozenset[int] | None]
               | tuple[Literal[SyncObject.MBARRIER], Location]
               | tuple[Literal[SyncObject.WARP], int]
               | tuple[Literal[SyncObject.CLUSTER_BARRIER]])
    #: `Event.detail`: whether a ``cp.async`` wait waits for every copy, why an async op's
    #: footprint is unknown or what kind of arrive it is (a string), a tensor copy's `Box`,
    #: or an extern call's ``(callee, policy)``.
    Detail: TypeAlias = "bool | str | Box | tuple[str | None, str] | None"
    #: What one instruction becomes once the register values are known: its events.
    Builder = Callable[["_Classifier"], list["Event"]]
    #: `Events.touches`: may some thread's access (block, event) overlap one of the targets?
    Touches = Callable[[int, "Event", Collection[Location]], bool | None]
    #: `Events.relocate`: the bytes (block, event) touches where registers held given
    #: numbers on entry to joins (``{(register, join block): number}``).
    Relocate = Callable[[int, "Event", Mapping[tuple[str, int], int]], "tuple[Location, ...] | None"]
    #: `Events.issued`: what (block, event) reads and writes in the threads that may run its block.
    Issued = Callable[[int, "Event"], "tuple[tuple[Location, ...], tuple[Location, ...]] | None"]
    #: The bytes one access touches: a number, or the query of its size operand (bulk stores).
    Width = int | tuple[Literal["size"], Query]
    #: The size operand `_Classifier._copy` gets: a tensor load's share of the armed bytes,
    #: the query of a size operand, a number of bytes, or None.
    CopySize = int | tuple[Literal["share"], int] | tuple[Literal["size"], Query | None] | None

class Kind(enum.Enum):
    """The kinds of `Event`.

    >>> Kind.ARRIVE_WAIT.value
    'arrive+wait'
    """

    WRITE = "write"  # a generic write of `locations`
    READ = "read"  # a generic read of `locations`
    INIT = "mbarrier.init"  # a generic write of the mbarrier at `locations`
    CP_ASYNC = "cp.async"  # a generic write of `locations` that completes later
    CP_ASYNC_WAIT = "cp.async wait"  # `complete`: all earlier cp.async writes are done
    FENCE = "fence"  # a proxy fence ordering `spaces`
    INIT_FENCE = "mbarrier_init fence"
    ASYNC = "async"  # an async-proxy op reading `locations`, writing `writes`, completing on `mbarrier`
    EXTERN = "extern"  # a call the analysis cannot see into
    ARRIVE = "arrive"  # this thread's pending accesses are handed to waiters of `sync`
    WAIT = "wait"  # the accesses handed to `sync` become pending here
    ARRIVE_WAIT = "arrive+wait"  # both, in that order (bar.sync)
    INSERTED = "inserted fence"  # a fence the pass plans to insert (hoisted or writer side)


#: `Event.detail` of a ``barrier.cluster.arrive`` that releases at cluster scope
RELEASE = "release"
#: `Event.detail` of a planned ``fence.mbarrier_init.release.cluster``
RELEASES_INITS = "releases inits"


class Event(Record):
    """One effect of one instruction (`position` in its block).

    `locations`: what a write/read/init/cp.async touches, or what an async op reads;
    `writes`: what an async op writes; `mbarrier`: the mbarrier an async op completes
    on; `spaces`: what a fence orders (bits of `ptxkit.cfg.sync.locations`), or the
    windows an async op uses; `sync`: the hand-off object key; `cross`: the hand-off
    may cross CTAs (cluster barrier, remote mbarrier, multicast), or the async op may
    touch another CTA's shared memory (multicast, a remote destination, a pair of
    CTAs with ``cta_group::2``); `detail`: the
    callee of an extern call, or why an async op's footprint is unknown.
    """

    position: int
    kind: Kind
    guard: "Guard | None" = None
    locations: tuple[Location, ...] = ()
    writes: tuple[Location, ...] = ()
    mbarrier: Location | None = None
    spaces: int = 0
    sync: "SyncKey | None" = None
    cross: bool = False
    detail: "Detail" = None


def on_a_named_barrier(event: Event) -> TypeGuard[NamedBarrierOp]:
    """True for an arrive or wait on a named barrier (``bar``, ``barrier``).

    >>> on_a_named_barrier(Event(0, Kind.ARRIVE_WAIT, sync=(SyncObject.NAMED_BARRIER, frozenset({1}))))
    True
    """
    return event.sync is not None and event.sync[0] is SyncObject.NAMED_BARRIER


def on_an_mbarrier(event: Event) -> TypeGuard[MbarrierOp]:
    """True for an arrive or wait on an mbarrier.

    >>> on_an_mbarrier(Event(0, Kind.WAIT, sync=(SyncObject.MBARRIER, everywhere(SHARED))))
    True
    """
    return event.sync is not None and event.sync[0] is SyncObject.MBARRIER


class EventOptions(Record):
    """What the classification models: `tracked` proxy spaces (bits), what an extern
    call may do (`extern_policy`: none, clobber, strict), whether a forced
    ``.shared::cta`` fence variant counts for both shared windows, and how many CTAs a
    cluster may have when the kernel does not say (`max_cluster`).

    >>> EventOptions().tracked == SHARED
    True
    """

    tracked: int = SHARED
    extern_policy: str = "clobber"
    cta_fence_covers_cluster: bool = False
    max_cluster: int = PORTABLE_CLUSTER


class Events(Record):
    """The events of every block, the warnings met on the way, the blocks the branch
    conditions prove unreachable, `touches(block, event, targets)`: may some
    thread's access `event` overlap one of `targets`, its address taken thread by
    thread (None: it does not follow the thread index; docs/fence.md §3.6),
    `relocate(block, event, entry_values)`: the bytes a ``cp.async`` or async op touches
    where registers held given numbers on entry to joins (None: no narrower than its
    locations; docs/fence.md §3.7), `joins_feeding(block, event)`: the ``(register,
    join block)`` pairs whose numbers there can narrow them, and `issued(block, event)`:
    what an async op reads and writes in the threads that may run its block, ``(locations,
    writes)`` (None: no narrower; docs/fence.md §3.6)."""

    by_block: list[list[Event]]
    warnings: "list[tuple[Instruction, str]]"
    dead: set[int]
    touches: "Touches"
    relocate: "Relocate"
    joins_feeding: "Callable[[int, Event], frozenset[tuple[str, int]]]"
    issued: "Issued"


def describe(event: Event) -> str:
    """The object or location an event is about, in words (for messages and tests)."""
    sync = event.sync
    if sync is not None:
        if sync[0] is SyncObject.NAMED_BARRIER:
            ids = sync[1]
            return f"named barrier {'any' if ids is None else ' or '.join(map(str, sorted(ids)))}"
        if sync[0] is SyncObject.MBARRIER:
            return f"mbarrier {sync[1]}"
        name: str = sync[0].value
        return name
    parts = [str(loc) for loc in event.locations] + [f"writes {loc}" for loc in event.writes]
    return ", ".join(parts)


# -- operand shapes ----------------------------------------------------------------------------

_SHAPE = compile_pattern(r"m(\d+)n(\d+)k(\d+)")
_COPY_SHAPE = compile_pattern(r"(\d+)x(\d+)b$")
_SIXTEEN_BIT = frozenset({"f16", "bf16"})
#: tcgen05.mma kinds whose dense shapes read 32 bytes of K from each row of A and B
_DENSE_32_BYTE_KINDS = frozenset(["kind::f16", "kind::tf32", "kind::f8f6f4", "kind::i8", "kind::mxf8f6f4",
                                  "kind::mxf4", "kind::mxf4nvf4"])


def _running(threads: int, low: int, high: int) -> int:
    """The threads of ``[low, high]`` in the mask `threads`, from bit 0.

    >>> bin(_running(0b10110, 1, 3))
    '0b11'
    """
    return threads >> low & ((2 << (high - low)) - 1)


def _hits(low: int, high: int, meets: Callable[[int, int], bool], threads: int, budget: int) -> bool:
    """Whether one thread of ``[low, high]`` that may run the access (`threads`) `meets` a
    target: depth first, the lower half first, without recursion; after `budget` address
    evaluations a range that meets one counts as a hit (`_Classifier.touches`).

    >>> _hits(0, 3, lambda low, high: low <= 2 <= high, 0b1111, 256), _hits(0, 3, lambda low, high: False, 0b1111, 256)
    (True, False)
    """
    halves = [(low, high)]
    while halves:
        low, high = halves.pop()
        if not _running(threads, low, high) or not meets(low, high):
            continue
        if low == high or budget <= 0:
            return True
        budget -= 2
        split = high >> ((low ^ high).bit_length() - 1) << ((low ^ high).bit_length() - 1)
        halves += ((split, high), (low, split - 1))
    return False


# What `_Classifier.classify` builds are partials of these, not closures: compiled, a
# nested function keeps what its siblings capture, and an environment that held the list of
# parts (or the function itself) would make a cycle only the collector frees
# (docs/architecture.md §5).
def _located_events(access: _Access, c: _Classifier) -> list[Event]:
    """The events of `access` (`_Classifier._located`)."""
    return c._located(access)


def _events_of_parts(parts: tuple[Builder, ...], c: _Classifier) -> list[Event]:
    """The events each of `parts` builds, in order."""
    return [event for part in parts for event in part(c)]


def _memory_index(operands: Sequence[Operand], start: int = 0) -> int | None:
    for index in range(start, len(operands)):
        if operands[index].kind == "memory":
            return index
    return None


# -- classification -------------------------------------------------------------------------------


class _Access(Record):
    """A memory access, as `_Classifier._located` makes its event: the event's position,
    kind and guard; the query of its address; its width; the spaces its opcode names;
    whether it addresses generically, and then how it names its address (`_pointer`)."""

    position: int
    kind: Kind
    guard: "Guard | None"
    address: "Query"
    width: "Width"
    named: int
    generic: bool
    pointer: str | None


class _Classifier:
    # set by `run`, from the answers of `analyse_registers`
    values: dict[Query, Value]
    by_thread: ByThread
    pinned: Pinned
    joins_read: Callable[[Query], frozenset[tuple[str, int]]]
    siblings: dict[tuple[int, int], int]
    expect_tx: list[tuple[Location, int | None]]

    def __init__(self, flow: FlowGraph, options: EventOptions) -> None:
        self.flow = flow
        self.options = options
        self.queries: dict[Query, tuple[int, int, Operand | str]] = {}
        self.armed: list[tuple[Query, Query]] = []  # (mbarrier key, transaction-count key) of every expect_tx
        self.warnings: list[tuple[Instruction, str]] = []
        # a call edge starts at a block (the entry's one edge is of kind "entry")
        self.inlined = {(u, len(flow.blocks[u].instructions) - 1)  # type: ignore[index]
                        for (u, v), kind in flow.kinds.items() if "call" in kind.split(",")}
        self.inert: dict[str, bool] = {}  # .func name -> whether a call of it does nothing tracked (`inert`)
        self._shared_pointers: set[str] | None = None
        self.boxes = False  # a tensor copy, whose box `run` ends
        self.tensor_boxes: list[Query] = []  # the shared-memory address keys of tensor copies
        self.swizzled: list[tuple[Query, bool]] = []  # the MMAs' descriptor keys, and whether tcgen05's
        self.accesses: dict[tuple[int, int], _Access] = {}  # (block, position) -> its access, for `_located`
        self.thread_range: tuple[int, int] | None = None  # the bounds of %tid.x, once `touches` needs them
        # (block, position) -> {(low, high): locations of those threads' access}
        self.ranges_located: dict[tuple[int, int], dict[tuple[int, int], list[Location]]] = {}
        # (block, position) -> the builder of a cp.async or an async op, for `relocate`
        self.rebuild: dict[tuple[int, int], Builder] = {}
        self._asked: dict[tuple[int, int], list[Query]] | None = None  # `_asked_at`'s index

    def ask(self, block: int, position: int, operand: Operand | str) -> Query:
        key = (block, position, len(self.queries))
        self.queries[key] = (block, position, operand)
        return key

    def run(self) -> Events:
        flow = self.flow
        builders: list[list[Builder]] = [[] for _ in flow.blocks]
        self.siblings = _tensor_load_siblings(flow)
        quiet = _quiet_opcodes(flow)
        for block in flow.blocks:
            for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
                if head[1] in quiet:
                    continue  # most instructions: no operand is looked at
                builder = self.classify(block.index, position, instruction, head)
                if builder is not None:
                    builders[block.index].append(builder)
        aligned: dict[Region, int] = {}
        answers: RegisterAnswers | None = None
        shown = self.tensor_boxes + [key for key, _ in self.swizzled]
        if shown and _less_aligned(flow, SWIZZLE_ALIGN if self.swizzled else TENSOR_BOX_ALIGN):
            # first the tensor copies' and the MMAs' addresses: what alignment they show; a -G
            # build solves its values in rounds, for its stack: ask every question in them and
            # keep the answers when the copies show no alignment the kernel does not declare
            everything = stack_frames(flow) is not None
            asked = self.queries if everything else {key: self.queries[key] for key in shown}
            first = analyse_registers(flow, asked, self.options.max_cluster)
            aligned = _shown_alignment([first.values[key] for key in self.tensor_boxes],
                                       [(first.values[key], tcgen05) for key, tcgen05 in self.swizzled])
            if everything and not aligned:
                answers = first
            del first  # unless kept as the answers, its analysis goes before the next one is built
        if answers is None:
            answers = analyse_registers(flow, self.queries, self.options.max_cluster, aligned)
        self.values, dead, self.by_thread, self.pinned, self.joins_read = answers
        self.expect_tx = [(self._mbarrier(mbar), _most(self.value(count))) for mbar, count in self.armed]
        by_block: list[list[Event]] = [[] if index in dead else [event for builder in items for event in builder(self)]
                                       for index, items in enumerate(builders)]
        _one_start_per_object(by_block)
        if self.boxes:
            _close_boxes(by_block)
        return Events(by_block, self.warnings, dead, self.touches, self.relocate, self.joins_feeding, self.issued)

    def value(self, key: Query) -> Value:
        return self.values[key]

    # -- thread by thread ---------------------------------------------------------------------
    #: address evaluations one access may cost `touches` before it answers "may overlap"
    THREAD_BUDGET = 256

    def touches(self, block: int, event: Event, targets: Collection[Location]) -> bool | None:
        """May some thread's access `event` (of `block`) overlap one of `targets`? The
        threads are split by their ``%tid.x``, high bits first, until each part's
        address misses every target or one thread's hits (docs/fence.md §3.6). None
        when the address does not follow the thread index: the answer is the one its
        location already gives."""
        access = self.accesses.get((block, event.position))
        if access is None:
            return None
        if self.thread_range is None:
            self.thread_range = special_ranges(self.flow.function, self.options.max_cluster)["%tid.x"]
        low, high = self.thread_range
        value = self.by_thread(access.address, low, high)
        if value is None:
            return None
        threads = runners(self.flow)[block]  # only the threads that may run the block make the access
        # what each range of threads touches, kept for the access's other targets (the
        # proxy analysis asks one access about several)
        located = self.ranges_located.setdefault((block, event.position), {})

        def meets(low: int, high: int) -> bool:
            found = located.get((low, high))
            if found is None:
                theirs = value if (low, high) == self.thread_range else self.by_thread(access.address, low, high)
                found = located[(low, high)] = [location for part in self._located(access, value=theirs)
                                                for location in part.locations]
            return any(overlaps(location, target) for location in found for target in targets)

        mine = _running(threads, low, high)
        if not mine:
            return False
        # a real hazard is usually one the first thread has: one evaluation, not a descent
        first = (mine & -mine).bit_length() - 1 + low
        return meets(low, high) and (meets(first, first) or _hits(low, high, meets, threads, self.THREAD_BUDGET))

    def relocate(self, block: int, event: Event, entry_values: Mapping[tuple[str, int], int]
                 ) -> tuple[Location, ...] | None:
        """The bytes the ``cp.async`` or async op `event` of `block` reads or writes where each
        register ``key`` held ``entry_values[(key, join)]`` on the last entry into block
        `join` (`RegisterAnswers.pinned`, docs/fence.md §3.7); None where no address of it
        follows those numbers, or what they give is not inside the event's locations."""
        built = self.rebuild.get((block, event.position))
        if built is None or not entry_values:
            return None
        narrowed = {}
        for key in self._asked_at(block, event.position):
            value = self.pinned(key, entry_values)
            if value is not None:
                narrowed[key] = value
        same = self._rebuilt(built, event, narrowed) if narrowed else None
        if same is None:
            return None
        found = (*same.locations, *same.writes)
        return found if found and _inside(found, event) else None

    def issued(self, block: int, event: Event) -> tuple[tuple[Location, ...], tuple[Location, ...]] | None:
        """What the async op `event` of `block` reads and writes (``(locations, writes)``)
        with its addresses taken for the threads that may run `block` alone, run by run
        (docs/fence.md §3.6: a warpgroup's copies at ``buf + 1024 * w``); None where no
        address of it follows the thread index, or what they give is not inside the
        event's own bytes."""
        built = self.rebuild.get((block, event.position))
        runs = _runs(runners(self.flow)[block])
        if built is None or not runs or len(runs) > self.RUN_LIMIT:
            return None
        keys = self._asked_at(block, event.position)
        locations: list[Location] = []
        writes: list[Location] = []
        for low, high in runs:
            narrowed = {}
            for key in keys:
                value = self.by_thread(key, low, high)
                if value is not None:
                    narrowed[key] = value
            same = self._rebuilt(built, event, narrowed) if narrowed else None
            if same is None:
                return None
            locations += (location for location in same.locations if location not in locations)
            writes += (location for location in same.writes if location not in writes)
        return (tuple(locations), tuple(writes)) if _inside((*locations, *writes), event) else None

    def _rebuilt(self, built: Builder, event: Event, narrowed: Mapping[Query, Value]) -> Event | None:
        """The event of `event`'s kind that `built` makes with the `narrowed` values in
        place of the analysis's (the analysis's values unchanged afterwards)."""
        values = self.values
        self.values = {**values, **narrowed}
        try:
            return next((other for other in built(self) if other.kind is event.kind), None)
        finally:
            self.values = values

    def joins_feeding(self, block: int, event: Event) -> frozenset[tuple[str, int]]:
        """The ``(register, join block)`` pairs whose numbers `relocate` may take for the
        ``cp.async`` or async op `event` of `block`."""
        if (block, event.position) not in self.rebuild:
            return frozenset()
        return frozenset(pair for key in self._asked_at(block, event.position) for pair in self.joins_read(key))

    def _asked_at(self, block: int, position: int) -> list[Query]:
        """The queries of the instruction at `position` of `block` (indexed the first time)."""
        if self._asked is None:
            self._asked = {}
            for key in self.queries:
                self._asked.setdefault((key[0], key[1]), []).append(key)
        return self._asked.get((block, position), [])

    #: thread runs of one block beyond which a barrier id is not asked thread by thread
    RUN_LIMIT = 32

    def _ids_of_runners(self, block: int, key: Query, ids: frozenset[int] | None) -> frozenset[int] | None:
        """The ids a named barrier operand may take in the threads that may run `block`
        (docs/fence.md §4.1): an id that follows ``%tid.x``, such as a warpgroup's own
        barrier ``4 + %tid.x / 128``, evaluated over each run of those threads; `ids`
        (the value for all threads) when it does not follow the thread index."""
        runs = _runs(runners(self.flow)[block])
        if not runs or len(runs) > self.RUN_LIMIT:
            return ids
        found: set[int] = set()
        for low, high in runs:
            value = self.by_thread(key, low, high)
            some = integers(value, 16) if value is not None else None
            if some is None:
                return ids
            found |= some
        return frozenset(found) if ids is None else frozenset(found) & ids

    # -- one instruction --------------------------------------------------------------------
    def classify(self, block: int, position: int, instruction: Instruction, head: HeadTuple) -> Builder | None:
        """What one instruction makes (`run` passes none of the `_quiet_opcodes`)."""
        guard, opcode, base, _ = head
        effect = proxy_effect(opcode)
        kind = effect.kind
        sync = sync_effect(opcode)
        operands = instruction.operands
        modifiers = opcode.split(".")[1:]
        tracked = self.options.tracked
        parts: list[Builder] = []
        if kind in (Effect.WRITE, Effect.READ, Effect.ADDRESS_WRITE, Effect.ADDRESS_READ, Effect.MBARRIER_INIT,
                    Effect.CP_ASYNC):
            at = _memory_index(operands, 1 if kind in (Effect.READ, Effect.ADDRESS_READ) or base == "atom" else 0)
            if at is None:
                return None
            width = self._width(block, position, base, modifiers, operands)
            address = self.ask(block, position, operands[at])
            event_kind = {Effect.WRITE: Kind.WRITE, Effect.ADDRESS_WRITE: Kind.WRITE, Effect.READ: Kind.READ,
                          Effect.ADDRESS_READ: Kind.READ, Effect.MBARRIER_INIT: Kind.INIT,
                          Effect.CP_ASYNC: Kind.CP_ASYNC}[kind]
            named = space_bits(effect.spaces)
            generic = kind in (Effect.ADDRESS_WRITE, Effect.ADDRESS_READ) or (kind is Effect.MBARRIER_INIT
                                                                               and not named)
            pointer = self._pointer(block, operands[at]) if generic else None
            access = _Access(position, event_kind, guard, address, width, named, generic, pointer)
            self.accesses[(block, position)] = access
            lanes = _address_lanes(base, modifiers)
            if lanes is not None:  # only some lanes' addresses count: locate those
                parts.append(lambda c: c._located(access, value=c.by_thread(address, 0, lanes - 1, "%laneid")))
            else:  # most
                parts.append(functools.partial(_located_events, access))
        elif kind is Effect.CP_ASYNC_WAIT:
            complete = opcode.startswith("cp.async.wait_all") or (
                bool(operands) and operands[0].kind == "immediate" and operands[0].value == 0)
            parts.append(lambda c: [Event(position, Kind.CP_ASYNC_WAIT, guard, locations=(everywhere(CTA),),
                                          detail=bool(complete))])
        elif kind is Effect.FENCE:
            spaces = space_bits(effect.spaces)
            if self.options.cta_fence_covers_cluster and spaces & SHARED:
                spaces |= SHARED
            parts.append(lambda c: [Event(position, Kind.FENCE, guard, spaces=spaces & tracked)])
        elif kind is Effect.INIT_FENCE:
            parts.append(lambda c: [Event(position, Kind.INIT_FENCE, guard, spaces=CTA)])
        elif kind is Effect.ASYNC:
            parts.append(self._async(block, position, instruction, head, effect))
        elif kind is Effect.CALL:
            call = self._call(block, position, instruction, guard)
            if call is not None:
                parts.append(call)
        if sync is not None:
            parts.append(self._sync(block, position, instruction, head, sync))
        elif opcode.startswith("tcgen05.commit") and (barrier := _memory_index(operands)) is not None:
            address = self.ask(block, position, operands[barrier])
            parts.append(lambda c: [Event(position, Kind.ASYNC, guard, mbarrier=c._mbarrier(address))])
        if opcode.startswith(("mbarrier.arrive.expect_tx", "mbarrier.expect_tx")):
            at = _memory_index(operands)
            if at is not None and at + 1 < len(operands):
                self.armed.append((self.ask(block, position, operands[at]), self.ask(block, position, operands[at + 1])))
        if opcode.startswith(("st.async", "red.async")) and len(operands) > 2 and operands[2].kind == "memory":
            remote = self.ask(block, position, operands[2])  # complete_tx on the receiver's mbarrier
            parts.append(lambda c: [Event(position, Kind.ARRIVE, guard, sync=(SyncObject.MBARRIER, c._mbarrier(remote)),
                                          cross=True, detail="complete_tx")])
        if len(parts) < 2:  # most: one part, which builds the events itself
            built = parts[0] if parts else None
        else:
            built = functools.partial(_events_of_parts, tuple(parts))
        if built is not None and kind in (Effect.CP_ASYNC, Effect.ASYNC):
            self.rebuild[(block, position)] = built
        return built

    def _width(self, block: int, position: int, base: str, modifiers: list[str], operands: Sequence[Operand]) -> Width:
        if base in ("stmatrix", "ldmatrix"):
            return 16
        if base == "mbarrier":
            return 8
        if base == "cp" and len(operands) > 2:  # cp.async [dst], [src], cp-size
            size = operands[2]
            return int(size.value) if size.kind == "immediate" else 16  # type: ignore[arg-type]  # it has a value
        if base == "st" and "bulk" in modifiers and len(operands) > 1:
            return ("size", self.ask(block, position, operands[1]))
        return access_width(modifiers)

    def _pointer(self, block: int, memory: Operand) -> str | None:
        """How a generic access names its address: the register's key, or ``symbol``
        for a variable used directly (its generic address)."""
        base: Operand | None = memory.elements[0] if memory.elements else None
        if base is None or base.kind not in ("register", "symbol"):
            return None
        context = self.flow.blocks[block].context
        prefix = context.prefix if context is not None else ""
        if base.kind == "symbol" and base.name not in PLAIN_REGISTERS.of(self.flow)[block]:
            return "symbol"
        return prefix + base.name  # type: ignore[operator]  # a register or symbol operand has a name

    def _tainted(self) -> set[str]:
        if self._shared_pointers is None:
            self._shared_pointers = shared_pointer_registers(self.flow)
        return self._shared_pointers

    def _located(self, access: _Access, value: Value | None = None) -> list[Event]:
        """The event of an access through its address (or, given, its `value`)."""
        width, generic, pointer = access.width, access.generic, access.pointer
        if isinstance(width, tuple):
            width = _most(self.value(width[1])) or INF
        if value is None:
            value = self.value(access.address)
        if generic and pointer == "symbol":  # a variable named in a generic access: its generic address
            value = tuple(atom._replace(form=GENERIC) if atom.form == WINDOW
                          else atom for atom in value)
        elif generic and not all(atom.form == GENERIC for atom in value) and (
                pointer is None or pointer not in self._tainted()):
            # no generic shared address can reach this pointer: global or local memory
            value = tuple(atom if atom.form == GENERIC else Atom(GENERIC, GLOBAL_SPACE_NAME, None, 0, INF)
                          for atom in value)
        tracked = self.options.tracked
        locations = tuple(Location(loc.space & tracked, loc.region, loc.start, loc.end)
                          for loc in self._locations(value, width, access.named, generic) if loc.space & tracked)
        if not locations:
            return []
        return [Event(access.position, access.kind, access.guard, locations=locations)]

    def _locations(self, value: Value, width: int, named: int, generic: bool) -> tuple[Location, ...]:
        """Where an access through `value` lands: its atoms, in the opcode's space
        (`named`) or, for generic addressing, in the space each atom points to."""
        out: list[Location] = []
        for atom in value:
            if generic:
                if atom.form != GENERIC:
                    return (everywhere(SHARED | GLOBAL),)
                if atom.space in (LOCAL_SPACE, OTHER_SPACE):
                    continue
                # a generic address names the space it points to
                out.append(of_atom(atom, width, SPACE_BITS[atom.space]))  # type: ignore[index]
                continue
            if named & SHARED and (atom.form == WINDOW and atom.space in (SHARED_CTA_SPACE, SHARED_CLUSTER_SPACE)
                                   or atom.form == GENERIC and atom.space == SHARED_CTA_SPACE):
                # the window the opcode names (a .shared::cluster access of our own bytes
                # is still a cluster-window access, docs/fence.md §5.3); a generic address
                # of our own shared memory names its window address's bytes (docs/fence.md §8)
                space = (named & SHARED) | SPACE_BITS[atom.space]
                out.append(of_atom(atom, width, CLUSTER if space & CLUSTER else CTA))
            elif atom.form == TOP_FORM or atom.form == NUM or atom.form == WINDOW:
                out.append(everywhere(named or SHARED))
            else:
                out.append(everywhere(named or SHARED | GLOBAL))
        return tuple(out)

    # -- async ops ---------------------------------------------------------------------------
    def _async(self, block: int, position: int, instruction: Instruction, head: HeadTuple,
               effect: ProxyEffect) -> Builder:
        guard, opcode, _, _ = head
        form = async_form(opcode)
        operands = instruction.operands
        modifiers = opcode.split(".")[1:]
        spaces = space_bits(effect.spaces)
        cross = any(m.startswith("multicast") for m in modifiers)
        if effect.unknown or form is AsyncForm.UNKNOWN:
            self.warnings.append((instruction, f"unknown async-looking opcode '{opcode}': treated as an async-proxy "
                                               "read and write of all shared memory"))
            return lambda c: [Event(position, Kind.ASYNC, guard, locations=(everywhere(SHARED),),
                                    writes=(everywhere(SHARED),), spaces=spaces, detail="unknown opcode")]
        if form in (AsyncForm.WGMMA, AsyncForm.TCGEN05_MMA, AsyncForm.TCGEN05_CP):
            return self._matrix(block, position, operands, modifiers, form, guard, spaces)
        dst: Query | None  # the address queries of what a copy writes and reads
        src: Query | None
        if form is AsyncForm.TENSOR_LOAD:
            dst = self.ask(block, position, operands[0])
            self.tensor_boxes.append(dst)
            mbar = self.ask(block, position, operands[2]) if len(operands) > 2 and operands[2].kind == "memory" \
                else None
            share = self.siblings.get((block, position), 1)
            return lambda c: c._copy(position, guard, spaces, dst, None, mbar, ("share", share), cross, "tensor")
        if form is AsyncForm.TENSOR_STORE:
            src = self.ask(block, position, operands[1])
            self.tensor_boxes.append(src)
            return lambda c: c._copy(position, guard, spaces, None, src, None, None, cross, "tensor")
        if form is AsyncForm.TRY_CANCEL:
            dst = self.ask(block, position, operands[0])
            mbar = self.ask(block, position, operands[1]) if len(operands) > 1 else None
            return lambda c: c._copy(position, guard, spaces, dst, None, mbar, 16, cross, "response")
        # bulk copies: [dst], [src], size {, [mbar]}
        names = [m for m in modifiers if m in SPACE_OF_MODIFIER]
        dst_shared = bool(names) and names[0].startswith("shared")
        src_shared = len(names) > 1 and names[1].startswith("shared")
        dst = self.ask(block, position, operands[0]) if dst_shared else None
        src = self.ask(block, position, operands[1]) if src_shared and len(operands) > 1 else None
        size = self.ask(block, position, operands[2]) if len(operands) > 2 else None
        mbar = self.ask(block, position, operands[3]) if len(operands) > 3 and operands[3].kind == "memory" else None
        reduce = opcode.startswith(("cp.reduce", "multimem.cp.reduce"))
        return lambda c: c._copy(position, guard, spaces, dst, src, mbar, ("size", size), cross, "bulk", reduce)

    def _matrix(self, block: int, position: int, operands: Sequence[Operand], modifiers: list[str], form: AsyncForm,
                guard: Guard | None, spaces: int) -> Builder:
        shape = next((_SHAPE.match(m) for m in modifiers if _SHAPE.match(m)), None)
        sparse = "sp" in modifiers
        # K of one dense MMA is 32 bytes (wgmma; tcgen05 of every kind, PTX ISA "tcgen05 Matrix
        # Shape": f16 K=16, tf32 K=8, f8f6f4 and i8 K=32, mxf4 K=64 packed); sparse doubles it
        dense = form is AsyncForm.WGMMA or any(m in _DENSE_32_BYTE_KINDS for m in modifiers)
        k_bytes = 64 if sparse or not dense else 32
        descriptors: list[tuple[Query, int, bool]] = []  # (operand key, rows, mn_major)
        pair = "cta_group::2" in modifiers
        if form is AsyncForm.TCGEN05_CP:  # rows x bits of the source matrix: .128x256b, .32x128b, ...
            copied = next((_COPY_SHAPE.match(m) for m in modifiers if _COPY_SHAPE.match(m)), None)
            rows, k_bytes = (int(copied.group(1)), int(copied.group(2)) // 8) if copied else (128, 64)
            descriptors.append((self.ask(block, position, operands[1]), rows, False))
        else:
            a, b = operands[1], operands[2]
            rows_a = int(shape.group(1)) if shape else 256
            rows_b = int(shape.group(2)) if shape else 256
            sixteen_bit = len(modifiers) >= 2 and any(t in _SIXTEEN_BIT for t in modifiers[-2:])
            trans = _transpose_flags(operands, a.kind == "vector", sparse) if sixteen_bit else (False, False)
            if form is AsyncForm.TCGEN05_MMA:  # a shape not known yet: the largest a CTA's operands take
                rows_a, rows_b = _TCGEN05_ROWS_A, _TCGEN05_N // (2 if pair else 1)
            if a.kind not in ("vector", "memory"):  # a descriptor, not registers or tensor memory
                descriptors.append((self.ask(block, position, a), rows_a, trans[0]))
            descriptors.append((self.ask(block, position, b), rows_b, trans[1]))
        tcgen05 = form is not AsyncForm.WGMMA
        self.swizzled += ((key, tcgen05) for key, _, _ in descriptors)
        at = 4 if sparse else 3  # tcgen05.mma [d], a, b, {[sparse metadata],} idesc, ...
        idesc = self.ask(block, position, operands[at]) \
            if form is AsyncForm.TCGEN05_MMA and len(operands) > at and operands[at].kind != "memory" else None

        def build(c: _Classifier) -> list[Event]:
            shape = _instruction_shape(c.value(idesc)) if idesc is not None else None
            locations: list[Location] = []
            for index, (key, rows, mn_major) in enumerate(descriptors):
                layouts = (False, True) if form is AsyncForm.TCGEN05_MMA else (mn_major,)  # not known: either
                if shape is not None:  # A's rows are M, B's are N (the last one); a CTA of a pair holds half
                    rows = (shape[0] if index < len(descriptors) - 1 else shape[1]) // (2 if pair else 1)
                    layouts = (shape[2] if index < len(descriptors) - 1 else shape[3],)
                for atom in c.value(key):
                    locations.extend(descriptor_location(atom, rows, k_bytes, layout, tcgen05) for layout in layouts)
            return [Event(position, Kind.ASYNC, guard, locations=tuple(dict.fromkeys(locations)), spaces=spaces,
                          cross=pair)]

        return build

    def _copy(self, position: int, guard: Guard | None, spaces: int, dst: Query | None, src: Query | None,
              mbar: Query | None, size: CopySize, cross: bool, what: str, reduce: bool = False) -> list[Event]:
        tracked = self.options.tracked
        mbarrier = self._mbarrier(mbar) if mbar is not None else None
        if isinstance(size, tuple) and size[0] == "share":  # a tensor load: the armed bytes, shared
            armed = self._bound(mbarrier) if mbarrier is not None else None
            size = armed // size[1] if armed is not None else None
        elif isinstance(size, tuple):
            size = _most(self.value(size[1])) if size[1] is not None else None
        stage = None
        if what == "tensor":  # a box issued into a ring of stages fits in one stage (docs/fence.md §3.3)
            stage = _ring_stride(self.value(dst if dst is not None else src))  # type: ignore[arg-type]  # one is
            if stage is not None:
                size = stage if size is None else min(size, stage)
        writes: list[Location] = []
        reads: list[Location] = []
        detail: Box | None = None
        if what == "tensor":  # the range of its start for now, ended in `run` (`_close_boxes`)
            detail = Box(size, stage)
            self.boxes = True
        box: Callable[[Location], Location] = (lambda loc: loc) if detail is not None else \
            (lambda loc: bounded(loc, size))
        if dst is not None:
            for loc in self._locations(self.value(dst), 1, SHARED, False):
                writes.append(box(loc))
                if reduce:
                    reads.append(box(loc))
        if src is not None:
            for loc in self._locations(self.value(src), 1, CTA, False):
                reads.append(box(loc))
        if dst is not None and any(atom.space == SHARED_CLUSTER_SPACE for atom in self.value(dst)):
            cross = True  # a destination made by mapa: another CTA's shared memory
        if spaces & tracked & GLOBAL:  # global memory is followed as one object (--track-global)
            if dst is None:
                writes.append(everywhere(GLOBAL))
            if src is None:
                reads.append(everywhere(GLOBAL))
        events = [Event(position, Kind.ASYNC, guard, locations=tuple(reads), writes=tuple(writes),
                        mbarrier=mbarrier, spaces=spaces & tracked, cross=cross, detail=detail)]
        if mbarrier is not None:  # the completion hands the issuer's pending accesses to the waiters
            events.append(Event(position, Kind.ARRIVE, guard, sync=(SyncObject.MBARRIER, mbarrier), cross=cross,
                                detail="completion"))
        return events

    def _mbarrier(self, key: Query) -> Location:
        locations = self._locations(self.value(key), 8, SHARED, False)
        if len(locations) != 1:
            return everywhere(SHARED)
        return locations[0]

    def _bound(self, mbarrier: Location) -> int | None:
        """The most bytes armed with expect_tx on any mbarrier that may be `mbarrier`."""
        most: int | None = None
        for location, count in self.expect_tx:
            if overlaps(location, mbarrier):
                if count is None:
                    return None
                most = count if most is None else max(most, count)
        return most

    # -- calls and hand-offs ---------------------------------------------------------------------
    def _call(self, block: int, position: int, instruction: Instruction, guard: Guard | None) -> Builder | None:
        flow = self.flow
        context = flow.blocks[block].context
        callee, arguments, _ = call_target(instruction)
        if (block, position) in self.inlined:
            return None
        module = context.function.module if context is not None else None
        if module is not None and callee is not None and any(
                f.name == callee and not f.is_declaration for f in module.functions):
            if inert(module, callee, self.inert):  # not inlined (the graph is too large), does nothing here
                return None
        elif callee is not None and is_benign_extern(callee):
            return None
        policy = self.options.extern_policy
        if policy == "none":
            keys = [self.ask(block, position, f"{context.prefix if context else ''}param:{name}+0")
                    for name in arguments]
            if not keys:
                return None

            def pointers(c: _Classifier) -> list[Event]:
                locations: list[Location] = []
                for key in keys:
                    for atom in c.value(key):
                        if atom.is_address and atom.space in (SHARED_CTA_SPACE, SHARED_CLUSTER_SPACE):
                            space = SPACE_BITS[atom.space]
                            region = atom.region
                            locations.append(Location(space, region, 0, region.limit) if region is not None
                                             else everywhere(space))
                if not locations:
                    return []
                return [Event(position, Kind.WRITE, None, locations=tuple(locations), detail=callee or "indirect")]

            return pointers
        return lambda c: [Event(position, Kind.EXTERN, guard, locations=(everywhere(c.options.tracked),),
                                detail=(callee, policy))]

    def _sync(self, block: int, position: int, instruction: Instruction, head: HeadTuple,
              sync: SyncEffect) -> Builder:
        guard, opcode, _, _ = head
        operands = instruction.operands
        kind = {Sync.ARRIVE: Kind.ARRIVE, Sync.WAIT: Kind.WAIT, Sync.ARRIVE_WAIT: Kind.ARRIVE_WAIT}[sync.kind]
        obj = sync.object
        detail = "cp.async" if opcode.startswith("cp.async.mbarrier") else None
        if obj is SyncObject.NAMED_BARRIER:
            index = 1 if ".red" in opcode else 0
            key = self.ask(block, position, operands[index]) if len(operands) > index else None

            def named(c: _Classifier) -> list[Event]:  # the ids it may be (0-15), None for any
                barrier = integers(c.value(key), 16) if key is not None else None
                if key is not None and (barrier is None or len(barrier) > 1):
                    barrier = c._ids_of_runners(block, key, barrier)
                return [Event(position, kind, guard, sync=(obj, barrier))]

            return named
        if obj is SyncObject.MBARRIER:
            at = _memory_index(operands)
            if at is None:
                return lambda c: []
            address = self.ask(block, position, operands[at])

            def mbarrier(c: _Classifier) -> list[Event]:
                value = c.value(address)
                location = c._mbarrier(address)
                # a multicast tcgen05.commit arrives on the barrier at this offset in every CTA of its mask
                cross = any(atom.space == SHARED_CLUSTER_SPACE and atom.form == WINDOW for atom in value) or (
                    ".shared::cluster" in opcode and location.region is None) or ".multicast" in opcode
                return [Event(position, kind, guard, sync=(obj, location), cross=cross, detail=detail)]

            return mbarrier
        if obj is SyncObject.WARP:  # the lanes of a warp meet at one bar.warp.sync (docs/fence.md §4.1)
            return lambda c: [Event(position, kind, guard, sync=(obj, id(instruction)))]
        cross = obj is SyncObject.CLUSTER_BARRIER
        # barrier.cluster.arrive releases at cluster scope unless it is .relaxed (PTX ISA, barrier.cluster)
        detail = RELEASE if cross and kind is Kind.ARRIVE and ".relaxed" not in opcode else None
        return lambda c: [Event(position, kind, guard, sync=(obj,), cross=cross, detail=detail)]


#: The alignment of a tensor copy's shared-memory box (CUDA C++ programming guide, the
#: alignment requirements of bulk tensor copies on sm_90: 128 bytes).
TENSOR_BOX_ALIGN = 128


def _inside(found: Sequence[Location], event: Event) -> bool:
    """True when every location of `found` lies in one of `event`'s own."""
    held = (*event.locations, *event.writes)
    return all(any(covers(b, a) for b in held) for a in found)


def _runs(threads: int) -> list[tuple[int, int]]:
    """The runs of consecutive set bits of `threads`, as ``(low, high)``.

    >>> _runs(0b1110_0011)
    [(0, 1), (5, 7)]
    """
    runs: list[tuple[int, int]] = []
    base = 0
    while threads:
        skip = (threads & -threads).bit_length() - 1
        threads >>= skip
        length = (threads ^ (threads + 1)).bit_length() - 1
        runs.append((base + skip, base + skip + length - 1))
        threads >>= length
        base += skip + length
    return runs


#: The most a swizzled matrix descriptor's layout shows (the 128-byte swizzle repeats
#: every 8 rows of 128 bytes, PTX ISA "Matrix Descriptor").
SWIZZLE_ALIGN = 1024


def _less_aligned(flow: FlowGraph, bound: int) -> bool:
    """True when the kernel declares shared memory aligned less than `bound` bytes."""
    return any(value is not None and value[0].region is not None and value[0].space == SHARED_CTA_SPACE
               and value[0].region.align < bound
               for value in symbol_regions(flow.function, flow=flow).values())


def _shown_alignment(boxes: list[Value], descriptors: list[tuple[Value, bool]]) -> dict[Region, int]:
    """Regions whose start must be aligned more than they declare for the kernel to work,
    by what its tensor copies' boxes (`_tensor_votes`) and its MMAs' swizzled descriptors
    (`_swizzle_votes`) show; a region either addresses otherwise gets nothing (docs/fence.md
    §3.3, assumptions like the one on expect_tx). `descriptors`: each descriptor's value and
    whether it is a tcgen05 one.

    >>> from ptxkit.cfg.values.values import Atom, Region, WINDOW, address
    >>> dyn = Region("dyn", SHARED_CTA_SPACE, None, 16)
    >>> def desc(lo, hi=None, step=1, base=0):
    ...     return (Atom(WINDOW, SHARED_CTA_SPACE, dyn, lo, lo if hi is None else hi, 4, 1 << 62 | base << 49, step),)
    >>> _shown_alignment([address(dyn, 1024), address(dyn, 0)], [])[dyn], _shown_alignment([address(dyn, 16)], [])
    (128, {})
    >>> _shown_alignment([], [(desc(0, 24576, 8192), False), (desc(96), False)])[dyn]
    1024
    >>> _shown_alignment([], [(desc(0), False), (desc(128), False)]), _shown_alignment([], [(desc(0, base=1), False)])
    ({}, {})
    >>> _shown_alignment([address(dyn, 16)], [(desc(0), False)])  # the two disagree: nothing
    {}
    """
    votes: dict[Region, int] = {}
    for region, align in (*_tensor_votes(boxes), *_swizzle_votes(descriptors)):
        votes[region] = -1 if align < 0 or votes.get(region, 0) < 0 else max(align, votes.get(region, 0))
    return {region: align for region, align in votes.items() if align > region.align}


def _tensor_votes(addresses: list[Value]) -> Iterator[tuple[Region, int]]:
    """``(region, TENSOR_BOX_ALIGN)`` for each tensor copy's box at a multiple of it from
    its region's start, ``(region, -1)`` for one elsewhere: a box is `TENSOR_BOX_ALIGN`-aligned."""
    for value in addresses:
        for atom in value:
            if atom.region is None or not atom.is_address or atom.shift or atom.above:
                continue
            exact = atom.lo % TENSOR_BOX_ALIGN == 0 and (atom.lo == atom.hi or atom.step % TENSOR_BOX_ALIGN == 0)
            yield atom.region, TENSOR_BOX_ALIGN if exact else -1


def _swizzle_votes(descriptors: list[tuple[Value, bool]]) -> Iterator[tuple[Region, int]]:
    """``(region, repeat)`` for each swizzled descriptor with base offset 0 that starts in
    the first 128 bytes of a repeat of its swizzle (8 rows of its width: 1024 bytes for the
    128-byte swizzle, PTX ISA "Matrix Descriptor"), ``(region, -1)`` for one that does not.
    The hardware swizzles by the address's bits 7 and up, the base offset 0 says the
    pattern starts at the repeat's first row, and the kernel lays the data out by offsets
    from the region's start: the two agree only where the start is aligned to the repeat.
    A descriptor with no swizzle shows nothing."""
    for value, tcgen05 in descriptors:
        for atom in value:
            if atom.region is None or not atom.is_address:
                continue
            layout = descriptor_swizzle(atom, tcgen05)
            if layout is None:  # not a traced descriptor
                yield atom.region, -1
                continue
            width, base = layout
            if not width:
                continue
            repeat = 8 * width
            exact = base == 0 and atom.lo % repeat < 128 and (atom.lo == atom.hi or atom.step % repeat == 0)
            yield atom.region, repeat if exact else -1


def _ring_stride(value: Value) -> int | None:
    """The stride of a ring of stage addresses (several starts, `step` bytes apart), or
    None when the address is one start or not an address."""
    strides = [atom.step for atom in value if atom.is_address and atom.region is not None and atom.lo < atom.hi
               and not atom.shift]
    return min(strides) if strides and len(strides) == len(value) and min(strides) > 1 else None


def _event_locations(event: Event) -> Iterator[Location]:
    """Every location an event names, its hand-off object included."""
    yield from event.locations
    yield from event.writes
    if event.mbarrier is not None:
        yield event.mbarrier
    if event.sync is not None and event.sync[0] is SyncObject.MBARRIER:
        yield event.sync[1]


def _one_start_per_object(by_block: list[list[Event]]) -> None:
    """Where a kernel addresses one object both from its own start and from a
    rounded-up start (or from two), give every location from the object's own start
    (`in_root`), so each object is one region to the proxy analysis: offsets from a
    single rounded-up start stay exact (docs/fence.md §3.1)."""
    starts: dict[Region, set[Region]] = {}
    for events in by_block:
        for event in events:
            for location in _event_locations(event):
                if location.region is not None:
                    starts.setdefault(location.region.root, set()).add(location.region)
    mixed = {root for root, regions in starts.items() if len(regions) > 1}
    if not any(region.parent in mixed for regions in starts.values() for region in regions):
        return

    def unify(location: Location) -> Location:
        return in_root(location) if location.region is not None and location.region.parent in mixed else location

    for events in by_block:
        for index, event in enumerate(events):
            if any(unify(location) is not location for location in _event_locations(event)):
                sync = event.sync
                if sync is not None and sync[0] is SyncObject.MBARRIER:
                    sync = (sync[0], unify(sync[1]))
                events[index] = event._replace(
                    locations=tuple(map(unify, event.locations)), writes=tuple(map(unify, event.writes)),
                    mbarrier=unify(event.mbarrier) if event.mbarrier is not None else None, sync=sync)


def _address_lanes(base: str, modifiers: list[str]) -> int | None:
    """How many lanes give addresses to an ``ldmatrix``/``stmatrix`` of 8x8 matrices that
    does not use them all: lanes 0-7 the rows of the first matrix, 8-15 those of the
    second (PTX ISA, ``ldmatrix`` and ``stmatrix``: with ``.x1`` and ``.x2`` the other
    lanes' addresses are not used); None when every lane's counts.

    >>> _address_lanes("stmatrix", ["sync", "aligned", "x2", "m8n8", "shared", "b16"]), _address_lanes("ldmatrix",
    ...     ["sync", "aligned", "m8n8", "x4", "shared", "b16"])
    (16, None)
    """
    if base not in ("ldmatrix", "stmatrix") or "m8n8" not in modifiers:
        return None
    return 8 if "x1" in modifiers else 16 if "x2" in modifiers else None


#: Opcodes with an event beside their proxy effect and hand-off (see `classify`).
_OTHER_EVENTS = ("tcgen05.commit", "mbarrier.arrive.expect_tx", "mbarrier.expect_tx", "st.async", "red.async")


def _quiet_opcodes(flow: FlowGraph) -> set[str]:
    """The opcodes of `flow` that make no event: no proxy effect, no part in a hand-off,
    none of `_OTHER_EVENTS` (most instructions); each opcode is examined once per graph,
    not at each of its instructions.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<3>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tadd.s32 %r2, %r1, 1;\\n\\tst.shared.u32 [%r1], %r2;\\n"
    ...     "\\tbar.sync 0;\\n\\tret;\\n}\\n")
    >>> sorted(_quiet_opcodes(inlined_graph(m.function("k"))))
    ['add.s32', 'mov.u32', 'ret']
    """
    opcodes = {head[1] for block in flow.blocks for head in block.heads}
    return {opcode for opcode in opcodes if proxy_effect(opcode).kind is Effect.NONE and sync_effect(opcode) is None
            and not opcode.startswith(_OTHER_EVENTS)}


class Box(Record):
    """`Event.detail` of a tensor copy: the most bytes its box may have (the armed
    expect_tx bytes, a ring's stage), None where the PTX does not bound it, and the
    `step` of the ring of stages it is issued into, if any; its locations are where its
    first byte may be until `_close_boxes` ends them."""

    size: int | None
    step: int | None = None


def _close_boxes(by_block: list[list[Event]]) -> None:
    """End every tensor box before the next object the kernel addresses on its own (an
    mbarrier, or where another tensor load starts writing), and after its size where
    that is known. A box that ran over an mbarrier would corrupt it, and one that ran
    into another load's buffer would race with that load (docs/fence.md §3.3: an
    assumption, as for expect_tx)."""
    starts: dict[Region, set[int]] = {}
    rings: dict[tuple[Region, int], set[int]] = {}  # (region, step) -> the lowest start of each load into a ring
    for events in by_block:
        for event in events:
            if type(event.detail) is Box and event.detail.step is not None:
                for location in event.writes:
                    if location.region is not None:
                        rings.setdefault((location.region, event.detail.step), set()).add(location.start)
            objects = list(event.locations) if event.kind is Kind.INIT else []
            if event.mbarrier is not None:
                objects.append(event.mbarrier)
            if event.sync is not None and event.sync[0] is SyncObject.MBARRIER:
                objects.append(event.sync[1])
            if event.kind is Kind.ASYNC and event.mbarrier is not None:
                objects.extend(event.writes)  # a load completing on an mbarrier: a TMA destination
            for location in objects:
                if location.region is not None:
                    starts.setdefault(location.region, set()).add(location.start)
    ordered = {region: sorted(found) for region, found in starts.items()}
    ring_starts = {key: sorted(found) for key, found in rings.items()}
    for events in by_block:
        for index, event in enumerate(events):
            if type(event.detail) is Box:
                events[index] = event._replace(
                    locations=_closed(event.locations, ordered, event.detail, ring_starts),
                    writes=_closed(event.writes, ordered, event.detail, ring_starts))


def _closed(starts_of_box: tuple[Location, ...], starts: dict[Region, list[int]], box: Box,
            rings: dict[tuple[Region, int], list[int]]) -> tuple[Location, ...]:
    """Each box (given by the range its first byte may be in) as the bytes up to the
    first object start past that range, or to the end of its region; at most `box.size`
    bytes past its last start; and, in a ring of stages, not past the end of the stage
    its last start is in. The stages are laid out from the lowest start of the loads
    into that ring: those of its step whose first start lies less than a step below the
    box's (loads a step apart that interleave share their stages, or their buffers would
    overlap); a stage may begin before that start, not after."""
    out: list[Location] = []
    for location in starts_of_box:
        if location.region is None:
            out.append(bounded(location, box.size))
            continue
        found = starts.get(location.region, ())
        last = location.end - 1
        at = bisect.bisect_right(found, last)
        end = found[at] if at < len(found) else location.region.limit
        if box.size is not None:
            end = min(end, last + box.size)
        lows = rings.get((location.region, box.step), ()) if box.step is not None else ()
        if lows and box.step is not None:
            nearest = bisect.bisect_right(lows, location.start - box.step)
            if nearest < len(lows) and lows[nearest] <= location.start:
                first = lows[nearest]
                end = min(end, first + ((last - first) // box.step + 1) * box.step)
        out.append(Location(location.space, location.region, location.start, max(end, location.end)))
    return tuple(out)


def _tensor_load_siblings(flow: FlowGraph) -> dict[tuple[int, int], int]:
    """(block, position) -> n for tensor loads issued in one block with the same tensor
    map and the same mbarrier operand, with no mbarrier or barrier instruction and no
    redefinition of either operand's registers in between: one thread armed the
    phase and issues n copies of one box shape, so each box is at most 1/n of the
    armed bytes (docs/fence.md §3.3)."""
    found: dict[tuple[int, int], int] = {}

    def close(block: int, group: list[int]) -> None:
        for member in group:
            found[(block, member)] = len(group)

    for block in flow.blocks:
        group: list[int] = []
        key: tuple[str | None, str | None] | None = None
        registers: set[str] = set()
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            if head[1].startswith("cp.async.bulk.tensor") and async_form(head[1]) is AsyncForm.TENSOR_LOAD \
                    and proxy_effect(head[1]).kind is Effect.ASYNC:
                operands = instruction.operands
                this = (operands[1].elements[0].text if len(operands) > 1 and operands[1].elements else None,
                        operands[2].text if len(operands) > 2 else None)
                if group and this == key and None not in this:
                    group.append(position)
                    continue
                close(block.index, group)
                group, key = [position], this
                registers = {r for operand in operands[1:3] for r in operand.registers}
            elif group and (head[2] in ("mbarrier", "bar", "barrier") or (
                    head[2] not in ("st", "red") and registers & set(destinations(instruction, head, frozenset())))):
                close(block.index, group)
                group, key = [], None
        close(block.index, group)
    return found


#: The rows of A that one CTA's shared memory holds for a ``tcgen05.mma``: at most the 128
#: lanes of its tensor memory, which hold those rows of D (PTX ISA, "Tensor Memory" and
#: "Matrix shape": M is 64 or 128 for one CTA; M = 256 only for a pair, 128 rows each);
#: and the largest N. The two CTAs of a ``cta_group::2`` pair each hold half of A's rows
#: and half of B's columns.
_TCGEN05_ROWS_A, _TCGEN05_N = 128, 256


def _instruction_shape(value: Value) -> tuple[int, int, bool, bool] | None:
    """``(M, N, A MN-major, B MN-major)`` from a constant ``tcgen05.mma`` instruction
    descriptor (PTX ISA, "Instruction descriptor": N >> 3 in bits 17-22, M >> 4 in bits
    24-28, transpose A and B in bits 15 and 16), or None when it is not one.

    >>> _instruction_shape(((Atom(NUM, None, None, 0x08200490, 0x08200490),)))
    (128, 128, False, False)
    """
    bits = constant(value)
    if bits is None or not 0 <= bits < 1 << 32:
        return None
    n, m = (bits >> 17 & 0x3F) << 3, (bits >> 24 & 0x1F) << 4
    if not (8 <= n <= 256 and m in (32, 64, 128, 256)):
        return None
    return m, n, bool(bits >> 15 & 1), bool(bits >> 16 & 1)


def _transpose_flags(operands: Sequence[Operand], registers_a: bool, sparse: bool) -> tuple[bool, bool]:
    """(A, B) MN-major flags of a 16-bit wgmma: its imm-trans-a/b operands."""
    shift = 2 if sparse else 0
    if registers_a:
        at = 6 + shift
        flag = operands[at] if len(operands) > at else None
        return False, bool(flag is not None and flag.kind == "immediate" and flag.value)
    flags = []
    for at in (6 + shift, 7 + shift):
        flag = operands[at] if len(operands) > at else None
        flags.append(bool(flag is not None and (flag.kind != "immediate" or flag.value)))
    return flags[0], flags[1]


def _most(value: Value) -> int | None:
    """The largest number a value may be, or None when it is not a bounded number."""
    if len(value) == 1 and value[0].form == NUM and value[0].hi < INF:
        return value[0].hi
    return None


def classify(flow: FlowGraph, options: EventOptions) -> Events:
    """The events of every block of `flow` (see the module docstring)."""
    return _Classifier(flow, options).run()


def inert(module: Module, name: str, known: dict[str, bool], seen: frozenset[str] = frozenset()) -> bool:
    """True when the ``.func`` `name` of `module`, with the functions it calls, accesses
    no memory but its parameters and local frame, synchronizes with nothing and starts
    no async op: a call of it that was not inlined does nothing the analysis tracks
    (nvcc ``-G`` keeps helpers such as ``__cvta_generic_to_shared`` as calls). `known`
    keeps the answers by name.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".func (.param .b64 r) f(.param .b64 p)\\n{\\n.reg .b64 %rd<3>;\\n\\tld.param.u64 %rd1, [p];\\n"
    ...     "\\tcvta.to.shared.u64 %rd2, %rd1;\\n\\tst.param.b64 [r], %rd2;\\n\\tret;\\n}\\n"
    ...     ".func g(.param .b64 p)\\n{\\n.reg .b64 %rd<2>;\\n\\tld.param.u64 %rd1, [p];\\n"
    ...     "\\tst.u32 [%rd1], 0;\\n\\tret;\\n}\\n")
    >>> inert(m, "f", {}), inert(m, "g", {})
    (True, False)
    """
    if name in known:
        return known[name]
    function = None if name in seen else next((f for f in module.functions if f.name == name and not f.is_declaration),
                                              None)
    found = function is not None
    for instruction in function.instructions() if function is not None else ():
        opcode = head_of(instruction)[1]
        effect = proxy_effect(opcode).kind
        if sync_effect(opcode) is not None:
            found = False
        elif effect is Effect.CALL:
            callee = call_target(instruction)[0]
            found = callee is not None and inert(module, callee, known, seen | {name})
        else:
            found = effect is Effect.NONE
        if not found:
            break
    known[name] = found
    return found
