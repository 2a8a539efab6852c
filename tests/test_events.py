"""ptxkit.cfg.sync.events: what each instruction does, with the bytes it touches."""

from __future__ import annotations

import numpy as np
import pytest

import ptxkit
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.sync.events import EventOptions, Kind, classify, describe
from ptxkit.cfg.sync.locations import CTA, GLOBAL, SHARED, Location
from ptxkit.isa import SyncObject

from conftest import SAMPLES

HEAD = (".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 1024 .b8 dyn[];\n"
        ".shared .align 8 .b64 bar;\n")
REGS = ".reg .pred %p<8>;\n.reg .b16 %h<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<16>;\n.reg .f32 %f<8>;\n"


def events(body: str, params: str = ".param .u64 k_p", **options) -> list[tuple[str, str]]:
    text = f"{HEAD}.visible .entry k({params})\n{{\n{REGS}\tmov.u32 %r1, dyn;\n\tmov.u32 %r2, bar;\n{body}\tret;\n}}\n"
    flow = inlined_graph(ptxkit.parse(text).function("k"))
    found = classify(flow, EventOptions(**options))
    return [(e.kind.value, describe(e)) for block in found.by_block for e in block]


def test_generic_accesses_and_their_widths():
    body = ("\tst.shared.v4.b32 [%r1+32], {%r3, %r3, %r3, %r3};\n\tld.shared.b16 %h1, [%r1+8];\n"
            "\tstmatrix.sync.aligned.x4.m8n8.shared.b16 [%r1+256], {%r3, %r3, %r3, %r3};\n"
            "\tatom.shared.add.u32 %r4, [%r1+4], 1;\n\tst.local.u32 [%rd1], %r3;\n\tld.param.u64 %rd2, [k_p];\n"
            "\tst.global.u32 [%rd2], %r3;\n")
    assert events(body) == [("write", "dynamic shared[32:48]"), ("read", "dynamic shared[8:10]"),
                            ("write", "dynamic shared[256:272]"), ("write", "dynamic shared[4:8]")]
    assert events(body, tracked=SHARED | GLOBAL)[-1] == ("write", "global")


def test_generic_addressing():
    body = ("\tmov.u64 %rd1, dyn;\n\tcvta.shared.u64 %rd2, %rd1;\n\tst.u32 [%rd2+16], %r3;\n"
            "\tld.param.u64 %rd3, [k_p];\n\tld.global.u64 %rd4, [%rd3];\n\tst.u32 [%rd4], %r3;\n"
            "\tst.u32 [dyn+4], %r3;\n")
    # a pointer loaded from memory cannot be shared here: nothing stores a shared address
    assert events(body) == [("write", "dynamic shared[16:20]"), ("write", "dynamic shared[4:8]")]


def test_a_shared_access_through_a_generic_address_of_our_own_bytes():
    # TensorRT-LLM's block-scale GEMM stores its scales with st.shared through cvta.shared
    # pointers: the low bits of such an address are its window address's (docs/fence.md §8)
    body = ("\tmov.u64 %rd1, dyn;\n\tcvta.shared.u64 %rd2, %rd1;\n\tst.shared.f32 [%rd2+86144], %f1;\n"
            "\tld.param.u64 %rd3, [k_p];\n\tst.shared.f32 [%rd3], %f1;\n")
    assert events(body) == [("write", "dynamic shared[86144:86148]"), ("write", "shared::cta")]


def test_async_footprints():
    body = ("\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 4096;\n"
            "\tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1+8192],"
            " [%rd9, {%r0, %r0}], [%r2];\n"
            "\tcp.async.bulk.global.shared::cta.bulk_group [%rd9], [%r1+1024], 512;\n"
            "\tcp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd9, {%r0}], [%r1+2048];\n"
            "\tcp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd9, {%r0}], [%r1+12288];\n")
    found = events(body)
    assert found[0] == ("arrive", "mbarrier bar[0:8]")
    assert found[1] == ("async", "writes dynamic shared[8192:12288]")  # the box: the armed 4096 bytes
    assert found[2] == ("arrive", "mbarrier bar[0:8]")  # its completion hands the issuer's accesses over
    assert found[3] == ("async", "dynamic shared[1024:1536]")
    # a store's box is not known: it ends where the next TMA destination starts, or with the region
    assert found[4] == ("async", "dynamic shared[2048:8192]")
    assert found[5] == ("async", "dynamic shared[12288:232448]")


