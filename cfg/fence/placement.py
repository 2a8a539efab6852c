"""Where the fences go (docs/fence.md §6): issuer side, hoisted, writer side.

1. Solve (`ptxkit.cfg.fence.proxy.KernelAnalysis.solve`): the async ops that need a fence
   right before them, and why. With hoisting, an op that needs one only because of an
   ``mbarrier.init`` gets it right after the initialisation instead, once.
2. ``fence_side="writer"``: a need that comes through a hand-off inside the CTA gets
   its fence in the writing thread instead, right before every arrive that hands the
   pending access over (CUTLASS's convention); hand-offs across CTAs keep the fence
   in the CTA that issues the async op (PTX ISA memory model, docs/fence.md §4.3).
3. An op inside an inlined ``.func`` whose need comes only from the caller gets the
   fence in the caller, before the call, so the callee stays as it is for others.
4. Hoisting (``placement="hoist"``, the default), outer and earlier regions first:

   - *loop*: when a natural loop contains ops that need a fence and nothing in the
     loop makes pending the spaces that fence orders (no access, no hand-off wait that
     imports one), one fence goes in the loop's preheader; a loop without one gets
     the fence on its entry edges, the edges into the header from outside, and the
     edits create the preheader block there (with a fresh label when branches must
     be redirected to it: `ptxkit.cfg.fence.fence`), so planning never changes the
     flow graph;
   - *branch*: when every path from a conditional branch to its immediate
     post-dominator passes an unguarded op that needs a fence, and the region makes
     nothing pending in those spaces, one fence goes before the branch.

   Each hoist replaces at least one fence that inline placement would insert, so
   hoisting never inserts more fences than inline placement. Only regions of the
   kernel's own body are hoisted over (not inside inlined callees).
5. Every op that still needs a fence gets one immediately before it, carrying the
   op's guard.

The flow is facts -> solve(fences) -> `Solution` -> plan -> edits (docs/fence.md §6.4). The
analysis (`KernelAnalysis`: the function's events, facts and hand-offs) is made once and
never changes. Planning threads solutions: a fence is added by solving with one more
planned fence (a `PlacedFence`: its event in its block, or on the entry edges of a loop
whose preheader is still to be made) and dropped by solving with one fewer; each solve
returns a new `Solution` and leaves the one it started from as it was. A `PlannedFence`
is a frozen record; which `PlacedFence` stands for it is planning's own bookkeeping. The
last solution, with every planned fence, describes the fenced function; the edits
(`ptxkit.cfg.fence.fence`) apply the plans to the text, and only they make the
preheaders blocks.

>>> from ptxkit.cfg.sync.locations import CTA, CLUSTER, GLOBAL
>>> fence_text_for(CTA), fence_text_for(CTA | CLUSTER), fence_text_for(CTA | GLOBAL)
('fence.proxy.async.shared::cta', 'fence.proxy.async.shared::cluster', 'fence.proxy.async')
"""

from __future__ import annotations

import enum

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.fence.options import FENCE_VARIANTS
from ptxkit.cfg.fence.proxy import (CROSSED, IMPORTED, IN_FLIGHT, LOCAL, Hazard, KernelAnalysis, Need, PlacedFence,
                                    fence_event)
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import ENTRY, EXIT
from ptxkit.cfg.flow.loops import Loop, Preheader, branch_region, find_loops, find_preheader, loop_forest
from ptxkit.cfg.sync.events import Event, Kind
from ptxkit.cfg.sync.locations import CLUSTER, GLOBAL, SHARED, alias

#: the fence that releases this thread's ``mbarrier.init`` at cluster scope (docs/fence.md §4.7)
RELEASE_INITS = "fence.mbarrier_init.release.cluster"

#: ``--fence-variant`` values and the spaces each orders.
VARIANTS = dict(zip(FENCE_VARIANTS, (SHARED, SHARED, SHARED | GLOBAL)))

if TYPE_CHECKING:
    from collections.abc import Iterable

    from ptxkit.cfg.fence.proxy import AnalysisOptions, Fences, Solution, Step
    from ptxkit.cfg.flow.graph import EdgeStart, FlowGraph
    from ptxkit.cfg.flow.inline import Context
    from ptxkit.cfg.flow.loops import BranchRegion
    from ptxkit.instruction import Guard
    from ptxkit.syntax import Instruction

    #: A planned fence and where the solves apply it: planning's own bookkeeping, kept
    #: out of the frozen plan. None for an inline fence, which the solve itself puts
    #: before its op (`_Placed`).
    _Put = tuple["PlannedFence", PlacedFence]
    _Placed = tuple["PlannedFence", PlacedFence | None]


