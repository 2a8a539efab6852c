"""The register-image harness (images through the layouts, replicas, sentinels), the
natural kernels and the oldest-target cases, on the simulator and ptxas."""

from __future__ import annotations

import numpy as np
import pytest

import conftest
import ptxkit
from ptxkit.generators import harness, natural, parity
from ptxkit.generators.dispatch import reduce_local
from ptxkit.generators.harness import ImageCase, TileSpec, fill
from ptxkit.generators.layout import R, S, TileLayout, laneid, warpid, wg_local_layout

GAPPED = TileSpec((32, 2, 2), "f32", TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]))
GAPPED_SUM = TileSpec((2, 2), "f32", TileLayout(S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid]))


def test_fill_puts_every_copy_in_its_slot_and_sentinels_in_gaps():
    values = np.arange(128, dtype=np.float64).reshape(1, 32, 2, 2)
    image = fill(GAPPED, values, 32)
    assert image.shape == (32, 7) and image.dtype == np.float32
    assert image[5].view(np.uint32)[[1, 3, 5]].tolist() == [harness.SENTINELS["f32"]] * 3
    assert image[5, [0, 2, 4, 6]].tolist() == [20, 22, 21, 23]  # A[5, i, j] in slot 2i + 4j
    replicated = fill(GAPPED_SUM, np.arange(4.0).reshape(1, 2, 2), 32)
    assert (replicated[:, [0, 2, 4, 6]] == [0, 2, 1, 3]).all()
    halves = fill(TileSpec((4,), "bf16"), np.array([[1.0, 2.0, -1.0, 0.5]]), 1)
    assert halves.dtype == np.uint16 and halves.tolist() == [[0x3F80, 0x4000, 0xBF80, 0x3F00]]
    with pytest.raises(ValueError, match="two elements in one slot"):
        fill(TileSpec((2,), "f32", TileLayout(S[2:0])), np.zeros((1, 2)), 1)


def test_threads_and_copies():
    assert ImageCase("t", TileSpec((4,)), TileSpec((1,)), None, copies=8).total_threads == 8
    assert ImageCase("w", GAPPED, GAPPED_SUM, None, copies=3).total_threads == 96
    assert ImageCase("g", TileSpec((128, 16), "f32", wg_local_layout(16)), None, None).threads == 128
    with pytest.raises(ValueError, match="several targets"):
        harness.module_text([ImageCase("a", TileSpec((4,)), TileSpec((1,)), lambda d, s: None),
                             ImageCase("b", TileSpec((4,)), TileSpec((1,)), lambda d, s: None, target="sm_80")])


def _gapped_case(generate):
    case = ImageCase("gapped", GAPPED, GAPPED_SUM, generate)
    a, b = case.inputs(np.random.default_rng(0))
    text = harness.module_text([case])
    if conftest.ptxas_available():
        ptxkit.assemble(text)
    return a, case.run(a, b, harness.simulator(text))


def test_every_replica_copy_and_gap_is_checked():
    a, run = _gapped_case(lambda d, s: reduce_local(d, s, op="sum", scope="warp"))
    assert run.values.shape == (1, 32, 4)
    run.assert_close(a.sum(axis=1), atol=1e-4)


def test_a_write_into_a_gap_is_caught():
    def sloppy(d, s):
        reduce_local(d, s, op="sum", scope="warp")
        d.builder.ins("mov.f32", d.regs[1], "0f00000000")  # slot 1 is a gap

    a, run = _gapped_case(sloppy)
    with pytest.raises(AssertionError, match="gap slots were written, e.g. thread 0 slot 1"):
        run.assert_close(a.sum(axis=1), atol=1e-4)


def test_a_wrong_lane_is_caught():
    def lane_seven_wrong(d, s):
        reduce_local(d, s, op="sum", scope="warp")
        b = d.builder
        lane, flag = b.reg(".b32"), b.reg(".pred")
        b.ins("mov.u32", lane, "%laneid")
        b.ins("setp.eq.u32", flag, lane, 7)
        b.ins("add.f32", d.regs[0], d.regs[0], "0f3F800000", guard=flag)

    a, run = _gapped_case(lane_seven_wrong)
    with pytest.raises(AssertionError, match="1 of 128 values off"):
        run.assert_close(a.sum(axis=1), atol=1e-4)


@pytest.fixture(scope="module")
def natural_module():
    return natural.module_text(natural.natural_cases())


@pytest.fixture(scope="module")
def natural_simulated(natural_module):
    return harness.simulator(natural_module)


@pytest.mark.parametrize("case", natural.natural_cases(), ids=lambda c: c.name)
def test_natural_kernels_on_the_simulator(case, natural_simulated):
    case.run_and_check(natural_simulated)


OLDEST = parity.oldest_target_cases()


@pytest.mark.parametrize("case", OLDEST, ids=lambda c: c.name)
def test_oldest_targets_on_the_simulator(case):
    case.run_and_check(harness.simulator(harness.module_text([case.case])))


@pytest.mark.ptxas
def test_natural_kernels_assemble(natural_module):
    cubin = ptxkit.assemble(natural_module, arch="sm_90a")
    assert len(cubin.resources) == len(natural.natural_cases())


@pytest.mark.ptxas
@pytest.mark.parametrize("target", sorted({c.case.target for c in OLDEST}))
def test_oldest_targets_assemble(target):
    cases = [c.case for c in OLDEST if c.case.target == target]
    text = harness.module_text(cases)
    assert f".target {target}" in text
    assert len(ptxkit.assemble(text, arch=target).resources) == len(cases)
