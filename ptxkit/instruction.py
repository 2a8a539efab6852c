"""The structured view of an instruction: guard, opcode, modifiers, operands.

The view is computed from the instruction's own text, on first use, so parsing and
printing large files never pays for it.

>>> from ptxkit import parse_statement
>>> inst = parse_statement("@!%p1 ld.shared::cta.v2.f32 {%f1, %f2}, [%r4+16];")
>>> inst.guard, inst.base, inst.modifiers, inst.state_space
(Guard(register='%p1', negated=True), 'ld', ('shared::cta', 'v2', 'f32'), 'shared::cta')
>>> [(op.kind, op.text) for op in inst.operands]
[('vector', '{%f1, %f2}'), ('memory', '[%r4+16]')]
"""

from __future__ import annotations

import struct

from ._records import TYPE_CHECKING, Record
from ._regex import compile as compile_pattern
from .isa import SPECIAL_REGISTER_PATTERN, STATE_SPACES

if TYPE_CHECKING:
    from .node_protocols import Located, Viewed


class Guard(Record):
    """An instruction's predicate guard: ``@%p`` or ``@!%p``.

    >>> from ptxkit import parse_statement
    >>> guard = parse_statement("@!%p1 bra DONE;").guard
    >>> guard.register, guard.negated, str(guard)
    ('%p1', True, '@!%p1')
    """

    register: str
    negated: bool = False

    def __str__(self) -> str:
        return f"@{'!' if self.negated else ''}{self.register}"


class Operand(Record):
    """One operand, with its kind and exact text.

    kind:
        ``register`` (``%r1``, ``%93``, ``!%p``; `negated` set), ``special`` (``%tid.x``),
        ``offset`` (a register plus a constant, ``%r1+4``: `name` is the register,
        `value` the constant, `elements` the register operand), ``immediate`` (`value`
        holds the number), ``symbol`` (a label or variable,
        `value` holds a ``+imm`` offset), ``sink`` (``_``), ``pair`` (``%p|%q``),
        ``vector`` (``{a, b}``), ``list`` (``(a, b)`` in calls) or ``memory``
        (``[base+imm]``: `name` is the base, `value` the displacement, `elements`
        the base operand and any further operands such as tensor coordinates).
    offset:
        Where the operand starts in the instruction's text.
    """

    kind: str
    text: str
    offset: int
    name: str | None = None
    value: int | float | None = None
    negated: bool = False
    elements: tuple[Operand, ...] = ()

    @property
    def registers(self) -> tuple[str, ...]:
        """Every register name this operand reads or writes (recursively).

        >>> from ptxkit import parse_statement
        >>> parse_statement("st.shared.v2.b32 [%r1+8], {%r2, _};").operands[0].registers
        ('%r1',)
        """
        if self.kind in ("register", "special") and self.name is not None:  # a register has a name
            return (self.name,)
        found: list[str] = []
        for element in self.elements:
            found.extend(element.registers)
        return tuple(found)


class InstructionView(Record):
    """Everything an analysis needs to know about an instruction's text.

    >>> from ptxkit import parse_statement
    >>> view = parse_statement("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
    ...                        " [%r1], [%rd2], 256, [%r3];").view
    >>> view.base, view.state_spaces, view.state_space
    ('cp', ('shared::cluster', 'global'), 'shared::cluster')
    """

    guard: Guard | None
    opcode: str
    base: str
    modifiers: tuple[str, ...]
    operands: tuple[Operand, ...]

    @property
    def state_spaces(self) -> tuple[str, ...]:
        """The state-space modifiers in order (``cp.async.bulk`` names two)."""
        return tuple(m for m in self.modifiers if m in STATE_SPACES)

    @property
    def state_space(self) -> str | None:
        """The first state-space modifier, or None (generic addressing, non-memory)."""
        for modifier in self.modifiers:
            if modifier in STATE_SPACES:
                return modifier
        return None


if TYPE_CHECKING:
    #: An opcode split at its dots: (opcode, base, modifiers).
    OpcodeInfo = tuple[str, str, tuple[str, ...]]
    #: `instruction_head` as a plain tuple (`head_of`): guard, opcode, base, end of the opcode.
    HeadTuple = tuple[Guard | None, str, str, int]
    #: What `_head` finds: the guard, the split opcode and the end of the opcode.
    _HeadParts = tuple[Guard | None, OpcodeInfo, int]