def fence_text_for(cover: int, forced: str | None = None) -> str:
    """The narrowest proxy fence ordering `cover`, or the forced variant
    (``shared::cta``, ``shared::cluster``, ``full``) when that orders it.

    ``shared::cta`` is taken to order both shared windows once it is forced (the
    CUTLASS/TileLang convention); a forced shared variant never orders global, so a
    cover with global gets the narrowest correct fence instead.

    >>> fence_text_for(GLOBAL), fence_text_for(CLUSTER, forced="shared::cta")
    ('fence.proxy.async.global', 'fence.proxy.async.shared::cta')
    """
    if forced is not None and not cover & ~VARIANTS[forced]:
        return "fence.proxy.async" if forced == "full" else f"fence.proxy.async.{forced}"
    if cover & GLOBAL:
        return "fence.proxy.async" if cover & SHARED else "fence.proxy.async.global"
    return "fence.proxy.async.shared::cluster" if cover & CLUSTER else "fence.proxy.async.shared::cta"


class Placement(enum.Enum):
    """Where a planned fence goes (the value is what reports print).

    >>> Placement.LOOP.value, Placement("init") is Placement.INIT
    ('loop', True)
    """

    INLINE = "inline"  # right before the async op
    INIT = "init"  # right after mbarrier.inits other CTAs use: a fence.mbarrier_init.release.cluster
    CALL = "call"  # before the call of an inlined function whose body needs it
    WRITER = "writer"  # before an arrive that hands a pending access to the op's thread
    ACCESS = "access"  # right after the accesses, where one fence there replaces several
    LOOP = "loop"  # in a loop preheader
    BRANCH = "branch"  # before a conditional branch


class PlannedFence(Record):
    """One fence the pass inserts (or, in check mode, reports missing).

    `placement`: see `Placement`. `block`/`position`: where in the CFG (position =
    instruction index it precedes; the block length means "at the end"). A ``loop``
    fence whose preheader does not exist yet (`on_entry_edges`) goes on the loop's
    entry edges, the edges into its header `block` from outside; the edits create
    the preheader block there (`preheader` says how). `needs`: the ops it serves,
    first the one its reason names; `witnesses`: for each of them, in the same order,
    `KernelAnalysis.explain` taken when the fence was planned. `anchor`: the
    instruction it goes before (``writer``, ``call``) or after (``access``, the last
    access). `releases_inits`: a ``fence.mbarrier_init.release.cluster`` for inits
    that other CTAs use (docs/fence.md §4.7).

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
    >>> (plan,), _ = plan_fences(KernelAnalysis(m.function("k"), _options()))
    >>> plan.placement.value, plan.block, plan.loop.header, fence_text_for(plan.cover), plan.needs[0].instruction.line
    ('loop', 0, 1, 'fence.proxy.async.shared::cta', 36)
    """

    placement: Placement
    block: int
    position: int
    cover: int
    guard: "Guard | None" = None
    needs: tuple[Need, ...] = ()
    witnesses: "tuple[list[Step], ...]" = ()
    anchor: "Instruction | None" = None
    loop: Loop | None = None
    preheader: Preheader | None = None
    releases_inits: bool = False

    @property
    def on_entry_edges(self) -> bool:
        """True for a loop fence on the entry edges of a loop with no preheader yet.

        >>> import ptxkit
        >>> m = ptxkit.parse_file("samples/fence/x16_created_preheader.ptx")
        >>> plans, _ = plan_fences(KernelAnalysis(m.function("k"), _options()))
        >>> [(p.on_entry_edges, p.block == p.loop.header) for p in plans]
        [(True, True)]
        """
        return self.preheader is not None and self.preheader.block is None

    def __repr__(self) -> str:
        return f"<PlannedFence {self.placement.value} block={self.block} position={self.position}>"


def _options() -> AnalysisOptions:
    from ptxkit.cfg.fence.proxy import AnalysisOptions

    return AnalysisOptions()


def plan_fences(analysis: KernelAnalysis, placement: str = "hoist",
                fence_side: str = "issuer") -> tuple[list[PlannedFence], Solution]:
    """Decide every fence of one function; with them, the solution with all of them in
    place, whose states describe the fenced function. The analysis stays as it was.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n.reg .b32 %r<2>;\\n.reg .b64 %rd<3>;\\n.reg .f32 %f<5>;\\n\\tst.shared.u32 [%r1], 0;\\n"
    ...     "L:\\n\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1,"
    ...     " 1, 1, 0, 0;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> plans, solution = plan_fences(KernelAnalysis(m.function("k"), _options()))
    >>> [(p.placement.value, p.block) for p in plans], len(solution.fences), solution.needs()
    ([('loop', 0)], 1, [])
    """
    solution = analysis.solve()
    placed: list[_Placed] = []
    needs = solution.needs()
    released = analysis.hazard_mask(Hazard.INIT_CLUSTER)
    if any(need.pending & released for need in needs):
        puts, solution = _after_inits(solution, needs)
        placed += puts
        needs = solution.needs()
    if fence_side == "writer" and needs:
        puts, solution = _writer_side(solution, needs)
        placed += puts
        needs = solution.needs()
    if needs:
        puts, solution = _at_call_sites(solution, needs)
        placed += puts
        needs = solution.needs()
    if placement == "hoist" and needs:
        hoisted = [(hoist, _placed(analysis.flow, hoist)) for hoist in _choose_hoists(solution, needs)]
        if hoisted:
            puts, solution = _useful_hoists(solution, hoisted)
            placed += puts
            needs = solution.needs()
    for need in needs:
        placed.append((PlannedFence(Placement.INLINE, need.block, need.event.position, need.cover, need.guard, (need,),
                                    witnesses=tuple(_witnesses(solution, [need]))), None))
    if placement == "hoist":
        placed, solution = _fewer_after_the_accesses(solution, placed)
    return [plan for plan, _ in placed], solution


