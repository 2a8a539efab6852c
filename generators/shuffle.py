"""Path 2: the lane shard→replica warp reduction (``shfl.sync.bfly.b32`` butterflies).

For each storage coordinate ``k`` every lane ends with ``op`` over the lanes of its
group of ``src[k]``, where a group is the set of lanes that differ only in the dst
replica's lane bits. The xor masks come from the replica's strides
(`analysis.shuffle_plan`), so ``R[8 : 4@laneid]`` reduces over lanes
``{c, c+4, …, c+28}`` with masks 16, 8, 4 (TVM uses 4, 2, 1 there: wrong lanes).

* Every lane of the warp must execute the call together: the member mask is
  ``0xffffffff``; call it only under warp-uniform control flow.
* Width 1 (``R[1 : 1@laneid]``) is a plain copy (TVM fails in codegen).
* Whole tiles only: a region of src or dst is refused (TVM ignores regions here and
  reduces, and writes, the whole tiles).
* f16/bf16 with two or more elements per lane shuffle packed pairs: one
  ``shfl.sync.bfly.b32`` moves two values and ``add/max/min.{f16x2,bf16x2}`` combines
  them, half the shuffles of TVM's per-element code. A lone element is shuffled as
  ``{x, x}`` and combined alone.
* s32/u32 on sm_80+ use ``redux.sync`` (one instruction per element; partial widths
  get each group's member mask).
* ``accum=True`` folds the old dst value in once, after the shuffles, as on every other
  path. This departs from TVM, whose Path 2 ignores ``accum`` and always overwrites dst.
  With a dst that shares registers with src (the same tile, or a view) it is refused.
* A dst over src's own registers that keeps each element in its register is reduced in
  place, with no copies; one that moves elements between registers is computed apart
  (`alias.separate`).
* Each dst element must end with its own src elements (`check_shuffle_results`).

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.regtile import RegTile
>>> from ptxkit.generators.layout import TileLayout, S, R, laneid
>>> b = PtxBuilder()
>>> src = RegTile(b, (32,), "f32", TileLayout(S[32 : 1 @ laneid]))
>>> dst = RegTile(b, (1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid]))
>>> gen_reduce_warp_shuffle(dst, src)
>>> b.instructions()[:3]
['mov.f32 %f1, %f0;', 'shfl.sync.bfly.b32 %f2, %f1, 16, 0x1f, 0xffffffff;', 'add.f32 %f1, %f1, %f2;']
"""

from __future__ import annotations

from .alias import separate
from .analysis import ReductionError, analyze_axes, shuffle_plan
from .combine import DEFAULT_NAN, check, check_nan, combine, combine_pair, copy, is_native
from .placement import Holdings, Meaning, check_results

FULL_MASK = "0xffffffff"
#: the ``c`` operand of every butterfly: no segments, clamp at lane 31
CLAMP = "0x1f"


def gen_reduce_warp_shuffle(dst, src, op: str = "sum", accum: bool = False, pack: bool = True,
                            nan: str = DEFAULT_NAN, axes=-1) -> None:
    """Emit the Path-2 reduction of `src` into `dst` (see the module docstring).

    `pack` (default True) shuffles f16/bf16 elements two per ``shfl``; False gives
    TVM's one shuffle per element. `nan` is the NaN policy of max/min (`combine`).
    `axes`: when src's extents without them are dst's (unit dims aside), every dst
    element must end with the reduction of exactly its src elements, or the call is
    refused (`check_shuffle_results`); otherwise the layouts alone say which src
    elements meet, as in TVM, whose Path 2 ignores axes.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> from ptxkit.generators.layout import TileLayout, S, R, laneid
    >>> b = PtxBuilder()
    >>> src = RegTile(b, (32, 2), "f16", TileLayout(S[(32, 2) : (1 @ laneid, 1)]))
    >>> dst = RegTile(b, (2,), "f16", TileLayout(S[2:1] + R[32 : 1 @ laneid]))
    >>> gen_reduce_warp_shuffle(dst, src); sum(i.startswith("shfl") for i in b.instructions()), b.instructions()[4]
    (5, 'add.f16x2 %r0, %r0, %r1;')
    """
    b = src.builder
    t = check(b, op, src.dtype)
    check_nan(nan)
    if dst.dtype != t:
        raise ReductionError(f"dtype mismatch: src={src.dtype} dst={dst.dtype}")
    for tile, name in ((src, "src"), (dst, "dst")):
        if tile.extent != tile.shape:
            raise ReductionError(
                f"the lane shard -> replica reduction (Path 2) reduces whole tiles; {name} is the region "
                f"start={tile.start} extent={tile.extent} of a {tile.shape} tile"
            )
    plan = shuffle_plan(src.tile_layout, dst.tile_layout)
    check_shuffle_results(dst, src, plan, axes)
    sources = [src.regs[src.storage_slot(k)] for k in range(plan.local_elems)]
    targets = [dst.regs[dst.storage_slot(k)] for k in range(plan.local_elems)]
    in_place = all(target == source or target not in sources for target, source in zip(targets, sources))
    out, finish = separate(dst, src, accum, safe=in_place)
    values = [out.regs[out.storage_slot(k)] for k in range(plan.local_elems)]
    olds = []
    if accum:
        for value in values:
            olds.append(b.value_reg(t))
            copy(b, t, olds[-1], value)
    for value, source in zip(values, sources):
        if value != source:
            copy(b, t, value, source)
    xor_allreduce(b, op, t, values, plan.masks, FULL_MASK, pack=pack, redux_bits=plan.replica_bits, nan=nan)
    for value, old in zip(values, olds):
        combine(b, op, t, value, value, old, nan)
    finish()


