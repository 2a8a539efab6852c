"""A unified diff of an edit, read from the edit's own line map.

The edit step (`ptxkit.edits.apply_edits`) knows which old line each new line is, so
the diff needs no search for the longest common subsequence, the part of a general diff
tool that grows with the square of a long run of look-alike lines (a ``-G`` build's
``.loc`` and ``.b8`` lines): one pass pairs the lines, and only the changed places and
their context are written.

>>> from ptxkit import parse
>>> from ptxkit.edits import Insert, apply_edits
>>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n.visible .entry k()\\n{\\n  ret;\\n}\\n")
>>> old = str(m)
>>> lines = apply_edits([Insert(m.functions[0].body.items[0], "membar.cta;")])
>>> print("".join(unified_diff(old, str(m), lines, "k.ptx", "k.ptx (fenced)", context=1)), end="")
--- k.ptx
+++ k.ptx (fenced)
@@ -5,2 +5,3 @@
 {
+  membar.cta;
   ret;
"""

from __future__ import annotations

_NO_NEWLINE = "\\ No newline at end of file\n"


def unified_diff(old: str, new: str, lines, fromfile: str, tofile: str, context: int = 3) -> list[str]:
    """The lines of a unified diff (as ``diff -u`` writes it) from `old` to `new`, the text
    that an edit with the `LineMap` `lines` made of it; empty when nothing changed.

    Every old line is one new line (`lines.new`), the same or rewritten in place (a
    retargeted branch); the new lines no old line maps to (`lines.inserted`) were added.

    >>> from ptxkit.edits import LineMap
    >>> "".join(unified_diff("a\\nb\\n", "a\\nx\\nb\\n", LineMap([(2, 1)]), "old", "new"))
    '--- old\\n+++ new\\n@@ -1,2 +1,3 @@\\n a\\n+x\\n b\\n'
    """
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    changes = _changes(old_lines, new_lines, set(lines.inserted))
    if not changes:
        return []
    out = [f"--- {fromfile}\n", f"+++ {tofile}\n"]
    for hunk in _hunks(changes, len(old_lines), len(new_lines), context):
        out.extend(_hunk_lines(hunk, old_lines, new_lines))
    return out


def _changes(old_lines: list[str], new_lines: list[str], inserted: set[int]) -> list[list[int]]:
    """The changed places as ``[old start, old stop, new start, new stop]`` (0-based, stops
    excluded): lines rewritten in place and lines inserted, runs of them merged."""
    changes: list[list[int]] = []
    old_index = 0  # the old line the next new line that is not inserted stands for
    for new_index, line in enumerate(new_lines):
        if new_index + 1 in inserted:  # LineMap counts lines from 1
            old_from = old_to = old_index
        elif old_lines[old_index] == line:
            old_index += 1
            continue
        else:
            old_from, old_to = old_index, old_index + 1
            old_index += 1
        if changes and changes[-1][3] == new_index:  # right after the previous change
            changes[-1][1], changes[-1][3] = old_to, new_index + 1
        else:
            changes.append([old_from, old_to, new_index, new_index + 1])
    return changes


def _hunks(changes, old_count: int, new_count: int, context: int) -> list[tuple[int, int, int, int, list]]:
    """Changes grouped into hunks: two go together when at most ``2 * context`` unchanged
    lines lie between them. Each hunk: its old and new ranges with context, its changes."""
    hunks: list = []
    for change in changes:
        if hunks and change[0] - hunks[-1][4][-1][1] <= 2 * context:
            hunks[-1][4].append(change)
        else:
            hunks.append([0, 0, 0, 0, [change]])
    for hunk in hunks:
        first, last = hunk[4][0], hunk[4][-1]
        before = min(context, first[0], first[2])
        after = min(context, old_count - last[1], new_count - last[3])
        hunk[:4] = first[0] - before, last[1] + after, first[2] - before, last[3] + after
    return hunks


def _hunk_lines(hunk, old_lines: list[str], new_lines: list[str]) -> list[str]:
    old_start, old_stop, new_start, new_stop, changes = hunk
    out = [f"@@ -{_range(old_start, old_stop)} +{_range(new_start, new_stop)} @@\n"]
    at = old_start
    for old_from, old_to, new_from, new_to in changes:
        out.extend(_marked(" ", old_lines, at, old_from))
        out.extend(_marked("-", old_lines, old_from, old_to))
        out.extend(_marked("+", new_lines, new_from, new_to))
        at = old_to
    out.extend(_marked(" ", old_lines, at, old_stop))
    return out


def _marked(mark: str, lines: list[str], start: int, stop: int) -> list[str]:
    """Lines ``start:stop`` with their mark; a last line without a newline gets GNU diff's note."""
    out = [mark + line for line in lines[start:stop]]
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n" + _NO_NEWLINE
    return out


def _range(start: int, stop: int) -> str:
    """A hunk's range: the first line (1-based) and the count, the count left out when it
    is 1; an empty range names the line before it."""
    count = stop - start
    if count == 1:
        return str(start + 1)
    return f"{start + (count > 0)},{count}"