def _placed(flow: FlowGraph, plan: PlannedFence) -> PlacedFence:
    """Where the solves apply a planned fence: at its position, or for a loop with no
    preheader yet on the loop's entry edges."""
    event = fence_event(plan.position, plan.cover, plan.releases_inits)
    if plan.on_entry_edges:
        assert plan.loop is not None
        return PlacedFence(plan.block, event, frozenset(entry_edges(flow, plan.loop)))
    return PlacedFence(plan.block, event)


def _with(fences: Fences, puts: Iterable[_Put]) -> Fences:
    """`fences` and then the fences of `puts`, planned after them."""
    return fences + tuple(fence for _, fence in puts)


def _without(fences: Fences, puts: Iterable[_Put]) -> Fences:
    """`fences` less those of `puts`, the others in their order."""
    gone = {id(fence.event) for _, fence in puts}
    return tuple(fence for fence in fences if id(fence.event) not in gone)


def _useful_hoists(solution: Solution, hoisted: list[_Put]) -> tuple[list[_Put], Solution]:
    """The hoisted fences that order something with all of them in place (an earlier
    hoist may have ordered everything a later one would), and the solution with those."""
    solution = solution.with_fences(_with(solution.fences, hoisted))
    useful = [(hoist, fence) for hoist, fence in hoisted if _orders_something(solution, hoist, fence)]
    if len(useful) < len(hoisted):
        kept = {id(fence.event) for _, fence in useful}
        solution = solution.with_fences(_without(solution.fences, [put for put in hoisted
                                                                   if id(put[1].event) not in kept]))
    return useful, solution


def entry_edges(flow: FlowGraph, loop: Loop) -> list[EdgeStart]:
    """Where the loop is entered from outside: the header's predecessors outside it, and
    ``ENTRY`` when the function starts at the header (where a fence for a loop with no
    preheader goes).

    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> import ptxkit
    >>> flow = flow_graph(ptxkit.parse_file("samples/fence/x16_created_preheader.ptx").function("k"))
    >>> loop, = find_loops(flow).loops
    >>> loop.header, entry_edges(flow, loop)
    (2, [0, 1])
    """
    entries: list[EdgeStart] = [p for p in flow.pred[loop.header] if p not in loop.blocks]
    if loop.header == flow.start:
        entries.append(ENTRY)
    return entries


#: events that end a run of accesses one fence after them orders: past them, the
#: accesses are handed on, met by an async op or ordered by a fence already
_RUN_ENDS = frozenset((Kind.ARRIVE, Kind.ARRIVE_WAIT, Kind.WAIT, Kind.ASYNC, Kind.FENCE, Kind.INSERTED, Kind.EXTERN,
                       Kind.CP_ASYNC_WAIT, Kind.INIT_FENCE))


