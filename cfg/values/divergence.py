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

from heapq import heapify, heappop, heappush

from ptxkit._records import TYPE_CHECKING
from ptxkit._regex import compile as compile_pattern
from ptxkit.cfg.flow.dataflow import bits, mask_of
from ptxkit.cfg.flow.dominance import DominatorTree
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.flow.loops import LOOPS, reachable, strongly_connected
from ptxkit.cfg.flow.operands import destinations
from ptxkit.cfg.values.definitions import DEFINITIONS
from ptxkit.isa import CTA_UNIFORM_SPECIALS, PURE_OPCODES, STATE_SPACES, THREAD_INDEX_SPECIALS, is_special_register

if TYPE_CHECKING:
    from typing import Literal

    from collections.abc import Callable, Iterable, Iterator, Sequence

    from ptxkit.cfg.flow.graph import EdgeEnd, FlowGraph, Site
    from ptxkit.cfg.flow.loops import Loop
    from ptxkit.syntax import Instruction

    #: Register (`qualified`) -> the sites that write it (`definitions`).
    Definitions = dict[str, tuple[Site, ...]]

__all__ = ["cta_uniform", "deciding_branches", "definitions", "guard_of", "qualified", "thread_meets", "thread_only"]



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


def cta_uniform(register: str, definitions: Definitions, flow: FlowGraph) -> bool:
    """True when every thread of a CTA computes the same value for `register` (a name
    `qualified` by its inlined copy): from kernel parameters (loaded with ``ld.param`` or,
    as ``-G`` builds do, through a generic pointer made by ``cvta.param``), read-only
    global data (``ld.global.nc``) at such an address, CTA-wide special registers,
    symbols' addresses and constants, through pure opcodes; a register defined in a loop
    counts when all its definitions do, and a register written in several places only when
    every branch that may decide which of its writes a thread sees tests a CTA-uniform
    predicate too (`deciding_branches`: different constants on the two sides of a branch on
    ``%tid`` differ by thread) (docs/fence.md §4.2). The greatest fixpoint of that rule:
    uniform unless some register it rests on (`_needs`, through any chain, loops
    included) fails on its own; answers are kept per graph and `definitions` (`CTA_UNIFORM`).

    >>> cta_uniform("%ctaid.x", {}, None), cta_uniform("%tid.x", {}, None)
    (True, False)
    """
    known = _known(register)
    if known is not None:
        return known
    table = CTA_UNIFORM.of(flow)
    if id(definitions) not in table:  # the entry keeps `definitions` alive: its id is not reused
        table[id(definitions)] = (definitions, {})
    memo = table[id(definitions)][1]
    if register not in memo:
        _settle(register, definitions, flow, memo)
    return memo[register]


#: ``id(definitions)`` -> those definitions and the `cta_uniform` answers under them, filled as they are asked.
CTA_UNIFORM: Fact[dict[int, tuple[Definitions, dict[str, bool]]]] = Fact("cta uniform", lambda flow: {})


def _known(register: str) -> bool | None:
    """The answer for a special register that needs no definitions, else None."""
    if register.startswith(CTA_UNIFORM_SPECIALS):
        return True
    if register.startswith(("%tid.", "%laneid", "%warpid")):
        return False
    return None


def _settle(root: str, definitions: Definitions, flow: FlowGraph, memo: dict[str, bool]) -> None:
    """Answers `root` into `memo`: a depth-first walk over `_needs` that finds the
    registers it rests on, component by strongly connected component. A component
    finished without a register that fails on its own (or one answered False already)
    is uniform, loops included (the optimistic start a loop-carried value needs); at
    the first such register the walk stops, and every register it reached whose
    component is not finished rests on it (each reaches the walk's path to it): they
    are non-uniform."""
    reached: list[str] = []

    def undecided_needs(register: str) -> Iterator[str]:
        reached.append(register)
        for need in _needs(register, definitions, flow, memo):
            answer = None if need is None else memo.get(need, _known(need))
            if need is None or answer is False:
                raise _Fails
            if answer is None:
                yield need

    try:
        for component in strongly_connected((root,), undecided_needs):
            memo.update((register, True) for register in component)
    except _Fails:
        memo.update((register, False) for register in reached if register not in memo)


class _Fails(Exception):
    """A register that `_settle`'s walk reached fails on its own."""


