"""ptxkit.cfg.values.lanes: a table kept one entry per lane and read back with
``shfl.sync.idx`` (docs/fence.md §3.1), as DeepGEMM's sm100 GEMMs keep a descriptor per
pipeline stage. The kernel: lanes 0-3 each hold the wgmma descriptor start field of one
4 KB stage of `tiles` (lane j: ``tiles + 4096 j``, in 16-byte units), the other lanes 0;
every thread first zeroes its 16 bytes of `out`; a loop reads the descriptor of stage
``s`` from lane ``s``, ``s`` going round ``0..3``, and the wgmma reads that stage."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.fence.fence import fence_text
from ptxkit.cfg.flow.graph import flow_graph
from ptxkit.cfg.values.registers import register_values
from ptxkit.cfg.values.values import show

KERNEL = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u32 n)
.reqntid 128, 1, 1
{{
.reg .pred %p<5>;
.reg .b32 %r<32>;
.reg .b64 %rd<4>;
.reg .f32 %f<5>;
.shared .align 1024 .b8 tiles[16384];
.shared .align 16 .b8 out[2048];
\tmov.u32 %r1, {lane};
\tmov.u32 %r2, tiles;
\tshr.u32 %r3, %r2, 4;
\tand.b32 %r4, %r3, 16383;
\tsetp.lt.u32 %p1, %r1, 4;
\tshl.b32 %r5, %r1, 8;
\tadd.s32 %r6, %r5, %r4;
\tselp.b32 %r7, %r6, {other}, %p1;
\tmov.u32 %r8, out;
\tmov.u32 %r9, %tid.x;
\tshl.b32 %r10, %r9, 4;
\tadd.s32 %r11, %r8, %r10;
\tmov.u32 %r18, 0;
\tst.shared.v4.u32 [%r11], {{%r18, %r18, %r18, %r18}};
\tbar.sync 0;
\tld.param.u32 %r12, [n];
\tsetp.ne.u32 %p4, %r12, 0;
\tmov.b32 %r16, 1073758272;
\tmov.u32 %r13, 0;
\tmov.u32 %r14, 0;
LOOP:
{index}\tshfl.sync.idx.b32 %r15, %r7, %r20, 31, -1;
\tmov.b64 %rd1, {{%r15, %r16}};
\twgmma.fence.sync.aligned;
\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{%f1, %f2, %f3, %f4}}, %rd1, %rd1, %p4, 1, 1, 0, 0;
\twgmma.commit_group.sync.aligned;
\twgmma.wait_group.sync.aligned 0;
\tsetp.eq.u32 %p2, %r13, 3;
\tadd.s32 %r17, %r13, 1;
\tselp.b32 %r13, 0, %r17, %p2;
\tadd.s32 %r14, %r14, 1;
\tsetp.lt.u32 %p3, %r14, %r12;
\t@%p3 bra LOOP;
\tret;
}}
"""

#: the stage index itself, ``s`` (0..3)
STAGE = "\tmov.u32 %r20, %r13;\n"
#: ``s + (counter & 4)``: lanes 0..7, half of them past the table
PAST = "\tand.b32 %r19, %r14, 4;\n\tadd.s32 %r20, %r13, %r19;\n"
#: the loop's count, a parameter: any lane, or none
ANY = "\tmov.u32 %r20, %r12;\n"


def kernel(index: str = STAGE, lane: str = "%laneid", other: str = "0") -> str:
    return KERNEL.format(index=index, lane=lane, other=other)


def shuffled(text: str) -> tuple[str, str]:
    """The values of the shuffle's result and of the table register, as the wgmma's
    descriptor is built from them."""
    flow = flow_graph(ptxkit.parse(text, "k.ptx").function("k"))
    block, position = next((b.index, i) for b in flow.blocks for i, instruction in enumerate(b.instructions)
                           if instruction.text.startswith("mov.b64"))
    built = flow.blocks[block].instructions[position].operands[1].elements
    table = ptxkit.parse_statement("mov.u32 %x, %r7;").operands[1]
    values = register_values(flow, {"d": (block, position, built[0]), "t": (block, position, table)})
    return show(values["d"]), show(values["t"])


def test_a_stage_index_reads_the_entries_of_the_stages_it_names():
    """Lanes 0-3 hold ``tiles + 4096 j``; the index goes round 0..3, so the shuffle gives
    the four stages and not the other lanes' 0. The table register itself, over every
    lane, is each lane's ``x`` (the selp does not bound it by the lane test) or 0."""
    assert shuffled(kernel()) == ("tiles+[0, 12288] step 4096 (shared::cta window) >> 4",
                                  "0 or tiles+[0, 126976] step 4096 (shared::cta window) >> 4")


def test_an_index_past_the_table_also_reads_the_other_lanes_value():
    """Index ``s + (c & 4)`` names lanes 0..7: 4..7 hold the selp's other value, 0."""
    assert shuffled(kernel(PAST))[0] == "0 or tiles+[0, 12288] step 4096 (shared::cta window) >> 4"


@pytest.mark.parametrize("index, lane", [(ANY, "%laneid"), (STAGE, "%tid.x")], ids=["any lane", "not the lane"])
def test_without_a_bounded_index_or_a_lane_test_every_lanes_entry_is_read(index, lane):
    """An index the analysis cannot keep inside the warp, or a table indexed by
    ``%tid.x`` rather than the lane: the shuffle gives what the table register holds."""
    result, table = shuffled(kernel(index, lane))
    assert result == table


@pytest.mark.ptxas
def test_no_fence_where_the_table_names_only_the_stages():
    """The zeroed `out` and the stages of `tiles` share no byte: nothing to fence. With
    the other lanes' 0 taken for the shuffle's value, the wgmma's descriptor was a
    start field of 0, which the analysis cannot place, and the stores of `out` seemed to
    reach it (the report DeepGEMM's sm100 bf16 GEMM had, twice)."""
    from ptxkit.ptxas import assemble

    text = kernel()
    fenced, report = fence_text(text, "k.ptx")
    assert not report.missing and fenced == text
    assemble(text, arch="sm_90a")


def test_the_other_lanes_value_still_counts_where_the_index_reaches_it():
    """The other lanes hold `out`'s start field: an index that reaches them makes the
    wgmma read `out`, which every thread has just stored: one fence."""
    text = kernel(PAST, other="%r21").replace("\tsetp.lt.u32 %p1", "\tmov.u32 %r23, out;\n\tshr.u32 %r22, %r23, 4;\n"
                                               "\tand.b32 %r21, %r22, 16383;\n\tsetp.lt.u32 %p1")
    assert [site.hazard for site in fence_text(text, "k.ptx", rewrite=False)[1].missing] == ["raw"]
    assert [site.hazard for site in fence_text(text.replace(PAST, STAGE), "k.ptx", rewrite=False)[1].missing] == []
