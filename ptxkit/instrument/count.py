"""``count``: how many times the warps run each basic block of each kernel.

A pass on the rewrite API (docs/rewrite.md). Every block gets a u64 counter in the
kernel's buffer, one row per CTA (or one row for the whole grid, `per_cta=False`); at
the block's entry the lowest active lane of the warp adds 1 (`snippets.count_increment`:
five instructions, one ``red.global.add`` per warp, none per thread). Blocks that always
run together share a counter, so straight-line code pays once: block B joins block A's
counter when A dominates B, B post-dominates A, both sit in the same innermost loop and
every turn that runs A reaches B (`counter_classes`; in divergent code this assumes the warp meets again before B,
where ptxas puts its reconvergence point). `ptxkit.trace.Counts` turns the counters
into counts per block, PTX line, ``.loc`` source line and opcode.

>>> import ptxkit
>>> from ptxkit.rewrite import apply
>>> m = ptxkit.parse_file("samples/toolchain/vector_add.ptx")
>>> plan = count(m)
>>> layout = plan.info["layouts"]["vector_add"]
>>> layout["counters"], [block[:2] for block in layout["blocks"]]
(2, [['B0', 0], ['B1', 1], ['DONE', 0]])
"""

from __future__ import annotations

from ptxkit.rewrite import Plan

from .layout import COUNTER_BYTES, MARK, CountedBlock, Instr, Layout
from .snippets import CountRegisters, count_increment, count_setup, register_types
from .kernels import buffer_of, kernels, source_of


def count(module, kernel=None, per_cta: bool = True, buffer: str = "param") -> Plan:
    """Count block executions per warp in every kernel of `module` (or those named by
    `kernel`, a name or a list). `buffer`: ``param`` (add a kernel parameter, which
    `ptxkit.runtime` fills), ``global`` (a ``.u64`` module variable per kernel holding
    the buffer's address, for launches that cannot pass one more parameter) or
    ``param:NAME`` (an existing ``.u64`` parameter) or ``last`` (the last parameter:
    Triton's profile scratch, which Triton allocates when the hook asks for it).
    The layouts go into ``plan.info["layouts"]`` (kernel -> `Layout` as a dict) and into
    the output, one ``// ptxkit-instrument:`` line per kernel."""
    plan = Plan(module)
    layouts = {}
    for k in kernels(plan, kernel):
        representative = counter_classes(k.facts)
        counters = sorted(set(representative.values()))
        index = {block: i for i, block in enumerate(counters)}
        regs = CountRegisters(**{name: k.fresh_register(kind, "count_" + name)
                                 for name, kind in register_types(CountRegisters).items()})
        where = buffer_of(plan, k, buffer)
        k.insert(k.entry(), count_setup(regs, where, len(counters) * COUNTER_BYTES, per_cta))
        for block in counters:
            k.insert(k.block_entry(block), count_increment(regs, index[block]))
        blocks = [CountedBlock(k.flow.blocks[b].name, index[representative[b]], _instructions(k, b))
                  for b in sorted(representative)]
        layout = Layout.count(k.name, blocks, len(counters), per_cta, where)
        plan.comment(MARK + layout.to_json())
        layouts[k.name] = layout.to_dict()
    plan.info["layouts"] = layouts
    return plan


def counter_classes(facts) -> dict[int, int]:
    """Block -> the block whose counter counts it, for the blocks reachable from the
    entry: its nearest dominator that it post-dominates (transitively), when both are
    outside every loop (irreducible cycles included) or in the same innermost loop and
    every turn of that loop that runs the dominator runs the block (`_every_turn_passes`:
    a turn may leave for an enclosing loop's header and come back), else itself.

    >>> import ptxkit
    >>> from ptxkit.rewrite.facts import FunctionFacts
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<2>;\\n\\tbar.sync 0;\\n\\t@%p1 bra SKIP;\\n\\tbar.sync 1;\\nSKIP:\\n"
    ...     "L:\\n\\tbar.sync 2;\\n\\t@%p1 bra L;\\n\\tret;\\n}\\n")
    >>> counter_classes(FunctionFacts(m.function("k")))
    {0: 0, 1: 1, 2: 2, 3: 0}
    """
    from ptxkit.cfg.flow.dominance import DominatorTree

    flow = facts.flow
    dominators, post = DominatorTree.of(flow), DominatorTree.post_of(flow)
    forest = facts.loops
    innermost = forest.innermost()
    representative: dict[int, int] = {}
    for block in flow.rpo:  # a dominator comes before the blocks it dominates
        chosen = block
        if block not in forest.irreducible and block in post:
            up = dominators.idom.get(block, block)
            while up != block and up in representative:
                loop = innermost.get(block)
                if (post.dominates(block, up) and innermost.get(up) is loop and up not in forest.irreducible
                        and (loop is None or _every_turn_passes(flow, loop, up, block))):
                    chosen = representative[up]
                    break
                parent = dominators.idom.get(up, up)
                if parent == up:
                    break
                up = parent
        representative[block] = chosen
    return representative


def _every_turn_passes(flow, loop, first: int, then: int) -> bool:
    """Whether every way from block `first` that stays in one turn of `loop` reaches
    block `then`: none leaves the loop or returns to its header without passing it (with
    `first` its dominator in the loop, both then run once in the same turns).

    >>> import ptxkit
    >>> from ptxkit.rewrite.facts import FunctionFacts
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .pred %p<3>;\\nO:\\n\\tbar.sync 0;\\nI:\\n\\t@%p1 bra O;\\n\\t@%p2 bra I;\\n\\tret;\\n}\\n")
    >>> facts = FunctionFacts(m.function("k"))
    >>> inner = facts.loops.innermost()[2]
    >>> _every_turn_passes(facts.flow, inner, 1, 2)  # I's turn may go back to O instead
    False
    """
    seen, work = {first}, [first]
    while work:
        for successor in flow.succ[work.pop()]:
            if successor == then:
                continue
            if successor == loop.header or successor not in loop.blocks:
                return False
            if successor not in seen:
                seen.add(successor)
                work.append(successor)
    return True


def _instructions(k, block: int) -> tuple:
    return tuple(Instr(i.line, i.opcode, source_of(k, i)) for i in k.flow.blocks[block].instructions)
