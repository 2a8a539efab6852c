"""The fence pass on every scenario of ``samples/fence``: TileLang's own tests (01-18,
docs/fence.md §7) and ptxkit's (h01 onwards).

Each sample is compared exactly with ``samples/fence/expected/NAME.ptx``; the pass is
idempotent on its output; ``--check`` fails on the input exactly when fences are
expected and passes on the output; every expected file assembles with ptxas. Options
a sample needs are on its ``// options:`` line, in ``ptxkit fence`` syntax.
"""

from __future__ import annotations

import copy
import difflib
import gc
import re
import weakref

import pytest

import ptxkit
from ptxkit import parse_statement
from ptxkit.cfg.fence.fence import AccessPair, FenceOptions, Place, check_target, fence_module, fence_text
from ptxkit.cfg.sync import groups
from ptxkit.cli.fence_cmd import fence_options, settle
from ptxkit.cli.main import build_parser
from ptxkit.syntax import Directive

from conftest import SAMPLES

FENCES = SAMPLES / "fence"
NAMES = sorted(p.stem for p in FENCES.glob("*.ptx"))
CTA, CLUSTER = "fence.proxy.async.shared::cta;", "fence.proxy.async.shared::cluster;"
RELEASE_INITS = "fence.mbarrier_init.release.cluster;"

#: The fences each scenario must get: (inserted line, start of the next statement).
EXPECTED = {
    "01_async_to_generic_no_double_fence": [],
    "02_cp_async_then_wgmma": [(CTA, "wgmma.mma_async")],
    "02b_cp_async_without_wait": [(CTA, "wgmma.mma_async")],
    "03_unknown_extern_default_is_none": [],
    "03b_unknown_extern_strict": [(CLUSTER, "call.uni")],
    "04_extern_shared_pointer_then_wgmma": [(CLUSTER, "wgmma.mma_async")],
    "04b_extern_shared_pointer_policy_none": [(CTA, "wgmma.mma_async")],
    "05_extern_address_of_shared": [(CTA, "wgmma.mma_async")],
    "06_tma_store_without_sync": [],
    "06b_tma_store_after_shared_store": [(CTA, "cp.async.bulk.tensor.1d.global.shared::cta")],
    "07_wgmma_marked_async": [(CTA, "wgmma.mma_async")],
    "08_shared_barrier_ops": [],
    "09_regression_0219_fence": [],
    "09b_persistent_track_global": [("@%p5 fence.proxy.async.global;", "@%p5 cp.async.bulk.tensor")],
    "10_ldmatrix_then_wgmma": [],
    "11_stmatrix_then_wgmma": [(CTA, "wgmma.mma_async")],
    "12_if_merge_then_wgmma": [(CTA, "wgmma.mma_async")],
    "12b_if_merge_predicated": [(CTA, "wgmma.mma_async")],
    "13_hoist_out_of_if": [(CTA, "@!%p1 bra")],
    "14a_hoist_out_of_unrolled_loop": [(CTA, "wgmma.mma_async")],
    "14b_hoist_out_of_loop": [(CTA, "L:")],
    "15_hoist_out_of_while_loop": [(CTA, "H:")],
    "16_loop_carried_generic": [(CTA, "wgmma.mma_async")],
    "17_shared_load_then_wgmma": [],
    "18_sparse_wgmma": [(CTA, "wgmma.mma_async.sp")],
    "x01_predicated_fence_does_not_count": [(CTA, "wgmma.mma_async")],
    "x02_guarded_tma_stores": [("@%p1 " + CTA, "@%p1 cp.async.bulk.tensor")],
    "x03_zero_trip_loop": [(CTA, "cp.async.bulk.tensor")],
    "x04_inline_asm_scoped_labels": [(CTA, "wgmma.mma_async")],
    "x05_call_func_that_writes_shared": [(CTA, "wgmma.mma_async")],
    "x06_call_func_that_starts_with_wgmma": [(CTA, "call.uni")],
    "x07_global_store_through_param_pointer": [],
    "x08_global_store_then_tma_load": [("fence.proxy.async.global;", "cp.async.bulk.tensor")],
    "x09_cluster_store_then_wgmma": [(CLUSTER, "wgmma.mma_async")],
    "x10_st_async_then_multicast_tma": [(CLUSTER, "cp.async.bulk.tensor")],
    "x11_version_gate": [],
    "x12_target_gate_sm80": [],
    "x13_generic_store_through_cvta_shared": [(CTA, "wgmma.mma_async")],
    "x14_generic_store_unknown_pointer": [],
    "x14b_generic_store_pointer_may_be_shared": [(CLUSTER, "wgmma.mma_async")],
    "x15_loop_with_cp_async_wait": [(CTA, "wgmma.mma_async")],
    "x16_created_preheader": [(CTA, "L:")],
    "x17_tcgen05_mma": [(CTA, "tcgen05.mma")],
    "x18_brx_idx_switch": [(CTA, "brx.idx")],
    "x19_irreducible_flow": [(CTA, "wgmma.mma_async"), (CTA, "wgmma.mma_async")],
    "x20_already_fenced_loop": [],
    "x21_nested_loops": [(CTA, "INNER:")],
    "x22_if_without_else": [(CTA, "wgmma.mma_async")],
    "x23_three_reports_one_suppressed": [(CTA, "cp.async.bulk.tensor.1d.global.shared::cta"),
                                         (CTA, "cp.async.bulk.tensor.1d.shared::cluster"),
                                         (RELEASE_INITS, "mbarrier.arrive.expect_tx")],
    "x24a_cp_async_ring_waits_for_the_stage_it_reads": [],
    "x24b_cp_async_ring_reads_a_stage_still_in_flight": [],
    # warp-specialised hand-offs between threads (the h samples)
    "h01_named_barrier_handoff_to_wgmma": [(CTA, "wgmma.mma_async")],
    "h02_mbarrier_handoff_to_wgmma": [(CTA, "wgmma.mma_async")],
    "h03_named_barrier_handoff_to_tma_store": [(CTA, "cp.async.bulk.tensor.2d.global.shared::cta")],
    "h04_cp_async_mbarrier_arrive_noinc_to_wgmma": [(CTA, "wgmma.mma_async")],
    "h05_writer_side_fence_already_present": [],
    "h06_issuer_side_fence_already_present": [],
    "h07a_separate_buffers_by_symbol": [],
    "h07b_separate_areas_of_dynamic_smem": [],
    "h08a_stage_ring_handoff": [(CTA, "wgmma.mma_async")],
    "h08b_stage_ring_separate_area": [],
    "h09a_dynamic_descriptor_write_elsewhere": [],
    "h09b_dynamic_descriptor_write_inside_tile": [(CTA, "wgmma.mma_async")],
    "h10b_war_no_war_option": [],
    "h11b_mbarrier_init_fenced": [],
    "h12a_cluster_handoff_to_wgmma": [(CLUSTER, "wgmma.mma_async")],
    "h13_named_barrier_handoff_writer_side": [(CTA, "bar.arrive")],
    "h14a_one_thread_fences_for_its_warpgroup": [],
    "h14b_one_thread_fences_only_sometimes": [(CTA, "bar.sync \t1, 128")],
    "h15a_rounded_up_base_separate_buffers": [],
    "h15b_rounded_up_base_write_inside_tile": [(CTA, "cp.async.bulk.tensor.2d.shared::cluster")],
    "h16a_thread_bit_offsets_stay_apart": [],
    "h16b_thread_bit_offsets_reach_tile": [(CTA, "cp.async.bulk.tensor.2d.shared::cluster")],
    "h17_roles_in_sequence_loop_handoff": [(CTA, "wgmma.mma_async")],
    "h18_arrive_once_before_the_reads": [],
    "h19_sync_after_the_reads_then_fence": [],
    "h20a_inits_published_one_by_one": [],
    "h20b_init_used_before_the_next_init": [],
    "h21a_debug_descriptor_from_template": [],
    "h21b_debug_descriptor_write_inside_tile": [(CTA, "wgmma.mma_async")],
    "h22_own_barrier_per_warpgroup": [],
    "h23_armed_before_the_fence": [],
    "h24_clamped_index_zero_fills_the_tile": [],
    "h25a_descriptor_ring_stepped_by_comparing_with_its_end": [],
    "h25b_descriptor_ring_write_inside_a_stage": [(CTA, "cp.async.bulk.tensor.2d.shared::cluster"),
                                                  (CTA, "wgmma.mma_async")],
    "h26_lane_zero_index_broadcast_to_every_lane": [(CTA, "cp.async.bulk.global.shared::cta")],
    "h26b_two_broadcasts_of_lane_zero": [],
    "h26c_two_broadcasts_of_lane_zero_reaching_the_copy": [(CTA, "cp.async.bulk.global.shared::cta")],
    "h26d_copies_at_each_warps_slot": [],
    "h26e_copies_at_each_warps_slot_reaching_the_stores": [(CTA, "cp.async.bulk.shared::cluster.global")],
    "h27_cluster_barrier_phases": [],
    "h28a_cluster_barrier_handoff_to_own_cta_copy": [("@%p1 " + CTA, "@%p1 cp.async.bulk.tensor.2d.shared::cluster")],
    "h28b_cluster_barrier_handoff_to_multicast_copy": [("@%p1 " + CLUSTER,
                                                        "@%p1 cp.async.bulk.tensor.2d.shared::cluster")],
    "h29a_cluster_mbarrier_init_unreleased": [(RELEASE_INITS, "barrier.cluster.arrive.relaxed")],
    "h29b_cluster_mbarrier_init_cta_fence_only": [(RELEASE_INITS, CTA)],
    "h29c_cluster_mbarrier_init_released_by_the_barrier": [],
    "h30a_uniform_skip_then_epilogue_sync": [],
    "h30b_thread_dependent_skip_then_epilogue_sync": [("@%p1 " + CTA, "@%p1 cp.async.bulk.tensor.1d.global")],
    "h31_mbarrier_wait_before_a_cta_sync": [],
    "h34a_copies_in_a_loop_unrolled_by_four": [],
    "h34b_copies_in_a_loop_unrolled_by_four_reaching_the_stores": [(CTA, "cp.async.bulk.shared::cluster.global")],
    "h35a_switch_default_no_warp_takes": [],
    "h35b_switch_default_a_warp_takes": [(CTA, "cp.async.bulk.tensor.1d.shared::cluster")],
    "h36_test_of_a_register_loaded_beside_an_address": [("@%p2 " + CTA, "@%p2 cp.async.bulk.tensor.1d.global")],
    "h37a_descriptor_stride_not_known_write_elsewhere": [],
    "h37b_descriptor_stride_not_known_write_inside_tile": [(CTA, "wgmma.mma_async")],
    "h38a_invalidated_mbarrier_memory_fenced_before_reuse": [],
    "h38b_invalidated_mbarrier_memory_reused_by_tma": [(CTA, "cp.async.bulk.tensor.2d.shared::cluster")],
    "h32_armed_before_the_fence_then_initialised_again": [],
    "h33_initialised_again_without_a_fence": [],
    "h04b_cp_async_writer_side_option": [(CTA, "wgmma.mma_async")],
    "h10a_war_ld_shared_then_tma_load": [(CTA, "cp.async.bulk.tensor")],
    "h11a_mbarrier_init_then_tma": [],
    "h12b_cluster_handoff_writer_side_option": [(CLUSTER, "wgmma.mma_async")],
}