_COMMENT = compile_pattern(r"//[^\n]*|/\*[\s\S]*?\*/")
_HEAD = compile_pattern(
    r"\s*(?:@\s*(!?)\s*([%A-Za-z_$][\w$]*)\s+)?"  # guard
    # opcode and modifiers; ptxas also reads a modifier after blanks (`.bulk_group .L2::cache_hint`)
    r"([A-Za-z_][\w$]*(?:\.[\w$]+(?:::[\w$]+)*|\s+\.[A-Za-z_$][\w$]*(?:::[\w$]+)*)*)"
    r"(?=[\s;{(\[]|$)"
)
#: blanks, then what can only be a modifier: the opcode goes on past them
_SPACED_MODIFIER = compile_pattern(r"\s+\.[A-Za-z_$]")
_OPCODE = compile_pattern(r"[A-Za-z_][\w$]*(?:\.[\w$]+(?:::[\w$]+)*)*")
_REGISTER_NAME = compile_pattern(r"[%A-Za-z_$][\w$]*")
#: a register: ``%`` and at least one more identifier character (``%r1``, ``%93``: PTX ISA
#: "Identifiers" lets ``%`` start a name that goes on with any of them)
_PERCENT_NAME = r"%[\w$]+"
#: interned guards and split opcodes, shared by every instruction
_GUARDS: dict[tuple[str, bool], Guard] = {}
_OPCODES: dict[str, OpcodeInfo] = {}  # opcode -> (opcode, base, modifiers)
_NUMBER = (
    r"[+-]?(?:0[fF][0-9A-Fa-f]{8}|0[dD][0-9A-Fa-f]{16}|0[xX][0-9A-Fa-f]+U?|0[bB][01]+U?"
    r"|(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+U?)"
)
#: an element of a vector register (``.reg .v2 .f32 mx;`` ... ``mx.x``, PTX ISA "Vectors")
_COMPONENT = r"(?:\.[xyzwrgba](?![\w$]))?"
_SIMPLE = compile_pattern(
    rf"(?P<special>!?{SPECIAL_REGISTER_PATTERN})"
    rf"|(?P<register>!?{_PERCENT_NAME}{_COMPONENT})"
    rf"|(?P<offset>{_PERCENT_NAME}{_COMPONENT}\s*\+\s*{_NUMBER})"  # ptxas takes '+' only
    rf"|(?P<immediate>{_NUMBER})"
    rf"|(?P<sink>_)"
    rf"|(?P<symbol>!?[A-Za-z_$][\w$]*{_COMPONENT}(?:\s*[+-]\s*{_NUMBER})?)"
)
_PAIR = compile_pattern(rf"(!?(?:{_PERCENT_NAME}|[A-Za-z_$][\w$]*))\s*\|\s*({_PERCENT_NAME}|[A-Za-z_$][\w$]*)")
_ADDRESS = compile_pattern(
    rf"(?P<base>{_PERCENT_NAME}(?:\.[xyzw])?|[A-Za-z_$][\w$]*|{_NUMBER})"
    rf"(?:\s*(?P<sign>[+-])\s*(?P<disp>{_NUMBER}))?"
)
_SYMBOL = compile_pattern(rf"([A-Za-z_$][\w$]*{_COMPONENT})(?:\s*([+-])\s*({_NUMBER}))?")
_FAST_OPERAND = compile_pattern(
    rf"\s*(?:(!?{SPECIAL_REGISTER_PATTERN})|(!?{_PERCENT_NAME})|(_)(?![\w$])|([A-Za-z_$][\w$]*)(?![\w$])"
    rf"|({_NUMBER})(?![\w$.])"
    rf"|(\[\s*({_PERCENT_NAME}|[A-Za-z_$][\w$]*)\s*(?:([+-])\s*({_NUMBER})\s*)?\])"
    rf"|(\{{[^{{}}\[\]()|]*\}}))\s*(?:,|$)"
)
_SPECIAL, _REGISTER, _SINK, _SYMBOL_KIND, _IMMEDIATE, _MEMORY, _BASE, _SIGN, _DISP, _VECTOR = range(1, 11)
KIND_NAMES = {_SPECIAL: "special", _REGISTER: "register"}
_SPLIT_FAST = compile_pattern(r"[\[\]{}()]")
_new = tuple.__new__  # builds the named tuples below without their Python-level __new__


