"""Where the fences go: TileLang's placement, expressed on the CFG (fence.md §1.5, §5.4).

1. Solve, and find every async op (or call) whose entry state may be generic.
2. Hoisting (``placement="hoist"``, the default), outer and earlier regions first:

   - *loop*: when a natural loop contains ops that need a fence, and no generic write
     to the spaces that fence would order, one fence goes in the loop's preheader
     (created with a fresh label when the loop has several outside predecessors);
   - *branch*: when every path from a conditional branch to its immediate
     post-dominator passes an unguarded op that needs a fence, and the region has no
     generic write to those spaces, one fence goes before the branch.

   A region whose ops are already fenced needs nothing, so it is never hoisted over
   (TileLang hoists there anyway). Each hoist replaces at least one fence that inline
   placement would insert, so hoisting never inserts more fences than inline placement.
3. Every op that still needs a fence gets one immediately before it, carrying the op's
   guard (issuer side, fence.md §5.4.3).

>>> from ptxkit.cfg.proxy import CTA, CLUSTER, GLOBAL_SPACE
>>> fence_text_for(CTA), fence_text_for(CTA | CLUSTER), fence_text_for(CTA | GLOBAL_SPACE)
('fence.proxy.async.shared::cta', 'fence.proxy.async.shared::cluster', 'fence.proxy.async')
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ptxkit.cfg.dominance import DominatorTree
from ptxkit.cfg.graph import ENTRY, EXIT
from ptxkit.cfg.loops import Loop, Preheader, branch_region, find_loops, find_preheader
from ptxkit.cfg.proxy import (
    CLUSTER, GENERIC, GLOBAL_SPACE, SHARED, FunctionAnalysis, Need, ScanResult, overlap, spaces_with,
)

#: ``--fence-variant`` values and the spaces each orders.
VARIANTS = {"shared::cta": SHARED, "shared::cluster": SHARED, "full": SHARED | GLOBAL_SPACE}


def fence_text_for(cover: int, forced: str | None = None) -> str:
    """The narrowest proxy fence ordering `cover` (fence.md §5.2), or the forced
    variant (``shared::cta``, ``shared::cluster``, ``full``) when that orders it.

    ``shared::cta`` is taken to order both shared windows once it is forced (the
    CUTLASS/TileLang convention); a forced shared variant never orders global, so a
    cover with global gets the narrowest correct fence instead.

    >>> fence_text_for(GLOBAL_SPACE), fence_text_for(CLUSTER, forced="shared::cta")
    ('fence.proxy.async.global', 'fence.proxy.async.shared::cta')
    """
    if forced is not None and not cover & ~VARIANTS[forced]:
        return "fence.proxy.async" if forced == "full" else f"fence.proxy.async.{forced}"
    if cover & GLOBAL_SPACE:
        return "fence.proxy.async" if cover & SHARED else "fence.proxy.async.global"
    return "fence.proxy.async.shared::cluster" if cover & CLUSTER else "fence.proxy.async.shared::cta"


@dataclass(eq=False)
class PlannedFence:
    """One fence the pass inserts (or, in check mode, reports missing).

    `placement`: ``inline`` (right before an async op), ``call`` (before a call whose
    callee needs it), ``loop`` (in a loop preheader) or ``branch`` (before a
    conditional branch). `block`/`position`: where in the CFG (position = instruction
    index it precedes; the block length means "at the end"). `needs`: the ops it
    serves, first the one its reason names. `witness`: ``(source block, source event,
    block path)`` from `FunctionAnalysis.witness`.

    >>> import ptxkit
    >>> from ptxkit.cfg.proxy import AnalysisOptions, FunctionAnalysis
    >>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
    >>> plan, = plan_fences(FunctionAnalysis(m.function("k"), AnalysisOptions()))[0]
    >>> plan.placement, plan.block, plan.loop.header, fence_text_for(plan.cover), plan.needs[0].instruction.line
    ('loop', 0, 1, 'fence.proxy.async.shared::cta', 36)
    """

    placement: str
    block: int
    position: int
    cover: int
    guard: object
    needs: list[Need]
    loop: Loop | None = None
    preheader: Preheader | None = None
    witness: tuple | None = None
    event: object = field(default=None, repr=False)


def plan_fences(analysis: FunctionAnalysis, placement: str = "hoist") -> tuple[list[PlannedFence], ScanResult]:
    """Decide every fence of one function; returns the plan and the final scan.

    The analysis ends up solved with the hoisted fences in its events (so its
    `summary` and block states describe the fenced function).

    >>> import ptxkit
    >>> from ptxkit.cfg.proxy import AnalysisOptions, FunctionAnalysis
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n.reg .b32 %r<2>;\\n.reg .b64 %rd<3>;\\n.reg .f32 %f<5>;\\n\\tst.shared.u32 [%r1], 0;\\n"
    ...     "L:\\n\\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p1,"
    ...     " 1, 1, 0, 0;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> plans, _ = plan_fences(FunctionAnalysis(m.function("k"), AnalysisOptions()))
    >>> [(p.placement, p.block) for p in plans]
    [('loop', 0)]
    """
    analysis.solve()
    scan = analysis.scan()
    hoisted: list[PlannedFence] = []
    if placement == "hoist" and scan.needs:
        hoisted = _choose_hoists(analysis, scan.needs)
        if hoisted:
            _apply_hoists(analysis, hoisted)
            analysis.solve()
            useless = [h for h in hoisted if not _kills_generic(analysis, h)]
            if useless:
                for hoist in useless:
                    analysis.remove_event(hoist.block, hoist.event)
                hoisted = [h for h in hoisted if h not in useless]
                analysis.solve()
            scan = analysis.scan()
    plans = list(hoisted)
    for need in scan.needs:
        kind = "inline" if need.kind == "async" else "call"
        witness = analysis.witness(need.block, need.position, need.spaces)
        plans.append(PlannedFence(kind, need.block, need.position, need.cover, need.guard, [need], witness=witness))
    return plans, scan


def _choose_hoists(analysis: FunctionAnalysis, needs: list[Need]) -> list[PlannedFence]:
    flow = analysis.flow
    dominators = DominatorTree.of(flow)
    forest = find_loops(flow, dominators)
    rank = {block: i for i, block in enumerate(flow.rpo)}
    needs_in: dict[int, list[Need]] = {}
    for need in needs:
        needs_in.setdefault(need.block, []).append(need)
    generated = [0] * len(flow.blocks)
    for block, events in enumerate(analysis.events):
        for event in events:
            generated[block] |= spaces_with(event.transfer[1], GENERIC)
    candidates = [(rank[loop.header], 0, loop) for loop in forest.loops]
    for block in flow.rpo:
        if len(flow.succ[block]) + (block in flow.exits) >= 2 and spaces_with(analysis.outs[block], GENERIC):
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
                                  forest.irreducible)
        if hoist is not None:
            first = hoist.needs[0]
            hoist.witness = analysis.witness(first.block, first.position, first.spaces)
            satisfied.update(id(n) for n in hoist.needs)
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
    reach = overlap(cover)
    if any(generated[b] & reach for b in loop.blocks):
        return None  # the loop writes what the fence would order: the fences stay inside
    preheader = find_preheader(flow, loop)
    if preheader is None:
        return None
    block = preheader.block if preheader.block is not None else loop.header
    return PlannedFence("loop", block, 0, cover, None, inside, loop=loop, preheader=preheader)


def _branch_hoist(analysis, branch: int, dominators, post_dominators, needs_in, satisfied, generated,
                  irreducible) -> PlannedFence | None:
    flow = analysis.flow
    join = post_dominators.idom.get(branch)
    if join is None or join in flow.succ[branch] or branch in flow.exits:
        return None  # an empty arm (an if without else, an early exit): never hoisted, and cheap to see
    reach = overlap(spaces_with(analysis.outs[branch], GENERIC))
    region = branch_region(flow, branch, dominators, post_dominators,
                           reject=lambda b: bool(generated[b] & reach) or b in irreducible)
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


def _apply_hoists(analysis: FunctionAnalysis, hoists: list[PlannedFence]) -> None:
    """Put the hoisted fences into the analysis (creating preheader blocks)."""
    flow = analysis.flow
    for hoist in hoists:
        if hoist.placement == "loop":
            preheader = hoist.preheader
            if preheader.block is None:
                header = hoist.loop.header
                entries = [p for p in flow.pred[header] if p not in hoist.loop.blocks]
                if header == flow.start:
                    entries.append(ENTRY)
                hoist.block = flow.add_block_before(header, entries).index
                hoist.position = 0
            else:
                block = flow.blocks[hoist.block]
                hoist.position = len(block.instructions) - (block.terminator is not None)
        analysis.events.extend([] for _ in range(len(flow.blocks) - len(analysis.events)))
        hoist.event = analysis.add_fence(hoist.block, hoist.position, hoist.cover)


def _kills_generic(analysis: FunctionAnalysis, hoist: PlannedFence) -> bool:
    """False when an earlier hoist already removed every generic write it would order."""
    index = analysis.events[hoist.block].index(hoist.event)
    return bool(spaces_with(analysis.state_before(hoist.block, index), GENERIC) & hoist.cover)
