"""TVM's local-reduction tests (docs/reduction.md §4.4–§4.13) and the cases TVM does not
test (docs/reduction.md §7.4), as register-image cases with numpy float64 references.

Tolerances are not TVM's (0.1 and 0.25 for f16/bf16, which let a wrong shuffle mask pass):
max and min must be exact, and a sum may be off by at most γ_d · Σ|x| (`accuracy`), d
the depth of the path's accumulation (log2 of the width of a butterfly; n - 1, which
bounds every order, for the sequential folds).

`tvm_cases()` gives 143 of TVM's 144 local-variant cases with TVM's parameters (the
144th, the multi-warp loop of docs/reduction.md §4.12, needs shared memory and a loop: it is a natural
kernel in `natural.py`), plus TVM's 36 3-input max/min cases, which before sm_100 take
Path 1 as in TVM; `extra_cases()` gives docs/reduction.md §7.4; `sm100_cases()` the fast paths (run by
the simulator, assembled for sm_100a). The same cases run on the GPU
(tests/test_reduce_gpu.py) and in the simulator (the CPU tests).

>>> cases = tvm_cases()
>>> len(cases), sum(c.group != "maxmin_fallback" for c in cases)
(179, 143)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

from .accuracy import sum_bound
from .analysis import shuffle_plan
from .dispatch import reduce_local
from .dtypes import dtype as as_dtype
from .harness import ImageCase, TileSpec
from .layout import R, S, TileLayout, laneid, row_major, wg_local_layout

OPS = ("sum", "max", "min")

NP_OPS = {"sum": np.sum, "max": np.max, "min": np.min}
COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


@dataclass
class ParityCase:
    """A register-image case, its group, the reference, the op and the accumulation depth.

    ``expected(a, b)`` maps the logical inputs (``[copies, *shape]``, float64) to the
    expected result through `case.out`. ``inputs(rng)`` overrides random inputs. `depth`
    is how many roundings a term of a sum goes through (None: n - 1 for n terms, true of
    any order; 0: the result must be exact).

    >>> from ptxkit.generators.harness import module_text, simulator
    >>> case = identity_cases()[2]
    >>> case.name, case.group, case.op
    ('max_propagates_nan', 'identity', 'max')
    >>> case.run_and_check(simulator(module_text([case.case])))      # raises on a mismatch
    """

    case: ImageCase
    group: str
    expected: Callable
    op: str
    inputs: Callable | None = None
    seed: int = 0
    signed_zeros: bool = False  # also compare the sign of zero results
    depth: int | None = None

    @property
    def name(self) -> str:
        return self.case.name

    def make_inputs(self):
        rng = np.random.default_rng(self.seed)
        return self.inputs(rng, self.case) if self.inputs else self.case.inputs(rng)

    def run_and_check(self, runner) -> None:
        """Make the inputs, run the case on `runner` (`harness.simulator` or `harness.gpu_runner`)
        and `check` the result."""
        a, b = self.make_inputs()
        self.check(self.case.run(a, b, runner), a, b)

    def tolerance(self, a, b):
        """0 (exact) for max, min and integers; for a sum γ_depth · Σ|terms| of each result.

        >>> case = warp_shuffle_cases()[0]                  # 32 lanes: 5 roundings deep
        >>> a, b = np.ones((1, 32)), np.zeros((1, 1))
        >>> float(case.tolerance(a, b)[0, 0]) == 32 * 5 * 2**-24 / (1 - 5 * 2**-24)
        True
        """
        t = as_dtype(self.case.out.dtype)
        if self.op != "sum" or not t.is_float or self.depth == 0:
            return 0.0
        magnitude = np.asarray(self.expected(np.abs(a), np.abs(b)), np.float64)
        if self.depth is not None:
            return sum_bound(self.depth, t.name, magnitude)
        terms = np.asarray(self.expected(np.ones_like(a), np.ones_like(b)), np.float64)
        return sum_bound(np.maximum(terms - 1, 0), t.name, magnitude)

    def check(self, run, a, b) -> None:
        """Assert that an `ImageRun` of this case matches the reference (every replica copy,
        the gaps, and with `signed_zeros` the signs of zero results)."""
        expected = self.expected(a, b)
        run.assert_close(expected, atol=self.tolerance(a, b))
        if self.signed_zeros:
            want = np.broadcast_to(np.asarray(expected, np.float64).reshape(len(a), 1, -1), run.values.shape)
            np.testing.assert_array_equal(np.signbit(run.values), np.signbit(want))


def _reduce(op, x, axes, keepdims=False):
    return NP_OPS[op](np.asarray(x, np.float64), axis=axes, keepdims=keepdims)


def _with_old(op, value, old, accum):
    return COMBINE[op](value, old) if accum else value


def _name(*parts) -> str:
    text = "_".join(str(p) for p in parts if p != "")
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text.replace("-", "m"))


def _shape_name(shape) -> str:
    return "x".join(map(str, shape))


# ---- docs/reduction.md §4.4 Path 1 -------------------------------------------------------------------------
THREAD_WISE = [
    ((1,), (1,), (0,)), ((4,), (1,), (0,)), ((7,), (1,), (0,)), ((16,), (1,), (0,)), ((32,), (1,), (0,)),
    ((4, 8), (8,), (0,)), ((4, 8), (4,), (1,)), ((3, 4, 5), (4,), (0, 2)), ((2, 3, 4), (2, 3), (-1,)),
    ((2, 3, 4), (3, 4), (0,)),
]


def thread_wise_cases(target="sm_90a", copies=4) -> list[ParityCase]:
    """docs/reduction.md §4.4: Path 1 over TVM's shapes and axes, every op, with and without accum.

    >>> cases = thread_wise_cases()
    >>> len(cases), cases[1].name, cases[1].case.copies
    (60, 'thread_1_ax_0_sum_acc', 4)
    """
    cases = []
    for src, dst, axes in THREAD_WISE:
        for op in OPS:
            for accum in (False, True):
                def generate(d, s, axes=axes, op=op, accum=accum):
                    reduce_local(d, s, axes=axes, op=op, accum=accum)

                def expected(a, b, axes=axes, op=op, accum=accum, dst=dst):
                    result = _reduce(op, a, tuple(x + 1 if x >= 0 else x for x in axes)).reshape(len(a), *dst)
                    return _with_old(op, result, b, accum)

                name = _name("thread", _shape_name(src), "ax", *axes, op, "acc" if accum else "")
                case = ImageCase(name, TileSpec(src), TileSpec(dst), generate, copies, target)
                cases.append(ParityCase(case, "thread_wise", expected, op))
    return cases


# ---- docs/reduction.md §4.5 Path 3, purely local -----------------------------------------------------------
VIEW_BASIC = [
    ((64,), (1,), (-1,), False, None), ((64,), (1,), (-1,), True, None), ((64,), (1,), (-1,), False, 32),
    ((4, 8), (1, 1), (1, 2), False, None), ((4, 8), (4, 1), (-1,), False, None), ((4, 8), (1, 8), (1,), False, None),
]


def _lane_rows(shape) -> TileLayout:
    """``S[(32, *inner) : (1@laneid, *row_major(inner))]``: each lane holds one row."""
    return TileLayout(S[tuple(shape) : (1 @ laneid, *row_major(shape[1:]))])


def view_basic_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §4.5: Path 3 at warp scope on one row per lane, folded within each
    lane (no shuffles).

    >>> cases = view_basic_cases()
    >>> len(cases), cases[0].name, cases[0].case.src.layout
    (18, 'view_64_to_1_ax_m1_sum', S[(32, 64) : (1@laneid, 1)])
    """
    cases = []
    for inner, dst_dims, axes, accum, slice_end in VIEW_BASIC:
        src_shape, dst_shape = (32, *inner), (32, *dst_dims)
        for op in OPS:
            def generate(d, s, axes=axes, op=op, accum=accum, slice_end=slice_end):
                src = s[:, slice_end // 2 : slice_end] if slice_end else s
                reduce_local(d, src, axes=axes, op=op, accum=accum, scope="warp")

            def expected(a, b, axes=axes, op=op, accum=accum, slice_end=slice_end):
                data = a[:, :, slice_end // 2 : slice_end] if slice_end else a
                axes1 = tuple(x + 1 if x >= 0 else x for x in axes)
                return _with_old(op, _reduce(op, data, axes1, keepdims=True), b, accum)

            name = _name("view", _shape_name(inner), "to", _shape_name(dst_dims), "ax", *axes, op,
                         "acc" if accum else "", f"slice{slice_end}" if slice_end else "")
            case = ImageCase(name, TileSpec(src_shape, "f32", _lane_rows(src_shape)),
                             TileSpec(dst_shape, "f32", _lane_rows(dst_shape)), generate, 1, target)
            cases.append(ParityCase(case, "view_basic", expected, op))
    return cases


# ---- docs/reduction.md §4.6 Path 3 with the WGMMA accumulator layout ---------------------------------------
def wgmma_acc_layout() -> TileLayout:
    """The (16, 128) WGMMA accumulator of one warp, built as TVM's test builds it.

    >>> L = wgmma_acc_layout()
    >>> L.size(), L.storage().size(), L.apply((1, 0), shape=[16, 128])     # row 1 is lane 4's
    (2048, 64, [{'m': 0, 'laneid': 4}])
    """
    atom = TileLayout(S[(1, 2) : (2, 1)])
    warp = TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)])
    return atom.tile(warp, (8, 4), (1, 2)).tile(TileLayout(S[(2, 16) : (1, 2)]), (2, 16), (8, 8))


