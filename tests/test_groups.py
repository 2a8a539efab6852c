"""Which cp.async writes may still be in flight at an async op, by commit group and ring
stage (`ptxkit.cfg.sync.groups`, docs/fence.md §3.7)."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.sync import groups
from ptxkit.cfg.sync.events import EventOptions, Kind, classify
from ptxkit.cfg.sync.groups import overlapping_in_flight

from conftest import SAMPLES

RING = (SAMPLES / "fence" / "x24a_cp_async_ring_waits_for_the_stage_it_reads.ptx").read_text()

#: One thread copies 16 bytes into stage 0 ([0, 16)) and stage 1 ([4096, 4112)) of a
#: 1024-aligned array; the wgmma reads [0, 2048) through its descriptor (m64n8k16, no
#: swizzle): only the stage-0 copy can meet it.
STRAIGHT = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 a, .param .u32 n)
{
	.reg .pred %p<4>;
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	.shared .align 1024 .b8 s[8192];
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
            for block, event in overlapping_in_flight(flow, events, ops)]


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
