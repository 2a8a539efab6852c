"""What every command shares: files written atomically with the mode a compiler gives
them (0666 less the umask), an existing file's mode kept, no partial file on error."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from ptxkit.cli.common import new_file_mode, write_atomically
from ptxkit.cli.main import main

from conftest import SAMPLES

IF_HOIST = SAMPLES / "fence" / "13_hoist_out_of_if.ptx"
VECTOR_ADD = SAMPLES / "toolchain" / "vector_add.ptx"

#: command -> its arguments, writing OUT
WRITERS = {
    "fence -o": ["fence", str(IF_HOIST), "-o", "OUT"],
    "cfg --dot -o": ["cfg", str(IF_HOIST), "--dot", "-o", "OUT"],
    "cfg --svg -o": pytest.param(["cfg", str(IF_HOIST), "--svg", "-o", "OUT"],
                                 marks=pytest.mark.skipif(shutil.which("dot") is None,
                                                          reason="Graphviz's dot is not installed")),
    "assemble -o": pytest.param(["assemble", str(VECTOR_ADD), "--no-cache", "-o", "OUT"],
                                marks=pytest.mark.ptxas),
    "gen -o": ["gen", "rowreduce", "--cols", "1024", "--dtype", "f32", "--op", "sum", "-o", "OUT"],
}


@pytest.fixture(params=[0o022, 0o002, 0o077], ids=["umask022", "umask002", "umask077"])
def umask(request):
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=list(WRITERS))
def test_new_outputs_get_the_mode_the_umask_gives(arguments, umask, tmp_path, capsys):
    target = tmp_path / "out"
    assert main([str(target) if a == "OUT" else a for a in arguments]) == 0, capsys.readouterr().err
    assert mode_of(target) == 0o666 & ~umask
    assert os.listdir(tmp_path) == ["out"]  # no temporary file left behind


@pytest.mark.parametrize("arguments", list(WRITERS.values()), ids=list(WRITERS))
def test_an_existing_output_keeps_its_mode(arguments, tmp_path, capsys):
    target = tmp_path / "out"
    target.write_text("old")
    target.chmod(0o640)
    assert main([str(target) if a == "OUT" else a for a in arguments]) == 0, capsys.readouterr().err
    assert mode_of(target) == 0o640 and target.read_bytes() != b"old"


def test_in_place_keeps_the_inputs_mode(umask, tmp_path):
    copy = tmp_path / "k.ptx"
    copy.write_text(IF_HOIST.read_text())
    copy.chmod(0o604)
    assert main(["fence", "-i", str(copy)]) == 0
    assert mode_of(copy) == 0o604 and "fence.proxy.async" in copy.read_text()


def test_new_file_mode_reads_the_umask_and_leaves_it(umask):
    assert new_file_mode() == 0o666 & ~umask
    assert os.umask(umask) == umask


def test_a_failed_write_leaves_the_destination_as_it_was(tmp_path, monkeypatch):
    target = tmp_path / "out"
    target.write_bytes(b"old")

    def full_disk(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full_disk)
    with pytest.raises(OSError, match="No space left"):
        write_atomically(str(target), b"new")
    assert target.read_bytes() == b"old" and os.listdir(tmp_path) == ["out"]
