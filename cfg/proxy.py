"""The generic/async proxy analysis of one function (research fence.md §5.1, §5.2, §5.5).

State: for each proxy space (shared::cta, shared::cluster, global) a *may*-set of
{none, generic, async}, plus a ``token`` bit used to summarise ``.func`` bodies and an
``in-flight`` bit for cp.async writes that no wait has completed yet. The join is
union. Everything is packed in one integer (a nibble per space), and every event is a
transfer of the form ``f(x) = (x & K) | G | ((x & M) >> 1)``: keep, generate, and
"fence": move the generic bit of some spaces to none. That family is closed under
composition, so each basic block's transfer is three integers and the fixpoint costs
a few bit operations per block.

Rules (fence.md §5.2): an unguarded generic write sets its space to {generic}, a
guarded one adds generic; an async op sets its spaces to {async} (whether or not a
fence is put before it: fence decisions never feed back into the fixpoint) and, in the
overlapping shared window, turns generic into none, because the fence that its need
triggers orders that window too; an unguarded proxy fence sets its spaces to {none},
a guarded one never kills anything. An async op *needs* a fence when a space it
touches, or the other shared window, may be generic on entry.

>>> import ptxkit
>>> from ptxkit.cfg.graph import flow_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .b32 %r<2>;\\n.reg .b64 %rd<3>;\\n.reg .f32 %f<5>;\\n.reg .pred %p<2>;\\n"
...     "\\tst.shared.u32 [%r1], 0;\\n\\twgmma.fence.sync.aligned;\\n"
...     "\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1, 1, 1, 0, 0;\\n"
...     "\\tret;\\n}\\n")
>>> analysis = FunctionAnalysis(m.function("k"), AnalysisOptions())
>>> analysis.solve()
>>> [(need.position, spaces_text(need.cover)) for need in analysis.scan().needs]
[(2, 'shared::cta')]
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from ptxkit.cfg.dataflow import solve_forward
from ptxkit.cfg.graph import flow_graph
from ptxkit.cfg.provenance import address_spaces, pointer_provenance, shared_spaces
from ptxkit.isa import GLOBAL, SHARED_CLUSTER, SHARED_CTA, is_benign_extern, proxy_effect

# -- spaces and state bits ----------------------------------------------------------------

CTA, CLUSTER, GLOBAL_SPACE = 1, 2, 4
SHARED = CTA | CLUSTER
EVERY_SPACE = SHARED | GLOBAL_SPACE
SPACE_BITS = {SHARED_CTA: CTA, SHARED_CLUSTER: CLUSTER, GLOBAL: GLOBAL_SPACE}
SPACE_NAMES = ((CTA, SHARED_CTA), (CLUSTER, SHARED_CLUSTER), (GLOBAL_SPACE, GLOBAL))

NONE, GENERIC, ASYNC, TOKEN = 1, 2, 4, 8  # bits of one space's nibble
IN_FLIGHT = 1 << 12  # a cp.async write not yet completed by a wait
ALL = (1 << 13) - 1
IDENTITY = (ALL, 0, 0)


def spread(spaces: int, bits: int) -> int:
    """Put `bits` in the nibble of every space in `spaces`.

    >>> hex(spread(CTA | GLOBAL_SPACE, GENERIC))
    '0x202'
    """
    out = 0
    if spaces & CTA:
        out |= bits
    if spaces & CLUSTER:
        out |= bits << 4
    if spaces & GLOBAL_SPACE:
        out |= bits << 8
    return out


def spaces_with(state: int, bit: int) -> int:
    """The spaces whose nibble contains `bit`.

    >>> spaces_with(spread(CLUSTER, GENERIC) | spread(CTA, ASYNC), GENERIC) == CLUSTER
    True
    """
    return (CTA if state & bit else 0) | (CLUSTER if state & (bit << 4) else 0) | (
        GLOBAL_SPACE if state & (bit << 8) else 0)


def overlap(spaces: int) -> int:
    """The spaces whose objects may alias those of `spaces` (the two shared windows).

    >>> overlap(CTA) == SHARED, overlap(GLOBAL_SPACE) == GLOBAL_SPACE
    (True, True)
    """
    return spaces | SHARED if spaces & SHARED else spaces


def spaces_text(spaces: int) -> str:
    """Names of a space set.

    >>> spaces_text(CTA | GLOBAL_SPACE), spaces_text(0)
    ('shared::cta+global', '-')
    """
    return "+".join(name for bit, name in SPACE_NAMES if spaces & bit) or "-"


def state_text(state: int, tracked: int = EVERY_SPACE) -> str:
    """A state in words, e.g. ``shared::cta={generic,async} shared::cluster={none}``.

    >>> state_text(spread(CTA, GENERIC | ASYNC) | spread(CLUSTER, NONE), SHARED)
    'shared::cta={generic,async} shared::cluster={none}'
    """
    parts = []
    for bit, name in SPACE_NAMES:
        if tracked & bit:
            nibble = (state >> (4 * (bit.bit_length() - 1))) & 15
            kinds = [k for b, k in ((NONE, "none"), (GENERIC, "generic"), (ASYNC, "async"), (TOKEN, "caller")) if nibble & b]
            parts.append(f"{name}={{{','.join(kinds)}}}")
    if state & IN_FLIGHT:
        parts.append("cp.async in flight")
    return " ".join(parts)


# -- transfers ------------------------------------------------------------------------------


def apply(transfer: tuple, state: int) -> int:
    """Apply a transfer ``(K, G, M)`` to a state.

    >>> apply(write_transfer(CTA, strong=True), spread(CTA, ASYNC)) == spread(CTA, GENERIC)
    True
    """
    keep, gen, fence = transfer
    return (state & keep) | gen | ((state & fence) >> 1)


def compose(first: tuple, second: tuple) -> tuple:
    """The transfer of `first` followed by `second`.

    >>> t = compose(write_transfer(CTA, True), fence_transfer(CTA, True))
    >>> apply(t, spread(CTA, ASYNC)) == spread(CTA, NONE)
    True
    """
    k1, g1, m1 = first
    k2, g2, m2 = second
    return (k1 & k2, (g1 & k2) | g2 | ((g1 & m2) >> 1), (m1 & (k2 << 1)) | (k1 & m2))


def weaken(transfer: tuple) -> tuple:
    """The transfer of a guarded instruction: the old state survives (``x ∪ f(x)``).

    >>> apply(weaken(fence_transfer(CTA, True)), spread(CTA, GENERIC)) == spread(CTA, GENERIC | NONE)
    True
    """
    return ALL, transfer[1], transfer[2]


def write_transfer(spaces: int, strong: bool) -> tuple:
    """A generic-proxy write of `spaces`.

    >>> state_text(apply(write_transfer(CTA, strong=True), spread(CTA, ASYNC)), CTA)
    'shared::cta={generic}'
    >>> state_text(apply(write_transfer(CTA, strong=False), spread(CTA, ASYNC)), CTA)
    'shared::cta={generic,async}'
    """
    return (ALL & ~spread(spaces, 15) if strong else ALL), spread(spaces, GENERIC), 0


def async_transfer(spaces: int, strong: bool) -> tuple:
    """An async-proxy access of `spaces` (preceded by the fence it needs, if any).

    >>> state_text(apply(async_transfer(CTA, strong=True), spread(SHARED, GENERIC)), SHARED)
    'shared::cta={async} shared::cluster={none}'
    """
    window = spread(overlap(spaces) & ~spaces, GENERIC)
    keep = ALL & ~spread(spaces, 15) & ~window if strong else ALL
    return keep, spread(spaces, ASYNC), window


def fence_transfer(spaces: int, strong: bool) -> tuple:
    """A proxy fence ordering `spaces`.

    >>> state_text(apply(fence_transfer(SHARED, strong=True), spread(SHARED, GENERIC | ASYNC)), SHARED)
    'shared::cta={none} shared::cluster={none}'
    """
    return (ALL & ~spread(spaces, 15) if strong else ALL), spread(spaces, NONE), 0


# -- options, events, results ------------------------------------------------------------


@dataclass(frozen=True)
class AnalysisOptions:
    """What the analysis models.

    track_global:
        Also track the global space (generic global writes before TMA loads, bulk
        copies and stores that read global memory). Off by default, as in TileLang.
    extern_policy:
        ``none`` (an extern call does nothing, unless it receives a shared pointer,
        which counts as a generic write), ``clobber`` (after the call every space may
        hold generic writes and async accesses) or ``strict`` (``clobber`` and the call
        may itself start async ops, so it needs a fence before it like one).
    cta_fence_covers_cluster:
        Treat ``fence.proxy.async.shared::cta`` as ordering both shared windows (as
        CUTLASS and TileLang do); set by ``fence_variant="shared::cta"``.

    >>> spaces_text(AnalysisOptions().tracked), spaces_text(AnalysisOptions(track_global=True).tracked)
    ('shared::cta+shared::cluster', 'shared::cta+shared::cluster+global')
    """

    track_global: bool = False
    extern_policy: str = "clobber"
    cta_fence_covers_cluster: bool = False

    @property
    def tracked(self) -> int:
        return EVERY_SPACE if self.track_global else SHARED


class Event(NamedTuple):
    """One instruction's effect on the proxy state (or a fence the pass decided on).

    kind: ``write``, ``async``, ``fence``, ``call`` (a ``.func`` with a summary),
    ``extern``, ``cp.async``, ``completion`` or ``inserted`` (a hoisted fence; its
    `position` is the instruction it goes before, or the block length for "at the end").

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/06b_tma_store_after_shared_store.ptx")
    >>> events = FunctionAnalysis(m.function("k"), AnalysisOptions()).events[0]
    >>> [(e.position, e.kind, spaces_text(e.spaces), e.guard) for e in events]
    [(9, 'write', 'shared::cta', None), (10, 'async', 'shared::cta', None)]
    """

    position: int
    kind: str
    spaces: int
    guard: object
    transfer: tuple
    detail: object = None


@dataclass
class Summary:
    """What a call to a ``.func`` does to its caller's state (fence.md §5.5).

    `transfer` is the call's effect; `exposed` maps a space to the fence cover its
    caller must provide before the call when the space may be generic there (the
    callee reaches an async op on it without a fence of its own); `exposed_at` names
    that async op.

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/x06_call_func_that_starts_with_wgmma.ptx")
    >>> analysis = FunctionAnalysis(m.function("mma_tile"), AnalysisOptions())
    >>> analysis.solve(); summary = analysis.summary(analysis.scan())
    >>> summary.name, {spaces_text(space): spaces_text(cover) for space, cover in summary.exposed.items()}
    ('mma_tile', {'shared::cta': 'shared::cta', 'shared::cluster': 'shared::cta+shared::cluster'})
    """

    name: str
    transfer: tuple
    exposed: dict[int, int] = field(default_factory=dict)
    exposed_at: dict[int, object] = field(default_factory=dict)


@dataclass
class Need:
    """An async op (or call) that needs a proxy fence right before it.

    >>> import ptxkit
    >>> analysis = FunctionAnalysis(ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx").function("k"),
    ...                             AnalysisOptions())
    >>> analysis.solve(); need, = analysis.scan().needs
    >>> need.kind, need.block, need.instruction.line, spaces_text(need.cover), state_text(need.state, SHARED)
    ('async', 1, 36, 'shared::cta', 'shared::cta={generic,async} shared::cluster={none}')
    """

    block: int
    position: int
    instruction: object
    guard: object
    spaces: int  # spaces that may hold pending generic writes
    cover: int  # spaces the fence must order
    state: int  # the state before the instruction
    kind: str  # "async", "call" or "extern"
    detail: object = None


@dataclass
class Diagnostic:
    """A warning about the input, at an instruction.

    >>> import ptxkit
    >>> analysis = FunctionAnalysis(ptxkit.parse_file("samples/fence/02b_cp_async_without_wait.ptx").function("k"),
    ...                             AnalysisOptions())
    >>> analysis.solve(); warning, = analysis.scan().lint
    >>> warning.node.line, warning.message
    (37, 'a cp.async write may still be in flight here ...: a proxy fence does not wait for it')
    """

    node: object
    message: str


@dataclass
class ScanResult:
    """What `FunctionAnalysis.scan` finds: the fence needs, what a caller must fence
    before a call (`exposed`, `exposed_at`, as in `Summary`), and warnings (`lint`).

    >>> import ptxkit
    >>> analysis = FunctionAnalysis(ptxkit.parse_file("samples/fence/x06_call_func_that_starts_with_wgmma.ptx")
    ...                             .function("mma_tile"), AnalysisOptions())
    >>> analysis.solve(); scan = analysis.scan()
    >>> scan.needs, sorted(map(spaces_text, scan.exposed)), scan.exposed_at[CTA].line, scan.lint
    ([], ['shared::cluster', 'shared::cta'], 21, [])
    """

    needs: list[Need]
    exposed: dict[int, int]
    exposed_at: dict[int, object]
    lint: list[Diagnostic]


_FIRST_NUMBER = re.compile(r"\s*(\d+)")
_CONSUMERS = frozenset({"async", "call", "extern"})  # the events that may need a fence before them
_PENDING = spread(EVERY_SPACE, GENERIC | TOKEN)


class FunctionAnalysis:
    """Events, fixpoint and fence needs of one function.

    `summaries` maps the names of ``.func``s analysed before this one to their
    `Summary`; `recursive` names callees in the same call-graph cycle (handled like an
    extern call under the ``strict`` policy). `defined` is the set of function names
    with a body in the module.

    >>> import ptxkit
    >>> analysis = FunctionAnalysis(ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx").function("k"),
    ...                             AnalysisOptions())
    >>> analysis.solve()
    >>> len(analysis.flow), state_text(analysis.ins[1], SHARED), state_text(analysis.exit_state, SHARED)
    (3, 'shared::cta={generic,async} shared::cluster={none}', 'shared::cta={async} shared::cluster={none}')
    """

    def __init__(self, function, options: AnalysisOptions, summaries: dict | None = None,
                 recursive: frozenset = frozenset(), defined: frozenset = frozenset(), flow=None):
        self.function = function
        self.options = options
        self.flow = flow if flow is not None else flow_graph(function)
        self.summaries = summaries or {}
        self.recursive = recursive
        self.defined = defined
        self.warnings: list[Diagnostic] = []
        tracked = options.tracked
        self.entry_state = spread(tracked, TOKEN if function.kind == "func" else NONE)
        self.events: list[list[Event]] = [[] for _ in self.flow.blocks]
        self.ins: list[int] = []
        self.outs: list[int] = []
        self._witnesses: dict[int, tuple] = {}  # mask -> `_witness_tree`
        self._classify()

    # -- events --------------------------------------------------------------------------
    def _classify(self) -> None:
        tracked = self.options.tracked
        pending_addresses = []
        pending_arguments = []
        for block in self.flow.blocks:
            events = self.events[block.index]
            for position, head in enumerate(block.heads):
                effect = proxy_effect(head[1])
                kind = effect.kind
                if kind == "none":
                    continue
                guard = head[0]
                strong = guard is None
                spaces = _bits(effect.spaces) & tracked
                instruction = block.instructions[position]
                if kind == "write":
                    if spaces:
                        events.append(Event(position, "write", spaces, guard, write_transfer(spaces, strong)))
                elif kind == "address":
                    pending_addresses.append((block.index, len(events), position, instruction, guard))
                    events.append(None)
                elif kind == "async":
                    if effect.unknown:
                        self.warnings.append(Diagnostic(instruction, f"unknown async-looking opcode '{head[1]}': "
                                                        "treated as an async-proxy access of shared memory"))
                    if spaces:
                        events.append(Event(position, "async", spaces, guard, async_transfer(spaces, strong),
                                            effect.unknown))
                elif kind == "fence":
                    if self.options.cta_fence_covers_cluster and spaces & SHARED:
                        spaces |= SHARED
                    events.append(Event(position, "fence", spaces, guard, fence_transfer(spaces, strong)))
                elif kind in ("cp.async", "cp.async.wait"):
                    transfer = write_transfer(CTA, strong)
                    if kind == "cp.async":
                        transfer = (transfer[0], transfer[1] | IN_FLIGHT, 0)
                    elif strong and _waits_for_all(head, instruction):
                        transfer = (transfer[0] & ~IN_FLIGHT, transfer[1], 0)
                    events.append(Event(position, kind, CTA, guard, transfer))
                elif kind == "completion":
                    if strong:
                        events.append(Event(position, "completion", 0, guard, (ALL & ~IN_FLIGHT, 0, 0)))
                elif kind == "call":
                    event = self._call_event(position, instruction, guard, pending_arguments, block.index, len(events))
                    if event is not None:
                        events.append(event)
        if pending_addresses or pending_arguments:
            self._resolve_pointers(pending_addresses, pending_arguments)

    def _call_event(self, position, instruction, guard, pending_arguments, block, slot) -> Event | None:
        callee, arguments = _call_target(instruction)
        tracked = self.options.tracked
        policy = self.options.extern_policy
        summary = self.summaries.get(callee) if callee is not None else None
        if summary is not None and callee not in self.recursive:
            transfer = summary.transfer if guard is None else weaken(summary.transfer)
            return Event(position, "call", 0, guard, transfer, summary)
        if callee is not None and callee not in self.defined and is_benign_extern(callee):
            return None
        if callee in self.recursive:
            policy = "strict"
        if policy == "none":
            if arguments:
                pending_arguments.append((block, slot, position, instruction, guard, arguments))
                return Event(position, "extern", 0, guard, IDENTITY, (callee, policy))
            return None
        transfer = (ALL, spread(tracked, GENERIC | ASYNC), spread(tracked, GENERIC) if policy == "strict" else 0)
        return Event(position, "extern", tracked, guard, transfer, (callee, policy))

    def _resolve_pointers(self, addresses, arguments) -> None:
        queries = {}
        for block, slot, position, instruction, guard in addresses:
            queries[(block, slot)] = (block, position, _address_names(instruction))
        for block, slot, position, instruction, guard, args in arguments:
            queries[(block, slot)] = (block, position, args)
        found = pointer_provenance(self.flow, queries)
        tracked = self.options.tracked
        for block, slot, position, instruction, guard in addresses:
            spaces, certain = address_spaces(found[(block, slot)])
            bits = _bits(spaces) & tracked
            strong = guard is None and certain
            self.events[block][slot] = Event(position, "write", bits, guard, write_transfer(bits, strong),
                                             "address")
        for block, slot, position, instruction, guard, args in arguments:
            bits = _bits(shared_spaces(found[(block, slot)])) & tracked
            old = self.events[block][slot]
            self.events[block][slot] = old._replace(spaces=bits, transfer=write_transfer(bits, False))
        for events in self.events:
            events[:] = [e for e in events if e is not None and (e.kind != "write" or e.spaces)
                         and e.transfer != IDENTITY]

    def add_fence(self, block: int, position: int, cover: int) -> Event:
        """Record a fence the pass will insert before instruction `position` of `block`
        (or at its end, when `position` is the block length)."""
        event = Event(position, "inserted", cover, None, fence_transfer(cover, True))
        self._witnesses.clear()
        events = self.events[block]
        at = 0
        while at < len(events) and events[at].position < position:
            at += 1
        events.insert(at, event)
        return event

    def remove_event(self, block: int, event: Event) -> None:
        self.events[block] = [e for e in self.events[block] if e is not event]
        self._witnesses.clear()

    # -- fixpoint ------------------------------------------------------------------------
    def block_transfer(self, block: int) -> tuple:
        transfer = IDENTITY
        for event in self.events[block]:
            transfer = compose(transfer, event.transfer)
        return transfer

    def solve(self) -> None:
        """Compute `ins`/`outs` (the state at every block boundary)."""
        flow = self.flow
        if len(self.events) < len(flow.blocks):  # blocks added for preheaders
            self.events.extend([] for _ in range(len(flow.blocks) - len(self.events)))
        transfers = [self.block_transfer(b) for b in range(len(flow.blocks))]

        def transfer(block, state):
            keep, gen, fence = transfers[block]
            return (state & keep) | gen | ((state & fence) >> 1)

        result = solve_forward(flow, transfer, entry=self.entry_state, bottom=0, join=int.__or__)
        self.ins, self.outs = result.ins, result.outs

    def state_before(self, block: int, index: int) -> int:
        """The state before event number `index` of a block."""
        state = self.ins[block]
        for event in self.events[block][:index]:
            state = apply(event.transfer, state)
        return state

    @property
    def exit_state(self) -> int:
        state = 0
        for block in self.flow.exits:
            state |= self.outs[block]
        return state

    # -- needs ---------------------------------------------------------------------------
    def scan(self) -> ScanResult:
        """The async ops and calls that need a fence, given the current fixpoint."""
        needs: list[Need] = []
        exposed: dict[int, int] = {}
        exposed_at: dict[int, object] = {}
        lint: list[Diagnostic] = []
        for block in self.flow.rpo:
            events = self.events[block]
            if not any(e.kind in _CONSUMERS for e in events):
                continue
            instructions = self.flow.blocks[block].instructions
            heads = self.flow.blocks[block].heads
            state = self.ins[block]
            covered = None  # (guard, spaces, position): generic writes fenced under that guard
            for event in events:
                kind = event.kind
                guard = event.guard
                if covered is not None:  # (guard, spaces, last instruction checked for a new guard value)
                    if _redefines(instructions, heads, covered[2] + 1, event.position, covered[0]):
                        covered = None
                    else:
                        covered = (covered[0], covered[1], event.position - 1)
                if kind in _CONSUMERS:
                    if kind == "async" and state & IN_FLIGHT and event.spaces & SHARED:
                        lint.append(Diagnostic(instructions[event.position],
                                               "a cp.async write may still be in flight here (no cp.async.wait_group 0 "
                                               "or cp.async.wait_all on some path): a proxy fence does not wait for it"))
                    if state & _PENDING:  # some space may be generic or the caller's: look closer
                        covered = self._consume(block, event, state, covered, instructions, needs, exposed,
                                                exposed_at)
                elif kind == "fence" and guard is not None:
                    same = covered[1] if covered is not None and covered[0] == guard else 0
                    covered = (guard, same | event.spaces, event.position)
                if covered is not None and kind != "fence":  # new generic writes (calls too) end the cover
                    generated = spaces_with(event.transfer[1], GENERIC)
                    if generated:
                        covered = (covered[0], covered[1] & ~generated, covered[2])
                state = apply(event.transfer, state)
        return ScanResult(needs, exposed, exposed_at, lint)

    def _consume(self, block, event, state, covered, instructions, needs, exposed, exposed_at):
        """Record the need (and caller exposure) of one async op or call; returns the
        updated guard coverage."""
        guard = event.guard
        need, cover, token = self._demand(event, state)
        if guard is not None and covered is not None and covered[0] == guard:
            need &= ~covered[1]
            token &= ~covered[1]
            if event.kind == "async":
                cover = _cover(need, event)
            elif not need:
                cover = 0
        if need:
            needs.append(Need(block, event.position, instructions[event.position], guard, need, cover, state,
                              event.kind, event.detail))
            if guard is not None:
                covered = (guard, cover | (covered[1] if covered and covered[0] == guard else 0), event.position)
            token &= ~cover
        for bit, _ in SPACE_NAMES:
            if token & bit:
                exposed[bit] = exposed.get(bit, 0) | self._token_cover(event, bit)
                op = instructions[event.position]
                if event.kind == "call":
                    op = event.detail.exposed_at.get(bit, op)
                exposed_at.setdefault(bit, op)
        return covered

    def _demand(self, event: Event, state: int) -> tuple[int, int, int]:
        """(need, cover, token spaces) of an async op or call in `state`."""
        generic = spaces_with(state, GENERIC)
        token = spaces_with(state, TOKEN)
        if event.kind == "async":
            reach = overlap(event.spaces)
            need = generic & reach
            return need, _cover(need, event), token & reach
        if event.kind == "call":
            need = cover = tokens = 0
            for bit, bit_cover in event.detail.exposed.items():
                if generic & bit:
                    need |= bit
                    cover |= bit_cover
                if token & bit:
                    tokens |= bit
            return need, cover, tokens
        if event.detail[1] != "strict":
            return 0, 0, 0
        tracked = self.options.tracked
        need = generic & tracked
        return need, overlap(need) & tracked, token & tracked

    def _token_cover(self, event: Event, bit: int) -> int:
        """The fence a caller arriving with a generic write in space `bit` must provide."""
        if event.kind == "async":
            return _cover(bit, event)
        if event.kind == "call":
            return event.detail.exposed.get(bit, 0)
        return overlap(bit) & self.options.tracked

    def summary(self, scan: ScanResult) -> Summary:
        """This function's effect on a caller (call after the final `solve` and `scan`)."""
        exit_state = self.exit_state
        passes = spaces_with(exit_state, TOKEN)
        exposed = dict(scan.exposed)
        shift = spread(passes & _mask(exposed), GENERIC)
        keep = (spread(passes, 15) | IN_FLIGHT) & ~shift
        generated = exit_state & ~spread(EVERY_SPACE, TOKEN)
        return Summary(self.function.name, (keep, generated, shift), exposed, dict(scan.exposed_at))

    # -- witnesses -----------------------------------------------------------------------
    def witness(self, block: int, position: int, spaces: int, bit: int = GENERIC):
        """A write that may reach the instruction at `position` of `block` with `bit`
        (generic by default) still set in one of `spaces`, and the blocks between.

        Returns ``(source block, source event, [blocks from source to target])`` or
        None. The path is a shortest one in blocks from a reachable write (see
        `_witness_tree`).
        """
        mask = spread(spaces, bit) if bit != IN_FLIGHT else IN_FLIGHT
        found = _last_writer(self.events[block], mask, position)
        if found:
            return block, found, [block]
        if found is False:
            return None
        entry_from, writers = self._witness_tree(mask)
        if block not in entry_from:
            return None
        path = [block]
        source = entry_from[block]
        while source not in writers:
            path.append(source)
            source = entry_from[source]
        path.append(source)
        path.reverse()
        return source, writers[source], path

    def _witness_tree(self, mask: int) -> tuple[dict, dict]:
        """One breadth-first search forward from every reachable block whose exit may
        carry a write of `mask`, through blocks that do not kill it: for each block it
        reaches, the predecessor the write comes in from (``entry_from``), and for each
        source block its last writing event (``writers``). Linear in the graph, and
        computed once per mask for all the needs that ask."""
        cached = self._witnesses.get(mask)
        if cached is not None:
            return cached
        flow = self.flow
        writers: dict[int, Event] = {}
        passes: set[int] = set()
        for block in flow.rpo:
            found = _last_writer(self.events[block], mask, None)
            if found:
                writers[block] = found
            elif found is None:
                passes.add(block)
        entry_from: dict[int, int] = {}
        queue = []
        for block in writers:
            for successor in flow.succ[block]:
                if successor not in entry_from:
                    entry_from[successor] = block
                    queue.append(successor)
        for block in queue:  # the list grows while we walk it: breadth first
            if block in passes:
                for successor in flow.succ[block]:
                    if successor not in entry_from:
                        entry_from[successor] = block
                        queue.append(successor)
        self._witnesses[mask] = entry_from, writers
        return entry_from, writers
