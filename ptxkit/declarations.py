"""Function signatures and declarations (``.reg``, variables, parameters).

>>> from ptxkit import parse
>>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n"
...           ".visible .entry k(.param .u64 .ptr .global .align 16 k_p0, .param .align 64 .b8 tmap[128])"
...           "\\n.maxntid 128, 1, 1\\n{\\n\\t.reg .b32 %r<3>;\\n\\tret;\\n}\\n")
>>> sig = m.functions[0].signature
>>> sig.name, sig.kind, sig.linkage, [p.name for p in sig.params], sig.params[0].pointer_space
('k', 'entry', ('.visible',), ['k_p0', 'tmap'], '.global')
>>> sig.directives
(('.maxntid', '128, 1, 1'),)
>>> m.functions[0].body.items[0].declaration.registers()
['%r0', '%r1', '%r2']
"""

from __future__ import annotations

import re

from ._records import TYPE_CHECKING, Record
from ._regex import compile
from .isa import LINKAGES

if TYPE_CHECKING:
    from .node_protocols import Located

_COMMENT = compile(r"//[^\n]*|/\*[\s\S]*?\*/")
_DECL_SPACES = (".reg", ".global", ".shared", ".local", ".const", ".param", ".tex", ".sreg")
_TOKEN = compile(
    r"\.align\s+\d+(?![\w$])|\.attribute\s*\((?:[^()]|\([^()]*\))*\)|\.[A-Za-z_][\w]*(?:::[\w]+)*"
    r"|[%A-Za-z_$][\w$]*(?:\s*<\s*\d+\s*>)?(?:\s*\[\s*\d*\s*\])*(?![\w$])|,|\S+"
)
_TYPE = compile(
    r"\.(?:[bsu](?:8|16|32|64|128)|f16|f32|f64|f16x2|bf16|bf16x2|tf32|e4m3|e5m2|e4m3x2|e5m2x2|[su]16x2"
    r"|pred|texref|samplerref|surfref)"
)
_POINTER_SPACES = (".global", ".shared", ".const", ".local")
_VECTORS = (".v2", ".v4", ".v8")


class Param(Record):
    """A function parameter: ``.param .u64 .ptr .global .align 16 name``, ``.reg .b32 x``
    or a vector register, ``.reg .v4 .u16 x`` (`vector` is ``.v4``).

    >>> from ptxkit import parse
    >>> m = parse(".visible .entry k(.param .u64 .ptr .global .align 16 p, .param .b8 buf[64])\\n{\\n}\\n")
    >>> p, buf = m.functions[0].signature.params
    >>> (p.type, p.pointer_space, p.pointer_align), (buf.name, buf.array)
    (('.u64', '.global', 16), ('buf', (64,)))
    >>> parse(".func (.reg .v2 .u32 out) f(.reg.v4.u16 in);\\n").functions[0].signature.params[0].vector
    '.v4'
    """

    space: str
    type: str | None
    name: str
    align: int | None = None
    array: tuple[int | None, ...] = ()
    pointer_space: str | None = None
    pointer_align: int | None = None
    vector: str | None = None


class Signature(Record):
    """A parsed function header.

    >>> from ptxkit import parse
    >>> sig = parse(".extern .func (.param .b32 r) f(.param .b32 x);\\n").functions[0].signature
    >>> sig.kind, sig.name, sig.linkage, [p.name for p in sig.return_params], sig.noreturn
    ('func', 'f', ('.extern',), ['r'], False)
    """

    kind: str
    name: str
    linkage: tuple[str, ...]
    return_params: tuple[Param, ...]
    params: tuple[Param, ...]
    directives: tuple[tuple[str, str], ...]

    @property
    def noreturn(self) -> bool:
        return any(name == ".noreturn" for name, _ in self.directives)


