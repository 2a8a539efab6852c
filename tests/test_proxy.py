"""ptxkit.cfg.fence.proxy: facts, hand-offs between threads, WAR, mbarrier.init, CTAs, guards."""

from __future__ import annotations

from pathlib import Path

import pytest

import ptxkit
from ptxkit.cfg.fence.fence import FenceOptions, analyse_module, fence_text
from ptxkit.cfg.fence.proxy import AnalysisOptions, Hazard, KernelAnalysis, Solution
from ptxkit.cfg.sync.locations import spaces_text

HEAD = (".version 8.0\n.target sm_90a\n.address_size 64\n.shared .align 1024 .b8 tile[8192];\n"
        ".shared .align 1024 .b8 other[8192];\n.shared .align 8 .b64 full;\n.shared .align 8 .b64 empty;\n")
REGS = (".reg .pred %p<8>;\n.reg .b16 %h<2>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n.reg .f32 %f<8>;\n"
        "\tmov.u32 %r1, tile;\n\tmov.u32 %r2, other;\n\tmov.u32 %r3, full;\n\tmov.u32 %r4, empty;\n"
        "\tmov.u32 %r5, %tid.x;\n"
        # a wgmma descriptor of `tile` (no swizzle, LBO 128, SBO 256: a 64x32-byte A tile of 2 KB)
        "\tshr.u32 %r6, %r1, 4;\n\tcvt.u64.u32 %rd1, %r6;\n\tor.b64 %rd2, %rd1, 68720001024;\n")
WG = "\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd2, %rd2, %p7, 1, 1, 0, 0;\n"
TMA = ("\tcp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd9, {%r0}],"
       " [%r3];\n")
WAIT_FULL = "W{n}:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [%r3], 0;\n\t@!%p6 bra W{n};\n"
WAIT_EMPTY = "V{n}:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [%r4], 0;\n\t@!%p6 bra V{n};\n"


def kernel(producer: str, consumer: str, extra: str = "") -> str:
    """Threads 0-127 run `producer`, the others `consumer` (warp-specialized roles)."""
    return (f"{HEAD}{extra}.visible .entry k()\n{{\n{REGS}\tsetp.lt.u32 %p5, %r5, 128;\n\t@!%p5 bra CONSUMER;\n"
            f"{producer}\tbra.uni DONE;\nCONSUMER:\n{consumer}DONE:\n\tret;\n}}\n")


def needs(text: str, **options) -> list[tuple[int, str, str]]:
    """(line, hazard, cover) of every fence the analysis wants."""
    analysis = KernelAnalysis(ptxkit.parse(text, "k.ptx").function("k"), AnalysisOptions(**options))
    return [(n.instruction.line, n.hazard.value, spaces_text(n.cover)) for n in analysis.solve().needs()]


def witness(text: str) -> list[str]:
    solution = KernelAnalysis(ptxkit.parse(text, "k.ptx").function("k"), AnalysisOptions()).solve()
    need, = solution.needs()
    return [f"{step.what}: {step.instruction.text.split()[0]}" for step in solution.explain(need)]


def line_of(text: str, fragment: str, occurrence: int = 0) -> int:
    return [i for i, line in enumerate(text.splitlines(), 1) if fragment in line][occurrence]


# -- hand-offs --------------------------------------------------------------------------------


def test_named_barrier_hand_off_to_wgmma():
    text = kernel("\tst.shared.b16 [%r1+64], %h0;\n\tbar.arrive 1, 256;\n", "\tbar.sync 1, 256;\n" + WG)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]
    assert witness(text) == ["generic-proxy write: st.shared.b16", "arrive: bar.arrive", "wait: bar.sync",
                             "op: wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"]


@pytest.mark.parametrize("producer, consumer", [
    ("\tst.shared.b16 [%r1+64], %h0;\n\tfence.proxy.async.shared::cta;\n\tbar.arrive 1, 256;\n",
     "\tbar.sync 1, 256;\n" + WG),  # the writer fenced before handing over
    ("\tst.shared.b16 [%r1+64], %h0;\n\tbar.arrive 1, 256;\n",
     "\tbar.sync 1, 256;\n\tfence.proxy.async.shared::cta;\n" + WG),  # the issuer fenced after the wait
    ("\tst.shared.b16 [%r2], %h0;\n\tbar.arrive 1, 256;\n", "\tbar.sync 1, 256;\n" + WG),  # another buffer
    ("\tst.shared.b16 [%r1+4096], %h0;\n\tbar.arrive 1, 256;\n", "\tbar.sync 1, 256;\n" + WG),  # past the tile
    ("\tst.shared.b16 [%r1+64], %h0;\n\tbar.arrive 2, 256;\n", "\tbar.sync 1, 256;\n" + WG),  # another barrier
    ("\tbar.arrive 1, 256;\n\tst.shared.b16 [%r1+64], %h0;\n", "\tbar.sync 1, 256;\n" + WG),  # written after
])
def test_hand_offs_that_need_nothing(producer, consumer):
    assert needs(kernel(producer, consumer)) == []


def test_a_path_no_thread_takes_carries_no_access_of_its_own():
    # the consumers (tid >= 128) store into the tile, loop back, and thread 0 of the
    # producers issues a TMA store of it: no thread runs both, so without a barrier no
    # fence in thread 0 would order the store, and none is wanted; through bar.sync the
    # store is handed over, the fence is wanted, and the witness shows the hand-off
    store = "\tcp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd9, {%r0}], [%r1];\n"
    body = ("L:\n\tsetp.lt.u32 %p5, %r5, 128;\n\t@%p5 bra PRODUCER;\n\tst.shared.u32 [%r1], %r5;\n\tbra.uni NEXT;\n"
            "PRODUCER:\n\tsetp.ne.u32 %p4, %r5, 0;\n\t@%p4 bra NEXT;\n" + store + "NEXT:\n"
            "\tadd.s32 %r7, %r7, 1;\n\tsetp.lt.u32 %p3, %r7, 4;\n\t@%p3 bra L;\n")
    text = (f"{HEAD}.visible .entry k() .maxntid 256, 1, 1\n{{\n{REGS}\tmov.u32 %r7, 0;\n"
            f"{body}\tret;\n}}\n")
    assert needs(text) == []
    synced = text.replace("NEXT:\n", "NEXT:\n\tbar.sync 0;\n")
    assert needs(synced) == [(line_of(synced, "cp.async.bulk.tensor"), "raw", "shared::cta")]
    assert witness(synced) == ["generic-proxy write: st.shared.u32", "arrive: bar.sync", "wait: bar.sync",
                               "op: cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group"]


