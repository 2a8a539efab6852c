"""Which cp.async writes may still be in flight at an async op, by commit group and ring
stage (`ptxkit.cfg.sync.groups`, docs/fence.md §3.7)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.fence.fence import fence_text
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.sync import groups
from ptxkit.cfg.sync.events import EventOptions, Kind, classify
from ptxkit.cfg.sync.groups import overlapping_in_flight

from conftest import SAMPLES

RING = (SAMPLES / "fence" / "x24a_cp_async_ring_waits_for_the_stage_it_reads.ptx").read_text()

#: The kernels of these tests: `k(a, n)`, a global pointer and a count.
HEAD = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 a, .param .u32 n)
{
	.reg .pred %p<8>;
	.reg .b32 %r<32>;
	.reg .b64 %rd<8>;
	.reg .f32 %f<8>;
"""

#: One thread copies 16 bytes into stage 0 ([0, 16)) and stage 1 ([4096, 4112)) of a
#: 1024-aligned array; the wgmma reads [0, 2048) through its descriptor (m64n8k16, no
#: swizzle): only the stage-0 copy can meet it.
STRAIGHT = HEAD + """	.shared .align 1024 .b8 s[8192];
	ld.param.u64 %rd1, [a];
	ld.param.u32 %r4, [n];
	setp.ne.u32 %p1, %r4, 0;
	mov.u32 %r1, s;
	cp.async.ca.shared.global [%r1], [%rd1], 16;
	FIRST
	cp.async.ca.shared.global [%r1+4096], [%rd1], 16;
	cp.async.commit_group;
	WAIT
	shr.u32 %r2, %r1, 4;
	cvt.u64.u32 %rd2, %r2;
	or.b64 %rd3, %rd2, 68720001024;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r2,%r3}, %rd3, %rd3, 1, 1, 1, 0, 0;
	ret;
}
"""


def in_flight_lines(text: str) -> list[int]:
    """The lines (from 1) of the wgmma ops that a copy still in flight may meet."""
    flow = inlined_graph(ptxkit.parse(text).function("k"))
    events = classify(flow, EventOptions())
    ops = [(block, event) for block, found in enumerate(events.by_block) for event in found
           if event.kind is Kind.ASYNC]
    assert ops
    return [flow.blocks[block].instructions[event.position].line
            for block, event, _ in overlapping_in_flight(flow, events, ops)]


def straight(first: str, wait: str) -> str:
    return STRAIGHT.replace("FIRST", first).replace("WAIT", wait)


WGMMA_LINE = next(i + 1 for i, line in enumerate(STRAIGHT.splitlines()) if "wgmma" in line)


@pytest.mark.parametrize(("first", "wait", "met"), [
    # wait_group N completes every group but the newest N (PTX ISA, "cp.async.wait_group")
    ("cp.async.commit_group;", "cp.async.wait_group 1;", False),
    ("cp.async.commit_group;", "cp.async.wait_group 2;", True),
    ("cp.async.commit_group;", "cp.async.wait_group 0;", False),
    # a copy not yet committed is in no group: wait_group 0 does not wait for it, wait_all does
    ("", "cp.async.wait_group 0;", False),  # the one commit takes both copies
    ("", "cp.async.wait_group 1;", True),
    ("", "cp.async.wait_all;", False),
    # a commit that may not run leaves the first copy in either group
    ("@%p1 cp.async.commit_group;", "cp.async.wait_group 1;", True),
    ("@%p1 cp.async.commit_group;", "cp.async.wait_group 0;", False),
    # a wait that may not run waits for nothing
    ("cp.async.commit_group;", "@%p1 cp.async.wait_group 0;", True),
])
def test_commit_groups(first, wait, met):
    assert in_flight_lines(straight(first, wait)) == ([WGMMA_LINE] if met else [])


def test_a_copy_never_committed_is_in_no_group():
    """wait_group 0 waits for the committed groups only; wait_all commits first."""
    text = straight("", "cp.async.wait_group 0;").replace("\tcp.async.commit_group;\n", "")
    assert "commit_group" not in text
    assert in_flight_lines(text) == [WGMMA_LINE - 1]
    assert in_flight_lines(text.replace("cp.async.wait_group 0;", "cp.async.wait_all;")) == []


RING_WGMMA = next(i + 1 for i, line in enumerate(RING.splitlines()) if "wgmma.mma_async" in line)


