"""The row-reduction kernel: its configurations and refusals; every op and dtype on the
simulator (odd and prime lengths, rows that do not fill the grid, strided rows, starts
that are not 16-byte aligned, NaN and ±inf rows, long rows that loop, rows split across
a cluster) against float64 references, exact where the answer is; ptxas for every
benchmark shape; and the GPU against the same references."""

from __future__ import annotations

import numpy as np
import pytest

import conftest
import ptxkit
from ptxkit.generators.dtypes import from_bits, to_bits
from ptxkit.generators.rowcheck import assert_matches, reference
from ptxkit.generators.rowreduce import DTYPES, OPS, row_reduce_kernel, variants
from ptxkit.generators.simulate import Placed, SimulationError, launch

BENCH_COLS = (1, 7, 100, 1000, 4097, 32000, 50257, 128256, 151936, 262144)
HOST = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "s64": np.int64}


@pytest.mark.parametrize(
    "cols, dt, threads, rows_per_thread, block",
    [(1, "f32", 1, 8, 256), (7, "f32", 1, 2, 256), (7, "bf16", 1, 4, 256), (100, "f32", 8, 1, 256),
     (100, "bf16", 8, 1, 256), (1000, "f16", 16, 1, 256), (4096, "f32", 128, 1, 256), (32000, "f32", 256, 1, 256),
     (50257, "bf16", 256, 1, 256), (50257, "f32", 512, 1, 512), (262144, "bf16", 512, 1, 512)],
)
def test_configurations(cols, dt, threads, rows_per_thread, block):
    """The defaults that measured best on an H200 (`rowreduce.default_threads`)."""
    k = row_reduce_kernel(cols, dt, "sum")
    assert (k.threads_per_row, k.rows_per_thread, k.block, k.cluster) == (threads, rows_per_thread, block, 1)
    for rows in (1, 3, 4096, 10**7):  # one CTA per group of rows
        assert k.grid(rows=rows) == -(-rows // (block // threads * rows_per_thread))


def test_ops_with_larger_states_take_fewer_threads():
    assert [row_reduce_kernel(cols, "bf16", "argmax").threads_per_row for cols in (100, 1000, 4096, 262144)] == \
        [4, 8, 64, 256]
    assert [row_reduce_kernel(cols, "f32", "meanvar").threads_per_row for cols in (100, 1000, 4096, 262144)] == \
        [8, 16, 128, 256]


def test_short_rows_read_through_l1():
    assert ".L1::no_allocate" not in row_reduce_kernel(100, "bf16", "logsumexp").ptx
    assert ".L1::no_allocate" in row_reduce_kernel(100, "bf16", "sum").ptx


def test_argmax_of_one_column_reads_nothing():
    k = row_reduce_kernel(1, "bf16", "argmin")
    assert "ld.global" not in k.ptx
    got, _ = simulate(k, np.full((5, 1), np.nan), 5)
    assert got[0].tolist() == [0] * 5


def test_outputs_follow_torch():
    assert row_reduce_kernel(64, "bf16", "sum").outputs == (("sum", "bf16"),)
    assert row_reduce_kernel(64, "bf16", "sumsq").outputs == (("sumsq", "f32"),)
    assert row_reduce_kernel(64, "f16", "meanvar").outputs == (("mean", "f16"), ("var", "f16"))
    assert row_reduce_kernel(64, "bf16", "argmin").params == ("src", "index", "rows")


@pytest.mark.parametrize(
    "kwargs, message",
    [({"cols": 0}, "cols must be at least 1, got 0"),
     ({"cols": 64, "dtype": "s32"}, "takes f32, f16 or bf16, not s32"),
     ({"cols": 64, "op": "prod"}, "unknown row-reduction op 'prod'"),
     ({"cols": 64, "row_stride": 63}, "row_stride must be at least cols"),
     ({"cols": 64, "threads_per_row": 3}, "power of two up to 1024"),
     ({"cols": 64, "rows_per_thread": 3}, "power of two up to 8"),
     ({"cols": 4096, "threads_per_row": 64, "rows_per_thread": 2}, "rows_per_thread > 1 needs short rows"),
     ({"cols": 64, "cluster": 3}, "cluster must be 1, 2, 4 or 8 CTAs, got 3"),
     ({"cols": 64, "nan": "quiet"}, "nan must be 'propagate' or 'ignore'"),
     ({"cols": 2**24 + 1, "op": "meanvar"}, "at most 2\\*\\*24 columns"),
     ({"cols": 64, "op": "max", "target": "sm_75"},
      "the row reduction max of f32 \\(NaN policy 'propagate'\\) needs sm_80 or newer for max.NaN.f32"),
     ({"cols": 65536, "cluster": 2, "target": "sm_80"}, "thread-block cluster needs sm_90")],
)
def test_refusals(kwargs, message):
    with pytest.raises(ValueError, match=message):
        row_reduce_kernel(**kwargs)


#: what sm_75 takes: no NaN-propagating max/min (max.NaN, sm_80) and no result rounded to bf16
#: (cvt.rn.bf16.f32, sm_80)
SM75 = {(dt, op, "propagate") for dt in ("f32", "f16") for op in ("sum", "sumsq", "meanvar")} | \
    {(dt, op, "ignore") for dt in ("f32", "f16") for op in ("max", "min", "argmax", "argmin")} | \
    {("bf16", "sumsq", "propagate"), ("bf16", "argmax", "ignore"), ("bf16", "argmin", "ignore")}
REQUESTS = [(dt, op, nan) for dt in DTYPES for op in OPS
            for nan in (("propagate", "ignore") if op in ("max", "min", "argmax", "argmin") else ("propagate",))]


@pytest.mark.parametrize("cols", [7, 1000, 50257])  # rows per thread; one load a thread; a loop
def test_sm75_takes_the_kernels_that_need_nothing_newer(cols):
    """A kernel for sm_75 is the sm_90a kernel, its target aside (so the simulated and GPU
    tests cover it); a refusal names the op, dtype and policy asked for and the instruction
    that sm_75 lacks."""
    taken = set()
    for dt, op, nan in REQUESTS:
        try:
            k = row_reduce_kernel(cols, dt, op, target="sm_75", nan=nan)
        except ValueError as err:
            policy = f" (NaN policy {nan!r})" if op in ("max", "min", "argmax", "argmin") else ""
            assert str(err).startswith(f"the row reduction {op} of {dt}{policy} needs sm_80 or newer for ")
            nan_propagating = nan == "propagate" and op in ("max", "min", "argmax", "argmin", "logsumexp")
            rounded_to_bf16 = dt == "bf16" and op in ("sum", "max", "min", "logsumexp", "meanvar")
            assert (".NaN.f32" in str(err)) == nan_propagating and ("cvt.rn.bf16.f32" in str(err)) == rounded_to_bf16
            continue
        taken.add((dt, op, nan))
        newest = row_reduce_kernel(cols, dt, op, target="sm_90a", nan=nan).ptx
        assert k.ptx == newest.replace(".target sm_90a\n", ".target sm_75\n", 1)
    assert taken == SM75


@pytest.mark.ptxas
@pytest.mark.parametrize("dt, op, nan", REQUESTS)
def test_sm75_kernels_assemble_and_refusals_are_needed(dt, op, nan):
    """ptxas agrees: each kernel taken for sm_75 assembles for it; the sm_80 kernel of each
    one refused does not."""
    from ptxkit.ptxas import PtxasError

    for cols in (7, 50257):
        if (dt, op, nan) in SM75:
            k = row_reduce_kernel(cols, dt, op, target="sm_75", nan=nan)
            assert k.name in ptxkit.assemble(k.ptx, arch="sm_75").resources
        else:
            k = row_reduce_kernel(cols, dt, op, target="sm_80", nan=nan)
            with pytest.raises(PtxasError, match="requires .target sm_80 or higher"):
                ptxkit.assemble(k.ptx.replace(".target sm_80\n", ".target sm_75\n", 1), arch="sm_75")


def test_variants_start_with_the_default_and_are_valid():
    for cols in BENCH_COLS:
        for dt in DTYPES:
            found = variants(cols, dt)
            k = row_reduce_kernel(cols, dt)
            assert found[0] == (k.threads_per_row, k.rows_per_thread) and len(set(found)) == len(found) <= 4


# ---- the simulator ---------------------------------------------------------------------------------
def _data(rows, stride, dt, rng, special=True):
    """Random rows in [-0.5, 1.5), with (when `special`) a NaN row, a -inf row, a row with
    +inf, a row with one finite value among -inf, and NaNs here and there."""
    x = rng.random((rows, stride)) * 2 - 0.5
    if special and rows > 4:
        x[1, rng.integers(stride)] = np.nan
        x[2] = -np.inf
        x[3, rng.integers(stride)] = np.inf
        x[4] = -np.inf
        x[4, rng.integers(stride)] = 0.25
        x[rows - 1, rng.integers(stride)] = np.nan
    return x


def _host(values, dt):
    """The kernel's input array and its exact values (float64)."""
    if dt == "bf16":
        bits = to_bits("bf16", values)
        return bits, from_bits("bf16", bits)
    array = values.astype(HOST[dt])
    return array, array.astype(np.float64)


def _read(out, kind):
    return from_bits("bf16", out) if kind == "bf16" else out.astype(np.float64)


def simulate(k, values, rows, offset=0, grid=None):
    """Run `k` on the simulator over `values` ([rows, row_stride]), the buffer placed
    `offset` elements past an aligned address; one extra element of each output must stay
    untouched. Returns (outputs, the exact [rows, cols] input)."""
    src, exact = _host(values.reshape(-1), k.dtype)
    nbytes = src.dtype.itemsize
    outs = [np.zeros(rows + 1, HOST[kind]) for _, kind in k.outputs]
    launch(k.ptx, k.name, Placed(src, offset * nbytes), *outs, np.uint32(rows), grid=grid or k.grid(rows),
           block=k.block, cluster=k.cluster)
    for out in outs:
        assert out[rows] == 0
    return [_read(out[:rows], kind) for out, (_, kind) in zip(outs, k.outputs)], \
        exact.reshape(rows, k.row_stride)[:, :k.cols]


def check(k, got, exact):
    assert_matches(got, exact, k.op, k.accumulation_depth, [kind for _, kind in k.outputs], k.nan)


SHAPES = [  # cols, row stride, rows, offset of the first element (elements)
    (7, 7, 37, 1),  # several rows per thread, rows past the end, every head length
    (100, 103, 9, 3),  # a stride that moves every row's alignment
    (4097, 4097, 3, 5),  # a loop over vectors, then a remainder, a guarded round and the tail
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("cols, stride, rows, offset", SHAPES)
def test_simulated_results(cols, stride, rows, offset, op, dt):
    k = row_reduce_kernel(cols, dt, op, row_stride=stride)
    if conftest.ptxas_available():
        assert ptxkit.assemble(k.ptx).resources[k.name].spill_stores == 0
    values = _data(rows, stride, dt, np.random.default_rng(cols * 31 + rows))
    check(k, *simulate(k, values, rows, offset))


@pytest.mark.parametrize("op", ["argmax", "meanvar"])  # states of two and four registers
@pytest.mark.parametrize(
    "cols, dt, threads, rows_per_thread",
    [(1, "f32", 1, 8), (3, "bf16", 1, 2), (13, "f16", 4, 1), (131, "f32", 32, 1), (257, "bf16", 64, 1),
     (1031, "f32", 1024, 1), (2053, "f16", 256, 1)],
)
def test_odd_and_prime_lengths(cols, dt, threads, rows_per_thread, op):
    """Rows shorter than a vector, a warp of 4-lane groups, wide rows whose warps combine
    through shared memory, more threads than vectors."""
    k = row_reduce_kernel(cols, dt, op, threads_per_row=threads, rows_per_thread=rows_per_thread)
    values = _data(6, cols, dt, np.random.default_rng(cols))
    check(k, *simulate(k, values, 6, offset=cols % 8))


@pytest.mark.parametrize("op", ["sum", "meanvar", "argmin"])
@pytest.mark.parametrize(
    "cols, rows, grid, threads, cluster",
    [(2048, 7, 4, 64, 2), (1024, 9, 8, 8, 4), (4099, 5, 16, 32, 8), (8192, 1, 24, 128, 8), (2048, 41, 2, 32, 2)],
)
def test_clusters(cols, rows, grid, threads, cluster, op):
    """Several rows per CTA and rows past the end, fewer than 32 threads per row, several
    warps per row, more clusters than rows, one cluster for many rows; every state
    travels through distributed shared memory."""
    k = row_reduce_kernel(cols, "f32", op, threads_per_row=threads, cluster=cluster)
    if conftest.ptxas_available():
        assert ptxkit.assemble(k.ptx).resources[k.name].spill_stores == 0
    values = _data(rows, cols, "f32", np.random.default_rng(cols + rows))
    check(k, *simulate(k, values, rows, offset=1, grid=grid))


def test_a_long_row_loops_through_its_vectors():
    for op in ("sum", "argmax"):
        k = row_reduce_kernel(65536, "f32", op, threads_per_row=128)
        assert k.shape.full_rounds == 127 and "$vectors" in k.ptx
        check(k, *simulate(k, _data(2, 65536, "f32", np.random.default_rng(7), special=False), 2, offset=2))


@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
@pytest.mark.parametrize("nan", ["propagate", "ignore"])
@pytest.mark.parametrize("dt", ["f32", "bf16"])
def test_nan_policy(op, nan, dt):
    """propagate: a NaN wins (first NaN for arg*); ignore: NaN loses to every number, a row
    of NaN gives -inf/+inf (max/min) or index 0; ties give the first index."""
    k = row_reduce_kernel(40, dt, op, nan=nan)
    x = np.tile(np.linspace(-1.0, 1.0, 40), (6, 1))
    x[0, [5, 30]] = np.nan
    x[1] = np.nan
    x[2, :] = -np.inf
    x[2, 17] = np.nan
    x[3, :] = 0.5  # all tied
    x[4, [9, 21]] = 2.0  # a tie for the max
    x[5, [12, 33]] = -3.0  # a tie for the min
    got, exact = simulate(k, x, 6, offset=1)
    check(k, got, exact)
    (result,) = got
    if op.startswith("arg"):
        best = {"argmax": 39, "argmin": 0}[op]
        assert result[[0, 1, 2, 3]].tolist() == ([5, 0, 17, 0] if nan == "propagate" else [best, 0, 0, 0])
        assert result[4 if op == "argmax" else 5] == (9 if op == "argmax" else 12)
    elif nan == "propagate":
        assert np.isnan(result[[0, 1, 2]]).all()
    else:
        assert result[[0, 1, 2]].tolist() == ([1.0, -np.inf, -np.inf] if op == "max" else [-1.0, np.inf, -np.inf])


def test_logsumexp_special_rows():
    k = row_reduce_kernel(9, "f32", "logsumexp")
    x = np.zeros((6, 9))
    x[0] = -np.inf  # -inf
    x[1, 3] = np.inf  # +inf
    x[2, [3, 4]] = [np.inf, -np.inf]  # +inf
    x[3, 5] = np.nan  # NaN
    x[4] = -np.inf
    x[4, 8] = -100.0  # one finite value far below 0: -100 exactly, no overflow
    x[5] = np.linspace(80.0, 88.0, 9)  # exp overflows f32 without the shift
    got, exact = simulate(k, x, 6)
    check(k, got, exact)
    assert got[0][:5].tolist()[:3] == [-np.inf, np.inf, np.inf] and np.isnan(got[0][3]) and got[0][4] == -100.0


def test_meanvar_is_stable_far_from_zero():
    """A large mean and a small spread: the textbook E[x²] - E[x]² loses every digit in f32;
    the batches' own means and Chan's combination keep the variance."""
    k = row_reduce_kernel(1000, "f32", "meanvar")
    x = 1e4 + np.random.default_rng(3).random((4, 1000))
    (mean, var), exact = simulate(k, x, 4)
    check(k, [mean, var], exact)
    np.testing.assert_allclose(var, exact.var(-1), rtol=2e-3)
    naive = (exact.astype(np.float32) ** 2).mean(-1) - exact.astype(np.float32).mean(-1) ** 2
    assert np.abs(naive - exact.var(-1)).max() > 1.0  # what the check above guards against


def _infinite_rows(rows, cols, stride, rng):
    """[rows, stride] of random values in [-0.5, 1.5), the columns past `cols` NaN (never
    read), with ±inf and NaN placed at the first, a middle and the last column (the head,
    body and tail of different threads), row after row: +inf, -inf, two +inf, +inf and
    -inf, all +inf, +inf and NaN, nothing, -inf."""
    x = rng.random((rows, stride)) * 2 - 0.5
    x[:, cols:] = np.nan
    first, middle, last = 0, cols // 2, cols - 1
    placed = [{middle: np.inf}, {first: -np.inf}, {first: np.inf, last: np.inf}, {middle: np.inf, last: -np.inf},
              {column: np.inf for column in range(cols)}, {first: np.inf, middle: np.nan}, {}, {last: -np.inf}]
    for row in range(rows):
        for column, value in placed[row % 8].items():
            x[row, column] = value
    return x


def _ieee_mean(row) -> float | None:
    """The mean IEEE arithmetic gives a row with an infinity or a NaN (None for a finite
    row): NaN with a NaN or infinities of both signs, else the infinity."""
    if np.isnan(row).any() or (np.isposinf(row).any() and np.isneginf(row).any()):
        return np.nan
    return np.inf if np.isposinf(row).any() else -np.inf if np.isneginf(row).any() else None


def _assert_ieee_meanvar(got, x) -> set:
    """The mean of each row of `x` is `_ieee_mean`'s where that is not None; every row with
    a non-finite element has a NaN variance; finite rows stay finite. Returns the kinds of
    mean seen ("inf", "-inf", "nan", "finite")."""
    mean, var = got
    seen = set()
    for row, values in enumerate(x):
        want = _ieee_mean(values)
        if want is None:
            assert np.isfinite(mean[row]) and np.isfinite(var[row]), row
            seen.add("finite")
        else:
            assert (np.isnan(mean[row]) if np.isnan(want) else mean[row] == want), (row, mean[row], want)
            assert np.isnan(var[row]), (row, var[row])
            seen.add(str(want))
    return seen


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("cols, stride, threads, cluster", [(7, 7, None, 1), (100, 103, None, 1),
                                                           (4097, 4097, None, 1), (2048, 2048, 32, 2)])
def test_meanvar_of_infinite_rows_is_numpys(cols, stride, threads, cluster, dt):
    """A row holding +inf has the mean +inf, as np.mean and torch.mean give (torch's CUDA
    var_mean gives NaN); +inf with -inf or a NaN gives NaN; the variance of every such row
    is NaN, as np.var gives. Several rows per thread, several threads and warps per row,
    and a row split across a cluster (`rowops`, the module docstring)."""
    k = row_reduce_kernel(cols, dt, "meanvar", row_stride=stride, threads_per_row=threads, cluster=cluster)
    x = _infinite_rows(16, cols, stride, np.random.default_rng(cols + cluster))
    got, exact = simulate(k, x, 16, offset=1)
    check(k, got, exact)
    assert _assert_ieee_meanvar(got, exact) == {"inf", "-inf", "nan", "finite"}
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(np.isinf(got[0]), np.isinf(exact.mean(-1)))


def test_reads_stay_inside_the_rows():
    """The simulator refuses any access outside its buffer: rows of every alignment, the
    buffer ending with the last element (a strided tensor's last row ends early)."""
    for offset in range(8):
        k = row_reduce_kernel(21, "bf16", "sum", row_stride=29, threads_per_row=2)
        values = np.random.default_rng(offset).random((5, 29))
        src, exact = _host(values.reshape(-1)[: 4 * 29 + 21], "bf16")
        out = np.zeros(5, np.uint16)
        launch(k.ptx, k.name, Placed(src, 2 * offset), out, np.uint32(5), grid=1, block=k.block)
        check(k, [_read(out, "bf16")], np.concatenate([exact, np.zeros(8)]).reshape(5, 29)[:, :21])
    with pytest.raises(SimulationError, match="past the end of its buffer"):
        launch(k.ptx, k.name, Placed(src[:-1], 2), out, np.uint32(5), grid=1, block=k.block)


def test_a_wrong_rounding_mode_is_caught():
    """The simulator rounds cvt.rz as toward zero: the same kernel with its final cvt.rn
    turned into cvt.rz fails the check that the right one passes."""
    k = row_reduce_kernel(1000, "bf16", "sum")
    values = _data(64, 1000, "bf16", np.random.default_rng(5), special=False)
    check(k, *simulate(k, values, 64))
    wrong = type(k)(**{**k.__dict__, "ptx": k.ptx.replace("cvt.rn.bf16.f32", "cvt.rz.bf16.f32")})
    with pytest.raises(AssertionError, match="rows off"):
        check(wrong, *simulate(wrong, values, 64))


@pytest.mark.ptxas
@pytest.mark.parametrize("cols", [1, 1000, 50257])
def test_benchmark_kernels_assemble_without_spills(cols):
    """The benchmark's default kernels at the shapes the simulated tests leave out (one
    row per thread of eight, 16 threads per row, 512 threads and a loop): no spills,
    registers for at least 512 threads per SM."""
    for dt in DTYPES:
        for op in OPS:
            k = row_reduce_kernel(cols, dt, op)
            usage = ptxkit.assemble(k.ptx).resources[k.name]
            assert usage.spill_stores == 0 and usage.registers <= 128, (dt, op, usage)


# ---- GPU -----------------------------------------------------------------------------------------
def gpu_run(k, src, rows, offset=0, grid=None):
    """Run `k` on the GPU over the host array `src` (flat), its first element `offset`
    elements into a device buffer; returns the outputs as float64."""
    from ptxkit import runtime

    nbytes = src.dtype.itemsize
    buffer = runtime.DeviceArray.from_numpy(np.concatenate([np.zeros(offset, src.dtype), src]))
    outs = [runtime.Out(np.zeros(rows, HOST[kind])) for _, kind in k.outputs]
    kernel = runtime.load(ptxkit.assemble(k.ptx)).kernel(k.name)
    kernel.launch(np.uint64(buffer.ptr + offset * nbytes), *outs, np.uint32(rows), grid=grid or k.grid(rows),
                  block=k.block, cluster=k.launch_cluster)
    return [_read(out.array, kind) for out, (_, kind) in zip(outs, k.outputs)]


GPU_COLS = (1, 7, 100, 1000, 4097, 32000, 50257)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("cols", GPU_COLS)
def test_gpu_results(cols, op, dt):
    """The default kernels, rows that do not fill the last CTA, special rows, and the
    same rows again at an odd offset with a row stride that moves every row's alignment."""
    rows = max(7, min(3000, 2**21 // cols)) + 1
    for stride, offset in ((cols, 0), (cols + 3, 5)):
        k = row_reduce_kernel(cols, dt, op, row_stride=stride)
        values = _data(rows, stride, dt, np.random.default_rng(cols + stride))
        src, exact = _host(values.reshape(-1), dt)
        got = gpu_run(k, src, rows, offset)
        check(k, got, exact.reshape(rows, stride)[:, :cols])


@pytest.mark.gpu
@pytest.mark.parametrize("op", ["sum", "max", "logsumexp", "meanvar", "argmax"])
@pytest.mark.parametrize(
    "cols, threads, cluster, rows",
    [(16384, None, 2, 301), (16384, None, 8, 999), (65536, 1024, 8, 77), (2048, 8, 2, 1001), (2048, 32, 8, 999)],
)
def test_gpu_clusters(cols, threads, cluster, rows, op):
    """Each cluster size on three grids: one cluster per group of rows, a single cluster
    that loops over every row (its double-buffered states reused hundreds of times), and
    more clusters than row groups (some never get a row)."""
    k = row_reduce_kernel(cols, "bf16", op, threads_per_row=threads, cluster=cluster)
    values = _data(rows, cols, "bf16", np.random.default_rng(cols * cluster + rows))
    src, exact = _host(values.reshape(-1), "bf16")
    groups = -(-rows // k.rows_per_cta)
    for grid in (k.grid(rows), cluster, (groups + 3) * cluster):
        check(k, gpu_run(k, src, rows, grid=grid), exact.reshape(rows, cols))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("cols", [1, 2, 7, 100, 1000, 4097, 32000, 50257, 151936])
def test_gpu_meanvar_of_infinite_rows_is_numpys(cols, dt):
    """meanvar on rows holding ±inf and NaN, on the GPU, against float64 numpy (np.mean and
    np.var): +inf alone gives the mean +inf (torch's CUDA var_mean gives NaN), +inf with
    -inf or a NaN gives NaN, every such variance is NaN; contiguous rows and rows of a
    wider tensor at an odd offset."""
    rows = max(16, min(2048, 2**21 // cols))
    for stride, offset in ((cols, 0), (cols + 3, 5)):
        k = row_reduce_kernel(cols, dt, "meanvar", row_stride=stride)
        values = _infinite_rows(rows, cols, stride, np.random.default_rng(cols * 7 + stride))
        src, exact = _host(values.reshape(-1), dt)
        got = gpu_run(k, src, rows, offset)
        exact = exact.reshape(rows, stride)[:, :cols]
        check(k, got, exact)
        with np.errstate(invalid="ignore"):
            want = exact.mean(-1)
        np.testing.assert_array_equal(got[0][~np.isfinite(want)], want[~np.isfinite(want)])
        np.testing.assert_array_equal(np.isnan(got[1]), ~np.isfinite(exact).all(-1))
        assert _assert_ieee_meanvar(got, exact) >= {"inf", "-inf", "nan"}


@pytest.mark.gpu
def test_gpu_matches_the_reference_on_edge_rows_exactly():
    """max and argmax of rows built to tie and to hold NaN, on the GPU (exact)."""
    for op in ("max", "argmax", "argmin"):
        k = row_reduce_kernel(4097, "bf16", op)
        x = np.tile(np.linspace(-1.0, 1.0, 4097), (4, 1))
        x[0, [100, 3000]] = np.nan
        x[1, [7, 4000]] = 5.0
        x[2] = 0.5
        src, exact = _host(x.reshape(-1), "bf16")
        got = gpu_run(k, src, 4, offset=1)
        np.testing.assert_array_equal(got[0], reference(exact.reshape(4, 4097), op)[0])