def test_barrier_id_in_a_register_matches_any():
    text = kernel("\tst.shared.b16 [%r1+64], %h0;\n\tbar.arrive %r9, 256;\n", "\tbar.sync 1, 256;\n" + WG)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]
    text = kernel("\tst.shared.b16 [%r1+64], %h0;\n\tmov.u32 %r8, 3;\n\tbar.arrive %r8, 256;\n",
                  "\tbar.sync 1, 256;\n" + WG)
    assert needs(text) == []  # a constant id in a register is that id


def test_barrier_ids_in_registers_by_their_values():
    """In the producer ``%tid.x < 128``, so ``(%tid.x >> 7) + 4`` names barrier 4 only."""
    producer = "\tst.shared.b16 [%r1+64], %h0;\n\tshr.u32 %r8, %r5, 7;\n\tadd.u32 %r9, %r8, 4;\n\tbar.arrive %r9, 256;\n"
    assert needs(kernel(producer, "\tbar.sync 1, 256;\n" + WG)) == []
    assert needs(kernel(producer, "\tbar.sync 5, 256;\n" + WG)) == []
    text = kernel(producer, "\tbar.sync 4, 256;\n" + WG)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]


def test_the_prologue_barrier_does_not_hear_the_epilogue():
    """Every thread's first bar.sync 0 completes phase 1; the epilogue's is a later phase,
    so its writes do not reach the producer's load through the prologue's bar.sync."""
    text = kernel("\tbar.sync 0;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 2048;\n" + TMA,
                  "\tbar.sync 0;\n\tst.shared.b16 [%r1+64], %h0;\n\tbar.sync 0;\n")
    assert needs(text) == []
    looped = kernel("LOOP:\n\tbar.sync 0;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 2048;\n" + TMA
                    + "\tbra.uni LOOP;\n", "\tbar.sync 0;\n\tst.shared.b16 [%r1+64], %h0;\n\tbar.sync 0;\n")
    assert needs(looped) == [(line_of(looped, "cp.async.bulk.tensor"), "raw", "shared::cta")]


def test_mbarrier_hand_off_by_location():
    consumer = WAIT_FULL.format(n=1) + WG
    text = kernel("\tst.shared.b16 [%r1+64], %h0;\n\tmbarrier.arrive.shared::cta.b64 _, [%r3];\n", consumer)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]
    other = kernel("\tst.shared.b16 [%r1+64], %h0;\n\tmbarrier.arrive.shared::cta.b64 _, [%r4];\n", consumer)
    assert needs(other) == []  # the arrive is on the other mbarrier


def test_lanes_of_a_warp_meet_at_one_bar_warp_sync():
    """The lanes hand their writes over at the bar.warp.sync they all execute; what one
    __syncwarp exported is not what a later one imports (the FlashAttention-3 pattern:
    write, __syncwarp, fence, ..., __syncwarp, bulk reduce)."""
    write = "\tst.shared.b16 [%r1+64], %h0;\n"
    sync = "\tbar.warp.sync -1;\n"
    fenced = write + sync + "\tfence.proxy.async.shared::cta;\n" + sync + WG
    assert needs(kernel(fenced, "")) == []
    text = kernel(write + sync + WG, "")
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]


def test_cp_async_producer_signals_through_the_mbarrier():
    producer = "\tcp.async.cg.shared.global [%r1+64], [%rd8], 16;\n\tcp.async.mbarrier.arrive.noinc.shared.b64 [%r3];\n"
    text = kernel(producer, WAIT_FULL.format(n=1) + WG)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]


def test_war_the_consumer_reads_and_the_producer_overwrites():
    producer = ("\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 2048;\n" + WAIT_EMPTY.format(n=1) + TMA)
    consumer = WAIT_FULL.format(n=2) + "\tld.shared.b16 %h1, [%r1+64];\n\tmbarrier.arrive.shared::cta.b64 _, [%r4];\n"
    text = kernel(producer, consumer)
    assert needs(text) == [(line_of(text, "cp.async.bulk.tensor"), "war", "shared::cta")]
    assert needs(text, war=False) == []
    fenced = consumer.replace("\tmbarrier.arrive", "\tfence.proxy.async.shared::cta;\n\tmbarrier.arrive")
    assert needs(kernel(producer, fenced)) == []  # CUTLASS's writer-side fence before consumer_release


def test_a_tensor_load_writes_no_more_than_the_armed_bytes():
    producer = ("\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 2048;\n" + WAIT_EMPTY.format(n=1) + TMA)
    consumer = "\tld.shared.b16 %h1, [%r1+2048];\n\tmbarrier.arrive.shared::cta.b64 _, [%r4];\n"
    assert needs(kernel(producer, consumer)) == []  # bytes 2048.. are not in the 2048-byte box
    assert needs(kernel(producer.replace("2048;", "4096;"), consumer))[0][1] == "war"


def test_an_init_only_the_cta_uses_needs_no_fence():
    """PTX ISA, ``cp.async.bulk.tensor``: the copy "accesses its mbarrier operand using
    generic-proxy", so an init and the copy's complete-tx are two generic accesses of the
    barrier, ordered by program order or by the barrier that hands the init on
    (docs/fence.md §1): no proxy fence, in the initialising thread or in another."""
    init = "\tmbarrier.init.shared::cta.b64 [%r3], 1;\n"
    assert needs(kernel(init + "\tbar.arrive 1, 256;\n", "\tbar.sync 1, 256;\n" + TMA)) == []
    assert needs(kernel(init + TMA, "")) == []
    # the init is no write of the copy's bytes: a store to them still needs the fence
    text = kernel(init + "\tst.shared.b16 [%r1], %h0;\n" + TMA, "")
    assert needs(text) == [(line_of(text, "cp.async.bulk"), "raw", "shared::cta")]