def test_a_ring_stage_is_told_from_the_stage_in_flight():
    """x24a: the wgmma of trip i reads stage i mod 3 while trip i - 1's stage (i + 1) mod 3 is in flight."""
    assert in_flight_lines(RING) == []
    # wait_group 2 leaves the stage read in flight too (x24b)
    assert in_flight_lines(RING.replace("cp.async.wait_group \t1;", "cp.async.wait_group \t2;")) == [RING_WGMMA]


def test_a_ring_that_refills_the_stage_it_reads_next():
    """p starting at 0: trip i refills stage (i + 1) mod 3, which trip i + 1 reads while
    that group is the newest one, still in flight after wait_group 1."""
    text = RING.replace("mov.u32 \t%r11, 1;", "mov.u32 \t%r11, 0;")
    assert text != RING
    assert in_flight_lines(text) == [RING_WGMMA]


def test_a_ring_index_advanced_under_an_unknown_guard_takes_both_ways():
    """@%p3 on the producer's advance: p may stay, and a trip may then refill the stage the
    next one reads."""
    text = RING.replace("selp.b32 \t%r11, 0, %r17, %p2;", "@%p3 selp.b32 \t%r11, 0, %r17, %p2;")
    assert text != RING
    assert in_flight_lines(text) == [RING_WGMMA]


@pytest.mark.pure  # patches a method the compiled module calls directly
def test_the_search_gives_up_on_a_counter_without_bound(monkeypatch):
    """A stage taken as `i & 1` from a trip count i that never wraps: more numbers than
    `_STATES` at the loop head, so the search gives up and the op keeps its report."""
    text = RING.replace("selp.b32 \t%r10, 0, %r12, %p1;", "mov.b32 \t%r10, %r12;").replace(
        "shl.b32 \t%r13, %r10, 12;", "and.b32 \t%r21, %r10, 1;\n\tshl.b32 \t%r13, %r21, 12;")
    wgmma = RING_WGMMA + 1
    assert in_flight_lines(text) == [wgmma]
    searched = []
    original = groups._Rings.search

    def search(self):
        found = original(self)
        searched.append(found)
        return found

    monkeypatch.setattr(groups._Rings, "search", search)
    assert in_flight_lines(text) == [wgmma] and searched == [None]
    assert in_flight_lines(RING) == [] and searched[-1] is not None


@pytest.mark.pure  # patches a constant the compiled module reads directly
def test_the_search_gives_up_past_its_budget_of_steps(monkeypatch):
    """x24a's ring runs some 400 instructions in the search; with a budget of 100 the
    search stops, and the op keeps its report."""
    assert in_flight_lines(RING) == []
    monkeypatch.setattr(groups, "_STEPS", 100)
    assert in_flight_lines(RING) == [RING_WGMMA]


# -- a property: random rings against a run of the ring itself ------------------------------

RING_HEAD = HEAD + """	.shared .align 1024 .b8 smem[STAGE_BYTES];
	ld.param.u64 %rd1, [a];
	ld.param.u32 %r9, [n];
	mov.u32 %r1, smem;
	mov.u32 %r2, %tid.x;
	and.b32 %r3, %r2, 127;
	shl.b32 %r4, %r3, 4;
	add.s32 %r5, %r1, %r4;
"""
#: The wgmma of a trip reads stage c: [c * 4096, c * 4096 + 2048) through its descriptor
#: (m64n8k16, no swizzle), the first half of the stage.
READ_STAGE = """	add.s32 %r12, %r10, 1;
	setp.gt.s32 %p1, %r12, LAST;
	selp.b32 %r10, 0, %r12, %p1;
	WAIT
	bar.sync 0;
	fence.proxy.async.shared::cta;
	shl.b32 %r13, %r10, 12;
	add.s32 %r14, %r1, %r13;
	shr.u32 %r15, %r14, 4;
	and.b32 %r16, %r15, 16383;
	cvt.u64.u32 %rd2, %r16;
	or.b64 %rd3, %rd2, 68720001024;
	wgmma.fence.sync.aligned;
	wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd3, %rd3, %p3, 1, 1, 0, 0;
	wgmma.commit_group.sync.aligned;
	wgmma.wait_group.sync.aligned 0;
	bar.sync 0;
"""
#: The trip refills stage p: its first half, then its second, each thread 16 bytes of each.
REFILL_STAGE = """	add.s32 %r17, %r11, 1;
	setp.gt.s32 %p2, %r17, LAST;
	selp.b32 %r11, 0, %r17, %p2;
	shl.b32 %r18, %r11, 12;
	add.s32 %r19, %r5, %r18;
	cp.async.cg.shared.global [%r19], [%rd1], 16;
	SPLIT
	cp.async.cg.shared.global [%r19+2048], [%rd1], 16;
	cp.async.commit_group;
"""