def test_two_loads_of_one_tensor_map_share_the_armed_bytes():
    tma = ("\tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1+OFF],"
           " [%rd9, {%r0, %r0}], [%r2];\n")
    body = ("\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 32768;\n" + tma.replace("OFF", "0")
            + "\tadd.s32 %r5, %r1, 1;\n" + tma.replace("OFF", "16384"))
    writes = [d for k, d in events(body) if k == "async"]
    assert writes == ["writes dynamic shared[0:16384]", "writes dynamic shared[16384:32768]"]


def test_a_box_in_a_ring_ends_with_its_stage():
    """Two loads into a ring of 16384-byte stages, A at each stage's start and B 8192
    bytes in, on one mbarrier armed with 32768 bytes: each box is at most a stage (16384
    bytes, docs/fence.md §3.3), and B's also ends with the stage it starts in, at the
    ring's end (4 * 16384), not 16384 bytes past its last start."""
    tma = ("\tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%rOUT],"
           " [%rd9, {%r0, %r0}], [%r2];\n")
    body = ("\tmov.u32 %r5, %tid.y;\n\tand.b32 %r6, %r5, 3;\n\tshl.b32 %r7, %r6, 14;\n\tadd.s32 %r8, %r1, %r7;\n"
            "\tadd.s32 %r9, %r8, 8192;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 32768;\n"
            + tma.replace("OUT", "8") + tma.replace("OUT", "9"))
    writes = [d for k, d in events(body) if k == "async"]
    assert writes == ["writes dynamic shared[0:65536]", "writes dynamic shared[8192:65536]"]
    # a ring of its own (no load at the stages' starts): B's box may run a whole stage on
    alone = body.replace(tma.replace("OUT", "8"), "")
    assert [d for k, d in events(alone) if k == "async"] == ["writes dynamic shared[8192:73728]"]
    # two rings of one step that do not interleave keep their own stages: B's last box
    # is not cut at A's stage grid (131072), but ends a stage after its own last start
    apart = body.replace("\tadd.s32 %r9, %r8, 8192;\n", "\tadd.s32 %r9, %r8, 66560;\n")
    assert [d for k, d in events(apart) if k == "async"] == [
        "writes dynamic shared[0:65536]", "writes dynamic shared[66560:132096]"]


LOW = ".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 16 .b8 low[];\n"
#: the dynamic base rounded up to 1024: ``(p + 1023) & -1024``
ROUND = "\tmov.u32 %r1, low;\n\tadd.s32 %r3, %r1, 1023;\n\tand.b32 %r4, %r3, -1024;\n"


def low_events(body: str) -> list[tuple[str, str]]:
    text = f"{LOW}.visible .entry k()\n{{\n{REGS}{ROUND}{body}\tret;\n}}\n"
    found = classify(inlined_graph(ptxkit.parse(text).function("k")), EventOptions())
    return [(e.kind.value, describe(e)) for block in found.by_block for e in block]


def test_a_rounded_up_start_is_one_object_with_its_own():
    # offsets from the rounded start alone stay exact
    assert low_events("\tst.shared.u32 [%r4+4096], %r9;\n\tst.shared.u32 [%r4+8], %r9;\n") == [
        ("write", "dynamic shared aligned 1024[4096:4100]"), ("write", "dynamic shared aligned 1024[8:12]")]
    # with an access from the object's own start, every location is one of the object's
    assert low_events("\tst.shared.u32 [%r4+4096], %r9;\n\tst.shared.u32 [%r1+8], %r9;\n") == [
        ("write", "dynamic shared[4096:5108]"), ("write", "dynamic shared[8:12]")]


#: A wgmma operand 32 bytes into a 1024-byte repeat at ``low + 8192`` (128-byte swizzle, SBO
#: 1024, base offset 0), then a load there swizzled by an XOR of 16-byte chunks.
SWIZZLED_READS = ("\tadd.s32 %r6, %r1, 8224;\n\tshr.u32 %r7, %r6, 4;\n\tcvt.u64.u32 %rd7, %r7;\n"
                  "\tor.b64 %rd8, %rd7, 4611686293305294848;\n"
                  "\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, {%r8, %r9, %r10, %r11},"
                  " %rd8, %p1, 1, 1, 0;\n"
                  "\tmov.u32 %r12, %tid.x;\n\tand.b32 %r13, %r12, 112;\n\tadd.s32 %r14, %r1, 8192;\n"
                  "\txor.b32 %r15, %r14, %r13;\n\tld.shared.f32 %f5, [%r15];\n\tret;\n}\n")
