"""What a row reduction must return: float64 references with torch's rules, and the check
of a result against them with tolerances derived from how the kernel accumulates.

* max, min, argmax, argmin: exact (NaN where the reference has NaN).
* sum, sumsq: a sum of n terms that reaches each term through at most d roundings is off
  by at most γ_d · Σ|term| (`accuracy`; u = 2^-24), d the kernel's `accumulation_depth`.
* logsumexp, meanvar: the same for the sums inside them, plus the few roundings and the
  ``ex2``/``lg2`` approximations (relative error below 2^-21 each) around them.
* a result stored as f16/bf16 is the f32 result rounded once (to nearest even), so it
  must lie between the roundings of ``reference ± tolerance``: exact except where the
  reference is within the tolerance of a rounding boundary. A wrong rounding mode fails.

>>> import numpy as np
>>> x = np.array([[1.0, 3.0, np.nan], [2.0, -1.0, 0.5]])
>>> [r.tolist() for r in reference(x, "max")], reference(x, "argmax", "ignore")[0].tolist()
([[nan, 2.0]], [1, 0])
>>> mean, var = reference(x[1:], "meanvar"); round(float(mean[0]), 6), round(float(var[0]), 6)
(0.5, 1.5)
"""

from __future__ import annotations

import numpy as np

from .accuracy import UNIT_ROUNDOFF, gamma as gamma_of
from .dtypes import round_to
from .rounding import to_float

U = UNIT_ROUNDOFF["f32"]
#: a bound on the relative error of ``ex2.approx.ftz.f32`` and ``lg2.approx.ftz.f32``
APPROX = 2.0**-21


def reference(x, op: str, nan: str = "propagate") -> list[np.ndarray]:
    """The outputs of `op` over the last axis of `x` (float64; indices int64), as torch
    computes them (`rowops`), with NaN policy `nan` for max, min, argmax and argmin;
    meanvar as ``np.mean`` and ``np.var`` (``torch.mean`` and ``torch.var(correction=0)``:
    a row holding +inf has the mean +inf, where torch's CUDA ``var_mean`` gives NaN)."""
    x = np.asarray(x, np.float64)
    with np.errstate(all="ignore"):
        if op == "sum":
            return [x.sum(-1)]
        if op == "sumsq":
            return [(x * x).sum(-1)]
        if op in ("max", "min"):
            if nan == "propagate":
                return [x.max(-1) if op == "max" else x.min(-1)]
            folded = (np.fmax if op == "max" else np.fmin).reduce(x, axis=-1)
            return [np.where(np.isnan(folded), -np.inf if op == "max" else np.inf, folded)]
        if op in ("argmax", "argmin"):
            if nan == "propagate":  # numpy ranks NaN first, as torch
                return [(x.argmax(-1) if op == "argmax" else x.argmin(-1)).astype(np.int64)]
            numbers = np.where(np.isnan(x), -np.inf if op == "argmax" else np.inf, x)
            best = numbers.max(-1, keepdims=True) if op == "argmax" else numbers.min(-1, keepdims=True)
            first = np.argmax((numbers == best) & ~np.isnan(x), axis=-1)
            return [np.where(np.isnan(x).all(-1), 0, first).astype(np.int64)]
        if op == "logsumexp":
            top = x.max(-1)
            shift = np.where(np.isfinite(top), top, 0.0)
            return [np.log(np.exp(x - shift[..., None]).sum(-1)) + shift]
        if op == "meanvar":
            return [x.mean(-1), x.var(-1)]
    raise ValueError(f"unknown row-reduction op {op!r}")


def tolerances(x, op: str, depth: int) -> list[np.ndarray]:
    """The absolute tolerance of each output (f32 results, before a final rounding to a
    half type) of `op` over the rows of `x`, for a kernel of accumulation depth `depth`.

    >>> [t.tolist() for t in tolerances(np.ones((1, 4)), "sum", 2)] == [[4 * 2 * U / (1 - 2 * U)]]
    True
    """
    x = np.asarray(x, np.float64)
    gamma = gamma_of(depth, "f32")
    finite = np.where(np.isfinite(x), x, 0.0)
    if op in ("max", "min", "argmax", "argmin"):
        return [np.zeros(x.shape[:-1])]
    if op == "sum":
        return [gamma * np.abs(finite).sum(-1)]
    if op == "sumsq":
        return [gamma * (finite * finite).sum(-1)]
    if op == "logsumexp":
        top = np.abs(finite).max(-1)
        spread = np.minimum(np.ptp(finite, axis=-1), 64.0)
        relative = gamma + (depth + 2) * APPROX + U * spread  # of the sum of exponentials
        return [2 * U * top + relative + APPROX + 2 * U * (top + np.log(x.shape[-1]))]
    if op == "meanvar":
        mean, var = np.abs(finite).mean(-1), finite.var(-1)
        steps = depth + 4
        return [steps * U * mean, 8 * steps * U * var + 4 * steps * U * mean * np.sqrt(var)]
    raise ValueError(f"unknown row-reduction op {op!r}")


def assert_matches(got: list, x, op: str, depth: int, dtypes, nan: str = "propagate") -> None:
    """Assert that the outputs `got` (float64 values; indices as integers) of a kernel of
    `depth` with output `dtypes` are the reference of `x` within `tolerances`: exact NaN and
    infinity positions, f16/bf16 results between the roundings of reference ± tolerance.

    >>> x = np.array([[1.0, 2.0, 4.0]])
    >>> assert_matches([np.array([4.0])], x, "max", 0, ["f32"])
    >>> assert_matches([np.array([6.0])], x, "max", 0, ["f32"])
    Traceback (most recent call last):
    ...
    AssertionError: ...
    """
    for k, (values, want, tol, kind) in enumerate(zip(got, reference(x, op, nan), tolerances(x, op, depth), dtypes)):
        values = np.asarray(values, np.float64)
        want = np.asarray(want, np.float64)
        where = f"output {k} of {op}"
        np.testing.assert_array_equal(np.isnan(values), np.isnan(want), err_msg=f"{where}: NaN positions")
        exact = ~np.isfinite(want) | (tol == 0)
        np.testing.assert_array_equal(values[exact & ~np.isnan(want)], want[exact & ~np.isnan(want)],
                                      err_msg=f"{where}: exact results")
        with np.errstate(invalid="ignore"):
            bad = _outside(values, want, tol, kind) & ~exact
        if bad.any():
            rows = np.flatnonzero(bad)
            raise AssertionError(f"{where}: {len(rows)} of {len(values)} rows off, e.g. row {rows[0]}: got "
                                 f"{values[rows[0]]!r}, reference {want[rows[0]]!r} ± {tol[rows[0]]:.3g}")


def _outside(values, want, tol, kind):
    """Where `values` are not within `tol` of `want` (for f16/bf16 results: not between
    the roundings of ``want ± tol``)."""
    if kind in ("f16", "bf16"):
        return (values < _rounded(kind, want - tol)) | (values > _rounded(kind, want + tol))
    return np.abs(values - want) > tol


def _rounded(kind: str, values):
    """`values` rounded to nearest even in the half type `kind` (through f32: exact for f16,
    and bf16's rounding of an f32 is what a kernel does)."""
    return round_to(kind, to_float(values, "f32", "rn"))
