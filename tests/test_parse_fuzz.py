"""Mutated PTX either parses losslessly or fails with a PtxSyntaxError at a valid place."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptxkit

from conftest import SAMPLES

TEXTS = [path.read_text() for path in sorted((SAMPLES / "syntax").glob("*.ptx"))]
INTERESTING = list("{};/*\"\0\n\t @%[](),.:_!|") + ["\x07", "é", "//", "/*", "*/", ".entry", "\ufffd"]


@st.composite
def mutated(draw):
    text = draw(st.sampled_from(TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        lines = text.splitlines(keepends=True)
        kind = draw(st.sampled_from(["delete", "duplicate", "swap", "insert", "line-delete", "line-duplicate",
                                     "line-swap", "truncate"]))
        at = draw(st.integers(0, max(len(text) - 2, 0)))
        line = draw(st.integers(0, max(len(lines) - 2, 0)))
        if kind == "delete":
            text = text[:at] + text[at + 1 :]
        elif kind == "duplicate":
            text = text[: at + 1] + text[at:]
        elif kind == "swap":
            text = text[:at] + text[at + 1 : at + 2] + text[at : at + 1] + text[at + 2 :]
        elif kind == "insert":
            text = text[:at] + draw(st.sampled_from(INTERESTING)) + text[at:]
        elif kind == "line-delete":
            text = "".join(lines[:line] + lines[line + 1 :])
        elif kind == "line-duplicate":
            text = "".join(lines[: line + 1] + lines[line:])
        elif kind == "line-swap":
            text = "".join(lines[:line] + lines[line + 1 : line + 2] + lines[line : line + 1] + lines[line + 2 :])
        else:
            text = text[:at]
    return text


def assert_valid_position(err: ptxkit.PtxSyntaxError, text: str) -> None:
    lines = text.split("\n")
    assert err.filename == "fuzz.ptx"
    assert 1 <= err.line <= len(lines), (err.line, len(lines))
    assert err.source_line == lines[err.line - 1]
    assert 1 <= err.column <= len(err.source_line) + 1
    assert err.message and str(err).startswith(f"fuzz.ptx:{err.line}:{err.column}: error: ")


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_mutations_round_trip_or_fail_cleanly(text):
    try:
        module = ptxkit.parse(text, "fuzz.ptx")
    except ptxkit.PtxSyntaxError as err:
        assert_valid_position(err, text)
        return
    assert str(module) == text
    try:
        module.check()
    except ptxkit.PtxSyntaxError as err:
        assert_valid_position(err, text)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(TEXTS), st.integers(0, 10_000), st.binary(min_size=1, max_size=3))
def test_byte_mutations_round_trip_or_fail_cleanly(text, at, junk):
    data = text.encode()
    at %= len(data)
    data = data[:at] + junk + data[at:]
    try:
        module = ptxkit.parse(data, "fuzz.ptx")
    except ptxkit.PtxSyntaxError as err:
        assert err.line >= 1 and err.column >= 1
        return
    assert str(module).encode() == data