#: What the wgmma operand and the load touch where ``low`` is taken to be aligned: their rows.
IN_THEIR_ROWS = ["dynamic shared[8192:9216]", "dynamic shared[8192:8308]"]
#: And where it is not: up to a row before them.
WIDENED = ["dynamic shared[8097:9248]", "dynamic shared[8080:8308]"]


def last_two_events(source: str) -> list[str]:
    found = classify(inlined_graph(ptxkit.parse(source).function("k")), EventOptions())
    return [describe(e) for block in found.by_block for e in block][-2:]


def test_tensor_copies_show_the_alignment_of_their_region():
    """A tensor copy's shared-memory box is 128-byte aligned, so a 16-byte aligned
    base addressed at multiples of 128 is 128-byte aligned: a swizzled wgmma operand
    starting 32 bytes into an atom then stays inside its atoms. A copy at another offset
    shows nothing, and the descriptor's own showing (below) is not taken against it."""
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 16 .b8 low[];\n"
            ".shared .align 8 .b64 bar;\n.visible .entry k()\n{\n" + REGS +
            "\tmov.u32 %r1, low;\n\tmov.u32 %r2, bar;\n"
            "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r2], 8192;\n"
            "\tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1+8192],"
            " [%rd9, {%r0, %r0}], [%r2];\n" + SWIZZLED_READS)
    assert last_two_events(text) == IN_THEIR_ROWS
    assert last_two_events(text.replace("[%r1+8192]", "[%r1+8208]")) == WIDENED


def test_swizzled_operands_show_the_alignment_of_their_region():
    """A wgmma descriptor with the 128-byte swizzle and base offset 0, 32 bytes into a
    1024-byte repeat of a 16-byte aligned base, shows the base 1024-byte aligned (the
    hardware swizzles by the address's bits 7-9, docs/fence.md §3.3): the operand and a
    swizzled load stay in their rows. With base offset 1, or with the descriptor 160 bytes
    into a repeat (past its first row), the base shows nothing and both widen."""
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.extern .shared .align 16 .b8 low[];\n"
            ".visible .entry k()\n{\n" + REGS + "\tmov.u32 %r1, low;\n" + SWIZZLED_READS)
    assert last_two_events(text) == IN_THEIR_ROWS
    assert last_two_events(text.replace("4611686293305294848", str(4611686293305294848 | 1 << 49))) == WIDENED
    assert last_two_events(text.replace("8224;", "8352;")) == ["dynamic shared[8225:9376]", WIDENED[1]]


def test_hand_offs():
    body = ("\tbar.sync 3, 128;\n\tbar.arrive %r9, 128;\n\tbarrier.cluster.arrive.relaxed;\n"
            "\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], 0;\n"
            "\tcp.async.mbarrier.arrive.noinc.shared.b64 [%r2];\n")
    assert events(body) == [("arrive+wait", "named barrier 3"), ("arrive", "named barrier any"),
                            ("arrive", "cluster barrier"), ("wait", "mbarrier bar[0:8]"),
                            ("arrive", "mbarrier bar[0:8]")]
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}\tmov.u32 %r2, bar;\n\tmapa.shared::cluster.u32 %r3, %r2, 1;\n" \
           f"\tmbarrier.arrive.shared::cluster.b64 _, [%r3];\n\tret;\n}}\n"
    (arrive,) = [e for b in classify(inlined_graph(ptxkit.parse(text).function("k")), EventOptions()).by_block
                 for e in b]
    assert arrive.cross and arrive.sync[0] is SyncObject.MBARRIER  # a remote mbarrier: across CTAs
    commits = text.replace("\tmbarrier.arrive.shared::cluster.b64 _, [%r3];\n",
                           "\ttcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r2];\n"
                           "\ttcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64"
                           " [%r2], 3;\n")
    own, multicast = [e for b in classify(inlined_graph(ptxkit.parse(commits).function("k")), EventOptions()).by_block
                      for e in b if e.sync is not None]
    assert not own.cross and multicast.cross  # a multicast commit arrives in every CTA of its mask