def sample(name: str) -> str:
    return (FENCES / f"{name}.ptx").read_text()


def expected(name: str) -> str:
    return (FENCES / "expected" / f"{name}.ptx").read_text()


def options_of(text: str) -> FenceOptions:
    """The sample's ``// options:`` line, parsed by the real ``ptxkit fence`` parser."""
    match = re.search(r"^// options: (.*)$", text, re.M)
    extra = match.group(1).split() if match else []
    args = settle(build_parser("fence").parse_args(["fence", "x.ptx", *extra]))
    return fence_options(args)


def run(text: str, name: str, rewrite: bool = True, **override):
    fields = {**options_of(text)._asdict(), **override}
    return fence_text(text, f"{name}.ptx", rewrite=rewrite, **fields)


def statements(text: str) -> list[str]:
    """Non-blank, non-comment lines, stripped."""
    return [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("//")]


def test_every_scenario_has_a_sample_and_an_expectation():
    assert set(NAMES) == set(EXPECTED)
    tilelang = [n for n in NAMES if re.match(r"\d\d", n)]
    assert len({n[:2] for n in tilelang}) == 18  # the 17 TileLang tests and the sparse-wgmma one


@pytest.mark.parametrize("name", NAMES)
def test_golden_output(name):
    fenced, report = run(sample(name), name)
    assert fenced == expected(name)
    assert [(f.text, bool(f.reason())) for f in report.fences] == [(t, True) for t, _ in EXPECTED[name]]


def edits(before: list[str], after: list[str]) -> tuple[list[int], list[tuple[str, str]]]:
    """(indexes of inserted statements in `after`, replaced (old, new) statement pairs)."""
    inserted, replaced = [], []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, before, after, autojunk=False).get_opcodes():
        if tag == "insert":
            inserted.extend(range(j1, j2))
        elif tag == "replace":
            replaced.extend(zip(before[i1:i2], after[j1:j2]))
            inserted.extend(range(j1 + (i2 - i1), j2))
        elif tag == "delete":
            replaced.extend((line, "") for line in before[i1:i2])
    return inserted, replaced


@pytest.mark.parametrize("name", NAMES)
def test_fences_sit_where_fence_md_says(name):
    after = statements(expected(name))
    inserted, _ = edits(statements(sample(name)), after)
    found = [(after[j], after[j + 1]) for j in inserted if after[j].split()[-1].startswith("fence.")]
    want = EXPECTED[name]
    assert len(found) == len(want)
    for (line, following), (text, prefix) in zip(found, want):
        assert line == text and following.startswith(prefix), (line, following)


@pytest.mark.parametrize("name", NAMES)
def test_only_fences_labels_and_redirected_branches_change(name):
    after = statements(expected(name))
    inserted, replaced = edits(statements(sample(name)), after)
    assert all(re.search(r"fence\.(proxy\.async|mbarrier_init\.release\.cluster)", after[j])
               or re.fullmatch(r"\$ptxkit_preheader_\d+:", after[j]) for j in inserted)
    for old, new in replaced:  # only a branch redirected to a created preheader
        assert re.sub(r"\$ptxkit_preheader_\d+", "L", new) == old


@pytest.mark.parametrize("name", NAMES)
def test_idempotent(name):
    fenced = expected(name)
    again, report = run(fenced, name)
    assert again == fenced and not report.fences and not report.changed


@pytest.mark.parametrize("name", NAMES)
def test_check_mode(name):
    text = sample(name)
    unchanged, report = run(text, name, rewrite=False)
    assert unchanged == text
    assert len(report.missing) == len(EXPECTED[name])
    assert not run(expected(name), name, rewrite=False)[1].missing


@pytest.mark.ptxas
@pytest.mark.parametrize("name", NAMES)
def test_expected_files_assemble(name):
    from ptxkit.ptxas import assemble

    text = expected(name)
    arch = ptxkit.parse(text).targets[0]
    assemble(text, arch, options=("-c",), filename=f"{name}.ptx", cache=False)  # raises PtxasError if not


def test_never_emits_bulk_commit_or_wait():
    for name in NAMES:
        count = lambda text: len(re.findall(r"(?:cp\.async\.bulk|wgmma)\.(?:commit|wait)_group", text))
        assert count(sample(name)) == count(expected(name)), name


