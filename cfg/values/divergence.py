"""Where the threads of a round split by their index and meet again (docs/fence.md §4.4).

A branch whose predicate is computed from the thread's index alone (``%tid``,
``%laneid``, ``%warpid`` and constants, each register defined once and unguarded)
splits the threads that reach it the same way in every round: ``if (threadIdx.x % 128
== 0)`` sends one thread of each warpgroup one way and the rest the other. When every
branch between such a split and the block where its sides meet again tests the thread
index too (no data-dependent branch, no loop, no exit), each path from the split to the
meeting block is the path of some threads, provided each side of a split is taken by
some of the threads that reach it (the assumption, docs/fence.md §4.4). What one of
those paths did, some thread of the round did: the proxy analysis uses that to credit a
fence that one thread runs (``if (lane == 0) { fence; TMA store }``) to the threads
that skipped it.
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import derived
from ptxkit.cfg.flow.operands import destinations
from ptxkit.isa import CTA_UNIFORM_SPECIALS, PURE_OPCODES, STATE_SPACES, THREAD_INDEX_SPECIALS, is_special_register

if TYPE_CHECKING:
    from typing import Literal

    from ptxkit.cfg.flow.graph import EdgeEnd, FlowGraph, Site
    from ptxkit.syntax import Instruction

    #: Register (`qualified`) -> the sites that write it (`definitions`).
    Definitions = dict[str, list[Site]]

__all__ = ["cta_uniform", "definitions", "guard_of", "qualified", "thread_meets", "thread_only"]



def thread_meets(flow: FlowGraph) -> dict[int, frozenset[int]]:
    """The blocks where the sides of thread-index splits meet, each with the
    predecessors that end paths from such a split (the other predecessors come from
    elsewhere): here the block after the fence, entered from the split (the lanes but
    the first skip the fence) and from the fence (the first lane).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<3>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tand.b32 %r2, %r1, 31;\\n"
    ...     "\\tsetp.ne.s32 %p1, %r2, 0;\\n\\t@%p1 bra SKIP;\\n\\tfence.proxy.async;\\nSKIP:\\n\\tret;\\n}\\n")
    >>> flow = inlined_graph(m.function("k"))
    >>> {flow.blocks[meet].name: sorted(flow.blocks[p].instructions[-1].text.strip() for p in preds)
    ...  for meet, preds in thread_meets(flow).items()}
    {'SKIP': ['@%p1 bra SKIP;', 'fence.proxy.async;']}
    """
    defined: Definitions | None = None
    post: dict[int, int] | dict[EdgeEnd, EdgeEnd] | None = None
    meets: dict[int, set[int]] = {}
    for block in flow.blocks:
        if not conditional(flow, block.index):
            continue
        if defined is None:
            defined = definitions(flow)
        if not _branches_on_thread_index(flow, block.index, defined):
            continue
        if post is None:
            post = DominatorTree.post_of(flow).idom
        meet = post.get(block.index)
        if not isinstance(meet, int) or meet == block.index:
            continue
        ends = _region_ends(flow, block.index, meet, defined)
        if ends:
            meets.setdefault(meet, set()).update(ends)
    return {meet: frozenset(ends) for meet, ends in meets.items()}


def thread_only(register: str, definitions: Definitions, flow: FlowGraph, depth: int = 0) -> bool:
    """True when `register` is computed from the thread's index and constants alone, and
    from the index at all.

    >>> thread_only("%tid.x", {}, None), thread_only("%p9", {}, None)
    (True, False)
    """
    return _thread_only(register, definitions, flow, depth) is True


def _thread_only(register: str, definitions: Definitions, flow: FlowGraph, depth: int) -> bool | Literal["constant"]:
    """True (depends on the thread index), "constant", or False (anything else)."""
    if register.startswith(THREAD_INDEX_SPECIALS):
        return True
    where = definitions.get(register)
    if depth > 12 or where is None or len(where) != 1:
        return False
    block, position = where[0]
    head = flow.blocks[block].heads[position]
    if head[0] is not None or head[2] not in PURE_OPCODES:
        return False
    instruction = flow.blocks[block].instructions[position]
    result: bool | Literal["constant"] = "constant"
    targets = set(destinations(instruction, head, frozenset()))
    for operand in instruction.operands:
        if operand.kind == "immediate" or operand.name in targets:
            continue
        if operand.kind not in ("register", "special") or operand.name is None:
            return False
        source = _thread_only(qualified(flow, block, operand.name), definitions, flow, depth + 1)
        if source is False:
            return False
        if source is True:
            result = True
    return result


def cta_uniform(register: str, definitions: Definitions, flow: FlowGraph, seen: frozenset[str] = frozenset()) -> bool:
    """True when every thread of a CTA computes the same value for `register` (a name
    `qualified` by its inlined copy): from kernel parameters (loaded with ``ld.param`` or,
    as ``-G`` builds do, through a generic pointer made by ``cvta.param``), read-only
    global data (``ld.global.nc``) at such an address, CTA-wide special registers,
    symbols' addresses and constants, through pure opcodes; a register defined in a loop
    counts when all its definitions do (docs/fence.md §4.2).

    >>> cta_uniform("%ctaid.x", {}, None), cta_uniform("%tid.x", {}, None)
    (True, False)
    """
    if register.startswith(CTA_UNIFORM_SPECIALS):
        return True
    if register.startswith(("%tid.", "%laneid", "%warpid")) or len(seen) > 24:
        return False
    if register in seen:
        return True  # a loop-carried value: uniform when its other definitions are
    where = definitions.get(register)
    if not where:
        return False
    seen = seen | {register}
    for block, position in where:
        head = flow.blocks[block].heads[position]
        if head[0] is not None and not cta_uniform(qualified(flow, block, head[0].register), definitions, flow,
                                                   seen):
            return False
        instruction = flow.blocks[block].instructions[position]
        if head[2] == "ld":  # a kernel parameter or read-only data, at an address the same in every thread
            context = flow.blocks[block].context
            if context is not None and context.parent is not None:
                return False
            if ".param" not in head[1] and not _read_only(head[1]) and \
                    not _reads_kernel_parameters(flow, block, head[1], instruction, definitions):
                return False
            bases = [e for operand in instruction.operands[1:] for e in operand.elements if e.kind == "register"]
            if not all(cta_uniform(qualified(flow, block, base.name), definitions, flow, seen) for base in bases):
                return False
            continue
        if head[2] not in PURE_OPCODES and head[2] != "selp":
            return False
        targets = set(destinations(instruction, head, frozenset()))
        for operand in instruction.operands[1:]:  # the sources (a vector: each part)
            for part in operand.elements if operand.kind == "vector" else (operand,):
                if part.kind in ("immediate", "symbol") or part.name in targets:
                    continue  # a symbol's address is the same in every thread of a CTA
                if part.kind not in ("register", "special") or part.name is None \
                        or not cta_uniform(qualified(flow, block, part.name), definitions, flow, seen):
                    return False
    return True


def _read_only(opcode: str) -> bool:
    """True for ``ld.global.nc``: the PTX ISA's non-coherent load, for data that no thread
    writes while the kernel runs, so every thread that reads an address reads one value.

    >>> _read_only("ld.global.nc.v4.u64"), _read_only("ld.global.u32")
    (True, False)
    """
    modifiers = opcode.split(".")[1:]
    return "global" in modifiers and "nc" in modifiers


def _reads_kernel_parameters(flow: FlowGraph, block: int, opcode: str, instruction: Instruction,
                             definitions: Definitions) -> bool:
    """True for a generic ``ld`` (`opcode`) through a pointer into the kernel's
    parameters: ``cvta.param`` of a parameter's address, plus constants (read-only
    memory, the same for every thread)."""
    if any(part in STATE_SPACES for part in opcode.split(".")[1:]):
        return False
    parameters = {p.name for p in flow.function.signature.params} if flow.function is not None else set()
    bases = [e for operand in instruction.operands[1:] for e in operand.elements if e.kind == "register"]
    return len(bases) == 1 and _parameter_pointer(qualified(flow, block, bases[0].name), parameters, definitions,
                                                  flow, 0)


def _parameter_pointer(register: str, parameters: set[str], definitions: Definitions, flow: FlowGraph,
                       depth: int) -> bool:
    """True when every definition of `register` gives a generic address inside a kernel
    parameter: ``cvta.param`` of one's address, or such an address plus a constant."""
    where = definitions.get(register)
    if not where or depth > 8:
        return False
    for block, position in where:
        head = flow.blocks[block].heads[position]
        operands = flow.blocks[block].instructions[position].operands[1:]
        if head[0] is not None:
            return False
        if head[2] == "mov" and len(operands) == 1 and operands[0].kind == "symbol":
            if operands[0].name not in parameters:
                return False
            continue
        sources = [o for o in operands if o.kind != "immediate"]
        if head[2] not in ("mov", "add", "cvta") or len(sources) != 1 or sources[0].kind != "register" \
                or head[2] == "cvta" and ".param" not in head[1]:
            return False
        if not _parameter_pointer(qualified(flow, block, sources[0].name), parameters, definitions, flow, depth + 1):
            return False
    return True


