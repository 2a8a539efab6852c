"""The compiled build (setup.py, build_backend.py; docs/architecture.md §5).

Compiling takes minutes, so `.ci/run` does it once and runs the whole suite again on the
compiled tree with ``PTXKIT_EXPECT_COMPILED=1``, which makes
`test_the_compiled_modules_are_what_runs` check that the tests did use it. The tests
here check what can go wrong before that: the list, the layout, what mypyc evaluates at
import, and the backend's requirements.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import importlib.machinery
import importlib.util
import os
import sys
import tomllib
from pathlib import Path

import pytest

from test_typing import STRICT_MODULES

REPO = Path(__file__).resolve().parent.parent


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"_ptxkit_{name}", REPO / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


setup_py = _load("setup")
build_backend = _load("build_backend")


def source_file(module: str) -> Path:
    """The file in this tree of a dotted module name (pyproject's ``package-dir``)."""
    folders = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    package = max((name for name in folders if module.startswith(name + ".")), key=len)
    return REPO / folders[package] / (module[len(package) + 1:].replace(".", "/") + ".py")


def test_every_compiled_module_passes_the_strict_check():
    """mypyc compiles what mypy --strict accepts; a module off that list would be compiled
    from types nobody checked."""
    assert set(setup_py.COMPILED_MODULES) <= set(STRICT_MODULES)
    assert all(source_file(module).is_file() for module in setup_py.COMPILED_MODULES)


def test_the_staged_tree_is_the_installed_layout(tmp_path):
    tree = setup_py.staged_tree(tmp_path / "tree")
    for module in setup_py.COMPILED_MODULES:
        staged = tree.joinpath(*module.split(".")).with_suffix(".py")
        assert staged.read_bytes() == source_file(module).read_bytes(), module
    assert (tree / "ptxkit/cfg/__init__.py").is_file() and not (tree / "cfg").exists()


def _checker_only_names(tree: ast.Module) -> set[str]:
    """Names a module binds only inside ``if TYPE_CHECKING:`` (absent at run time)."""
    names = set()
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names.update((alias.asname or alias.name).split(".")[0] for alias in inner.names)
                elif isinstance(inner, ast.AnnAssign) and isinstance(inner.target, ast.Name):
                    names.add(inner.target.id)
                elif isinstance(inner, ast.Assign):
                    names.update(target.id for target in inner.targets if isinstance(target, ast.Name))
    return names


def unevaluable_record_fields(source: str) -> list[str]:
    """Fields of ``class X(Record):`` whose annotation names something bound only for the
    type checker, unquoted: a compiled module evaluates a record's annotations when it
    defines the record, and fails there (KeyError).

    >>> unevaluable_record_fields("if TYPE_CHECKING:\\n    from x import Label\\n"
    ...     "class A(Record):\\n    a: Label | None\\n    b: 'Label'\\n    c: int\\n")
    ['A.a']
    """
    tree = ast.parse(source)
    hidden = _checker_only_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(getattr(base, "id", "") == "Record" for base in node.bases):
            for item in node.body:
                if (isinstance(item, ast.AnnAssign) and not isinstance(item.annotation, ast.Constant)
                        and {name.id for name in ast.walk(item.annotation) if isinstance(name, ast.Name)} & hidden):
                    found.append(f"{node.name}.{item.target.id}")
    return found


@pytest.mark.parametrize("module", setup_py.COMPILED_MODULES)
def test_record_annotations_can_be_evaluated_at_import(module):
    assert unevaluable_record_fields(source_file(module).read_text()) == []


def test_the_backend_asks_for_mypy_only_when_compiling(monkeypatch):
    monkeypatch.setattr(build_backend.build_meta, "get_requires_for_build_wheel", lambda settings=None: ["wheel"])
    monkeypatch.delenv("PTXKIT_COMPILE", raising=False)
    assert build_backend.get_requires_for_build_wheel() == ["wheel"]
    monkeypatch.setenv("PTXKIT_COMPILE", "1")
    assert build_backend.get_requires_for_build_wheel() == ["wheel", build_backend.COMPILER]


@pytest.mark.skipif(os.environ.get("PTXKIT_EXPECT_COMPILED") != "1",
                    reason="the pure tree (PTXKIT_EXPECT_COMPILED=1 marks a run on the compiled one)")
def test_the_compiled_modules_are_what_runs():
    suffixes = tuple(importlib.machinery.EXTENSION_SUFFIXES)
    interpreted = [name for name in setup_py.COMPILED_MODULES
                   if not importlib.import_module(name).__file__.endswith(suffixes)]
    assert interpreted == [], f"interpreted on a compiled run: {interpreted} (sys.path: {sys.path[:3]})"


@pytest.mark.parametrize("module", [setup_py, build_backend], ids=["setup", "build_backend"])
def test_the_build_files_examples_run(module):
    """tests/test_doctests.py covers the package; the two build files are not in it."""
    result = doctest.testmod(module)
    assert result.failed == 0 and result.attempted > 0



#: The builtin containers whose methods mypyc calls directly on a value typed as one.
CONTAINERS = {"dict": dict, "list": list, "set": set}


def builtin_overrides(source: str) -> list[str]:
    """Methods of `CONTAINERS` (``__init__`` aside) that a subclass overrides. Compiled by
    mypyc, a call of such a method on a value typed as the builtin is a C call that skips
    the override.

    >>> builtin_overrides("class A(dict[str, int]):\\n    def get(self, k): ...\\n    def own(self): ...\\n")
    ['A.get']
    """
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ClassDef):
            builtins = [CONTAINERS[name] for base in node.bases
                        if (name := ast.unparse(base).split("[")[0]) in CONTAINERS]
            found += [f"{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef) and item.name != "__init__"
                      and any(hasattr(builtin, item.name) for builtin in builtins)]
    return found


def test_only_the_overlay_overrides_a_builtin_containers_method():
    """registers' `_Overlay` is a dict whose ``get`` reads through to another; everything
    that may hold one is typed a ``Mapping`` (so compiled code calls its ``get``). A new
    such class has to be held the same way: this list says where to look."""
    found = [f"{module}.{name}" for module in setup_py.COMPILED_MODULES
             for name in builtin_overrides(source_file(module).read_text())]
    assert found == ["ptxkit.cfg.values.registers._Overlay.get"]
