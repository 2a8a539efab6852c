"""The generic/async proxy analysis of one kernel (docs/fence.md §4, §5).

**Facts.** Every generic access that an async-proxy operation could race with is a
*fact*: a generic write (``st.shared``, ``stmatrix``, ``cp.async``…), a generic read
(``ld.shared``, ``ldmatrix``: for write-after-read) or an ``mbarrier.init``, with the
`Location` it touches, one proxy space per fact. A fact is *pending* in a thread from
the access until a proxy fence ordering its space.

**State.** A set of pending facts, per thread, kept as bits of one Python integer in
seven planes: facts this thread made (*local*), facts handed to it by other threads
(*imported*), ``cp.async`` writes still in flight, facts not yet handed across a
cluster (*remote*: a writer's own fence does not order them for another CTA, which
must fence after the cluster barrier), facts that were (*crossed*), pending facts not
yet handed on by an arrive (*unpublished*) and facts not credited to a fence another
thread ran (*uncredited*, docs/fence.md §4.4). The join is union, so the analysis is a
forward *may* analysis solved to a fixpoint over the (inlined) CFG.

**Hand-offs.** What is pending in a thread when it arrives on a synchronisation
object (a named barrier id, an mbarrier by location, the cluster barrier, the warp)
becomes pending in every thread after a wait on the same object, unless another
arrive heard by that wait credits it (docs/fence.md §4.4). Exports are collected at
arrives and imported at waits until nothing changes.

**Needs.** An async op *needs* a fence when a pending fact overlaps it: a write
overlapping what it reads or writes (RAW), a read overlapping what it writes (WAR,
unless `war` is off), an ``mbarrier.init`` of the mbarrier it completes on. The
fence the pass puts before a needy op orders its whole space, so it kills every
pending fact there; which ops get fences therefore feeds back into the states. The
solve starts from the largest needy set (no fences before ops) and shrinks it while
the result stays sound.

**Facts and solutions.** What the function is (its events, facts, hand-offs and masks)
is found once, in `KernelAnalysis`. What a set of planned fences makes of it is a
`Solution`: ``analysis.solve(fences)`` returns a new one and changes neither the
analysis nor a solution it started from (docs/fence.md §6.4).

>>> import ptxkit
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .b32 %r<2>;\\n.reg .b64 %rd<3>;\\n.reg .f32 %f<5>;\\n.reg .pred %p<2>;\\n"
...     "\\tst.shared.u32 [%r1], 0;\\n\\twgmma.fence.sync.aligned;\\n"
...     "\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1, 1, 1, 0, 0;\\n"
...     "\\tret;\\n}\\n")
>>> analysis = KernelAnalysis(m.function("k"), AnalysisOptions())
>>> solution = analysis.solve()
>>> [(need.instruction.line, need.hazard.value, spaces_text(need.cover)) for need in solution.needs()]
[(12, 'raw', 'shared::cta')]
"""

from __future__ import annotations

import bisect
import enum
import functools
import re

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.flow.dataflow import bits, solve_forward
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import ENTRY
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.flow.loops import loop_forest
from ptxkit.cfg.sync.armed import fenced_before_copies
from ptxkit.cfg.sync.events import RELEASE, RELEASES_INITS, Event, EventOptions, Kind, classify, on_an_mbarrier
from ptxkit.cfg.sync.groups import overlapping_in_flight
from ptxkit.cfg.sync.locations import (CLUSTER, GLOBAL, SHARED, SPACE_NAMES, Location, alias, covers, overlaps,
                                       spaces_text)
from ptxkit.cfg.sync.once import export_limits
from ptxkit.cfg.sync.phases import separate_phases
from ptxkit.cfg.values.divergence import thread_meets
from ptxkit.cfg.values.specials import PORTABLE_CLUSTER, special_ranges
from ptxkit.cfg.values.thread_sets import runners
from ptxkit.isa import SyncObject

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
    from typing import Literal

    from ptxkit.cfg.flow.dataflow import DataflowResult
    from ptxkit.cfg.flow.graph import EdgeStart, FlowGraph, HeadTuple
    from ptxkit.cfg.flow.inline import Context
    from ptxkit.cfg.sync.events import SyncKey
    from ptxkit.cfg.values.values import Region
    from ptxkit.instruction import Guard
    from ptxkit.syntax import Function, Instruction

    #: An access that makes a fact: ``(block, event)``.
    Origin = tuple[int, Event]
    #: What an arrive hands over (`KernelAnalysis.exports`): unpublished pending,
    #: crossing CTAs, published pending, credited.
    Export = tuple[int, int, int, int]
    #: What a wait takes in (`KernelAnalysis.imports`): pending (same CTA), crossing CTAs, credited.
    Import = tuple[int, int, int]
    #: What replaces the join at a block (`solve_forward`'s merges): the out-states of
    #: its predecessors (by block) to the state entering it.
    Merge = Callable[[dict[int, int]], int]
    #: Planned fences on a loop header's entry edges: the entry blocks, and one fence.
    EdgeFence = tuple[frozenset[EdgeStart], Event]
    #: The planned fences a solve applies (`KernelAnalysis.solve`), in the order they were
    #: planned (`_events_with`).
    Fences = tuple["PlacedFence", ...]
    #: `KernelAnalysis._handoffs`: the wait events, the ids of the arrives each wait
    #: (by id) hears, and the block of each wait (by id).
    Handoffs = tuple[list[Event], dict[int, list[int]], dict[int, int]]
    #: `KernelAnalysis._needs_now`: id(op) -> (pending overlapping facts, cover, block).
    Found = dict[int, tuple[int, int, int]]
    #: The bucket an arrive's object falls in (`_object_key`): a `SyncKey`, but an
    #: mbarrier's region in place of its location.
    ObjectKey = (tuple[Literal[SyncObject.NAMED_BARRIER], frozenset[int] | None]
                 | tuple[Literal[SyncObject.MBARRIER], Region | None]
                 | tuple[Literal[SyncObject.WARP], int]
                 | tuple[Literal[SyncObject.CLUSTER_BARRIER]])

__all__ = ["NO_FENCES", "AnalysisOptions", "Fact", "Hazard", "KernelAnalysis", "Need", "PlacedFence", "Solution", "Step",
           "fence_event", "spaces_text"]


class Hazard(enum.Enum):
    """What a missing fence would let race (docs/fence.md §5.1).

    >>> Hazard.WAR.value
    'war'
    """

    RAW = "raw"  # a generic write reaches an async-proxy access of the same bytes
    WAR = "war"  # a generic read reaches an async-proxy write of the same bytes
    # an mbarrier.init of a barrier that other CTAs of the cluster use reaches an async op
    # completing on it without a release at cluster scope (docs/fence.md §4.7); an init
    # that only the CTA's own threads and copies use needs no fence (docs/fence.md §1)
    INIT_CLUSTER = "mbarrier-init-cluster"


_ACCESS = {Hazard.RAW: "generic-proxy write", Hazard.WAR: "generic-proxy read", Hazard.INIT_CLUSTER: "mbarrier.init"}


class AnalysisOptions(Record):
    """What the analysis models.

    track_global:
        Also track the global space (generic global writes before TMA loads, bulk
        copies and stores that read global memory). Off by default, as in TileLang.
    extern_policy:
        ``none`` (an extern call does nothing, unless it receives a shared pointer,
        which counts as a generic write of that buffer), ``clobber`` (after the call
        every tracked byte may hold generic writes and reads) or ``strict``
        (``clobber``, and the call may itself start async ops, so it needs a fence
        before it like one).
    cta_fence_covers_cluster:
        Treat ``fence.proxy.async.shared::cta`` as ordering both shared windows (as
        CUTLASS and TileLang do); set by ``fence_variant="shared::cta"``.
    war:
        Also fence generic reads before async writes of the same bytes.
    max_cluster:
        The most CTAs a cluster may have when the kernel declares no cluster size
        (``.reqnctapercluster``/``.maxclusterrank``): 8, the portable limit, by default;
        16 for kernels launched with non-portable cluster sizes.

    >>> spaces_text(AnalysisOptions().tracked), spaces_text(AnalysisOptions(track_global=True).tracked)
    ('shared::cta+shared::cluster', 'shared::cta+shared::cluster+global')
    """

    track_global: bool = False
    extern_policy: str = "clobber"
    cta_fence_covers_cluster: bool = False
    war: bool = True
    max_cluster: int = PORTABLE_CLUSTER

    @property
    def tracked(self) -> int:
        return SHARED | GLOBAL if self.track_global else SHARED


class Fact:
    """One pending-access class: its `hazard` kind (RAW for writes, WAR for reads,
    INIT_CLUSTER for an mbarrier.init other CTAs use), `location` (one space) and the events that make it,
    ``(block, event)`` pairs, added as they are found."""

    __slots__ = ("index", "hazard", "location", "origins")

    def __init__(self, index: int, hazard: Hazard, location: Location) -> None:
        self.index, self.hazard, self.location = index, hazard, location
        self.origins: list[Origin] = []


class Need(Record):
    """An async op (or, under the strict extern policy, a call) that needs a fence.

    `pending`: the mask of facts that overlap it; `cover`: the spaces the fence must
    order; `hazard`: the most serious kind among them (RAW, then WAR, then INIT_CLUSTER);
    `state`: the state just before it.
    """

    block: int
    event: Event
    instruction: "Instruction"
    guard: "Guard | None"
    pending: int
    cover: int
    hazard: Hazard
    state: int

    @property
    def kind(self) -> str:
        return "extern" if self.event.kind is Kind.EXTERN else "async"