#: samples/fence/h18: a producer arrives on `order` only in the first trip of its loop
#: (CUTLASS's load-order barrier); the loader waits there once before its TMA loads of
#: `tileC`; the readers read the tile, arrive on `acc` unfenced, fence and release it.
ONCE = (Path(__file__).parent.parent / "samples" / "fence" / "h18_arrive_once_before_the_reads.ptx").read_text()


REMOTE_AFTER = "\tfence.proxy.async.shared::cta;\n"


def test_an_arrive_run_once_before_the_reads_hands_none_of_them_over():
    assert needs(ONCE) == []
    # an arrive through the cluster window on the CTA's own rank is the CTA's own
    own = ONCE.replace(REMOTE_AFTER, REMOTE_AFTER + "\tmov.u32 \t%r12, %cluster_ctarank;\n"
                       "\tmapa.shared::cluster.u32 \t%r13, %r5, %r12;\n"
                       "\tmbarrier.arrive.shared::cluster.b64 \t_, [%r13];\n")
    assert own != ONCE and needs(own) == []


@pytest.mark.parametrize("change", [
    # the loader's wait on `order` passes at once (parity 1): a read may come first
    ("\tmov.b32 \t%r20, 0;", "\tmov.b32 \t%r20, 1;"),
    # the producer arrives on `order` in every trip, after reads it waited for
    ("\t@%p5 bra \tPRODUCER_NEXT;\n", ""),
    # the readers' first wait on `cfull` passes at once: they may read before any load
    ("\tmov.b32 \t%r33, 0;", "\tmov.b32 \t%r33, 1;"),
    # the producer also arrives on `cfull`: the readers need not wait for the loader
    ("\tmbarrier.arrive.shared::cta.b64 \t_, [%r3];", "\tmbarrier.arrive.shared::cta.b64 \t_, [%r3];\n"
     "\tmbarrier.arrive.shared::cta.b64 \t_, [%r5];"),
    # the readers also arrive on `cfull` of a CTA whose rank the analysis does not know:
    # another CTA's readers may arrive on this CTA's `cfull` at any time
    (REMOTE_AFTER, REMOTE_AFTER + "\tmapa.shared::cluster.u32 \t%r12, %r5, %r7;\n"
     "\tmbarrier.arrive.shared::cluster.b64 \t_, [%r12];\n"),
    # the do-once predicate is cleared again in the loop
    ("\txor.b32 \t%r10, %r10, 1;", "\txor.b32 \t%r10, %r10, 1;\n\tmov.pred \t%p5, 0;"),
], ids=["loader-parity-1", "arrive-every-trip", "reader-parity-1", "other-arrive-on-cfull", "remote-arrive",
        "flag-cleared"])
def test_an_arrive_that_may_follow_a_read_still_hands_it_over(change):
    old, new = change
    assert old in ONCE
    changed = ONCE.replace(old, new, 1)
    assert [(line, hazard) for line, hazard, _ in needs(changed)] == [(line_of(changed, "cp.async.bulk.tensor"), "war")]

#: samples/fence/h19: every round syncs before thread 0's TMA issue and after the reads,
#: then fences; the sync after the reads never hands them straight to the next issue
SYNCED = (Path(__file__).parent.parent / "samples" / "fence" / "h19_sync_after_the_reads_then_fence.ptx").read_text()
FENCE_AFTER_READS = "\tbar.sync \t0;\n\tfence.proxy.async.shared::cta;\n"


@pytest.mark.parametrize("change", [
    # no fence: the reads reach the next issue of their stage unfenced
    (FENCE_AFTER_READS, "\tbar.sync \t0;\n"),
    # thread 0 may sync once more after the reads: the counts of barrier 0 drift apart
    (FENCE_AFTER_READS, "\tbar.sync \t0;\n\t@%p1 bar.sync \t0;\n\tfence.proxy.async.shared::cta;\n"),
    # the round count depends on the thread: one thread's sync after its reads may be
    # another's sync before an issue
    ("\tld.param.u32 \t%r4, [k_param_0];", "\tld.param.u32 \t%r4, [k_param_0];\n\tadd.s32 \t%r4, %r4, %r1;"),
], ids=["no-fence", "extra-sync", "rounds-by-thread"])
def test_a_read_handed_straight_to_the_issue_needs_a_fence(change):
    assert needs(SYNCED) == []
    old, new = change
    assert old in SYNCED
    changed = SYNCED.replace(old, new, 1)
    assert [(line, hazard) for line, hazard, _ in needs(changed)] == [(line_of(changed, "cp.async.bulk.tensor"), "war")]


# -- a fence another thread ran (docs/fence.md §4.4) ------------------------------------------

#: the consumers write `tile`, meet, thread 128 fences (and would store the tile), then lane 0
#: of each warp releases `tile` on `empty`; the producer waits and loads the next tile into it
EPILOGUE = ("\tst.shared.b16 [%r1+64], %h0;\n\tbar.sync 2, 128;\n"
            "\tand.b32 %r10, %r5, 127;\n\tsetp.ne.s32 %p4, %r10, 0;\n\t@%p4 bra STORED;\n"
            "\tfence.proxy.async.shared::cta;\nSTORED:\n"
            "\tand.b32 %r11, %r5, 31;\n\tsetp.ne.s32 %p3, %r11, 0;\n\t@%p3 bra RELEASED;\n"
            "\tmbarrier.arrive.shared::cta.b64 _, [%r4];\nRELEASED:\n")
LOAD = "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 2048;\n" + WAIT_EMPTY.format(n=1) + TMA