def test_wgmma_reads_only_its_descriptors():
    descriptor = ("\tshr.u32 %r5, %r1, 4;\n\tcvt.u64.u32 %rd5, %r5;\n\tor.b64 %rd6, %rd5, 68720001024;\n"
                  "\tadd.s32 %r6, %r1, 4096;\n\tshr.u32 %r7, %r6, 4;\n\tcvt.u64.u32 %rd7, %r7;\n"
                  "\tor.b64 %rd8, %rd7, 68720001024;\n")
    ss = "\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd6, %rd8, %p1, 1, 1, 0, 0;\n"
    rs = ("\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, {%r8, %r9, %r10, %r11}, %rd8,"
          " %p1, 1, 1, 0;\n")
    assert events(descriptor + ss) == [("async", "dynamic shared[0:2048], dynamic shared[4096:4352]")]
    assert events(descriptor + rs) == [("async", "dynamic shared[4096:4352]")]  # A comes from registers
    # Triton's later k-steps add the fields and the step in one constant: the same bytes, moved
    added = ("\tshr.u32 %r5, %r1, 4;\n\tcvt.u64.u32 %rd5, %r5;\n\tadd.s64 %rd6, %rd5, 68720001026;\n"
             "\tadd.s64 %rd8, %rd5, 68720001280;\n")
    assert events(added + ss) == [("async", "dynamic shared[32:2080], dynamic shared[4096:4352]")]


def test_unknown_and_dead_code():
    text = f"{HEAD}.visible .entry k()\n{{\n{REGS}\twgmma.future_op.sync %r1;\n\tret;\n}}\n"
    found = classify(inlined_graph(ptxkit.parse(text).function("k")), EventOptions())
    assert found.by_block[0][0].kind is Kind.ASYNC and "unknown async-looking opcode" in found.warnings[0][1]
    body = ("\tmov.u32 %r3, %tid.x;\n\tsetp.lt.u32 %p1, %r3, 2048;\n\t@%p1 bra L;\n\tshl.b32 %r4, %r3, 2;\n"
            "\tadd.s32 %r5, %r1, %r4;\n\tst.shared.u32 [%r5], %r3;\nL:\n")
    assert events(body) == []  # %tid.x < 2048 always: the store never runs
    assert events(body.replace("2048", "512")) == [("write", "dynamic shared[2048:4096]")]


def test_an_access_is_asked_thread_by_thread_whether_it_touches_a_location():
    # o = (tid << 1) & 16 and s = (tid & 8) == 0 ? 16 : -16: o + s is 0 or 16, never -16
    select = ("\tmov.u32 %r5, %tid.x;\n\tshl.b32 %r6, %r5, 1;\n\tand.b32 %r7, %r6, 16;\n\tand.b32 %r8, %r5, 8;\n"
              "\tsetp.eq.s32 %p1, %r8, 0;\n\tselp.b32 %r9, {};\n\tadd.s32 %r10, %r1, %r7;\n"
              "\tadd.s32 %r11, %r10, %r9;\n\tld.shared.u16 %h1, [%r11+4096];\n")
    found = []
    for arms in ("16, -16, %p1", "-16, 16, %p1"):
        text = (f"{HEAD}.visible .entry k() .maxntid 256, 1, 1\n{{\n{REGS}\tmov.u32 %r1, dyn;\n"
                f"{select.format(arms)}\tret;\n}}\n")
        classified = classify(inlined_graph(ptxkit.parse(text).function("k")), EventOptions())
        read = next(e for e in classified.by_block[0] if e.kind is Kind.READ)
        tile = Location(CTA, read.locations[0].region, 0, 4096)
        found.append((describe(read), classified.touches(0, read, (tile,))))
    # both reads join to bytes 4080..4129 (o + s in [-16, 32]); only the second select lets a thread below 4096
    assert found == [("dynamic shared[4080:4130]", False), ("dynamic shared[4080:4130]", True)]


