"""``.pre-commit-hooks.yaml``: the hook pre-commit runs on committed ``.ptx`` files, and
``pre-commit try-repo`` running it on a scratch repository."""

from __future__ import annotations

import importlib.util
import os
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


# -- pre-commit itself: try-repo on a scratch repository -------------------------------------------


def git(folder, *arguments) -> str:
    command = ["git", "-C", str(folder), "-c", "user.name=ptxkit tests", "-c", "user.email=tests@ptxkit.invalid",
               "-c", "commit.gpgsign=false", *arguments]
    return subprocess.run(command, check=True, capture_output=True, text=True).stdout


@pytest.fixture(scope="module")
def try_repo(tmp_path_factory):
    """``pre-commit try-repo`` of this checkout as it is now (a commit of its tracked files
    and the new ones git does not ignore) in a scratch repository that holds a PTX that
    needs a fence, its fenced version, an empty .ptx and, under vendor/ (which its
    pyproject.toml excludes), another PTX that needs a fence. Each call builds the hook's
    environment afresh, as try-repo does (pip installs ptxkit and its dependencies from
    the package index pip is configured with: a local mirror works offline)."""
    if importlib.util.find_spec("pre_commit") is None:
        pytest.skip("pre-commit is not installed (pip install -e '.[dev]')")
    import shutil

    if shutil.which("git") is None:
        pytest.skip("needs git")
    snapshot = tmp_path_factory.mktemp("ptxkit-checkout")
    for name in git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard").split("\0"):
        source = ROOT / name
        if name and source.is_file():
            (snapshot / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, snapshot / name)
    git(snapshot, "init", "-q")
    git(snapshot, "add", "-A")
    git(snapshot, "commit", "-q", "-m", "snapshot")
    revision = git(snapshot, "rev-parse", "HEAD").strip()
    scratch = tmp_path_factory.mktemp("scratch")
    git(scratch, "init", "-q")
    (scratch / "vendor").mkdir()
    (scratch / "needs_fence.ptx").write_text((SAMPLES / "fence" / "13_hoist_out_of_if.ptx").read_text())
    (scratch / "vendor" / "needs_fence.ptx").write_text((SAMPLES / "fence" / "13_hoist_out_of_if.ptx").read_text())
    (scratch / "clean.ptx").write_text((SAMPLES / "fence" / "expected" / "13_hoist_out_of_if.ptx").read_text())
    (scratch / "empty.ptx").write_text("")
    (scratch / "pyproject.toml").write_text('[tool.ptxkit]\nexclude = ["vendor"]\n')
    git(scratch, "add", "-A")
    environment = {**os.environ, "PRE_COMMIT_COLOR": "never", "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("home"))}

    def run(*files) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "pre_commit", "try-repo", str(snapshot), "ptxkit-fence-check",
                   "--ref", revision, "--files", *files]
        done = subprocess.run(command, cwd=scratch, capture_output=True, text=True, timeout=900, env=environment)
        if "An unexpected error has occurred" in done.stdout + done.stderr and "pip" in done.stdout + done.stderr:
            pytest.skip("pre-commit could not pip-install the hook's environment (no package index reachable?)")
        return done

    return run


def test_pre_commit_blocks_a_ptx_that_needs_a_fence_and_an_empty_one(try_repo):
    done = try_repo("needs_fence.ptx", "empty.ptx", "clean.ptx", "vendor/needs_fence.ptx")
    assert done.returncode == 1, done.stdout
    report = done.stdout.split("- exit code:")[1]
    assert "needs_fence.ptx:35:2: error: missing fence.proxy.async.shared::cta" in report
    assert "[ptxkit.fence.raw]" in report and "vendor/" not in report and "clean.ptx" not in report
    assert "empty.ptx:1:1: error" in report


def test_pre_commit_passes_a_clean_ptx_and_honours_an_exclude(try_repo):
    done = try_repo("clean.ptx", "vendor/needs_fence.ptx")  # pre-commit names the file; pyproject excludes it
    assert done.returncode == 0, done.stdout
    assert "ptxkit fence --check" in done.stdout and "Passed" in done.stdout
