"""The report side of ``ptxkit fence``: a file's `FenceReport` judged against its inline
suppressions (`ptxkit.suppressions`) and the baseline (`ptxkit.baseline`), then shown as
text, GitHub workflow annotations or JSON (SARIF: `ptxkit.cli.sarif`).

Each (access, async op) pair of a fence is *reported*, *suppressed* (a ``ptxkit:
ignore[...]`` comment on its async op's line or the line before names its hazard) or
*baselined* (the baseline holds its key). A fence is reported when one of its pairs is;
``--check`` fails on reported fences only, and with ``--strict`` also on suppressions
that silenced nothing.

>>> from ptxkit.cfg.fence.fence import fence_text
>>> text = open("samples/fence/13_hoist_out_of_if.ptx").read()
>>> quiet = text.replace("\\nE:\\n", "\\nE: // ptxkit: ignore[raw] -- reviewed\\n")  # the wgmma after E
>>> judged = judge(fence_text(quiet, rewrite=False)[1], quiet, "k.ptx")
>>> [[verdict.status for verdict in pairs] for pairs in judged.verdicts], judged.fence_status(0)
([['reported', 'suppressed']], 'reported')
"""

from __future__ import annotations

from ptxkit._records import Record

from .colour import diagnostic

#: The rule of a suppression that silenced nothing (``--strict``) and of a hazard class
#: a suppression names that does not exist.
UNUSED_RULE = "ptxkit.suppression.unused"
UNKNOWN_RULE = "ptxkit.suppression.unknown-class"

#: The order in which a fence that no pair reports takes a status from its pairs.
_SILENCED = ("baselined", "suppressed")


def rule_id(hazard: str) -> str:
    """``ptxkit.fence.<hazard>``: the rule of a hazard class or warning kind.

    >>> rule_id("mbarrier-init-cluster"), rule_id("in-flight")
    ('ptxkit.fence.mbarrier-init-cluster', 'ptxkit.fence.in-flight')
    """
    return f"ptxkit.fence.{hazard}"


class Verdict(Record):
    """What became of one pair or warning: its `status` (``reported``, ``suppressed``,
    ``baselined``) and the `Suppression` that silenced it."""

    status: str
    suppression: object = None


class Judgement:
    """A file's report with a `Verdict` for each pair of each fence (`verdicts`, in the
    report's order) and each warning; the suppressions of the file, and of them the
    classes that silenced nothing (`unused`: ``(suppression, classes)``); the baseline
    `keys` of the pairs not suppressed."""

    __slots__ = ("report", "name", "verdicts", "warning_verdicts", "suppressions", "unused", "keys")

    def __init__(self, report, name: str):
        self.report, self.name = report, name
        self.verdicts: list[list[Verdict]] = []
        self.warning_verdicts: list[Verdict] = []
        self.suppressions: list = []
        self.unused: list[tuple] = []
        self.keys: list = []

    def fence_status(self, index: int) -> str:
        """``reported`` when a pair of fence `index` is, else ``baselined`` when one is
        in the baseline, else ``suppressed``."""
        statuses = {verdict.status for verdict in self.verdicts[index]}
        return next((status for status in ("reported", *_SILENCED) if status in statuses), "reported")

    def reported(self) -> list:
        """The reported fences, each with its reported pairs: ``[(fence, pairs)]``."""
        out = []
        for fence, verdicts in zip(self.report.fences, self.verdicts):
            pairs = [pair for pair, verdict in zip(fence.pairs, verdicts) if verdict.status == "reported"]
            if pairs:
                out.append((fence, pairs))
        return out

    def count(self, status: str) -> int:
        """How many fences have `status`."""
        return sum(self.fence_status(index) == status for index in range(len(self.verdicts)))

    def warnings(self) -> list:
        """The warnings no suppression silenced."""
        return [w for w, verdict in zip(self.report.warnings, self.warning_verdicts) if verdict.status == "reported"]


