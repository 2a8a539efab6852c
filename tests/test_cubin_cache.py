"""ptxkit.cubin_cache: keys, atomic entries, damaged entries, location, and use by assemble."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
from pathlib import Path

import pytest

from ptxkit.cubin_cache import CubinCache, cache_directory, cache_key, default_cache
from ptxkit.ptxas import assemble

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "toolchain"
KEY = cache_key(b"ptx", "sm_90a", "3", "13.0.88")


def test_an_entry_round_trips(tmp_path):
    store = CubinCache(tmp_path)
    assert store.get(KEY) is None
    store.put(KEY, b"\x7fELF cubin bytes", "ptxas info    : Used 4 registers\n")
    assert store.get(KEY) == (b"\x7fELF cubin bytes", "ptxas info    : Used 4 registers\n")
    assert store.path(KEY).parent.name == KEY[:2]
    assert [p.name for p in store.path(KEY).parent.iterdir()] == [f"{KEY}.entry"]  # no temporary left


def test_keys_depend_on_every_part_and_on_their_boundaries():
    keys = {
        cache_key(b"ptx", "sm_90a", "3"),
        cache_key(b"ptx", "sm_90", "3"),
        cache_key(b"ptx", "sm_90a", "2"),
        cache_key(b"ptx2", "sm_90a", "3"),
        cache_key(b"pt", "xsm_90a", "3"),
        cache_key(b"ptx", "sm_90a", "3", "--maxrregcount=32"),
    }
    assert len(keys) == 6
    assert cache_key(b"ptx", "sm_90a") == cache_key("ptx", b"sm_90a")


@pytest.mark.parametrize(
    "damage",
    [
        lambda raw: raw[:-1],  # truncated cubin
        lambda raw: raw[:20],  # truncated header
        lambda raw: b"",  # empty file
        lambda raw: raw[:-3] + bytes([raw[-3] ^ 1]) + raw[-2:],  # one flipped bit
        lambda raw: b"NOTPTXKT" + raw[8:],  # foreign file
        lambda raw: raw + b"extra",  # trailing garbage
    ],
    ids=["truncated", "short-header", "empty", "bit-flip", "magic", "trailing"],
)
def test_damaged_entries_read_as_misses_and_are_removed(tmp_path, damage):
    store = CubinCache(tmp_path)
    store.put(KEY, b"\x7fELF" + bytes(range(256)), "log\n")
    path = store.path(KEY)
    path.write_bytes(damage(path.read_bytes()))
    assert store.get(KEY) is None
    assert not path.exists()


def test_an_unwritable_cache_only_warns(tmp_path):
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the cache folder should be")
    store = CubinCache(blocker)
    with pytest.warns(UserWarning, match="could not write the cubin cache"):
        store.put(KEY, b"data", "")
    assert store.get(KEY) is None


def test_location_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path / "mine"))
    assert cache_directory() == tmp_path / "mine"
    assert default_cache().directory == tmp_path / "mine"
    monkeypatch.setenv("PTXKIT_CACHE_DIR", "0")
    assert cache_directory() is None and default_cache() is None
    monkeypatch.delenv("PTXKIT_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name == "posix" and not os.uname().sysname == "Darwin":
        assert cache_directory() == tmp_path / "xdg" / "ptxkit" / "cubins"
    assert cache_directory().parts[-1] == "cubins"


def _hammer(directory: str, writer: int, rounds: int) -> list[int]:
    """Write this writer's payload `rounds` times and read after each write; returns the
    writers whose complete payloads were read (a damaged read would return None)."""
    store = CubinCache(directory)
    payload = bytes([writer]) * (200_000 + writer)
    seen = []
    for _ in range(rounds):
        store.put(KEY, payload, f"writer {writer}\n")
        entry = store.get(KEY)
        if entry is not None:
            data, log = entry
            number = int(log.split()[1])
            assert data == bytes([number]) * (200_000 + number)
            seen.append(number)
    return seen


def test_concurrent_processes_never_read_a_half_written_entry(tmp_path):
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(4, mp_context=context) as pool:
        results = list(pool.map(_hammer, [str(tmp_path)] * 4, range(4), [40] * 4))
    assert sum(len(seen) for seen in results) >= 40  # most reads hit a whole entry
    assert {n for seen in results for n in seen} <= {0, 1, 2, 3}
    assert CubinCache(tmp_path).get(KEY) is not None


# --- through assemble -------------------------------------------------------------------


@pytest.mark.ptxas
def test_assemble_hits_the_cache_the_second_time(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path))
    text = (SAMPLES / "tma_load.ptx").read_text()
    cold = assemble(text, filename="a.ptx")
    warm = assemble(text, filename="b.ptx")
    assert (cold.cached, warm.cached) == (False, True)
    assert warm.data == cold.data and warm.resources == cold.resources and warm.arch == cold.arch
    assert len(list(tmp_path.glob("*/*.entry"))) == 1
    assert assemble(text, arch="sm_90").cached is False  # another arch is another entry
    assert assemble(text, options=("--maxrregcount=64",)).cached is False
    assert assemble(text, opt_level=2).cached is False
    assert len(list(tmp_path.glob("*/*.entry"))) == 4
    assert assemble(text, cache=False).cached is False


@pytest.mark.ptxas
def test_a_cache_hit_keeps_warnings_under_the_new_file_name(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path))
    text = ".version 8.0\n.target sm_80\n.address_size 64\n.visible .entry k() .minnctapersm 4\n{\n\tret;\n}\n"
    assemble(text, filename="first.ptx")
    again = assemble(text, filename="second.ptx")
    assert again.cached and [(d.filename, d.severity) for d in again.diagnostics] == [("second.ptx", "warning")]
    assert "second.ptx" in again.log and "first.ptx" not in again.log


@pytest.mark.ptxas
def test_a_truncated_entry_is_detected_and_rebuilt(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path))
    text = (SAMPLES / "vector_add.ptx").read_text()
    original = assemble(text)
    (entry,) = tmp_path.glob("*/*.entry")
    entry.write_bytes(entry.read_bytes()[: entry.stat().st_size // 2])
    rebuilt = assemble(text)
    assert rebuilt.cached is False and rebuilt.data == original.data
    assert assemble(text).cached is True  # the entry was written again, whole


@pytest.mark.ptxas
def test_zero_turns_the_cache_off(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", "0")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("HOME", str(tmp_path))
    text = (SAMPLES / "empty.ptx").read_text()
    assert [assemble(text).cached for _ in range(2)] == [False, False]
    assert not any(tmp_path.rglob("*.entry"))
