"""TVM's local-reduction tests (reduction.md §4.4–§4.13) and the cases TVM does not test
(§7.5 B), as register-image cases with numpy float64 references and TVM's tolerances.

`tvm_cases()` gives 143 of TVM's 144 local-variant cases with TVM's parameters (the
144th, the multi-warp loop of §4.12, needs shared memory and a loop: it is a natural
kernel in `natural.py`), plus TVM's 36 3-input max/min cases, which before sm_100 take
Path 1 as in TVM; `extra_cases()` gives §7.5 B; `sm100_cases()` the fast paths (run by
the simulator, assembled for sm_100a). The same cases run on the GPU
(tests/test_reduce_gpu.py) and in the simulator (the CPU tests).

>>> cases = tvm_cases()
>>> len(cases), sum(c.group != "maxmin_fallback" for c in cases)
(179, 143)
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .dispatch import reduce_local
from .dtypes import round_to
from .harness import ImageCase, TileSpec
from .layout import R, S, TileLayout, laneid, row_major, wg_local_layout

OPS = ("sum", "max", "min")

#: Relative tolerance added to TVM's atol 1e-5 for f32 sums of 64–128 values in [0, 1):
#: results near 64 have an ulp of 7.6e-6, and a sequential fold is typically off by a few
#: ulps, which TVM's absolute 1e-5 alone tolerates only for lucky data.
SUM_RTOL = 2e-6
NP_OPS = {"sum": np.sum, "max": np.max, "min": np.min}
COMBINE = {"sum": np.add, "max": np.maximum, "min": np.minimum}


@dataclass
class ParityCase:
    """A register-image case, its group, the reference and the tolerance.

    ``expected(a, b)`` maps the logical inputs (``[copies, *shape]``, float64) to the
    expected result through `case.out`. ``inputs(rng)`` overrides random inputs.
    """

    case: ImageCase
    group: str
    expected: Callable
    atol: float
    inputs: Callable | None = None
    seed: int = 0
    rtol: float = 0.0
    signed_zeros: bool = False  # also compare the sign of zero results

    @property
    def name(self) -> str:
        return self.case.name

    def make_inputs(self):
        rng = np.random.default_rng(self.seed)
        return self.inputs(rng, self.case) if self.inputs else self.case.inputs(rng)


def _reduce(op, x, axes, keepdims=False):
    return NP_OPS[op](np.asarray(x, np.float64), axis=axes, keepdims=keepdims)


def _with_old(op, value, old, accum):
    return COMBINE[op](value, old) if accum else value


def _name(*parts) -> str:
    text = "_".join(str(p) for p in parts if p != "")
    return "".join(c if c.isalnum() or c == "_" else "_" for c in text.replace("-", "m"))


def _shape_name(shape) -> str:
    return "x".join(map(str, shape))


# ---- §4.4 Path 1 ---------------------------------------------------------------------------------
THREAD_WISE = [
    ((1,), (1,), (0,)), ((4,), (1,), (0,)), ((7,), (1,), (0,)), ((16,), (1,), (0,)), ((32,), (1,), (0,)),
    ((4, 8), (8,), (0,)), ((4, 8), (4,), (1,)), ((3, 4, 5), (4,), (0, 2)), ((2, 3, 4), (2, 3), (-1,)),
    ((2, 3, 4), (3, 4), (0,)),
]


def thread_wise_cases(target="sm_90a", copies=4) -> list[ParityCase]:
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
                cases.append(ParityCase(case, "thread_wise", expected, 1e-5))
    return cases


# ---- §4.5 Path 3, purely local -----------------------------------------------------------------------
VIEW_BASIC = [
    ((64,), (1,), (-1,), False, None), ((64,), (1,), (-1,), True, None), ((64,), (1,), (-1,), False, 32),
    ((4, 8), (1, 1), (1, 2), False, None), ((4, 8), (4, 1), (-1,), False, None), ((4, 8), (1, 8), (1,), False, None),
]


def _lane_rows(shape) -> TileLayout:
    """``S[(32, *inner) : (1@laneid, *row_major(inner))]``: each lane holds one row."""
    return TileLayout(S[tuple(shape) : (1 @ laneid, *row_major(shape[1:]))])


def view_basic_cases(target="sm_90a") -> list[ParityCase]:
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
            cases.append(ParityCase(case, "view_basic", expected, 1e-5, rtol=SUM_RTOL if op == "sum" else 0.0))
    return cases


# ---- §4.6 Path 3 with the WGMMA accumulator layout -----------------------------------------------------
def wgmma_acc_layout() -> TileLayout:
    """The (16, 128) WGMMA accumulator of one warp, built as TVM's test builds it."""
    atom = TileLayout(S[(1, 2) : (2, 1)])
    warp = TileLayout(S[(8, 4) : (4 @ laneid, 1 @ laneid)])
    return atom.tile(warp, (8, 4), (1, 2)).tile(TileLayout(S[(2, 16) : (1, 2)]), (2, 16), (8, 8))


