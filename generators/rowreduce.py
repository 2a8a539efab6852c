"""A row-reduction kernel built from the strategies: ``[rows, cols]`` f32/bf16 → ``[rows]``, sum or max.

Each row is handled by a group of T threads (T a power of two, from 1 to 1024) in each
of the C CTAs of a thread-block cluster (C in 1, 2, 4, 8; C = 1 is a plain launch):

1. every thread reads its share of the row with 16-byte vector loads
   (``ld.global.nc.L1::no_allocate.v4``; consecutive threads read consecutive
   vectors, CTA rank r of a cluster the vectors after rank r - 1's) and folds it
   sequentially into f32 accumulators (bf16 max stays packed: ``max.NaN.bf16x2``, exact);
2. the T lanes (or each warp of a wider group) combine with a butterfly of
   ``shfl.sync.bfly.b32``;
3. C = 1: when T > 32 the warps of a row combine through shared memory
   (double-buffered, one ``bar.sync`` per row);
   C > 1: every warp writes its partial into the shared memory of the cluster's rank 0
   (``mapa`` + ``st.shared::cluster``, double-buffered) and arrives on the cluster
   barrier; after the *next* row's loads the CTAs wait on it, and rank 0 combines the
   partials and stores the row: no CTA ever blocks on a barrier before its loads.

Sums accumulate in f32 and bf16 results are rounded once at the end (as torch does);
max starts from -inf and propagates NaN (``max.NaN``), as ``torch.amax`` does. Rows
(clusters of C CTAs for each row, when C > 1) are assigned in a grid-stride loop, so
any grid works; `RowReduceKernel.grid` gives one CTA (cluster) per group of rows and
lets the hardware balance them. `cols` is fixed when the kernel is generated; `rows`
is a kernel parameter. The results do not depend on the grid: no atomics, no workspace.

By default a thread reads about 8 vectors of a row (4 for bf16, whose unpacking costs
ALU work), with at most 512 threads per CTA, and a row belongs to one CTA: on an H200
this reads 4.68-4.70 TB/s at every benchmark shape, and splitting long rows across a
cluster (``cluster=2..8``) was slower there, so it is an option, not the default.

>>> k = row_reduce_kernel(4096, "bf16", "sum")
>>> k.name, k.threads_per_row, k.cluster, k.block, k.vectors_per_thread
('rowreduce_sum_bf16_4096', 128, 1, 256, 4)
>>> k.grid(rows=10**6)
500000
>>> k = row_reduce_kernel(65536, "f32", "sum", cluster=4)
>>> k.threads_per_row, k.cluster, k.vectors_per_thread, k.grid(rows=16384)
(512, 4, 8, 65536)
"""

from __future__ import annotations

from dataclasses import dataclass

from .builder import PtxBuilder, module_text
from .dtypes import dtype as as_dtype

VECTOR_BYTES = 16
#: no ``.L2::256B`` prefetch hint: on an H200 it held every shape at 4.30-4.33 TB/s, and
#: without it the same kernels read 4.68-4.70 TB/s
LOAD = "ld.global.nc.L1::no_allocate.v4.b32"
#: vectors each thread should read per row when the row is long enough: bf16 takes four
#: instructions per 32-bit word to unpack and fold (f32 one), so it wants twice the threads
#: for the same bytes (measured on an H200: 3.2 -> 4.2 TB/s at 256 bf16 columns)
TARGET_VECTORS = {"f32": 8, "bf16": 4}
#: threads per CTA unless one row needs more
CTA_THREADS = 256
MAX_THREADS = 1024
#: the default caps a row's threads in one CTA here, so that two or more CTAs share an SM
#: and one's barrier wait overlaps another's loads
DEFAULT_MAX_THREADS = 512
#: CTAs per cluster (8 is the portable maximum)
CLUSTER_SIZES = (1, 2, 4, 8)
_NEG_INF = "0fFF800000"


