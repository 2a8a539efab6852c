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
     imports one), one fence goes in the loop's preheader (created with a fresh label
     when the loop has several outside predecessors);
   - *branch*: when every path from a conditional branch to its immediate
     post-dominator passes an unguarded op that needs a fence, and the region makes
     nothing pending in those spaces, one fence goes before the branch.

   Each hoist replaces at least one fence that inline placement would insert, so
   hoisting never inserts more fences than inline placement. Only regions of the
   kernel's own body are hoisted over (not inside inlined callees).
5. Every op that still needs a fence gets one immediately before it, carrying the
   op's guard.

Every planned fence goes into the analysis (`KernelAnalysis.add_fence`) and the
analysis is solved again, so the final states describe the fenced function.

>>> from ptxkit.cfg.sync.locations import CTA, CLUSTER, GLOBAL
>>> fence_text_for(CTA), fence_text_for(CTA | CLUSTER), fence_text_for(CTA | GLOBAL)
('fence.proxy.async.shared::cta', 'fence.proxy.async.shared::cluster', 'fence.proxy.async')
"""

from __future__ import annotations


from ptxkit.cfg.fence.options import FENCE_SIDES, FENCE_VARIANTS, PLACEMENTS
from ptxkit.cfg.fence.proxy import CROSSED, IMPORTED, IN_FLIGHT, LOCAL, Hazard, KernelAnalysis, Need
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import ENTRY, EXIT
from ptxkit.cfg.flow.loops import Loop, Preheader, branch_region, find_loops, find_preheader, loop_forest
from ptxkit.cfg.sync.events import Kind
from ptxkit.cfg.sync.locations import CLUSTER, GLOBAL, SHARED, alias

#: the fence that releases this thread's ``mbarrier.init`` at cluster scope (docs/fence.md §4.7)
RELEASE_INITS = "fence.mbarrier_init.release.cluster"

#: ``--fence-variant`` values and the spaces each orders.
VARIANTS = dict(zip(FENCE_VARIANTS, (SHARED, SHARED, SHARED | GLOBAL)))


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


class PlannedFence:
    """One fence the pass inserts (or, in check mode, reports missing).

    `placement`: ``inline`` (right before an async op), ``init`` (right after the
    ``mbarrier.init`` that is all the op waits for), ``call`` (before the call of an
    inlined function whose body needs it), ``writer`` (before an arrive that hands a
    pending access to the op's thread), ``loop`` (in a loop preheader), ``branch``
    (before a conditional branch) or ``access`` (right after the accesses, where one
    fence there replaces several, `anchor` the last access). `block`/`position`: where in the CFG (position =
    instruction index it precedes; the block length means "at the end"). `needs`: the
    ops it serves, first the one its reason names; `witnesses`: for each of them, in the
    same order, `KernelAnalysis.explain` taken when the fence was planned.

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
    >>> plan, = plan_fences(KernelAnalysis(m.function("k"), _options()))
    >>> plan.placement, plan.block, plan.loop.header, fence_text_for(plan.cover), plan.needs[0].instruction.line
    ('loop', 0, 1, 'fence.proxy.async.shared::cta', 36)
    """

    __slots__ = ("placement", "block", "position", "cover", "guard", "needs", "loop", "preheader", "event", "anchor",
                 "witnesses", "releases_inits")

    def __init__(self, placement: str, block: int, position: int, cover: int, guard, needs: list[Need],
                 loop: Loop | None = None, preheader: Preheader | None = None, anchor=None,
                 witnesses: list | None = None, releases_inits: bool = False):
        self.placement, self.block, self.position, self.cover, self.guard = placement, block, position, cover, guard
        # a fence.mbarrier_init.release.cluster: inits that other CTAs use (docs/fence.md §4.7)
        self.releases_inits = releases_inits
        self.needs, self.loop, self.preheader = needs, loop, preheader
        self.event = None  # the fence's event in the analysis, once added
        self.anchor = anchor  # the instruction it goes before (writer, call)
        self.witnesses = witnesses if witnesses is not None else []  # one `KernelAnalysis.explain` per need

    def __repr__(self) -> str:
        return f"<PlannedFence {self.placement} block={self.block} position={self.position}>"


def _options():
    from ptxkit.cfg.fence.proxy import AnalysisOptions

    return AnalysisOptions()


def plan_fences(analysis: KernelAnalysis, placement: str = "hoist", fence_side: str = "issuer") -> list[PlannedFence]:
    """Decide every fence of one function. The analysis ends up solved with all the
    planned fences in its events, so its states describe the fenced function.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n.reg .b32 %r<2>;\\n.reg .b64 %rd<3>;\\n.reg .f32 %f<5>;\\n\\tst.shared.u32 [%r1], 0;\\n"
    ...     "L:\\n\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1,"
    ...     " 1, 1, 0, 0;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> [(p.placement, p.block) for p in plan_fences(KernelAnalysis(m.function("k"), _options()))]
    [('loop', 0)]
    """
    analysis.solve()
    plans: list[PlannedFence] = []
    needs = analysis.needs()
    released = analysis.hazard_mask(Hazard.INIT_CLUSTER)
    if needs and (placement == "hoist" or any(need.pending & released for need in needs)):
        plans += _after_inits(analysis, needs, hoist=placement == "hoist")
        needs = analysis.needs()
    if fence_side == "writer" and needs:
        plans += _writer_side(analysis, needs)
        needs = analysis.needs()
    if needs:
        plans += _at_call_sites(analysis, needs)
        needs = analysis.needs()
    if placement == "hoist" and needs:
        hoisted = _choose_hoists(analysis, needs)
        if hoisted:
            for hoist in hoisted:
                _apply_hoist(analysis, hoist)
            analysis.solve()
            useless = [h for h in hoisted if not _orders_something(analysis, h)]
            if useless:
                for hoist in useless:
                    analysis.remove_event(hoist.block, hoist.event)
                hoisted = [h for h in hoisted if h not in useless]
                analysis.solve()
            plans += hoisted
            needs = analysis.needs()
    for need in needs:
        plans.append(PlannedFence("inline", need.block, need.event.position, need.cover, need.guard, [need],
                                  witnesses=_witnesses(analysis, [need])))
    if placement == "hoist":
        plans = _fewer_after_the_accesses(analysis, plans)
    return plans


#: events that end a run of accesses one fence after them orders: past them, the
#: accesses are handed on, met by an async op or ordered by a fence already
_RUN_ENDS = frozenset((Kind.ARRIVE, Kind.ARRIVE_WAIT, Kind.WAIT, Kind.ASYNC, Kind.FENCE, Kind.INSERTED, Kind.EXTERN,
                       Kind.CP_ASYNC_WAIT, Kind.INIT_FENCE))


def _fewer_after_the_accesses(analysis: KernelAnalysis, plans: list[PlannedFence]) -> list[PlannedFence]:
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
    (docs/fence.md §6.2)."""
    movable = [plan for plan in plans if plan.placement in ("inline", "loop", "branch")
               and all(_orderable_at_the_access(analysis, need) for need in plan.needs)]
    if len(movable) < 2:
        return plans
    facts = 0
    for plan in movable:
        for need in plan.needs:
            facts |= need.pending
    runs = _access_runs(analysis, facts)
    if len(runs) >= len(movable) or not _runs_no_more_often(analysis, runs, movable):
        return plans
    placed = [plan for plan in movable if plan.event is not None]  # inline fences live in the solve's needs
    for plan in placed:
        analysis.remove_event(plan.block, plan.event)
    tried = []
    pairs = [(need, witness) for plan in movable for need, witness in zip(plan.needs, plan.witnesses)]
    for block, position, cover, made in runs:
        served = [(need, witness) for need, witness in pairs if need.pending & made]
        anchor = analysis.flow.blocks[block].instructions[position]
        plan = PlannedFence("access", block, position + 1, cover, None, [n for n, _ in served], anchor=anchor,
                            witnesses=[w for _, w in served])
        plan.event = analysis.add_fence(block, position + 1, cover)
        tried.append(plan)
    analysis.solve()
    kept = {id(need.event) for plan in plans if plan.placement == "inline" and plan not in movable for need in plan.needs}
    if all(id(need.event) in kept for need in analysis.needs()):
        return [plan for plan in plans if plan not in movable] + tried
    for plan in tried:
        analysis.remove_event(plan.block, plan.event)
    for plan in placed:
        analysis.restore_event(plan.block, plan.event)
    analysis.solve()
    return plans


def _runs_no_more_often(analysis: KernelAnalysis, runs: list, movable: list[PlannedFence]) -> bool:
    """Whether every loop around a run of accesses also holds one of the fences it would
    replace, so that no loop runs more fences per iteration than before: a fence after
    writes made in a loop, replacing fences after the loop, would run in every iteration
    instead of once."""
    innermost = loop_forest(analysis.flow).innermost()
    for block, *_ in runs:
        loop = innermost.get(block)
        while loop is not None:
            if not any(plan.block in loop.blocks for plan in movable):
                return False
            loop = loop.parent
    return True


def _orderable_at_the_access(analysis: KernelAnalysis, need: Need) -> bool:
    """Whether a fence right after the accesses of `need` would order them: reads and
    writes of this CTA's threads, done when made, in the kernel's own code."""
    if need.pending & (analysis.hazard_mask(Hazard.INIT) | analysis.hazard_mask(Hazard.INIT_CLUSTER)):
        return False
    if analysis.crossing(need.event, need.state):
        return False  # another CTA's access: only the issuer's fence orders it (docs/fence.md §4.3)
    flow = analysis.flow
    for fact in analysis.fact_list(need.pending):
        for block, event in fact.origins:
            context = flow.blocks[block].context
            if event.kind is not Kind.WRITE and event.kind is not Kind.READ or context is not None and \
                    context.parent is not None:
                return False
    return True


def _access_runs(analysis: KernelAnalysis, facts: int) -> list[tuple[int, int, int, int]]:
    """``(block, position of the last access, spaces, facts it makes)`` for each run of
    accesses that make `facts`, in block order: a run ends at whatever hands the
    accesses on or meets them (`_RUN_ENDS`)."""
    made_at: dict[int, dict[int, int]] = {}  # block -> position -> the facts of `facts` its access makes
    for fact in analysis.fact_list(facts):
        for block, event in fact.origins:
            positions = made_at.setdefault(block, {})
            positions[event.position] = positions.get(event.position, 0) | 1 << fact.index
    runs = []
    for block in sorted(made_at):
        last, made = None, 0
        for event in analysis.events[block]:
            if event.kind in _RUN_ENDS and last is not None:
                runs.append((block, last, analysis.spaces_of(made), made))
                last, made = None, 0
            elif event.position in made_at[block] and event.kind in (Kind.WRITE, Kind.READ):
                last, made = event.position, made | made_at[block][event.position]
        if last is not None:
            runs.append((block, last, analysis.spaces_of(made), made))
    return runs


def _witnesses(analysis: KernelAnalysis, needs: list[Need]) -> list[list]:
    """A witness for each need a fence serves, taken before the fence is added: each
    (generic access, async op) pair the report lists (docs/fence.md §5.4)."""
    return [analysis.explain(need) for need in needs]


# -- writer side and call sites ---------------------------------------------------------------


def _group_ends(events: list, inits: set) -> list[int]:
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


def _after_inits(analysis: KernelAnalysis, needs: list[Need], hoist: bool = True) -> list[PlannedFence]:
    """For the async ops that need a fence only because of an ``mbarrier.init``: one
    fence right after the last initialisation of each block that makes them (the CUDA
    programming guide's placement: once, at the start, instead of before every copy that
    completes on the barriers, some of them in loops). Where the block hands some inits
    on before its last one (Triton publishes each init with a ``bar.sync``), that one
    fence still serves when every thread they were handed to passes it too; when the
    analysis, solved again, says it does not, the block gets one fence after each run of
    the inits the needs wait on that no arrive separates. Inits inside inlined functions
    keep their fences at the ops.

    Inits that other CTAs of the cluster use and that nothing releases at cluster scope
    get ``fence.mbarrier_init.release.cluster`` there, whatever the placement (without
    `hoist`, only those): it orders only its own thread's inits (docs/fence.md §4.7)."""
    released = analysis.hazard_mask(Hazard.INIT_CLUSTER)
    inits = analysis.hazard_mask(Hazard.INIT) | released
    served = [n for n in needs if n.pending & released or hoist and n.pending and not n.pending & ~inits]
    if not served:
        return []
    flow = analysis.flow
    wanted: dict[int, set] = {}  # block -> positions of the inits a served need waits on
    releasing: set[int] = set()  # the blocks whose inits other CTAs need released
    for need in served:
        for fact in analysis.fact_list(need.pending & (inits if hoist else released)):
            for block, event in fact.origins:
                context = flow.blocks[block].context
                if context is None or context.parent is None:
                    wanted.setdefault(block, set()).add(event.position)
                    if fact.hazard is Hazard.INIT_CLUSTER:
                        releasing.add(block)
    last: dict[int, int] = {}  # block -> the position of its last init
    for fact in analysis.fact_list(inits):
        for block, event in fact.origins:
            if block in wanted:
                last[block] = max(last.get(block, event.position), event.position)
    cover = analysis.spaces_of(inits)
    plans = [_init_fence(analysis, served, cover, block, last[block], block in releasing) for block in sorted(wanted)]
    analysis.solve()
    split = {plan.block for plan in plans if _still_waits_on_inits(analysis, inits, plan.block)}
    if split:  # one fence at the end is not enough there: one after each run of inits
        for plan in [plan for plan in plans if plan.block in split]:
            analysis.remove_event(plan.block, plan.event)
            plans.remove(plan)
        for block in sorted(split):
            ends = _group_ends(analysis.events[block], wanted[block])
            plans += [_init_fence(analysis, served, cover, block, position, block in releasing) for position in ends]
        analysis.solve()
    return plans


def _init_fence(analysis: KernelAnalysis, served: list[Need], cover: int, block: int, position: int,
                releases: bool) -> PlannedFence:
    """The fence after the init at (block, position), added to the analysis's events."""
    users = [_init_part(analysis, n) for n in served if any(b == block and e.position <= position
                                                            for f in analysis.fact_list(n.pending) for b, e in f.origins)]
    if releases:  # the witness names an init that other CTAs need released
        users.sort(key=lambda n: not n.pending & analysis.hazard_mask(Hazard.INIT_CLUSTER))
    plan = PlannedFence("init", block, position + 1, cover, None, users, witnesses=_witnesses(analysis, users),
                        releases_inits=releases)
    plan.event = analysis.add_fence(plan.block, plan.position, plan.cover, releases_inits=releases)
    return plan


def _init_part(analysis: KernelAnalysis, need: Need) -> Need:
    """`need` as far as a fence after the inits serves it, for its report: its init facts
    alone, so that the witness names an init. An op that also waits on other accesses (a
    read before a TMA load into the same stage) keeps those for a fence of its own."""
    released = analysis.hazard_mask(Hazard.INIT_CLUSTER)
    pending = need.pending & (analysis.hazard_mask(Hazard.INIT) | released)
    hazard = Hazard.INIT_CLUSTER if pending & released else Hazard.INIT
    if pending == need.pending and hazard is need.hazard:
        return need
    return need._replace(pending=pending, hazard=hazard)


def _still_waits_on_inits(analysis: KernelAnalysis, inits: int, block: int) -> bool:
    """True when some async op, in the solved analysis, still needs a fence for an
    ``mbarrier.init`` of `block`."""
    return any(origin == block for need in analysis.needs() if need.pending & inits
               for fact in analysis.fact_list(need.pending & inits) for origin, _ in fact.origins)


def _writer_side(analysis: KernelAnalysis, needs: list[Need]) -> list[PlannedFence]:
    """Fences before the arrives that hand a need's pending accesses over inside the
    CTA: a need's facts in the imported plane, except those that also crossed CTAs
    (the issuer must fence them) and cp.async writes still in flight at the arrive (a
    fence there would not order them). A writer fence that, with the others in
    place, has nothing pending before it is dropped again."""
    wanted: dict[int, tuple] = {}  # id(arrive) -> (block, event, cover, needs)
    handed = 0
    for need in needs:
        handed |= analysis.plane(need.state, IMPORTED) & need.pending & ~analysis.plane(need.state, CROSSED)
    if not handed:
        return []
    for block, state, event in analysis.walk():
        if event.kind not in (Kind.ARRIVE, Kind.ARRIVE_WAIT) or event.detail == "completion":
            continue
        local = analysis.plane(state, LOCAL) & ~analysis.plane(state, IN_FLIGHT) & handed
        if not local:
            continue
        served = [n for n in needs if analysis.plane(n.state, IMPORTED) & n.pending & local]
        wanted[id(event)] = (block, event, analysis.spaces_of(local), served)
    plans = []
    for block, event, cover, served in wanted.values():
        anchor = analysis.flow.blocks[block].instructions[event.position]
        # unguarded, as the analysis models it: a guarded fence orders nothing where its
        # guard is false, and what a guarded arrive exports is not credited to it
        plans.append(PlannedFence("writer", block, event.position, cover, None, served, anchor=anchor,
                                  witnesses=_witnesses(analysis, served)))
    for plan in plans:
        plan.event = analysis.add_fence(plan.block, plan.position, plan.cover)
    if not plans:
        return plans
    analysis.solve()
    idle = [plan for plan in plans if not analysis.pending_before(plan.block, plan.event) & handed]
    for plan in idle:  # ordering nothing in the fixpoint, removing it leaves the fixpoint as it is
        analysis.remove_event(plan.block, plan.event)
    if idle:
        analysis.solve()
    return [plan for plan in plans if plan not in idle]


def _at_call_sites(analysis: KernelAnalysis, needs: list[Need]) -> list[PlannedFence]:
    """Fences before calls whose inlined body needs one only because of the caller."""
    flow = analysis.flow
    placed: dict[int, PlannedFence] = {}
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
        call_block = next(b for b in flow.pred[_entry_of(flow, outer)])
        plan = placed.get(id(outer))
        if plan is None:
            position = len(flow.blocks[call_block].instructions) - 1
            plan = placed[id(outer)] = PlannedFence("call", call_block, position, need.cover, None, [],
                                                    anchor=outer.call)
        plan.cover |= need.cover
        plan.needs.append(need)
    for plan in placed.values():
        plan.witnesses = _witnesses(analysis, plan.needs)
    for plan in placed.values():
        plan.event = analysis.add_fence(plan.block, plan.position, plan.cover)
    if placed:
        analysis.solve()
    return list(placed.values())


def _entry_of(flow, context) -> int:
    return min(b.index for b in flow.blocks if b.context is context)


# -- hoisting ------------------------------------------------------------------------------


def _choose_hoists(analysis: KernelAnalysis, needs: list[Need]) -> list[PlannedFence]:
    flow = analysis.flow
    dominators = DominatorTree.of(flow)
    forest = find_loops(flow, dominators)
    rank = {block: i for i, block in enumerate(flow.rpo)}
    root = {b.index for b in flow.blocks if b.context is None or b.context.parent is None}
    needs_in: dict[int, list[Need]] = {}
    for need in needs:
        needs_in.setdefault(need.block, []).append(need)
    generated = [analysis.generated_spaces(block) for block in range(len(flow.blocks))]
    candidates = [(rank[loop.header], 0, loop) for loop in forest.loops if loop.blocks <= root]
    for block in flow.rpo:
        if block in root and len(flow.succ[block]) + (block in flow.exits) >= 2 and analysis.pending(
                analysis.outs[block]):
            candidates.append((rank[block], 1, block))
    candidates.sort(key=lambda c: (c[0], c[1]))
    satisfied: set[int] = set()
    post_dominators = None
    hoists = []
    for _, kind, item in candidates:
        if kind == 0:
            hoist = _loop_hoist(flow, item, needs_in, satisfied, generated, forest.irreducible)
        else:
            if post_dominators is None:
                post_dominators = DominatorTree.post_of(flow)
            hoist = _branch_hoist(analysis, item, dominators, post_dominators, needs_in, satisfied, generated,
                                  forest.irreducible, root)
        if hoist is not None:
            satisfied.update(id(n) for n in hoist.needs)
            hoist.witnesses = _witnesses(analysis, hoist.needs)
            hoists.append(hoist)
    return hoists


def _open_needs(blocks, needs_in: dict, satisfied: set) -> list[Need]:
    return [n for b in blocks for n in needs_in.get(b, ()) if id(n) not in satisfied]


def _loop_hoist(flow, loop: Loop, needs_in, satisfied, generated, irreducible) -> PlannedFence | None:
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
    block = preheader.block if preheader.block is not None else loop.header
    return PlannedFence("loop", block, 0, cover, None, inside, loop=loop, preheader=preheader)


def _branch_hoist(analysis, branch: int, dominators, post_dominators, needs_in, satisfied, generated,
                  irreducible, root) -> PlannedFence | None:
    flow = analysis.flow
    join = post_dominators.idom.get(branch)
    if join is None or join in flow.succ[branch] or branch in flow.exits:
        return None  # an empty arm (an if without else, an early exit): never hoisted, and cheap to see
    reach = alias(analysis.spaces_of(analysis.pending(analysis.outs[branch])))
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
    return PlannedFence("branch", branch, position, cover, None, inside)


def _every_path_blocked(flow, region, blockers: set) -> bool:
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


def _apply_hoist(analysis: KernelAnalysis, hoist: PlannedFence) -> None:
    """Put a hoisted fence into the analysis (creating the preheader block)."""
    flow = analysis.flow
    if hoist.placement == "loop":
        preheader = hoist.preheader
        if preheader.block is None:
            header = hoist.loop.header
            entries = [p for p in flow.pred[header] if p not in hoist.loop.blocks]
            if header == flow.start:
                entries.append(ENTRY)
            created = flow.add_block_before(header, entries)
            created.context = flow.blocks[header].context
            hoist.block = created.index
            hoist.position = 0
            analysis.events.append([])
        else:
            block = flow.blocks[hoist.block]
            hoist.position = len(block.instructions) - (block.terminator is not None)
    hoist.event = analysis.add_fence(hoist.block, hoist.position, hoist.cover)


def _orders_something(analysis: KernelAnalysis, hoist: PlannedFence) -> bool:
    """False when an earlier hoist already ordered everything this one would."""
    pending = analysis.pending_before(hoist.block, hoist.event)
    return bool(analysis.spaces_of(pending) & alias(hoist.cover))