def test_one_thread_fences_for_the_threads_that_met_it():
    """The phase of `empty` completes only with thread 128's arrive, which follows its
    fence of what every consumer handed it at bar.sync: the fence is on a causality
    path from each write to the TMA load."""
    assert needs(kernel(LOAD, EPILOGUE)) == []
    unfenced = kernel(LOAD, EPILOGUE.replace("\tfence.proxy.async.shared::cta;\n", ""))
    assert needs(unfenced) == [(line_of(unfenced, "cp.async.bulk.tensor"), "raw", "shared::cta")]


def test_a_fence_under_a_data_dependent_branch_credits_nothing():
    """``if (x) fence``: in a round where x is false no thread fences."""
    guarded = EPILOGUE.replace("\tfence.proxy.async.shared::cta;\n", "\tsetp.eq.u32 %p2, %r12, 0;\n\t@%p2 bra SKIP;\n"
                               "\tfence.proxy.async.shared::cta;\nSKIP:\n")
    text = kernel(LOAD, "\tld.shared.u32 %r12, [%r2];\n" + guarded)
    assert needs(text) == [(line_of(text, "cp.async.bulk.tensor"), "raw", "shared::cta")]


@pytest.mark.parametrize("back, wait, needed", [
    ("\tmbarrier.arrive.shared::cta.b64 _, [%r4];\n", WAIT_EMPTY.format(n=1), True),
    ("\tbar.arrive 2, 256;\n", "\tbar.sync 2, 256;\n", False),
])
def test_a_thread_is_credited_its_own_access_only_through_a_named_barrier(back, wait, needed):
    """The producer's store reaches the consumer, which fences it and answers. A named
    barrier's wait sees that answer; an mbarrier parity wait passes at once on the phase
    before the first, before any consumer fenced anything."""
    inits = "\tmbarrier.init.shared::cta.b64 [%r3], 1;\n\tmbarrier.init.shared::cta.b64 [%r4], 1;\n"
    producer = inits + "\tst.shared.b16 [%r1], %h0;\n\tbar.arrive 1, 256;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 2048;\n" + wait + TMA
    text = kernel(producer, "\tbar.sync 1, 256;\n\tfence.proxy.async.shared::cta;\n" + back)
    expected = [(line_of(text, "cp.async.bulk.tensor"), "raw", "shared::cta")] if needed else []
    assert needs(text) == expected


#: Rounds of a loop: the producer loads `tile`, releases it on barrier 1, writes it itself,
#: loads `other` and waits on barrier 2; the consumer takes barrier 1, writes `tile`,
#: fences, answers on 2.
PRODUCER_ROUNDS = ("\tmov.u32 %r8, 0;\nROUND_P:\n" + TMA + "\tbar.arrive 1, 256;\n\tst.shared.b16 [%r1+64], %h0;\n"
                   + TMA.replace("[%r1]", "[%r2]")
                   + "\tbar.sync 2, 256;\n\tadd.u32 %r8, %r8, 1;\n\tsetp.lt.u32 %p1, %r8, 4;\n\t@%p1 bra ROUND_P;\n")
CONSUMER_ROUNDS = ("\tmov.u32 %r8, 0;\nROUND_C:\n\tbar.sync 1, 256;\n\tst.shared.b16 [%r1+128], %h0;\n"
                   "\tfence.proxy.async.shared::cta;\n\tbar.arrive 2, 256;\n\tadd.u32 %r8, %r8, 1;\n"
                   "\tsetp.lt.u32 %p1, %r8, 4;\n\t@%p1 bra ROUND_C;\n")


def test_a_thread_is_not_credited_its_own_access_made_again_in_a_loop():
    """The consumer's fence in round r orders the producer's write of round r - 1 (handed
    over at the producer's bar.arrive 1 of round r). The producer's write of round r goes
    out only with its load of `other` (its completion arrives on `full`) and at its
    bar.sync 2, on which the consumer merely arrives: no fence lies on any
    causality path from it to the producer's load of round r + 1 into the same bytes (PTX
    ISA, memory consistency model: proxy fences order along causality order), so the load
    needs a fence, although the answer on barrier 2 carries a credit for the same write."""
    text = kernel(PRODUCER_ROUNDS, CONSUMER_ROUNDS)
    assert needs(text) == [(line_of(text, "[%r1], [%rd9"), "raw", "shared::cta")]
    # the producer fencing its own write needs nothing more
    fenced = kernel(PRODUCER_ROUNDS.replace("\tst.shared.b16 [%r1+64], %h0;\n",
                                            "\tst.shared.b16 [%r1+64], %h0;\n\tfence.proxy.async.shared::cta;\n"),
                    CONSUMER_ROUNDS)
    assert needs(fenced) == []


def roles_in_sequence(role_a: str, role_b: str) -> str:
    """Thread 0 writes `tile`, the CTA meets at bar.sync 0, then threads 0-127 run
    `role_a` and the others `role_b`, written one after the other (``if (A) {...}
    if (!A) {...}``): the two branches on the same predicate meet between the roles."""
    return (f"{HEAD}.visible .entry k()\n{{\n{REGS}\tsetp.eq.u32 %p1, %r5, 0;\n"
            "\t@%p1 st.shared.b16 [%r1], %h0;\n\tbar.sync 0;\n\tsetp.lt.u32 %p5, %r5, 128;\n"
            f"\t@!%p5 bra END_A;\n{role_a}END_A:\n\t@%p5 bra END_B;\n{role_b}END_B:\n\tret;\n}}\n")


def test_a_fence_is_not_credited_to_code_no_fencing_thread_runs():
    """A fences after its arrive on barrier 1, the one barrier B waits on before its copy
    completes on `full`: B may issue the copy before A fences, so no fence lies on a
    causality path from thread 0's write to it (PTX ISA, memory consistency model: proxy
    fences order along causality order), and it needs one. Where A's branch rejoins, A's
    fence credits the write to the threads after the meet, B's too; but no thread that ran
    the fence runs B's code, and B's own arrive on barrier 1 carried that credit back to B.
    Found by the hand-off property test (seed 606)."""
    role_b = "\tbar.arrive 2, 256;\n\tbar.sync 1, 256;\n" + TMA
    text = roles_in_sequence("\tbar.arrive 1, 256;\n\tbar.sync 2, 256;\n\tfence.proxy.async.shared::cta;\n", role_b)
    assert needs(text) == [(line_of(text, "[%r1], [%rd9"), "raw", "shared::cta")]
    # A fencing before its arrive on barrier 1: B's wait hears the arrive after the fence
    assert needs(roles_in_sequence("\tfence.proxy.async.shared::cta;\n\tbar.arrive 1, 256;\n\tbar.sync 2, 256;\n",
                                   role_b)) == []


