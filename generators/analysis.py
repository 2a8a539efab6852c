"""The analysis helpers of TVM TIRx's local reduction, ported one to one, plus fixes.

Names and results follow ``tile_primitive/reduction/{local,utils}.py`` and
``layout_utils.py`` so that TVM's worked examples carry over; where TVM is wrong or
silent the difference is named in the docstring:

* `get_local_region` accepts a single value of a local iter (TVM's ``end - st == 1``
  is a typo for ``== 0``);
* `shuffle_plan` (Path 2) takes the xor masks from the dst replica's *strides*
  (TVM assumes adjacent lanes) and refuses patterns it cannot reduce correctly;
* `view_shuffle_masks` (Path 3) refuses non-power-of-two lane extents or strides
  and thread iters on other axes, which TVM floors or ignores;
* `match_reduction_dims` pairs src and dst dims in order, so a squeezed dst works.

>>> from ptxkit.generators.layout import TileLayout, S, R, laneid
>>> analyze_shuffle_reduce(TileLayout(S[(32, 4) : (1 @ laneid, 1)]), TileLayout(S[4:1] + R[32 : 1 @ laneid]))
(32, 4)
"""

from __future__ import annotations

import math

from ptxkit._records import Record

from .dtypes import DType, dtype as as_dtype
from .layout import Iter, LayoutError, TileLayout, box, laneid, split_index

REDUCE_OPS = ("sum", "max", "min")


class ReductionError(ValueError):
    """A reduction that cannot be generated; the message says why (TVM's text where TVM has one).

    >>> identity("prod", "f32")
    Traceback (most recent call last):
    ...
    ptxkit.generators.analysis.ReductionError: unsupported reduce op: prod
    >>> issubclass(ReductionError, ValueError)
    True
    """


# ---- axes and indices ------------------------------------------------------------------------
def analyze_axes(src_ndim: int, reduce_axes) -> tuple[list[int], list[int]]:
    """Normalise negative axes: (sorted reduce dims, spatial dims). Duplicates merge.

    >>> analyze_axes(3, (0, -1, 2))
    ([0, 2], [1])
    >>> analyze_axes(2, (5,))
    Traceback (most recent call last):
    ...
    ptxkit.generators.analysis.ReductionError: reduce axis 5 out of range for ndim=2
    """
    reduce = set()
    for ax in (reduce_axes,) if isinstance(reduce_axes, int) else reduce_axes:
        a = ax if ax >= 0 else ax + src_ndim
        if not 0 <= a < src_ndim:
            raise ReductionError(f"reduce axis {ax} out of range for ndim={src_ndim}")
        reduce.add(a)
    return sorted(reduce), [d for d in range(src_ndim) if d not in reduce]


def get_indices(nth: int, start, extent) -> list[int]:
    """Row-major unravel of `nth` over `extent`, plus `start` (TVM's ``get_indices``).

    >>> get_indices(5, [1, 0], [2, 3])
    [2, 2]
    """
    return [s + i for s, i in zip(start, split_index(nth, extent))]


# ---- per-dim analysis ---------------------------------------------------------------------------
class DimInfo(Record):
    """One dim of a grouped layout: thread and local extents, and the thread iters' (stride, extent).

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> info = analyze_layout_dims(TileLayout(S[(2, 32) : (1, 1 @ laneid)]), [16, 4])[0]
    >>> info.thread_extent, info.local_extent, info.thread_strides
    (8, 2, [(4, 8)])
    """

    thread_extent: int
    local_extent: int
    thread_strides: list


def _dims(layout: TileLayout, shape) -> list[list[Iter]]:
    grouped, seps = layout.group(list(shape))
    return [list(grouped.shard[seps[d] : seps[d + 1]]) for d in range(len(shape))]


def analyze_layout_dims(layout: TileLayout, shape) -> list[DimInfo]:
    """Group `layout` by `shape` and describe each dim's thread and local parts.

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> analyze_layout_dims(TileLayout(S[(2, 32) : (1, 1 @ laneid)]), [16, 4])
    [DimInfo(thread_extent=8, local_extent=2, thread_strides=[(4, 8)]), DimInfo(thread_extent=4, local_extent=1, thread_strides=[(1, 4)])]
    """
    result = []
    for iters in _dims(layout, shape):
        threads = [it for it in iters if it.is_thread]
        result.append(
            DimInfo(
                math.prod(it.extent for it in threads),
                math.prod(it.extent for it in iters if not it.is_thread),
                [(it.stride, it.extent) for it in threads],
            )
        )
    return result


