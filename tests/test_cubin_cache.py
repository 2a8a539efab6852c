"""ptxkit.cubin_cache: keys, atomic entries, damaged entries, location, the size cap with
least-recently-used eviction (alone and in concurrent processes), and use by assemble."""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from pathlib import Path

import pytest

from ptxkit.cubin_cache import (DEFAULT_LIMIT, CubinCache, cache_directory, cache_key, cache_limit, default_cache,
                                 parse_size)
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


# --- the cap: least-recently-used eviction ------------------------------------------------


def _entry_size(store: CubinCache, payload: bytes) -> int:
    probe = CubinCache(store.directory / "probe")
    probe.put("ff00", payload, "")
    return probe.path("ff00").stat().st_size


def _age(store: CubinCache, key: str, seconds: float) -> None:
    when = time.time() - seconds
    os.utime(store.path(key), (when, when))


def _keys(store: CubinCache) -> set[str]:
    return {Path(entry.path).stem for entry in store.scan() if entry.path.endswith(".entry")}


@pytest.mark.parametrize("text, size", [("500M", 500 << 20), ("2G", 2 << 30), ("1.5G", 3 << 29), ("64KiB", 65536),
                                        ("100kb", 102400), ("4096", 4096), (" 7 M ", 7 << 20), ("0", 0)])
def test_sizes(text, size):
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "-5M", "5 P", "lots", "1e9"])
def test_a_size_that_is_not_one_is_refused(text):
    with pytest.raises(ValueError, match="expected a size such as 500M, 2G or a number of bytes"):
        parse_size(text)


def test_the_cap_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("PTXKIT_CACHE_MAX", raising=False)
    assert cache_limit() == DEFAULT_LIMIT == 1 << 30 and default_cache().limit == DEFAULT_LIMIT
    monkeypatch.setenv("PTXKIT_CACHE_MAX", "500M")
    assert default_cache().limit == 500 << 20
    monkeypatch.setenv("PTXKIT_CACHE_MAX", "0")
    assert cache_limit() is None and default_cache().limit is None
    monkeypatch.setenv("PTXKIT_CACHE_MAX", "big")
    with pytest.raises(ValueError, match="PTXKIT_CACHE_MAX: expected a size"):
        cache_limit()
    with pytest.warns(UserWarning, match="PTXKIT_CACHE_MAX: expected a size.*keeps its default cap"):
        assert default_cache().limit == DEFAULT_LIMIT


def test_the_least_recently_used_entries_go_first_and_a_hit_counts_as_a_use(tmp_path):
    payload = bytes(range(256)) * 40
    size = _entry_size(CubinCache(tmp_path), payload)
    store = CubinCache(tmp_path / "cache", limit=4 * size)
    for age, key in zip((400, 300, 200, 100), ("aa", "bb", "cc", "dd")):
        store.put(key, payload, "")
        _age(store, key, age)
    assert _keys(store) == {"aa", "bb", "cc", "dd"}  # exactly at the cap: nothing evicted
    assert store.get("aa") is not None  # aa used now: bb is the least recently used
    assert time.time() - store.path("aa").stat().st_mtime < 60
    store.put("ee", payload, "")  # over the cap: evict down to 90% of it, the oldest first
    assert _keys(store) == {"aa", "dd", "ee"}
    assert sum(entry.size for entry in store.scan()) <= 0.9 * store.limit
    assert store.get("bb") is None and store.get("aa") is not None


def test_a_hit_in_a_read_only_cache_is_still_a_hit(tmp_path, monkeypatch):
    store = CubinCache(tmp_path)
    store.put("ab", b"cubin", "log")

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(os, "utime", refuse)
    assert store.get("ab") == (b"cubin", "log")


def test_an_entry_larger_than_the_cap_is_not_stored(tmp_path):
    store = CubinCache(tmp_path, limit=1000)
    store.put("ab", bytes(2000), "")
    assert store.get("ab") is None and store.scan() == []