def _last_writer(events: list, mask: int, limit: int | None):
    """Scanning a block backwards from `limit` (the end when None): the last event that
    writes `mask`, False when something kills it first, None when neither happens."""
    for event in reversed(events):
        if limit is not None and event.position >= limit:
            continue
        keep, gen, _ = event.transfer
        if gen & mask:
            return event
        if not keep & mask:
            return False
    return None


def _mask(exposed: dict) -> int:
    out = 0
    for bit in exposed:
        out |= bit
    return out


def _cover(need: int, event: Event) -> int:
    """The spaces a fence before an async op must order: the pending spaces, and the
    op's own shared window when a shared space is pending (fence.md §5.2)."""
    if need & SHARED:
        return need | (event.spaces & SHARED)
    return need


def _bits(spaces) -> int:
    out = 0
    for name in spaces:
        out |= SPACE_BITS[name]
    return out


def _waits_for_all(head, instruction) -> bool:
    """``cp.async.wait_all`` or ``cp.async.wait_group 0``."""
    if head[1].startswith("cp.async.wait_all"):
        return True
    match = _FIRST_NUMBER.match(instruction.text, head[3])
    return match is not None and int(match.group(1)) == 0


def _redefines(instructions, heads, start: int, stop: int, guard) -> bool:
    """True when an instruction in ``[start, stop)`` may write the guard's register."""
    if start >= stop:
        return False
    pattern = re.compile(r"(?<![\w$%])" + re.escape(guard.register) + r"(?![\w$])")
    for index in range(start, stop):
        if pattern.search(instructions[index].text, heads[index][3]):
            return True
    return False


def _call_target(instruction) -> tuple[str | None, list[str]]:
    """(callee name or None for an indirect call, argument names for provenance)."""
    operands = instruction.operands
    callee = None
    arguments: list[str] = []
    for index, operand in enumerate(operands):
        if operand.kind == "list":
            continue
        if operand.kind == "symbol":
            callee = operand.name
        rest = operands[index + 1 :]
        if rest and rest[0].kind == "list":
            for element in rest[0].elements:
                if element.kind == "symbol":
                    arguments.append("param:" + element.name)
                elif element.kind == "register":
                    arguments.append(element.name)
        break
    return callee, arguments


def _address_names(instruction) -> list[str]:
    """The register or variable that a generic ``st``/``atom``/``red`` addresses through."""
    memory = next((op for op in instruction.operands if op.kind == "memory"), None)
    if memory is None or not memory.elements:
        return []
    base = memory.elements[0]
    if base.kind == "register":
        return [base.name]
    if base.kind == "symbol":
        return ["symbol:" + base.name]
    return []