@dataclass(frozen=True)
class RowReduceKernel:
    """A generated row reduction: its PTX module, name, launch shape and parameters.

    Launch: ``kernel(src, dst, np.uint32(rows), grid=k.grid(rows), block=k.block,
    cluster=k.launch_cluster)``. `threads_per_row` counts the threads of one CTA that
    work on a row; a row is shared by the `cluster` CTAs of a cluster.
    """

    ptx: str
    name: str
    cols: int
    dtype: str
    op: str
    threads_per_row: int
    block: int
    unroll: int
    cluster: int = 1

    @property
    def rows_per_cta(self) -> int:
        """Rows a CTA (a cluster, when `cluster` > 1) works on at once."""
        return self.block // self.threads_per_row

    @property
    def vectors_per_thread(self) -> int:
        return self.cols * as_dtype(self.dtype).nbytes // VECTOR_BYTES // (self.threads_per_row * self.cluster)

    @property
    def launch_cluster(self) -> int | None:
        """The launch's ``cluster=``: None (a plain launch) when `cluster` is 1."""
        return self.cluster if self.cluster > 1 else None

    def grid(self, rows: int) -> int:
        """CTAs for `rows` rows: one CTA (one cluster) per group of `rows_per_cta` rows.

        Any grid gives the same result; this one leaves the balancing to the hardware,
        which on an H200 beat every persistent grid tried (up to 3% at long rows).

        >>> row_reduce_kernel(262144, "f32", "sum").grid(rows=4096)
        4096
        """
        return -(-rows // self.rows_per_cta) * self.cluster


def row_reduce_kernel(cols: int, dtype: str = "f32", op: str = "sum", threads_per_row: int | None = None,
                      unroll: int = 8, target: str = "sm_90a", cluster: int = 1) -> RowReduceKernel:
    """Generate the row reduction of `cols` columns (see the module docstring).

    `threads_per_row` (a power of two; threads_per_row × cluster divides the row's vector
    count) defaults to about one thread per 8 vectors of the CTA's share of the row (bf16:
    4), at most 512; `cluster` (1, 2, 4 or 8 CTAs; more than 1 needs sm_90) splits each row
    across a thread-block cluster. `unroll` is how many vectors a thread loads before it
    folds them, in the loop of long rows.

    >>> k = row_reduce_kernel(262144, "bf16", "max")
    >>> k.threads_per_row, k.cluster, k.vectors_per_thread
    (512, 1, 64)
    >>> row_reduce_kernel(262144, "bf16", "max", cluster=8).vectors_per_thread
    8
    """
    t = as_dtype(dtype)
    if t.name not in ("f32", "bf16"):
        raise ValueError(f"the row reduction takes f32 or bf16, not {dtype}")
    if op not in ("sum", "max"):
        raise ValueError(f"the row reduction computes sum or max, not {op}")
    if cols < 1 or cols * t.nbytes % VECTOR_BYTES:
        raise ValueError(f"cols must be a positive multiple of {VECTOR_BYTES // t.nbytes} for {t.name} "
                         f"(16-byte rows and vectors), got {cols}")
    if cluster not in CLUSTER_SIZES:
        raise ValueError(f"cluster must be 1, 2, 4 or 8 CTAs, got {cluster}")
    vectors = cols * t.nbytes // VECTOR_BYTES
    target_vectors = TARGET_VECTORS[t.name]
    if threads_per_row is None:
        threads_per_row = _power_of_two(min(DEFAULT_MAX_THREADS, vectors // (target_vectors * cluster)),
                                        vectors // cluster)
    if threads_per_row & (threads_per_row - 1) or not 1 <= threads_per_row <= MAX_THREADS or vectors % threads_per_row:
        raise ValueError(f"threads_per_row must be a power of two up to {MAX_THREADS} dividing {vectors} vectors")
    b = PtxBuilder(target)
    if vectors % (threads_per_row * cluster):
        raise ValueError(f"threads_per_row × cluster ({threads_per_row}×{cluster}) must divide the row's "
                         f"{vectors} vectors")
    if unroll < 1:
        raise ValueError("unroll must be at least 1")
    name = f"rowreduce_{op}_{t.name}_{cols}"
    block = max(CTA_THREADS, threads_per_row)
    directives = f".maxntid {block}, 1, 1"
    if cluster > 1:  # keep 2048 // block CTAs of a cluster kernel on an SM: at most 32 registers
        b.require_sm(90, "a row reduction across a thread-block cluster")
        directives += f"\n.minnctapersm {2048 // block}\n.reqnctapercluster {cluster}, 1, 1"
    _RowReduction(b, t, op, cols, threads_per_row, block, unroll, cluster).emit()
    entry = b.entry(name, [(".u64", "src"), (".u64", "dst"), (".u32", "rows")], directives)
    return RowReduceKernel(module_text([entry], target, b.version), name, cols, t.name, op, threads_per_row, block,
                           unroll, cluster)


def variants(cols: int, dtype: str = "f32", op: str = "sum") -> list[tuple[int, int]]:
    """(threads_per_row, cluster) pairs worth timing against each other: the default first,
    then half and twice its threads, and (from 256 threads on) half the threads in each of
    a cluster of two CTAs.

    >>> variants(4096), variants(16384)
    ([(128, 1), (64, 1), (256, 1)], [(512, 1), (256, 1), (1024, 1), (256, 2)])
    """
    threads = row_reduce_kernel(cols, dtype, op).threads_per_row
    candidates = [(threads // 2, 1), (threads * 2, 1)] + ([(threads // 2, 2)] if threads >= 256 else [])
    vectors = cols * as_dtype(dtype).nbytes // VECTOR_BYTES
    return [(threads, 1)] + [(t, c) for t, c in candidates if 1 <= t <= MAX_THREADS and vectors % (t * c) == 0]


def _power_of_two(limit: int, dividing: int) -> int:
    """The largest power of two that is at most `limit` (at least 1) and divides `dividing`."""
    p = 1
    while p * 2 <= limit and dividing % (p * 2) == 0:
        p *= 2
    return p


class _RowReduction:
    def __init__(self, b, t, op, cols, threads, block, unroll, cluster):
        self.b, self.t, self.op, self.cols = b, t, op, cols
        self.threads, self.block, self.unroll, self.cluster = threads, block, unroll, cluster
        self.row_threads = threads * cluster  # all the threads that read one row
        self.vectors = cols * t.nbytes // VECTOR_BYTES // self.row_threads  # per thread
        self.packed_max = t.name == "bf16" and op == "max"
        self.rank = None  # the register with %cluster_ctarank, when clustered

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
        clustered = self.cluster > 1
        b.ins("mov.u32", row_base, "%clusterid.x" if clustered else "%ctaid.x")
        b.ins("mul.lo.u32", row_base, row_base, rows_per_cta)
        b.ins("mov.u32", step, "%nclusterid.x" if clustered else "%nctaid.x")
        b.ins("mul.lo.u32", step, step, rows_per_cta)
        b.ins("sub.u32", last, rows, 1)
        position = member  # among the threads that read the row
        if clustered:
            self.rank, position = b.regs(".b32", 2)
            b.ins("mov.u32", self.rank, "%cluster_ctarank")
            b.ins("mad.lo.u32", position, self.rank, threads, member)
        # each thread's first vector within a row
        offset = b.reg(".b64")
        b.ins("mul.wide.u32", offset, position, VECTOR_BYTES)
        b.ins("add.s64", src, src, offset)
        rows_loop = self._cluster_rows if clustered else self._cta_rows
        rows_loop(src, dst, rows, tid, member, lane, group, row, row_base, step, last)

    def _cta_rows(self, src, dst, rows, tid, member, lane, group, row, row_base, step, last) -> None:
        """C = 1: each row in turn; a CTA's warps combine through shared memory (one bar.sync)."""
        b = self.b
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

    def _cluster_rows(self, src, dst, rows, tid, member, lane, group, row, row_base, step, last) -> None:
        """C > 1: row n's partials go to rank 0 and the CTAs arrive on the cluster barrier; they
        wait on it only after row n + 1's loads, when rank 0 finishes row n. The partials are
        double-buffered: a buffer is written again two phases later, after rank 0 has read it
        and arrived. Every thread arrives once before the first row, so rank 0 has started
        before anyone writes to its shared memory; rank 0 exits only after the last wait."""
        b = self.b
        writer_slot, reader_slot, leader = self._cluster_setup(member, lane, group)
        b.ins("barrier.cluster.arrive.relaxed.aligned")
        more, valid, pending = b.regs(".pred", 3)
        previous, parity = b.regs(".b32", 2)
        b.ins("mov.pred", pending, 0)  # no row waits for rank 0 yet
        b.ins("mov.u32", previous, 0)
        b.ins("mov.u32", parity, 0)
        loop, waiting, done = b.label("rows"), b.label("wait"), b.label("done")
        b.place(loop)
        b.ins("setp.lt.u32", more, row_base, rows)
        b.ins("bra.uni", waiting, guard=f"!{more}")
        b.ins("add.u32", row, row_base, group)
        b.ins("setp.lt.u32", valid, row, rows)
        b.ins("min.u32", row, row, last)  # rows past the end read the last row, and store nothing
        value = self._reduce_row(src, row)
        self._butterfly(value, min(self.threads, 32))
        b.place(waiting)
        b.ins("barrier.cluster.wait.acquire.aligned")
        self._finish_previous(dst, member, lane, reader_slot, leader, previous, pending, parity)
        b.ins("bra.uni", done, guard=f"!{more}")
        address, writer = b.reg(".b32"), b.reg(".pred")  # lane 0 of the warp (of the row's group when T < 32)
        b.ins("mad.lo.u32", address, parity, self._buffer_bytes, writer_slot)
        b.ins("setp.eq.u32", writer, lane if self.threads >= 32 else member, 0)
        b.ins("st.shared::cluster.f32", f"[{address}]", value, guard=writer)
        b.ins("barrier.cluster.arrive.release.aligned")
        b.ins("mov.u32", previous, row)
        b.ins("mov.pred", pending, valid)
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
        stride = self.row_threads * VECTOR_BYTES
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

    @property
    def _partials_per_row(self) -> int:
        """One per warp (per T-lane group when T < 32) of each CTA of the cluster."""
        return self.cluster * max(1, self.threads // 32)

    @property
    def _buffer_bytes(self) -> int:
        return (self.block // self.threads) * self._partials_per_row * 4

    def _cluster_setup(self, member, lane, group):
        """Where this warp's partial goes in rank 0 (a shared::cluster address, for buffer 0),
        where this lane reads partials when its CTA is rank 0 (shared::cta), and whether this
        thread is in the warp of rank 0 that finishes its rows (its group's first)."""
        b = self.b
        count = self._partials_per_row
        b.shared("partials", 2 * self._buffer_bytes, 16)
        base, index, local, writer_slot, reader_slot = b.regs(".b32", 5)
        rank = self.rank
        b.ins("mov.u32", base, "partials")
        # slot: group · count + rank · (partials per CTA) + warp within the group
        if self.threads > 32:
            b.ins("shr.u32", index, member, 5)
        else:
            b.ins("mov.u32", index, 0)
        b.ins("mad.lo.u32", index, rank, count // self.cluster, index)
        b.ins("mad.lo.u32", index, group, count, index)
        b.ins("mad.lo.u32", local, index, 4, base)
        b.ins("mapa.shared::cluster.u32", writer_slot, local, 0)
        b.ins("mad.lo.u32", index, group, count, lane if self.threads >= 32 else member)
        b.ins("mad.lo.u32", reader_slot, index, 4, base)
        leader = b.reg(".pred")
        b.ins("setp.eq.u32", leader, rank, 0)
        if self.threads > 32:
            b.ins("setp.lt.and.u32", leader, member, 32, leader)
        return writer_slot, reader_slot, leader

    def _finish_previous(self, dst, member, lane, reader_slot, leader, previous, pending, parity) -> None:
        """Rank 0's first warp of each row group: fold the partials of the previous row (in the
        other buffer) and store it."""
        b = self.b
        skip = b.label("finished")
        b.ins("bra.uni", skip, guard=f"!{leader}")
        count, width = self._partials_per_row, min(self.threads, 32)
        other, address = b.regs(".b32", 2)
        b.ins("xor.b32", other, parity, 1)
        b.ins("mad.lo.u32", address, other, self._buffer_bytes, reader_slot)
        identity = "0f00000000" if self.op == "sum" else _NEG_INF
        opcode = "add.f32" if self.op == "sum" else "max.NaN.f32"
        value = b.reg(".f32")
        if count < width:  # lanes past the partials hold the identity
            reader = b.reg(".pred")
            b.ins("setp.lt.u32", reader, lane if self.threads >= 32 else member, count)
            b.ins("mov.f32", value, identity)
            b.ins("ld.shared.f32", value, f"[{address}]", guard=reader)
        else:
            b.ins("ld.shared.f32", value, f"[{address}]")
            more = b.reg(".f32")
            for k in range(1, count // width):
                b.ins("ld.shared.f32", more, f"[{address}+{4 * width * k}]")
                b.ins(opcode, value, value, more)
        self._butterfly(value, min(count, width))
        self._store(dst, previous, member, pending, value)
        b.place(skip)

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

