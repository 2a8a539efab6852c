"""The static single assignment form the register analysis (`ptxkit.cfg.values.registers`) uses.

Each definition of a register makes a *version* of it (`version_name`); joins go where
the dominance frontiers (`frontiers`) say two versions meet; a read looks up the version
that reaches the block it reads in (`reading_block`). `-G` stack cells are followed as
if they were registers, under a key of their own (`cell_key`).

>>> version_name("%r1", 3, 7), cell_key(("frame", 16, 4))
('%r1@3:7', '[frame+16:4]')

On a branch around one block (0 branches to 2 or falls into 1, which goes on to 2), a
definition in the arm meets the others at 2, and the way from 0 to 2 passes 1:

>>> import ptxkit
>>> from ptxkit.cfg.flow.dominance import DominatorTree
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .pred %p<2>;\\n\\t@%p1 bra B;\\n\\tbar.sync 0;\\nB:\\n\\tbar.sync 1;\\n\\tret;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> frontiers(flow, DominatorTree.of(flow).idom)[0], bin(blocks_between(flow, DominatorTree.of(flow), 0, 2))
({1: (2,)}, '0b110')
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.dataflow import mask_of
from ptxkit.cfg.flow.loops import reachable

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ptxkit.cfg.flow.dominance import DominatorTree
    from ptxkit.cfg.flow.graph import FlowGraph


def blocks_between(flow: FlowGraph, dominators: DominatorTree, there: int, reading: int) -> int:
    """The blocks on a way from block `there` to block `reading` (`reading` included)
    that does not pass `there` again, as a bit mask (bit ``b`` for block ``b``: the
    analyses of a graph keep many such sets, and a `-G` kernel has thousands of
    blocks). Where `there` dominates `reading`, every block
    that reaches `reading` without passing `there` comes after it, so one walk back from
    `reading` finds them (a dominator and the block it reaches, as `-G` code recomputes a
    value, are near each other; the walk forward from `there` would cover the rest of
    the kernel; an example in the module's docstring).
    """
    back = reachable(flow.pred, flow.pred[reading], avoid={there}) | {reading}
    if there != reading and dominators.dominates(there, reading):
        return mask_of(node for node in back if dominators.dominates(there, node))  # not the unreachable ones
    return mask_of(reachable(flow.succ, flow.succ[there], avoid={there}) & back)


def by_block(definitions: Mapping[str, Sequence[tuple[int, int]]]) -> dict[tuple[int, str], tuple[int, ...]]:
    """(block, key) -> the sorted positions of the block's definitions of key.

    >>> by_block({"%r1": [(0, 5), (0, 2), (3, 1)]})
    {(0, '%r1'): (2, 5), (3, '%r1'): (1,)}
    """
    found: dict[tuple[int, str], list[int]] = {}
    for key, sites in definitions.items():
        for block, position in sites:
            found.setdefault((block, key), []).append(position)
    return {key: tuple(sorted(positions)) for key, positions in found.items()}


def frontiers(flow: FlowGraph, idom: dict[int, int]) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    """The dominance frontier of each block (where a definition in it needs a join) and
    the dominator tree's children, of one graph (an example in the module's docstring),
    as tuples: a graph keeps them while its analyses run. A frontier keeps the order in
    which the set that gathered it gives its blocks (the order joins are made in).
    """
    frontier: dict[int, set[int]] = {}
    runner: int | None
    for block in flow.rpo:
        preds = [p for p in flow.pred[block] if p in idom]
        if len(preds) < 2:
            continue
        for runner in preds:
            while runner != idom.get(block) and runner is not None:
                frontier.setdefault(runner, set()).add(block)
                parent = idom.get(runner)
                runner = parent if parent != runner else None
    children: dict[int, list[int]] = {}
    for node, parent in idom.items():
        if node != parent:
            children.setdefault(parent, []).append(node)
    return ({block: tuple(blocks) for block, blocks in frontier.items()},
            {block: tuple(nodes) for block, nodes in children.items()})


def version_name(key: str, block: int, position: int) -> str:
    """The name of the SSA version of `key` that the definition at (block, position) makes
    (an example in the module's docstring)."""
    return f"{key}@{block}:{position}"


def reading_block(at: tuple[int, int] | tuple[str, object, int]) -> int:
    """The block whose view of the registers `at` (a rule's ``(block, position)``, or a
    query's or a branch's point) reads.

    >>> reading_block((4, 2)), reading_block(("query", "st", 7))
    (4, 7)
    """
    # a point that starts with neither word is a (block, position): mypy cannot narrow by `in`
    return at[-1] if at[0] in ("query", "branch") else at[0]  # type: ignore[return-value]


def cell_key(cell: tuple[str, int, int]) -> str:
    """The key a stack cell ``(region, offset, width)`` is followed under (no register's name
    has a bracket; an example in the module's docstring)."""
    return f"[{cell[0]}+{cell[1]}:{cell[2]}]"
