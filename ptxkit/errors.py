"""Errors raised for bad PTX input, and the source positions they point at."""

from __future__ import annotations

import bisect
import itertools
import re
from array import array

#: How many characters `Source` counts the newlines of together (a power of two).
_BLOCK_BITS = 16
_NEWLINE = re.compile("\n")


class Source:
    """The text of one input, with lazy offset → (line, column) mapping.

    The mapping costs little memory on inputs of hundreds of thousands of lines (debug
    and ``-lineinfo`` builds): the newlines are counted per block of 64 Ki characters,
    and a block's line starts are listed, 8 bytes each, only when a position in it is
    asked for.

    >>> src = Source("a\\nbc", "k.ptx")
    >>> src.position(3), src.line_text(2)
    ((2, 2), 'bc')
    """

    __slots__ = ("text", "filename", "_lines_before", "_starts")

    def __init__(self, text: str, filename: str = "<input>"):
        self.text = text
        self.filename = filename
        self._lines_before: list[int] | None = None  # newlines before each block's start, and in all
        self._starts: dict[int, array[int]] = {}  # block -> the offsets just past its newlines

    def _blocks(self) -> list[int]:
        lines_before = self._lines_before
        if lines_before is None:
            text, size = self.text, 1 << _BLOCK_BITS
            counts = (text.count("\n", start, start + size) for start in range(0, len(text), size))
            lines_before = self._lines_before = [0, *itertools.accumulate(counts)]
        return lines_before

    def _starts_in(self, block: int) -> array[int]:
        starts = self._starts.get(block)
        if starts is None:
            start = block << _BLOCK_BITS
            found = _NEWLINE.finditer(self.text, start, start + (1 << _BLOCK_BITS))
            starts = self._starts[block] = array("q", [match.end() for match in found])
        return starts

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of a character offset."""
        lines_before = self._blocks()
        block = min(offset >> _BLOCK_BITS, len(lines_before) - 1)
        starts = self._starts_in(block)
        before = bisect.bisect_right(starts, offset)  # the block's newlines before `offset`
        line_start = starts[before - 1] if before else self.text.rfind("\n", 0, block << _BLOCK_BITS) + 1
        return lines_before[block] + before + 1, offset - line_start + 1

    def line_text(self, line: int) -> str:
        """The text of a 1-based line, without its newline."""
        lines_before = self._blocks()
        if not 1 <= line <= lines_before[-1] + 1:
            return ""
        if line == 1:
            start = 0
        else:  # just past the (line - 1)th newline, in the first block that has counted it
            block = bisect.bisect_left(lines_before, line - 1) - 1
            start = self._starts_in(block)[line - 2 - lines_before[block]]
        end = self.text.find("\n", start)
        return self.text[start : end if end >= 0 else len(self.text)]

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
