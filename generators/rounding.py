"""Rounding to a PTX type the way ``cvt`` does it, in numpy: the simulator's conversions.

Float results take a float rounding mode: ``rn`` (to nearest, ties to even), ``rz``
(toward zero), ``rm`` (toward -inf), ``rp`` (toward +inf). Integral results take an
integer one: ``rni``, ``rzi``, ``rmi``, ``rpi`` (the same four directions, to a whole
number). A float converted to an integer type saturates at the type's limits and NaN
becomes 0, as PTX specifies. Each direction picks one of the two neighbours that enclose
the value in the target type, so every mode is exact (bf16 from f32 sources, which is
every bf16 conversion PTX has).

>>> import numpy as np
>>> x = np.array([1.0 + 2**-9, -1.0 - 2**-9, 2.5])
>>> [to_float(x, "bf16", mode).tolist() for mode in FLOAT_MODES]
[[1.0, -1.0, 2.5], [1.0, -1.0, 2.5], [1.0, -1.0078125, 2.5], [1.0078125, -1.0, 2.5]]
>>> [to_int(np.array([2.5, -2.5, np.nan, 1e10]), "s32", mode).tolist() for mode in INTEGER_MODES]
[[2, -2, 0, 2147483647], [2, -2, 0, 2147483647], [2, -3, 0, 2147483647], [3, -2, 0, 2147483647]]
"""

from __future__ import annotations

import numpy as np

FLOAT_MODES = ("rn", "rz", "rm", "rp")
INTEGER_MODES = ("rni", "rzi", "rmi", "rpi")
#: an integer mode's direction, as the float mode of the same name
_DIRECTION = dict(zip(INTEGER_MODES, FLOAT_MODES))
INT_LIMITS = {"s8": (-(2**7), 2**7 - 1), "u8": (0, 2**8 - 1), "s16": (-(2**15), 2**15 - 1), "u16": (0, 2**16 - 1),
              "s32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1), "s64": (-(2**63), 2**63 - 1),
              "u64": (0, 2**64 - 1)}


def to_float(values, name: str, mode: str = "rn") -> np.ndarray:
    """`values` rounded to the float type `name` (f32, f16, bf16) in direction `mode`, as
    float32 (every f16 and bf16 value is one).

    >>> to_float(np.array([1e39, -1e39]), "f32", "rz").tolist()
    [3.4028234663852886e+38, -3.4028234663852886e+38]
    >>> to_float(np.array([65519.0, 65520.0]), "f16").tolist()
    [65504.0, inf]
    """
    if mode not in FLOAT_MODES:
        raise ValueError(f"unknown float rounding mode {mode!r}; expected one of {FLOAT_MODES}")
    x = np.asarray(values, np.float64)
    low, high, nearest = _neighbours(x, name)
    with np.errstate(invalid="ignore"):
        chosen = {"rn": nearest, "rm": low, "rp": high, "rz": np.where(x >= 0, low, high)}[mode]
    return np.where(np.isnan(x), np.float32(np.nan), chosen).astype(np.float32)


def to_integral(values, mode: str) -> np.ndarray:
    """`values` rounded to a whole number in the direction of an integer mode (float64).

    >>> to_integral(np.array([0.5, 1.5, -0.5]), "rni").tolist(), to_integral(np.array([-0.5]), "rmi").tolist()
    ([0.0, 2.0, -0.0], [-1.0])
    """
    if mode not in INTEGER_MODES:
        raise ValueError(f"unknown integer rounding mode {mode!r}; expected one of {INTEGER_MODES}")
    function = {"rn": np.rint, "rz": np.trunc, "rm": np.floor, "rp": np.ceil}[_DIRECTION[mode]]
    return function(np.asarray(values, np.float64))


def to_int(values, name: str, mode: str) -> np.ndarray:
    """`values` rounded by an integer mode and saturated to the integer type `name`; NaN is
    0. The result holds Python ints (64-bit limits are not float64 values).

    >>> to_int(np.array([-1.5, 300.0]), "u8", "rzi").tolist()
    [0, 255]
    """
    low, high = INT_LIMITS[name]
    whole = to_integral(values, mode).tolist()
    return np.array([0 if v != v else int(min(max(v, low), high)) for v in whole], dtype=object)


def _neighbours(x, name):
    """(the largest value ≤ x, the smallest ≥ x, the nearest-even one) in type `name`."""
    if name == "bf16":
        return _bf16_neighbours(x.astype(np.float32))
    kind = {"f32": np.float32, "f16": np.float16}.get(name)
    if kind is None:
        raise ValueError(f"cannot round to {name!r}; expected f32, f16 or bf16")
    with np.errstate(over="ignore", invalid="ignore"):
        nearest = x.astype(kind)
        above = nearest.astype(np.float64) > x
        below = nearest.astype(np.float64) < x
        low = np.where(above, np.nextafter(nearest, kind(-np.inf)), nearest)
        high = np.where(below, np.nextafter(nearest, kind(np.inf)), nearest)
    return low.astype(np.float32), high.astype(np.float32), nearest.astype(np.float32)


def _bf16_neighbours(x):
    """The same for bf16, whose values are f32 values with 16 low zero bits."""
    bits = x.view(np.uint32).astype(np.uint64)
    truncated = (bits >> np.uint64(16)) << np.uint64(16)  # toward zero
    step = truncated + np.uint64(1 << 16)  # one bf16 ulp away from zero (past the top: inf)
    toward = truncated.astype(np.uint32).view(np.float32)
    away = step.astype(np.uint32).view(np.float32)
    exact = truncated == bits
    negative = np.signbit(x)
    low = np.where(exact | ~negative, toward, away)
    high = np.where(exact | negative, toward, away)
    rounded = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16) << np.uint64(16)
    nearest = rounded.astype(np.uint32).view(np.float32)
    return low, high, nearest
