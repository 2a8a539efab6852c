"""Start-up: what the fast paths import (and what they must not), and no import cycles.

A ptxkit process pays for every module it imports before it does any work; the ptxas
wrapper must start ptxas before the fence pass is even loaded.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import SAMPLES

PACKAGE = Path(__file__).resolve().parent.parent / "ptxkit"


def imported_by(code: str) -> set[str]:
    """Modules a fresh interpreter imports to run `code`, beyond what it starts with."""
    probe = ("import sys; before = set(sys.modules)\n" + code +
             "\nprint(' '.join(sorted(set(sys.modules) - before)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert done.returncode in (0, 1), done.stderr
    return set(done.stdout.split("\n")[-2].split())


def test_the_wrapper_finds_ptxas_without_loading_the_fence_pass():
    modules = imported_by("from ptxkit.cli import ptxas_cmd\n"
                          "try:\n    ptxas_cmd.real_ptxas()\nexcept ptxas_cmd.WrapperError:\n    pass")
    heavy = {"ptxkit.parser", "ptxkit.syntax", "ptxkit.cfg", "ptxkit.ptxas", "json", "subprocess",
             "argparse", "dataclasses", "networkx"}
    assert not heavy & modules, heavy & modules


def test_fence_check_loads_only_what_it_uses():
    code = (f"from ptxkit.cli.main import main\n"
            f"main(['fence', '--check', {str(SAMPLES / 'fence' / '13_hoist_out_of_if.ptx')!r}])")
    modules = imported_by(code)
    assert "ptxkit.cfg.fence.fence" in modules
    unused = {"json", "difflib", "traceback", "subprocess", "concurrent.futures", "multiprocessing",
              "ptxkit.ptxas", "ptxkit.runtime", "numpy", "ptxkit.cli.sarif", "dataclasses", "inspect",
              "shutil"}
    assert not unused & modules, unused & modules


def test_fence_writing_its_output_loads_no_help_text_or_temporary_file_machinery(tmp_path):
    out = tmp_path / "fenced.ptx"
    code = (f"from ptxkit.cli.main import main\n"
            f"main(['fence', {str(SAMPLES / 'fence' / '13_hoist_out_of_if.ptx')!r}, '-o', {str(out)!r}])")
    modules = imported_by(code)
    assert out.read_text().count("fence.proxy.async") >= 1  # the run wrote the fenced PTX
    loaded = {"tempfile", "textwrap", "shutil", "random"} & modules
    assert not loaded, loaded


def test_fence_check_of_ptx_without_async_operations_does_not_load_the_pass():
    code = (f"from ptxkit.cli.main import main\n"
            f"main(['fence', '--check', {str(SAMPLES / 'triton' / 'layernorm_1024.ptx')!r}])")
    modules = imported_by(code)
    assert "ptxkit.cfg.fence.options" in modules
    assert not {"ptxkit.cfg.fence.fence", "ptxkit.cfg.fence.placement", "ptxkit.cfg.fence.proxy",
                "ptxkit.cfg.values.registers"} & modules


def module_imports(path: Path) -> set[str]:
    """The ptxkit modules that `path` imports anywhere in it (functions included)."""
    package = "ptxkit.cli" if path.parent.name == "cli" else "ptxkit"
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names = [f"{base}.{alias.name}" for alias in node.names] + [base]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        else:
            continue
        found.update(name for name in names if (PACKAGE / f"{name[7:].replace('.', '/')}.py").exists()
                     and name.startswith("ptxkit."))
    return found


def test_no_import_cycles_in_ptxkit():
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = "ptxkit." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = module_imports(path)
    cycles = []

    def visit(module, trail):
        for target in sorted(modules.get(module, ())):
            if target in trail:
                cycles.append(trail[trail.index(target):] + [target])
            elif len(trail) < 12:
                visit(target, trail + [target])

    for module in modules:
        visit(module, [module])
    assert not cycles, cycles[:3]


@pytest.mark.parametrize("pair", [("ptxkit.parser", "ptxkit.syntax"), ("ptxkit.runtime", "ptxkit.tensormap")])
def test_the_two_old_cycles_point_one_way(pair):
    user, used = pair
    assert used in module_imports(PACKAGE / f"{user[7:]}.py")
    assert user not in module_imports(PACKAGE / f"{used[7:]}.py")