def test_persistent_gemm_needs_nothing_without_global_tracking():
    text = sample("09b_persistent_track_global")
    assert run(text, "09b", track_global=False)[1].fences == []
    assert run(sample("09_regression_0219_fence"), "09", track_global=True)[1].fences == []


def test_gates_say_why():
    assert run(sample("x11_version_gate"), "x11")[1].skipped.startswith(".version 7.8")
    assert "sm_80" in run(sample("x12_target_gate_sm80"), "x12")[1].skipped
    module = ptxkit.parse(sample("07_wgmma_marked_async").replace(".target sm_90a", ".target sm_90a, debug"))
    assert check_target(module) is None


def test_extern_policies_on_test_3():
    text = sample("03_unknown_extern_default_is_none")
    counts = {policy: len(run(text, "03", extern_policy=policy)[1].fences) for policy in ("none", "clobber", "strict")}
    assert counts == {"none": 0, "clobber": 0, "strict": 1}
    assert [len(run(sample("01_async_to_generic_no_double_fence"), "01", extern_policy=p)[1].fences)
            for p in ("none", "clobber", "strict")] == [0, 0, 0]


def test_inline_placement_puts_a_fence_before_every_op():
    by_name = {name: run(sample(name), name, placement="inline")[1] for name in
               ("13_hoist_out_of_if", "14b_hoist_out_of_loop", "15_hoist_out_of_while_loop", "x18_brx_idx_switch",
                "x21_nested_loops", "09b_persistent_track_global")}
    assert {name: len(r.fences) for name, r in by_name.items()} == {
        "13_hoist_out_of_if": 2, "14b_hoist_out_of_loop": 1, "15_hoist_out_of_while_loop": 1,
        "x18_brx_idx_switch": 3, "x21_nested_loops": 1, "09b_persistent_track_global": 1}
    assert all(f.placement == "inline" for r in by_name.values() for f in r.fences)
    fenced = statements(run(sample("14b_hoist_out_of_loop"), "14b", placement="inline")[0])
    assert fenced[fenced.index("L:") + 1] == CTA  # inside the loop: runs on every trip


def test_forced_variants():
    text = sample("x09_cluster_store_then_wgmma")
    forced, report = run(text, "x09", fence_variant="shared::cta")
    assert [f.text for f in report.fences] == [CTA]
    assert run(forced, "x09", fence_variant="shared::cta")[1].fences == []  # the forced model is stable
    assert [f.text for f in run(forced, "x09")[1].fences] == [CLUSTER]  # without it, ::cta is not enough
    assert [f.text for f in run(sample("07_wgmma_marked_async"), "07", fence_variant="full")[1].fences] == [
        "fence.proxy.async;"]
    # a forced shared variant never orders global: the narrowest correct fence instead
    global_only = sample("x08_global_store_then_tma_load")
    assert [f.text for f in run(global_only, "x08", fence_variant="shared::cta")[1].fences] == [
        "fence.proxy.async.global;"]


def test_hand_off_fence_sides():
    """h01 and h13 are one kernel: the issuer's fence follows bar.sync, the writer's
    precedes bar.arrive; both are reported with the hand-off that needs them."""
    (issuer,) = run(sample("h01_named_barrier_handoff_to_wgmma"), "h01")[1].fences
    (writer,) = run(sample("h13_named_barrier_handoff_writer_side"), "h13")[1].fences
    assert (issuer.placement, writer.placement) == ("inline", "writer")
    ((issuer_pair,), (writer_pair,)) = issuer.pairs, writer.pairs
    assert (issuer_pair.access.text, issuer_pair.op.text) == (writer_pair.access.text, writer_pair.op.text) == (
        "@%p3 st.shared.v4.b32", "wgmma.mma_async")
    assert "bar.arrive" in issuer.reason() and "bar.sync" in writer.reason()

def test_track_global_and_shared_need_the_full_fence():
    text = sample("x08_global_store_then_tma_load").replace(
        "\tst.global.u32 \t[%rd5], %r0;", "\tst.global.u32 \t[%rd5], %r0;\n\tst.shared.u32 \t[%r1], %r0;")
    assert [f.text for f in run(text, "x08")[1].fences] == ["fence.proxy.async;"]


def test_report_reasons_and_paths():
    _, report = run(sample("15_hoist_out_of_while_loop"), "15")
    (fence,) = report.fences
    assert (fence.placement, fence.where, fence.line) == ("loop", "after", 35)
    (pair,) = fence.pairs
    assert (pair.access.line, pair.access.text, pair.op.line) == (33, "st.shared.b16", 41)
    assert [p.line for p in pair.path] == [33, 36, 40, 41]
    assert pair.path_text() == "line 33 (st.shared.b16) -> line 36 (H) -> line 40 -> line 41 (wgmma.mma_async)"
    _, report = run(sample("x06_call_func_that_starts_with_wgmma"), "x06")
    (fence,) = report.fences
    (pair,) = fence.pairs
    assert fence.placement == "call" and pair.op.line == 21 and pair.access.line < fence.line
    assert "may reach the async-proxy access at line 21 (wgmma.mma_async)" in fence.reason()


def test_a_witness_that_starts_at_an_arrive_says_the_hand_offs_before_it_are_not_shown():
    """Handed on more often than a witness follows, the access reaches the first arrive
    the witness shows through other threads: the reason must not say it was handed to
    the issuer through that arrive alone."""
    at, op = Place(7, 2, "st.shared.u32"), Place(21, 2, "wgmma.mma_async")
    arrive, wait = Place(8, 2, "bar.arrive"), Place(20, 2, "bar.sync")
    traced = AccessPair("raw", "shared::cta", at, op, handoff=(arrive, wait), path=(at, arrive, wait, op))
    handed = ", handed to the issuing thread through line 8 (bar.arrive) and line 20 (bar.sync) with"
    assert handed in traced.reason()
    untraced = traced._replace(path=(arrive, wait, op)).reason()
    assert ", handed to the issuing thread through hand-offs not shown, then line 8 (bar.arrive) and" in untraced

def test_a_pair_names_the_bytes_that_meet():
    """h35b: warp 6 stores 8 bytes a lane at smem + 512 + 8 * lane, warps 8-11 at 1024 and
    on, to 2040; the pending class is their hull, to 2048. The copy's box is the 1024
    bytes armed on "full", from smem + 0. --explain and the JSON say both."""
    (fence,) = run(sample("h35b_switch_default_a_warp_takes"), "h35b", rewrite=False)[1].fences
    (pair,) = fence.pairs
    assert (pair.access_bytes, pair.op_bytes) == ("smem[512:2048]", ("smem[0:1024]",))
    assert "\n    bytes: the access, smem[512:2048]; the operation, smem[0:1024]" in fence.explain()
    assert pair.to_json()["op_bytes"] == ["smem[0:1024]"]  # a list, as it reads back from JSON
    (wide,) = run(sample("x14b_generic_store_pointer_may_be_shared"), "x14b", rewrite=False)[1].fences
    assert wide.pairs[0].access_bytes == "anywhere in shared::cta"  # a pointer the analysis cannot place
    (init,) = run(sample("h29a_cluster_mbarrier_init_unreleased"), "h29a", rewrite=False)[1].fences
    assert init.pairs[0].op_bytes == (init.pairs[0].access_bytes,)  # the copy meets the init at its mbarrier

def test_one_fence_lists_every_pair_it_orders():
    """13 hoists one fence before the branch for the wgmma of each arm: one report, two
    pairs, each with its own witness."""
    (fence,) = run(sample("13_hoist_out_of_if"), "13")[1].fences
    assert [(p.access.line, p.op.line, p.hazard) for p in fence.pairs] == [(32, 36, "raw"), (32, 39, "raw")]
    assert [p.path_text() for p in fence.pairs] == [
        "line 32 (st.shared.b16) -> line 36 (wgmma.mma_async)",
        "line 32 (st.shared.b16) -> line 38 (E) -> line 39 (wgmma.mma_async)"]
    assert fence.reason().endswith("with no proxy fence in between (and 1 more async-proxy operation)")
    assert "it orders 2 pairs:\n    (1) the generic-proxy write at line 32" in fence.explain()


