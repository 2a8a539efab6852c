"""Lane tables: a value kept per lane of a warp, read back by index with ``shfl.sync.idx``.

A kernel may keep a small table in a warp's registers, entry ``j`` in lane ``j``: each
lane computes its own, ``selp t, x, y, p`` with ``p`` set by ``setp.lt p, lane, S``, and
a lane that wants entry ``i`` takes it from lane ``i`` with ``shfl.sync.idx d, t, i, 31,
-1``. DeepGEMM's sm100 GEMMs keep a shared-memory descriptor per pipeline stage so and
read the current stage's with the stage index. Over the whole warp ``t`` holds every
lane's entry, ``y`` included: a descriptor for all 32 lanes' stages and a 0, which
addresses nothing the analysis can bound. What ``d`` gets is the entries of the lanes
``i`` may name. Where ``x`` is a sum of the lane index times a constant, registers set
once and a constant (`ptxkit.cfg.values.idioms.linear`), that is ``x`` with the lane
index replaced by ``i``'s value, and ``y`` only where ``i`` may reach past ``S``
(docs/fence.md §3.1):

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> from ptxkit.cfg.values.registers import register_values
>>> from ptxkit.cfg.values.values import show
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k(.param .u32 s)\\n{\\n"
...     ".reg .b32 %r<9>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r1, %laneid;\\n\\tsetp.lt.u32 %p1, %r1, 4;\\n"
...     "\\tshl.b32 %r2, %r1, 10;\\n\\tselp.b32 %r3, %r2, 0, %p1;\\n\\tld.param.u32 %r4, [s];\\n"
...     "\\tand.b32 %r5, %r4, 3;\\n\\tshfl.sync.idx.b32 %r6, %r3, %r5, 31, -1;\\n\\tret;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> shuffle = flow.blocks[0].instructions[6]
>>> show(register_values(flow, {"t": (0, 6, shuffle.operands[1]), "d": (0, 7, shuffle.operands[0])})["d"])
'[0, 3072] step 1024'
"""

from __future__ import annotations

import functools

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.operands import operand_reads
from ptxkit.cfg.values.conditions import only_site, register_name
from ptxkit.cfg.values.idioms import linear
from ptxkit.cfg.values.values import NUM, TOP, add, join, mul, number
from ptxkit.isa_eval import WARP_LANES, reads_lane_b

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ptxkit.cfg.flow.graph import HeadTuple
    from ptxkit.cfg.values.conditions import Point
    from ptxkit.cfg.values.counters import Refined
    from ptxkit.cfg.values.protocols import Counting, Solving
    from ptxkit.cfg.values.values import Value
    from ptxkit.instruction import Operand

    #: What `_table` finds: the lane index's coefficient in ``x``, ``x``'s other terms
    #: (key -> coefficient) and constant, ``S``, and ``y`` (an operand of the selp).
    Table = tuple[int, dict[str, int], int, int, "Operand"]

#: Where a 32-bit sum of numbers would wrap (`_entry`'s sums are taken without wrapping).
_WORD = 1 << 31


def lane_table(analysis: Counting, block: int, position: int, operands: Sequence[Operand],
               count: int) -> Refined | None:
    """``(compute, sources)`` for ``shfl.sync.idx d, t, i, 31, m`` (at (block, position),
    `count` targets: ``d`` and maybe its predicate) where ``t`` is a lane table (the
    module docstring): ``d`` is the entries of the lanes ``i`` names; None otherwise. With
    a clamp of 31 and no segment mask the source lane is ``i`` itself
    (`ptxkit.isa_eval.reads_lane_b`), an index outside the warp's lanes any lane."""
    modifiers = analysis.flow.blocks[block].heads[position][1].split(".")[1:]
    if "idx" not in modifiers or len(operands) != 5 or operands[1].kind != "register" \
            or operands[3].kind != "immediate" or not isinstance(operands[3].value, int) \
            or not reads_lane_b(operands[3].value):
        return None
    prefix = analysis.prefix(block)
    table = _table(analysis, prefix, register_name(operands[1]))
    if table is None:
        return None
    coefficient, terms, constant, bound, other = table
    index, entry = operands[2], prefix + register_name(operands[1])
    plain = analysis.plain(block)
    other_key = prefix + register_name(other) if other.kind == "register" else None
    reads = [prefix + name for name in operand_reads(index, plain)] + list(terms) + ([other_key] if other_key else [])
    other_constant = number(other.value) if isinstance(other.value, int) and other_key is None else ()
    compute = functools.partial(_lane_entries, block, index, entry, count, (coefficient, terms, constant, bound),
                                other_key, other_constant)
    return compute, [entry, *reads]


