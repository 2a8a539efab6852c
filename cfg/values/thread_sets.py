"""Which threads of a CTA may run each block: branches on the thread index, evaluated
thread by thread.

A predicate computed from ``%tid.x`` and constants alone (``%laneid`` too, and
``%tid.y``/``%tid.z`` when the kernel's ``.maxntid``/``.reqntid`` makes them 0), through
the integer instructions `ptxkit.isa_eval` evaluates and, in one-dimensional blocks, a
``shfl.sync`` that reads such a value from another lane of the warp, has one value per
thread, and there are at most 1024 threads: `runners` simply computes it for every
``%tid.x`` the CTA may have. At a branch on such a predicate only the threads that take an
edge go along it; at any other branch all of them go both ways, so each set holds every
thread that may run its block, and maybe more. docs/fence.md §4.4 uses the sets to keep a
fence's credit out of the code that no thread that ran the fence runs.
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.values.definitions import DEFINITIONS
from ptxkit.cfg.values.divergence import conditional, definitions, qualified
from ptxkit.cfg.values.specials import special_ranges
from ptxkit.isa_eval import SHUFFLE_MODES, evaluate_each, operation, shuffle_source

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import TypeGuard

    from ptxkit.cfg.flow.graph import FlowGraph
    from ptxkit.instruction import Operand

    #: A register's values thread by thread: a list indexed by ``%tid.x``, or one number every thread has.
    ThreadValues = list[int] | int
    #: An operand of a pure instruction: a number, or a register `qualified` by its inlined copy.
    Source = int | str

#: a predicate's values, one byte per thread, as the digits of a binary number
_DIGITS = bytes.maketrans(b"\x00\x01", b"01")


def runners(flow: FlowGraph) -> list[int]:
    """Block -> the threads that may run it, as a bit set (bit ``t``: the threads with
    ``%tid.x == t``); computed once per graph.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".visible .entry k() .maxntid 256, 1, 1\\n{\\n.reg .b32 %r<2>;\\n.reg .pred %p<2>;\\n"
    ...     "\\tmov.u32 %r1, %tid.x;\\n\\tsetp.lt.u32 %p1, %r1, 128;\\n\\t@%p1 bra DONE;\\n"
    ...     "\\tst.shared.u32 [%r1], 0;\\nDONE:\\n\\tret;\\n}\\n")
    >>> [(bin(threads).count("1"), threads & 1) for threads in runners(inlined_graph(m.function("k")))]
    [(256, 1), (128, 0), (256, 1)]
    """
    return RUNNERS.of(flow)


def _runners(flow: FlowGraph) -> list[int]:
    ranges = special_ranges(flow.function) if flow.function is not None else None
    count = ranges["%tid.x"][1] + 1 if ranges is not None else 1024
    everyone = (1 << count) - 1
    values = _Values(flow, count, ranges)
    edges: dict[tuple[int, int], int] = {}
    for block in flow.rpo:
        guard = flow.blocks[block].heads[-1][0] if conditional(flow, block) else None
        if guard is None:
            continue
        taken = values.threads_where(qualified(flow, block, guard.register))
        if taken is None:
            continue
        if guard.negated:
            taken ^= everyone
        for successor in flow.succ[block]:
            edges[(block, successor)] = taken if flow.kinds.get((block, successor)) == "taken" else taken ^ everyone
    sets = [0] * len(flow.blocks)
    sets[flow.start] = everyone
    work = [flow.start]
    while work:
        block = work.pop()
        for successor in flow.succ[block]:
            grown = sets[successor] | sets[block] & edges.get((block, successor), everyone)
            if grown != sets[successor]:
                sets[successor] = grown
                work.append(successor)
    return sets


#: The threads that may run each block of a graph (`runners`).
RUNNERS: Fact[list[int]] = Fact("runners", _runners, needs=(DEFINITIONS,))


class _Values:
    """Registers' values thread by thread (a list indexed by ``%tid.x``), or None for a
    register that is not a pure function of the thread index."""

    def __init__(self, flow: FlowGraph, count: int, ranges: dict[str, tuple[int, int]] | None) -> None:
        self.flow = flow
        self.defined = definitions(flow)
        tid = list(range(count))
        self.known: dict[str, ThreadValues | None] = {"%tid.x": tid}
        self.pure: dict[str, bool] = {}
        flat = ranges is not None and ranges["%tid.y"] == (0, 0) and ranges["%tid.z"] == (0, 0)
        if flat:  # one-dimensional blocks: the lane is the index within the warp
            self.known.update({"%tid.y": [0] * count, "%tid.z": [0] * count, "%laneid": [t % 32 for t in tid]})
        self.count = count
        self.flat = flat

    def threads_where(self, predicate: str) -> int | None:
        """The bit set of the threads for which `predicate` (0 or 1 in each) is true, or None."""
        values = self.of(predicate)
        if values is None:
            return None
        if isinstance(values, int):  # the same in every thread
            return (1 << self.count) - 1 if values else 0
        if not set(values) <= {0, 1}:  # not a predicate (a guard on a .b32 register: invalid PTX)
            return None
        return int(bytes(reversed(values)).translate(_DIGITS), 2)

    def of(self, register: str) -> ThreadValues | None:
        """The values of `register` thread by thread (one number where every thread has
        it), or None."""
        if register not in self.known:
            pure = self._pure(register)  # no cycle gets past it: `_pure` reads one as impure
            self.known[register] = self._computed(register) if pure else None
        return self.known[register]

    def _pure(self, register: str) -> bool:
        """True when `register` may be computed: its sources, followed down, are the
        thread index and constants through instructions `_apply` evaluates (checked before any
        values are, so that an expression that also reads a parameter costs no lists)."""
        found = self.pure.get(register)
        if found is None:
            if register in self.known:
                return self.known[register] is not None
            self.pure[register] = False  # a cycle through the register reads it as unknown
            definition = self._definition(register)
            found = self.pure[register] = definition is not None and all(
                isinstance(source, int) or self._pure(source) for source in definition[1])
        return found

    def _definition(self, register: str) -> tuple[str, list[Source]] | None:
        """``(opcode, sources)`` of the one unguarded definition of `register`,
        each source a number or a qualified register; None when there is none such."""
        where = self.defined.get(register)
        if where is None or len(where) != 1:
            return None
        block, position = where[0]
        guard, opcode, _, _ = self.flow.blocks[block].heads[position]
        operands = self.flow.blocks[block].instructions[position].operands
        if guard is not None or not operands or not (
                operands[0].kind == "register" and _supported(opcode, len(operands) - 1)
                or _shuffle(opcode, len(operands) - 1) and _shuffled_value(self.flow, block, operands[0], register)):
            return None
        sources: list[Source] = []
        for operand in operands[1:]:
            if operand.kind == "immediate" and isinstance(operand.value, int):
                sources.append(operand.value)
            elif operand.kind in ("register", "special") and operand.name is not None and not operand.negated:
                sources.append(qualified(self.flow, block, operand.name))
            else:
                return None
        return opcode, sources

    def _computed(self, register: str) -> ThreadValues | None:
        definition = self._definition(register)
        assert definition is not None, "`_pure` found it"  # for mypy: called only when `_pure` is true
        opcode, sources = definition
        values: list[ThreadValues] = []
        for source in sources:
            value = source if isinstance(source, int) else self.of(source)
            if value is None:
                return None
            values.append(value)
        if _shuffle(opcode, len(values)):
            return _shuffled(opcode, values, self.count) if self.flat else None
        return _apply(opcode, values)


def _supported(opcode: str, sources: int) -> bool:
    """True for an integer instruction the evaluator models (`ptxkit.isa_eval`), with
    `sources` source operands."""
    found = operation(opcode)
    return found is not None and found.arity == sources


def _shuffle(opcode: str, sources: int) -> bool:
    """True for ``shfl.sync.<mode> d[|p], a, b, c, membermask``."""
    parts = opcode.split(".")
    return parts[:2] == ["shfl", "sync"] and len(parts) > 2 and parts[2] in SHUFFLE_MODES and sources == 4


def _shuffled_value(flow: FlowGraph, block: int, destination: Operand, register: str) -> bool:
    """True when `register` is the value a shuffle writes to `destination` (``d`` or the
    ``d`` of ``d|p``), not its predicate."""
    target = destination.elements[0] if destination.kind == "pair" else destination
    return target.kind == "register" and target.name is not None and \
        qualified(flow, block, target.name) == register


def _shuffled(opcode: str, sources: list[ThreadValues], count: int) -> ThreadValues | None:
    """``shfl.sync.<mode> d, a, b, c, -1`` thread by thread in a one-dimensional block of
    `count` threads, whose warps are threads ``32w`` to ``32w + 31``: thread `t` reads `a`
    from the lane of its own warp that `ptxkit.isa_eval.shuffle_source` gives (PTX ISA,
    ``shfl.sync``). None for a mask that leaves a lane out, or a source thread the block
    does not have.

    >>> _shuffled("shfl.sync.idx.b32", [[10, 11, 12, 13, 14, 15, 16, 17] * 8, 2, 31, -1], 64)[30:34]
    [12, 12, 12, 12]
    >>> _shuffled("shfl.sync.up.b32", [list(range(64)), 1, 0, -1], 64)[30:34]  # thread 32, lane 0, keeps its own
    [29, 30, 32, 32]
    >>> _shuffled("shfl.sync.idx.b32", [7, 0, 31, -1], 64)
    7
    >>> _shuffled("shfl.sync.idx.b32", [list(range(40)), 9, 31, -1], 40) is None
    True
    >>> _shuffled("shfl.sync.idx.b32", [list(range(64)), 0, 31, 0xFFFF], 64) is None
    True
    """
    value, lane, clamp, mask = sources
    if not isinstance(mask, int) or mask & 0xFFFFFFFF != 0xFFFFFFFF:
        return None
    if isinstance(value, int):  # every lane holds it
        return value
    mode = opcode.split(".")[2]
    found = []
    for thread in range(count):
        offset = lane if isinstance(lane, int) else lane[thread]
        limits = clamp if isinstance(clamp, int) else clamp[thread]
        source = thread & ~31 | shuffle_source(mode, thread & 31, offset, limits)[0]
        if source >= count:
            return None
        found.append(value[source])
    return found


def _apply(opcode: str, sources: list[ThreadValues]) -> ThreadValues | None:
    """The values of one pure integer instruction, thread by thread (`ptxkit.isa_eval`),
    or None; a source is a list (a value per thread) or one number for every thread,
    and so is the result.

    >>> _apply("shl.b32", [[1, 2, 3], 4]), _apply("div.u32", [[6, 7], [3, 0]]), _apply("setp.lt.s32", [-1, 0])
    ([16, 32, 48], None, 1)
    """
    found = operation(opcode)
    if found is None or found.arity != len(sources):
        return None
    if not any(isinstance(source, list) for source in sources):  # constants alone: as one thread
        return found.apply(*sources)
    values = evaluate_each(found, sources)
    return values if _every_thread_known(values) else None


def _every_thread_known(values: Sequence[int | None]) -> TypeGuard[list[int]]:
    """True when no thread's value is unspecified in `values`, the list `evaluate_each` makes."""
    return None not in values
