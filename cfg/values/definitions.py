"""Which instructions write each register: one scan of a flow graph gives the two tables
the analyses ask for.

- `DEFINITIONS` (what `ptxkit.cfg.values.divergence.definitions` reads): for every
  instruction, the ``%`` registers its first operand names, under the name qualified by
  the inlined copy that writes it.
- `REGISTER_DEFINITIONS` (what the register analysis follows,
  `ptxkit.cfg.values.registers`): the same for the instructions that have a destination
  (`ptxkit.isa.NO_DESTINATION` have none), with the registers declared without ``%``
  (inline assembly) and the keys a ``st.param`` writes (`param_store_keys`).

Both are kept by the graph while its analyses run, so a key's sites are a tuple (half a
one-site list's memory, and the collector stops tracking it), and one site is one tuple
in both tables (interpreted: compiled code keeps a site as two machine integers and makes
a tuple each time it stores one).

>>> import ptxkit
>>> from ptxkit.cfg.flow.inline import inlined_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .b32 %r<3>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tbar.sync %r1;\\n\\tadd.s32 %r2, %r1, 1;\\n\\tret;\\n}\\n")
>>> flow = inlined_graph(m.function("k"))
>>> DEFINITIONS.of(flow), REGISTER_DEFINITIONS.of(flow)
({'%r1': ((0, 0), (0, 1)), '%r2': ((0, 2),)}, {'%r1': ((0, 0),), '%r2': ((0, 2),)})
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.flow.operands import destinations, element_bytes
from ptxkit.cfg.values.symbols import PLAIN_REGISTERS
from ptxkit.isa import NO_DESTINATION

if TYPE_CHECKING:
    from ptxkit.cfg.flow.graph import FlowGraph, Site
    from ptxkit.syntax import Instruction

    #: Register (or key) -> the sites that write it, in the graph's order.
    Definitions = dict[str, tuple[Site, ...]]

__all__ = ["DEFINITIONS", "REGISTER_DEFINITIONS", "param_store_keys"]

_NO_PLAIN_REGISTERS: frozenset[str] = frozenset()


def _scan(flow: FlowGraph) -> tuple[Definitions, Definitions]:
    """``(DEFINITIONS, REGISTER_DEFINITIONS)`` of `flow`, from one walk of its
    instructions: each instruction's destinations are read once, and again with the
    plain registers only in a block whose function declares some."""
    anywhere: dict[str, list[Site]] = {}
    followed: dict[str, list[Site]] = {}
    plains = PLAIN_REGISTERS.of(flow)
    for block in flow.blocks:
        prefix = block.context.prefix if block.context is not None else ""
        plain = plains[block.index]
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            site = (block.index, position)
            names = destinations(instruction, head, _NO_PLAIN_REGISTERS)
            for name in names:
                anywhere.setdefault(prefix + name, []).append(site)
            base = head[2]
            if base == "st" and head[1].startswith("st.param"):
                for key in param_store_keys(flow, block.index, instruction):
                    followed.setdefault(key, []).append(site)
                continue
            if base in NO_DESTINATION:
                continue
            for name in destinations(instruction, head, plain) if plain else names:
                followed.setdefault(prefix + name, []).append(site)
    every = {key: tuple(sites) for key, sites in anywhere.items()}
    return every, {key: _same(every.get(key), sites) for key, sites in followed.items()}


def _same(shared: tuple[Site, ...] | None, sites: list[Site]) -> tuple[Site, ...]:
    """`sites` as a tuple: `shared` itself where it holds the same sites (a register's
    sites are most often the same in both tables, which then keep one tuple).

    >>> one = ((0, 1),)
    >>> _same(one, [(0, 1)]) is one, _same(one, [(0, 1), (0, 2)]), _same(None, [(1, 0)])
    (True, ((0, 1), (0, 2)), ((1, 0),))
    """
    found = tuple(sites)
    return shared if shared == found else found


def param_store_keys(flow: FlowGraph, block: int, instruction: Instruction) -> list[str]:
    """The keys a ``st.param`` at `block` writes (`_stored_param_key`), one per element.

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.inline import inlined_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".func f(.param .b32 x)\\n{\\n\\tret;\\n}\\n.visible .entry k()\\n{\\n.reg .b32 %r<3>;\\n"
    ...     "\\t{\\n\\t.param .b32 a;\\n\\tst.param.v2.b32 [a+4], {%r1, %r2};\\n"
    ...     "\\tcall f, (a);\\n\\t}\\n\\tret;\\n}\\n")
    >>> flow = inlined_graph(m.function("k"))
    >>> param_store_keys(flow, 0, flow.blocks[0].instructions[0])
    ['param:a+4', 'param:a+8']
    """
    operands = instruction.operands
    if not operands or operands[0].kind != "memory" or operands[0].name is None:
        return []
    width = element_bytes(instruction.opcode)
    count = len(operands[1].elements) if len(operands) > 1 and operands[1].kind == "vector" else 1
    offset = int(operands[0].value or 0)
    return [_stored_param_key(flow, block, operands[0].name, offset + i * width) for i in range(count)]


def _stored_param_key(flow: FlowGraph, block: int, name: str, offset: int) -> str:
    """The key a ``st.param`` at `block` names: a call argument of this context, or
    (in an inlined callee) one of its results (a load's key: `_Analysis.param_key` of
    `ptxkit.cfg.values.registers`)."""
    context = flow.blocks[block].context
    if context is not None and context.parent is not None:
        if name in {p.name for p in context.function.signature.return_params}:
            return f"{context.prefix}param:{name}+{offset}"
    return f"{context.prefix if context is not None else ''}param:{name}+{offset}"


#: The one scan behind both tables (`_scan`).
_WRITES: Fact[tuple[Definitions, Definitions]] = Fact("writes", _scan, needs=(PLAIN_REGISTERS,))
#: A graph's registers and the sites that write them (`ptxkit.cfg.values.divergence.definitions`).
DEFINITIONS: Fact[Definitions] = Fact("definitions", lambda flow: _WRITES.of(flow)[0], needs=(_WRITES,))
#: A graph's register definitions that the register analysis follows, which every analysis of it shares.
REGISTER_DEFINITIONS: Fact[Definitions] = Fact("register definitions", lambda flow: _WRITES.of(flow)[1],
                                               needs=(_WRITES,))
