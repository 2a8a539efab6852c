"""The row reduction: ``[rows, cols]`` of f32/f16/bf16 → one or two values per row, for
any ``cols ≥ 1``, rows `row_stride` elements apart, starting at any element-aligned
address, for every op of `rowops` (sum, sumsq, max, min, logsumexp, meanvar, argmax,
argmin).

Each row is handled by a group of T threads (T a power of two, 1 to 1024) in each of the
C CTAs of a thread-block cluster (C in 1, 2, 4, 8; C = 1 is a plain launch); a thread of
a short row (T = 1) handles K rows at once, so that enough loads are in flight:

1. every thread reads its share of the row (`rowload`: aligned 16-byte vectors in the
   body, ``ld.global.nc.L1::no_allocate.v4``, consecutive threads on consecutive
   vectors; single elements in the head and tail; never a byte outside the row) and folds
   it, widened to f32, into the op's state (`rowops`), in several independent states for
   the element-wise ops;
2. the T lanes (or each warp of a wider group) combine their states with a butterfly of
   ``shfl.sync.bfly.b32``;
3. C = 1: when T > 32 the warps of a row combine through shared memory
   (double-buffered, one ``bar.sync`` per row);
   C > 1: every warp writes its state into the shared memory of the cluster's rank 0
   (``mapa`` + ``st.shared::cluster``, double-buffered) and arrives on the cluster
   barrier; after the *next* row's loads the CTAs wait on it, and rank 0 combines the
   states and stores the row: no CTA ever blocks on a barrier before its loads.

Rows (clusters of C CTAs for each row, when C > 1) are assigned in a grid-stride loop
(64-bit, so any u32 row count works), so any grid works; `RowReduceKernel.grid` gives one
CTA (cluster) per group of rows and lets the hardware balance them. `cols` and
`row_stride` are fixed when the kernel is generated; `rows` is a kernel parameter. The
results do not depend on the grid: no atomics, no workspace.

The defaults (`default_threads`, `default_rows_per_thread`) come from measurements on an
H200: a thread reads about 8 vectors of a row (4 for halves in the element-wise ops,
whose widening costs ALU work), a row gets 8 to 256 threads (512 for long rows of the
element-wise ops), short rows take several rows per thread, and a row belongs to one
CTA: splitting long rows across a cluster (``cluster=2..8``) was slower, so it is an
option, not the default. Rows read by fewer than 8 threads are read through L1 (a
128-byte line serves several rows); wider ones bypass it.

>>> k = row_reduce_kernel(4096, "bf16", "sum")
>>> k.name, k.threads_per_row, k.rows_per_thread, k.cluster, k.block, k.params
('rowreduce_sum_bf16_4096', 128, 1, 1, 256, ('src', 'sum', 'rows'))
>>> k.grid(rows=10**6)
500000
>>> k = row_reduce_kernel(7, "f32", "meanvar", row_stride=9)
>>> k.name, k.threads_per_row, k.rows_per_thread, k.outputs, k.grid(rows=4096)
('rowreduce_meanvar_f32_7_stride9', 1, 2, (('mean', 'f32'), ('var', 'f32')), 8)
"""

from __future__ import annotations

from dataclasses import dataclass

from .builder import PtxBuilder, f32_literal, module_text
from .combine import DEFAULT_NAN
from .dtypes import dtype as as_dtype
from .rowload import VECTOR_BYTES, RowShape, RowWalk
from .rowops import ROW_OPS, row_op

