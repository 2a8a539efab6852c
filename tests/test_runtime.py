"""ptxkit.runtime: loading cubins and launching kernels through cuda.core.

Tests marked ``gpu`` run the samples in ``samples/toolchain`` on the GPU (an H200 here:
sm_90a) and compare every result with numpy on fresh random data (float64 references).
The unmarked tests pin what happens without a GPU and the checks made before any GPU work.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pytest

import ptxkit
from ptxkit import runtime

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "toolchain"
F32_ROUNDING = 2.0**-23  # one rounding of an exact result: relative error <= 2**-24


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng()


@pytest.fixture(scope="module")
def kernels():
    """Kernel lookup by sample name: kernels("vector_add", "vector_add")."""
    loaded = {}

    def get(sample: str, name: str) -> runtime.Kernel:
        if sample not in loaded:
            text = (SAMPLES / f"{sample}.ptx").read_text()
            loaded[sample] = runtime.load(ptxkit.assemble(text, arch="sm_90a", filename=f"{sample}.ptx"))
        return loaded[sample].kernel(name)

    return get


# --- without a GPU, and checks before any GPU work ----------------------------------------


def test_gpu_available_is_a_cached_bool():
    first = runtime.gpu_available()
    start = time.perf_counter()
    assert runtime.gpu_available() is first and isinstance(first, bool)
    assert time.perf_counter() - start < 0.01


@pytest.fixture
def fresh_probe(monkeypatch):
    runtime.gpu_unavailable_reason.cache_clear()
    yield monkeypatch
    runtime.gpu_unavailable_reason.cache_clear()  # runs before monkeypatch restores sys.modules


def test_gpu_available_never_raises_when_cuda_python_is_broken(fresh_probe):
    fresh_probe.setitem(sys.modules, "cuda.core", None)
    assert runtime.gpu_available() is False
    assert "cuda-python is not usable" in runtime.gpu_unavailable_reason()
    assert 'pip install "ptxkit[cuda]"' in runtime.gpu_unavailable_reason()


@pytest.mark.skipif(runtime.gpu_available(), reason="this machine has a GPU")
@pytest.mark.ptxas
def test_loading_without_a_gpu_says_why():
    cubin = ptxkit.assemble((SAMPLES / "empty.ptx").read_text())
    with pytest.raises(runtime.GpuUnavailable, match="no NVIDIA GPU usable through cuda-python: "):
        runtime.load(cubin)


@pytest.mark.skipif(runtime.gpu_available(), reason="this machine has a GPU")
def test_device_memory_without_a_gpu_says_why():
    with pytest.raises(runtime.GpuUnavailable, match="no NVIDIA GPU usable"):
        runtime.DeviceArray.from_numpy(np.ones(4, np.float32))


def test_load_refuses_what_is_not_a_cubin(tmp_path):
    with pytest.raises(ValueError, match="<cubin> is not a cubin: not a 64-bit little-endian ELF"):
        runtime.load(b".version 8.0\n.target sm_90a\n")
    with pytest.raises(TypeError, match="load takes a Cubin, bytes or a path"):
        runtime.load(42)
    with pytest.raises(FileNotFoundError):
        runtime.load(tmp_path / "missing.cubin")
    (tmp_path / "k.ptx").write_text(".version 8.0\n")
    with pytest.raises(ValueError, match="k.ptx is not a cubin"):
        runtime.load(tmp_path / "k.ptx")


def test_outputs_must_be_writeable_numpy_arrays():
    with pytest.raises(TypeError, match="Out takes a numpy array"):
        runtime.Out([1.0, 2.0])
    frozen = np.zeros(3)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="InOut needs a writeable array"):
        runtime.InOut(frozen)


def test_tensor_maps_need_device_arrays_and_known_swizzles():
    with pytest.raises(TypeError, match="needs a DeviceArray"):
        runtime.tensor_map(np.zeros((64, 64), np.float32), box=(32, 32))


# --- on the GPU ---------------------------------------------------------------------------


@pytest.mark.gpu
def test_vector_add_matches_numpy(kernels, rng):
    n = 1_000_003  # not a multiple of the block
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    c = np.full(n, np.nan, np.float32)
    kernels("vector_add", "vector_add").launch(a, b, runtime.Out(c), np.uint32(n), grid=(n + 255) // 256, block=256)
    np.testing.assert_allclose(c, a.astype(np.float64) + b, rtol=F32_ROUNDING, atol=0)


@pytest.mark.gpu
def test_out_starts_at_zero_and_inout_keeps_what_the_kernel_leaves(kernels, rng):
    n, done = 4096, 4000
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    before = rng.standard_normal(n, dtype=np.float32)
    out, inout = before.copy(), before.copy()
    kernel = kernels("vector_add", "vector_add")
    kernel.launch(a, b, runtime.Out(out), np.uint32(done), grid=16, block=256)
    kernel.launch(a, b, runtime.InOut(inout), np.uint32(done), grid=16, block=256)
    expected = a[:done].astype(np.float64) + b[:done]
    for result in (out, inout):
        np.testing.assert_allclose(result[:done], expected, rtol=F32_ROUNDING, atol=0)
    assert np.all(out[done:] == 0)
    assert np.array_equal(inout[done:], before[done:])


@pytest.mark.gpu
def test_device_arrays_pass_as_pointers_and_round_trip(kernels, rng):
    n = 70_000
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    da, db, dc = runtime.DeviceArray.from_numpy(a), runtime.DeviceArray.from_numpy(b), runtime.DeviceArray.empty(n, np.float32)
    kernels("vector_add", "vector_add").launch(da, db, dc, np.uint32(n), grid=(n + 127) // 128, block=(128, 1, 1))
    np.testing.assert_allclose(dc.to_numpy(), a.astype(np.float64) + b, rtol=F32_ROUNDING, atol=0)
    assert dc.shape == (n,) and dc.dtype == np.float32 and dc.nbytes == 4 * n and dc.ptr != 0


@pytest.mark.gpu
@pytest.mark.parametrize("dtype, shape", [(np.float64, (3, 5, 7)), (np.int8, (1001,)), (np.bool_, (64,)),
                                          (np.uint16, (0,)), (np.complex64, (2, 2))])
def test_device_array_round_trip_keeps_every_byte(rng, dtype, shape):
    host = (rng.standard_normal(shape) * 100).astype(dtype)
    back = runtime.DeviceArray.from_numpy(host).to_numpy()
    assert back.dtype == host.dtype and back.shape == host.shape and np.array_equal(back, host)
    assert np.all(runtime.DeviceArray.zeros(shape, dtype).to_numpy() == 0)


@pytest.mark.gpu
def test_two_dimensional_kernel_matches_numpy(kernels, rng):
    rows, cols = 300, 517
    a = rng.standard_normal((rows, cols), dtype=np.float32)
    alpha = np.float32(rng.uniform(0.5, 2.0))
    out = np.empty((cols, rows), np.float32)
    kernels("transpose_scale", "transpose_scale").launch(
        a, runtime.Out(out), np.uint32(rows), np.uint32(cols), alpha,
        grid=((cols + 15) // 16, (rows + 15) // 16), block=(16, 16))
    np.testing.assert_allclose(out, np.float64(alpha) * a.astype(np.float64).T, rtol=F32_ROUNDING, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize("cluster", [4, (2, 1, 1), (8,)])
def test_cluster_launch_reports_ranks(kernels, cluster):
    size = cluster if isinstance(cluster, int) else cluster[0]
    blocks = 32
    out = np.full((blocks, 3), 99, np.uint32)
    kernels("cluster_rank", "cluster_rank").launch(runtime.Out(out), grid=blocks, block=64, cluster=cluster)
    index = np.arange(blocks)
    assert np.array_equal(out[:, 0], index % size)  # %cluster_ctarank
    assert np.all(out[:, 1] == size)  # %cluster_nctarank
    assert np.array_equal(out[:, 2], index // size)  # %clusterid.x


@pytest.mark.gpu
def test_without_a_cluster_every_block_is_alone(kernels):
    out = np.full((8, 3), 99, np.uint32)
    kernels("cluster_rank", "cluster_rank").launch(runtime.Out(out), grid=8, block=32)
    assert np.all(out[:, :2] == [0, 1])


@pytest.mark.gpu
def test_a_grid_that_is_not_whole_clusters_is_refused(kernels):
    with pytest.raises(ValueError, match="not a whole number of clusters"):
        kernels("cluster_rank", "cluster_rank").launch(runtime.Out(np.zeros((10, 3), np.uint32)),
                                                       grid=10, block=32, cluster=4)


@pytest.mark.gpu
@pytest.mark.parametrize("kib", [64, 224])
def test_dynamic_shared_memory_beyond_48_kib(kernels, rng, kib):
    n, blocks = kib * 1024 // 4, 6
    x = rng.standard_normal(n * blocks, dtype=np.float32)
    out = np.empty_like(x)
    sizes = np.zeros(blocks, np.uint32)
    kernels("dynamic_smem", "smem_reverse").launch(
        x, runtime.Out(out), runtime.Out(sizes), np.uint32(n), grid=blocks, block=1024, shared_mem=kib * 1024)
    assert np.array_equal(out.reshape(blocks, n), x.reshape(blocks, n)[:, ::-1])
    assert np.all(sizes == kib * 1024)


@pytest.mark.gpu
def test_too_much_shared_memory_is_a_named_cuda_error(kernels):
    kernel = kernels("dynamic_smem", "smem_reverse")
    with pytest.raises(runtime.CudaError) as caught:
        kernel.launch(np.zeros(4, np.float32), runtime.Out(np.zeros(4, np.float32)),
                      runtime.Out(np.zeros(1, np.uint32)), np.uint32(1), grid=1, block=32, shared_mem=1 << 20)
    assert caught.value.name is not None and caught.value.name.startswith("CUDA_ERROR_")
    assert "smem_reverse" in str(caught.value)


def swizzled_128b(x: np.ndarray, tile: int = 32) -> np.ndarray:
    """`x` tile by tile as the TMA unit lays 32x32 float32 tiles out in shared memory with
    128-byte swizzling: 16-byte chunk j of row r lands in chunk j ^ (r % 8)."""
    rows, cols = x.shape
    tiles = x.reshape(rows // tile, tile, cols // tile, tile).transpose(0, 2, 1, 3)
    r, c = np.meshgrid(np.arange(tile), np.arange(tile), indexing="ij")
    moved = np.empty_like(tiles)
    moved[:, :, r, ((c // 4) ^ (r % 8)) * 4 + c % 4] = tiles[:, :, r, c]
    return moved.transpose(0, 2, 1, 3).reshape(rows, cols)


def test_the_swizzle_model_is_a_permutation_within_each_row():
    x = np.arange(64 * 64, dtype=np.float32).reshape(64, 64)
    s = swizzled_128b(x)
    assert np.array_equal(np.sort(s, axis=1), np.sort(x, axis=1))
    assert np.array_equal(s[0], x[0]) and np.array_equal(s[8], x[8])  # rows with r % 8 == 0 stay
    assert np.array_equal(s[1, 0:4], x[1, 4:8])  # row 1: chunk 1 lands in chunk 0
    assert np.array_equal(s[9, 4:8], x[9, 0:4])  # row 9 (9 % 8 == 1): chunk 0 lands in chunk 1
    assert np.array_equal(s[7, 28:32], x[7, 0:4])  # row 7: chunk 0 lands in chunk 7
    assert np.array_equal(s[1, 32:36], x[1, 36:40])  # each 32-column tile on its own


@pytest.mark.gpu
@pytest.mark.parametrize("swizzle", [None, "128B"])
def test_tma_loads_tiles_through_a_tensor_map(kernels, rng, swizzle):
    rows, cols = 256, 128
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    tmap = runtime.tensor_map(runtime.DeviceArray.from_numpy(x), box=(32, 32), swizzle=swizzle)
    assert (tmap.box, tmap.swizzle) == ((32, 32), swizzle)
    out = np.full_like(x, np.nan)
    kernels("tma_load", "tma_load").launch(tmap, runtime.Out(out), np.uint32(cols),
                                           grid=(cols // 32, rows // 32), block=1024)
    assert np.array_equal(out, x if swizzle is None else swizzled_128b(x))


@pytest.mark.gpu
def test_tensor_map_arguments_are_checked():
    device = runtime.DeviceArray.from_numpy(np.ones((64, 64), np.float32))
    with pytest.raises(ValueError, match="one size per dimension"):
        runtime.tensor_map(device, box=(32,))
    with pytest.raises(ValueError, match="swizzle must be one of"):
        runtime.tensor_map(device, box=(32, 32), swizzle="16B")


@pytest.mark.gpu
def test_timing_gives_sensible_medians(kernels, rng):
    empty = runtime.time_launch(kernels("empty", "empty"), grid=1, block=32)
    n = 1 << 26
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    c = np.empty(n, np.float32)
    add = runtime.time_launch(kernels("vector_add", "vector_add"), a, b, runtime.Out(c), np.uint32(n),
                              grid=n // 256, block=256, warmup=3, repeat=20)
    assert 0 < empty < 0.5  # an empty kernel takes microseconds
    assert empty < add < 100
    assert 12 * n / (add * 1e-3) < 10e12  # bytes moved per second stay below any HBM's speed
    np.testing.assert_allclose(c, a.astype(np.float64) + b, rtol=F32_ROUNDING, atol=0)


@pytest.mark.gpu
def test_a_wrong_kernel_name_lists_the_kernels(kernels):
    module = runtime.load(ptxkit.assemble((SAMPLES / "vector_add.ptx").read_text()))
    assert module.kernel_names == ["vector_add"]
    with pytest.raises(KeyError, match=r"no kernel 'vector_sub' in .*\(kernels: vector_add\)"):
        module.kernel("vector_sub")


@pytest.mark.gpu
def test_loading_from_a_path_and_from_bytes(tmp_path):
    cubin = ptxkit.assemble((SAMPLES / "empty.ptx").read_text())
    path = tmp_path / "empty.cubin"
    path.write_bytes(cubin.data)
    for source in (path, str(path), cubin.data):
        runtime.load(source).kernel("empty").launch(grid=2, block=32)


@pytest.mark.gpu
def test_python_numbers_are_refused_as_arguments(kernels):
    kernel = kernels("vector_add", "vector_add")
    a = np.ones(4, np.float32)
    with pytest.raises(TypeError, match=r"argument 4: pass a numpy scalar such as np.uint32\(4\)"):
        kernel.launch(a, a, runtime.Out(a.copy()), 4, grid=1, block=4)
    with pytest.raises(TypeError, match="argument 1: cannot pass a list"):
        kernel.launch([1.0], a, a, np.uint32(1), grid=1, block=4)


@pytest.mark.gpu
def test_launch_errors_carry_the_cuda_error_name(kernels):
    with pytest.raises(runtime.CudaError) as caught:
        kernels("empty", "empty").launch(grid=1, block=2048)  # more threads than a block may have
    assert caught.value.name == "CUDA_ERROR_INVALID_VALUE"
    assert "kernel 'empty' (grid (1, 1, 1), block (2048, 1, 1)" in str(caught.value)
    kernels("empty", "empty").launch(grid=1, block=1024)  # the context is still usable


@pytest.mark.gpu
def test_an_instrumented_kernel_gets_its_buffer_and_returns_its_counts(rng):
    """The cubin of instrumented PTX knows its layout: launch passes the kernel's own
    arguments, allocates the buffer as the added parameter, and returns the counts."""
    from ptxkit.instrument import instrument

    text = instrument((SAMPLES / "vector_add.ptx").read_text(), "count")
    kernel = runtime.load(ptxkit.assemble(text)).kernel("vector_add")
    assert kernel.layout is not None and kernel.layout.buffer[0] == "param"
    n = 1000
    a, b = rng.random((2, n), dtype=np.float32)
    c = np.empty_like(a)
    counts = kernel.launch(a, b, runtime.Out(c), np.uint32(n), grid=5, block=256)
    np.testing.assert_allclose(c.astype(np.float64), a.astype(np.float64) + b, rtol=F32_ROUNDING)
    assert counts.blocks == {"B0": 40, "B1": 32, "DONE": 40} and [int(r[1]) for r in counts.rows] == [8, 8, 8, 8, 0]
    plain = runtime.load(ptxkit.assemble((SAMPLES / "vector_add.ptx").read_text())).kernel("vector_add")
    assert plain.launch(a, b, runtime.Out(c), np.uint32(n), grid=5, block=256) is None


@pytest.mark.gpu
def test_a_buffer_through_a_module_variable(rng):
    """buffer=global (what nvcc builds use): the runtime points the module's variable at
    the buffer; every warp of the 2-D grid records its span on the SM it ran on."""
    from ptxkit.instrument import instrument

    text = instrument((SAMPLES / "transpose_scale.ptx").read_text(), "timeline", buffer="global", capacity=64)
    kernel = runtime.load(ptxkit.assemble(text)).kernel("transpose_scale")
    assert kernel.layout.buffer == ("global", "ptxkit_trace_transpose_scale")
    rows, cols = 70, 90
    x = rng.standard_normal((rows, cols), dtype=np.float32)
    out = np.empty((cols, rows), np.float32)
    trace = kernel.launch(x, runtime.Out(out), np.uint32(rows), np.uint32(cols), np.float32(0.5),
                          grid=(3, 5), block=(32, 16))
    np.testing.assert_allclose(out.astype(np.float64), 0.5 * x.T.astype(np.float64), rtol=F32_ROUNDING)
    assert trace.ran.all() and trace.ctas == 15 and trace.unmatched == 0 and int(trace.dropped.sum()) == 0
    assert len(trace.spans) == 15 * 16 and np.all(trace.spans["cycles"] > 0)
    assert set(trace.spans["sm"].tolist()) <= set(range(200))
    events = trace.to_chrome()["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 15 * 16