def test_a_fence_credits_nothing_that_reaches_it_only_from_another_roles_code():
    """A writes `tile`, arrives on barrier 1, waits on 2 and loads `tile` again with TMA;
    B fences, arrives on 2, waits on 1. B's fence comes before it hears of A's write, so
    no fence lies between A's write and A's copy (PTX ISA, memory consistency model): the
    copy needs one. In the graph A's code runs on into B's (the roles are written one
    after the other), so A's write, handed back to A's bar.sync by B's arrive, seemed
    imported before B's fence, which then credited it and A's bar.sync cleared it. A
    fence credits only what waits that its own threads may pass import
    (docs/fence.md §4.4). Found by the hand-off property test (seed 810)."""
    role_a = "\tst.shared.b16 [%r1], %h0;\n\tbar.arrive 1, 256;\n\tbar.sync 2, 256;\n" + TMA
    text = roles_in_sequence(role_a, "\tfence.proxy.async.shared::cta;\n\tbar.arrive 2, 256;\n\tbar.sync 1, 256;\n")
    assert needs(text) == [(line_of(text, "[%r1], [%rd9"), "raw", "shared::cta")]


def test_an_arrive_run_once_hands_over_nothing_its_thread_writes_after_it():
    """The producer arrives on `full` in its first trip alone (a do-once predicate) and
    writes `tile` in every trip after it; the consumer waits on `full` once. Every write
    follows the producer's one arrive, and the producer arrives on nothing the consumer
    waits on afterwards, so no causality path leads from a write to the consumer's wgmma
    and there is nothing for a fence to order (the kernel races on `tile` all the same).
    The graph's back edge brings the writes of later trips to the arrive, but no thread
    runs it then (docs/fence.md §4.5). Found by the hand-off property test (seeds 611, 614)."""
    producer = ("\tmov.pred %p4, 0;\n\tmov.u32 %r8, 0;\nROUND_A:\n\t@%p4 bra ONCE_A;\n"
                "\tmbarrier.arrive.shared::cta.b64 _, [%r3];\nONCE_A:\n\tst.shared.b16 [%r1], %h0;\n"
                "\tand.b32 %r9, %r8, 1;\nWA:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [%r4], %r9;\n"
                "\t@!%p6 bra WA;\n\tmov.pred %p4, -1;\n\tadd.u32 %r8, %r8, 1;\n\tsetp.lt.u32 %p1, %r8, 4;\n"
                "\t@%p1 bra ROUND_A;\n")
    consumer = ("\tmov.pred %p4, 0;\n\tmov.u32 %r8, 0;\nROUND_B:\n\t@%p4 bra ONCE_B;\n"
                + WAIT_FULL.format(n=1) + "ONCE_B:\n\tmbarrier.arrive.shared::cta.b64 _, [%r4];\n" + WG
                + "\tmov.pred %p4, -1;\n\tadd.u32 %r8, %r8, 1;\n\tsetp.lt.u32 %p1, %r8, 4;\n\t@%p1 bra ROUND_B;\n")
    assert needs(kernel(producer, consumer)) == []
    # the same with reads: the consumer reads `tile` and fences, or loads it again; the
    # producer's reads, after its one arrive, are not handed over, though the consumer's
    # reads of the same bytes (one fact with the producer's) are made by threads that
    # do not run the arrive
    reader = producer.replace("\tst.shared.b16 [%r1], %h0;\n", "\tld.shared.b16 %h1, [%r1];\n")
    reload = consumer.replace(WG, "\tsetp.eq.u32 %p3, %r8, 2;\n\t@%p3 bra LOAD;\n\tld.shared.b16 %h1, [%r1];\n"
                                  "\tfence.proxy.async.shared::cta;\n\tbra.uni LOADED;\nLOAD:\n" + TMA + "LOADED:\n")
    assert needs(kernel(reader, reload)) == []
    # the write before the one arrive is handed over: the wgmma needs a fence
    early = producer.replace("\tmov.u32 %r8, 0;\n", "\tmov.u32 %r8, 0;\n\tst.shared.b16 [%r1+64], %h0;\n", 1)
    text = kernel(early, consumer)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]


FOUR_ROLES_HEAD = (".version 8.0\n.target sm_90a\n.address_size 64\n.shared .align 1024 .b8 tile[8192];\n"
                   ".shared .align 8 .b64 bx;\n.shared .align 8 .b64 by;\n.shared .align 8 .b64 bz;\n"
                   ".shared .align 8 .b64 full;\n")


def four_roles(c: str, d: str, p: str, e: str) -> str:
    """Warps 0, 1, 2 and 3 and up run `c`, `d`, `p` and `e`; %r1 is `tile`, %r3 `full`,
    %r10-%r12 the mbarriers bx, by, bz, %rd2 a wgmma descriptor of `tile`."""
    return (f"{FOUR_ROLES_HEAD}.visible .entry k()\n{{\n.reg .pred %p<8>;\n.reg .b16 %h<2>;\n.reg .b32 %r<16>;\n"
            ".reg .b64 %rd<16>;\n.reg .f32 %f<8>;\n\tmov.u32 %r1, tile;\n\tmov.u32 %r3, full;\n\tmov.u32 %r10, bx;\n"
            "\tmov.u32 %r11, by;\n\tmov.u32 %r12, bz;\n\tmov.u32 %r5, %tid.x;\n\tshr.u32 %r6, %r1, 4;\n"
            "\tcvt.u64.u32 %rd1, %r6;\n\tor.b64 %rd2, %rd1, 68720001024;\n\tshr.u32 %r7, %r5, 5;\n"
            f"\tsetp.ne.u32 %p1, %r7, 0;\n\t@%p1 bra NOT_C;\n{c}\tbra.uni DONE;\nNOT_C:\n"
            f"\tsetp.ne.u32 %p3, %r7, 1;\n\t@%p3 bra NOT_D;\n{d}\tbra.uni DONE;\nNOT_D:\n"
            f"\tsetp.ne.u32 %p5, %r7, 2;\n\t@%p5 bra NOT_P;\n{p}\tbra.uni DONE;\nNOT_P:\n{e}DONE:\n\tret;\n}}\n")


