"""ptxkit.cfg.sync.once: what runs once per thread, a wait's parity, the run before a barrier completes."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.sync.events import EventOptions, Kind, classify
from ptxkit.cfg.sync.once import Trips

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n.shared .align 8 .b64 bar;\n"
REGS = ".reg .pred %p<8>;\n.reg .b32 %r<16>;\n"


def trips(body: str, params: str = "") -> Trips:
    text = f"{HEAD}.visible .entry k({params})\n{{\n{REGS}{body}\tret;\n}}\n"
    return Trips(inlined_graph(ptxkit.parse(text, "k.ptx").function("k")))


def at(t: Trips, fragment: str) -> tuple[int, int]:
    """(block, position) of the first instruction containing `fragment`."""
    return next((b.index, i) for b in t.flow.blocks for i, x in enumerate(b.instructions) if fragment in x.text)


LOOP = ("\tmov.u32 %r1, 0;\n{set}L:\n\t@%p1 bra N;\n\tbar.arrive 1, 64;\nN:\n{reset}\tadd.s32 %r1, %r1, 1;\n"
        "\tsetp.lt.u32 %p2, %r1, 8;\n\t@%p2 bra L;\n")


@pytest.mark.parametrize("entry, way_round, once", [
    ("\tmov.pred %p1, 0;\n", "\tmov.pred %p1, -1;\n", True),  # a do-once flag
    ("\tsetp.eq.u32 %p1, %r1, 3;\n\tnot.pred %p1, %p1;\n", "\tmov.pred %p1, -1;\n", True),  # unknown at first
    ("\tmov.pred %p1, 0;\n", "", False),  # never set: every trip
    ("\tmov.pred %p1, 0;\n", "\tmov.pred %p1, -1;\n\tmov.pred %p1, 0;\n", False),  # cleared again
])
def test_a_block_behind_a_do_once_predicate_runs_once(entry, way_round, once):
    t = trips(LOOP.format(set=entry, reset=way_round))
    block, _ = at(t, "bar.arrive")
    assert t.runs_once(block) is once
    assert t.runs_once(at(t, "add.s32")[0]) is False and t.runs_once(0) is True


def test_a_retry_loop_at_the_loop_head_keeps_the_flag():
    """The wait's own retry edge goes back to the loop's head too; the flag is unchanged
    on it, so the first-trip block still runs once."""
    body = ("\tmov.pred %p1, 0;\nL:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 1;\n\t@!%p3 bra L;\n"
            "\t@%p1 bra N;\n\tbar.arrive 1, 64;\nN:\n\tmov.pred %p1, -1;\n\tbra.uni L;\n")
    t = trips(body)
    assert t.runs_once(at(t, "bar.arrive")[0])


ROLE = ("\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 5;\n\tsetp.eq.s32 %p1, %r2, 2;\n\tselp.u32 %r3, 1, 0, %p1;\n"
        "\tsetp.ne.s32 %p2, %r2, 3;\n\tnot.pred %p3, %p4;\n\tor.pred %p5, %p2, %p3;\n\t@%p5 bra DONE;\n"
        "W:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [bar], %r3;\n\t@!%p6 bra W;\nDONE:\n")


def first_parity(body: str, params: str = "") -> int | None:
    t = trips(body, params)
    return t.first_parity(*at(t, "try_wait"))


def test_a_parity_chosen_by_warp_is_known_under_the_role_branch():
    """CUTLASS: parity = (warp == 2); the wait runs only where warp == 3 (and a flag)."""
    assert first_parity(ROLE) == 0
    assert first_parity(ROLE.replace("%r2, 3;", "%r2, 2;")) == 1  # the role of warp 2 waits for parity 1
    assert first_parity(ROLE.replace("\tor.pred %p5, %p2, %p3;\n", "\tand.pred %p5, %p2, %p3;\n")) is None


def test_a_loop_carried_parity_is_taken_at_its_first_trip():
    body = ("\tmov.b32 %r4, 1;\n\tmov.u32 %r1, 0;\nL:\n\txor.b32 %r4, %r4, 1;\nW:\n"
            "\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [bar], %r4;\n\t@!%p6 bra W;\n"
            "\tadd.s32 %r1, %r1, 1;\n\tsetp.lt.u32 %p2, %r1, 8;\n\t@%p2 bra L;\n")
    assert first_parity(body) == 0
    assert first_parity(body.replace("\tmov.b32 %r4, 1;\n", "\tld.param.u32 %r4, [k_p];\n"), ".param .u32 k_p") is None


def test_a_failed_wait_keeps_the_code_behind_it_out():
    """CUTLASS's probe: try_wait into a register, then a branch on it past the blocking wait."""
    body = ("\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [bar], 0;\n\tselp.b32 %r1, 1, 0, %p1;\n"
            "\tsetp.ne.s32 %p2, %r1, 0;\n\t@%p2 bra READ;\n"
            "W:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [bar], 0;\n"
            "\t@!%p3 bra W;\nREAD:\n\tbar.arrive 1, 64;\n")
    t = trips(body)
    waits = {at(t, "try_wait"), at(t, "%p3, [bar]")}
    read = at(t, "bar.arrive")[0]
    assert read in t.reach({t.flow.start: {}})
    assert read not in t.reach({t.flow.start: {}}, blocked=frozenset(waits))
    assert read in t.reach({t.flow.start: {}}, blocked=frozenset(list(waits)[:1]))


