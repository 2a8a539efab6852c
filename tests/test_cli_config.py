"""``ptxkit.cli.config``: ``[tool.ptxkit]`` in the nearest ``pyproject.toml``, flags winning."""

from __future__ import annotations

import json

import pytest

from ptxkit.cli import config
from ptxkit.cli.main import main

from conftest import SAMPLES

THREE = SAMPLES / "fence" / "x23_three_reports_one_suppressed.ptx"
WAR = SAMPLES / "fence" / "h10a_war_ld_shared_then_tma_load.ptx"


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A repository with kernels/ and a pyproject.toml; the working folder is elsewhere."""
    (tmp_path / ".git").mkdir()
    (tmp_path / "kernels" / "vendor").mkdir(parents=True)
    (tmp_path / "kernels" / "war.ptx").write_text(WAR.read_text())
    (tmp_path / "kernels" / "vendor" / "v.ptx").write_text(WAR.read_text())
    monkeypatch.chdir(tmp_path / "kernels")
    return tmp_path


def write_config(project, text: str) -> None:
    (project / "pyproject.toml").write_text(f"[project]\nname = \"kernels\"\n\n[tool.ptxkit]\n{text}")


def test_settings_fill_what_the_command_line_leaves_unset(project, capsys):
    assert main(["fence", "--check", "war.ptx"]) == 1
    capsys.readouterr()
    write_config(project, "war = false\n")
    assert main(["fence", "--check", "war.ptx"]) == 0
    assert main(["fence", "--check", "--war", "war.ptx"]) == 1  # the flag wins
    capsys.readouterr()
    write_config(project, 'fence-side = "writer"\nmax-cluster-size = 2\nplacement = "inline"\n')
    main(["fence", "--check", "--format", "json", "war.ptx"])
    options = json.loads(capsys.readouterr().out)["options"]
    assert (options["fence_side"], options["max_cluster"], options["placement"]) == ("writer", 2, "inline")
    main(["fence", "--check", "--format", "json", "--fence-side", "issuer", "war.ptx"])
    assert json.loads(capsys.readouterr().out)["options"]["fence_side"] == "issuer"


def test_excludes_and_the_baseline_are_relative_to_the_file(project, capsys):
    write_config(project, 'exclude = ["kernels/vendor"]\nbaseline = "ci/baseline.json"\nstrict = true\n')
    (project / "ci").mkdir()
    assert main(["fence", "--check", "--write-baseline", "../ci/baseline.json", "."]) == 0
    assert "1 report recorded" in capsys.readouterr().err  # war.ptx only: vendor/ is excluded
    assert main(["fence", "--check", "."]) == 0  # the configured baseline holds it
    assert main(["fence", "--check", "vendor/v.ptx"]) == 0  # excluded even when named
    assert capsys.readouterr() == ("", "")
    assert main(["fence", "--check", "--exclude", "war.ptx", "--format", "json", "."]) == 0
    assert capsys.readouterr().out == ""  # --exclude adds to the file's patterns: nothing left


def test_strict_from_the_file(project, capsys):
    (project / "kernels" / "war.ptx").write_text((SAMPLES / "fence" / "expected" / THREE.name).read_text())
    write_config(project, "strict = true\n")
    assert main(["fence", "--check", "war.ptx"]) == 1
    assert "[ptxkit.suppression.unused]" in capsys.readouterr().err


@pytest.mark.parametrize("text, message", [
    ("warr = false\n", "[tool.ptxkit] has no key 'warr' (the keys: placement,"),
    ("war = 0\n", "[tool.ptxkit] war takes true or false, not 0"),
    ('fence-side = "reader"\n', "[tool.ptxkit] fence-side takes one of issuer, writer, not 'reader'"),
    ("max-cluster-size = 32\n", "[tool.ptxkit] max-cluster-size takes one of 1..16, not 32"),
    ("exclude = [1]\n", "[tool.ptxkit] exclude takes a list of glob patterns, not [1]"),
    ("war = \n", "not valid TOML"),
])
def test_a_bad_setting_is_a_usage_error(project, capsys, text, message):
    write_config(project, text)
    assert main(["fence", "--check", "war.ptx"]) == 2
    err = capsys.readouterr().err
    assert "pyproject.toml: " in err and message in err


def test_the_nearest_file_within_the_repository_is_read(project):
    write_config(project, "war = false\n")
    assert config.find(["war.ptx"]).settings == {"war": False}
    (project / "kernels" / "pyproject.toml").write_text("[project]\nname = \"inner\"\n")
    assert config.find(["war.ptx"]) == config.Config(str(project / "kernels" / "pyproject.toml"), {})
    # the repository's root ends the search: a pyproject.toml above it is another project's
    (project / "kernels" / "pyproject.toml").unlink()
    outer = project / "outer"
    (outer / "repo" / ".git").mkdir(parents=True)
    (outer / "pyproject.toml").write_text("[tool.ptxkit]\nwar = false\n")
    assert config.find([str(outer / "repo" / "k.ptx")]).path is None