def judge(report, text: str, name: str, baseline=None, file_key: str | None = None) -> Judgement:
    """Give every pair and warning of `report` (of the PTX `text`, named `name`) its
    `Verdict`: suppressed by a comment, else baselined when `baseline` holds its key (the
    file named `file_key` there, default `name`), else reported.

    >>> from ptxkit.baseline import Baseline
    >>> from ptxkit.cfg.fence.fence import fence_text
    >>> text = open("samples/fence/13_hoist_out_of_if.ptx").read()
    >>> report = fence_text(text, rewrite=False)[1]
    >>> keys = judge(report, text, "k.ptx").keys
    >>> [(key.function, key.hazard, key.instruction[:15]) for key in keys]
    [('k', 'raw', 'wgmma.mma_async'), ('k', 'raw', 'wgmma.mma_async')]
    >>> judge(report, text, "k.ptx", Baseline.of(keys[:1])).fence_status(0)
    'reported'
    >>> judge(report, text, "k.ptx", Baseline.of(keys)).fence_status(0)
    'baselined'
    """
    from ptxkit.suppressions import find_suppressions

    judged = Judgement(report, name)
    suppressions = judged.suppressions = find_suppressions(text)
    used: set = set()

    def suppressing(line, hazard):
        for index, suppression in enumerate(suppressions):
            if suppression.covers(line, hazard):
                used.add((index, hazard))
                return suppression
        return None

    lines = None
    for fence in report.fences:
        verdicts = []
        for pair in fence.pairs:
            suppression = suppressing(pair.op.line, pair.hazard)
            if suppression is not None:
                verdicts.append(Verdict("suppressed", suppression))
                continue
            if lines is None:
                lines = text.splitlines()
            key = _key(lines, file_key or name, fence.function, pair)
            judged.keys.append(key)
            verdicts.append(Verdict("baselined" if baseline is not None and baseline.take(key) else "reported"))
        judged.verdicts.append(verdicts)
    for warning in report.warnings:
        suppression = suppressing(warning.line, warning.kind)
        judged.warning_verdicts.append(Verdict("suppressed" if suppression else "reported", suppression))
    if not report.skipped:  # nothing was checked in a module left alone: nothing to call unused
        for index, suppression in enumerate(suppressions):
            idle = tuple(c for c in suppression.classes if (index, c) not in used)
            if idle:
                judged.unused.append((suppression, idle))
    return judged


def _key(lines: list[str], file: str, function: str, pair):
    from ptxkit.baseline import Key, statement_at

    instruction = statement_at(lines, pair.op.line, pair.op.column) if pair.op.line else pair.op.text
    return Key(file, function, pair.hazard, instruction)


# -- text -------------------------------------------------------------------------------------


def text_report(judged: Judgement, fences: bool, strict: bool, quiet: bool, colour: bool) -> str:
    """The diagnostics of one file for standard error: each reported fence (when
    `fences`: ``--check``), warnings and notes (unless `quiet`), unused suppressions
    (when `strict`); every line with its rule id.

    >>> from ptxkit.cfg.fence.fence import fence_text
    >>> text = open("samples/fence/02b_cp_async_without_wait.ptx").read()
    >>> judged = judge(fence_text(text, rewrite=False)[1], text, "k.ptx")
    >>> [line.split(": ")[1] + " " + line.split()[-1] for line in text_report(judged, True, False, False, False)
    ...  .splitlines() if not line.startswith(" ")]
    ['error [ptxkit.fence.raw]', 'warning [ptxkit.fence.in-flight]']
    """
    name, report = judged.name, judged.report
    out = []
    if fences:
        verb = "inserted" if report.rewritten else "missing"
        for fence, pairs in judged.reported():
            first, *others = pairs
            message = f"{verb} {fence.variant} {fence.where} this statement: {first.reason()}{fence.scope_note()}"
            out.append(diagnostic(f"{name}:{fence.line}:{fence.column}", "error", message, rule_id(first.hazard),
                                  colour))
            out.append(f"    path: {first.path_text()}")
            for pair in others:
                out.append(diagnostic(f"{name}:{pair.op.line}:{pair.op.column}", "note",
                                      f"the same fence also orders: {pair.reason()}", rule_id(pair.hazard), colour))
                out.append(f"    path: {pair.path_text()}")
            silenced = len(fence.pairs) - len(pairs)
            if silenced:
                out.append(f"    (it also orders {silenced} pair{'s' * (silenced != 1)} suppressed or in the baseline)")
    if not quiet:
        for warning in judged.warnings():
            out.append(diagnostic(f"{name}:{warning.line}:{warning.column}", "warning", warning.text,
                                  rule_id(warning.kind), colour))
        for suppression in judged.suppressions:
            if suppression.unknown:
                out.append(diagnostic(f"{name}:{suppression.line}:{suppression.column}", "warning",
                                      unknown_text(suppression), UNKNOWN_RULE, colour))
        if report.skipped:
            out.append(f"{name}: note: left unchanged: {report.skipped}")
    if strict:
        for suppression, idle in judged.unused:
            out.append(diagnostic(f"{name}:{suppression.line}:{suppression.column}", "error", unused_text(idle),
                                  UNUSED_RULE, colour))
    return "".join(line + "\n" for line in out)


def unused_text(classes: tuple) -> str:
    """The message of a suppression that silenced nothing of `classes`.

    >>> unused_text(("war", "raw"))[:48]
    'unused suppression: no war/raw report of an asyn'
    """
    return (f"unused suppression: no {'/'.join(classes)} report of an async operation on this line or the next "
            "(remove it, or the classes it no longer needs)")


def unknown_text(suppression) -> str:
    """The message of a suppression that names hazard classes that do not exist.

    >>> from ptxkit.suppressions import Suppression
    >>> unknown_text(Suppression(3, 1, (), ("wat",)))[:39]
    "suppression names no hazard class 'wat'"
    """
    from ptxkit.suppressions import CLASSES

    names = ", ".join(repr(name) for name in suppression.unknown)
    return f"suppression names no hazard class {names} (the classes: {', '.join(CLASSES)})"


# -- GitHub workflow annotations ---------------------------------------------------------------


