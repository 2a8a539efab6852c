"""A row-reduction kernel built from the strategies: ``[rows, cols]`` f32/bf16 → ``[rows]``, sum or max.

Each row is handled by a group of T threads (T a power of two, from 1 to 1024):

1. every thread reads its share of the row with 16-byte vector loads
   (``ld.global.nc.L1::no_allocate.L2::256B.v4``; consecutive threads read consecutive
   vectors) and folds it sequentially into f32 accumulators (bf16 max stays packed:
   ``max.NaN.bf16x2``, exact);
2. the T lanes (or each warp of a wider group) combine with a butterfly of
   ``shfl.sync.bfly.b32``;
3. when T > 32 the warps of a row combine through shared memory (double-buffered, one
   ``bar.sync`` per row).

Sums accumulate in f32 and bf16 results are rounded once at the end (as torch does);
max starts from -inf and propagates NaN (``max.NaN``), as ``torch.amax`` does. Rows
are assigned to CTAs in a grid-stride loop, so any grid works; `RowReduceKernel.grid`
picks enough CTAs to fill the GPU. `cols` is fixed when the kernel is generated; `rows`
is a kernel parameter.

>>> k = row_reduce_kernel(4096, "bf16", "sum")
>>> k.name, k.threads_per_row, k.block, k.vectors_per_thread
('rowreduce_sum_bf16_4096', 128, 256, 4)
>>> k.grid(rows=10**6, sm_count=132)
1055
"""

from __future__ import annotations

from dataclasses import dataclass

from .builder import PtxBuilder, module_text
from .dtypes import dtype as as_dtype

VECTOR_BYTES = 16
LOAD = "ld.global.nc.L1::no_allocate.L2::256B.v4.b32"
#: vectors each thread should read per row when the row is long enough: bf16 takes four
#: instructions per 32-bit word to unpack and fold (f32 one), so it wants twice the threads
#: for the same bytes (measured on an H200: 3.2 -> 4.2 TB/s at 256 bf16 columns)
TARGET_VECTORS = {"f32": 8, "bf16": 4}
#: threads per CTA unless one row needs more
CTA_THREADS = 256
MAX_THREADS = 1024
#: the default caps a row's threads here, so that two or more CTAs share an SM and one's
#: barrier wait overlaps another's loads
DEFAULT_MAX_THREADS = 512
_NEG_INF = "0fFF800000"


