"""Where a row's elements are, and the loads that read them: aligned 16-byte vectors in
the body, single elements in a short head and tail, never a byte outside the row.

A row starts at any element-aligned address. Its *head* is the elements before the
first 16-byte boundary (0 to V - 1 of them, V elements per vector, at most the whole
row), its *body* the whole vectors after that, its *tail* the elements left over. The
R threads that share a row (position p) read vector ``p + r·R`` in round r, and single
element ``p + r·R`` of the head-and-tail list (head first) in the rounds after that.
The head depends on the address, so the kernel works it out for each row; `RowShape`
holds what is fixed by `cols`:

>>> shape = RowShape(cols=1000, dtype="f32", threads=32)
>>> shape.vectors, shape.full_rounds, shape.vector_rounds, shape.most_leftover, shape.leftover_rounds
((249, 250), 7, 8, 4, 1)
>>> RowShape(cols=7, dtype="f32", threads=1).vectors      # one vector, whatever the alignment
(1, 1)
"""

from __future__ import annotations

from dataclasses import dataclass

from .dtypes import bits_of, dtype as as_dtype
from .rowops import Element

VECTOR_BYTES = 16
#: the body's loads: read-only data path, no L1 allocation (each byte is read once) when a
#: row has at least `L1_BYPASS_THREADS` threads; fewer read whole 128-byte lines of several
#: rows at once, which L1 then serves to the other rows' threads (2.6 -> 2.9 TB/s at 100
#: f32 columns and 2 threads a row, 3.0 -> 3.9 for bf16, on an H200)
VECTOR_LOAD, L1_VECTOR_LOAD = "ld.global.nc.L1::no_allocate.v4", "ld.global.nc.v4"
L1_BYPASS_THREADS = 8


