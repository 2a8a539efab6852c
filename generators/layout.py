"""Tile layouts in TVM TIRx's spelling: where each logical element of a tile lives.

A `TileLayout` maps a logical coordinate to physical places on axes such as ``m`` (a
register slot), ``laneid`` (a lane of the warp) or ``tid_in_wg`` (a thread of the
warpgroup). It has three parts:

* ``shard``: `Iter` (extent, stride, axis) triples that split the row-major flat index,
  the last one innermost;
* ``replica``: iters whose every position is added to every element (broadcast);
* ``offset``: a constant per axis.

Layouts are written the way TVM writes them, so tests port one to one:

>>> L = TileLayout(S[(32, 4) : (1 @ laneid, 1)])
>>> L
S[(32, 4) : (1@laneid, 1)]
>>> L.apply(5, shape=[128])
[{'laneid': 1, 'm': 1}]
>>> D = TileLayout(S[4:1] + R[32 : 1 @ laneid])
>>> len(D.apply(2, shape=[4]))            # one copy per lane
32

Integers only: there are no symbolic extents.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from ptxkit._records import Record


class LayoutError(ValueError):
    """A layout operation that cannot be done (grouping, tiling, a bad coordinate).

    >>> TileLayout(S[64]).group([5, 16])
    Traceback (most recent call last):
    ...
    ptxkit.generators.layout.LayoutError: layout S[64 : 1] can not be grouped by shape [5, 16]
    """


class Axis:
    """A named physical axis; ``thread`` axes are distributed over threads.

    Axes are interned: ``axis("laneid") is laneid``. ``1 @ laneid`` gives a stride on it.

    >>> (2 @ laneid).stride, (2 @ laneid).axis.is_thread
    (2, True)
    """

    __slots__ = ("name", "is_thread")
    _registry: dict[str, "Axis"] = {}

    def __new__(cls, name: str, is_thread: bool = False):
        existing = cls._registry.get(name)
        if existing is not None:
            return existing
        instance = super().__new__(cls)
        instance.name = name
        instance.is_thread = is_thread
        cls._registry[name] = instance
        return instance

    def __eq__(self, other) -> bool:
        return isinstance(other, Axis) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)

    def __rmatmul__(self, stride: int) -> "OnAxis":
        return OnAxis(_as_int(stride, "stride"), self)

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return (Axis, (self.name, self.is_thread))


def axis(name: "str | Axis") -> Axis:
    """The axis called `name`; unknown names become new memory (non-thread) axes.

    >>> axis("warpid").is_thread, axis("m").is_thread
    (True, False)
    """
    return name if isinstance(name, Axis) else Axis(name)


m = Axis("m")
laneid = Axis("laneid", True)
warpid = Axis("warpid", True)
tid_in_wg = Axis("tid_in_wg", True)
wid_in_wg = Axis("wid_in_wg", True)
wgid = Axis("wgid", True)
tx = Axis("tx", True)

#: How many threads one step of each thread axis is, counted from thread 0 of the CTA.
THREAD_STEP = {"laneid": 1, "warpid": 32, "tid_in_wg": 1, "wid_in_wg": 32, "wgid": 128, "tx": 1}


class OnAxis(Record):
    """A stride on an axis, written ``stride @ axis``; added to a layout it is an offset.

    >>> 4 @ laneid, (4 @ laneid).stride
    (4@laneid, 4)
    >>> TileLayout(S[4:1]) + 8 @ laneid
    S[4 : 1] + 8@laneid
    """

    stride: int
    axis: Axis

    def __repr__(self) -> str:
        return f"{self.stride}@{self.axis.name}"


@dataclass(frozen=True)
class Iter:
    """One (extent, stride, axis) iterator of a layout.

    >>> Iter(32, 1, "laneid")
    Iter(32, 1@laneid)
    """

    extent: int
    stride: int
    axis: Axis = m

    def __post_init__(self):
        object.__setattr__(self, "axis", axis(self.axis))
        if _as_int(self.extent, "extent") < 1:
            raise LayoutError(f"iter extent must be at least 1, got {self.extent}")
        _as_int(self.stride, "stride")

    @property
    def is_thread(self) -> bool:
        return self.axis.is_thread

    def __repr__(self) -> str:
        return f"Iter({self.extent}, {_stride_text(self.stride, self.axis)})"


class TileLayout:
    """Shard iters, replica iters and per-axis offsets (see the module docstring).

    ``TileLayout(S[...] + R[...])`` copies a built layout;
    ``TileLayout(shard, replica, offset)`` takes the parts directly.

    >>> TileLayout(S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid]).storage().span()
    7
    """

    __slots__ = ("shard", "replica", "offset")

    def __init__(self, shard=(), replica=(), offset=None):
        if isinstance(shard, TileLayout):
            if replica or offset:
                raise TypeError("TileLayout(layout) takes no other argument")
            shard, replica, offset = shard.shard, shard.replica, dict(shard.offset)
        self.shard = tuple(_as_iter(it) for it in shard)
        self.replica = tuple(_as_iter(it) for it in replica)
        merged: dict[Axis, int] = {}
        for name, value in (offset or {}).items():
            key = axis(name)
            merged[key] = merged.get(key, 0) + _as_int(value, "offset")
        self.offset = tuple(merged.items())

    # ---- construction -------------------------------------------------------------
    def __add__(self, other) -> "TileLayout":
        if isinstance(other, TileLayout):
            offset = dict(self.offset)
            for key, value in other.offset:
                offset[key] = offset.get(key, 0) + value
            return TileLayout(self.shard + other.shard, self.replica + other.replica, offset)
        if isinstance(other, OnAxis):
            return self + TileLayout(offset={other.axis: other.stride})
        if isinstance(other, int):
            return self + TileLayout(offset={m: other})
        return NotImplemented

    __radd__ = __add__

    def __eq__(self, other) -> bool:
        return isinstance(other, TileLayout) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def _key(self):
        return (type(self).__name__, self.shard, self.replica, self.offset)

    def __repr__(self) -> str:
        parts = []
        if self.shard:
            parts.append("S" + _iters_text(self.shard))
        if self.replica:
            parts.append("R" + _iters_text(self.replica))
        parts += [_stride_text(value, key) for key, value in self.offset]
        return " + ".join(parts) or "S[()]"

    # ---- queries --------------------------------------------------------------------
    def is_swizzle(self) -> bool:
        """True only for a bare swizzle layout (`SwizzleLayout`)."""
        return False

    def size(self, axis_name: "str | Axis | None" = None) -> int:
        """The product of the shard extents (on `axis_name` only, when given).

        >>> TileLayout(S[(32, 4) : (1 @ laneid, 1)]).size(), TileLayout(S[(32, 4) : (1 @ laneid, 1)]).size("m")
        (128, 4)
        """
        return math.prod(it.extent for it in self.shard if _on(it.axis, axis_name))

    def span(self, axis_name: "str | Axis | None" = None) -> int:
        """``1 + Σ (extent-1)·stride`` over shard and replica iters, plus the offsets.

        >>> TileLayout(S[(2, 2) : (2, 4)]).span()
        7
        """
        total = 1 + sum((it.extent - 1) * it.stride for it in self.shard + self.replica if _on(it.axis, axis_name))
        return total + sum(value for key, value in self.offset if _on(key, axis_name))

    @property
    def shard_shape(self) -> tuple[int, ...]:
        return tuple(it.extent for it in self.shard)

    def thread_axes(self) -> set[str]:
        """Names of the thread axes that the layout uses anywhere."""
        iters = self.shard + self.replica
        return {it.axis.name for it in iters if it.is_thread} | {k.name for k, _ in self.offset if k.is_thread}

    # ---- transformations ----------------------------------------------------------------
    def canonicalize(self) -> "TileLayout":
        """Drop unit shard iters and zero offsets, fuse contiguous iters, sort the replica.

        >>> TileLayout(S[(8, 4, 1) : (4 @ laneid, 1 @ laneid, 1)]).canonicalize()
        S[32 : 1@laneid]
        """
        shard = [it for it in self.shard if it.extent != 1]
        if not shard and self.shard:
            shard = [Iter(1, 1, self.shard[0].axis)]
        fused: list[Iter] = []
        for it in shard:
            last = fused[-1] if fused else None
            if last is not None and last.axis == it.axis and it.extent * it.stride == last.stride:
                fused[-1] = Iter(last.extent * it.extent, it.stride, it.axis)
            else:
                fused.append(it)
        replica = sorted(self.replica, key=lambda it: (it.axis.name, it.stride, it.extent))
        offset = {key: value for key, value in self.offset if value != 0}
        return TileLayout(fused, replica, offset)

    def group(self, shape) -> tuple["TileLayout", list[int]]:
        """Regroup the shard so that dim ``d`` of `shape` owns iters ``seps[d]:seps[d+1]``.

        Iters are split where a dim boundary falls inside them; a unit dim takes an
        extent-1 piece of whatever iter is current (TVM's rule, kept exactly).

        >>> g, seps = TileLayout(S[64]).group([4, 16])
        >>> g, seps
        (S[(4, 16) : (16, 1)], [0, 1, 2])
        >>> TileLayout(S[(32, 1) : (1 @ laneid, 1)]).group([32, 1])[0]
        S[(32, 1) : (1@laneid, 1@laneid)]
        """
        shape = [_as_int(s, "shape") for s in shape]
        shape_index, product, seps, shard = 0, 1, [0], []
        failure = LayoutError(f"layout {self!r} can not be grouped by shape {shape}")
        for it in self.shard:
            extent = it.extent
            product *= extent
            while shape_index < len(shape) and product % shape[shape_index] == 0:
                c = product // shape[shape_index]
                if extent % c:
                    raise failure
                shard.append(Iter(extent // c, it.stride * c, it.axis))
                extent, product = c, c
                shape_index += 1
                seps.append(len(shard))
            if extent != 1:
                if shape_index >= len(shape):
                    raise failure
                shard.append(Iter(extent, it.stride, it.axis))
        if shape_index != len(shape):
            raise failure
        return TileLayout(shard, self.replica, dict(self.offset)), seps

    def storage(self) -> "TileLayout":
        """The per-thread part: non-thread shard and replica iters and offsets.

        It maps a thread's storage coordinate to a register slot: ``size()`` is the
        number of elements per thread and ``span()`` the number of slots to allocate.

        >>> s = TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]).storage()
        >>> s.size(), s.span(), [p["m"] for i in range(4) for p in s.apply(i, shape=[4])]
        (4, 7, [0, 4, 2, 6])
        """
        return TileLayout(
            [it for it in self.shard if not it.is_thread],
            [it for it in self.replica if not it.is_thread],
            {key: value for key, value in self.offset if not key.is_thread},
        )

    def apply(self, coord, shape=None) -> list[dict[str, int]]:
        """Physical places of one logical coordinate, one dict per replica copy.

        `coord` is an int or a tuple over `shape` (default: the shard shape, flat).
        Every axis the layout uses appears in each dict.

        >>> TileLayout(S[1:1] + R[2 : 16 @ laneid]).apply(0, shape=[1])
        [{'m': 0, 'laneid': 0}, {'m': 0, 'laneid': 16}]
        """
        flat = _flatten(coord, shape, self.size())
        base: dict[str, int] = {it.axis.name: 0 for it in self.shard + self.replica}
        for key, _ in self.offset:
            base.setdefault(key.name, 0)
        for it in reversed(self.shard):
            flat, index = divmod(flat, it.extent)
            base[it.axis.name] += index * it.stride
        for key, value in self.offset:
            base[key.name] += value
        places = []
        for combo in itertools.product(*(range(it.extent) for it in self.replica)):
            place = dict(base)
            for it, index in zip(self.replica, combo):
                place[it.axis.name] += index * it.stride
            places.append(place)
        return places

    def slice(self, shape, region) -> "TileLayout | None":
        """The layout of a box ``region`` = [(begin, end), …] of a tile of `shape`.

        Each dim's iters must cut as a box: single values, then at most one partial
        range, then full iters. None when the region is not such a box.

        >>> TileLayout(S[64]).slice([64], [(16, 32)])
        S[16 : 1] + 16
        >>> TileLayout(S[(4, 8) : (8, 1)]).slice([32], [(3, 10)]) is None
        True
        """
        grouped, seps = self.group(shape)
        shard, offset = [], dict(grouped.offset)
        for d, (begin, end) in enumerate(region):
            iters = grouped.shard[seps[d] : seps[d + 1]]
            corners = box(iters, begin, end)
            if corners is None:
                return None
            for it, (low, high) in zip(iters, corners):
                shard.append(Iter(high - low + 1, it.stride, it.axis))
                if low:
                    offset[it.axis] = offset.get(it.axis, 0) + low * it.stride
        return TileLayout(shard, grouped.replica, offset)

    def tile(self, outer: "TileLayout", outer_shape, inner_shape) -> "TileLayout":
        """Tile this (inner) layout by `outer`: dim d gets outer's iters, then inner's.

        Outer strides on an axis are scaled by this layout's span on that axis.

        >>> atom = TileLayout(S[(1, 2) : (2, 1)])
        >>> atom.tile(TileLayout(S[(2, 16) : (1, 2)]), (2, 16), (1, 2))
        S[(2, 16, 2) : (2, 4, 1)]
        """
        if len(outer_shape) != len(inner_shape):
            raise LayoutError("outer and inner shape must have the same rank")
        outer_grouped, outer_seps = outer.canonicalize().group(outer_shape)
        inner_grouped, inner_seps = self.canonicalize().group(inner_shape)
        spans = {it.axis: inner_grouped.span(it.axis) for it in inner_grouped.shard + inner_grouped.replica}
        scaled = [Iter(it.extent, it.stride * spans.get(it.axis, 1), it.axis) for it in outer_grouped.shard]
        shard = []
        for d in range(len(outer_shape)):
            shard += scaled[outer_seps[d] : outer_seps[d + 1]]
            shard += inner_grouped.shard[inner_seps[d] : inner_seps[d + 1]]
        offset = dict(inner_grouped.offset)
        for key, value in outer_grouped.offset:
            offset[key] = offset.get(key, 0) + value
        return TileLayout(shard, inner_grouped.replica + outer_grouped.replica, offset).canonicalize()


class SwizzleLayout(TileLayout):
    """A bare swizzle (TVM's ComposeLayout over a trivial tile): described, never lowered.

    Register tiles have no use for swizzles; this class exists so that validation can
    refuse one with TVM's message.

    >>> sw = SwizzleLayout(1, 3, 3, 64)
    >>> sw.is_swizzle(), sw.size(), sw == TileLayout(S[64])
    (True, 64, False)
    """

    __slots__ = ("per_element", "swizzle_len", "atom_len")

    def __init__(self, per_element: int, swizzle_len: int, atom_len: int, size: int):
        super().__init__([Iter(size, 1)])
        self.per_element, self.swizzle_len, self.atom_len = per_element, swizzle_len, atom_len

    def is_swizzle(self) -> bool:
        return True

    def _key(self):
        return super()._key() + (self.per_element, self.swizzle_len, self.atom_len)


@dataclass(frozen=True)
class ComposeLayout:
    """A swizzle composed over a non-trivial tile: not a `TileLayout` (refused by validation).

    >>> c = ComposeLayout(SwizzleLayout(1, 3, 3, 64), TileLayout(S[(8, 8)]))
    >>> c.is_swizzle(), isinstance(c, TileLayout), c.tile_layout.size()
    (False, False, 64)
    """

    swizzle: SwizzleLayout
    tile_layout: TileLayout

    def is_swizzle(self) -> bool:
        return False


class _Builder:
    """``S[...]`` / ``R[...]``: ``X[shape : strides]`` or ``X[shape]`` (row-major on ``m``)."""

    def __init__(self, part: str):
        self.part = part

    def __getitem__(self, key) -> TileLayout:
        if isinstance(key, slice):
            if key.step is not None:
                raise LayoutError("write a layout as X[shape : strides]")
            shape, strides = key.start, key.stop
        else:
            shape, strides = key, None
        scalar = not isinstance(shape, tuple)
        shape = (shape,) if scalar else shape
        extents = [_as_int(e, "extent") for e in shape]
        if strides is None:
            specs = [(math.prod(extents[i + 1 :]), m) for i in range(len(extents))]
        else:
            if scalar:
                strides = (strides,)
            elif not isinstance(strides, tuple):
                raise LayoutError(f"{len(extents)} extents need a tuple of strides")
            if len(strides) != len(extents):
                raise LayoutError(f"{len(extents)} extents but {len(strides)} strides")
            specs = [_stride_spec(s) for s in strides]
        iters = [Iter(e, s, a) for e, (s, a) in zip(extents, specs)]
        return TileLayout(shard=iters) if self.part == "shard" else TileLayout(replica=iters)


S = _Builder("shard")
R = _Builder("replica")


def row_major(shape) -> tuple[int, ...]:
    """Row-major strides of `shape`.

    >>> row_major((4, 8))
    (8, 1)
    """
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


def wg_local_layout(cols: int, rows: int = 128) -> TileLayout:
    """One row per warpgroup thread: ``S[(rows, cols) : (1@tid_in_wg, 1)]``.

    >>> wg_local_layout(16)
    S[(128, 16) : (1@tid_in_wg, 1)]
    """
    return TileLayout(S[(rows, cols) : (1 @ tid_in_wg, 1)])


# ---- helpers ------------------------------------------------------------------------------
def _on(key: Axis, axis_name) -> bool:
    return axis_name is None or key.name == (axis_name.name if isinstance(axis_name, Axis) else axis_name)


def _as_int(value, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            as_int = int(value)
        except (TypeError, ValueError):
            raise LayoutError(f"{what} must be an integer, got {value!r}") from None
        if as_int != value:
            raise LayoutError(f"{what} must be an integer, got {value!r}")
        return as_int
    return value


def _as_iter(value) -> Iter:
    if isinstance(value, Iter):
        return value
    return Iter(*value)


def _stride_spec(spec) -> tuple[int, Axis]:
    if isinstance(spec, OnAxis):
        return spec.stride, spec.axis
    if isinstance(spec, (str, Axis)):
        return 1, axis(spec)
    if isinstance(spec, tuple) and len(spec) == 2:
        return _as_int(spec[0], "stride"), axis(spec[1])
    return _as_int(spec, "stride"), m


def _stride_text(stride: int, key: Axis) -> str:
    return str(stride) if key == m else f"{stride}@{key.name}"


def _iters_text(iters) -> str:
    if len(iters) == 1:
        return f"[{iters[0].extent} : {_stride_text(iters[0].stride, iters[0].axis)}]"
    extents = ", ".join(str(it.extent) for it in iters)
    strides = ", ".join(_stride_text(it.stride, it.axis) for it in iters)
    return f"[({extents}) : ({strides})]"


def split_index(index: int, extents) -> list[int]:
    """Row-major digits of `index` over `extents` (the last one fastest).

    >>> split_index(11, [2, 3, 4])
    [0, 2, 3]
    """
    digits = []
    for extent in reversed(extents):
        index, digit = divmod(index, extent)
        digits.append(digit)
    return digits[::-1]


def box(iters, begin: int, end: int) -> list[tuple[int, int]] | None:
    """Per-iter (low, high) of the flat range [begin, end) over `iters` (row-major), when
    the range is a box: single values, then at most one partial range, then full iters.

    >>> box([Iter(4, 8), Iter(8, 1)], 8, 24), box([Iter(4, 8), Iter(8, 1)], 3, 10)
    ([(1, 2), (0, 7)], None)
    """
    if not 0 <= begin < end:
        return None
    extents = [it.extent for it in iters]
    if end > math.prod(extents):
        return None
    lows, highs = split_index(begin, extents), split_index(end - 1, extents)
    varying = False
    for low, high, extent in zip(lows, highs, extents):
        if varying and (low, high) != (0, extent - 1):
            return None
        varying = varying or low != high
    return list(zip(lows, highs))


def _flatten(coord, shape, size: int) -> int:
    coords = coord if isinstance(coord, (tuple, list)) else (coord,)
    if shape is None:
        shape = [size] if len(coords) == 1 else None
        if shape is None:
            raise LayoutError("a multi-dimensional coordinate needs its shape")
    shape = [_as_int(s, "shape") for s in shape]
    if math.prod(shape) != size:
        raise LayoutError(f"shape {shape} has {math.prod(shape)} elements; the layout has {size}")
    if len(coords) != len(shape):
        raise LayoutError(f"coordinate {coord!r} does not match shape {shape}")
    flat = 0
    for value, extent in zip(coords, shape):
        value = _as_int(value, "coordinate")
        if not 0 <= value < extent:
            raise LayoutError(f"coordinate {coord!r} is outside shape {shape}")
        flat = flat * extent + value
    return flat
