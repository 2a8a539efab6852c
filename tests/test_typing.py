"""The modules of the core that type-check under ``mypy --strict`` (issue 35 item 6), kept so.

`STRICT_MODULES` is the one list: a module joins it once ``mypy --strict`` finds nothing
in it, and the test fails on any error mypy reports there. Modules they import that are not
on the list are read for their types but not reported (``--follow-imports silent``).

The source tree is not laid out as the package is (``ptxkit.cfg`` lives in ``cfg/``,
pyproject.toml's ``package-dir``), so mypy reads it through a tree of links laid out as
the installed package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

#: Modules that pass ``mypy --strict``, in import order (docs/architecture.md §4).
STRICT_MODULES = (
    "ptxkit._records",
    "ptxkit.isa",
    "ptxkit.isa_eval",
    "ptxkit.node_protocols",
    "ptxkit.instruction",
    "ptxkit.declarations",
    "ptxkit.syntax",
    "ptxkit.parser",
    "ptxkit.cfg.flow",
    "ptxkit.cfg.flow.protocols",
    "ptxkit.cfg.flow.graph",
    "ptxkit.cfg.flow.inline",
    "ptxkit.cfg.flow.dominance",
    "ptxkit.cfg.flow.loops",
    "ptxkit.cfg.flow.dataflow",
    "ptxkit.cfg.flow.ssa",
    "ptxkit.cfg.flow.operands",
    "ptxkit.cfg.values",
    "ptxkit.cfg.values.values",
    "ptxkit.cfg.values.protocols",
    "ptxkit.cfg.values.arithmetic",
    "ptxkit.cfg.values.idioms",
    "ptxkit.cfg.values.frames",
    "ptxkit.cfg.values.symbols",
    "ptxkit.cfg.values.specials",
    "ptxkit.cfg.values.escape",
    "ptxkit.cfg.values.definitions",
    "ptxkit.cfg.values.divergence",
    "ptxkit.cfg.values.thread_sets",
    "ptxkit.cfg.values.conditions",
    "ptxkit.cfg.values.counters",
    "ptxkit.cfg.values.lanes",
    "ptxkit.cfg.values.trips",
    "ptxkit.cfg.values.registers",
    "ptxkit.cfg.sync",
    "ptxkit.cfg.sync.locations",
    "ptxkit.cfg.sync.events",
    "ptxkit.cfg.sync.protocols",
    "ptxkit.cfg.sync.phases",
    "ptxkit.cfg.sync.once",
    "ptxkit.cfg.sync.armed",
    "ptxkit.cfg.sync.groups",
    "ptxkit.cfg.fence",
    "ptxkit.cfg.fence.options",
    "ptxkit.cfg.fence.proxy",
    "ptxkit.cfg.fence.placement",
    "ptxkit.cfg.fence.fence",
    "ptxkit.cfg.fence.dot",
)


def _mypy_available() -> bool:
    return subprocess.run([sys.executable, "-m", "mypy", "--version"], capture_output=True).returncode == 0


needs_mypy = pytest.mark.skipif(not _mypy_available(), reason="mypy is not installed (pip install -e '.[dev]')")


def package_tree(root: Path) -> Path:
    """Links under `root` laid out as the installed package: each package of pyproject's
    ``package-dir`` at its dotted name's place."""
    layout = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    for package, folder in sorted(layout.items()):  # parents before their subpackages
        place = root.joinpath(*package.split("."))
        place.mkdir(parents=True, exist_ok=True)
        for entry in (REPO / folder).iterdir():
            if entry.name != "__pycache__" and not (place / entry.name).exists():
                (place / entry.name).symlink_to(entry)
    return root


def mypy_strict(root: Path, modules: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    arguments = [arg for module in modules for arg in ("-m", module)]
    return subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--follow-imports", "silent", "--no-incremental",
         "--cache-dir", os.devnull, "--no-error-summary", *arguments],
        cwd=package_tree(root), capture_output=True, text=True, env={**os.environ, "MYPYPATH": ""})


@needs_mypy
def test_strict_modules_type_check(tmp_path: Path) -> None:
    result = mypy_strict(tmp_path, STRICT_MODULES)
    assert result.returncode == 0 and not result.stdout.strip(), result.stdout + result.stderr


@needs_mypy
def test_a_type_error_fails_the_check(tmp_path: Path) -> None:
    """The check can fail: a strict module with a wrong annotation added is reported."""
    tree = package_tree(tmp_path / "tree")
    source = (tree / "ptxkit" / "isa.py").resolve().read_text()
    (tree / "ptxkit" / "isa.py").unlink()
    (tree / "ptxkit" / "isa.py").write_text(source + "\n\ndef _wrong() -> int:\n    return 'not an int'\n")
    result = mypy_strict(tmp_path / "tree", ("ptxkit.isa",))
    assert result.returncode == 1 and "isa.py" in result.stdout and "[return-value]" in result.stdout, result.stdout


def test_the_tree_lays_out_the_package(tmp_path: Path) -> None:
    tree = package_tree(tmp_path)
    assert (tree / "ptxkit" / "cfg" / "flow" / "graph.py").resolve() == REPO / "cfg" / "flow" / "graph.py"
    assert (tree / "ptxkit" / "isa.py").resolve() == REPO / "ptxkit" / "isa.py"


#: A module that hands the register analysis to the parts that read it through protocols
#: (`ptxkit.cfg.values.conditions`, `ptxkit.cfg.values.counters`); EXTRA goes into a
#: protocol of its own that the analysis must have too.
ANALYSIS_PARTS = '''from __future__ import annotations
from typing import Protocol
from ptxkit.cfg.values.protocols import Counting, Narrowed, Renamed, Solving, Tests
from ptxkit.cfg.values.registers import _Analysis

class _Extra(Protocol):
    {extra}

def parts(analysis: _Analysis) -> tuple[Tests, Renamed, Narrowed, Counting, Solving, _Extra]:
    return analysis, analysis, analysis, analysis, analysis, analysis
'''


@needs_mypy
@pytest.mark.parametrize("extra, fails", [
    ("def prefix(self, block: int) -> str: ...", False),
    ("def not_there(self, block: int) -> str: ...", True),  # the check can fail
])
def test_the_register_analysis_has_what_its_parts_read(tmp_path: Path, extra: str, fails: bool) -> None:
    """The analysis is handed to the branch conditions and the counter idioms as every
    protocol they read it through: mypy checks it has each attribute and method they list."""
    tree = package_tree(tmp_path)
    (tree / "analysis_parts.py").write_text(ANALYSIS_PARTS.format(extra=extra))
    result = mypy_strict(tmp_path, ("analysis_parts",))
    errors = [line for line in result.stdout.splitlines() if line.startswith("analysis_parts.py")]
    assert bool(errors) == fails and (not fails or "_Extra" in result.stdout), result.stdout + result.stderr