def _needs(register: str, definitions: Definitions, flow: FlowGraph, memo: dict[str, bool]) -> Iterator[str | None]:
    """The registers `register` is CTA-uniform only with, in the order the rule checks
    them: each definition's guard, the base registers of an ``ld``'s address, the sources
    of a pure opcode (a vector: each part), then the guards of `deciding_branches`, found
    as they are asked for (a branch whose guard is uniform already, or asked for already,
    adds nothing: it is not examined, so the walk costs only what `_settle` reads); None
    (and nothing more) where a definition fails on its own: no definition at all, an
    opcode neither pure nor an ``ld`` of kernel parameters or read-only data, an ``ld`` in
    an inlined callee, or a source that is no register."""
    where = definitions.get(register)
    if not where:
        yield None
        return
    for block, position in where:
        head = flow.blocks[block].heads[position]
        if head[0] is not None:
            yield qualified(flow, block, head[0].register)
        instruction = flow.blocks[block].instructions[position]
        if head[2] == "ld":  # a kernel parameter or read-only data, at an address the same in every thread
            context = flow.blocks[block].context
            if context is not None and context.parent is not None or ".param" not in head[1] and \
                    not _read_only(head[1]) and \
                    not _reads_kernel_parameters(flow, block, head[1], instruction, definitions):
                yield None
                return
            yield from (qualified(flow, block, base.name) for operand in instruction.operands[1:]
                        for base in operand.elements if base.kind == "register")
            continue
        if head[2] not in PURE_OPCODES and head[2] != "selp":
            yield None
            return
        targets = set(destinations(instruction, head, frozenset()))
        for operand in instruction.operands[1:]:  # the sources (a vector: each part)
            for part in operand.elements if operand.kind == "vector" else (operand,):
                if part.kind in ("immediate", "symbol") or part.name in targets:
                    continue  # a symbol's address is the same in every thread of a CTA
                if part.kind not in ("register", "special") or part.name is None:
                    yield None
                    return
                yield qualified(flow, block, part.name)
    asked: set[str] = set()  # the guards yielded already

    def adds_nothing(branch: int) -> bool:  # its guard asked for already, or known uniform
        guard = guard_of(flow, branch)
        return guard is None or guard in asked or memo.get(guard, _known(guard)) is True

    for branch in _deciding(flow, where, register, adds_nothing):
        guard = guard_of(flow, branch)
        if guard is not None:
            asked.add(guard)
            yield guard


def deciding_branches(flow: FlowGraph, register: str, sites: Sequence[Site]) -> frozenset[int]:
    """The conditional branches that may decide which of the writes of `register` (at
    `sites`) a thread sees (sync dependence): a branch whose two sides bring different
    writes to a block where they meet, or a branch in a loop that writes `register` whose
    one side leaves the loop while the other goes round again (the threads that leave hold
    the value of an earlier round). Threads that do not reach the block do not matter: a
    counter written before a loop and in it depends on the loop's test alone. Each branch
    is examined once per register and graph.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<3>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r2, %tid.x;\\n\\tsetp.lt.u32 %p1, %r2, 64;\\n"
    ...     "\\t@%p1 bra A;\\n\\tmov.u32 %r1, 1;\\n\\tbra.uni J;\\nA:\\n\\tmov.u32 %r1, 2;\\nJ:\\n"
    ...     "\\tadd.s32 %r2, %r1, 1;\\n\\tret;\\n}\\n")
    >>> flow = inlined_graph(m.function("k"))
    >>> [flow.blocks[b].instructions[-1].text.strip() for b in deciding_branches(flow, "%r1", definitions(flow)["%r1"])]
    ['@%p1 bra A;']
    """
    return frozenset(_deciding(flow, sites, register, lambda branch: False))


def _deciding(flow: FlowGraph, sites: Sequence[Site], register: str, skip: Callable[[int], bool]) -> Iterator[int]:
    """`deciding_branches` one by one in block order, but for those `skip` names (not
    examined, so that `cta_uniform` walks no branch whose guard it knows uniform, and
    stops at the first that fails): only a branch that reaches a write may decide it,
    and only where `register` is live (read before it is written again). Each branch's
    verdict is kept per register and graph (`DECIDING_VERDICTS`)."""
    verdicts = DECIDING_VERDICTS.of(flow).setdefault(register, {})
    written = {block for block, _ in sites}
    unguarded = {block for block, position in sites if flow.blocks[block].heads[position][0] is None}
    live = _live(flow, register, unguarded)
    if not live:
        return
    before, after = reachable(flow.pred, written), reachable(flow.succ, written)
    toward = reachable(flow.pred, live)  # a walk past these blocks reaches no read
    for branch in CONDITIONAL_BRANCHES.of(flow):
        if branch not in before or skip(branch):
            continue
        if branch not in verdicts:
            verdicts[branch] = _decides(flow, branch, (written, unguarded, live, toward), branch in after)
        if verdicts[branch]:
            yield branch


