"""A small SIMT interpreter for the PTX that ptxkit's generators emit: GPU-free checks.

It runs one ``.entry`` of a module over a grid of CTAs, one CTA at a time, every
thread of the CTA in lockstep with the *min-PC* rule (the threads at the lowest
instruction index execute next), which reconverges forward branches and loops the
way structured code does. It knows the instructions the generators, the
register-image harness and the row-reduction kernel use (moves and packs, every integer
instruction of `ptxkit.isa_eval`, which computes them, f32/f16/bf16/f16x2/bf16x2/f32x2
arithmetic, ``cvt``, ``setp``/``selp``/``bra``, ``ld``/``st`` on
``.param``/``.global``/``.shared``, ``atom``/``red`` (add, min, max, and, or, xor, exch on
32- and 64-bit integers), ``shfl.sync`` (every mode), ``activemask``, ``redux.sync``, ``bar.sync``;
and the instrumentation passes' reads of ``%globaltimer``, ``%clock``, ``%clock64``,
``%smid`` and ``%lanemask_eq``) and raises `SimulationError` on
anything else, and on what would be undefined on a GPU: a ``shfl.sync`` whose
member lanes are not all there, a ``bar.sync`` that not every thread reaches,
a misaligned or out-of-bounds access.

Thread-block clusters (``launch(..., cluster=C)``): the C CTAs of a cluster run
together, in lockstep like the threads of one CTA, each with its own shared memory;
``%cluster_ctarank``, ``%clusterid.x``, ``%nclusterid.x`` and friends,
``mapa.shared::cluster``, ``ld``/``st.shared::cluster`` and ``barrier.cluster``
(which every thread of the cluster must reach) are modelled, and a
``.reqnctapercluster`` that differs from the launch is refused. Lockstep execution
cannot show a missing barrier between CTAs: that is what the GPU tests are for.

Arithmetic follows PTX: f32 rounds to nearest even without flushing subnormals
unless ``.ftz``; f16/bf16 results are rounded from the exact f32 result (which
equals rounding once); ``max``/``min`` return the non-NaN operand unless ``.NaN``;
``fma`` and ``div`` round the float64 result (exact but for rare double-rounding ties);
``ex2``/``lg2``/``rcp``/``sqrt`` ``.approx`` are computed exactly, which the hardware
approximates within a few ulps. Arithmetic in a rounding mode other than ``.rn`` is
refused; ``cvt`` honours every mode (`rounding`), saturates float-to-integer
conversions and turns NaN into 0 there, as PTX does.
Unwritten registers read as all-ones bits (a NaN), so a missed definition shows.

Time is the step count: each step (one instruction for the threads at the lowest
instruction index) is one cycle of ``%clock``/``%clock64`` and one ns of
``%globaltimer``, counted over the whole launch (CTAs run one after another, so later
CTAs start later); CTA `c` runs on "SM" ``c % 8``. ``launch(..., executions=dict)``
counts, per instruction line, the warps that executed it (once per step in which some
of a warp's threads were at it): what a per-warp instruction counter on a GPU counts.

>>> import numpy as np
>>> text = '''.version 8.0
... .target sm_90a
... .address_size 64
... .visible .entry k(.param .u64 out)
... {
...     .reg .f32 %f<2>; .reg .b32 %r<1>; .reg .b64 %rd<3>;
...     ld.param.u64 %rd0, [out];
...     mov.u32 %r0, %tid.x;
...     cvt.rn.f32.u32 %f0, %r0;
...     shfl.sync.bfly.b32 %f1, %f0, 1, 0x1f, 0xffffffff;
...     add.f32 %f0, %f0, %f1;
...     mul.wide.u32 %rd1, %r0, 4;
...     add.s64 %rd2, %rd0, %rd1;
...     st.global.f32 [%rd2], %f0;
...     ret;
... }
... '''
>>> out = np.zeros(32, np.float32)
>>> launch(text, "k", out, block=32)
>>> out[:4].tolist()
[1.0, 1.0, 5.0, 5.0]
"""

from __future__ import annotations

import re

import numpy as np

from ptxkit.instruction import parse_number
from ptxkit.isa import TYPE_WIDTHS
from ptxkit.isa_eval import SHUFFLE_MODES, evaluate_each, operation, shuffle_source

from .rounding import FLOAT_MODES, INTEGER_MODES, to_float, to_int, to_integral


class SimulationError(RuntimeError):
    """The kernel does something the interpreter does not model, or that is undefined.

    >>> a = np.zeros(4, np.float32)                       # n = 8 but the buffers hold 4
    >>> launch(open("samples/toolchain/vector_add.ptx").read(), "vector_add", a, a, a, np.uint32(8), block=8)
    Traceback (most recent call last):
    ...
    ptxkit.generators.simulate.SimulationError: line 37: ...: global access past the end of its buffer
    """


