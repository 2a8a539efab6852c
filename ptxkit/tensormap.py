"""TMA tensor maps: the 128-byte descriptors that ``cp.async.bulk.tensor`` reads.

>>> from ptxkit import runtime
>>> x = runtime.DeviceArray.from_numpy(np.ones((256, 256), np.float32))  # doctest: +SKIP
>>> tmap = runtime.tensor_map(x, box=(32, 32))                          # doctest: +SKIP
>>> kernel.launch(tmap, runtime.Out(y), np.uint32(256), grid=(8, 8), block=1024)  # doctest: +SKIP

A kernel takes the map as ``.param .align 64 .b8 name[128]`` and passes its address
(``mov.b64 %rd, name; cvta.param.u64 %rd, %rd;``) to ``cp.async.bulk.tensor``, whose
coordinates run innermost first: ``{column, row}`` for a 2-D map.

This module holds the map itself and imports nothing of ptxkit; `ptxkit.runtime.tensor_map`
encodes one on the GPU.
"""

from __future__ import annotations

#: swizzle argument -> cuda.core's ``TensorMapSwizzle`` member
SWIZZLES = {None: "NONE", "32B": "SWIZZLE_32B", "64B": "SWIZZLE_64B", "128B": "SWIZZLE_128B"}


class TensorMap:
    """A tiled TMA tensor map over a `ptxkit.runtime.DeviceArray` (which it keeps alive).

    `descriptor` is cuda.core's ``TensorMapDescriptor``, passed to kernels by value.

    >>> import numpy as np
    >>> from ptxkit import runtime
    >>> x = runtime.DeviceArray.from_numpy(np.ones((256, 256), np.float32))  # doctest: +SKIP
    >>> tmap = runtime.tensor_map(x, box=(64, 32), swizzle="128B")   # doctest: +SKIP
    >>> tmap.box, tmap.swizzle, tmap.array is x                       # doctest: +SKIP
    ((64, 32), '128B', True)
    >>> TensorMap(None, "x", (64, 32), "128B").box
    (64, 32)
    """

    __slots__ = ("descriptor", "array", "box", "swizzle")

    def __init__(self, descriptor, array, box: tuple[int, ...], swizzle: str | None):
        self.descriptor = descriptor
        self.array = array
        self.box = box
        self.swizzle = swizzle

    def __repr__(self) -> str:
        return f"TensorMap(box={self.box}, swizzle={self.swizzle!r}, array={self.array!r})"
