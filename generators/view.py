"""Path 3: the general view reduction over a layout, at warp or warpgroup scope.

Each thread folds the reduce elements it holds (its local region, `get_local_region`)
into each of its dst elements; with ``thread_reduce=True`` (warp scope only) the
partial results are then all-reduced with ``shfl.sync.bfly.b32`` over the xor masks
``stride·2^i`` of the lane iters of the reduced dims, ascending, with the member mask
from ``activemask.b32`` (TVM's order and mask).

``accum`` follows TVM's table:

=====  =============  =======  =========================================================
accum  thread_reduce  in place  each lane ends with
=====  =============  =======  =========================================================
F      F              F         ``fold(identity, local)`` (a per-lane partial)
T      F              F         ``fold(old, local)`` (a per-lane partial)
F      T              F         ``allreduce(fold(identity, local))``
T      T              F         ``op(allreduce(fold(identity, local)), old)``: old once
any    F              T         unchanged
F      T              T         ``allreduce(dst)``
T      T              T         refused: TVM computes ``op(allreduce(dst), old)``, which
                                counts each lane's own value twice for sum
=====  =============  =======  =========================================================

In place is dst and src the same region of one tile; any other dst that shares registers
with src is computed apart and copied in, and ``accum`` on it is refused
(`alias.separate`). Each dst element must end with its own src elements, or the call is
refused (`_check_results`).

Differences from TVM, all where TVM would fail or be wrong: dst dims are paired with
src dims in order (a squeezed dst works; TVM mis-indexes it), a spatial slice of src
starts where it says (TVM reads from the dst's start), and lane iters that cannot be
reduced by xor shuffles are refused (`analysis.view_shuffle_masks`). The
``activemask.b32`` is read once per call rather than once per dst element: in
straight-line code it cannot differ. f16/bf16 dst elements shuffle two per ``shfl``.

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.regtile import RegTile
>>> from ptxkit.generators.layout import wg_local_layout
>>> b = PtxBuilder()
>>> src = RegTile(b, (128, 16), "f32", wg_local_layout(16))
>>> dst = RegTile(b, (128, 1), "f32", wg_local_layout(1))
>>> gen_reduce_view(dst, src, axes=[-1], scope="warpgroup")
>>> len(b.instructions()), b.instructions()[0]
(17, 'mov.f32 %f16, 0f00000000;')
"""

from __future__ import annotations

import math

from .alias import separate
from .analysis import (
    ReductionError,
    analyze_axes,
    build_local_dim_map,
    get_indices,
    get_local_region,
    match_reduction_dims,
    sliced_layout,
    view_shuffle_masks,
)
from .combine import DEFAULT_NAN, check, check_nan, combine, copy, set_identity
from .placement import NOWHERE, Holdings, Meaning, check_results
from .shuffle import xor_allreduce

WARPGROUP_SHUFFLE = (
    "thread_reduce=True is only supported in warp scope; warpgroup local reduction is thread-local only"
)


def gen_reduce_view(dst, src, axes=-1, op="sum", accum=False, thread_reduce=False, scope="warp", pack=True,
                    nan=DEFAULT_NAN) -> None:
    """Emit the Path-3 reduction (see the module docstring). `pack` as in Path 2; `nan` is
    the NaN policy of max/min (`combine`).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> from ptxkit.generators.layout import TileLayout, S, laneid
    >>> b = PtxBuilder()
    >>> src = RegTile(b, (8, 32), "f32", TileLayout(S[(8, 4, 8) : (4 @ laneid, 1 @ laneid, 1)]))
    >>> dst = RegTile(b, (8, 4), "f32", TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)]))
    >>> gen_reduce_view(dst, src, op="max", thread_reduce=True); b.instructions()[9:11]
    ['activemask.b32 %r0;', 'shfl.sync.bfly.b32 %f9, %f8, 1, 0x1f, %r0;']
    """
    b = src.builder
    t = check(b, op, src.dtype)
    check_nan(nan)
    if dst.dtype != t:
        raise ReductionError(f"dtype mismatch: src={src.dtype} dst={dst.dtype}")
    if scope not in ("warp", "warpgroup"):
        raise ReductionError(f"unsupported exec_scope {scope} for reduction_local_impl")
    if scope == "warpgroup" and thread_reduce:
        raise ReductionError(WARPGROUP_SHUFFLE)
    in_place = dst.same_buffer(src) and (dst.start, dst.extent) == (src.start, src.extent)
    if accum and thread_reduce and in_place:
        raise ReductionError(
            "accum=True with thread_reduce=True on the same buffer would count each lane's own value twice "
            "(TVM computes op(allreduce(dst), dst)); reduce into another buffer or pass accum=False"
        )
    dst, finish = (dst, lambda: None) if in_place else separate(dst, src, accum)
    reduce_dims, _ = analyze_axes(src.ndim, axes)
    plan = _LocalPlan(dst, src, reduce_dims)
    masks = view_shuffle_masks(src.tile_layout, src.shape, reduce_dims) if thread_reduce else []
    _check_results(plan, dst, src, reduce_dims, masks, thread_reduce, in_place)

    values, olds = [], []
    for spa in range(plan.dst_count):
        value, reads = plan.element(spa)
        values.append(value)
        if accum and thread_reduce:
            olds.append(b.value_reg(t))
            copy(b, t, olds[-1], value)
        if in_place:
            continue
        if not accum or thread_reduce:
            set_identity(b, op, t, value)
        for read in reads:
            combine(b, op, t, value, value, read, nan)
    if masks:
        member = b.reg(".b32")
        b.ins("activemask.b32", member)
        xor_allreduce(b, op, t, values, masks, member, pack=pack, nan=nan)
    for value, old in zip(values, olds):
        combine(b, op, t, value, value, old, nan)
    finish()