def test_only_the_threads_that_run_a_block_are_asked_whether_its_access_touches_a_location():
    """Warpgroup 0 (its test a division, which no branch narrowing inverts) writes 16 bytes
    a thread at tid * 16: bytes 0..2047. The address of every thread of the CTA would run
    to 4096, and threads 128-255 would write the tile at 2048, but they never run the
    block (docs/fence.md §3.6, §4.4's thread sets)."""
    text = (f"{HEAD}.visible .entry k() .maxntid 256, 1, 1\n{{\n{REGS}\tmov.u32 %r1, dyn;\n"
            "\tmov.u32 %r5, %tid.x;\n\tdiv.u32 %r6, %r5, GROUP;\n\tsetp.ne.u32 %p1, %r6, 0;\n\t@%p1 bra DONE;\n"
            "\tshl.b32 %r7, %r5, 4;\n\tadd.s32 %r8, %r1, %r7;\n\tst.shared.v4.u32 [%r8], {%r1, %r1, %r1, %r1};\n"
            "DONE:\n\tret;\n}\n")
    found = []
    for group in ("128", "192"):  # warpgroup 0, then the first 192 threads: those reach the tile
        flow = inlined_graph(ptxkit.parse(text.replace("GROUP", group)).function("k"))
        classified = classify(flow, EventOptions())
        block, write = next((b, e) for b, events in enumerate(classified.by_block) for e in events
                            if e.kind is Kind.WRITE)
        tile = Location(CTA, write.locations[0].region, 2048, 4096)
        found.append((describe(write), classified.touches(block, write, (tile,))))
    assert found == [("dynamic shared[0:4096]", False), ("dynamic shared[0:4096]", True)]


def test_tcgen05_mma_takes_its_shape_from_a_constant_instruction_descriptor():
    # descriptors with SBO 256 bytes and LBO 128 (no swizzle): an operand of R rows and
    # K = 32 bytes (kind::f16, K = 16) spans (R / 8 - 1) * 256 + 256 bytes; idesc: N >> 3 in
    # bits 17-22, M >> 4 in bits 24-28
    descriptor = ("\tshr.u32 %r5, %r1, 4;\n\tcvt.u64.u32 %rd5, %r5;\n\tor.b64 %rd6, %rd5, 68720001024;\n"
                  "\tadd.s32 %r6, %r1, 65536;\n\tshr.u32 %r7, %r6, 4;\n\tcvt.u64.u32 %rd7, %r7;\n"
                  "\tor.b64 %rd8, %rd7, 68720001024;\n")
    mma = "\ttcgen05.mma.cta_group::1.kind::f16 [%r3], %rd6, %rd8, {}, %p1;\n"
    unknown = events(descriptor + mma.format("%r9"))
    m128_n64 = events(descriptor + f"\tmov.b32 %r10, {(8 << 24) | (8 << 17)};\n" + mma.format("%r10"))
    # not known: A's 128 rows (one CTA's tensor memory lanes), B's 256
    assert unknown == [("async", "dynamic shared[0:4096], dynamic shared[65536:73728]")]
    assert m128_n64 == [("async", "dynamic shared[0:4096], dynamic shared[65536:67584]")]
    # a pair of CTAs holds half of A's rows and half of B's columns in each: M = 256, N = 64
    # is 128 rows of A and 32 of B; not known, 128 of each
    pair = mma.replace("cta_group::1", "cta_group::2")
    assert events(descriptor + f"\tmov.b32 %r10, {(16 << 24) | (8 << 17)};\n" + pair.format("%r10")) == \
        [("async", "dynamic shared[0:4096], dynamic shared[65536:66560]")]
    assert events(descriptor + pair.format("%r9")) == [("async", "dynamic shared[0:4096], dynamic shared[65536:69632]")]
    # with LBO 4096 an MN-major operand reaches further than a K-major one: not known, both are taken
    # (K-major: 15 * 256 + 4096 + 128 bytes; MN-major: 15 * 4096 + 256 + 128)
    wide = events(descriptor.replace("68720001024", str((16 << 32) | (256 << 16))) + mma.format("%r9"))
    assert wide[0][1].startswith("dynamic shared[0:8064], dynamic shared[0:61824]")
    # a sparse MMA reads twice the K
    sparse = events(descriptor + "\ttcgen05.mma.sp.cta_group::1.kind::f16 [%r3], %rd6, %rd8, [%r4], %r9, %p1;\n")
    assert sparse == [("async", "dynamic shared[0:4352], dynamic shared[65536:73984]")]


def test_a_descriptor_packed_from_its_halves_names_the_bytes_its_fields_say():
    """B's descriptor made as CUTLASS's 2-SM attention backward makes it (example 77): the
    start field in the low word, the high word a negative immediate (bit 63, the top bit of
    the swizzle mode; PTX ISA, the matrix descriptor of tcgen05), packed with ``mov.b64 %rd,
    {%lo, %hi}``, names the bytes the same word or-ed together names. A part taken for a
    number outside its register made the operand read all shared memory (384 false reports
    on that build: its LSE tile, written by ``cp.async``, seemed read by every MMA)."""
    start = "\tadd.s32 %r6, %r1, 65536;\n\tshr.u32 %r7, %r6, 4;\n"
    mma = (f"\tmov.b32 %r10, {(8 << 24) | (8 << 17)};\n"  # M = 128, N = 64; A from tensor memory
           "\ttcgen05.mma.cta_group::1.kind::f16 [%r3], [%r4], %rd8, %r10, %p1;\n")
    packed = events(start + "\tmov.b32 %r8, -2147467232;\n\tmov.b64 %rd8, {%r7, %r8};\n" + mma)
    ored = events(start + f"\tcvt.u64.u32 %rd7, %r7;\n\tor.b64 %rd8, %rd7, {0x8000402000000000 - (1 << 64)};\n" + mma)
    assert packed == ored and packed[0][1].startswith("dynamic shared[65536:")