RED_VIEW = TileLayout(S[(2, 32) : (1, 1 @ laneid)])


def view_complex_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §4.6: Path 3 on the WGMMA accumulator (`wgmma_acc_layout`) of 1, 4 and 8 warps, with
    and without shuffles.

    >>> cases = view_complex_cases()
    >>> len(cases), sorted({c.case.copies for c in cases}), cases[0].name
    (54, [1, 4, 8], 'complex_g1w1_sum_f32_shfl')
    """
    cases = []
    for groups, warps in ((1, 1), (1, 4), (2, 8)):
        for op in OPS:
            for dt in ("f32", "f16"):
                for shuffle in (True, False):
                    for accum in (False, True):
                        if accum and not shuffle:
                            continue  # TVM skips it: "accum without shuffle is not supported"

                        def generate(d, s, op=op, shuffle=shuffle, accum=accum):
                            reduce_local(d, s, op=op, accum=accum, scope="warp", thread_reduce=shuffle)
                            if not shuffle:
                                reduce_local(d, d, op=op, scope="warp", thread_reduce=True)

                        def expected(a, b, op=op, accum=accum):
                            rows = _reduce(op, a, 2, keepdims=True)
                            return _with_old(op, np.broadcast_to(rows, b.shape), b, accum)

                        name = _name("complex", f"g{groups}w{warps}", op, dt, "shfl" if shuffle else "noshfl",
                                     "acc" if accum else "")
                        case = ImageCase(name, TileSpec((16, 128), dt, wgmma_acc_layout()),
                                         TileSpec((16, 4), dt, RED_VIEW), generate, warps, target)
                        # 32 of a row's elements per lane folded in turn, 2 butterfly steps, the old value
                        cases.append(ParityCase(case, "view_complex", expected, op, depth=33 + accum))
    return cases


# ---- docs/reduction.md §4.7 3-input max/min on a pre-sm_100 target (Path 1) --------------------------------
MAXMIN_LENGTHS = (8, 16, 64, 128, 256, 7, 10, 15, 100)
PACKED_SUM_LENGTHS = (8, 16, 64, 128, 256, 9, 17, 63, 65, 100)


def _half_old(rng, case):
    a, _ = case.inputs(rng)
    return a, np.full((case.copies, 1), 0.5)


def _one_value_cases(group, lengths, ops, target) -> list[ParityCase]:
    cases = []
    for length in lengths:
        for op in ops:
            for accum in (False, True):
                def generate(d, s, op=op, accum=accum):
                    reduce_local(d, s, op=op, accum=accum)

                def expected(a, b, op=op, accum=accum):
                    return _with_old(op, _reduce(op, a, 1).reshape(-1, 1), b, accum)

                name = _name(group, length, op, "acc" if accum else "")
                case = ImageCase(name, TileSpec((length,)), TileSpec((1,)), generate, 4, target)
                cases.append(ParityCase(case, group, expected, op, _half_old))
    return cases


def maxmin_fallback_cases(target="sm_90a") -> list[ParityCase]:
    """TVM's docs/reduction.md §4.7 on a target before sm_100: Path 1.

    >>> cases = maxmin_fallback_cases()
    >>> len(cases), cases[0].name, cases[0].case.target
    (36, 'maxmin_fallback_8_max', 'sm_90a')
    """
    return _one_value_cases("maxmin_fallback", MAXMIN_LENGTHS, ("max", "min"), target)


def sm100_cases(target="sm_100a") -> list[ParityCase]:
    """TVM's docs/reduction.md §4.7 and §4.8 on sm_100a (36 + 20; length 7 stays on Path 1),
    plus the lengths of docs/reduction.md §7.4 (B14) they miss. Assemble-only on an H200; the
    simulator runs them.

    >>> cases = sm100_cases()
    >>> len(cases), cases[0].name, cases[0].case.target
    (74, 'sm100_maxmin_8_max', 'sm_100a')
    """
    return (_one_value_cases("sm100_maxmin", MAXMIN_LENGTHS + (9, 17, 63, 65), ("max", "min"), target)
            + _one_value_cases("sm100_sum", PACKED_SUM_LENGTHS + (15,), ("sum",), target))


# ---- docs/reduction.md §4.9–§4.11 Path 2 -------------------------------------------------------------------
def _shuffle_case(name, group, src_shape, src_layout, dst_shape, dst_layout, op, dt, expected,
                  target="sm_90a", copies=1, select_for=None, **options):
    """A Path-2 case: a sum is as deep as its butterfly (one rounding per xor mask)."""
    def generate(d, s):
        reduce_local(d, s, op=op, scope="warp", **options)

    case = ImageCase(name, TileSpec(src_shape, dt, src_layout), TileSpec(dst_shape, dt, dst_layout), generate,
                     copies, target, select_for)
    return ParityCase(case, group, expected, op, depth=len(shuffle_plan(src_layout, dst_layout).masks))


def warp_shuffle_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §4.9–§4.11: Path 2 with one or four elements per lane, and a layout with gaps.

    >>> cases = warp_shuffle_cases()
    >>> len(cases), cases[0].name, cases[-1].name
    (9, 'shuffle32_sum_f32', 'shuffle_gapped')
    """
    cases = []
    for op in ("sum", "max"):
        for dt in ("f32", "f16"):
            cases.append(_shuffle_case(
                _name("shuffle32", op, dt), "warp_shuffle", (32,), TileLayout(S[32 : 1 @ laneid]), (1,),
                TileLayout(S[1:1] + R[32 : 1 @ laneid]), op, dt,
                lambda a, b, op=op: _reduce(op, a, 1).reshape(-1, 1), target))
            cases.append(_shuffle_case(
                _name("shuffle_multi", op, dt), "warp_shuffle_multi", (128,), TileLayout(S[(32, 4) : (1 @ laneid, 1)]),
                (4,), TileLayout(S[4:1] + R[32 : 1 @ laneid]), op, dt,
                lambda a, b, op=op: _reduce(op, a.reshape(len(a), 32, 4), 1), target))
    cases.append(_shuffle_case(
        "shuffle_gapped", "warp_shuffle_gapped", (32, 2, 2), TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]), (2, 2),
        TileLayout(S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid]), "sum", "f32",
        lambda a, b: _reduce("sum", a, 1), target))
    return cases