class Step:
    """One stop of a witness path: an access, an arrive, a wait or the async op
    (`what`), at `instruction` in `block`, with the blocks passed since the last stop
    in `via`; `explain` fills `via` as it traces the path back. An access's `location`
    is the bytes its fact stands for. An access the witness cannot trace back through
    every hand-off (more than `_MOST_HOPS`) is an ``origin``, named without its path."""

    __slots__ = ("what", "block", "instruction", "via", "location")

    def __init__(self, what: str, block: int, instruction: Instruction, location: Location | None = None) -> None:
        self.what, self.block, self.instruction = what, block, instruction
        self.via: list[int] = []
        self.location = location  # an access's: the bytes its fact stands for


#: The most hand-offs a witness follows back from the async op (a relay through more
#: threads names the access without its path).
_MOST_HOPS = 8


class _FactIndex:
    """The facts of one hazard and region, for "which overlap this location" queries.
    Narrow facts are sorted by start, with the running OR of their bits: those starting
    inside the query all overlap it (one XOR of two prefixes), those starting up to
    `WIDE` bytes before it are checked one by one, and so are the wide ones."""

    WIDE = 4096

    def __init__(self, facts: list[Fact]) -> None:
        narrow = sorted((f for f in facts if f.location.end - f.location.start <= self.WIDE),
                        key=lambda f: f.location.start)
        self.starts = [f.location.start for f in narrow]
        self.narrow = narrow
        self.prefix = [0]
        for fact in narrow:
            self.prefix.append(self.prefix[-1] | 1 << fact.index)
        self.wide = [f for f in facts if f.location.end - f.location.start > self.WIDE]
        self.by_space: dict[int, int] = {}
        for fact in facts:
            self.by_space[fact.location.space] = self.by_space.get(fact.location.space, 0) | 1 << fact.index

    def overlapping(self, location: Location) -> int:
        if location.region is None:  # anywhere in its spaces: every fact of an aliasing space
            mask = 0
            for space, facts in self.by_space.items():
                if alias(space) & location.space:
                    mask |= facts
            return mask
        first = bisect.bisect_left(self.starts, location.start - self.WIDE)
        inside = bisect.bisect_left(self.starts, location.start)
        last = bisect.bisect_left(self.starts, location.end)
        mask = self.prefix[last] ^ self.prefix[inside]  # same region, starting inside: they overlap
        for group in (self.narrow[first:inside], self.wide):
            for fact in group:
                if overlaps(fact.location, location):
                    mask |= 1 << fact.index
        return mask


def _union(states: dict[int, int]) -> int:
    out = 0
    for state in states.values():
        out |= state
    return out


def _fenced_on_entry(step: Callable[[Event, int], int], inner: Merge | None, fenced: frozenset[EdgeStart],
                     events: list[Event], outs: dict[int, int]) -> int:
    """The merge `inner` (a union where there is none) of `outs`, each state that comes in
    from a block of `fenced` first taken through `events` by `step` (`Solution._edge_merges`)."""
    across = {}
    for block, state in outs.items():
        if block in fenced:
            for event in events:
                state = step(event, state)
        across[block] = state
    return inner(across) if inner is not None else _union(across)


def _with_stale(inner: Merge | None, stale: int, outs: dict[int, int]) -> int:
    """The merge `inner` (a union where there is none), with the state bits `stale` set."""
    return (inner(outs) if inner is not None else _union(outs)) | stale


#: The planes of a state (each one bit per fact): made by this thread; handed over by
#: a thread of the same CTA; cp.async writes in flight; not yet handed across the
#: cluster (a writer's fence does not order them for another CTA); handed over across
#: CTAs (they matter to an op that may touch that other CTA's memory, or when they
#: were writes into ours); pending here and not yet handed on by an arrive (until then no
#: other thread has them in its past); not credited: made or handed over since this
#: thread, or on some path of its round one of the threads that split from it by
#: index (`ptxkit.cfg.values.divergence`), last fenced them after another thread handed them
#: over (docs/fence.md §4.4).
LOCAL, IMPORTED, IN_FLIGHT, REMOTE, CROSSED, UNPUBLISHED, UNCREDITED = range(7)
#: an arrive's exports: unpublished pending, crossing CTAs, published pending, credited
_NO_EXPORT = (0, 0, 0, 0)
#: a wait's imports: pending (same CTA), crossing CTAs, credited
_NO_IMPORT = (0, 0, 0)


class PlacedFence(Record):
    """A planned fence as a solve applies it (`KernelAnalysis.solve`): its `event`
    (`fence_event`) in `block`, before the instruction at the event's position (at the
    block's end for the block length); or, with `entries`, on the edges from those
    blocks (and ``ENTRY``, the function's start) into `block`, a loop's header, where
    the preheader the edits create will hold it (docs/fence.md §6.4).

    >>> PlacedFence(3, fence_event(0, SHARED)).entries is None
    True
    """

    block: int
    event: Event
    entries: "frozenset[EdgeStart] | None" = None


#: A solve without planned fences.
NO_FENCES: Fences = ()


def fence_event(position: int, cover: int, releases_inits: bool = False) -> Event:
    """The event of a fence the pass plans before instruction `position` (at the end of
    its block for the block length): a proxy fence ordering `cover`, or with
    `releases_inits` a ``fence.mbarrier_init.release.cluster`` (docs/fence.md §4.7).

    >>> fence_event(2, SHARED).kind.value, fence_event(2, SHARED, releases_inits=True).detail == RELEASES_INITS
    ('inserted fence', True)
    """
    return Event(position, Kind.INSERTED, spaces=cover, detail=RELEASES_INITS if releases_inits else None)