def test_tcgen05_cp_reads_the_rows_and_bits_its_shape_names():
    # the source descriptor: SBO 256 bytes, LBO 128, no swizzle; R rows of B bytes span
    # (R / 8 - 1) * 256 + (B / 16 - 1) * 128 + 128 bytes
    descriptor = "\tshr.u32 %r5, %r1, 4;\n\tcvt.u64.u32 %rd5, %r5;\n\tor.b64 %rd6, %rd5, 68720001024;\n"
    copy = "\ttcgen05.cp.cta_group::1.{} [%r3], %rd6;\n"
    assert events(descriptor + copy.format("128x256b")) == [("async", "dynamic shared[0:4096]")]
    assert events(descriptor + copy.format("warpx4.32x128b")) == [("async", "dynamic shared[0:896]")]


def test_the_leader_ctas_barrier_of_a_cta_pair_is_a_known_mbarrier():
    # sm_100 clears the peer-CTA bit 24 (and keeps 8-byte alignment) to name the barrier
    # of the pair's leader: the same bytes of the same variable
    body = ("\tadd.s32 %r4, %r2, 0;\n\tand.b32 %r5, %r4, -16777224;\n"
            "\tmbarrier.arrive.shared::cta.b64 _, [%r5];\n")
    assert events(body) == [("arrive", "mbarrier bar[0:8]")]


def test_a_matrix_store_of_one_or_two_matrices_uses_the_addresses_of_lanes_0_to_15():
    # PTX ISA, stmatrix/ldmatrix: .x1 takes row addresses from lanes 0-7, .x2 from 0-15;
    # a row of 16 bytes at dyn + lane * 128 then ends within the first 16 rows
    rows = "\tmov.u32 %r5, %laneid;\n\tshl.b32 %r6, %r5, 7;\n\tadd.s32 %r7, %r1, %r6;\n"
    store = "\tstmatrix.sync.aligned.{}.m8n8.shared.b16 [%r7], {};\n"
    assert events(rows + store.format("x1", "{%r3}")) == [("write", "dynamic shared[0:912]")]
    assert events(rows + store.format("x2", "{%r3, %r3}")) == [("write", "dynamic shared[0:1936]")]
    assert events(rows + store.format("x4", "{%r3, %r3, %r3, %r3}")) == [("write", "dynamic shared[0:3984]")]
    load = "\tldmatrix.sync.aligned.m8n8.x2.shared.b16 {%r8, %r9}, [%r7];\n"
    assert events(rows + load) == [("read", "dynamic shared[0:1936]")]


def test_a_call_left_out_of_a_full_graph_does_nothing_when_its_function_touches_only_its_frame(monkeypatch):
    """Past `MAX_BLOCKS` calls stay calls; one of a function that only reads its
    parameters (``__cvta_generic_to_shared`` in a -G build) is no extern write."""
    import ptxkit.cfg.flow.inline as inline

    monkeypatch.setattr(inline, "MAX_BLOCKS", 0)
    functions = (".func (.param .b64 r) pure(.param .b64 p)\n{\n.reg .b64 %rd<3>;\n\tld.param.u64 %rd1, [p];\n"
                 "\tcvta.to.shared.u64 %rd2, %rd1;\n\tst.param.b64 [r], %rd2;\n\tret;\n}\n"
                 ".func writes(.param .b64 p)\n{\n.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n"
                 "\tst.u32 [%rd1], 0;\n\tret;\n}\n")
    body = ("\t{\n\t.param .b64 a;\n\t.param .b64 b;\n\tst.param.b64 [a], %rd1;\n"
            "\tcall.uni (b), pure, (a);\n\t}\n\t{\n\t.param .b64 c;\n\tst.param.b64 [c], %rd1;\n"
            "\tcall.uni writes, (c);\n\t}\n")
    text = (f"{HEAD}{functions}.visible .entry k()\n{{\n{REGS}{body}\tret;\n}}\n")
    flow = inlined_graph(ptxkit.parse(text).function("k"))
    found = [(e.kind, e.detail) for block in classify(flow, EventOptions()).by_block for e in block]
    assert found == [(Kind.EXTERN, ("writes", "clobber"))]