def _check_results(plan, dst, src, reduce_dims, masks, thread_reduce, in_place) -> None:
    """Refuse unless each dst element ends with its src elements (docs/reduction.md §2.13).

    Follows what the emitted code does, thread by thread: the fold of the src slots that
    `plan` pairs with each dst slot (in place, the value already there), then one xor
    exchange per mask. Without `thread_reduce` the dst elements of a spatial position are
    per-thread partials, which together must hold each of its src elements once.
    """
    src_at, dst_at = Holdings(src, "src"), Holdings(dst, "dst")
    threads = range(32 * max(src_at.warps, dst_at.warps))
    values, spa_of = {}, {}
    for spa in range(plan.dst_count):
        value, reads = plan.slots(spa)
        spa_of[value] = spa
        for t in threads:
            row = src_at.row(t)
            values[t, spa] = [row[value]] if in_place else [row[s] for s in reads]
    for mask in masks:
        values = {(t, spa): got + values[t ^ mask, spa] for (t, spa), got in values.items()}

    def result(thread, slot):
        spa = spa_of.get(slot)
        return [NOWHERE] if spa is None else values[thread, spa]

    if masks:
        how = f"the fold and the shuffles over lane masks {', '.join(map(str, masks))}"
    else:
        how = "the value in place" if in_place else "each thread's fold"
    check_results(Meaning(src, dst, reduce_dims, plan.spatial_pairs), dst_at, result, how,
                  together=not thread_reduce)


class _LocalPlan:
    """Which registers each dst element folds: the local regions of src and dst, paired."""

    def __init__(self, dst, src, reduce_dims):
        self.dst, self.src = dst, src
        src_layout, dst_layout = src.tile_layout, dst.tile_layout
        src_region = get_local_region(src_layout, src.shape, src.start, src.extent)
        dst_region = get_local_region(dst_layout, dst.shape, dst.start, dst.extent)
        for region, name in ((src_region, "src"), (dst_region, "dst")):
            if region is None:
                raise ReductionError(f"get_local_region failed for {name}")
        self.src_shape, self.src_start, self.src_extent = src_region
        self.dst_shape, self.dst_start, self.dst_extent = dst_region
        pairs = match_reduction_dims(
            sliced_layout(src_layout, src.shape, src.start, src.extent),
            sliced_layout(dst_layout, dst.shape, dst.start, dst.extent),
            list(src.extent),
            list(dst.extent),
            reduce_dims,
        )
        if pairs is None:
            raise ReductionError("mismatch dst/src layout for reduction")
        self.spatial_pairs = [(d, pairs[d]) for d in range(src.ndim) if d not in reduce_dims and d in pairs]
        src_map = build_local_dim_map(src_layout, src.shape)
        dst_map = build_local_dim_map(dst_layout, dst.shape)
        # per local src dim: ("red", j) or ("spa", dst local position or None)
        self.sources = []
        for d in range(src.ndim):
            position = src_map[d]
            if position is None:
                continue
            if d in reduce_dims:
                self.sources.append(("red", position))
                continue
            target = dst_map.get(pairs[d]) if d in pairs else None
            extent = self.src_extent[position]
            if target is None and extent != 1:
                raise ReductionError("mismatch dst/src layout for reduction")
            if target is not None and self.dst_extent[target] != extent:
                raise ReductionError("mismatch dst/src layout for reduction")
            self.sources.append(("spa", (position, target)))
        red_positions = [p for kind, p in self.sources if kind == "red"]
        self.red_start = [self.src_start[p] for p in red_positions]
        self.red_extent = [self.src_extent[p] for p in red_positions]
        self.dst_count = math.prod(self.dst_extent)
        self._slots: dict[int, tuple[int, list[int]]] = {}

    def element(self, spa: int) -> tuple[str, list[str]]:
        """The register of dst element `spa` and the src registers it folds, in order."""
        value, reads = self.slots(spa)
        return self.dst.regs[value], [self.src.regs[slot] for slot in reads]

    def slots(self, spa: int) -> tuple[int, list[int]]:
        """The slot of dst element `spa` and the src slots it folds, in order."""
        if spa not in self._slots:
            self._slots[spa] = self._find_slots(spa)
        return self._slots[spa]

    def _find_slots(self, spa: int) -> tuple[int, list[int]]:
        dst_index = get_indices(spa, self.dst_start, self.dst_extent)
        value = self.dst.local_slot(dst_index, self.dst_shape)
        reads = []
        for red in range(math.prod(self.red_extent)):
            red_index = iter(get_indices(red, self.red_start, self.red_extent))
            index = []
            for kind, where in self.sources:
                if kind == "red":
                    index.append(next(red_index))
                    continue
                position, target = where
                offset = 0 if target is None else dst_index[target] - self.dst_start[target]
                index.append(self.src_start[position] + offset)
            reads.append(self.src.local_slot(index, self.src_shape))
        return value, reads