class KernelAnalysis:
    """What one function *is*, with the ``.func``s it calls inlined
    (`ptxkit.cfg.flow.inline`): its events, facts, hand-offs and the masks derived from
    them, all found once here. `solve` gives what a set of planned fences makes of it,
    a `Solution`: planning (`ptxkit.cfg.fence.placement`) never changes the analysis,
    nor the flow graph. What it keeps beyond its construction are caches of functions
    of the kernel alone (kill masks, `Events.touches` answers, the hand-offs, the
    foreign bits).
    """

    def __init__(self, function: Function, options: AnalysisOptions, flow: FlowGraph | None = None) -> None:
        self.function = function
        self.options = options
        self.flow = flow if flow is not None else inlined_graph(function)
        events = classify(self.flow, EventOptions(options.tracked, options.extern_policy,
                                                  options.cta_fence_covers_cluster, options.max_cluster))
        self.events: list[list[Event]] = events.by_block
        self.warnings = events.warnings
        self.dead = events.dead
        self._touches = events.touches
        self._classified = events  # its `relocate` and `joins_feeding`, for `Solution.in_flight`
        self.facts: list[Fact] = []
        self._make_facts()
        self._export_limits = export_limits(self.flow, self.events, self.facts) if self._count else {}
        self._fenced_before_copies = fenced_before_copies(
            self.flow, self.events, self.facts, lambda fence: self.plane(self._fence_kill(fence), LOCAL),
            self._handoffs()[1])
        self._hearers = self._limited_hearers()
        self._crediting_ids = self._crediting_fences()
        self._touch_answers: dict[tuple[int, int, tuple[Location, ...]], bool | None] = {}  # `_touched`
        self._issued_bytes: dict[int, Event] = {}  # `_issued`
        self._foreign_bits: list[int] | None = None  # `_foreign`, once computed

    # -- planes -----------------------------------------------------------------------------
    def plane(self, state: int, which: int) -> int:
        """The facts set in one plane of a state."""
        return (state >> (which * self._count)) & self._full

    def put(self, mask: int, which: int) -> int:
        """`mask` placed in a plane."""
        return mask << (which * self._count)

    def pending(self, state: int) -> int:
        """Facts this thread must order before an async op of its own CTA."""
        return self.plane(state, LOCAL) | self.plane(state, IMPORTED)

    def hazard_mask(self, hazard: Hazard) -> int:
        """The facts of one hazard class."""
        return self._hazard_masks[hazard]

    def fact_list(self, mask: int) -> list[Fact]:
        """The facts of `mask`."""
        return [self.facts[i] for i in bits(mask)]

    def spaces_of(self, mask: int) -> int:
        """The proxy spaces of the facts in `mask`."""
        spaces = 0
        for bit, facts in self._space_masks.items():
            if mask & facts:
                spaces |= bit
        return spaces

    def origin_contexts(self, mask: int) -> list[Context | None]:
        """The inlined contexts where the facts of `mask` are made."""
        return [self.flow.blocks[block].context for i in bits(mask) for block, _ in self.facts[i].origins]

    def state_text(self, state: int) -> str:
        """A state in words: how many writes, reads and mbarrier inits are pending, made
        here or handed over, and in which spaces.

        >>> analysis = KernelAnalysis.__new__(KernelAnalysis)
        >>> analysis.facts, analysis._count, analysis._full = [], 0, 0
        >>> analysis.state_text(0)
        'nothing pending'
        """
        parts = []
        for which, name in ((LOCAL, "made here"), (IMPORTED, "handed over"), (CROSSED, "from another CTA")):
            mask = self.plane(state, which)
            if not mask:
                continue
            counts: dict[Hazard, int] = {}
            for i in bits(mask):
                counts[self.facts[i].hazard] = counts.get(self.facts[i].hazard, 0) + 1
            kinds = ", ".join(f"{n} {_ACCESS[h].split()[-1] if h is not Hazard.INIT_CLUSTER else 'init'}"
                              f"{'s' * (n != 1)}" for h, n in counts.items())
            parts.append(f"{kinds} {name} ({spaces_text(self.spaces_of(mask))})")
        return "; ".join(parts) if parts else "nothing pending"

    # -- facts ------------------------------------------------------------------------------
    def _make_facts(self) -> None:
        asyncs = [e for events in self.events for e in events if e.kind is Kind.ASYNC]
        wants_writes = bool(asyncs) or self.options.extern_policy == "strict"
        wants_reads = self.options.war and (any(e.writes for e in asyncs) or self.options.extern_policy == "strict")
        wants_inits = any(e.mbarrier is not None for e in asyncs)
        writes = (Hazard.RAW,) if wants_writes else ()
        reads = (Hazard.WAR,) if wants_reads else ()
        hazards_of = {Kind.WRITE: writes, Kind.CP_ASYNC: writes, Kind.READ: reads, Kind.EXTERN: writes + reads}
        shared_with_the_cluster = self._cluster_barriers() if wants_inits else ()
        index: dict[tuple[Hazard, Location], Fact] = {}
        made: list[tuple[Event, int, bool]] = []
        for block, events in enumerate(self.events):
            for event in events:
                kind = event.kind
                hazards = hazards_of.get(kind, ())
                if kind is Kind.INIT and any(overlaps(location, other) for location in event.locations
                                             for other in shared_with_the_cluster):
                    hazards += (Hazard.INIT_CLUSTER,)
                mask = 0
                for hazard in hazards:
                    for location in event.locations:
                        for bit, _ in SPACE_NAMES:
                            if location.space & bit & self.options.tracked:
                                key = (hazard, Location(bit, location.region, location.start, location.end))
                                fact = index.get(key)
                                if fact is None:
                                    fact = index[key] = Fact(len(self.facts), hazard, key[1])
                                    self.facts.append(fact)
                                fact.origins.append((block, event))
                                mask |= 1 << fact.index
                if mask:
                    made.append((event, mask, kind is Kind.CP_ASYNC))
        self._count = count = len(self.facts)
        self._full = (1 << count) - 1
        self._kill_cache: dict[int, int] = {}
        self._space_masks = {bit: 0 for bit, _ in SPACE_NAMES}
        self._hazard_masks = {hazard: 0 for hazard in Hazard}
        by_region: dict[tuple[Hazard, Region | None], list[Fact]] = {}
        for fact in self.facts:
            self._space_masks[fact.location.space] |= 1 << fact.index
            self._hazard_masks[fact.hazard] |= 1 << fact.index
            by_region.setdefault((fact.hazard, fact.location.region), []).append(fact)
        self._by_region = {key: _FactIndex(facts) for key, facts in by_region.items()}
        # id(event) -> the state bits the access sets: its facts, in flight for cp.async,
        # and not yet handed across the cluster for shared accesses (mbarrier.init aside:
        # fence.mbarrier_init.release.cluster publishes it from the writer's side)
        shareable = sum(1 << f.index for f in self.facts
                        if f.location.space & SHARED and f.hazard is not Hazard.INIT_CLUSTER)
        self.generated: dict[int, int] = {}
        for event, mask, in_flight in made:
            self.generated[id(event)] = (self.put(mask, LOCAL) | self.put(mask if in_flight else 0, IN_FLIGHT)
                                         | self.put(mask & shareable, REMOTE) | self.put(mask, UNPUBLISHED)
                                         | self.put(mask, UNCREDITED))
        self._cluster_mask = self._space_masks[CLUSTER]
        self._need_masks: dict[int, tuple[int, int]] = {}
        self._hearing: Handoffs | None = None  # `_handoffs`, once computed
        for events in self.events:
            for event in events:
                if event.kind is Kind.ASYNC or _strict_extern(event):
                    mask = self._need_mask(event)
                    crossed = mask if event.cross else mask & self._cluster_mask
                    self._need_masks[id(event)] = (mask, crossed)

    def _cluster_barriers(self) -> list[Location]:
        """The mbarriers that other CTAs of the cluster may use: those an async op that
        reaches other CTAs completes on (a multicast copy completes on the barrier at the
        same offset in every CTA it writes) and those an arrive may reach in another CTA
        (through the ``shared::cluster`` window). None in a kernel whose cluster has one
        CTA (docs/fence.md §4.7)."""
        if special_ranges(self.flow.function, self.options.max_cluster)["%cluster_nctarank"] == (1, 1):
            return []
        found = []
        for events in self.events:
            for event in events:
                if event.kind is Kind.ASYNC and event.cross and event.mbarrier is not None:
                    found.append(event.mbarrier)
                elif event.kind is Kind.ARRIVE and event.cross and on_an_mbarrier(event) \
                        and event.detail != "completion":
                    found.append(event.sync[1])
        return found

    def _limited_hearers(self) -> dict[int, set[int]]:
        """id(wait) -> the blocks of the arrives whose exports hold what that wait imports
        (an arrive run once, docs/fence.md §4.5): when the wait imports more, their blocks run again,
        though the states reaching them may not change."""
        blocks = {id(event): block for block, events in enumerate(self.events) for event in events}
        hearers: dict[int, set[int]] = {}
        for key, (_, _, heard) in self._export_limits.items():
            for wait in heard or ():
                hearers.setdefault(wait, set()).add(blocks[key])
        return hearers

    def _crediting_fences(self) -> frozenset[int]:
        """The ids of the kernel's own unguarded fences, whose ordering of accesses other
        threads handed over is credited to those threads (docs/fence.md §4.4); none when
        nothing is handed over."""
        fences = frozenset(id(event) for events in self.events for event in events
                           if event.kind in (Kind.FENCE, Kind.INIT_FENCE) and event.guard is None)
        if not fences or not any(e.kind is Kind.WAIT or e.kind is Kind.ARRIVE_WAIT
                                 for events in self.events for e in events):
            return frozenset()
        return fences

    def _thread_merges(self) -> dict[int, Merge]:
        """The merges at the blocks where thread-index splits meet: there a fact is
        uncredited only where every path from the split left it so (docs/fence.md §4.4)."""
        plane = self.put(self._full, UNCREDITED)
        keep = ~plane

        def merge(outs: dict[int, int], ends: frozenset[int]) -> int:
            """Union, but uncredited only where every path from the split is."""
            state, split, outside = 0, plane, 0
            for block, out in outs.items():
                state |= out & keep
                if block in ends:
                    split &= out
                else:
                    outside |= out
            return state | (split | outside) & plane

        return {meet: functools.partial(merge, ends=ends) for meet, ends in thread_meets(self.flow).items()}

    def _need_mask(self, event: Event) -> int:
        """The facts that, pending at `event`, make it need a fence."""
        if event.kind is Kind.EXTERN:
            return self._full & ~self._hazard_masks[Hazard.INIT_CLUSTER]
        mask = self._overlapping_facts(Hazard.RAW, _at_risk(event, Hazard.RAW))
        mask |= self._overlapping_facts(Hazard.WAR, _at_risk(event, Hazard.WAR))
        if event.mbarrier is not None:
            mask |= self._overlapping_facts(Hazard.INIT_CLUSTER, (event.mbarrier,))
        return mask

    def _overlapping_facts(self, hazard: Hazard, locations: Iterable[Location]) -> int:
        """The facts of `hazard` whose location overlaps one of `locations`: only the
        facts of the same region and those of no known region are looked at."""
        mask = 0
        for location in locations:
            indexes: list[_FactIndex | None]
            if location.region is None:
                indexes = [index for (kind, _), index in self._by_region.items() if kind is hazard]
            else:
                indexes = [self._by_region.get((hazard, location.region)), self._by_region.get((hazard, None))]
            for index in indexes:
                if index is not None:
                    mask |= index.overlapping(location)
        return mask

    def kill_mask(self, spaces: int) -> int:
        """The facts a proxy fence ordering `spaces` makes no longer pending (every plane
        but in-flight and remote: a fence neither completes a cp.async nor orders a write
        for another CTA; and no init that other CTAs need released, docs/fence.md §4.7)."""
        mask = self._kill_cache.get(spaces)
        if mask is None:
            ordered = spaces | SHARED if spaces & CLUSTER else spaces  # `.shared::cluster` holds the CTA's own window
            facts = 0
            for bit, _ in SPACE_NAMES:
                if ordered & bit:
                    facts |= self._space_masks[bit] & ~self._hazard_masks[Hazard.INIT_CLUSTER]
            mask = self._kill_cache[spaces] = (self.put(facts, LOCAL) | self.put(facts, IMPORTED)
                                               | self.put(facts, CROSSED))
        return mask

    def _fence_kill(self, event: Event) -> int:
        """The state bits a fence event clears: ``fence.mbarrier_init`` releases at cluster
        scope the inits its own thread made (docs/fence.md §4.7), a proxy fence orders its spaces."""
        if event.kind is Kind.INIT_FENCE or event.detail == RELEASES_INITS:
            return self.put(self._hazard_masks[Hazard.INIT_CLUSTER], LOCAL)
        return self.kill_mask(event.spaces)

    # -- the fixpoint -----------------------------------------------------------------------
    def _handoffs(self) -> Handoffs:
        """Wait events, which arrives each wait hears, and the block of each wait
        (computed once: planned fences add no arrive or wait)."""
        if self._hearing is not None:
            return self._hearing
        arrives: list[Event] = []
        waits: list[Event] = []
        homes: dict[int, int] = {}
        for block, events in enumerate(self.events):
            for event in events:
                if event.kind in (Kind.ARRIVE, Kind.ARRIVE_WAIT):
                    arrives.append(event)
                if event.kind in (Kind.WAIT, Kind.ARRIVE_WAIT):
                    waits.append(event)
                    homes[id(event)] = block
        # what an arrive can match: its object kind and, where it has one, its key
        by_object: dict[ObjectKey, list[Event]] = {}
        for arrive in arrives:
            by_object.setdefault(_object_key(_sync_of(arrive)), []).append(arrive)
        separate = separate_phases(self.flow, self.events, _matches)
        matching: dict[SyncKey, list[int]] = {}  # a wait's object -> the arrives (ids) on objects it matches
        hears: dict[int, list[int]] = {}
        for wait in waits:
            sync = _sync_of(wait)
            candidates = matching.get(sync)
            if candidates is None:
                candidates = matching[sync] = [id(a) for key in _keys_heard(sync, by_object) for a in by_object[key]
                                               if _matches(sync, _sync_of(a))]
            hears[id(wait)] = [arrive for arrive in candidates if (id(wait), arrive) not in separate]
        self._hearing = waits, hears, homes
        return self._hearing

    def _made_once(self) -> int:
        """The facts made by one access outside loops (and irreducible cycles): one
        instance per thread. Only for those is another thread's credit sure to be of the
        instance this thread still has pending: in a loop, the credit an arrive carries
        may be of the previous round's instance while this round's was handed on only to
        threads that never fenced it; and of two accesses of the same bytes, the second
        may come after the arrive that handed the first to the fencing thread
        (docs/fence.md §4.4)."""
        forest = loop_forest(self.flow)
        cyclic = set(forest.innermost()) | forest.irreducible
        return sum(1 << fact.index for fact in self.facts
                   if len(fact.origins) == 1 and fact.origins[0][0] not in cyclic)

    def _foreign(self) -> list[int]:
        """Block -> the state bits of the facts it cannot have made itself: in this
        thread's planes (LOCAL, IN_FLIGHT), the facts whose every access lies in blocks
        that no thread running this one runs (`ptxkit.cfg.values.thread_sets`). A path from such
        an access to this block is no thread's, so what it carries in those planes is
        dropped on entry; what was handed over stays (docs/fence.md §5.2)."""
        if self._foreign_bits is None:  # the graph never changes: once
            threads = runners(self.flow)
            made_by = [0] * len(self.facts)
            for fact in self.facts:
                for block, _ in fact.origins:
                    made_by[fact.index] |= threads[block]
            by_threads: dict[int, int] = {}
            for ran in threads:
                if ran not in by_threads:  # a block no thread seems to run, or made in one: kept (`dead` decides)
                    mask = sum(1 << index for index, makers in enumerate(made_by)
                               if ran and makers and not makers & ran)
                    by_threads[ran] = self.put(mask, LOCAL) | self.put(mask, IN_FLIGHT)
            self._foreign_bits = [by_threads[ran] for ran in threads]
        return self._foreign_bits

    def _cover(self, pending: int, event: Event, crossed: bool) -> int:
        """The spaces the fence for `pending` facts must order: the spaces of those
        accesses (a TMA load into this CTA through a ``shared::cluster`` address needs
        no more than ``.shared::cta`` for a ``st.shared`` before it); the cluster window
        too when an access of another CTA's threads is ordered (`crossing`); both
        shared windows before an extern call (docs/fence.md §5.3)."""
        spaces = self.spaces_of(pending)
        if event.kind is Kind.EXTERN:
            return (spaces | SHARED if spaces & SHARED else spaces) & self.options.tracked
        if spaces & SHARED and crossed:
            spaces |= CLUSTER
        return spaces

    def _touched(self, block: int, origin: Event, targets: tuple[Location, ...]) -> bool | None:
        """`Events.touches`, asked once per access and targets: the same access meets
        the same bytes of many ops, and again in each round of `solve`."""
        key = (block, id(origin), targets)
        answers = self._touch_answers
        if key not in answers:
            answers[key] = self._touches(block, origin, targets)
        return answers[key]

    def _issued(self, block: int, event: Event) -> Event:
        """The async op `event` of `block` with the bytes the threads that may run `block`
        touch (`Events.issued`), or `event` itself; asked once per op."""
        found = self._issued_bytes.get(id(event))
        if found is None:
            bytes_of_runners = self._classified.issued(block, event)
            found = event if bytes_of_runners is None else \
                event._replace(locations=bytes_of_runners[0], writes=bytes_of_runners[1])
            self._issued_bytes[id(event)] = found
        return found

    # -- for the solutions' results ------------------------------------------------------------
    def _hazard(self, pending: int) -> Hazard:
        for hazard in (Hazard.RAW, Hazard.WAR, Hazard.INIT_CLUSTER):
            if pending & self._hazard_masks[hazard]:
                return hazard
        return Hazard.RAW

    def _bit(self, which: int, fact: int) -> int:
        return which * self._count + fact

    def _access_step(self, origin: Origin, fact: int) -> Step:
        block, event = origin
        what = self.facts[fact].hazard
        return Step(_ACCESS[what] if event.kind is not Kind.EXTERN else "extern call", block,
                    self.flow.blocks[block].instructions[event.position], self.facts[fact].location)

    # -- solutions ------------------------------------------------------------------------------
    def solve(self, fences: Fences = NO_FENCES) -> Solution:
        """The function with the planned `fences` in place, solved (`Solution`): which
        async ops still get a fence right before them, and the states. Changes neither
        the analysis nor anything given to it.

        >>> import ptxkit
        >>> m = ptxkit.parse_file("samples/fence/x16_created_preheader.ptx")
        >>> analysis = KernelAnalysis(m.function("k"), AnalysisOptions())
        >>> solution = analysis.solve()
        >>> [need.instruction.line for need in solution.needs()]
        [41]
        >>> fence = PlacedFence(2, fence_event(0, SHARED), frozenset((0, 1)))
        >>> fenced = solution.with_fences((fence,))
        >>> fenced.needs(), len(solution.needs()), solution.fences
        ([], 1, ())
        """
        return _solved(self, fences, None)

    def events_with(self, fences: Fences) -> list[list[Event]]:
        """The events of every block with the `fences` planned in blocks in place
        (`Solution.events`); the kernel's own lists where a block has none.

        >>> import ptxkit
        >>> m = ptxkit.parse_file("samples/fence/x16_created_preheader.ptx")
        >>> analysis = KernelAnalysis(m.function("k"), AnalysisOptions())
        >>> fence = fence_event(10, SHARED)  # after the write at 9
        >>> events = analysis.events_with((PlacedFence(0, fence),))
        >>> [e.kind.value for e in events[0]], events[1] is analysis.events[1], len(analysis.events[0])
        (['write', 'inserted fence'], True, 1)
        """
        return _events_with(self.events, fences)[0]