class Declaration(Record):
    """A ``.reg`` or variable declaration: one state space and type, several names.

    >>> from ptxkit import parse_statement
    >>> tile = parse_statement(".shared .align 16 .b8 tile[1024];").declaration
    >>> tile.space, tile.type, tile.align, tile.names, tile.base_names
    ('.shared', '.b8', 16, ('tile[1024]',), ['tile'])
    """

    linkage: tuple[str, ...]
    space: str
    type: str | None
    align: int | None
    attributes: tuple[str, ...]
    names: tuple[str, ...]
    initializer: str | None

    def registers(self) -> list[str]:
        """The declared names with ``%r<N>`` ranges expanded.

        >>> from ptxkit import parse_statement
        >>> parse_statement(".reg .pred %p<2>, %q;").declaration.registers()
        ['%p0', '%p1', '%q']
        """
        out: list[str] = []
        for name in self.names:
            match = re.fullmatch(r"(.+?)\s*<\s*(\d+)\s*>", name)
            if match:
                out.extend(f"{match.group(1)}{i}" for i in range(int(match.group(2))))
            else:
                out.append(name)
        return out

    @property
    def base_names(self) -> list[str]:
        """The declared identifiers without array dimensions."""
        return [_base_name(name) for name in self.names]


_HEADER = compile(
    r"\s*(?P<linkage>(?:\.(?:visible|extern|weak|common)\s+)*)\.(?P<kind>entry|func)(?![\w$])\s*"
    r"(?P<attribute>\.attribute\s*\((?:[^()]|\([^()]*\))*\)\s*)?"
    r"(?:\((?P<ret>[^()]*)\)\s*)?"
    r"(?P<name>[A-Za-z_$%][\w$]*)\s*"
    r"(?:\((?P<params>[^()]*)\))?"
    r"(?P<rest>[\s\S]*)"
)


#: A performance directive and its arguments. Each argument is taken whole (possessive:
#: a run of characters split two ways would make a malformed header take exponential
#: time to reject).
_DIRECTIVE = compile(r'(\.[A-Za-z_]\w*+)((?:\s*+(?:"[^"]*+"|[^.\s;"]++))*+)\s*+;?')
_DIRECTIVES = compile(rf"(?:\s*+{_DIRECTIVE.pattern})*+\s*+")


def parse_signature(function: Located) -> Signature:
    """Parse a `Function` node's header text; raises `PtxSyntaxError` if malformed.

    >>> from ptxkit import parse
    >>> k = parse(".visible .entry k(.param .u32 n) .maxntid 256\\n{\\n\\tret;\\n}\\n").functions[0]
    >>> parse_signature(k).directives
    (('.maxntid', '256'),)
    """
    match = _header(function)
    rest = match.group("rest").strip()
    if rest.endswith(";"):
        rest = rest[:-1].rstrip()
    if not _DIRECTIVES.fullmatch(rest):
        at = match.start("rest") + (len(match.group("rest")) - len(match.group("rest").lstrip()))
        raise function.error("expected performance directives (.maxntid, .reqntid, …) after the parameters", at)
    directives = [(name, args.strip()) for name, args in _DIRECTIVE.findall(rest)]
    linkage = tuple(match.group("linkage").split())
    return Signature(
        kind=match.group("kind"),
        name=match.group("name"),
        linkage=linkage,
        return_params=_params(function, match, "ret"),
        params=_params(function, match, "params"),
        directives=tuple(directives),
    )


def parameter_span(function: Located) -> tuple[int, int] | None:
    """Where the text inside a function header's parameter parentheses lies:
    ``(start, end)`` offsets into ``function.text``; None when the header has no
    parameter list. Raises `PtxSyntaxError` for a malformed header.

    >>> from ptxkit import parse
    >>> k = parse(".visible .entry k(.param .u32 n, .param .u64 p)\\n{\\n\\tret;\\n}\\n").functions[0]
    >>> start, end = parameter_span(k)
    >>> k.text[start:end]
    '.param .u32 n, .param .u64 p'
    """
    match = _header(function)
    if match.group("params") is None:
        return None
    return match.start("params"), match.end("params")


def _header(function: Located) -> re.Match[str]:
    """`_HEADER`'s match of a function header with its comments blanked out (offsets kept);
    raises `PtxSyntaxError` when the header has no name and parameter list."""
    text = _COMMENT.sub(lambda m: " " * len(m.group()), function.text)
    match = _HEADER.fullmatch(text)
    if match is None:
        at = len(text) - len(text.lstrip())
        raise function.error("expected a function name and parameter list after .entry/.func", at)
    return match


