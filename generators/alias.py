"""A dst that shares registers with its src: a `view` of src's registers, or another region
of the same tile (docs/reduction.md §1.4).

Every path reads src's registers while it writes dst's. Where they are the same
registers a write can destroy a src value that is still to be read (Path 1 sets dst to
the identity before folding into it; Path 2 copies src into dst slot by slot), so
`separate` gives the path a dst over fresh registers in the dst region's slots and emits
the copies into dst once everything is computed. With ``accum`` the old dst values
would be src's own values, which the reduction also reads: refused on every path.

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.regtile import RegTile
>>> t = RegTile(PtxBuilder(), (4,), "f32")
>>> shares_registers(t[0:1], t), shares_registers(t[0:1], t[1:4])
(True, False)
"""

from __future__ import annotations

from .analysis import ReductionError
from .combine import copy
from .placement import region_slots


def shares_registers(dst, src) -> bool:
    """True when a register of dst's region also holds an element of src's region.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder(); t = RegTile(b, (2, 4), "f32")
    >>> shares_registers(t.view((4, 2)), t), shares_registers(RegTile(b, (8,), "f32"), t)
    (True, False)
    """
    dst_regs = {dst.regs[s] for s in region_slots(dst)}
    return any(src.regs[s] in dst_regs for s in region_slots(src))


def separate(dst, src, accum: bool, safe: bool = False):
    """(the tile to write, a function that emits the copies into dst afterwards).

    `dst` itself and nothing to copy when its region shares no register with src's, or
    when `safe` says the path reads each shared register before it writes it (Path 2 in
    place, the sm_100 paths, which write dst last). Otherwise a tile of
    dst's shape, layout and region whose region slots are fresh registers. Refuses
    ``accum`` whenever registers are shared.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder(); t = RegTile(b, (4,), "f32")
    >>> out, finish = separate(t[0:1], t, accum=False)
    >>> out.regs[:2], out.start, out.extent
    (['%f4', '%f1'], (0,), (1,))
    >>> finish(); b.instructions()
    ['mov.f32 %f0, %f4;']
    >>> separate(t[0:1], t, accum=True)
    Traceback (most recent call last):
    ...
    ptxkit.generators.analysis.ReductionError: accum=True on a dst that shares registers with src (a region of the same tile) would fold src's own values in again, as old dst values; reduce into another buffer or pass accum=False
    """
    if not shares_registers(dst, src):
        return dst, _nothing
    if accum:
        which = "a region of the same tile" if dst.same_buffer(src) else "a view of its registers"
        raise ReductionError(
            f"accum=True on a dst that shares registers with src ({which}) would fold src's own values in "
            "again, as old dst values; reduce into another buffer or pass accum=False"
        )
    if safe:
        return dst, _nothing
    b = dst.builder
    slots = sorted(region_slots(dst))
    regs = list(dst.regs)
    for slot in slots:
        regs[slot] = b.value_reg(dst.dtype)
    apart = type(dst)(b, dst.shape, dst.dtype, dst.layout, regs)
    apart = apart[tuple(slice(s, s + e) for s, e in zip(dst.start, dst.extent))]

    def finish() -> None:
        for slot in slots:
            copy(b, dst.dtype, dst.regs[slot], regs[slot])

    return apart, finish


def _nothing() -> None:
    return None