# ---- docs/reduction.md §4.13 Path 3 at warpgroup scope -----------------------------------------------------
def warpgroup_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §4.13: Path 3 at warpgroup scope, one row of 16 per thread.

    >>> [c.name for c in warpgroup_cases()]
    ['wg_local_sum', 'wg_local_max']
    """
    cases = []
    for op in ("sum", "max"):
        def generate(d, s, op=op):
            reduce_local(d, s, axes=[-1], op=op, scope="warpgroup")

        case = ImageCase(_name("wg_local", op), TileSpec((128, 16), "f32", wg_local_layout(16)),
                         TileSpec((128, 1), "f32", wg_local_layout(1)), generate, 1, target)
        cases.append(ParityCase(case, "warpgroup", lambda a, b, op=op: _reduce(op, a, 2, keepdims=True), op))
    return cases


def _path(group, name, src, dst, generate, expected, op, inputs=None, copies=1, target="sm_90a",
          select_for=None, read_as=None, **options) -> ParityCase:
    case = ImageCase(name, src, dst, generate, copies, target, select_for, read_as)
    return ParityCase(case, group, expected, op, inputs, **options)


def _lanes(*specs) -> TileLayout:
    return TileLayout(S[tuple(e for e, _ in specs) : tuple(s @ laneid for _, s in specs)])


def partial_width_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §7.4, B1–B3: Path 2 over groups of W adjacent lanes, strided replicas, width 1.

    >>> cases = partial_width_cases()
    >>> len(cases), sorted({c.group for c in cases})
    (22, ['partial_width', 'strided_replica', 'width1'])
    """
    cases = []
    for width in (2, 4, 8, 16):
        groups = 32 // width
        for op in OPS:
            cases.append(_shuffle_case(
                _name("partial", width, op), "partial_width", (groups, width), _lanes((groups, width), (width, 1)),
                (groups,), TileLayout(S[groups : width @ laneid] + R[width : 1 @ laneid]), op, "f32",
                lambda a, b, op=op: _reduce(op, a, 2), target, copies=2))
    strided = [
        ("stride4", (8, 4), _lanes((8, 4), (4, 1)), (4,), TileLayout(S[4 : 1 @ laneid] + R[8 : 4 @ laneid]), (1,)),
        ("stride16", (2, 16), _lanes((2, 16), (16, 1)), (16,), TileLayout(S[16 : 1 @ laneid] + R[2 : 16 @ laneid]),
         (1,)),
        ("bits0and4", (2, 8, 2), _lanes((2, 16), (8, 2), (2, 1)), (8,),
         TileLayout(S[8 : 2 @ laneid] + R[(2, 2) : (16 @ laneid, 1 @ laneid)]), (1, 3)),
    ]
    for label, src_shape, src_layout, dst_shape, dst_layout, axes in strided:
        for op in OPS:
            cases.append(_shuffle_case(
                _name("strided", label, op), "strided_replica", src_shape, src_layout, dst_shape, dst_layout, op,
                "f32", lambda a, b, op=op, axes=axes: _reduce(op, a, axes), target, copies=2))
    cases.append(_shuffle_case(
        "width1_copy", "width1", (32,), TileLayout(S[32 : 1 @ laneid]), (32,),
        TileLayout(S[32 : 1 @ laneid] + R[1 : 1 @ laneid]), "sum", "f32", lambda a, b: a, target))
    return cases