def test_a_barrier_id_that_follows_the_thread_index_is_taken_for_the_threads_that_run_it():
    """Each warpgroup syncs on its own barrier, ``4 + %tid.x / 128`` (ThunderKittens'
    ``group<4>::sync``): for all 384 threads the id is 4, 5 or 6, but only warpgroup 0
    runs the first ``bar.sync`` and only warpgroups 1 and 2 the second (docs/fence.md
    §4.1). An id that does not follow the thread index keeps its value."""
    body = ("\tmov.u32 %r3, %tid.x;\n\tshr.u32 %r4, %r3, 7;\n\tadd.u32 %r5, %r4, 4;\n"
            "\tsetp.ne.u32 %p1, %r4, 0;\n\t@%p1 bra OTHER;\n\tbar.sync %r5, 128;\n\tbra.uni END;\n"
            "OTHER:\n\tbar.sync %r5, 128;\nEND:\n\tbar.sync %r5, 128;\n")
    text = f"{HEAD}.visible .entry k(.param .u32 k_n) .maxntid 384, 1, 1\n{{\n{REGS}{body}\tret;\n}}\n"
    flow = inlined_graph(ptxkit.parse(text).function("k"))
    found = [describe(e) for block in classify(flow, EventOptions()).by_block for e in block]
    assert found == ["named barrier 4", "named barrier 5 or 6", "named barrier 4 or 5 or 6"]
    from_parameter = text.replace("\tadd.u32 %r5, %r4, 4;\n", "\tld.param.u32 %r6, [k_n];\n\tand.b32 %r5, %r6, 7;\n")
    found = [describe(e) for block in classify(inlined_graph(ptxkit.parse(from_parameter).function("k")),
                                               EventOptions()).by_block for e in block]
    assert found == ["named barrier 0 or 1 or 2 or 3 or 4 or 5 or 6 or 7"] * 3


#: Each thread stores tid + 7 with st.shared through the generic address of its word of
#: dyn, and after bar.sync reads the word with ld.shared through its window address.
GENERIC_SHARED_PROBE = """.version 8.0
.target sm_90a
.address_size 64
.extern .shared .align 16 .b8 dyn[];
.visible .entry probe(.param .u64 out)
{
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;
  ld.param.u64 %rd1, [out];
  cvta.to.global.u64 %rd1, %rd1;
  mov.u32 %r1, %tid.x;
  add.s32 %r2, %r1, 7;
  mov.u64 %rd2, dyn;
  cvta.shared.u64 %rd3, %rd2;
  mul.wide.u32 %rd4, %r1, 4;
  add.s64 %rd5, %rd3, %rd4;
  st.shared.u32 [%rd5+4096], %r2;
  bar.sync 0;
  mov.u32 %r3, dyn;
  shl.b32 %r4, %r1, 2;
  add.s32 %r5, %r3, %r4;
  ld.shared.u32 %r2, [%r5+4096];
  add.s64 %rd6, %rd1, %rd4;
  st.global.u32 [%rd6], %r2;
  ret;
}
"""


@pytest.mark.gpu
@pytest.mark.ptxas
def test_a_shared_access_through_a_generic_address_lands_on_its_window_bytes():
    """The assumption behind `test_a_shared_access_through_a_generic_address_of_our_own_bytes`
    (docs/fence.md §8), on this GPU: st.shared through a cvta.shared pointer writes the
    bytes its window address names."""
    from ptxkit import runtime

    kernel = runtime.load(ptxkit.assemble(GENERIC_SHARED_PROBE, arch="sm_90a", filename="probe.ptx")).kernel("probe")
    out = np.zeros(256, np.uint32)
    kernel.launch(runtime.Out(out), grid=1, block=256, shared_mem=8192)
    assert (out == np.arange(256) + 7).all()


@pytest.mark.parametrize("sample", ["h02_mbarrier_handoff_to_wgmma.ptx", "08_shared_barrier_ops.ptx",
                                    "06b_tma_store_after_shared_store.ptx"])
