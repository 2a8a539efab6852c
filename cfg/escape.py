"""Which registers may hold a generic address of shared memory (docs/fence.md §3.4).

A generic ``ld``/``st`` through a pointer the value analysis cannot follow (one
loaded from a pointer array in global memory, say) would have to count as a
possible access of every space. But a generic shared-memory address exists only
where the kernel makes one: ``cvta`` from a shared window, a generic ``mapa``, or a
kernel parameter declared ``.ptr .shared``; the host cannot pass one, and one
stored by an earlier launch names memory that no longer exists. So a register
that no such address can flow into — through arithmetic, ``mov``, ``selp``, call
parameters, or a store and a later load — holds a global or local address, never
a shared one.

This is a flow-insensitive over-approximation: a register is *tainted* when any of
its definitions may produce such an address; a load is tainted as soon as any
store in the kernel may store a tainted value (call parameters likewise). The stack
of a ``-G`` build is told apart: a store to ``[%SP+c]`` (or ``%SPL``) taints only the
loads of the bytes it wrote, so spilled pointers keep their provenance; a tainted
store anywhere else still taints every load, the stack's too.

>>> import ptxkit
>>> from ptxkit.cfg.graph import flow_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k(.param .u64 k_p)\\n{\\n"
...     ".reg .b64 %rd<6>;\\n.shared .align 8 .b8 smem[64];\\n\\tld.param.u64 %rd1, [k_p];\\n"
...     "\\tld.global.u64 %rd2, [%rd1];\\n\\tmov.u64 %rd3, smem;\\n\\tcvta.shared.u64 %rd4, %rd3;\\n"
...     "\\tadd.s64 %rd5, %rd4, 8;\\n\\tst.u32 [%rd2], 1;\\n\\tret;\\n}\\n")
>>> sorted(shared_pointer_registers(flow_graph(m.function("k"))))
['%rd4', '%rd5']
"""

from __future__ import annotations

import bisect

from ptxkit.cfg.registers import _is_param, _reads, _targets, symbol_regions
from ptxkit.isa import access_width

#: The stack pointers of nvcc's -G builds (generic and local-window).
_STACK_POINTERS = frozenset({"%SP", "%SPL"})

#: Opcodes that define no register a pointer could flow into.
_NO_TARGET = frozenset("bra brx call ret exit trap bar barrier fence membar prefetch prefetchu nanosleep mbarrier "
                       "tcgen05 wgmma setp".split())


