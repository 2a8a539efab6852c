"""The runnable Hopper samples (``samples/hopper/*.ptx``, shipped without proxy fences).

Three layers, from cheapest to the GPU:

- where ``ptxkit fence`` puts the fences in each sample (exact text positions), and that
  the fenced text still assembles (marker ``ptxas``; ``cuobjdump -sass`` shows
  ``FENCE.VIEW.ASYNC`` where a fence was added, when cuobjdump is installed);
- a CPU model (`CtaModel`) that executes each kernel's address arithmetic for all its
  threads (128, or 256 for the warp-specialized samples, whose named barriers and
  mbarriers it follows), tracking which global element every shared-memory byte holds, and checks
  every wgmma against the PTX ISA's shared-memory matrix layout (descriptor fields,
  K-major no-swizzle core matrices), every TMA box, every stmatrix and every store of
  the accumulator fragment: the addresses are right before the kernel ever runs;
- on an H200 (marker ``gpu``): assemble the fenced sample, run it through
  ``ptxkit.runtime`` on random data and compare with a numpy float64 reference.
"""

from __future__ import annotations

import dataclasses
import operator
import os
import re
import subprocess
import tempfile
from pathlib import Path

import numpy as np
import pytest

import ptxkit

SAMPLES_DIR = Path(__file__).resolve().parent.parent / "samples" / "hopper"
FENCE = "fence.proxy.async.shared::cta;"


@dataclasses.dataclass(frozen=True)
class Sample:
    """What a sample computes: C (64 x n) = A (64 x k) * B (n x k)^T, f16 in, f32 accumulate.

    `threads`: the block size it is launched with; `mma_warpgroup`: the warpgroup that runs
    the wgmma and stores C (the warp-specialized samples: 1, after the producer's 0);
    `tiled`: the sample takes C's row length and K's block count as ``.u32`` parameters
    after C and computes the 64 x 64 tile of C at (64 ctaid.y, 64 ctaid.x), so that it runs
    over a grid of tiles; `dynamic_shared`: the bytes of dynamic shared memory it needs.
    """

    name: str
    n: int
    k: int
    uses_tma: bool = False
    out_dtype: type = np.float32
    threads: int = 128
    mma_warpgroup: int = 0
    tiled: bool = False
    dynamic_shared: int = 0

    @property
    def mma_threads(self) -> range:
        return range(128 * self.mma_warpgroup, 128 * self.mma_warpgroup + 128)

    @property
    def warp_specialized(self) -> bool:
        return self.threads > 128

    @property
    def text(self) -> str:
        return (SAMPLES_DIR / f"{self.name}.ptx").read_text()

    @property
    def path(self) -> str:
        return str(SAMPLES_DIR / f"{self.name}.ptx")


SAMPLES = {
    s.name: s
    for s in (
        Sample("gemm_store_once", n=64, k=128),
        Sample("gemm_store_in_loop", n=64, k=256),
        Sample("gemm_added_descriptors", n=64, k=256),
        Sample("gemm_cp_async", n=128, k=256),
        Sample("gemm_store_branch", n=64, k=64),
        Sample("epilogue_tma_store", n=64, k=64, uses_tma=True, out_dtype=np.float16),
        Sample("tma_wgmma_mainloop", n=64, k=256, uses_tma=True),
        Sample("ws_named_barrier", n=64, k=256, threads=256, mma_warpgroup=1),
        Sample("ws_mbarrier", n=64, k=256, threads=256, mma_warpgroup=1),
        Sample("ws_tma_pipeline", n=64, k=512, uses_tma=True, threads=256, mma_warpgroup=1, tiled=True,
               dynamic_shared=4 * 16384),
    )
}
#: The warp-specialized samples whose producer writes the tiles with st.shared (a hand-off
#: that needs a fence); warpgroup 1 runs the wgmma. (ws_tma_pipeline's producer copies with
#: TMA into a ring of stages: nothing to fence.)
WS_NAMES = sorted(name for name, sample in SAMPLES.items() if sample.warp_specialized and not sample.uses_tma)
NAMES = sorted(SAMPLES)
#: Each sample's fences after `ptxkit fence` (every one is fence.proxy.async.shared::cta).
FENCE_COUNT = {name: 1 for name in NAMES} | {"tma_wgmma_mainloop": 0, "ws_tma_pipeline": 0}


def fence(sample: Sample, fence_side: str = "issuer"):
    """(fenced text, report) of a sample, through the library API."""
    from ptxkit.cfg.fence.fence import fence_text

    return fence_text(sample.text, filename=f"{sample.name}.ptx", fence_side=fence_side)


# --------------------------------------------------------------------------------------
# The PTX ISA's rules, written down once (PTX ISA 9.0, section 9.7.15.5.1)
# --------------------------------------------------------------------------------------


def decode_descriptor(desc: int) -> dict[str, int]:
    """The fields of a wgmma shared-memory matrix descriptor (bytes, decoded).

    Bits 0-13: start address >> 4; 16-29: leading-dimension byte offset >> 4;
    32-45: stride-dimension byte offset >> 4; 49-51: base offset; 62-63: swizzle mode
    (0 none, 1 128B, 2 64B, 3 32B).

    >>> decode_descriptor((0x400 >> 4) | (16 << 16) | (8 << 32))
    {'start': 1024, 'lbo': 256, 'sbo': 128, 'base_offset': 0, 'swizzle': 0}
    """
    return {
        "start": (desc & 0x3FFF) << 4,
        "lbo": ((desc >> 16) & 0x3FFF) << 4,
        "sbo": ((desc >> 32) & 0x3FFF) << 4,
        "base_offset": (desc >> 49) & 0x7,
        "swizzle": (desc >> 62) & 0x3,
    }


