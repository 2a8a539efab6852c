"""Error bounds of sums and the comparison that uses them."""

from __future__ import annotations

import numpy as np
import pytest

from ptxkit.generators.accuracy import UNIT_ROUNDOFF, assert_within, gamma, sum_bound


def test_the_bound_holds_for_sequential_f16_sums_and_is_not_loose_by_orders():
    rng = np.random.default_rng(0)
    x = rng.random((200, 64)).astype(np.float16)
    total = np.zeros(200, np.float16)
    for column in x.T:  # a sequential fold in f16: 63 roundings deep
        total = (total + column).astype(np.float16)
    exact = x.astype(np.float64).sum(axis=1)
    bound = sum_bound(63, "f16", np.abs(x.astype(np.float64)).sum(axis=1))
    error = np.abs(total.astype(np.float64) - exact)
    assert (error <= bound).all() and error.max() > bound.min() / 100


def test_gamma():
    assert gamma(0, "f32") == 0.0 and UNIT_ROUNDOFF["f16"] == 2.0**-11
    assert np.allclose(gamma(np.array([1, 2]), "bf16"), [2**-8 / (1 - 2**-8), 2**-7 / (1 - 2**-7)])


def test_assert_within():
    assert_within([np.inf, -np.inf, np.nan, 1.0], [np.inf, -np.inf, np.nan, 1.0])
    with pytest.raises(AssertionError, match="1 of 2 values off"):
        assert_within([np.nan, 1.0], [np.nan, np.inf], 1e30)
    with pytest.raises(AssertionError, match="got nan"):
        assert_within([np.nan], [1.0], 1.0)