def _events_with(kernel: list[list[Event]], fences: Fences) -> tuple[list[list[Event]], dict[int, list[EdgeFence]]]:
    """The events of every block with `fences` in place, and the fences on entry edges
    by header, in the order given. A fence in a block goes before its events at the same
    position or after it, so of two planned at one position the later comes first."""
    events = kernel
    on_edges: dict[int, list[EdgeFence]] = {}
    copied: set[int] = set()
    for fence in fences:
        if fence.entries is not None:
            on_edges.setdefault(fence.block, []).append((fence.entries, fence.event))
            continue
        if fence.block not in copied:
            if not copied:
                events = list(kernel)
            events[fence.block] = list(events[fence.block])
            copied.add(fence.block)
        in_block = events[fence.block]
        in_block.insert(bisect.bisect_left(in_block, fence.event.position, key=_position), fence.event)
    return events, on_edges


def _solved(analysis: KernelAnalysis, fences: Fences, after: Solution | None) -> Solution:
    solution = Solution(analysis, fences, after)
    solution._solve()
    return solution


class Solution:
    """What the planned `fences` make of the analysed function (`KernelAnalysis.solve`):
    `needy` maps each async op that still gets a fence right before it (by ``id`` of its
    event) to the fence's cover, `ins`/`outs` hold the states at block boundaries of the
    fenced function, `needs` lists those fences with their reasons, `explain` traces a
    witness for each. `events` are the kernel's with the fences planned in blocks,
    `edge_fences` those on loops' entry edges (header -> (the entry blocks, the fence)).

    A solution is never changed once solved; planning threads them, adding a fence by
    solving with one more (`with_fences`), dropping one by solving with one fewer
    (docs/fence.md §6.4). It is also the unit an incremental solve would update: one
    that resumed from this solution's states where a changed fence cannot reach.

    Reading a solution (`needs`, `explain`, `walk`, `in_flight`, `pending_before`,
    `generated_spaces`, `edge_states`) writes nothing into it. A solve is a function of
    the fences and of what `with_fences` starts from (docs/fence.md §6.4): the credit of
    the kernel's own fences (docs/fence.md §4.4), taken once by the first solve of a
    chain and kept, or dropped for good where it made the hand-offs oscillate; and the
    need masks narrowed thread by thread (docs/fence.md §3.6), each solve asking only
    about the facts it finds and keeping the earlier answers. A fresh
    ``analysis.solve(fences)`` takes credit with `fences` in place, and may credit less.
    """

    def __init__(self, analysis: KernelAnalysis, fences: Fences, after: Solution | None) -> None:
        self.analysis = analysis
        self.fences = fences
        self.events, self.edge_fences = _events_with(analysis.events, fences)
        # what a solve learns of the kernel: from `after` when given, else from the start
        self._need_masks: dict[int, tuple[int, int]] = analysis._need_masks  # copied before a change
        self._crediting_ids = analysis._crediting_ids  # the fences whose credit is yet to be taken
        self._crediting: dict[int, int] = {}  # id(fence) -> the facts it credits, once `_run` knows them
        self._meets: dict[int, Merge] = {}  # block -> its merge, where thread-index splits meet (with credit only)
        self._own_credit = 0  # the facts a thread may be credited of its own (made once), with credit only
        if after is not None:
            self._need_masks, self._crediting_ids = after._need_masks, after._crediting_ids
            self._crediting, self._meets, self._own_credit = after._crediting, after._meets, after._own_credit
        self.needy: dict[int, int] = {}
        self._kills: dict[int, int] = {}
        self.ins: list[int] = []
        self.outs: list[int] = []
        self.exports: dict[int, Export] = {}
        self.imports: dict[int, Import] = {}
        self._reasons: dict[int, int] = {}

    def with_fences(self, fences: Fences) -> Solution:
        """The analysis solved with `fences`, starting from this solution's credit and
        narrowed need masks (docs/fence.md §6.4); this solution stays as it is."""
        return _solved(self.analysis, fences, self)

    def seen_with(self, fences: Fences) -> Solution:
        """This solution's states read with the events of `fences` in place of its own,
        not solved again: the witnesses of each ``mbarrier.init`` fence planned after
        another one are taken with the earlier ones in the events, and so name an init
        those leave pending (`ptxkit.cfg.fence.placement`). Solved with them, a fence
        after an earlier run of inits may leave an op the later fence is listed for no
        init to name (docs/fence.md §6.4). The view shares this solution's states, which
        its readers only read."""
        view = Solution(self.analysis, fences, self)
        view.needy, view._kills, view.ins, view.outs = self.needy, self._kills, self.ins, self.outs
        view.exports, view.imports, view._reasons = self.exports, self.imports, self._reasons
        return view

    # -- credit (docs/fence.md §4.4) -------------------------------------------------------------
    def _imported_before_in_round(self, threads: int) -> dict[int, int]:
        """block -> the facts imported by the waits on the paths from the entry to it
        that take no loop's back edge (before it in its round), at waits some of
        `threads` (a bit set, `ptxkit.cfg.values.thread_sets`) may pass. A fence credits only
        those: what a wait after it imported in the previous round may come again, a new
        instance, in the phase where the fencing thread's arrives still carry the old
        credit; and what a wait none of the fencing threads pass imported reaches the
        fence only along a path no thread takes (two roles written one after the other,
        the first role's imports flowing into the second's code; docs/fence.md §4.4). A
        block reached first over an edge that retreats without being a back edge
        (irreducible flow) misses those paths' facts, which only credits less."""
        analysis = self.analysis
        dominators = DominatorTree.of(analysis.flow)
        ran = runners(analysis.flow)
        before: dict[int, int] = {}
        through: dict[int, int] = {}  # block -> what is imported up to its end
        for block in analysis.flow.rpo:
            facts = 0
            for previous in analysis.flow.pred[block]:
                if previous in through and not dominators.dominates(block, previous):
                    facts |= through[previous]
            before[block] = facts
            through[block] = facts | (self._block_imports(block) if ran[block] & threads else 0)
        return before

    def _block_imports(self, block: int, until: Event | None = None) -> int:
        """The facts the waits of `block` (before event `until`, when given) import from
        the same CTA."""
        facts = 0
        for event in self.events[block]:
            if event is until:
                break
            facts |= self.imports.get(id(event), _NO_IMPORT)[0]
        return facts

    def _credit_merges(self) -> dict[int, Merge]:
        """The merges of a solution with credit: `_thread_merges`, and at each block that
        no thread that ran a crediting fence may run, the facts that fence credits
        uncredited again. A thread-index meet hands a fence's credit to every thread
        after it, which holds while the fencing threads go on with them (their arrives
        after the fence complete the same phases); code that only other threads run,
        such as a second role's after the first role's fence, has no such arrive
        (docs/fence.md §4.4)."""
        analysis = self.analysis
        merges = analysis._thread_merges()
        if not merges:  # a credit reaches another thread's code only through a meet
            return merges
        threads = runners(analysis.flow)
        fencers: dict[int, int] = {}  # the threads of a crediting fence's block -> what such fences credit
        for block, events in enumerate(self.events):
            for event in events:
                credit = self._crediting.get(id(event))
                if credit:
                    fencers[threads[block]] = fencers.get(threads[block], 0) | credit
        stale_for: dict[int, int] = {}  # the threads of a block -> what no fence they may have run credits
        for block in analysis.flow.rpo:
            stale = stale_for.get(threads[block])
            if stale is None:
                stale = 0
                for ran, credit in fencers.items():
                    if not ran & threads[block]:
                        stale |= credit
                stale_for[threads[block]] = stale
            if stale:
                inner = merges.get(block)
                merges[block] = functools.partial(_with_stale, inner, analysis.put(stale, UNCREDITED))
        return merges

    # -- needs and planned fences -----------------------------------------------------------------
    def overlapping(self, event: Event, state: int) -> int:
        """The facts pending in `state` that make `event` need a fence: those of this
        CTA's threads that it touches, and those handed across CTAs that were writes
        into the cluster window or that it may touch in another CTA."""
        mask, crossed = self._need_masks[id(event)]
        analysis = self.analysis
        return (analysis.pending(state) & mask) | (analysis.plane(state, CROSSED) & crossed)

    def crossing(self, event: Event, state: int) -> bool:
        """Whether `event` needs a fence for facts of another CTA's threads in `state`:
        facts handed across CTAs that it may touch there (it reaches other CTAs) or that
        lie in the cluster window. A fact this CTA's own threads handed over through the
        cluster barrier is also marked crossed, but for an op of this CTA alone only its
        own copy counts, which ``.shared::cta`` orders (docs/fence.md §5.3)."""
        return bool(self.analysis.plane(state, CROSSED) & self._need_masks[id(event)][1])

    def edge_states(self, header: int) -> tuple[int, int]:
        """The state on the fenced entry edges into `header` (a `PlacedFence` with
        `entries`), before and after their fences: what the preheader the edits create
        starts and ends with. The state entering the function has nothing pending, so
        only the entries that are blocks count.

        >>> import ptxkit
        >>> from ptxkit.cfg.fence.placement import plan_fences
        >>> m = ptxkit.parse_file("samples/fence/x16_created_preheader.ptx")
        >>> analysis = KernelAnalysis(m.function("k"), AnalysisOptions())
        >>> (plan,), solution = plan_fences(analysis)
        >>> [analysis.state_text(state) for state in solution.edge_states(plan.block)]
        ['2 writes made here (shared::cta)', 'nothing pending']
        """
        on_edges = self.edge_fences[header]
        state = 0
        for block in on_edges[0][0]:
            if block != ENTRY:
                state |= self.outs[block]
        state &= ~self.analysis._foreign()[header]  # the same threads run the preheader and the header
        before = state
        for _, event in on_edges:
            state = self._step(event, state)
        return before, state

    def _edge_merges(self, merges: dict[int, Merge]) -> dict[int, Merge]:
        """`merges` with, at each header that has fences on its entry edges, those fences
        applied to what the entries hand over before the merge."""
        if not self.edge_fences:
            return merges
        merges = dict(merges)
        for header, on_edges in self.edge_fences.items():
            merges[header] = functools.partial(_fenced_on_entry, self._step, merges.get(header), on_edges[0][0],
                                               [event for _, event in on_edges])
        return merges

    # -- the fixpoint ---------------------------------------------------------------------------
    def _run(self, needy: dict[int, int]) -> None:
        """Solve with fences before the ops in `needy` (id -> cover), hand-offs to a
        fixpoint; sets `ins`, `outs`, `exports`, `imports`.

        What a crediting fence credits (the accesses other threads handed to it) is
        taken once from a solution without credit: credit removes hand-offs, and
        computed inside the same fixpoint it would start from a round with nothing
        handed over, credit nothing, and let the accesses it should have covered
        circulate for good (docs/fence.md §4.4)."""
        analysis = self.analysis
        if self._crediting_ids:
            ids, self._crediting_ids = self._crediting_ids, frozenset()
            self._fixpoint(needy)
            credits = dict.fromkeys(ids, 0)
            threads = runners(analysis.flow)
            before: dict[int, dict[int, int]] = {}  # the threads of a fence's block -> what was imported before
            for block, state, event in self.walk(ids):
                if threads[block] not in before:
                    before[threads[block]] = self._imported_before_in_round(threads[block])
                earlier = before[threads[block]][block] | self._block_imports(block, until=event)
                credits[id(event)] |= analysis.plane(state & analysis._fence_kill(event), IMPORTED) & earlier
            self._crediting = {key: mask for key, mask in credits.items() if mask}
            if not self._crediting:  # no fence orders another thread's access: this solution stands
                return
            self._meets = self._credit_merges()
            self._own_credit = analysis._made_once()
        self._fixpoint(needy)

    def _fixpoint(self, needy: dict[int, int]) -> None:
        analysis = self.analysis
        waits, hears, homes = analysis._handoffs()
        self._kills = {key: analysis.kill_mask(cover) for key, cover in needy.items()}
        self.imports = imports = {id(w): (0, 0, 0) for w in waits}
        exports: dict[int, Export] = {}
        self.exports = exports
        dead = analysis.dead
        steps_of = self._transfer_steps()
        step = self._step
        foreign = analysis._foreign()

        def transfer(block: int, state: int) -> int:
            if block in dead:
                return 0
            state &= ~foreign[block]
            for event, adds in steps_of[block]:
                state = step(event, state, exports) if event is not None else state | adds
            return state

        audiences: dict[tuple[int, ...], list[int]] = {}  # waits that hear the same arrives share one union
        for wait, arrives in hears.items():
            audiences.setdefault(tuple(arrives), []).append(wait)
        # without credit, imports only grow from round to round and so do the states: a
        # round resumes from the last one at the waits whose imports grew
        resume = not self._crediting and not self._meets
        merges = self._edge_merges(self._meets)
        result: DataflowResult | None = None
        changed: set[int] = set()
        for _ in range(64):
            if resume and result is not None:
                result = solve_forward(analysis.flow, transfer, entry=analysis.put(analysis._full, UNCREDITED), bottom=0,
                                       join=int.__or__, merges=merges, since=result, changed=changed)
            else:
                exports.clear()  # what the arrives hand over under the current imports only
                result = solve_forward(analysis.flow, transfer, entry=analysis.put(analysis._full, UNCREDITED), bottom=0,
                                       join=int.__or__, merges=merges)
            changed = set()
            for heard, listeners in audiences.items():
                unpublished = crossed = published = credited = 0
                for arrive in heard:
                    a, b, c, d = exports.get(arrive, _NO_EXPORT)
                    unpublished |= a
                    crossed |= b
                    published |= c
                    credited |= d
                handed = (unpublished | published & ~credited, crossed, credited)
                for wait in listeners:
                    if handed != imports[wait]:
                        if any(old & ~new for old, new in zip(imports[wait], handed)):
                            resume = False  # an import shrank: the next round starts over
                        imports[wait] = handed
                        changed.add(homes[wait])
                        changed.update(analysis._hearers.get(wait, ()))
            if not changed:
                break
        else:
            if self._crediting:  # credit made the hand-offs oscillate: solve without it (sound)
                self._crediting = {}
                self._fixpoint(needy)
                return
        assert result is not None  # the loop solved at least once
        self.ins, self.outs = [state & ~foreign[block] for block, state in enumerate(result.ins)], result.outs

    def _transfer_steps(self) -> list[list[tuple[Event | None, int]]]:
        """Block -> its events as `_fixpoint` applies them under the current kills: each
        run of events that only add state bits, with no fence planned before them (an
        access adds its facts, `generated`; an async op adds nothing), as one ``(None,
        the bits)``; any other event as ``(event, 0)``, for `_step`. Made once per
        fixpoint, not at every visit of a block."""
        kills, generated = self._kills, self.analysis.generated
        table: list[list[tuple[Event | None, int]]] = []
        for events in self.events:
            steps: list[tuple[Event | None, int]] = []
            run: int | None = None  # the bits of the run of adding events so far
            for event in events:
                adds = generated.get(id(event))
                if (adds is not None or event.kind is Kind.ASYNC) and not (
                        event.guard is None and kills.get(id(event))):  # `_step` kills before it adds
                    run = (run or 0) | (adds or 0)
                    continue
                if run:
                    steps.append((None, run))
                run = None
                steps.append((event, 0))
            if run:
                steps.append((None, run))
            table.append(steps)
        return table

    def _step(self, event: Event, state: int, exports: dict[int, Export] | None = None) -> int:
        """One event's effect on a state. The fixpoint passes its `exports` for an arrive
        to record what it hands over; the readers replay the solved states with none, and
        so write nothing into the solution."""
        analysis = self.analysis
        key = id(event)
        strong = event.guard is None
        mask = self._kills.get(key)
        if mask and strong:  # the fence planned before this op
            state &= ~mask
        gen = analysis.generated.get(key)
        if gen is not None:
            return state | gen
        kind = event.kind
        if kind is Kind.FENCE or kind is Kind.INSERTED or kind is Kind.INIT_FENCE:
            if strong:
                kill = analysis._fence_kill(event)
                credit = self._crediting.get(key)
                if credit:  # what other threads handed over: their accesses, fenced here
                    state &= ~analysis.put(credit, UNCREDITED)
                state &= ~kill
        elif kind is Kind.CP_ASYNC_WAIT:
            state |= analysis.plane(state, IN_FLIGHT)
            if event.detail and strong:
                state &= ~analysis.put(analysis._full, IN_FLIGHT)
        if kind is Kind.ARRIVE and event.detail == RELEASE and strong:
            # a release at cluster scope: every init this thread made or saw is released (docs/fence.md §4.7)
            state &= ~(analysis.put(analysis._hazard_masks[Hazard.INIT_CLUSTER], LOCAL)
                       | analysis.put(analysis._hazard_masks[Hazard.INIT_CLUSTER], IMPORTED))
        if kind is Kind.ARRIVE or kind is Kind.ARRIVE_WAIT:
            if exports is not None:
                self._record_export(event, state, exports)
            if strong:  # the threads that wait on this phase now have them in their past
                state &= ~analysis.put(analysis._full, UNPUBLISHED)
                if event.cross:  # and those of the other CTAs, what crossed
                    state &= ~analysis.put(analysis._full, REMOTE)
        if kind is Kind.WAIT or kind is Kind.ARRIVE_WAIT:
            same, crossed, credited = self.imports.get(key, _NO_IMPORT)
            # this thread's own accesses, handed on and fenced by another thread: only a
            # named barrier's wait is sure to see that thread's arrive (an mbarrier's
            # parity wait passes at once on the phase before the first)
            own = credited & ~analysis.plane(state, UNPUBLISHED) & self._own_credit \
                if event.sync is not None and event.sync[0] is SyncObject.NAMED_BARRIER else 0
            if own:
                state &= ~(analysis.put(own, LOCAL) | analysis.put(own, IMPORTED))
            state |= analysis.put(same, IMPORTED) | analysis.put(crossed, CROSSED) | analysis.put(same, UNCREDITED)
            if kind is Kind.WAIT:
                state |= analysis.put(same, UNPUBLISHED)
        return state

    def _record_export(self, event: Event, state: int, exports: dict[int, Export]) -> None:
        """Add to `exports` what the arrive `event` hands over from `state`, the state
        just before it (in the fixpoint only: `_step`)."""
        analysis = self.analysis
        key = id(event)
        same = analysis.pending(state)
        unpublished = same & analysis.plane(state, UNPUBLISHED)
        if event.detail == "cp.async":  # writes still in flight: no fence of another thread orders them
            in_flight = analysis.plane(state, IN_FLIGHT)
            same |= in_flight
            unpublished |= in_flight
        fenced = analysis._fenced_before_copies.get(key)
        # every copy the waiters need comes after every thread fenced these (docs/fence.md §4.6)
        if fenced:
            same &= ~fenced
            unpublished &= ~fenced
        crossed = analysis.plane(state, CROSSED)
        if event.cross:
            crossed |= analysis.plane(state, REMOTE) | same
        limit = analysis._export_limits.get(key)
        # an arrive before its mbarrier's one completion, or run once (docs/fence.md §4.5)
        if limit is not None:
            allowed, own, heard = limit
            if heard is not None:
                imported = 0
                for wait in heard:
                    imported |= self.imports.get(wait, _NO_IMPORT)[0]
                local, handed = analysis.plane(state, LOCAL), analysis.plane(state, IMPORTED)
                allowed &= ~((local | handed) & ~(local & own | handed & imported))
            same &= allowed
            unpublished &= allowed
        old = exports.get(key, _NO_EXPORT)
        exports[key] = (old[0] | unpublished, old[1] | crossed, old[2] | same & ~unpublished,
                        old[3] | analysis._full & ~analysis.plane(state, UNCREDITED))

    def _needs_now(self) -> Found:
        """For the current states: id(event) -> (pending overlapping facts, cover, block)."""
        found: Found = {}
        for block, state, event, pending in self._consumers():
            if pending:
                found[id(event)] = (pending, self.analysis._cover(pending, event, self.crossing(event, state)), block)
        return found

    def _consumers(self) -> Iterator[tuple[int, int, Event, int]]:
        """Yield ``(block, state before, event, overlapping facts)`` for every async op
        (and strict extern call). A fence under a guard orders nothing on the path where
        the guard is false, so the states keep what it orders; but a later op under the
        same guard, in the same block with the guard register unchanged, only runs when
        that fence ran: for it, what the fence ordered is not pending, unless an access or
        a wait between them made or brought it again."""
        analysis = self.analysis
        wanted = self._need_masks.keys()
        for block in analysis.flow.rpo:
            events = self.events[block]
            if not events or block in analysis.dead or not any(id(e) in wanted for e in events):
                continue
            state = self.ins[block]
            covered: tuple[Guard, int, int] | None = None  # (guard, killed state bits, position of the fence)
            instructions = analysis.flow.blocks[block].instructions
            heads = analysis.flow.blocks[block].heads
            for event in events:
                guard = event.guard
                if covered is not None and (guard is None or guard != covered[0] or _redefines(
                        instructions, heads, covered[2], event.position, guard)):
                    covered = None
                if id(event) in wanted:
                    seen = state & ~covered[1] if covered is not None else state
                    yield block, state, event, self.overlapping(event, seen)
                if guard is not None:
                    killed = self._kills.get(id(event)) or (
                        analysis.kill_mask(event.spaces) if event.kind in (Kind.FENCE, Kind.INSERTED) else 0)
                    if killed:
                        covered = (guard, killed | (covered[1] if covered is not None else 0), event.position)
                if covered is not None and (event.kind is Kind.WAIT or event.kind is Kind.ARRIVE_WAIT):
                    covered = None  # what the wait imports came after the fence
                elif covered is not None and id(event) in analysis.generated:  # so does what an access makes
                    covered = (covered[0], covered[1] & ~analysis.generated[id(event)], covered[2])
                state = self._step(event, state)

    def walk(self, wanted: Collection[int] | None = None) -> Iterator[tuple[int, int, Event]]:
        """Yield ``(block, state before, event)`` for every event (or the events whose
        id is in `wanted`) of the reachable blocks, in the current fixpoint."""
        analysis = self.analysis
        for block in analysis.flow.rpo:
            events = self.events[block]
            if not events or block in analysis.dead:
                continue
            if wanted is not None and not any(id(e) in wanted for e in events):
                continue
            state = self.ins[block]
            for event in events:
                if wanted is None or id(event) in wanted:
                    yield block, state, event
                state = self._step(event, state)

    def _solve(self) -> None:
        """Find which async ops get a fence right before them and the states of the
        function with those and the planned fences.

        With no fences before ops the needy set is the largest it can be, and fencing all
        of it is sound (each fence only removes pending facts). Then try the ops that
        are still needy with those fences in place, and keep the last set whose own
        needs it covers: a fence before one op can make a later op's fence
        unnecessary, but dropping a fence can also make another one necessary."""
        self._run({})
        found = self._needs_now()
        if found and self._separate_threads(found):
            self._run({})
            found = self._needs_now()
        self._reasons = {key: pending for key, (pending, _, _) in found.items()}
        candidate = {key: cover for key, (_, cover, _) in found.items()}
        sound: dict[int, int] | None = None
        ran: dict[int, int] = {}
        for _ in range(6):
            if candidate == ran:
                found_now = found
            else:
                self._run(candidate)
                ran = candidate
                found_now = self._needs_now()
            if all(key in candidate and not cover & ~candidate[key] for key, (_, cover, _) in found_now.items()):
                sound = candidate
                for key, (pending, _, _) in found_now.items():
                    self._reasons[key] = pending
                smaller = {key: cover for key, (_, cover, _) in found_now.items()}
                if smaller == candidate:
                    break
                candidate = smaller
            else:
                for key, (pending, cover, _) in found_now.items():
                    self._reasons.setdefault(key, pending)
                    candidate = {**candidate, key: cover | candidate.get(key, 0)}
            found = found_now
        if sound is None:
            sound = candidate
        if ran != sound:
            self._run(sound)
        self.needy = sound

    def _separate_threads(self, found: Found) -> bool:
        """Take out of each needy op's facts those no thread's access overlaps, its
        address taken thread by thread (docs/fence.md §3.6); True when any went. The
        interval of a fact joins every thread's address, so two terms that follow the
        same thread-index bit may add up to bytes no thread touches; this is asked only
        for the facts behind a fence the pass would add."""
        analysis = self.analysis
        events = {id(event): event for block in {block for _, _, block in found.values()}
                  for event in self.events[block]}
        whole = 0  # facts with an access that does not follow the thread index: they stay
        changed = False
        masks = dict(self._need_masks)  # the earlier solution's stay as they are
        for key, (pending, _, at) in found.items():
            event = events[key]
            issued = analysis._issued(at, event)  # its bytes in the threads that may run it
            mask, crossed = masks[key]
            for index in bits(pending):
                fact = analysis.facts[index]
                targets = _at_risk(event, fact.hazard)
                if issued is not event and any(overlaps(target, fact.location) for target in targets):
                    targets = _at_risk(issued, fact.hazard)
                    if not any(overlaps(target, fact.location) for target in targets):
                        targets = ()  # no thread that runs the op touches the fact's bytes
                if any(covers(target, fact.location) for target in targets):
                    continue  # every access the fact stands for lies in the op's bytes
                if targets and whole >> index & 1:
                    continue
                answers = (analysis._touched(block, origin, targets) for block, origin in fact.origins)
                kept = next((answer for answer in answers if answer is not False), False) if targets else False
                if kept is None:
                    whole |= 1 << index
                elif not kept:
                    mask &= ~(1 << index)
                    crossed &= ~(1 << index)
                    changed = True
            masks[key] = (mask, crossed)
        self._need_masks = masks
        return changed

    # -- results --------------------------------------------------------------------------------
    def needs(self) -> list[Need]:
        """The fences this solution puts right before async ops, in block order."""
        analysis = self.analysis
        found = []
        for block, state, event, pending in self._consumers():
            if id(event) not in self.needy:
                continue
            pending = pending or self._reasons.get(id(event), 0)
            instruction = analysis.flow.blocks[block].instructions[event.position]
            found.append(Need(block, event, instruction, event.guard, pending, self.needy[id(event)],
                              analysis._hazard(pending), state))
        return found

    def in_flight(self) -> list[tuple[Instruction, str]]:
        """Async ops that may read shared memory still being written by a ``cp.async``
        that no wait has completed: a fence cannot order those writes. Those the state
        names are looked at again with the commit groups counted and the ring stages
        told apart (`ptxkit.cfg.sync.groups`, docs/fence.md §3.7)."""
        analysis = self.analysis
        named = [(block, event) for block, state, event in self.walk(self._need_masks.keys())
                 if event.kind is Kind.ASYNC and analysis.plane(state, IN_FLIGHT) & self._need_masks[id(event)][0]]
        if not named:
            return []
        blocks = analysis.flow.blocks
        found = []
        for block, event, copy in overlapping_in_flight(analysis.flow, analysis._classified, named):
            if copy is not None:
                line = blocks[copy[0]].instructions[copy[1].position].line
                write, why = f"the cp.async write at line {line}", "no wait completes its group on some path"
            else:  # the search gave up: what the proxy state says, unrefined
                write, why = "a cp.async write", ("no wait completes its group on some path, and the search that "
                                                  "tells a ring's stages apart gave up on this kernel")
            found.append((blocks[block].instructions[event.position],
                          f"{write} may still be in flight here ({why}): a proxy fence does not wait for it"))
        return found

    def generated_spaces(self, block: int) -> int:
        """The spaces of the facts block `block` makes pending (its accesses, what its
        waits import, the cp.async writes its ``cp.async.wait`` completes): a fence
        hoisted over it would not order them."""
        analysis = self.analysis
        spaces = 0
        state = self.ins[block]
        for event in self.events[block]:
            gen = analysis.generated.get(id(event))
            if gen is not None:
                spaces |= analysis.spaces_of(analysis.plane(gen, LOCAL))
            if event.kind in (Kind.WAIT, Kind.ARRIVE_WAIT):
                same, crossed, _ = self.imports.get(id(event), _NO_IMPORT)
                spaces |= analysis.spaces_of(same | crossed)
            elif event.kind is Kind.CP_ASYNC_WAIT:
                spaces |= analysis.spaces_of(analysis.plane(state, IN_FLIGHT))
            state = self._step(event, state)
        return spaces

    def pending_before(self, block: int, event: Event) -> int:
        """The facts pending (local or imported) just before `event` of `block`, or
        before the fence `event` on `block`'s entry edges."""
        analysis = self.analysis
        on_edges = self.edge_fences.get(block, ())
        if any(other is event for _, other in on_edges):
            state = self.edge_states(block)[0]
            for _, other in on_edges:
                if other is event:
                    break
                state = self._step(other, state)
            return analysis.pending(state) | analysis.plane(state, CROSSED)
        state = self.ins[block]
        for other in self.events[block]:
            if other is event:
                break
            state = self._step(other, state)
        return analysis.pending(state) | analysis.plane(state, CROSSED)

    # -- witnesses ------------------------------------------------------------------------------
    def explain(self, need: Need, within: int = -1) -> list[Step]:
        """A witness for `need`: the access, (for a hand-off) the arrive and the wait,
        and the async op, each with the blocks passed to get there; the access one of
        the facts of `within` (a mask; every fact by default) where one reaches the op."""
        analysis = self.analysis
        facts = need.pending & within or need.pending
        pending = facts & analysis._hazard_masks[need.hazard] or facts
        target = Step("op", need.block, need.instruction)
        for fact in _precise_first(pending & analysis.plane(need.state, LOCAL), analysis.facts):
            path = self._trace(analysis._bit(LOCAL, fact), need.block, need.event)
            if path is not None:
                origin, target.via = path
                return [analysis._access_step(origin, fact), target]
        for fact in _precise_first(pending, analysis.facts):
            for which in (IMPORTED, CROSSED):
                if not analysis.plane(need.state, which) >> fact & 1:
                    continue
                path = self._trace(analysis._bit(which, fact), need.block, need.event)
                if path is None:
                    continue
                (wait_block, wait_event), target.via = path
                return [*self._handed_to(wait_block, wait_event, fact, which), target]
        return [target]

    def _handed_to(self, block: int, wait_event: Event, fact: int, which: int) -> list[Step]:
        """The witness up to the wait `wait_event` of `block` that imported `fact` into
        plane `which`: the access, then each arrive and wait that handed it on, earliest
        first, by the fewest hand-offs that lead back to the access (a relay: a producer's
        mbarrier to one consumer, its ``bar.sync`` to the next), searched breadth first up
        to `_MOST_HOPS`. Where none does, the access is an ``origin`` before the last
        hand-off, its path not shown; the wait alone where no arrive hands `fact` on."""
        analysis = self.analysis
        last = Step("wait", block, analysis.flow.blocks[block].instructions[wait_event.position])
        frontier: list[tuple[Event, int, list[Step]]] = [(wait_event, which, [last])]
        seen = {id(wait_event)}
        fallback: list[Step] | None = None
        for _ in range(_MOST_HOPS):
            following: list[tuple[Event, int, list[Step]]] = []
            for wait, plane_in, tail in frontier:
                for arrive_block, arrive_event, plane in self._arrivals(wait, fact, plane_in):
                    instruction = analysis.flow.blocks[arrive_block].instructions[arrive_event.position]
                    arrive = Step("arrive", arrive_block, instruction)
                    traced = self._trace(analysis._bit(plane, fact), arrive_block, arrive_event)
                    if plane not in (IMPORTED, CROSSED):
                        if traced is not None:
                            origin, arrive.via = traced
                            return [analysis._access_step(origin, fact), arrive, *tail]
                        continue
                    if fallback is None and tail[0] is last:
                        fallback = [*self._origin(fact), Step("arrive", arrive_block, instruction), *tail]
                    if traced is not None and id(traced[0][1]) not in seen:  # handed on again: the one before
                        (earlier_block, earlier_wait), arrive.via = traced
                        seen.add(id(earlier_wait))
                        earlier = Step("wait", earlier_block,
                                       analysis.flow.blocks[earlier_block].instructions[earlier_wait.position])
                        following.append((earlier_wait, plane, [earlier, arrive, *tail]))
            frontier = following
        return fallback or [last]

    def _origin(self, fact: int) -> list[Step]:
        """The access of `fact` a witness names without its path (an ``origin``): one still
        pending at an arrive of its own thread, else the first; none for a fact of none."""
        analysis = self.analysis
        origins = analysis.facts[fact].origins
        if not origins:
            return []
        access = analysis._access_step(self._unfenced_origin(fact) or origins[0], fact)
        access.what = "origin"
        return [access]

    def _unfenced_origin(self, fact: int) -> Origin | None:
        """An access of `fact` still pending in its own thread at an arrive, which hands
        it on (``(block, event)``), or None: of the instructions that make one fact, the
        one a witness should name, not one its own thread fenced."""
        analysis = self.analysis
        for block, state, event in self.walk():
            if event.kind not in (Kind.ARRIVE, Kind.ARRIVE_WAIT):
                continue
            for plane in _own_planes(event):
                if analysis.plane(state, plane) >> fact & 1:
                    traced = self._trace(analysis._bit(plane, fact), block, event)
                    if traced is not None:
                        return traced[0]
        return None

    def _arrivals(self, wait: Event, fact: int, which: int) -> Iterator[tuple[int, Event, int]]:
        """Arrive events heard by `wait` that exported `fact` into plane `which`, with
        the plane it sat in at the arrive."""
        sync = _sync_of(wait)
        for block, state, event in self.walk():
            if event.kind not in (Kind.ARRIVE, Kind.ARRIVE_WAIT) or not _matches(sync, _sync_of(event)):
                continue
            planes = list(_own_planes(event))
            if which == CROSSED and event.cross:
                planes.append(REMOTE)
            planes += [IMPORTED, CROSSED] if which == CROSSED else [IMPORTED]
            for plane in planes:
                if self.analysis.plane(state, plane) >> fact & 1:
                    yield block, event, plane
                    break

    def _trace(self, bit: int, block: int, event: Event) -> tuple[Origin, list[int]] | None:
        """A path along which state bit `bit` stays set from the event that sets it to
        just before `event` of `block`: ``((source block, source event), [blocks])``.
        Fenced entry edges (`edge_states`) are searched as the preheader the edits
        create there: after the header's other predecessors, one step further away."""
        found = self._source_in_block(bit, block, event)
        if found is not None:
            return (block, found), [block]
        if not self.ins[block] >> bit & 1:
            return None
        parents: dict[int, int] = {}  # block -> the block it leads to, towards `block`
        queue = [block]
        for current in queue:
            for p in self._trace_preds(current):
                if p in parents or not self._trace_out(p) >> bit & 1:
                    continue
                parents[p] = current
                source = self._source_in_block(bit, p, None) if p >= 0 else None
                if source is not None:
                    path = [p]
                    while True:
                        path.append(parents[path[-1]])
                        if path[-1] == block:
                            return (p, source), [b for b in path if b >= 0]
                queue.append(p)
        return None

    def _trace_preds(self, node: int) -> list[int]:
        """`_trace`'s predecessors of `node`: a header with fenced entry edges has, in
        place of its entries, its preheader-to-be ``-1 - header``, whose predecessors
        are those entries."""
        analysis = self.analysis
        if node < 0:
            fenced = self.edge_fences[-1 - node][0][0]
            return [p for p in analysis.flow.pred[-1 - node] if p in fenced]
        if node not in self.edge_fences:
            return analysis.flow.pred[node]
        fenced = self.edge_fences[node][0][0]
        return [p for p in analysis.flow.pred[node] if p not in fenced] + [-1 - node]

    def _trace_out(self, node: int) -> int:
        return self.outs[node] if node >= 0 else self.edge_states(-1 - node)[1]

    def _source_in_block(self, bit: int, block: int, before: Event | None) -> Event | None:
        """The event of `block` (before `before`) that last set state bit `bit`, when
        the bit then stays set up to that point; None when it comes from outside."""
        state = self.ins[block]
        source = None
        for event in self.events[block]:
            if event is before:
                break
            after = self._step(event, state)
            if not after >> bit & 1:
                source = None
            elif not state >> bit & 1 or self._sets(event, bit):
                source = event
            state = after
        return source

    def _sets(self, event: Event, bit: int) -> bool:
        """True when `event` itself makes state bit `bit` set (an access or a wait)."""
        analysis = self.analysis
        gen = analysis.generated.get(id(event))
        if gen is not None:
            return bool(gen >> bit & 1)
        if event.kind in (Kind.WAIT, Kind.ARRIVE_WAIT):
            same, crossed, _ = self.imports.get(id(event), _NO_IMPORT)
            return bool((analysis.put(same, IMPORTED) | analysis.put(crossed, CROSSED)) >> bit & 1)
        return False


