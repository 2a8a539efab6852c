"""ptxkit.cfg.values.protocols: what the parts of the register value analysis read of it,
for the type checker only.

The branch conditions (`ptxkit.cfg.values.conditions`) and the counter idioms
(`ptxkit.cfg.values.counters`) are handed the analysis as an argument; each protocol lists
what one of them reads, and mypy checks that the analysis has it
(tests/test_typing.py). Nothing imports this module at run time, so it costs no
start-up time, and mypyc, which cannot compile a class declared inside ``if
TYPE_CHECKING:``, never meets one (docs/architecture.md §5).

>>> from ptxkit.cfg.values.protocols import Code
>>> Code.__name__
'Code'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Container, Hashable, Mapping

    from ptxkit.cfg.flow.dominance import DominatorTree
    from ptxkit.cfg.flow.graph import FlowGraph
    from ptxkit.cfg.values.conditions import Definitions, Narrowings, Point
    from ptxkit.cfg.values.idioms import Quotient, Remainder
    from ptxkit.cfg.values.trips import Count
    from ptxkit.cfg.values.values import Value
    from ptxkit.instruction import Operand


class Code(Protocol):
    """What the conditions read of the code, through the register analysis: the graph,
    each block's inlined copy (its prefix to register names) and the definitions."""

    @property
    def flow(self) -> FlowGraph: ...
    def prefix(self, block: int) -> str: ...
    def definitions(self) -> Definitions: ...
    def last_definition(self, block: int, position: int, register: str) -> int | None: ...
    def redefined(self, block: int, start: int, stop: int, register: str) -> bool: ...


class Tests(Code, Protocol):
    """What finding the conditions reads besides: the constants compared so far
    (`branch_conditions` adds its bounds: widening stops there), and the stack word a
    load reads whole (`ptxkit.cfg.values.frames`)."""

    @property
    def thresholds(self) -> set[int]: ...
    def _read_cell(self, block: int, position: int) -> tuple[str, int, int] | None: ...


class Renamed(Protocol):
    """What `refinements` reads: the graph and its dominators, and the SSA versions
    each point reads (`uses`) and writes (`defs`)."""

    @property
    def flow(self) -> FlowGraph: ...
    @property
    def dominators(self) -> DominatorTree: ...
    @property
    def uses(self) -> Mapping[tuple[Point, str], str]: ...
    @property
    def defs(self) -> Mapping[tuple[Point, str], str]: ...


class Tripping(Code, Renamed, Protocol):
    """What `ptxkit.cfg.values.trips.trip_bounds` reads: the code, the dominators, and
    the SSA versions each point reads and writes."""


class Solved(Protocol):
    """What a narrowing reads as the analysis solves: the versions' values, the keys
    some instruction defines, and a value narrowed by what holds in a block."""

    @property
    def values(self) -> Mapping[str, Value]: ...
    @property
    def defined(self) -> Container[str]: ...
    def _narrowed(self, block: int, version: str, value: Value) -> Value: ...


class Narrowed(Solved, Protocol):
    """What `dead_blocks` reads besides: the graph and its dominators."""

    @property
    def flow(self) -> FlowGraph: ...
    @property
    def dominators(self) -> DominatorTree: ...


class Counting(Code, Protocol):
    """What the idioms read of the register analysis as they make an instruction's rule:
    the code (`ptxkit.cfg.values.conditions.Code`), the registers each block declares
    without ``%`` (inline assembly), and the constants compared so far (a ring's test
    adds its bound: widening stops there)."""

    def plain(self, block: int) -> frozenset[str]: ...
    @property
    def thresholds(self) -> set[int]: ...
    def remainder_at(self, block: int, position: int) -> Remainder | None: ...
    def quotient_at(self, block: int, position: int, register: str) -> Quotient | None: ...


class Solving(Protocol):
    """What a rule the idioms made reads of the analysis as it solves: a register's
    value where a point reads it, an operand's value, and the SSA versions of registers
    (their values, the version each point reads and writes)."""

    def lookup(self, at: Point, key: str) -> Value: ...
    def evaluate(self, block: int, operand: Operand, at: Point) -> Value: ...
    @property
    def values(self) -> Mapping[str, Value]: ...
    @property
    def uses(self) -> Mapping[tuple[Point, str], str]: ...
    @property
    def defs(self) -> Mapping[tuple[Point, str], str]: ...
    @property
    def trip_offsets(self) -> Mapping[tuple[str, int], tuple[Count, str, str]]: ...
    def _narrowed(self, block: int, version: str, value: Value) -> Value: ...
    @property
    def defined(self) -> Container[str]: ...


class ByThread(Protocol):
    """`RegisterAnswers.by_thread`: a query's value for the threads whose ``%tid.x`` (or
    `register`) lies in ``[low, high]``, or None where it does not depend on it."""

    def __call__(self, query: Hashable, low: int, high: int, register: str = ..., /) -> Value | None: ...


class Pinned(Protocol):
    """`RegisterAnswers.pinned`: a query's value where each register ``key`` held
    ``entry_values[(key, block)]`` on the last entry into join `block`, or None where
    none of those joins feeds it."""

    def __call__(self, query: Hashable, entry_values: Mapping[tuple[str, int], int], /) -> Value | None: ...
