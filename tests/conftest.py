"""Shared test set-up: markers that skip cleanly when a tool or the GPU is missing.

- ``ptxas``: needs a ptxas binary (found the way `ptxkit.ptxas.find_ptxas` looks).
- ``nvdisasm``: needs nvdisasm too (`ptxkit.sass.find_nvdisasm`), which maps spills to
  lines; a machine may have ptxas without it (the ``nvidia-cuda-nvcc`` wheel alone).
- ``nvcc``: needs the nvcc compiler driver on PATH.
- ``gpu``: needs an NVIDIA GPU usable through cuda-python.
- ``pure``: patches or inspects the interpreted core, so it runs only where the core is
  not compiled (setup.py): compiled code calls its functions directly, past a patched
  attribute, and its classes have no ``__dict__`` and take no weak references.

The property tests draw the same examples on every run (Hypothesis's ``derandomize``: a
seed derived from each test), so a run passes or fails on the tree alone and CI cannot
meet a new example by chance. Exploring is asked for: ``--hypothesis-seed=N`` draws the
examples of seed N (a seed overrides derandomizing), ``--hypothesis-profile=explore`` fresh
ones on every run.
"""

from __future__ import annotations

import functools
import importlib.util
import shutil
from pathlib import Path

import pytest

if importlib.util.find_spec("hypothesis") is not None:  # the dev extra; the tests that need none run without it
    from hypothesis import settings

    settings.register_profile("deterministic", derandomize=True, database=None)
    settings.register_profile("explore")
    settings.load_profile("deterministic")

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def environment_variables(*paths: Path) -> set[str]:
    """The ``PTXKIT_*`` names in the code of the Python files `paths` (folders walked):
    string literals, not docstrings or comments, so a variable only planned in prose is
    left out and one the code reads or tells the user about is in.

    >>> environment_variables(ROOT / "ptxkit" / "cubin_cache.py") >= {"PTXKIT_CACHE_DIR", "PTXKIT_CACHE_MAX"}
    True
    """
    import ast
    import re

    files = [file for path in paths for file in (sorted(path.rglob("*.py")) if path.is_dir() else [path])]
    names = set()
    for file in files:
        tree = ast.parse(file.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
                names.update(re.findall(r"\bPTXKIT_[A-Z0-9_]*[A-Z0-9]\b", node.value))
    return names


@functools.cache
def ptxas_available() -> bool:
    try:
        from ptxkit.ptxas import find_ptxas
    except ImportError:
        return shutil.which("ptxas") is not None
    try:
        find_ptxas()
    except Exception:
        return False
    return True


@functools.cache
def nvdisasm_available() -> bool:
    from ptxkit.sass import find_nvdisasm

    try:
        find_nvdisasm()
    except FileNotFoundError:
        return False
    return True


@functools.cache
def gpu_available() -> bool:
    try:
        from ptxkit.runtime import gpu_available as probe
    except ImportError:
        return False
    return probe()


@functools.cache
def core_compiled() -> bool:
    """Whether the fence pass's core was imported compiled (the second run of .ci/run)."""
    from importlib.machinery import EXTENSION_SUFFIXES

    from ptxkit.cfg.values import registers
    return registers.__file__.endswith(tuple(EXTENSION_SUFFIXES))


def pytest_collection_modifyitems(config, items):
    reasons = {
        "ptxas": (ptxas_available, "no ptxas found (install the CUDA toolkit or `pip install ptxkit[toolkit]`)"),
        "nvdisasm": (nvdisasm_available, "no nvdisasm found (install the CUDA toolkit or `pip install ptxkit[toolkit]`)"),
        "nvcc": (lambda: shutil.which("nvcc") is not None, "nvcc is not on PATH"),
        "gpu": (gpu_available, "no NVIDIA GPU usable through cuda-python"),
        "pure": (lambda: not core_compiled(), "the core is compiled: the test patches or inspects interpreted code"),
    }
    for item in items:
        for marker, (available, reason) in reasons.items():
            if marker in item.keywords and not available():
                item.add_marker(pytest.mark.skip(reason=reason))