def github_report(judged: Judgement, strict: bool, quiet: bool, path: str) -> str:
    """GitHub Actions workflow commands, one per reported fence, warning and (when
    `strict`) unused suppression: ``::error file=…,line=…,col=…,title=…::message``, the
    message holding the reason, the witness path and the other pairs (lines as ``%0A``).
    `path` is the file as the repository names it.

    >>> from ptxkit.cfg.fence.fence import fence_text
    >>> text = open("samples/fence/13_hoist_out_of_if.ptx").read()
    >>> line, = github_report(judge(fence_text(text, rewrite=False)[1], text, "k.ptx"), False, False, "k.ptx").splitlines()
    >>> properties, message = line[2:].split("::", 1)
    >>> properties
    'error file=k.ptx,line=35,col=2,title=missing fence.proxy.async.shared%3A%3Acta [ptxkit.fence.raw]'
    >>> message[:30]
    'generic-proxy write at line 32'
    >>> line.count("%0A")
    3
    """
    report = judged.report
    out = []
    level = "notice" if report.rewritten else "error"
    verb = "inserted" if report.rewritten else "missing"
    for fence, pairs in judged.reported():
        lines = []
        for number, pair in enumerate(pairs):
            lines.append(pair.reason() if number == 0 else f"also orders (line {pair.op.line}): {pair.reason()}")
            lines.append(f"path: {pair.path_text()}")
        out.append(_command(level, path, fence.line, fence.column,
                            f"{verb} {fence.variant} [{rule_id(pairs[0].hazard)}]", "\n".join(lines)))
    if not quiet:
        for warning in judged.warnings():
            out.append(_command("warning", path, warning.line, warning.column, f"[{rule_id(warning.kind)}]",
                                warning.text))
        for suppression in judged.suppressions:
            if suppression.unknown:
                out.append(_command("warning", path, suppression.line, suppression.column, f"[{UNKNOWN_RULE}]",
                                    unknown_text(suppression)))
    if strict:
        for suppression, idle in judged.unused:
            out.append(_command("error", path, suppression.line, suppression.column, f"[{UNUSED_RULE}]",
                                unused_text(idle)))
    return "".join(line + "\n" for line in out)


def github_error(path: str, message: str) -> str:
    """The annotation of a file that could not be read as PTX (its ``file:line:col:``
    message, located when it says where).

    >>> github_error("k.ptx", "k.ptx:3:1: error: expected ';'")
    "::error file=k.ptx,line=3,col=1,title=not PTX::expected ';'\\n"
    """
    import re

    match = re.match(r".*?:(\d+):(\d+): error: (.*)", message)
    if match is None:
        return _command("error", path, None, None, "not PTX", message) + "\n"
    return _command("error", path, int(match.group(1)), int(match.group(2)), "not PTX", match.group(3)) + "\n"


def _command(level: str, path: str, line, column, title: str, message: str) -> str:
    properties = [f"file={_escape(path, True)}"]
    if line:
        properties.append(f"line={line}")
        if column:
            properties.append(f"col={column}")
    properties.append(f"title={_escape(title, True)}")
    return f"::{level} {','.join(properties)}::{_escape(message, False)}"


def _escape(text: str, property_: bool) -> str:
    """A workflow command's escaping: ``%``, CR and LF everywhere, ``:`` and ``,`` in
    properties too."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if property_ else text


# -- JSON ------------------------------------------------------------------------------------


def json_report(judged: Judgement) -> dict:
    """The JSON report (docs/report-format.md): `FenceReport.to_json` with each fence's
    and pair's `status`, each pair's and warning's `suppression`, and the file's
    `suppressions`.

    >>> from ptxkit.cfg.fence.fence import fence_text
    >>> text = open("samples/fence/13_hoist_out_of_if.ptx").read()
    >>> data = json_report(judge(fence_text(text, rewrite=False)[1], text, "k.ptx"))
    >>> data["fences"][0]["status"], [pair["status"] for pair in data["fences"][0]["pairs"]], data["suppressions"]
    ('reported', ['reported', 'reported'], [])
    """
    data = judged.report.to_json()
    for index, (fence, verdicts) in enumerate(zip(data["fences"], judged.verdicts)):
        fence["status"] = judged.fence_status(index)
        for pair, verdict in zip(fence["pairs"], verdicts):
            pair["status"] = verdict.status
            pair["suppression"] = _suppression_json(verdict.suppression)
    for warning, verdict in zip(data["warnings"], judged.warning_verdicts):
        warning["status"] = verdict.status
        warning["suppression"] = _suppression_json(verdict.suppression)
    unused = {id(suppression): idle for suppression, idle in judged.unused}
    data["suppressions"] = [{**_suppression_json(s), "classes": list(s.classes), "unknown": list(s.unknown),
                             "unused": list(unused.get(id(s), ()))} for s in judged.suppressions]
    return data


def _suppression_json(suppression) -> dict | None:
    if suppression is None:
        return None
    return {"line": suppression.line, "column": suppression.column, "reason": suppression.reason}