def build_local_dim_map(layout: TileLayout, shape) -> dict[int, int | None]:
    """Dim → its position in `get_local_region`'s output, or None for a pure-thread dim.

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> build_local_dim_map(TileLayout(S[(2, 32) : (1, 1 @ laneid)]), [16, 4])
    {0: 0, 1: None}
    """
    result, position = {}, 0
    for d, iters in enumerate(_dims(layout, shape)):
        if any(not it.is_thread for it in iters):
            result[d], position = position, position + 1
        else:
            result[d] = None
    return result


def get_local_region(layout: TileLayout, shape, region_start, region_extent):
    """The per-thread part of a region: (local_shape, local_start, local_extent), or None.

    One entry per dim that has a local (non-thread) iter; ``([1], [0], [1])`` when none
    has. A dim's region must be a box over its iters (`layout.box`) that covers every
    thread iter fully; the local iters then merge into one contiguous range.

    Two departures from TVM, both where TVM is wrong: TVM accepts a local iter only
    when single-valued by ``end - st == 1`` (a typo: it rejects its own docstring
    example) or full; and TVM skips a dim without local iters unchecked, so a region
    that cuts a pure-thread dim passes and threads outside it compute anyway.

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> L = TileLayout(S[(2, 8, 4, 2) : (8, 2 @ laneid, 2, 1)])
    >>> get_local_region(L, [16, 8], [8, 0], [8, 8])
    ([2, 8], [1, 0], [1, 8])
    >>> get_local_region(L, [16, 8], [4, 0], [8, 8]) is None     # cuts the lane iter
    True
    """
    local_shape, local_start, local_extent = [], [], []
    for d, iters in enumerate(_dims(layout, shape)):
        start, extent = region_start[d], region_extent[d]
        if all(not it.is_thread for it in iters):
            local_shape.append(shape[d])
            local_start.append(start)
            local_extent.append(extent)
            continue
        corners = box(iters, start, start + extent)
        if corners is None:
            return None
        size, low_total, high_total, has_local = 1, 0, 0, False
        for it, (low, high) in zip(iters, corners):
            if it.is_thread:
                if (low, high) != (0, it.extent - 1):
                    return None
                continue
            has_local = True
            size, low_total, high_total = size * it.extent, low_total * it.extent + low, high_total * it.extent + high
        if has_local:
            local_shape.append(size)
            local_start.append(low_total)
            local_extent.append(high_total - low_total + 1)
    if not local_shape:
        return [1], [0], [1]
    return local_shape, local_start, local_extent


# ---- shuffle masks ------------------------------------------------------------------------------
def compute_shuffle_masks(dim_info, reduce_dims) -> list[int]:
    """TVM's xor masks for Path 3: ``stride·2^i`` per thread iter of each reduce dim, ascending.

    Ported as is: a non-power-of-two extent is floored (see `view_shuffle_masks`).

    >>> compute_shuffle_masks([DimInfo(8, 2, [(4, 8)]), DimInfo(4, 32, [(1, 4)])], [1])
    [1, 2]
    >>> compute_shuffle_masks([DimInfo(8, 1, [(16, 2), (1, 4)])], [0])
    [1, 2, 16]
    """
    masks = []
    for d in reduce_dims:
        for stride, extent in dim_info[d].thread_strides:
            masks += [stride << i for i in range(int(math.log2(extent)))]
    return sorted(masks)


def view_shuffle_masks(layout: TileLayout, shape, reduce_dims) -> list[int]:
    """`compute_shuffle_masks`, refusing what it would get wrong.

    Every thread iter of a reduce dim must be on ``laneid`` with a power-of-two extent
    and stride, and the lane bits they cover must not overlap.

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> view_shuffle_masks(TileLayout(S[(4, 8) : (1 @ laneid, 4 @ laneid)]), [4, 8], [1])
    [4, 8, 16]
    >>> view_shuffle_masks(TileLayout(S[(6, 4) : (4 @ laneid, 1)]), [6, 4], [0])
    Traceback (most recent call last):
    ...
    ptxkit.generators.analysis.ReductionError: cannot shuffle-reduce over 6 lanes: lane extents and strides of a reduced dim must be powers of two
    """
    masks: list[int] = []
    for d in reduce_dims:
        for it in _dims(layout, shape)[d]:
            if not it.is_thread:
                continue
            if it.axis != laneid:
                raise ReductionError(
                    f"cannot shuffle-reduce over {it.axis.name}: in warp scope a reduced dim may only "
                    "be spread over laneid"
                )
            if not (_power_of_two(it.extent) and _power_of_two(it.stride)):
                raise ReductionError(
                    f"cannot shuffle-reduce over {it.extent} lanes: lane extents and strides of a "
                    "reduced dim must be powers of two"
                )
            masks += [it.stride << i for i in range(it.extent.bit_length() - 1)]
    if len(set(masks)) != len(masks) or max(masks, default=0) >= 32:
        raise ReductionError(f"the reduced lanes overlap or leave the warp (xor masks {sorted(masks)})")
    return sorted(masks)


