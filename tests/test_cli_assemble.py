"""``ptxkit assemble``: output, diagnostics, exit codes, and no partial output."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ptxkit.cli.main import main
from ptxkit.ptxas import kernel_names

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "toolchain"
BROKEN = ".version 8.0\n.target sm_90a\n.address_size 64\n\n.visible .entry k()\n{\n\tbogus.u32 %r1;\n\tret;\n}\n"


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture
def vector_add(tmp_path) -> Path:
    return Path(shutil.copy(SAMPLES / "vector_add.ptx", tmp_path / "vector_add.ptx"))


@pytest.mark.ptxas
def test_writes_a_cubin_with_the_kernel(vector_add, tmp_path, capsys):
    out = tmp_path / "out.cubin"
    assert main(["assemble", str(vector_add), "--arch", "sm_90a", "-o", str(out)]) == 0
    assert kernel_names(out.read_bytes()) == ["vector_add"]
    assert capsys.readouterr() == ("", "")


@pytest.mark.ptxas
def test_verbose_prints_resource_usage(vector_add, tmp_path, capsys):
    assert main(["assemble", str(vector_add), "-o", str(tmp_path / "o.cubin"), "-v"]) == 0
    err = capsys.readouterr().err
    assert f"{vector_add}: vector_add: " in err and " registers, 0 bytes shared memory, 0 bytes stack frame" in err
    assert "(sm_90a, ptxas " in err


@pytest.mark.ptxas
def test_default_output_is_next_to_the_input(vector_add):
    assert main(["assemble", str(vector_add), "--arch", "sm_80"]) == 0
    assert kernel_names(vector_add.with_suffix(".cubin").read_bytes()) == ["vector_add"]


@pytest.mark.ptxas
def test_ptxas_errors_exit_2_with_file_and_line_and_leave_no_output(tmp_path, capsys):
    source = tmp_path / "broken.ptx"
    source.write_text(BROKEN)
    out = tmp_path / "out.cubin"
    assert main(["assemble", str(source), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"{source}:7:1: error: " in err and "[ptxas]" in err and "input.ptx" not in err
    assert not out.exists()
    out.write_bytes(b"previous")
    assert main(["assemble", str(source), "-o", str(out)]) == 2
    assert out.read_bytes() == b"previous"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".ptxkit-")] == []


@pytest.mark.ptxas
def test_warnings_are_printed_and_the_cubin_written(tmp_path, capsys):
    source = tmp_path / "w.ptx"
    source.write_text(".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() .minnctapersm 4\n{\n\tret;\n}\n")
    assert main(["assemble", str(source), "-o", str(tmp_path / "w.cubin")]) == 0
    assert f"{source}:7:1: warning: .minnctapersm" in capsys.readouterr().err
    assert (tmp_path / "w.cubin").exists()


@pytest.mark.ptxas
def test_ptxas_options_are_passed_on(vector_add, tmp_path, capsys):
    assert main(["assemble", str(vector_add), "-o", str(tmp_path / "o.cubin"), "-X=--no-such-option"]) == 2
    assert "Unknown option" in capsys.readouterr().err


@pytest.mark.ptxas
def test_standard_input_and_output(vector_add):
    done = subprocess.run(
        [sys.executable, "-m", "ptxkit.cli.main", "assemble", "-", "-o", "-"],
        input=vector_add.read_bytes(), capture_output=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert kernel_names(done.stdout) == ["vector_add"]


def test_standard_input_needs_an_output(capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    assert main(["assemble", "-"]) == 2
    assert "needs -o" in capsys.readouterr().err


@pytest.mark.parametrize("arch", ["sm90", "90", "compute_90"])
def test_a_bad_arch_is_a_usage_error(vector_add, arch, capsys):
    assert main(["assemble", str(vector_add), "--arch", arch]) == 2
    assert "arch must look like sm_90a" in capsys.readouterr().err


def test_a_missing_file_exits_2(tmp_path, capsys):
    assert main(["assemble", str(tmp_path / "nope.ptx"), "-o", str(tmp_path / "o.cubin")]) == 2
    assert "nope.ptx" in capsys.readouterr().err


def test_no_ptxas_exits_2_and_says_how_to_get_one(vector_add, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PTXAS", str(tmp_path / "no-ptxas-here"))
    assert main(["assemble", str(vector_add), "-o", str(tmp_path / "o.cubin")]) == 2
    err = capsys.readouterr().err
    assert "ptxkit: error: $PTXAS is" in err and "ptxkit[toolkit]" in err
    assert not (tmp_path / "o.cubin").exists()
