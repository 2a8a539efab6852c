"""`reduce_local`: which path each call takes, and the messages of refused calls."""

from __future__ import annotations

import pytest

from ptxkit.generators import harness, parity
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.dispatch import reduce_local
from ptxkit.generators.layout import R, S, SwizzleLayout, TileLayout, laneid, wg_local_layout
from ptxkit.generators.regtile import RegTile

ROWS = TileLayout(S[(32, 64) : (1 @ laneid, 1)])
ROW_SUMS = TileLayout(S[(32, 1) : (1 @ laneid, 1)])


def tiles(target="sm_90a", *specs):
    b = PtxBuilder(target)
    return [RegTile(b, shape, dt, layout) for shape, dt, layout in specs]


@pytest.mark.parametrize(
    "target, dst, src, kwargs, path",
    [
        ("sm_90a", ((1,), "f32", None), ((16,), "f32", None), {}, "thread"),
        ("sm_100a", ((1,), "f32", None), ((16,), "f32", None), {}, "sm100"),
        ("sm_100a", ((1,), "f32", None), ((16,), "f32", None), {"op": "max"}, "sm100"),
        ("sm_100a", ((1,), "f32", None), ((7,), "f32", None), {}, "thread"),  # fewer than 8
        ("sm_100a", ((1,), "f16", None), ((16,), "f16", None), {}, "thread"),  # not f32
        ("sm_100a", ((2,), "f32", None), ((2, 8), "f32", None), {}, "thread"),  # 2-D src
        ("sm_90a", ((1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid])), ((32,), "f32", TileLayout(S[32 : 1 @ laneid])),
         {"scope": "warp"}, "shuffle"),
        ("sm_90a", ((32, 1), "f32", ROW_SUMS), ((32, 64), "f32", ROWS), {"scope": "warp"}, "view"),
        ("sm_90a", ((128, 1), "f32", wg_local_layout(1)), ((128, 16), "f32", wg_local_layout(16)),
         {"scope": "warpgroup"}, "view"),
    ],
)
def test_paths(target, dst, src, kwargs, path):
    d, s = tiles(target, dst, src)
    assert reduce_local(d, s, **kwargs) == path
    assert d.builder.instructions()


def test_accum_reaches_the_shuffle_path():
    """accum folds the old dst in on Path 2 too (TVM ignores it there)."""
    d, s = tiles("sm_90a", ((1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid])),
                 ((32,), "f32", TileLayout(S[32 : 1 @ laneid])))
    reduce_local(d, s, scope="warp")
    plain = d.builder.instructions()
    reduce_local(d, s, accum=True, scope="warp")
    honoured = d.builder.instructions()[len(plain):]
    assert len(honoured) == len(plain) + 2  # a saved copy and one more add


@pytest.mark.parametrize("scope", ["thread", "warp"])
def test_the_nan_policy_reaches_every_path(scope):
    d, s = tiles("sm_90a", ((1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid]) if scope == "warp" else None),
                 ((32,), "f32", TileLayout(S[32 : 1 @ laneid]) if scope == "warp" else None))
    reduce_local(d, s, op="max", scope=scope)
    assert any(x.startswith("max.NaN.f32") for x in d.builder.instructions())
    d, s = tiles("sm_90a", ((1,), "f32", None), ((32,), "f32", None))
    reduce_local(d, s, op="min", scope="thread", nan="ignore")
    assert not any(".NaN" in x for x in d.builder.instructions())
    with pytest.raises(ReductionError, match="nan must be 'propagate' or 'ignore'"):
        reduce_local(d, s, op="min", nan="drop")


def test_unpacked_halves_shuffle_per_element():
    d, s = tiles("sm_90a", ((4,), "f16", TileLayout(S[4:1] + R[32 : 1 @ laneid])),
                 ((128,), "f16", TileLayout(S[(32, 4) : (1 @ laneid, 1)])))
    reduce_local(d, s, scope="warp", pack=False)
    assert sum(x.startswith("shfl") for x in d.builder.instructions()) == 20


@pytest.mark.parametrize(
    "dst, src, kwargs, message",
    [
        (((1,), "f16", None), ((4,), "f32", None), {}, "dtype mismatch: src=float32 dst=float16"),
        (((1,), "f32", None), ((4,), "f32", None), {"op": "prod"}, "unsupported reduce op: prod"),
        (((1,), "f32", None), ((4,), "f32", None), {"scope": "cluster"},
         "unsupported exec_scope cluster for local reduction"),
        (((32, 1), "f32", None), ((32, 64), "f32", ROWS), {"scope": "warp"},
         "layouts required for view-based local reduction"),
        (((128, 1), "f32", wg_local_layout(1)), ((128, 16), "f32", wg_local_layout(16)),
         {"scope": "warpgroup", "thread_reduce": True},
         "thread_reduce=True is only supported in warp scope; warpgroup local reduction is thread-local only"),
        (((64,), "f32", SwizzleLayout(1, 3, 3, 64)), ((64,), "f32", SwizzleLayout(1, 3, 3, 64)), {"scope": "warp"},
         "swizzle layout unsupported for local reduction"),
        (((32, 2), "f32", TileLayout(S[(32, 2) : (1 @ laneid, 1)])), ((32, 64), "f32", ROWS), {"scope": "warp"},
         "mismatch dst/src layout for reduction"),
        (((32, 1), "f32", ROW_SUMS), ((32, 64), "f32", ROWS), {"scope": "warp", "axes": (2,)},
         "reduce axis 2 out of range for ndim=2"),
        # TVM's detector accepts this (src spans 32 lanes, a power-of-two replica) and shuffles garbage
        (((1,), "f32", TileLayout(S[1:1] + R[16 : 1 @ laneid])), ((32,), "f32", TileLayout(S[32 : 1 @ laneid])),
         {"scope": "warp"}, "dst lanes do not partition the warp"),
    ],
)
def test_refusals(dst, src, kwargs, message):
    d, s = tiles("sm_90a", dst, src)
    with pytest.raises(ReductionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        reduce_local(d, s, **kwargs)


def test_storage_scope_and_builders_are_checked_first():
    d, s = tiles("sm_90a", ((1,), "f32", None), ((4,), "f32", None))
    s.scope = "shared"
    with pytest.raises(ReductionError, match=r"^storage scope mismatch: dst local, src shared; expected \['local'\]$"):
        reduce_local(d, s)
    (other,) = tiles("sm_90a", ((4,), "f32", None))
    with pytest.raises(ReductionError, match="different builders"):
        reduce_local(d, other)


NAN_CASES = parity.nan_policy_cases()


@pytest.fixture(scope="module")
def simulated_nan_cases():
    return harness.simulator(harness.module_text([c.case for c in NAN_CASES]))


@pytest.mark.parametrize("case", NAN_CASES, ids=lambda c: c.name)
def test_the_nan_policy_at_every_strategy_on_the_simulator(case, simulated_nan_cases):
    """The same cases run on the GPU (tests/test_reduce_gpu.py), exactly."""
    case.run_and_check(simulated_nan_cases)