def _fewer_after_the_accesses(solution: Solution, placed: list[_Placed]) -> tuple[list[_Placed], Solution]:
    """Where fences before several async ops (inline or hoisted) serve the same generic
    accesses, one fence right after each run of those accesses may do instead: the
    expert's placement (FlashAttention-3 fences once after its epilogue's ``stmatrix``,
    and the pass asked for eight fences, one before each op the writes reach, when that
    fence was deleted: eight reports for one fix). Tried only where at least two such
    fences exist and every access they order is this CTA's own, made at the kernel's
    level and done when made (not a ``cp.async`` write nor an init, which have placements
    of their own); kept only when the analysis, solved with the new fences instead of the
    old, needs nothing more than the inline fences it leaves in place, the new fences are
    fewer, and every loop that holds a new fence holds one of the fences it replaces
    (docs/fence.md §6.2). An op that a replaced fence ordered on the way to its own (it
    lies between the fence and the op) may wait on accesses none of the planned ops does:
    the runs are then made again with those accesses too, `_RUN_ROUNDS` times at most
    (FlashInfer's fp8 prefill: five fences after its V transposes, not eight before the
    MMAs and copies)."""
    movable = [(plan, fence) for plan, fence in placed if plan.placement in _MOVABLE
               and all(_orderable_at_the_access(solution, need) for need in plan.needs)]
    if len(movable) < 2:
        return placed, solution
    analysis = solution.analysis
    facts = 0
    for plan, _ in movable:
        for need in plan.needs:
            facts |= need.pending
    replaced = [plan for plan, _ in movable]
    runs = _fewer_runs(analysis, solution.events, facts, replaced)  # made with the fences to replace still in
    if runs is None:
        return placed, solution
    moving = {id(plan) for plan, _ in movable}
    in_events: list[_Put] = [(plan, fence) for plan, fence in movable if fence is not None]  # inline ones: in the solve
    others = _without(solution.fences, in_events)
    pairs = [(need, witness) for plan, _ in movable for need, witness in zip(plan.needs, plan.witnesses)]
    kept = {id(need.event) for plan, _ in placed if plan.placement is Placement.INLINE and id(plan) not in moving
            for need in plan.needs}
    for _ in range(_RUN_ROUNDS):
        tried = _fences_after_runs(analysis, runs, pairs)
        solution = solution.with_fences(_with(others, tried))
        left = [need for need in solution.needs() if id(need.event) not in kept]
        if not left and all(plan.needs for plan, _ in tried):
            tried = _witnessed_by_their_runs(solution, others, tried, runs)
            return [(plan, fence) for plan, fence in placed if id(plan) not in moving] + tried, solution
        witnessed = [(need, solution.explain(need)) for need in left]  # traced while the new fences stand
        more = 0
        for need in left:
            more |= need.pending
        if not more & ~facts or not all(_orderable_at_the_access(solution, need) for need in left):
            break
        facts |= more
        pairs += witnessed  # the ops the new fences must now serve as well
        runs = _fewer_runs(analysis, analysis.events_with(others), facts, replaced)
        if runs is None:
            break
    return placed, solution.with_fences(_with(others, in_events))  # the fences to replace, planned again


def _fewer_runs(analysis: KernelAnalysis, events: list[list[Event]], facts: int,
                replaced: list[PlannedFence]) -> list[tuple[int, int, int, int]] | None:
    """The runs of accesses that make `facts` among `events` (`_access_runs`), when a
    fence after each would be fewer fences than `replaced` and run no more often; else
    None."""
    runs = _access_runs(analysis, events, facts)
    if len(runs) >= len(replaced) or not _runs_no_more_often(analysis, runs, replaced):
        return None
    return runs


def _fences_after_runs(analysis: KernelAnalysis, runs: list[tuple[int, int, int, int]],
                       pairs: list[tuple[Need, list[Step]]]) -> list[_Put]:
    """A fence right after each run of accesses, serving the (need, witness) `pairs`
    whose accesses the run makes."""
    tried: list[_Put] = []
    for block, position, cover, made in runs:
        served = [(need, witness) for need, witness in pairs if need.pending & made]
        anchor = analysis.flow.blocks[block].instructions[position]
        plan = PlannedFence(Placement.ACCESS, block, position + 1, cover, None, tuple(n for n, _ in served),
                            anchor=anchor, witnesses=tuple(w for _, w in served))
        tried.append((plan, _placed(analysis.flow, plan)))
    return tried


def _witnessed_by_their_runs(solution: Solution, others: Fences, tried: list[_Put],
                             runs: list[tuple[int, int, int, int]]) -> list[_Put]:
    """`tried` (a fence after each of `runs`, in order, planned after `others`), each
    witness naming an access of its own run. A fence serves every op its run's accesses
    reach, whose witness, taken before the runs were found, may start at another run's
    access (FlashInfer's fp8 prefill: the fences after its second to fifth V transposes
    all named a store of the first, which the first fence orders). Those are taken
    again with every other fence in place, so that only this run's accesses are left to
    reach the op (docs/fence.md §6.2)."""
    analysis = solution.analysis
    out: list[_Put] = []
    for index, ((plan, fence), (block, last, _, made)) in enumerate(zip(tried, runs)):
        start = max((end for at, end, _, _ in runs if at == block and end < last), default=-1)
        accesses = {id(analysis.flow.blocks[block].instructions[event.position])
                    for fact in analysis.fact_list(made) for at, event in fact.origins
                    if at == block and start < event.position <= last}
        if all(id(witness[0].instruction) in accesses for witness in plan.witnesses):
            out.append((plan, fence))
            continue
        without = solution.with_fences(_with(others, tried[:index] + tried[index + 1:]))
        live = {id(need.event): need for need in without.needs()}
        witnesses = tuple(witness if id(witness[0].instruction) in accesses or id(need.event) not in live
                          else without.explain(live[id(need.event)], made)
                          for need, witness in zip(plan.needs, plan.witnesses))
        out.append((plan._replace(witnesses=witnesses), fence))
    return out