def test_an_arrive_run_once_hands_on_what_a_wait_before_it_imports_late():
    """C writes `tile` and hands it to D (bz) and to P (by); D hands it on to P (bx). P's
    loop waits on bx, arrives once on `full`, waits on by; E waits on `full` and reads
    `tile` with wgmma. C's write reaches E through D, P's first wait and its one arrive
    (PTX ISA, memory consistency model: causality order through the mbarriers): the wgmma
    needs a fence. P's wait on bx imports the write a round of the fixpoint after the
    write reached P's arrive over the loop's back edge (from the wait on by); the arrive
    must hand it on when that import comes, though the states reaching it do not change."""
    c = "\tst.shared.b16 [%r1], %h0;\n\tmbarrier.arrive.shared::cta.b64 _, [%r12];\n\tmbarrier.arrive.shared::cta.b64 _, [%r11];\n"
    d = "WZ:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [%r12], 0;\n\t@!%p6 bra WZ;\n\tmbarrier.arrive.shared::cta.b64 _, [%r10];\n"
    p = ("\tmov.pred %p4, 0;\n\tmov.u32 %r8, 0;\nROUND:\n\tand.b32 %r9, %r8, 1;\n"
         "WX:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [%r10], %r9;\n\t@!%p6 bra WX;\n"
         "\t@%p4 bra ONCE;\n\tmbarrier.arrive.shared::cta.b64 _, [%r3];\nONCE:\n"
         "WY:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [%r11], %r9;\n\t@!%p6 bra WY;\n"
         "\tmov.pred %p4, -1;\n\tadd.u32 %r8, %r8, 1;\n\tsetp.lt.u32 %p2, %r8, 4;\n\t@%p2 bra ROUND;\n")
    e = "WF:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p6, [%r3], 0;\n\t@!%p6 bra WF;\n" + WG
    text = four_roles(c, d, p, e)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cta")]


def test_across_ctas_only_the_issuers_fence_counts():
    producer = "\tst.shared.b16 [%r1+64], %h0;\n\tfence.proxy.async.shared::cta;\n\tbarrier.cluster.arrive;\n"
    multicast = TMA.replace("complete_tx::bytes", "complete_tx::bytes.multicast::cluster").replace(
        "[%r3];", "[%r3], %h1;")
    text = kernel(producer, "\tbarrier.cluster.wait;\n" + multicast)
    assert needs(text) == [(line_of(text, "multicast"), "raw", "shared::cta+shared::cluster")]
    # a copy into this CTA only: the writer's fence orders the write for its own CTA
    assert needs(kernel(producer, "\tbarrier.cluster.wait;\n" + TMA)) == []
    assert needs(kernel(producer, "\tbarrier.cluster.wait;\n\tfence.proxy.async.shared::cluster;\n" + multicast)) == []


def test_a_cta_copy_after_the_cluster_barrier_is_fenced_for_the_cta_only():
    """The CTA's own store, handed to the issuer through the cluster barrier, meets a copy
    into this CTA alone: ``.shared::cta`` orders it; a multicast copy also overwrites the
    peer's bytes, which the peer's threads stored, and needs the cluster window
    (docs/fence.md §5.3)."""
    producer = "\tst.shared.b16 [%r1+64], %h0;\n\tbarrier.cluster.arrive;\n"
    text = kernel(producer, "\tbarrier.cluster.wait;\n" + TMA)
    assert needs(text) == [(line_of(text, "cp.async.bulk"), "raw", "shared::cta")]
    multicast = TMA.replace("complete_tx::bytes", "complete_tx::bytes.multicast::cluster").replace(
        "[%r3];", "[%r3], %h1;")
    text = kernel(producer, "\tbarrier.cluster.wait;\n" + multicast)
    assert needs(text) == [(line_of(text, "multicast"), "raw", "shared::cta+shared::cluster")]


#: the inits of a barrier that a multicast copy completes on, also in the peer CTA
CLUSTER_INIT = "\tmbarrier.init.shared::cta.b64 [%r3], 1;\n"
MULTICAST = TMA.replace("complete_tx::bytes", "complete_tx::bytes.multicast::cluster").replace("[%r3];", "[%r3], %h1;")


@pytest.mark.parametrize("publish, needed", [
    ("\tbarrier.cluster.arrive.relaxed;\n", ["mbarrier-init-cluster"]),
    ("\tfence.proxy.async.shared::cta;\n\tbarrier.cluster.arrive.relaxed;\n", ["mbarrier-init-cluster"]),
    ("\tfence.proxy.async.shared::cta;\n\tbarrier.cluster.arrive;\n", []),
    ("\tfence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed;\n", []),
    ("\tbarrier.cluster.arrive;\n", []),
])
def test_an_init_other_ctas_use_is_released_at_cluster_scope(publish, needed):
    """docs/fence.md §4.7: a CTA-scope proxy fence alone does not publish an init that
    another CTA's multicast copy completes on; a releasing cluster barrier or
    ``fence.mbarrier_init.release.cluster`` does."""
    text = kernel(CLUSTER_INIT + publish, "\tbarrier.cluster.wait;\n" + MULTICAST)
    assert [hazard for _, hazard, _ in needs(text)] == needed


