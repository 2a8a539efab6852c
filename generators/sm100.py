"""The sm_100 fast paths of a thread-wise f32 reduction to one value (TVM's priority-20
variants ``packed_add_sum`` and ``3input_maxmin``).

They apply (`applies`) at thread scope on sm_100 or newer, for f32, a 1-D src of at
least 8 elements and a one-element dst, exactly TVM's predicates; `reduce_local`
takes them first there. The H200 cannot run them: tests assemble them for sm_100a.

* sum: four packed accumulators of two floats each (``.b64``), combined with
  ``add.rn.ftz.f32x2`` (PTX 8.6) over chunks of 8; the remainder goes into element 0;
  then a tree and one scalar add. ``.ftz`` flushes subnormal inputs and results to
  zero, so results can differ from Path 1 there (as in TVM).
* max/min: four partial results combined with the 3-input ``max.f32``/``min.f32``
  (PTX 8.8), two new elements per instruction; ``max.NaN.f32`` with the default NaN
  policy (`combine`).

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.regtile import RegTile
>>> b = PtxBuilder("sm_100a")
>>> src, dst = RegTile(b, (16,), "f32"), RegTile(b, (1,), "f32")
>>> applies(dst, src, "thread"), b.version
(True, (8, 6))
>>> gen_reduce_thread_max3(dst, src, "max"); b.version, b.instructions()[4]
((8, 8), 'max.NaN.f32 %f17, %f17, %f8, %f9;')
"""

from __future__ import annotations

from .alias import separate
from .analysis import ReductionError
from .combine import DEFAULT_NAN, check_nan, combine, opcode


def applies(dst, src, scope: str) -> bool:
    """TVM's predicates for the priority-20 variants (any reduce op).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder("sm_100a"); one = RegTile(b, (1,), "f32")
    >>> applies(one, RegTile(b, (8,), "f32"), "thread"), applies(one, RegTile(b, (7,), "f32"), "thread")
    (True, False)
    """
    b = src.builder
    return (
        scope == "thread"
        and b.sm >= 100
        and src.dtype.name == "f32"
        and dst.dtype == src.dtype
        and dst.region_size == 1
        and src.ndim == 1
        and src.region_size >= 8
    )


def _elements(dst, src, accum) -> tuple[str, list[str]]:
    if not applies(dst, src, "thread"):
        raise ReductionError("the sm_100 fast paths need sm_100+, f32, a 1-D src of 8+ elements and one dst element")
    separate(dst, src, accum, safe=True)  # dst is written last: only accum is refused
    d = dst.regs[dst.element_slot(dst.start)]
    values = [src.regs[src.element_slot((src.start[0] + i,))] for i in range(src.extent[0])]
    return d, values


def gen_reduce_thread_packed_sum(dst, src, accum: bool = False) -> None:
    """``dst = sum(src)`` with ``add.rn.ftz.f32x2`` (TVM's ``packed_add_sum``).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder("sm_100a"); src, dst = RegTile(b, (16,), "f32"), RegTile(b, (1,), "f32")
    >>> gen_reduce_thread_packed_sum(dst, src); b.version, sum("f32x2" in i for i in b.instructions())
    ((8, 6), 7)
    """
    b = src.builder
    d, values = _elements(dst, src, accum)
    b.require_version((8, 6))
    chunks, rest = divmod(len(values), 8)
    first = values[:8]
    if accum:
        lead = b.reg(".f32")
        b.ins("add.f32", lead, values[0], d)
        first = [lead] + first[1:]
    acc = b.regs(".b64", 4)
    for j in range(4):
        b.ins("mov.b64", acc[j], f"{{{first[2 * j]}, {first[2 * j + 1]}}}")
    pair = b.reg(".b64")
    for chunk in range(1, chunks):
        for j in range(4):
            b.ins("mov.b64", pair, f"{{{values[8 * chunk + 2 * j]}, {values[8 * chunk + 2 * j + 1]}}}")
            b.ins("add.rn.ftz.f32x2", acc[j], acc[j], pair)
    if rest:
        low, high = b.reg(".f32"), b.reg(".f32")
        b.ins("mov.b64", f"{{{low}, {high}}}", acc[0])
        for value in values[8 * chunks :]:
            b.ins("add.f32", low, low, value)
        b.ins("mov.b64", acc[0], f"{{{low}, {high}}}")
    b.ins("add.rn.ftz.f32x2", acc[0], acc[0], acc[1])
    b.ins("add.rn.ftz.f32x2", acc[2], acc[2], acc[3])
    b.ins("add.rn.ftz.f32x2", acc[0], acc[0], acc[2])
    low, high = b.reg(".f32"), b.reg(".f32")
    b.ins("mov.b64", f"{{{low}, {high}}}", acc[0])
    b.ins("add.f32", d, low, high)


def gen_reduce_thread_max3(dst, src, op: str, accum: bool = False, nan: str = DEFAULT_NAN) -> None:
    """``dst = max(src)`` or ``min(src)`` with 3-input ``max.f32``/``min.f32`` (TVM's ``3input_maxmin``).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder("sm_100a"); src, dst = RegTile(b, (16,), "f32"), RegTile(b, (1,), "f32")
    >>> gen_reduce_thread_max3(dst, src, "min", nan="ignore"); b.instructions()[-1]
    'min.f32 %f16, %f16, %f19, %f20;'
    """
    if op not in ("max", "min"):
        raise ReductionError(f"the 3-input path reduces max or min, not {op}")
    b = src.builder
    d, values = _elements(dst, src, accum)
    b.require_version((8, 8))
    three = opcode(op, "f32", check_nan(nan))
    chunks, rest = divmod(len(values), 8)
    partial = b.regs(".f32", 4)
    for i in range(4):
        if i == 0 and accum:
            b.ins(three, partial[0], values[0], values[1], d)
        else:
            combine(b, op, "f32", partial[i], values[2 * i], values[2 * i + 1], nan)
    for chunk in range(1, chunks):
        for i in range(4):
            b.ins(three, partial[i], partial[i], values[8 * chunk + 2 * i], values[8 * chunk + 2 * i + 1])
    for value in values[8 * chunks :]:
        combine(b, op, "f32", partial[0], partial[0], value, nan)
    combine(b, op, "f32", d, partial[0], partial[1], nan)
    b.ins(three, d, d, partial[2], partial[3])


def gen_reduce_sm100(dst, src, op: str, accum: bool = False, nan: str = DEFAULT_NAN) -> None:
    """The fast path for `op`: packed sum or 3-input max/min (`nan`: their NaN policy).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder("sm_100a"); src, dst = RegTile(b, (8,), "f32"), RegTile(b, (1,), "f32")
    >>> gen_reduce_sm100(dst, src, "sum"); b.instructions()[-1]
    'add.f32 %f8, %f9, %f10;'
    """
    if op == "sum":
        gen_reduce_thread_packed_sum(dst, src, accum)
    else:
        gen_reduce_thread_max3(dst, src, op, accum, nan)

