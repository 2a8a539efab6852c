"""Dominators and post-dominators.

Two entry points:

- `immediate_dominators` / `immediate_post_dominators` work on the public
  `networkx.DiGraph` of `build_cfg` through networkx, normalised so that the start
  node maps to itself (networkx 3.6 leaves it out of the result, 3.4 kept it).
- `DominatorTree` is what the fence pass uses on a `FlowGraph`: Lengauer–Tarjan over
  plain lists, with O(1) `dominates` queries. It gives the same answers (the tests
  compare them) without building a DiGraph, and stays near-linear where the
  iterative algorithm of networkx turns quadratic (hundreds of branches into one block).

>>> import networkx as nx
>>> g = nx.DiGraph([("entry", 0), (0, 1), (0, 2), (1, 3), (2, 3), (3, "exit")])
>>> immediate_dominators(g, "entry")[3], immediate_post_dominators(g, "exit")[0]
(0, 3)
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.graph import EXIT, Fact

if TYPE_CHECKING:
    from collections.abc import Callable, Hashable, Sequence
    from typing import TypeVar

    import networkx as nx

    from ptxkit.cfg.flow.graph import EdgeEnd, FlowGraph
    from ptxkit.cfg.flow.protocols import Adjacency

    #: A node of a graph: a block, or a virtual node such as ``EXIT``.
    GraphNode = TypeVar("GraphNode", bound=Hashable)

def immediate_dominators(graph: nx.DiGraph[GraphNode], start: GraphNode) -> dict[GraphNode, GraphNode]:
    """``{node: immediate dominator}`` for the nodes reachable from `start` (networkx).

    The start node maps to itself, whatever the networkx version.

    >>> import networkx as nx
    >>> immediate_dominators(nx.DiGraph([(0, 1), (1, 2), (0, 2)]), 0)
    {0: 0, 1: 0, 2: 0}
    """
    import networkx as nx

    idom = dict(nx.immediate_dominators(graph, start))
    idom[start] = start
    return {node: idom[node] for node in sorted(idom, key=_order_key(graph))}


def immediate_post_dominators(graph: nx.DiGraph[GraphNode], exit_node: GraphNode) -> dict[GraphNode, GraphNode]:
    """``{node: immediate post-dominator}`` for the nodes that reach `exit_node`.

    >>> import networkx as nx
    >>> immediate_post_dominators(nx.DiGraph([(0, 1), (0, 2), (1, 3), (2, 3)]), 3)
    {0: 3, 1: 3, 2: 3, 3: 3}
    """
    return immediate_dominators(graph.reverse(copy=False), exit_node)


def _order_key(graph: nx.DiGraph[GraphNode]) -> Callable[[GraphNode], int]:
    position = {node: i for i, node in enumerate(graph)}
    return position.__getitem__


def compute_idoms(succ: Adjacency[GraphNode], pred: Adjacency[GraphNode],
                  start: GraphNode) -> dict[GraphNode, GraphNode]:
    """Immediate dominators by Lengauer and Tarjan's algorithm (path compression).

    `succ` and `pred` map a node to its successors / predecessors (lists of lists or
    dicts). Returns ``{node: idom}`` for the nodes reachable from `start`, in
    depth-first preorder, with ``start: start``. Iterative throughout, and
    O(E log N): the simpler iterative algorithm of Cooper, Harvey and Kennedy (the
    one networkx uses) takes quadratic time on a block that hundreds of early exits
    branch to, a shape nvcc emits for bounds checks.

    >>> compute_idoms([[1, 2], [3], [3], [1]], [[], [0, 3], [0], [1, 2]], 0)
    {0: 0, 1: 0, 3: 0, 2: 0}
    """
    # depth-first numbering: vertex[i] is the node numbered i, parent[i] its tree parent
    number = {start: 0}
    vertex = [start]
    parent = [0]
    stack = [(start, iter(succ[start]))]
    while stack:
        node, children = stack[-1]
        for child in children:
            if child not in number:
                number[child] = len(vertex)
                parent.append(number[node])
                vertex.append(child)
                stack.append((child, iter(succ[child])))
                break
        else:
            stack.pop()
    n = len(vertex)
    semi = list(range(n))
    label = list(range(n))
    ancestor = [-1] * n
    idom = [0] * n
    bucket: list[list[int]] = [[] for _ in range(n)]

    def evaluate(v: int) -> int:
        if ancestor[v] < 0:
            return v
        path = []
        x = v
        while ancestor[ancestor[x]] >= 0:  # compress the forest path above v, top first
            path.append(x)
            x = ancestor[x]
        for x in reversed(path):
            a = ancestor[x]
            if semi[label[a]] < semi[label[x]]:
                label[x] = label[a]
            ancestor[x] = ancestor[a]
        return label[v]

    for w in range(n - 1, 0, -1):
        for p in pred[vertex[w]]:
            v = number.get(p)
            if v is None:
                continue  # an unreachable predecessor
            u = evaluate(v)
            if semi[u] < semi[w]:
                semi[w] = semi[u]
        bucket[semi[w]].append(w)
        up = parent[w]
        ancestor[w] = up
        for v in bucket[up]:
            u = evaluate(v)
            idom[v] = u if semi[u] < semi[v] else up
        bucket[up].clear()
    for w in range(1, n):
        if idom[w] != semi[w]:
            idom[w] = idom[idom[w]]
    return {vertex[i]: vertex[idom[i]] for i in range(n)}


class DominatorTree:
    """Immediate dominators of a graph with O(1) `dominates` queries.

    Build with `DominatorTree.of` (dominators of a `FlowGraph` from block 0) or
    `DominatorTree.post_of` (post-dominators, from the virtual ``EXIT``).

    >>> tree = DominatorTree({0: 0, 1: 0, 2: 1})
    >>> tree.dominates(0, 2), tree.dominates(2, 1), tree.dominates(1, 1)
    (True, False, True)
    """

    __slots__ = ("idom", "_enter", "_leave")

    def __init__(self, idom: dict[int, int] | dict[EdgeEnd, EdgeEnd]) -> None:
        self.idom = idom
        children: dict[EdgeEnd, list[EdgeEnd]] = {}
        root = None
        for node, parent in idom.items():
            if node == parent:
                root = node
            else:
                children.setdefault(parent, []).append(node)
        self._enter: dict[EdgeEnd, int] = {}
        self._leave: dict[EdgeEnd, int] = {}
        if root is None:
            return
        clock = 0
        stack = [(root, iter(children.get(root, ())))]
        self._enter[root] = clock
        while stack:
            node, kids = stack[-1]
            for kid in kids:
                clock += 1
                self._enter[kid] = clock
                stack.append((kid, iter(children.get(kid, ()))))
                break
            else:
                stack.pop()
                self._leave[node] = clock

    @classmethod
    def of(cls, flow: FlowGraph) -> DominatorTree:
        """Dominators of a `FlowGraph` (blocks reachable from block 0), computed once per graph
        (`DOMINATORS`)."""
        return DOMINATORS.of(flow)

    @classmethod
    def post_of(cls, flow: FlowGraph) -> DominatorTree:
        """Post-dominators of a `FlowGraph`; the virtual exit is the key ``EXIT``.

        Blocks that cannot reach the exit (endless loops) have no entry. Computed once per
        graph (`POST_DOMINATORS`).
        """
        return POST_DOMINATORS.of(flow)

    def __contains__(self, node: object) -> bool:
        return node in self._enter

    def dominates(self, a: EdgeEnd, b: EdgeEnd) -> bool:
        """True when every path from the root to `b` passes `a` (a node dominates itself)."""
        enter = self._enter
        if a not in enter or b not in enter:
            return False
        return enter[a] <= enter[b] <= self._leave[a]


def _dominators(flow: FlowGraph) -> DominatorTree:
    return DominatorTree(compute_idoms(flow.succ, flow.pred, 0) if len(flow) else {})


def _post_dominators(flow: FlowGraph) -> DominatorTree:
    exits = set(flow.exits)
    forward: dict[EdgeEnd, Sequence[EdgeEnd]] = {EXIT: list(flow.exits)}
    backward: dict[EdgeEnd, Sequence[EdgeEnd]] = {EXIT: []}
    for block in range(len(flow)):
        forward[block] = flow.pred[block]
        backward[block] = flow.succ[block] + [EXIT] if block in exits else flow.succ[block]
    return DominatorTree(compute_idoms(forward, backward, EXIT))


#: A graph's dominator tree (`DominatorTree.of`).
DOMINATORS: Fact[DominatorTree] = Fact("dominators", _dominators)
#: A graph's post-dominator tree, rooted at ``EXIT`` (`DominatorTree.post_of`).
POST_DOMINATORS: Fact[DominatorTree] = Fact("post-dominators", _post_dominators)