#: the dtypes and ops the row reduction takes
DTYPES = ("f32", "f16", "bf16")
OPS = tuple(ROW_OPS)
#: the ops that follow a NaN policy (`rowops`)
NAN_POLICY_OPS = ("max", "min", "argmax", "argmin")
#: vectors each thread should read per row when the row is long enough. Halves take about
#: four instructions per 32-bit word to widen and fold (f32 one), so for the element-wise
#: ops they want twice the threads for the same bytes; the ops with a larger state spend
#: more per row on combining (a butterfly step costs 10-20 instructions), so they want 8
#: vectors a thread whatever the dtype (measured on an H200, `reduce_bench --variants`)
TARGET_VECTORS = {"f32": 8, "f16": 4, "bf16": 4}
HEAVY_TARGET_VECTORS = 8
#: at least this many threads per row (when it has as many vectors): 8 × 16 bytes is a whole
#: 128-byte line per row per load; the larger states on halves take 4 (the combining
#: costs more than the partly used lines: 4.0 against 2.8 TB/s at 100 bf16 columns)
MIN_THREADS, HEAVY_HALF_MIN_THREADS = 8, 4
#: bytes a thread of a short row (one thread per row) should have in flight: it takes
#: several rows at once, up to `MAX_ROWS_PER_THREAD`
TARGET_ROW_BYTES = 64
MAX_ROWS_PER_THREAD = 8
#: threads per CTA unless one row needs more
CTA_THREADS = 256
MAX_THREADS = 1024
#: the default gives a row at most 256 threads, so that two or more CTAs share an SM and one's
#: barrier wait overlaps another's loads; 512 only for element-wise ops on rows of at least
#: 16 vectors a thread (512 was 7% slower than 256 at 50257 bf16 columns, 1% faster at 128256)
DEFAULT_MAX_THREADS = 256
WIDE_THREADS, WIDE_VECTORS = 512, 16
#: CTAs per cluster (8 is the portable maximum)
CLUSTER_SIZES = (1, 2, 4, 8)
_SIZES = {"f32": 4, "f16": 2, "bf16": 2, "s64": 8}


