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

from ptxkit.cfg.flow.operands import is_param, operand_reads, operand_targets, written_and_read
from ptxkit.cfg.values.symbols import symbol_regions
from ptxkit.isa import MEMORY_WRITERS, access_width

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


def shared_pointer_registers(flow) -> set[str]:
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

    def __init__(self, flow):
        self.flow = flow
        self.plain_of: dict[int, frozenset] = {}  # context id -> `_plain`
        self.uses: dict[str, list] = {}  # register -> the targets of instructions reading it
        self.sources: set[str] = set()
        self.loads: list[list[str]] = []  # targets of ordinary loads
        self.slot_loads: list[tuple[tuple, list[str]]] = []  # (stack bytes, targets) of loads from the -G stack
        self.param_loads: dict[tuple, list[str]] = {}  # parameter slot -> targets of loads of it (inlined calls)
        self.stores: list[tuple[str, list[str]]] = []  # ("memory" | "param", stored registers)
        self.stack = _StackAddresses()
        self.on_stack = any("%SP" in instruction.text for block in flow.blocks for instruction in block.instructions)

    def _plain(self, context) -> frozenset:
        """Registers declared without ``%`` in the function of `context` (inline assembly)."""
        key = context.id if context is not None else 0
        plain = self.plain_of.get(key)
        if plain is None:
            function = context.function if context is not None else self.flow.function
            plain = self.plain_of[key] = frozenset(n for n, v in symbol_regions(function, context, self.flow).items()
                                                   if v is None)
        return plain

    def block(self, block) -> None:
        """Scan the instructions of `block`."""
        context = block.context
        prefix = context.prefix if context is not None else ""
        plain = self._plain(context)
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

    def _store(self, prefix: str, plain: frozenset, base: str, operands, modifiers: list, call) -> None:
        """Scan a store (`call`: the call an ``st.param`` passes its argument to)."""
        stored = [prefix + r for operand in operands[1:] if operand.kind != "memory"
                  for r in operand_reads(operand, plain)]
        slot = _stack_slot(prefix, operands[0], modifiers) if base == "st" else None
        if base == "st" and is_param(modifiers):  # an argument of the next call, or a result
            slot = ("param", prefix, call, operands[0].name)
            self.stack.passed(slot, stored)
        elif slot is None and base == "st" and self.stack.through(prefix, operands[0], modifiers, stored,
                                                                  self.stores):
            return
        self.stores.append((slot or "memory", stored))

    def _definition(self, block, prefix: str, plain: frozenset, base: str, operands, modifiers: list) -> None:
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

    def _load(self, block, prefix: str, operands, modifiers: list, targets: list[str]) -> None:
        """Scan a load: from the -G stack, from memory, or of a parameter."""
        context = block.context
        slot = _stack_slot(prefix, operands[1], modifiers) if len(operands) > 1 else None
        if slot is not None:
            self.slot_loads.append((slot, targets))
        elif not is_param(modifiers):
            if len(operands) < 2 or not self.stack.through(prefix, operands[1], modifiers, targets, self.loads):
                self.loads.append(targets)
        elif (slot := _parameter_slot(self.flow, block, operands[1])) is not None:
            self.param_loads.setdefault(slot, []).extend(targets)
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
        stored_to: dict[str, list] = {}  # register -> where stores put it ("memory", "param" or stack bytes)
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
                elif kind[0] == "param":
                    work.extend(param_loads.pop(kind, ()))
                    work.extend(param_loads.pop(None, ()))  # parameters whose argument is not known
                elif isinstance(kind, tuple):
                    work.extend(stack_loads.reading(kind))
        return tainted


