"""What every command that reads PTX shares (`ptxkit.cli.common`): a file that is no PTX
module is an error at its start, with exit code 2 and nothing written."""

from __future__ import annotations

import os

import pytest

from ptxkit.cli.main import main

#: files that ptxas refuses as no module ("Missing .version directive at start of file")
NOT_A_MODULE = {"empty": "", "blank lines": "\n\n", "comments only": "// a comment\n/* another */\n"}
READERS = [["parse"], ["fence"], ["fence", "--check"], ["cfg"], ["assemble", "--no-cache", "-o", "OUT"]]


@pytest.mark.parametrize("text", NOT_A_MODULE.values(), ids=NOT_A_MODULE)
@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_file_without_a_version_directive_is_an_error_at_line_1(command, text, tmp_path, capsys):
    path, out = tmp_path / "kernel.ptx", tmp_path / "kernel.cubin"
    path.write_text(text)
    arguments = [str(out) if word == "OUT" else word for word in command[1:]]
    assert main([command[0], str(path), *arguments]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:1:1: error: no .version directive: not a PTX module")
    assert "input.ptx" not in err and sorted(os.listdir(tmp_path)) == ["kernel.ptx"] and path.read_text() == text


@pytest.mark.parametrize("command", READERS, ids=" ".join)
def test_a_module_must_start_with_its_version_directive(command, tmp_path, capsys):
    path = tmp_path / "kernel.ptx"
    path.write_text("// generated\n.target sm_90a\n.version 8.0\n.address_size 64\n")
    arguments = [str(tmp_path / "kernel.cubin") if word == "OUT" else word for word in command[1:]]
    assert main([command[0], str(path), *arguments]) == 2
    assert capsys.readouterr().err.startswith(
        f"{path}:2:1: error: expected a .version directive first: a PTX module starts with one")
