"""Apply a list of edits to a parsed module, and map old line numbers to new ones.

Passes plan edits; this is the one place that changes the tree. `Insert` puts a
statement on its own line next to an anchor statement (optionally preceded by a new
label, as a created loop preheader needs); `Retarget` points a branch at another
label. Every other byte stays as it was. `apply_edits` returns a `LineMap`, so that
diagnostics about the edited text (ptxas's, say) can be reported at the user's
lines, and a diff can be printed without running anything twice.

>>> from ptxkit import parse
>>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k()\\n{\\n\\tbar.sync 0;\\n\\tret;\\n}\\n")
>>> ret = m.functions[0].body.items[1]
>>> lines = apply_edits([Insert(ret, "membar.cta;")])
>>> str(m).splitlines()[5:8], lines.new(7), lines.old(7), lines.old(8)
(['\\tbar.sync 0;', '\\tmembar.cta;', '\\tret;'], 8, None, 7)
"""

from __future__ import annotations

import bisect

from ._records import record
from ._regex import compile as compile_pattern

_LABEL_OPERAND = compile_pattern(r"([A-Za-z_$%][\w$]*)(\s*;)$")


@record
class Insert:
    """Insert `text` (one statement) before `anchor`, or after it when `after` is set.

    `label`: a new label to put right before the inserted statement (a created block);
    `indent`: the indentation to give the statement (default: the anchor's).
    """

    anchor: object
    text: str
    after: bool = False
    label: str | None = None
    indent: str | None = None


@record
class Retarget:
    """Make branch `branch` jump to `label` instead."""

    branch: object
    label: str


class LineMap:
    """Old line -> new line after some inserted lines, and back.

    >>> m = LineMap([(3, 1), (10, 1)])
    >>> [m.new(line) for line in (1, 3, 9, 10)], m.old(3), m.old(4), m.inserted, m.source(3)
    ([1, 4, 10, 12], None, 3, [3, 11], 3)
    """

    def __init__(self, insertions: list[tuple[int, int]]):
        """`insertions`: ``(old line, count)``: `count` new lines come right before
        old line `old line` (several entries for one line add up)."""
        merged: dict[int, int] = {}
        for line, count in insertions:
            if count:
                merged[line] = merged.get(line, 0) + count
        self._lines = sorted(merged)
        self._shift = []
        total = 0
        for line in self._lines:
            total += merged[line]
            self._shift.append(total)
        self._counts = merged

    def new(self, old: int) -> int:
        """Where old line `old` is now."""
        at = bisect.bisect_right(self._lines, old)
        return old + (self._shift[at - 1] if at else 0)

    def old(self, new: int) -> int | None:
        """Which old line new line `new` was (None for an inserted line)."""
        return self._locate(new)[0]

    def source(self, new: int) -> int:
        """The old line new line `new` comes from: itself, or for an inserted line the
        old line it was inserted before (where a diagnostic about it should point)."""
        old, before = self._locate(new)
        return before if old is None else old

    def _locate(self, new: int) -> tuple[int | None, int]:
        """(old line or None, the old line an inserted line stands before)."""
        for index, line in enumerate(self._lines):
            first = line + (self._shift[index - 1] if index else 0)  # the first inserted line here
            if new < first:
                return new - (self._shift[index - 1] if index else 0), line
            if new < first + self._counts[line]:
                return None, line
        old = new - (self._shift[-1] if self._shift else 0)
        return old, old

    @property
    def inserted(self) -> list[int]:
        """The new lines that were inserted."""
        out = []
        for index, line in enumerate(self._lines):
            first = line + (self._shift[index - 1] if index else 0)
            out.extend(range(first, first + self._counts[line]))
        return out


def apply_edits(edits: list) -> LineMap:
    """Apply `Insert` and `Retarget` edits to the tree their nodes belong to.

    Insertions into one scope are applied from the last to the first, with each
    anchor's position looked up once, so thousands of them cost one pass over the
    scope. Returns the `LineMap` of the change.
    """
    inserts = [e for e in edits if isinstance(e, Insert)]
    added: list[tuple[int, int]] = []
    by_scope: dict[int, list[Insert]] = {}
    for edit in inserts:
        by_scope.setdefault(id(edit.anchor.parent), []).append(edit)
    for scope_edits in by_scope.values():
        items = scope_edits[0].anchor.parent.items
        ordered = sorted(scope_edits, key=lambda e: (e.anchor.offset if e.anchor.offset is not None else -1, e.after))
        located = []
        at = 0
        for edit in ordered:  # one pass over the scope, in source order
            at = _index_from(items, edit.anchor, at)
            located.append((at + (0.5 if edit.after else 0), at, edit))
        for _, at, edit in sorted(located, key=lambda item: -item[0]):
            added.append(_insert(edit, at))
    for edit in edits:
        if isinstance(edit, Retarget):
            match = _LABEL_OPERAND.search(edit.branch.text)
            edit.branch.replace(edit.branch.text[: match.start(1)] + edit.label + edit.branch.text[match.end(1):])
    return LineMap(added)


def _index_from(items: list, node, start: int) -> int:
    """The position of `node` in `items`, searching from `start` (then from the top)."""
    for index in range(start, len(items)):
        if items[index] is node:
            return index
    return items.index(node)


def _insert(edit: Insert, at: int) -> tuple[int, int]:
    """Insert one statement; returns ``(old line it goes before, lines added)``."""
    anchor = edit.anchor
    line = anchor.line
    if edit.after:
        node = anchor.insert_after(edit.text, index=at)
        end = line + anchor.text.count("\n") if line is not None else None
        before = end + 1 if end is not None else None
    else:
        had_newline = "\n" in anchor.prefix
        node = anchor.insert_before(edit.text, index=at)
        before = line if had_newline else None
    count = 1 if before is not None else 0
    if edit.label is not None:
        node.insert_before(f"{edit.label}:", index=at)
        count += 1
    if edit.indent is not None:
        newline = node.prefix.rfind("\n")
        if newline >= 0:
            node.prefix = node.prefix[: newline + 1] + edit.indent
    return (before if before is not None else 0), count
