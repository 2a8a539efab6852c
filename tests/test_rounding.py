"""Rounding to PTX types by mode: each direction picks the right neighbour, overflow and NaN."""

from __future__ import annotations

import numpy as np
import pytest

from ptxkit.generators.rounding import to_float, to_int, to_integral


@pytest.mark.parametrize("name", ["f32", "f16", "bf16"])
def test_each_mode_picks_a_neighbour_in_its_direction(name):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(2000) * 10.0 ** rng.integers(-3, 4, 2000)).astype(np.float32).astype(np.float64)
    if name == "f32":
        x = x + rng.standard_normal(2000) * 1e-9  # not f32 values
    low, high, nearest = (to_float(x, name, mode).astype(np.float64) for mode in ("rm", "rp", "rn"))
    toward_zero = to_float(x, name, "rz").astype(np.float64)
    assert (low <= x).all() and (high >= x).all() and ((low == high) | (low < high)).all()
    assert ((nearest == low) | (nearest == high)).all()
    assert (np.abs(nearest - x) <= np.abs(np.where(nearest == low, high, low) - x)).all()
    assert (toward_zero == np.where(x >= 0, low, high)).all()
    assert ((low == high) == (low == x)).all()  # only exact values have one neighbour


def test_edges():
    assert to_float(np.array([np.inf, -np.inf, np.nan]), "bf16", "rz")[:2].tolist() == [np.inf, -np.inf]
    assert np.isnan(to_float(np.array([np.nan]), "f16", "rp")[0])
    assert to_float(np.array([1e6]), "f16", "rz").tolist() == [65504.0]  # toward zero stays finite
    assert to_float(np.array([1e6]), "f16", "rn").tolist() == [np.inf]
    assert to_float(np.array([-0.0]), "bf16", "rm").tolist() == [-0.0]
    with pytest.raises(ValueError, match="unknown float rounding mode 'rzi'"):
        to_float(np.array([1.0]), "f32", "rzi")


def test_integer_modes():
    x = np.array([-1.5, -0.5, 0.5, 1.5, 2.5])
    assert to_integral(x, "rni").tolist() == [-2.0, -0.0, 0.0, 2.0, 2.0]
    assert to_integral(x, "rmi").tolist() == [-2.0, -1.0, 0.0, 1.0, 2.0]
    assert to_int(np.array([1e20, -1e20, np.nan]), "u64", "rzi").tolist() == [2**64 - 1, 0, 0]
    with pytest.raises(ValueError, match="unknown integer rounding mode 'rn'"):
        to_integral(x, "rn")
