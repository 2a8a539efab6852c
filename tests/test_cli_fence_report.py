"""``ptxkit fence`` reports: suppressions, baselines, --strict, --quiet, GitHub
annotations, colour, on samples/fence/x23 (three missing fences: (1) a raw before a TMA
store, (2) a war before a TMA load, suppressed in the sample, (3) an mbarrier-init-cluster)."""

from __future__ import annotations

import json
import re

import pytest

from ptxkit.cli.main import main

from conftest import SAMPLES

THREE = SAMPLES / "fence" / "x23_three_reports_one_suppressed.ptx"
RAW_STORE, WAR_LOAD, INIT_LOAD = "52:2", "56:2", "58:2"


def check(capsys, *arguments) -> tuple[int, str, str]:
    status = main(["fence", "--check", "--color", "never", *map(str, arguments)])
    out, err = capsys.readouterr()
    return status, out, err


def errors(err: str) -> list[str]:
    """The ``line:col [rule]`` of each error line."""
    return [f"{m.group(1)} {m.group(2)}" for m in re.finditer(r":(\d+:\d+): error: .*(\[[\w.-]+\])$", err, re.M)]


@pytest.fixture
def kernels(tmp_path, monkeypatch):
    """A project folder with the sample as kernels/k.ptx, the working folder."""
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "k.ptx").write_text(THREE.read_text())
    monkeypatch.chdir(tmp_path)
    return tmp_path


def with_fence_before(text: str, line: int, fence: str = "fence.proxy.async.shared::cta;") -> str:
    lines = text.splitlines(keepends=True)
    lines.insert(line - 1, f"\t{fence}\n")
    return "".join(lines)


def test_the_inline_suppression_silences_its_report(capsys):
    status, _, err = check(capsys, THREE)
    assert status == 1
    assert errors(err) == [f"{RAW_STORE} [ptxkit.fence.raw]", f"{INIT_LOAD} [ptxkit.fence.mbarrier-init-cluster]"]
    assert main(["fence", "--check", "--format", "json", str(THREE)]) == 1
    report = json.loads(capsys.readouterr().out)
    assert [fence["status"] for fence in report["fences"]] == ["reported", "suppressed", "reported"]
    (war,) = report["fences"][1]["pairs"]
    assert war["suppression"] == {"line": 55, "column": 2,
                                  "reason": "example: a suppression a reviewer accepted, with its reason"}
    # the rewrite still inserts all three: a suppression silences a report, it does not remove a fence
    assert main(["fence", str(THREE)]) == 0
    assert capsys.readouterr().out == (SAMPLES / "fence" / "expected" / THREE.name).read_text()


def test_one_suppressed_one_in_the_baseline_the_third_fails(kernels, capsys):
    """The baseline is written while (1) is fixed: it holds (3). The sample then fails on
    (1) alone; an edit that moves every line keeps the baseline valid; a change of (3)'s
    instruction makes it new again."""
    source = (kernels / "kernels" / "k.ptx").read_text()
    (kernels / "kernels" / "k.ptx").write_text(with_fence_before(source, 52))
    assert main(["fence", "--check", "--write-baseline", "ptxkit-baseline.json", "kernels"]) == 0
    err = capsys.readouterr().err  # what is recorded is shown, then where
    assert errors(err) == ["59:2 [ptxkit.fence.mbarrier-init-cluster]"]
    assert err.endswith("\nptxkit fence: 1 report recorded in ptxkit-baseline.json\n")
    (entry,) = json.loads((kernels / "ptxkit-baseline.json").read_text())["reports"]
    assert (entry["file"], entry["function"], entry["hazard"], entry["count"]) == ("kernels/k.ptx", "k",
                                                                                 "mbarrier-init-cluster", 1)
    assert entry["instruction"] == ("cp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes"
                                    ".multicast::cluster [%r3], [%rd1, {%r6}], [%r5], %rs1;")

    (kernels / "kernels" / "k.ptx").write_text(source)
    status, _, err = check(capsys, "--baseline", "ptxkit-baseline.json", "kernels")
    assert status == 1 and errors(err) == [f"{RAW_STORE} [ptxkit.fence.raw]"]
    assert len(err.splitlines()) == 2  # the error and its path; one file: no summary line

    shifted = source.replace("\tmov.u32 \t%r6, 0;\n", "\tmov.u32 \t%r6, 0;\n\t// an unrelated edit\n"
                                                      "\tadd.u32 \t%r6, %r6, 0;\n\n")
    (kernels / "kernels" / "k.ptx").write_text(shifted)
    status, _, err = check(capsys, "--baseline", "ptxkit-baseline.json", "kernels")
    assert status == 1 and errors(err) == ["55:2 [ptxkit.fence.raw]"]  # three lines further down

    changed = shifted.replace("[%r3], [%rd1, {%r6}], [%r5], %rs1;", "[%r3], [%rd1, {%r7}], [%r5], %rs1;")
    (kernels / "kernels" / "k.ptx").write_text(changed)
    status, _, err = check(capsys, "--baseline", "ptxkit-baseline.json", "kernels")
    assert errors(err) == ["55:2 [ptxkit.fence.raw]", "61:2 [ptxkit.fence.mbarrier-init-cluster]"]

    (kernels / "kernels" / "k.ptx").write_text(with_fence_before(shifted, 55))  # (1) fixed: nothing new
    status, _, err = check(capsys, "--baseline", "ptxkit-baseline.json", "kernels")
    assert (status, err) == (0, "")


