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
store in the kernel may store a tainted value. Call parameters go by name: a tainted
``st.param`` to an argument taints the loads of that argument in the callees it is
passed to (a name reused by two calls of one caller counts for both), and a
tainted return value the loads of it after the call. The stack of a ``-G`` build is
told apart too: a store to ``[%SP+c]`` (or ``%SPL``) taints only the loads of the
bytes it wrote, so spilled pointers keep their provenance; a tainted store anywhere
else still taints every load, the stack's too.

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k(.param .u64 k_p)\\n{\\n"
...     ".reg .b64 %rd<6>;\\n.shared .align 8 .b8 smem[64];\\n\\tld.param.u64 %rd1, [k_p];\\n"
...     "\\tld.global.u64 %rd2, [%rd1];\\n\\tmov.u64 %rd3, smem;\\n\\tcvta.shared.u64 %rd4, %rd3;\\n"
...     "\\tadd.s64 %rd5, %rd4, 8;\\n\\tst.u32 [%rd2], 1;\\n\\tret;\\n}\\n")
>>> sorted(shared_pointer_registers(flow_graph(m.function("k"))))
['%rd4', '%rd5']
"""

from __future__ import annotations

import bisect

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.flow.operands import is_param, operand_reads, operand_targets, written_and_read
from ptxkit.cfg.values.symbols import PLAIN_REGISTERS
from ptxkit.isa import MEMORY_WRITERS, access_width

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ptxkit.cfg.flow.graph import BasicBlock, FlowGraph
    from ptxkit.instruction import Operand
    from ptxkit.syntax import Function

#: The stack pointers of nvcc's -G builds (generic and local-window).
_STACK_POINTERS = frozenset({"%SP", "%SPL"})

#: Opcodes whose operands the scan reads one by one: stores (``atom`` also loads: it is
#: read as a load), and what makes or loads a pointer.
_STORES = MEMORY_WRITERS - {"atom"}
_READ_OPERANDS = _STORES | frozenset(("atom", "cvta", "mapa", "ld", "ldu"))
#: Opcodes that may step a -G stack address (`_StackAddresses.define`).
_STACK_STEPS = frozenset(("add", "mov"))

#: Opcodes that define no register a pointer could flow into.
_NO_TARGET = frozenset("bra brx call ret exit trap bar barrier fence membar prefetch prefetchu nanosleep mbarrier "
                       "tcgen05 wgmma setp".split())


class ParamSlot(Record):
    """A call parameter an inlined ``st.param`` writes or ``ld.param`` reads: the caller's
    context prefix, the call (its ``id``; None for a return value read after it) and the
    name of the caller's argument."""

    prefix: str
    call: int | None
    name: str | None


class StackSlot(Record):
    """Bytes ``start .. end`` of a -G stack (`pointer`: the context prefix + ``%SP``)."""

    pointer: str
    start: int
    end: int


if TYPE_CHECKING:
    #: Where a store puts its registers: any memory (``"memory"``), a call parameter or -G stack bytes.
    Where = str | ParamSlot | StackSlot
    #: A store: where it puts them, and the registers it stores.
    Stored = tuple[Where, list[str]]
    #: How a register gets a stack address (`_StackAddresses.define`): a stack address it
    #: steps, ``(source register, constant)``; a call parameter it loads; or neither (None).
    Step = tuple[str, int] | ParamSlot | None
    #: A register's one known stack address: ``(stack pointer key, offset)``.
    StackAddress = tuple[str, int]


def shared_pointer_registers(flow: FlowGraph) -> set[str]:
    """Keys (context prefix + name) of the registers that may hold a generic address
    of shared memory (see the module docstring)."""
    scan = _PointerScan(flow)
    for block in flow.blocks:
        scan.block(block)
    scan.stack.resolve(scan.stores, scan.loads, scan.slot_loads)
    return scan.tainted()


