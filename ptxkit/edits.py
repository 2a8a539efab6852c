"""Apply a list of edits to a parsed module, and map old line numbers to new ones.

Passes plan edits; this is the one place that changes the tree. `Insert` puts a
statement on its own line next to an anchor statement (optionally preceded by a new
label, as a created loop preheader needs); `Retarget` points a branch at another
label; `Replace` and `Delete` change or remove a statement; `AddParam` adds a
parameter at the end of a function's parameter list; `Comment` puts a ``//`` line
before a statement. Every other byte stays as it was. `apply_edits` returns a `LineMap`, so that diagnostics about the edited text
(ptxas's, say) can be reported at the user's lines, and a diff can be printed without
running anything twice.

>>> from ptxkit import parse
>>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k()\\n{\\n\\tbar.sync 0;\\n"
...           "\\tret;\\n}\\n")
>>> ret = m.functions[0].body.items[1]
>>> lines = apply_edits([Insert(ret, "membar.cta;")])
>>> str(m).splitlines()[5:8], lines.new(7), lines.old(7), lines.old(8)
(['\\tbar.sync 0;', '\\tmembar.cta;', '\\tret;'], 8, None, 7)
"""

from __future__ import annotations

import bisect

from ._records import Record
from .syntax import _split_last_line
from ._regex import compile as compile_pattern

_LABEL_OPERAND = compile_pattern(r"([A-Za-z_$%][\w$]*)(\s*;)$")


class Insert(Record):
    """Insert `text` (one statement) before `anchor`, or after it when `after` is set.

    `label`: a new label to put right before the inserted statement (a created block);
    `indent`: the indentation to give the statement (default: the anchor's).
    """

    anchor: object
    text: str
    after: bool = False
    label: str | None = None
    indent: str | None = None


class Retarget(Record):
    """Make branch `branch` jump to `label` instead."""

    branch: object
    label: str


class Replace(Record):
    """Replace statement `node` by `text` (one statement), keeping the trivia before it."""

    node: object
    text: str


class Delete(Record):
    """Remove statement `node` (with its line, when it stood alone on it)."""

    node: object


class Comment(Record):
    """A line ``// text`` right before statement `anchor` (which must start a line): what
    a pass tells tools that read its output later, such as an instrumentation pass's
    buffer layout. Comments go after the statements inserted before the same anchor."""

    anchor: object
    text: str


class AddParam(Record):
    """Add `text` (``.param .u64 name``) as the last parameter of `function`: on a line
    of its own when the parameters stand one per line, else after a comma."""

    function: object
    text: str


class LineMap:
    """Old line -> new line after some inserted and deleted lines, and back.

    >>> m = LineMap([(3, 1), (10, 1)], deleted=[5])
    >>> [m.new(line) for line in (1, 3, 5, 6, 9, 10)], m.old(3), m.old(4), m.inserted, m.source(3)
    ([1, 4, None, 6, 9, 11], None, 3, [3, 10], 3)
    """

    def __init__(self, insertions: list[tuple[int, int]], deleted=()):
        """`insertions`: ``(old line, count)``: `count` new lines come right before
        old line `old line` (several entries for one line add up); `deleted`: old
        lines that are gone."""
        inserted: dict[int, int] = {}
        for line, count in insertions:
            if count:
                inserted[line] = inserted.get(line, 0) + count
        gone = set(deleted)
        # runs of the new text, in order: (new start, old start or None, length, old line after)
        self._runs: list[tuple[int, int | None, int, int]] = []
        old = new = 1
        for line in sorted(set(inserted) | gone):
            if line > old:
                self._runs.append((new, old, line - old, line))
                new += line - old
            count = inserted.get(line, 0)
            if count:
                self._runs.append((new, None, count, line))
                new += count
            old = line
            if line in gone:
                old = line + 1
        self._runs.append((new, old, 1 << 62, old))
        self._starts = [run[0] for run in self._runs]
        self._old_starts = [(run[1], index) for index, run in enumerate(self._runs) if run[1] is not None]
        self._gone = gone

    def new(self, old: int) -> int | None:
        """Where old line `old` is now (None for a deleted line)."""
        if old in self._gone:
            return None
        at = bisect.bisect_right(self._old_starts, (old, len(self._runs))) - 1
        if at < 0:
            return old
        start, index = self._old_starts[at]
        return self._runs[index][0] + old - start

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
        at = bisect.bisect_right(self._starts, new) - 1
        if at < 0:
            return new, new
        start, old, _, before = self._runs[at]
        if old is None:
            return None, before
        return old + new - start, old + new - start

    @property
    def inserted(self) -> list[int]:
        """The new lines that were inserted."""
        return [line for start, old, length, _ in self._runs if old is None for line in range(start, start + length)]

    def then(self, later: "LineMap") -> "LineMap":
        """This map followed by `later` (the map of an edit of the edited text).

        >>> first, second = LineMap([(3, 1)]), LineMap([(1, 2)], deleted=[5])
        >>> both = first.then(second)
        >>> [both.new(line) for line in (1, 3, 4)], both.old(5), both.inserted, both.source(1)
        ([3, 6, None], None, [1, 2, 5], 1)
        """
        return ComposedLineMap(self, later)


