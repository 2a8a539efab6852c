"""``ptxkit._regex``: patterns compiled once per installation, identical to ``re.compile``'s."""

from __future__ import annotations

import marshal
import re
import sys

import pytest

from ptxkit import _regex, lexer


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache file for the test; the module's state is restored after."""
    path = tmp_path / "__pycache__" / "regex.test.marshal"
    monkeypatch.setattr(_regex, "cache_path", lambda: str(path))
    monkeypatch.setattr(_regex, "_entries", None)
    monkeypatch.setattr(_regex, "_used", set())
    monkeypatch.setattr(_regex, "_unsaved", False)
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    return path


def reload_cache(monkeypatch) -> None:
    """What a new process does: forget the patterns in memory."""
    monkeypatch.setattr(_regex, "_entries", None)
    monkeypatch.setattr(_regex, "_unsaved", False)


PATTERNS = [
    (lexer.PIECE.pattern, 0),
    (lexer.MODULE_STEP.pattern, 0),
    (r"(?P<name>[a-z]+)(?:\.(?P<type>[suf]\d+))?", re.IGNORECASE),
    (r"^\s*fence\.proxy\.async[^;\n]*;", re.MULTILINE),
    (r"(?x) a  b # verbose", 0),
]
TEXTS = ["\t@%p1 bra $L__BB0_2;", ".version 8.0\n.target sm_90a\n", "ADD.S32", "  fence.proxy.async;\n", "ab"]


@pytest.mark.parametrize("pattern, flags", PATTERNS)
def test_cached_patterns_are_re_compile(pattern, flags, cache, monkeypatch):
    _regex.compile(pattern, flags)
    _regex.save()
    reload_cache(monkeypatch)
    monkeypatch.setattr(_regex, "_translate", None)  # a cache hit must not compile again
    ours, theirs = _regex.compile(pattern, flags), re.compile(pattern, flags)
    assert (ours.pattern, ours.flags, ours.groups, ours.groupindex) == (
        theirs.pattern, theirs.flags, theirs.groups, theirs.groupindex)
    for text in TEXTS:
        assert [m.groups() + (m.span(),) for m in ours.finditer(text)] == [
            m.groups() + (m.span(),) for m in theirs.finditer(text)]


def test_the_file_is_written_at_exit_only_with_bytecode(cache, monkeypatch):
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    _regex.compile(r"x+y", 0)
    _regex.save()
    assert not cache.exists()
    monkeypatch.setattr(sys, "dont_write_bytecode", False)
    _regex.save()
    assert (r"x+y", 0) in marshal.loads(cache.read_bytes())


def test_a_damaged_cache_is_ignored(cache, monkeypatch):
    cache.parent.mkdir()
    cache.write_bytes(b"\x00not marshal")
    assert _regex.compile(r"a(b)c").match("abc").group(1) == "b"
    reload_cache(monkeypatch)
    cache.write_bytes(marshal.dumps({(r"a(b)c", 0): (0, [1, 2, 3], 1, {}, (None, None))}))  # code the engine refuses
    assert _regex.compile(r"a(b)c").match("abc").group(1) == "b"


def test_an_unwritable_place_means_no_cache_and_no_error(cache):
    cache.parent.write_text("a file where the folder should be")
    assert _regex.compile(r"un(writable)").match("unwritable").group(1) == "writable"
    _regex.save()
    assert cache.parent.read_text() == "a file where the folder should be"


def test_the_cache_file_is_keyed_by_interpreter_and_engine():
    path = _regex.cache_path()
    assert sys.implementation.cache_tag in path and str(_regex._sre.MAGIC) in path