def packed_half_cases(target="sm_90a") -> list[ParityCase]:
    """Path 2 with f16/bf16, several elements per lane (one pair and a lone element each),
    natively and with the f32 fallbacks of older targets (run on this GPU via `select_for`).

    >>> cases = packed_half_cases()
    >>> len(cases), sorted({c.case.select_for or "native" for c in cases})
    (24, ['native', 'sm_75', 'sm_80'])
    """
    cases = []
    src_layout = TileLayout(S[(4, 8, 3) : (8 @ laneid, 1 @ laneid, 1)])
    dst_layout = TileLayout(S[(4, 3) : (8 @ laneid, 1)] + R[8 : 1 @ laneid])
    for dt, select_for in (("f16", None), ("f16", "sm_75"), ("bf16", None), ("bf16", "sm_80")):
        for op in OPS:
            for pack in (True, False):
                cases.append(_shuffle_case(
                    _name("packed", dt, select_for or "native", op, "pack" if pack else "single"), "packed_half",
                    (4, 8, 3), src_layout, (4, 3), dst_layout, op, dt, lambda a, b, op=op: _reduce(op, a, 2),
                    target, copies=2, select_for=select_for, pack=pack))
    return cases


def integer_cases(target="sm_90a") -> list[ParityCase]:
    """s32/u32 through Path 2 (redux.sync on sm_80+, shuffles as on sm_75) and Path 1.

    >>> cases = integer_cases()
    >>> len(cases), cases[0].name, cases[-1].name
    (30, 'int_s32_native_sum_w_32', 'int_thread_u32_min')
    """
    cases = []
    for dt in ("s32", "u32"):
        for select_for in (None, "sm_75"):
            for op in OPS:
                for width in (32, 8):
                    groups = 32 // width
                    cases.append(_shuffle_case(
                        _name("int", dt, select_for or "native", op, "w", width), "integer", (groups, width),
                        _lanes((groups, width), (width, 1)), (groups,),
                        TileLayout(S[groups : width @ laneid] + R[width : 1 @ laneid]), op, dt,
                        lambda a, b, op=op: _reduce(op, a, 2), target, copies=2, select_for=select_for))
        for op in OPS:
            def generate(d, s, op=op):
                reduce_local(d, s, axes=(1,), op=op)
            cases.append(_path("integer", _name("int_thread", dt, op), TileSpec((3, 5), dt), TileSpec((3,), dt),
                               generate, lambda a, b, op=op: _reduce(op, a, 2), op, copies=4, target=target))
    return cases