def _own_planes(event: Event) -> tuple[int, ...]:
    """The planes whose accesses an arrive hands on from its own thread: those pending
    there, and for ``cp.async.mbarrier.arrive`` the copies still in flight."""
    return (LOCAL, IN_FLIGHT) if event.detail == "cp.async" else (LOCAL,)


def _at_risk(event: Event, hazard: Hazard) -> tuple[Location, ...]:
    """The bytes of an async op that a pending access of `hazard` must not meet: all it
    touches for a write (RAW), what it writes for a read (WAR)."""
    return event.writes if hazard is Hazard.WAR else event.locations + event.writes


def _redefines(instructions: Sequence[Instruction], heads: Sequence[HeadTuple], start: int, stop: int,
               guard: Guard) -> bool:
    """True when an instruction in ``[start, stop)`` may write the guard's register."""
    if start >= stop:
        return False
    pattern = re.compile(r"(?<![\w$%])" + re.escape(guard.register) + r"(?![\w$])")
    return any(pattern.search(instructions[index].text, heads[index][3]) for index in range(start, stop))


def _precise_first(mask: int, facts: list[Fact]) -> list[int]:
    """The facts of `mask`, the narrowest locations first (the clearest witnesses)."""
    return sorted(bits(mask), key=lambda i: (facts[i].location.region is None,
                                             facts[i].location.end - facts[i].location.start))


