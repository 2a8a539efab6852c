"""The layers of ptxkit and the imports allowed between them (docs/architecture.md §1 and §3),
and the order of the subpackages of ``ptxkit.cfg`` (docs/architecture.md §4).

Every module of ``ptxkit/``, ``cfg/`` and ``generators/`` has a layer here, and every module
of ``cfg/`` a subpackage; a module added without one fails, so that the note is kept up to
date with the code.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: folder → the package it is installed as (pyproject.toml's package-dir)
FOLDERS = {"ptxkit": "ptxkit", "cfg": "ptxkit.cfg", "generators": "ptxkit.generators"}

#: module (or package, for everything under it but the root ``ptxkit``) → layer; the
#: longest match wins
LAYER_OF = {
    "ptxkit._regex": "helpers",
    "ptxkit._records": "helpers",
    "ptxkit._gc": "helpers",
    "ptxkit._lazy": "helpers",
    "ptxkit.isa": "isa",
    "ptxkit.isa_eval": "isa",
    "ptxkit.lexer": "syntax",
    "ptxkit.parser": "syntax",
    "ptxkit.syntax": "syntax",
    "ptxkit.declarations": "syntax",
    "ptxkit.instruction": "syntax",
    "ptxkit.errors": "syntax",
    "ptxkit.node_protocols": "syntax",
    "ptxkit.edits": "syntax",
    "ptxkit.diff": "syntax",
    "ptxkit.toolkit": "toolchain",
    "ptxkit.ptxas": "toolchain",
    "ptxkit.sass": "toolchain",
    "ptxkit.cubin_cache": "toolchain",
    "ptxkit.runtime": "toolchain",
    "ptxkit.tensormap": "toolchain",
    "ptxkit.instrument.layout": "traces",
    "ptxkit.trace": "traces",
    "ptxkit.plot": "traces",
    "ptxkit.rewrite": "passes",
    "ptxkit.instrument": "passes",
    "ptxkit.cfg": "cfg",
    "ptxkit.generators": "generators",
    "ptxkit.triton_hook": "integrations",
    "ptxkit.fencelog": "integrations",
    "ptxkit.suppressions": "integrations",
    "ptxkit.baseline": "integrations",
    "ptxkit.cli": "cli",
    "ptxkit.__main__": "cli",
    "ptxkit": "package",  # ptxkit/__init__.py: the public names, imported lazily
}

BELOW_CFG = {"helpers", "isa", "syntax", "package"}
#: layer → the layers it may import (its own always)
ALLOWED = {
    "helpers": set(),
    "isa": {"helpers"},
    "syntax": {"helpers", "isa"},
    "package": {"helpers"},
    "traces": {"helpers"},
    "toolchain": BELOW_CFG | {"traces"},
    "cfg": BELOW_CFG,
    "passes": BELOW_CFG | {"traces", "toolchain", "cfg"},
    "generators": BELOW_CFG | {"traces", "toolchain"},
    "integrations": BELOW_CFG | {"traces", "toolchain", "cfg", "passes", "generators"},
    "cli": BELOW_CFG | {"traces", "toolchain", "cfg", "passes", "generators", "integrations"},
}

#: the subpackages of ``ptxkit.cfg`` from the bottom up: each imports only itself and those
#: before it (docs/architecture.md §4)
CFG_SUBPACKAGES = ("flow", "values", "sync", "fence")
#: subpackage → what it may import besides itself: ``outside`` is anything not in
#: ``ptxkit.cfg`` (the layers above rule on it); ``root`` (``cfg/__init__.py``, whose public
#: names load lazily) imports none of the subpackages, and none of them imports it
CFG_ALLOWED = {"root": {"outside"}} | {
    name: {"outside", *CFG_SUBPACKAGES[:index]} for index, name in enumerate(CFG_SUBPACKAGES)}


def module_name(path: Path) -> str:
    """The installed name of a source file.

    >>> module_name(ROOT / "cfg" / "fence" / "proxy.py"), module_name(ROOT / "ptxkit" / "cli" / "__init__.py")
    ('ptxkit.cfg.fence.proxy', 'ptxkit.cli')
    """
    relative = path.relative_to(ROOT).with_suffix("")
    parts = [FOLDERS[relative.parts[0]], *relative.parts[1:]]
    return ".".join(parts).removesuffix(".__init__")


def sources() -> dict[str, Path]:
    return {module_name(path): path for folder in FOLDERS for path in sorted((ROOT / folder).rglob("*.py"))}


def layer(name: str) -> str | None:
    """The layer of a module name (None: not ours, or not placed).

    >>> layer("ptxkit.cfg.sync.events"), layer("ptxkit.isa"), layer("ptxkit"), layer("ptxkit.new_module")
    ('cfg', 'isa', 'package', None)
    """
    if name == "ptxkit":
        return LAYER_OF[name]
    while "." in name:
        if name in LAYER_OF:
            return LAYER_OF[name]
        name = name.rpartition(".")[0]
    return None


def cfg_subpackage(name: str) -> str | None:
    """The subpackage of ``ptxkit.cfg`` that a module belongs to (None: a module of ``cfg/``
    in none of them).

    >>> cfg_subpackage("ptxkit.cfg.sync.events"), cfg_subpackage("ptxkit.cfg.flow"), cfg_subpackage("ptxkit.cfg")
    ('sync', 'flow', 'root')
    >>> cfg_subpackage("ptxkit.isa"), cfg_subpackage("ptxkit.cfg.helpers"), cfg_subpackage("ptxkit.cfg.misc.helpers")
    ('outside', None, None)
    """
    if name == "ptxkit.cfg":
        return "root"
    if not name.startswith("ptxkit.cfg."):
        return "outside"
    parts = name.split(".")
    in_one = parts[2] in CFG_SUBPACKAGES and (len(parts) > 3 or (ROOT / "cfg" / parts[2]).is_dir())
    return parts[2] if in_one else None


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The modules of ours that `path` (module `name`) imports anywhere in its code."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            for alias in node.names:  # `from ptxkit import runtime` imports a module
                full = f"{base}.{alias.name}"
                found.add(full if full in known else base)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {module for module in found if module == "ptxkit" or module.startswith("ptxkit.")}


def violations(modules: dict[str, Path], root: Path = ROOT, layer=layer, allowed=ALLOWED) -> list[str]:
    """``file: layer imports module (its layer)`` for each import of `modules` (name → file)
    that docs/architecture.md §3 does not allow (or that `allowed` does not, with the layers
    that `layer` gives: the subpackages of ``ptxkit.cfg`` and docs/architecture.md §4).

    Importing ``a.b.c`` runs the ``__init__`` of ``a.b`` first, so what that package's
    ``__init__`` imports counts as imported too (the root ``ptxkit``, whose names load
    lazily, aside)."""
    files = sources() | modules
    known = set(files)
    direct = {name: imported(name, path, known) for name, path in files.items()}
    wrong = []
    for name, path in modules.items():
        own = layer(name)
        if own is None:  # test_every_module_has_a_layer names it
            continue
        targets = set(direct[name])
        for target in direct[name]:
            parent = target.rpartition(".")[0]
            while parent.count(".") >= 1:
                targets |= {t for t in direct.get(parent, ()) if t != name}
                parent = parent.rpartition(".")[0]
        for target in sorted(targets):
            theirs = layer(target)
            if theirs != own and theirs not in allowed[own]:
                wrong.append(f"{path.relative_to(root)}: {own} imports {target} ({theirs})")
    return wrong


def test_every_module_has_a_layer():
    missing = [name for name in sources() if layer(name) is None]
    assert not missing, f"place these in LAYER_OF and in docs/architecture.md §1: {missing}"


def test_imports_follow_the_layers():
    wrong = violations(sources())
    assert not wrong, "imports that docs/architecture.md §3 does not allow:\n" + "\n".join(wrong)


def cfg_sources() -> dict[str, Path]:
    return {name: path for name, path in sources().items() if cfg_subpackage(name) != "outside"}


def test_every_cfg_module_is_in_a_subpackage():
    names = cfg_sources()
    loose = [name for name in names if cfg_subpackage(name) is None]
    assert not loose, f"put these in a subpackage of cfg/ (docs/architecture.md §4): {loose}"
    assert {cfg_subpackage(name) for name in names} == {"root", *CFG_SUBPACKAGES}
    assert all(f"ptxkit.cfg.{package}" in names for package in CFG_SUBPACKAGES)  # each has its __init__


def test_cfg_subpackages_import_only_those_below():
    wrong = violations(cfg_sources(), layer=cfg_subpackage, allowed=CFG_ALLOWED)
    assert not wrong, "imports against the order of docs/architecture.md §4:\n" + "\n".join(wrong)


@pytest.mark.parametrize(
    "name, code, allowed",
    [
        ("ptxkit.cfg.flow.x", "from ptxkit.cfg.values.values import TOP", False),
        ("ptxkit.cfg.values.x", "def f():\n    from ptxkit.cfg.sync.events import Kind", False),
        ("ptxkit.cfg.values.x", "from ..fence import options", False),
        ("ptxkit.cfg.sync.x", "from ptxkit.cfg.fence.fence import fence_text", False),
        ("ptxkit.cfg.flow.x", "from ptxkit.cfg import fence_text", False),
        ("ptxkit.cfg", "from ptxkit.cfg.flow.graph import flow_graph", False),
        ("ptxkit.cfg.flow.x", "from ptxkit.cfg.flow.graph import ENTRY\nfrom ptxkit.isa import STATE_SPACES", True),
        ("ptxkit.cfg.sync.x", "from ptxkit.cfg.values import registers\nfrom ..flow.graph import ENTRY", True),
        ("ptxkit.cfg.fence.x", "import ptxkit.cfg.sync.events\nfrom ptxkit.cfg.values.values import TOP", True),
    ],
)
def test_the_check_finds_an_upward_import_in_cfg(tmp_path, name, code, allowed):
    path = tmp_path / "x.py"
    path.write_text(code + "\n")
    found = violations({name: path}, tmp_path, layer=cfg_subpackage, allowed=CFG_ALLOWED)
    assert (found == []) == allowed, found


def test_a_subpackage_init_counts_for_whoever_imports_its_modules(tmp_path):
    """``ptxkit.cfg.flow``'s ``__init__`` runs whenever a module of flow/ is imported: an
    import of the pass there would put the pass below the values analysis."""
    init, user = tmp_path / "init.py", tmp_path / "user.py"
    init.write_text("from ptxkit.cfg.fence.fence import fence_text\n")
    user.write_text("from ptxkit.cfg.flow.graph import flow_graph\n")
    found = violations({"ptxkit.cfg.flow": init, "ptxkit.cfg.values.x": user}, tmp_path,
                       layer=cfg_subpackage, allowed=CFG_ALLOWED)
    assert found == ["init.py: flow imports ptxkit.cfg.fence.fence (fence)",
                     "user.py: values imports ptxkit.cfg.fence.fence (fence)"], found


@pytest.mark.parametrize(
    "name, code, allowed",
    [
        ("ptxkit.cfg.x", "from ptxkit.generators.layout import S", False),
        ("ptxkit.generators.x", "def f():\n    from ptxkit.cfg import fence_text", False),
        ("ptxkit.generators.x", "from . import layout\nfrom ptxkit import runtime, parse", True),
        ("ptxkit.syntax", "from ptxkit.ptxas import assemble", False),
        ("ptxkit.isa", "from .syntax import Module", False),
        ("ptxkit.runtime", "from ptxkit.cli.main import main", False),
        ("ptxkit.cli.x", "import ptxkit.cfg.fence.fence\nimport numpy", True),
    ],
)
def test_the_check_finds_a_forbidden_import(tmp_path, name, code, allowed):
    path = tmp_path / "x.py"
    path.write_text(code + "\n")
    assert (violations({name: path}, tmp_path) == []) == allowed


@pytest.mark.parametrize("package_imports, allowed",
                         [("", True), ("from ptxkit.cfg.fence.fence import fence_text", False)])
def test_a_package_init_counts_for_whoever_imports_its_modules(tmp_path, package_imports, allowed):
    """The decoder (traces) imports the buffer format from ptxkit.instrument, whose
    ``__init__`` then runs: it must not pull in the analyses."""
    init, user = tmp_path / "init.py", tmp_path / "trace.py"
    init.write_text(package_imports + "\n")
    user.write_text("from .instrument.layout import Layout\n")
    found = violations({"ptxkit.instrument": init, "ptxkit.trace": user}, tmp_path)
    assert (found == []) == allowed, found


#: The most lines a function of ``cfg/`` may span, its docstring and nested functions
#: included (issue 35): a longer one does more than one thing and is split.
MAX_FUNCTION_LINES = 80


def long_functions(path: Path, root: Path = ROOT) -> list[str]:
    """``file:line name (n lines)`` for each function in `path` longer than `MAX_FUNCTION_LINES`."""
    return [f"{path.relative_to(root)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]


def test_no_function_in_cfg_is_longer_than_80_lines():
    found = [line for path in sorted((ROOT / "cfg").rglob("*.py")) for line in long_functions(path)]
    assert not found, f"split these into pieces of at most {MAX_FUNCTION_LINES} lines:\n" + "\n".join(found)


@pytest.mark.parametrize("body_lines, long", [(MAX_FUNCTION_LINES - 1, False), (MAX_FUNCTION_LINES, True)])
def test_the_check_finds_a_long_function(tmp_path, body_lines, long):
    """A method (nested in a class) of 80 lines passes, one of 81 does not."""
    path = tmp_path / "x.py"
    body = "".join(f"        x{i} = {i}\n" for i in range(body_lines))
    path.write_text(f"class A:\n    def method(self):\n{body}\n\ndef short():\n    return 1\n")
    found = long_functions(path, tmp_path)
    assert found == (["x.py:2 method (81 lines)"] if long else []), found
