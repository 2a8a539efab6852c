"""The examples in every public docstring run and give what they show."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest



PACKAGES = ["ptxkit", "ptxkit.cli", "ptxkit.instrument", "ptxkit.cfg", "ptxkit.generators",  # cfg/, generators/ live apart
            "ptxkit.rewrite", "ptxkit.rewrite.passes"]


def all_modules() -> list[str]:
    names = set(PACKAGES)
    for package in PACKAGES:
        path = importlib.import_module(package).__path__
        names.update(info.name for info in pkgutil.iter_modules(path, package + "."))
    return sorted(names - {"ptxkit.__main__"})


@pytest.mark.parametrize("name", all_modules())
def test_docstring_examples(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