#: The blocks that end in a `conditional` branch, in block order.
CONDITIONAL_BRANCHES: Fact[tuple[int, ...]] = Fact(
    "conditional branches", lambda flow: tuple(block for block in range(len(flow.blocks)) if conditional(flow, block)))
#: Register -> branch -> whether it decides which write of the register a thread sees (`_decides`).
DECIDING_VERDICTS: Fact[dict[str, dict[int, bool]]] = Fact("deciding verdicts", lambda flow: {})


def _decides(flow: FlowGraph, branch: int, blocks: tuple[set[int], set[int], set[int], set[int]],
             defined: bool) -> bool:
    """Whether `branch` decides which write a thread sees: its sides differ
    (`_sides_differ`, with `blocks` and `defined`), or it leaves a loop that writes the
    register apart (`_leaves_apart`)."""
    written, _, live, _ = blocks
    meet = DominatorTree.post_of(flow).idom.get(branch)
    if _sides_differ(flow, branch, blocks, meet, defined):
        return True
    loop = INNERMOST_LOOPS.of(flow).get(branch)
    loops = [loop, *loop.enclosing()] if loop is not None else []
    return any(_leaves_apart(flow, branch, around, live, meet) for around in loops if written & around.blocks)


#: Block -> the innermost loop holding it.
INNERMOST_LOOPS: Fact[dict[int, Loop]] = Fact("innermost loops", lambda flow: LOOPS.of(flow).innermost(),
                                              needs=(LOOPS,))


def _live(flow: FlowGraph, register: str, killing: set[int]) -> set[int]:
    """The blocks at whose start `register` is live: some path from there reads it before
    an unguarded write (in `killing` blocks) replaces it."""
    live = set(_exposed_reads(flow, register))
    stack = list(live)
    while stack:
        for previous in flow.pred[stack.pop()]:
            if previous not in live and previous not in killing:
                live.add(previous)
                stack.append(previous)
    return live


def _exposed_reads(flow: FlowGraph, register: str) -> set[int]:
    """The blocks that read `register` (qualified) before writing it; kept per register
    and graph. A block whose text does not hold the register's name neither reads nor
    writes it: only the instructions that hold it are parsed (in a large kernel, many
    are parsed by nothing else). A ``%`` name's blocks come from `BLOCKS_BY_NAME`; a plain
    name (inline assembly's ``.reg .pred P1;``) is looked for in every block's text.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<12>;\\n\\tmov.u32 %r11, 1;\\nL:\\n\\tadd.s32 %r11, %r1, 1;\\n\\tmov.u32 %r1, 2;\\n"
    ...     "\\tbra.uni L;\\n}\\n")
    >>> flow = inlined_graph(m.function("k"))
    >>> [flow.blocks[b].name for b in _exposed_reads(flow, "%r1")], _exposed_reads(flow, "%r11")
    (['L'], set())
    """
    table = EXPOSED_READS.of(flow)
    if register not in table:
        found: set[int] = set()
        for prefix, blocks in BLOCKS_BY_COPY.of(flow).items():
            name = _local_name(register, prefix)
            if name is None:
                continue
            match = _PERCENT_NAME.match(name)
            if match is not None:
                holding: Iterable[int] = (blocks[place] for place in
                                          bits(BLOCKS_BY_NAME.of(flow)[prefix].get(match.group(), 0)))
            else:
                holding = [block for block in blocks
                           if any(name in instruction.text for instruction in flow.blocks[block].instructions)]
            found.update(block for block in holding if _reads_first(flow, block, name))
        table[register] = found
    return table[register]


#: Register (`qualified`) -> `_exposed_reads`, filled as they are asked.
EXPOSED_READS: Fact[dict[str, set[int]]] = Fact("exposed reads", lambda flow: {})


def _blocks_by_copy(flow: FlowGraph) -> dict[str, list[int]]:
    """The prefix of each inlined copy (`qualified`) -> its blocks, in block order."""
    found: dict[str, list[int]] = {}
    for block in flow.blocks:
        found.setdefault(block.context.prefix if block.context is not None else "", []).append(block.index)
    return found


#: A graph's `_blocks_by_copy`.
BLOCKS_BY_COPY: Fact[dict[str, list[int]]] = Fact("blocks by copy", _blocks_by_copy)

#: The ``%`` name a register operand starts with; a vector register's element (``%v.x``),
#: a special register's ``.x`` and an address's ``+4`` follow it (ptxkit.instruction).
_PERCENT_NAME = compile_pattern(r"%[\w$]+")