#: how many times `_fewer_after_the_accesses` makes the runs again for the ops the replaced
#: fences ordered on the way
_RUN_ROUNDS = 3


#: the placements `_fewer_after_the_accesses` may replace
_MOVABLE = frozenset((Placement.INLINE, Placement.LOOP, Placement.BRANCH))


def _runs_no_more_often(analysis: KernelAnalysis, runs: list[tuple[int, int, int, int]],
                        movable: list[PlannedFence]) -> bool:
    """Whether every loop around a run of accesses also holds one of the fences it would
    replace, so that no loop runs more fences per iteration than before: a fence after
    writes made in a loop, replacing fences after the loop, would run in every iteration
    instead of once."""
    innermost = loop_forest(analysis.flow).innermost()
    for block, *_ in runs:
        loop = innermost.get(block)
        while loop is not None:
            if not any(_runs_in(plan, loop) for plan in movable):
                return False
            loop = loop.parent
    return True


def _runs_in(plan: PlannedFence, loop: Loop) -> bool:
    """Whether `plan`'s fence runs inside `loop`: a fence on a loop's entry edges runs
    in the loops around that loop, not in the loop itself."""
    if plan.on_entry_edges:
        return plan.block in loop.blocks and plan.block != loop.header
    return plan.block in loop.blocks


def _orderable_at_the_access(solution: Solution, need: Need) -> bool:
    """Whether a fence right after the accesses of `need` would order them: reads and
    writes of this CTA's threads, done when made, in the kernel's own code."""
    analysis = solution.analysis
    if need.pending & analysis.hazard_mask(Hazard.INIT_CLUSTER):
        return False
    if solution.crossing(need.event, need.state):
        return False  # another CTA's access: only the issuer's fence orders it (docs/fence.md §4.3)
    flow = analysis.flow
    for fact in analysis.fact_list(need.pending):
        for block, event in fact.origins:
            context = flow.blocks[block].context
            if event.kind is not Kind.WRITE and event.kind is not Kind.READ or context is not None and \
                    context.parent is not None:
                return False
    return True


def _access_runs(analysis: KernelAnalysis, events: list[list[Event]], facts: int) -> list[tuple[int, int, int, int]]:
    """``(block, position of the last access, spaces, facts it makes)`` for each run of
    accesses that make `facts`, in block order, among `events` (the kernel's with some
    planned fences): a run ends at whatever hands the accesses on or meets them
    (`_RUN_ENDS`)."""
    made_at: dict[int, dict[int, int]] = {}  # block -> position -> the facts of `facts` its access makes
    for fact in analysis.fact_list(facts):
        for block, event in fact.origins:
            positions = made_at.setdefault(block, {})
            positions[event.position] = positions.get(event.position, 0) | 1 << fact.index
    runs = []
    for block in sorted(made_at):
        last, made = None, 0
        for event in events[block]:
            if event.kind in _RUN_ENDS and last is not None:
                runs.append((block, last, analysis.spaces_of(made), made))
                last, made = None, 0
            elif event.position in made_at[block] and event.kind in (Kind.WRITE, Kind.READ):
                last, made = event.position, made | made_at[block][event.position]
        if last is not None:
            runs.append((block, last, analysis.spaces_of(made), made))
    return runs


def _witnesses(solution: Solution, needs: list[Need]) -> list[list[Step]]:
    """A witness for each need a fence serves, taken before the fence is added: each
    (generic access, async op) pair the report lists (docs/fence.md §5.4)."""
    return [solution.explain(need) for need in needs]


# -- writer side and call sites ---------------------------------------------------------------


def _group_ends(events: list[Event], inits: set[int]) -> list[int]:
    """The last init of each run of inits (positions in `inits`) that no arrive
    separates: one fence after it orders the run before anything hands it on."""
    ends, last = [], None
    for event in events:
        if event.kind in (Kind.ARRIVE, Kind.ARRIVE_WAIT) and last is not None:
            ends.append(last)
            last = None
        elif event.kind is Kind.INIT and event.position in inits:
            last = event.position
    return ends + ([last] if last is not None else [])


