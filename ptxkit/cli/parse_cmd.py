"""``ptxkit parse FILE…``: check PTX files and print a one-line summary per function.

Every statement is parsed in full (headers, declarations, instruction operands), so
this is also a syntax check: the first error of each file is printed as
``file:line:col: error:`` and the exit code is 2. Folders are walked for ``*.ptx``;
the files are parsed in as many processes as the batch is worth (``-j N``: N).
"""

from __future__ import annotations

from .common import plural


def add_arguments(parser) -> None:
    from . import batch
    from .common import help_epilog

    parser.epilog = help_epilog({0: "every file was read as PTX",
                                 2: "a file is not PTX or cannot be read (FILE:LINE:COL: error: …), or bad usage"})

    parser.add_argument("files", nargs="+", metavar="FILE",
                        help="PTX files or folders (walked for *.ptx), or - for standard input")
    batch.add_arguments(parser)


def run(args) -> int:
    from . import batch

    files = batch.expand_inputs(args.files)
    status, _ = batch.run_files(parse_one, files, args, _summary, cost=batch.PARSE_COST)
    return status


def parse_one(path: str, args=None):
    """Parse one file in full; its `FileResult` holds the summary lines.

    >>> print(parse_one("samples/toolchain/empty.ptx").stdout, end="")
    samples/toolchain/empty.ptx: PTX 8.0, target sm_80, 64-bit addresses, 1 function
    samples/toolchain/empty.ptx:6:1: .visible .entry empty (0 parameters): 1 instruction, 0 labels, 0 nested scopes
    """
    from .batch import FileResult
    from .common import EXIT_OK, parse_input

    module = parse_input(path).check()
    lines = [summarise_module(module)] + [summarise_function(module, function) for function in module.functions]
    module.release()
    return FileResult(module.filename, EXIT_OK, "".join(line + "\n" for line in lines))


def _summary(results) -> str:
    bad = sum(result.status != 0 for result in results)
    return f"ptxkit parse: {plural(len(results), 'file')}, {len(results) - bad} parsed, {bad} with errors"


def summarise_module(module) -> str:
    """``file: PTX 8.0, target sm_90a, 64-bit addresses, N functions``.

    >>> from ptxkit.cli.common import parse_input
    >>> summarise_module(parse_input("samples/toolchain/vector_add.ptx"))
    'samples/toolchain/vector_add.ptx: PTX 8.0, target sm_80, 64-bit addresses, 1 function'
    """
    version = ".".join(map(str, module.version)) if module.version else "?"
    targets = ", ".join(module.targets) or "?"
    size = f"{module.address_size}-bit addresses" if module.address_size else "no .address_size"
    return f"{module.filename}: PTX {version}, target {targets}, {size}, {plural(len(module.functions), 'function')}"


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
    head += f" ({plural(len(sig.params), 'parameter')})"
    if function.is_declaration:
        return f"{head}: declaration"
    counts = {Instruction: 0, Label: 0, Block: 0}
    for node in function.walk():
        kind = type(node)
        if kind in counts:
            counts[kind] += 1
    extra = "".join(f", {name} {value}".rstrip() for name, value in sig.directives)
    return (
        f"{head}: {plural(counts[Instruction], 'instruction')}, {plural(counts[Label], 'label')}, "
        f"{plural(counts[Block], 'nested scope')}{extra}"
    )


