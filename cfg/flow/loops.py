"""Natural loops, their nesting and preheaders, and branch regions, on a `FlowGraph`.

A back edge is an edge ``u -> h`` whose target dominates its source; the natural loop
of ``h`` is ``h`` plus every block that reaches a latch without passing ``h`` (loops
sharing a header are merged). Retreating edges that are not back edges mean
irreducible flow: the blocks on those cycles are reported in `LoopForest.irreducible`
and the fence pass does not hoist into or out of them.

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .pred %p<2>;\\n.reg .b32 %r<2>;\\n\\tmov.u32 %r1, 0;\\nL:\\n\\tadd.s32 %r1, %r1, 1;\\n"
...     "\\tsetp.lt.s32 %p1, %r1, 4;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
>>> forest = find_loops(flow_graph(m.function("k")))
>>> [(loop.header, sorted(loop.blocks), loop.latches) for loop in forest.loops]
[(1, [1], [1])]
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.flow.dataflow import mask_of
from ptxkit.cfg.flow.dominance import DOMINATORS, DominatorTree
from ptxkit.cfg.flow.graph import EXIT, Fact

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Hashable, Iterable, Iterator, Mapping, Sequence
    from typing import TypeVar

    from ptxkit.cfg.flow.graph import EdgeEnd, FlowGraph
    from ptxkit.syntax import Label, Node

    #: A node of a graph given as a dict of successors.
    GraphNode = TypeVar("GraphNode", bound=Hashable)


class Loop:
    """A natural loop: header block, body blocks (header included), latches, nesting.

    >>> outer = Loop(0, {0, 1, 2}, [2])
    >>> inner = Loop(1, {1}, [1], parent=outer)
    >>> inner, inner.depth
    (<Loop header=1 blocks=1 depth=2>, 2)
    """

    __slots__ = ("header", "blocks", "latches", "parent")

    def __init__(self, header: int, blocks: set[int], latches: list[int], parent: "Loop | None" = None):
        self.header, self.blocks, self.latches, self.parent = header, blocks, latches, parent

    @property
    def depth(self) -> int:
        """1 for an outermost loop, 2 for a loop inside it, …"""
        return 1 + sum(1 for _ in self.enclosing())

    def enclosing(self) -> Iterator[Loop]:
        """The loops around this one, innermost first.

        >>> outer = Loop(0, {0, 1}, [1])
        >>> [loop.header for loop in Loop(1, {1}, [1], parent=outer).enclosing()]
        [0]
        """
        loop = self.parent
        while loop is not None:
            yield loop
            loop = loop.parent

    def __repr__(self) -> str:
        return f"<Loop header={self.header} blocks={len(self.blocks)} depth={self.depth}>"


class LoopForest(Record):
    """All natural loops of a graph, outermost first (by header position).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<3>;\\nO:\\n\\tbar.sync 0;\\nI:\\n\\t@%p1 bra I;\\n\\t@%p2 bra O;\\n\\tret;\\n}\\n")
    >>> forest = find_loops(flow_graph(m.function("k")))
    >>> {block: loop.header for block, loop in forest.innermost().items()}, forest.irreducible
    ({0: 0, 1: 1, 2: 0}, set())
    """

    loops: list[Loop]
    dominators: DominatorTree
    irreducible: set[int]

    def innermost(self) -> dict[int, Loop]:
        """Block -> the innermost loop containing it."""
        found: dict[int, Loop] = {}
        for loop in sorted(self.loops, key=lambda l: -len(l.blocks)):
            for block in loop.blocks:
                found[block] = loop
        return found


def find_loops(flow: FlowGraph, dominators: DominatorTree | None = None) -> LoopForest:
    """Natural loops of a `FlowGraph`, their nesting, and the irreducible blocks.

    Loops are listed outermost first (an enclosing loop before the loops inside it, and
    otherwise in reverse post-order of their headers).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<3>;\\nO:\\n\\tbar.sync 0;\\nI:\\n\\t@%p1 bra I;\\n\\t@%p2 bra O;\\n\\tret;\\n}\\n")
    >>> outer, inner = find_loops(flow_graph(m.function("k"))).loops
    >>> (outer.header, sorted(outer.blocks), outer.latches), (inner.header, inner.depth), inner.parent is outer
    ((0, [0, 1, 2], [2]), (1, 2), True)
    """
    dom = dominators or DOMINATORS.of(flow)
    rank = {block: i for i, block in enumerate(flow.rpo)}
    latches: dict[int, list[int]] = {}
    irreducible: set[int] = set()
    for u in flow.rpo:
        for v in flow.succ[u]:
            if rank[v] > rank[u]:
                continue  # a forward edge
            if dom.dominates(v, u):
                latches.setdefault(v, []).append(u)
            else:
                irreducible |= _cycle_blocks(flow, v, u)
    loops = [Loop(h, _natural_body(flow, h, ls, rank), ls) for h, ls in latches.items()]
    loops.sort(key=lambda loop: -len(loop.blocks))
    innermost: dict[int, Loop] = {}
    for loop in loops:  # larger loops first: the last one to claim a header encloses it
        parent = innermost.get(loop.header)
        if parent is not None:
            loop.parent = parent
        for block in loop.blocks:
            innermost[block] = loop
    loops.sort(key=lambda loop: (loop.depth, rank[loop.header]))
    return LoopForest(loops, dom, irreducible)


def loop_forest(flow: FlowGraph) -> LoopForest:
    """`find_loops` of `flow`, computed once per graph (`LOOPS`).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> flow = flow_graph(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".visible .entry k()\\n{\\n.reg .pred %p<2>;\\nL:\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n").function("k"))
    >>> loop_forest(flow) is loop_forest(flow), [loop.header for loop in loop_forest(flow).loops]
    (True, [0])
    """
    return LOOPS.of(flow)


#: A graph's `find_loops` (`loop_forest`).
LOOPS: Fact[LoopForest] = Fact("loops", find_loops, needs=(DOMINATORS,))


def _natural_body(flow: FlowGraph, header: int, latches: list[int], reachable: Container[int]) -> set[int]:
    """The header and every reachable block that reaches a latch without passing it."""
    body = {header}
    stack = [latch for latch in latches if latch != header]
    body.update(stack)
    pred = flow.pred
    while stack:
        for p in pred[stack.pop()]:
            if p not in body and p in reachable:
                body.add(p)
                stack.append(p)
    return body


def _cycle_blocks(flow: FlowGraph, target: int, source: int) -> set[int]:
    """Blocks on some cycle through the retreating edge ``source -> target``."""
    forward = reachable(flow.succ, [target])
    backward = reachable(flow.pred, [source])
    return forward & backward


def reachable(adjacency: Sequence[Sequence[int]] | Mapping[int, Sequence[int]], starts: Iterable[int],
              avoid: Container[object] = ()) -> set[int]:
    """The nodes reachable from `starts` along `adjacency` (``succ`` forward, ``pred``
    backward), `starts` included, on ways that enter none of `avoid`.

    >>> sorted(reachable([[1], [2], [], [0]], [0])), sorted(reachable([[], [0], [1], []], [2]))
    ([0, 1, 2], [0, 1, 2])
    >>> sorted(reachable([[1], [2], [3], []], [0, 2], avoid={1}))
    [0, 2, 3]
    """
    seen = {start for start in starts if start not in avoid}
    stack = list(seen)
    while stack:
        for nxt in adjacency[stack.pop()]:
            if nxt not in seen and nxt not in avoid:
                seen.add(nxt)
                stack.append(nxt)
    return seen


def on_cycles(graph: Mapping[GraphNode, Sequence[GraphNode]]) -> frozenset[GraphNode]:
    """The nodes of `graph` (node -> successors) that lie on a cycle: in a strongly
    connected component of more than one node, or with an edge to themselves.

    >>> sorted(on_cycles({"a": ["b"], "b": ["a", "c"], "c": [], "d": ["d"]}))
    ['a', 'b', 'd']
    """
    return frozenset(node for component in strongly_connected(graph, lambda node: graph.get(node, ()))
                     for node in component if len(component) > 1 or node in graph.get(node, ()))


def strongly_connected(roots: Iterable[GraphNode],
                       successors: Callable[[GraphNode], Iterable[GraphNode]]) -> Iterator[list[GraphNode]]:
    """The strongly connected components of the graph that `successors` gives (called
    once for each node, when the walk first reaches it), of the nodes reachable from
    `roots`, each as soon as the walk finishes it: after every component it reaches
    (Tarjan's algorithm, without recursion). A caller may stop early: the walk has
    gone no further than the components it yielded and the nodes it has reached.

    >>> list(strongly_connected("a", {"a": ["b"], "b": ["a", "c"], "c": []}.__getitem__))
    [['c'], ['b', 'a']]
    """
    index: dict[GraphNode, int] = {}
    low: dict[GraphNode, int] = {}
    stack: list[GraphNode] = []  # the nodes reached whose component is not finished yet
    on_stack: set[GraphNode] = set()
    for root in roots:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(successors(root)))]
        while work:
            node, nexts = work[-1]
            for successor in nexts:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(successors(successor))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component: list[GraphNode] = []
                    while not component or component[-1] != node:
                        component.append(stack.pop())
                        on_stack.discard(component[-1])
                    yield component


def closures(nodes: Iterable[int], successors: Callable[[int], Sequence[int]]) -> dict[int, int]:
    """node -> a bit mask (bit ``n`` for node ``n``) of the nodes reachable from it
    along `successors`, itself included, for the nodes reachable from `nodes`: one walk
    over the strongly connected components, each taking the masks of those it reaches.

    >>> closures(range(4), [[1], [0, 2], [], [3]].__getitem__) == {0: 0b111, 1: 0b111, 2: 0b100, 3: 0b1000}
    True
    """
    found: dict[int, int] = {}
    for component in strongly_connected(nodes, successors):
        mask = mask_of(component)
        for node in component:  # the components it reaches are done; its own are in mask
            for successor in successors(node):
                mask |= found.get(successor, 0)
        for node in component:
            found[node] = mask
    return found


# -- preheaders -------------------------------------------------------------------------


class Preheader(Record):
    """Where code that must run once before a loop goes.

    Either `block`, an existing block outside the loop whose only successor is the
    header and which is the header's only outside predecessor; or a new block made
    by inserting before `before` (the header's first label), reached by fall-through
    from the text above and, when `retarget` lists blocks, by their branches once
    they are redirected to a fresh label (`needs_label`).

    >>> loop = Loop(1, {1}, [1])
    >>> Preheader(loop, block=0).needs_label, Preheader(loop, retarget=[0]).needs_label
    (False, True)
    """

    loop: Loop
    block: int | None = None
    before: "Label | None" = None
    retarget: "Sequence[int]" = ()

    @property
    def needs_label(self) -> bool:
        return self.block is None and bool(self.retarget)


def find_preheader(flow: FlowGraph, loop: Loop) -> Preheader | None:
    """The loop's preheader, or how to create one; None when none can be made safely.

    None when the block above the header is in the loop and falls into it (a new
    block there would run on every iteration), when an outside edge is a ``brx.idx``
    target, or when a branch to redirect could not see a label placed before the
    header's first label.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n\\t@%p1 bra L;\\n\\tbar.sync 0;\\nL:\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> pre = find_preheader(flow, find_loops(flow).loops[0])
    >>> pre.block, pre.before.name, pre.retarget, pre.needs_label
    (None, 'L', [0], True)
    """
    header = loop.header
    outside = [p for p in flow.pred[header] if p not in loop.blocks]
    kinds = flow.kinds
    if len(outside) == 1 and header != 0:
        p = outside[0]
        if flow.succ[p] == [header] and p not in flow.exits:
            return Preheader(loop, block=p)
    above = header - 1
    if above in loop.blocks and "fallthrough" in kinds.get((above, header), ""):
        return None
    block = flow.blocks[header]
    if not block.labels:
        return None
    first_label = block.labels[0]
    retarget: list[int] = []
    for p in outside:
        kind = kinds[(p, header)]
        if "indirect" in kind:
            return None
        if "taken" in kind or "branch" in kind:
            branch = flow.blocks[p].terminator
            # a taken or branch edge leaves a terminator, which mypy cannot tell from the edge's kind
            if not _sees(branch, first_label.parent):  # type: ignore[arg-type]
                return None
            retarget.append(p)
    return Preheader(loop, before=first_label, retarget=retarget)


def _sees(node: Node, scope: Node | None) -> bool:
    """True when a label declared in `scope` is visible from `node`."""
    parent = node.parent
    while parent is not None:
        if parent is scope:
            return True
        parent = parent.parent
    return False


# -- branch regions ---------------------------------------------------------------------


class BranchRegion(Record):
    """A conditional branch up to its immediate post-dominator `join`.

    `arms` are the branch block's distinct successors (``EXIT`` for a guarded return);
    `blocks` the blocks reached from them before `join`. The region is single-entry:
    every block in it is dominated by `branch`, and `branch` is not inside it.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n\\t@%p1 ret;\\n\\tbar.sync 0;\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> branch_region(flow, 0, DominatorTree.of(flow), DominatorTree.post_of(flow))
    BranchRegion(branch=0, join='exit', arms=[1, 'exit'], blocks={1})
    """

    branch: int
    join: "EdgeEnd"
    arms: "list[EdgeEnd]"
    blocks: set[int]


def branch_region(flow: FlowGraph, branch: int, dominators: DominatorTree, post_dominators: DominatorTree,
                  reject: Callable[[int], bool] | None = None) -> BranchRegion | None:
    """The single-entry region of a conditional branch, or None.

    None when the block has fewer than two successors, cannot reach the exit, loops
    back to itself before the join, or when some block of the region is reachable
    without passing the branch. `reject(block)` may stop the search early (None).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n\\t@%p1 bra E;\\n\\tbar.sync 0;\\n\\tbra.uni J;\\nE:\\n\\tbar.sync 1;\\nJ:\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> region = branch_region(flow, 0, DominatorTree.of(flow), DominatorTree.post_of(flow))
    >>> region.arms, region.join, sorted(region.blocks)
    ([2, 1], 3, [1, 2])
    """
    arms: list[EdgeEnd] = list(dict.fromkeys(flow.succ[branch]))
    if branch in flow.exits:
        arms.append(EXIT)
    if len(arms) < 2:
        return None
    join = post_dominators.idom.get(branch)
    if join is None:
        return None
    blocks: set[int] = set()
    stack = [arm for arm in arms if arm != join and arm != EXIT]
    blocks.update(stack)
    while stack:
        block = stack.pop()
        if block == branch or not dominators.dominates(branch, block):
            return None
        if reject is not None and reject(block):
            return None
        for nxt in flow.succ[block]:
            if nxt != join and nxt not in blocks:
                blocks.add(nxt)
                stack.append(nxt)
    return BranchRegion(branch, join, arms, blocks)
