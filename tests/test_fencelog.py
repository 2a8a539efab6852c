"""``ptxkit.fencelog``: the JSON lines of ``PTXKIT_FENCE_LOG``."""

from __future__ import annotations

import json

from ptxkit.cfg.fence.fence import fence_text
from ptxkit.fencelog import describe, entry_names, write_entry

from conftest import SAMPLES


def test_entries_append_to_the_named_file(tmp_path, monkeypatch):
    log = tmp_path / "fences.jsonl"
    monkeypatch.setenv("PTXKIT_FENCE_LOG", str(log))
    _, report = fence_text((SAMPLES / "fence" / "13_hoist_out_of_if.ptx").read_text(), "k.ptx", rewrite=False)
    for name in ("a.ptx", "b.ptx"):
        write_entry({"file": name, "fences": [describe(site) for site in report.fences]})
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["file"] for e in entries] == ["a.ptx", "b.ptx"]
    pairs = entries[0]["fences"][0].pop("pairs")
    assert entries[0]["fences"][0] == {
        "function": "k", "line": 35, "column": 2, "where": "before", "hazard": "raw", "variant": "fence.proxy.async.shared::cta",
        "placement": "branch", "reason": report.fences[0].reason()}
    assert [(pair["access"]["line"], pair["op"]["line"]) for pair in pairs] == [(32, 36), (32, 39)]


def test_a_dash_means_standard_error_and_unset_means_nothing(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("PTXKIT_FENCE_LOG", "-")
    write_entry({"file": "k.ptx"})
    assert json.loads(capsys.readouterr().err) == {"file": "k.ptx"}
    monkeypatch.delenv("PTXKIT_FENCE_LOG")
    monkeypatch.chdir(tmp_path)
    write_entry({"file": "k.ptx"})
    assert capsys.readouterr() == ("", "") and list(tmp_path.iterdir()) == []


def test_entry_names_are_the_kernels_of_the_text():
    text = (SAMPLES / "fence" / "13_hoist_out_of_if.ptx").read_text()
    assert entry_names(text) == ["k"]
    assert entry_names(".func f()\n{\n}\n.weak .entry $w_1(\n)\n.extern .entry x();") == ["$w_1", "x"]