def _after_inits(solution: Solution, needs: list[Need]) -> tuple[list[_Put], Solution]:
    """For the async ops that complete on an mbarrier other CTAs of the cluster use and
    whose ``mbarrier.init`` nothing releases at cluster scope: one
    ``fence.mbarrier_init.release.cluster`` right after the last initialisation of each
    block that makes those inits, whatever the placement (it orders only its own
    thread's inits, docs/fence.md §4.7), instead of a fence before every copy that
    completes on the barriers. Where the block hands some inits on before its last one,
    that one fence still serves when every thread they were handed to passes it too;
    when the analysis, solved again, says it does not, the block gets one fence after
    each run of the inits the needs wait on that no arrive separates. Inits inside
    inlined functions keep their fences at the ops."""
    analysis = solution.analysis
    inits = analysis.hazard_mask(Hazard.INIT_CLUSTER)
    served = [n for n in needs if n.pending & inits]
    if not served:
        return [], solution
    flow = analysis.flow
    wanted: dict[int, set[int]] = {}  # block -> positions of the inits a served need waits on
    for need in served:
        for fact in analysis.fact_list(need.pending & inits):
            for block, event in fact.origins:
                context = flow.blocks[block].context
                if context is None or context.parent is None:
                    wanted.setdefault(block, set()).add(event.position)
    last: dict[int, int] = {}  # block -> the position of its last init
    for fact in analysis.fact_list(inits):
        for block, event in fact.origins:
            if block in wanted:
                last[block] = max(last.get(block, event.position), event.position)
    cover = analysis.spaces_of(inits)
    at = [(block, last[block]) for block in sorted(wanted)]
    placed = _init_fences(solution, solution.fences, served, cover, at)
    solution = solution.with_fences(_with(solution.fences, placed))
    split = {plan.block for plan, _ in placed if _still_waits_on_inits(solution, inits, plan.block)}
    if split:  # one fence at the end is not enough there: one after each run of inits
        others = _without(solution.fences, [put for put in placed if put[0].block in split])
        at = [(block, position) for block in sorted(split)
              for position in _group_ends(analysis.events[block], wanted[block])]
        added = _init_fences(solution, others, served, cover, at)
        placed = [put for put in placed if put[0].block not in split] + added
        solution = solution.with_fences(_with(others, added))
    return _without_idle_init_fences(solution, inits, placed)


def _init_fences(solution: Solution, fences: Fences, served: list[Need], cover: int,
                 at: list[tuple[int, int]]) -> list[_Put]:
    """An init fence after each init at ``(block, position)`` of `at`, planned in turn
    after `fences`: the witnesses of each are taken with the fences before it in the
    events (`Solution.seen_with`), so that they name an init those leave pending."""
    placed: list[_Put] = []
    for block, position in at:
        seen = solution if fences is solution.fences else solution.seen_with(fences)
        put = _init_fence(seen, served, cover, block, position)
        placed.append(put)
        fences += (put[1],)
    return placed


def _without_idle_init_fences(solution: Solution, inits: int, placed: list[_Put]) -> tuple[list[_Put], Solution]:
    """`placed` less the init fences no op needs, each tried in turn: taken out, the
    analysis solved again leaves no async op waiting on more inits than with it in. A
    fact stands for every init of one barrier, so a barrier initialised again (Triton's
    causal attention between its two loops) gets a fence planned after each of its inits,
    and the first inits may be fenced already (docs/fence.md §6.2). A fence kept is
    planned again, after the others."""
    if len(placed) < 2:
        return placed, solution
    waiting = _waiting_on_inits(solution, inits)
    kept = []
    fences = solution.fences
    for put in placed:
        fences = _without(fences, [put])
        solution = solution.with_fences(fences)
        if _waiting_on_inits(solution, inits) != waiting:
            kept.append(put)
            fences += (put[1],)
    return kept, solution.with_fences(fences)


def _waiting_on_inits(solution: Solution, inits: int) -> dict[int, int]:
    """id(async op) -> the inits it waits on, in `solution`."""
    return {id(need.event): need.pending & inits for need in solution.needs() if need.pending & inits}


def _init_fence(solution: Solution, served: list[Need], cover: int, block: int, position: int) -> _Put:
    """The ``fence.mbarrier_init.release.cluster`` after the init at (block, position),
    its witnesses taken in `solution`."""
    analysis = solution.analysis
    users = [_init_part(analysis, n) for n in served if any(b == block and e.position <= position
                                                            for f in analysis.fact_list(n.pending) for b, e in f.origins)]
    plan = PlannedFence(Placement.INIT, block, position + 1, cover, None, tuple(users),
                        witnesses=tuple(_witnesses(solution, users)), releases_inits=True)
    return plan, _placed(analysis.flow, plan)


def _init_part(analysis: KernelAnalysis, need: Need) -> Need:
    """`need` as far as a fence after the inits serves it, for its report: its init facts
    alone, so that the witness names an init. An op that also waits on other accesses (a
    read before a TMA load into the same stage) keeps those for a fence of its own."""
    pending = need.pending & analysis.hazard_mask(Hazard.INIT_CLUSTER)
    if pending == need.pending and need.hazard is Hazard.INIT_CLUSTER:
        return need
    return Need(need.block, need.event, need.instruction, need.guard, pending, need.cover, Hazard.INIT_CLUSTER,
                need.state)


