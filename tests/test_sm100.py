"""The sm_100 fast paths: their instruction forms and PTX versions, their results on the
simulator (chunks, remainders, accum, .ftz), and ptxas for sm_100a."""

from __future__ import annotations

import numpy as np
import pytest

import conftest
import ptxkit
from ptxkit.generators import harness, parity
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.dispatch import reduce_local
from ptxkit.generators.harness import ImageCase, TileSpec
from ptxkit.generators.regtile import RegTile
from ptxkit.generators.sm100 import gen_reduce_thread_max3, gen_reduce_thread_packed_sum

CASES = parity.sm100_cases()


def emitted(length, generate, target="sm_100a"):
    b = PtxBuilder(target)
    src, dst = RegTile(b, (length,), "f32"), RegTile(b, (1,), "f32")
    generate(dst, src)
    return b


@pytest.mark.parametrize("length, chunk_adds, scalar_adds", [(8, 0, 1), (16, 4, 1), (17, 4, 2), (63, 24, 8)])
def test_packed_sum_shape(length, chunk_adds, scalar_adds):
    b = emitted(length, lambda d, s: gen_reduce_thread_packed_sum(d, s))
    lines = b.instructions()
    assert b.version == (8, 6)
    assert sum(x.startswith("add.rn.ftz.f32x2") for x in lines) == chunk_adds + 3  # chunks, then the tree
    assert sum(x.startswith("add.f32") for x in lines) == scalar_adds  # remainder, then the final pair


def test_max3_shape():
    b = emitted(17, lambda d, s: gen_reduce_thread_max3(d, s, "max", accum=True))
    lines = b.instructions()
    assert b.version == (8, 8)
    three = [x for x in lines if x.count(",") == 3]
    assert len(three) == 1 + 4 + 1  # accum into t0, one more chunk of 4, the final combine
    assert three[0] == "max.NaN.f32 %f18, %f0, %f1, %f17;"  # t0 = max(src0, src1, old dst)
    ignoring = emitted(17, lambda d, s: gen_reduce_thread_max3(d, s, "max", nan="ignore")).instructions()
    assert sum(x.startswith("max.f32") and x.count(",") == 3 for x in ignoring) == 5


def test_fast_paths_refuse_what_they_cannot_do():
    with pytest.raises(ReductionError, match="need sm_100"):
        emitted(16, lambda d, s: gen_reduce_thread_packed_sum(d, s), target="sm_90a")
    with pytest.raises(ReductionError, match="need sm_100.*8\\+ elements"):
        emitted(7, lambda d, s: gen_reduce_thread_max3(d, s, "max"))
    with pytest.raises(ReductionError, match="reduces max or min, not sum"):
        emitted(16, lambda d, s: gen_reduce_thread_max3(d, s, "sum"))


def test_ftz_flushes_subnormal_inputs_where_path_1_keeps_them():
    tiny = float(np.float32(1e-40))  # a subnormal
    cases = [ImageCase(f"tiny_{t}", TileSpec((16,)), TileSpec((1,)), lambda d, s: reduce_local(d, s), target=t)
             for t in ("sm_100a", "sm_90a")]
    a = np.full((1, 16), tiny)
    b = np.zeros((1, 1))
    if conftest.ptxas_available():
        for case in cases:
            ptxkit.assemble(harness.module_text([case]), arch=case.target)
    flushed = cases[0].run(a, b, harness.simulator(harness.module_text(cases[:1])))
    kept = cases[1].run(a, b, harness.simulator(harness.module_text(cases[1:])))
    flushed.assert_close([[0.0]], atol=0)
    kept.assert_close([[16 * np.float32(tiny)]], atol=1e-45)
    assert kept.values[0, 0, 0] > 0


def test_a_dst_inside_src_is_written_last_and_accum_on_it_is_refused():
    """The fast paths read every src element before they write dst, so a dst in src's own
    registers needs no copy; with accum its old value would be src[0] itself."""
    cases = [ImageCase(f"first_of_itself_{op}", TileSpec((16,)), None,
                       lambda d, s, op=op: reduce_local(s[0:1], s, op=op), copies=2, target="sm_100a")
             for op in ("sum", "max")]
    text = harness.module_text(cases)
    assert "add.rn.ftz.f32x2" in text and "max.NaN.f32 %f0, %f0, %f" in text
    if conftest.ptxas_available():
        ptxkit.assemble(text, arch="sm_100a")
    a, _ = cases[0].inputs(np.random.default_rng(8))
    for case, total in zip(cases, (a.sum(axis=1), a.max(axis=1))):
        case.run(a, None, harness.simulator(text)).assert_close(np.concatenate([total[:, None], a[:, 1:]], axis=1),
                                                                atol=1e-5)
    b = PtxBuilder("sm_100a")
    tile = RegTile(b, (16,), "f32")
    with pytest.raises(ReductionError, match="would fold src's own values in again"):
        reduce_local(tile[0:1], tile, accum=True)


@pytest.fixture(scope="module")
def simulated():
    return harness.simulator(harness.module_text([c.case for c in CASES]))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_parity_on_the_simulator(case, simulated):
    case.run_and_check(simulated)


def test_dispatch_takes_the_fast_path_from_8_elements():
    module = harness.module_text([c.case for c in CASES])
    fast = [c for c in CASES if int(c.name.split("_")[2]) >= 8]
    assert ".version 8.8" in module and all(f".entry {c.name}(" in module for c in fast)
    assert "add.rn.ftz.f32x2" in module and "max.NaN.f32 %f" in module


@pytest.mark.ptxas
@pytest.mark.parametrize("arch", ["sm_100a", "sm_100"])
def test_fast_paths_assemble_for_sm100(arch):
    text = harness.module_text([c.case for c in CASES]).replace(".target sm_100a", f".target {arch}")
    cubin = ptxkit.assemble(text, arch=arch)
    assert len(cubin.resources) == len(CASES)


@pytest.mark.parametrize("op", ["max", "min"])
def test_the_nan_policy_on_the_three_input_path(op):
    """propagate (the default) gives NaN for a row with a NaN in any chunk or the remainder;
    ignore gives the extreme of the numbers. Assembled for sm_100a, run on the simulator."""
    cases = [ImageCase(f"nan_{op}_{policy}", TileSpec((19,)), TileSpec((1,)),
                       lambda d, s, policy=policy: reduce_local(d, s, op=op, nan=policy), copies=3, target="sm_100a")
             for policy in ("propagate", "ignore")]
    text = harness.module_text(cases)
    if conftest.ptxas_available():
        ptxkit.assemble(text, arch="sm_100a")
    a, b = cases[0].inputs(np.random.default_rng(4))  # rounded to f32
    a[0, 2], a[1, 17] = np.nan, np.nan  # in the first chunk; in the remainder; none in row 2
    run = harness.simulator(text)
    extreme = np.fmax.reduce if op == "max" else np.fmin.reduce
    propagated = cases[0].run(a, b, run)
    propagated.assert_close(np.where(np.isnan(a).any(1), np.nan, extreme(a, axis=1)).reshape(3, 1))
    cases[1].run(a, b, run).assert_close(extreme(a, axis=1).reshape(3, 1))