def shared_pointer_registers(flow) -> set[str]:
    """Keys (context prefix + name) of the registers that may hold a generic address
    of shared memory (see the module docstring)."""
    plain_of: dict[int, frozenset] = {}
    uses: dict[str, list] = {}  # register -> the (targets, kind) of instructions reading it
    sources: set[str] = set()
    loads: list[list[str]] = []  # targets of ordinary loads
    slot_loads: list[tuple[tuple, list[str]]] = []  # (stack bytes, targets) of loads from the -G stack
    param_loads: list[list[str]] = []  # targets of loads of inlined parameters and results
    stores: list[tuple[str, list[str]]] = []  # ("memory" | "param", stored registers)
    for block in flow.blocks:
        context = block.context
        prefix = context.prefix if context is not None else ""
        key = context.id if context is not None else 0
        plain = plain_of.get(key)
        if plain is None:
            function = context.function if context is not None else flow.function
            plain = plain_of[key] = frozenset(n for n, v in symbol_regions(function, context).items() if v is None)
        for instruction, head in zip(block.instructions, block.heads):
            opcode, base = head[1], head[2]
            operands = instruction.operands
            if not operands:
                continue
            modifiers = opcode.split(".")[1:]
            if base in ("st", "red", "stmatrix", "cp", "multimem"):
                stored = [prefix + r for operand in operands[1:] if operand.kind != "memory"
                          for r in _reads(operand, plain)]
                slot = _stack_slot(prefix, operands[0], modifiers) if base == "st" else None
                kind = "param" if base == "st" and _is_param(modifiers) else slot or "memory"
                stores.append((kind, stored))
                continue
            if base in _NO_TARGET:
                continue
            targets = [prefix + name for name in _targets(operands[0], plain)]
            if base == "atom":  # atom d, [a], b: b goes to memory, the old value comes back
                stores.append(("memory", [prefix + r for operand in operands[2:] for r in _reads(operand, plain)]))
                loads.append(targets)
                continue
            if not targets:
                continue
            if base == "cvta" and "to" not in modifiers and any(m.startswith("shared") for m in modifiers):
                sources.update(targets)
                continue
            if base == "mapa" and "shared::cluster" not in modifiers:
                sources.update(targets)
                continue
            if base in ("ld", "ldu"):
                slot = _stack_slot(prefix, operands[1], modifiers) if len(operands) > 1 else None
                if slot is not None:
                    slot_loads.append((slot, targets))
                elif not _is_param(modifiers):
                    loads.append(targets)
                elif context is not None and context.parent is not None or _call_result(flow, block):
                    param_loads.append(targets)
                elif _shared_parameter(flow.function if context is None else context.function, operands):
                    sources.update(targets)
                continue
            for operand in operands[1:]:
                for name in _reads(operand, plain):
                    uses.setdefault(prefix + name, []).append(targets)
    stored_to: dict[str, list] = {}  # register -> where stores put it ("memory", "param" or stack bytes)
    for kind, registers in stores:
        for register in registers:
            stored_to.setdefault(register, []).append(kind)
    stack_loads = _StackLoads(slot_loads)
    tainted: set[str] = set()
    work = list(sources)
    memory = param = False
    while work:
        register = work.pop()
        if register in tainted:
            continue
        tainted.add(register)
        for targets in uses.get(register, ()):
            work.extend(t for t in targets if t not in tainted)
        for kind in stored_to.get(register, ()):
            if kind == "memory" and not memory:  # a tainted value in memory: every load may return it
                memory = True
                work.extend(t for targets in loads for t in targets)
                work.extend(t for _, targets in slot_loads for t in targets)
            elif kind == "param" and not param:
                param = True
                work.extend(t for targets in param_loads for t in targets)
            elif isinstance(kind, tuple):
                work.extend(stack_loads.reading(kind))
    return tainted


class _StackLoads:
    """The -G stack loads by stack pointer, sorted by first byte, for "which loads read
    these bytes" (each slot's loads are handed out once)."""

    def __init__(self, slot_loads: list):
        self.by_pointer: dict[str, list] = {}
        for slot, targets in slot_loads:
            self.by_pointer.setdefault(slot[0], []).append((slot[1], slot[2], targets))
        for loads in self.by_pointer.values():
            loads.sort(key=lambda load: load[0])
        self.starts = {name: [load[0] for load in loads] for name, loads in self.by_pointer.items()}
        self.widest = max((slot[2] - slot[1] for slot, _ in slot_loads), default=0)
        self.done: set[tuple] = set()

    def reading(self, slot: tuple) -> list[str]:
        if slot in self.done:
            return []
        self.done.add(slot)
        name, start, end = slot
        loads = self.by_pointer.get(name, ())
        first = bisect.bisect_left(self.starts.get(name, ()), start - self.widest)
        last = bisect.bisect_left(self.starts.get(name, ()), end)
        return [t for load_start, load_end, targets in loads[first:last] if load_end > start for t in targets]


def _stack_slot(prefix: str, operand, modifiers) -> tuple | None:
    """``(prefix + stack pointer, first byte, end)`` of an access ``[%SP+c]``, else None."""
    if operand.kind != "memory" or operand.name not in _STACK_POINTERS or not isinstance(operand.value, int):
        return None
    return prefix + operand.name, operand.value, operand.value + access_width(modifiers)


def _call_result(flow, block) -> bool:
    """True when a call's inlined body returns into `block` (its ld.param reads results)."""
    return any("return" in flow.kinds.get((p, block.index), "") for p in flow.pred[block.index])


def _shared_parameter(function, operands) -> bool:
    """True for ``ld.param`` of a kernel parameter declared ``.ptr .shared``."""
    memory = operands[1] if len(operands) > 1 else None
    if memory is None or memory.kind != "memory":
        return False
    for param in function.signature.params:
        if param.name == memory.name:
            return param.pointer_space == ".shared"
    return function.kind != "entry"  # a .func parameter analysed on its own may be anything
