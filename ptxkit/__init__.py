"""ptxkit: read, check, rewrite, generate, assemble and run NVIDIA PTX.

>>> import ptxkit
>>> module = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n")
>>> str(module) == module.source.text
True

Heavy parts (networkx, numpy, cuda-python) are imported only when used, so that
``import ptxkit`` and ``ptxkit --help`` stay fast.
"""

from __future__ import annotations

from ._lazy import lazy_exports

__version__ = "0.1.0"

# public name -> module that defines it (imported on first access)
_EXPORTS = {
    "parse": "ptxkit.parser",
    "parse_file": "ptxkit.parser",
    "parse_statement": "ptxkit.parser",
    "PtxSyntaxError": "ptxkit.errors",
    "Module": "ptxkit.syntax",
    "Function": "ptxkit.syntax",
    "Block": "ptxkit.syntax",
    "Instruction": "ptxkit.syntax",
    "Directive": "ptxkit.syntax",
    "Label": "ptxkit.syntax",
    "Operand": "ptxkit.instruction",
    "assemble": "ptxkit.ptxas",
    "Cubin": "ptxkit.ptxas",
    "PtxasError": "ptxkit.ptxas",
}

__all__ = sorted(_EXPORTS) + ["__version__"]


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