class _PointerScan:
    """Where values go in one flow graph: which registers each register flows into, the
    shared addresses made, and the stores and loads that carry values through memory."""

    def __init__(self, flow: FlowGraph) -> None:
        self.flow = flow
        self.plains = PLAIN_REGISTERS.of(flow)  # block -> the registers its function declares without %
        self.uses: dict[str, list[list[str]]] = {}  # register -> the targets of instructions reading it
        self.sources: set[str] = set()
        self.loads: list[list[str]] = []  # targets of ordinary loads
        self.slot_loads: list[tuple[StackSlot, list[str]]] = []  # (stack bytes, targets) of loads from the -G stack
        # parameter slot (None: any) -> targets of loads of it (inlined calls)
        self.param_loads: dict[ParamSlot | None, list[str]] = {}
        self.stores: list[Stored] = []
        self.stack = _StackAddresses()
        self.on_stack = any("%SP" in instruction.text for block in flow.blocks for instruction in block.instructions)

    def block(self, block: BasicBlock) -> None:
        """Scan the instructions of `block`."""
        context = block.context
        prefix = context.prefix if context is not None else ""
        plain = self.plains[block.index]
        calls = _next_calls(block)
        uses, stack, on_stack = self.uses, self.stack, self.on_stack
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            opcode, base = head[1], head[2]
            if base in _NO_TARGET:
                continue
            if base not in _READ_OPERANDS and not (on_stack and base in _STACK_STEPS):
                found = written_and_read(instruction, head, plain)
                if found is not None:  # arithmetic and the like: its targets follow what it reads
                    if found[0]:
                        targets = [prefix + name for name in found[0]]
                        stack.define_unknown(targets)
                        for name in found[1]:
                            uses.setdefault(prefix + name, []).append(targets)
                    continue
            operands = instruction.operands
            if not operands:
                continue
            modifiers = opcode.split(".")[1:]
            if base in _STORES:
                self._store(prefix, plain, base, operands, modifiers, calls[position])
            else:
                self._definition(block, prefix, plain, base, operands, modifiers)

    def _store(self, prefix: str, plain: frozenset[str], base: str, operands: Sequence[Operand],
               modifiers: list[str], call: int | None) -> None:
        """Scan a store (`call`: the call an ``st.param`` passes its argument to)."""
        stored = [prefix + r for operand in operands[1:] if operand.kind != "memory"
                  for r in operand_reads(operand, plain)]
        slot: StackSlot | ParamSlot | None = _stack_slot(prefix, operands[0], modifiers) if base == "st" else None
        if base == "st" and is_param(modifiers):  # an argument of the next call, or a result
            slot = ParamSlot(prefix, call, operands[0].name)
            self.stack.passed(slot, stored)
        elif slot is None and base == "st" and self.stack.through(prefix, operands[0], modifiers, stored,
                                                                  self.stores):
            return
        self.stores.append((slot or "memory", stored))

    def _definition(self, block: BasicBlock, prefix: str, plain: frozenset[str], base: str, operands: Sequence[Operand],
                    modifiers: list[str]) -> None:
        """Scan an instruction that defines registers and is no store: an ``atom``, a
        ``cvta``/``mapa`` that may make a shared address, a load, or a step of an address."""
        targets = [prefix + name for name in operand_targets(operands[0], plain)]
        self.stack.define(prefix, base, operands, targets, self.flow, block)
        if base == "atom":  # atom d, [a], b: b goes to memory, the old value comes back
            self.stores.append(("memory", [prefix + r for operand in operands[2:]
                                           for r in operand_reads(operand, plain)]))
            self.loads.append(targets)
            return
        if not targets:
            return
        if base == "cvta" and "to" not in modifiers and any(m.startswith("shared") for m in modifiers):
            self.sources.update(targets)
            return
        if base == "cvta":  # cvta.to.*: a window address, not a generic one
            return
        if base == "mapa" and "shared::cluster" not in modifiers:
            self.sources.update(targets)
            return
        if base in ("ld", "ldu"):
            self._load(block, prefix, operands, modifiers, targets)
            return
        for operand in operands[1:]:
            for name in operand_reads(operand, plain):
                self.uses.setdefault(prefix + name, []).append(targets)

    def _load(self, block: BasicBlock, prefix: str, operands: Sequence[Operand], modifiers: list[str],
              targets: list[str]) -> None:
        """Scan a load: from the -G stack, from memory, or of a parameter."""
        context = block.context
        slot = _stack_slot(prefix, operands[1], modifiers) if len(operands) > 1 else None
        if slot is not None:
            self.slot_loads.append((slot, targets))
        elif not is_param(modifiers):
            if len(operands) < 2 or not self.stack.through(prefix, operands[1], modifiers, targets, self.loads):
                self.loads.append(targets)
        elif (parameter := _parameter_slot(self.flow, block, operands[1])) is not None:
            self.param_loads.setdefault(parameter, []).extend(targets)
        elif context is not None and context.parent is not None:  # not known: any argument's
            self.param_loads.setdefault(None, []).extend(targets)
        elif _call_result(self.flow.function if context is None else context.function, operands):
            # a call that stays a call may return what it was given or what memory holds
            self.param_loads.setdefault(None, []).extend(targets)
            self.loads.append(targets)
        elif _shared_parameter(self.flow.function if context is None else context.function, operands):
            self.sources.update(targets)

    def tainted(self) -> set[str]:
        """The registers the shared addresses made may flow into (once `_StackAddresses.resolve`
        has put the stack's accesses where they belong)."""
        stored_to: dict[str, list[Where]] = {}  # register -> where stores put it
        for kind, registers in self.stores:
            for register in registers:
                stored_to.setdefault(register, []).append(kind)
        uses, loads, slot_loads, param_loads = self.uses, self.loads, self.slot_loads, self.param_loads
        stack_loads = _StackLoads(slot_loads)
        tainted: set[str] = set()
        work = list(self.sources)
        memory = False
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
                elif isinstance(kind, ParamSlot):
                    work.extend(param_loads.pop(kind, ()))
                    work.extend(param_loads.pop(None, ()))  # parameters whose argument is not known
                elif isinstance(kind, StackSlot):
                    work.extend(stack_loads.reading(kind))
        return tainted


