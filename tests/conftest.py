"""Shared test set-up: markers that skip cleanly when a tool or the GPU is missing.

- ``ptxas``: needs a ptxas binary (found the way `ptxkit.ptxas.find_ptxas` looks).
- ``nvcc``: needs the nvcc compiler driver on PATH.
- ``gpu``: needs an NVIDIA GPU usable through cuda-python.
"""

from __future__ import annotations

import functools
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


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
def gpu_available() -> bool:
    try:
        from ptxkit.runtime import gpu_available as probe
    except ImportError:
        return False
    return probe()


def pytest_collection_modifyitems(config, items):
    reasons = {
        "ptxas": (ptxas_available, "no ptxas found (install the CUDA toolkit or `pip install ptxkit[toolkit]`)"),
        "nvcc": (lambda: shutil.which("nvcc") is not None, "nvcc is not on PATH"),
        "gpu": (gpu_available, "no NVIDIA GPU usable through cuda-python"),
    }
    for item in items:
        for marker, (available, reason) in reasons.items():
            if marker in item.keywords and not available():
                item.add_marker(pytest.mark.skip(reason=reason))