def view_mask_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §7.4, B5: Path 3 shuffles over a dim held by several lane iters, and
    over rows spread on lanes.

    >>> [c.name for c in view_mask_cases()][:2]
    ['view_masks_1_2_16_sum', 'view_masks_4_8_16_sum']
    """
    cases = []
    several = TileLayout(S[(4, 2, 4, 8) : (4 @ laneid, 16 @ laneid, 1 @ laneid, 1)])
    several_dst = TileLayout(S[(4, 2, 4) : (4 @ laneid, 16 @ laneid, 1 @ laneid)])
    rows = TileLayout(S[(8, 4, 8) : (4 @ laneid, 1 @ laneid, 1)])
    for op in OPS:
        def generate(d, s, op=op):
            reduce_local(d, s, axes=-1, op=op, scope="warp", thread_reduce=True)

        def expected(a, b, op=op):
            return np.broadcast_to(_reduce(op, a, 2, keepdims=True), b.shape)

        cases.append(_path("view_masks", _name("view_masks_1_2_16", op), TileSpec((4, 64), "f32", several),
                           TileSpec((4, 8), "f32", several_dst), generate, expected, op, copies=2,
                           target=target))

        def generate_rows(d, s, op=op):
            reduce_local(d, s, axes=0, op=op, scope="warp", thread_reduce=True)

        def expected_rows(a, b, op=op):
            return np.broadcast_to(_reduce(op, a, 1, keepdims=True), b.shape)

        cases.append(_path("view_masks", _name("view_masks_4_8_16", op), TileSpec((8, 4, 8), "f32", rows),
                           TileSpec((8, 4, 8), "f32", rows), generate_rows, expected_rows, op, copies=2,
                           target=target))
    return cases


def in_place_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §7.4, B6: Path 2 with dst a view of src's own registers (no copies are emitted).

    >>> case = in_place_cases()[0]
    >>> case.name, case.case.dst is None, case.case.out.shape
    ('in_place_shuffle_sum', True, (4,))
    """
    cases = []
    src = TileSpec((128,), "f32", TileLayout(S[(32, 4) : (1 @ laneid, 1)]))
    view = TileSpec((4,), "f32", TileLayout(S[4:1] + R[32 : 1 @ laneid]))
    for op in OPS:
        def generate(d, s, op=op):
            reduce_local(s.view(view.shape, view.layout), s, op=op, scope="warp")

        cases.append(_path("in_place", _name("in_place_shuffle", op), src, None, generate,
                           lambda a, b, op=op: _reduce(op, a.reshape(len(a), 32, 4), 1), op, read_as=view,
                           target=target))
    return cases


def _fixed_inputs(values, old=None):
    def make(rng, case):
        a = np.broadcast_to(np.asarray(values, np.float64), (case.copies, *case.src.shape)).copy()
        b = np.zeros((case.copies, *case.out.shape)) if old is None else np.full((case.copies, *case.out.shape), old)
        return a, b
    return make


FLT_MAX = 3.4028234663852886e38


