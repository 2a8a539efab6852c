"""The regular expressions that cut PTX text into pieces, shared by the parser (which
scans a whole module) and the syntax tree (which scans statement runs on first use and
statements given for insertion).

Every repetition is possessive, so no input makes a pattern backtrack. The patterns are
compiled through `ptxkit._regex`, which keeps their compiled form between processes.

>>> PIECE.fullmatch("  @%p1 bra $L__BB0_2;").group(1, STATEMENT)
('  ', '@%p1 bra $L__BB0_2;')
"""

from __future__ import annotations

from ._regex import compile

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
MODULE_STEP = compile(rf"({_TRIVIA})(?:({_FUNCTION})|(?:{_MODULE_PIECE})++)")  # groups 1-3
BODY_STEP = compile(rf"({_TRIVIA})(?:(\{{)|(\}})|(?:{_BODY_PIECE})++)")
BODY_OPEN = compile(rf"({_TRIVIA})\{{")
#: One piece of a run (or a statement given for insertion), with the trivia before it.
PIECE = compile(rf"({_TRIVIA})(?:({_LINE_DIRECTIVE})|({_SECTION})|({_LABEL})|({_STATEMENT_BODY};))")
#: group numbers of `PIECE`: a line directive, a .section block, a label, a statement
LINE, SECTION, LABEL, STATEMENT = 2, 3, 4, 5
TRIVIA = compile(_TRIVIA)
STATEMENT_PREFIX = compile(_STATEMENT_BODY)
FUNCTION_START = compile(rf"(?:\.(?:visible|extern|weak|common){_WS}++)*+\.(?:entry|func)(?![\w$])")
LABEL_START = compile(_LABEL)
BAD_CHARACTER = compile(r"[\x00-\x08\x0e-\x1f\x7f]")
INSTRUCTION_START = frozenset("@_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
