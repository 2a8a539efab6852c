"""Load cubins and launch their kernels on the GPU, through cuda.core (>= 1.0).

>>> import numpy as np, ptxkit
>>> from ptxkit import runtime
>>> kernel = runtime.load(ptxkit.assemble(open("samples/toolchain/vector_add.ptx").read())
...                       ).kernel("vector_add")                           # doctest: +SKIP
>>> a, b = np.random.rand(2, 1000).astype(np.float32)
>>> c = np.empty_like(a)
>>> kernel.launch(a, b, runtime.Out(c), np.uint32(1000), grid=4, block=256)  # doctest: +SKIP

Arguments: numpy arrays are copied to the device (wrap them in `Out`/`InOut` to have them
copied back), numpy scalars pass with their exact width, `DeviceArray`s pass as pointers and
`TensorMap`s by value. Grid and block count blocks and threads as in CUDA C++, also with a
cluster. Every launch is synchronised and checked; CUDA failures raise `CudaError` carrying
the CUDA error name. Everything runs on device 0 and one stream, made current on first use.

Instrumented kernels (`ptxkit.instrument`: their cubin's `layouts` name them) are launched
with their kernel's own arguments: each launch allocates the zero-filled buffer the grid
needs, passes it (as the parameter the pass added, or through the module variable it
declared), and `launch` returns the decoded `ptxkit.trace.Trace` or `ptxkit.trace.Counts`:

>>> trace = kernel.launch(a, b, runtime.Out(c), np.uint32(1000), grid=4, block=256)  # doctest: +SKIP
>>> trace.write_chrome("vector_add.json")                                           # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import math
import operator
import os
import re
import statistics
import threading

import numpy as np

from .tensormap import SWIZZLES, TensorMap

_STATIC_SHARED_LIMIT = 48 * 1024  # dynamic shared memory a kernel may use without opting in
_ERROR_NAME = re.compile(r"\bCUDA_ERROR_[A-Z0-9_]+")


class GpuUnavailable(RuntimeError):
    """No GPU can be used through cuda-python here; the message says why.

    Raised by the first call that needs the GPU, on a machine without one:

    >>> DeviceArray.zeros(4, np.float32)  # doctest: +SKIP
    Traceback (most recent call last):
    ptxkit.runtime.GpuUnavailable: no NVIDIA GPU usable through cuda-python: no CUDA device found
    """


class CudaError(RuntimeError):
    """A CUDA call failed; `name` is the CUDA error (``"CUDA_ERROR_INVALID_VALUE"``) if any.

    >>> CudaError("launching kernel 'k'", "CUDA_ERROR_INVALID_VALUE: invalid argument").name
    'CUDA_ERROR_INVALID_VALUE'
    """

    def __init__(self, what: str, detail: str):
        match = _ERROR_NAME.search(detail)
        self.name = match.group() if match else None
        super().__init__(f"{what}: {detail}")


def gpu_available() -> bool:
    """True when a GPU can be used through cuda.core; never raises, and is cached.

    >>> isinstance(gpu_available(), bool)
    True
    """
    return gpu_unavailable_reason() is None


@functools.cache
def gpu_unavailable_reason() -> str | None:
    """Why no GPU can be used (None when one can); never raises, and is cached.

    >>> gpu_unavailable_reason() is None or "cuda" in gpu_unavailable_reason().lower()
    True
    """
    try:
        import cuda.core  # noqa: F401  (the runtime needs it; probe that it imports)
        from cuda.bindings import driver
    except Exception as err:  # ImportError, or a broken installation
        return f"cuda-python is not usable ({err}); install it with `pip install \"ptxkit[cuda]\"`"
    try:
        (status,) = driver.cuInit(0)
        if status == driver.CUresult.CUDA_SUCCESS:
            status, count = driver.cuDeviceGetCount()
        if status != driver.CUresult.CUDA_SUCCESS:
            return f"the CUDA driver failed to start ({_driver_error(driver, status)})"
    except Exception as err:  # no libcuda, for one
        return f"the CUDA driver cannot be used ({err})"
    return None if count > 0 else "no CUDA device found"


class _Gpu:
    """Device 0 with its stream and what ptxkit needs from cuda.core, made once."""

    def __init__(self):
        from cuda.core import Device, EventOptions, LaunchConfig, LegacyPinnedMemoryResource, launch
        from cuda.core._utils.cuda_utils import CUDAError  # cuda.core's error (not re-exported)

        self.CUDAError = CUDAError
        self.LaunchConfig = LaunchConfig
        self.launch = launch
        with self.errors("starting GPU 0"):
            self.device = Device(0)
            self.device.set_current()
            self.stream = self.device.create_stream()
        self.pinned = LegacyPinnedMemoryResource()
        self.timing = EventOptions(timing_enabled=True)
        self._clock_ghz: float | None = None

    @property
    def clock_ghz(self) -> float:
        """The SM clock the device reports (its highest), in GHz."""
        if self._clock_ghz is None:
            from cuda.bindings import driver

            attribute = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_CLOCK_RATE
            status, khz = driver.cuDeviceGetAttribute(attribute, self.device.device_id)
            self._clock_ghz = khz / 1e6 if status == driver.CUresult.CUDA_SUCCESS and khz > 0 else 0.0
        return self._clock_ghz

    @contextlib.contextmanager
    def errors(self, what: str):
        """Turn cuda.core's CUDA errors inside the block into `CudaError`s about `what`."""
        try:
            yield
        except self.CUDAError as err:
            raise CudaError(what, str(err)) from err

    def sync(self, what: str) -> None:
        with self.errors(what):
            self.stream.sync()