def test_a_fence_the_witness_passes_is_named_as_not_ordering_the_pair():
    """x01's ``@%p1 fence`` may not run: the store reaches the wgmma past it. The report
    names it rather than saying no fence lies in between; 13's witness passes none."""
    (fence,) = run(sample("x01_predicated_fence_does_not_count"), "x01", rewrite=False)[1].fences
    (pair,) = fence.pairs
    assert [place.line for place in pair.fences] == [33]
    assert pair.reason().endswith("with no proxy fence in between that orders it "
                                  "(line 33 (@%p1 fence.proxy.async.shared::cta) does not)")
    assert pair.to_json()["fences"] == [{"line": 33, "column": 2, "text": "@%p1 fence.proxy.async.shared::cta"}]
    assert all(not pair.fences for pair in run(sample("13_hoist_out_of_if"), "13")[1].fences[0].pairs)


def test_created_preheader_is_reported():
    fenced, report = run(sample("x16_created_preheader"), "x16")
    (fence,) = report.fences
    assert fence.created_label == "$ptxkit_preheader_0" and "@%p1 bra \t$ptxkit_preheader_0;" in fenced


def test_planning_leaves_the_graph_as_built():
    """A preheader still to be made is a place on the loop's entry edges: planning adds no
    block and keeps what was derived from the graph; the plan is frozen."""
    from ptxkit.cfg.fence.placement import Placement, plan_fences
    from ptxkit.cfg.fence.proxy import KernelAnalysis
    from ptxkit.cfg.flow.dominance import DominatorTree

    analysis = KernelAnalysis(ptxkit.parse(sample("x16_created_preheader"), "x16").function("k"),
                              FenceOptions().analysis)
    flow = analysis.flow
    shape, dominators = ([list(s) for s in flow.succ], [list(p) for p in flow.pred], dict(flow.kinds)), \
        DominatorTree.of(flow)
    (plan,), solution = plan_fences(analysis)
    assert plan.placement is Placement.LOOP and plan.on_entry_edges and plan.block == plan.loop.header
    assert ([list(s) for s in flow.succ], [list(p) for p in flow.pred], dict(flow.kinds)) == shape
    assert len(flow.blocks) == len(analysis.events) == 4 and DominatorTree.of(flow) is dominators
    before, after = solution.edge_states(plan.block)
    assert analysis.pending(before) and not analysis.pending(after)  # the writes before the loop, then fenced
    with pytest.raises(AttributeError):
        plan.block = 0


def _analyses(name: str, **override):
    """The analysis of each kernel of sample `name` (its calls inlined), and the options
    the sample asks for, with `override`."""
    from ptxkit.cfg.fence.proxy import KernelAnalysis
    from ptxkit.cfg.flow.inline import inlined_graph

    text = sample(name)
    options = options_of(text)._replace(**override)
    module = ptxkit.parse(text, f"{name}.ptx")
    functions = {f.name: f for f in module.functions if not f.is_declaration}
    return [KernelAnalysis(f, options.analysis, flow=inlined_graph(f, functions))
            for f in functions.values() if f.kind == "entry"], options


def _what_it_is(analysis) -> tuple:
    """The analysis's events (each block's list, its events by identity), fact tables,
    and what a solve once left in it (states, needy ops, fences on entry edges): none."""
    left = {name: copy.copy(getattr(analysis, name, None)) for name in ("ins", "outs", "needy", "edge_fences")}
    return ([(id(events), [id(event) for event in events]) for events in analysis.events],
            [(fact.index, fact.hazard, fact.location, list(fact.origins)) for fact in analysis.facts],
            dict(analysis.generated), dict(analysis._need_masks), dict(analysis._space_masks),
            dict(analysis._hazard_masks), analysis._crediting_ids, dict(analysis._export_limits),
            dict(analysis._fenced_before_copies), dict(analysis._hearers), left)


#: samples whose planning adds and drops fences: a preheader the edits create, a loop and a
#: branch hoist, init fences, fences after the accesses replacing hoisted ones, a call site,
#: writer-side fences
PLANNED = [("x16_created_preheader", {}), ("14b_hoist_out_of_loop", {}), ("13_hoist_out_of_if", {}),
           ("h29a_cluster_mbarrier_init_unreleased", {}), ("x23_three_reports_one_suppressed", {}),
           ("h14b_one_thread_fences_only_sometimes", {}), ("x06_call_func_that_starts_with_wgmma", {}),
           ("h08b_stage_ring_separate_area", {"fence_side": "writer"})]


@pytest.mark.parametrize("name, override", PLANNED)
def test_planning_leaves_the_analysis_as_built(name, override):
    """What the function is stays as construction made it while planning solves with
    fences added and dropped: the planned fences live in the solutions (docs/fence.md §6.4)."""
    from ptxkit.cfg.fence.placement import plan_fences

    analyses, options = _analyses(name, **override)
    for analysis in analyses:
        before = _what_it_is(analysis)
        plan_fences(analysis, options.placement, options.fence_side)
        assert _what_it_is(analysis) == before


def _solved_state(solution) -> tuple:
    return (solution.fences, list(solution.ins), list(solution.outs), dict(solution.needy),
            dict(solution.imports), dict(solution.exports), dict(solution._reasons), dict(solution._need_masks),
            [[id(event) for event in events] for events in solution.events],
            {header: list(on_edges) for header, on_edges in solution.edge_fences.items()},
            [(need.block, id(need.event), need.pending, need.cover, need.state) for need in solution.needs()])


@pytest.mark.parametrize("name, override", PLANNED)
def test_solving_with_the_same_fences_gives_the_same_solution(name, override):
    """A solve returns a new solution and leaves the one it started from as it was:
    solving twice with the planned fences gives equal solutions, and the solution
    without fences, and the plan's own, are what they were."""
    from ptxkit.cfg.fence.placement import plan_fences

    analyses, options = _analyses(name, **override)
    for analysis in analyses:
        bare = analysis.solve()
        _, final = plan_fences(analysis, options.placement, options.fence_side)
        bare_state, final_state = _solved_state(bare), _solved_state(final)
        once, twice = analysis.solve(final.fences), analysis.solve(final.fences)
        assert _solved_state(once) == _solved_state(twice)
        assert bare.with_fences(final.fences).needs() == once.needs()
        assert (_solved_state(bare), _solved_state(final)) == (bare_state, final_state)


#: What a solve leaves in a solution: every reader must find these as the solve left them.
_SOLVED = ("fences", "events", "edge_fences", "needy", "_kills", "ins", "outs", "exports", "imports", "_reasons",
           "_need_masks", "_crediting_ids", "_crediting", "_meets", "_own_credit")


def _snapshot(solution) -> list:
    """Each of `solution`'s solved attributes with its entries, and theirs: the objects
    themselves, so that an entry written again, even with an equal value, shows."""
    def entries(value) -> list:
        if isinstance(value, dict):
            return [(key, entry, entries(entry)) for key, entry in value.items()]
        if isinstance(value, (list, tuple)):
            return [(index, entry, entries(entry)) for index, entry in enumerate(value)]
        return []
    return [(name, getattr(solution, name), entries(getattr(solution, name))) for name in _SOLVED]


def _same_objects(before: list, after: list) -> bool:
    """True when two snapshots (or entry lists) hold the same objects throughout."""
    return len(before) == len(after) and all(
        key == other_key and value is other and _same_objects(inner, other_inner)
        for (key, value, inner), (other_key, other, other_inner) in zip(before, after))


def _read_everything(solution) -> None:
    """Every reader of a solution's states, on every event and need it has."""
    for need in solution.needs():
        solution.explain(need)
    list(solution.walk())
    list(solution.walk(solution.needy.keys()))
    solution.in_flight()
    for block, events in enumerate(solution.events):
        solution.generated_spaces(block)
        for event in events:
            solution.pending_before(block, event)
    for header, on_edges in solution.edge_fences.items():
        solution.edge_states(header)
        for _, event in on_edges:
            solution.pending_before(header, event)