def _position(event: Event) -> int:
    """Where an event is in its block (the key events are kept sorted by)."""
    return event.position


def _sync_of(event: Event) -> SyncKey:
    """The object an arrive or a wait hands accesses over through: every one has one."""
    sync = event.sync
    assert sync is not None, event
    return sync


def _strict_extern(event: Event) -> bool:
    """True for an extern call under the strict policy: it may start async ops itself
    (its `Event.detail` is ``(callee, policy)``)."""
    detail = event.detail
    return event.kind is Kind.EXTERN and isinstance(detail, tuple) and detail[1] == "strict"


def _object_key(sync: SyncKey) -> ObjectKey:
    """The bucket an arrive's object falls in: named barriers by id (None: any), mbarriers
    by region (None: anywhere), warp syncs by instruction, the others by kind."""
    if sync[0] is SyncObject.MBARRIER:
        return sync[0], sync[1].region
    return sync


def _keys_heard(wait: SyncKey, by_object: dict[ObjectKey, list[Event]]) -> list[ObjectKey]:
    """The buckets of arrives a wait on `wait` may hear (`_matches` then decides)."""
    keys: list[ObjectKey]
    if wait[0] is SyncObject.NAMED_BARRIER and wait[1] is not None:
        ids = wait[1]
        return [key for key in by_object
                if key[0] is SyncObject.NAMED_BARRIER and (key[1] is None or key[1] & ids)]
    if wait[0] is SyncObject.MBARRIER and wait[1].region is not None:
        keys = [(wait[0], wait[1].region), (wait[0], None)]
    elif wait[0] is SyncObject.WARP:
        keys = [(wait[0], wait[1])]
    else:
        return [key for key in by_object if key[0] is wait[0]]
    return [key for key in keys if key in by_object]


def _matches(wait: SyncKey, arrive: SyncKey) -> bool:
    """True when an arrive on `arrive` may be what a wait on `wait` waits for."""
    if wait[0] is SyncObject.NAMED_BARRIER and arrive[0] is SyncObject.NAMED_BARRIER:  # id sets, None for any id
        return wait[1] is None or arrive[1] is None or bool(wait[1] & arrive[1])
    if wait[0] is SyncObject.MBARRIER and arrive[0] is SyncObject.MBARRIER:
        return overlaps(wait[1], arrive[1])
    if wait[0] is SyncObject.WARP and arrive[0] is SyncObject.WARP:
        return wait[1] == arrive[1]  # the same bar.warp.sync instruction
    return wait[0] is arrive[0]