def identity_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §7.4, B7: TVM's identities and PTX's max/min at the edges, with both
    NaN policies (checked exactly). TVM's answers are those of ``nan="ignore"``.

    >>> cases = identity_cases()
    >>> len(cases), [c.name for c in cases][:4], {c.depth for c in cases}
    (12, ['max_all_neg_inf', 'min_all_pos_inf', 'max_propagates_nan', 'max_ignores_nan'], {0})
    """
    inf, nan = math.inf, math.nan

    def thread(name, dt, op, values, want, signed_zeros=False, select_for=None, policy="propagate"):
        def generate(d, s):
            reduce_local(d, s, op=op, nan=policy)
        return _path("identity", name, TileSpec((len(values),), dt), TileSpec((1,), dt), generate,
                     lambda a, b: np.full((len(a), 1), want), op, _fixed_inputs(values), copies=2,
                     target=target, select_for=select_for, signed_zeros=signed_zeros, depth=0)

    cases = [
        thread("max_all_neg_inf", "f32", "max", [-inf] * 5, -FLT_MAX),  # numpy: -inf
        thread("min_all_pos_inf", "f32", "min", [inf] * 5, FLT_MAX),
        thread("max_propagates_nan", "f32", "max", [nan, 1.0, 3.0, nan, 2.0], nan),
        thread("max_ignores_nan", "f32", "max", [nan, 1.0, 3.0, nan, 2.0], 3.0, policy="ignore"),  # numpy: nan
        thread("max_all_nan_ignored", "f32", "max", [nan] * 3, -FLT_MAX, policy="ignore"),
        thread("sum_negative_zeros", "f32", "sum", [-0.0] * 4, 0.0, signed_zeros=True),  # numpy: -0.0
        thread("sum_f16_overflow", "f16", "sum", [60000.0, 60000.0, -1.0], inf),
        thread("max_bf16_all_neg_inf", "bf16", "max", [-inf] * 4, -inf),  # bf16's identity is -inf
        thread("min_bf16_fallback_all_inf", "bf16", "min", [inf] * 4, inf, select_for="sm_80"),
        thread("min_f16_sm75_propagates_nan", "f16", "min", [2.0, nan, 1.0], nan, select_for="sm_75"),
    ]
    lanes = np.arange(32, dtype=np.float64)
    lanes[[3, 17]] = nan
    for policy, want in (("propagate", nan), ("ignore", 31.0)):
        cases.append(_path(
            "identity", f"shuffle_max_{policy}s_nan",
            TileSpec((32,), "f32", TileLayout(S[32 : 1 @ laneid])),
            TileSpec((1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid])),
            lambda d, s, policy=policy: reduce_local(d, s, op="max", scope="warp", nan=policy),
            lambda a, b, want=want: np.full((len(a), 1), want), "max", _fixed_inputs(lanes), target=target, depth=0))
    return cases


def nan_policy_cases(target="sm_90a") -> list[ParityCase]:
    """The NaN policy of max and min at every strategy: Path 1 (f32; f16 through the f32 of
    sm_75; bf16), Path 2 (f32; packed f16; f32 as on sm_75, which has no ``max.NaN``) and
    Path 3 with shuffles, on random data with a few NaNs, so that some results are NaN
    (propagate) or the extreme of the numbers (ignore). Exact.

    >>> cases = nan_policy_cases()
    >>> len(cases), cases[0].name, cases[-1].name
    (28, 'nan_thread_f32_native_max_propagate', 'nan_view_f32_native_min_ignore')
    """
    strategies = [  # (label, dtype, select_for, src, dst, scope, axes of the reference, options)
        ("thread", "f32", None, TileSpec((4, 8)), TileSpec((4,)), "thread", 2, {"axes": 1}),
        ("thread", "f16", "sm_75", TileSpec((4, 8), "f16"), TileSpec((4,), "f16"), "thread", 2, {"axes": 1}),
        ("thread", "bf16", None, TileSpec((4, 8), "bf16"), TileSpec((4,), "bf16"), "thread", 2, {"axes": 1}),
        ("shuffle", "f32", None, TileSpec((32,), "f32", TileLayout(S[32 : 1 @ laneid])),
         TileSpec((1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid])), "warp", 1, {}),
        ("shuffle", "f32", "sm_75", TileSpec((32,), "f32", TileLayout(S[32 : 1 @ laneid])),
         TileSpec((1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid])), "warp", 1, {}),
        ("shuffle", "f16", None, TileSpec((32, 2), "f16", TileLayout(S[(32, 2) : (1 @ laneid, 1)])),
         TileSpec((2,), "f16", TileLayout(S[2:1] + R[32 : 1 @ laneid])), "warp", 1, {}),
        ("view", "f32", None, TileSpec((8, 32), "f32", TileLayout(S[(8, 4, 8) : (4 @ laneid, 1 @ laneid, 1)])),
         TileSpec((8, 4), "f32", TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)])), "warp", 2,
         {"thread_reduce": True}),
    ]
    cases = []
    for label, dt, select_for, src, dst, scope, axis, options in strategies:
        for op in ("max", "min"):
            for policy in ("propagate", "ignore"):
                def generate(d, s, op=op, policy=policy, scope=scope, options=options):
                    reduce_local(d, s, op=op, scope=scope, nan=policy, **options)

                def expected(a, b, op=op, policy=policy, axis=axis, dst=dst, label=label):
                    if policy == "propagate":
                        result = _reduce(op, a, axis)
                    else:
                        result = (np.fmax if op == "max" else np.fmin).reduce(a, axis=axis)
                    if label == "view":
                        result = np.broadcast_to(result[..., None], (len(a), *dst.shape))
                    return result.reshape(len(a), *dst.shape)

                name = _name("nan", label, dt, select_for or "native", op, policy)
                cases.append(_path("nan_policy", name, src, dst, generate, expected, op, _with_nans,
                                   copies=2, target=target, select_for=select_for))
    return cases


def _with_nans(rng, case):
    """Random inputs with NaN in a few places (so some groups hold one and others do not)."""
    a, b = case.inputs(rng)
    flat = a.reshape(-1)
    flat[rng.choice(flat.size, size=max(1, flat.size // 24), replace=False)] = np.nan
    return flat.reshape(a.shape), b


def region_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §7.4, B8–B10: regions in Path 1 and 3, axes edge cases, squeezed dst in Path 3.

    >>> cases = region_cases()
    >>> len(cases), sorted({c.group for c in cases})
    (25, ['axes', 'region', 'squeezed'])
    """
    cases = []
    for op in OPS:
        for accum in (False, True):
            def generate(d, s, op=op, accum=accum):
                reduce_local(d[2:7], s[1:6, 1:9], axes=(-1,), op=op, accum=accum)

            def expected(a, b, op=op, accum=accum):
                out = b.copy()
                out[:, 2:7] = _with_old(op, _reduce(op, a[:, 1:6, 1:9], 2), b[:, 2:7], accum)
                return out

            cases.append(_path("region", _name("thread_region", op, "acc" if accum else ""), TileSpec((32, 32)),
                               TileSpec((32,)), generate, expected, op, copies=2, target=target))
    mixed = TileLayout(S[(2, 8, 4, 2) : (8, 2 @ laneid, 2, 1)])
    mixed_dst = TileLayout(S[(2, 8, 1) : (1, 2 @ laneid, 1)])
    for label, rows in (("single", slice(8, 16)), ("full", slice(0, 16))):
        for op in OPS:
            def generate(d, s, op=op, rows=rows):
                reduce_local(d[rows, :], s[rows, :], axes=(1,), op=op, scope="warp")

            def expected(a, b, op=op, rows=rows):
                out = b.copy()
                out[:, rows] = _reduce(op, a[:, rows], 2, keepdims=True)
                return out

            cases.append(_path("region", _name("view_region", label, op), TileSpec((16, 8), "f32", mixed),
                               TileSpec((16, 1), "f32", mixed_dst), generate, expected, op, copies=2,
                               target=target))
    axes_cases = [
        ("duplicate", (3, 4, 5), (4,), (0, 2, -1), (0, 2)),
        ("unit_dims", (1, 4, 1), (1, 1), (1,), (1,)),
        ("all_axes", (2, 3, 4), (1,), (0, 1, 2), (0, 1, 2)),
        ("negative_pair", (2, 3, 4), (3,), (-1, -3), (0, 2)),
    ]
    for label, src, dst, axes, numpy_axes in axes_cases:
        def generate(d, s, axes=axes):
            reduce_local(d, s, axes=axes, op="sum")

        def expected(a, b, numpy_axes=numpy_axes, dst=dst):
            return _reduce("sum", a, tuple(x + 1 for x in numpy_axes)).reshape(len(a), *dst)

        cases.append(_path("axes", _name("axes", label), TileSpec(src), TileSpec(dst), generate, expected, "sum",
                           copies=2, target=target))
    squeezed = [((32, 64), (32,), TileLayout(S[32 : 1 @ laneid]), (-1,)),
                ((32, 4, 8), (32, 4), TileLayout(S[(32, 4) : (1 @ laneid, 1)]), (-1,)),
                ((32, 4, 8), (32, 8), TileLayout(S[(32, 8) : (1 @ laneid, 1)]), (1,))]
    for src_shape, dst_shape, dst_layout, axes in squeezed:
        for op in OPS:
            def generate(d, s, op=op, axes=axes):
                reduce_local(d, s, axes=axes, op=op, scope="warp")

            def expected(a, b, op=op, axes=axes):
                return _reduce(op, a, tuple(x + 1 if x >= 0 else x for x in axes))

            cases.append(_path("squeezed", _name("squeezed", _shape_name(src_shape), "ax", *axes, op),
                               TileSpec(src_shape, "f32", _lane_rows(src_shape)), TileSpec(dst_shape, "f32", dst_layout),
                               generate, expected, op, target=target))
    return cases