#: Samples with arrives, several needs, credit (h14b), a cluster hand-off (h28b), inits (h29a),
#: and a fence on a loop's entry edges (x16).
READ = ["h14b_one_thread_fences_only_sometimes", "h25b_descriptor_ring_write_inside_a_stage",
        "x23_three_reports_one_suppressed", "h02_mbarrier_handoff_to_wgmma", "h01_named_barrier_handoff_to_wgmma",
        "h17_roles_in_sequence_loop_handoff", "h28b_cluster_barrier_handoff_to_multicast_copy",
        "h29a_cluster_mbarrier_init_unreleased", "x16_created_preheader"]


@pytest.mark.parametrize("name", READ)
def test_reading_a_solution_writes_nothing_into_it(name):
    """The readers (`needs`, `explain`, `walk`, `in_flight`, `pending_before`,
    `generated_spaces`, `edge_states`) replay the solved states and leave every
    attribute a solve set as it was, down to the objects in it: an arrive's exports
    are recorded by the fixpoint alone (docs/fence.md §6.4). Checked on the solution
    without fences and on the plan's."""
    from ptxkit.cfg.fence.placement import plan_fences

    analyses, options = _analyses(name)
    for analysis in analyses:
        bare = analysis.solve()
        solutions = [bare, plan_fences(analysis, options.placement, options.fence_side)[1]]
        assert any(solution.exports or solution.edge_fences for solution in solutions)  # something to replay
        for solution in solutions:
            before = _snapshot(solution)
            _read_everything(solution)
            assert _same_objects(before, _snapshot(solution))


def test_the_drawing_shows_the_preheader_the_edits_create():
    """`ptxkit cfg` draws the graph as the edits leave it: the new block on the loop's
    entry edges, with the states on those edges and the fence in it."""
    from ptxkit.cli.cfg_cmd import summarise

    lines = summarise(ptxkit.parse(sample("x16_created_preheader"), "x16"), FenceOptions()).splitlines()
    assert lines[0] == "entry k: 5 blocks, 1 fence to insert"
    assert [line.split()[:3] for line in lines[1:3]] == [["B0", "line", "25"], ["B1", "line", "38"]]
    assert "-> B4, B1" in lines[1] and "-> B4 " in lines[2] and "-> L, B3" in lines[3]
    assert lines[5].split("in:") == ["  B4               line -      -> L                        ",
                                     " 2 writes made here (shared::cta)"]
    assert lines[6].strip() == "+ fence.proxy.async.shared::cta; before line 39 (loop)"


def test_warnings():
    _, report = run(sample("02b_cp_async_without_wait"), "02b")
    assert [w.line for w in report.warnings] == [37] and "in flight" in report.warnings[0].text
    # a ring whose wait leaves only the next stage in flight; one that leaves the stage read (x24a, x24b)
    assert run(sample("x24a_cp_async_ring_waits_for_the_stage_it_reads"), "x24a")[1].warnings == []
    _, report = run(sample("x24b_cp_async_ring_reads_a_stage_still_in_flight"), "x24b")
    assert [(w.line, w.text.split(" may still")[0]) for w in report.warnings] == \
        [(60, "the cp.async write at line 32")]  # stage 0's first copy, pending in trip 0
    # the ptxas wrapper and the Triton hook show no warnings, and ask for none
    text = sample("02b_cp_async_without_wait")
    quiet = fence_module(ptxkit.parse(text, "02b.ptx"), options_of(text), rewrite=False, warn=False)
    assert quiet.warnings == [] and [f.line for f in quiet.fences] == [f.line for f in run(text, "02b")[1].fences]
    assert run(sample("02_cp_async_then_wgmma"), "02")[1].warnings == []
    text = sample("07_wgmma_marked_async").replace("wgmma.mma_async.sync", "wgmma.mma_async_v2.sync")
    fenced, report = run(text, "07")
    assert "unknown async-looking opcode" in report.warnings[0].text and len(report.fences) == 1


@pytest.mark.pure  # patches a constant the compiled module reads directly
def test_an_in_flight_warning_says_when_the_stage_search_gave_up(monkeypatch):
    """Past its budget the search names no copy; the warning says why it stands."""
    monkeypatch.setattr(groups, "_STEPS", 10)
    _, report = run(sample("x24b_cp_async_ring_reads_a_stage_still_in_flight"), "x24b")
    assert [w.line for w in report.warnings] == [60]
    assert report.warnings[0].text.startswith("a cp.async write may still be in flight here (")
    assert "the search that tells a ring's stages apart gave up" in report.warnings[0].text


def test_library_contract():
    """The API the ptxas wrapper codes against (handoff/contract_fence.md)."""
    text = sample("07_wgmma_marked_async")
    module = ptxkit.parse(text, "k.ptx")
    report = fence_module(module, FenceOptions(placement="hoist", fence_variant=None, extern_policy="clobber"),
                          rewrite=False)
    assert str(module) == text and not report.changed and report.skipped is None
    (fence,) = report.missing
    assert (fence.line, fence.column, fence.where, fence.variant) == (34, 2, "before", "fence.proxy.async.shared::cta")
    report = fence_module(module, FenceOptions())
    assert report.changed and report.missing == [] and str(module) == expected("07_wgmma_marked_async")
    assert report.to_json()["fences"][0]["pairs"][0]["path"][0]["line"] == 32


#: h21b: a -G build, solved in rounds; h26: values thread by thread; x05: an inlined call
FREED = ["h21b_debug_descriptor_write_inside_tile", "h26_lane_zero_index_broadcast_to_every_lane",
         "x05_call_func_that_writes_shared", "h08a_stage_ring_handoff"]


@pytest.mark.pure  # compiled classes take no weak references, and compiled code runs no patched __init__
@pytest.mark.parametrize("name", FREED)
def test_the_analyses_go_with_the_last_reference(name, monkeypatch):
    # nothing the pass builds refers back to itself: with the cyclic collector off, reference
    # counting alone frees every analysis, and the symbol tables the graphs kept for them, when the
    # report is dropped, and a collection then finds nothing (the module is kept: its tree of
    # parents and children is cyclic by design)
    from ptxkit.cfg.fence.proxy import KernelAnalysis
    from ptxkit.cfg.values.registers import _Analysis
    from ptxkit.cfg.values.symbols import SymbolTables

    made = []
    for kind in (_Analysis, KernelAnalysis, SymbolTables):
        def traced(self, *args, __init__=kind.__init__, **kwargs):
            made.append((type(self), weakref.ref(self)))
            __init__(self, *args, **kwargs)
        monkeypatch.setattr(kind, "__init__", traced)
    module = ptxkit.parse(sample(name), "k.ptx")
    fence_module(module, FenceOptions(), rewrite=False)  # what a first call imports and caches
    gc.collect()
    made.clear()
    gc.disable()
    try:
        report = fence_module(module, FenceOptions(), rewrite=False)
        assert report.missing and {kind for kind, _ in made} == {_Analysis, KernelAnalysis, SymbolTables}
        del report
        left = [ref() for _, ref in made if ref() is not None]
        collected = gc.collect()
    finally:
        gc.enable()
    assert left == [] and collected == 0


@pytest.mark.parametrize("name", FREED)
def test_a_dropped_report_leaves_nothing_behind(name):
    """What a compiled core can show too: after a first call (imports, caches), a call
    whose report is dropped leaves not one object more, once collected."""
    module = ptxkit.parse(sample(name), "k.ptx")
    fence_module(module, FenceOptions(), rewrite=False)
    gc.collect()
    before = len(gc.get_objects())
    report = fence_module(module, FenceOptions(), rewrite=False)
    assert report.missing
    del report
    gc.collect()
    assert len(gc.get_objects()) <= before  # fewer where the call let an older cache entry go