class ComposedLineMap(LineMap):
    """Two line maps, one after the other (see `LineMap.then`)."""

    def __init__(self, first: LineMap, later: LineMap):
        self.first, self.later = first, later

    def new(self, old: int) -> int | None:
        middle = self.first.new(old)
        return None if middle is None else self.later.new(middle)

    def old(self, new: int) -> int | None:
        middle = self.later.old(new)
        return None if middle is None else self.first.old(middle)

    def source(self, new: int) -> int:
        return self.first.source(self.later.source(new))

    @property
    def inserted(self) -> list[int]:
        moved = (self.later.new(line) for line in self.first.inserted)
        return sorted(set(self.later.inserted) | {line for line in moved if line is not None})


def apply_edits(edits: list) -> LineMap:
    """Apply `Insert`, `Comment`, `Retarget`, `Replace`, `Delete` and `AddParam` edits to
    the tree their nodes belong to, in that order (so an anchor may also be replaced or
    deleted).

    Insertions into one scope are applied from the last to the first, with each
    anchor's position looked up once, so thousands of them cost one pass over the
    scope. Several statements inserted at one place keep the order of `edits`.
    Returns the `LineMap` of the change.

    >>> from ptxkit import parse
    >>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k()\\n{\\n\\tbar.sync 0;\\n"
    ...           "\\tret;\\n}\\n")
    >>> bar, ret = m.functions[0].body.items
    >>> lines = apply_edits([Insert(bar, "membar.cta;", after=True), Insert(bar, "membar.gl;", after=True),
    ...                      Delete(bar), AddParam(m.functions[0], ".param .u64 buf")])
    >>> str(m).splitlines()[3:8], lines.new(6), lines.new(7)
    (['.visible .entry k(.param .u64 buf)', '{', '\\tmembar.cta;', '\\tmembar.gl;', '\\tret;'], None, 8)
    """
    added: list[tuple[int, int]] = []
    deleted: list[int] = []
    by_scope: dict[int, list[tuple[int, Insert]]] = {}
    for order, edit in enumerate(edits):
        if isinstance(edit, Insert):
            by_scope.setdefault(id(edit.anchor.parent), []).append((order, edit))
    for scope_edits in by_scope.values():
        items = scope_edits[0][1].anchor.parent.items
        ordered = sorted(scope_edits, key=lambda e: (e[1].anchor.offset if e[1].anchor.offset is not None else -1,
                                                     e[1].after))
        located = []
        at = 0
        for order, edit in ordered:  # one pass over the scope, in source order
            at = _index_from(items, edit.anchor, at)
            # last place first; at one place, statements before an anchor in the order given and
            # statements after it in reverse (each goes right next to the anchor)
            located.append(((-at, -edit.after, -order if edit.after else order), at, edit))
        for _, at, edit in sorted(located, key=lambda item: item[0]):
            added.append(_insert(edit, at))
    for edit in edits:
        if isinstance(edit, Comment):
            added.append(_comment(edit))
    params: dict[int, tuple[object, list[str]]] = {}
    for edit in edits:
        if isinstance(edit, AddParam):
            params.setdefault(id(edit.function), (edit.function, []))[1].append(edit.text)
    for function, texts in params.values():
        added.extend(_add_params(function, texts))
    for edit in edits:
        if isinstance(edit, Retarget):
            match = _LABEL_OPERAND.search(edit.branch.text)
            edit.branch.replace(edit.branch.text[: match.start(1)] + edit.label + edit.branch.text[match.end(1):])
    for edit in edits:
        if isinstance(edit, Replace) and edit.node.parent is not None:
            line = edit.node.line
            extra = edit.text.count("\n") - edit.node.text.count("\n")
            edit.node.replace(edit.text)
            if line is not None and extra > 0:
                added.append((line + edit.node.text.count("\n") + 1, extra))
            elif line is not None and extra < 0:
                deleted.extend(range(line + edit.text.count("\n") + 1, line + edit.text.count("\n") + 1 - extra))
    for edit in edits:
        if isinstance(edit, Delete) and edit.node.parent is not None:
            deleted.extend(_delete(edit.node))
    return LineMap(added, deleted)


