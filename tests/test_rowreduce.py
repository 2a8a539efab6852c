"""The row-reduction kernel: its configurations and grids, its results on the simulator
(rows that do not fill the grid, long rows that loop, wide rows that combine through
shared memory, rows split across a cluster of CTAs, NaN and -inf), ptxas for every
benchmark shape and cluster size, and the GPU against numpy."""

from __future__ import annotations

import numpy as np
import pytest

import conftest
import ptxkit
from ptxkit.generators.dtypes import from_bits, to_bits
from ptxkit.generators.rowreduce import reference, row_reduce_kernel, variants
from ptxkit.generators.simulate import launch

BENCH_COLS = (256, 1024, 4096, 16384, 65536, 262144)


@pytest.mark.parametrize(
    "cols, dt, cluster, threads, block, vectors",
    [(256, "f32", 1, 8, 256, 8), (256, "bf16", 1, 8, 256, 4), (4096, "f32", 1, 128, 256, 8),
     (16384, "f32", 1, 512, 512, 8), (16384, "bf16", 1, 512, 512, 4), (65536, "f32", 1, 512, 512, 32),
     (65536, "bf16", 4, 512, 512, 4), (262144, "f32", 8, 512, 512, 16), (262144, "bf16", 1, 512, 512, 64),
     (96, "f32", 1, 2, 256, 12), (8, "bf16", 1, 1, 256, 1)],
)
def test_configurations(cols, dt, cluster, threads, block, vectors):
    k = row_reduce_kernel(cols, dt, "sum", cluster=cluster)
    assert (k.threads_per_row, k.cluster, k.block, k.vectors_per_thread) == (threads, cluster, block, vectors)
    assert k.launch_cluster == (cluster if cluster > 1 else None)
    assert (".reqnctapercluster" in k.ptx) == (cluster > 1) and ("barrier.cluster" in k.ptx) == (cluster > 1)
    for rows in (1, 3, 4096, 10**7):  # one CTA (cluster) per group of rows
        assert k.grid(rows=rows) == -(-rows // k.rows_per_cta) * cluster


def test_rows_belong_to_one_cta_unless_a_cluster_is_asked_for():
    for cols in BENCH_COLS:
        for dt in ("f32", "bf16"):
            assert row_reduce_kernel(cols, dt, "max").cluster == 1


def test_the_cluster_shares_a_row_between_its_ctas():
    assert row_reduce_kernel(65536, "f32", cluster=2).threads_per_row == 512
    assert row_reduce_kernel(65536, "f32", cluster=8).threads_per_row == 256  # 8 vectors each
    assert row_reduce_kernel(8192, "f32", cluster=8).threads_per_row == 32
    assert row_reduce_kernel(65536, "f32", threads_per_row=128, cluster=8).vectors_per_thread == 16


def test_refusals():
    with pytest.raises(ValueError, match="f32 or bf16, not f16"):
        row_reduce_kernel(256, "f16")
    with pytest.raises(ValueError, match="sum or max, not min"):
        row_reduce_kernel(256, "f32", "min")
    with pytest.raises(ValueError, match="positive multiple of 8 for bf16"):
        row_reduce_kernel(100, "bf16")
    with pytest.raises(ValueError, match="power of two up to 1024 dividing 64 vectors"):
        row_reduce_kernel(256, "f32", threads_per_row=3)
    with pytest.raises(ValueError, match="cluster must be 1, 2, 4 or 8 CTAs, got 3"):
        row_reduce_kernel(256, "f32", cluster=3)
    with pytest.raises(ValueError, match=r"threads_per_row × cluster \(16×8\) must divide the row's 64 vectors"):
        row_reduce_kernel(256, "f32", threads_per_row=16, cluster=8)
    with pytest.raises(ValueError, match="thread-block cluster needs sm_90 or newer; the target is sm_80"):
        row_reduce_kernel(65536, "f32", cluster=2, target="sm_80")


def _with_nan_and_minus_infinity(values, rng):
    """Rows of -inf, a NaN in every fifth row (anywhere in it), a row with one finite value."""
    values = values.copy()
    rows, cols = values.shape
    values[rows // 2] = -np.inf
    for row in range(0, rows, 5):
        values[row, rng.integers(cols)] = np.nan
    if rows > 3:
        values[3] = -np.inf
        values[3, rng.integers(cols)] = 7.0
    return values


def _source(values, dt):
    """The kernel's input and its exact values (float64)."""
    if dt == "bf16":
        return to_bits("bf16", values), from_bits("bf16", to_bits("bf16", values))
    return values.astype(np.float32), values.astype(np.float32).astype(np.float64)


def _data(rows, cols, dt, rng):
    return _source(rng.random((rows, cols)) * 2 - 0.5, dt)


def _result(out, dt):
    return from_bits("bf16", out) if dt == "bf16" else out.astype(np.float64)


def _tolerance(dt, op, cols):
    if op == "max":
        return dict(rtol=0, atol=0)
    return dict(rtol=2**-8, atol=0.05) if dt == "bf16" else dict(rtol=1e-5, atol=1e-5 * np.sqrt(cols))


def _simulate(k, src, rows, grid):
    out = np.zeros(rows + 1, np.uint16 if k.dtype == "bf16" else np.float32)  # one extra element: must stay 0
    launch(k.ptx, k.name, src, out, np.uint32(rows), grid=grid, block=k.block, cluster=k.cluster)
    assert out[rows] == 0
    return _result(out[:rows], k.dtype)


@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize(
    "cols, rows, grid, threads, cluster",
    [(256, 37, 2, None, 1), (96, 9, 1, None, 1), (4096, 5, 2, None, 1), (8192, 3, 2, 1024, 1), (512, 4, 1, 1, 1),
     # clusters: several rows per CTA and rows past the end, fewer than 32 threads per row,
     # several warps per row and loops, more clusters than rows, one cluster for many rows
     (2048, 7, 4, 64, 2), (1024, 9, 8, 8, 4), (4096, 5, 16, 32, 8), (32768, 3, 4, 256, 2), (8192, 1, 24, 128, 8),
     (2048, 41, 2, 32, 2)],
)
def test_simulated_results(cols, rows, grid, threads, cluster, dt, op):
    if dt == "bf16" and cols == 96:
        cols = 104
    k = row_reduce_kernel(cols, dt, op, threads_per_row=threads, cluster=cluster)
    if conftest.ptxas_available():
        assert ptxkit.assemble(k.ptx).resources[k.name].spill_stores == 0
    rng = np.random.default_rng(cols + rows)
    values = rng.random((rows, cols)) * 2 - 0.5
    if op == "max":
        values = _with_nan_and_minus_infinity(values, rng)
    src, exact = _source(values, dt)
    np.testing.assert_allclose(_simulate(k, src, rows, grid), reference(exact, op), **_tolerance(dt, op, cols))


def test_a_long_row_loops_through_its_vectors():
    for threads, cluster in ((128, 1), (128, 4)):  # 128 and 32 vectors per thread: loops of 8
        k = row_reduce_kernel(65536, "f32", "sum", threads_per_row=threads, cluster=cluster)
        assert k.vectors_per_thread == 128 // cluster and "$vectors" in k.ptx
        src, values = _data(2, 65536, "f32", np.random.default_rng(7))
        np.testing.assert_allclose(_simulate(k, src, 2, cluster), reference(values, "sum"), rtol=1e-5)


def test_the_default_long_row_kernels_on_the_simulator():
    """The benchmark's own shapes, 2 rows each, on one cluster."""
    for cols, dt in ((65536, "f32"), (65536, "bf16")):
        k = row_reduce_kernel(cols, dt, "sum")
        src, values = _data(2, cols, dt, np.random.default_rng(cols))
        np.testing.assert_allclose(_simulate(k, src, 2, k.cluster), reference(values, "sum"),
                                   **_tolerance(dt, "sum", cols))


@pytest.mark.parametrize("cluster", [1, 2])
@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_max_propagates_nan_and_keeps_minus_infinity(dt, cluster):
    k = row_reduce_kernel(256, dt, "max", cluster=cluster)
    values = np.full((3, 256), -np.inf)
    values[1, 200] = np.nan  # in the second half of the row: rank 1's part of a cluster
    values[2, 7] = 5.0
    src, _ = _source(values, dt)
    got = _simulate(k, src, 3, cluster)
    assert got[0] == -np.inf and np.isnan(got[1]) and got[2] == 5.0


def test_variants_start_with_the_default_and_are_valid():
    for cols in BENCH_COLS:
        for dt in ("f32", "bf16"):
            found = variants(cols, dt)
            threads = row_reduce_kernel(cols, dt).threads_per_row
            assert found[0] == (threads, 1) and len(set(found)) == len(found) <= 4
            assert {t for t, c in found if c == 1} == {threads, threads // 2, threads * 2}
            assert ((threads // 2, 2) in found) == (threads >= 256)


@pytest.mark.ptxas
@pytest.mark.parametrize("cols", BENCH_COLS)
def test_benchmark_kernels_assemble_without_spills(cols):
    """The benchmark's variants and every cluster size: no spills; cluster kernels (which
    carry ``.minnctapersm``) few enough registers for 2048 threads per SM."""
    for dt in ("f32", "bf16"):
        for op in ("sum", "max"):
            shapes = variants(cols, dt, op) + [(None, c) for c in (2, 4, 8)]
            for threads, cluster in shapes:
                k = row_reduce_kernel(cols, dt, op, threads_per_row=threads, cluster=cluster)
                usage = ptxkit.assemble(k.ptx).resources[k.name]
                assert usage.spill_stores == 0 and usage.registers <= 64
                if k.cluster > 1:
                    assert usage.registers * 2048 <= 65536, (k.threads_per_row, k.cluster, usage)


# ---- GPU -----------------------------------------------------------------------------------------
def _gpu_run(k, src, rows, grid):
    from ptxkit import runtime

    out = np.zeros(rows, np.uint16 if k.dtype == "bf16" else np.float32)
    kernel = runtime.load(ptxkit.assemble(k.ptx)).kernel(k.name)
    kernel.launch(src, runtime.Out(out), np.uint32(rows), grid=grid, block=k.block, cluster=k.launch_cluster)
    return _result(out, k.dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize("cols", BENCH_COLS)
def test_gpu_results(cols, dt, op):
    k = row_reduce_kernel(cols, dt, op)
    rows = max(3, min(4096, 2**22 // cols)) + 1  # not a multiple of the rows per CTA
    rng = np.random.default_rng(cols)
    values = rng.random((rows, cols)) * 2 - 0.5
    if op == "max":
        values = _with_nan_and_minus_infinity(values, rng)
    src, exact = _source(values, dt)
    got = _gpu_run(k, src, rows, k.grid(rows))
    np.testing.assert_allclose(got, reference(exact, op), **_tolerance(dt, op, cols))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f32", "bf16"])
@pytest.mark.parametrize("op", ["sum", "max"])
@pytest.mark.parametrize(
    "cols, threads, cluster, rows",
    [(16384, None, 1, 301), (16384, None, 2, 301), (16384, None, 4, 999), (16384, None, 8, 999),
     (65536, 1024, 8, 77), (2048, 8, 2, 1001), (2048, 32, 8, 999), (65536, 512, 4, 1)],
)
def test_gpu_clusters(cols, threads, cluster, rows, dt, op):
    """Each cluster size on three grids: the default one (a cluster per group of rows), a
    single cluster that loops over every row (its double-buffered partials reused hundreds
    of times), and more clusters than row groups (some never get a row)."""
    k = row_reduce_kernel(cols, dt, op, threads_per_row=threads, cluster=cluster)
    rng = np.random.default_rng(cols * cluster + rows)
    values = rng.random((rows, cols)) * 2 - 0.5
    if op == "max":
        values = _with_nan_and_minus_infinity(values, rng)
    src, exact = _source(values, dt)
    expected = reference(exact, op)
    groups = -(-rows // k.rows_per_cta)
    for grid in (k.grid(rows), cluster, (groups + 3) * cluster):
        np.testing.assert_allclose(_gpu_run(k, src, rows, grid), expected, **_tolerance(dt, op, cols),
                                   err_msg=f"grid {grid}")
