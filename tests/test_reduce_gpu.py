"""The reduction generators on the GPU: TVM's parity suite with TVM's parameters, the cases
TVM does not test, the natural kernels, and the SHFL count of the warp paths' SASS
(docs/reduction.md §4.4–§4.13, §7.4, §4.3 and §4.1).

Every case of a group is in one module, assembled once with ptxas and loaded once; each
case is then one launch of one CTA. Run on an sm_90 GPU:

    python -m pytest -m gpu tests/test_reduce_gpu.py
"""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.generators import harness, natural, parity

pytestmark = pytest.mark.gpu

CASES = parity.all_cases()
NATURAL = natural.natural_cases()
COUNTS = parity.shuffle_count_cases()


@pytest.fixture(scope="module")
def gpu():
    return harness.gpu_runner(harness.module_text([c.case for c in CASES]))


@pytest.fixture(scope="module")
def gpu_natural():
    return harness.gpu_runner(natural.module_text(NATURAL))


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.group}-{c.name}")
def test_parity(case, gpu):
    case.run_and_check(gpu)


@pytest.mark.parametrize("case", NATURAL, ids=lambda c: c.name)
def test_natural(case, gpu_natural):
    case.run_and_check(gpu_natural)


def test_shfl_count_in_sass():
    """log2(width) SHFL per 32-bit word reduced: f16/bf16 pairs share a shuffle."""
    try:
        counts = harness.sass_counts(ptxkit.assemble(harness.module_text([c for c, _ in COUNTS])).data)
    except FileNotFoundError as err:
        pytest.skip(str(err))
    assert {case.name: counts[case.name] for case, _ in COUNTS} == {case.name: n for case, n in COUNTS}
