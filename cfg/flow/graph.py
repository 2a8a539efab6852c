"""Control-flow graphs of PTX functions: basic blocks in a `networkx.DiGraph`.

Nodes are ``ENTRY``, ``EXIT`` and one integer per basic block (0, 1, … in source
order). A block starts at a label or after a terminator (``bra``, ``brx.idx``, ``ret``,
``exit``, ``trap``); ``call`` does not end a block. Labels are resolved in their
innermost ``{ }`` scope, as nvcc's inline assembly needs.

>>> import ptxkit
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
...     ".visible .entry k()\\n{\\n.reg .pred %p<2>;\\n\\tsetp.eq.u32 %p1, 1, 1;\\n"
...     "\\t@%p1 bra DONE;\\n\\tbar.sync 0;\\nDONE:\\n\\tret;\\n}\\n")
>>> g = build_cfg(m.function("k"))
>>> list(g.edges(data="kind"))
[('entry', 0, 'entry'), (0, 2, 'taken'), (0, 1, 'fallthrough'), (1, 2, 'fallthrough'), (2, 'exit', 'return')]
>>> g.nodes[2]["block"].name, [str(s) for s in g.nodes[0]["statements"]]
('DONE', ['setp.eq.u32 %p1, 1, 1;', '@%p1 bra DONE;'])
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING, Generic, TypeVar
from ptxkit._regex import compile as compile_pattern
from ptxkit.instruction import head_of
from ptxkit.isa import BLOCK_TERMINATORS, fewest_operands
from ptxkit.syntax import Block, Directive, Instruction, Label

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any, Final, Literal

    import networkx as nx

    from ptxkit.cfg.flow.inline import Context
    from ptxkit.instruction import HeadTuple as HeadTuple  # an instruction's head (`head_of`), for the modules here
    from ptxkit.syntax import Function, Node

    #: Where an edge starts: a block, or the function's entry.
    EdgeStart = int | Literal["entry"]
    #: Where an edge ends: a block, or the function's exit.
    EdgeEnd = int | Literal["exit"]
    #: An edge and its kind: ``(start, end, kind)``.
    Edge = tuple[EdgeStart, EdgeEnd, str]
    #: Where an instruction is: ``(block, position)``, its index in the block.
    Site = tuple[int, int]

#: What a `Fact` of a graph is.
Known = TypeVar("Known")

ENTRY: Final = "entry"
EXIT: Final = "exit"

_LABEL_OPERAND = compile_pattern(r"\s*([A-Za-z_$%][\w$]*)\s*;$")
#: a memory operand or a vector: the commas inside one separate no operands
_NESTED = compile_pattern(r"\[[^\]]*\]|\{[^}]*\}")


class BasicBlock:
    """A straight-line run of instructions with the labels that name its start.

    `instructions` and `heads` are parallel lists (a head is the tuple form of `Head`:
    guard, opcode, base, operand offset); `terminator` is the last
    instruction when it is a ``bra``/``brx``/``ret``/``exit``/``trap``; `targets` are
    the labels the terminator may jump to.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n\\tbar.sync 0;\\nL:\\n\\tbar.sync 1;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> block = flow_graph(m.function("k")).blocks[1]
    >>> block, block.line, str(block.terminator), [label.name for label in block.targets]
    (<BasicBlock L: 2 instructions>, 8, '@%p1 bra L;', ['L'])
    """

    __slots__ = ("index", "labels", "instructions", "heads", "terminator", "targets", "context")

    def __init__(self, index: int) -> None:
        self.index = index
        self.context: Context | None = None  # the inlined copy the block belongs to (ptxkit.cfg.flow.inline), if any
        self.labels: list[Label] = []
        self.instructions: list[Instruction] = []
        self.heads: list[HeadTuple] = []
        self.terminator: Instruction | None = None
        self.targets: list[Label] = []

    @property
    def name(self) -> str:
        """The first label's name, or ``B<index>``."""
        return self.labels[0].name if self.labels else f"B{self.index}"

    @property
    def line(self) -> int | None:
        """The input line where the block starts (its first label or instruction)."""
        first = self.labels[0] if self.labels else (self.instructions[0] if self.instructions else None)
        return first.line if first is not None else None

    def __repr__(self) -> str:
        return f"<BasicBlock {self.name}: {len(self.instructions)} instructions>"


