"""The scanner: lossless round trips, structure, and speed on big or odd inputs."""

from __future__ import annotations

import time

import pytest

import ptxkit
from ptxkit.parser import check_module_start
from ptxkit.syntax import Block, Directive, Function, Instruction, Label

from conftest import SAMPLES

ALL_SAMPLES = sorted(SAMPLES.rglob("*.ptx"))
SYNTAX_SAMPLES = sorted((SAMPLES / "syntax").glob("*.ptx"))

HEADER = ".version 8.0\n.target sm_90a\n.address_size 64\n"


@pytest.mark.parametrize("path", ALL_SAMPLES, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_round_trips_byte_for_byte(path):
    data = path.read_bytes()
    module = ptxkit.parse(data, str(path))
    assert str(module).encode() == data


@pytest.mark.parametrize("path", SYNTAX_SAMPLES, ids=lambda p: p.name)
def test_syntax_samples_parse_in_full(path):
    module = ptxkit.parse_file(path).check()
    assert module.functions
    assert str(module) == path.read_text()


@pytest.mark.ptxas
@pytest.mark.parametrize("path", SYNTAX_SAMPLES, ids=lambda p: p.name)
def test_syntax_samples_are_real_ptx(path, tmp_path):
    """The samples are PTX that ptxas accepts, so the parser is tested on the real language."""
    import subprocess

    from ptxkit.ptxas import find_ptxas

    target = ptxkit.parse_file(path).targets[0]
    result = subprocess.run(
        [find_ptxas().path, f"-arch={target}", str(path), "-o", str(tmp_path / "out.cubin")],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


def test_module_level_structure():
    module = ptxkit.parse_file(SAMPLES / "syntax" / "module_directives.ptx")
    assert module.version == (8, 0)
    assert module.targets == ["sm_90", "texmode_independent"]
    assert module.address_size == 64
    kinds = [type(item).__name__ for item in module.items]
    assert kinds[:3] == ["Directive", "Directive", "Directive"]
    assert [f.name for f in module.functions] == ["implementation", "alias_of_implementation", "uses_everything"]
    assert module.functions[1].is_declaration
    names = [d.declaration.base_names[0] for d in module.items if isinstance(d, Directive) and d.declaration]
    assert names[:4] == ["counter", "table", "weights", "pi"]
    assert [d.arguments for d in module.directives(".alias")] == ["alias_of_implementation, implementation"]


def test_debug_sections_are_single_opaque_directives():
    module = ptxkit.parse_file(SAMPLES / "syntax" / "debug.ptx")
    sections = module.directives(".section")
    assert [s.text.split()[1] for s in sections] == [".debug_abbrev", ".debug_info", ".debug_str", ".debug_loc"]
    assert "$L__info_string0:" in sections[2].text
    assert [f.arguments for f in module.directives(".file")][0].startswith('1 "/home/user/kernels/scale.cu"')
    locs = [n for n in module.functions[0].walk() if isinstance(n, Directive) and n.name == ".loc"]
    assert "inlined_at 1 5 37" in locs[-3].text


def test_function_body_statements_in_order_with_scopes():
    module = ptxkit.parse_file(SAMPLES / "syntax" / "scopes_and_operands.ptx")
    body = module.function("operands").body
    scopes = [node for node in body.items if isinstance(node, Block)]
    assert len(scopes) == 2
    inner = [n for n in scopes[1].items if isinstance(n, Block)]
    assert len(inner) == 1 and inner[0].scope is scopes[1]
    first_loop = next(n for n in scopes[0].items if isinstance(n, Label))
    second_branch = [n for n in scopes[1].items if isinstance(n, Instruction) and n.base == "bra"][0]
    resolved = second_branch.scope.resolve_label(second_branch.operands[0].name)
    assert resolved is not first_loop and resolved.scope is scopes[1]
    assert body.resolve_label("done").scope is body
    assert body.resolve_label("$L_loop") is None  # not visible from the outer scope


def test_trivia_and_line_endings_are_kept():
    text = HEADER.replace("\n", "\r\n") + (
        "/* a\r\n block */.visible .entry k()\r\n{\r\n\t  ret ;   // done\r\n}\r\n\r\n// end"
    )
    module = ptxkit.parse(text)
    assert str(module) == text
    ret = module.functions[0].body.items[0]
    assert ret.text == "ret ;" and ret.prefix == "\r\n\t  "
    assert module.tail == "\r\n\r\n// end"


@pytest.mark.parametrize(
    "text",
    ["", "   \n", "// only a comment", "/* c */", HEADER.rstrip("\n"), "\ufeff"[:0] + HEADER],
)
def test_degenerate_inputs_round_trip(text):
    assert str(ptxkit.parse(text)) == text


def test_bytes_are_decoded_as_utf8():
    text = HEADER + "// café\n"
    assert str(ptxkit.parse(text.encode())) == text


def test_statements_may_span_lines_and_hold_braces_and_strings():
    text = HEADER + (
        ".global .align 4 .b32 t[2][2] = {\n  {1, 2},\n  {3, 4}\n};\n"
        ".visible .entry k()\n{\n\t.pragma \"nounroll; {not a scope}\";\n"
        "\tmov.b64 {%r1,\n\t\t%r2}, %rd1;\n\tret;\n}\n"
    )
    module = ptxkit.parse(text)
    assert str(module) == text
    pragma, mov, _ = module.functions[0].body.items
    assert pragma.name == ".pragma" and mov.opcode == "mov.b64"
    assert [op.kind for op in mov.operands] == ["vector", "register"]


def _big_module(megabytes: float) -> str:
    body = (SAMPLES / "syntax" / "scopes_and_operands.ptx").read_text()
    functions = body[body.index(".visible .entry") :]
    copies = []
    for index in range(int(megabytes * 1e6 / len(functions)) + 1):
        copies.append(functions.replace("operands(", f"operands_{index}(", 1))
    return HEADER + ".shared .align 16 .b8 tile[512];\n" + "".join(copies)


def test_multi_megabyte_module_round_trips_quickly():
    text = _big_module(4)
    start = time.perf_counter()
    module = ptxkit.parse(text)
    assert str(module) == text
    parse_and_print = time.perf_counter() - start
    start = time.perf_counter()
    module.check()
    check = time.perf_counter() - start
    assert len(module.functions) > 400
    # generous bounds (the benchmark measures the real rates): they catch quadratic paths
    assert parse_and_print < 2.0, parse_and_print
    assert check < 8.0, check


@pytest.mark.parametrize(
    "text",
    [
        HEADER + ".section .debug_info\n{\n" + ".b8 1,2,3,4,5,6,7,8\n" * 100_000 + "}\n",
        HEADER + ".visible .entry k(" + ", ".join(f".param .u32 p{i}" for i in range(20_000)) + ")\n{\n\tret;\n}\n",
        HEADER + ".visible .entry k()\n{\n\tmov.u32 %r1, " + "1 " * 300_000 + ";\n}\n",
    ],
    ids=["long-debug-section", "huge-header", "one-huge-statement"],
)
def test_long_pieces_without_semicolons_scan_in_linear_time(text):
    start = time.perf_counter()
    module = ptxkit.parse(text)
    assert str(module) == text
    assert time.perf_counter() - start < 2.0


def test_unbounded_nesting_depth():
    depth = 20_000
    text = HEADER + ".visible .entry k()\n{\n" + "{\n" * depth + "ret;\n" + "}\n" * depth + "}\n"
    module = ptxkit.parse(text)
    assert str(module) == text
    assert sum(1 for node in module.walk() if isinstance(node, Block)) == depth + 1


@pytest.mark.parametrize("text, line, column, message", [
    ("", 1, 1, "no .version directive: not a PTX module"),
    ("\t// a comment\n\n/* and\n another */\n", 1, 1, "no .version directive: not a PTX module"),
    ("// generated\n  .target sm_90a\n.version 8.0\n", 2, 3, "expected a .version directive first"),
    (".versions 8.0;\n", 1, 1, "expected a .version directive first"),
])
def test_a_module_starts_with_its_version_directive(text, line, column, message):
    assert str(ptxkit.parse(text)) == text  # a fragment parses; the commands that read a file check it
    with pytest.raises(ptxkit.PtxSyntaxError, match=message) as caught:
        check_module_start(text, "k.ptx")
    assert (caught.value.filename, caught.value.line, caught.value.column) == ("k.ptx", line, column)
    check_module_start(f"/* header */\n{HEADER}")


def test_parse_file_names_the_file_in_errors(tmp_path):
    path = tmp_path / "bad.ptx"
    path.write_text(HEADER + "}\n")
    with pytest.raises(ptxkit.PtxSyntaxError) as err:
        ptxkit.parse_file(path)
    assert err.value.filename == str(path) and err.value.line == 4


def test_nodes_know_their_function_module_and_position():
    module = ptxkit.parse_file(SAMPLES / "syntax" / "functions.ptx")
    function = module.function("tuned")
    inst = next(function.instructions())
    assert isinstance(function, Function) and inst.function is function and inst.module is module
    assert (inst.line, inst.column) == (inst.position[0], inst.position[1])
    assert module.source.line_text(inst.line).strip() == inst.text
    assert module.function("tuned").kind == "entry"
    with pytest.raises(KeyError, match="functions: vprintf, square"):
        module.function("missing")