_shared_gpu: _Gpu | None = None
_gpu_lock = threading.Lock()
_thread = threading.local()


def _gpu() -> _Gpu:
    """The GPU, made current in the calling thread; `GpuUnavailable` when there is none."""
    global _shared_gpu
    gpu = _shared_gpu
    if gpu is None:
        with _gpu_lock:
            if _shared_gpu is None:
                reason = gpu_unavailable_reason()
                if reason is not None:
                    raise GpuUnavailable(f"no NVIDIA GPU usable through cuda-python: {reason}")
                _shared_gpu = _Gpu()
                _thread.current = True
            gpu = _shared_gpu
    if not getattr(_thread, "current", False):
        gpu.device.set_current()
        _thread.current = True
    return gpu


class DeviceArray:
    """A C-ordered array in GPU memory: a cuda.core `Buffer` with a shape and a dtype.

    >>> d = DeviceArray.from_numpy(np.arange(6, dtype=np.int32).reshape(2, 3))  # doctest: +SKIP
    >>> d.to_numpy()                                                            # doctest: +SKIP
    array([[0, 1, 2],
           [3, 4, 5]], dtype=int32)
    """

    __slots__ = ("buffer", "shape", "dtype")

    def __init__(self, buffer, shape: tuple[int, ...], dtype):
        self.buffer = buffer
        self.shape = tuple(shape)
        self.dtype = np.dtype(dtype)

    @classmethod
    def empty(cls, shape, dtype) -> DeviceArray:
        """Uninitialised device memory for an array of `shape` and `dtype`."""
        shape = (operator.index(shape),) if np.ndim(shape) == 0 else tuple(map(operator.index, shape))
        dtype = np.dtype(dtype)
        if dtype.hasobject or any(n < 0 for n in shape):
            raise ValueError(f"cannot place an array of shape {shape} and dtype {dtype} on the GPU")
        nbytes = math.prod(shape) * dtype.itemsize
        gpu = _gpu()
        with gpu.errors(f"allocating {nbytes} bytes of device memory"):
            buffer = gpu.device.allocate(max(nbytes, 1), stream=gpu.stream)
        return cls(buffer, shape, dtype)

    @classmethod
    def zeros(cls, shape, dtype) -> DeviceArray:
        """Zero-filled device memory for an array of `shape` and `dtype`."""
        array = cls.empty(shape, dtype)
        gpu = _gpu()
        with gpu.errors("filling device memory with zeros"):
            array.buffer.fill(0, stream=gpu.stream)
        return array

    @classmethod
    def from_numpy(cls, array) -> DeviceArray:
        """A device copy of a numpy array."""
        array = np.ascontiguousarray(array)
        device = cls.empty(array.shape, array.dtype)
        device.copy_from_numpy(array)
        return device

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def ptr(self) -> int:
        """The device address."""
        return int(self.buffer.handle)

    def copy_from_numpy(self, array) -> None:
        """Overwrite the device memory with a numpy array of the same shape and dtype."""
        array = np.ascontiguousarray(array)
        if array.shape != self.shape or array.dtype != self.dtype:
            raise ValueError(f"expected {self.shape} {self.dtype}, got {array.shape} {array.dtype}")
        gpu = _gpu()
        with _staging(gpu, self.buffer.size) as staging:
            ctypes.memmove(int(staging.handle), array.ctypes.data, self.nbytes)  # a host pointer
            with gpu.errors("copying to the device"):
                self.buffer.copy_from(staging, stream=gpu.stream)
            gpu.sync("copying to the device")

    def to_numpy(self) -> np.ndarray:
        """A numpy copy of the device memory."""
        gpu = _gpu()
        result = np.empty(self.shape, self.dtype)
        with _staging(gpu, self.buffer.size) as staging:
            with gpu.errors("copying from the device"):
                self.buffer.copy_to(staging, stream=gpu.stream)
            gpu.sync("copying from the device")
            ctypes.memmove(result.ctypes.data, int(staging.handle), self.nbytes)
        return result

    def __repr__(self) -> str:
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, ptr=0x{self.ptr:x})"