def analyze_shuffle_reduce(src_layout: TileLayout, dst_layout: TileLayout):
    """TVM's Path-2 detector: (reduce_width, local_elems) or None.

    Ported as is: it checks neither the replica's strides nor the dst shard (see
    `shuffle_plan`, which does).

    >>> from ptxkit.generators.layout import TileLayout, S, R, laneid
    >>> analyze_shuffle_reduce(TileLayout(S[32 : 1 @ laneid]), TileLayout(S[1:1] + R[32 : 1 @ laneid]))
    (32, 1)
    >>> analyze_shuffle_reduce(TileLayout(S[16 : 1 @ laneid]), TileLayout(S[1:1] + R[16 : 1 @ laneid])) is None
    True
    """
    if src_layout.is_swizzle() or dst_layout.is_swizzle():
        return None
    src, dst = src_layout.canonicalize(), dst_layout.canonicalize()
    src_lane = [it for it in src.shard if it.axis == laneid]
    dst_replica = [it for it in dst.replica if it.axis == laneid]
    if not src_lane or not dst_replica:
        return None
    if 1 + sum(abs(it.stride) * (it.extent - 1) for it in src_lane) != 32:
        return None
    width = math.prod(it.extent for it in dst_replica)
    if not 0 < width <= 32 or not _power_of_two(width):
        return None
    return width, math.prod(it.extent for it in src.shard if it.axis != laneid)


class ShufflePlan(Record):
    """A checked Path-2 reduction: xor masks (descending), elements per lane, and the
    bits of the lane index that the reduction runs over (``replica_bits``).

    >>> from ptxkit.generators.layout import TileLayout, S, R, laneid
    >>> plan = shuffle_plan(TileLayout(S[(4, 8) : (8 @ laneid, 1 @ laneid)]), TileLayout(S[4 : 8 @ laneid] + R[8 : 1 @ laneid]))
    >>> plan.width, plan.masks, bin(plan.replica_bits)
    (8, (4, 2, 1), '0b111')
    """

    masks: tuple[int, ...]
    local_elems: int
    replica_bits: int

    @property
    def width(self) -> int:
        """Lanes per group: 2 ** len(masks)."""
        return 1 << len(self.masks)


def shuffle_plan(src_layout: TileLayout, dst_layout: TileLayout) -> ShufflePlan:
    """Check a lane shard→replica pattern and derive its masks from the replica strides.

    Requires: every laneid iter of src and dst has a power-of-two extent and stride;
    src's lane bits cover lanes 0..31 once; dst's shard lane bits and replica lane bits
    are disjoint and together equal src's; the per-lane storage has the same size in
    src and dst; thread iters on other axes are the same in both. Width 1 is a copy.

    >>> from ptxkit.generators.layout import TileLayout, S, R, laneid
    >>> shuffle_plan(TileLayout(S[32 : 1 @ laneid]), TileLayout(S[1:1] + R[32 : 1 @ laneid]))
    ShufflePlan(masks=(16, 8, 4, 2, 1), local_elems=1, replica_bits=31)
    >>> shuffle_plan(TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]), TileLayout(S[4 : 1 @ laneid] + R[8 : 4 @ laneid])).masks
    (16, 8, 4)
    """
    src, dst = src_layout.canonicalize(), dst_layout.canonicalize()
    src_bits = _lane_bits([it for it in src.shard if it.axis == laneid], "src shard")
    if src_bits != 31:
        raise ReductionError(f"src lanes must cover lanes 0..31 exactly once (lane bits {src_bits:#x})")
    shard_bits = _lane_bits([it for it in dst.shard if it.axis == laneid], "dst shard")
    replica = [it for it in dst.replica if it.axis == laneid]
    replica_bits = _lane_bits(replica, "dst replica")
    if shard_bits & replica_bits or shard_bits | replica_bits != src_bits:
        raise ReductionError(
            f"dst lanes do not partition the warp: shard lane bits {shard_bits:#x}, replica lane bits "
            f"{replica_bits:#x}; together they must be 0x1f without overlap"
        )
    if any(it.is_thread and it.axis != laneid for it in dst.replica):
        raise ReductionError("thread axis in replica for dst (only laneid may be replicated)")
    others = [[it for it in layout.shard if it.is_thread and it.axis != laneid] for layout in (src, dst)]
    if others[0] != others[1]:
        raise ReductionError(f"src and dst spread over other thread axes differently: {others[0]} vs {others[1]}")
    src_elems, dst_elems = src.storage().size(), dst.storage().size()
    if src_elems != dst_elems:
        raise ReductionError(f"src holds {src_elems} elements per lane but dst holds {dst_elems}")
    masks = sorted((it.stride << i for it in replica for i in range(it.extent.bit_length() - 1)), reverse=True)
    return ShufflePlan(tuple(masks), src_elems, replica_bits)