def test_an_init_no_other_cta_uses_needs_no_release():
    """A copy into this CTA alone, or a cluster of one CTA: the CTA-scope fence does."""
    publish = "\tfence.proxy.async.shared::cta;\n\tbarrier.cluster.arrive.relaxed;\n"
    assert needs(kernel(CLUSTER_INIT + publish, "\tbarrier.cluster.wait;\n" + TMA)) == []
    alone = kernel(CLUSTER_INIT + publish, "\tbarrier.cluster.wait;\n" + MULTICAST)
    assert needs(alone.replace(".visible .entry k()\n", ".visible .entry k()\n.reqnctapercluster 1, 1, 1\n")) == []
    # an arrive through the cluster window makes the barrier one that other CTAs use
    remote = "\tmapa.shared::cluster.u32 %r8, %r3, 1;\n\tmbarrier.arrive.shared::cluster.b64 _, [%r8];\n"
    text = kernel(CLUSTER_INIT + publish, "\tbarrier.cluster.wait;\n" + TMA + remote)
    assert [hazard for _, hazard, _ in needs(text)] == ["mbarrier-init-cluster"]


def test_fence_mbarrier_init_releases_only_its_own_threads_inits():
    """PTX ISA, ``fence.mbarrier_init``: it applies to the prior ``mbarrier.init`` of the
    thread that runs it, so the issuer's fence does not release the producer's init."""
    text = kernel(CLUSTER_INIT + "\tbar.arrive 1, 256;\n",
                  "\tbar.sync 1, 256;\n\tfence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed;\n"
                  "\tbarrier.cluster.wait;\n" + MULTICAST)
    assert [hazard for _, hazard, _ in needs(text)] == ["mbarrier-init-cluster"]


def test_a_remote_write_is_pending_in_the_cta_it_lands_in():
    producer = ("\tmapa.shared::cluster.u32 %r7, %r1, 1;\n\tmapa.shared::cluster.u32 %r8, %r3, 1;\n"
                "\tst.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r7], %r9, [%r8];\n")
    text = kernel(producer, WAIT_FULL.format(n=1) + WG)
    assert needs(text) == [(line_of(text, "wgmma"), "raw", "shared::cluster")]


# -- one thread -------------------------------------------------------------------------------


def test_guarded_fences_and_guarded_ops():
    store = "\tst.shared.b16 [%r1], %h0;\n"
    guarded = "\t@%p1 " + WG[1:]
    assert needs(kernel(store + "\t@%p1 fence.proxy.async.shared::cta;\n" + WG, "")) != []
    assert needs(kernel(store + "\t@%p1 fence.proxy.async.shared::cta;\n" + guarded, "")) == []
    assert needs(kernel(store + "\t@%p1 fence.proxy.async.shared::cta;\n\tsetp.eq.u32 %p1, %r5, 0;\n" + guarded,
                        "")) != []  # the guard changed in between
    # one fence under the op's guard covers the next op under the same guard
    assert len(needs(kernel(store + guarded + guarded, ""))) == 1


def test_extern_policies():
    extra = ".extern .func ext\n(\n)\n;\n"
    text = kernel("\tcall.uni ext, ();\n" + WG, "", extra)
    assert needs(text, extern_policy="none") == [] and needs(text)[0][1] == "raw"
    strict = needs(kernel("\tst.shared.b16 [%r1], %h0;\n\tcall.uni ext, ();\n", "", extra), extern_policy="strict")
    assert [hazard for _, hazard, _ in strict] == ["raw"]


def test_calls_are_followed_inside_the_callee():
    extra = (".func writes(.param .b32 p)\n{\n.reg .b32 %r<3>;\n.reg .b16 %h<2>;\n\tld.param.b32 %r1, [p];\n"
             "\tst.shared.b16 [%r1], %h1;\n\tret;\n}\n")
    call = "\t{\n\t.param .b32 param0;\n\tst.param.b32 [param0], REG;\n\tcall.uni writes, (param0);\n\t}\n"
    assert needs(kernel(call.replace("REG", "%r1") + WG, "", extra)) != []
    assert needs(kernel(call.replace("REG", "%r2") + WG, "", extra)) == []  # the callee writes the other buffer


def test_lint_and_unknown_opcodes():
    module = ptxkit.parse(kernel("\tcp.async.ca.shared.global [%r1], [%rd1], 4;\n" + WG, ""))
    (result,) = analyse_module(module, FenceOptions())
    assert "in flight" in result.warnings[0].text
    waited = kernel("\tcp.async.ca.shared.global [%r1], [%rd1], 4;\n\tcp.async.wait_group 0;\n" + WG, "")
    assert next(analyse_module(ptxkit.parse(waited), FenceOptions())).warnings == []
    unknown = ptxkit.parse(kernel("\tst.shared.b16 [%r1], %h0;\n\twgmma.future_op.sync %r1;\n", ""))
    (result,) = analyse_module(unknown, FenceOptions())
    assert "unknown async-looking opcode 'wgmma.future_op.sync'" in result.warnings[0].text
    assert [s.text for s in result.sites] == ["fence.proxy.async.shared::cta;"]


def test_witness_follows_the_back_edge():
    body = ("\tmov.u32 %r9, 0;\nL:\n" + WG + "\tst.shared.b16 [%r1], %h0;\n\tadd.u32 %r9, %r9, 1;\n"
            "\tsetp.lt.u32 %p1, %r9, 4;\n\t@%p1 bra L;\n")
    assert witness(kernel(body, "")) == ["generic-proxy write: st.shared.b16",
                                         "op: wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"]


def test_state_text():
    text = kernel("\tst.shared.b16 [%r1], %h0;\n\tld.shared.b16 %h1, [%r2];\n\tbar.arrive 1, 256;\n", WG)
    analysis = KernelAnalysis(ptxkit.parse(text).function("k"), AnalysisOptions())
    solution = analysis.solve()
    last = max(analysis.flow.rpo)
    assert analysis.state_text(0) == "nothing pending"
    assert "1 write made here (shared::cta)" in analysis.state_text(solution.outs[analysis.flow.start + 1])
    assert Hazard.RAW.value == "raw" and analysis.state_text(solution.ins[last]) != ""