class _StackAddresses:
    """Registers that hold a fixed address on a ``-G`` stack (``add %rd, %SP, c``, passed
    on through ``mov`` and call parameters), so that a store or load through one is a
    stack slot like ``[%SP+c]`` (a lambda's captures, a reference argument)."""

    def __init__(self):
        self.definitions: dict[str, list] = {}  # register -> ("add", source, constant), ("param", slot) or None
        self.arguments: dict[tuple, list] = {}  # parameter slot -> the registers stored to it
        self.pending: list[tuple] = []  # (register, offset, width, registers, stores or loads)
        self._resolved: dict[str, tuple | None] = {}

    def define(self, prefix: str, base: str, operands, targets: list[str], flow, block) -> None:
        how = None
        if base in ("add", "mov") and len(targets) == 1:
            source, constant = operands[1], operands[2] if base == "add" and len(operands) == 3 else None
            if source.kind == "immediate" and constant is not None:
                source, constant = constant, source
            if source.kind == "register" and (constant is None or isinstance(constant.value, int)
                                              and constant.kind == "immediate"):
                how = ("add", prefix + source.name, constant.value if constant is not None else 0)
        elif base == "ld" and len(operands) > 1 and operands[1].kind == "memory" and operands[1].value in (0, None):
            slot = _parameter_slot(flow, block, operands[1])
            how = ("param", slot) if slot is not None else None
        for target in targets:
            self.definitions.setdefault(target, []).append(how)

    def define_unknown(self, targets: list[str]) -> None:
        """Registers defined by anything but a step of a stack address."""
        for target in targets:
            self.definitions.setdefault(target, []).append(None)

    def passed(self, slot: tuple, stored: list[str]) -> None:
        self.arguments.setdefault(slot, []).extend(stored if len(stored) == 1 else [None])

    def through(self, prefix: str, memory, modifiers, registers: list[str], into: list) -> bool:
        """Defer an access ``[%r+c]`` until `resolve` knows whether ``%r`` is on the stack."""
        if memory.kind != "memory" or memory.name is None or not memory.name.startswith("%") \
                or not isinstance(memory.value or 0, int):
            return False
        self.pending.append((prefix + memory.name, memory.value or 0, access_width(modifiers), registers, into))
        return True

    def resolve(self, stores: list, loads: list, slot_loads: list) -> None:
        """Put each deferred access where it belongs: a stack slot, or any memory."""
        for register, offset, width, registers, into in self.pending:
            where = self.address(register)
            slot = (where[0], where[1] + offset, where[1] + offset + width) if where is not None else None
            if into is stores:
                stores.append((slot or "memory", registers))
            elif slot is not None:
                slot_loads.append((slot, registers))
            else:
                loads.append(registers)

    def address(self, register: str, depth: int = 0) -> tuple | None:
        """``(stack pointer key, offset)`` of a register with one known stack address."""
        if register.rsplit(":", 1)[-1] in _STACK_POINTERS:
            return register.removesuffix("L"), 0  # %SPL is %SP's frame, in the local window
        if register in self._resolved:
            return self._resolved[register]
        self._resolved[register] = None  # a cycle resolves to nothing
        found = set()
        for how in self.definitions.get(register, [None]):
            if how is None or depth > 16:
                return None
            if how[0] == "add":
                base = self.address(how[1], depth + 1)
                found.add(None if base is None else (base[0], base[1] + how[2]))
            else:
                found.update(self.address(r, depth + 1) if r is not None else None
                             for r in self.arguments.get(how[1], [None]))
            if None in found or len(found) > 1:
                return None
        self._resolved[register] = result = found.pop() if found else None
        return result


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
    """``(prefix + "%SP", first byte, end)`` of an access ``[%SP+c]`` or ``[%SPL+c]``
    (the stack's generic and local-window pointers name the same bytes), else None."""
    if operand.kind != "memory" or operand.name not in _STACK_POINTERS or not isinstance(operand.value, int):
        return None
    return prefix + "%SP", operand.value, operand.value + access_width(modifiers)


def _parameter_slot(flow, block, memory) -> tuple | None:
    """The ``("param", context prefix, call, name)`` slot an inlined ``ld.param``
    reads: the caller's argument to this call for a callee's parameter, the callee's
    return parameter for a result read after the call; None when it is neither."""
    name = memory.name if memory.kind == "memory" else None
    context = block.context
    if context is not None and context.parent is not None and name in context.arguments:
        return "param", context.parent.prefix, id(context.call), context.arguments[name]
    for p in flow.pred[block.index]:
        callee = flow.blocks[p].context
        if "return" in flow.kinds.get((p, block.index), "") and callee is not None and name in callee.results:
            return "param", callee.prefix, None, callee.results[name]
    return None


def _next_calls(block) -> list:
    """For each instruction of `block`, ``id`` of the first ``call`` at or after it (the
    call an ``st.param`` passes its argument to), or None."""
    found, following = [None] * len(block.instructions), None
    for position in range(len(block.instructions) - 1, -1, -1):
        if block.heads[position][2] == "call":
            following = id(block.instructions[position])
        found[position] = following
    return found


def _call_result(function, operands) -> bool:
    """True for ``ld.param`` of a name that is no parameter of `function`: the return
    value of a call in its body (one not inlined, or this would be a known slot)."""
    memory = operands[1] if len(operands) > 1 else None
    if memory is None or memory.kind != "memory" or not memory.elements or memory.elements[0].kind != "symbol":
        return False
    return all(param.name != memory.name for param in function.signature.params)


def _shared_parameter(function, operands) -> bool:
    """True for ``ld.param`` of a kernel parameter declared ``.ptr .shared``."""
    memory = operands[1] if len(operands) > 1 else None
    if memory is None or memory.kind != "memory":
        return False
    for param in function.signature.params:
        if param.name == memory.name:
            return param.pointer_space == ".shared"
    return function.kind != "entry"  # a .func parameter analysed on its own may be anything
