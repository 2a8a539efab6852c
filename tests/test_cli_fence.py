"""``ptxkit fence``: output destinations, --check, --diff, --json, --explain, options, errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ptxkit.cli.main import main

from conftest import SAMPLES

FENCES = SAMPLES / "fence"
IF_HOIST = FENCES / "13_hoist_out_of_if.ptx"
NOTHING = FENCES / "10_ldmatrix_then_wgmma.ptx"


def expected(path) -> str:
    return (FENCES / "expected" / path.name).read_text()


def test_fenced_ptx_goes_to_stdout(capsys):
    assert main(["fence", str(IF_HOIST)]) == 0
    out, err = capsys.readouterr()
    assert out == expected(IF_HOIST) and err == ""


def test_output_file_and_in_place(tmp_path, capsys):
    target = tmp_path / "out.ptx"
    assert main(["fence", str(IF_HOIST), "-o", str(target)]) == 0
    assert target.read_text() == expected(IF_HOIST) and capsys.readouterr().out == ""
    copy = tmp_path / "k.ptx"
    copy.write_text(IF_HOIST.read_text())
    assert main(["fence", "-i", str(copy)]) == 0
    assert copy.read_text() == expected(IF_HOIST)
    assert main(["fence", "-i", str(copy)]) == 0 and copy.read_text() == expected(IF_HOIST)


def test_standard_input():
    done = subprocess.run([sys.executable, "-m", "ptxkit", "fence", "-"], input=IF_HOIST.read_text(),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout == expected(IF_HOIST)


def test_check_fails_with_locations_and_paths(capsys):
    before = IF_HOIST.read_text()
    assert main(["fence", "--check", str(IF_HOIST)]) == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 4  # one fence: an error, then a note for the second wgmma it orders
    assert lines[0].startswith(f"{IF_HOIST}:35:2: error: missing fence.proxy.async.shared::cta before this statement: "
                               "generic-proxy write at line 32 (st.shared.b16)")
    assert lines[1] == "    path: line 32 (st.shared.b16) -> line 36 (wgmma.mma_async)"
    assert lines[2].startswith(f"{IF_HOIST}:39:2: note: the same fence also orders: generic-proxy write at line 32")
    assert lines[3] == "    path: line 32 (st.shared.b16) -> line 38 (E) -> line 39 (wgmma.mma_async)"
    assert IF_HOIST.read_text() == before


def test_check_passes_on_fenced_output(tmp_path, capsys):
    fenced = tmp_path / "k.ptx"
    fenced.write_text(expected(IF_HOIST))
    assert main(["fence", "--check", str(fenced)]) == 0
    assert main(["fence", "--check", str(NOTHING)]) == 0
    assert capsys.readouterr() == ("", "")


def test_diff(capsys):
    assert main(["fence", "--diff", str(IF_HOIST)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"--- {IF_HOIST}\n+++ {IF_HOIST} (fenced)\n")
    assert [l for l in out.splitlines() if l.startswith("+") and not l.startswith("+++")] == [
        "+\tfence.proxy.async.shared::cta;"]
    assert main(["fence", "--check", "--diff", str(IF_HOIST)]) == 1  # what --check would change
    assert "+\tfence.proxy.async.shared::cta;" in capsys.readouterr().out


def test_an_empty_diff_costs_no_more_than_check(tmp_path, capsys, monkeypatch):
    # nothing planned: no text is printed or compared; no async-proxy operation in the
    # text: the pass does not even run, as for --check
    fenced = tmp_path / "k.ptx"
    fenced.write_text(expected(IF_HOIST))
    assert main(["fence", "--diff", str(fenced)]) == 0 and capsys.readouterr() == ("", "")
    import ptxkit.cfg.fence.fence

    def no_pass(*args, **kwargs):
        raise AssertionError("the pass ran")

    monkeypatch.setattr(ptxkit.cfg.fence.fence, "fence_module", no_pass)
    plain = SAMPLES / "toolchain" / "vector_add.ptx"
    assert main(["fence", "--check", str(plain)]) == 0
    checked = capsys.readouterr()
    assert main(["fence", "--diff", str(plain)]) == 0
    assert capsys.readouterr() == checked and checked.out == ""


def test_json_report(capsys, tmp_path):
    target = tmp_path / "out.ptx"
    assert main(["fence", "--json", str(IF_HOIST), "-o", str(target)]) == 0
    report = json.loads(capsys.readouterr().out)
    assert target.read_text() == expected(IF_HOIST)
    assert report["changed"] is True and report["skipped"] is None
    (fence,) = report["fences"]
    assert (fence["line"], fence["column"], fence["where"], fence["variant"], fence["placement"]) == (
        35, 2, "before", "fence.proxy.async.shared::cta", "branch")
    assert [[p["line"] for p in pair["path"]] for pair in fence["pairs"]] == [[32, 36], [32, 38, 39]]
    assert [pair["access"]["text"] for pair in fence["pairs"]] == ["st.shared.b16"] * 2
    assert main(["fence", "--check", "--json", str(IF_HOIST)]) == 1
    checked = json.loads(capsys.readouterr().out)
    assert checked["fences"] == report["fences"] and checked["mode"] == "check" and checked["changed"] is False


def test_explain(capsys, tmp_path):
    assert main(["fence", "--explain", str(FENCES / "14b_hoist_out_of_loop.ptx")]) == 0
    out = capsys.readouterr().out
    assert "1 fence missing (placement: hoist)" in out  # nothing was written: nothing was inserted
    assert "goes after line 34, once, in the loop preheader, instead of inside the loop" in out
    assert "path: line 32 (st.shared.b16) -> line 35 (L) -> line 36 (wgmma.mma_async)" in out
    copy = tmp_path / "k.ptx"
    copy.write_text((FENCES / "14b_hoist_out_of_loop.ptx").read_text())
    assert main(["fence", "--explain", "-i", str(copy)]) == 0
    assert "1 fence inserted (placement: hoist)" in capsys.readouterr().out
    assert copy.read_text() == expected(FENCES / "14b_hoist_out_of_loop.ptx")


def test_options_reach_the_pass(capsys):
    loop = FENCES / "14b_hoist_out_of_loop.ptx"
    assert main(["fence", "--placement", "inline", "--fence-variant", "full", str(loop)]) == 0
    out = capsys.readouterr().out
    assert out.count("fence.proxy.async;") == 1 and "L:\n\tfence.proxy.async;\n" in out
    assert main(["fence", "--check", "--extern-policy", "strict", str(FENCES / "03_unknown_extern_default_is_none.ptx")]) == 1
    capsys.readouterr()
    global_store = str(FENCES / "x08_global_store_then_tma_load.ptx")
    assert main(["fence", "--check", "--track-global", global_store]) == 1
    assert "missing fence.proxy.async.global before" in capsys.readouterr().err
    assert main(["fence", "--check", global_store]) == 0  # global memory is not tracked by default


def test_the_cluster_size_option_reaches_the_pass(tmp_path, capsys):
    """A multicast load into this rank's 8 KB slice of a 64 KB stage (``stage + rank *
    8192``): with at most 8 CTAs per cluster the slices end at 64 KB, before the word a
    generic store writes; with 16 they may reach it."""
    kernel = tmp_path / "k.ptx"
    kernel.write_text(
        ".version 8.0\n.target sm_90a\n.address_size 64\n.shared .align 1024 .b8 smem[131072];\n"
        ".shared .align 8 .b64 full;\n.visible .entry k(.param .u64 tmap)\n{\n.reg .b32 %r<8>;\n.reg .b64 %rd<2>;\n"
        "\tmov.u32 %r1, smem;\n\tst.shared.u32 [%r1+100000], 0;\n\tmov.u32 %r2, %cluster_ctarank;\n"
        "\tshl.b32 %r3, %r2, 13;\n\tadd.s32 %r4, %r1, %r3;\n\tmov.u32 %r5, full;\n\tmov.u64 %rd1, tmap;\n"
        "\tmov.u16 %rs1, 3;\n"
        "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 8192;\n"
        "\tcp.async.bulk.tensor.1d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
        " [%r4], [%rd1, {%r2}], [%r5], %rs1;\n\tret;\n}\n".replace(".reg .b64 %rd<2>;", ".reg .b64 %rd<2>;\n.reg .b16 %rs<2>;"))
    assert main(["fence", "--check", str(kernel)]) == 0
    assert main(["fence", "--check", "--max-cluster-size", "16", str(kernel)]) == 1
    assert "generic-proxy write" in capsys.readouterr().err


def test_warnings_and_notes_go_to_stderr(capsys):
    assert main(["fence", str(FENCES / "02b_cp_async_without_wait.ptx")]) == 0
    out, err = capsys.readouterr()
    assert out == expected(FENCES / "02b_cp_async_without_wait.ptx")
    assert err.startswith(f"{FENCES / '02b_cp_async_without_wait.ptx'}:37:2: warning: the cp.async write at line 34 may still")
    gate = FENCES / "x11_version_gate.ptx"
    assert main(["fence", str(gate)]) == 0
    out, err = capsys.readouterr()
    assert out == gate.read_text() and err == f"{gate}: note: left unchanged: .version 7.8 is older than 8.0 " \
                                             "(fence.proxy.async needs PTX ISA 8.0)\n"


SM80 = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n\tret;\n}\n"


@pytest.mark.parametrize("name", ["layernorm_1024.ptx", "softmax_4096.ptx", "sm_80"])
@pytest.mark.parametrize("mode", [["--check"], [], ["-o", "OUT"]])
def test_input_with_nothing_to_fence_gives_what_the_pass_gives(name, mode, tmp_path, capsys, monkeypatch):
    from ptxkit.cli import fence_cmd

    source = tmp_path / name
    source.write_text(SM80 if name == "sm_80" else (SAMPLES / "triton" / name).read_text())
    argv = ["fence", *[str(tmp_path / "out.ptx") if a == "OUT" else a for a in mode], str(source)]
    taken = []
    monkeypatch.setattr(fence_cmd, "_nothing_to_fence", lambda *a, f=fence_cmd._nothing_to_fence: taken.append(
        f(*a)) or taken[-1])
    fast = main(argv), capsys.readouterr(), (tmp_path / "out.ptx").read_text() if "-o" in mode else None
    assert taken and taken[-1] is not None  # the pass was not run
    monkeypatch.setattr(fence_cmd, "_nothing_to_fence", lambda *a: None)
    full = main(argv), capsys.readouterr(), (tmp_path / "out.ptx").read_text() if "-o" in mode else None
    assert fast == full
    assert ("left unchanged: target sm_80" in fast[1].err) == (name == "sm_80")


@pytest.mark.parametrize("argv, message", [
    (["fence", "-i", "-"], "-i needs a file"),
    (["fence", "-i", "-o", "x.ptx", "k.ptx"], "not allowed with argument"),
    (["fence", "--check", "-i", "k.ptx"], "not allowed with argument"),
    (["fence", "--json", "--diff", "k.ptx"], "not allowed with argument"),
    (["fence", "--placement", "nowhere", "k.ptx"], "invalid choice"),
    (["fence", "--max-cluster-size", "32", "k.ptx"], "invalid choice"),
    (["fence", "/nonexistent/k.ptx"], "No such file"),
])
def test_usage_errors(argv, message, capsys):
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_bad_ptx_gives_a_located_error_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.ptx"
    bad.write_text(IF_HOIST.read_text().replace("@!%p1 bra \tE;", "@!%p1 bra \tNOWHERE;"))
    before = bad.read_text()
    assert main(["fence", "-i", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"{bad}:35:13: error: branch target 'NOWHERE' is not a label in scope")
    assert bad.read_text() == before
    bad.write_text(IF_HOIST.read_text().replace("mov.u32 \t%r2, bar;", "mov.u32 \t%r2;"))  # an operand short
    before = bad.read_text()
    assert main(["fence", "-i", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"{bad}:24:2: error: 'mov.u32' takes at least 2 operands, not 1")
    assert bad.read_text() == before
    bad.write_text(".version 8.0\n.target sm_90a\n.visible .entry k()\n{\n\tmov.u32 %r1, 0\n}\n")
    assert main(["fence", str(bad), "-o", str(tmp_path / "out.ptx")]) == 2
    assert ": error: expected ';'" in capsys.readouterr().err and not (tmp_path / "out.ptx").exists()
    bad.write_text(IF_HOIST.read_text().replace("\t.shared .align 8 .b64 bar;", "\t.shared .align 8 .b64 b\u00e4r;"))
    before = bad.read_text()  # a name outside the ASCII alphabet: an internal error before
    assert main(["fence", "-i", str(bad)]) == 2
    assert capsys.readouterr().err.startswith(f"{bad}:21:24: error: unexpected 'b\u00e4r' in the .shared declaration")
    assert bad.read_text() == before


# -- many files, -j, formats ---------------------------------------------------------------------


def test_check_over_files_and_folders_exits_with_the_worst_result(tmp_path, capsys):
    folder = tmp_path / "kernels"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.ptx").write_text(IF_HOIST.read_text())
    (folder / "sub" / "b.ptx").write_text(NOTHING.read_text())
    (folder / "notes.txt").write_text("not PTX, not walked")
    (folder / ".hidden").mkdir()
    (folder / ".hidden" / "c.ptx").write_text("not walked either")
    assert main(["fence", "--check", str(folder)]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith(f"{folder / 'a.ptx'}:35:2: error: missing")
    assert err[-1] == "ptxkit fence: 2 files, 1 with missing fences (1 fence)"
    bad = tmp_path / "bad.ptx"
    bad.write_text("ret;\n")
    assert main(["fence", "--check", str(NOTHING), str(bad), str(IF_HOIST)]) == 2  # bad input beats findings
    err = capsys.readouterr().err
    assert f"{bad}:1:1: error: expected a directive at module level" in err
    assert err.endswith("ptxkit fence: 3 files, 1 with missing fences (1 fence), 1 not read as PTX\n")
    assert main(["fence", "--check", str(NOTHING), str(NOTHING)]) == 0
    assert capsys.readouterr().err == "ptxkit fence: 2 files, 0 with missing fences (0 fences)\n"


def test_parallel_runs_print_what_a_serial_run_prints(capsys):
    files = sorted(str(path) for path in FENCES.glob("*.ptx"))
    for arguments in (["--check"], ["--diff"], ["--format", "json"]):
        serial = main(["fence", *arguments, "-j", "1", *files]), capsys.readouterr()
        parallel = main(["fence", *arguments, "-j", "3", *files]), capsys.readouterr()
        assert parallel == serial
        assert serial[0] == (1 if arguments == ["--check"] else 0) and (serial[1].out or serial[1].err)


def test_json_format_is_one_report_per_line(tmp_path, capsys):
    bad = tmp_path / "bad.ptx"
    bad.write_text("ret;\n")
    assert main(["fence", "--check", "--format", "json", str(IF_HOIST), str(bad), str(NOTHING)]) == 2
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [report["file"] for report in reports] == [str(IF_HOIST), str(bad), str(NOTHING)]
    assert len(reports[0]["fences"]) == 1 and reports[2]["fences"] == []
    assert reports[1]["error"].startswith(f"{bad}:1:1: error:")


def test_in_place_over_many_files(tmp_path, capsys):
    copies = []
    for index, source in enumerate((IF_HOIST, NOTHING)):
        copies.append(tmp_path / f"k{index}.ptx")
        copies[-1].write_text(source.read_text())
    assert main(["fence", "-i", "-j", "2", str(tmp_path)]) == 0
    assert copies[0].read_text() == expected(IF_HOIST) and copies[1].read_text() == NOTHING.read_text()
    assert capsys.readouterr().err == "ptxkit fence: 2 files, 1 with inserted fences (1 fence)\n"


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["fence", "a.ptx", "b.ptx"], "several inputs need --check, -i, --diff, --explain or --format"),
        (["fence", "--diff", "-o", "x.ptx", "a.ptx", "b.ptx"], "-o takes the fenced PTX of one input"),
        (["fence", "--check", "-", "-"], "standard input (-) can be read only once"),
        (["fence", "--check", "-j", "-1", "a.ptx"], "expected a number of processes >= 0"),
    ],
)
def test_usage_errors_of_many_files(arguments, message, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("a.ptx", "b.ptx"):
        (tmp_path / name).write_text(NOTHING.read_text())
    assert main(arguments) == 2
    assert message in capsys.readouterr().err


def test_an_empty_folder_is_a_usage_error(tmp_path, capsys):
    assert main(["fence", "--check", str(tmp_path)]) == 2
    assert f"{tmp_path}: no .ptx files in this folder" in capsys.readouterr().err


def shape(value):
    """The keys of a JSON value, recursively (the first element stands for a list)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__ if value is not None else None


def test_the_json_report_has_the_documented_shape(capsys, tmp_path):
    """docs/report-format.md's example has the keys of a real report, in both modes."""
    import re

    from conftest import ROOT

    document = (ROOT / "docs" / "report-format.md").read_text()
    example = json.loads(re.search(r"```json\n(.*?)```", document, re.S).group(1).replace("…", ""))
    lines = (FENCES / "02b_cp_async_without_wait.ptx").read_text().splitlines(keepends=True)
    lines.insert(36, "\t// ptxkit: ignore[in-flight, war] -- the copy is waited for\n")  # before the warning's line 37
    kernel = tmp_path / "k.ptx"
    kernel.write_text("".join(lines))
    for argv in (["--check"], ["-o", str(tmp_path / "out.ptx")]):
        main(["fence", *argv, "--format", "json", str(kernel)])
        report = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert report["mode"] == ("check" if argv == ["--check"] else "fence")
        assert shape(report)["fences"] == shape(example)["fences"]
        assert {key: k for key, k in shape(report).items() if key != "options"} == {
            key: k for key, k in shape(example).items() if key != "options"} | {"changed": "bool"}
        assert set(report["options"]) == set(example["options"])