class Head(Record):
    """The cheap part of an instruction: guard, full opcode, base, where its operands start.

    >>> from ptxkit import parse_statement
    >>> head = instruction_head(parse_statement("ld.shared.u32 %r1, [%r2];"))
    >>> head.guard, head.opcode, head.base, head.end
    (None, 'ld.shared.u32', 'ld', 13)
    """

    guard: Guard | None
    opcode: str
    base: str
    end: int


def instruction_head(node: Viewed[InstructionView]) -> Head:
    """Guard and opcode of an `Instruction` node, without parsing its operands.

    >>> from ptxkit import parse_statement
    >>> instruction_head(parse_statement("@!%p2 bra.uni L;"))
    Head(guard=Guard(register='%p2', negated=True), opcode='bra.uni', base='bra', end=13)
    """
    return _new(Head, head_of(node))


def head_of(node: Viewed[InstructionView]) -> HeadTuple:
    """`instruction_head` as a plain tuple (guard, opcode, base, end): the fast path for
    passes that read every instruction. Malformed text raises the full parser's error."""
    head = _head(node.text)
    if head is None:
        view = node.view  # raises the diagnostic
        return view.guard, view.opcode, view.base, len(node.text)
    guard, (opcode, base, _), end = head
    return guard, opcode, base, end


def _head(text: str) -> _HeadParts | None:
    """(guard, (opcode, base, modifiers), end of the opcode), or None when malformed.

    The common case splits at blanks and looks the opcode up in a cache; odd spellings
    (``@ !%p``, an operand glued to the opcode, comments) take the regular expression.
    """
    guard = None
    if text[0] == "@":
        parts = text.split(None, 2)
        negated = parts[0][1:2] == "!"
        register = parts[0][1 + negated :]
        if len(parts) < 2 or not _REGISTER_NAME.fullmatch(register):
            return _slow_head(text)
        guard = _guard(register, negated)
        opcode = parts[1]
        start = text.index(opcode, len(parts[0]))
    else:
        opcode = text.split(None, 1)[0]
        start = 0
    if opcode[-1] == ";":
        opcode = opcode[:-1]
    end = start + len(opcode)
    dot = text.find(".", end)  # a cheap look before the pattern: most operands hold no dot
    if dot > end and text[end:dot].isspace() and _SPACED_MODIFIER.match(text, end):
        return _slow_head(text)
    info = _OPCODES.get(opcode)
    if info is None:
        if not _OPCODE.fullmatch(opcode):
            return _slow_head(text)
        info = _opcode_info(opcode)
    return guard, info, end


def _slow_head(text: str) -> _HeadParts | None:
    match = _HEAD.match(text)
    if match is None:
        return None
    negation, register, opcode = match.groups()
    opcode = "".join(opcode.split())
    guard = _guard(register, negation == "!") if register is not None else None
    return guard, _OPCODES.get(opcode) or _opcode_info(opcode), match.end()


def _guard(register: str, negated: bool) -> Guard:
    guard = _GUARDS.get((register, negated))
    if guard is None:
        guard = _GUARDS[register, negated] = _new(Guard, (register, negated))
    return guard


def _opcode_info(opcode: str) -> OpcodeInfo:
    base, *modifiers = opcode.split(".")
    info = _OPCODES[opcode] = (opcode, base, tuple(modifiers))
    return info


def parse_instruction(node: Located) -> InstructionView:
    """Parse an `Instruction` node's text into an `InstructionView`.

    Raises `PtxSyntaxError` (at the offending column) for malformed text.

    >>> from ptxkit import parse_statement
    >>> view = parse_instruction(parse_statement("add.s32 %r1, %r2, 1;"))
    >>> view.opcode, [(op.kind, op.text) for op in view.operands]
    ('add.s32', [('register', '%r1'), ('register', '%r2'), ('immediate', '1')])
    """
    text = node.text
    if "/" in text:  # blank out comments, keeping every offset
        text = _COMMENT.sub(lambda m: " " * len(m.group()), text)
    head = _head(text)
    if head is None:
        at = len(text) - len(text.lstrip())
        if text[at : at + 1] == "@":
            raise node.error("expected a predicate register and an opcode after '@'", at)
        raise node.error("expected an opcode", at)
    guard, (opcode, base, modifiers), end = head
    operands = _parse_operands(node, text, end, text.rindex(";"))
    return _new(InstructionView, (guard, opcode, base, modifiers, operands))


