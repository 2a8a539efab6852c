"""The facts about the PTX ISA in ptxkit.isa: the proxy table, hand-offs, async operand forms, operand counts."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.instruction import parse_instruction
from ptxkit.isa import (
    PROXY_TABLE, SYNC_TABLE, AsyncForm, Effect, Sync, SyncObject, async_form, fewest_operands, is_special_register,
    may_need_fence, parse_target, proxy_effect, sync_effect,
)

CTA_S, CL_S, G_S = "shared::cta", "shared::cluster", "global"


@pytest.mark.parametrize("opcode, kind, spaces, unknown", [
    ("st.shared.b16", "write", (CTA_S,), False),
    ("st.volatile.shared::cta.v4.b32", "write", (CTA_S,), False),
    ("st.shared::cluster.b32", "write", (CL_S,), False),
    ("st.global.f32", "write", (G_S,), False),
    ("st.u32", "address write", (), False),
    ("atom.add.u32", "address write", (), False),
    ("red.shared.add.u32", "write", (CTA_S,), False),
    ("st.local.u32", "none", (), False),
    ("st.param.b64", "none", (), False),
    ("stmatrix.sync.aligned.m8n8.x4.shared.b16", "write", (CTA_S,), False),
    ("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32", "write", (CL_S,), False),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32", "write", (CL_S,), False),
    ("st.bulk.weak.shared::cta", "write", (CTA_S,), False),
    ("cp.async.cg.shared.global", "cp.async", (CTA_S,), False),
    ("cp.async.wait_group", "cp.async wait", (CTA_S,), False),
    ("mbarrier.init.shared::cta.b64", "mbarrier.init", (CTA_S,), False),
    ("mbarrier.init.b64", "mbarrier.init", (), False),
    ("mbarrier.inval.shared::cta.b64", "write", (CTA_S,), False),  # the object's bytes, free for reuse
    ("mbarrier.inval.b64", "address write", (), False),
    ("mbarrier.arrive.expect_tx.shared::cta.b64", "none", (), False),
    ("ld.b32", "address read", (), False),
    ("ld.param.b64", "none", (), False),
    ("cp.async.wait_all", "cp.async wait", (CTA_S,), False),
    ("cp.async.commit_group", "none", (), False),
    ("cp.async.mbarrier.arrive.noinc.shared.b64", "none", (), False),
    ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16", "async", (CTA_S,), False),
    ("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", "async", (CTA_S,), False),
    ("wgmma.fence.sync.aligned", "none", (), False),
    ("wgmma.commit_group.sync.aligned", "none", (), False),
    ("tcgen05.mma.cta_group::1.kind::f16", "async", (CTA_S,), False),
    ("tcgen05.mma.cta_group::2.kind::f16", "async", (CTA_S, CL_S), False),
    ("tcgen05.cp.cta_group::1.128x256b", "async", (CTA_S,), False),
    ("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32", "none", (), False),
    ("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64", "none", (), False),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes", "async", (CL_S, G_S), False),
    ("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group", "async", (G_S, CTA_S), False),
    ("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes", "async", (CL_S, CTA_S), False),
    ("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group", "async", (G_S, CTA_S), False),
    ("cp.async.bulk.prefetch.tensor.2d.L2.global", "none", (), False),
    ("cp.async.bulk.commit_group", "none", (), False),
    ("cp.async.bulk.wait_group.read", "none", (), False),
    ("multimem.cp.async.bulk.global.shared::cta.bulk_group", "async", (CTA_S, G_S), False),
    ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128", "async", (CTA_S,), False),
    ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.multicast::cluster::all.b128",
     "async", (CTA_S, CL_S), False),
    ("fence.proxy.async", "fence", (CTA_S, CL_S, G_S), False),
    ("membar.proxy.async", "fence", (CTA_S, CL_S, G_S), False),
    ("fence.proxy.async.global", "fence", (G_S,), False),
    ("fence.proxy.async.shared::cta", "fence", (CTA_S,), False),
    ("fence.proxy.async.shared::cluster", "fence", (CTA_S, CL_S), False),
    ("fence.proxy.async::generic.acquire.sync_restrict::shared::cluster.cluster", "fence", (CTA_S, CL_S), False),
    ("fence.proxy.async::generic.release.sync_restrict::shared::cta.cluster", "none", (), False),
    ("fence.proxy.alias", "none", (), False),
    ("fence.proxy.tensormap::generic.release.gpu", "none", (), False),
    ("fence.mbarrier_init.release.cluster", "mbarrier_init fence", (CTA_S,), False),
    ("fence.sc.cta", "none", (), False),
    ("membar.gl", "none", (), False),
    ("mbarrier.try_wait.parity.shared::cta.b64", "none", (), False),
    ("mbarrier.arrive.expect_tx.shared::cta.b64", "none", (), False),
    ("ld.shared.b32", "read", (CTA_S,), False),
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16", "read", (CTA_S,), False),
    ("bar.sync", "none", (), False),
    ("call.uni", "call", (), False),
    ("wgmma.mma_async_v2.sync", "async", (CTA_S, CL_S), True),
    ("foo.async.bar", "async", (CTA_S, CL_S), True),
    ("cp.async.bulk.weird", "async", (CTA_S, CL_S, G_S), True),
])
def test_classification_table(opcode, kind, spaces, unknown):
    effect = proxy_effect(opcode)
    assert (effect.kind.value, tuple(effect.spaces), effect.unknown) == (kind, spaces, unknown)


def test_each_table_names_a_prefix_once():
    for table in (PROXY_TABLE, SYNC_TABLE):
        prefixes = [p for row in table for p in row[0]]
        assert len(prefixes) == len(set(prefixes))


@pytest.mark.parametrize("opcode, kind, obj, operand", [
    ("bar.sync", Sync.ARRIVE_WAIT, SyncObject.NAMED_BARRIER, 0),
    ("barrier.sync.aligned", Sync.ARRIVE_WAIT, SyncObject.NAMED_BARRIER, 0),
    ("bar.red.popc.u32", Sync.ARRIVE_WAIT, SyncObject.NAMED_BARRIER, 0),
    ("bar.arrive", Sync.ARRIVE, SyncObject.NAMED_BARRIER, 0),
    ("barrier.cta.arrive.aligned", Sync.ARRIVE, SyncObject.NAMED_BARRIER, 0),
    ("bar.warp.sync", Sync.ARRIVE_WAIT, SyncObject.WARP, None),
    ("barrier.cluster.arrive.release.aligned", Sync.ARRIVE, SyncObject.CLUSTER_BARRIER, None),
    ("barrier.cluster.wait.acquire.aligned", Sync.WAIT, SyncObject.CLUSTER_BARRIER, None),
    ("mbarrier.arrive.expect_tx.shared::cta.b64", Sync.ARRIVE, SyncObject.MBARRIER, -1),
    ("mbarrier.arrive.release.cluster.shared::cluster.b64", Sync.ARRIVE, SyncObject.MBARRIER, -1),
    ("mbarrier.arrive_drop.shared.b64", Sync.ARRIVE, SyncObject.MBARRIER, -1),
    ("cp.async.mbarrier.arrive.noinc.shared.b64", Sync.ARRIVE, SyncObject.MBARRIER, -1),
    ("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64", Sync.ARRIVE, SyncObject.MBARRIER, -1),
    ("mbarrier.try_wait.parity.shared::cta.b64", Sync.WAIT, SyncObject.MBARRIER, -1),
    ("mbarrier.test_wait.shared.b64", Sync.WAIT, SyncObject.MBARRIER, -1),
])
def test_sync_table(opcode, kind, obj, operand):
    assert tuple(sync_effect(opcode)) == (kind, obj, operand)


@pytest.mark.parametrize("opcode", ["mbarrier.init.shared.b64", "mbarrier.expect_tx.relaxed.cta.shared.b64",
                                    "fence.proxy.async", "elect.sync", "wgmma.fence.sync.aligned"])
def test_no_hand_off(opcode):
    assert sync_effect(opcode) is None


@pytest.mark.parametrize("opcode, form", [
    ("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", AsyncForm.WGMMA),
    ("wgmma.mma_async.sp.sync.aligned.m64n8k32.f32.f16.f16", AsyncForm.WGMMA),
    ("tcgen05.mma.cta_group::1.kind::f16", AsyncForm.TCGEN05_MMA),
    ("tcgen05.cp.cta_group::1.128x256b", AsyncForm.TCGEN05_CP),
    ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes", AsyncForm.TENSOR_LOAD),
    ("cp.async.bulk.tensor.5d.shared::cta.global.tile.mbarrier::complete_tx::bytes", AsyncForm.TENSOR_LOAD),
    ("cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group", AsyncForm.TENSOR_STORE),
    ("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group", AsyncForm.TENSOR_STORE),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes", AsyncForm.BULK_COPY),
    ("cp.async.bulk.global.shared::cta.bulk_group", AsyncForm.BULK_COPY),
    ("clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128", AsyncForm.TRY_CANCEL),
    ("wgmma.future.op", AsyncForm.UNKNOWN),
])
def test_async_forms(opcode, form):
    assert async_form(opcode) is form


def test_special_registers_and_targets():
    assert is_special_register("%tid.x") and is_special_register("%cluster_ctarank")
    assert not is_special_register("%r1") and not is_special_register("%tidx")
    assert parse_target("sm_90a") == (90, "a") and parse_target("compute_90") is None


@pytest.mark.parametrize("opcode", [p for prefixes, kind, _ in PROXY_TABLE if kind is Effect.ASYNC for p in prefixes])
def test_every_async_proxy_opcode_needs_the_pass(opcode):
    """The text shortcut in front of the pass sees every async-proxy row of the table,
    guarded or not, and an unknown ``.async`` opcode (fail closed)."""
    assert may_need_fence(f"\t@%p1 {opcode}.shared::cta [%r1], [%rd1];\n")
    assert may_need_fence("\tmultimem.cp.async.future.shared::cta [%r1];\n")


@pytest.mark.parametrize("text", [
    "\tcp.async.cg.shared.global [%r1], [%rd1], 16;\n\tcp.async.commit_group;\n\tcp.async.wait_group 0;\n",
    "\tcp.async.ca.shared.global.L2::128B [%r1], [%rd1], 4;\n\tcp.async.wait_all;\n",
    "\tcp.async.mbarrier.arrive.noinc.shared.b64 [%r2];\n\tfence.proxy.async.shared::cta;\n",
    "\tst.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%r1], %r2, [%r3];\n",
])
def test_generic_async_forms_do_not(text):
    """``cp.async`` (non-bulk) writes through the generic proxy, and a fence or
    ``st.async`` alone orders nothing against an async-proxy access: no fence can be
    missing, so the pass is not loaded (PTX ISA, proxies of ``cp.async`` and
    ``cp.async.bulk``)."""
    assert not may_need_fence(text)
    assert may_need_fence(text + "\tcp.async.bulk.shared::cta.global [%r1], [%rd1], 16, [%r2];\n")



@pytest.mark.parametrize("text, fewest", [
    ("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], [%r4];", 2),
    ("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd1, {%r2}], [%r1];", 2),
    ("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1], 64, [%r2];", 3),
    ("cp.async.bulk.prefetch.L2.global [%rd1], 64;", 2),
    ("cp.async.bulk.prefetch.tensor.2d.L2.global [%rd1, {%r1, %r2}];", 1),
    ("cp.async.ca.shared.global [%r1], [%rd1], 16;", 3),
    ("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r1];", 1),
    ("mbarrier.arrive.shared::cta.b64 _, [%r1];", 2),
    ("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;", 3),
    ("bar.sync 1;", 1), ("bar.arrive 1, 256;", 2), ("bar.red.popc.u32 %r1, 0, %p1;", 3),
    ("barrier.cluster.arrive;", 0), ("wgmma.fence.sync.aligned;", 0),
    ("shfl.sync.idx.b32 %r1|%p1, %r2, 0, 31, -1;", 5), ("setp.lt.s32 %p1|%p2, %r1, %r2;", 3),
    ("st.async.shared::cluster.mbarrier::complete_tx::bytes.u32 [%r1], %r2, [%r3];", 3),
    ("tcgen05.commit.cta_group::1.mbarrier::arrive::one.b64 [%rd1];", 1),
    ("tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, %p1;", 4),
])
def test_the_fewest_operands_of_valid_forms(text, fewest):
    """Each form, written as the PTX ISA's syntax gives it with no optional operand, has
    at least the operands the table asks of its opcode (longest prefix)."""
    view = parse_instruction(ptxkit.parse_statement(text))
    assert fewest_operands(view.opcode) == fewest <= len(view.operands)