class FlowGraph:
    """The CFG of one function as plain lists: what the analyses iterate over.

    Blocks are ``0 … n-1`` in source order and the function starts at `start` (block
    0 unless `with_blocks_before` put a block in front of it); `succ`/`pred` hold block indices,
    and `exits` the blocks with an edge to ``EXIT``. `kinds` maps an
    edge ``(u, v)`` (``v`` may be ``EXIT``) to its kind. `build_cfg` turns this into the
    public `networkx.DiGraph`; the pass stays on lists because building a DiGraph of
    10⁵ blocks costs as much as scanning the whole file.
    """

    __slots__ = ("function", "blocks", "succ", "pred", "exits", "kinds", "label_blocks", "start", "calls", "_rpo",
                 "facts")

    def __init__(self, function: Function, blocks: list[BasicBlock], edges: list[Edge],
                 label_blocks: dict[Label, int]) -> None:
        n = len(blocks)
        self.function = function
        self.blocks = blocks
        self.label_blocks = label_blocks
        self.succ: list[list[int]] = [[] for _ in range(n)]
        self.pred: list[list[int]] = [[] for _ in range(n)]
        self.exits: list[int] = []
        self.start = 0
        self.calls: list[Instruction] = []  # the call instructions, in source order
        self.kinds: dict[tuple[EdgeStart, EdgeEnd], str] = {}
        kinds = self.kinds
        for u, v, kind in edges:
            old = kinds.get((u, v))
            if old is not None:
                if kind not in old.split(","):
                    kinds[(u, v)] = old + "," + kind
                continue
            kinds[(u, v)] = kind
            if u == ENTRY:
                continue
            if v == EXIT:
                self.exits.append(u)
            else:
                self.succ[u].append(v)
                self.pred[v].append(u)
        self._rpo: list[int] | None = None
        self.facts: dict[Fact[Any], Any] = {}  # each `Fact` of the graph computed so far -> its value

    def __len__(self) -> int:
        return len(self.blocks)

    @property
    def rpo(self) -> list[int]:
        """The blocks reachable from block 0, in reverse post-order (computed once)."""
        if self._rpo is None:
            self._rpo = reverse_postorder(self.succ, self.start) if self.blocks else []
        return self._rpo

    def with_blocks_before(self, places: Sequence[tuple[int, Sequence[EdgeStart]]]) -> FlowGraph:
        """A copy of this graph with an empty block on each place's edges: for each
        ``(header, entries)``, a block that the edges from `entries` (predecessor
        blocks, and ``ENTRY`` when the function starts at `header`) go to instead of
        `header`, and that falls into `header` (a loop preheader). The new blocks get
        the next free indices, in order; this graph stays as it is. The fence pass plans
        a fence on a loop's entry edges and draws the function this way, as its edits
        will make it (`ptxkit.cfg.fence.fence.FunctionResult.planned_graph`).

        >>> flow = FlowGraph(None, [BasicBlock(0), BasicBlock(1)], [(ENTRY, 0, "entry"), (0, 1, "fallthrough"),
        ...                  (1, 1, "taken"), (1, EXIT, "return")], {})
        >>> made = flow.with_blocks_before([(1, [0])])
        >>> len(made), made.succ, made.pred[1], flow.succ
        (3, [[2], [1], [1]], [1, 2], [[1], [1]])
        """
        # through __init__, not FlowGraph.__new__: compiled by mypyc, __new__ runs __init__ too
        made = FlowGraph(self.function, list(self.blocks), [], self.label_blocks)
        made.calls, made.start = self.calls, self.start
        made.succ = [list(s) for s in self.succ]
        made.pred = [list(p) for p in self.pred]
        made.exits = list(self.exits)
        made.kinds = kinds = dict(self.kinds)
        for header, entries in places:
            new = len(made.blocks)
            made.blocks.append(BasicBlock(new))
            made.blocks[new].context = self.blocks[header].context
            made.succ.append([header])
            made.pred.append([])
            for p in entries:
                if p == ENTRY:
                    made.start = new
                    kinds[(ENTRY, new)] = kinds.pop((ENTRY, header), "entry")
                else:
                    made.succ[p] = [new if s == header else s for s in made.succ[p]]
                    made.pred[header].remove(p)
                    made.pred[new].append(p)
                    kinds[(p, new)] = kinds.pop((p, header))
            made.pred[header].append(new)
            kinds[(new, header)] = "fallthrough"
        return made

    def to_networkx(self) -> nx.DiGraph[EdgeStart | EdgeEnd]:
        """This graph as a `networkx.DiGraph` with ``ENTRY``/``EXIT`` nodes (see `build_cfg`)."""
        import networkx as nx

        graph: nx.DiGraph[EdgeStart | EdgeEnd] = nx.DiGraph(function=self.function, blocks=self.blocks,
                                                            label_blocks=self.label_blocks)
        graph.add_node(ENTRY)
        graph.add_nodes_from(
            (b.index, {"block": b, "statements": b.instructions, "labels": [l.name for l in b.labels]})
            for b in self.blocks
        )
        graph.add_node(EXIT)
        graph.add_edges_from((u, v, {"kind": kind}) for (u, v), kind in self.kinds.items())
        return graph


