"""``ptxkit._regex``: patterns compiled once per installation, identical to ``re.compile``'s."""

from __future__ import annotations

import marshal
import re
import sys
from pathlib import Path

import pytest

from ptxkit import _regex, lexer

ROOT = Path(__file__).resolve().parent.parent


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


def matches(pattern, text):
    return [m.groups() + (m.span(),) for m in pattern.finditer(text)]


@pytest.mark.parametrize("pattern, flags", PATTERNS)
def test_cached_patterns_are_re_compile(pattern, flags, cache, monkeypatch):
    fresh = _regex.compile(pattern, flags)
    _regex.save()
    reload_cache(monkeypatch)
    monkeypatch.setattr(_regex, "_translate", None)  # a cache hit must not compile again
    ours, theirs = _regex.compile(pattern, flags), re.compile(pattern, flags)
    assert (ours.pattern, ours.flags, ours.groups, ours.groupindex) == (
        theirs.pattern, theirs.flags, theirs.groups, theirs.groupindex)
    for text in TEXTS:
        assert matches(ours, text) == matches(fresh, text)
        if _regex.POSSESSIVE_GROUPS_WORK:  # elsewhere re.compile's answer is wrong (below)
            assert matches(ours, text) == matches(theirs, text)


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
    """3.11.2 and 3.11.7 share a cache tag and an engine number, not the code they need."""
    path = _regex.cache_path()
    version = "{}.{}.{}".format(*sys.version_info)
    assert sys.implementation.cache_tag in path and version in path and str(_regex._sre.MAGIC) in path


# Inputs that CPython 3.11.0-3.11.4 mis-match with the possessive code as written (one try
# of a repeated group consumes text, then fails), with the right answer: what 3.11.5 and
# later give, and what `_regex.compile` gives on every version.
MISMATCHED_BEFORE_3_11_5 = [
    (r"(?:ab?c)*+", "a", [(0, 0)]),  # python/cpython#106052
    (r"(?:a|bc)*+d", "abd", None),
    (lexer.TRIVIA.pattern, "/* c */ x", [(0, 8)]),
    (lexer.TRIVIA.pattern, "/* unterminated", [(0, 0)]),
    (lexer.STATEMENT_PREFIX.pattern, '.b8 115,99   /* "scale.cu" */\n', [(0, 30)]),
    (lexer.STATEMENT_PREFIX.pattern, '{ %r1, "x" ', [(0, 0)]),
    (lexer.FUNCTION_START.pattern, ".visible .entry k(.param .u64 p)", [(0, 15)]),
    (lexer.PIECE.pattern, ".section .debug_info { .b8 1 /* x */ }", [(0, 38), (0, 0), (-1, -1), (0, 38),
                                                                        (-1, -1), (-1, -1)]),
    (lexer.MODULE_STEP.pattern, ".loc 1 12 3\n", [(0, 11), (0, 0), (-1, -1), (-1, -1)]),
    (lexer.MODULE_STEP.pattern, ".visible .entry k(\n.param .u64 p\n)\n{", [(0, 34), (0, 0), (0, 34), (-1, -1)]),
]


@pytest.mark.parametrize("pattern, text, spans", MISMATCHED_BEFORE_3_11_5)
def test_a_failed_try_of_a_possessive_group_gives_back_what_it_consumed(pattern, text, spans):
    match = _regex.compile(pattern).match(text)
    assert (match and [match.span(group) for group in range(match.re.groups + 1)]) == spans


def test_the_vulnerable_pythons_are_the_ones_that_mis_match():
    wrong = re.fullmatch(r"(?:ab?c)*+", "a") is not None
    assert wrong == (sys.implementation.name == "cpython" and sys.version_info < (3, 11, 5))
    assert _regex.POSSESSIVE_GROUPS_WORK == (not wrong)


LEXER_PATTERNS = ["MODULE_STEP", "BODY_STEP", "BODY_OPEN", "PIECE", "TRIVIA", "STATEMENT_PREFIX",
                  "FUNCTION_START", "LABEL_START"]


def possessive_groups(tree):
    """The possessive repetitions of groups in a parsed pattern, however deep."""
    for op, argument in tree:
        if str(op) == "POSSESSIVE_REPEAT" and not _regex._compiler._simple(argument[2]):
            yield argument
        for child in _regex._subpatterns(argument):
            yield from possessive_groups(child)


def test_the_atomic_spelling_leaves_no_possessive_group():
    from re import _parser

    tree = _parser.parse(lexer.MODULE_STEP.pattern)
    assert any(possessive_groups(tree))
    _regex.atomic_for_possessive(tree)
    assert not any(possessive_groups(tree))


@pytest.mark.skipif(not _regex.POSSESSIVE_GROUPS_WORK, reason="needs an engine that runs possessive groups right")
@pytest.mark.parametrize("name", LEXER_PATTERNS)
def test_the_atomic_spelling_scans_every_sample_as_the_possessive_one(name):
    """What 3.11.0-3.11.4 run (`atomic_for_possessive`) matches what later ones run, at
    every line start of every sample."""
    possessive = getattr(lexer, name)
    atomic = _regex._sre.compile(possessive.pattern, *_regex._translate(possessive.pattern, 0, False))
    for path in sorted((ROOT / "samples").rglob("*.ptx")):
        text = path.read_text()
        for start in [0] + [i + 1 for i, char in enumerate(text) if char == "\n"]:
            ours, theirs = atomic.match(text, start), possessive.match(text, start)
            assert (ours and ours.regs) == (theirs and theirs.regs), (path.name, start)