@dataclass(frozen=True)
class RowReduceKernel:
    """A generated row reduction: its PTX module, name, launch shape and parameters.

    Launch: ``kernel(src, dst, np.uint32(rows), grid=k.grid(rows, sms), block=k.block)``.
    """

    ptx: str
    name: str
    cols: int
    dtype: str
    op: str
    threads_per_row: int
    block: int
    unroll: int

    @property
    def rows_per_cta(self) -> int:
        return self.block // self.threads_per_row

    @property
    def vectors_per_thread(self) -> int:
        return self.cols * as_dtype(self.dtype).nbytes // VECTOR_BYTES // self.threads_per_row

    def grid(self, rows: int, sm_count: int) -> int:
        """CTAs for `rows` rows: at most as many as fit on the GPU at once, and spread so that
        every CTA gets the same number of row groups (give or take one). With long rows a
        CTA's row takes long, so a last round that only some CTAs run costs a few percent.
        """
        resident = sm_count * max(1, 2048 // self.block)
        groups = -(-rows // self.rows_per_cta)
        rounds = -(-groups // resident)
        return max(1, -(-groups // rounds))


def row_reduce_kernel(cols: int, dtype: str = "f32", op: str = "sum", threads_per_row: int | None = None,
                      unroll: int = 8, target: str = "sm_90a") -> RowReduceKernel:
    """Generate the row reduction of `cols` columns (see the module docstring).

    `threads_per_row` (a power of two dividing the row's vector count) defaults to about
    one thread per 8 vectors; `unroll` is how many vectors a thread loads before it
    folds them, in the loop of long rows.
    """
    t = as_dtype(dtype)
    if t.name not in ("f32", "bf16"):
        raise ValueError(f"the row reduction takes f32 or bf16, not {dtype}")
    if op not in ("sum", "max"):
        raise ValueError(f"the row reduction computes sum or max, not {op}")
    if cols < 1 or cols * t.nbytes % VECTOR_BYTES:
        raise ValueError(f"cols must be a positive multiple of {VECTOR_BYTES // t.nbytes} for {t.name} "
                         f"(16-byte rows and vectors), got {cols}")
    vectors = cols * t.nbytes // VECTOR_BYTES
    if threads_per_row is None:
        threads_per_row = 1
        while threads_per_row * 2 <= min(DEFAULT_MAX_THREADS, vectors // TARGET_VECTORS[t.name]) and \
                vectors % (threads_per_row * 2) == 0:
            threads_per_row *= 2
    if threads_per_row & (threads_per_row - 1) or not 1 <= threads_per_row <= MAX_THREADS or vectors % threads_per_row:
        raise ValueError(f"threads_per_row must be a power of two up to {MAX_THREADS} dividing {vectors} vectors")
    if unroll < 1:
        raise ValueError("unroll must be at least 1")
    name = f"rowreduce_{op}_{t.name}_{cols}"
    block = max(CTA_THREADS, threads_per_row)
    b = PtxBuilder(target)
    _RowReduction(b, t, op, cols, threads_per_row, block, unroll).emit()
    entry = b.entry(name, [(".u64", "src"), (".u64", "dst"), (".u32", "rows")], f".maxntid {block}, 1, 1")
    return RowReduceKernel(module_text([entry], target, b.version), name, cols, t.name, op, threads_per_row, block,
                           unroll)


class _RowReduction:
    def __init__(self, b, t, op, cols, threads, block, unroll):
        self.b, self.t, self.op, self.cols = b, t, op, cols
        self.threads, self.block, self.unroll = threads, block, unroll
        self.vectors = cols * t.nbytes // VECTOR_BYTES // threads  # per thread
        self.packed_max = t.name == "bf16" and op == "max"

    def emit(self) -> None:
        b, threads = self.b, self.threads
        src, dst = b.reg(".b64"), b.reg(".b64")
        rows, tid, member, lane, row, row_base, step, last = b.regs(".b32", 8)
        for reg, name in ((src, "src"), (dst, "dst")):
            b.ins("ld.param.u64", reg, f"[{name}]")
            b.ins("cvta.to.global.u64", reg, reg)
        b.ins("ld.param.u32", rows, "[rows]")
        b.ins("mov.u32", tid, "%tid.x")
        b.ins("and.b32", member, tid, threads - 1)  # position in the row's group
        b.ins("and.b32", lane, tid, 31)
        group = b.reg(".b32")
        b.ins("shr.u32", group, tid, threads.bit_length() - 1)
        rows_per_cta = self.block // threads
        b.ins("mov.u32", row_base, "%ctaid.x")
        b.ins("mul.lo.u32", row_base, row_base, rows_per_cta)
        b.ins("mov.u32", step, "%nctaid.x")
        b.ins("mul.lo.u32", step, step, rows_per_cta)
        b.ins("sub.u32", last, rows, 1)
        # each thread's first vector within a row
        offset = b.reg(".b64")
        b.ins("mul.wide.u32", offset, member, VECTOR_BYTES)
        b.ins("add.s64", src, src, offset)
        shared = self._shared_setup(tid, group)
        done, loop = b.label("done"), b.label("rows")
        finished, valid = b.reg(".pred"), b.reg(".pred")
        parity = b.reg(".b32")
        b.ins("mov.u32", parity, 0)
        b.place(loop)
        b.ins("setp.ge.u32", finished, row_base, rows)
        b.ins("bra.uni", done, guard=finished)
        b.ins("add.u32", row, row_base, group)
        b.ins("setp.lt.u32", valid, row, rows)
        b.ins("min.u32", row, row, last)  # rows past the end read the last row, and store nothing
        value = self._reduce_row(src, row)
        value = self._combine_threads(value, lane, shared, parity)
        self._store(dst, row, member, valid, value)
        b.ins("add.u32", row_base, row_base, step)
        b.ins("xor.b32", parity, parity, 1)
        b.ins("bra.uni", loop)
        b.place(done)

    # ---- 1. each thread folds its vectors ---------------------------------------------------------
    def _accumulators(self) -> list[str]:
        b = self.b
        if self.packed_max:
            accs = b.regs(".b32", 4)
            for acc in accs:
                b.ins("mov.b32", acc, "0xff80ff80")  # two bf16 -inf
            return accs
        accs = b.regs(".f32", 4 if self.t.name == "f32" else 8)
        for acc in accs:
            b.ins("mov.f32", acc, "0f00000000" if self.op == "sum" else _NEG_INF)
        return accs

    def _fold(self, accs, words) -> None:
        b = self.b
        if self.packed_max:
            for acc, word in zip(accs, words):
                b.ins("max.NaN.bf16x2", acc, acc, word)
            return
        opcode = "add.f32" if self.op == "sum" else "max.NaN.f32"
        if self.t.name == "f32":
            for acc, word in zip(accs, words):
                b.ins(opcode, acc, acc, word)
            return
        low, high = b.reg(".f32"), b.reg(".f32")
        for i, word in enumerate(words):  # bf16 pair → two f32: the low half shifted up, the high half masked
            b.ins("shl.b32", low, word, 16)
            b.ins("and.b32", high, word, "0xffff0000")
            b.ins(opcode, accs[2 * i], accs[2 * i], low)
            b.ins(opcode, accs[2 * i + 1], accs[2 * i + 1], high)

    def _load_fold(self, accs, address, count, stride) -> None:
        b = self.b
        batches = [b.regs(".b32" if self.t.name == "bf16" else ".f32", 4) for _ in range(count)]
        for k, words in enumerate(batches):
            b.ins(LOAD.replace(".b32", ".f32") if self.t.name == "f32" else LOAD, f"{{{', '.join(words)}}}",
                  f"[{address}+{k * stride}]")
        for words in batches:
            self._fold(accs, words)

    def _reduce_row(self, src, row) -> str:
        b = self.b
        stride = self.threads * VECTOR_BYTES
        address, offset = b.reg(".b64"), b.reg(".b64")
        b.ins("mul.wide.u32", offset, row, self.cols * self.t.nbytes)
        b.ins("add.s64", address, src, offset)
        accs = self._accumulators()
        full, rest = divmod(self.vectors, self.unroll)
        if self.vectors <= self.unroll:
            self._load_fold(accs, address, self.vectors, stride)
        else:
            end, more = b.reg(".b64"), b.reg(".pred")
            b.ins("add.s64", end, address, full * self.unroll * stride)
            loop = b.label("vectors")
            b.place(loop)
            self._load_fold(accs, address, self.unroll, stride)
            b.ins("add.s64", address, address, self.unroll * stride)
            b.ins("setp.lt.u64", more, address, end)
            b.ins("bra.uni", loop, guard=more)
            if rest:
                self._load_fold(accs, address, rest, stride)
        return self._merge(accs)

    def _merge(self, accs) -> str:
        """Fold the accumulators into one f32 value (pairwise)."""
        b = self.b
        if self.packed_max:
            b.ins("max.NaN.bf16x2", accs[0], accs[0], accs[1])
            b.ins("max.NaN.bf16x2", accs[2], accs[2], accs[3])
            b.ins("max.NaN.bf16x2", accs[0], accs[0], accs[2])
            low, high = b.reg(".f32"), b.reg(".f32")
            b.ins("shl.b32", low, accs[0], 16)
            b.ins("and.b32", high, accs[0], "0xffff0000")
            b.ins("max.NaN.f32", low, low, high)
            return low
        opcode = "add.f32" if self.op == "sum" else "max.NaN.f32"
        while len(accs) > 1:
            half = len(accs) // 2
            for i in range(half):
                b.ins(opcode, accs[i], accs[i], accs[i + half])
            accs = accs[:half]
        return accs[0]

    # ---- 2 and 3. lanes, then warps -----------------------------------------------------------------
    def _butterfly(self, value, width) -> None:
        b = self.b
        other = b.reg(".f32")
        opcode = "add.f32" if self.op == "sum" else "max.NaN.f32"
        mask = width // 2
        while mask:
            b.ins("shfl.sync.bfly.b32", other, value, mask, "0x1f", "0xffffffff")
            b.ins(opcode, value, value, other)
            mask //= 2

    def _shared_setup(self, tid, group):
        """For rows wider than a warp: this warp's slot and the row's first slot (bytes)."""
        if self.threads <= 32:
            return None
        b = self.b
        warps = self.threads // 32
        rows_per_cta = self.block // self.threads
        b.shared("partials", 2 * rows_per_cta * warps * 4, 16)
        base, mine, first, warp = b.regs(".b32", 4)
        b.ins("mov.u32", base, "partials")
        b.ins("shr.u32", warp, tid, 5)
        b.ins("mad.lo.u32", mine, warp, 4, base)
        b.ins("mul.lo.u32", first, group, warps * 4)
        b.ins("add.u32", first, first, base)
        return mine, first

    def _combine_threads(self, value, lane, shared, parity) -> str:
        b = self.b
        self._butterfly(value, min(self.threads, 32))
        if shared is None:
            return value
        mine, first = shared
        warps = self.threads // 32
        half = (self.block // 32) * 4  # bytes of one buffer
        buffer, slot, address = b.regs(".b32", 3)
        b.ins("mul.lo.u32", buffer, parity, half)
        lane0, reader = b.reg(".pred"), b.reg(".pred")
        b.ins("setp.eq.u32", lane0, lane, 0)
        b.ins("add.u32", slot, mine, buffer)
        b.ins("st.shared.f32", f"[{slot}]", value, guard=lane0)
        b.ins("bar.sync", 0)
        b.ins("setp.lt.u32", reader, lane, warps)
        b.ins("mad.lo.u32", address, lane, 4, first)
        b.ins("add.u32", address, address, buffer)
        b.ins("mov.f32", value, "0f00000000" if self.op == "sum" else _NEG_INF)
        b.ins("ld.shared.f32", value, f"[{address}]", guard=reader)
        self._butterfly(value, warps)
        return value

    def _store(self, dst, row, member, valid, value) -> None:
        b = self.b
        writer, address, offset = b.reg(".pred"), b.reg(".b64"), b.reg(".b64")
        b.ins("setp.eq.and.u32", writer, member, 0, valid)
        b.ins("mul.wide.u32", offset, row, self.t.nbytes)
        b.ins("add.s64", address, dst, offset)
        if self.t.name == "f32":
            b.ins("st.global.f32", f"[{address}]", value, guard=writer)
        else:
            rounded = b.reg(".b16")
            b.ins("cvt.rn.bf16.f32", rounded, value)
            b.ins("st.global.b16", f"[{address}]", rounded, guard=writer)


def reference(x, op: str):
    """The float64 numpy reference of a row reduction (NaN-propagating max, like torch.amax).

    >>> import numpy as np
    >>> reference(np.array([[1.0, np.nan], [2.0, 3.0]]), "max").tolist()
    [nan, 3.0]
    """
    import numpy as np

    values = np.asarray(x, np.float64)
    return values.sum(axis=-1) if op == "sum" else values.max(axis=-1)

