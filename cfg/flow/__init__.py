"""ptxkit.cfg.flow: the shape of a function, before any value is known.

Control-flow graphs (`graph`), one graph per kernel with its called ``.func``s cloned in
(`inline`), dominators (`dominance`), natural loops and preheaders (`loops`), the generic
forward solver (`dataflow`), the SSA versions of registers (`ssa`), and which registers an
instruction writes and reads (`operands`). It imports nothing else of `ptxkit.cfg`; the
subpackages above it (`values`, `sync`, `fence`) build on it (docs/architecture.md §4).

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> from ptxkit.cfg.flow.loops import find_loops
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .pred %p<2>;\\n.reg .b32 %r<2>;\\n\\tmov.u32 %r1, 0;\\nL:\\n\\tadd.s32 %r1, %r1, 1;\\n"
...     "\\tsetp.lt.s32 %p1, %r1, 4;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> len(flow.blocks), [loop.header for loop in find_loops(flow).loops]
(3, [1])
"""
