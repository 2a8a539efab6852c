"""The ops of the row reduction: each one a monoid over a small state.

A row reduction (`rowreduce`) folds batches of a row's elements into a state in each
thread, combines the states of the threads with the op's `combine` (butterflies, shared
memory, a cluster), and turns the last state into the outputs. One skeleton serves every
op; an op is an entry of `ROW_OPS`:

=========  =====================  ============================  ===========================================
op         state                  outputs                       the same result in torch
=========  =====================  ============================  ===========================================
sum        sum                    sum (input dtype)             ``x.sum(-1)``
sumsq      sum of squares         sumsq (f32)                   ``(x.float() ** 2).sum(-1)``
max        max                    max (input dtype)             ``x.amax(-1)``
min        min                    min (input dtype)             ``x.amin(-1)``
logsumexp  (max, rescaled sum)    logsumexp (input dtype)       ``x.logsumexp(-1)``
meanvar    (n, sum, mean, M2)     mean, var (input dtype)       ``x.mean(-1)``, ``x.var(-1, correction=0)``
argmax     (value, index)         index (s64)                   ``x.argmax(-1)``
argmin     (value, index)         index (s64)                   ``x.argmin(-1)``
=========  =====================  ============================  ===========================================

Every element is folded in f32 (halves are widened exactly) and each output is rounded
once at the end, so sums, sums of squares, log-sum-exps and means are never worse than
torch's. NaN: max, min, argmax and argmin follow the NaN policy (`combine`): by default a
NaN wins (as torch; argmax/argmin give the first NaN's index), with ``nan="ignore"`` it
loses to every number (a row of NaN gives NaN's place: -inf or +inf for max/min, index
0 for argmax/argmin). Ties give the first index. log-sum-exp treats ±inf and NaN as
torch does (a row of -inf gives -inf, +inf gives +inf, NaN gives NaN).

meanvar gives what IEEE arithmetic, numpy's float64 ``np.mean`` and ``np.var`` and torch's
``x.mean(-1)`` and ``x.var(-1, correction=0)`` give, infinities included: the mean of a row
holding +inf (-inf) and no NaN or infinity of the other sign is +inf (-inf), of a row with
both signs or a NaN it is NaN; the variance of a row holding any infinity or NaN is NaN
(an infinite element's deviation from the infinite mean is inf - inf). Rows without them match
``torch.var_mean(x, -1, correction=0)`` too; on rows with an infinity, torch's CUDA
``var_mean`` (seen on an H100) returns NaN as the mean as well, an artifact of its Welford
merge (``mean_a + (mean_b - mean_a)·w`` is ``inf - inf`` once an infinite mean meets a
finite one), not a property of the row: the mean written here is sum / n (`_MeanVar`).

>>> op = ROW_OPS["logsumexp"]
>>> op.state, op.outputs, op.output_dtypes("bf16")
(('.f32', '.f32'), ('logsumexp',), ('bf16',))
>>> ROW_OPS["argmax"].output_dtypes("f16"), ROW_OPS["meanvar"].outputs
(('s64',), ('mean', 'var'))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .builder import f32_literal
from .combine import DEFAULT_NAN, check_nan, opcode

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
#: the index of an empty (value, index) state: larger than every real index
EMPTY = 0xFFFFFFFF


@dataclass(frozen=True)
class Element:
    """One element of a batch: its f32 register, its row index as ``register + offset``,
    and the predicate that says it exists (None: it always does). An element that does
    not exist holds the op's `RowOp.neutral` value.

    >>> Element("%f3", ("%r7", 12), "%p2").index
    ('%r7', 12)
    """

    value: str
    index: tuple[str, int]
    present: str | None = None


class RowOp:
    """An op of the row reduction (see the module docstring); subclasses fill in the parts.

    `lanes` is how many independent states a thread keeps while it folds (for the
    instruction-level parallelism of element-wise ops); the kernel merges them with
    `combine` before the threads combine theirs.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b, op = PtxBuilder(), ROW_OPS["sum"]
    >>> state, other = op.start(b), op.start(b)
    >>> op.combine(b, state, other); b.instructions()
    ['mov.f32 %f0, 0f00000000;', 'mov.f32 %f1, 0f00000000;', 'add.f32 %f0, %f0, %f1;']
    """

    name: str
    state: tuple[str, ...] = (".f32",)
    outputs: tuple[str, ...]
    uses_index = False

    def __init__(self, name: str, nan: str = DEFAULT_NAN):
        self.name, self.nan = name, check_nan(nan)

    def output_dtypes(self, dtype: str) -> tuple[str, ...]:
        """The dtype of each output for input `dtype` (torch's)."""
        return (dtype,) * len(self.outputs)

    def lanes(self, dtype: str) -> int:
        return 1

    @property
    def neutral(self) -> float:
        """The value an absent element holds (what a guarded load leaves)."""
        return 0.0

    def identity(self) -> tuple:
        """The state's start value, one constant per register (floats, or ints for .b32)."""
        return (0.0,)

    def start(self, b) -> list[str]:
        """Fresh state registers set to the identity."""
        regs = [b.reg(kind) for kind in self.state]
        for reg, kind, value in zip(regs, self.state, self.identity()):
            if kind == ".f32":
                b.ins("mov.f32", reg, f32_literal(value))
            else:
                b.ins("mov.u32", reg, value)
        return regs

    def fold(self, b, states: list[list[str]], batch: list[Element], ordered: bool = False) -> None:
        """Fold `batch` into `states` (this thread's independent states). `ordered`: the
        batch's indices rise in its order and are above every index folded before."""
        raise NotImplementedError

    def combine(self, b, state: list[str], other: list[str]) -> None:
        """``state = state ⊕ other``."""
        raise NotImplementedError

    def finish(self, b, state: list[str], cols: int) -> list[str]:
        """The outputs (f32 registers, .b32 for an index) of a row's final state."""
        return [state[0]]


class _Elementwise(RowOp):
    """sum, sumsq, max, min: one f32 per state, an element combines with one instruction."""

    def __init__(self, name: str, nan: str = DEFAULT_NAN):
        super().__init__(name, nan)
        self.outputs = (name,)

    def output_dtypes(self, dtype):
        return ("f32",) if self.name == "sumsq" else (dtype,)

    def lanes(self, dtype):
        return 4 if dtype == "f32" else 8

    @property
    def neutral(self):
        return {"max": -math.inf, "min": math.inf}.get(self.name, 0.0)

    def identity(self):
        return (self.neutral,)

    def _step(self, b, acc, x, square=False):
        if square:
            b.ins("fma.rn.f32", acc, x, x, acc)
        else:
            b.ins(opcode({"sumsq": "sum"}.get(self.name, self.name), "f32", self.nan), acc, acc, x)

    def fold(self, b, states, batch, ordered=False):
        for j, element in enumerate(batch):
            self._step(b, states[j % len(states)][0], element.value, square=self.name == "sumsq")

    def combine(self, b, state, other):
        self._step(b, state[0], other[0])


class _LogSumExp(RowOp):
    """(m, s): m the NaN-propagating max, s = Σ exp(x - shift(m)) where shift(m) is m when
    finite, else 0 (torch's rule, so ±inf rows need no special case). A batch costs one
    ``ex2`` per element: its max first, then one rescale of s."""

    state = (".f32", ".f32")
    outputs = ("logsumexp",)

    @property
    def neutral(self):
        return -math.inf

    def identity(self):
        return (-math.inf, 0.0)

    def _shift(self, b, m):
        finite, shift = b.reg(".pred"), b.reg(".f32")
        b.ins("testp.finite.f32", finite, m)
        b.ins("selp.f32", shift, m, "0f00000000", finite)
        return shift

    def _rescale(self, b, s, old_shift, new_shift):
        """s ·= exp(old_shift - new_shift), the exponent clamped at 0 (a -inf max had shift 0)."""
        scale = b.reg(".f32")
        b.ins("sub.f32", scale, old_shift, new_shift)
        b.ins("mul.f32", scale, scale, f32_literal(LOG2E))
        b.ins("min.f32", scale, scale, "0f00000000")
        b.ins("ex2.approx.ftz.f32", scale, scale)
        b.ins("mul.f32", s, s, scale)

    def fold(self, b, states, batch, ordered=False):
        (m, s), = states
        values = [e.value for e in batch]
        top = _tree(b, values, lambda d, x, y: b.ins("max.NaN.f32", d, x, y))
        old_shift = self._shift(b, m)
        b.ins("max.NaN.f32", m, m, top)
        shift = self._shift(b, m)
        self._rescale(b, s, old_shift, shift)
        minus = b.reg(".f32")
        b.ins("mul.f32", minus, shift, f32_literal(-LOG2E))
        terms = []
        for x in values:
            term = b.reg(".f32")
            b.ins("fma.rn.f32", term, x, f32_literal(LOG2E), minus)
            b.ins("ex2.approx.ftz.f32", term, term)
            terms.append(term)
        b.ins("add.f32", s, s, _tree(b, terms, lambda d, x, y: b.ins("add.f32", d, x, y)))

    def combine(self, b, state, other):
        (m, s), (m2, s2) = state, other
        old, theirs = self._shift(b, m), self._shift(b, m2)
        b.ins("max.NaN.f32", m, m, m2)
        shift = self._shift(b, m)
        self._rescale(b, s, old, shift)
        self._rescale(b, s2, theirs, shift)
        b.ins("add.f32", s, s, s2)

    def finish(self, b, state, cols):
        m, s = state
        finite, result = b.reg(".pred"), b.reg(".f32")
        b.ins("testp.finite.f32", finite, m)
        b.ins("lg2.approx.ftz.f32", result, s)
        b.ins("fma.rn.f32", result, result, f32_literal(LN2), m)
        b.ins("selp.f32", result, result, m, finite)
        return [result]


class _MeanVar(RowOp):
    """(n, sum, mean, M2): a batch's own mean and M2 (two passes over registers), then
    Chan's combination, which stays accurate when the mean is large against the spread.
    The mean written out is sum / n, not Chan's running mean, which turns NaN when an
    infinite mean meets a finite one (as torch's CUDA ``var_mean`` does): a row holding
    +inf gets the mean +inf, as numpy's ``np.mean`` and ``torch.mean`` give, and one with
    +inf and -inf (or a NaN) NaN. The batch holding an infinity has an infinite mean, so
    its deviations, M2 and the variance are NaN, as ``np.var`` gives."""

    state = (".f32", ".f32", ".f32", ".f32")
    outputs = ("mean", "var")

    def identity(self):
        return (0.0, 0.0, 0.0, 0.0)

    def fold(self, b, states, batch, ordered=False):
        (state,) = states
        values = [e.value for e in batch]
        add = lambda d, x, y: b.ins("add.f32", d, x, y)  # noqa: E731
        total = _tree(b, values, add)
        mean = b.reg(".f32")
        if all(e.present is None for e in batch):
            count = b.reg(".f32")
            b.ins("mov.f32", count, f32_literal(len(batch)))
            b.ins("mul.f32", mean, total, f32_literal(1.0 / len(batch)))
        else:  # absent elements hold 0: the sum is right, the count must count them out
            ones = []
            for e in batch:
                one = b.reg(".f32")
                if e.present is None:
                    b.ins("mov.f32", one, "0f3F800000")
                else:
                    b.ins("selp.f32", one, "0f3F800000", "0f00000000", e.present)
                ones.append(one)
            count = _tree(b, ones, add)
            divisor = b.reg(".f32")
            b.ins("max.f32", divisor, count, "0f3F800000")
            b.ins("div.full.f32", mean, total, divisor)
        squares = b.regs(".f32", min(4, len(batch)))  # a few sums, for parallelism
        for j, e in enumerate(batch):
            d = b.reg(".f32")
            b.ins("sub.f32", d, e.value, mean)
            if e.present:
                b.ins("selp.f32", d, d, "0f00000000", e.present)
            if j < len(squares):
                b.ins("mul.f32", squares[j], d, d)
            else:
                b.ins("fma.rn.f32", squares[j % len(squares)], d, d, squares[j % len(squares)])
        self.combine(b, state, [count, total, mean, _tree(b, squares, add)])

    def combine(self, b, state, other):
        (n, total, mean, m2), (n2, total2, mean2, m2b) = state, other
        delta, weight, count, divisor = b.regs(".f32", 4)
        b.ins("add.f32", count, n, n2)
        b.ins("add.f32", total, total, total2)
        b.ins("sub.f32", delta, mean2, mean)
        b.ins("max.f32", divisor, count, "0f3F800000")  # two empty states: weight 0
        b.ins("div.full.f32", weight, n2, divisor)  # within 2 ulps, with no slow path
        b.ins("fma.rn.f32", mean, delta, weight, mean)
        b.ins("mul.f32", weight, weight, n)
        b.ins("mul.f32", weight, weight, delta)  # delta · n · n2 / count
        b.ins("add.f32", m2, m2, m2b)
        b.ins("fma.rn.f32", m2, delta, weight, m2)
        b.ins("mov.f32", n, count)

    def finish(self, b, state, cols):
        _, total, _, m2 = state
        return [_divide(b, total, cols), _divide(b, m2, cols)]


class _ArgExtreme(RowOp):
    """(value, index): the first index of the largest (argmax) or smallest (argmin) value,
    NaN ranked by the NaN policy. A batch takes its extreme first (one ``max``/``min`` per
    element) and looks for its index only when that beats the state, which on long rows is
    rare: two instructions an element when the batch is in index order after everything
    folded so far (the body); otherwise (the head and tail) ties count too, and the lowest
    index of a tie wins."""

    state = (".f32", ".b32")
    outputs = ("index",)
    uses_index = True

    def __init__(self, name, nan=DEFAULT_NAN):
        super().__init__(name, nan)
        self.compare = "gt" if name == "argmax" else "lt"

    def output_dtypes(self, dtype):
        return ("s64",)

    @property
    def neutral(self):
        if self.nan == "ignore":
            return math.nan  # lower than every number
        return -math.inf if self.name == "argmax" else math.inf

    def identity(self):
        return (self.neutral, EMPTY)

    def _beats(self, b, a, c) -> str:
        """A predicate: a ranks strictly before c (NaN first when propagating, last when ignoring)."""
        flag = b.reg(".pred")
        first, second = (c, a) if self.nan == "propagate" else (a, c)
        b.ins("setp.num.f32", flag, first, first)
        b.ins("setp.nan.and.f32", flag, second, second, flag)
        b.ins(f"setp.{self.compare}.or.f32", flag, a, c, flag)
        return flag

    def fold(self, b, states, batch, ordered=False):
        (value, index), = states
        extreme = {"argmax": "max", "argmin": "min"}[self.name]
        top = _tree(b, [e.value for e in batch], lambda d, x, y: b.ins(opcode(extreme, "f32", self.nan), d, x, y))
        beats, look = self._beats(b, top, value), b.reg(".pred")
        empty = b.reg(".pred")
        b.ins("setp.eq.u32", empty, index, EMPTY)
        present = [e.present for e in batch if e.present is not None]
        if len(present) == len(batch):  # maybe nothing here: an empty state then stays empty
            anything = b.reg(".pred")
            b.ins("mov.pred", anything, present[0])
            for flag in present[1:]:
                b.ins("or.pred", anything, anything, flag)
            b.ins("and.pred", empty, empty, anything)
        b.ins("or.pred", look, beats, empty)
        if not ordered:  # a tie may come with a lower index
            tie = self._same(b, top, value)
            b.ins("or.pred", look, look, tie)
        skip = b.label("same")
        b.ins("bra", skip, guard=f"!{look}")
        if ordered:
            self._first_match(b, batch, top, index)
        else:
            self._lowest_match(b, batch, top, index, beats)
        b.ins("mov.f32", value, top)
        b.place(skip)

    def _first_match(self, b, batch, top, index) -> None:
        """index = the first element equal to `top` (or the first NaN, when `top` is NaN):
        the elements backwards, each match overwriting the last."""
        top_nan, match = b.reg(".pred"), b.reg(".pred")
        numbers, done = b.label("numbers"), b.label("found")
        b.ins("setp.num.f32", top_nan, top, top)
        b.ins("bra", numbers, guard=top_nan)
        for compare in ("nan", "eq"):
            for e in reversed(batch):
                if compare == "nan":
                    b.ins("setp.nan.f32", match, e.value, e.value)
                else:
                    b.ins("setp.eq.f32", match, e.value, top)
                if e.present is not None:
                    b.ins("and.pred", match, match, e.present)
                b.ins("add.u32", index, e.index[0], e.index[1], guard=match)
            if compare == "nan":
                b.ins("bra.uni", done)
                b.place(numbers)
        b.place(done)

    def _lowest_match(self, b, batch, top, index, beats) -> None:
        """index = the lowest index among the elements that rank equal to `top`, and the
        state's own index unless `top` beats it (any order of elements)."""
        b.ins("selp.b32", index, EMPTY, index, beats)
        top_nan, match, candidate = b.reg(".pred"), b.reg(".pred"), b.reg(".b32")
        b.ins("setp.nan.f32", top_nan, top, top)
        for e in batch:
            b.ins("setp.nan.and.f32", match, e.value, e.value, top_nan)
            b.ins("setp.eq.or.f32", match, e.value, top, match)
            if e.present is not None:
                b.ins("and.pred", match, match, e.present)
            b.ins("add.u32", candidate, e.index[0], e.index[1])
            b.ins("min.u32", index, index, candidate, guard=match)

    def _same(self, b, a, c) -> str:
        """A predicate: a and c rank equal (equal numbers, or both NaN)."""
        flag = b.reg(".pred")
        b.ins("setp.nan.f32", flag, a, a)
        b.ins("setp.nan.and.f32", flag, c, c, flag)
        b.ins("setp.eq.or.f32", flag, a, c, flag)
        return flag

    def combine(self, b, state, other):
        (value, index), (value2, index2) = state, other
        take, tie = self._beats(b, value2, value), self._same(b, value2, value)
        b.ins("setp.lt.and.u32", tie, index2, index, tie)
        b.ins("or.pred", take, take, tie)
        b.ins("mov.f32", value, value2, guard=take)
        b.ins("mov.u32", index, index2, guard=take)

    def finish(self, b, state, cols):
        return [state[1]]


def _divide(b, x: str, c: int) -> str:
    """x / c for a constant c: the product with 1/c, corrected once by its residual (the
    correctly rounded quotient but in rare ties; ``div.rn`` would call a slow path)."""
    q, residual, corrected = b.regs(".f32", 3)
    finite = b.reg(".pred")
    b.ins("mul.f32", q, x, f32_literal(1.0 / c))
    b.ins("fma.rn.f32", residual, q, f32_literal(-float(c)), x)
    b.ins("fma.rn.f32", corrected, residual, f32_literal(1.0 / c), q)
    b.ins("testp.finite.f32", finite, q)  # an infinite or NaN quotient has no residual
    b.ins("selp.f32", q, corrected, q, finite)
    return q


def _tree(b, values: list[str], emit) -> str:
    """Combine `values` pairwise (a tree, for parallelism) with ``emit(d, x, y)``; returns
    the register with the result (a fresh one, so the inputs stay as they were)."""
    level = list(values)
    if len(level) == 1:
        result = b.reg(".f32")
        b.ins("mov.f32", result, level[0])
        return result
    while len(level) > 1:
        paired = []
        for i in range(0, len(level) - 1, 2):
            d = b.reg(".f32")
            emit(d, level[i], level[i + 1])
            paired.append(d)
        level = paired + level[len(level) - len(level) % 2:]
    return level[0]


_KINDS = {"sum": _Elementwise, "sumsq": _Elementwise, "max": _Elementwise, "min": _Elementwise,
          "logsumexp": _LogSumExp, "meanvar": _MeanVar, "argmax": _ArgExtreme, "argmin": _ArgExtreme}
#: every op with the default NaN policy; `row_op` builds one for a policy
ROW_OPS = {name: kind(name) for name, kind in _KINDS.items()}


def row_op(name: str, nan: str = DEFAULT_NAN) -> RowOp:
    """The op called `name` with NaN policy `nan`; ValueError names the ops for another name.

    >>> row_op("argmin", "ignore").neutral
    nan
    >>> row_op("prod")
    Traceback (most recent call last):
    ...
    ValueError: unknown row-reduction op 'prod'; expected one of sum, sumsq, max, min, logsumexp, meanvar, argmax, argmin
    """
    if name not in _KINDS:
        raise ValueError(f"unknown row-reduction op {name!r}; expected one of {', '.join(_KINDS)}")
    return _KINDS[name](name, nan)
