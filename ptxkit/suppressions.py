"""Inline suppressions: ``// ptxkit: ignore[war]`` silences a report of the fence check.

A comment on an async operation's line, or alone on the line before it, names the
hazard classes it silences, with an optional reason after ``--``::

    // ptxkit: ignore[war] -- the consumers' reads are done before the arrive (reviewed)
    @%p1 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], ...

The classes are the rules' last names (`CLASSES`): ``raw``, ``war`` and
``mbarrier-init-cluster`` for a missing fence, ``in-flight`` and ``unknown-opcode``
for the pass's warnings; the full rule id (``ptxkit.fence.war``) works too. A ``/* … */``
comment works as ``//`` does. docs/report-format.md says how reports carry them.

>>> text = "\\t// ptxkit: ignore[war, raw] -- reviewed\\n\\tcp.async.bulk.tensor.1d ...;\\n"
>>> (found,) = find_suppressions(text)
>>> found.line, found.classes, found.reason, found.covers(2, "war"), found.covers(3, "war")
(1, ('war', 'raw'), 'reviewed', True, False)
"""

from __future__ import annotations

from ptxkit._records import Record
from ptxkit._regex import compile as compile_pattern

#: Hazard classes, as the rule ids end (``ptxkit.fence.<class>``).
CLASSES = ("raw", "war", "mbarrier-init-cluster", "in-flight", "unknown-opcode")

_RULE_PREFIX = "ptxkit.fence."
_SUPPRESSION = compile_pattern(r"(?://|/\*)[ \t]*ptxkit:[ \t]*ignore[ \t]*\[([^\]\n]*)\]"
                               r"(?:[ \t]*--[ \t]*((?:(?!\*/)[^\n])*))?")


class Suppression(Record):
    """One ``ptxkit: ignore[...]`` comment at `line`:`column` (1-based): the known
    hazard `classes` it silences, the `unknown` names it gives, and its `reason`."""

    line: int
    column: int
    classes: tuple[str, ...]
    unknown: tuple[str, ...] = ()
    reason: str | None = None

    def covers(self, line: int | None, hazard: str) -> bool:
        """True when it silences a `hazard` report of the operation at `line`: its own
        line or the next.

        >>> Suppression(4, 2, ("war",)).covers(5, "war"), Suppression(4, 2, ("war",)).covers(5, "raw")
        (True, False)
        """
        return line is not None and self.line <= line <= self.line + 1 and hazard in self.classes


def find_suppressions(text: str) -> list[Suppression]:
    """Every suppression comment of a PTX text, in order.

    >>> [(s.classes, s.unknown) for s in find_suppressions("ret; /* ptxkit: ignore[ptxkit.fence.raw, wat] */")]
    [(('raw',), ('wat',))]
    >>> find_suppressions("ret; // no comment of ours")
    []
    """
    if "ptxkit:" not in text:  # the common case: one substring search
        return []
    found = []
    for match in _SUPPRESSION.finditer(text):
        names = [name.strip() for name in match.group(1).split(",") if name.strip()]
        names = [name[len(_RULE_PREFIX):] if name.startswith(_RULE_PREFIX) else name for name in names]
        line_start = text.rfind("\n", 0, match.start()) + 1
        reason = (match.group(2) or "").strip() or None
        found.append(Suppression(
            line=text.count("\n", 0, match.start()) + 1,
            column=match.start() - line_start + 1,
            classes=tuple(name for name in names if name in CLASSES),
            unknown=tuple(name for name in names if name not in CLASSES),
            reason=reason,
        ))
    return found