@contextlib.contextmanager
def _staging(gpu: _Gpu, size: int):
    """A cuda.core Buffer of `size` bytes of pinned host memory, freed on exit."""
    with gpu.errors(f"allocating {size} bytes of pinned host memory"):
        buffer = gpu.pinned.allocate(size)
    try:
        yield buffer
    finally:
        buffer.close()


class Out:
    """Mark a numpy array as a kernel output: the kernel gets zero-filled device memory of
    the array's size and dtype, which is copied back into the array after the launch.

    >>> y = np.empty(1000, np.float32)
    >>> kernel.launch(x, Out(y), np.uint32(1000), grid=4, block=256)  # doctest: +SKIP
    >>> Out([0.0] * 1000)
    Traceback (most recent call last):
    TypeError: Out takes a numpy array (got list)
    """

    __slots__ = ("array",)

    def __init__(self, array):
        if not isinstance(array, np.ndarray):
            raise TypeError(f"{type(self).__name__} takes a numpy array (got {type(array).__name__})")
        if not array.flags.writeable:
            raise ValueError(f"{type(self).__name__} needs a writeable array")
        self.array = array


class InOut(Out):
    """Like `Out`, but the array's contents are copied to the device first.

    >>> total = np.ones(256, np.float32)
    >>> kernel.launch(InOut(total), np.uint32(256), grid=1, block=256)  # doctest: +SKIP
    >>> frozen = np.ones(4); frozen.flags.writeable = False
    >>> InOut(frozen)
    Traceback (most recent call last):
    ValueError: InOut needs a writeable array
    """

    __slots__ = ()


class _Arguments:
    """Kernel arguments made ready for cuda.core: arrays copied in, outputs remembered."""

    __slots__ = ("values", "outputs")

    def __init__(self, args):
        self.values = []
        self.outputs: list[tuple[np.ndarray, DeviceArray]] = []
        for position, arg in enumerate(args, 1):
            self.values.append(self._convert(position, arg))

    def _convert(self, position: int, arg):
        if isinstance(arg, np.generic):
            return arg
        if isinstance(arg, DeviceArray):
            return arg.buffer
        if isinstance(arg, TensorMap):
            return arg.descriptor
        if isinstance(arg, Out):
            device = DeviceArray.from_numpy(arg.array) if isinstance(arg, InOut) else (
                DeviceArray.zeros(arg.array.shape, arg.array.dtype))
            self.outputs.append((arg.array, device))
            return device.buffer
        if isinstance(arg, np.ndarray):
            return DeviceArray.from_numpy(arg).buffer
        if isinstance(arg, (bool, int, float)):
            raise TypeError(f"argument {position}: pass a numpy scalar such as np.uint32({arg!r}) or "
                            f"np.float32({arg!r}), so that its width is exact")
        raise TypeError(f"argument {position}: cannot pass a {type(arg).__name__} to a kernel (use a "
                        "numpy array or scalar, Out/InOut, a DeviceArray or a TensorMap)")

    def copy_back(self) -> None:
        for array, device in self.outputs:
            array[...] = device.to_numpy()