def qualified(flow: FlowGraph, block: int, name: str) -> str:
    """`name` as read in `block`: a register of an inlined copy carries the copy's prefix
    (``ptxkit.cfg.flow.inline.Context``); special registers are the same in every copy.

    >>> qualified(None, 0, "%tid.x")
    '%tid.x'
    """
    if is_special_register(name):
        return name
    context = flow.blocks[block].context
    return context.prefix + name if context is not None else name


def guard_of(flow: FlowGraph, block: int) -> str | None:
    """The qualified predicate the branch ending `block` tests, or None."""
    guard = flow.blocks[block].heads[-1][0]
    return qualified(flow, block, guard.register) if guard is not None else None


def conditional(flow: FlowGraph, block: int) -> bool:
    """True when `block` ends in a guarded ``bra`` with two different successors.

    >>> conditional(type("G", (), {"blocks": [type("B", (), {"heads": []})()], "succ": [[]]})(), 0)
    False
    """
    heads = flow.blocks[block].heads
    return bool(heads) and heads[-1][0] is not None and heads[-1][2] == "bra" and len(flow.succ[block]) == 2


def _branches_on_thread_index(flow: FlowGraph, block: int, definitions: Definitions) -> bool:
    """True when `block` ends in a branch whose guard is computed from the thread index
    alone (`thread_only`)."""
    guard = guard_of(flow, block)
    return guard is not None and thread_only(guard, definitions, flow)


