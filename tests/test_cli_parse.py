"""``ptxkit parse`` and the CLI's common behaviour (exit codes, diagnostics, start-up)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ptxkit.cli.main import main

from conftest import SAMPLES

FUNCTIONS = SAMPLES / "syntax" / "functions.ptx"


def test_parse_prints_a_line_per_function(capsys):
    assert main(["parse", str(FUNCTIONS)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"{FUNCTIONS}: PTX 8.0, target sm_90a, 64-bit addresses, 7 functions"
    assert lines[1] == f"{FUNCTIONS}:8:1: .extern .func vprintf (2 parameters): declaration"
    assert lines[5].startswith(f"{FUNCTIONS}:34:1: .visible .entry tuned (3 parameters): 23 instructions, 8 labels")
    assert lines[5].endswith(", .maxntid 128, 1, 1, .minnctapersm 2, .maxnreg 64")
    assert len(lines) == 8


def test_parse_reads_stdin(monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FUNCTIONS.read_bytes())))
    assert main(["parse", "-"]) == 0
    assert capsys.readouterr().out.startswith("<stdin>: PTX 8.0")


def test_bad_input_is_a_diagnostic_with_exit_code_2(tmp_path, capsys):
    bad = tmp_path / "bad.ptx"
    bad.write_text(".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k()\n{\n\tadd.s32 %r1, , 1;\n}\n")
    assert main(["parse", str(bad)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"{bad}:6:15: error: expected an operand"
    assert err[1:] == ["\tadd.s32 %r1, , 1;", "\t" + " " * 13 + "^"]


def test_missing_file_and_usage_errors(capsys):
    assert main(["parse", "/nonexistent/x.ptx"]) == 2
    assert "No such file" in capsys.readouterr().err
    assert main([]) == 2
    assert main(["parse"]) == 2
    assert main(["no-such-command"]) == 2


def test_help_and_version_do_not_import_heavy_modules():
    code = (
        "import sys\n"
        "from ptxkit.cli.main import main\n"
        "for argv in (['--help'], ['--version']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = sorted(m for m in ('numpy', 'networkx', 'cuda', 'hypothesis') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("argv", [["--help"], ["--version"]])
def test_console_entry_answers(argv):
    result = subprocess.run([sys.executable, "-m", "ptxkit", *argv], capture_output=True, text=True)
    assert result.returncode == 0 and "ptxkit" in result.stdout


def test_parse_takes_folders_and_runs_in_worker_processes(tmp_path, capsys):
    (tmp_path / "sub").mkdir()
    for name in ("a.ptx", "sub/b.ptx"):
        (tmp_path / name).write_text(FUNCTIONS.read_text())
    (tmp_path / "bad.ptx").write_text("ret;\n")
    serial = main(["parse", str(tmp_path)]), capsys.readouterr()
    parallel = main(["parse", "-j", "2", str(tmp_path)]), capsys.readouterr()
    assert serial == parallel and serial[0] == 2
    out, err = serial[1]
    assert out.splitlines()[0].startswith(f"{tmp_path / 'a.ptx'}: PTX 8.0") and len(out.splitlines()) == 16
    assert err.startswith(f"{tmp_path / 'bad.ptx'}:1:1: error: expected a directive at module level")
    assert err.endswith("ptxkit parse: 3 files, 2 parsed, 1 with errors\n")
