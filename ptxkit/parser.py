"""PTX text → lossless `Module`.

One compiled regular expression cuts the text into pieces, each with the trivia
(whitespace, comments) before it: braces, newline-terminated directives (``.version``,
``.target``, ``.address_size``, ``.file``, ``.loc``), opaque ``.section`` blocks,
function headers, labels, and statements up to ``;``. All repetitions are possessive,
so no input makes the scanner backtrack, and scanning stops at the first piece that
does not fit, which is then diagnosed.

>>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n")
>>> m.version, m.targets
((8, 0), ['sm_90a'])
"""

from __future__ import annotations

import re

from ._gc import paused_gc
from .errors import PtxSyntaxError, Source
from .syntax import Block, Directive, Function, Instruction, Label, Module, Node

_WS = r"[ \t\r\n\f\v]"
_STRING = r'"(?:[^"\\\n]|\\.)*+"'
_COMMENT = r"//[^\n]*+|/\*(?:[^*]++|\*(?!/))*+\*/"
_TRIVIA = rf"(?:{_WS}++|{_COMMENT})*+"
_SLASH = r"/(?![/*])"  # a lone slash; never the start of a comment
_IDENT = r"[A-Za-z_$%][A-Za-z0-9_$]*+"


def _brace_group(depth: int) -> str:
    """``{ … }`` without ``;`` inside, nested up to `depth` (vectors, initializers)."""
    inner = rf'[^{{}};"/]++|{_STRING}|{_COMMENT}|{_SLASH}'
    group = rf"\{{(?:{inner})*+\}}"
    for _ in range(depth - 1):
        group = rf"\{{(?:{inner}|{group})*+\}}"
    return group


_STATEMENT_BODY = rf'(?:[^;{{}}"/]++|{_STRING}|{_COMMENT}|{_SLASH}|{_brace_group(6)})*+'
_LINE_DIRECTIVE = (
    rf'\.(?:version|target|address_size|file|loc)(?![\w$])(?:[ \t]*+(?:[^\s/"]++|{_STRING}|{_SLASH}))*+'
)
_SECTION = rf'\.section(?![\w$])[^{{}};"/]*+\{{(?:[^}}"/]++|{_STRING}|{_COMMENT}|{_SLASH})*+\}}'
_FUNCTION = (
    rf"(?:\.(?:visible|extern|weak|common){_WS}++)*+\.(?:entry|func)(?![\w$])"
    rf'(?:{_WS}*+(?:\.pragma{_WS}*+{_STRING}{_WS}*+;|[^\s;{{}}/"]++|{_STRING}|{_COMMENT}|{_SLASH}))*+'
    rf"(?:{_WS}*+(;))?"  # group: the ';' that makes the header a declaration
)
_LABEL = rf"{_IDENT}[ \t]*+:(?!:)"

