"""The report pass: ptxas's figures per kernel, spills mapped to PTX and source lines."""

from __future__ import annotations

import re

import pytest

import ptxkit
from ptxkit.rewrite import run
from ptxkit.rewrite.passes.report import resource_report

from conftest import SAMPLES, nvdisasm_available

pytestmark = pytest.mark.ptxas
SPILL = SAMPLES / "toolchain" / "spill.ptx"


@pytest.fixture(scope="module")
def spill_report():
    return resource_report(ptxkit.parse_file(SPILL))


def test_figures_are_ptxas_own(spill_report):
    cubin = ptxkit.assemble(SPILL.read_text(), "sm_90a")
    for kernel in spill_report.kernels:
        usage = cubin.resources[kernel.name]
        assert (kernel.registers, kernel.shared_bytes, kernel.stack_frame, kernel.spill_stores, kernel.spill_loads) \
            == (usage.registers, usage.shared_bytes, usage.stack_frame, usage.spill_stores, usage.spill_loads)
    assert spill_report.arch == "sm_90a"
    if nvdisasm_available():
        assert spill_report.notes == []
    else:  # the figures stand; the note says why spills are not mapped to lines
        assert [note.split(":")[0] for note in spill_report.notes] == ["spills are not mapped to lines"]


@pytest.mark.nvdisasm
def test_every_spilled_byte_is_mapped_to_a_ptx_line_and_a_source_line(spill_report):
    spill = next(k for k in spill_report.kernels if k.name == "spill")
    sites = [site for site in spill.sites if site.kind == "spill"]
    assert sum(site.store_bytes for site in sites) == spill.spill_stores > 0
    assert sum(site.load_bytes for site in sites) == spill.spill_loads > 0
    lines = SPILL.read_text().splitlines()
    source = (SAMPLES / "toolchain" / "spill.cu").read_text().splitlines()
    for site in sites:
        assert lines[site.ptx_line - 1].strip() == site.text
        file, line, _ = site.source.rsplit(":", 2)
        assert file == "samples/toolchain/spill.cu" and 0 < int(line) <= len(source)
    worst = next(iter(spill.spills_by_place()))  # most bytes: the loop that keeps 48 values live
    assert "acc[i] * acc[(i + 7) % 48]" in source[int(worst.rsplit(":", 1)[1]) - 1]


@pytest.mark.nvdisasm
def test_the_ptx_local_memory_is_listed_with_what_ptxas_made_of_it(spill_report):
    local = next(k for k in spill_report.kernels if k.name == "local_array")
    sites = [site for site in local.sites if site.kind == "local"]
    assert sites and all(site.text.startswith(("ld.local", "st.local")) for site in sites)
    assert all(site.sass >= 1 for site in sites)  # a run-time index: a real array in local memory
    assert not [site for site in local.sites if site.kind == "spill"]


@pytest.mark.nvdisasm
def test_text_and_json_say_the_same(spill_report):
    text = spill_report.text()
    data = spill_report.to_json()
    assert "spill: 32 registers" in text and "spills by source line" in text
    assert data["kernels"][0]["spill_stores"] == 424 or data["kernels"][1]["spill_stores"] == 424
    assert all("spills_by_place" in kernel for kernel in data["kernels"])


def test_as_a_pass_it_reports_what_the_passes_before_it_made():
    result = run(SPILL.read_text(), ["strip --opcode st.global", "report"], filename="spill.ptx")
    report = result.stages[1].info
    assert [stage.name for stage in result.stages] == ["strip", "report"] and result.fence is None
    assert {kernel["name"] for kernel in report["kernels"]} == {"spill", "local_array"}
    unchanged = run(SPILL.read_text(), ["report"], filename="spill.ptx")
    assert not unchanged.changed and unchanged.stages[0].info["kernels"][0]["registers"] > 0


@pytest.mark.nvdisasm
def test_without_loc_there_are_no_source_lines():
    text = "\n".join(line for line in SPILL.read_text().splitlines() if not re.match(r"\s*\.loc\s", line))
    report = resource_report(ptxkit.parse(text, "noloc.ptx"))
    spill = next(k for k in report.kernels if k.name == "spill")
    assert spill.sites and not any(site.source for site in spill.sites)
    assert any("no .loc" in note for note in report.notes)
    assert next(iter(spill.spills_by_place())).startswith("line ")


@pytest.mark.parametrize("path", sorted(p for folder in ("toolchain", "hopper", "triton", "reduction", "syntax")
                                        for p in (SAMPLES / folder).rglob("*.ptx")), ids=lambda p: p.name)
def test_every_sample_gets_a_report_that_accounts_for_its_spills(path):
    module = ptxkit.parse_file(path)
    try:
        report = resource_report(module)
    except ptxkit.PtxasError:
        pytest.skip("ptxas does not take this sample on its own")
    if not nvdisasm_available() and any(k.spill_stores or k.spill_loads for k in report.kernels):
        pytest.skip("no nvdisasm to map this sample's spills to lines")
    assert {k.name for k in report.kernels} <= {f.name for f in module.functions}
    for kernel in report.kernels:
        spills = [site for site in kernel.sites if site.kind == "spill"]
        assert sum(site.store_bytes for site in spills) == kernel.spill_stores
        assert sum(site.load_bytes for site in spills) == kernel.spill_loads
