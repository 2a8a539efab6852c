"""The references of the row reduction (torch's rules) and the check of a result."""

from __future__ import annotations

import numpy as np
import pytest

from ptxkit.generators.dtypes import round_to
from ptxkit.generators.rowcheck import assert_matches, reference, tolerances


def test_references_follow_torch():
    x = np.array([[1.0, np.nan, 3.0], [-np.inf] * 3, [2.0, np.inf, -np.inf], [5.0, 5.0, -1.0]])
    assert np.isnan(reference(x, "max")[0][0]) and reference(x, "max", "ignore")[0].tolist()[:2] == [3.0, -np.inf]
    assert reference(x, "argmax")[0].tolist() == [1, 0, 1, 0] and reference(x, "argmin", "ignore")[0].tolist() == \
        [0, 0, 2, 2]
    lse = reference(x, "logsumexp")[0]
    assert np.isnan(lse[0]) and lse[1] == -np.inf and lse[2] == np.inf
    mean, var = reference(x[3:], "meanvar")
    assert mean[0] == 3.0 and var[0] == pytest.approx(8.0)
    assert reference(np.full((1, 3), np.nan), "argmax", "ignore")[0].tolist() == [0]


def test_exact_ops_have_no_tolerance_and_sums_grow_with_depth():
    x = np.random.default_rng(0).random((4, 100))
    assert (tolerances(x, "argmin", 10)[0] == 0).all()
    assert (tolerances(x, "sum", 20)[0] > tolerances(x, "sum", 10)[0]).all()


def test_half_results_must_be_the_rounded_sum():
    x = np.random.default_rng(1).random((64, 300))
    want = round_to("bf16", x.sum(-1))
    assert_matches([want], x, "sum", 10, ["bf16"])
    toward_zero = np.where(want > x.sum(-1), want - 2.0**-8 * 2.0 ** np.floor(np.log2(want)), want)
    with pytest.raises(AssertionError, match="rows off"):
        assert_matches([toward_zero], x, "sum", 10, ["bf16"])
    with pytest.raises(AssertionError, match="NaN positions"):
        assert_matches([np.full(64, np.nan)], x, "max", 0, ["f32"])
