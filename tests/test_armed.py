"""ptxkit.cfg.sync.armed: what an expect_tx arrive before the fence need not hand over."""

from __future__ import annotations

import pytest

import ptxkit

from ptxkit.cfg.fence.fence import fence_text

#: Triton's prologue (docs/fence.md §4.6): two stage barriers initialised, a generic store
#: into the second stage's bytes, the first barrier armed with 4 KB, one fence, ``bar.sync
#: 0``, the first stage's copy; a thread that waits on the first stage then issues the copy
#: of the second stage, over the stored bytes. The store reaches that thread only through
#: the first stage's phase, which no thread passes before the copy issued after the
#: ``bar.sync``: no fence needed. (The inits need none: the copies reach their barriers
#: through the generic proxy, PTX ISA, ``cp.async.bulk.tensor``.)
PROLOGUE = (".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 1024 .b8 s[];\n"
            ".visible .entry k(.param .u64 k_map, .param .u32 k_n)\n{{\n.reg .b32 %r<8>;\n.reg .b64 %rd<2>;\n"
            ".reg .pred %p<4>;\n\tmov.u32 %r1, s;\n\tld.param.u64 %rd1, [k_map];\n\tld.param.u32 %r3, [k_n];\n"
            "\tmov.u32 %r2, %tid.x;\n\tsetp.eq.u32 %p2, %r2, 0;\n"
            "\t@%p2 mbarrier.init.shared.b64 [%r1+8192], 1;\n\t@%p2 mbarrier.init.shared.b64 [%r1+8200], 1;\n"
            "\t@%p2 st.shared.u32 [%r1+4096], %r3;\n{before}\t@%p2 mbarrier.arrive.expect_tx.shared.b64 _, [%r1+8192], {bytes};\n{fence}\t{sync};\n"
            "{copy}\tmbarrier.try_wait.parity.shared.b64 %p1, [%r1+8192], 0;\n"
            "\t@%p2 cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
            " [%r1+4096], [%rd1, {{%r2}}], [%r1+8200];\n\tret;\n}}\n")
FIRST_COPY = ("\t@%p2 cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
              " [%r1], [%rd1, {%r2}], [%r1+8192];\n")
FENCE = "\tfence.proxy.async.shared::cta;\n"


def program(before="", bytes="4096", fence=FENCE, sync="bar.sync 0", copy=FIRST_COPY) -> str:
    return PROLOGUE.format(before=before, bytes=bytes, fence=fence, sync=sync, copy=copy)


def fences(text: str) -> list[int]:
    return [fence.line for fence in fence_text(text, "k.ptx", placement="inline")[1].fences]


def test_a_store_fenced_before_the_sync_every_copy_waits_behind_needs_nothing():
    assert fences(program()) == []


@pytest.mark.parametrize("change", [
    # an arrive with no bytes to wait for completes its phase alone, before the fence
    dict(bytes="0"),
    # a plain arrive: the same
    dict(before="\t@%p2 mbarrier.arrive.shared.b64 _, [%r1+8192];\n", bytes="0"),
    # the first copy is issued before the fence: its complete_tx may end the phase first
    dict(before=FIRST_COPY, copy=""),
    # a bar.sync of 128 threads: the threads that made the inits need not be among them
    dict(sync="bar.sync 0, 128"),
    # a way round the fence: a thread that skips it reaches the bar.sync with its store unfenced
    dict(fence="\t@%p3 bra SKIP;\n" + FENCE + "SKIP:\n"),
])
def test_the_waiter_still_gets_the_store_where_a_copy_may_come_first(change):
    """Each variant lets some thread pass the first stage's phase with the store not
    fenced on any path to it, so the second copy needs the fence."""
    text = program(**change)
    second = next(number for number, line in enumerate(text.splitlines(), 1) if "[%r1+4096], [%rd1" in line)
    assert second in fences(text)


@pytest.mark.ptxas
def test_the_programs_assemble():
    from ptxkit.ptxas import assemble

    for text in (program(), fence_text(program(bytes="0"), "k.ptx", placement="inline")[0]):
        assemble(text, "sm_90a", options=("-c",), filename="k.ptx", cache=False)


def test_a_cp_async_write_fenced_without_its_wait_is_still_handed_over():
    """A fence does not wait for a ``cp.async`` write to land: the write made before the
    armed arrive may still be in flight when the copy of the second stage reads it."""
    cp_async = ("\tcp.async.ca.shared.global [%r1+4096], [%rd1], 4;\n"
                "\tcp.async.mbarrier.arrive.noinc.shared.b64 [%r1+8200];\n")
    text = program(before=cp_async)
    second = next(number for number, line in enumerate(text.splitlines(), 1) if "[%r1+4096], [%rd1, {%r2}]" in line)
    assert second in fences(text)


