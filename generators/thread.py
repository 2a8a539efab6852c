"""Path 1: the thread-wise sequential reduction, fully unrolled.

Each output element is a left fold over its reduce elements in row-major order of
the reduce dims, starting from the identity (or from the old dst value with
``accum``). Spatial elements are taken row-major over src's spatial dims and written
row-major over the dst region, so dst may be keepdims, squeezed or reshaped.

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.regtile import RegTile
>>> b = PtxBuilder()
>>> src, dst = RegTile(b, (4,), "f32"), RegTile(b, (1,), "f32")
>>> gen_reduce_thread(dst, src, op="max")
>>> b.instructions()[:2]
['mov.f32 %f4, 0fFF7FFFFF;', 'max.NaN.f32 %f4, %f4, %f0;']
"""

from __future__ import annotations

import math

from .alias import separate
from .analysis import ReductionError, analyze_axes, get_indices
from .combine import DEFAULT_NAN, check, check_nan, combine, set_identity
from .layout import split_index


def gen_reduce_thread(dst, src, axes=-1, op: str = "sum", accum: bool = False, nan: str = DEFAULT_NAN) -> None:
    """Emit ``dst = op-fold of src over axes`` within each thread (TVM's Path 1).

    Unlike TVM, the dst region must hold exactly as many elements as src has spatial
    positions (TVM writes out of bounds when dst is smaller). A dst that shares registers
    with src is computed apart and copied in at the end (`alias.separate`). `nan` is the
    NaN policy of max/min (`combine`).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder(); src, dst = RegTile(b, (2, 3), "f32"), RegTile(b, (2,), "f32")
    >>> gen_reduce_thread(dst, src, axes=1); b.instructions()[4:]
    ['mov.f32 %f7, 0f00000000;', 'add.f32 %f7, %f7, %f3;', 'add.f32 %f7, %f7, %f4;', 'add.f32 %f7, %f7, %f5;']
    """
    b = src.builder
    t = check(b, op, src.dtype)
    check_nan(nan)
    if dst.dtype != t:
        raise ReductionError(f"dtype mismatch: src={src.dtype} dst={dst.dtype}")
    reduce_dims, spatial_dims = analyze_axes(src.ndim, axes)
    spa_ext = [src.extent[d] for d in spatial_dims]
    red_ext = [src.extent[d] for d in reduce_dims]
    spatial_len = math.prod(spa_ext)
    if dst.region_size != spatial_len:
        raise ReductionError(
            f"dst region has {dst.region_size} elements but the reduction has {spatial_len} spatial positions"
        )
    dst, finish = separate(dst, src, accum)
    for spa in range(spatial_len):
        d = dst.regs[dst.element_slot(get_indices(spa, dst.start, dst.extent))]
        if not accum:
            set_identity(b, op, t, d)
        spatial = split_index(spa, spa_ext)
        for red in range(math.prod(red_ext)):
            index = list(src.start)
            for dim, value in zip(spatial_dims, spatial):
                index[dim] += value
            for dim, value in zip(reduce_dims, split_index(red, red_ext)):
                index[dim] += value
            combine(b, op, t, d, d, src.regs[src.element_slot(index)], nan)
    finish()
