"""Bad input: every kind of malformed PTX gives a PtxSyntaxError at the right place."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
import ptxkit.errors
from ptxkit.errors import PtxSyntaxError, Source

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"
KERNEL = ".visible .entry k()\n{\n"


def error_of(text, filename="k.ptx", check=False) -> PtxSyntaxError:
    with pytest.raises(PtxSyntaxError) as caught:
        module = ptxkit.parse(text, filename)
        if check:
            module.check()
    return caught.value


@pytest.mark.parametrize(
    "body, line, column, message",
    [
        ("\tret\n}\n", 6, 5, "expected ';' after the statement, found '}'"),
        ("\tret;\n", 7, 1, "expected '}' to close the scope opened at line 5, found end of input"),
        ("\tret;\n}\n}\n", 8, 1, "unexpected '}' with no open scope"),
        ("\t/* never closed\n\tret;\n}\n", 6, 2, "unterminated comment"),
        ('\t.pragma "nounroll;\n}\n', 6, 10, "unterminated string"),
        ("\tmov.u32 %r1, 1\n\t{ .reg .b32 x; }\n}\n", 6, 16, "expected ';' after the statement, found '{'"),
        ("\t%r1 = 3;\n}\n", 6, 2, "expected an instruction, label or directive"),
        ("\t.visible .entry inner()\n\t{\n\t}\n}\n", 6, 2, "function definitions cannot be nested"),
    ],
)
def test_body_errors(body, line, column, message):
    err = error_of(HEADER + KERNEL + body)
    assert (err.filename, err.line, err.column) == ("k.ptx", line, column)
    assert message in err.message


@pytest.mark.parametrize(
    "text, line, column, message",
    [
        (HEADER + "mov.u32 %r1, 1;\n", 4, 1, "expected a directive at module level"),
        (HEADER + "start:\n", 4, 1, "not a label"),
        (HEADER + "{\n}\n", 4, 1, "unexpected '{' at module level"),
        (HEADER + ".visible .entry k()\n.maxntid 32\n}\n", 6, 1, "expected '{' or ';' after the function header"),
        (HEADER + ".visible .entry k()\n", 5, 1, "found end of input"),
        (HEADER + ".section .debug_info {\n.b8 1\n", 4, 1, "unterminated .section block"),
        (HEADER + ".global .u32 x", 4, 15, "found end of input"),
    ],
)
def test_module_level_errors(text, line, column, message):
    err = error_of(text)
    assert (err.line, err.column) == (line, column)
    assert message in err.message


@pytest.mark.parametrize(
    "data, line, column, message",
    [
        ((HEADER + "// ok\n\0\n").encode(), 5, 1, "NUL byte"),
        ((HEADER + KERNEL + "\tret;\x07\n}\n").encode(), 6, 6, "control character"),
        (HEADER.encode() + b"// caf\xe9\n", 4, 7, "invalid UTF-8 byte 0xe9"),
    ],
)
def test_stray_and_undecodable_bytes(data, line, column, message):
    err = error_of(data)
    assert (err.line, err.column) == (line, column)
    assert message in err.message


@pytest.mark.parametrize(
    "statement, column, message",
    [
        ("@%p1 ;", 2, "predicate register and an opcode after '@'"),
        ("add.s32 %r1, , %r2;", 15, "expected an operand"),
        ("add.s32 %r1, %r2,;", 19, "expected an operand"),
        ("ld.global.u32 %r1, [%rd1;", 21, "expected ']' to close this '['"),
        ("mov.u32 %r1, 1 mul.lo.s32 %r2;", 15, "unexpected operand '1 mul.lo.s32 %r2'"),
        ("st.global.u32 [%rd1+], %r1;", 17, "expected an address"),
        ("mov.b64 {%r1, %r2)}, %rd1;", 19, "unbalanced ')'"),
    ],
)
def test_malformed_instructions_are_reported_by_check(statement, column, message):
    err = error_of(HEADER + KERNEL + "\t" + statement + "\n}\n", check=True)
    assert (err.line, err.column) == (6, column)
    assert message in err.message


def test_malformed_header_is_reported_by_check():
    err = error_of(HEADER + ".visible .entry (.param .u32 x)\n{\n}\n", check=True)
    assert err.line == 4 and "function name" in err.message


def test_malformed_parameter_is_reported_by_check():
    err = error_of(HEADER + ".visible .entry k(.u32 x)\n{\n}\n", check=True)
    assert err.line == 4 and err.column == 19 and "'.param' or '.reg'" in err.message


def test_diagnostic_text_has_location_source_line_and_caret():
    err = error_of(HEADER + KERNEL + "\tmov.u32 %r1, 1\n}\n")
    lines = str(err).splitlines()
    assert lines[0] == "k.ptx:6:16: error: expected ';' after the statement, found '}'"
    assert lines[1] == "\tmov.u32 %r1, 1"
    assert lines[2] == "\t" + " " * 14 + "^"


def test_source_positions():
    source = Source("ab\ncd\n\nef", "f")
    assert [source.position(i) for i in (0, 2, 3, 6, 7)] == [(1, 1), (1, 3), (2, 1), (3, 1), (4, 1)]
    assert source.line_text(2) == "cd" and source.line_text(4) == "ef" and source.line_text(9) == ""


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="a\né", max_size=40), bits=st.integers(0, 3))
def test_source_positions_agree_with_counting_newlines(text, bits):
    # the block-wise index (blocks of 1 to 8 characters here, 64 Ki in use) against the
    # definition: a position's line is one more than the newlines before it, its column one
    # more than the characters since the last of them; every offset, the end included
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ptxkit.errors, "_BLOCK_BITS", bits)
        source = Source(text, "f")
        for offset in range(len(text) + 1):
            before = text[:offset]
            assert source.position(offset) == (before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1)
        lines = text.split("\n")
        assert [source.line_text(n) for n in range(len(lines) + 2)] == ["", *lines, ""]
