"""Function signatures and declarations."""

from __future__ import annotations

import time

import pytest

import ptxkit
from ptxkit.declarations import Param

from conftest import SAMPLES


@pytest.fixture(scope="module")
def functions():
    return {f.name: f for f in ptxkit.parse_file(SAMPLES / "syntax" / "functions.ptx").functions}


def test_entry_parameters_with_pointer_attributes_alignment_and_arrays(functions):
    sig = functions["tuned"].signature
    assert sig.kind == "entry" and sig.linkage == (".visible",)
    assert sig.params == (
        Param(".param", ".u64", "tuned_out", None, (), ".global", 16),
        Param(".param", ".b8", "tuned_pair", 8, (16,)),
        Param(".param", ".u32", "tuned_selector"),
    )
    assert sig.directives == ((".maxntid", "128, 1, 1"), (".minnctapersm", "2"), (".maxnreg", "64"))


def test_return_parameters_declarations_and_noreturn(functions):
    vprintf = functions["vprintf"]
    assert vprintf.is_declaration and vprintf.signature.linkage == (".extern",)
    assert [p.name for p in vprintf.signature.return_params] == ["status"]
    assert [p.name for p in vprintf.signature.params] == ["format", "arguments"]
    assert functions["stop_here"].signature.noreturn
    assert not functions["square"].signature.noreturn


def test_cluster_directives(functions):
    assert functions["clustered"].signature.directives == ((".reqntid", "64, 1, 1"), (".reqnctapercluster", "2, 1, 1"))
    assert functions["explicit_cluster"].signature.directives == ((".explicitcluster", ""), (".maxclusterrank", "4"))


def test_header_pragma_and_register_parameters():
    text = (".version 8.0\n.target sm_90\n.address_size 64\n"
            '.func (.reg .b32 r) f(.reg .b32 a) .pragma "nounroll";\n{\n\tmov.b32 r, a;\n\tret;\n}\n')
    function = ptxkit.parse(text).functions[0]
    sig = function.signature
    assert not function.is_declaration
    assert sig.return_params[0] == Param(".reg", ".b32", "r")
    assert sig.directives == ((".pragma", '"nounroll"'),)


def test_vector_register_parameters():
    # ptxas takes vector registers as the parameters of a .func, with or without blanks
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".func (.reg .v2 .u32 output) impl(.reg.v4.u16 input, .reg .u32 n);\n")
    sig = ptxkit.parse(text).functions[0].signature
    assert sig.return_params == (Param(".reg", ".u32", "output", vector=".v2"),)
    assert sig.params == (Param(".reg", ".u16", "input", vector=".v4"), Param(".reg", ".u32", "n"))
    with pytest.raises(ptxkit.PtxSyntaxError, match="unexpected '.v4' in parameter"):
        ptxkit.parse(text.replace(".v2 .u32", ".v2 .v4 .u32")).functions[0].signature


@pytest.mark.parametrize("declaration", ["\t.reg .b32 \u00e9;", "\t.shared .b8 \u00e9tage[16];", "\t.reg .b32 %r\u00e9<4>;"])
def test_a_name_outside_the_ascii_alphabet_is_an_error_where_it_stands(declaration):
    """PTX identifiers are ASCII, starting with a letter, ``_``, ``$`` or ``%`` (PTX ISA,
    Identifiers); a letter such as ``\u00e9`` once passed in a name and crashed the
    symbol tables, or was cut off there."""
    text = f".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{{\n{declaration}\n\tret;\n}}\n"
    directive = next(s for s in ptxkit.parse(text, "k.ptx").function("k").walk() if "\u00e9" in getattr(s, "text", ""))
    with pytest.raises(ptxkit.PtxSyntaxError, match="unexpected '[^']*\u00e9") as raised:
        directive.declaration
    assert "k.ptx:6:" in str(raised.value)


@pytest.mark.parametrize("rest", ["1" * 3000 + ".", "256, " * 1500 + "x.", '"a" ' * 1500 + "."])
def test_a_malformed_directive_is_rejected_at_once(rest):
    """A long argument followed by a stray '.' once took time exponential in its length
    (each run of characters could be split into arguments in every way) before the
    error: the fuzz test met one of 20 characters that took 16 s."""
    text = f".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() .maxntid {rest}\n{{\n\tret;\n}}\n"
    start = time.perf_counter()
    with pytest.raises(ptxkit.PtxSyntaxError, match="expected performance directives"):
        ptxkit.parse(text).functions[0].signature
    assert time.perf_counter() - start < 1.0


def test_register_declarations_expand_ranges():
    module = ptxkit.parse_file(SAMPLES / "syntax" / "scopes_and_operands.ptx")
    regs = [d.declaration for d in module.function("operands").body.items if getattr(d, "name", "") == ".reg"]
    assert regs[0].type == ".pred" and regs[0].registers() == ["%p0", "%p1", "%p2", "%p3"]
    assert regs[2].registers()[-1] == "%r15"


def test_variable_declarations():
    module = ptxkit.parse_file(SAMPLES / "syntax" / "module_directives.ptx")
    decls = {d.declaration.base_names[0]: d.declaration for d in module.items
             if isinstance(d, ptxkit.Directive) and d.declaration}
    table = decls["table"]
    assert (table.space, table.type, table.align, table.names) == (".global", ".b64", 8, ("table[2][3]",))
    assert table.initializer == "{{1, 2, 3}, {0x10, 0x20, 0x30}}"
    assert decls["counter"].linkage == (".visible",) and decls["counter"].initializer == "7"
    assert decls["dynamic_smem"].linkage == (".extern",) and decls["dynamic_smem"].names == ("dynamic_smem[]",)
    assert decls["constant_vector"].attributes == (".v4",) and decls["constant_vector"].space == ".const"
    assert decls["self_pointer"].initializer == "generic(message)"
    assert module.directives(".version")[0].declaration is None