def _lane_entries(block: int, index: Operand, entry: str, count: int, table: tuple[int, dict[str, int], int, int],
                  other_key: str | None, other_constant: Value, a: Solving, at: Point) -> list[Value]:
    """`lane_table`'s computation: the entries of the lanes `index` names, `table` being
    ``(coefficient, terms, constant, bound)`` of `Table` (a partial of it, where a closure
    would make a reference cycle once compiled: docs/architecture.md §5)."""
    coefficient, terms, constant, bound = table
    lanes = a.evaluate(block, index, at)
    if not lanes:
        return [()] * count  # not evaluated yet
    if any(atom.form != NUM or atom.lo < 0 or atom.hi >= WARP_LANES for atom in lanes):
        return [a.lookup(at, entry)] + [TOP] * (count - 1)  # every lane's entry
    # lane j's registers, as set: not narrowed by the branches this lane took to get here
    held = [(a.values.get(key, ()), factor) for key, factor in terms.items()]
    if any(not value for value, _ in held):
        return [()] * count  # not evaluated yet
    out: Value = ()
    for atom in lanes:
        last = min(atom.hi, bound - 1)
        if atom.lo <= last:  # lanes below S hold x
            last -= (last - atom.lo) % atom.step
            value = add(number(constant), mul(number(atom.lo, last, atom.step), number(coefficient)))
            for term, factor in held:
                value = add(value, term if factor == 1 else mul(term, number(factor)))
            out = join(out, value)
        if atom.hi >= bound:  # the others hold y
            out = join(out, a.values.get(other_key, ()) if other_key else other_constant)
    if any(atom.form == NUM and (atom.lo < -_WORD or atom.hi >= _WORD) for atom in out):
        return [a.lookup(at, entry)] + [TOP] * (count - 1)  # a sum that may wrap: every lane's entry
    return [out] + [TOP] * (count - 1)


def _table(analysis: Counting, prefix: str, name: str) -> Table | None:
    """`Table` of register `name` (of the inlined copy `prefix`) when it is set once, by an
    unguarded ``selp t, x, y, p`` with ``p`` set once by ``setp.lt.u32 p, lane, S`` (or
    ``.s32``; ``lane`` set once from ``%laneid``, ``0 < S <= 32``), ``x`` a sum over the lane
    index and registers set once (`_entry`), and ``y`` a constant or a register set once;
    else None."""
    found = _set_by(analysis, prefix, name)
    if found is None:
        return None
    head, selp = found
    if head[0] is not None or head[2] != "selp" or len(selp) != 4 or selp[3].kind != "register":
        return None
    x, y = (selp[2], selp[1]) if selp[3].negated else (selp[1], selp[2])
    test = _lane_test(analysis, prefix, register_name(selp[3]))
    if test is None or not _set_once(analysis, prefix, y):
        return None
    lane, bound = test
    entry = _entry(analysis, prefix, x, lane)
    if entry is None:
        return None
    coefficient, terms, constant = entry
    return coefficient, terms, constant, bound, y


def _lane_test(analysis: Counting, prefix: str, predicate: str) -> tuple[str, int] | None:
    """``(lane, S)`` where `predicate` is set once by an unguarded ``setp.lt.u32`` (or
    ``.s32``) of a register set once from ``%laneid`` against a constant ``0 < S <= 32``."""
    found = _set_by(analysis, prefix, predicate)
    if found is None:
        return None
    head, compare = found
    if head[0] is not None or head[1] not in ("setp.lt.u32", "setp.lt.s32") or len(compare) != 3 \
            or compare[1].kind != "register" or compare[2].kind != "immediate" \
            or not isinstance(compare[2].value, int) or not 0 < compare[2].value <= WARP_LANES:
        return None
    lane = register_name(compare[1])
    found = _set_by(analysis, prefix, lane)
    if found is None:
        return None
    head, moved = found
    if head[0] is not None or head[2] != "mov" or len(moved) != 2 or moved[1].kind != "special" \
            or moved[1].name != "%laneid":
        return None
    return lane, compare[2].value


def _set_by(analysis: Counting, prefix: str, name: str) -> tuple[HeadTuple, tuple[Operand, ...]] | None:
    """The head and operands of the one instruction that sets register `name` (of the
    inlined copy `prefix`), or None where none or several do."""
    site = only_site(analysis, prefix, name)
    if site is None:
        return None
    code = analysis.flow.blocks[site[0]]
    return code.heads[site[1]], code.instructions[site[1]].operands


def _entry(analysis: Counting, prefix: str, x: Operand, lane: str) -> tuple[int, dict[str, int], int] | None:
    """``(coefficient of the lane index, other terms' keys -> coefficients, constant)`` of
    `x`: a constant, the lane register, or a register set once by a sum
    (`ptxkit.cfg.values.idioms.linear`, within its block) whose other registers are each
    set once, and so hold one value wherever they are read."""
    if x.kind == "immediate":
        return (0, {}, x.value) if isinstance(x.value, int) else None
    if x.kind != "register":
        return None
    name = register_name(x)
    if name == lane:
        return 1, {}, 0
    site = only_site(analysis, prefix, name)
    if site is None:
        return None
    code = analysis.flow.blocks[site[0]]
    found = linear(code.instructions, code.heads, site[1], analysis.plain(site[0]))
    if found is None or any(register != lane and only_site(analysis, prefix, register) is None
                            for register in found.terms):
        return None
    terms = {prefix + register: factor for register, factor in found.terms.items() if register != lane}
    return found.terms.get(lane, 0), terms, found.constant


def _set_once(analysis: Counting, prefix: str, operand: Operand) -> bool:
    """True for a constant, or a register set once (one value wherever it is read)."""
    if operand.kind == "immediate":
        return isinstance(operand.value, int)
    return operand.kind == "register" and only_site(analysis, prefix, register_name(operand)) is not None
