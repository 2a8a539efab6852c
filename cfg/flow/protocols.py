"""ptxkit.cfg.flow.protocols: what the flow layer's algorithms read of the graphs they are
handed, for the type checker only.

Nothing imports this module at run time (the modules that name these protocols import
them under ``TYPE_CHECKING``), so it costs no start-up time, and mypyc, which cannot
compile a class declared inside ``if TYPE_CHECKING:``, never meets one: a compiled
module sees a protocol as any object (docs/architecture.md §5).

>>> from ptxkit.cfg.flow.protocols import ForwardGraph
>>> ForwardGraph.__name__
'ForwardGraph'
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Protocol, TypeVar

#: A node of a graph: a block, or a virtual node such as ``EXIT``.
GraphNode = TypeVar("GraphNode", bound=Hashable)


class ForwardGraph(Protocol):
    """What the solver reads of a graph (a `FlowGraph` has it)."""

    @property
    def succ(self) -> list[list[int]]: ...
    @property
    def pred(self) -> list[list[int]]: ...
    @property
    def rpo(self) -> list[int]: ...
    @property
    def start(self) -> int: ...


class Adjacency(Protocol[GraphNode]):
    """A node's successors (or predecessors): a list of lists by block, or a dict."""

    def __getitem__(self, node: GraphNode, /) -> Sequence[GraphNode]: ...