def kmajor_address(desc: int, row: int, k: int, element_bytes: int = 2) -> int:
    """Shared-memory byte address of element (row, k) of a K-major, no-swizzle operand.

    The ISA's canonical layout ``((8,m),(T,2k)):((1T,SBO),(1,LBO))`` in units of
    elements, T = 16 bytes / element size: a core matrix is 8 rows of 16 bytes, stored
    contiguously; the next 8 rows are SBO bytes further, the next 16 bytes of K are LBO
    bytes further.
    """
    fields = decode_descriptor(desc)
    assert fields["swizzle"] == 0, "the samples use no swizzling"
    per_chunk = 16 // element_bytes
    return (
        fields["start"]
        + (row % 8) * 16
        + (row // 8) * fields["sbo"]
        + (k % per_chunk) * element_bytes
        + (k // per_chunk) * fields["lbo"]
    )


def accumulator_position(thread: int, register: int) -> tuple[int, int]:
    """(row, column) of f32 accumulator register `register` of warpgroup thread `thread`
    for wgmma .m64nNk16: warp w, lane l hold rows 16w + l/4 (registers 4j, 4j+1) and
    16w + l/4 + 8 (registers 4j+2, 4j+3), columns 8j + 2(l%4) and +1.

    >>> accumulator_position(0, 0), accumulator_position(37, 6)
    ((0, 0), (25, 10))
    """
    warp, lane = divmod(thread, 32)
    chunk, slot = divmod(register, 4)
    row = 16 * warp + lane // 4 + 8 * (slot // 2)
    return row, 8 * chunk + 2 * (lane % 4) + slot % 2


def test_kmajor_address_matches_the_isa_example():
    """The ISA's own example (K-major, no swizzle, tf32, T = 4): exact layout
    ((8,2),(4,4)):((4,32),(1,64)) in elements, LBO = 64*4 bytes, SBO = 32*4 bytes."""
    desc = ((64 * 4) >> 4 << 16) | ((32 * 4) >> 4 << 32)
    assert ((desc >> 16) & 0x3FFF, (desc >> 32) & 0x3FFF) == (16, 8)  # the ISA's encodings
    for row in range(16):
        for k in range(16):
            elements = (row % 8) * 4 + (row // 8) * 32 + (k % 4) * 1 + (k // 4) * 64
            assert kmajor_address(desc, row, k, element_bytes=4) == 4 * elements


def test_kmajor_address_of_core_matrices():
    """f16: rows of a core matrix are 16 bytes apart and hold 8 consecutive k."""
    desc = (1024 >> 4) | (1024 >> 4 << 16) | (128 >> 4 << 32)
    assert [kmajor_address(desc, 0, k) for k in range(9)] == [1024 + 2 * k for k in range(8)] + [2048]
    assert [kmajor_address(desc, r, 0) for r in (0, 1, 7, 8, 9)] == [1024, 1040, 1136, 1152, 1168]


@pytest.mark.parametrize("n", [64, 128])
def test_accumulator_fragment_covers_the_tile_once(n):
    positions = [accumulator_position(t, i) for t in range(128) for i in range(n // 2)]
    assert len(set(positions)) == 64 * n
    assert {r for r, _ in positions} == set(range(64)) and {c for _, c in positions} == set(range(n))


# --------------------------------------------------------------------------------------
# A CPU model of one CTA: follows addresses and which element each byte holds
# --------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Word:
    """Four bytes read from global array `array` at byte `offset` (two f16 elements)."""

    array: str
    offset: int


@dataclasses.dataclass(frozen=True)
class Acc:
    """Accumulator register `register` of thread `thread` after a wgmma."""

    thread: int
    register: int


@dataclasses.dataclass(frozen=True)
class Packed:
    """cvt.rn.f16x2.f32 of two accumulators: `low` goes to the lower 16 bits."""

    high: Acc
    low: Acc


@dataclasses.dataclass
class Mbarrier:
    """An mbarrier: the current phase completes as soon as `count` arrivals happened and
    the expected transaction bytes (expect_tx) all arrived (TMA complete_tx).
    ``try_wait.parity P`` succeeds once the phase of parity P is complete, that is while
    the current phase's parity is not P (so a fresh mbarrier passes parity 1 at once).

    >>> bar = Mbarrier(2)
    >>> bar.phase_done(0), bar.phase_done(1)
    (False, True)
    >>> bar.arrive(); bar.phase_done(0)
    False
    >>> bar.arrive(); bar.phase_done(0), bar.phase_done(1)
    (True, False)
    """

    count: int
    arrivals: int = 0
    pending_bytes: int = 0
    completed_phases: int = 0

    def arrive(self, expect_bytes: int = 0) -> None:
        assert self.arrivals < self.count, "more arrivals than the mbarrier's count in one phase"
        self.arrivals += 1
        self.pending_bytes += expect_bytes
        self._settle()

    def complete_tx(self, received: int) -> None:
        self.pending_bytes -= received
        self._settle()

    def _settle(self) -> None:
        if self.arrivals == self.count and self.pending_bytes == 0:
            self.completed_phases += 1
            self.arrivals = 0

    def phase_done(self, parity: int) -> bool:
        return (self.completed_phases & 1) != parity


@dataclasses.dataclass
class NamedBarrier:
    """A named barrier (``bar.sync``/``bar.arrive`` id, count): it completes as soon as
    `count` threads arrived in the current generation, which lets the threads waiting
    in ``bar.sync`` go on; every arrival of one generation gives the same count.

    >>> bar = NamedBarrier()
    >>> [bar.arrive(2) for _ in range(3)], bar.generation, bar.arrivals
    ([0, 0, 1], 1, 1)
    """

    count: int = 0
    arrivals: int = 0
    generation: int = 0

    def arrive(self, count: int) -> int:
        """Count one thread's arrival; returns the generation it arrived in."""
        if self.arrivals == 0:
            self.count = count
        assert count == self.count, f"arrivals of one generation give {self.count} and {count} threads"
        arrived_in = self.generation
        self.arrivals += 1
        if self.arrivals == self.count:
            self.generation += 1
            self.arrivals = 0
        return arrived_in


ARITHMETIC = {
    "add": operator.add,
    "sub": operator.sub,
    "shl": operator.lshift,
    "shr": operator.rshift,
    "and": operator.and_,
    "or": operator.or_,
    "xor": operator.xor,
}
COMPARE = {"lt": operator.lt, "ge": operator.ge, "ne": operator.ne, "eq": operator.eq}


class CtaModel:
    """Executes a sample's instructions for each of its threads (`Sample.threads`),
    tracking integer registers exactly and data as tags (`Word`, `Acc`). Shared memory
    maps each 2-byte address to the global element (array, byte offset) or accumulator
    it holds. Every wgmma, TMA box, stmatrix and global store is checked against the
    sample's shapes; an instruction the model does not know fails the test.

    Scheduling, in rounds: every thread that may run goes on until it waits (``bar.sync``
    on a named barrier, ``mbarrier.try_wait.parity``) or ends; then the waits that are
    satisfied let their threads go on in the next round. ``bar.arrive`` and
    ``mbarrier.arrive`` never wait. A named barrier completes when its thread count
    arrived (`NamedBarrier`), an mbarrier phase when its arrivals and bytes did
    (`Mbarrier`). Threads that wait on the same barrier move on together, so each
    warpgroup stays in lock step; a producer runs as far ahead as its barriers let it,
    so a wgmma checked after a wait sees exactly what the hand-off guarantees. A round
    in which no thread can go on while some still wait is a hang and fails the test.
    """

    GLOBAL = 1 << 36  # kernel parameter i lives at (i + 1) * GLOBAL

    def __init__(self, sample: Sample, text: str, boxes: dict[str, tuple[int, int]] | None = None):
        self.sample = sample
        module = ptxkit.parse(text, f"{sample.name}.ptx")
        function = module.function(sample.name)
        self.params = [p.name for p in function.signature.params]
        #: the values of a tiled sample's .u32 parameters (one CTA: C is 64 x n)
        self.scalars = {f"{sample.name}_n": sample.n, f"{sample.name}_k_blocks": sample.k // 64}
        self.code = [node for node in function.body.items if not isinstance(node, ptxkit.Directive)]
        self.labels = {n.name: i for i, n in enumerate(self.code) if isinstance(n, ptxkit.Label)}
        self.shared = self._allocate_shared(function, module)
        self.boxes = boxes or {}
        self.smem: dict[int, object] = {}
        self.out: dict[int, object] = {}  # byte offset in C -> Acc
        self.fences = [0] * sample.threads
        self.wgmma_checked: set = set()
        self.wgmma_count = [0] * sample.threads
        self.wgmma_reads: set[int] = set()  # 2-byte shared addresses some wgmma read
        self.stmatrix: list[tuple[int, int, int, tuple]] = []  # (thread, sequence, address, regs)
        self.mbarriers: dict[int, Mbarrier] = {}
        self.named: dict[int, NamedBarrier] = {}

    # -- layout of the kernel's variables and parameters ---------------------------------
    @staticmethod
    def _allocate_shared(function, module) -> dict[str, int]:
        """Static shared variables in order of declaration, then the dynamic shared memory
        (a module's ``.extern .shared``) at the next multiple of its alignment."""
        address, placed = 0, {}
        for node in function.body.items:
            declaration = node.declaration if isinstance(node, ptxkit.Directive) else None
            if declaration is None or declaration.space != ".shared":
                continue
            for name in declaration.names:
                base, _, count = name.partition("[")
                size = int(count.rstrip("]")) if count else 8
                align = declaration.align or 8
                address = -(-address // align) * align
                placed[base] = address
                address += size
        for node in module.items:
            declaration = node.declaration if isinstance(node, ptxkit.Directive) else None
            if declaration is not None and declaration.space == ".shared":
                align = declaration.align or 16
                placed[declaration.names[0].partition("[")[0]] = -(-address // align) * align
        return placed

    def _param_address(self, name: str) -> int:
        return (self.params.index(name) + 1) * self.GLOBAL

    def _global(self, address: int) -> tuple[str, int]:
        index, offset = divmod(address, self.GLOBAL)
        return self.params[index - 1].rsplit("_", 1)[-1].upper(), offset

    # -- running ---------------------------------------------------------------------------
    def run(self) -> "CtaModel":
        threads = {tid: self._thread(tid) for tid in range(self.sample.threads)}
        waiting: dict[int, object] = {}  # thread -> a function saying whether it may go on
        runnable = list(threads)
        while threads:
            for tid in runnable:
                ready = next(threads[tid], None)
                if ready is None:
                    del threads[tid]
                else:
                    waiting[tid] = ready
            self._flush_stmatrix()
            runnable = sorted(tid for tid, ready in waiting.items() if ready())
            for tid in runnable:
                del waiting[tid]
            assert runnable or not threads, (
                f"threads {min(waiting)}..{max(waiting)} wait forever (the kernel would hang)"
            )
        return self

    def _arrive_named(self, node, regs) -> tuple[NamedBarrier, int]:
        """``bar.sync``/``bar.arrive a{, b}``: barrier a, b threads (default: the CTA)."""
        ops = node.operands
        count = self._value(ops[1], regs) if len(ops) > 1 else self.sample.threads
        assert count % 32 == 0 and 0 < count <= self.sample.threads, f"{node.text}: thread count {count}"
        barrier = self.named.setdefault(self._value(ops[0], regs), NamedBarrier())
        return barrier, barrier.arrive(count)

    def _thread(self, tid: int):
        regs: dict[str, object] = {"%tid.x": tid, "%ctaid.x": 0, "%ctaid.y": 0}
        pc = 0
        while pc < len(self.code):
            node = self.code[pc]
            pc += 1
            if isinstance(node, ptxkit.Label):
                continue
            guard = node.guard
            if guard is not None and bool(regs[guard.register]) == guard.negated:
                continue
            base, opcode = node.base, node.opcode
            if base == "bra":
                pc = self.labels[node.operands[0].name]
            elif base == "ret":
                return
            elif opcode in ("bar.sync", "bar.arrive"):
                barrier, generation = self._arrive_named(node, regs)
                if opcode == "bar.sync":
                    yield lambda barrier=barrier, generation=generation: barrier.generation > generation
            elif opcode_is(node, "mbarrier.try_wait.parity"):
                done, address, parity = node.operands
                barrier = self.mbarriers[self._address(address, regs)]
                yield lambda barrier=barrier, parity=self._value(parity, regs): barrier.phase_done(parity)
                regs[done.name] = True  # the model only lets the thread go on once it would succeed
            else:
                self._execute(node, regs, tid)

    def _value(self, operand, regs):
        if operand.kind in ("register", "special"):
            return regs[operand.name]
        if operand.kind == "immediate":
            return operand.value
        if operand.kind == "symbol":
            if operand.name in self.shared:
                return self.shared[operand.name]
            return self._param_address(operand.name)
        raise AssertionError(f"model: unexpected operand {operand.text!r}")

    def _address(self, operand, regs) -> int:
        assert operand.kind == "memory", operand.text
        return self._value(operand.elements[0], regs) + (operand.value or 0)

    def _execute(self, node, regs, tid):  # one branch per opcode family
        ops = node.operands
        base, mods = node.base, node.modifiers
        bits = 64 if any(m[1:] == "64" for m in mods if m[:1] in "ubs") else 32
        mask = (1 << bits) - 1

        def value(i):
            return self._value(ops[i], regs)

        if base in ARITHMETIC:
            regs[ops[0].name] = ARITHMETIC[base](value(1), value(2)) & mask
        elif base == "mov" or (base == "cvta" and "to" in mods) or opcode_is(node, "cvta.param"):
            regs[ops[0].name] = value(1)
        elif opcode_is(node, "cvt.u64.u32"):
            regs[ops[0].name] = value(1) & 0xFFFFFFFF
        elif opcode_is(node, "mul.wide"):
            regs[ops[0].name] = value(1) * value(2)
        elif opcode_is(node, "mad.lo"):
            regs[ops[0].name] = (value(1) * value(2) + value(3)) & mask
        elif base == "setp":
            regs[ops[0].name] = COMPARE[mods[0]](value(1), value(2))
        elif opcode_is(node, "ld.param"):
            name = ops[1].elements[0].name
            regs[ops[0].name] = self.scalars[name] if name in self.scalars else self._param_address(name)
        elif opcode_is(node, "ld.global.v4.b32"):
            array, offset = self._global(self._address(ops[1], regs))
            for i, register in enumerate(ops[0].elements):
                regs[register.name] = Word(array, offset + 4 * i)
        elif opcode_is(node, "st.shared.v4.b32"):
            address = self._address(ops[0], regs)
            for i, register in enumerate(ops[1].elements):
                self._store_word(address + 4 * i, regs[register.name])
        elif opcode_is(node, "cp.async.cg.shared.global"):
            assert ops[2].value == 16
            array, offset = self._global(self._address(ops[1], regs))
            for i in range(4):
                self._store_word(self._address(ops[0], regs) + 4 * i, Word(array, offset + 4 * i))
        elif opcode_is(node, "cp.async.bulk.tensor.2d.shared::cluster.global"):
            received = self._tma_load(self._address(ops[0], regs), ops[1], regs)
            self.mbarriers[self._address(ops[2], regs)].complete_tx(received)
        elif opcode_is(node, "cp.async.bulk.tensor.2d.global.shared::cta"):
            self._tma_store(ops[0], self._address(ops[1], regs), regs)
        elif opcode_is(node, "wgmma.mma_async"):
            self._wgmma(node, regs, tid)
        elif opcode_is(node, "cvt.rn.f16x2.f32"):
            regs[ops[0].name] = Packed(regs[ops[1].name], regs[ops[2].name])
        elif opcode_is(node, "stmatrix.sync.aligned.m8n8.x4"):
            sequence = sum(1 for t, *_ in self.stmatrix if t == tid)
            registers = tuple(regs[r.name] for r in ops[1].elements)
            self.stmatrix.append((tid, sequence, self._address(ops[0], regs), registers))
        elif opcode_is(node, "st.global.v2.f32"):
            array, offset = self._global(self._address(ops[0], regs))
            assert array == "C"
            for i, register in enumerate(ops[1].elements):
                assert offset + 4 * i not in self.out, "two stores to one element of C"
                self.out[offset + 4 * i] = regs[register.name]
        elif opcode_is(node, "fence.proxy.async"):
            self.fences[tid] += 1
        elif opcode_is(node, "mbarrier.init"):
            self.mbarriers[self._address(ops[0], regs)] = Mbarrier(value(1))
        elif opcode_is(node, "mbarrier.arrive.expect_tx"):
            self.mbarriers[self._address(ops[1], regs)].arrive(value(2))
            regs[ops[0].name] = 0  # the state token
        elif opcode_is(node, "mbarrier.arrive"):
            self.mbarriers[self._address(ops[1], regs)].arrive()
            regs[ops[0].name] = 0
        elif node.opcode in NO_EFFECT:
            pass
        else:
            raise AssertionError(f"model does not know {node.opcode!r}")

    def _store_word(self, address: int, word: Word) -> None:
        assert isinstance(word, Word) and address % 4 == 0
        self.smem[address] = (word.array, word.offset)
        self.smem[address + 2] = (word.array, word.offset + 2)

    def _tensor(self, operand, regs) -> tuple[str, int, int, int, int]:
        """(array, column, row, box rows, box columns) of a TMA tensor operand."""
        tensor_map, coordinates = operand.elements
        array, _ = self._global(self._value(tensor_map, regs))
        column, row = (self._value(c, regs) for c in coordinates.elements)
        return (array, column, row, *self.boxes[array])

    def _tma_load(self, destination: int, operand, regs) -> int:
        """Write a box into shared memory (row-major, no swizzle); returns its bytes."""
        array, column, row, rows, columns = self._tensor(operand, regs)
        width = self.sample.k  # A and B are row-major with k columns
        for r in range(rows):
            for c in range(columns):
                self.smem[destination + 2 * (r * columns + c)] = (array, 2 * ((row + r) * width + column + c))
        return 2 * rows * columns

    def _tma_store(self, operand, source: int, regs) -> None:
        array, column, row, rows, columns = self._tensor(operand, regs)
        assert array == "C"
        for r in range(rows):
            for c in range(columns):
                held = self.smem.get(source + 2 * (r * columns + c))
                self.out[2 * ((row + r) * self.sample.n + column + c)] = held

    def _flush_stmatrix(self) -> None:
        """Apply the stmatrix .x4 of each warp: lane l's address is row l%8 of matrix l/8;
        register q of lane l holds row l/4, columns 2(l%4) (low half) and +1 of matrix q."""
        pending, self.stmatrix = self.stmatrix, []
        groups: dict[tuple[int, int], dict[int, tuple]] = {}
        for tid, sequence, address, registers in pending:
            groups.setdefault((tid // 32, sequence), {})[tid % 32] = (address, registers)
        for lanes in groups.values():
            assert len(lanes) == 32, "stmatrix is executed by whole warps"
            for lane, (_, registers) in lanes.items():
                for q, packed in enumerate(registers):
                    row_address = lanes[8 * q + lane // 4][0]
                    self.smem[row_address + 4 * (lane % 4)] = packed.low
                    self.smem[row_address + 4 * (lane % 4) + 2] = packed.high

    def _wgmma(self, node, regs, tid: int) -> None:
        shape = re.search(r"m64n(\d+)k16", node.opcode)
        n = int(shape.group(1))
        assert n == self.sample.n and node.modifiers[-3:] == ("f32", "f16", "f16")
        accumulators, desc_a, desc_b, _scale, *immediates = node.operands
        assert [o.value for o in immediates] == [1, 1, 0, 0], "no negation, both operands K-major"
        assert tid in self.sample.mma_threads, f"thread {tid} runs a wgmma outside warpgroup {self.sample.mma_warpgroup}"
        step = self.wgmma_count[tid]
        self.wgmma_count[tid] += 1
        key = (step, regs[desc_a.name], regs[desc_b.name])
        if key not in self.wgmma_checked:  # the same for every thread (lock step)
            self._check_operand("A", regs[desc_a.name], 64, step)
            self._check_operand("B", regs[desc_b.name], n, step)
            self.wgmma_checked.add(key)
        for i, register in enumerate(accumulators.elements):
            regs[register.name] = Acc(tid, i)

    def _check_operand(self, array: str, desc: int, rows: int, step: int) -> None:
        """Every element (row, k) the descriptor names holds array[row, 16*step + k]."""
        width = self.sample.k
        for row in range(rows):
            for k in range(16):
                held = self.smem.get(kmajor_address(desc, row, k))
                self.wgmma_reads.add(kmajor_address(desc, row, k))
                expected = (array, 2 * (row * width + 16 * step + k))
                assert held == expected, (
                    f"wgmma step {step}: {array}[{row}, {16 * step + k}] should be at shared "
                    f"byte {kmajor_address(desc, row, k)} (descriptor {decode_descriptor(desc)}), "
                    f"which holds {held}"
                )

    def check_output(self) -> None:
        """C holds, at every (row, column), the accumulator the fragment layout puts there
        (thread t of the wgmma warpgroup is thread `mma_threads[t]` of the CTA)."""
        n, size = self.sample.n, np.dtype(self.sample.out_dtype).itemsize
        assert len(self.out) == 64 * n
        for thread, tid in enumerate(self.sample.mma_threads):
            for register in range(n // 2):
                row, column = accumulator_position(thread, register)
                assert self.out.get(size * (row * n + column)) == Acc(tid, register), (row, column)


NO_EFFECT = frozenset(
    {
        "wgmma.fence.sync.aligned",
        "wgmma.commit_group.sync.aligned",
        "wgmma.wait_group.sync.aligned",
        "cp.async.commit_group",
        "cp.async.wait_group",
        "cp.async.bulk.commit_group",
        "cp.async.bulk.wait_group.read",
        "fence.mbarrier_init.release.cluster",
    }
)


def opcode_is(node, prefix: str) -> bool:
    return node.opcode == prefix or node.opcode.startswith(prefix + ".")


def tma_boxes(sample: Sample) -> dict[str, tuple[int, int]]:
    """The TMA box (rows, columns) of each tensor map the sample takes."""
    return {"A": (64, 8), "B": (sample.n, 8), "C": (64, sample.n)}


def model(sample: Sample, text: str | None = None) -> CtaModel:
    return CtaModel(sample, sample.text if text is None else text, tma_boxes(sample)).run()


@pytest.mark.parametrize("name", NAMES)
def test_model_checks_every_address(name):
    """The shipped sample's shared-memory writes, wgmma descriptors and output stores agree
    with the ISA layouts (see `CtaModel`), and no thread executes a fence."""
    sample = SAMPLES[name]
    cta = model(sample)
    assert cta.wgmma_count == [sample.k // 16 if t in sample.mma_threads else 0 for t in range(sample.threads)]
    assert len(cta.wgmma_checked) == sample.k // 16
    cta.check_output()
    assert cta.fences == [0] * sample.threads


def test_model_catches_a_wrong_descriptor():
    """The model is not vacuous: a stride-dimension offset of 256 instead of 128 fails."""
    sample = SAMPLES["gemm_store_branch"]
    broken = sample.text.replace("0x0000000800400000", "0x0000001000400000", 1)
    assert broken != sample.text
    with pytest.raises(AssertionError, match="wgmma step 0: A"):
        model(sample, broken)


def test_model_catches_a_wrong_fragment_store():
    sample = SAMPLES["gemm_store_once"]
    broken = sample.text.replace("{%f2, %f3}", "{%f3, %f2}", 1)
    with pytest.raises(AssertionError):
        model(sample, broken).check_output()


@pytest.mark.parametrize("name", WS_NAMES)
def test_ws_consumer_reads_exactly_what_the_producer_writes(name):
    """Warp-specialized: the consumer's descriptors cover the bytes the producer's
    st.shared write, no more and no fewer (A and B, 64 x 64 f16 each: 16384 bytes), and
    every K block reached the wgmma whole (`CtaModel` checks each element)."""
    sample = SAMPLES[name]
    cta = model(sample)
    assert cta.wgmma_reads == set(cta.smem)
    assert len(cta.smem) == 2 * 64 * 64  # 2-byte addresses: the two tiles
    assert max(cta.smem) - min(cta.smem) < 2 * 8192 + 1024
    assert all(bar.arrivals == 0 for bar in cta.named.values())  # no generation left half full
    assert all(bar.arrivals == 0 for bar in cta.mbarriers.values())


def test_model_catches_a_consumer_that_does_not_wait():
    """The model follows the hand-off: a consumer that only arrives on the "full" barrier
    (never waits) runs its second block's wgmma on the first block's data."""
    sample = SAMPLES["ws_named_barrier"]
    broken = sample.text.replace("bar.sync 1, 256;", "bar.arrive 1, 256;", 1)
    assert broken != sample.text
    with pytest.raises(AssertionError, match="wgmma step 4: A"):
        model(sample, broken)


#: What each warp-specialized sample's producer leaves out when it skips the "empty" wait.
EMPTY_WAIT = {
    "ws_named_barrier": "\tbar.sync 2, 256;",
    "ws_mbarrier": "\tmbarrier.try_wait.parity.shared::cta.b64 %p7, [%r22], %r28;\n\t@!%p7 bra $empty_wait;",
}


@pytest.mark.parametrize("name", WS_NAMES)
def test_model_catches_a_producer_that_does_not_wait(name):
    """A producer that never waits for the buffer to be empty runs ahead through all four
    blocks; its arrivals no longer pair with the consumer's waits and the model reports
    the kernel stuck (on the GPU it would hang or read a later block)."""
    sample = SAMPLES[name]
    broken = sample.text.replace(EMPTY_WAIT[name], "", 1)
    assert broken != sample.text
    with pytest.raises(AssertionError, match="wait forever"):
        model(sample, broken)


# --------------------------------------------------------------------------------------
# Where the fences go
# --------------------------------------------------------------------------------------


def statements(text: str) -> list[str]:
    """The sample's lines without comments and blank lines, stripped."""
    out = []
    for line in text.splitlines():
        line = line.split("//", 1)[0].strip()
        if line:
            out.append(line)
    return out


def fence_lines(lines: list[str]) -> list[int]:
    return [i for i, line in enumerate(lines) if line.startswith("fence.proxy")]


def first(lines: list[str], prefix: str, start: int = 0) -> int:
    return next(i for i in range(start, len(lines)) if lines[i].startswith(prefix))


@pytest.mark.parametrize("name", NAMES)
def test_samples_ship_without_fences(name):
    lines = statements(SAMPLES[name].text)
    assert fence_lines(lines) == [] and any(line.startswith("wgmma.mma_async") for line in lines)


@pytest.mark.parametrize("name", NAMES)
def test_fence_inserts_only_fences(name):
    """The fenced text is the sample plus inserted fence lines (and, at most, labels)."""
    sample = SAMPLES[name]
    fenced, report = fence(sample)
    before, after = statements(sample.text), statements(fenced)
    assert [line for line in after if line.startswith("fence.proxy")] == [FENCE] * FENCE_COUNT[name]
    new_labels = [line for line in after if line.endswith(":") and line not in before]
    assert [line for line in after if not line.startswith("fence.proxy") and line not in new_labels] == before
    assert report.changed == (FENCE_COUNT[name] > 0)
    assert len(report.fences) == FENCE_COUNT[name]


def test_store_once_fence_is_hoisted_to_the_preheader():
    """(a) The copy happens before the wgmma loop: one fence, after bar.sync and before
    the loop header, none inside the loop; each thread executes it exactly once."""
    sample = SAMPLES["gemm_store_once"]
    fenced, report = fence(sample)
    lines = statements(fenced)
    (at,) = fence_lines(lines)
    barrier = first(lines, "bar.sync")
    header = lines.index("$mma_loop:")
    back_edge = lines.index("@%p3 bra $mma_loop;")
    assert barrier < at == header - 1 < back_edge  # the last statement of the preheader
    (site,) = report.fences
    assert (site.placement, site.where) == ("loop", "after")
    assert sample.text.splitlines()[site.line - 1].strip() == "mov.u32 %r20, 0;"
    assert model(sample, fenced).fences == [1] * 128


@pytest.mark.parametrize("name", ["gemm_store_in_loop", "gemm_added_descriptors", "gemm_cp_async"])
def test_fence_stays_in_the_k_loop(name):
    """(b), (c) The writes are in the loop, so is the fence: right before the first wgmma
    of the iteration, after the writes are complete (bar.sync, and cp.async.wait_group)."""
    sample = SAMPLES[name]
    fenced, _ = fence(sample)
    lines = statements(fenced)
    (at,) = fence_lines(lines)
    header, back_edge = lines.index("$k_loop:"), lines.index("@%p3 bra $k_loop;")
    assert header < at < back_edge
    assert lines[at + 1].startswith("wgmma.mma_async")
    assert at == first(lines, "wgmma.mma_async") - 1
    assert first(lines, "bar.sync", header) < at
    if name == "gemm_cp_async":
        assert lines.index("cp.async.wait_group 0;") < at
    cta = model(sample, fenced)
    assert cta.fences == [sample.k // 64] * 128  # once per iteration


def test_branch_writes_fence_at_the_join():
    """(d) Only some threads write, behind a branch: one fence after the join (after
    bar.sync), right before the first wgmma; none inside the branch."""
    sample = SAMPLES["gemm_store_branch"]
    fenced, _ = fence(sample)
    lines = statements(fenced)
    (at,) = fence_lines(lines)
    assert lines.index("$join:") < lines.index("bar.sync 0;") < at
    assert lines[at + 1].startswith("wgmma.mma_async") and at == first(lines, "wgmma.mma_async") - 1
    assert model(sample, fenced).fences == [1] * 128


def test_epilogue_fences_only_the_tma_store():
    """(2) stmatrix then a TMA store: one fence, in thread 0's branch right before the
    store; nothing before the wgmma, whose operands came through TMA."""
    sample = SAMPLES["epilogue_tma_store"]
    fenced, _ = fence(sample)
    lines = statements(fenced)
    (at,) = fence_lines(lines)
    assert lines[at + 1].startswith("cp.async.bulk.tensor.2d.global.shared::cta")
    assert lines[at - 1] == "@!%p6 bra $done;"
    assert at > max(i for i, line in enumerate(lines) if line.startswith("stmatrix"))
    assert model(sample, fenced).fences == [1] + [0] * 127


def test_tma_mainloop_needs_no_fence():
    """(3) TMA load -> mbarrier wait -> wgmma, no generic writes: the text is unchanged."""
    sample = SAMPLES["tma_wgmma_mainloop"]
    fenced, report = fence(sample)
    assert fenced == sample.text
    assert not report.changed and len(report.fences) == 0


#: The hand-off of each warp-specialized sample: (the producer's arrive on the "full"
#: barrier, the last statement of the consumer's wait on it), as `statements` shows them.
HANDOFF = {
    "ws_named_barrier": ("bar.arrive 1, 256;", "bar.sync 1, 256;"),
    "ws_mbarrier": ("mbarrier.arrive.shared::cta.b64 %rd12, [%r21];", "@!%p7 bra $full_wait;"),
}


@pytest.mark.parametrize("name", WS_NAMES)
def test_ws_fence_issuer_side_after_the_wait(name):
    """(e) Warp-specialized, issuer side: one fence in the consumer's K loop, after its
    wait on the "full" barrier and right before the first wgmma of the block; not hoisted
    out of the loop (each wait hands over new writes); none in the producer. Each
    consumer thread executes it once per block, no producer thread ever."""
    sample = SAMPLES[name]
    fenced, report = fence(sample)
    lines = statements(fenced)
    (at,) = fence_lines(lines)
    _, wait = HANDOFF[name]
    consumer, header = lines.index("$consumer:"), lines.index("$consume_loop:")
    assert consumer < header < lines.index(wait) < at == first(lines, "wgmma.mma_async") - 1
    (site,) = report.fences
    assert site.placement == "inline"
    assert model(sample, fenced).fences == [0] * 128 + [sample.k // 64] * 128


@pytest.mark.parametrize("name", WS_NAMES)
def test_ws_fence_writer_side_before_the_arrive(name):
    """(e) Warp-specialized, writer side: a fence in the producer right after its copy loop
    (the last st.shared of the block) and right before the arrive on the "full" barrier;
    every fence is in the producer, none in the consumer, and the text is the sample
    plus fence lines. Each producer thread fences every block it hands over."""
    sample = SAMPLES[name]
    fenced, report = fence(sample, "writer")
    lines = statements(fenced)
    arrive, _ = HANDOFF[name]
    at = lines.index(arrive) - 1
    assert lines[at - 1 : at + 2] == ["@%p1 bra $copy_loop;", FENCE, arrive]
    last_write = max(i for i, line in enumerate(lines) if line.startswith("st.shared"))
    assert last_write < at < lines.index("$consumer:")
    assert max(fence_lines(lines)) < lines.index("$consumer:")
    assert [line for line in lines if line != FENCE] == statements(sample.text)
    assert {site.placement for site in report.fences} == {"writer"}
    fences = model(sample, fenced).fences
    assert fences[128:] == [0] * 128 and min(fences[:128]) >= sample.k // 64


@pytest.mark.parametrize(
    "name",
    ["ws_named_barrier", "ws_mbarrier"],
)
def test_ws_writer_side_needs_only_the_handoff_fence(name):
    """Writer side: the one fence before the arrive on "full" orders every write the
    consumer's wgmma reads; no other fence is needed."""
    sample = SAMPLES[name]
    fenced, report = fence(sample, "writer")
    assert len(report.fences) == 1
    assert model(sample, fenced).fences == [sample.k // 64] * 128 + [0] * 128


# --------------------------------------------------------------------------------------
# Assembling, SASS, and running on the GPU
# --------------------------------------------------------------------------------------


def sass(cubin: bytes) -> str | None:
    """``cuobjdump -sass`` of a cubin, or None when cuobjdump is not installed."""
    from ptxkit.ptxas import find_cuobjdump

    try:
        tool = find_cuobjdump()
    except FileNotFoundError:
        return None
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "k.cubin")
        Path(path).write_bytes(cubin)
        done = subprocess.run([tool, "-sass", path], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.ptxas
@pytest.mark.parametrize("name", WS_NAMES)
def test_ws_writer_side_assembles_and_shows_the_fence_in_sass(name):
    sample = SAMPLES[name]
    fenced, _ = fence(sample, "writer")
    cubin = ptxkit.assemble(fenced, arch="sm_90a", filename=sample.path)
    assert name in cubin.resources
    listing = sass(cubin.data)
    if listing is None:
        pytest.skip("cuobjdump is not installed (the cubin assembled)")
    assert "FENCE.VIEW.ASYNC.S" in listing


@pytest.mark.ptxas
@pytest.mark.parametrize("name", NAMES)
def test_fenced_sample_assembles_and_shows_the_fence_in_sass(name):
    sample = SAMPLES[name]
    fenced, _ = fence(sample)
    unfenced_cubin = ptxkit.assemble(sample.text, arch="sm_90a", filename=sample.path)
    fenced_cubin = ptxkit.assemble(fenced, arch="sm_90a", filename=sample.path)
    assert name in fenced_cubin.resources
    before, after = sass(unfenced_cubin.data), sass(fenced_cubin.data)
    if before is None:
        pytest.skip("cuobjdump is not installed (the cubins assembled)")
    shipped = before.count("FENCE.VIEW.ASYNC")  # ws_tma_pipeline's 8 mbarrier inits end in one (ptxas 13.0)
    assert shipped == 0 or "fence.mbarrier_init" in sample.text
    if FENCE_COUNT[name] == 0:
        assert after.count("FENCE.VIEW.ASYNC") == shipped
    else:
        assert after.count("FENCE.VIEW.ASYNC.S") > shipped
    if name == "gemm_store_once":  # ptxas unrolls the 8-step loop; the hoisted fence stays single
        assert after.count("FENCE.VIEW.ASYNC.S") == 1 and after.count("HGMMA") == 8


def inputs(sample: Sample, seed: int, m: int = 64, n: int | None = None, k: int | None = None):
    """Random A (m x k) and B (n x k), f16; a tiled sample takes any multiples of 64."""
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, (m, sample.k if k is None else k)).astype(np.float16)
    b = rng.uniform(-1, 1, (sample.n if n is None else n, a.shape[1])).astype(np.float16)
    return a, b


def reference(a, b):
    return a.astype(np.float64) @ b.astype(np.float64).T


def device_arguments(sample: Sample, a, b):
    """The launch arguments of a sample for inputs (a, b) on the GPU, and the device array
    that receives C (tensor maps for the TMA samples: boxes of 64 x 8, n x 8, 64 x n)."""
    from ptxkit import runtime

    da, db = runtime.DeviceArray.from_numpy(a), runtime.DeviceArray.from_numpy(b)
    dc = runtime.DeviceArray.zeros((a.shape[0], b.shape[0]), sample.out_dtype)
    if not sample.uses_tma:
        return [da, db, dc], dc
    rows_of_b = 64 if sample.tiled else sample.n
    maps = [runtime.tensor_map(da, box=(64, 8)), runtime.tensor_map(db, box=(rows_of_b, 8))]
    if sample.out_dtype is np.float16:  # the epilogue stores C with TMA too
        return [*maps, runtime.tensor_map(dc, box=(64, sample.n))], dc
    if sample.tiled:
        return [*maps, dc, np.uint32(b.shape[0]), np.uint32(a.shape[1] // 64)], dc
    return [*maps, dc], dc


def launch_shape(sample: Sample, a, b) -> dict:
    """The grid, block and dynamic shared memory of a launch on (a, b): one CTA, or one
    per 64 x 64 tile of C for a tiled sample."""
    grid = (b.shape[0] // 64, a.shape[0] // 64) if sample.tiled else 1
    return {"grid": grid, "block": sample.threads, "shared_mem": sample.dynamic_shared}


def run_sample(kernel, sample: Sample, a, b) -> np.ndarray:
    """Launch a sample on (a, b) (`launch_shape`); returns C."""
    arguments, out = device_arguments(sample, a, b)
    kernel.launch(*arguments, **launch_shape(sample, a, b))
    return out.to_numpy()


def tolerance(sample: Sample) -> dict:
    """f16 products summed in f32: tiny error; an f16 output adds its rounding (2^-11)."""
    return {"rtol": 2e-3, "atol": 2e-3} if sample.out_dtype is np.float32 else {"rtol": 4e-3, "atol": 1e-2}


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_fenced_sample_runs_on_the_gpu(name):
    from ptxkit import runtime

    sample = SAMPLES[name]
    fenced, _ = fence(sample)
    kernel = runtime.load(ptxkit.assemble(fenced, arch="sm_90a", filename=sample.path)).kernel(name)
    for seed in (1, 2):  # two data sets: stale shared memory from run 1 cannot pass run 2
        a, b = inputs(sample, seed)
        out = run_sample(kernel, sample, a, b)
        np.testing.assert_allclose(out.astype(np.float64), reference(a, b), **tolerance(sample))


@pytest.mark.gpu
def test_tiled_sample_runs_over_a_grid_of_tiles():
    """ws_tma_pipeline over 4 x 5 tiles and 16 blocks of K: each stage of the ring is
    filled four times, so every parity of both mbarrier rings is exercised."""
    from ptxkit import runtime

    sample = SAMPLES["ws_tma_pipeline"]
    kernel = runtime.load(ptxkit.assemble(sample.text, arch="sm_90a", filename=sample.path)).kernel(sample.name)
    for seed in (5, 6):
        a, b = inputs(sample, seed, m=256, n=320, k=1024)
        out = run_sample(kernel, sample, a, b)
        np.testing.assert_allclose(out.astype(np.float64), reference(a, b), **tolerance(sample))


@pytest.mark.gpu
@pytest.mark.parametrize("name", WS_NAMES)
def test_ws_writer_side_runs_on_the_gpu(name):
    """The writer-side build of a warp-specialized sample (fence in the producer)."""
    from ptxkit import runtime

    sample = SAMPLES[name]
    fenced, _ = fence(sample, "writer")
    kernel = runtime.load(ptxkit.assemble(fenced, arch="sm_90a", filename=sample.path)).kernel(name)
    for seed in (3, 4):
        a, b = inputs(sample, seed)
        out = run_sample(kernel, sample, a, b)
        np.testing.assert_allclose(out.astype(np.float64), reference(a, b), **tolerance(sample))
