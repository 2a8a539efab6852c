"""``ptxkit rewrite FILE… --pass SPEC [--pass SPEC…]``: run rewrite passes, then the
fence pass.

Each ``--pass`` names a shipped pass (``strip-fences``, ``strip --opcode OP`` …: see
`ptxkit.rewrite.passes`), a user pass as ``module:function`` (``module`` a dotted
module or a ``.py`` file), or ``fence``; a pass's options follow its name inside the
quotes (``--pass "strip --opcode bar.sync"``). Passes run in the order given; the
fence pass runs last unless ``--pass fence`` puts it elsewhere, ``--no-fence`` leaves
it out, or a pass asks not to be followed by it (the strip passes). The rewritten PTX
goes to standard output (or ``-o FILE``, or back into each FILE with ``-i``);
``--diff`` prints a unified diff instead, and ``--format json`` one JSON line per file
(what each pass did, the kernel parameters added, the fence summary).
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    from . import batch
    from .common import help_epilog
    from .fence_cmd import add_pass_arguments

    parser.epilog = help_epilog({0: "every file was rewritten (or its diff or report printed)",
                                 2: "a file is not PTX, or cannot be read or written (the message names it), a pass "
                                    "cannot be loaded or refuses its input, or bad usage"})

    parser.add_argument("inputs", nargs="+", metavar="FILE",
                        help="PTX files or folders (walked for *.ptx), or - for standard input")
    from ptxkit.rewrite.passes import SHIPPED

    parser.add_argument("--pass", dest="passes", action="append", default=[], metavar="SPEC",
                        help="a pass to run: a shipped one (" + ", ".join(sorted(SHIPPED)) + ") or module:function, "
                             "then its options, e.g. --pass 'strip --opcode bar.sync' (repeat for several; 'fence' "
                             "places the fence pass)")
    parser.add_argument("--no-fence", dest="fence", action="store_false",
                        help="do not run the fence pass after the passes")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", metavar="OUT", help="write the rewritten PTX to OUT (atomically)")
    where.add_argument("-i", "--in-place", action="store_true", help="rewrite each FILE in place (atomically)")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--diff", action="store_true", help="print a unified diff instead of the PTX")
    shown.add_argument("--format", choices=("text", "json"), default="text",
                       help="json: one JSON line per file saying what each pass did (default: text, the PTX)")
    add_pass_arguments(parser, same_as_fence=True)
    batch.add_arguments(parser)


def run(args) -> int:
    from . import batch
    from .common import UsageError

    files = batch.expand_inputs(args.inputs)
    if args.in_place and "-" in files:
        raise UsageError("-i needs a file: standard input cannot be rewritten in place")
    if len(files) > 1 and not (args.in_place or args.diff or args.format != "text"):
        raise UsageError("several inputs need -i, --diff or --format json (the PTX of one file goes to "
                         "standard output or -o)")
    if len(files) > 1 and args.output is not None:
        raise UsageError("-o takes the PTX of one input; use -i to rewrite several files")
    _load(args.passes)  # a bad spec is reported once, before any file
    status, _ = batch.run_files(rewrite_one, files, args)
    sys.stdout.flush()
    return status


def _load(specs: list[str]) -> list:
    from ptxkit.rewrite.pipeline import PassError, load_pass

    from .common import UsageError

    try:
        return [load_pass(spec) for spec in specs]
    except PassError as err:
        raise UsageError(str(err)) from None


def rewrite_one(path: str, args):
    """Rewrite one input as `args` ask; returns its `FileResult`.

    >>> import argparse
    >>> from ptxkit.cli.fence_cmd import add_pass_arguments
    >>> parser = argparse.ArgumentParser(); add_pass_arguments(parser)
    >>> args = parser.parse_args([])
    >>> args.__dict__.update(passes=["strip-fences"], fence=True, in_place=False, output=None, diff=True,
    ...                      format="text")
    >>> [line for line in rewrite_one("samples/fence/expected/14b_hoist_out_of_loop.ptx", args).stdout.splitlines()
    ...  if line.startswith("-\\t")]
    ['-\\tfence.proxy.async.shared::cta;']
    """
    from ptxkit import parse
    from ptxkit.errors import PtxSyntaxError
    from ptxkit.rewrite.pipeline import PassError, run

    from .batch import FileResult
    from .common import EXIT_OK, UsageError, read_input
    from .output import write_file
    from .fence_cmd import fence_options

    data, name = read_input(path)
    module = parse(data, name)
    original = module.source.text
    try:
        result = run(module, _load(args.passes), fence=None if args.fence else False, fence_options=fence_options(args))
    except PassError as err:
        message = f"{name}: {err}"
        if err.cause is not None and not isinstance(err.cause, PtxSyntaxError):  # a pass's bug: show where
            import traceback

            message += "\n" + "".join(traceback.format_exception(err.cause)).rstrip()
        raise UsageError(message) from None
    text = result.text if result.changed else original
    out, err = [], []
    if result.fence is not None:
        err.extend(f"{name}:{w.line}:{w.column}: warning: {w.text}\n" for w in result.fence.warnings)
    if args.in_place:
        if result.changed:
            write_file(path, text.encode("utf-8"))
    elif args.output is not None:
        write_file(args.output, text.encode("utf-8"))
    elif not (args.diff or args.format != "text"):
        out.append(text)
    if args.diff:
        import difflib

        out.extend(difflib.unified_diff(original.splitlines(keepends=True), text.splitlines(keepends=True),
                                        fromfile=name, tofile=f"{name} (rewritten)"))
    elif args.format == "json":
        import json

        out.append(json.dumps(result.to_json()) + "\n")
    module.release()
    if result.module is not module:  # a pass changed it: the result is another tree
        result.module.release()
    return FileResult(name, EXIT_OK, "".join(out), "".join(err))