def ring_program(stages: int, prologue: int, split: bool, newest: int, read: int, refill: int,
                 refill_first: bool) -> str:
    """A kernel that fills stages 0 .. `prologue` - 1 of a ring of `stages`, then loops:
    c and p advance round the ring from `read` and `refill`; each trip waits with
    ``wait_group newest`` and reads stage c, and refills stage p (first, with
    `refill_first`); `split` commits each half of a stage as a group of its own."""
    commit = "cp.async.commit_group;"
    lines = [RING_HEAD.replace("STAGE_BYTES", str(4096 * stages))]
    for stage in range(prologue):
        lines.append(f"\tcp.async.cg.shared.global [%r5+{4096 * stage}], [%rd1], 16;\n")
        lines.append(f"\t{commit}\n" if split else "")
        lines.append(f"\tcp.async.cg.shared.global [%r5+{4096 * stage + 2048}], [%rd1], 16;\n\t{commit}\n")
    lines.append(f"\tsetp.ne.u32 %p3, %r9, 0;\n\tmov.u32 %r10, {read};\n\tmov.u32 %r11, {refill};\n"
                 "\tmov.u32 %r20, 0;\nLOOP:\n")
    body = [READ_STAGE.replace("WAIT", f"cp.async.wait_group {newest};"),
            REFILL_STAGE.replace("SPLIT", commit if split else "")]
    lines += reversed(body) if refill_first else body
    lines.append("\tadd.s32 %r20, %r20, 1;\n\tsetp.lt.u32 %p4, %r20, %r9;\n\t@%p4 bra LOOP;\n"
                 "\tcp.async.wait_group 0;\n\tret;\n}\n")
    return "".join(lines).replace("LAST", str(stages - 1))


def ring_reads_a_copy_in_flight(stages: int, prologue: int, split: bool, newest: int, read: int, refill: int,
                                refill_first: bool) -> bool:
    """Run the ring itself (not ptxkit): may some trip's wgmma read the first half of its
    stage while a copy into it is still in flight? Each group is a list of the
    (stage, half) it writes; ``wait_group N`` completes all groups but the newest N
    (PTX ISA, "cp.async.wait_group"). The state repeats after `stages` trips, and a trip
    sees only the last few groups, so 3 * stages + 4 trips show every way."""
    groups: list[list[tuple[int, int]]] = []

    def fill(stage: int) -> None:
        if split:
            groups.extend([[(stage, 0)], [(stage, 1)]])
        else:
            groups.append([(stage, 0), (stage, 1)])

    for stage in range(prologue):
        fill(stage)
    c, p = read, refill
    for _ in range(3 * stages + 4):
        steps = ["refill", "read"] if refill_first else ["read", "refill"]
        for step in steps:
            if step == "refill":
                p = 0 if p + 1 > stages - 1 else p + 1
                fill(p)
            else:
                c = 0 if c + 1 > stages - 1 else c + 1
                del groups[:max(len(groups) - newest, 0)]
                if any((c, 0) in group for group in groups):
                    return True
    return False


@settings(max_examples=80, deadline=None)
@given(st.integers(2, 4).flatmap(lambda stages: st.tuples(
    st.just(stages), st.integers(0, stages - 1), st.booleans(), st.integers(0, 3),
    st.integers(-1, stages - 1), st.integers(-1, stages - 1), st.booleans())))
def test_random_rings_are_warned_about_exactly_when_a_run_reads_a_copy_in_flight(ring):
    """Sound (every ring whose run reads a stage in flight is warned about) and, on these
    rings of 1024-aligned stages read by one K step, exact."""
    text = ring_program(*ring)
    warned = [w.line for w in fence_text(text, "ring.ptx", rewrite=False)[1].warnings if "in flight" in w.text]
    wgmma = next(i + 1 for i, line in enumerate(text.splitlines()) if "wgmma.mma_async" in line)
    assert warned == ([wgmma] if ring_reads_a_copy_in_flight(*ring) else []), text
