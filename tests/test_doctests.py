"""The examples in every public docstring run and give what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest



#: the installed packages of the three source folders (cfg/, generators/ live apart)
PACKAGES = ["ptxkit", "ptxkit.cfg", "ptxkit.generators"]


def all_modules() -> list[str]:
    """Every module and package under `PACKAGES`, subpackages included."""
    names = set(PACKAGES)
    for package in PACKAGES:
        path = importlib.import_module(package).__path__
        names.update(info.name for info in pkgutil.walk_packages(path, package + "."))
    return sorted(names - {"ptxkit.__main__"})


@pytest.mark.parametrize("name", all_modules())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
