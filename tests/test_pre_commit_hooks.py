"""``.pre-commit-hooks.yaml``: the hook pre-commit runs on committed ``.ptx`` files."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib

import pytest

from conftest import ROOT, SAMPLES

yaml = pytest.importorskip("yaml", reason="PyYAML reads the hook file (pip install -e '.[dev]')")


@pytest.fixture(scope="module")
def hook() -> dict:
    (hook,) = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    return hook


def test_the_hook_is_declared_as_pre_commit_expects(hook):
    assert hook["id"] == "ptxkit-fence-check" and hook["language"] == "python"
    assert {"id", "name", "entry", "language"} <= set(hook)
    files = re.compile(hook["files"])
    assert files.search("kernels/gemm.ptx") and not files.search("gemm.ptx.o") and not files.search("gemm.py")
    program = shlex.split(hook["entry"])[0]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts[program] == "ptxkit.cli.main:console_main"  # what pre-commit's pip install puts on PATH


def run_hook(hook: dict, *files) -> subprocess.CompletedProcess:
    """The hook's entry with the staged files appended, as pre-commit runs it."""
    command = [sys.executable, "-m", "ptxkit", *shlex.split(hook["entry"])[1:], *map(str, files)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def test_the_hook_fails_the_commit_on_a_missing_fence(hook):
    clean = [SAMPLES / "fence" / "10_ldmatrix_then_wgmma.ptx", SAMPLES / "fence" / "expected" / "13_hoist_out_of_if.ptx"]
    assert run_hook(hook, *clean).returncode == 0
    done = run_hook(hook, *clean, SAMPLES / "fence" / "13_hoist_out_of_if.ptx")
    assert done.returncode == 1
    assert "13_hoist_out_of_if.ptx:35:2: error: missing fence.proxy.async.shared::cta" in done.stderr
    assert done.stderr.rstrip().endswith("3 files, 1 with missing fences (1 fence)")


def test_the_hook_fails_on_a_file_that_is_not_ptx(hook, tmp_path):
    bad = tmp_path / "broken.ptx"
    bad.write_text(".version 8.0\n.target sm_90a\n.visible .entry k(\n")
    done = run_hook(hook, bad)
    assert done.returncode == 2 and f"{bad}:" in done.stderr