def test_witness_of_an_access_handed_on_twice_names_the_access():
    """Warpgroup 0 writes and arrives on barrier 1; warpgroup 1 waits there and arrives
    on barrier 2; warpgroup 2 waits on barrier 2 and runs the wgmma. The witness shows
    the write and both hand-offs, in order (it showed only the last: a reader saw one
    thread arrive and wait at the same bar.sync, FlashInfer's paged prefill)."""
    head, _, rest = kernel("", "").partition("\tsetp.lt.u32")
    body = ("\tshr.u32 %r6, %r5, 7;\n\tsetp.eq.u32 %p1, %r6, 0;\n\t@%p1 bra WRITER;\n\tsetp.eq.u32 %p2, %r6, 1;\n"
            "\t@%p2 bra RELAY;\n\tbar.sync 2, 256;\n" + WG + "\tbra.uni DONE;\n"
            "WRITER:\n\tst.shared.b16 [%r1+64], %h0;\n\tbar.arrive 1, 256;\n\tbra.uni DONE;\n"
            "RELAY:\n\tbar.sync 1, 256;\n\tbar.arrive 2, 256;\nDONE:\n\tret;\n}\n")
    text = head + body
    assert witness(text) == ["generic-proxy write: st.shared.b16", "arrive: bar.arrive", "wait: bar.sync",
                             "arrive: bar.arrive", "wait: bar.sync",
                             "op: wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16"]
    site, = fence_text(text, "k.ptx", rewrite=False)[1].missing
    (pair,) = site.pairs
    assert pair.access.line == line_of(text, "st.shared.b16")
    first, second = (line_of(text, "bar.arrive 1"), line_of(text, "bar.sync 1")), \
        (line_of(text, "bar.arrive 2"), line_of(text, "bar.sync 2"))
    assert [place.line for place in pair.handoff] == [*first, *second]
    assert pair.path_text().startswith(f"line {pair.access.line} (st.shared.b16) -> line {first[0]}")
    assert pair.path_text().count(" => ") == 2
    assert f"through line {first[0]} (bar.arrive) and line {first[1]} (bar.sync), then line {second[0]}" \
        in site.message()
    assert "thread B waits at line" in site.explain() and "thread C waits at line" in site.explain()


@pytest.mark.parametrize("fenced_first", [True, False])
def test_witness_of_an_access_handed_on_twice_names_an_unfenced_one(fenced_first):
    """Warpgroups 0 and 3 write the same bytes and arrive on barrier 1, warpgroup 0 after
    a proxy fence; warpgroup 1 relays to warpgroup 2's wgmma through barrier 2. The
    witness names warpgroup 3's write, the one no fence orders, whichever comes first."""
    head, _, _ = kernel("", "").partition("\tsetp.lt.u32")
    fenced = "FENCED:\n\tst.shared.b16 [%r1+64], %h0;\n\tfence.proxy.async.shared::cta;\n\tbar.arrive 1, 384;\n" \
             "\tbra.uni DONE;\n"
    unfenced = "UNFENCED:\n\tst.shared.b16 [%r1+64], %h1;\n\tbar.arrive 1, 384;\n\tbra.uni DONE;\n"
    body = ("\tshr.u32 %r6, %r5, 7;\n\tsetp.eq.u32 %p1, %r6, 0;\n\t@%p1 bra FENCED;\n\tsetp.eq.u32 %p2, %r6, 1;\n"
            "\t@%p2 bra RELAY;\n\tsetp.eq.u32 %p3, %r6, 3;\n\t@%p3 bra UNFENCED;\n\tbar.sync 2, 256;\n" + WG +
            "\tbra.uni DONE;\n" + (fenced + unfenced if fenced_first else unfenced + fenced) +
            "RELAY:\n\tbar.sync 1, 384;\n\tbar.arrive 2, 256;\nDONE:\n\tret;\n}\n")
    text = head + body
    site, = fence_text(text, "k.ptx", rewrite=False)[1].missing
    assert site.pairs[0].access.line == line_of(text, "%h1;")


# -- the fixpoint's transfer steps ----------------------------------------------------------


def _stepped(solution: Solution, block: int, state: int) -> int:
    for event in solution.events[block]:
        state = solution._step(event, state)
    return state


def _applied(solution: Solution, block: int, state: int) -> int:
    for event, adds in solution._transfer_steps()[block]:
        state = solution._step(event, state) if event is not None else state | adds
    return state


def test_the_transfer_steps_give_each_block_what_its_events_give_one_by_one():
    """`_fixpoint` applies each block's events as `_transfer_steps` groups them (runs of
    accesses and async ops as the bits they add): from every state of the solution, the
    same state as `_step` on each event; without fences the async op joins a run, with
    the fence planned before it (a kill) it is stepped alone, so the steps are made again
    for each fixpoint and never shared between two."""
    text = kernel("\tst.shared.b16 [%r1+64], %h0;\n\tst.shared.b16 [%r1+96], %h0;\n" + WG
                  + "\tst.shared.b16 [%r1+128], %h0;\n\tbar.arrive 1, 256;\n", "\tbar.sync 1, 256;\n" + WG)
    solution = KernelAnalysis(ptxkit.parse(text, "k.ptx").function("k"), AnalysisOptions()).solve()
    assert solution.needy  # the wgmma after the stores gets a fence: a kill before it
    with_fences = solution._transfer_steps()
    stepped_alone = {id(event) for steps in with_fences for event, _ in steps if event is not None}
    assert set(solution.needy) <= stepped_alone
    for block, state in enumerate(solution.ins):
        assert _applied(solution, block, state) == _stepped(solution, block, state)
    unsolved = Solution(solution.analysis, (), None)  # no kills yet: as the first fixpoint makes the steps
    without = unsolved._transfer_steps()
    assert without != with_fences
    assert not set(solution.needy) & {id(event) for steps in without for event, _ in steps if event is not None}
    for block, state in enumerate(solution.ins):
        assert _applied(unsolved, block, state) == _stepped(unsolved, block, state)