def reverse_postorder(succ: Sequence[Sequence[int]] | Mapping[int, Sequence[int]], start: int) -> list[int]:
    """Nodes reachable from `start` in reverse post-order of a depth-first search.

    `succ` maps a node to its successors (a list of lists, or a dict). Iterative, so
    deep graphs cannot overflow the stack.

    >>> reverse_postorder([[1, 2], [3], [3], []], 0)
    [0, 2, 1, 3]
    """
    order = []
    seen = {start}
    stack = [(start, iter(succ[start]))]
    while stack:
        node, children = stack[-1]
        for child in children:
            if child not in seen:
                seen.add(child)
                stack.append((child, iter(succ[child])))
                break
        else:
            stack.pop()
            order.append(node)
    order.reverse()
    return order


def flow_graph(function: Function) -> FlowGraph:
    """The list-based CFG of a function with a body (see `FlowGraph`).

    Raises `PtxSyntaxError` for a branch to a label that is not in scope.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...                  ".reg .pred %p<2>;\\nL:\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> flow.succ, flow.exits, flow.kinds[(0, 0)]
    ([[0, 1], []], [1], 'taken')
    """
    if function.is_declaration:
        raise ValueError(f"{function.name} is a declaration without a body")
    blocks, label_blocks, calls = _split_blocks(function)
    flow = FlowGraph(function, blocks, _edges(blocks, label_blocks), label_blocks)
    flow.calls = calls
    return flow


def build_cfg(function: Function) -> nx.DiGraph[EdgeStart | EdgeEnd]:
    """The control-flow graph of a function with a body, as a `networkx.DiGraph`.

    Node attributes: ``block`` (the `BasicBlock`), ``statements`` (its instructions),
    ``labels`` (their names). Edge attribute ``kind``: ``entry``, ``fallthrough``,
    ``branch`` (unguarded ``bra``), ``taken`` (guarded ``bra``), ``indirect``
    (``brx.idx``), ``return``, ``exit`` or ``trap``; several kinds joined by ``,``.
    Graph attributes: ``function``, ``blocks`` (list by index), ``label_blocks``
    (`Label` node -> block index).

    Raises `PtxSyntaxError` for a branch to a label that is not in scope.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n\\tbar.sync 0;\\nL:\\n\\tbar.sync 1;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> g = build_cfg(m.function("k"))
    >>> list(g.successors(1)), g.edges[1, 1]["kind"], g.nodes[1]["labels"], g.graph["function"].name
    ([1, 2], 'taken', ['L'], 'k')
    """
    return flow_graph(function).to_networkx()


def _split_blocks(function: Function) -> tuple[list[BasicBlock], dict[Label, int], list[Instruction]]:
    """Blocks in source order, label -> block index, and the ``call`` instructions."""
    blocks = [BasicBlock(0)]
    label_blocks: dict[Label, int] = {}
    calls: list[Instruction] = []
    current = blocks[0]
    terminators = BLOCK_TERMINATORS
    # iterative: { } scopes nest without limit; flow_graph turned declarations (no body) away
    stack = [iter(function.body.items)]  # type: ignore[union-attr]
    while stack:
        for node in stack[-1]:
            kind = type(node)
            if kind is Instruction:
                if current.terminator is not None:
                    current = _new_block(blocks)
                head = head_of(node)
                fewest = fewest_operands(head[1])
                if fewest and _short_of_operands(node, head[3], fewest):
                    raise node.error(f"'{head[1]}' takes at least {fewest} operand{'s' * (fewest > 1)}, "
                                     f"not {len(node.operands)}")
                current.instructions.append(node)
                current.heads.append(head)
                base = head[2]
                if base in terminators:
                    current.terminator = node
                elif base == "call":
                    calls.append(node)
            elif kind is Label:
                if current.instructions or current.terminator is not None:
                    current = _new_block(blocks)
                current.labels.append(node)
                label_blocks[node] = current.index
            elif kind is Block:
                stack.append(iter(node.items))
                break
        else:
            stack.pop()
    return blocks, label_blocks, calls


def _new_block(blocks: list[BasicBlock]) -> BasicBlock:
    block = BasicBlock(len(blocks))
    blocks.append(block)
    return block


def _edges(blocks: list[BasicBlock], label_blocks: dict[Label, int]) -> list[Edge]:
    edges: list[Edge] = [(ENTRY, 0, "entry")]
    last = len(blocks) - 1
    for block in blocks:
        falls = True
        terminator = block.terminator
        if terminator is not None:
            guard, _, base, end = block.heads[-1]
            if base == "bra":
                block.targets = [_branch_target(terminator, end)]
                kind = "taken" if guard else "branch"
            elif base == "brx":
                block.targets = _indirect_targets(terminator)
                kind = "indirect"
            else:
                kind = {"ret": "return"}.get(base, base)
            for label in block.targets:
                edges.append((block.index, label_blocks[label], kind))
            if not block.targets:
                edges.append((block.index, EXIT, kind))
            falls = guard is not None
        if falls:
            edges.append((block.index, block.index + 1 if block.index < last else EXIT, "fallthrough"))
    return edges