def test_the_opcodes_run_skips_are_those_that_make_no_event(sample):
    """`run` passes over the instructions of `_quiet_opcodes`, found once per graph: each
    is an opcode the per-instruction test found to make nothing (no proxy effect, no
    hand-off, none of `_OTHER_EVENTS`), every other opcode of the graph is classified,
    and no event sits on a skipped instruction; the set holds this graph's opcodes only."""
    from pathlib import Path

    from ptxkit.cfg.sync.events import _OTHER_EVENTS, _quiet_opcodes
    from ptxkit.isa import Effect, proxy_effect, sync_effect

    module = ptxkit.parse((Path(__file__).parent.parent / "samples" / "fence" / sample).read_text())
    for function in module.functions:
        if function.is_declaration:
            continue
        flow = inlined_graph(function)
        quiet = _quiet_opcodes(flow)
        opcodes = {head[1] for block in flow.blocks for head in block.heads}
        assert quiet <= opcodes
        for opcode in opcodes:
            makes_nothing = proxy_effect(opcode).kind is Effect.NONE and sync_effect(opcode) is None \
                and not opcode.startswith(_OTHER_EVENTS)
            assert (opcode in quiet) == makes_nothing
        found = classify(flow, EventOptions(SHARED)).by_block
        assert not any(flow.blocks[block].heads[event.position][1] in quiet
                       for block, events_here in enumerate(found) for event in events_here)


def test_an_access_relocated_for_the_numbers_a_join_held():
    """`relocate`: the stage a ring's wgmma reads and its copies write for the numbers the
    ring indices held on entry to the loop head, inside the locations for every trip
    (docs/fence.md §3.7; samples/fence/x24a)."""
    text = (SAMPLES / "fence" / "x24a_cp_async_ring_waits_for_the_stage_it_reads.ptx").read_text()
    flow = inlined_graph(ptxkit.parse(text).function("k"))
    found = classify(flow, EventOptions())
    head = next(b for b, events in enumerate(found.by_block) if any(e.kind is Kind.ASYNC for e in events))
    wgmma = next(e for e in found.by_block[head] if e.kind is Kind.ASYNC)
    copy = next(e for e in found.by_block[head] if e.kind is Kind.CP_ASYNC)
    assert [str(loc) for loc in wgmma.locations] == ["smem[0:10240]", "smem[0:8448]"]  # A (m64), B (n8)
    assert found.joins_feeding(head, wgmma) == {("%r10", head)}
    assert found.joins_feeding(head, copy) == {("%r11", head)}
    # c = 2 on entry: this trip reads stage 0; p = 2: it refills stage 0 (p advances to 0)
    assert [str(loc) for loc in found.relocate(head, wgmma, {("%r10", head): 2})] == ["smem[0:2048]", "smem[0:256]"]
    assert [str(loc) for loc in found.relocate(head, wgmma, {("%r10", head): 0})] == \
        ["smem[4096:6144]", "smem[4096:4352]"]
    assert [str(loc) for loc in found.relocate(head, copy, {("%r11", head): 2})] == ["smem[0:2048]"]
    assert found.relocate(head, wgmma, {}) is None and found.relocate(head, wgmma, {("%r11", head): 2}) is None
    assert [str(loc) for loc in wgmma.locations] == ["smem[0:10240]", "smem[0:8448]"]  # the event unchanged


def test_an_op_issued_by_some_warps_touches_their_slots_alone():
    """`issued`: lane 0 of each warp of warpgroup 1 copies to buf + 1024 * w, its warp
    index broadcast from lane 0; the threads that run the copy are warps 4-7, so it writes
    their four slots, not the eight of every warp (docs/fence.md §3.6; samples/fence/h26d)."""
    text = (SAMPLES / "fence" / "h26d_copies_at_each_warps_slot.ptx").read_text()
    flow = inlined_graph(ptxkit.parse(text).function("k"))
    found = classify(flow, EventOptions())
    block, copy = next((b, e) for b, events in enumerate(found.by_block) for e in events if e.kind is Kind.ASYNC)
    assert [str(loc) for loc in copy.writes] == ["buf[0:8192]"]
    locations, writes = found.issued(block, copy)
    assert locations == ()
    assert [str(loc) for loc in writes] == [f"buf[{w * 1024}:{w * 1024 + 1024}]" for w in range(4, 8)]
    store = next((b, e) for b, events in enumerate(found.by_block) for e in events if e.kind is Kind.WRITE)
    assert found.issued(*store) is None  # not an async op
