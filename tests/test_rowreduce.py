"""The row-reduction kernel: its configurations, its results on the simulator (rows that
do not fill the grid, long rows that loop, wide rows that combine through shared
memory, NaN and -inf), ptxas for every benchmark shape, and the GPU against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import conftest
import ptxkit
from ptxkit.generators.dtypes import from_bits, to_bits
from ptxkit.generators.rowreduce import reference, row_reduce_kernel
from ptxkit.generators.simulate import launch

BENCH_COLS = (256, 1024, 4096, 16384, 65536, 262144)


@pytest.mark.parametrize(
    "cols, dt, threads, block, vectors",
    [(256, "f32", 8, 256, 8), (256, "bf16", 8, 256, 4), (4096, "f32", 128, 256, 8), (16384, "f32", 512, 512, 8),
     (262144, "f32", 512, 512, 128), (262144, "bf16", 512, 512, 64), (96, "f32", 2, 256, 12), (8, "bf16", 1, 256, 1)],
)
def test_configurations(cols, dt, threads, block, vectors):
    k = row_reduce_kernel(cols, dt, "sum")
    assert (k.threads_per_row, k.block, k.vectors_per_thread) == (threads, block, vectors)
    assert k.grid(rows=3, sm_count=132) == -(-3 // k.rows_per_cta)
    resident = 132 * (2048 // block)
    for rows in (10**7, 4096, 16384, resident * k.rows_per_cta + 1):
        groups, grid = -(-rows // k.rows_per_cta), k.grid(rows=rows, sm_count=132)
        rounds = -(-groups // grid)
        assert grid <= resident and rounds == -(-groups // resident)  # no extra round
        assert (grid - 1) * rounds < groups  # balanced: no CTA could be left out


def test_refusals():
    with pytest.raises(ValueError, match="f32 or bf16, not f16"):
        row_reduce_kernel(256, "f16")
    with pytest.raises(ValueError, match="sum or max, not min"):
        row_reduce_kernel(256, "f32", "min")
    with pytest.raises(ValueError, match="positive multiple of 8 for bf16"):
        row_reduce_kernel(100, "bf16")
    with pytest.raises(ValueError, match="power of two up to 1024 dividing 64 vectors"):
        row_reduce_kernel(256, "f32", threads_per_row=3)


def _data(rows, cols, dt, rng):
    values = rng.random((rows, cols)) * 2 - 0.5
    if dt == "bf16":
        return to_bits("bf16", values), from_bits("bf16", to_bits("bf16", values))
    return values.astype(np.float32), values.astype(np.float32).astype(np.float64)


def _result(out, dt):
    return from_bits("bf16", out) if dt == "bf16" else out.astype(np.float64)


def _tolerance(dt, op, cols):
    if op == "max":
        return dict(rtol=0, atol=0)
    return dict(rtol=2**-8, atol=0.05) if dt == "bf16" else dict(rtol=1e-5, atol=1e-5 * np.sqrt(cols))


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("cols, rows, grid, threads",
                         [(256, 37, 2, None), (96, 9, 1, None), (4096, 5, 2, None), (8192, 3, 2, 1024), (512, 4, 1, 1)])
def test_simulated_results(cols, rows, grid, threads, dt, op):
    if dt == "bf16" and cols == 96:
        cols = 104
    k = row_reduce_kernel(cols, dt, op, threads_per_row=threads)
    if conftest.ptxas_available():
        assert ptxkit.assemble(k.ptx).resources[k.name].spill_stores == 0
    src, values = _data(rows, cols, dt, np.random.default_rng(cols + rows))
    out = np.zeros(rows + 1, np.uint16 if dt == "bf16" else np.float32)  # one extra element: must stay 0
    launch(k.ptx, k.name, src, out, np.uint32(rows), grid=grid, block=k.block)
    np.testing.assert_allclose(_result(out[:rows], dt), reference(values, op), **_tolerance(dt, op, cols))
    assert out[rows] == 0


def test_a_long_row_loops_through_its_vectors():
    k = row_reduce_kernel(65536, "f32", "sum", threads_per_row=128)  # 128 vectors per thread: 16 trips of 8
    assert k.vectors_per_thread == 128
    src, values = _data(2, 65536, "f32", np.random.default_rng(7))
    out = np.zeros(2, np.float32)
    launch(k.ptx, k.name, src, out, np.uint32(2), grid=1, block=k.block)
    np.testing.assert_allclose(out, reference(values, "sum"), rtol=1e-5)


@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_max_propagates_nan_and_keeps_minus_infinity(dt):
    k = row_reduce_kernel(256, dt, "max")
    values = np.full((3, 256), -np.inf)
    values[1, 100] = np.nan
    values[2, 7] = 5.0
    src = to_bits("bf16", values) if dt == "bf16" else values.astype(np.float32)
    out = np.zeros(3, np.uint16 if dt == "bf16" else np.float32)
    launch(k.ptx, k.name, src, out, np.uint32(3), grid=1, block=k.block)
    got = _result(out, dt)
    assert got[0] == -np.inf and np.isnan(got[1]) and got[2] == 5.0


@pytest.mark.ptxas
@pytest.mark.parametrize("cols", BENCH_COLS)
def test_benchmark_kernels_assemble_without_spills(cols):
    for dt in ("f32", "bf16"):
        for op in ("sum", "max"):
            k = row_reduce_kernel(cols, dt, op)
            usage = ptxkit.assemble(k.ptx).resources[k.name]
            assert usage.spill_stores == 0 and usage.registers <= 64


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("cols", BENCH_COLS)
def test_gpu_results(cols, dt, op):
    from ptxkit import runtime

    k = row_reduce_kernel(cols, dt, op)
    rows = max(3, min(4096, 2**22 // cols)) + 1  # not a multiple of the rows per CTA
    src, values = _data(rows, cols, dt, np.random.default_rng(cols))
    out = np.zeros(rows, np.uint16 if dt == "bf16" else np.float32)
    kernel = runtime.load(ptxkit.assemble(k.ptx)).kernel(k.name)
    kernel.launch(src, runtime.Out(out), np.uint32(rows), grid=k.grid(rows, 132), block=k.block)
    np.testing.assert_allclose(_result(out, dt), reference(values, op), **_tolerance(dt, op, cols))
