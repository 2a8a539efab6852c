"""Register tiles: a logical tile held in PTX registers, one register per physical slot.

A `RegTile` has a logical ``shape``, a ``dtype``, a ``layout`` (None: a plain local
buffer, row-major over its slots, as TVM's ``alloc_buffer(scope="local")``), and the
registers of its slots: ``layout.storage().span()`` of them, gaps included. Slicing
gives a region of the same buffer; `view` reinterprets the same registers.

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.layout import TileLayout, S, laneid
>>> b = PtxBuilder()
>>> t = RegTile(b, (32, 2, 2), "f32", TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]))
>>> len(t.regs), [t.storage_slot(k) for k in range(4)]
(7, [0, 4, 2, 6])
>>> t[:, 1:2].start, t[:, 1:2].extent
((0, 1, 0), (32, 1, 2))
"""

from __future__ import annotations

import math

from .dtypes import dtype as as_dtype
from .layout import ComposeLayout, LayoutError, S, TileLayout


class RegTile:
    """A tile in registers (see the module docstring). ``scope`` is always ``"local"``.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> t = RegTile(PtxBuilder(), (4, 8), "f16")          # no layout: 32 slots, row-major
    >>> len(t.regs), t.regs[:2], t[1:3, 2].extent, t[1:3].same_buffer(t)
    (32, ['%h0', '%h1'], (2, 1), True)
    """

    scope = "local"

    def __init__(self, builder, shape, dtype, layout=None, regs=None):
        self.builder = builder
        self.shape = tuple(int(s) for s in shape)
        self.dtype = as_dtype(dtype)
        self.layout = layout
        size = math.prod(self.shape)
        if self.tile_layout.size() != size:
            raise LayoutError(f"layout {layout!r} has {self.tile_layout.size()} elements but shape {self.shape} has {size}")
        storage = self.storage_layout
        if storage.replica:
            raise LayoutError(f"register tiles cannot replicate over register slots: {layout!r}")
        span = storage.span()
        if regs is None:
            regs = builder.regs(self.dtype.reg_type, span)
        elif len(regs) < span:
            raise LayoutError(f"layout {layout!r} needs {span} registers, got {len(regs)}")
        self.regs = list(regs)
        self.start = (0,) * len(self.shape)
        self.extent = self.shape
        self._base = self

    @property
    def tile_layout(self) -> TileLayout:
        """The layout to compute with: the given one, its tile part, or row-major."""
        if self.layout is None:
            return TileLayout(S[self.shape])
        if isinstance(self.layout, ComposeLayout):
            return self.layout.tile_layout
        return self.layout

    @property
    def storage_layout(self) -> TileLayout:
        return self.tile_layout.storage()

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def region_size(self) -> int:
        return math.prod(self.extent)

    def same_buffer(self, other: "RegTile") -> bool:
        """True when both are regions of one buffer (TVM's ``dst.same_as(src)``)."""
        return self._base is other._base

    def __getitem__(self, key) -> "RegTile":
        """A region: slices (no step) or ints (kept as extent-1 dims) per dim."""
        key = key if isinstance(key, tuple) else (key,)
        if len(key) > self.ndim:
            raise IndexError(f"{len(key)} indices for a {self.ndim}-d tile")
        key = key + (slice(None),) * (self.ndim - len(key))
        start, extent = [], []
        for k, base, ext in zip(key, self.start, self.extent):
            if isinstance(k, slice):
                if k.step not in (None, 1):
                    raise IndexError("register tile regions cannot have a step")
                lo, hi, _ = k.indices(ext)
                if hi <= lo:
                    raise IndexError(f"empty region {k}")
            else:
                lo = int(k) + (ext if int(k) < 0 else 0)
                hi = lo + 1
                if not 0 <= lo < ext:
                    raise IndexError(f"index {k} out of range for extent {ext}")
            start.append(base + lo)
            extent.append(hi - lo)
        region = object.__new__(RegTile)
        region.__dict__.update(self.__dict__)
        region.start, region.extent = tuple(start), tuple(extent)
        return region

    def view(self, shape, layout=None) -> "RegTile":
        """The same registers as a new buffer with another shape and layout (TVM's ``view``)."""
        return RegTile(self.builder, shape, self.dtype, layout, self.regs)

    def storage_slot(self, k: int) -> int:
        """The physical slot of storage coordinate `k` (the mediated ``local(layout=storage)`` view)."""
        storage = self.storage_layout
        return storage.apply(k, shape=[storage.size()])[0].get("m", 0)

    def local_slot(self, index, local_shape) -> int:
        """The slot of a local index over `local_shape` (row-major storage coordinates)."""
        k = 0
        for i, e in zip(index, local_shape):
            k = k * e + i
        return self.storage_slot(k)

    def element_slot(self, coord) -> int:
        """The slot of a logical coordinate, for layouts without thread axes."""
        places = self.tile_layout.apply(tuple(coord), shape=self.shape)
        if self.tile_layout.thread_axes():
            raise LayoutError(
                f"layout {self.layout!r} spreads the tile over threads; a thread-scope reduction needs a "
                "thread-local layout (use .view() with its storage layout)"
            )
        return places[0].get("m", 0)

    def __repr__(self) -> str:
        region = "" if self.extent == self.shape else f" region start={self.start} extent={self.extent}"
        return f"RegTile({self.shape}, {self.dtype}, {self.layout!r}{region})"