#: A value computed twice (``x % 1024`` tested, then computed again, as a ``-G`` build does):
#: the second one's rule is narrowed by the first's (`cfg/values/counters.py`, `twin_of`).
COMPUTED_TWICE = """.version 8.0
.target sm_90a
.address_size 64

.visible .entry k(.param .u64 desc)
{
	.reg .b32 %r<8>;
	.reg .b64 %rd<4>;
	.reg .pred %p<2>;
	.reg .f32 %f<2>;
	.shared .align 1024 .b8 buf[4096];

	mov.u32 %r1, %tid.x;
	rem.u32 %r2, %r1, 1024;
	setp.lt.u32 %p1, %r2, 512;
	@!%p1 bra DONE;
	rem.u32 %r3, %r1, 1024;
	mov.u32 %r4, buf;
	add.s32 %r5, %r4, %r3;
	st.shared.u8 [%r5], 1;
	ld.param.u64 %rd1, [desc];
	wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%f0, %f1, %f0, %f1}, %rd1, %rd1, 1, 1, 1, 0, 0;
DONE:
	ret;
}
"""

#: Inputs whose analyses made reference cycles in the compiled core before its callbacks
#: were made partials (docs/architecture.md §5): linear sums (09), an instruction's list of
#: event builders (01), the thread-by-thread descent (h08a), the count of cluster barrier
#: phases (h12a), a rounded-up base (h15a), fences on a loop's entry edges (x16), a value
#: computed twice, a descriptor packed from its halves under a known high word (h09a).
NO_CYCLES = ["09_regression_0219_fence", "01_async_to_generic_no_double_fence", "h08a_stage_ring_handoff",
             "h12a_cluster_handoff_to_wgmma", "h15a_rounded_up_base_separate_buffers", "x16_created_preheader",
             "computed twice", "h09a_dynamic_descriptor_write_elsewhere"]


@pytest.mark.parametrize("name", NO_CYCLES)
def test_the_pass_makes_no_reference_cycle(name):
    """Both trees: with the cyclic collector off, a call whose report is dropped leaves it
    nothing to collect. Everything the pass built went back by reference counting, so a
    library call's memory returns when its result goes (compiled, a closure that a variable
    of its own environment holds, or one that names a sibling, is a cycle)."""
    text = COMPUTED_TWICE if name == "computed twice" else sample(name)
    module = ptxkit.parse(text, "k.ptx")
    fence_module(module, FenceOptions(), rewrite=False)  # what a first call imports and caches
    gc.collect()
    gc.disable()
    try:
        report = fence_module(module, FenceOptions(), rewrite=False)
        del report
        collected = gc.collect()
    finally:
        gc.enable()
    assert collected == 0


def test_the_library_leaves_the_collector_as_its_caller_set_it(monkeypatch):
    """Parsing (its lazy statement runs scanned inside the pass, or all at once by `check`),
    the flow graphs and the pass, edits included, neither pause, tune nor run Python's
    cyclic collector: a caller that turned it off or tuned it keeps it so (the command
    line's policy, `ptxkit._gc`, is for its own processes)."""
    from ptxkit.cfg.fence.fence import analyse_module

    switched = []
    for name in ("disable", "enable", "freeze", "unfreeze", "set_threshold", "collect"):
        monkeypatch.setattr(gc, name, lambda *args, name=name: switched.append(name))
    module = ptxkit.parse(sample("14b_hoist_out_of_loop"), "k.ptx")
    report = fence_module(module)
    drawn = [result.planned_graph() for result in analyse_module(ptxkit.parse(str(module)).check(), everything=True)]
    module.release()
    assert report.changed and drawn and switched == []


@pytest.mark.ptxas
def test_the_kernel_computed_twice_assembles():
    from ptxkit.ptxas import assemble

    assert assemble(COMPUTED_TWICE, arch="sm_90a", cache=False)


@pytest.mark.pure  # compiled classes take no weak references, and compiled code runs no patched __init__
@pytest.mark.parametrize("name", ["h21b_debug_descriptor_write_inside_tile", "06b_tma_store_after_shared_store"])
def test_one_analysis_at_a_time(name, monkeypatch):
    # fence_module keeps only the report entries and edits of each kernel: by the time the next
    # kernel's analysis is built, reference counting alone has freed the one before, so the pass's
    # memory peaks at its largest kernel's, not at the sum over the module's kernels; and the
    # register analysis that first finds the tensor copies' alignment (06b) is gone before the
    # second one starts
    from ptxkit.cfg.fence.proxy import KernelAnalysis
    from ptxkit.cfg.values.registers import _Analysis

    made: dict[type, list[weakref.ref]] = {KernelAnalysis: [], _Analysis: []}
    alive_at_each_start: dict[type, list[int]] = {KernelAnalysis: [], _Analysis: []}
    for kind in made:
        def traced(self, *args, __init__=kind.__init__, __kind=kind, **kwargs):
            alive_at_each_start[__kind].append(sum(ref() is not None for ref in made[__kind]))
            made[__kind].append(weakref.ref(self))
            __init__(self, *args, **kwargs)
        monkeypatch.setattr(kind, "__init__", traced)
    text = sample(name)
    head, body = text.split(".address_size 64\n", 1)
    kernels = [body.replace(".entry k(", f".entry k{n}(") for n in range(3)]
    module = ptxkit.parse(head + ".address_size 64\n" + "".join(kernels), "k.ptx")
    gc.disable()
    try:
        report = fence_module(module, FenceOptions(), rewrite=False)
    finally:
        gc.enable()
    assert alive_at_each_start[KernelAnalysis] == [0, 0, 0]
    assert len(alive_at_each_start[_Analysis]) >= 3 and set(alive_at_each_start[_Analysis]) == {0}
    assert sorted({fence.function for fence in report.fences}) == ["k0", "k1", "k2"]


def test_the_module_goes_with_its_last_reference():
    # nothing the pass keeps outside what it returns holds the module (its symbol tables and
    # templates used to stay, with the module, until the next module was analysed)
    module = ptxkit.parse(sample("h21b_debug_descriptor_write_inside_tile"), "kept.ptx")
    assert fence_module(module, FenceOptions(), rewrite=False).missing
    del module
    gc.collect()
    assert not [m for m in gc.get_objects() if type(m) is ptxkit.Module and m.filename == "kept.ptx"]


def test_bad_options_and_input():
    with pytest.raises(ValueError, match="placement"):
        FenceOptions(placement="everywhere")
    with pytest.raises(ValueError, match="fence_variant"):
        FenceOptions(fence_variant="shared")
    with pytest.raises(ValueError, match="extern_policy"):
        FenceOptions(extern_policy="maybe")
    with pytest.raises(ValueError, match="max_cluster"):
        FenceOptions(max_cluster=32)
    bad = sample("13_hoist_out_of_if").replace("@!%p1 bra \tE;", "@!%p1 bra \tNOWHERE;")
    with pytest.raises(ptxkit.PtxSyntaxError, match="'NOWHERE' is not a label in scope") as err:
        fence_text(bad, "k.ptx")
    assert err.value.line == 35


def test_kernels_without_async_ops_or_calls_are_not_analysed():
    from ptxkit.cfg.fence.fence import analyse_module

    quiet = sample("x07_global_store_through_param_pointer").replace("wgmma.fence.sync.aligned;", "").replace(
        "wgmma.mma_async", "mma_removed")
    quiet = re.sub(r"\tmma_removed[^\n]*\n", "", quiet)
    module = ptxkit.parse(quiet + sample("07_wgmma_marked_async").split(".address_size 64\n", 1)[1]
                          .replace(".entry k(", ".entry k2("))
    assert [r.analysis.function.name for r in analyse_module(module)] == ["k2"]
    assert [r.analysis.function.name for r in analyse_module(module, everything=True)] == ["k", "k2"]
    assert len(fence_module(module).fences) == 1