def test_the_running_total_spares_a_scan_per_entry_and_is_put_right(tmp_path, monkeypatch):
    payload = bytes(1000)
    store = CubinCache(tmp_path, limit=100_000)
    store.put("aa", payload, "")
    scans = []
    real_scan = CubinCache.scan
    monkeypatch.setattr(CubinCache, "scan", lambda self: scans.append(1) or real_scan(self))
    for n in range(20):
        store.put(f"{n:02d}x", payload, "")
    assert scans == []  # under the cap: the total in the file is enough
    total = int((tmp_path / "size").read_text())
    assert total == sum(entry.size for entry in real_scan(store))
    for entry in real_scan(store)[:5]:  # deleted by hand: the total drifts up ...
        os.unlink(entry.path)
    assert store.size() == (16, sum(entry.size for entry in real_scan(store)))  # ... and a count puts it right
    assert int((tmp_path / "size").read_text()) == store.size()[1]


def test_eviction_survives_entries_that_vanish_under_it(tmp_path, monkeypatch):
    """Another process may evict the entries a scan found before this one removes them."""
    payload = bytes(1000)
    store = CubinCache(tmp_path)
    for key in ("aa", "bb", "cc", "dd"):
        store.put(key, payload, "")
    real_scan = CubinCache.scan

    def scan_then_lose_two(self):
        found = real_scan(self)
        for entry in found[:2]:
            os.unlink(entry.path)
        return found

    monkeypatch.setattr(CubinCache, "scan", scan_then_lose_two)
    left = store.evict(0)
    assert left == 0 and real_scan(store) == []


def test_temporary_files_of_dead_writers_are_removed_and_live_ones_kept(tmp_path):
    store = CubinCache(tmp_path)
    store.put("ab", b"cubin", "")
    dead, live = tmp_path / "ab" / ".tmp-dead", tmp_path / "ab" / ".tmp-live"
    dead.write_bytes(b"half an entry")
    live.write_bytes(b"being written")
    os.utime(dead, (time.time() - 7200,) * 2)
    store.evict(10**9)
    assert not dead.exists() and live.exists() and store.get("ab") == (b"cubin", "")


def test_clear_removes_the_entries_and_nothing_else(tmp_path):
    store = CubinCache(tmp_path, limit=10**9)
    for key in ("aa01", "aa02", "bb01"):
        store.put(key, b"cubin", "log")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "x.entry").write_text("not in a two-letter folder")
    count, size = store.clear()
    assert count == 3 and size > 0 and store.scan() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lock", "notes.txt", "photos"]  # the lock stays
    assert (tmp_path / "photos" / "x.entry").exists()
    store.put("cc01", b"again", "")
    assert store.get("cc01") == (b"again", "") and int((tmp_path / "size").read_text()) > 0


def _fill(directory: str, writer: int, rounds: int, limit: int) -> int:
    """Store `rounds` entries of this writer, reading each back; returns the whole reads."""
    store = CubinCache(directory, limit)
    whole = 0
    for n in range(rounds):
        key = cache_key(str(writer), str(n))
        payload = bytes([writer]) * (5000 + n)
        store.put(key, payload, f"{writer} {n}\n")
        entry = store.get(key)
        if entry is not None:
            assert entry == (payload, f"{writer} {n}\n")
            whole += 1
    return whole


def test_concurrent_processes_keep_the_cap_together(tmp_path):
    limit = 200_000  # about 40 entries of the 240 written
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(4, mp_context=context) as pool:
        whole = list(pool.map(_fill, [str(tmp_path)] * 4, range(4), [60] * 4, [limit] * 4))
    assert sum(whole) >= 120  # most entries were read back whole right after their write
    entries = CubinCache(tmp_path, limit).scan()
    assert 0 < sum(entry.size for entry in entries) <= limit
    assert not any(Path(entry.path).name.startswith(".tmp-") for entry in entries)


@pytest.mark.ptxas
def test_assemble_keeps_the_cache_under_its_cap(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXKIT_CACHE_DIR", str(tmp_path))
    text = (SAMPLES / "vector_add.ptx").read_text()
    first = assemble(text, opt_level=0)
    (entry,) = tmp_path.glob("*/*.entry")
    cap = 2 * entry.stat().st_size + 100  # room for two
    monkeypatch.setenv("PTXKIT_CACHE_MAX", str(cap))
    for level in (1, 2, 3):
        assemble(text, opt_level=level)
    entries = list(tmp_path.glob("*/*.entry"))
    assert len(entries) == 2 and sum(e.stat().st_size for e in entries) <= cap
    assert assemble(text, opt_level=3).cached  # the most recent stay
    again = assemble(text, opt_level=0)  # the least recently used went first, and is simply built again
    assert not again.cached and again.data == first.data