def _blocks_by_name(flow: FlowGraph) -> dict[str, dict[str, int]]:
    """The prefix of each inlined copy -> each ``%`` name its blocks' texts hold -> those
    blocks, as a bit mask over the copy's blocks (bit ``i`` for its ``i``-th block in
    `BLOCKS_BY_COPY`: a mask over the whole graph's blocks would take hundreds of bytes
    for a name of an inlined copy late in a ``-G`` kernel; plain ints, which the
    collector never walks). A name is held whole: ``%r1`` is not in ``add.s32 %r11,
    %r12, 1;``, which cannot read ``%r1``, so every block `_reads_first` can accept is in
    the mask.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<12>;\\n\\tmov.u32 %r11, %tid.x;\\nL:\\n\\tadd.s32 %r11, %r1, 1;\\n"
    ...     "\\tbra.uni L;\\n}\\n")
    >>> sorted(_blocks_by_name(inlined_graph(m.function("k")))[""].items())
    [('%r1', 2), ('%r11', 3), ('%tid', 1)]
    """
    found: dict[str, dict[str, int]] = {}
    for prefix, blocks in BLOCKS_BY_COPY.of(flow).items():
        names: dict[str, int] = {}
        get = names.get
        for place, block in enumerate(blocks):
            bit = 1 << place
            text = "\n".join([instruction.text for instruction in flow.blocks[block].instructions])  # no call per line
            for name in set(_PERCENT_NAME.findall(text)):
                names[name] = get(name, 0) | bit
        found[prefix] = names
    return found


#: A graph's `_blocks_by_name`.
BLOCKS_BY_NAME: Fact[dict[str, dict[str, int]]] = Fact("blocks by name", _blocks_by_name, needs=(BLOCKS_BY_COPY,))


def _local_name(register: str, prefix: str) -> str | None:
    """The name by which the blocks of the inlined copy with `prefix` read `register`
    (`qualified`, undone), or None where they cannot: a register of an inlined copy
    (``3:%r1``) is not read by the root's blocks (prefix "").

    >>> _local_name("%tid.x", "3:"), _local_name("3:%r1", "3:"), _local_name("3:%r1", "4:"), _local_name("3:%r1", "")
    ('%tid.x', '%r1', None, None)
    """
    if is_special_register(register):
        return register
    if not register.startswith(prefix) or is_special_register(register[len(prefix):]):
        return None
    if not prefix and ":" in register:
        return None
    return register[len(prefix):]


def _reads_first(flow: FlowGraph, block: int, name: str) -> bool:
    """Whether `block` reads register `name` (its guard, its sources, an address it
    writes through, and the accumulator of a ``wgmma``) before an unguarded write
    replaces it."""
    for instruction, head in zip(flow.blocks[block].instructions, flow.blocks[block].heads):
        if name not in instruction.text:
            continue
        if head[0] is not None and head[0].register == name:
            return True
        for index, operand in enumerate(instruction.operands):
            if (index > 0 or operand.kind == "memory" or head[2].startswith("wgmma")) and \
                    name in [e.name for e in (operand, *operand.elements) if e.kind == "register"]:
                return True
        if head[0] is None and name in destinations(instruction, head, frozenset()):
            return False
    return False


def _sides_differ(flow: FlowGraph, branch: int, blocks: tuple[set[int], set[int], set[int], set[int]],
                  meet: EdgeEnd | None, defined: bool) -> bool:
    """Whether two paths from different sides of `branch` bring different writes (by
    block; -1: the value `branch` saw, `defined` when some write reaches it) to a block
    where the register is live. `blocks`: those that write it, unguarded, where it is
    live, and those from which a live one is reached (the walk goes no further); past
    `meet`, where all paths from the branch meet (its post-dominator), every path carries
    the same write unless they differ there already."""
    written, unguarded, live, toward = blocks
    between = _between_sides(flow, branch, meet)
    if not any(between >> block & 1 for block in written):
        return False  # no write before the sides meet: every way brings what the branch saw
    sides = (set(flow.succ[branch]) - {branch}) & toward
    if len(sides) < 2 or not defined and len(written) < 2:
        return False  # one side alone, or one write and no value from before: never two ways
    order = RPO_POSITIONS.of(flow)  # labels grow to the same end in any order: this one re-visits least
    labels: dict[int, set[tuple[int, int]]] = {side: {(side, -1)} for side in sides}
    work = [(order.get(side, len(order) + side), side) for side in sides]
    heapify(work)
    pending = set(sides)
    while work:
        block = heappop(work)[1]
        pending.discard(block)
        into = labels[block]
        if block in live or block == meet:
            differ = _two_ways(into, defined)
            if differ and block in live:
                return True
            if block == meet and not differ:
                continue
        out = into if block not in written else {(side, block) for side, _ in into}
        if block in written and block not in unguarded:
            out = out | into  # guarded writes only: the guard decides, cta_uniform checks it
        for next_block in flow.succ[block]:
            if next_block == branch or next_block not in toward:
                continue
            have = labels.setdefault(next_block, set())
            if not out <= have:
                have |= out
                if next_block not in pending:
                    pending.add(next_block)
                    heappush(work, (order.get(next_block, len(order) + next_block), next_block))
    return False