def _skipped_by_the_text_shortcut() -> list:
    from ptxkit.isa import may_need_fence

    return [path for path in sorted(SAMPLES.rglob("*.ptx")) if not may_need_fence(path.read_text())]


@pytest.mark.parametrize("path", _skipped_by_the_text_shortcut(), ids=lambda path: str(path.relative_to(SAMPLES)))
def test_the_text_shortcut_never_hides_a_fence(path):
    """Where `may_need_fence` lets the CLI skip the pass (no async-proxy opcode or call
    in the text: plain and cp.async kernels, the target and version gates), the pass
    itself finds nothing to fence or warn about."""
    _, report = fence_text(path.read_text(), rewrite=False)
    assert not report.fences and not report.warnings


#: Triton 3.6's own PTX for kernels written here (samples/triton/ws_kernels.py, compiled by
#: samples/triton/generate.py), read by hand: their mbarrier inits are published by bar.sync
#: with no fence after them, which they need none of (the copies reach their barriers through
#: the generic proxy: PTX ISA, "cp.async.bulk.tensor"); the attention's K/V stage barriers are
#: armed before the kernel's own fence (132) and bar.sync 0, which every K/V load follows
#: (docs/fence.md §4.6); the matmuls' epilogue stmatrix tile is fenced before bar.sync 2 and its
#: TMA store, in a partition of the warp-specialization loop (docs/fence.md §4.2); each TMA
#: load's stage and barrier follow the stage count that runs on across tiles
#: (docs/fence.md §3.1), so the tensormap staging words and the WS state are not hit.
TRITON_WS = ("attention_forward_128", "matmul_in_kernel_descriptors_ws", "matmul_persistent_ws")


@pytest.mark.parametrize("name", TRITON_WS)
def test_triton_warp_specialized_kernels_need_no_fence(name):
    text = (SAMPLES / "triton" / "ws" / f"{name}.ptx").read_text()
    _, report = fence_text(text, f"{name}.ptx")
    assert report.fences == [] and report.warnings == []


def renumber_registers(text: str) -> str:
    """`text` with each %register it declares renamed %1, %2, … in the order declared (one
    name each: ptxas reads `%<N>` as no range), as a tool that numbers registers writes."""
    names: dict[str, str] = {}
    for node in ptxkit.parse(text).walk():
        declaration = node.declaration if isinstance(node, Directive) and node.name == ".reg" else None
        for register in declaration.registers() if declaration is not None else ():
            if register[0] == "%":
                names.setdefault(register, f"%{len(names) + 1}")

    def declare(match):
        declaration = parse_statement(match.group(2)).declaration
        if not all(register in names for register in declaration.registers()):
            return match.group()  # inline assembly's registers declared without %
        renamed = ", ".join(names[register] for register in declaration.registers())
        return f"{match.group(1)}.reg {declaration.type} {renamed};"

    text = re.sub(r"(?m)^([ \t]*)(\.reg\b[^;]*;)", declare, text)
    return re.sub(r"%[A-Za-z_$][\w$]*(?![\w$])", lambda match: names.get(match.group(), match.group()), text)


TRITON_TMA = ["matmul_tma_128x64x64", "matmul_tma_128x128x64", *(f"ws/{name}" for name in TRITON_WS)]


@pytest.mark.parametrize("name", TRITON_TMA)
def test_registers_named_by_numbers_get_the_same_fences(name, tmp_path):
    """Triton's TMA kernels, their own proxy fences taken out (each then needs some), with
    every register renamed %1, %2, …: the same fences at the same lines, with the same
    verdict from `ptxkit fence --check`."""
    from ptxkit.cli.main import main

    text = "".join(line for line in (SAMPLES / "triton" / f"{name}.ptx").read_text().splitlines(keepends=True)
                   if "fence.proxy.async" not in line)
    renamed = renumber_registers(text)
    assert "%r1," not in renamed and "%237" in renamed
    fenced, report = fence_text(text, "original.ptx")
    fenced_renamed, report_renamed = fence_text(renamed, "renamed.ptx")
    assert report.fences and fenced_renamed == renumber_registers(fenced)
    assert [(f.line, f.hazard, f.variant) for f in report_renamed.fences] == \
        [(f.line, f.hazard, f.variant) for f in report.fences]
    (tmp_path / "original.ptx").write_text(text)
    (tmp_path / "renamed.ptx").write_text(renamed)
    assert main(["fence", "--check", str(tmp_path / "original.ptx")]) == 1
    assert main(["fence", "--check", str(tmp_path / "renamed.ptx")]) == 1


@pytest.mark.ptxas
def test_a_kernel_with_registers_named_by_numbers_assembles_fenced():
    from ptxkit.ptxas import assemble

    renamed = renumber_registers((SAMPLES / "triton" / "matmul_tma_128x64x64.ptx").read_text())
    fenced, _ = fence_text(renamed, "renamed.ptx")
    assemble(fenced, "sm_90a", options=("-c",), filename="renamed.ptx", cache=False)  # raises PtxasError if not


def test_a_fence_after_the_inits_names_the_init_it_orders():
    """h29a with the multicast copy's destination read first: the copy waits on the
    unreleased init and on the read. The release after the init orders the init only, so
    its pair names the init; the read gets the proxy fence before the copy, its own pair."""
    text = sample("h29a_cluster_mbarrier_init_unreleased").replace(
        "\tmov.b16 \t%h1, 3;\n", "\tmov.b16 \t%h1, 3;\n\tld.shared.u32 \t%r4, [%r1];\n")
    report = run(text, "h29a", rewrite=False)[1]
    assert [(f.text, [(p.hazard, p.access.text, p.op.line) for p in f.pairs]) for f in report.fences] == [
        (RELEASE_INITS, [("mbarrier-init-cluster", "@%p1 mbarrier.init.shared::cta.b64", 47)]),
        ("@%p1 " + CTA, [("war", "ld.shared.u32", 47)])]


def test_the_fences_after_each_run_of_inits_take_their_witnesses_with_the_earlier_ones_in_place():
    """h29a with a second barrier, initialised after a ``bar.sync`` that hands the first
    init to thread 32, which issues the copy on it: one fence after the last init leaves
    the first handed over unreleased, so each run of inits gets its own fence. The second
    fence's witnesses are read with the first fence in the events and the states of the
    solve before the split (`Solution.seen_with`): solved with the first fence, the init
    at line 40 is released before the hand-off, and the pair for the copy at line 49
    would name no init."""
    text = sample("h29a_cluster_mbarrier_init_unreleased").replace(
        "\t@%p1 mbarrier.init.shared::cta.b64 \t[%r1+16384], 1;\n",
        "\t@%p1 mbarrier.init.shared::cta.b64 \t[%r1+16384], 1;\n\tbar.sync \t0;\n"
        "\t@%p1 mbarrier.init.shared::cta.b64 \t[%r1+16392], 1;\n").replace(
        "\t@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 \t_, [%r1+16384], 32768;\n\t@%p1 cp.async",
        "\tsetp.eq.u32 \t%p3, %r2, 32;\n\t@%p3 mbarrier.arrive.expect_tx.shared::cta.b64 \t_, [%r1+16384], 32768;\n"
        "\t@%p3 cp.async").replace(
        "\tmov.u32 \t%r3, 0;\n",
        "\t@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 \t_, [%r1+16392], 32768;\n\t@%p1 cp.async.bulk.tensor.2d"
        ".shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r1+8192], [%rd1, {%r2, %r2}], "
        "[%r1+16392], %h1;\n\tmov.u32 \t%r3, 0;\n")
    report = run(text, "h29a", rewrite=False)[1]
    assert [[(p.access.line if p.access else None, [place.line for place in p.handoff or ()], p.op.line)
             for p in fence.pairs] for fence in report.fences] == [[(40, [], 49)], [(40, [43, 44], 49), (42, [], 51)]]