def _parse_operands(node: Located, text: str, start: int, end: int) -> tuple[Operand, ...]:
    if start == end or text[start:end].isspace():
        return ()
    fast = _fast_operands(text, start, end)
    if fast is not None:
        return fast
    return tuple(_operand(node, text, a, b) for a, b in _split(node, text, start, end, ","))


def _fast_operands(text: str, start: int, end: int) -> tuple[Operand, ...] | None:
    """One regex pass over common operand lists; None when the general path is needed."""
    operands: list[Operand] = []
    append = operands.append
    pos = start
    match = _FAST_OPERAND.match
    while pos < end:
        m = match(text, pos, end)
        if m is None:
            return None
        kind: int = m.lastindex  # type: ignore[assignment]  # one alternative always matches: no test for None here
        at, stop = m.span(kind)
        operand = text[at:stop]
        if kind <= _REGISTER:  # special or ordinary register, maybe negated
            if operand[0] == "!":
                append(_new(Operand, (KIND_NAMES[kind], operand, at, operand[1:], None, True, ())))
            else:
                append(_new(Operand, (KIND_NAMES[kind], operand, at, operand, None, False, ())))
        elif kind == _SYMBOL_KIND:
            append(_new(Operand, ("symbol", operand, at, operand, None, False, ())))
        elif kind == _IMMEDIATE:
            append(_new(Operand, ("immediate", operand, at, None, parse_number(operand), False, ())))
        elif kind == _MEMORY:
            base = m.group(_BASE)
            disp = m.group(_DISP)
            value = 0 if disp is None else parse_number(disp) * (-1 if m.group(_SIGN) == "-" else 1)
            base_kind = "register" if base[0] == "%" else "symbol"
            base_op = _new(Operand, (base_kind, base, m.start(_BASE), base, None, False, ()))
            append(_new(Operand, ("memory", operand, at, base, value, False, (base_op,))))
        elif kind == _VECTOR:
            elements = _fast_operands(text, at + 1, stop - 1)
            if elements is None:
                return None
            append(_new(Operand, ("vector", operand, at, None, None, False, elements)))
        else:
            append(_new(Operand, ("sink", operand, at, None, None, False, ())))
        pos = m.end()
        if pos == end and text[pos - 1] == ",":
            return None  # a trailing comma: let the general path report it
    return tuple(operands)


def _split(node: Located, text: str, start: int, end: int, separator: str) -> list[tuple[int, int]]:
    """Split text[start:end] at top-level separators into (start, end) spans."""
    body = text[start:end]
    if not _SPLIT_FAST.search(body):
        spans, pos = [], start
        for piece in body.split(separator):
            spans.append((pos, pos + len(piece)))
            pos += len(piece) + 1
        return spans
    spans, open_brackets, pos = [], [], start
    closers = {"[": "]", "{": "}", "(": ")"}
    for i in range(start, end):
        char = text[i]
        if char in closers:
            open_brackets.append(i)
        elif char in "]})":
            if not open_brackets or closers[text[open_brackets.pop()]] != char:
                raise node.error(f"unbalanced {char!r} in operands", i)
        elif char == separator and not open_brackets:
            spans.append((pos, i))
            pos = i + 1
    if open_brackets:
        at = open_brackets[-1]
        raise node.error(f"expected {closers[text[at]]!r} to close this {text[at]!r}", at)
    spans.append((pos, end))
    return spans


