"""Dominators and post-dominators.

Two entry points:

- `immediate_dominators` / `immediate_post_dominators` work on the public
  `networkx.DiGraph` of `build_cfg` through networkx, normalised so that the start
  node maps to itself (networkx 3.6 leaves it out of the result, 3.4 kept it).
- `DominatorTree` is what the fence pass uses on a `FlowGraph`: the iterative
  Cooper–Harvey–Kennedy algorithm over plain lists, with O(1) `dominates` queries.
  It gives the same answers (the tests compare them) without building a DiGraph.

>>> import networkx as nx
>>> g = nx.DiGraph([("entry", 0), (0, 1), (0, 2), (1, 3), (2, 3), (3, "exit")])
>>> immediate_dominators(g, "entry")[3], immediate_post_dominators(g, "exit")[0]
(0, 3)
"""

from __future__ import annotations

from ptxkit.cfg.graph import EXIT, reverse_postorder


def immediate_dominators(graph, start) -> dict:
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


def immediate_post_dominators(graph, exit_node) -> dict:
    """``{node: immediate post-dominator}`` for the nodes that reach `exit_node`.

    >>> import networkx as nx
    >>> immediate_post_dominators(nx.DiGraph([(0, 1), (0, 2), (1, 3), (2, 3)]), 3)
    {0: 3, 1: 3, 2: 3, 3: 3}
    """
    return immediate_dominators(graph.reverse(copy=False), exit_node)


def _order_key(graph):
    position = {node: i for i, node in enumerate(graph)}
    return position.__getitem__


def compute_idoms(succ, pred, start) -> dict:
    """Immediate dominators by Cooper, Harvey and Kennedy's iterative algorithm.

    `succ` and `pred` map a node to its successors / predecessors (lists of lists or
    dicts). Returns ``{node: idom}`` for the nodes reachable from `start`, with
    ``start: start``.

    >>> compute_idoms([[1, 2], [3], [3], [1]], [[], [0, 3], [0], [1, 2]], 0)
    {0: 0, 2: 0, 1: 0, 3: 0}
    """
    order = reverse_postorder(succ, start)
    rank = {node: i for i, node in enumerate(order)}
    idom = {start: start}
    changed = True
    while changed:
        changed = False
        for node in order[1:]:
            new = None
            for p in pred[node]:
                if p not in idom:
                    continue
                if new is None:
                    new = p
                    continue
                a, b = p, new
                while a != b:
                    while rank[a] > rank[b]:
                        a = idom[a]
                    while rank[b] > rank[a]:
                        b = idom[b]
                new = a
            if idom.get(node) != new:
                idom[node] = new
                changed = True
    return {node: idom[node] for node in order}


class DominatorTree:
    """Immediate dominators of a graph with O(1) `dominates` queries.

    Build with `DominatorTree.of` (dominators of a `FlowGraph` from block 0) or
    `DominatorTree.post_of` (post-dominators, from the virtual ``EXIT``).

    >>> tree = DominatorTree({0: 0, 1: 0, 2: 1})
    >>> tree.dominates(0, 2), tree.dominates(2, 1), tree.dominates(1, 1)
    (True, False, True)
    """

    __slots__ = ("idom", "_enter", "_leave")

    def __init__(self, idom: dict):
        self.idom = idom
        children: dict = {}
        root = None
        for node, parent in idom.items():
            if node == parent:
                root = node
            else:
                children.setdefault(parent, []).append(node)
        self._enter: dict = {}
        self._leave: dict = {}
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
    def of(cls, flow) -> "DominatorTree":
        """Dominators of a `FlowGraph` (blocks reachable from block 0)."""
        return cls(compute_idoms(flow.succ, flow.pred, 0) if len(flow) else {})

    @classmethod
    def post_of(cls, flow) -> "DominatorTree":
        """Post-dominators of a `FlowGraph`; the virtual exit is the key ``EXIT``.

        Blocks that cannot reach the exit (endless loops) have no entry.
        """
        exits = set(flow.exits)
        forward = {EXIT: list(flow.exits)}
        backward = {EXIT: []}
        for block in range(len(flow)):
            forward[block] = flow.pred[block]
            backward[block] = flow.succ[block] + [EXIT] if block in exits else flow.succ[block]
        return cls(compute_idoms(forward, backward, EXIT))

    def __contains__(self, node) -> bool:
        return node in self._enter

    def dominates(self, a, b) -> bool:
        """True when every path from the root to `b` passes `a` (a node dominates itself)."""
        enter = self._enter
        if a not in enter or b not in enter:
            return False
        return enter[a] <= enter[b] <= self._leave[a]
