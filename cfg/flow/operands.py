"""Which registers an instruction writes and reads, and the types its modifiers name.

Helpers of the register analysis (`ptxkit.cfg.values.registers`) and of the passes that walk
every instruction (escape, divergence, phases): most read the text of an instruction
rather than its parsed operands, which is what makes a pass over a megabyte kernel cheap.
A *plain* register is one declared without ``%`` (``.reg .b32 r;``); `plain` is the set of
their names in scope.

>>> from ptxkit import parse_statement
>>> operand_targets(parse_statement("mov.b64 {%r1, %r2}, %rd3;").operands[0], frozenset())
['%r1', '%r2']
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit._regex import compile as compile_pattern
from ptxkit.isa import TYPE_BITS
from ptxkit.isa_eval import operation

if TYPE_CHECKING:
    from collections.abc import Callable, Container, Sequence

    from ptxkit.cfg.flow.graph import HeadTuple
    from ptxkit.instruction import Operand
    from ptxkit.syntax import Instruction

_FIRST_OPERAND = compile_pattern(r"\s*(\{[^}]*\}|[^,;{]+)")
_ONE_REGISTER = compile_pattern(r"\s*(%[\w$]+)\s*,")
_NAME = compile_pattern(r"[%A-Za-z_$][\w$]*")
#: a token of an operand list: a number (0x1f, 0f3F800000, 2.5: skipped) or a name (the group)
_TOKEN = compile_pattern(r"[0-9][\w.]*|([%A-Za-z_$][\w$]*)")


def destinations(instruction: Instruction, head: HeadTuple, plain: Container[str]) -> list[str]:
    """The registers an instruction's first operand names (what `operand_targets` gives),
    read from the text without parsing every operand: the fast path for passes over
    every instruction.

    >>> from ptxkit import parse_statement
    >>> from ptxkit.instruction import head_of
    >>> node = parse_statement("setp.eq.s32 %p1|%p2, %r1, 0;")
    >>> destinations(node, head_of(node), frozenset()), destinations(parse_statement("st.u32 [%r1], 2;"),
    ...     head_of(parse_statement("st.u32 [%r1], 2;")), frozenset())
    (['%p1', '%p2'], [])
    """
    text = instruction.text
    if head[2] == "call":  # `call (%r1), f, (%r2);` writes %r1 (.reg results); `call %rd1, …` writes nothing
        operands = instruction.operands
        return operand_targets(operands[0], plain) if operands and operands[0].kind == "list" else []
    if "/" in text:  # a comment in the operands: the parser knows where it ends
        operands = instruction.operands
        return operand_targets(operands[0], plain) if operands else []
    match = _ONE_REGISTER.match(text, head[3])
    if match is not None:  # most instructions: one register, then the next operand
        return [match.group(1)]
    match = _FIRST_OPERAND.match(text, head[3])
    if match is None:
        return []
    first = match.group(1).lstrip()
    if not first or first[0] in "[-0123456789":
        return []
    return [name for name in _NAME.findall(first) if name[0] == "%" or name in plain]


def written_and_read(instruction: Instruction, head: HeadTuple,
                     plain: Container[str]) -> tuple[list[str], list[str]] | None:
    """`destinations`, and the registers the other operands name (what `operand_reads` gives
    for each, a special register by its name before the dot), read from the text
    without parsing the operands; None when a comment sits among them, the first
    operand is an address (its brackets may hold commas) or it is a call (whose first
    operand may be what it calls).

    >>> from ptxkit import parse_statement
    >>> from ptxkit.instruction import head_of
    >>> node = parse_statement("mad.lo.s32 %r1, %r2, 0x1f, %r3;")
    >>> written_and_read(node, head_of(node), frozenset())
    (['%r1'], ['%r2', '%r3'])
    """
    text = instruction.text
    if "/" in text or head[2] == "call":
        return None
    match = _FIRST_OPERAND.match(text, head[3])
    if match is None:
        return [], []
    first = match.group(1).lstrip()
    if first[:1] == "[":
        return None
    written = [] if not first or first[0] in "-0123456789" else \
        [name for name in _NAME.findall(first) if name[0] == "%" or name in plain]
    return written, [name for name in _TOKEN.findall(text, match.end()) if name and (name[0] == "%" or name in plain)]


def is_register(operand: Operand, plain: Container[str]) -> bool:
    """True for an operand that is a register (``%r1``, or a plain one).

    >>> from ptxkit import parse_statement
    >>> [is_register(o, frozenset({"n"})) for o in parse_statement("add.s32 %r1, n, 4;").operands]
    [True, True, False]
    """
    return operand.kind == "register" or (operand.kind == "symbol" and operand.name in plain)


def operand_targets(operand: Operand, plain: Container[str]) -> list[str]:
    """The registers an instruction's first operand defines (``%r``, ``{%a, %b}``,
    ``%r|%p``, a call's results ``(%a, %b)``); `plain` names registers declared without ``%``.

    >>> from ptxkit import parse_statement
    >>> operand_targets(parse_statement("setp.lt.s32 %p1|%p2, %r1, 4;").operands[0], frozenset())
    ['%p1', '%p2']
    """
    if is_register(operand, plain):  # a register, a symbol or a special register has a name, which
        return [operand.name]  # type: ignore[list-item]  # mypy cannot tell from the kind
    if operand.kind in ("vector", "pair", "list"):
        return [e.name for e in operand.elements if is_register(e, plain) and e.name is not None]
    return []


def operand_reads(operand: Operand, plain: Container[str]) -> list[str]:
    """Every register an operand reads, recursively.

    >>> from ptxkit import parse_statement
    >>> operand_reads(parse_statement("st.shared.u32 [%r1+8], %r2;").operands[0], frozenset())
    ['%r1']
    """
    if is_register(operand, plain) or operand.kind == "special":
        return [operand.name]  # type: ignore[list-item]  # named, as above
    found: list[str] = []
    for element in operand.elements:
        found.extend(operand_reads(element, plain))
    return found


def integer_computation(opcode: str, operands: Sequence[Operand], name_of: Callable[[Operand], str | None]
                        ) -> tuple[Callable[..., int | None], int, tuple[int | str, ...]] | None:
    """How an integer instruction computes its first operand from the others, decoded
    once: `ptxkit.isa_eval`'s ``apply`` and ``bits`` for `opcode`, and each source as a
    number (an immediate) or the name `name_of` gives it (None there, or an opcode the
    evaluator does not model or with another count of sources: None).

    >>> from ptxkit import parse_statement
    >>> node = parse_statement("add.s32 %r2, %r1, 4;")
    >>> apply, bits, sources = integer_computation("add.s32", node.operands, lambda o: o.name)
    >>> bits, sources, apply(3, 4), integer_computation("add.f32", node.operands, lambda o: o.name)
    (32, ('%r1', 4), 7, None)
    """
    evaluated = operation(opcode)
    if evaluated is None or evaluated.arity != len(operands) - 1:
        return None
    sources: list[int | str] = []
    for operand in operands[1:]:
        if operand.kind == "immediate" and isinstance(operand.value, int):
            sources.append(operand.value)
            continue
        name = name_of(operand)
        if name is None:  # a special register, a float, an address
            return None
        sources.append(name)
    return evaluated.apply, evaluated.bits, tuple(sources)


def register_and_constant(operands: Sequence[Operand]) -> tuple[str, int] | None:
    """``(r, C)`` for the operands ``d, r, C`` of a two-source instruction whose second
    source is an integer constant, else None.

    >>> from ptxkit import parse_statement
    >>> register_and_constant(parse_statement("shl.b32 %r2, %r1, 10;").operands)
    ('%r1', 10)
    """
    if len(operands) == 3 and operands[1].kind == "register" and operands[2].kind == "immediate" \
            and isinstance(operands[2].value, int):
        return operands[1].name, operands[2].value  # type: ignore[return-value]  # a register has a name
    return None


def is_param(modifiers: Container[str]) -> bool:
    """True when the modifiers of an ``ld``/``st`` name the parameter space.

    >>> is_param(["param", "b32"]), is_param(["shared", "b32"])
    (True, False)
    """
    return "param" in modifiers or "param::entry" in modifiers or "param::func" in modifiers


def type_width(modifiers: Sequence[str]) -> int:
    """The bits of the last type among `modifiers` (64 when none names one).

    >>> type_width(["shared", "v2", "u16"]), type_width(["shared"])
    (16, 64)
    """
    for modifier in reversed(modifiers):
        if modifier[:1] in "bsuf" and modifier[1:] in TYPE_BITS:
            return TYPE_BITS[modifier[1:]]
    return 64


def element_bytes(opcode: str) -> int:
    """The bytes of one element an opcode's type names.

    >>> element_bytes("ld.shared.v4.f32"), element_bytes("st.shared.b8")
    (4, 1)
    """
    return max(type_width(opcode.split(".")[1:]) // 8, 1)