def _lane_bits(iters, what: str) -> int:
    bits = 0
    for it in iters:
        if not (_power_of_two(it.extent) and _power_of_two(it.stride)):
            raise ReductionError(f"{what}: lane iter {it} needs a power-of-two extent and stride")
        span = (it.extent - 1) * it.stride
        new = sum(it.stride << i for i in range(it.extent.bit_length() - 1))
        if bits & new or span >= 32:
            raise ReductionError(f"{what}: lane iters overlap or leave the warp")
        bits |= new
    return bits


def _power_of_two(value: int) -> bool:
    return value > 0 and value & (value - 1) == 0


# ---- dst/src layout agreement -------------------------------------------------------------------
def _expected_dst_dims(src_info, reduce_dims):
    expected = []  # (src dim, (thread, local))
    for d, info in enumerate(src_info):
        if info.thread_extent == 1 and info.local_extent == 1:
            continue
        if d in reduce_dims:
            if info.thread_extent != 1:
                expected.append((d, (info.thread_extent, 1)))
        else:
            expected.append((d, (info.thread_extent, info.local_extent)))
    return expected


def match_reduction_dims(src_layout, dst_layout, src_shape, dst_shape, reduce_dims) -> dict[int, int] | None:
    """Pair src dims with the dst dims that hold their results, in order; None on mismatch.

    Dims whose thread and local extents are both 1 are skipped on either side, so dst
    may keep the reduced dims (keepdims) or drop them (squeezed).

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> src = TileLayout(S[(32, 4, 8) : (1 @ laneid, 8, 1)])
    >>> match_reduction_dims(src, TileLayout(S[(32, 4) : (1 @ laneid, 1)]), [32, 4, 8], [32, 4], [2])
    {0: 0, 1: 1}
    """
    try:
        src_info = analyze_layout_dims(src_layout, src_shape)
        dst_info = analyze_layout_dims(dst_layout, dst_shape)
    except LayoutError:
        return None
    expected = _expected_dst_dims(src_info, reduce_dims)
    pairs, position = {}, 0
    for d, info in enumerate(dst_info):
        if info.thread_extent == 1 and info.local_extent == 1:
            continue
        if position >= len(expected) or (info.thread_extent, info.local_extent) != expected[position][1]:
            return None
        pairs[expected[position][0]] = d
        position += 1
    return pairs if position == len(expected) else None


def validate_reduction_layout(src_sliced, dst_sliced, src_shape, dst_shape, reduce_dims) -> tuple[bool, str | None]:
    """Spatial dims of src and dst must agree in thread and local extents; reduced dims
    keep only their thread part in dst. ``(True, None)`` or TVM's mismatch message.

    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> src = TileLayout(S[(32, 64) : (1 @ laneid, 1)])
    >>> validate_reduction_layout(src, TileLayout(S[(32, 1) : (1 @ laneid, 1)]), [32, 64], [32, 1], [1])
    (True, None)
    >>> validate_reduction_layout(src, TileLayout(S[(32, 2) : (1 @ laneid, 1)]), [32, 64], [32, 2], [1])
    (False, 'mismatch dst/src layout for reduction')
    """
    if match_reduction_dims(src_sliced, dst_sliced, src_shape, dst_shape, reduce_dims) is None:
        return False, "mismatch dst/src layout for reduction"
    return True, None


def sliced_layout(layout: TileLayout, shape, start, extent) -> TileLayout:
    """The layout of a region (TVM's ``get_sublayout_from_region``): the unsliced one if
    the region cannot be sliced.

    >>> from ptxkit.generators.layout import TileLayout, S
    >>> sliced_layout(TileLayout(S[64]), [64], [16], [16])
    S[16 : 1] + 16
    >>> sliced_layout(TileLayout(S[(4, 8) : (8, 1)]), [32], [3], [7])     # not a box: unsliced
    S[(4, 8) : (8, 1)]
    """
    sliced = layout.slice(list(shape), [(s, s + e) for s, e in zip(start, extent)])
    return sliced if sliced is not None else layout


