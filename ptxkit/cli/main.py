"""``ptxkit``: the command-line entry point.

Each subcommand lives in its own module with ``add_arguments(parser)`` and
``run(args) -> int``; only the module of the command being run is imported, so
``ptxkit --help`` and ``ptxkit --version`` start fast.

Exit codes: 0 success, 1 ``--check`` found problems, 2 bad usage or bad input,
101 an internal error (a bug in ptxkit), 130 interrupted, 141 standard output closed
early (``| head``: the command stops quietly); ``ptxkit ptxas`` exits as ptxas does.
Each command's ``--help`` lists its own, and the environment variables it reads.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

#: subcommand -> (module, one-line help)
COMMANDS = {
    "parse": ("ptxkit.cli.parse_cmd", "check PTX files and print a summary line per function"),
    "fence": ("ptxkit.cli.fence_cmd", "insert (or --check for) generic->async proxy fences"),
    "rewrite": ("ptxkit.cli.rewrite_cmd", "run rewrite passes (shipped or your own), then the fence pass"),
    "report": ("ptxkit.cli.report_cmd", "registers, shared memory, spills and local memory per kernel, by line"),
    "cfg": ("ptxkit.cli.cfg_cmd", "write a function's control-flow graph as Graphviz DOT or SVG"),
    "assemble": ("ptxkit.cli.assemble_cmd", "assemble PTX into a cubin with ptxas"),
    "gen": ("ptxkit.cli.gen_cmd", "generate PTX kernels: register-level and row reductions"),
    "ptxas": ("ptxkit.cli.ptxas_cmd", "run ptxas on PTX after the fence pass (a drop-in ptxas)"),
    "cache": ("ptxkit.cli.cache_cmd", "show (info) or empty (clear) the cubin cache"),
    "trace": ("ptxkit.cli.trace_cmd", "decode an instrumentation buffer: timeline spans, a Chrome trace, counts"),
}


#: What ``ptxkit --help`` says about exit codes and the environment (each command's
#: ``--help`` says which apply to it).
EXIT_CODES = {0: "success", 1: "ptxkit fence --check: a fence is missing",
              2: "bad usage, or an input that is not PTX or cannot be read or written (the message says which)"}
ENVIRONMENT = {
    "PTXKIT_CACHE_DIR": "where ptxkit assemble caches cubins (0: no cache; ptxkit cache info shows it)",
    "PTXKIT_CACHE_MAX": "the cubin cache's cap, e.g. 500M or 2G (default 1G; 0: no cap)",
    "PTXKIT_FENCE_MODE": "ptxkit ptxas and the Triton hook: fence (default), check or off",
    "PTXKIT_ON_ERROR": "ptxkit ptxas and the Triton hook, when the fence pass cannot run: fail (default) or "
                       "ptxas (go on without it, with a warning)",
    "PTXKIT_FENCE_LOG": "ptxkit ptxas and the Triton hook: a file (or -) to append one JSON line per input to",
    "PTXKIT_PASSES": "ptxkit ptxas and the Triton hook: rewrite passes to run before the fence pass "
                     "(comma-separated specs, as ptxkit rewrite --pass takes them)",
    "PTXKIT_REAL_PTXAS": "ptxkit ptxas: NVIDIA's ptxas to run",
    "PTXAS, CUDA_HOME": "where ptxas is looked for (then CUDA_PATH, PATH and cuda.pathfinder)",
}


class HelpFormatter(argparse.HelpFormatter):
    """argparse's help layout, sized to the terminal as argparse sizes it but without
    importing ``shutil`` (with ``bz2``, ``lzma`` and ``fnmatch`` behind it), which
    argparse does for every argument it adds, help printed or not. A text of several
    lines (a `ptxkit.cli.common.Epilog`, laid out only here) keeps its lines; a one-line text
    is filled as argparse fills it.

    >>> import unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, COLUMNS="60"):
    ...     HelpFormatter("ptxkit")._width  # two columns kept free, as argparse keeps them
    58
    """

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24, width: int | None = None):
        super().__init__(prog, indent_increment, max_help_position, terminal_columns() - 2 if width is None else width)

    def add_text(self, text: object) -> None:
        super().add_text(text if text is None or isinstance(text, str) else str(text))  # an `Epilog`, laid out now

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if "\n" in text:
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def terminal_columns() -> int:
    """The columns help is laid out for: ``$COLUMNS``, else the terminal's width, else 80
    (``shutil.get_terminal_size``'s rule).

    >>> import unittest.mock
    >>> with unittest.mock.patch.dict(os.environ, COLUMNS="100"):
    ...     terminal_columns()
    100
    """
    try:
        columns = int(os.environ.get("COLUMNS", 0))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The argument parser: with a `command`, that command's alone (its module loaded);
    without, every command with its one-line help.

    >>> args = build_parser("assemble").parse_args(["assemble", "k.ptx", "--arch", "sm_100a"])
    >>> args.command, args.file, args.arch, args.output
    ('assemble', 'k.ptx', 'sm_100a', None)
    """
    from ptxkit import __version__

    from .common import help_epilog

    parser = argparse.ArgumentParser(
        prog="ptxkit",
        description="Read, check, rewrite, generate, assemble and run NVIDIA PTX.",
        epilog=help_epilog(EXIT_CODES, ENVIRONMENT, "\n\nptxkit COMMAND --help: a command's options, exit codes "
                                                    "and environment."),
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"ptxkit {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module, summary) in COMMANDS.items():
        if command is None:
            subparsers.add_parser(name, help=summary, description=summary, formatter_class=HelpFormatter)
        elif name == command:
            command_parser = subparsers.add_parser(name, description=summary, formatter_class=HelpFormatter)
            importlib.import_module(module).add_arguments(command_parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run ``ptxkit`` with `argv` (default: ``sys.argv[1:]``); returns the exit code."""
    from .common import closed_pipe, run_command

    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((a for a in argv if not a.startswith("-")), None)
    command = command if command in COMMANDS else None
    parser = build_parser(command)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse: --help, --version, usage errors (2)
        return int(exit_.code or 0)
    except BrokenPipeError:  # `ptxkit fence --help | head -3`
        return closed_pipe()
    if args.command is None:
        parser.print_help(sys.stderr)
        return 2
    return run_command(importlib.import_module(COMMANDS[args.command][0]).run, args)


def console_main() -> None:
    """The ``ptxkit`` console script and ``python -m ptxkit``: `main` on ``sys.argv``
    under the command line's collector policy (`ptxkit._gc.collect_less_often`), then
    the process ends without collecting what the command built
    (`ptxkit._gc.exit_keeping_objects`)."""
    from ptxkit._gc import collect_less_often, exit_keeping_objects

    from .common import flush_at_exit

    collect_less_often()
    exit_keeping_objects(flush_at_exit(main()))


if __name__ == "__main__":
    console_main()
