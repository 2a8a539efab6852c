"""Error bounds of floating-point sums: the tolerances of the tests, derived from how a
kernel accumulates rather than picked.

A sum whose every term goes through at most d roundings in a type with unit roundoff u
is off by at most γ_d · Σ|term|, with γ_d = d·u / (1 - d·u) (Higham, *Accuracy and
Stability of Numerical Algorithms*, section 4.2). d is the depth of the accumulation: n - 1
for a sequential fold of n terms (an upper bound for every order), log2(w) for a
butterfly over w lanes, and so on. max and min have no rounding error at all.

>>> UNIT_ROUNDOFF["bf16"], round(gamma(3, "f16") / UNIT_ROUNDOFF["f16"], 4)
(0.00390625, 3.0044)
>>> bool(sum_bound(4, "f32", 100.0) < 100.0 * 4 * 2**-24 * 1.001)
True
"""

from __future__ import annotations

import numpy as np

#: u = 2^-p for a p-bit significand, rounding to nearest
UNIT_ROUNDOFF = {"f32": 2.0**-24, "f16": 2.0**-11, "bf16": 2.0**-8}


def gamma(depth, dtype: str):
    """γ_d for `depth` roundings (a number or an array) in `dtype` (f32, f16, bf16).

    >>> gamma(0, "f32")
    0.0
    """
    d = np.asarray(depth, np.float64) * UNIT_ROUNDOFF[dtype]
    result = d / (1 - d)
    return float(result) if np.ndim(result) == 0 else result


def sum_bound(depth, dtype: str, magnitude):
    """The largest error of a sum of terms whose absolute values add up to `magnitude`,
    accumulated `depth` roundings deep in `dtype`.

    >>> float(sum_bound(1, "f16", 2.0)) == 2.0 * gamma(1, "f16")
    True
    """
    return gamma(depth, dtype) * np.asarray(magnitude, np.float64)


def assert_within(got, want, tolerance=0.0, what: str = "result") -> None:
    """Assert that `got` is within `tolerance` (a number or one per element) of `want`:
    NaN where `want` is NaN, infinities equal, 0 meaning exactly equal.

    >>> assert_within([1.0, np.nan, np.inf], [1.5, np.nan, np.inf], [0.5, 0.0, 0.0])
    >>> assert_within([1.0, 2.0], [1.0, 2.5], 0.25, "sum")
    Traceback (most recent call last):
    ...
    AssertionError: sum: 1 of 2 values off, e.g. at (1,): got 2.0, expected 2.5 (tolerance 0.25)
    """
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    limit = np.broadcast_to(np.asarray(tolerance, np.float64), np.broadcast_shapes(got.shape, want.shape))
    with np.errstate(invalid="ignore"):
        bad = ~((got == want) | (np.isnan(got) & np.isnan(want)) | (np.abs(got - want) <= limit))
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        got, want = np.broadcast_to(got, bad.shape), np.broadcast_to(want, bad.shape)
        raise AssertionError(f"{what}: {int(bad.sum())} of {bad.size} values off, e.g. at {where}: got "
                             f"{float(got[where])!r}, expected {float(want[where])!r} (tolerance {float(limit[where]):.3g})")
