"""SARIF 2.1.0 for ``ptxkit fence --format sarif``: what code scanning (GitHub's included)
reads.

One rule per hazard class (``ptxkit.fence.raw``, ``ptxkit.fence.war``,
``ptxkit.fence.mbarrier-init-cluster``), per warning
kind (``ptxkit.fence.in-flight``, ``ptxkit.fence.unknown-opcode``) and for suppressions
(`ptxkit.cli.fence_report`). One result per reported fence, at the statement the fence
goes before or after, with one code flow per (access, async op) pair it orders (the
witness path) and the async ops as related locations; one result of level ``warning``
per warning; with ``--strict``, one per unused suppression. What a suppression or the
baseline silenced is left out: code scanning does not read SARIF's ``suppressions``, and
would show it as an open alert. Files that are not PTX, and modules left alone, are tool
notifications.

Files are named relative to ``%SRCROOT%``, the root of the git repository the command
runs in (else the working folder), which ``originalUriBaseIds`` gives as a ``file:`` URI.

>>> from ptxkit.cfg.fence.fence import fence_text
>>> from ptxkit.cli.fence_report import judge
>>> text = open("samples/fence/06b_tma_store_after_shared_store.ptx").read()
>>> judged = judge(fence_text(text, "06b.ptx", rewrite=False)[1], text, "06b.ptx")
>>> [r["ruleId"] for r in fence_results(judged, artifact("samples/06b.ptx", "."), strict=False)]
['ptxkit.fence.raw']
"""

from __future__ import annotations

import os

from .fence_report import UNKNOWN_RULE, UNUSED_RULE, rule_id, unknown_text, unused_text

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

#: The base that artifact URIs are relative to.
SRCROOT = "%SRCROOT%"

#: rule id -> (rule name, default level, what it means)
RULES = {
    rule_id("raw"): (
        "MissingProxyFenceAfterGenericWrite", "error",
        "A generic-proxy write to shared or global memory (st.shared, stmatrix, cp.async...) may reach an "
        "async-proxy access of it (wgmma, TMA, tcgen05) with no fence.proxy.async in between."),
    rule_id("war"): (
        "MissingProxyFenceAfterGenericRead", "error",
        "A generic-proxy read of shared memory may be followed by an async-proxy write of it (a TMA load) "
        "with no fence.proxy.async in between."),
    rule_id("mbarrier-init-cluster"): (
        "MissingClusterReleaseOfMbarrierInit", "error",
        "An mbarrier.init of a barrier that other CTAs of the cluster use (a multicast copy completes on it, a "
        "remote arrive reaches it) may reach their use with no fence.mbarrier_init.release.cluster or releasing "
        "cluster barrier in between."),
    rule_id("in-flight"): (
        "CpAsyncWriteStillInFlight", "warning",
        "An async-proxy operation may read shared memory that a cp.async is still writing (no cp.async.wait_group "
        "0 or cp.async.wait_all on some path): no proxy fence waits for that write."),
    rule_id("unknown-opcode"): (
        "UnknownAsyncOpcode", "warning",
        "An async-looking opcode the pass does not know: it is taken as an async-proxy read and write of all "
        "shared memory."),
    UNUSED_RULE: (
        "UnusedSuppression", "error",
        "A ptxkit: ignore[...] comment that silences no report of its line or the next (reported with --strict)."),
    UNKNOWN_RULE: (
        "UnknownSuppressionClass", "warning",
        "A ptxkit: ignore[...] comment names a hazard class that does not exist."),
}


def source_root() -> str:
    """The folder artifact URIs are relative to: the root of the git repository around
    the working folder, else the working folder.

    >>> os.path.isabs(source_root())
    True
    """
    from .inputs import repository_root

    return repository_root(os.getcwd()) or os.getcwd()


def relative_path(path: str, root: str) -> str:
    """`path` relative to `root`, with forward slashes (``..`` where it lies outside).

    >>> relative_path("/work/repo/kernels/k.ptx", "/work/repo"), relative_path("/tmp/k.ptx", "/work/repo")
    ('kernels/k.ptx', '../../tmp/k.ptx')
    """
    try:
        return os.path.relpath(os.path.abspath(path), root).replace(os.sep, "/")
    except ValueError:  # another drive
        return os.path.abspath(path).replace(os.sep, "/")


def artifact(path: str, root: str) -> dict:
    """An artifact location: `path` as a URI relative to ``%SRCROOT%`` (`root`), escaped.

    >>> artifact("kernels/my kernel.ptx", ".")
    {'uri': 'kernels/my%20kernel.ptx', 'uriBaseId': '%SRCROOT%'}
    """
    from urllib.parse import quote

    return {"uri": quote(relative_path(path, root)), "uriBaseId": SRCROOT}


