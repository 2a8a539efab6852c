"""One graph per kernel: the bodies of called ``.func``s cloned in at each call site.

nvcc's ``-G`` builds keep device functions as real calls: the wgmma may sit in a
lambda, the address of its operand in a helper's return value, the mbarrier wait in
another helper. The analyses follow values and pending accesses through calls by
*inlining* (docs/fence.md §6): each call of a ``.func`` with a body becomes an edge
into a fresh copy of the callee's blocks (a `Context`), whose returns lead back to
the instruction after the call. The copies share the instruction nodes, so whatever
the analyses find maps back to the source text; only the registers are renamed (a
block's `context` qualifies them).

Recursive calls, calls through pointers and calls beyond `MAX_BLOCKS` are not
inlined: the fence pass treats them like extern calls.

>>> import ptxkit
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
...     ".func f(.param .b32 f_p)\\n{\\n\\tbar.sync 1;\\n\\tret;\\n}\\n"
...     ".visible .entry k()\\n{\\n\\tbar.sync 0;\\n\\tcall.uni f, (param0);\\n\\tbar.sync 2;\\n\\tret;\\n}\\n")
>>> flow = inlined_graph(m.function("k"))
>>> [(b.index, b.context.function.name, [str(i) for i in b.instructions]) for b in flow.blocks]
[(0, 'k', ['bar.sync 0;', 'call.uni f, (param0);']), (1, 'f', ['bar.sync 1;', 'ret;']), (2, 'k', ['bar.sync 2;', 'ret;'])]
>>> flow.succ, flow.blocks[1].context.arguments
([[1], [2], []], {'f_p': 'param0'})
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.graph import ENTRY, EXIT, BasicBlock, FlowGraph, flow_graph

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ptxkit.cfg.flow.graph import Edge
    from ptxkit.syntax import Function, Instruction, Label

#: Stop inlining once the graph has this many blocks (calls beyond stay calls).
MAX_BLOCKS = 200_000


class Context:
    """One inlined copy of a function: the root (the kernel itself, `parent` None) or a
    callee cloned at `call`, an instruction of the `parent` context.

    `arguments` maps the callee's parameter names to the caller's argument names;
    `results` maps the caller's return-argument names to the callee's return
    parameters. `prefix` qualifies register names ("" for the root).

    >>> root = Context(0, None)
    >>> root.prefix, Context(3, None, root).prefix, root.depth
    ('', '3:', 0)
    """

    __slots__ = ("id", "function", "parent", "call", "arguments", "results", "prefix")

    def __init__(self, id: int, function: Function, parent: Context | None = None, call: Instruction | None = None,
                 arguments: dict[str, str] | None = None, results: dict[str, str] | None = None) -> None:
        self.id, self.function, self.parent, self.call = id, function, parent, call
        self.arguments = arguments if arguments is not None else {}
        self.results = results if results is not None else {}
        self.prefix = f"{id}:" if id else ""

    def __repr__(self) -> str:
        return f"<Context {self.id} of {getattr(self.function, 'name', self.function)}>"

    @property
    def depth(self) -> int:
        depth, context = 0, self.parent
        while context is not None:
            depth, context = depth + 1, context.parent
        return depth

    def within(self, other: Context) -> bool:
        """True when this context is `other` or was inlined (transitively) into it."""
        context: Context | None = self
        while context is not None:
            if context is other:
                return True
            context = context.parent
        return False


def call_target(instruction: Instruction) -> tuple[str | None, list[str], list[str]]:
    """``(callee, argument names, return-argument names)`` of a ``call``; the callee
    is None for a call through a register.

    >>> from ptxkit import parse_statement
    >>> call_target(parse_statement("call.uni (retval0), f, (param0, param1);"))
    ('f', ['param0', 'param1'], ['retval0'])
    """
    callee = None
    arguments: list[str] = []
    results: list[str] = []
    seen_callee = False
    for operand in instruction.operands:
        if operand.kind == "list":
            names = [e.name for e in operand.elements if e.kind in ("symbol", "register")]
            if seen_callee:
                arguments = names
                break
            results = names
        elif not seen_callee:
            seen_callee = True
            if operand.kind == "symbol":
                callee = operand.name
    return callee, arguments, results


def inlined_graph(function: Function, functions: dict[str, Function] | None = None) -> FlowGraph:
    """The flow graph of `function` with every call of a ``.func`` with a body (in
    `functions`, by name; default: the module's) replaced by a copy of its body.

    Without such calls this is `flow_graph(function)` itself, each block in the root
    `Context`.
    """
    if functions is None:
        module = function.module
        functions = {f.name: f for f in module.functions if not f.is_declaration} if module is not None else {}
    base = flow_graph(function)
    root = Context(0, function)
    if not any(_inlinable(call, functions, [function.name]) for call in base.calls):
        for block in base.blocks:
            block.context = root
        return base
    return _Expander(functions).expand(function, base, root)


def _inlinable(call: Instruction, functions: dict[str, Function], stack: list[str]) -> bool:
    callee = call_target(call)[0]
    return callee is not None and callee in functions and callee not in stack


class _Expander:
    def __init__(self, functions: dict[str, Function]) -> None:
        self.functions = functions
        self.flows: dict[str, FlowGraph] = {}
        self.blocks: list[BasicBlock] = []
        self.edges: list[Edge] = []
        self.label_blocks: dict[Label, int] = {}
        self.calls: list[Instruction] = []
        self.contexts = 0

    def flow(self, name: str) -> FlowGraph:
        flow = self.flows.get(name)
        if flow is None:
            flow = self.flows[name] = flow_graph(self.functions[name])
        return flow

    def expand(self, function: Function, base: FlowGraph, root: Context) -> FlowGraph:
        self.flows[function.name] = base
        entry, returns = self._clone(base, root, [function.name])
        self.edges.append((ENTRY, entry, "entry"))
        for block, kind in returns:
            self.edges.append((block, EXIT, kind))
        graph = FlowGraph(function, self.blocks, self.edges, self.label_blocks)
        graph.calls = self.calls
        return graph

    def _new_block(self, context: Context, source: BasicBlock, labels: Sequence[Label]) -> BasicBlock:
        block = BasicBlock(len(self.blocks))
        block.context = context
        block.labels = list(labels)
        self.blocks.append(block)
        if context.parent is None:
            for label in labels:
                self.label_blocks[label] = block.index
        return block

    def _clone(self, flow: FlowGraph, context: Context, stack: list[str]) -> tuple[int, list[tuple[int, str]]]:
        """Copy `flow` into the graph; returns (entry block, [(returning block, kind)])."""
        first: dict[int, int] = {}  # source block -> its first copy
        last: dict[int, int] = {}  # source block -> the copy that ends it
        returns: list[tuple[int, str]] = []
        for source in flow.blocks:
            block = self._new_block(context, source, source.labels)
            first[source.index] = block.index
            for position, (instruction, head) in enumerate(zip(source.instructions, source.heads)):
                block.instructions.append(instruction)
                block.heads.append(head)
                if head[2] != "call":
                    continue
                self.calls.append(instruction)
                callee, arguments, results = call_target(instruction)
                if (callee is None or callee not in self.functions or callee in stack
                        or len(self.blocks) > MAX_BLOCKS):
                    continue
                callee_flow = self.flow(callee)
                self.contexts += 1
                function = self.functions[callee]
                signature = function.signature
                child = Context(self.contexts, function, context, instruction,
                                dict(zip((p.name for p in signature.params), arguments)),
                                dict(zip(results, (p.name for p in signature.return_params))))
                entry, callee_returns = self._clone(callee_flow, child, stack + [callee])
                self.edges.append((block.index, entry, "call"))
                block = self._new_block(context, source, ())
                for returning, kind in callee_returns:
                    if kind in ("return", "fallthrough"):
                        self.edges.append((returning, block.index, "return"))
                    else:
                        returns.append((returning, kind))
            block.terminator = source.terminator
            block.targets = source.targets
            last[source.index] = block.index
        for (u, v), kind in flow.kinds.items():
            if u == ENTRY:
                continue
            if v == EXIT:
                returns.append((last[u], kind))
            else:
                self.edges.append((last[u], first[v], kind))
        return first[flow.start], returns