def _short_of_operands(instruction: Instruction, start: int, fewest: int) -> bool:
    """True when `instruction` has fewer than `fewest` operands (from offset `start` of
    its text). The commas outside brackets and braces count them without parsing them
    (the analyses parse few of the instructions); a comment, which may hold commas, or a
    count that falls short is settled by the parser."""
    text = instruction.text
    if "/" not in text:
        commas = text.count(",", start)
        if commas and ("[" in text or "{" in text):
            commas = _NESTED.sub("", text[start:]).count(",")
        if commas + 1 >= fewest and (commas or text[start:].strip(" \t\n;")):  # no comma: one operand, or none
            return False
    return len(instruction.operands) < fewest


def _branch_target(instruction: Instruction, end: int) -> Label:
    match = _LABEL_OPERAND.match(instruction.text, end)
    if match is not None:
        name, at = match.group(1), match.start(1)
    else:
        operands = instruction.operands
        if len(operands) != 1 or operands[0].kind != "symbol":
            raise instruction.error("expected one label operand after 'bra'", end)
        name, at = operands[0].name, operands[0].offset
    return _resolve(instruction, name, at)


def _indirect_targets(instruction: Instruction) -> list[Label]:
    operands = instruction.operands
    if len(operands) != 2 or operands[1].kind != "symbol":
        raise instruction.error("expected 'brx.idx index, targets-label'", 0)
    table_label = _resolve(instruction, operands[1].name, operands[1].offset)
    directive = _following_directive(table_label)
    if directive is None or directive.name != ".branchtargets":
        raise instruction.error(f"label {operands[1].name!r} does not name a .branchtargets list", operands[1].offset)
    targets = []
    for name in directive.arguments.split(","):
        name = name.strip()
        at = directive.text.find(name)
        targets.append(_resolve(directive, name, max(at, 0)))
    return targets


def _following_directive(label: Label) -> Directive | None:
    items = label.parent.items  # type: ignore[union-attr]  # a label's parent is the Block it is declared in
    index = next(i for i, item in enumerate(items) if item is label)
    for item in items[index + 1 :]:
        if type(item) is Directive:
            return item
        if type(item) is not Label:
            return None
    return None


def _resolve(node: Node, name: str, at: int) -> Label:
    scope = node.parent
    label = scope.resolve_label(name) if isinstance(scope, Block) else None
    if label is None:
        raise node.error(f"branch target {name!r} is not a label in scope", at)
    return label


class Fact(Generic[Known]):
    """Something analyses compute from a graph alone, declared once: its `name`, the
    function of the graph that computes it (`compute`), and the facts that function reads
    (`needs`). `of` computes it at most once per graph (a graph does not change once
    built) and keeps it in the graph's `facts`, keyed by the fact itself; a table that
    its users fill as they go is a fact too, its `compute` making the empty table.

    >>> DEPTH: Fact[int] = Fact("depth", lambda flow: len(flow))
    >>> WIDE: Fact[bool] = Fact("wide", lambda flow: DEPTH.of(flow) > 1, needs=(DEPTH,))
    >>> flow = FlowGraph(None, [BasicBlock(0), BasicBlock(1)], [(ENTRY, 0, "entry"), (0, 1, "fallthrough"),
    ...                  (1, EXIT, "return")], {})
    >>> WIDE.of(flow), flow.facts
    (True, {<Fact depth>: 2, <Fact wide>: True})
    """

    __slots__ = ("name", "compute", "needs")

    def __init__(self, name: str, compute: Callable[[FlowGraph], Known], needs: tuple[Fact[Any], ...] = ()) -> None:
        self.name = name
        self.compute = compute
        self.needs = needs

    def of(self, flow: object) -> Known:
        """This fact of `flow`: kept in its `facts` once computed (None is an answer too),
        the facts it `needs` computed first. A graph-like object without `facts` (a
        stand-in some callers hand over) gets it computed each time, and keeps nothing.

        >>> class Plain:  # a graph-like object without the store
        ...     pass
        >>> Fact("one", lambda flow: 1).of(Plain())
        1
        """
        facts: dict[Fact[Any], Any] | None = getattr(flow, "facts", None)
        if facts is not None and self in facts:
            found: Known = facts[self]
            return found
        if facts is not None:
            for need in self.needs:
                need.of(flow)
        found = self.compute(flow)  # type: ignore[arg-type]  # a FlowGraph, or a stand-in with what `compute` reads
        if facts is not None:
            facts[self] = found
        return found

    def __repr__(self) -> str:
        return f"<Fact {self.name}>"