def test_an_arrive_through_the_cluster_window_on_the_own_rank():
    body = ("\tmov.u32 %r1, %cluster_ctarank;\n\tmov.u32 %r2, bar;\n\tmapa.shared::cluster.u32 %r3, %r2, %r1;\n"
            "\tmbarrier.arrive.shared::cluster.b64 _, [%r3];\n\tmapa.shared::cluster.u32 %r5, %r2, %r4;\n"
            "\tmbarrier.arrive.shared::cluster.b64 _, [%r5];\n")
    t = trips(body)
    assert t.own_cta(*at(t, "[%r3]")) and not t.own_cta(*at(t, "[%r5]"))


def test_a_multicast_commit_may_arrive_on_another_cta():
    body = ("\tmov.u32 %r2, bar;\n"
            "\ttcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%r2], 3;\n")
    t = trips(body)
    commit = at(t, "tcgen05.commit")
    events = [e for e in classify(t.flow, EventOptions()).by_block[commit[0]] if e.position == commit[1]]
    assert events and t.remote(commit[0], events[0])


def test_an_arrive_run_once_hands_over_only_its_threads_earlier_accesses():
    """First trip only: a store, then an arrive on `bar`; every trip: a store and a
    bar.sync after them; before the loop: a store and a bar.sync. The arrive's own limit
    keeps the stores before the loop and before it in its block, and leaves out the one
    that follows it in every trip; of the waits, only the first is heard before it; the hand-off limit stays whole
    (`bar` has no wait for parity 0, so no one-completion limit)."""
    from ptxkit.cfg.fence.proxy import AnalysisOptions, KernelAnalysis
    from ptxkit.cfg.sync.once import export_limits

    body = ("\tmov.u32 %r2, bar;\n\tmov.u32 %r5, 0;\n\tst.shared.u32 [%r2+64], %r5;\n\tbar.sync 1;\n"
            "\tmov.pred %p1, 0;\n"
            "\tmov.u32 %r1, 0;\nL:\n\t@%p1 bra N;\n\tst.shared.u32 [%r2+192], %r5;\n"
            "\tmbarrier.arrive.shared::cta.b64 _, [%r2];\nN:\n"
            "\tst.shared.u32 [%r2+128], %r5;\n\tbar.sync 2;\n\tmov.pred %p1, -1;\n\tadd.s32 %r1, %r1, 1;\n"
            "\tsetp.lt.u32 %p2, %r1, 8;\n\t@%p2 bra L;\n"
            "\tcp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r2+64], [%rd1], 128, [%r2];\n")
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}.reg .b64 %rd<2>;\n{body}\tret;\n}}\n"
    analysis = KernelAnalysis(ptxkit.parse(text, "k.ptx").function("k"), AnalysisOptions())
    limits = export_limits(analysis.flow, analysis.events, analysis.facts)
    (allowed, own, heard), = limits.values()
    made = {analysis.flow.blocks[block].instructions[event.position].text.strip(): fact.index
            for fact in analysis.facts for block, event in fact.origins}
    before, after = made["st.shared.u32 [%r2+64], %r5;"], made["st.shared.u32 [%r2+128], %r5;"]
    first = made["st.shared.u32 [%r2+192], %r5;"]
    assert own >> before & 1 and own >> first & 1 and not own >> after & 1
    assert allowed == (1 << len(analysis.facts)) - 1
    syncs = {analysis.flow.blocks[block].instructions[event.position].text.strip(): id(event)
             for block, events in enumerate(analysis.events) for event in events if event.kind is Kind.ARRIVE_WAIT}
    assert heard == (syncs["bar.sync 1;"],)  # what the bar.sync after it imports is not held there