_MASK = {1: 1, 8: 0xFF, 16: 0xFFFF, 32: 0xFFFFFFFF, 64: 0xFFFFFFFFFFFFFFFF}
_GLOBAL_STRIDE = 1 << 40  # address space of one global buffer
#: a ``shared::cluster`` address is ``(rank + 1) · _CLUSTER_WINDOW + offset``; below the
#: first window it is the thread's own CTA's ``shared::cta`` address
_CLUSTER_WINDOW = 1 << 24


def launch(ptx, name: str, *args, grid=1, block=32, cluster=1, executions: dict | None = None) -> None:
    """Run entry `name` of `ptx` (text or a parsed ptxkit `Module`); numpy arrays are
    global buffers, updated in place (the same array passed twice is one buffer); a
    `Placed` array starts at an address that is not 256-byte aligned.

    Scalars (numpy or Python ints) are passed by value. `grid` (in CTAs), `block` and
    `cluster` are ints (only the x dimension is modelled); `grid` must be a multiple of
    `cluster`, and with clusters `block` a multiple of 32. `executions`, when given, is
    filled with instruction line -> warp executions (see the module docstring).

    >>> a, b, c = np.arange(6, dtype=np.float32), np.ones(6, np.float32), np.zeros(6, np.float32)
    >>> launch(open("samples/toolchain/vector_add.ptx").read(), "vector_add", a, b, c, np.uint32(6), grid=2, block=4)
    >>> c.tolist()
    [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    """
    program = Program(ptx, name)
    grid, block, cluster = (value[0] if isinstance(value, tuple) else value for value in (grid, block, cluster))
    if cluster < 1 or grid % cluster:
        raise SimulationError(f"grid {grid} is not a whole number of clusters of {cluster}")
    if cluster > 1 and block % 32:
        raise SimulationError("with clusters, the simulator needs blocks of whole warps")
    if program.cluster not in (None, cluster):
        raise SimulationError(f"the kernel requires clusters of {program.cluster} CTAs, launched with {cluster}")
    memory = _GlobalMemory(args)
    for first in range(0, grid, cluster):
        _Cta(program, memory, first, grid, block, cluster).run(executions)
    memory.write_back()


