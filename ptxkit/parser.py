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

from ._records import TYPE_CHECKING
from .errors import PtxSyntaxError, Source
from .lexer import (BAD_CHARACTER, BODY_OPEN, BODY_STEP, FUNCTION_START, INSTRUCTION_START, LABEL_START,
                    MODULE_STEP, STATEMENT_PREFIX, TRIVIA)
from .syntax import Block, Function, Module, parse_statement  # noqa: F401  (parse_statement: API)

if TYPE_CHECKING:
    import os
    import re

    from .syntax import Segment


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
    bad = BAD_CHARACTER.search(text)
    if bad:
        char = bad.group()
        what = "NUL byte" if char == "\0" else f"control character {char!r}"
        raise source.error(bad.start(), f"unexpected {what}")
    module = Module(source)
    _build(module, source)
    return module


def check_module_start(text: str, filename: str = "<input>") -> None:
    """Raise `PtxSyntaxError` unless `text` starts, after comments and blanks, with a
    ``.version`` directive, as ptxas requires of a module ("Missing .version directive at
    start of file"): an empty or comment-only file is no PTX module. `parse` itself takes
    such text (a fragment round-trips); the commands that read a file check it.

    >>> try:
    ...     check_module_start("// .version 8.0\\n", "k.ptx")
    ... except PtxSyntaxError as err:
    ...     print(err.location, err.message)
    k.ptx:1:1 no .version directive: not a PTX module
    >>> check_module_start("\\n.version 8.0\\n")
    """
    start = _end_of(TRIVIA, text, 0)
    if text.startswith(".version", start) and not text[start + 8 : start + 9].isidentifier():
        return
    source = Source(text, filename)
    if start == len(text):
        raise source.error(0, "no .version directive: not a PTX module")
    raise source.error(start, "expected a .version directive first: a PTX module starts with one")


def parse_file(path: str | os.PathLike[str], filename: str | None = None) -> Module:
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
    them is kept as an ``(offset, text)`` segment and scanned into nodes on first use (`ptxkit.syntax`).
    """
    text = source.text
    pos = 0
    container: Block | Module = module
    segments: list[Segment] = []
    stack: list[tuple[Block | Module, list[Segment]]] = []  # (container, segments) of the enclosing containers
    while True:
        if container is module:
            m = MODULE_STEP.match(text, pos)
            if m is None:
                break
            if m.lastindex == 2:
                prefix = m.group(1)
                function = Function(prefix, m.group(2), pos + len(prefix), module)
                segments.append(function)
                pos = m.end()
                if m.group(3):  # a declaration: no body follows
                    continue
                opening = BODY_OPEN.match(text, pos)
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
            m = BODY_STEP.match(text, pos)
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
    end = _end_of(TRIVIA, text, pos)
    if end < len(text):
        raise _diagnose(source, end, at_module_level=container is module)
    if container is not module:
        assert container.offset is not None  # a scope opened in the text
        line, _ = source.position(container.offset)
        raise source.error(end, f"expected '}}' to close the scope opened at line {line}, found end of input")
    module.tail = text[pos:]
    module._items, module._lazy = None, segments


def _diagnose_header(source: Source, pos: int) -> PtxSyntaxError:
    end = _end_of(TRIVIA, source.text, pos)
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
    if FUNCTION_START.match(text, start) and not at_module_level:
        return source.error(start, "function definitions cannot be nested")
    if at_module_level and LABEL_START.match(text, start):
        return source.error(start, "expected a directive at module level, not a label")
    if at_module_level and char != ".":
        return source.error(start, "expected a directive at module level")
    if not at_module_level and char != "." and char not in INSTRUCTION_START:
        return source.error(start, "expected an instruction, label or directive")
    stop = _end_of(STATEMENT_PREFIX, text, start)
    if stop < len(text) and text[stop] == '"':
        return source.error(stop, "unterminated string: expected '\"'")
    if text.startswith("/*", stop):
        return source.error(stop, "unterminated comment: expected '*/'")
    content = text[start:stop].rstrip()
    found = "end of input" if stop == len(text) else repr(text[stop])
    return source.error(start + len(content), f"expected ';' after the statement, found {found}")


def _end_of(pattern: re.Pattern[str], text: str, pos: int) -> int:
    """Where `pattern`, one that matches the empty string too (`TRIVIA`, `STATEMENT_PREFIX`),
    stops matching `text` at `pos`."""
    match = pattern.match(text, pos)
    assert match is not None  # it matches, if only nothing
    return match.end()
