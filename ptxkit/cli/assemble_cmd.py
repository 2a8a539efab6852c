"""``ptxkit assemble FILE --arch sm_90a -o out.cubin [-v]``: assemble PTX into a cubin.

ptxas's errors and warnings are printed as ``FILE:LINE:1: error: … [ptxas]``; on an error
the exit code is 2 and no output file is written (an existing one is left as it was).
``-v`` also prints each kernel's registers, shared memory, stack frame and spills.
"""

from __future__ import annotations

import os
import sys


#: The environment ``ptxkit assemble`` reads (shown by its ``--help``, and ``ptxkit cache``'s).
CACHE_ENVIRONMENT = {
    "PTXKIT_CACHE_DIR": "the cubin cache's folder (default: ~/.cache/ptxkit/cubins or the platform's cache "
                        "folder; 0: no cache)",
    "PTXKIT_CACHE_MAX": "the cache's cap, e.g. 500M or 2G (default 1G; 0: no cap); the least recently used cubins "
                        "go first",
}
TOOL_ENVIRONMENT = {
    "PTXAS": "the ptxas to run; else $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, then cuda.pathfinder",
}


def add_arguments(parser) -> None:
    from .common import help_epilog

    parser.epilog = help_epilog({0: "the cubin was written",
                                 2: "ptxas rejected the PTX (its messages at FILE:LINE), the input or output cannot be "
                                    "read or written, or bad usage"}, {**CACHE_ENVIRONMENT, **TOOL_ENVIRONMENT})
    parser.add_argument("file", metavar="FILE", help="PTX file, or - for standard input")
    parser.add_argument("--arch", default="sm_90a", type=_arch, help="GPU target (default: sm_90a)")
    parser.add_argument("-o", "--output", metavar="OUT",
                        help="cubin to write (default: FILE with the suffix .cubin; - for stdout)")
    parser.add_argument("-O", "--opt-level", type=int, choices=range(4), default=None, metavar="N",
                        help="ptxas optimisation level 0-3 (default: ptxas's, -O3 except for debug PTX)")
    parser.add_argument("-X", "--ptxas-option", action="append", default=[], metavar="OPTION",
                        help="pass OPTION to ptxas, e.g. -X=--maxrregcount=64 (repeatable)")
    parser.add_argument("--no-cache", action="store_true", help="do not read or write the cubin cache")
    parser.add_argument("-v", "--verbose", action="store_true", help="print each kernel's resource usage")


def run(args) -> int:
    from ptxkit.parser import check_module_start
    from ptxkit.ptxas import PtxasError, assemble

    from .common import EXIT_BAD_INPUT, UsageError, read_input
    from .output import write_file

    output = args.output
    if output is None:
        if args.file == "-":
            raise UsageError("reading standard input needs -o OUT")
        output = os.path.splitext(args.file)[0] + ".cubin"
    data, name = read_input(args.file)
    check_module_start(data.decode("utf-8", "replace"), name)  # at line 1, as parse and fence say it
    try:
        cubin = assemble(data, arch=args.arch, opt_level=args.opt_level, options=args.ptxas_option,
                         filename=name, cache=not args.no_cache)
    except PtxasError as err:
        print(err, file=sys.stderr)
        return EXIT_BAD_INPUT
    for diagnostic in cubin.diagnostics:
        print(diagnostic.format(), file=sys.stderr)
    if args.verbose:
        for kernel, use in cubin.resources.items():
            print(f"{name}: {kernel}: {use.registers} registers, {use.shared_bytes} bytes shared memory, "
                  f"{use.stack_frame} bytes stack frame, {use.spill_stores} bytes spill stores, "
                  f"{use.spill_loads} bytes spill loads ({cubin.arch}, ptxas {cubin.ptxas_version})",
                  file=sys.stderr)
    write_file(output, cubin.data)
    return 0


def _arch(value: str) -> str:
    import argparse

    from ptxkit.ptxas import check_arch

    try:
        return check_arch(value)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