#: After the second copy every thread passes ``bar.sync 0``, thread 0 stores into the
#: second stage again and fences, and every thread passes ``bar.sync 0`` once more.
AGAIN = ("\tbar.sync 0;\n\t@%p2 st.shared.u32 [%r1+4096], %r3;\n" + FENCE + "\tbar.sync 0;\n\tret;\n")


def test_a_store_made_again_after_the_arrive_is_not_pending_there():
    """The second store to the same bytes comes after the armed arrive on every path and
    no hand-off leads back: only the first can be pending there, and it is fenced before
    the ``bar.sync`` every copy comes after (docs/fence.md §4.6)."""
    assert fences(program().replace("\tret;\n", AGAIN)) == []


def test_a_store_that_comes_round_to_the_arrive_still_counts():
    """In a loop, the store made again after the copies reaches the armed arrive of the
    next round, and on the way out of the loop no fence and no ``bar.sync`` follow it:
    the arrive hands it over, and the second copy needs the fence."""
    looped = program().replace("\t@%p2 mbarrier.arrive.expect_tx", "AGAIN:\n\t@%p2 mbarrier.arrive.expect_tx").replace(
        "\tret;\n", "\t@%p2 st.shared.u32 [%r1+4096], %r3;\n\tsetp.ne.u32 %p3, %r3, 0;\n"
                   "\t@%p3 bra AGAIN;\n\tret;\n")
    second = next(number for number, line in enumerate(looped.splitlines(), 1) if "[%r1+4096], [%rd1" in line)
    assert second in fences(looped)


def _walked(flow, events, fences, bit, origin, barrier) -> bool:
    """Every path from `origin` reaches a fence ordering `bit` and then `barrier`, by a
    walk of every path (the reference for the walks `_Fencing` skips)."""
    work, seen = [(origin[0], origin[1].position + 1, False)], set()
    while work:
        block, position, fenced = work.pop()
        for event in events[block]:
            if event.position >= position:
                if event is barrier[1]:
                    if not fenced:
                        return False
                    break
                fenced = fenced or bool(fences.get(id(event), 0) & bit)
        else:
            if not flow.succ[block]:
                return False
            for successor in flow.succ[block]:
                if (successor, fenced) not in seen:
                    seen.add((successor, fenced))
                    work.append((successor, 0, fenced))
    return True


#: The barrier before, after and around the stores; one where the thread never ends.
WALKED = [
    program(),
    program().replace("\tret;\n", AGAIN),
    program().replace("\tret;\n", "SPIN:\n\t@%p2 st.shared.u32 [%r1+4096], %r3;\n\tbra SPIN;\n"),
    program().replace("\t@%p2 mbarrier.init.shared.b64 [%r1+8192]", "TOP:\n\t@%p2 mbarrier.init.shared.b64 [%r1+8192]")
             .replace("\tret;\n", "\t@%p2 st.shared.u32 [%r1+4096], %r3;\n\t@%p3 bra TOP;\n\tret;\n"),
]


def test_a_fenced_walk_is_skipped_only_where_the_barrier_cannot_be_met():
    """`_Fencing` answers without walking where no path from the access meets the
    barrier (then: whether no path ends); every (access, barrier) pair gets the answer
    that walking every path gives."""
    from ptxkit.cfg.fence.proxy import AnalysisOptions, KernelAnalysis
    from ptxkit.cfg.sync.armed import _Fencing
    from ptxkit.cfg.sync.events import Kind

    seen = set()
    for text in WALKED:
        analysis = KernelAnalysis(ptxkit.parse(text, "k.ptx").function("k"), AnalysisOptions())
        flow, events = analysis.flow, analysis.events
        fences = {id(event): -1 for found in events for event in found if event.kind is Kind.FENCE}
        fencing = _Fencing(flow, events, analysis.facts, fences)
        barriers = [(block, event) for block, found in enumerate(events) for event in found
                    if event.kind is Kind.ARRIVE_WAIT]
        origins = [origin for fact in analysis.facts for origin in fact.origins]
        for origin in origins:
            for barrier in barriers:
                answer = fencing._fenced_on_every_path(1, origin, barrier)
                assert answer == _walked(flow, events, fences, 1, origin, barrier), (text, origin, barrier)
                seen.add((answer, fencing._may_meet(origin, barrier)))
    assert seen == {(True, True), (False, True), (True, False), (False, False)}