def _between_sides(flow: FlowGraph, branch: int, meet: EdgeEnd | None) -> int:
    """The blocks a way from a side of `branch` reaches before `meet` (its post-dominator)
    or `branch` again, as a bit mask: where the ways `_sides_differ` follows can pass a
    write before they meet. Found once per branch and graph (`SIDE_REGIONS`): a kernel's
    registers ask about the same branches over and over.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n\\t@%p1 bra A;\\n\\tbar.sync 0;\\nA:\\n\\tret;\\n}\\n")
    >>> flow = inlined_graph(m.function("k"))
    >>> meet = DominatorTree.post_of(flow).idom[0]
    >>> [flow.blocks[b].instructions[0].text.strip() for b in bits(_between_sides(flow, 0, meet))]
    ['bar.sync 0;']
    """
    regions = SIDE_REGIONS.of(flow)
    found = regions.get(branch)
    if found is None:
        found = regions[branch] = mask_of(reachable(flow.succ, flow.succ[branch], avoid={branch, meet}))
    return found


#: Branch -> `_between_sides`, filled as it is asked.
SIDE_REGIONS: Fact[dict[int, int]] = Fact("side regions", lambda flow: {})


#: Block -> its place in the graph's reverse post-order.
RPO_POSITIONS: Fact[dict[int, int]] = Fact("rpo positions",
                                           lambda flow: {block: place for place, block in enumerate(flow.rpo)})


def _two_ways(labels: set[tuple[int, int]], defined: bool) -> bool:
    """Whether two of `labels` (side, write) differ in both side and write (-1, the value
    before the branch, counts only when `defined`): so exactly when the labels, those -1
    dropped unless `defined`, hold two sides and two writes (with two writes and two
    sides, a pair sharing its write has a third label differing from one of them in both).

    >>> _two_ways({(1, 5), (2, 5), (1, 6)}, True), _two_ways({(1, 5), (1, 6)}, True)
    (True, False)
    >>> _two_ways({(1, -1), (2, 5)}, False), _two_ways({(1, -1), (2, 5)}, True)
    (False, True)
    """
    counted = labels if defined else {label for label in labels if label[1] != -1}
    return len({side for side, _ in counted}) > 1 and len({write for _, write in counted}) > 1


def _leaves_apart(flow: FlowGraph, branch: int, loop: Loop, live: set[int], meet: EdgeEnd | None) -> bool:
    """Whether one side of `branch` (in `loop`) leaves the loop in this round for a block
    where the register is `live` while another side goes round again: the threads that
    left hold a write of an earlier round than those still in the loop. A side that comes
    straight back to `branch` (a wait loop) stays in `loop` only when `branch` is its header.
    When every path from every side meets again in `loop` (at `meet`, the branch's
    post-dominator) before reaching its header or leaving it, the threads are in the same
    round there: a later branch decides who leaves, not this one."""
    leaves, stays = set(), set()
    for side in set(flow.succ[branch]):
        if side == branch:
            if branch == loop.header:
                stays.add(side)
            continue
        seen, stack = {side}, [side]
        while stack:
            block = stack.pop()
            if block == loop.header:
                stays.add(side)
                continue
            if block == meet and block in loop.blocks:
                continue
            if block not in loop.blocks:
                if block in live:
                    leaves.add(side)
                continue
            for next_block in flow.succ[block]:
                if next_block != branch and next_block not in seen:
                    seen.add(next_block)
                    stack.append(next_block)
    if meet is not None and not leaves and not stays:
        return False  # every path from both sides meets again in this round
    if meet is not None:
        return _leaves_apart(flow, branch, loop, live, None)
    return any(side != other for side in leaves for other in stays)


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
    the inlined copy that writes it (`qualified`); computed once per graph
    (`ptxkit.cfg.values.definitions.DEFINITIONS`).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tret;\\n}\\n")
    >>> definitions(inlined_graph(m.function("k")))
    {'%r1': ((0, 0),)}
    """
    return DEFINITIONS.of(flow)