def _still_waits_on_inits(solution: Solution, inits: int, block: int) -> bool:
    """True when some async op, in `solution`, still needs a fence for an
    ``mbarrier.init`` of `block`."""
    return any(origin == block for need in solution.needs() if need.pending & inits
               for fact in solution.analysis.fact_list(need.pending & inits) for origin, _ in fact.origins)


def _writer_side(solution: Solution, needs: list[Need]) -> tuple[list[_Put], Solution]:
    """Fences before the arrives that hand a need's pending accesses over inside the
    CTA: a need's facts in the imported plane, except those that also crossed CTAs
    (the issuer must fence them) and cp.async writes still in flight at the arrive (a
    fence there would not order them). A writer fence that, with the others in
    place, has nothing pending before it is dropped again."""
    analysis = solution.analysis
    wanted: dict[int, tuple[int, Event, int, list[Need]]] = {}  # id(arrive) -> (block, event, cover, needs)
    handed = 0
    for need in needs:
        handed |= analysis.plane(need.state, IMPORTED) & need.pending & ~analysis.plane(need.state, CROSSED)
    if not handed:
        return [], solution
    for block, state, event in solution.walk():
        if event.kind not in (Kind.ARRIVE, Kind.ARRIVE_WAIT) or event.detail == "completion":
            continue
        local = analysis.plane(state, LOCAL) & ~analysis.plane(state, IN_FLIGHT) & handed
        if not local:
            continue
        served = [n for n in needs if analysis.plane(n.state, IMPORTED) & n.pending & local]
        wanted[id(event)] = (block, event, analysis.spaces_of(local), served)
    plans: list[PlannedFence] = []
    for block, event, cover, served in wanted.values():
        anchor = analysis.flow.blocks[block].instructions[event.position]
        # unguarded, as the analysis models it: a guarded fence orders nothing where its
        # guard is false, and what a guarded arrive exports is not credited to it
        plans.append(PlannedFence(Placement.WRITER, block, event.position, cover, None, tuple(served), anchor=anchor,
                                  witnesses=tuple(_witnesses(solution, served))))
    placed = [(plan, _placed(analysis.flow, plan)) for plan in plans]
    if not placed:
        return placed, solution
    solution = solution.with_fences(_with(solution.fences, placed))
    busy = [(plan, fence) for plan, fence in placed if solution.pending_before(plan.block, fence.event) & handed]
    if len(busy) < len(placed):  # ordering nothing in the fixpoint, dropping them leaves the fixpoint as it is
        kept = {id(fence.event) for _, fence in busy}
        solution = solution.with_fences(_without(solution.fences, [put for put in placed
                                                                   if id(put[1].event) not in kept]))
    return busy, solution


def _at_call_sites(solution: Solution, needs: list[Need]) -> tuple[list[_Put], Solution]:
    """Fences before calls whose inlined body needs one only because of the caller."""
    analysis = solution.analysis
    flow = analysis.flow
    sites: dict[int, tuple[int, Context, list[Need]]] = {}  # id(callee context) -> call block, context, needs
    for need in needs:
        context = flow.blocks[need.block].context
        if context is None or context.parent is None:
            continue
        origins = analysis.origin_contexts(need.pending)
        outer = None
        while context.parent is not None and not any(o is not None and o.within(context) for o in origins):
            outer = context
            context = context.parent
        if outer is None:
            continue
        site = sites.get(id(outer))
        if site is None:
            site = sites[id(outer)] = (next(b for b in flow.pred[_entry_of(flow, outer)]), outer, [])
        site[2].append(need)
    plans = []
    for call_block, outer, served in sites.values():
        cover = 0
        for need in served:
            cover |= need.cover
        plans.append(PlannedFence(Placement.CALL, call_block, len(flow.blocks[call_block].instructions) - 1, cover,
                                  None, tuple(served), anchor=outer.call,
                                  witnesses=tuple(_witnesses(solution, served))))
    placed = [(plan, _placed(flow, plan)) for plan in plans]
    if placed:
        solution = solution.with_fences(_with(solution.fences, placed))
    return placed, solution


def _entry_of(flow: FlowGraph, context: Context) -> int:
    return min(b.index for b in flow.blocks if b.context is context)


# -- hoisting ------------------------------------------------------------------------------


