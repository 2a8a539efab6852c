"""`reduce_local`: pick the code path for a register-level reduction the way TVM does.

=================  ==========================================================  ========
scope              condition                                                   path
=================  ==========================================================  ========
thread             sm_100+, f32, 1-D src of ≥ 8 elements, one dst element      sm100
thread             otherwise                                                   thread
warp               src lanes shard → dst lane replica (TVM's detector)         shuffle
warp               otherwise                                                   view
warpgroup          ``thread_reduce=False``                                     view
=================  ==========================================================  ========

Invalid calls raise `ReductionError` with TVM's messages, checked in TVM's order
(`analysis.validate_reduction_local`), and clear messages where TVM would generate
wrong code. The target is the builder's (``dst.builder``).

>>> from ptxkit.generators.builder import PtxBuilder
>>> from ptxkit.generators.regtile import RegTile
>>> from ptxkit.generators.layout import TileLayout, S, R, laneid
>>> b = PtxBuilder("sm_90a")
>>> src = RegTile(b, (32, 4), "f32", TileLayout(S[(32, 4) : (1 @ laneid, 1)]))
>>> dst = RegTile(b, (4,), "f32", TileLayout(S[4:1] + R[32 : 1 @ laneid]))
>>> reduce_local(dst, src, op="sum", scope="warp")
'shuffle'
>>> reduce_local(RegTile(b, (1,), "f16"), RegTile(b, (4,), "f32"))
Traceback (most recent call last):
...
ptxkit.generators.analysis.ReductionError: dtype mismatch: src=float32 dst=float16
"""

from __future__ import annotations

from .analysis import REDUCE_OPS, ReductionError, analyze_shuffle_reduce, validate_reduction_local
from .combine import DEFAULT_NAN, check_nan
from .shuffle import gen_reduce_warp_shuffle
from .sm100 import applies as sm100_applies, gen_reduce_sm100
from .thread import gen_reduce_thread
from .view import gen_reduce_view

PATHS = ("sm100", "thread", "shuffle", "view")


def reduce_local(
    dst,
    src,
    axes=-1,
    op: str = "sum",
    accum: bool = False,
    scope: str = "thread",
    thread_reduce: bool = False,
    *,
    pack: bool = True,
    nan: str = DEFAULT_NAN,
) -> str:
    """Emit ``dst = op-reduce(src, axes)`` into the tiles' builder; return the path taken.

    * `scope`: ``"thread"`` (each thread alone), ``"warp"`` or ``"warpgroup"``.
    * `accum`: fold the old dst values in, on every path. TVM's Path 2 ignores it and
      overwrites dst; ptxkit departs from TVM there, so that accum means one thing.
    * `thread_reduce`: in Path 3 at warp scope, finish with xor shuffles across lanes.
    * `pack`: shuffle f16/bf16 two per ``shfl`` (False: one per element, as TVM).
    * `nan`: ``"propagate"`` (default: a NaN makes max/min NaN, as torch) or ``"ignore"``
      (IEEE maxNum/minNum, as TVM); see `combine`.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> from ptxkit.generators.regtile import RegTile
    >>> b = PtxBuilder("sm_90a"); reduce_local(RegTile(b, (4,), "f32"), RegTile(b, (4, 8), "f32"), axes=1, op="max")
    'thread'
    >>> b = PtxBuilder("sm_100a"); reduce_local(RegTile(b, (1,), "f32"), RegTile(b, (16,), "f32"))
    'sm100'
    """
    if op not in REDUCE_OPS:
        raise ReductionError(f"unsupported reduce op: {op}")
    check_nan(nan)
    if dst.builder is not src.builder:
        raise ReductionError("dst and src were allocated by different builders")
    scopes = (getattr(dst, "scope", "local"), getattr(src, "scope", "local"))
    if scopes != ("local", "local"):
        raise ReductionError(f"storage scope mismatch: dst {scopes[0]}, src {scopes[1]}; expected ['local']")
    ok, message = validate_reduction_local(dst, src, axes, scope, thread_reduce)
    if not ok:
        raise ReductionError(message)
    if scope == "thread":
        if sm100_applies(dst, src, scope):
            gen_reduce_sm100(dst, src, op, accum, nan)
            return "sm100"
        gen_reduce_thread(dst, src, axes, op, accum, nan)
        return "thread"
    if scope == "warp" and analyze_shuffle_reduce(src.layout, dst.layout) is not None:
        gen_reduce_warp_shuffle(dst, src, op, accum, pack=pack, nan=nan, axes=axes)
        return "shuffle"
    gen_reduce_view(dst, src, axes, op, accum, thread_reduce, scope, pack=pack, nan=nan)
    return "view"