def _comment(edit: Comment) -> tuple[int, int]:
    """Put ``// text`` on a line of its own before the anchor, indented like it.

    >>> from ptxkit import parse
    >>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k()\\n{\\n\\tret;\\n}\\n")
    >>> lines = apply_edits([Comment(m.functions[0], "layout: {}")])
    >>> str(m).splitlines()[3:5], lines.new(4), lines.old(4)
    (['// layout: {}', '.visible .entry k()'], 5, None)
    """
    anchor = edit.anchor
    if "\n" in edit.text:
        raise ValueError("a comment is one line")
    head, newline, indent = _split_last_line(anchor.prefix)
    if not newline and anchor.offset not in (0, None):
        raise ValueError(f"a comment goes before a statement that starts a line, not {anchor.code()[:40]!r}")
    anchor.prefix = f"{head}{newline}{indent}// {edit.text}\n{indent}"
    line = anchor.line
    return (line, 1) if line is not None else (0, 0)


def _index_from(items: list, node, start: int) -> int:
    """The position of `node` in `items`, searching from `start` (then from the top)."""
    for index in range(start, len(items)):
        if items[index] is node:
            return index
    return items.index(node)


def _delete(node) -> list[int]:
    """Remove one statement; returns the old lines that went with it."""
    line = node.line
    alone = "\n" in node.prefix
    node.delete()
    if line is None or not alone:
        return []
    return list(range(line, line + node.text.count("\n") + 1))


def _add_params(function, texts: list[str]) -> list[tuple[int, int]]:
    """Append parameters to a function header; returns the line insertions made."""
    from ptxkit.declarations import parameter_span

    header = function.text
    span = parameter_span(function)
    if span is None:
        raise ValueError(f"{function.name} has no parameter list to add {texts[0]!r} to")
    start, end = span
    inside = header[start:end]
    last = len(inside.rstrip())
    if "\n" in inside[:last]:  # one parameter a line: lines of their own, indented as the last one
        line_start = inside.rfind("\n", 0, last) + 1
        indent = inside[line_start:len(inside) - len(inside[line_start:].lstrip())]
        addition, lines = "".join(f",\n{indent}{text}" for text in texts), len(texts)
    else:
        addition, lines = ", ".join(texts), 0
        if inside.strip():
            addition = ", " + addition
    at = start + last
    function.text = header[:at] + addition + header[at:]
    function.__dict__.pop("signature", None)  # parsed again on next use
    if not lines or function.offset is None or function.module is None:
        return []
    line = function.module.source.position(function.offset + at)[0]
    return [(line + 1, lines)]


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
