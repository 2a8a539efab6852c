"""The build backend: setuptools', asking for mypy too when ``PTXKIT_COMPILE=1`` (setup.py).

pyproject.toml's ``build-system`` cannot depend on the environment, and pip builds in an
isolated environment that has only what the backend asks for; so a compiled build's mypy
(mypyc ships inside it) is asked for here. Everything else is setuptools' own.

>>> COMPILER  # what ``PTXKIT_COMPILE=1 pip wheel .`` adds to setuptools' own requirements
'mypy>=2.4,<2.5'
"""

from __future__ import annotations

import os

from setuptools import build_meta
from setuptools.build_meta import *  # noqa: F403 (every hook pip may call, unchanged)

#: What a compiled build needs besides setuptools: mypy carries mypyc; the version whose compiled pass was checked against the pure one.
COMPILER = "mypy>=2.4,<2.5"


def get_requires_for_build_wheel(config_settings: dict[str, object] | None = None) -> list[str]:
    """setuptools' requirements (pip asks before it builds a wheel), and `COMPILER` when
    the build compiles (tests/test_build.py calls it both ways)."""
    extra = [COMPILER] if os.environ.get("PTXKIT_COMPILE") == "1" else []
    return build_meta.get_requires_for_build_wheel(config_settings) + extra