def fallback_cases(target="sm_90a") -> list[ParityCase]:
    """docs/reduction.md §7.4, B13: every dtype with the instructions of its oldest target
    (selected, run here).

    >>> cases = fallback_cases()
    >>> len(cases), cases[0].name, cases[0].case.select_for
    (12, 'thread_f16_sm_75_sum', 'sm_75')
    """
    cases = []
    for dt, select_for in (("f16", "sm_75"), ("f16", "sm_80"), ("bf16", "sm_80"), ("bf16", None)):
        for op in OPS:
            def generate(d, s, op=op):
                reduce_local(d, s, axes=(1,), op=op)

            cases.append(_path("fallback", _name("thread", dt, select_for or "native", op), TileSpec((4, 6), dt),
                               TileSpec((4,), dt), generate, lambda a, b, op=op: _reduce(op, a, 2),
                               op, copies=2, target=target, select_for=select_for))
    return cases


def oldest_target_cases() -> list[ParityCase]:
    """Each dtype at the oldest target ptxas 13 knows for it (sm_75; bf16 sm_80), Paths 1
    and 2: assembled for those targets and simulated (an H200 cannot load their cubins).

    >>> cases = oldest_target_cases()
    >>> len(cases), sorted({c.case.target for c in cases})
    (36, ['sm_75', 'sm_80'])
    """
    cases = []
    for dt, target in (("f32", "sm_75"), ("f16", "sm_75"), ("f16", "sm_80"), ("bf16", "sm_80"), ("s32", "sm_75"),
                       ("s32", "sm_80")):
        for op in OPS:
            def generate(d, s, op=op):
                reduce_local(d, s, axes=(1,), op=op)

            cases.append(_path("oldest_target", _name("oldest", target, dt, "thread", op), TileSpec((4, 6), dt),
                               TileSpec((4,), dt), generate, lambda a, b, op=op: _reduce(op, a, 2), op,
                               copies=2, target=target))
            cases.append(_shuffle_case(
                _name("oldest", target, dt, "shuffle", op), "oldest_target", (4, 8, 3),
                TileLayout(S[(4, 8, 3) : (8 @ laneid, 1 @ laneid, 1)]), (4, 3),
                TileLayout(S[(4, 3) : (8 @ laneid, 1)] + R[8 : 1 @ laneid]), op, dt,
                lambda a, b, op=op: _reduce(op, a, 2), target, copies=2))
    return cases


