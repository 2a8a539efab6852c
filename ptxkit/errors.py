"""Errors raised for bad PTX input, and the source positions they point at."""

from __future__ import annotations

import bisect
import itertools
import operator


class Source:
    """The text of one input, with lazy offset → (line, column) mapping.

    >>> src = Source("a\\nbc", "k.ptx")
    >>> src.position(3)
    (2, 2)
    """

    __slots__ = ("text", "filename", "_line_starts")

    def __init__(self, text: str, filename: str = "<input>"):
        self.text = text
        self.filename = filename
        self._line_starts: list[int] | None = None

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        starts = self._line_starts
        if starts is None:  # where each line starts: running sums of the lines' lengths
            lengths = map(operator.add, map(len, self.text.split("\n")), itertools.repeat(1))
            starts = self._line_starts = [0, *itertools.accumulate(lengths)]
            starts.pop()
        line = bisect.bisect_right(starts, offset)
        return line, offset - starts[line - 1] + 1

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its newline."""
        self.position(0)
        starts = self._line_starts
        if not 1 <= line <= len(starts):
            return ""
        end = self.text.find("\n", starts[line - 1])
        return self.text[starts[line - 1] : end if end >= 0 else len(self.text)]

    def error(self, offset: int, message: str) -> "PtxSyntaxError":
        """A `PtxSyntaxError` at `offset` of this source."""
        offset = max(0, min(offset, len(self.text)))
        line, column = self.position(offset)
        return PtxSyntaxError(message, self.filename, line, column, self.line_text(line))


class PtxSyntaxError(ValueError):
    """Malformed PTX: where (file, 1-based line and column) and what was expected.

    ``str(err)`` is the compiler-style diagnostic with the source line and a caret:

    >>> print(PtxSyntaxError("expected ';'", "k.ptx", 3, 6, "  ret }"))
    k.ptx:3:6: error: expected ';'
      ret }
         ^
    """

    def __init__(self, message: str, filename: str, line: int, column: int, source_line: str = ""):
        self.message = message
        self.filename = filename
        self.line = line
        self.column = column
        self.source_line = source_line
        super().__init__(self.format())

    @property
    def location(self) -> str:
        """``file:line:col``."""
        return f"{self.filename}:{self.line}:{self.column}"

    def format(self) -> str:
        """The diagnostic: ``file:line:col: error: message``, source line, caret."""
        head = f"{self.location}: error: {self.message}"
        if not self.source_line:
            return head
        shown = self.source_line.replace("\0", "\u2400")  # keep the caret aligned
        pad = "".join("\t" if c == "\t" else " " for c in shown[: self.column - 1])
        return f"{head}\n{shown}\n{pad}^"