def check_shuffle_results(dst, src, plan, axes=-1) -> None:
    """Refuse a Path-2 pair whose butterfly does not leave each dst element the reduction
    of its src elements over `axes` (docs/reduction.md §2.13). Nothing is checked when
    src's extents without `axes` are not dst's: the layouts then define the reduction.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> from ptxkit.generators.layout import TileLayout, S, R, laneid
    >>> b = PtxBuilder()
    >>> src = RegTile(b, (4, 8), "f32", TileLayout(S[(4, 8) : (1 @ laneid, 4 @ laneid)]))   # (g, w) on lane g + 4w
    >>> dst = RegTile(b, (4,), "f32", TileLayout(S[4 : 8 @ laneid] + R[8 : 1 @ laneid]))    # g on lanes 8g..8g+7
    >>> check_shuffle_results(dst, src, shuffle_plan(src.tile_layout, dst.tile_layout))
    Traceback (most recent call last):
    ...
    ptxkit.generators.analysis.ReductionError: the results do not land where the dst layout puts them: dst element (0,) is held by lanes 0-7 (slot 0); after the butterfly over lane masks 4, 2, 1, lane 0 holds 8 src values (2 at spatial position (0,), 2 at spatial position (1,), 2 at spatial position (2,), 2 at spatial position (3,)); reducing axes [1] it must hold the 8 src elements at spatial position (0,), each once
    """
    reduce_dims, _ = analyze_axes(src.ndim, axes)
    meaning = Meaning.by_extents(src, dst, reduce_dims)
    if meaning is None:
        return
    src_at, dst_at = Holdings(src, "src"), Holdings(dst, "dst")
    coordinate = {dst.storage_slot(k): k for k in range(plan.local_elems)}
    src_slots = [src.storage_slot(k) for k in range(plan.local_elems)]
    partners = [0]
    for mask in plan.masks:
        partners += [p ^ mask for p in partners]

    def result(thread, slot):
        return [src_at.element(thread ^ p, src_slots[coordinate[slot]]) for p in partners]

    how = f"the butterfly over lane masks {', '.join(map(str, plan.masks))}" if plan.masks else "the copy"
    check_results(meaning, dst_at, result, how)


def xor_allreduce(b, op, t, values, masks, membermask, pack=True, redux_bits=None, nan=DEFAULT_NAN) -> None:
    """All-reduce each register of `values` over the lanes that the xor `masks` reach.

    Masks are applied in the order given. `membermask` is an immediate or a register.
    With `redux_bits` (the lane bits the masks span) s32/u32 use ``redux.sync`` on sm_80+.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b = PtxBuilder(); x = b.reg(".f32")
    >>> xor_allreduce(b, "sum", "f32", [x], [1, 2], FULL_MASK); b.instructions()
    ['shfl.sync.bfly.b32 %f1, %f0, 1, 0x1f, 0xffffffff;', 'add.f32 %f0, %f0, %f1;',
     'shfl.sync.bfly.b32 %f1, %f0, 2, 0x1f, 0xffffffff;', 'add.f32 %f0, %f0, %f1;']
    """
    if not masks or not values:
        return
    t = check(b, op, t)
    if not t.is_float and redux_bits is not None and b.sm >= 80:
        _redux(b, op, t, values, redux_bits)
        return
    if not t.is_half:
        for value in values:
            other = b.value_reg(t)
            for mask in masks:
                b.ins("shfl.sync.bfly.b32", other, value, mask, CLAMP, membermask)
                combine(b, op, t, value, value, other, nan)
        return
    count = len(values) // 2 * 2 if pack else 0
    groups = [tuple(values[i : i + 2]) for i in range(0, count, 2)] + [(v, None) for v in values[count:]]
    for low, high in groups:
        packed, other = b.reg(".b32"), b.reg(".b32")
        b.ins("mov.b32", packed, f"{{{low}, {high or low}}}")
        if high is not None or is_native(op, t, b.sm):
            # a pair, or one value sent as {x, x}: both halves combine in one instruction
            for mask in masks:
                b.ins("shfl.sync.bfly.b32", other, packed, mask, CLAMP, membermask)
                combine_pair(b, op, t, packed, packed, other, nan)
            b.ins("mov.b32", f"{{{low}, {high or b.reg('.b16')}}}", packed)
            continue
        received, unused = b.reg(".b16"), b.reg(".b16")
        for i, mask in enumerate(masks):
            if i:
                b.ins("mov.b32", packed, f"{{{low}, {low}}}")
            b.ins("shfl.sync.bfly.b32", other, packed, mask, CLAMP, membermask)
            b.ins("mov.b32", f"{{{received}, {unused}}}", other)
            combine(b, op, t, low, low, received, nan)


def _redux(b, op, t, values, bits: int) -> None:
    opcode = f"redux.sync.{ {'sum': 'add', 'max': 'max', 'min': 'min'}[op] }.{t.name}"
    if bits == 31:
        member = FULL_MASK
    else:  # the group of lanes (lane & ~bits) | r for every r ⊆ bits, as a bit set
        pattern = sum(1 << r for r in range(32) if r & ~bits == 0)
        lane, member = b.reg(".b32"), b.reg(".b32")
        b.ins("mov.u32", lane, "%laneid")
        b.ins("and.b32", lane, lane, 31 & ~bits)
        b.ins("mov.b32", member, f"0x{pattern:08x}")
        b.ins("shl.b32", member, member, lane)
    for value in values:
        b.ins(opcode, value, value, member)