def _choose_hoists(solution: Solution, needs: list[Need]) -> list[PlannedFence]:
    """The loop and branch hoists (docs/fence.md §6.1), outer and earlier regions
    first; none of them is in `solution` yet."""
    flow = solution.analysis.flow
    dominators = DominatorTree.of(flow)
    forest = find_loops(flow, dominators)
    rank = {block: i for i, block in enumerate(flow.rpo)}
    root = {b.index for b in flow.blocks if b.context is None or b.context.parent is None}
    needs_in: dict[int, list[Need]] = {}
    for need in needs:
        needs_in.setdefault(need.block, []).append(need)
    generated = [solution.generated_spaces(block) for block in range(len(flow.blocks))]
    candidates: list[tuple[int, int, Loop | int]] = [(rank[loop.header], 0, loop) for loop in forest.loops
                                                     if loop.blocks <= root]
    for block in flow.rpo:
        if block in root and len(flow.succ[block]) + (block in flow.exits) >= 2 and solution.analysis.pending(
                solution.outs[block]):
            candidates.append((rank[block], 1, block))
    candidates.sort(key=lambda c: (c[0], c[1]))
    satisfied: set[int] = set()
    post_dominators = None
    hoists = []
    for _, _, item in candidates:
        if isinstance(item, Loop):
            hoist = _loop_hoist(solution, item, needs_in, satisfied, generated, forest.irreducible)
        else:
            if post_dominators is None:
                post_dominators = DominatorTree.post_of(flow)
            hoist = _branch_hoist(solution, item, dominators, post_dominators, needs_in, satisfied, generated,
                                  forest.irreducible, root)
        if hoist is not None:
            satisfied.update(id(n) for n in hoist.needs)
            hoists.append(hoist)
    return hoists


def _open_needs(blocks: Iterable[int], needs_in: dict[int, list[Need]], satisfied: set[int]) -> list[Need]:
    return [n for b in blocks for n in needs_in.get(b, ()) if id(n) not in satisfied]


def _loop_hoist(solution: Solution, loop: Loop, needs_in: dict[int, list[Need]], satisfied: set[int],
                generated: list[int], irreducible: set[int]) -> PlannedFence | None:
    """One fence for the loop's open needs: at the end of its preheader, or on its
    entry edges when it has none yet."""
    flow = solution.analysis.flow
    if loop.blocks & irreducible:
        return None
    inside = _open_needs(sorted(loop.blocks), needs_in, satisfied)
    if not inside:
        return None
    cover = 0
    for need in inside:
        cover |= need.cover
    reach = alias(cover)
    if any(generated[b] & reach for b in loop.blocks):
        return None  # the loop makes pending what the fence would order: the fences stay inside
    preheader = find_preheader(flow, loop)
    if preheader is None:
        return None
    if preheader.block is None:
        block, position = loop.header, 0
    else:
        block = preheader.block
        position = len(flow.blocks[block].instructions) - (flow.blocks[block].terminator is not None)
    return PlannedFence(Placement.LOOP, block, position, cover, None, tuple(inside), loop=loop, preheader=preheader,
                        witnesses=tuple(_witnesses(solution, inside)))


def _branch_hoist(solution: Solution, branch: int, dominators: DominatorTree, post_dominators: DominatorTree,
                  needs_in: dict[int, list[Need]], satisfied: set[int], generated: list[int],
                  irreducible: set[int], root: set[int]) -> PlannedFence | None:
    """One fence before the branch for the open needs of its region."""
    analysis = solution.analysis
    flow = analysis.flow
    join = post_dominators.idom.get(branch)
    if join is None or join in flow.succ[branch] or branch in flow.exits:
        return None  # an empty arm (an if without else, an early exit): never hoisted, and cheap to see
    reach = alias(analysis.spaces_of(analysis.pending(solution.outs[branch])))
    region = branch_region(flow, branch, dominators, post_dominators,
                           reject=lambda b: bool(generated[b] & reach) or b in irreducible or b not in root)
    if region is None:
        return None
    inside = _open_needs(sorted(region.blocks), needs_in, satisfied)
    if not inside:
        return None
    blockers = {n.block for n in inside if n.guard is None}
    if not _every_path_blocked(flow, region, blockers):
        return None  # on some path no fence would run: hoisting could add one there
    cover = 0
    for need in inside:
        cover |= need.cover
    terminator = flow.blocks[branch].terminator
    position = len(flow.blocks[branch].instructions) - (terminator is not None)
    return PlannedFence(Placement.BRANCH, branch, position, cover, None, tuple(inside),
                        witnesses=tuple(_witnesses(solution, inside)))


def _every_path_blocked(flow: FlowGraph, region: BranchRegion, blockers: set[int]) -> bool:
    """True when every path from the branch to the join passes a block in `blockers`."""
    join = region.join
    stack = []
    seen = set()
    for arm in region.arms:
        if arm == join or arm == EXIT:
            return False
        if arm not in blockers and arm not in seen:
            seen.add(arm)
            stack.append(arm)
    while stack:
        block = stack.pop()
        if join == EXIT and block in flow.exits:
            return False
        for nxt in flow.succ[block]:
            if nxt == join:
                return False
            if nxt not in blockers and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return True


def _orders_something(solution: Solution, hoist: PlannedFence, fence: PlacedFence) -> bool:
    """False when an earlier hoist already ordered everything this one would."""
    pending = solution.pending_before(hoist.block, fence.event)
    return bool(solution.analysis.spaces_of(pending) & alias(hoist.cover))