RED_VIEW = TileLayout(S[(2, 32) : (1, 1 @ laneid)])


def view_complex_cases(target="sm_90a") -> list[ParityCase]:
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
                        f32_sum = dt == "f32" and op == "sum"
                        cases.append(ParityCase(case, "view_complex", expected, 1e-5 if dt == "f32" else 2e-1,
                                                rtol=SUM_RTOL if f32_sum else 0.0))
    return cases


# ---- §4.7 3-input max/min on a pre-sm_100 target (Path 1) ----------------------------------------------
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
                atol = 1e-4 if group.endswith("sum") else 1e-5
                cases.append(ParityCase(case, group, expected, atol, _half_old))
    return cases


def maxmin_fallback_cases(target="sm_90a") -> list[ParityCase]:
    """TVM's §4.7 on a target before sm_100: Path 1."""
    return _one_value_cases("maxmin_fallback", MAXMIN_LENGTHS, ("max", "min"), target)


def sm100_cases(target="sm_100a") -> list[ParityCase]:
    """TVM's §4.7 and §4.8 on sm_100a (36 + 20; length 7 stays on Path 1), plus the lengths
    of §7.5 B14 they miss. Assemble-only on an H200; the simulator runs them."""
    return (_one_value_cases("sm100_maxmin", MAXMIN_LENGTHS + (9, 17, 63, 65), ("max", "min"), target)
            + _one_value_cases("sm100_sum", PACKED_SUM_LENGTHS + (15,), ("sum",), target))


# ---- §4.9–§4.11 Path 2 -------------------------------------------------------------------------------------
def _shuffle_case(name, group, src_shape, src_layout, dst_shape, dst_layout, op, dt, expected, atol,
                  target="sm_90a", copies=1, select_for=None, **options):
    def generate(d, s):
        reduce_local(d, s, op=op, scope="warp", **options)

    case = ImageCase(name, TileSpec(src_shape, dt, src_layout), TileSpec(dst_shape, dt, dst_layout), generate,
                     copies, target, select_for)
    return ParityCase(case, group, expected, atol)


def warp_shuffle_cases(target="sm_90a") -> list[ParityCase]:
    cases = []
    for op in ("sum", "max"):
        for dt in ("f32", "f16"):
            atol = 1e-4 if dt == "f32" else 1e-1
            cases.append(_shuffle_case(
                _name("shuffle32", op, dt), "warp_shuffle", (32,), TileLayout(S[32 : 1 @ laneid]), (1,),
                TileLayout(S[1:1] + R[32 : 1 @ laneid]), op, dt,
                lambda a, b, op=op: _reduce(op, a, 1).reshape(-1, 1), atol, target))
            cases.append(_shuffle_case(
                _name("shuffle_multi", op, dt), "warp_shuffle_multi", (128,), TileLayout(S[(32, 4) : (1 @ laneid, 1)]),
                (4,), TileLayout(S[4:1] + R[32 : 1 @ laneid]), op, dt,
                lambda a, b, op=op: _reduce(op, a.reshape(len(a), 32, 4), 1), atol, target))
    cases.append(_shuffle_case(
        "shuffle_gapped", "warp_shuffle_gapped", (32, 2, 2), TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)]), (2, 2),
        TileLayout(S[(2, 2) : (2, 4)] + R[32 : 1 @ laneid]), "sum", "f32",
        lambda a, b: _reduce("sum", a, 1), 1e-4, target))
    return cases


# ---- §4.13 Path 3 at warpgroup scope ----------------------------------------------------------------------
def warpgroup_cases(target="sm_90a") -> list[ParityCase]:
    cases = []
    for op in ("sum", "max"):
        def generate(d, s, op=op):
            reduce_local(d, s, axes=[-1], op=op, scope="warpgroup")

        case = ImageCase(_name("wg_local", op), TileSpec((128, 16), "f32", wg_local_layout(16)),
                         TileSpec((128, 1), "f32", wg_local_layout(1)), generate, 1, target)
        cases.append(ParityCase(case, "warpgroup", lambda a, b, op=op: _reduce(op, a, 2, keepdims=True), 1e-5))
    return cases


def tvm_cases(target="sm_90a") -> list[ParityCase]:
    """TVM's local-variant cases but the multi-warp loop (`natural.py`), and §4.7 on Path 1."""
    return (thread_wise_cases(target) + view_basic_cases(target) + view_complex_cases(target)
            + warp_shuffle_cases(target) + warpgroup_cases(target) + maxmin_fallback_cases(target))