class _StackAddresses:
    """Registers that hold a fixed address on a ``-G`` stack (``add %rd, %SP, c``, passed
    on through ``mov`` and call parameters), so that a store or load through one is a
    stack slot like ``[%SP+c]`` (a lambda's captures, a reference argument)."""

    def __init__(self) -> None:
        self.definitions: dict[str, list[Step]] = {}  # register -> how each definition makes it
        self.arguments: dict[ParamSlot, list[str | None]] = {}  # parameter slot -> the registers stored to it
        # (register, offset, width, registers, stores or loads)
        self.pending: list[tuple[str, int, int, list[str], list[Stored] | list[list[str]]]] = []
        self._resolved: dict[str, StackAddress | None] = {}

    def define(self, prefix: str, base: str, operands: Sequence[Operand], targets: list[str], flow: FlowGraph,
               block: BasicBlock) -> None:
        how: Step = None
        if base in ("add", "mov") and len(targets) == 1:
            source, constant = operands[1], operands[2] if base == "add" and len(operands) == 3 else None
            if source.kind == "immediate" and constant is not None:
                source, constant = constant, source
            step = 0 if constant is None else constant.value if constant.kind == "immediate" else None
            if source.kind == "register" and source.name is not None and isinstance(step, int):  # a register has a name
                how = (prefix + source.name, step)
        elif base == "ld" and len(operands) > 1 and operands[1].kind == "memory" and operands[1].value in (0, None):
            how = _parameter_slot(flow, block, operands[1])
        for target in targets:
            self.definitions.setdefault(target, []).append(how)

    def define_unknown(self, targets: list[str]) -> None:
        """Registers defined by anything but a step of a stack address."""
        for target in targets:
            self.definitions.setdefault(target, []).append(None)

    def passed(self, slot: ParamSlot, stored: list[str]) -> None:
        self.arguments.setdefault(slot, []).extend(stored if len(stored) == 1 else [None])

    def through(self, prefix: str, memory: Operand, modifiers: list[str], registers: list[str],
                into: list[Stored] | list[list[str]]) -> bool:
        """Defer an access ``[%r+c]`` until `resolve` knows whether ``%r`` is on the stack."""
        offset = memory.value or 0
        if memory.kind != "memory" or memory.name is None or not memory.name.startswith("%") \
                or not isinstance(offset, int):
            return False
        self.pending.append((prefix + memory.name, offset, access_width(modifiers), registers, into))
        return True

    def resolve(self, stores: list[Stored], loads: list[list[str]],
                slot_loads: list[tuple[StackSlot, list[str]]]) -> None:
        """Put each deferred access where it belongs: a stack slot, or any memory."""
        for register, offset, width, registers, into in self.pending:
            where = self.address(register)
            slot = StackSlot(where[0], where[1] + offset, where[1] + offset + width) if where is not None else None
            if into is stores:
                stores.append((slot or "memory", registers))
            elif slot is not None:
                slot_loads.append((slot, registers))
            else:
                loads.append(registers)

    def address(self, register: str, depth: int = 0) -> StackAddress | None:
        """``(stack pointer key, offset)`` of a register with one known stack address."""
        if register.rsplit(":", 1)[-1] in _STACK_POINTERS:
            return register.removesuffix("L"), 0  # %SPL is %SP's frame, in the local window
        if register in self._resolved:
            return self._resolved[register]
        self._resolved[register] = None  # a cycle resolves to nothing
        found: set[StackAddress | None] = set()
        for how in self.definitions.get(register, [None]):
            if how is None or depth > 16:
                return None
            if not isinstance(how, ParamSlot):  # a step from another register's address
                base = self.address(how[0], depth + 1)
                found.add(None if base is None else (base[0], base[1] + how[1]))
            else:
                found.update(self.address(r, depth + 1) if r is not None else None
                             for r in self.arguments.get(how, [None]))
            if None in found or len(found) > 1:
                return None
        self._resolved[register] = result = found.pop() if found else None
        return result


