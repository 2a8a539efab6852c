"""``ptxkit report``: text and JSON, an output file, ptxas options, errors."""

from __future__ import annotations

import json

import pytest

from ptxkit.cli.main import main

from conftest import SAMPLES

pytestmark = pytest.mark.ptxas
SPILL = SAMPLES / "toolchain" / "spill.ptx"
ADD = SAMPLES / "toolchain" / "vector_add.ptx"


@pytest.mark.nvdisasm
def test_text_names_kernels_figures_and_source_lines(capsys):
    assert main(["report", str(SPILL)]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"{SPILL} (sm_90a, ptxas 13.0)" or out.startswith(f"{SPILL} (sm_90a, ptxas")
    assert "spill: 32 registers" in out and "424 bytes spill stores" in out
    assert "samples/toolchain/spill.cu:13:" in out


def test_json_for_several_files_and_an_output_file(tmp_path, capsys):
    target = tmp_path / "report.jsonl"
    assert main(["report", "--format", "json", str(SPILL), str(ADD), "-o", str(target)]) == 0
    reports = [json.loads(line) for line in target.read_text().splitlines()]
    assert [r["file"] for r in reports] == [str(SPILL), str(ADD)]
    assert reports[1]["kernels"][0]["name"] == "vector_add" and reports[1]["arch"] == "sm_80"
    assert capsys.readouterr().out == ""


def test_ptxas_options_go_through(capsys):
    assert main(["report", "--format", "json", str(ADD), "--arch", "sm_90a", "-X=--maxrregcount=16"]) == 0
    (kernel,) = json.loads(capsys.readouterr().out)["kernels"]
    assert kernel["registers"] <= 16


def test_bad_input_and_a_bad_arch_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n\tmov.u32 %r1, 0;\n}\n")
    assert main(["report", str(bad)]) == 2
    assert "ptxas rejected" in capsys.readouterr().err
    assert main(["report", str(ADD), "--arch", "hopper"]) == 2
    assert "sm_90a" in capsys.readouterr().err
