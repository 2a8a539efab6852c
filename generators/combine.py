"""Combining two elements (sum, max, min): which PTX instruction, for which dtype and target.

=======  ======  ===========================  =====================================
dtype    op      native instruction            used when (else: in f32, see below)
=======  ======  ===========================  =====================================
f32      all     add/max/min.f32               always
f16      sum     add.f16, add.f16x2            sm_53+ (every target ptxas 13 knows)
f16      max/min max/min.f16, .f16x2           sm_80+
bf16     sum     add.bf16, add.bf16x2          sm_90+
bf16     max/min max/min.bf16, .bf16x2         sm_80+ (bf16 needs sm_80 at all)
s32/u32  all     add/max/min.s32/.u32          always
=======  ======  ===========================  =====================================

Otherwise each combine converts both operands to f32 (``cvt.f32.f16``/``.bf16``,
exact), combines in f32 and rounds back (``cvt.rn.f16.f32``/``.bf16.f32``). The result
is bit-identical to the native instruction: f32 has more than 2p+2 bits of precision
for both half types (p = 11, 8), so rounding twice cannot differ from rounding once.

>>> from ptxkit.generators.builder import PtxBuilder
>>> b = PtxBuilder("sm_80"); combine(b, "sum", "bf16", "%h0", "%h0", "%h1"); b.instructions()
['cvt.f32.bf16 %f0, %h0;', 'cvt.f32.bf16 %f1, %h1;', 'add.f32 %f0, %f0, %f1;', 'cvt.rn.bf16.f32 %h0, %f0;']
>>> b = PtxBuilder("sm_90a"); combine(b, "sum", "bf16", "%h0", "%h0", "%h1"); b.instructions()
['add.bf16 %h0, %h0, %h1;']
"""

from __future__ import annotations

from .analysis import REDUCE_OPS, ReductionError, identity
from .dtypes import DType, dtype as as_dtype

OPCODES = {"sum": "add", "max": "max", "min": "min"}

#: (dtype, op) → the oldest sm with a native instruction
NATIVE_SM = {("f16", "sum"): 53, ("f16", "max"): 80, ("f16", "min"): 80,
             ("bf16", "sum"): 90, ("bf16", "max"): 80, ("bf16", "min"): 80}


def is_native(op: str, t: "str | DType", sm: int) -> bool:
    """True when `op` on `t` has its own instruction at sm_`sm`.

    >>> is_native("sum", "bf16", 80), is_native("max", "bf16", 80), is_native("max", "f16", 75)
    (False, True, False)
    """
    return sm >= NATIVE_SM.get((as_dtype(t).name, op), 0)


def check(b, op: str, t: "str | DType") -> DType:
    """Validate `op` and `t` for the builder's target; return the dtype.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> check(PtxBuilder("sm_90a"), "max", "bfloat16").name
    'bf16'
    >>> check(PtxBuilder("sm_75"), "sum", "bf16")
    Traceback (most recent call last):
    ...
    ValueError: bf16 arithmetic (cvt.f32.bf16, max.bf16) needs sm_80 or newer; the target is sm_75
    """
    if op not in REDUCE_OPS:
        raise ReductionError(f"unsupported reduce op: {op}")
    t = as_dtype(t)
    if t.name == "bf16":
        b.require_sm(80, "bf16 arithmetic (cvt.f32.bf16, max.bf16)")
    return t


def combine(b, op: str, t, d: str, a: str, c: str) -> None:
    """Emit ``d = op(a, c)`` for one element of dtype `t`.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b = PtxBuilder("sm_80")
    >>> combine(b, "min", "f32", "%f0", "%f0", "%f1"); combine(b, "max", "f16", "%h0", "%h0", "%h1")
    >>> b.instructions()
    ['min.f32 %f0, %f0, %f1;', 'max.f16 %h0, %h0, %h1;']
    """
    t = check(b, op, t)
    if not t.is_half:
        b.ins(f"{OPCODES[op]}.{t.name}", d, a, c)
    elif is_native(op, t, b.sm):
        b.ins(f"{OPCODES[op]}.{t.name}", d, a, c)
    else:
        fa, fc = b.reg(".f32"), b.reg(".f32")
        b.ins(f"cvt.f32.{t.name}", fa, a)
        b.ins(f"cvt.f32.{t.name}", fc, c)
        b.ins(f"{OPCODES[op]}.f32", fa, fa, fc)
        b.ins(f"cvt.rn.{t.name}.f32", d, fa)


def combine_pair(b, op: str, t, d: str, a: str, c: str) -> None:
    """Emit ``d = op(a, c)`` on two packed 16-bit elements in .b32 registers.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b = PtxBuilder("sm_90a"); combine_pair(b, "max", "f16", "%r0", "%r0", "%r1"); b.instructions()
    ['max.f16x2 %r0, %r0, %r1;']
    """
    t = check(b, op, t)
    if is_native(op, t, b.sm):
        b.ins(f"{OPCODES[op]}.{t.name}x2", d, a, c)
        return
    a0, a1, c0, c1 = b.regs(".b16", 4)
    b.ins("mov.b32", f"{{{a0}, {a1}}}", a)
    b.ins("mov.b32", f"{{{c0}, {c1}}}", c)
    combine(b, op, t, a0, a0, c0)
    combine(b, op, t, a1, a1, c1)
    b.ins("mov.b32", d, f"{{{a0}, {a1}}}")


def copy(b, t, d: str, a: str) -> None:
    """Emit ``d = a`` for one element of dtype `t`.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b = PtxBuilder(); copy(b, "bf16", "%h1", "%h0"); copy(b, "s32", "%r1", "%r0"); b.instructions()
    ['mov.b16 %h1, %h0;', 'mov.b32 %r1, %r0;']
    """
    b.ins(f"mov.{ {'.f32': 'f32', '.b16': 'b16', '.b32': 'b32'}[as_dtype(t).reg_type] }", d, a)


def set_identity(b, op: str, t, d: str) -> None:
    """Emit ``d = identity(op)`` (0, the lowest or the highest value of `t`).

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b = PtxBuilder(); set_identity(b, "max", "f32", "%f0"); set_identity(b, "min", "u32", "%r0"); b.instructions()
    ['mov.f32 %f0, 0fFF7FFFFF;', 'mov.b32 %r0, 4294967295;']
    """
    b.mov_const(check(b, op, t), d, identity(op, t))