def test_the_summary_counts_what_was_silenced_and_what_the_baseline_no_longer_needs(kernels, capsys):
    (kernels / "kernels" / "other.ptx").write_text(THREE.read_text())
    assert main(["fence", "--check", "--write-baseline", "all.json", "kernels"]) == 0
    capsys.readouterr()
    status, _, err = check(capsys, "--baseline", "all.json", "kernels")
    assert status == 0 and err == ("ptxkit fence: 2 files, 0 with missing fences (0 fences), 2 suppressed, "
                                   "4 in the baseline\n")
    (kernels / "kernels" / "other.ptx").write_text(
        with_fence_before(with_fence_before(THREE.read_text(), 58, "fence.mbarrier_init.release.cluster;"), 52))
    status, _, err = check(capsys, "--baseline", "all.json", "kernels")
    assert status == 0 and err.endswith(", 2 baseline entries no longer reported (--write-baseline drops them)\n")


def test_strict_reports_a_suppression_that_silences_nothing(capsys, tmp_path):
    fenced = tmp_path / "k.ptx"
    fenced.write_text((SAMPLES / "fence" / "expected" / THREE.name).read_text())  # the fences are in
    assert check(capsys, fenced) == (0, "", "")
    status, _, err = check(capsys, "--strict", fenced)
    assert status == 1 and errors(err) == ["56:2 [ptxkit.suppression.unused]"]  # below the first fence
    assert "unused suppression: no war report of an async operation on this line or the next" in err
    fenced.write_text(fenced.read_text().replace("ignore[war]", "ignore[wat]"))
    status, _, err = check(capsys, fenced)
    assert status == 0 and "suppression names no hazard class 'wat' (the classes: raw, war," in err
    assert "[ptxkit.suppression.unknown-class]" in err


def test_quiet_prints_only_what_fails(capsys, tmp_path):
    warned = SAMPLES / "fence" / "02b_cp_async_without_wait.ptx"
    status, _, err = check(capsys, warned, THREE)
    assert "warning:" in err and err.splitlines()[-1].startswith("ptxkit fence: 2 files")
    status, _, quiet = check(capsys, "--quiet", warned, THREE)
    assert status == 1 and "warning:" not in quiet and "ptxkit fence:" not in quiet
    assert errors(quiet) == errors(err)


def test_github_annotations(capsys, kernels):
    status = main(["fence", "--check", "--format", "github", "kernels"])
    out, err = capsys.readouterr()
    assert status == 1 and err == ""  # the annotations alone; one file: no summary line
    lines = out.splitlines()
    assert [line.split("::")[1] for line in lines] == [
        "error file=kernels/k.ptx,line=52,col=2,title=missing fence.proxy.async.shared%3A%3Acta [ptxkit.fence.raw]",
        "error file=kernels/k.ptx,line=58,col=2,title=missing fence.mbarrier_init.release.cluster "
        "[ptxkit.fence.mbarrier-init-cluster]"]
    assert lines[0].split("::", 2)[2].startswith("generic-proxy write at line 51 (st.shared.u32) of shared::cta")
    assert "%0Apath: line 51 (st.shared.u32) -> line 52" in lines[0]
    bad = kernels / "kernels" / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n\tret\n}\n")
    assert main(["fence", "--check", "--format", "github", str(bad)]) == 2
    assert capsys.readouterr().out == ("::error file=kernels/bad.ptx,line=6,col=5,title=not PTX::expected ';' after the "
                                       "statement, found '}'\n")


def test_colour_on_request_and_never_when_told(capsys, monkeypatch):
    assert main(["fence", "--check", "--color", "always", str(THREE)]) == 1
    coloured = capsys.readouterr().err
    assert "\x1b[1;31merror:\x1b[0m" in coloured and "\x1b[2m[ptxkit.fence.raw]\x1b[0m" in coloured
    monkeypatch.setenv("NO_COLOR", "1")
    assert main(["fence", "--check", str(THREE)]) == 1
    assert "\x1b[" not in capsys.readouterr().err


def test_baseline_usage_errors(kernels, capsys):
    assert main(["fence", "--check", "--baseline", "missing.json", "kernels"]) == 2
    assert "missing.json: No such file or directory" in capsys.readouterr().err
    (kernels / "bad.json").write_text("[]")
    assert main(["fence", "--check", "--baseline", "bad.json", "kernels"]) == 2
    assert "bad.json: not a ptxkit baseline of version 1" in capsys.readouterr().err
    assert main(["fence", "-i", "--write-baseline", "b.json", "kernels"]) == 2
    assert "--write-baseline records the reports and rewrites nothing" in capsys.readouterr().err