# ---- identities -----------------------------------------------------------------------------------
_INT_LIMITS = {"s32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1)}
_FLOAT_LIMITS = {"f32": 3.4028234663852886e38, "f16": 65504.0, "bf16": 3.4028234663852886e38}


def identity(op: str, dtype: "str | DType"):
    """The start value of a fold (TVM's table): 0 for sum, the lowest finite value for
    max, the highest for min. For bf16 that is ±FLT_MAX rounded, i.e. ±inf.

    >>> identity("max", "f32"), identity("min", "f16"), identity("max", "bf16"), identity("max", "s32")
    (-3.4028234663852886e+38, 65504.0, -inf, -2147483648)
    """
    t = as_dtype(dtype)
    if op not in REDUCE_OPS:
        raise ReductionError(f"unsupported reduce op: {op}")
    if not t.is_float:
        low, high = _INT_LIMITS[t.name]
        return {"sum": 0, "max": low, "min": high}[op]
    if op == "sum":
        return 0.0
    limit = _FLOAT_LIMITS[t.name]
    if t.name == "bf16":
        limit = math.inf  # FLT_MAX rounds to nearest even in bf16: +inf
    return -limit if op == "max" else limit


# ---- TVM's validation, message for message ----------------------------------------------------
def validate_reduction_local(dst, src, axes=-1, scope: str = "thread", thread_reduce: bool = False):
    """TVM's ``validate_reduction_local``: ``(True, None)`` or ``(False, message)``.

    `dst` and `src` are register tiles (or anything with ``scope``, ``dtype``, ``shape``,
    ``layout``, ``start`` and ``extent``). The messages are TVM's, in TVM's order; thread
    scope checks nothing beyond scope and dtype.

    >>> from types import SimpleNamespace as T
    >>> a = T(scope="local", dtype="f32", shape=(4,), layout=None, start=(0,), extent=(4,))
    >>> validate_reduction_local(T(**{**a.__dict__, "dtype": "f16"}), a)
    (False, 'dtype mismatch: src=float32 dst=float16')
    """
    if getattr(src, "scope", "local") != "local" or getattr(dst, "scope", "local") != "local":
        return False, "expected local scope and CUDA target"
    if as_dtype(src.dtype) != as_dtype(dst.dtype):
        return False, f"dtype mismatch: src={_tvm_dtype(src.dtype)} dst={_tvm_dtype(dst.dtype)}"
    if scope == "thread":
        return True, None
    if scope not in ("warp", "warpgroup"):
        return False, f"unsupported exec_scope {scope} for local reduction"
    if scope != "warp" and thread_reduce:
        return False, (
            "thread_reduce=True is only supported in warp scope; warpgroup local reduction is thread-local only"
        )
    if src.layout is None or dst.layout is None:
        return False, "layouts required for view-based local reduction"
    if not (isinstance(src.layout, TileLayout) and isinstance(dst.layout, TileLayout)):
        return False, "TileLayout required for view-based local reduction"
    if src.layout.is_swizzle() or dst.layout.is_swizzle():
        return False, "swizzle layout unsupported for local reduction"
    if scope == "warp" and analyze_shuffle_reduce(src.layout, dst.layout) is not None:
        return True, None
    for tile, name in ((src, "src"), (dst, "dst")):
        layout = tile.layout
        if any(it.is_thread and it.stride == 0 for it in layout.shard):
            return False, f"thread dim with zero stride in {name}"
        if any(it.is_thread for it in layout.replica):
            return False, f"thread axis in replica for {name}"
        try:
            region = get_local_region(layout, list(tile.shape), list(tile.start), list(tile.extent))
        except LayoutError:
            region = None
        if region is None:
            return False, f"get_local_region failed for {name}"
    try:
        reduce_dims, _ = analyze_axes(len(src.extent), axes)
    except ReductionError as err:
        return False, str(err)
    return validate_reduction_layout(
        sliced_layout(src.layout, src.shape, src.start, src.extent),
        sliced_layout(dst.layout, dst.shape, dst.start, dst.extent),
        list(src.extent),
        list(dst.extent),
        reduce_dims,
    )


def _tvm_dtype(name) -> str:
    return {"f32": "float32", "f16": "float16", "bf16": "bfloat16", "s32": "int32", "u32": "uint32"}[as_dtype(name).name]