@dataclass(frozen=True)
class RowShape:
    """The static part of a row's layout: `cols` elements of `dtype`, read by `threads`
    threads (all CTAs of a cluster together).

    `vectors` is (fewest, most) whole vectors in a row (the head decides); a thread reads
    `full_rounds` vectors in every row and up to `vector_rounds`; at most `most_leftover`
    elements are in the head and tail, read in `leftover_rounds` rounds.

    >>> shape = RowShape(cols=4096, dtype="bf16", threads=128)   # 8 bf16 a vector
    >>> shape.per_vector, shape.vectors, shape.elements_per_thread()
    (8, (511, 512), 33)
    """

    cols: int
    dtype: str
    threads: int

    @property
    def per_vector(self) -> int:
        return VECTOR_BYTES // as_dtype(self.dtype).nbytes

    @property
    def vectors(self) -> tuple[int, int]:
        v = self.per_vector
        return max(0, (self.cols - (v - 1)) // v), self.cols // v

    @property
    def full_rounds(self) -> int:
        return self.vectors[0] // self.threads

    @property
    def vector_rounds(self) -> int:
        return -(-self.vectors[1] // self.threads)

    @property
    def most_leftover(self) -> int:
        return self.cols - self.vectors[0] * self.per_vector

    @property
    def leftover_rounds(self) -> int:
        return -(-self.most_leftover // self.threads)

    def elements_per_thread(self) -> int:
        """The most elements one thread folds in one row."""
        return self.vector_rounds * self.per_vector + self.leftover_rounds


class RowWalk:
    """One row of one thread: its addresses (worked out from the row's first element) and
    the loads of its rounds, as batches of `rowops.Element`.

    `position` is the thread's place among the row's threads (a .b32 register); `op` says
    what an absent element holds and whether indices are needed.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.rowops import ROW_OPS
    >>> b = PtxBuilder()
    >>> walk = RowWalk(b, RowShape(100, "f32", 8), ROW_OPS["max"], "%rd0", "%r0")
    >>> loads = walk.load_vectors(0, 3)
    >>> len(walk.vector_elements(loads)), b.instructions()[-1].split()[0]
    (12, 'ld.global.nc.L1::no_allocate.v4.f32')
    """

    def __init__(self, b, shape: RowShape, op, address: str, position: str):
        self.b, self.shape, self.op = b, shape, op
        self.t = as_dtype(shape.dtype)
        self.address, self.position = address, position
        nbytes, v = self.t.nbytes, shape.per_vector
        self.head = b.reg(".b32")
        b.ins("cvt.u32.u64", self.head, address)
        b.ins("neg.s32", self.head, self.head)
        b.ins("and.b32", self.head, self.head, VECTOR_BYTES - 1)
        b.ins("shr.u32", self.head, self.head, nbytes.bit_length() - 1)
        b.ins("min.u32", self.head, self.head, shape.cols)
        fewest, most = shape.vectors
        self.vectors = None  # a register when the head decides how many vectors there are
        self.leftover = b.reg(".b32")
        if fewest != most:
            self.vectors = b.reg(".b32")
            b.ins("sub.u32", self.vectors, shape.cols, self.head)
            b.ins("shr.u32", self.vectors, self.vectors, v.bit_length() - 1)
            b.ins("mul.lo.u32", self.leftover, self.vectors, v)
            b.ins("sub.u32", self.leftover, shape.cols, self.leftover)
        else:
            b.ins("mov.u32", self.leftover, shape.cols - most * v)
        # the cursor: this thread's vector of round 0, and the index of its first element
        offset, self.cursor = b.reg(".b64"), b.reg(".b64")
        b.ins("mul.wide.u32", offset, self.head, nbytes)
        b.ins("add.s64", self.cursor, address, offset)
        b.ins("mul.wide.u32", offset, position, VECTOR_BYTES)
        b.ins("add.s64", self.cursor, self.cursor, offset)
        self.index = None
        if op.uses_index:
            self.index = b.reg(".b32")
            b.ins("mad.lo.u32", self.index, position, v, self.head)
        self.first_round = 0  # the round the cursor points at

    # ---- vectors ----------------------------------------------------------------------------
    def advance(self, rounds: int) -> None:
        """Move the cursor `rounds` vector rounds on (in the loop over long rows; the caller
        sets `first_round` to the round where the cursor is after the loop)."""
        b, step = self.b, rounds * self.shape.threads
        b.ins("add.s64", self.cursor, self.cursor, step * VECTOR_BYTES)
        if self.index is not None:
            b.ins("add.u32", self.index, self.index, step * self.shape.per_vector)

    def load_vectors(self, first: int, count: int, guarded: bool = False) -> list[tuple[list[str], str | None, int]]:
        """Issue the loads of rounds ``first … first + count - 1`` (counted from the cursor's
        round): [(words, present, round)]; with `guarded`, each load happens only if its
        vector is in the row, and an absent one holds the op's neutral value."""
        b, shape = self.b, self.shape
        kind = ".f32" if self.t.name == "f32" else ".b32"
        loads = []
        for r in range(first, first + count):
            words, present = b.regs(kind, 4), None
            if guarded:
                present = self._vector_present(self.first_round + r)
                for word in words:
                    b.ins("mov.b32", word, self._neutral_word())
            load = VECTOR_LOAD if shape.threads >= L1_BYPASS_THREADS else L1_VECTOR_LOAD
            b.ins(f"{load}.{kind[1:]}", f"{{{', '.join(words)}}}",
                  f"[{self.cursor}+{r * shape.threads * VECTOR_BYTES}]", guard=present)
            loads.append((words, present, r))
        return loads

    def _vector_present(self, round_: int) -> str:
        b, present = self.b, self.b.reg(".pred")
        offset = round_ * self.shape.threads
        if self.vectors is None:  # as many vectors in every row
            b.ins("setp.lt.u32", present, self.position, self.shape.vectors[1] - offset)
        else:
            which = b.reg(".b32")
            b.ins("add.u32", which, self.position, offset)
            b.ins("setp.lt.u32", present, which, self.vectors)
        return present

    def _neutral_word(self) -> str:
        if self.t.name == "f32":
            return f"0x{bits_of('f32', self.op.neutral):08X}"
        half = bits_of(self.t, self.op.neutral)
        return f"0x{half << 16 | half:08X}"

    def vector_elements(self, loads) -> list[Element]:
        """The elements of loaded vectors, widened to f32, in index order per vector."""
        v, threads = self.shape.per_vector, self.shape.threads
        elements = []
        for words, present, r in loads:
            values = list(words) if self.t.name == "f32" else [x for word in words for x in self._widen(word)]
            for c, value in enumerate(values):
                elements.append(Element(value, (self.index, r * threads * v + c), present))
        return elements

    def _widen(self, word: str) -> tuple[str, str]:
        b, low, high = self.b, self.b.reg(".f32"), self.b.reg(".f32")
        if self.t.name == "bf16":  # a bf16 is the top half of an f32
            b.ins("shl.b32", low, word, 16)
            b.ins("and.b32", high, word, "0xffff0000")
        else:
            halves = b.regs(".b16", 2)
            b.ins("mov.b32", f"{{{halves[0]}, {halves[1]}}}", word)
            b.ins("cvt.f32.f16", low, halves[0])
            b.ins("cvt.f32.f16", high, halves[1])
        return low, high

    # ---- head and tail -------------------------------------------------------------------------
    def leftover_elements(self) -> list[Element]:
        """Load this thread's head and tail elements: element ``e = p + r·R`` of the list is
        row element e when e < head, else e + (vectors in the row) · V."""
        b, shape, t = self.b, self.shape, self.t
        nbytes, v = t.nbytes, shape.per_vector
        elements = []
        for r in range(shape.leftover_rounds):
            e, index, present = b.reg(".b32"), b.reg(".b32"), b.reg(".pred")
            b.ins("add.u32", e, self.position, r * shape.threads)
            b.ins("setp.lt.u32", present, e, self.leftover)
            in_head, body = b.reg(".pred"), b.reg(".b32")
            b.ins("setp.lt.u32", in_head, e, self.head)
            if self.vectors is None:
                b.ins("add.u32", body, e, shape.vectors[1] * v)
            else:
                b.ins("mad.lo.u32", body, self.vectors, v, e)
            b.ins("selp.b32", index, e, body, in_head)
            offset, address = b.reg(".b64"), b.reg(".b64")
            b.ins("mul.wide.u32", offset, index, nbytes)
            b.ins("add.s64", address, self.address, offset)
            value = b.reg(".f32")
            if t.name == "f32":
                b.ins("mov.f32", value, f"0f{bits_of('f32', self.op.neutral):08X}")
                b.ins("ld.global.nc.f32", value, f"[{address}]", guard=present)
            else:
                half, zero = b.regs(".b16", 2)
                b.ins("mov.b16", half, f"0x{bits_of(t, self.op.neutral):04X}")
                b.ins("ld.global.nc.b16", half, f"[{address}]", guard=present)
                if t.name == "bf16":
                    b.ins("mov.b16", zero, 0)
                    b.ins("mov.b32", value, f"{{{zero}, {half}}}")
                else:
                    b.ins("cvt.f32.f16", value, half)
            elements.append(Element(value, (index, 0), present))
        return elements
