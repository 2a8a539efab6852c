"""``ptxkit.cli.inputs``: folder walks (hidden folders, build output, .gitignore) and
``--exclude`` patterns."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from ptxkit.cli.inputs import Exclude, expand
from ptxkit.cli.main import main

from conftest import SAMPLES

CLEAN = (SAMPLES / "fence" / "10_ldmatrix_then_wgmma.ptx").read_text()


def tree(root, *names: str) -> None:
    for name in names:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(CLEAN)


def found(root, excludes=(), use_git: bool = True) -> list[str]:
    return [os.path.relpath(path, root) for path in expand([str(root)], excludes, use_git)]


def test_walks_leave_out_hidden_folders_and_build_output(tmp_path):
    tree(tmp_path, "a.ptx", "sub/b.ptx", ".cache/c.ptx", "build/d.ptx", "dist/e.ptx", "node_modules/x/f.ptx",
         "sub/__pycache__/g.ptx", "sub/building/h.ptx", "notes.txt")
    assert found(tmp_path, use_git=False) == ["a.ptx", "sub/b.ptx", "sub/building/h.ptx"]
    # a folder named on the command line is walked, whatever its name
    assert [os.path.relpath(p, tmp_path) for p in expand([str(tmp_path / "build")])] == ["build/d.ptx"]


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_walks_leave_out_what_git_ignores(tmp_path):
    tree(tmp_path, "kernels/a.ptx", "kernels/generated/b.ptx", "kernels/c_ref.ptx", "out/d.ptx")
    (tmp_path / ".gitignore").write_text("generated/\n*_ref.ptx\n/out\n")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert found(tmp_path) == ["kernels/a.ptx"]
    assert found(tmp_path / "kernels") == ["a.ptx"]  # a walk below the root reads the same rules
    assert found(tmp_path, use_git=False) == ["kernels/a.ptx", "kernels/c_ref.ptx", "kernels/generated/b.ptx",
                                              "out/d.ptx"]
    # a file named on the command line is read, ignored or not
    assert expand([str(tmp_path / "out" / "d.ptx")]) == [str(tmp_path / "out" / "d.ptx")]


@pytest.mark.parametrize("pattern, excluded", [
    ("vendor", ["vendor/a.ptx", "src/vendor/b.ptx"]),
    ("vendor/", ["vendor/a.ptx", "src/vendor/b.ptx"]),
    ("/vendor", ["vendor/a.ptx"]),
    ("src/vendor", ["src/vendor/b.ptx"]),
    ("*_ref.ptx", ["src/k_ref.ptx"]),
    ("src/**/*.ptx", ["src/k.ptx", "src/k_ref.ptx", "src/vendor/b.ptx"]),
    ("**/b.ptx", ["src/vendor/b.ptx"]),
    ("k[_.]*", ["src/k.ptx", "src/k_ref.ptx"]),
])
def test_exclude_patterns_read_as_gitignore_lines(tmp_path, pattern, excluded):
    names = ["src/k.ptx", "src/k_ref.ptx", "src/vendor/b.ptx", "vendor/a.ptx"]
    tree(tmp_path, *names)
    kept = found(tmp_path, [Exclude(pattern, str(tmp_path))], use_git=False)
    assert sorted(set(names) - set(kept)) == sorted(excluded)


def test_exclude_applies_to_files_named_too(tmp_path, capsys, monkeypatch):
    """pre-commit names the staged files: --exclude still leaves them out."""
    tree(tmp_path, "third_party/k.ptx")
    (tmp_path / "third_party" / "k.ptx").write_text((SAMPLES / "fence" / "13_hoist_out_of_if.ptx").read_text())
    monkeypatch.chdir(tmp_path)
    assert main(["fence", "--check", "third_party/k.ptx"]) == 1
    capsys.readouterr()
    assert main(["fence", "--check", "--exclude", "third_party", "third_party/k.ptx"]) == 0
    assert capsys.readouterr() == ("", "")


def test_a_folder_with_no_ptx_file_is_still_an_error(tmp_path, capsys):
    tree(tmp_path, "build/k.ptx")
    assert main(["fence", "--check", str(tmp_path)]) == 2
    assert f"{tmp_path}: no .ptx files in this folder" in capsys.readouterr().err


def test_exclude_rules_travel_to_worker_processes():
    import pickle

    rule = pickle.loads(pickle.dumps(Exclude("src/**", "/repo")))
    assert rule.matches("/repo/src/a/k.ptx") and not rule.matches("/repo/k.ptx")
