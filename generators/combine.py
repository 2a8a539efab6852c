"""Combining two elements (sum, max, min): which PTX instruction, for which dtype and target.

**NaN policy** (every generator takes ``nan=``): ``"propagate"`` (the default, as torch's
``amax``/``amin``: a NaN operand gives NaN, ``max.NaN``/``min.NaN``) or ``"ignore"`` (IEEE
maxNum/minNum, as TVM and CUDA's ``fmaxf``: the number wins, ``max``/``min``). Before sm_80,
which has no ``.NaN`` form, propagation is a ``setp.nan`` and a predicated move of NaN.

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

#: what max/min do with a NaN operand; see the module docstring
NAN_POLICIES = ("propagate", "ignore")
DEFAULT_NAN = "propagate"
#: the NaN that ``max.NaN``/``min.NaN`` return, for the pre-sm_80 emulation
CANONICAL_NAN = "0f7FFFFFFF"

#: (dtype, op) → the oldest sm with a native instruction
NATIVE_SM = {("f16", "sum"): 53, ("f16", "max"): 80, ("f16", "min"): 80,
             ("bf16", "sum"): 90, ("bf16", "max"): 80, ("bf16", "min"): 80}


def is_native(op: str, t: "str | DType", sm: int) -> bool:
    """True when `op` on `t` has its own instruction at sm_`sm`.

    >>> is_native("sum", "bf16", 80), is_native("max", "bf16", 80), is_native("max", "f16", 75)
    (False, True, False)
    """
    return sm >= NATIVE_SM.get((as_dtype(t).name, op), 0)


def check_nan(nan: str) -> str:
    """Validate a NaN policy.

    >>> check_nan("ignore")
    'ignore'
    >>> check_nan("quiet")
    Traceback (most recent call last):
    ...
    ptxkit.generators.analysis.ReductionError: nan must be 'propagate' or 'ignore', not 'quiet'
    """
    if nan not in NAN_POLICIES:
        raise ReductionError(f"nan must be 'propagate' or 'ignore', not {nan!r}")
    return nan


def opcode(op: str, t: "str | DType", nan: str = DEFAULT_NAN) -> str:
    """The PTX opcode that combines two `t` elements (a native instruction must exist).

    >>> opcode("max", "f32"), opcode("max", "bf16x2", "ignore"), opcode("sum", "f16"), opcode("min", "s32")
    ('max.NaN.f32', 'max.bf16x2', 'add.f16', 'min.s32')
    """
    name = t if isinstance(t, str) and t.endswith("x2") else as_dtype(t).name
    propagate = op != "sum" and check_nan(nan) == "propagate" and name[0] in "fb"
    return f"{OPCODES[op]}{'.NaN' if propagate else ''}.{name}"


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


def combine(b, op: str, t, d: str, a: str, c: str, nan: str = DEFAULT_NAN) -> None:
    """Emit ``d = op(a, c)`` for one element of dtype `t`, with the NaN policy `nan`.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b = PtxBuilder("sm_80")
    >>> combine(b, "min", "f32", "%f0", "%f0", "%f1"); combine(b, "max", "f16", "%h0", "%h0", "%h1", nan="ignore")
    >>> b.instructions()
    ['min.NaN.f32 %f0, %f0, %f1;', 'max.f16 %h0, %h0, %h1;']
    >>> b = PtxBuilder("sm_75"); combine(b, "max", "f32", "%f0", "%f0", "%f1"); b.instructions()
    ['setp.nan.f32 %p0, %f0, %f1;', 'max.f32 %f0, %f0, %f1;', '@%p0 mov.f32 %f0, 0f7FFFFFFF;']
    """
    t = check(b, op, t)
    if t.is_half and not is_native(op, t, b.sm):
        fa, fc = b.reg(".f32"), b.reg(".f32")
        b.ins(f"cvt.f32.{t.name}", fa, a)
        b.ins(f"cvt.f32.{t.name}", fc, c)
        combine(b, op, "f32", fa, fa, fc, nan)
        b.ins(f"cvt.rn.{t.name}.f32", d, fa)
    elif t.name == "f32" and op != "sum" and check_nan(nan) == "propagate" and b.sm < 80:
        either = b.reg(".pred")  # no max.NaN before sm_80
        b.ins("setp.nan.f32", either, a, c)
        b.ins(f"{OPCODES[op]}.f32", d, a, c)
        b.ins("mov.f32", d, CANONICAL_NAN, guard=either)
    else:
        b.ins(opcode(op, t, nan), d, a, c)


def combine_pair(b, op: str, t, d: str, a: str, c: str, nan: str = DEFAULT_NAN) -> None:
    """Emit ``d = op(a, c)`` on two packed 16-bit elements in .b32 registers.

    >>> from ptxkit.generators.builder import PtxBuilder
    >>> b = PtxBuilder("sm_90a"); combine_pair(b, "max", "f16", "%r0", "%r0", "%r1"); b.instructions()
    ['max.NaN.f16x2 %r0, %r0, %r1;']
    """
    t = check(b, op, t)
    if is_native(op, t, b.sm):
        b.ins(opcode(op, f"{t.name}x2", nan), d, a, c)
        return
    a0, a1, c0, c1 = b.regs(".b16", 4)
    b.ins("mov.b32", f"{{{a0}, {a1}}}", a)
    b.ins("mov.b32", f"{{{c0}, {c1}}}", c)
    combine(b, op, t, a0, a0, c0, nan)
    combine(b, op, t, a1, a1, c1, nan)
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