@dataclass(frozen=True)
class RowReduceKernel:
    """A generated row reduction: its PTX module, name, launch shape and parameters.

    Launch: ``kernel(src, *outputs, np.uint32(rows), grid=k.grid(rows), block=k.block,
    cluster=k.launch_cluster)`` with one array per entry of `outputs` ((name, dtype):
    ``rows`` elements each; s64 for an index). `threads_per_row` counts the threads of one
    CTA that work on a row; a row is shared by the `cluster` CTAs of a cluster; a thread
    works on `rows_per_thread` rows at once.

    >>> k = row_reduce_kernel(1000, "f16", "argmax")
    >>> k.params, k.outputs, k.rows_per_cta, k.launch_cluster
    (('src', 'index', 'rows'), (('index', 's64'),), 32, None)
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
    rows_per_thread: int = 1
    row_stride: int = 0
    nan: str = DEFAULT_NAN
    outputs: tuple = ()

    @property
    def rows_per_cta(self) -> int:
        """Rows a CTA (a cluster, when `cluster` > 1) works on at once."""
        return self.block // self.threads_per_row * self.rows_per_thread

    @property
    def params(self) -> tuple[str, ...]:
        return ("src", *(name for name, _ in self.outputs), "rows")

    @property
    def launch_cluster(self) -> int | None:
        """The launch's ``cluster=``: None (a plain launch) when `cluster` is 1."""
        return self.cluster if self.cluster > 1 else None

    @property
    def shape(self) -> RowShape:
        return RowShape(self.cols, self.dtype, self.threads_per_row * self.cluster)

    @property
    def accumulation_depth(self) -> int:
        """The most roundings on an element's way into a sum: its thread's sequential fold,
        the merge of the thread's states, then the threads' combination (the error bound
        of a sum is this many units in the last place of f32 times the sum of |x|).

        >>> row_reduce_kernel(4096, "f32").accumulation_depth   # 8 adds into each of 4 states + 2 + 7
        18
        """
        lanes = row_op(self.op).lanes(self.dtype)
        per_state = -(-self.shape.elements_per_thread() // lanes)
        return per_state + (lanes - 1).bit_length() + (self.threads_per_row * self.cluster - 1).bit_length()

    def grid(self, rows: int) -> int:
        """CTAs for `rows` rows: one CTA (one cluster) per group of `rows_per_cta` rows.

        Any grid gives the same result; this one leaves the balancing to the hardware,
        which on an H200 beat every persistent grid tried (up to 3% at long rows).

        >>> row_reduce_kernel(262144, "f32", "sum").grid(rows=4096)
        4096
        """
        return max(1, -(-rows // self.rows_per_cta)) * self.cluster


def row_reduce_kernel(cols: int, dtype: str = "f32", op: str = "sum", threads_per_row: int | None = None,
                      unroll: int = 8, target: str = "sm_90a", cluster: int = 1, rows_per_thread: int | None = None,
                      row_stride: int | None = None, nan: str = DEFAULT_NAN) -> RowReduceKernel:
    """Generate the row reduction of `cols` columns (see the module docstring).

    `row_stride` (elements from one row to the next, at least `cols`; default `cols`)
    reads rows of a larger tensor. `threads_per_row` (a power of two) defaults to about
    one thread per 8 vectors of the CTA's share of the row (halves: 4), at most 512;
    `rows_per_thread` (a power of two, only with one thread per row) to about 128 bytes
    of rows per thread, at most 8; `cluster` (1, 2, 4 or 8 CTAs; more than 1 needs sm_90)
    splits each row across a thread-block cluster. `unroll` is how many vectors a thread
    loads before it folds them, in the loop of long rows. `nan` is the NaN policy of max,
    min, argmax and argmin (`rowops`). `target` takes every op and dtype from sm_80; sm_75
    takes the kernels that need neither a NaN-propagating max/min nor a result rounded to
    bf16 (`NEWER_INSTRUCTIONS`): sum, sumsq and meanvar of f32 and f16; max, min, argmax
    and argmin of f32 and f16 with the NaN policy "ignore"; bf16's sumsq, and its argmax
    and argmin with "ignore".

    >>> k = row_reduce_kernel(262144, "bf16", "max")
    >>> k.threads_per_row, k.cluster, k.shape.vector_rounds
    (512, 1, 64)
    >>> row_reduce_kernel(262144, "bf16", "max", cluster=8).shape.vector_rounds
    16
    >>> row_reduce_kernel(0)
    Traceback (most recent call last):
    ...
    ValueError: cols must be at least 1, got 0
    """
    t = as_dtype(dtype)
    if t.name not in DTYPES:
        raise ValueError(f"the row reduction takes f32, f16 or bf16, not {t.name}")
    reduction = row_op(op, nan)
    if cols < 1:
        raise ValueError(f"cols must be at least 1, got {cols}")
    if op == "meanvar" and cols > 2**24:
        raise ValueError(f"meanvar counts elements in f32: at most 2**24 columns, got {cols}")
    row_stride = cols if row_stride is None else row_stride
    if row_stride < cols:
        raise ValueError(f"row_stride must be at least cols ({cols}), got {row_stride}")
    if cluster not in CLUSTER_SIZES:
        raise ValueError(f"cluster must be 1, 2, 4 or 8 CTAs, got {cluster}")
    if unroll < 1:
        raise ValueError("unroll must be at least 1")
    if threads_per_row is None:
        threads_per_row = default_threads(cols, t.name, op, cluster)
    if threads_per_row & (threads_per_row - 1) or not 1 <= threads_per_row <= MAX_THREADS:
        raise ValueError(f"threads_per_row must be a power of two up to {MAX_THREADS}, got {threads_per_row}")
    shape = RowShape(cols, t.name, threads_per_row * cluster)
    if rows_per_thread is None:
        rows_per_thread = default_rows_per_thread(cols, t.name) if threads_per_row == 1 and cluster == 1 else 1
    if rows_per_thread & (rows_per_thread - 1) or not 1 <= rows_per_thread <= MAX_ROWS_PER_THREAD:
        raise ValueError(f"rows_per_thread must be a power of two up to {MAX_ROWS_PER_THREAD}, got {rows_per_thread}")
    if rows_per_thread > 1 and (threads_per_row > 32 or cluster > 1 or shape.full_rounds > unroll):
        raise ValueError("rows_per_thread > 1 needs short rows (no loop), at most 32 threads per row and no cluster")
    b = PtxBuilder(target)
    block = max(CTA_THREADS, threads_per_row)
    directives = f".maxntid {block}, 1, 1"
    if block >= 512 and cluster == 1 and len(reduction.state) > 1:  # else ptxas keeps to 64 registers
        directives += "\n.minnctapersm 1"  # and spills
    if cluster > 1:  # keep 2048 // block CTAs of a cluster kernel on an SM (32 registers); half that for
        # the ops whose state is more than one register (64)
        b.require_sm(90, "a row reduction across a thread-block cluster")
        resident = max(1, (2048 if len(reduction.state) == 1 else 1024) // block)
        directives += f"\n.minnctapersm {resident}\n.reqnctapercluster {cluster}, 1, 1"
    outputs = tuple(zip(reduction.outputs, reduction.output_dtypes(t.name)))
    name = f"rowreduce_{op}_{t.name}_{cols}" + (f"_stride{row_stride}" if row_stride != cols else "")
    _RowKernel(b, t, reduction, shape, row_stride, threads_per_row, block, unroll, cluster, rows_per_thread,
               outputs).emit()
    _check_target(b, op, t.name, nan)
    params = [(".u64", "src")] + [(".u64", output) for output, _ in outputs] + [(".u32", "rows")]
    entry = b.entry(name, params, directives)
    return RowReduceKernel(module_text([entry], target, b.version), name, cols, t.name, op, threads_per_row, block,
                           unroll, cluster, rows_per_thread, row_stride, nan, outputs)


#: What a row kernel may use that older GPUs lack (PTX ISA, each instruction's target
#: notes): text of the opcode, the oldest sm that has it, and what the kernel uses it for.
#: Everything else it emits exists on sm_75, the oldest target ptxas 13 takes.
NEWER_INSTRUCTIONS = (
    ("max.NaN.", 80, "max.NaN.f32 (the NaN-propagating max)"),
    ("min.NaN.", 80, "min.NaN.f32 (the NaN-propagating min)"),
    ("cvt.rn.bf16.f32", 80, "cvt.rn.bf16.f32 (the result rounded to bf16)"),
    (".L1::no_allocate", 70, "ld.global.nc.L1::no_allocate (loads that bypass L1)"),
)


def _check_target(b, op: str, dtype: str, nan: str) -> None:
    """Refuse a kernel whose instructions the target lacks, naming the op, dtype and NaN
    policy asked for and the instructions that need a newer GPU.

    >>> row_reduce_kernel(1000, "f32", "sum", target="sm_75").ptx.splitlines()[1]
    '.target sm_75'
    >>> row_reduce_kernel(1000, "bf16", "max", target="sm_75")
    Traceback (most recent call last):
    ...
    ValueError: the row reduction max of bf16 (NaN policy 'propagate') needs sm_80 or newer for max.NaN.f32 (the NaN-propagating max) and cvt.rn.bf16.f32 (the result rounded to bf16); the target is sm_75
    """
    lines = b.instructions()
    missing = [(sm, use, marker) for marker, sm, use in NEWER_INSTRUCTIONS
               if b.sm < sm and any(marker in line for line in lines)]
    if not missing:
        return
    policy = f" (NaN policy {nan!r})" if op in NAN_POLICY_OPS else ""
    uses = " and ".join(use for _, use, _ in missing)
    hint = ""
    if op in NAN_POLICY_OPS and all(".NaN." in marker for _, _, marker in missing):
        hint = "; the NaN policy 'ignore' needs no .NaN instruction"
    raise ValueError(f"the row reduction {op} of {dtype}{policy} needs sm_{max(sm for sm, _, _ in missing)} or newer "
                     f"for {uses}; the target is {b.target}{hint}")


def default_threads(cols: int, dtype: str, op: str = "sum", cluster: int = 1) -> int:
    """Threads per row in each CTA, a power of two: about one per `TARGET_VECTORS` vectors
    of the CTA's share of the row (`HEAVY_TARGET_VECTORS` for ops with a larger state than
    one register), at least `MIN_THREADS`, at most `DEFAULT_MAX_THREADS` (see there).

    >>> [default_threads(cols, "f32") for cols in (7, 100, 1000, 4096, 32000, 50257)]
    [1, 8, 16, 128, 256, 512]
    >>> [default_threads(cols, "bf16", "logsumexp") for cols in (100, 1000, 4096, 262144)]
    [4, 8, 64, 256]
    """
    vectors = cols * as_dtype(dtype).nbytes / VECTOR_BYTES / cluster
    heavy = len(row_op(op).state) > 1
    target = HEAVY_TARGET_VECTORS if heavy else TARGET_VECTORS[dtype]
    least = HEAVY_HALF_MIN_THREADS if heavy and dtype != "f32" else MIN_THREADS
    most = WIDE_THREADS if not heavy and vectors >= WIDE_THREADS * WIDE_VECTORS else DEFAULT_MAX_THREADS
    return min(most, max(_power_of_two(vectors / target), _power_of_two(min(vectors, least))))


def default_rows_per_thread(cols: int, dtype: str) -> int:
    """Rows a thread of one-thread rows takes at once: about `TARGET_ROW_BYTES` of them.

    >>> default_rows_per_thread(1, "f32"), default_rows_per_thread(7, "f32"), default_rows_per_thread(7, "bf16")
    (8, 2, 4)
    """
    return _power_of_two(min(MAX_ROWS_PER_THREAD, TARGET_ROW_BYTES / (cols * as_dtype(dtype).nbytes)))


def variants(cols: int, dtype: str = "f32", op: str = "sum") -> list[tuple[int, int]]:
    """(threads_per_row, rows_per_thread) pairs worth timing against each other: the default
    first, then half and twice its threads (up to `WIDE_THREADS`) or, with one thread per
    row, half and twice its rows per thread and two threads per row.

    >>> variants(4096), variants(7, "f32")
    ([(128, 1), (64, 1), (256, 1)], [(1, 2), (1, 1), (1, 4), (2, 1)])
    """
    k = row_reduce_kernel(cols, dtype, op)
    threads, rows = k.threads_per_row, k.rows_per_thread
    candidates = [(threads // 2, 1), (threads * 2, 1)] if threads > 1 else [(1, rows // 2), (1, rows * 2), (2, 1)]
    found = [(threads, rows)]
    for t, r in candidates:
        if 1 <= t <= WIDE_THREADS and 1 <= r <= MAX_ROWS_PER_THREAD and (t, r) not in found:
            try:
                row_reduce_kernel(cols, dtype, op, threads_per_row=t, rows_per_thread=r)
            except ValueError:
                continue
            found.append((t, r))
    return found


def _power_of_two(limit: float) -> int:
    """The largest power of two that is at most `limit` (at least 1)."""
    p = 1
    while p * 2 <= limit:
        p *= 2
    return p


class _RowKernel:
    """Emits the kernel body: the rows loop, each row's loads and fold, the threads'
    combination and the stores."""

    def __init__(self, b, t, op, shape, row_stride, threads, block, unroll, cluster, rows_per_thread, outputs):
        self.b, self.t, self.op, self.shape = b, t, op, shape
        self.stride_bytes = row_stride * t.nbytes
        self.threads, self.block, self.unroll, self.cluster = threads, block, unroll, cluster
        self.rows_per_thread, self.outputs = rows_per_thread, outputs
        self.groups = block // threads  # row groups in a CTA
        self.rank = None  # the register with %cluster_ctarank, when clustered

    def emit(self) -> None:
        b, threads = self.b, self.threads
        src = b.reg(".b64")
        b.ins("ld.param.u64", src, "[src]")
        b.ins("cvta.to.global.u64", src, src)
        outs = []
        for name, _ in self.outputs:
            outs.append(b.reg(".b64"))
            b.ins("ld.param.u64", outs[-1], f"[{name}]")
            b.ins("cvta.to.global.u64", outs[-1], outs[-1])
        rows32, tid, member, lane, group = b.regs(".b32", 5)
        rows, row_base, step, last, group64 = b.regs(".b64", 5)
        b.ins("ld.param.u32", rows32, "[rows]")
        b.ins("cvt.u64.u32", rows, rows32)
        b.ins("sub.u64", last, rows, 1)
        b.ins("mov.u32", tid, "%tid.x")
        b.ins("and.b32", member, tid, threads - 1)  # position in the row's group
        b.ins("and.b32", lane, tid, 31)
        b.ins("shr.u32", group, tid, threads.bit_length() - 1)
        b.ins("cvt.u64.u32", group64, group)
        clustered = self.cluster > 1
        rows_per_cta = self.groups * self.rows_per_thread
        index = b.reg(".b32")
        b.ins("mov.u32", index, "%clusterid.x" if clustered else "%ctaid.x")
        b.ins("mul.wide.u32", row_base, index, rows_per_cta)
        b.ins("mov.u32", index, "%nclusterid.x" if clustered else "%nctaid.x")
        b.ins("mul.wide.u32", step, index, rows_per_cta)
        position = member  # among the threads that read the row
        if clustered:
            self.rank, position = b.regs(".b32", 2)
            b.ins("mov.u32", self.rank, "%cluster_ctarank")
            b.ins("mad.lo.u32", position, self.rank, threads, member)
        loop = self._cluster_rows if clustered else self._cta_rows
        loop(src, outs, rows, last, tid, member, lane, group, group64, position, row_base, step)

    # ---- the rows ----------------------------------------------------------------------------------
    def _row(self, src, rows, last, group64, row_base, k):
        """Row k of this thread's group in the current iteration: (row, valid, address)."""
        b = self.b
        row, address = b.reg(".b64"), b.reg(".b64")
        valid = b.reg(".pred")
        b.ins("add.s64", row, row_base, group64)
        if k:
            b.ins("add.s64", row, row, k * self.groups)
        b.ins("setp.lt.u64", valid, row, rows)
        b.ins("min.u64", row, row, last)  # rows past the end read the last row, and store nothing
        b.ins("mad.lo.u64", address, row, self.stride_bytes, src)
        return row, valid, address

    def _cta_rows(self, src, outs, rows, last, tid, member, lane, group, group64, position, row_base, step) -> None:
        """C = 1: each row group in turn; a CTA's warps combine through shared memory (one bar.sync)."""
        b = self.b
        shared = self._shared_setup(tid, group)
        done, loop = b.label("done"), b.label("rows")
        finished = b.reg(".pred")
        parity = b.reg(".b32")
        b.ins("mov.u32", parity, 0)
        b.place(loop)
        b.ins("setp.ge.u64", finished, row_base, rows)
        b.ins("bra.uni", done, guard=finished)
        found = [self._row(src, rows, last, group64, row_base, k) for k in range(self.rows_per_thread)]
        for (row, valid, _), state in zip(found, self._reduce([address for _, _, address in found], position)):
            self._combine_threads(state, lane, shared, parity)
            self._store(outs, row, member, valid, state)
        b.ins("add.s64", row_base, row_base, step)
        b.ins("xor.b32", parity, parity, 1)
        b.ins("bra.uni", loop)
        b.place(done)

    def _cluster_rows(self, src, outs, rows, last, tid, member, lane, group, group64, position, row_base,
                      step) -> None:
        """C > 1: row n's states go to rank 0 and the CTAs arrive on the cluster barrier; they
        wait on it only after row n + 1's loads, when rank 0 finishes row n. The states are
        double-buffered: a buffer is written again two phases later, after rank 0 has read it
        and arrived. Every thread arrives once before the first row, so rank 0 has started
        before anyone writes to its shared memory; rank 0 exits only after the last wait."""
        b = self.b
        writer_slot, reader_slot, leader = self._cluster_setup(member, lane, group)
        b.ins("barrier.cluster.arrive.relaxed.aligned")
        more, valid, pending = b.regs(".pred", 3)
        previous = b.reg(".b64")
        parity = b.reg(".b32")
        b.ins("mov.pred", pending, 0)  # no row waits for rank 0 yet
        b.ins("mov.u64", previous, 0)
        b.ins("mov.u32", parity, 0)
        loop, waiting, done = b.label("rows"), b.label("wait"), b.label("done")
        b.place(loop)
        b.ins("setp.lt.u64", more, row_base, rows)
        b.ins("bra.uni", waiting, guard=f"!{more}")
        row, this_valid, address = self._row(src, rows, last, group64, row_base, 0)
        b.ins("mov.pred", valid, this_valid)
        (state,) = self._reduce([address], position)
        self._butterfly(state, min(self.threads, 32))
        b.place(waiting)
        b.ins("barrier.cluster.wait.acquire.aligned")
        self._finish_previous(outs, member, lane, reader_slot, leader, previous, pending, parity)
        b.ins("bra.uni", done, guard=f"!{more}")
        address32, writer = b.reg(".b32"), b.reg(".pred")  # lane 0 of the warp (of the row's group when T < 32)
        b.ins("mad.lo.u32", address32, parity, self._buffer_bytes, writer_slot)
        b.ins("setp.eq.u32", writer, lane if self.threads >= 32 else member, 0)
        for j, (reg, kind) in enumerate(zip(state, self.op.state)):
            b.ins(f"st.shared::cluster.{kind[1:]}", f"[{address32}+{4 * j}]", reg, guard=writer)
        b.ins("barrier.cluster.arrive.release.aligned")
        b.ins("mov.u64", previous, row)
        b.ins("mov.pred", pending, valid)
        b.ins("add.s64", row_base, row_base, step)
        b.ins("xor.b32", parity, parity, 1)
        b.ins("bra.uni", loop)
        b.place(done)

    # ---- 1. each thread folds its share of each row --------------------------------------------------
    def _reduce(self, addresses: list[str], position: str) -> list[list[str]]:
        """Each row's state in this thread: loads first (all rows), then folds."""
        b, shape, op = self.b, self.shape, self.op
        if op.uses_index and shape.cols == 1:  # the first index of a single element: nothing to read
            states = [op.start(b) for _ in addresses]
            for state in states:
                b.ins("mov.u32", state[1], 0)
            return states
        walks = [RowWalk(b, shape, op, address, position) for address in addresses]
        lanes = op.lanes(self.t.name)
        chunks = shape.full_rounds // self.unroll if shape.full_rounds > self.unroll else 0
        states = []
        if chunks:  # a long row (one per thread): a loop of `unroll` vectors at a time
            (walk,) = walks
            states.append([op.start(b) for _ in range(lanes)])
            end, more = b.reg(".b64"), b.reg(".pred")
            b.ins("add.s64", end, walk.cursor, chunks * self.unroll * shape.threads * VECTOR_BYTES)
            loop = b.label("vectors")
            b.place(loop)
            op.fold(b, states[0], walk.vector_elements(walk.load_vectors(0, self.unroll)), ordered=True)
            walk.advance(self.unroll)
            b.ins("setp.lt.u64", more, walk.cursor, end)
            b.ins("bra.uni", loop, guard=more)
            walk.first_round = chunks * self.unroll
        batches = []
        for walk in walks:
            full = shape.full_rounds - walk.first_round
            loads = walk.load_vectors(0, full) + walk.load_vectors(full, shape.vector_rounds - shape.full_rounds,
                                                                  guarded=True)
            batches.append((walk, loads, walk.leftover_elements()))
        for i, (walk, loads, leftover) in enumerate(batches):
            if not chunks:
                states.append([op.start(b) for _ in range(lanes)])
            vectors = walk.vector_elements(loads)
            if vectors:  # the body in index order; the head and tail (lower and higher indices) apart
                op.fold(b, states[i], vectors, ordered=True)
            if leftover:
                op.fold(b, states[i], leftover, ordered=False)
        return [self._merge(state) for state in states]

    def _merge(self, states: list[list[str]]) -> list[str]:
        """Combine a thread's independent states into one (pairwise)."""
        while len(states) > 1:
            half = len(states) // 2
            for i in range(half):
                self.op.combine(self.b, states[i], states[i + half])
            states = states[:half]
        return states[0]

    # ---- 2 and 3. lanes, then warps -----------------------------------------------------------------
    def _butterfly(self, state, width) -> None:
        b, mask = self.b, width // 2
        while mask:
            others = [b.reg(kind) for kind in self.op.state]
            for other, reg in zip(others, state):
                b.ins("shfl.sync.bfly.b32", other, reg, mask, "0x1f", "0xffffffff")
            self.op.combine(b, state, others)
            mask //= 2

    @property
    def _words(self) -> int:
        return len(self.op.state)

    def _shared_setup(self, tid, group):
        """For rows wider than a warp: this warp's slot and the row's first slot (bytes)."""
        if self.threads <= 32:
            return None
        b = self.b
        warps = self.threads // 32
        b.shared("partials", 2 * self.groups * warps * self._words * 4, 16)
        base, mine, first, warp = b.regs(".b32", 4)
        b.ins("mov.u32", base, "partials")
        b.ins("shr.u32", warp, tid, 5)
        b.ins("mad.lo.u32", mine, warp, self._words * 4, base)
        b.ins("mad.lo.u32", first, group, warps * self._words * 4, base)
        return mine, first

    def _combine_threads(self, state, lane, shared, parity) -> None:
        b = self.b
        self._butterfly(state, min(self.threads, 32))
        if shared is None:
            return
        mine, first = shared
        warps = self.threads // 32
        half = self.groups * warps * self._words * 4  # bytes of one buffer
        buffer, slot, address = b.regs(".b32", 3)
        b.ins("mul.lo.u32", buffer, parity, half)
        lane0, reader = b.reg(".pred"), b.reg(".pred")
        b.ins("setp.eq.u32", lane0, lane, 0)
        b.ins("add.u32", slot, mine, buffer)
        for j, (reg, kind) in enumerate(zip(state, self.op.state)):
            b.ins(f"st.shared.{kind[1:]}", f"[{slot}+{4 * j}]", reg, guard=lane0)
        b.ins("bar.sync", 0)
        b.ins("setp.lt.u32", reader, lane, warps)
        b.ins("mad.lo.u32", address, lane, self._words * 4, first)
        b.ins("add.u32", address, address, buffer)
        self._load_state(state, address, reader)
        self._butterfly(state, warps)

    def _load_state(self, state, address, reader) -> None:
        """state = the state at `address` (shared memory) where `reader` (None: everywhere),
        else the identity."""
        for j, (reg, kind, start) in enumerate(zip(state, self.op.state, self.op.identity())):
            if reader is not None:
                self.b.ins(f"mov.{kind[1:]}", reg, f32_literal(start) if kind == ".f32" else start)
            self.b.ins(f"ld.shared.{kind[1:]}", reg, f"[{address}+{4 * j}]", guard=reader)

    @property
    def _partials_per_row(self) -> int:
        """One per warp (per T-lane group when T < 32) of each CTA of the cluster."""
        return self.cluster * max(1, self.threads // 32)

    @property
    def _buffer_bytes(self) -> int:
        return self.groups * self._partials_per_row * self._words * 4

    def _cluster_setup(self, member, lane, group):
        """Where this warp's state goes in rank 0 (a shared::cluster address, for buffer 0),
        where this lane reads states when its CTA is rank 0 (shared::cta), and whether this
        thread is in the warp of rank 0 that finishes its rows (its group's first)."""
        b = self.b
        count, size = self._partials_per_row, self._words * 4
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
        b.ins("mad.lo.u32", local, index, size, base)
        b.ins("mapa.shared::cluster.u32", writer_slot, local, 0)
        b.ins("mad.lo.u32", index, group, count, lane if self.threads >= 32 else member)
        b.ins("mad.lo.u32", reader_slot, index, size, base)
        leader = b.reg(".pred")
        b.ins("setp.eq.u32", leader, rank, 0)
        if self.threads > 32:
            b.ins("setp.lt.and.u32", leader, member, 32, leader)
        return writer_slot, reader_slot, leader

    def _finish_previous(self, outs, member, lane, reader_slot, leader, previous, pending, parity) -> None:
        """Rank 0's first warp of each row group: combine the states of the previous row (in
        the other buffer) and store it."""
        b = self.b
        skip = b.label("finished")
        b.ins("bra.uni", skip, guard=f"!{leader}")
        count, width, size = self._partials_per_row, min(self.threads, 32), self._words * 4
        other, address = b.regs(".b32", 2)
        b.ins("xor.b32", other, parity, 1)
        b.ins("mad.lo.u32", address, other, self._buffer_bytes, reader_slot)
        state = [b.reg(kind) for kind in self.op.state]
        if count < width:  # lanes past the states hold the identity
            reader = b.reg(".pred")
            b.ins("setp.lt.u32", reader, lane if self.threads >= 32 else member, count)
            self._load_state(state, address, reader)
        else:
            self._load_state(state, address, None)
            for k in range(1, count // width):
                more, offset = [b.reg(kind) for kind in self.op.state], b.reg(".b32")
                b.ins("add.u32", offset, address, size * width * k)
                self._load_state(more, offset, None)
                self.op.combine(b, state, more)
        self._butterfly(state, min(count, width))
        self._store(outs, previous, member, pending, state)
        b.place(skip)

    # ---- the results ---------------------------------------------------------------------------------
    def _store(self, outs, row, member, valid, state) -> None:
        b = self.b
        values = self.op.finish(b, state, self.shape.cols)
        writer = b.reg(".pred")
        b.ins("setp.eq.and.u32", writer, member, 0, valid)
        for value, out, (_, kind) in zip(values, outs, self.outputs):
            address = b.reg(".b64")
            b.ins("mad.lo.u64", address, row, _SIZES[kind], out)
            if kind == "f32":
                b.ins("st.global.f32", f"[{address}]", value, guard=writer)
            elif kind == "s64":
                wide = b.reg(".b64")
                b.ins("cvt.u64.u32", wide, value)
                b.ins("st.global.u64", f"[{address}]", wide, guard=writer)
            else:
                rounded = b.reg(".b16")
                b.ins(f"cvt.rn.{kind}.f32", rounded, value)
                b.ins("st.global.b16", f"[{address}]", rounded, guard=writer)

