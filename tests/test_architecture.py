"""The layers of ptxkit and the imports allowed between them (docs/architecture.md §1 and §3).

Every module of ``ptxkit/``, ``cfg/`` and ``generators/`` has a layer here; a module added
without one fails, so that the note is kept up to date with the code.
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


def violations(modules: dict[str, Path], root: Path = ROOT) -> list[str]:
    """``file: layer imports module (its layer)`` for each import of `modules` (name → file)
    that docs/architecture.md §3 does not allow.

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
            if theirs != own and theirs not in ALLOWED[own]:
                wrong.append(f"{path.relative_to(root)}: {own} imports {target} ({theirs})")
    return wrong


def test_every_module_has_a_layer():
    missing = [name for name in sources() if layer(name) is None]
    assert not missing, f"place these in LAYER_OF and in docs/architecture.md §1: {missing}"


def test_imports_follow_the_layers():
    wrong = violations(sources())
    assert not wrong, "imports that docs/architecture.md §3 does not allow:\n" + "\n".join(wrong)


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