def _region_ends(flow: FlowGraph, split: int, meet: int, definitions: Definitions) -> set[int]:
    """The predecessors of `meet` on paths from `split`, or an empty set when a block
    between them branches on anything but the thread index, loops back or exits."""
    seen = {split}
    stack = [split]
    while stack:
        block = stack.pop()
        if block != split and conditional(flow, block) and not _branches_on_thread_index(flow, block, definitions):
            return set()
        if block in flow.exits or not flow.succ[block]:
            return set()
        for successor in flow.succ[block]:
            if successor == split:
                return set()
            if successor != meet and successor not in seen:
                seen.add(successor)
                stack.append(successor)
    return {p for p in flow.pred[meet] if p in seen}


def definitions(flow: FlowGraph) -> Definitions:
    """register -> the ``(block, position)`` pairs that write it, its name qualified by
    the inlined copy that writes it (`qualified`); computed once per graph.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tret;\\n}\\n")
    >>> definitions(inlined_graph(m.function("k")))
    {'%r1': [(0, 0)]}
    """
    def scan() -> Definitions:
        found: Definitions = {}
        for block in flow.blocks:
            prefix = block.context.prefix if block.context is not None else ""
            for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
                for name in destinations(instruction, head, frozenset()):
                    found.setdefault(prefix + name, []).append((block.index, position))
        return found

    return derived(flow, "definitions", scan)
