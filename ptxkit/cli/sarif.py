"""SARIF 2.1.0 for ``ptxkit fence --format sarif``: what code scanning (GitHub's included)
reads.

One rule per hazard class (``ptxkit.fence.raw``, ``ptxkit.fence.war``,
``ptxkit.fence.mbarrier-init``, ``ptxkit.fence.mbarrier-init-cluster``); one result per
fence, at the statement the fence goes before or after, with one code flow per (access,
async op) pair it orders, the witness path from the access to the async operation; files
that are not PTX, and modules left alone, as tool notifications.

>>> from ptxkit.cfg.fence import fence_text
>>> text = open("samples/fence/06b_tma_store_after_shared_store.ptx").read()
>>> report = fence_text(text, "06b.ptx", rewrite=False)[1]
>>> [r["ruleId"] for r in fence_results(report, "samples/06b.ptx")]
['ptxkit.fence.raw']
"""

from __future__ import annotations

import os

SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"

#: hazard class -> (rule name, what it means)
HAZARDS = {
    "raw": ("MissingProxyFenceAfterGenericWrite",
            "A generic-proxy write to shared or global memory (st.shared, stmatrix, cp.async...) may reach an "
            "async-proxy access of it (wgmma, TMA, tcgen05) with no fence.proxy.async in between."),
    "war": ("MissingProxyFenceAfterGenericRead",
            "A generic-proxy read of shared memory may be followed by an async-proxy write of it (a TMA load) "
            "with no fence.proxy.async in between."),
    "mbarrier-init": ("MissingProxyFenceAfterMbarrierInit",
                      "An mbarrier.init may reach an async-proxy use of the barrier (TMA completion, "
                      "tcgen05.commit) with no fence making the initialisation visible to the async proxy."),
    "mbarrier-init-cluster": ("MissingClusterReleaseOfMbarrierInit",
                              "An mbarrier.init of a barrier that other CTAs of the cluster use (a multicast "
                              "copy completes on it, a remote arrive reaches it) may reach their use with no "
                              "fence.mbarrier_init.release.cluster or releasing cluster barrier in between."),
}


def rule_id(hazard: str) -> str:
    """``ptxkit.fence.<hazard>``.

    >>> rule_id("mbarrier-init")
    'ptxkit.fence.mbarrier-init'
    """
    return f"ptxkit.fence.{hazard}"


def artifact_uri(path: str) -> str:
    """A file as a SARIF artifact URI: relative to the working folder (the repository
    root in CI) with forward slashes, or a ``file://`` URI outside it; escaped.

    >>> artifact_uri("kernels/my kernel.ptx")
    'kernels/my%20kernel.ptx'
    """
    from pathlib import Path
    from urllib.parse import quote

    absolute = Path(os.path.abspath(path))
    try:
        return quote(absolute.relative_to(os.getcwd()).as_posix())
    except ValueError:
        return absolute.as_uri()


def fence_results(report, uri: str) -> list[dict]:
    """The SARIF results of one file's fence report: one per missing (``--check``,
    level error) or inserted (level note) fence, at the statement it goes before or
    after; each (access, async op) pair it orders is a code flow (its witness path) and
    its async op a related location.

    >>> from ptxkit.cfg.fence import fence_text
    >>> report = fence_text(open("samples/fence/13_hoist_out_of_if.ptx").read(), rewrite=False)[1]
    >>> result, = fence_results(report, "k.ptx")
    >>> len(result["codeFlows"]), [r["physicalLocation"]["region"]["startLine"] for r in result["relatedLocations"]]
    (2, [36, 39])
    """
    results = []
    for site in report.fences:
        verb = "inserted" if report.rewritten else "missing"
        result = {
            "ruleId": rule_id(site.hazard),
            "level": "note" if report.rewritten else "error",
            "message": {"text": f"{verb} {site.variant} {site.where} this statement: {site.reason()}"},
            "locations": [_location(uri, site.line, site.column, f"[{site.function}] {site.text}")],
            "relatedLocations": [{"id": number, **_location(uri, pair.op.line, pair.op.column, pair.reason())}
                                 for number, pair in enumerate(site.pairs)],
        }
        flows = []
        for pair in site.pairs:
            steps = [_location(uri, place.line, place.column, place.text) for place in pair.path]
            if steps:
                flows.append({"message": {"text": pair.reason()},
                              "threadFlows": [{"locations": [{"location": step} for step in steps]}]})
        if flows:
            result["codeFlows"] = flows
        results.append(result)
    return results


def notification(uri: str | None, level: str, text: str, line: int | None = None, column: int | None = None) -> dict:
    """A tool notification (an input that is not PTX, a module left alone, a warning).

    >>> notification("k.ptx", "note", "left unchanged")["level"]
    'note'
    """
    entry = {"level": level, "message": {"text": text}}
    if uri is not None:
        entry["locations"] = [_location(uri, line, column)]
    return entry


def sarif_log(results: list[dict], notifications: list[dict], version: str) -> dict:
    """The whole log: one run of ptxkit, its rules, results and notifications.

    >>> log = sarif_log([], [], "0.1.0")
    >>> log["version"], log["runs"][0]["tool"]["driver"]["rules"][0]["id"]
    ('2.1.0', 'ptxkit.fence.raw')
    """
    rules = [
        {
            "id": rule_id(hazard),
            "name": name,
            "shortDescription": {"text": f"Missing fence.proxy.async ({hazard})"},
            "fullDescription": {"text": description},
            "help": {"text": f"{description} Insert the fence with `ptxkit fence`; `ptxkit fence --explain` "
                             "says why each one is needed."},
            "defaultConfiguration": {"level": "error"},
            "properties": {"tags": ["correctness", "concurrency", "ptx"], "precision": "high"},
        }
        for hazard, (name, description) in HAZARDS.items()
    ]
    failed = any(entry["level"] == "error" for entry in notifications)
    return {
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {"name": "ptxkit", "version": version, "semanticVersion": version, "rules": rules}},
            "invocations": [{"executionSuccessful": not failed, "toolExecutionNotifications": notifications}],
            "results": results,
            "columnKind": "unicodeCodePoints",
        }],
    }


def _location(uri: str, line: int | None, column: int | None, text: str | None = None) -> dict:
    physical = {"artifactLocation": {"uri": uri}}
    if line:
        physical["region"] = {"startLine": line, **({"startColumn": column} if column else {})}
    location = {"physicalLocation": physical}
    if text:
        location["message"] = {"text": text}
    return location