def fence_results(judged, where: dict, strict: bool) -> list[dict]:
    """The SARIF results of one file (`where`: its artifact location): one per reported
    fence (level error in check mode, note when it was inserted), one per warning no
    suppression silenced, and with `strict` one per unused suppression.

    >>> from ptxkit.cfg.fence.fence import fence_text
    >>> from ptxkit.cli.fence_report import judge
    >>> text = open("samples/fence/13_hoist_out_of_if.ptx").read()
    >>> result, = fence_results(judge(fence_text(text, rewrite=False)[1], text, "k.ptx"), artifact("k.ptx", "."), False)
    >>> len(result["codeFlows"]), [r["physicalLocation"]["region"]["startLine"] for r in result["relatedLocations"]]
    (2, [36, 39])
    """
    report = judged.report
    results = []
    for fence, pairs in judged.reported():
        verb = "inserted" if report.rewritten else "missing"
        more = len(pairs) - 1
        result = {
            "ruleId": rule_id(pairs[0].hazard),
            "level": "note" if report.rewritten else "error",
            "message": {"text": f"{verb} {fence.variant} {fence.where} this statement: {pairs[0].reason()}"
                                + (f" (and {more} more async-proxy operation{'s' * (more != 1)})" if more else "")
                                + fence.scope_note()},
            "locations": [_location(where, fence.line, fence.column, f"[{fence.function}] {fence.text}")],
            "relatedLocations": [{"id": number, **_location(where, pair.op.line, pair.op.column, pair.reason())}
                                 for number, pair in enumerate(pairs)],
        }
        flows = []
        for pair in pairs:
            steps = [_location(where, place.line, place.column, place.text) for place in pair.path]
            if steps:
                flows.append({"message": {"text": pair.reason()},
                              "threadFlows": [{"locations": [{"location": step} for step in steps]}]})
        if flows:
            result["codeFlows"] = flows
        results.append(result)
    for warning in judged.warnings():
        results.append(_result(rule_id(warning.kind), "warning", warning.text,
                               _location(where, warning.line, warning.column)))
    for suppression in judged.suppressions:
        if suppression.unknown:
            results.append(_result(UNKNOWN_RULE, "warning", unknown_text(suppression),
                                   _location(where, suppression.line, suppression.column)))
    if strict:
        for suppression, idle in judged.unused:
            results.append(_result(UNUSED_RULE, "error", unused_text(idle),
                                   _location(where, suppression.line, suppression.column)))
    return results


def _result(rule: str, level: str, text: str, location: dict) -> dict:
    return {"ruleId": rule, "level": level, "message": {"text": text}, "locations": [location]}


def notification(where: dict | None, level: str, text: str, line: int | None = None,
                 column: int | None = None) -> dict:
    """A tool notification (an input that is not PTX, a module left alone).

    >>> notification(artifact("k.ptx", "."), "note", "left unchanged")["level"]
    'note'
    """
    entry = {"level": level, "message": {"text": text}}
    if where is not None:
        entry["locations"] = [_location(where, line, column)]
    return entry


def sarif_log(results: list[dict], notifications: list[dict], version: str, root: str) -> dict:
    """The whole log: one run of ptxkit, its rules, results and notifications, with
    ``%SRCROOT%`` at `root`.

    >>> log = sarif_log([], [], "0.1.0", "/work/repo")
    >>> log["version"], log["runs"][0]["tool"]["driver"]["rules"][0]["id"], log["runs"][0]["originalUriBaseIds"]
    ('2.1.0', 'ptxkit.fence.raw', {'%SRCROOT%': {'uri': 'file:///work/repo/'}})
    """
    from pathlib import Path

    rules = [
        {
            "id": rule,
            "name": name,
            "shortDescription": {"text": f"{name} ({rule})"},
            "fullDescription": {"text": description},
            "help": {"text": f"{description} Insert the missing fences with `ptxkit fence`; `ptxkit fence "
                             "--explain` says why each one is needed; docs/report-format.md says how to suppress "
                             "a report or keep it in a baseline."},
            "defaultConfiguration": {"level": level},
            "properties": {"tags": ["correctness", "concurrency", "ptx"], "precision": "high"},
        }
        for rule, (name, level, description) in RULES.items()
    ]
    failed = any(entry["level"] == "error" for entry in notifications)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "ptxkit", "version": version, "semanticVersion": version, "rules": rules}},
            "invocations": [{"executionSuccessful": not failed, "toolExecutionNotifications": notifications}],
            "originalUriBaseIds": {SRCROOT: {"uri": Path(root).absolute().as_uri().rstrip("/") + "/"}},
            "results": results,
            "columnKind": "unicodeCodePoints",
        }],
    }


def _location(where: dict, line: int | None, column: int | None, text: str | None = None) -> dict:
    physical = {"artifactLocation": where}
    if line:
        physical["region"] = {"startLine": line, **({"startColumn": column} if column else {})}
    location = {"physicalLocation": physical}
    if text:
        location["message"] = {"text": text}
    return location