class Kernel:
    """One kernel of a loaded `Module`; `layout` is its instrumentation buffer's layout
    (None for a kernel that is not instrumented)."""

    def __init__(self, module: Module, name: str, raw):
        self.module = module
        self.name = name
        self.raw = raw  # the cuda.core Kernel
        self.layout = module.layouts.get(name)
        self._shared_limit = _STATIC_SHARED_LIMIT
        self._configs: dict[tuple, object] = {}

    def launch(self, *args, grid, block, cluster=None, shared_mem: int = 0):
        """Run the kernel once, wait for it and check for errors; copy `Out`/`InOut` back.

        `grid` counts blocks (also with a `cluster`, whose sizes must divide it); `grid`,
        `block` and `cluster` are ints or tuples of up to 3 ints; `shared_mem` is the dynamic
        shared memory in bytes (above 48 KiB the kernel's limit is raised first). Returns
        None, or for an instrumented kernel the decoded `ptxkit.trace.Trace`/`Counts`.

        >>> kernel.launch(x, runtime.Out(y), np.uint32(n), grid=(n + 255) // 256, block=256)  # doctest: +SKIP
        """
        gpu = _gpu()
        config = self._config(gpu, grid, block, cluster, shared_mem)
        buffer = self._instrument_buffer(grid)
        arguments = _Arguments(args if buffer is None or self.layout.buffer[0] != "param" else (*args, buffer))
        try:
            gpu.launch(gpu.stream, config, self.raw, *arguments.values)
            gpu.stream.sync()
        except gpu.CUDAError as err:
            raise CudaError(self._describe(grid, block, cluster, shared_mem), str(err)) from err
        arguments.copy_back()
        if buffer is not None:
            from .trace import decode

            return decode(buffer.to_numpy(), self.layout, grid=_dims("grid", grid), clock_ghz=gpu.clock_ghz or None)
        return None

    def _instrument_buffer(self, grid) -> DeviceArray | None:
        """The zero-filled buffer an instrumented kernel's launch over `grid` writes (made
        known to the kernel's module variable when the layout says so); None otherwise."""
        if self.layout is None:
            return None
        buffer = DeviceArray.zeros(self.layout.buffer_bytes(_dims("grid", grid)), np.uint8)
        if self.layout.buffer[0] == "global":
            self.module.set_global_pointer(self.layout.buffer[1], buffer)
        return buffer

    def _config(self, gpu: _Gpu, grid, block, cluster, shared_mem: int):
        """The cuda.core LaunchConfig (cached), raising the shared-memory limit if needed."""
        try:  # repeated launches: the arguments as given are the key (lists are not hashable)
            return self._configs[grid, block, cluster, shared_mem]
        except (KeyError, TypeError):
            pass
        given = (grid, block, cluster, shared_mem)
        grid, block = _dims("grid", grid), _dims("block", block)
        cluster = None if cluster is None else _dims("cluster", cluster)
        shared_mem = operator.index(shared_mem)
        key = (grid, block, cluster, shared_mem)
        config = self._configs.get(key)
        if config is None:
            if shared_mem < 0:
                raise ValueError(f"shared_mem must be >= 0 (got {shared_mem})")
            if cluster is not None:
                if any(g % c for g, c in zip(grid, cluster)):
                    raise ValueError(f"grid {grid} (in blocks) is not a whole number of clusters {cluster}")
                grid = tuple(g // c for g, c in zip(grid, cluster))  # cuda.core counts clusters
            if shared_mem > self._shared_limit:
                self._raise_shared_limit(gpu, shared_mem)
            with gpu.errors(f"configuring a launch of kernel {self.name!r}"):
                config = gpu.LaunchConfig(grid=grid, cluster=cluster, block=block, shmem_size=shared_mem)
            self._configs[key] = config
        with contextlib.suppress(TypeError):
            self._configs[given] = config
        return config

    def _raise_shared_limit(self, gpu: _Gpu, size: int) -> None:
        """Allow `size` bytes of dynamic shared memory (cuda.core has no call for this)."""
        from cuda.bindings import driver

        attribute = driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        handle = self.raw.handle
        if isinstance(handle, driver.CUfunction):
            (status,) = driver.cuFuncSetAttribute(handle, attribute, size)
        else:  # a CUkernel (cuda.core 1.x loads libraries)
            (status,) = driver.cuKernelSetAttribute(attribute, size, handle, gpu.device.device_id)
        if status != driver.CUresult.CUDA_SUCCESS:
            what = f"allowing kernel {self.name!r} {size} bytes of dynamic shared memory"
            raise CudaError(what, _driver_error(driver, status))
        self._shared_limit = size

    def _describe(self, grid, block, cluster, shared_mem) -> str:
        extra = f", cluster {_dims('cluster', cluster)}" if cluster is not None else ""
        return (f"kernel {self.name!r} (grid {_dims('grid', grid)}, block {_dims('block', block)}{extra}, "
                f"shared_mem {shared_mem})")

    def __repr__(self) -> str:
        return f"<Kernel {self.name!r} of {self.module.label}>"


class Module:
    """A cubin loaded on the GPU; `kernel(name)` looks up its kernels.

    >>> import ptxkit
    >>> module = load(ptxkit.assemble(open("samples/toolchain/vector_add.ptx").read()))  # doctest: +SKIP
    >>> module.kernel_names, module.kernel("vector_add")                               # doctest: +SKIP
    (['vector_add'], <Kernel 'vector_add' of cubin for sm_90a>)
    """

    def __init__(self, data: bytes, label: str, kernel_names: list[str], layouts: dict | None = None):
        self.data = data
        self.label = label
        self.kernel_names = kernel_names
        self.layouts = layouts or {}
        gpu = _gpu()
        from cuda.core import ObjectCode

        with gpu.errors(f"loading {label}"):
            self._code = ObjectCode.from_cubin(data, name=label)
        self._kernels: dict[str, Kernel] = {}

    def kernel(self, name: str) -> Kernel:
        """The kernel called `name`; KeyError listing the kernels when there is none."""
        kernel = self._kernels.get(name)
        if kernel is None:
            if name not in self.kernel_names:
                listed = ", ".join(self.kernel_names) or "none"
                raise KeyError(f"no kernel {name!r} in {self.label} (kernels: {listed})")
            with _gpu().errors(f"looking up kernel {name!r} in {self.label}"):
                kernel = self._kernels[name] = Kernel(self, name, self._code.get_kernel(name))
        return kernel

    def set_global_pointer(self, symbol: str, array: DeviceArray) -> None:
        """Store `array`'s device address in the module's ``.u64`` variable `symbol`
        (how an instrumented kernel of an nvcc-style build finds its buffer)."""
        from cuda.bindings import driver

        gpu = _gpu()
        name = symbol.encode()
        with gpu.errors(f"finding {symbol!r} in {self.label}"):
            handle = self._code.handle
        if isinstance(handle, driver.CUlibrary):
            status, address, size = driver.cuLibraryGetGlobal(handle, name)
        else:
            status, address, size = driver.cuModuleGetGlobal(handle, name)
        if status != driver.CUresult.CUDA_SUCCESS or size != 8:
            raise CudaError(f"finding the .u64 variable {symbol!r} in {self.label}", _driver_error(driver, status))
        value = np.array([array.ptr], np.uint64)
        gpu.sync("before setting a module variable")
        (status,) = driver.cuMemcpyHtoD(address, value.ctypes.data, 8)
        if status != driver.CUresult.CUDA_SUCCESS:
            raise CudaError(f"setting {symbol!r} in {self.label}", _driver_error(driver, status))


def load(cubin) -> Module:
    """Load a cubin (a `ptxkit.Cubin`, its bytes, or a path to a ``.cubin`` file) on the GPU.

    >>> module = load(ptxkit.assemble(ptx))  # doctest: +SKIP
    """
    from .ptxas import Cubin, kernel_names

    layouts = {}
    if isinstance(cubin, Cubin):
        data, label, layouts = cubin.data, f"cubin for {cubin.arch}", cubin.layouts
    elif isinstance(cubin, (bytes, bytearray, memoryview)):
        data, label = bytes(cubin), "<cubin>"
    elif isinstance(cubin, (str, os.PathLike)):
        with open(cubin, "rb") as handle:
            data, label = handle.read(), os.fspath(cubin)
    else:
        raise TypeError(f"load takes a Cubin, bytes or a path (got {type(cubin).__name__})")
    try:
        names = kernel_names(data)
    except ValueError as err:
        raise ValueError(f"{label} is not a cubin: {err}; assemble PTX with ptxkit.assemble first") from None
    return Module(data, label, names, layouts)


def time_launch(kernel: Kernel, *args, grid, block, cluster=None, shared_mem: int = 0,
                warmup: int = 10, repeat: int = 100) -> float:
    """Median time of one launch in milliseconds, from CUDA events around each of `repeat`
    launches after `warmup` untimed ones. Arguments are prepared (copied) once; an
    instrumented kernel's buffer is allocated once and zero-filled before each launch,
    outside the timed events, so that every launch writes the whole trace.

    >>> time_launch(kernel, x, runtime.Out(y), np.uint32(n), grid=g, block=256)  # doctest: +SKIP
    0.0123
    """
    if repeat < 1 or warmup < 0:
        raise ValueError("time_launch needs repeat >= 1 and warmup >= 0")
    gpu = _gpu()
    config = kernel._config(gpu, grid, block, cluster, shared_mem)
    buffer = kernel._instrument_buffer(grid)
    arguments = _Arguments(args if buffer is None or kernel.layout.buffer[0] != "param" else (*args, buffer))
    stream, values = gpu.stream, arguments.values
    try:
        for _ in range(warmup):
            if buffer is not None:
                buffer.buffer.fill(0, stream=stream)
            gpu.launch(stream, config, kernel.raw, *values)
        events = []
        for _ in range(repeat):
            if buffer is not None:
                buffer.buffer.fill(0, stream=stream)
            start = stream.record(options=gpu.timing)
            gpu.launch(stream, config, kernel.raw, *values)
            events.append((start, stream.record(options=gpu.timing)))
        stream.sync()
        times = [stop - start for start, stop in events]
    except gpu.CUDAError as err:
        raise CudaError("timing " + kernel._describe(grid, block, cluster, shared_mem), str(err)) from err
    arguments.copy_back()
    return statistics.median(times)


def _dims(what: str, value) -> tuple[int, int, int]:
    """An int or a tuple of up to 3 ints, as a 3-tuple of positive ints."""
    values = (value,) if np.ndim(value) == 0 else tuple(value)
    try:
        values = tuple(map(operator.index, values))
    except TypeError:
        raise TypeError(f"{what} must be an int or a tuple of up to 3 ints (got {value!r})") from None
    if not 1 <= len(values) <= 3 or min(values) < 1:
        raise ValueError(f"{what} must be 1 to 3 positive ints (got {value!r})")
    return values + (1,) * (3 - len(values))


def _driver_error(driver, status) -> str:
    """``NAME: description`` of a cuda.bindings driver status."""
    _, name = driver.cuGetErrorName(status)
    _, text = driver.cuGetErrorString(status)
    name = name.decode() if isinstance(name, bytes) else str(status)
    return f"{name}: {text.decode()}" if isinstance(text, bytes) else name


def tensor_map(array: DeviceArray, box, swizzle: str | None = None) -> TensorMap:
    """A tiled TMA tensor map over a `DeviceArray` with tile `box`, given in the array's own
    (row-major) order; `swizzle` is None, ``"32B"``, ``"64B"`` or ``"128B"``.

    >>> tensor_map(DeviceArray.from_numpy(x), box=(32, 32))  # doctest: +SKIP
    TensorMap(box=(32, 32), swizzle=None, array=DeviceArray(shape=(256, 256), ...))
    """
    if not isinstance(array, DeviceArray):
        raise TypeError("tensor_map needs a DeviceArray (copy numpy data with DeviceArray.from_numpy)")
    box = tuple(map(operator.index, box))
    if len(box) != len(array.shape):
        raise ValueError(f"box {box} must have one size per dimension of the array {array.shape}")
    if swizzle not in SWIZZLES:
        raise ValueError(f"swizzle must be one of None, '32B', '64B', '128B' (got {swizzle!r})")
    gpu = _gpu()
    from cuda.core._tensor_map import TensorMapSwizzle  # not re-exported by cuda.core 1.2
    from cuda.core.utils import StridedMemoryView

    mode = getattr(TensorMapSwizzle, SWIZZLES[swizzle])
    with gpu.errors(f"encoding a tensor map with box {box} over {array!r}"):
        view = StridedMemoryView.from_buffer(array.buffer, array.shape, dtype=array.dtype)
        descriptor = view.as_tensor_map(box_dim=box, swizzle=mode)
    return TensorMap(descriptor, array, box, swizzle)