def _live_by_sets(t: Trips) -> list[frozenset[str]]:
    """The liveness `Trips.live` gives, solved the plain way: sets of names per block."""
    flow = t.flow
    uses: list[set[str]] = [set() for _ in range(len(flow))]
    kills: list[set[str]] = [set() for _ in range(len(flow))]
    for block, effects in t.effects.items():
        for position, wait, targets, guard, names, _ in effects:
            operands = flow.blocks[block].instructions[position].operands
            read = {names[o.name] for o in (operands[2:3] if wait is not None else operands[1:]) if o.name in names}
            read |= {guard[0]} if guard is not None else set()
            uses[block] |= read - kills[block]
            if guard is None:
                kills[block] |= {wait} if wait is not None else set(targets)
    for block, (name, _) in t.tests.items():
        uses[block] |= {name} - kills[block]
    live = [frozenset(u) for u in uses]
    changed = True
    while changed:
        changed = False
        for block in range(len(flow)):
            out = set().union(*(live[s] for s in flow.succ[block]))
            new = frozenset(uses[block] | (out - kills[block]))
            changed |= new != live[block]
            live[block] = new
    return live


#: Samples whose kernels the do-once analysis follows through loops, rings and cluster phases.
FOLLOWED_SAMPLES = ["h08a_stage_ring_handoff", "h18_arrive_once_before_the_reads", "h27_cluster_barrier_phases",
                    "h21b_debug_descriptor_write_inside_tile"]


def sample_trips(name: str) -> Trips:
    """`Trips` of the kernel of ``samples/fence/<name>.ptx``, its calls inlined."""
    module = ptxkit.parse(open(f"samples/fence/{name}.ptx").read(), "k.ptx")
    return Trips(inlined_graph(next(f for f in module.functions if f.kind == "entry"),
                               {f.name: f for f in module.functions}))


@pytest.mark.parametrize("name", FOLLOWED_SAMPLES)
def test_the_live_registers_are_those_of_the_plain_fixpoint(name):
    # solved on bit masks, with blocks of equal sets sharing one: the same sets as a
    # round-robin fixpoint over sets of names
    t = sample_trips(name)
    live = t.live
    assert live == _live_by_sets(t) and len(set(live)) > 1
    assert len({id(s) for s in live}) == len(set(live))  # equal sets are one object


@pytest.mark.parametrize("name", FOLLOWED_SAMPLES)
def test_a_block_runs_as_its_instructions_fold_one_by_one(name):
    # each instruction's folding is decoded once (`_folding`); running a block with it
    # gives what folding every instruction afresh gives (`_fold`, as before), whatever the
    # constants known on entry
    import random

    from ptxkit.cfg.sync.once import _PROPAGATED, _constant, _fold

    t = sample_trips(name)
    flow, pick = t.flow, random.Random(35)

    def run_folding_afresh(block, state):
        state = dict(state)
        for position, wait, targets, guard, names, _ in t.effects.get(block, ()):
            if wait is not None:
                state.pop(wait, None)
                continue
            taken = None if guard is None else state.get(guard[0])
            if guard is not None and taken == guard[1]:
                continue
            value = None
            if len(targets) == 1:
                value = _fold(flow.blocks[block].heads[position], flow.blocks[block].instructions[position].operands,
                              lambda operand: _constant(operand, names, state), _PROPAGATED)
            for target in targets:
                new = next(iter(value)) if value is not None and len(value) == 1 else None
                if new is None or (guard is not None and taken is None and new != state.get(target)):
                    state.pop(target, None)
                else:
                    state[target] = new
        return state

    named = sorted({qualified for effects in t.effects.values() for *_, names, _ in effects
                    for qualified in names.values()})
    folded = 0
    for block, effects in t.effects.items():
        folded += sum(isinstance(effect[-1], tuple) for effect in effects)
        for _ in range(20):
            state = {n: pick.choice((0, 1, 2, 5, 0xFFFFFFFF)) for n in named if pick.random() < 0.6}
            assert t._run(block, state) == run_folding_afresh(block, state)
    assert folded > 0


def test_a_comparison_folds_its_operands_in_their_order():
    t = trips("\tmov.u32 %r1, 3;\n\tsetp.lt.u32 %p1, %r1, %r2;\n\t@%p1 bra N;\n\tbar.sync 1;\nN:\n")
    assert t._run(0, {"%r2": 8})["%p1"] == 1 and t._run(0, {"%r2": 2})["%p1"] == 0  # 3 < 8, not 3 < 2
    assert "%p1" not in t._run(0, {})  # %r2 unknown: so is the comparison
