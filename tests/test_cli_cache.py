"""``ptxkit cache info`` and ``ptxkit cache clear``."""

from __future__ import annotations

import pytest

from ptxkit.cli.main import main
from ptxkit.cubin_cache import CubinCache


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cubins"
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(folder))
    monkeypatch.delenv("PTXKIT_CACHE_MAX", raising=False)
    return folder


def test_info_on_an_empty_cache(cache, capsys):
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out == (f"path:    {cache}\nentries: 0\nsize:    0 bytes\n"
                                       "cap:     1.0 GiB (1073741824 bytes) (the default; PTXKIT_CACHE_MAX sets it)\n")
    assert not cache.exists()  # looking creates nothing


def test_info_counts_the_entries_and_shows_the_cap_set(cache, capsys, monkeypatch):
    store = CubinCache(cache)
    for key in ("aa01", "bb02", "bb03"):
        store.put(key, bytes(2000), "log")
    size = sum(entry.size for entry in store.scan())
    monkeypatch.setenv("PTXKIT_CACHE_MAX", "500M")
    assert main(["cache", "info"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:] == ["entries: 3", f"size:    {size / 1024:.1f} KiB ({size} bytes)",
                         "cap:     500.0 MiB (524288000 bytes) (PTXKIT_CACHE_MAX)"]
    monkeypatch.setenv("PTXKIT_CACHE_MAX", "0")
    assert main(["cache", "info"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "cap:     none (PTXKIT_CACHE_MAX=0)"


def test_clear_empties_the_cache(cache, capsys):
    store = CubinCache(cache)
    for key in ("aa01", "bb02"):
        store.put(key, bytes(2000), "log")
    size = sum(entry.size for entry in store.scan())
    assert main(["cache", "clear"]) == 0
    assert capsys.readouterr().out == f"removed 2 entries ({size / 1024:.1f} KiB ({size} bytes)) from {cache}\n"
    assert store.scan() == [] and store.get("aa01") is None
    assert main(["cache", "info"]) == 0 and "entries: 0\n" in capsys.readouterr().out


def test_a_cache_turned_off(monkeypatch, capsys):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", "0")
    for action in ("info", "clear"):
        assert main(["cache", action]) == 0
        assert capsys.readouterr().out == "the cubin cache is off (PTXKIT_CACHE_DIR=0)\n"


def test_a_bad_cap_is_an_error(cache, capsys, monkeypatch):
    monkeypatch.setenv("PTXKIT_CACHE_MAX", "huge")
    assert main(["cache", "info"]) == 2
    assert capsys.readouterr().err == ("ptxkit: error: PTXKIT_CACHE_MAX: expected a size such as 500M, 2G or a "
                                       "number of bytes, got 'huge'\n")


@pytest.mark.parametrize("arguments", [["cache"], ["cache", "prune"]])
def test_an_action_is_needed(arguments, capsys):
    assert main(arguments) == 2
    assert "usage: ptxkit cache" in capsys.readouterr().err