def _operand(node: Located, text: str, start: int, end: int) -> Operand:
    raw = text[start:end]
    stripped = raw.strip()
    offset = start + (len(raw) - len(raw.lstrip()))
    if not stripped:
        raise node.error("expected an operand", offset)
    first = stripped[0]
    if first == "[":
        return _memory(node, text, offset, offset + len(stripped))
    if first in "{(":
        if stripped[-1] != ("}" if first == "{" else ")"):
            raise node.error(f"unexpected text after {first!r}…{'}' if first == '{' else ')'}", offset)
        inner = _split(node, text, offset + 1, offset + len(stripped) - 1, ",")
        elements: tuple[Operand, ...]
        if len(inner) == 1 and not text[inner[0][0] : inner[0][1]].strip():
            elements = ()
        else:
            elements = tuple(_operand(node, text, a, b) for a, b in inner)
        return Operand("vector" if first == "{" else "list", stripped, offset, elements=elements)
    match = _SIMPLE.fullmatch(stripped)
    if match is None:
        pair = _PAIR.fullmatch(stripped)
        if pair is None:
            raise node.error(f"unexpected operand {stripped!r}", offset)
        elements = (
            _operand(node, text, offset + pair.start(1), offset + pair.end(1)),
            _operand(node, text, offset + pair.start(2), offset + pair.end(2)),
        )
        return Operand("pair", stripped, offset, elements=elements)
    kind = match.lastgroup
    if kind == "offset":
        return _offset(stripped, offset)
    if kind == "register" or kind == "special":
        if first == "!":
            return Operand(kind, stripped, offset, stripped[1:], None, True)
        return Operand(kind, stripped, offset, stripped)
    if kind == "immediate":
        return Operand("immediate", stripped, offset, value=parse_number(stripped))
    if kind == "sink":
        return Operand("sink", stripped, offset)
    return _symbol(stripped, offset, negated=first == "!")  # inline-asm predicates: !P1


def _offset(text: str, offset: int) -> Operand:
    """``%r1+4``: the register (an element, so that its readers see it) and the constant."""
    plus = text.index("+")
    name = text[:plus].rstrip()
    register = Operand("register", name, offset, name)
    return Operand("offset", text, offset, name, parse_number(text[plus + 1 :].lstrip()), elements=(register,))


def _symbol(text: str, offset: int, negated: bool) -> Operand:
    match = _SYMBOL.fullmatch(text[1:] if negated else text)
    assert match is not None  # `_SIMPLE` matched the text as a symbol
    name, sign, disp = match.groups()
    value = None
    if disp is not None:
        value = parse_number(disp) * (-1 if sign == "-" else 1)
    return Operand("symbol", text, offset, name=name, value=value, negated=negated)


def _memory(node: Located, text: str, start: int, end: int) -> Operand:
    if text[end - 1] != "]":
        raise node.error("unexpected text after ']'", start)
    spans = _split(node, text, start + 1, end - 1, ",")
    a, b = spans[0]
    raw = text[a:b]
    inner_offset = a + (len(raw) - len(raw.lstrip()))
    address = _ADDRESS.fullmatch(raw.strip())
    if address is None:
        raise node.error("expected an address: [register], [register+imm], [symbol+imm] or [imm]", inner_offset)
    base_text = address.group("base")
    base = _operand(node, text, inner_offset, inner_offset + len(base_text))
    displacement: int | float = 0
    if address.group("disp") is not None:
        displacement = parse_number(address.group("disp")) * (-1 if address.group("sign") == "-" else 1)
    extra = tuple(_operand(node, text, x, y) for x, y in spans[1:])
    return Operand(
        "memory",
        text[start:end],
        start,
        name=base.name if base.kind != "immediate" else None,
        value=displacement,
        elements=(base, *extra),
    )


def parse_number(text: str) -> int | float:
    """The value of a PTX numeric literal (``0f``/``0d`` floats are decoded).

    >>> parse_number("0f3F800000"), parse_number("-0x10"), parse_number("017"), parse_number("5U")
    (1.0, -16, 15, 5)
    """
    if text.isdigit() and (text[0] != "0" or len(text) == 1):
        return int(text)
    sign = -1 if text[0] == "-" else 1
    body = text.lstrip("+-")
    prefix = body[:2].lower()
    if prefix == "0f":
        single: float = struct.unpack(">f", bytes.fromhex(body[2:]))[0]
        return sign * single
    if prefix == "0d":
        double: float = struct.unpack(">d", bytes.fromhex(body[2:]))[0]
        return sign * double
    body = body.rstrip("U")
    if prefix == "0x":
        return sign * int(body[2:], 16)
    if prefix == "0b":
        return sign * int(body[2:], 2)
    if "." in body or "e" in body or "E" in body:
        return sign * float(body)
    if len(body) > 1 and body[0] == "0":
        return sign * int(body, 8)
    return sign * int(body)
