"""``ptxkit.toolkit``: ptxas and cuobjdump are looked up the same way, in the same order."""

from __future__ import annotations

import os
import stat
import sys
import types

import pytest

from ptxkit import toolkit
from ptxkit.ptxas import find_cuobjdump

from conftest import SAMPLES

VECTOR_ADD = SAMPLES / "toolchain" / "vector_add.ptx"

posix_only = pytest.mark.skipif(os.name == "nt", reason="fake tools are shell scripts")


def fake_tool(folder, name="cuobjdump"):
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def nothing_installed(monkeypatch, tmp_path):
    for variable in ("CUOBJDUMP", "PTXAS", "CUDA_HOME", "CUDA_PATH"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.setitem(sys.modules, "cuda.pathfinder", None)  # import fails: "not installed"
    return monkeypatch


@posix_only
def test_cuobjdump_lookup_order_matches_ptxas(nothing_installed, tmp_path):
    pathfinder = types.ModuleType("cuda.pathfinder")
    wheel = fake_tool(tmp_path / "site-packages" / "nvidia" / "cu13" / "bin")
    pathfinder.find_nvidia_binary_utility = lambda name: str(wheel) if name == "cuobjdump" else None
    nothing_installed.setitem(sys.modules, "cuda.pathfinder", pathfinder)
    assert find_cuobjdump() == str(wheel)  # the wheel, last resort
    on_path = fake_tool(tmp_path / "path-bin")
    nothing_installed.setenv("PATH", str(on_path.parent))
    assert find_cuobjdump() == str(on_path)
    cuda_path = fake_tool(tmp_path / "cuda-path" / "bin")
    nothing_installed.setenv("CUDA_PATH", str(cuda_path.parent.parent))
    assert find_cuobjdump() == str(cuda_path)
    cuda_home = fake_tool(tmp_path / "cuda-home" / "bin")
    nothing_installed.setenv("CUDA_HOME", str(cuda_home.parent.parent))
    assert find_cuobjdump() == str(cuda_home)
    explicit = fake_tool(tmp_path / "explicit")
    nothing_installed.setenv("CUOBJDUMP", str(explicit))
    assert find_cuobjdump() == str(explicit)
    assert [where for where, _ in toolkit.tool_candidates("cuobjdump")] == [
        "$CUOBJDUMP", "$CUDA_HOME/bin", "$CUDA_PATH/bin", "PATH", "cuda.pathfinder"]


@posix_only
def test_nothing_found_says_where_and_how(nothing_installed):
    with pytest.raises(FileNotFoundError) as caught:
        find_cuobjdump()
    message = str(caught.value)
    for place in ("$CUOBJDUMP (not set)", "$CUDA_HOME/bin (not set)", "PATH (not found)",
                  "cuda.pathfinder (not installed)", "nvidia-cuda-cuobjdump wheel"):
        assert place in message


@posix_only
def test_a_wrong_variable_is_an_error_not_skipped(nothing_installed, tmp_path):
    nothing_installed.setenv("PATH", str(fake_tool(tmp_path / "bin").parent))
    nothing_installed.setenv("CUOBJDUMP", str(tmp_path / "missing"))
    with pytest.raises(FileNotFoundError, match=r"\$CUOBJDUMP is .*missing.*not an executable"):
        find_cuobjdump()


@pytest.mark.ptxas
def test_the_toolkit_extra_gives_a_working_cuobjdump():
    """With ``pip install -e '.[toolkit]'`` (as CI installs it), cuobjdump shows SASS."""
    import subprocess
    import tempfile

    import ptxkit

    try:
        tool = find_cuobjdump()
    except FileNotFoundError as err:
        pytest.skip(f"cuobjdump is not installed: {err}")
    cubin = ptxkit.assemble(VECTOR_ADD.read_text(), cache=False)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "k.cubin")
        with open(path, "wb") as handle:
            handle.write(cubin.data)
        listing = subprocess.run([tool, "-sass", path], capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    assert "Function : vector_add" in listing.stdout
