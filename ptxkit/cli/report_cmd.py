"""``ptxkit report FILE…``: per kernel, registers, shared memory, stack frame, spills and
local memory, mapped to the PTX and source lines involved (`ptxkit.rewrite.passes.report`).

The PTX is assembled with ptxas (``--arch``, default its ``.target``; ``-X OPTION`` passes
an option on, e.g. ``-X --maxrregcount=64``) and the SASS read with nvdisasm. Text goes
to standard output (or ``-o FILE``); ``--format json`` prints one JSON object per file,
one per line. The same report is a pass: ``ptxkit rewrite k.ptx --pass report --format
json`` reports on the PTX as the passes before it left it.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    from . import batch
    from .assemble_cmd import CACHE_ENVIRONMENT, TOOL_ENVIRONMENT
    from .common import help_epilog

    parser.epilog = help_epilog(
        {0: "every file was reported on", 2: "a file is not PTX, ptxas rejects it (its messages at FILE:LINE), an "
                                             "input or output cannot be read or written, or bad usage"},
        {**CACHE_ENVIRONMENT, **TOOL_ENVIRONMENT,
         "NVDISASM": "the nvdisasm that reads the SASS (else the CUDA toolkit's, PATH, the nvidia-cuda-nvdisasm "
                     "wheel); without one, spills are not mapped to lines"})

    parser.add_argument("inputs", nargs="+", metavar="FILE",
                        help="PTX files or folders (walked for *.ptx), or - for standard input")
    parser.add_argument("--arch", default=None, metavar="SM",
                        help="the GPU to assemble for (default: the file's .target, else sm_90a)")
    parser.add_argument("-X", "--ptxas-option", dest="ptxas_options", action="append", default=[], metavar="OPTION",
                        help="pass OPTION to ptxas (repeat for several), e.g. -X=--maxrregcount=64")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="json: one JSON object per file, one per line (default: text)")
    parser.add_argument("-o", "--output", metavar="OUT", help="write the report to OUT")
    batch.add_arguments(parser)


def run(args) -> int:
    from . import batch
    from .output import write_output

    files = batch.expand_inputs(args.inputs)
    if args.arch is not None:
        from ptxkit.ptxas import check_arch

        try:
            check_arch(args.arch)
        except ValueError as err:
            from .common import UsageError

            raise UsageError(str(err)) from None
    if args.output is None:
        status, _ = batch.run_files(report_one, files, args)
    else:
        quiet = type(args)(**{**vars(args), "quiet": True})
        status, results = batch.run_files(report_one, files, quiet)
        write_output("".join(result.data for result in results if result.status == 0), args.output)
    sys.stdout.flush()
    return status


def report_one(path: str, args):
    """The report of one input as `args` ask; its `FileResult`.

    >>> import argparse
    >>> args = argparse.Namespace(arch=None, ptxas_options=[], format="text")
    >>> report_one("samples/toolchain/vector_add.ptx", args).stdout.splitlines()[1]  # doctest: +SKIP
    'vector_add: 16 registers, 0 bytes shared memory, 0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads'
    """
    from ptxkit import parse
    from ptxkit.ptxas import PtxasError
    from ptxkit.rewrite.passes.report import resource_report

    from .batch import FileResult
    from .common import EXIT_OK, UsageError, read_input

    data, name = read_input(path)
    module = parse(data, name)
    try:
        report = resource_report(module, args.arch, args.ptxas_options)
    except PtxasError as err:
        raise UsageError(f"ptxas rejected {name}:\n{err}") from None
    if args.format == "json":
        import json

        text = json.dumps(report.to_json()) + "\n"
    else:
        text = report.text()
    if getattr(args, "quiet", False):
        return FileResult(name, EXIT_OK, data=text)
    return FileResult(name, EXIT_OK, text)
