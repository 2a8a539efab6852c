"""``ptxkit parse FILE…``: check PTX files and print a one-line summary per function.

Every statement is parsed in full (headers, declarations, instruction operands), so
this is also a syntax check: the first error is printed as ``file:line:col: error:``
and the exit code is 2.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    parser.add_argument("files", nargs="+", metavar="FILE", help="PTX file, or - for standard input")


def run(args) -> int:
    from .common import parse_input

    for path in args.files:
        module = parse_input(path).check()
        print(summarise_module(module))
        for function in module.functions:
            print(summarise_function(module, function))
    sys.stdout.flush()
    return 0


def summarise_module(module) -> str:
    """``file: PTX 8.0, target sm_90a, 64-bit addresses, N functions``.

    >>> from ptxkit.cli.common import parse_input
    >>> summarise_module(parse_input("samples/toolchain/vector_add.ptx"))
    'samples/toolchain/vector_add.ptx: PTX 8.0, target sm_80, 64-bit addresses, 1 function'
    """
    version = ".".join(map(str, module.version)) if module.version else "?"
    targets = ", ".join(module.targets) or "?"
    size = f"{module.address_size}-bit addresses" if module.address_size else "no .address_size"
    return f"{module.filename}: PTX {version}, target {targets}, {size}, {_plural(len(module.functions), 'function')}"


def summarise_function(module, function) -> str:
    """``file:line:col: .entry name(params): N instructions, M labels[, directives]``.

    >>> from ptxkit import parse
    >>> m = parse(".version 8.0\\n.visible .entry k(.param .u32 n) .maxntid 128\\n{\\nL:\\n\\tret;\\n}\\n", "k.ptx")
    >>> summarise_function(m, m.function("k"))
    'k.ptx:2:1: .visible .entry k (1 parameter): 1 instruction, 1 label, 0 nested scopes, .maxntid 128'
    """
    from ptxkit.syntax import Block, Instruction, Label

    sig = function.signature
    line, column = function.position
    head = f"{module.filename}:{line}:{column}: {' '.join(sig.linkage + ('.' + sig.kind,))} {sig.name}"
    head += f" ({_plural(len(sig.params), 'parameter')})"
    if function.is_declaration:
        return f"{head}: declaration"
    counts = {Instruction: 0, Label: 0, Block: 0}
    for node in function.walk():
        kind = type(node)
        if kind in counts:
            counts[kind] += 1
    extra = "".join(f", {name} {value}".rstrip() for name, value in sig.directives)
    return (
        f"{head}: {_plural(counts[Instruction], 'instruction')}, {_plural(counts[Label], 'label')}, "
        f"{_plural(counts[Block], 'nested scope')}{extra}"
    )


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"