class Program:
    """One entry, decoded: instructions, labels, parameters, shared variables.

    >>> program = Program(open("samples/toolchain/vector_add.ptx").read(), "vector_add")
    >>> program.params, len(program.instructions), program.labels, program.shared_size
    (['a', 'b', 'c', 'n'], 22, {'DONE': 21}, 0)
    """

    def __init__(self, ptx, name: str):
        import ptxkit

        module = ptxkit.parse(ptx, f"<{name}>") if isinstance(ptx, (str, bytes)) else ptx
        function = module.function(name)
        self.params = [p.name for p in function.signature.params]
        required = dict(function.signature.directives).get(".reqnctapercluster")
        self.cluster = None if required is None else int(parse_number(required.split(",")[0]))
        self.widths: dict[str, int] = {}
        self.shared: dict[str, int] = {}
        self.shared_size = 0
        self.instructions = []
        self.labels: dict[str, int] = {}
        for node in function.walk():
            kind = type(node).__name__
            if kind == "Directive" and node.name in (".reg", ".shared"):
                self._declare(node.declaration)
            elif kind == "Label":
                self.labels[node.name] = len(self.instructions)
            elif kind == "Instruction":
                self.instructions.append(node)

    def _declare(self, declaration) -> None:
        if declaration.space == ".reg":
            for reg in declaration.registers():
                self.widths[reg] = TYPE_WIDTHS[declaration.type[1:]]
            return
        align = declaration.align or 4
        element = TYPE_WIDTHS[declaration.type[1:]] // 8 or 1
        for raw in declaration.names:
            match = re.fullmatch(r"([\w$%]+)\s*(?:\[\s*(\d+)\s*\])?", raw)
            self.shared_size = -(-self.shared_size // align) * align
            self.shared[match.group(1)] = self.shared_size
            self.shared_size += element * int(match.group(2) or 1)


class Placed:
    """A global buffer whose first byte is `offset` bytes past a 256-byte boundary (0 to
    255), as a view into a larger allocation would be: accesses are checked against the
    array's own bytes, and alignment against the address the kernel sees.

    >>> a, c = np.arange(6, dtype=np.float32), np.zeros(6, np.float32)
    >>> launch(open("samples/toolchain/vector_add.ptx").read(), "vector_add", Placed(a, 4), a, c, np.uint32(6),
    ...        block=8)
    >>> c.tolist()
    [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    """

    def __init__(self, array: np.ndarray, offset: int):
        if not 0 <= offset < 256:
            raise ValueError(f"offset must be 0 to 255 bytes, got {offset}")
        self.array, self.offset = array, offset


class _GlobalMemory:
    def __init__(self, args):
        self.steps = 0  # the launch's clock (see the module docstring)
        self.params = []
        self.buffers = []
        self.offsets = []
        seen: dict[int, int] = {}
        for arg in args:
            offset = 0
            if isinstance(arg, Placed):
                arg, offset = arg.array, arg.offset
            if isinstance(arg, np.ndarray):
                if id(arg) not in seen:
                    self.buffers.append((arg, arg.view(np.uint8).reshape(-1).copy()))
                    self.offsets.append(offset)
                    seen[id(arg)] = _GLOBAL_STRIDE * len(self.buffers) + offset
                self.params.append(seen[id(arg)])
            else:
                self.params.append(int(arg))

    def locate(self, address: np.ndarray):
        index = address // _GLOBAL_STRIDE - 1
        if len(index) and (index.min() < 0 or index.max() >= len(self.buffers)):
            raise SimulationError("global access outside every buffer")
        placed = np.asarray(self.offsets, np.int64)[index.astype(np.int64)]
        offset = (address % _GLOBAL_STRIDE).astype(np.int64) - placed
        if np.any(offset < 0):
            raise SimulationError("global access before the start of its buffer")
        return index, offset.astype(np.uint64)

    def write_back(self) -> None:
        for array, raw in self.buffers:
            array.view(np.uint8).reshape(-1)[:] = raw


class _Cta:
    """One CTA, or the `cluster` CTAs of a cluster (from CTA `first` on) run as one array of
    threads: `tid` numbers them all (warps and shuffles use it), `rank` is each one's CTA."""

    def __init__(self, program: Program, memory: _GlobalMemory, first: int, grid: int, block: int, cluster: int = 1):
        self.p, self.mem, self.first, self.grid, self.block, self.cluster = program, memory, first, grid, block, cluster
        self.n = block * cluster
        self.regs: dict[str, np.ndarray] = {}
        self.shared = np.zeros(program.shared_size * cluster, np.uint8)  # rank r's at r · shared_size
        self.tid = np.arange(self.n, dtype=np.uint64)
        self.rank = self.tid // np.uint64(block)
        self.tid_in_cta = self.tid % np.uint64(block)
        self.pc = np.zeros(self.n, np.int64)
        self.done = np.zeros(self.n, bool)

    # ---- scheduling ----------------------------------------------------------------------
    def run(self, executions: dict | None = None) -> None:
        count = len(self.p.instructions)
        while not self.done.all():
            waiting = ~self.done
            pc = int(self.pc[waiting].min())
            if pc >= count:
                raise SimulationError("fell off the end of the kernel without ret")
            here = waiting & (self.pc == pc)
            inst = self.p.instructions[pc]
            self.mem.steps += 1
            if executions is not None:
                warps = len(np.unique(self.tid[here] // np.uint64(32)))
                executions[inst.line] = executions.get(inst.line, 0) + warps
            active = here.copy()
            if inst.guard is not None:
                flag = self.read_reg(inst.guard.register).astype(bool)
                active &= ~flag if inst.guard.negated else flag
            self.pc[here] += 1
            try:
                self.execute(inst, here, active)
            except SimulationError as err:
                raise SimulationError(f"line {inst.line}: {inst.code().strip()}: {err}") from None

    # ---- registers and operands -------------------------------------------------------------
    def read_reg(self, name: str) -> np.ndarray:
        if name not in self.regs:
            if name not in self.p.widths:
                raise SimulationError(f"undeclared register {name}")
            self.regs[name] = np.full(self.n, _MASK[self.p.widths[name]], np.uint64)
        return self.regs[name]

    def write(self, name: str, active: np.ndarray, bits: np.ndarray) -> None:
        target = self.read_reg(name)
        target[active] = np.asarray(bits, np.uint64)[active] & np.uint64(_MASK[self.p.widths[name]])

    def value(self, op, bits: int) -> np.ndarray:
        """An operand's bits for every thread (uint64)."""
        if op.kind == "register":
            value = self.read_reg(op.name)
            return ~value & np.uint64(1) if op.negated else value.copy()
        if op.kind == "immediate":
            text = op.text.lstrip("+-")
            if text[:2].lower() == "0f":
                raw = int(text[2:], 16) ^ (0x80000000 if op.text.startswith("-") else 0)
            else:
                raw = int(parse_number(op.text)) & _MASK[64]
            return np.full(self.n, raw & _MASK[max(bits, 32)], np.uint64)
        if op.kind == "special":
            return self.special(op.name)
        if op.kind == "symbol" and op.name in self.p.shared:
            return np.full(self.n, self.p.shared[op.name] + (op.value or 0), np.uint64)
        if op.kind == "vector":
            if len(op.elements) not in (2, 4):
                raise SimulationError(f"unsupported vector {op.text}")
            part = bits // len(op.elements)
            total = np.zeros(self.n, np.uint64)
            for i, element in enumerate(op.elements):
                total |= (self.value(element, part) & np.uint64(_MASK[part])) << np.uint64(part * i)
            return total
        raise SimulationError(f"unsupported operand {op.text}")

    def special(self, name: str) -> np.ndarray:
        tid, rank, cluster = self.tid_in_cta, self.rank, self.cluster
        values = {
            "%tid.x": tid, "%ntid.x": self.block, "%ctaid.x": self.first + rank, "%nctaid.x": self.grid,
            "%laneid": tid % 32, "%warpid": tid // 32, "%tid.y": 0, "%tid.z": 0,
            "%lanemask_eq": np.uint64(1) << (tid % np.uint64(32)), "%smid": (self.first + rank) % np.uint64(8),
            "%nsmid": 8, "%clock": self.mem.steps & 0xFFFFFFFF, "%clock64": self.mem.steps,
            "%globaltimer": self.mem.steps,
            "%ctaid.y": 0, "%ctaid.z": 0, "%ntid.y": 1, "%ntid.z": 1, "%nctaid.y": 1, "%nctaid.z": 1,
            "%cluster_ctarank": rank, "%cluster_nctarank": cluster, "%cluster_ctaid.x": rank,
            "%cluster_nctaid.x": cluster, "%clusterid.x": self.first // cluster, "%nclusterid.x": self.grid // cluster,
            **{f"%{name}.{axis}": 0 for name in ("cluster_ctaid", "clusterid") for axis in "yz"},
            **{f"%{name}.{axis}": 1 for name in ("cluster_nctaid", "nclusterid") for axis in "yz"},
        }
        if name not in values:
            raise SimulationError(f"unsupported special register {name}")
        return np.broadcast_to(np.asarray(values[name], np.uint64), (self.n,)).copy()

    def store(self, op, active, bits: np.ndarray, width: int) -> None:
        """Write a destination operand: a register, or a vector of registers (unpack)."""
        if op.kind == "register":
            self.write(op.name, active, bits)
        elif op.kind == "vector":
            part = width // len(op.elements)
            for i, element in enumerate(op.elements):
                if element.kind != "sink":
                    self.write(element.name, active, (bits >> np.uint64(part * i)) & np.uint64(_MASK[part]))
        elif op.kind != "sink":
            raise SimulationError(f"cannot write to {op.text}")

    # ---- execution -------------------------------------------------------------------------------
    def execute(self, inst, here, active) -> None:
        base, mods, ops = inst.base, inst.modifiers, inst.operands
        handler = _HANDLERS.get(base)
        if handler is None:
            raise SimulationError(f"unsupported instruction {inst.opcode}")
        handler(self, mods, ops, here, active)


# ---- number formats --------------------------------------------------------------------------------
def _f32(bits):
    return (bits & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.float32)


def _from_f32(values):
    return np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)


def _f16(bits):
    return (bits & np.uint64(0xFFFF)).astype(np.uint16).view(np.float16).astype(np.float32)


def _from_f16(values):
    with np.errstate(over="ignore"):
        return np.asarray(values, np.float32).astype(np.float16).view(np.uint16).astype(np.uint64)


def _bf16(bits):
    return ((bits & np.uint64(0xFFFF)).astype(np.uint32) << np.uint32(16)).view(np.float32)


def _from_bf16(values):
    raw = np.asarray(values, np.float32).view(np.uint32).astype(np.uint64)
    rounded = (raw + np.uint64(0x7FFF) + ((raw >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    return np.where(np.isnan(values), np.uint64(0x7FC0), rounded & np.uint64(0xFFFF))


_FLOATS = {"f32": (_f32, _from_f32), "f16": (_f16, _from_f16), "bf16": (_bf16, _from_bf16)}


def _ftz(values):
    tiny = np.abs(values) < np.float32(1.1754944e-38)
    return np.where(tiny & (values != 0), np.copysign(np.float32(0), values), values)


def _float_op(name, values, modifiers):
    if any(mode in modifiers for mode in FLOAT_MODES[1:]):
        raise SimulationError(f"{name} in a rounding mode other than .rn is not modelled")
    if "ftz" in modifiers:
        values = [_ftz(v) for v in values]
    a = values[0]
    with np.errstate(all="ignore"):
        if name in _BINARY:
            result = _BINARY[name](a, values[1])
        elif name in _UNARY:
            result = _UNARY[name](a.astype(np.float64))
        elif name in ("fma", "mad"):
            result = a.astype(np.float64) * values[1].astype(np.float64) + values[2].astype(np.float64)
        elif name in ("max", "min"):
            result = a
            for other in values[1:]:
                result = _max_min(name, result, other, "NaN" in modifiers)
        else:
            raise SimulationError(f"unsupported float operation {name}")
    result = np.asarray(result).astype(np.float32)
    return _ftz(result) if "ftz" in modifiers else result


_BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply,
           "div": lambda a, b: a.astype(np.float64) / b.astype(np.float64)}
_UNARY = {"ex2": np.exp2, "lg2": np.log2, "rcp": np.reciprocal, "sqrt": np.sqrt, "neg": np.negative, "abs": np.abs}


def _max_min(name, a, b, propagate_nan):
    """PTX max/min: the non-NaN operand (or NaN with .NaN); +0 > -0."""
    chosen = np.fmax(a, b) if name == "max" else np.fmin(a, b)
    if propagate_nan:
        chosen = np.where(np.isnan(a) | np.isnan(b), np.float32(np.nan), chosen)
    negative = np.signbit(a) & np.signbit(b) if name == "max" else np.signbit(a) | np.signbit(b)
    signed_zero = np.where(negative, np.float32(-0.0), np.float32(0.0))
    return np.where((a == 0) & (b == 0), signed_zero, chosen).astype(np.float32)


def _arith(cta, mods, ops, here, active, name):
    kind = mods[-1]
    width = TYPE_WIDTHS.get(kind, 32)
    if kind in ("f32", "f16", "bf16"):
        unpack, pack = _FLOATS[kind]
        bits = pack(_float_op(name, [unpack(cta.value(op, width)) for op in ops[1:]], mods))
    elif kind in ("f16x2", "bf16x2", "f32x2"):
        element = kind[:-2]
        unpack, pack = _FLOATS[element]
        half_width = 16 if element != "f32" else 32
        values = [cta.value(op, width) for op in ops[1:]]
        bits = np.zeros(cta.n, np.uint64)
        for half in range(2):
            parts = [unpack(v >> np.uint64(half_width * half)) for v in values]
            bits |= (pack(_float_op(name, parts, mods)) & np.uint64(_MASK[half_width])) << np.uint64(half_width * half)
    else:
        bits = _evaluated(cta, ".".join((name, *mods)), ops, active, width)
    cta.store(ops[0], active, bits, width)


def _signed(values, width):
    v = values.astype(np.int64) if width < 64 else values.view(np.int64)
    if width < 64:
        v = np.where(v >= (1 << (width - 1)), v - (1 << width), v)
    return v


def _evaluated(cta, opcode: str, ops, active, width: int) -> np.ndarray:
    """The destination bits of integer instruction `opcode` for the active threads, from
    the one evaluator of PTX integer semantics (`ptxkit.isa_eval`); 0 elsewhere."""
    found = operation(opcode)
    if found is None or len(ops) - 1 != found.arity:
        raise SimulationError(f"unsupported integer instruction {opcode}")
    rows = np.flatnonzero(active)
    columns = [cta.value(op, width)[rows].tolist() for op in ops[1:]]
    if rows.size and all(column.count(column[0]) == rows.size for column in columns):
        results = [found.apply(*(column[0] for column in columns))]  # the same in every thread: once
    else:
        results = evaluate_each(found, columns) if rows.size else []
    if None in results:  # unspecified: see ptxkit.isa_eval
        raise SimulationError("integer division by zero" if opcode.startswith(("div", "rem"))
                              else f"{opcode}: unspecified for these operands")
    bits = np.zeros(cta.n, np.uint64)
    bits[rows] = np.fromiter(results, np.uint64, len(results)) if len(results) == rows.size else results[0]
    return bits


def _handler(name):
    return lambda cta, mods, ops, here, active: _arith(cta, mods, ops, here, active, name)


def _mov(cta, mods, ops, here, active):
    width = TYPE_WIDTHS[mods[-1]]
    cta.store(ops[0], active, _evaluated(cta, ".".join(("mov", *mods)), ops, active, width), width)


def _cvt(cta, mods, ops, here, active):
    if mods[0] == "to":  # cvta.to.global.u64: generic and global addresses coincide here
        cta.store(ops[0], active, cta.value(ops[1], 64), 64)
        return
    types = [m for m in mods if m in TYPE_WIDTHS]
    out, inp = types[0], types[1]
    if out not in _FLOATS and inp not in _FLOATS:  # between integer types
        cta.store(ops[0], active, _evaluated(cta, ".".join(("cvt", *mods)), ops, active, TYPE_WIDTHS[inp]),
                  TYPE_WIDTHS[out])
        return
    mode = next((m for m in mods if m in FLOAT_MODES or m in INTEGER_MODES), None)
    bits = cta.value(ops[1], TYPE_WIDTHS[inp]) & np.uint64(_MASK[TYPE_WIDTHS[inp]])
    if inp in _FLOATS:
        value = _FLOATS[inp][0](bits).astype(np.float64)
        if "ftz" in mods:
            value = _ftz(value.astype(np.float32)).astype(np.float64)
    elif inp[0] == "s":
        value = _signed(bits, TYPE_WIDTHS[inp])
    else:
        value = bits
    if out in _FLOATS:
        if mode in INTEGER_MODES:
            value = to_integral(value, mode)
        rounded = to_float(value.astype(np.float64), out, mode if mode in FLOAT_MODES else "rn")
        result = _FLOATS[out][1](rounded)
    elif inp in _FLOATS:
        if mode not in INTEGER_MODES:
            raise SimulationError("a float-to-integer cvt needs .rni, .rzi, .rmi or .rpi")
        result = np.array([int(v) & _MASK[TYPE_WIDTHS[out]] for v in to_int(value, out, mode)], np.uint64)
    cta.store(ops[0], active, result, TYPE_WIDTHS[out])


def _testp(cta, mods, ops, here, active):
    kind = mods[-1]
    x = _FLOATS[kind][0](cta.value(ops[1], TYPE_WIDTHS[kind]))
    tiny = np.abs(x) < np.float32(1.1754944e-38)
    with np.errstate(invalid="ignore"):
        tests = {"finite": np.isfinite(x), "infinite": np.isinf(x), "number": ~np.isnan(x),
                 "notanumber": np.isnan(x), "normal": np.isfinite(x) & ~tiny, "subnormal": tiny & (x != 0)}
    if mods[0] not in tests:
        raise SimulationError(f"unsupported testp.{mods[0]}")
    cta.store(ops[0], active, tests[mods[0]].astype(np.uint64), 1)


def _setp(cta, mods, ops, here, active):
    cmp, kind = mods[0], mods[-1]
    width = TYPE_WIDTHS[kind]
    if kind not in _FLOATS:  # the comparison alone; .and/.or/.xor and p|q are applied below
        result = _evaluated(cta, f"setp.{cmp}.{kind}", ops[:3], active, width).astype(bool)
    else:
        result = _float_comparison(cta, cmp, kind, ops, width)
    combine = next((m for m in mods[1:-1] if m in ("and", "or", "xor")), None)
    results = [result, ~result]  # setp p|q: q gets the complement of the comparison
    if combine is not None:  # setp.cmp.and.type p, a, b, c: p = (a cmp b) and c
        other = cta.value(ops[3], 1).astype(bool)
        results = [{"and": r & other, "or": r | other, "xor": r ^ other}[combine] for r in results]
    targets = ops[0].elements if ops[0].kind == "pair" else (ops[0],)
    for target, value in zip(targets, results):
        cta.store(target, active, value.astype(np.uint64), 1)


def _float_comparison(cta, cmp, kind, ops, width):
    a, b = (_FLOATS[kind][0](cta.value(op, width)) for op in ops[1:3])
    unordered = np.isnan(a) | np.isnan(b)
    with np.errstate(invalid="ignore"):
        table = {"eq": a == b, "ne": (a != b) & ~unordered, "lt": a < b, "le": a <= b, "gt": a > b, "ge": a >= b,
                 "num": ~unordered, "nan": unordered}
    if cmp.endswith("u") and cmp[:-1] in table:  # equ, neu, ltu, …: also true when either is NaN
        return table[cmp[:-1]] | unordered
    if cmp in table:
        return table[cmp]
    raise SimulationError(f"unsupported comparison {cmp}")


def _selp(cta, mods, ops, here, active):
    width = TYPE_WIDTHS[mods[-1]]
    cta.store(ops[0], active, _evaluated(cta, ".".join(("selp", *mods)), ops, active, width), width)


def _bra(cta, mods, ops, here, active):
    target = cta.p.labels.get(ops[0].name)
    if target is None:
        raise SimulationError(f"unknown label {ops[0].name}")
    cta.pc[active] = target


def _ret(cta, mods, ops, here, active):
    cta.done |= active


def _address(cta, op) -> np.ndarray:
    base = op.elements[0]
    if base.kind == "register":
        address = cta.read_reg(base.name).copy()
    elif base.kind == "symbol" and base.name in cta.p.shared:
        address = np.full(cta.n, cta.p.shared[base.name], np.uint64)
    elif base.kind == "symbol" and base.name in cta.p.params:
        return np.full(cta.n, cta.p.params.index(base.name), np.int64)
    elif base.kind == "immediate":
        address = np.full(cta.n, int(base.value), np.uint64)
    else:
        raise SimulationError(f"unsupported address {op.text}")
    return (address.astype(np.int64) + int(op.value or 0)).astype(np.int64)


def _vector_count(mods) -> int:
    for m in mods:
        if m in ("v2", "v4", "v8"):
            return int(m[1:])
    return 1


def _access(cta, space, address, active, nbytes):
    """[(memory bytes, rows, byte offsets)]: where the active threads (rows) access."""
    rows = np.flatnonzero(active)
    address = address[active]
    if space.startswith("shared"):
        rank = cta.rank[active].astype(np.int64)
        if space == "shared::cluster":  # another CTA's window, or the thread's own
            window = address // _CLUSTER_WINDOW
            if len(window) and (address.min() < 0 or window.max() > cta.cluster):
                raise SimulationError("shared::cluster access outside the cluster")
            rank = np.where(window > 0, window - 1, rank)
            address = address % _CLUSTER_WINDOW
        size = cta.p.shared_size
        if len(address) and (address.min() < 0 or address.max() + nbytes > size):
            raise SimulationError("shared access out of bounds")
        if np.any(address % nbytes):
            raise SimulationError(f"misaligned {nbytes}-byte shared access")
        return [(cta.shared, rows, rank * size + address)]
    index, offset = cta.mem.locate(address.astype(np.uint64))
    if np.any(address % nbytes):
        raise SimulationError(f"misaligned {nbytes}-byte global access")
    parts = []
    for i in np.unique(index):
        raw = cta.mem.buffers[int(i)][1]
        chosen = index == i
        offsets = offset[chosen].astype(np.int64)
        if offsets.max() + nbytes > len(raw):
            raise SimulationError("global access past the end of its buffer")
        parts.append((raw, rows[chosen], offsets))
    return parts


_SPACES = ("global", "shared", "shared::cta", "shared::cluster")


def _ld(cta, mods, ops, here, active):
    space = next((m for m in mods if m == "param" or m in _SPACES), None)
    kind = mods[-1]
    count = _vector_count(mods)
    width = TYPE_WIDTHS[kind]
    if space == "param":
        index = _address(cta, ops[1])[0]
        cta.store(ops[0], active, np.full(cta.n, cta.mem.params[index], np.uint64), 64)
        return
    if space is None:
        raise SimulationError("generic addressing is not modelled")
    nbytes = width // 8 * count
    address = _address(cta, ops[1])
    loaded = np.zeros((cta.n, nbytes), np.uint8)
    for memory, rows, offsets in _access(cta, space, address, active, nbytes):
        loaded[rows] = memory[offsets[:, None] + np.arange(nbytes)]
    values = loaded.view(f"<u{width // 8}").astype(np.uint64)
    targets = ops[0].elements if ops[0].kind == "vector" else (ops[0],)
    for i, target in enumerate(targets):
        if target.kind != "sink":
            cta.write(target.name, active, values[:, i])


def _st(cta, mods, ops, here, active):
    space = next((m for m in mods if m in _SPACES), None)
    if space is None:
        raise SimulationError("generic addressing is not modelled")
    kind = mods[-1]
    count = _vector_count(mods)
    width = TYPE_WIDTHS[kind]
    nbytes = width // 8 * count
    sources = ops[1].elements if ops[1].kind == "vector" else (ops[1],)
    values = np.stack([cta.value(s, width) & np.uint64(_MASK[width]) for s in sources], axis=1)
    data = values.astype(f"<u{width // 8}").view(np.uint8).reshape(cta.n, nbytes)
    address = _address(cta, ops[0])
    for memory, rows, offsets in _access(cta, space, address, active, nbytes):
        memory[offsets[:, None] + np.arange(nbytes)] = data[rows]


#: The atomic operations modelled, each as the instruction that computes the new value
#: from the old one and the operand (`ptxkit.isa_eval`); exch stores the operand.
_ATOMIC = ("add", "min", "max", "and", "or", "xor", "exch")


def _atom(cta, mods, ops, here, active):
    """``atom.space.op.type d, [a], b`` and ``red.space.op.type [a], b``: each active thread
    in turn (in thread order) reads the old value, stores the new one; ``atom`` returns
    the old value."""
    space = next((m for m in mods if m in _SPACES), None)
    if space is None:
        raise SimulationError("generic addressing is not modelled")
    name = next((m for m in mods if m in _ATOMIC), None)
    kind = mods[-1]
    if name is None or kind not in ("b32", "u32", "s32", "b64", "u64", "s64"):
        raise SimulationError(f"atomic {'.'.join(mods)} is not modelled")
    width = TYPE_WIDTHS[kind]
    nbytes, mask = width // 8, _MASK[width]
    signedness = "b" if name in ("and", "or", "xor") else "u" if kind[0] == "b" else kind[0]
    combine = None if name == "exch" else operation(f"{name}.{signedness}{width}")
    returns = ops[0].kind != "memory"
    address_op, value_op = (ops[1], ops[2]) if returns else (ops[0], ops[1])
    values = cta.value(value_op, width) & np.uint64(mask)
    old = np.zeros(cta.n, np.uint64)
    for memory, rows, offsets in _access(cta, space, _address(cta, address_op), active, nbytes):
        for row, offset in zip(rows, offsets):
            raw = memory[offset: offset + nbytes]
            before = int(raw.view(f"<u{nbytes}")[0])
            operand = int(values[row])
            result = operand & mask if combine is None else combine.apply(before, operand)
            raw[:] = np.array([result], f"<u{nbytes}").view(np.uint8)
            old[row] = before
    if returns:
        cta.store(ops[0], active, old, width)


def _check_members(cta, here, members):
    """Every lane named in a member mask must be executing this instruction, and vice versa."""
    lanes = cta.tid % np.uint64(32)
    bit = np.uint64(1) << lanes
    if np.any(here & ((members & bit) == 0)):
        raise SimulationError("a thread executes a .sync instruction without its lane in the member mask")
    for warp in np.unique(cta.tid[here] // np.uint64(32)):
        in_warp = (cta.tid // np.uint64(32)) == warp
        present = int(np.bitwise_or.reduce(bit[here & in_warp]))
        needed = int(np.bitwise_or.reduce(members[here & in_warp]))
        if needed & ~present:
            raise SimulationError(f"member lanes {needed & ~present:#010x} of warp {int(warp)} are not executing")


def _shfl(cta, mods, ops, here, active):
    mode = next((m for m in mods if m in SHUFFLE_MODES), None)
    if mode is None:
        raise SimulationError(f"shfl.{'.'.join(mods)} has no mode")
    value = cta.value(ops[1], 32)
    lanes, offsets = cta.tid % np.uint64(32), cta.value(ops[2], 32) & np.uint64(31)
    clamps = cta.value(ops[3], 32) & np.uint64(0x1F1F)
    members = cta.value(ops[4], 32) & np.uint64(0xFFFFFFFF)
    _check_members(cta, active, members)
    source, in_range = lanes.copy(), np.zeros(cta.n, np.uint64)
    for clamp in np.unique(clamps[active]):
        chosen = active & (clamps == clamp)
        table = _shuffle_table(mode, int(clamp))
        source[chosen], in_range[chosen] = table[:, lanes[chosen], offsets[chosen]]
    if np.any(active & ((members >> source) & np.uint64(1) == 0)):
        raise SimulationError("shfl.sync reads a lane outside the member mask")
    index = (cta.tid - lanes + source).astype(np.int64)
    targets = ops[0].elements if ops[0].kind == "pair" else (ops[0],)
    for target, result in zip(targets, (value[index], in_range)):
        cta.store(target, active, result, 32)


def _shuffle_table(mode: str, clamp: int) -> np.ndarray:
    """``table[0][lane, b]``: the lane that `lane` reads for offset `b` (`shuffle_source`);
    ``table[1][lane, b]``: 1 where that lane is in range. Made once per mode and clamp."""
    key = (mode, clamp)
    if key not in _SHUFFLE_TABLES:
        found = [shuffle_source(mode, lane, b, clamp) for lane in range(32) for b in range(32)]
        _SHUFFLE_TABLES[key] = np.array(found, np.uint64).T.reshape(2, 32, 32)
    return _SHUFFLE_TABLES[key]


_SHUFFLE_TABLES: dict[tuple[str, int], np.ndarray] = {}


def _activemask(cta, mods, ops, here, active):
    lanes = cta.tid % np.uint64(32)
    warps = cta.tid // np.uint64(32)
    result = np.zeros(cta.n, np.uint64)
    for warp in np.unique(warps[here]):
        in_warp = warps == warp
        result[in_warp] = np.bitwise_or.reduce(np.uint64(1) << lanes[here & in_warp])
    cta.store(ops[0], active, result, 32)


def _redux(cta, mods, ops, here, active):
    name, kind = mods[1], mods[-1]
    if kind not in ("s32", "u32"):
        raise SimulationError(f"redux.sync.{kind} is not modelled")
    value = cta.value(ops[1], 32) & np.uint64(0xFFFFFFFF)
    members = cta.value(ops[2], 32) & np.uint64(0xFFFFFFFF)
    _check_members(cta, active, members)
    numbers = _signed(value, 32) if kind == "s32" else value.astype(np.int64)
    result = np.zeros(cta.n, np.uint64)
    warp_base = cta.tid - cta.tid % np.uint64(32)
    for t in np.flatnonzero(active):
        group = [int(warp_base[t]) + lane for lane in range(32) if int(members[t]) >> lane & 1]
        chosen = numbers[group]
        total = {"add": chosen.sum(), "max": chosen.max(), "min": chosen.min()}[name]
        result[t] = np.uint64(int(total) & 0xFFFFFFFF)
    cta.store(ops[0], active, result, 32)


def _bar(cta, mods, ops, here, active):
    if "cluster" in mods:
        if np.any(~cta.done & ~here):
            raise SimulationError("barrier.cluster is not reached by every thread of the cluster")
        return
    for rank in np.unique(cta.rank[here]):
        if np.any(~cta.done & ~here & (cta.rank == rank)):
            raise SimulationError("bar.sync is not reached by every thread of the CTA")


def _mapa(cta, mods, ops, here, active):
    """``mapa.shared::cluster.u32 d, a, rank``: the same shared variable in CTA `rank`."""
    if "shared::cluster" not in mods or mods[-1] != "u32":
        raise SimulationError("only mapa.shared::cluster.u32 is modelled")
    rank = cta.value(ops[2], 32)
    if np.any(active & (rank >= np.uint64(cta.cluster))):
        raise SimulationError(f"mapa to a CTA rank outside the cluster of {cta.cluster}")
    offset = cta.value(ops[1], 32) % np.uint64(_CLUSTER_WINDOW)
    cta.store(ops[0], active, (rank + np.uint64(1)) * np.uint64(_CLUSTER_WINDOW) + offset, 32)


def _nothing(cta, mods, ops, here, active):
    return None


_HANDLERS = {
    "mov": _mov, "cvt": _cvt, "cvta": _cvt, "setp": _setp, "selp": _selp, "bra": _bra, "ret": _ret,
    "exit": _ret, "ld": _ld, "st": _st, "shfl": _shfl, "activemask": _activemask, "redux": _redux,
    "bar": _bar, "barrier": _bar, "fence": _nothing, "mapa": _mapa, "testp": _testp, "atom": _atom, "red": _atom,
    **{name: _handler(name) for name in ("add", "sub", "mul", "mad", "fma", "div", "rem", "max", "min", "and", "or",
                                         "xor", "not", "shl", "shr", "neg", "abs", "ex2", "lg2", "rcp", "sqrt", "cnot",
                                         "popc", "clz", "brev", "bfind", "bfe", "bfi", "prmt", "slct")},
}