#: 128 threads store their word of `buf` and meet at bar.sync 0; threads 0, 32 and 64, each
#: in its own branch, TMA-store the buffer, and thread 0 first stores `other` and then
#: TMA-stores it too, after its copy of `buf`.
THREE_ISSUERS_AND_OTHER = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 k_tmap[128])
.reqntid 128, 1, 1
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<4>;
.shared .align 128 .b8 buf[2048];
.shared .align 128 .b8 other[128];
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, buf;
\tshl.b32 %r3, %r1, 4;
\tadd.s32 %r4, %r2, %r3;
\tmov.u32 %r6, 0;
\tst.shared.v4.b32 [%r4], {%r6, %r6, %r6, %r6};
\tbar.sync 0;
\tmov.u64 %rd1, k_tmap;
\tmov.u32 %r7, other;
\tsetp.eq.u32 %p1, %r1, 0;
\t@!%p1 bra NOT0;
\tst.shared.u32 [%r7], %r6;
\tcp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, 0}], [%r2];
\tcp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, 96}], [%r7];
\tbra.uni DONE;
NOT0:
\tsetp.eq.u32 %p2, %r1, 32;
\t@!%p2 bra NOT32;
\tcp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, 32}], [%r2];
\tbra.uni DONE;
NOT32:
\tsetp.eq.u32 %p3, %r1, 64;
\t@!%p3 bra DONE;
\tcp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, 64}], [%r2];
DONE:
\tret;
}
"""


@pytest.mark.ptxas
def test_fences_after_the_accesses_serve_what_the_issuer_fences_ordered_on_the_way():
    """docs/fence.md §6.2: the three issuers' fences give way to one after the stores of
    `buf`; but thread 0's fence also ordered its store of `other` before its copy of
    `other` (it lies on the way), so that store gets a fence after it too, serving that
    copy: two fences, not three (three before: the copy of `other` was not asked about)."""
    from ptxkit.ptxas import assemble

    fenced, report = fence_text(THREE_ISSUERS_AND_OTHER, "k.ptx")
    lines = THREE_ISSUERS_AND_OTHER.splitlines()
    buf_stores, other_store = lines.index("\tst.shared.v4.b32 [%r4], {%r6, %r6, %r6, %r6};") + 1, \
        lines.index("\tst.shared.u32 [%r7], %r6;") + 1
    assert [(site.placement, site.where, site.line, len(site.pairs)) for site in report.fences] == [
        ("access", "after", buf_stores, 3), ("access", "after", other_store, 1)]
    assert report.fences[1].pairs[0].op.line == other_store + 2  # the copy of `other`
    assert not fence_text(fenced, "k.ptx", rewrite=False)[1].missing
    assemble(fenced, arch="sm_90a")


#: THREE_ISSUERS_AND_OTHER without `other`, and with `buf` twice as large: 128 threads store
#: the first half, meet at bar.sync 0, store the second half and meet again; threads 0, 32
#: and 64 each TMA-store the whole buffer. Each half is one run of stores a bar.sync ends.
TWO_RUNS_THREE_ISSUERS = THREE_ISSUERS_AND_OTHER.replace(
    ".shared .align 128 .b8 buf[2048];\n.shared .align 128 .b8 other[128];\n",
    ".shared .align 128 .b8 buf[4096];\n").replace(
    "\tbar.sync 0;\n", "\tbar.sync 0;\n\tst.shared.v4.b32 [%r4+2048], {%r6, %r6, %r6, %r6};\n\tbar.sync 0;\n").replace(
    "\tmov.u32 %r7, other;\n", "").replace("\tst.shared.u32 [%r7], %r6;\n", "").replace(
    "\tcp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, 96}], [%r7];\n", "")


def test_each_fence_after_a_run_of_accesses_names_an_access_of_its_own_run():
    """docs/fence.md §6.2: the three issuers' fences give way to one fence after each run
    of stores, and every copy reads both halves, so both fences serve all three copies.
    The pairs each lists start at its own run's store: the witnesses, taken before the
    runs were found, all started at the first half's store, and the fence after the
    second half named a store that the first fence orders (FlashInfer's fp8 prefill)."""
    lines = TWO_RUNS_THREE_ISSUERS.splitlines()
    first, second = (lines.index(f"\tst.shared.v4.b32 [%r4{offset}], {{%r6, %r6, %r6, %r6}};") + 1
                     for offset in ("", "+2048"))
    fenced, report = fence_text(TWO_RUNS_THREE_ISSUERS, "k.ptx")
    assert [(site.placement, site.where, site.line) for site in report.fences] == [
        ("access", "after", first), ("access", "after", second)]
    assert [[pair.access.line for pair in site.pairs] for site in report.fences] == [[first] * 3, [second] * 3]
    assert not fence_text(fenced, "k.ptx", rewrite=False)[1].missing


def test_a_writer_side_fence_before_a_guarded_arrive_is_unguarded():
    """h08b with the consumer's tile offset left undefined (found by the fuzz test): its
    wgmma may read the producer's scale stage, which threads 0-63 store and hand over at
    two arrives, one under ``@%p1`` and one under ``@!%p1``. The writer-side fence went
    before the first under its guard, which the analysis does not count for the arrive:
    the fenced output asked for the same fence again. It is unguarded now, and what the
    pass wrote needs nothing more."""
    text = sample("h08b_stage_ring_separate_area").replace("\tshl.b32 \t%r13, %r7, 12;\n", "", 1)
    fenced, report = run(text, "h08b", fence_side="writer")
    assert [(site.text, site.placement) for site in report.fences] == [(CTA, "writer")]
    assert not run(fenced, "h08b", rewrite=False, fence_side="writer")[1].missing


#: 128 threads store their word of `buf`, meet at bar.sync 0, and threads 0 and 32 each
#: TMA-store the buffer under their own guard: issuer side, two guarded fences.
TWO_ISSUERS = """.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .align 64 .b8 k_tmap[128], .param .u32 k_n)
.reqntid 128, 1, 1
{
.reg .pred %p<4>;
.reg .b32 %r<16>;
.reg .b64 %rd<4>;
.shared .align 128 .b8 buf[2048];
\tmov.u32 %r1, %tid.x;
\tmov.u32 %r2, buf;
\tshl.b32 %r3, %r1, 4;
\tadd.s32 %r4, %r2, %r3;
\tld.param.u32 %r5, [k_n];
\tmov.u32 %r6, 0;
LOOP:
\tst.shared.v4.b32 [%r4], {%r6, %r6, %r6, %r6};
\tadd.s32 %r6, %r6, 1;
\tsetp.lt.u32 %p3, %r6, %r5;
\t@%p3 bra LOOP;
\tbar.sync 0;
\tmov.u64 %rd1, k_tmap;
\tsetp.eq.u32 %p1, %r1, 0;
\tsetp.eq.u32 %p2, %r1, 32;
\t@%p1 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, 0}], [%r2];
\t@%p2 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd1, {%r6, 32}], [%r2];
\tret;
}
"""


@pytest.mark.ptxas
def test_one_fence_after_the_writes_replaces_a_fence_at_each_issuer(tmp_path):
    """docs/fence.md §6.2: the stores, not in a loop, get one fence right after them
    (each thread fences its own store before the bar.sync that hands it to both
    issuers); stored in every iteration of a loop, the fence would run in each one,
    so the two issuers keep theirs."""
    from ptxkit.ptxas import assemble

    straight = TWO_ISSUERS.replace("\t@%p3 bra LOOP;\n", "")
    fenced, report = fence_text(straight, "k.ptx")
    assert [(site.placement, site.where, site.line, len(site.pairs)) for site in report.fences] == [
        ("access", "after", 18, 2)]
    assemble(fenced, arch="sm_90a")
    fenced, report = fence_text(TWO_ISSUERS, "k.ptx")
    assert [(site.placement, site.text) for site in report.fences] == [
        ("inline", "@%p1 " + CTA), ("inline", "@%p2 " + CTA)]
