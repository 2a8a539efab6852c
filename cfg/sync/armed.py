"""What an ``expect_tx`` arrive need not hand over (docs/fence.md §4.6).

An ``mbarrier.arrive.expect_tx`` with N > 0 bytes cannot complete its phase alone: the
transaction count it raises comes down only through the ``complete_tx`` of the copies
that complete on the mbarrier (PTX ISA, mbarrier phase completion). So a thread that
waits on that phase has one of those copies in its past, and with it everything
before the copy's issue. Where every copy completing on the mbarrier is issued after a
``bar.sync`` that every thread of the CTA reaches in one certain phase
(`ptxkit.cfg.sync.phases.counted_phases`), and every access of a fact reaches a proxy fence
that orders it and then that ``bar.sync`` on every path, each instance of the access
is fenced on a causality path to whatever the waiter does next: the arrive need not
hand the fact over. Only the accesses that may be pending at the arrive count: those
from which it can be reached along the code or through hand-offs. Triton's prologues arm the first stages' barriers right after
initialising them and fence before the ``bar.sync`` that precedes the first copies.
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.loops import closures
from ptxkit.cfg.sync.events import Kind, on_an_mbarrier
from ptxkit.cfg.sync.locations import CTA, overlaps
from ptxkit.cfg.sync.phases import counted_phases
from ptxkit.isa import SyncObject

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

    from ptxkit.cfg.flow.graph import FlowGraph
    from ptxkit.cfg.sync.events import Event
    from ptxkit.cfg.sync.locations import Location
    from ptxkit.cfg.sync.protocols import Fact, MbarrierOp
    from ptxkit.instruction import Operand

    #: An event and the block it is in: ``(block, event)``.
    Placed = tuple[int, Event]
    #: `_upstream`'s block -> the blocks reaching it (a bit mask), and arrive id -> block.
    Upstream = tuple[dict[int, int], dict[int, int]]

__all__ = ["fenced_before_copies"]


def fenced_before_copies(flow: FlowGraph, events: list[list[Event]], facts: Sequence[Fact],
                         killed: Callable[[Event], int], hears: Mapping[int, Sequence[int]]) -> dict[int, int]:
    """``id(arrive) -> facts`` (a bit mask over ``fact.index``) that an ``expect_tx``
    arrive need not hand over; `killed(fence event)` is the mask of facts a fence
    orders; `hears` maps a wait (its id) to the arrives (their ids) it may hear.
    Only the accesses that may be pending at the arrive count: those from which it can
    be reached, along the code and through the hand-offs of `hears` (an access made
    again after the arrive leaves the first one's fence enough).

    >>> from ptxkit.cfg.fence.fence import fence_text
    >>> text = (".version 8.0\\n.target sm_90a\\n.address_size 64\\n.extern .shared .align 1024 .b8 s[];\\n"
    ...     ".visible .entry k(.param .u64 k_map)\\n{\\n.reg .b32 %r<4>;\\n.reg .b64 %rd<2>;\\n.reg .pred %p<2>;\\n"
    ...     "\\tmov.u32 %r1, s;\\n\\tld.param.u64 %rd1, [k_map];\\n\\tmbarrier.init.shared.b64 [%r1+8192], 1;\\n"
    ...     "\\tmbarrier.init.shared.b64 [%r1+8200], 1;\\n\\tst.shared.u32 [%r1+4096], 0;\\n"
    ...     "\\tmbarrier.arrive.expect_tx.shared.b64 _, [%r1+8192], 4096;\\n\\tfence.proxy.async.shared::cta;\\n"
    ...     "\\tbar.sync 0;\\n\\tcp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
    ...     " [%r1], [%rd1, {%r2}], [%r1+8192];\\n\\tmbarrier.try_wait.parity.shared.b64 %p1, [%r1+8192], 0;\\n"
    ...     "\\tcp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
    ...     " [%r1+4096], [%rd1, {%r2}], [%r1+8200];\\n\\tret;\\n}\\n")
    >>> fence_text(text, "k.ptx")[1].fences  # the store reaches the waiter only through the first copy
    []
    """
    armed = [(block, event) for block, found in enumerate(events) for event in found
             if event.kind is Kind.ARRIVE and on_an_mbarrier(event) and _arms(flow, block, event)]
    if not armed or not facts or any(_completes_by_hand(flow, block) for block in range(len(flow))):
        return {}
    dominators = DominatorTree.of(flow)
    phased = counted_phases(flow, events)
    barriers = [(block, event) for block, found in enumerate(events) for event in found
                if id(event) in phased and _whole_cta_sync(flow, block, event)]
    copies = [(block, event, event.mbarrier) for block, found in enumerate(events) for event in found
              if event.mbarrier is not None]  # (block, event, the mbarrier it completes on)
    remote = [event.sync[1] for found in events for event in found  # st.async, a multicast commit: other CTAs'
              if event.kind is Kind.ARRIVE and event.cross and on_an_mbarrier(event)]
    fences = {id(event): killed(event) for found in events for event in found
              if event.kind in (Kind.FENCE, Kind.INIT_FENCE) and event.guard is None}
    upstream = _upstream(flow, events, hears)
    fencing = _Fencing(flow, events, facts, fences)
    ahead: dict[Location, list[Placed]] = {}  # an armed mbarrier -> the barriers before each copy completing on it
    dropped: dict[int, int] = {}
    for block, arrive in armed:
        mbarrier = arrive.sync[1]
        if mbarrier not in ahead:
            ahead[mbarrier] = _barriers_ahead(dominators, barriers, copies, remote, mbarrier)
        if not ahead[mbarrier]:
            continue
        pending = _may_be_pending(flow, events[block], hears, upstream, (block, arrive))
        mask = 0
        for barrier in ahead[mbarrier]:
            mask |= fencing.fenced_before(barrier, pending)
        if mask:
            dropped[id(arrive)] = mask
    return dropped


def _barriers_ahead(dominators: DominatorTree, barriers: list[Placed], copies: list[tuple[int, Event, Location]],
                    remote: list[Location], mbarrier: Location) -> list[Placed]:
    """The `barriers` that come, on every path, before each of the `copies` that complete
    on `mbarrier`; none when no copy does, when one is issued by another CTA, or when
    another CTA arrives on it (`remote`): then more than this CTA's copies complete the
    phase."""
    completing = [(block, event) for block, event, on in copies if overlaps(on, mbarrier)]
    if not completing or any(event.cross for _, event in completing) \
            or any(overlaps(other, mbarrier) for other in remote):
        return []
    return [barrier for barrier in barriers if all(_before(dominators, barrier, copy) for copy in completing)]


def _upstream(flow: FlowGraph, events: list[list[Event]], hears: Mapping[int, Sequence[int]]) -> Upstream:
    """The blocks whose accesses may be pending at a point, and how to find them: block
    -> a bit mask of the blocks from which it can be reached, along the code or through
    a wait that hears an arrive in them (the accesses another thread handed over
    before), itself included; and arrive (its id) -> its block."""
    block_of = {id(event): block for block, found in enumerate(events) for event in found}
    into = [[*flow.pred[block], *_heard_blocks(events[block], hears, block_of, None)] for block in range(len(flow))]
    return closures(range(len(flow)), into.__getitem__), block_of


def _may_be_pending(flow: FlowGraph, found: list[Event], hears: Mapping[int, Sequence[int]], upstream: Upstream,
                    arrive: Placed) -> Callable[[Placed], bool]:
    """Whether an access (block, event) may still be pending at `arrive`, whose block
    holds the events `found`: the arrive can be reached from it along the code, or
    through a wait that hears an arrive it can reach (`_upstream`). Blocks are taken
    whole, but for the arrive's own block when no way leads back to it."""
    reaching_from, block_of = upstream
    reaching = 0
    for block in [*flow.pred[arrive[0]], *_heard_blocks(found, hears, block_of, arrive[1].position)]:
        reaching |= reaching_from[block]
    if reaching >> arrive[0] & 1:
        return lambda access: reaching >> access[0] & 1 == 1
    return lambda access: reaching >> access[0] & 1 == 1 or access[0] == arrive[0] \
        and access[1].position < arrive[1].position


def _heard_blocks(found: list[Event], hears: Mapping[int, Sequence[int]], block_of: Mapping[int, int],
                  before: int | None) -> list[int]:
    """The blocks of the arrives the waits among `found` hear (those before position
    `before`, when given)."""
    return [block_of[heard] for event in found if before is None or event.position < before
            for heard in hears.get(id(event), ()) if heard in block_of]


def _arms(flow: FlowGraph, block: int, event: MbarrierOp) -> bool:
    """An ``mbarrier.arrive.expect_tx`` of a positive constant byte count, in this CTA."""
    instruction = flow.blocks[block].instructions[event.position]
    count: Operand | None = instruction.operands[-1] if instruction.operands else None
    return not event.cross \
        and instruction.opcode.startswith("mbarrier.arrive.expect_tx") and count is not None \
        and count.kind == "immediate" and isinstance(count.value, int) and count.value > 0


def _completes_by_hand(flow: FlowGraph, block: int) -> bool:
    """A ``mbarrier.complete_tx``: a transaction count brought down without a copy."""
    return any(head[2] == "mbarrier" and ".complete_tx" in head[1] for head in flow.blocks[block].heads)


def _whole_cta_sync(flow: FlowGraph, block: int, event: Event) -> bool:
    """An unguarded ``bar.sync``/``barrier.sync`` with no thread count: every thread of
    the CTA arrives on it."""
    instruction = flow.blocks[block].instructions[event.position]
    sync = event.sync
    return event.guard is None and event.kind is Kind.ARRIVE_WAIT and sync is not None \
        and sync[0] is SyncObject.NAMED_BARRIER and sync[1] is not None \
        and instruction.opcode.split(".")[0] in ("bar", "barrier") and ".sync" in instruction.opcode \
        and len(instruction.operands) == 1


def _before(dominators: DominatorTree, first: Placed, second: Placed) -> bool:
    """Whether event `first` (block, event) comes before `second` on every path to it."""
    if first[0] == second[0]:
        return first[1].position < second[1].position
    return dominators.dominates(first[0], second[0])


class _Fencing:
    """Which facts' accesses reach, on every path, a fence that orders them and then a
    given barrier (`fenced_before`), each access walked once per barrier, and not at
    all where no path from it meets the barrier."""

    __slots__ = ("flow", "events", "facts", "fences", "downstream", "ends", "unfenced")

    def __init__(self, flow: FlowGraph, events: list[list[Event]], facts: Sequence[Fact],
                 fences: dict[int, int]) -> None:
        self.flow, self.events, self.facts, self.fences = flow, events, facts, fences
        self.downstream = closures(range(len(flow)), flow.succ.__getitem__)  # block -> the blocks it reaches
        self.ends = sum(1 << block for block in range(len(flow)) if not flow.succ[block])
        self.unfenced: dict[int, tuple[int, list[tuple[int, list[Placed]]]]] = {}  # by barrier: `_unfenced`

    def fenced_before(self, barrier: Placed, pending: Callable[[Placed], bool]) -> int:
        """The facts each of whose accesses that may be `pending` reaches, on every path, a
        fence that orders it and then `barrier`: accesses of this CTA's shared memory that
        are done when made (not ``cp.async`` writes, which a fence does not wait for; not
        writes into another CTA, which only a fence in that CTA orders for it,
        docs/fence.md §4.3)."""
        mask, doubtful = self._unfenced(barrier)
        for index, unfenced in doubtful:
            if not any(pending(origin) for origin in unfenced):
                mask |= 1 << index
        return mask

    def _unfenced(self, barrier: Placed) -> tuple[int, list[tuple[int, list[Placed]]]]:
        """For `barrier`, the facts of this CTA's shared memory whose every access is fenced
        before it (a bit mask), and for each other one (its index) the accesses that are
        not: its ``cp.async`` writes, and those that some path takes to the barrier or to
        its end unfenced."""
        found = self.unfenced.get(id(barrier[1]))
        if found is None:
            always, doubtful = 0, []
            for fact in self.facts:
                if fact.location.space != CTA:
                    continue
                unfenced = [origin for origin in fact.origins if origin[1].kind is Kind.CP_ASYNC
                            or not self._fenced_on_every_path(1 << fact.index, origin, barrier)]
                if unfenced:
                    doubtful.append((fact.index, unfenced))
                else:
                    always |= 1 << fact.index
            found = self.unfenced[id(barrier[1])] = (always, doubtful)
        return found

    def _fenced_on_every_path(self, bit: int, origin: Placed, barrier: Placed) -> bool:
        """Every path from the access at `origin` (block, event) reaches a fence ordering
        `bit`, then `barrier`; none ends, or meets the barrier, before. Where no path
        meets the barrier, that is: no path ends."""
        start_block, start_event = origin
        if not self._may_meet(origin, barrier):
            return not self.ends & self.downstream[start_block]
        work = [(start_block, start_event.position + 1, False)]
        seen: set[tuple[int, bool]] = set()
        while work:
            block, position, fenced = work.pop()
            for event in self.events[block]:
                if event.position < position:
                    continue
                if event is barrier[1]:
                    if not fenced:
                        return False
                    break
                if self.fences.get(id(event), 0) & bit:
                    fenced = True
            else:
                successors = self.flow.succ[block]
                if not successors:
                    return False  # the thread ends without arriving
                for successor in successors:
                    if (successor, fenced) not in seen:
                        seen.add((successor, fenced))
                        work.append((successor, 0, fenced))
        return True

    def _may_meet(self, origin: Placed, barrier: Placed) -> bool:
        """Whether some path from the access at `origin` meets `barrier`."""
        if origin[0] == barrier[0] and barrier[1].position > origin[1].position:
            return True
        return any(self.downstream[successor] >> barrier[0] & 1 for successor in self.flow.succ[origin[0]])
