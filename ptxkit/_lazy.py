"""Public names of a package that are imported from their modules on first use.

>>> import types, sys
>>> package = types.ModuleType("demo")
>>> sys.modules["demo"] = package
>>> package.__getattr__, package.__dir__ = lazy_exports("demo", {"sqrt": "math"})
>>> package.sqrt(16.0), dir(package)
(4.0, ['sqrt'])
"""

from __future__ import annotations

import importlib
import sys


def lazy_exports(package: str, exports: dict[str, str]):
    """A module-level ``__getattr__`` and ``__dir__`` for `package`: each name in `exports`
    (name -> defining module) is imported when first asked for, then kept on the package.

    >>> getattr_, dir_ = lazy_exports("ptxkit", {"parse": "ptxkit.parser"})
    >>> getattr_("parse").__module__, dir_()
    ('ptxkit.parser', ['parse'])
    >>> getattr_("nope")
    Traceback (most recent call last):
    AttributeError: module 'ptxkit' has no attribute 'nope'
    """

    def __getattr__(name: str):
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__():
        return sorted(exports)

    return __getattr__, __dir__
