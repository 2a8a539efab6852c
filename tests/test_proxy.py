"""ptxkit.cfg.proxy and the classification table in ptxkit.isa."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.proxy import (
    ALL, ASYNC, CLUSTER, CTA, GENERIC, GLOBAL_SPACE, IDENTITY, IN_FLIGHT, NONE, SHARED, TOKEN, AnalysisOptions,
    FunctionAnalysis, apply, async_transfer, compose, fence_transfer, spaces_with, spread, state_text, weaken,
    write_transfer,
)
from ptxkit.isa import PROXY_TABLE, proxy_effect

CTA_S, CL_S, G_S = "shared::cta", "shared::cluster", "global"


@pytest.mark.parametrize("opcode, kind, spaces, unknown", [
    ("st.shared.b16", "write", (CTA_S,), False),
    ("st.volatile.shared::cta.v4.b32", "write", (CTA_S,), False),
    ("st.shared::cluster.b32", "write", (CL_S,), False),
    ("st.global.f32", "write", (G_S,), False),
    ("st.u32", "address", (), False),
    ("atom.add.u32", "address", (), False),
    ("red.shared.add.u32", "write", (CTA_S,), False),
    ("st.local.u32", "none", (), False),
    ("st.param.b64", "none", (), False),
    ("stmatrix.sync.aligned.m8n8.x4.shared.b16", "write", (CTA_S,), False),
    ("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32", "write", (CL_S,), False),
    ("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32", "write", (CL_S,), False),
    ("st.bulk.weak.shared::cta", "write", (CTA_S,), False),
    ("cp.async.cg.shared.global", "cp.async", (CTA_S,), False),
    ("cp.async.wait_group", "cp.async.wait", (CTA_S,), False),
    ("cp.async.wait_all", "cp.async.wait", (CTA_S,), False),
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
    ("fence.mbarrier_init.release.cluster", "none", (), False),
    ("fence.sc.cta", "none", (), False),
    ("membar.gl", "none", (), False),
    ("mbarrier.try_wait.parity.shared::cta.b64", "completion", (), False),
    ("mbarrier.arrive.expect_tx.shared::cta.b64", "none", (), False),
    ("ld.shared.b32", "none", (), False),
    ("ldmatrix.sync.aligned.m8n8.x4.shared.b16", "none", (), False),
    ("bar.sync", "none", (), False),
    ("call.uni", "call", (), False),
    ("wgmma.mma_async_v2.sync", "async", (CTA_S, CL_S), True),
    ("foo.async.bar", "async", (CTA_S, CL_S), True),
    ("cp.async.bulk.weird", "async", (CTA_S, CL_S, G_S), True),
])
def test_classification_table(opcode, kind, spaces, unknown):
    effect = proxy_effect(opcode)
    assert (effect.kind, tuple(effect.spaces), effect.unknown) == (kind, spaces, unknown)


def test_the_table_is_one_table():
    prefixes = [p for row in PROXY_TABLE for p in row[0]]
    assert len(prefixes) == len(set(prefixes))


# -- transfers -------------------------------------------------------------------------------

transfers = st.one_of(
    st.builds(write_transfer, st.integers(0, 7), st.booleans()),
    st.builds(async_transfer, st.integers(1, 7), st.booleans()),
    st.builds(fence_transfer, st.integers(0, 7), st.booleans()),
    st.builds(lambda t: weaken(t), st.builds(async_transfer, st.integers(1, 7), st.booleans())),
    st.tuples(st.integers(0, ALL), st.integers(0, ALL), st.integers(0, 7)).map(
        lambda t: (t[0], t[1], spread(t[2], GENERIC))),
)


@given(transfers, transfers, transfers, st.integers(0, ALL))
def test_composition_is_application_in_sequence(a, b, c, state):
    assert apply(compose(a, b), state) == apply(b, apply(a, state))
    assert apply(compose(compose(a, b), c), state) == apply(compose(a, compose(b, c)), state)
    assert apply(compose(IDENTITY, a), state) == apply(a, state) == apply(compose(a, IDENTITY), state)


@given(transfers, st.integers(0, ALL), st.integers(0, ALL))
def test_transfers_are_monotone_and_distributive(t, x, y):
    assert apply(t, x) | apply(t, y) == apply(t, x | y)


def test_transfer_rules():
    generic_cta = spread(CTA, GENERIC)
    assert apply(write_transfer(CTA, True), spread(SHARED, ASYNC)) == generic_cta | spread(CLUSTER, ASYNC)
    assert apply(write_transfer(CTA, False), spread(CTA, ASYNC)) == spread(CTA, ASYNC | GENERIC)
    assert apply(fence_transfer(CTA, True), generic_cta) == spread(CTA, NONE)
    assert apply(fence_transfer(CTA, False), generic_cta) == spread(CTA, NONE | GENERIC)  # a guarded fence
    # an async op on shared::cluster: its own window becomes async, the other window's generic is fenced
    state = apply(async_transfer(CLUSTER, True), generic_cta | spread(CLUSTER, GENERIC))
    assert state == spread(CTA, NONE) | spread(CLUSTER, ASYNC)
    assert apply(async_transfer(CTA, False), generic_cta) == spread(CTA, GENERIC | ASYNC)


def test_state_text():
    assert state_text(spread(CTA, GENERIC) | spread(GLOBAL_SPACE, TOKEN) | IN_FLIGHT) == (
        "shared::cta={generic} shared::cluster={} global={caller} cp.async in flight")
    assert spaces_with(spread(SHARED, GENERIC), GENERIC) == SHARED


# -- the analysis of a function -----------------------------------------------------------------

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n.shared .align 8 .b8 smem[64];\n"
WG = "\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, %p3, 1, 1, 0, 0;\n"
GUARDED_WG = "\t@%p1 " + WG[1:]
REGS = ".reg .pred %p<4>;\n.reg .b16 %h<2>;\n.reg .b32 %r<8>;\n.reg .b64 %rd<8>;\n.reg .f32 %f<8>;\n"


def analyse(body: str, options=AnalysisOptions(), extra: str = "", name: str = "k"):
    text = f"{HEAD}{extra}.visible .entry k()\n{{\n{REGS}{body}\tret;\n}}\n"
    module = ptxkit.parse(text, "k.ptx")
    from ptxkit.cfg.fence import analyse_module, FenceOptions

    return module, analyse_module(module, FenceOptions(extern_policy=options.extern_policy,
                                                       track_global=options.track_global))


def needs(body: str, **kw) -> list:
    _, results = analyse(body, **kw)
    return [(site.text, site.target_kind) for r in results for site in r.sites]


def test_guarded_fences_and_guarded_ops():
    assert needs("\tst.shared.b16 [smem], %h0;\n\t@%p1 fence.proxy.async.shared::cta;\n" + WG) == [
        ("fence.proxy.async.shared::cta;", "async")]
    # the same guard covers the op; a redefinition of the guard in between does not
    assert needs("\tst.shared.b16 [smem], %h0;\n\t@%p1 fence.proxy.async.shared::cta;\n" + GUARDED_WG) == []
    assert needs("\tst.shared.b16 [smem], %h0;\n\t@%p1 fence.proxy.async.shared::cta;\n"
                 "\tsetp.eq.u32 %p1, %r1, 0;\n" + GUARDED_WG) == [("@%p1 fence.proxy.async.shared::cta;", "async")]
    # a guarded op keeps the generic state for the next op; one fence under the same guard suffices
    assert needs("\tst.shared.b16 [smem], %h0;\n" + GUARDED_WG + GUARDED_WG + WG) == [
        ("@%p1 fence.proxy.async.shared::cta;", "async"), ("fence.proxy.async.shared::cta;", "async")]


def test_a_call_that_may_write_ends_the_guard_cover():
    """Found by the property test: a guarded fence covers later ops under its guard only
    until something writes again, and an extern call under clobber writes both windows."""
    extra = ".extern .func ext\n(\n)\n;\n"
    tma = ("\t@%p1 cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
           "[smem], [%rd3, {%r0}], [%rd4];\n")
    body = "\tst.shared.b16 [smem], %h0;\n" + tma + "\tst.shared.b16 [smem], %h0;\n\tcall.uni ext, ();\n" + GUARDED_WG
    assert needs(body, extra=extra) == [("@%p1 fence.proxy.async.shared::cluster;", "async")] * 2


def test_extern_policies():
    extra = ".extern .func ext\n(\n)\n;\n"
    body = "\tcall.uni ext, ();\n" + WG
    assert needs(body, extra=extra, options=AnalysisOptions(extern_policy="none")) == []
    assert needs(body, extra=extra) == [("fence.proxy.async.shared::cluster;", "async")]
    body = "\tst.shared.b16 [smem], %h0;\n\tcall.uni ext, ();\n"
    assert needs(body, extra=extra, options=AnalysisOptions(extern_policy="strict")) == [
        ("fence.proxy.async.shared::cluster;", "extern")]
    assert needs("\tst.shared.b16 [smem], %h0;\n\tcall.uni vprintf, (param0);\n" + WG,
                 extra=".extern .func (.param .b32 r) vprintf\n(\n.param .b64 a\n)\n;\n") == [
        ("fence.proxy.async.shared::cta;", "async")]  # vprintf is benign: the store reaches the wgmma


def test_summaries_of_funcs():
    funcs = (".func writes()\n{\n.reg .b16 %h<2>;\n\tst.shared.b16 [smem], %h1;\n\tret;\n}\n"
             ".func mma()\n{\n" + REGS + WG + "\tret;\n}\n"
             ".func fences()\n{\n\tfence.proxy.async.shared::cta;\n\tret;\n}\n"
             ".func passes()\n{\n\tret;\n}\n")
    module, results = analyse("\tcall.uni passes, ();\n", extra=funcs)
    summaries = {r.analysis.function.name: r.analysis.summary(r.analysis.scan()) for r in results
                 if r.analysis.function.kind == "func"}
    start = spread(SHARED, ASYNC)
    assert apply(summaries["writes"].transfer, start) == spread(CTA, GENERIC) | spread(CLUSTER, ASYNC)
    assert apply(summaries["passes"].transfer, start) == start
    assert apply(summaries["fences"].transfer, spread(CTA, GENERIC)) == spread(CTA, NONE)
    assert summaries["mma"].exposed == {CTA: CTA, CLUSTER: SHARED} and not summaries["writes"].exposed
    assert summaries["mma"].exposed_at[CTA].line == module.function("mma").body.items[-2].line
    assert needs("\tcall.uni writes, ();\n" + WG, extra=funcs) == [("fence.proxy.async.shared::cta;", "async")]
    assert needs("\tst.shared.b16 [smem], %h0;\n\tcall.uni mma, ();\n", extra=funcs) == [
        ("fence.proxy.async.shared::cta;", "call")]
    assert needs("\tst.shared.b16 [smem], %h0;\n\tcall.uni fences, ();\n" + WG, extra=funcs) == []


def test_recursive_calls_are_treated_as_strict_externs():
    funcs = ".func r()\n{\n\tcall.uni r, ();\n\tret;\n}\n"
    # inside r the recursive call may start async ops, so r's callers fence before calling it
    assert needs("\tst.shared.b16 [smem], %h0;\n\tcall.uni r, ();\n", extra=funcs) == [
        ("fence.proxy.async.shared::cluster;", "call")]
    _, results = analyse("\tcall.uni r, ();\n", extra=funcs)
    inner = next(r for r in results if r.analysis.function.name == "r")
    assert [e.kind for e in inner.analysis.events[0]] == ["extern"]


def test_lint_and_unknown_opcodes():
    _, results = analyse("\tcp.async.ca.shared.global [smem], [%rd1], 4;\n" + WG)
    assert "in flight" in results[0].warnings[0].text
    _, results = analyse("\tcp.async.ca.shared.global [smem], [%rd1], 4;\n\tcp.async.wait_group 1;\n" + WG)
    assert results[0].warnings  # a non-zero wait_group may leave this cp.async in flight
    _, results = analyse("\tcp.async.ca.shared.global [smem], [%rd1], 4;\n\tcp.async.wait_group 0;\n" + WG)
    assert not results[0].warnings
    _, results = analyse("\tst.shared.b16 [smem], %h0;\n\twgmma.future_op.sync %r1;\n")
    assert "unknown async-looking opcode 'wgmma.future_op.sync'" in results[0].warnings[0].text
    assert [s.text for s in results[0].sites] == ["fence.proxy.async.shared::cluster;"]


def test_witness_follows_the_back_edge():
    body = ("\tmov.u32 %r1, 0;\nL:\n" + WG + "\tst.shared.b16 [smem], %h0;\n\tadd.u32 %r1, %r1, 1;\n"
            "\tsetp.lt.u32 %p1, %r1, 4;\n\t@%p1 bra L;\n")
    module, results = analyse(body)
    (site,) = results[0].sites
    assert site.write.text == "st.shared.b16" and site.write.line > site.target.line
    assert [p.text for p in site.path] == ["st.shared.b16", "L", "wgmma.mma_async"]


def test_global_tracking_and_the_cta_fence_option():
    body = "\tst.global.u32 [%rd1], %r1;\n\tcp.async.bulk.tensor.1d.shared::cluster.global.tile" \
           ".mbarrier::complete_tx::bytes [smem], [%rd2, {%r1}], [%rd3];\n"
    assert needs(body) == []
    assert needs(body, options=AnalysisOptions(track_global=True)) == [("fence.proxy.async.global;", "async")]
    module = ptxkit.parse(f"{HEAD}.visible .entry k()\n{{\n{REGS}\tst.shared::cluster.b16 [smem], %h0;\n"
                          f"\tfence.proxy.async.shared::cta;\n{WG}\tret;\n}}\n")
    plain = FunctionAnalysis(module.function("k"), AnalysisOptions())
    plain.solve()
    forced = FunctionAnalysis(module.function("k"), AnalysisOptions(cta_fence_covers_cluster=True))
    forced.solve()
    assert len(plain.scan().needs) == 1 and forced.scan().needs == []
