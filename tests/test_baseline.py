"""``ptxkit.baseline``: keys without line numbers, the file's shape, counting."""

from __future__ import annotations

import json

import pytest

from ptxkit.baseline import Baseline, Key, dumps, file_key, load, normalised, statement_at


def test_an_instruction_is_normalised_for_its_key():
    assert normalised("\t@%p1  cp.async.bulk.tensor.1d.shared::cluster.global  [%r2], /* a */ [%rd1, {%r7}];  // x") \
        == "@%p1 cp.async.bulk.tensor.1d.shared::cluster.global [%r2], [%rd1, {%r7}];"


def test_a_statement_is_read_from_its_line_and_column_across_lines():
    lines = ["\tmov.u32 %r1, 0; wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2,", "\t %f3, %f4},",
             "\t %rd1, %rd2, 1, 1, 1, 0, 0; // done", "\tret;"]
    assert statement_at(lines, 1, 18) == ("wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, "
                                          "%rd1, %rd2, 1, 1, 1, 0, 0;")
    assert statement_at(lines, 4, 2) == "ret;"


def test_the_file_round_trips_sorted_and_counted(tmp_path):
    keys = [Key("b.ptx", "k", "raw", "x;"), Key("a.ptx", "k", "war", "y;"), Key("b.ptx", "k", "raw", "x;")]
    text = dumps(keys)
    data = json.loads(text)
    assert data["version"] == 1
    assert [(entry["file"], entry["count"]) for entry in data["reports"]] == [("a.ptx", 1), ("b.ptx", 2)]
    assert len(text.splitlines()) == 4  # one report per line, for reviews
    path = tmp_path / "baseline.json"
    path.write_text(text)
    assert load(str(path)).counts == Baseline.of(keys).counts


@pytest.mark.parametrize("content, message", [
    ("not json", "not a ptxkit baseline (not JSON"),
    ('{"version": 2, "reports": []}', "not a ptxkit baseline of version 1"),
    ('{"version": 1, "reports": [{"file": "a.ptx"}]}', "a report without file, function, hazard, instruction"),
])
def test_a_file_that_is_not_a_baseline_is_refused(tmp_path, content, message):
    path = tmp_path / "baseline.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        load(str(path))


def test_each_recorded_report_is_taken_once_and_per_file():
    key = Key("a.ptx", "k", "raw", "x;")
    other = Key("b.ptx", "k", "raw", "x;")
    baseline = Baseline.of([key, key, other])
    mine = baseline.of_file("a.ptx")
    assert [mine.take(key) for _ in range(3)] == [True, True, False]
    assert not mine.take(other) and baseline.counts[key] == 2  # the copy is consumed, not the whole
    assert baseline.of_file("c.ptx").counts == {}


def test_files_are_named_relative_to_the_baseline(tmp_path):
    assert file_key(str(tmp_path / "kernels" / "k.ptx"), str(tmp_path)) == "kernels/k.ptx"
    assert file_key(str(tmp_path / "k.ptx"), str(tmp_path / "ci")) == "../k.ptx"