def extra_cases(target="sm_90a") -> list[ParityCase]:
    """The cases of docs/reduction.md §7.4 that run (the refusals are CPU tests).

    >>> len(extra_cases())
    162
    """
    return (partial_width_cases(target) + packed_half_cases(target) + integer_cases(target)
            + view_mask_cases(target) + in_place_cases(target) + identity_cases(target) + nan_policy_cases(target)
            + region_cases(target) + fallback_cases(target))


def shuffle_count_cases(target="sm_90a") -> list[tuple[ImageCase, int]]:
    """Warp reductions and the ``shfl`` count each must have: log2(width) per 32-bit word
    reduced (a word is one f32, or two f16/bf16 packed together).

    >>> [(case.name, shuffles) for case, shuffles in shuffle_count_cases()][:2]
    [('shfl_count_f32_1_w_32', 5), ('shfl_count_f32_4_w_32', 20)]
    """
    shapes = [  # (dtype, elements per lane, lanes per group)
        ("f32", 1, 32), ("f32", 4, 32), ("f32", 3, 8), ("f16", 4, 32), ("f16", 3, 32), ("bf16", 2, 16), ("bf16", 5, 4)]
    cases = []
    for dt, elems, width in shapes:
        groups = 32 // width
        src = TileLayout(S[(groups, width, elems) : (width @ laneid, 1 @ laneid, 1)])
        dst = TileLayout(S[(groups, elems) : (width @ laneid, 1)] + R[width : 1 @ laneid])
        case = ImageCase(_name("shfl_count", dt, elems, "w", width), TileSpec((groups, width, elems), dt, src),
                         TileSpec((groups, elems), dt, dst), lambda d, s: reduce_local(d, s, op="sum", scope="warp"),
                         target=target)
        words = -(-elems // 2) if dt != "f32" else elems
        cases.append((case, int(math.log2(width)) * words))
    view = ImageCase("shfl_count_view_f16", TileSpec((16, 128), "f16", wgmma_acc_layout()),
                     TileSpec((16, 4), "f16", RED_VIEW),
                     lambda d, s: reduce_local(d, s, op="max", scope="warp", thread_reduce=True), target=target)
    cases.append((view, 2 * 1))  # masks 1 and 2; the two rows share one packed word
    return cases


def all_cases(target="sm_90a") -> list[ParityCase]:
    """`tvm_cases` and `extra_cases`: everything that runs on an sm_90 GPU.

    >>> len(all_cases())
    341
    """
    return tvm_cases(target) + extra_cases(target)


def tvm_cases(target="sm_90a") -> list[ParityCase]:
    """TVM's local-variant cases but the multi-warp loop (`natural.py`), and docs/reduction.md §4.7
    on Path 1.

    >>> cases = tvm_cases("sm_80")
    >>> len(cases), {c.case.target for c in cases}
    (179, {'sm_80'})
    """
    return (thread_wise_cases(target) + view_basic_cases(target) + view_complex_cases(target)
            + warp_shuffle_cases(target) + warpgroup_cases(target) + maxmin_fallback_cases(target))