class _StackLoads:
    """The -G stack loads by stack pointer, sorted by first byte, for "which loads read
    these bytes" (each slot's loads are handed out once)."""

    def __init__(self, slot_loads: list[tuple[StackSlot, list[str]]]) -> None:
        self.by_pointer: dict[str, list[tuple[int, int, list[str]]]] = {}  # pointer -> (start, end, targets)
        for slot, targets in slot_loads:
            self.by_pointer.setdefault(slot.pointer, []).append((slot.start, slot.end, targets))
        for loads in self.by_pointer.values():
            loads.sort(key=lambda load: load[0])
        self.starts = {name: [load[0] for load in loads] for name, loads in self.by_pointer.items()}
        self.widest = max((slot.end - slot.start for slot, _ in slot_loads), default=0)
        self.done: set[StackSlot] = set()

    def reading(self, slot: StackSlot) -> list[str]:
        if slot in self.done:
            return []
        self.done.add(slot)
        name, start, end = slot.pointer, slot.start, slot.end
        loads = self.by_pointer.get(name, ())
        first = bisect.bisect_left(self.starts.get(name, ()), start - self.widest)
        last = bisect.bisect_left(self.starts.get(name, ()), end)
        return [t for load_start, load_end, targets in loads[first:last] if load_end > start for t in targets]


def _stack_slot(prefix: str, operand: Operand, modifiers: list[str]) -> StackSlot | None:
    """The bytes (`StackSlot`) of an access ``[%SP+c]`` or ``[%SPL+c]`` (the stack's
    generic and local-window pointers name the same bytes, ``prefix + "%SP"``), else None."""
    if operand.kind != "memory" or operand.name not in _STACK_POINTERS or not isinstance(operand.value, int):
        return None
    return StackSlot(prefix + "%SP", operand.value, operand.value + access_width(modifiers))


def _parameter_slot(flow: FlowGraph, block: BasicBlock, memory: Operand) -> ParamSlot | None:
    """The `ParamSlot` an inlined ``ld.param``
    reads: the caller's argument to this call for a callee's parameter, the callee's
    return parameter for a result read after the call; None when it is neither."""
    name = memory.name if memory.kind == "memory" else None
    context = block.context
    if context is not None and context.parent is not None and name in context.arguments:
        return ParamSlot(context.parent.prefix, id(context.call), context.arguments[name])
    for p in flow.pred[block.index]:
        callee = flow.blocks[p].context
        if "return" in flow.kinds.get((p, block.index), "") and callee is not None and name in callee.results:
            return ParamSlot(callee.prefix, None, callee.results[name])
    return None


def _next_calls(block: BasicBlock) -> list[int | None]:
    """For each instruction of `block`, ``id`` of the first ``call`` at or after it (the
    call an ``st.param`` passes its argument to), or None."""
    found: list[int | None] = [None] * len(block.instructions)
    following = None
    for position in range(len(block.instructions) - 1, -1, -1):
        if block.heads[position][2] == "call":
            following = id(block.instructions[position])
        found[position] = following
    return found


def _call_result(function: Function, operands: Sequence[Operand]) -> bool:
    """True for ``ld.param`` of a name that is no parameter of `function`: the return
    value of a call in its body (one not inlined, or this would be a known slot)."""
    memory = operands[1] if len(operands) > 1 else None
    if memory is None or memory.kind != "memory" or not memory.elements or memory.elements[0].kind != "symbol":
        return False
    return all(param.name != memory.name for param in function.signature.params)


def _shared_parameter(function: Function, operands: Sequence[Operand]) -> bool:
    """True for ``ld.param`` of a kernel parameter declared ``.ptr .shared``."""
    memory = operands[1] if len(operands) > 1 else None
    if memory is None or memory.kind != "memory":
        return False
    for param in function.signature.params:
        if param.name == memory.name:
            space: str | None = param.pointer_space
            return space == ".shared"
    return function.kind != "entry"  # a .func parameter analysed on its own may be anything