_NOT_FUNCTION = rf"(?!(?:\.(?:visible|extern|weak|common){_WS}++)*+\.(?:entry|func)(?![\w$]))"
_MODULE_PIECE = rf"{_TRIVIA}(?:{_LINE_DIRECTIVE}|{_SECTION}|{_NOT_FUNCTION}\.{_STATEMENT_BODY};)"
_BODY_PIECE = (
    rf"{_TRIVIA}(?:{_LINE_DIRECTIVE}|{_SECTION}|{_LABEL}|(?=[@A-Za-z_.]){_NOT_FUNCTION}{_STATEMENT_BODY};)"
)
# Structure: a step at module level is a function header or a run of directives; in a
# body it is a brace or a run of statements. Runs are scanned into nodes only on use.
_MODULE_STEP = re.compile(rf"({_TRIVIA})(?:({_FUNCTION})|(?:{_MODULE_PIECE})++)")  # groups 1-3
_BODY_STEP = re.compile(rf"({_TRIVIA})(?:(\{{)|(\}})|(?:{_BODY_PIECE})++)")
_BODY_OPEN = re.compile(rf"({_TRIVIA})\{{")
# One piece of a run (or a statement given for insertion), with the trivia before it.
_PIECE = re.compile(rf"({_TRIVIA})(?:({_LINE_DIRECTIVE})|({_SECTION})|({_LABEL})|({_STATEMENT_BODY};))")
_LINE, _SECTION_KIND, _LABEL_KIND, _STMT = 2, 3, 4, 5
_TRIVIA_RE = re.compile(_TRIVIA)
_STATEMENT_PREFIX = re.compile(_STATEMENT_BODY)
_FUNCTION_START = re.compile(rf"(?:\.(?:visible|extern|weak|common){_WS}++)*+\.(?:entry|func)(?![\w$])")
_LABEL_START = re.compile(_LABEL)
_BAD_CHARACTER = re.compile(r"[\x00-\x08\x0e-\x1f\x7f]")
_INSTRUCTION_START = frozenset("@_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


def parse(text: str | bytes, filename: str = "<input>") -> Module:
    """Parse PTX text (or UTF-8 bytes) into a lossless `Module`.

    ``str(parse(text)) == text`` for every input that parses. Bad input raises
    `PtxSyntaxError` with file, line, column and the source line.

    >>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n"
    ...           ".visible .entry k(.param .u64 p)\\n{\\n\\tret;\\n}\\n", "k.ptx")
    >>> [f.name for f in m.functions], str(m) == m.source.text
    (['k'], True)
    """
    if isinstance(text, (bytes, bytearray)):
        text = _decode(bytes(text), filename)
    source = Source(text, filename)
    bad = _BAD_CHARACTER.search(text)
    if bad:
        char = bad.group()
        what = "NUL byte" if char == "\0" else f"control character {char!r}"
        raise source.error(bad.start(), f"unexpected {what}")
    module = Module(source)
    _build(module, source)
    return module


def parse_file(path, filename: str | None = None) -> Module:
    """Read and parse a PTX file (bytes are decoded as UTF-8, strictly).

    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".ptx", delete=False) as f:
    ...     _ = f.write(".version 8.0\\n")
    >>> parse_file(f.name).version; os.unlink(f.name)
    (8, 0)
    """
    with open(path, "rb") as handle:
        data = handle.read()
    return parse(data, filename if filename is not None else str(path))


def parse_statement(text: str) -> Node:
    """Parse one statement (instruction, directive or label) for insertion into a tree.

    >>> parse_statement("fence.proxy.async.shared::cta;").opcode
    'fence.proxy.async.shared::cta'
    """
    source = Source(text, "<statement>")
    match = _PIECE.fullmatch(text)
    kind = match.lastindex if match else None
    if kind not in (_LINE, _LABEL_KIND, _STMT) or match.group(1):
        raise source.error(0, "expected exactly one instruction, directive or label")
    if kind == _LABEL_KIND:
        return Label("", text)
    if text[0] == ".":
        return Directive("", text)
    if text[0] not in _INSTRUCTION_START:
        raise source.error(0, "expected an instruction, label or directive")
    return Instruction("", text)


def _decode(data: bytes, filename: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        before = data[: err.start].decode("utf-8", "replace")
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        line_text = before[before.rfind("\n") + 1 :]
        raise PtxSyntaxError(
            f"invalid UTF-8 byte 0x{data[err.start]:02x}", filename, line, column, line_text
        ) from None


def _build(module: Module, source: Source) -> None:
    """Scan the structure of `source` into `module` (iteratively: nesting is unbounded).

    Braces and function headers become nodes now; each run of statements between
    them is kept as an ``(offset, text)`` segment and scanned by `_scan_runs` on use.
    """
    text = source.text
    pos = 0
    container: Node = module
    segments: list = []
    stack: list = []  # (container, segments) of the enclosing containers
    while True:
        if container is module:
            m = _MODULE_STEP.match(text, pos)
            if m is None:
                break
            if m.lastindex == 2:
                prefix = m.group(1)
                function = Function(prefix, m.group(2), pos + len(prefix), module)
                segments.append(function)
                pos = m.end()
                if m.group(3):  # a declaration: no body follows
                    continue
                opening = _BODY_OPEN.match(text, pos)
                if opening is None:
                    raise _diagnose_header(source, pos)
                prefix = opening.group(1)
                block = Block(prefix, "{", pos + len(prefix), function)
                function.body = block
                stack.append((container, segments))
                container, segments = block, []
                pos = opening.end()
                continue
        else:
            m = _BODY_STEP.match(text, pos)
            if m is None:
                break
            kind = m.lastindex
            if kind == 2:
                prefix = m.group(1)
                block = Block(prefix, "{", pos + len(prefix), container)
                segments.append(block)
                stack.append((container, segments))
                container, segments = block, []
                pos = m.end()
                continue
            if kind == 3:
                container.tail = m.group(1)
                container._items, container._lazy = None, segments
                container, segments = stack.pop()
                pos = m.end()
                continue
        segments.append((pos, text[pos : m.end()]))
        pos = m.end()
    end = _TRIVIA_RE.match(text, pos).end()
    if end < len(text):
        raise _diagnose(source, end, at_module_level=container is module)
    if container is not module:
        line, _ = source.position(container.offset)
        raise source.error(end, f"expected '}}' to close the scope opened at line {line}, found end of input")
    module.tail = text[pos:]
    module._items, module._lazy = None, segments


def _scan_runs(container: Node, segments: list) -> list[Node]:
    """Turn a container's lazy segments into nodes (runs were validated by `_build`)."""
    with paused_gc():
        return _scan_pieces(container, segments)


def _scan_pieces(container: Node, segments: list) -> list[Node]:
    items: list[Node] = []
    append = items.append
    findall = _PIECE.findall  # a run was validated when scanned: its pieces cover it exactly
    for segment in segments:
        if type(segment) is not tuple:
            append(segment)
            continue
        offset, text = segment
        for prefix, line, section, label, statement in findall(text):
            offset += len(prefix)
            if statement:
                node_type = Instruction if statement[0] != "." else Directive
                append(node_type(prefix, statement, offset, container))
                offset += len(statement)
            elif label:
                append(Label(prefix, label, offset, container))
                offset += len(label)
            else:
                piece = line or section
                append(Directive(prefix, piece, offset, container))
                offset += len(piece)
    return items


def _diagnose_header(source: Source, pos: int) -> PtxSyntaxError:
    end = _TRIVIA_RE.match(source.text, pos).end()
    found = "end of input" if end == len(source.text) else repr(source.text[end])
    return source.error(end, f"expected '{{' or ';' after the function header, found {found}")


def _diagnose(source: Source, start: int, at_module_level: bool) -> PtxSyntaxError:
    """Explain why nothing could be scanned at `start`."""
    text = source.text
    char = text[start]
    if text.startswith("/*", start):
        return source.error(start, "unterminated comment: expected '*/'")
    if text.startswith(".section", start):
        return source.error(start, "unterminated .section block: expected '}'")
    if char == "}" and at_module_level:
        return source.error(start, "unexpected '}' with no open scope")
    if char == "{" and at_module_level:
        return source.error(start, "unexpected '{' at module level (no function header before it)")
    if _FUNCTION_START.match(text, start) and not at_module_level:
        return source.error(start, "function definitions cannot be nested")
    if at_module_level and _LABEL_START.match(text, start):
        return source.error(start, "expected a directive at module level, not a label")
    if at_module_level and char != ".":
        return source.error(start, "expected a directive at module level")
    if not at_module_level and char != "." and char not in _INSTRUCTION_START:
        return source.error(start, "expected an instruction, label or directive")
    stop = _STATEMENT_PREFIX.match(text, start).end()
    if stop < len(text) and text[stop] == '"':
        return source.error(stop, "unterminated string: expected '\"'")
    if text.startswith("/*", stop):
        return source.error(stop, "unterminated comment: expected '*/'")
    content = text[start:stop].rstrip()
    found = "end of input" if stop == len(text) else repr(text[stop])
    return source.error(start + len(content), f"expected ';' after the statement, found {found}")
