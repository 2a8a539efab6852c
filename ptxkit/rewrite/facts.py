"""What matchers and positions know about one function, computed once and on demand:
its control-flow graph, loops, ``.loc`` table and the value analysis's answers.

>>> import ptxkit
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .pred %p<2>;\\n\\tbar.sync 0;\\nL:\\n\\tbar.sync 1;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
>>> facts = FunctionFacts(m.function("k"))
>>> second = facts.flow.blocks[1].instructions[0]
>>> facts.block_of(second), facts.loop_headers, facts.is_loop_header(second)
(1, frozenset({1}), True)
"""

from __future__ import annotations

from functools import cached_property


class FunctionFacts:
    """Facts about `function` (a `ptxkit.syntax.Function` with a body), each computed
    on first use. They describe the function as it was when first asked: a pass reads
    them before its edits are applied."""

    def __init__(self, function):
        if function.is_declaration:
            raise ValueError(f"{function.name} is a declaration without a body")
        self.function = function

    @cached_property
    def flow(self):
        """The function's `ptxkit.cfg.flow.graph.FlowGraph` (blocks in source order)."""
        from ptxkit.cfg.flow.graph import flow_graph

        return flow_graph(self.function)

    @cached_property
    def _blocks(self) -> dict[int, int]:
        return {id(node): block.index for block in self.flow.blocks for node in block.instructions}

    def block_of(self, instruction) -> int:
        """The index of the basic block holding `instruction`."""
        return self._blocks[id(instruction)]

    @cached_property
    def loops(self):
        """The `ptxkit.cfg.flow.loops.LoopForest` of the function."""
        from ptxkit.cfg.flow.loops import loop_forest

        return loop_forest(self.flow)

    @cached_property
    def loop_headers(self) -> frozenset:
        """The blocks that head a natural loop."""
        return frozenset(loop.header for loop in self.loops.loops)

    def is_loop_header(self, instruction) -> bool:
        """True for the first instruction of a loop header block."""
        block = self.flow.blocks[self.block_of(instruction)]
        return block.index in self.loop_headers and block.instructions[0] is instruction

    @cached_property
    def locs(self):
        """The function's `ptxkit.rewrite.locs.LocTable`."""
        from .locs import LocTable

        return LocTable(self.function)

    @cached_property
    def generic_shared(self) -> frozenset:
        """The generic loads and stores that may access shared memory (by node id; see
        `ptxkit.rewrite.analysis`)."""
        from .analysis import generic_shared_accesses

        return frozenset(id(node) for node in generic_shared_accesses(self.function))