def _params(function: Located, match: re.Match[str], group: str) -> tuple[Param, ...]:
    text = match.group(group)
    if text is None or not text.strip():
        return ()
    params: list[Param] = []
    pos = match.start(group)
    for piece in text.split(","):
        params.append(_param(function, piece, pos + len(piece) - len(piece.lstrip())))
        pos += len(piece) + 1
    return tuple(params)


def _param(function: Located, text: str, offset: int) -> Param:
    tokens = _TOKEN.findall(text)
    space = tokens[0] if tokens else ""
    if space not in (".param", ".reg"):
        raise function.error("expected '.param' or '.reg' to start a parameter", offset)
    align = pointer_space = pointer_align = type_ = name = vector = None
    saw_ptr = False
    for token in tokens[1:]:
        if token.startswith(".align "):
            if saw_ptr:
                pointer_align = int(token.split()[-1])
            else:
                align = int(token.split()[-1])
        elif token == ".ptr":
            saw_ptr = True
        elif saw_ptr and token in _POINTER_SPACES:
            pointer_space = token
        elif token in _VECTORS and vector is None and type_ is None:
            vector = token
        elif _TYPE.fullmatch(token) and type_ is None:
            type_ = token
        elif name is None and _is_declarator(token):
            name = token
        else:
            raise function.error(f"unexpected {token!r} in parameter", offset)
    if name is None:
        raise function.error("expected a parameter name", offset)
    base, array = _declarator(name)
    return Param(space, type_, base, align, array, pointer_space, pointer_align, vector)


def _is_declarator(token: str) -> bool:
    """Whether `token` can be a declarator: ASCII only, starting with a letter, ``_``,
    ``$`` or ``%`` (PTX ISA, Identifiers; ptxas rejects any other character)."""
    return token.isascii() and (token[0] in "%$_" or token[0].isalpha())


def _declarator(name: str) -> tuple[str, tuple[int | None, ...]]:
    base = _base_name(name)
    dims = tuple(int(d) if d else None for d in re.findall(r"\[\s*(\d*)\s*\]", name))
    return base, dims


_IDENTIFIER = compile(r"[%A-Za-z_$][\w$]*")


def _base_name(declarator: str) -> str:
    """The identifier a declarator starts with (``tile`` of ``tile[1024]``, ``%r`` of ``%r<4>``)."""
    match = _IDENTIFIER.match(declarator)
    assert match is not None  # `_is_declarator` took it for a name
    return match.group()


_DECLARATION_START = compile(
    r"(?:\.(?:visible|extern|weak|common)\s+)*\.(?:reg|global|shared|local|const|param|tex|sreg)(?![\w$])"
)


def parse_declaration(directive: Located) -> Declaration | None:
    """Parse a ``.reg``/variable directive (None for other directives).

    >>> from ptxkit import parse_statement
    >>> parse_declaration(parse_statement(".global .align 4 .u32 count = 0;")).initializer
    '0'
    >>> parse_declaration(parse_statement(".loc 1 12 3")) is None
    True
    """
    text = directive.text
    if text[-1] != ";" or not _DECLARATION_START.match(text):
        return None
    text = _COMMENT.sub(lambda m: " " * len(m.group()), text[:-1])
    head, eq, initializer = text.partition("=")
    tokens = _TOKEN.findall(head)
    linkage: list[str] = []
    while tokens and tokens[0] in LINKAGES:
        linkage.append(tokens.pop(0))
    space = tokens.pop(0)
    align = type_ = None
    attributes: list[str] = []
    names: list[str] = []
    expect_name = True
    for token in tokens:
        if token.startswith(".align "):
            align = int(token.split()[-1])
        elif _TYPE.fullmatch(token) and type_ is None and not names:
            type_ = token
        elif re.fullmatch(r"\.v[248]|\.attribute\s*\(.*\)|\.ptr", token, re.S) and not names:
            attributes.append(token)
        elif token == "," and not expect_name:
            expect_name = True
        elif expect_name and _is_declarator(token):
            names.append(re.sub(r"\s+", "", token))
            expect_name = False
        else:
            at = directive.text.find(token)
            raise directive.error(f"unexpected {token!r} in the {space} declaration", max(at, 0))
    if not names or expect_name:
        raise directive.error(f"expected a name in the {space} declaration", len(directive.text) - 1)
    return Declaration(
        tuple(linkage), space, type_, align, tuple(attributes), tuple(names),
        initializer.strip() if eq else None,
    )
