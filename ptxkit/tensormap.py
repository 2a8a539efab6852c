"""TMA tensor maps: the 128-byte descriptors that ``cp.async.bulk.tensor`` reads.

>>> from ptxkit import runtime
>>> x = runtime.DeviceArray.from_numpy(np.ones((256, 256), np.float32))  # doctest: +SKIP
>>> tmap = runtime.tensor_map(x, box=(32, 32))                          # doctest: +SKIP
>>> kernel.launch(tmap, runtime.Out(y), np.uint32(256), grid=(8, 8), block=1024)  # doctest: +SKIP

A kernel takes the map as ``.param .align 64 .b8 name[128]`` and passes its address
(``mov.b64 %rd, name; cvta.param.u64 %rd, %rd;``) to ``cp.async.bulk.tensor``, whose
coordinates run innermost first: ``{column, row}`` for a 2-D map.
"""

from __future__ import annotations

import operator

_SWIZZLES = {None: "NONE", "32B": "SWIZZLE_32B", "64B": "SWIZZLE_64B", "128B": "SWIZZLE_128B"}


class TensorMap:
    """A tiled TMA tensor map over a `ptxkit.runtime.DeviceArray` (which it keeps alive).

    `descriptor` is cuda.core's ``TensorMapDescriptor``, passed to kernels by value.

    >>> import numpy as np
    >>> from ptxkit.runtime import DeviceArray
    >>> x = DeviceArray.from_numpy(np.ones((256, 256), np.float32))  # doctest: +SKIP
    >>> tmap = tensor_map(x, box=(64, 32), swizzle="128B")           # doctest: +SKIP
    >>> tmap.box, tmap.swizzle, tmap.array is x                       # doctest: +SKIP
    ((64, 32), '128B', True)
    """

    __slots__ = ("descriptor", "array", "box", "swizzle")

    def __init__(self, descriptor, array, box: tuple[int, ...], swizzle: str | None):
        self.descriptor = descriptor
        self.array = array
        self.box = box
        self.swizzle = swizzle

    def __repr__(self) -> str:
        return f"TensorMap(box={self.box}, swizzle={self.swizzle!r}, array={self.array!r})"


def tensor_map(array, box, swizzle: str | None = None) -> TensorMap:
    """A tiled TMA tensor map over a `DeviceArray` with tile `box`, given in the array's own
    (row-major) order; `swizzle` is None, ``"32B"``, ``"64B"`` or ``"128B"``.

    >>> tensor_map(runtime.DeviceArray.from_numpy(x), box=(32, 32))  # doctest: +SKIP
    TensorMap(box=(32, 32), swizzle=None, array=DeviceArray(shape=(256, 256), ...))
    """
    from .runtime import DeviceArray, _gpu

    if not isinstance(array, DeviceArray):
        raise TypeError("tensor_map needs a DeviceArray (copy numpy data with DeviceArray.from_numpy)")
    box = tuple(map(operator.index, box))
    if len(box) != len(array.shape):
        raise ValueError(f"box {box} must have one size per dimension of the array {array.shape}")
    if swizzle not in _SWIZZLES:
        raise ValueError(f"swizzle must be one of None, '32B', '64B', '128B' (got {swizzle!r})")
    gpu = _gpu()
    from cuda.core._tensor_map import TensorMapSwizzle  # not re-exported by cuda.core 1.2
    from cuda.core.utils import StridedMemoryView

    mode = getattr(TensorMapSwizzle, _SWIZZLES[swizzle])
    with gpu.errors(f"encoding a tensor map with box {box} over {array!r}"):
        view = StridedMemoryView.from_buffer(array.buffer, array.shape, dtype=array.dtype)
        descriptor = view.as_tensor_map(box_dim=box, swizzle=mode)
    return TensorMap(descriptor, array, box, swizzle)
