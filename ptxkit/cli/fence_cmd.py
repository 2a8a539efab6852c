"""``ptxkit fence FILE…``: insert the missing generic->async proxy fences.

The fenced PTX goes to standard output (or ``-o FILE``, or back into each FILE with
``-i``); only the inserted lines differ from the input. ``--check`` rewrites nothing and
exits with 1 when a fence is missing, printing ``file:line:col: error: …`` and the CFG
path from the generic write to the async op. ``--diff`` and ``--explain`` print a
unified diff or the reasons in prose instead of the PTX; ``--format json`` (``--json``)
prints one JSON report per file, one per line, and ``--format sarif`` one SARIF 2.1.0 log
for all files (the PTX still goes to ``-o``/``-i`` when given). Warnings go to standard
error.

Several files and folders (walked for ``*.ptx``) can be given with ``--check``, ``-i``,
``--diff``, ``--explain`` or a format, in as many processes as the batch is worth
(``-j N``: N). The exit code is the worst result (2 for a file that is not PTX, 1 for
missing fences); a summary line follows on standard error.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    from . import batch

    parser.add_argument("inputs", nargs="+", metavar="FILE",
                        help="PTX files or folders (walked for *.ptx), or - for standard input")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", metavar="OUT", help="write the fenced PTX to OUT (- for standard output)")
    where.add_argument("-i", "--in-place", action="store_true", help="rewrite each FILE in place (hard links, mode and owner kept)")
    where.add_argument("--check", action="store_true",
                       help="rewrite nothing; exit 1 and list each missing fence with its reason")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--diff", action="store_true", help="print a unified diff instead of the PTX")
    shown.add_argument("--explain", action="store_true", help="print why each fence is needed, in prose")
    shown.add_argument("--format", choices=("text", "json", "sarif"), default="text",
                       help="json: a JSON report per file (one per line); sarif: one SARIF 2.1.0 log for "
                            "code scanning (default: text)")
    shown.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    add_pass_arguments(parser)
    batch.add_arguments(parser)


def add_pass_arguments(parser, same_as_fence: bool = False) -> None:
    """The options of the fence pass (shared with ``ptxkit cfg``).

    >>> import argparse
    >>> parser = argparse.ArgumentParser(); add_pass_arguments(parser)
    >>> fence_options(parser.parse_args(["--placement", "inline"])).placement
    'inline'
    """
    from ptxkit.cfg.options import EXTERN_POLICIES, FENCE_SIDES, FENCE_VARIANTS, PLACEMENTS

    def help_(text: str) -> str:
        return "as for ptxkit fence" if same_as_fence else text

    parser.add_argument("--placement", choices=PLACEMENTS, default="hoist",
                        help=help_("hoist: one fence in a loop preheader or before a branch where that replaces "
                                   "fences inside (TileLang's placement, default); inline: right before each async "
                                   "op"))
    parser.add_argument("--fence-variant", choices=FENCE_VARIANTS, default=None,
                        help=help_("force this fence variant instead of the narrowest correct one "
                                   "(full = fence.proxy.async)"))
    parser.add_argument("--extern-policy", choices=EXTERN_POLICIES, default="clobber",
                        help=help_("what a call to an extern or indirect function may do: none (nothing, unless "
                                   "it gets a shared pointer), clobber (leave generic writes behind; default), "
                                   "strict (also start async ops: fence before it)"))
    parser.add_argument("--track-global", action="store_true",
                        help=help_("also fence generic global writes before async ops that read global memory"))
    parser.add_argument("--fence-side", choices=FENCE_SIDES, default="issuer",
                        help=help_("where a fence for an access handed between threads goes: issuer (after the "
                                   "wait, before the async op; default) or writer (after the access, before the "
                                   "arrive; across CTAs it stays with the issuer)"))
    parser.add_argument("--no-war", dest="war", action="store_false",
                        help=help_("do not fence generic reads before async writes of the same bytes (TileLang's "
                                   "model)"))
    parser.add_argument("--max-cluster-size", dest="max_cluster", type=int, choices=range(1, 17), default=8,
                        metavar="N", help=help_("the most CTAs per cluster when the kernel declares none "
                                                "(default 8, the portable limit; 16 for non-portable launches)"))


def fence_options(args):
    """The `FenceOptions` the command line asks for (the one place they are built).

    >>> import argparse
    >>> fence_options(argparse.Namespace(placement="inline", fence_variant=None, extern_policy="none",
    ...                                  track_global=False, fence_side="writer", war=False, max_cluster=16)).fence_side
    'writer'
    """
    from ptxkit.cfg.fence import FenceOptions

    return FenceOptions(placement=args.placement, fence_variant=args.fence_variant,
                        extern_policy=args.extern_policy, track_global=args.track_global,
                        fence_side=args.fence_side, war=args.war, max_cluster=args.max_cluster)


def run(args) -> int:
    from ptxkit import __version__

    from . import batch
    from .common import UsageError

    files = batch.expand_inputs(args.inputs)
    if args.in_place and "-" in files:
        raise UsageError("-i needs a file: standard input cannot be rewritten in place")
    if len(files) > 1 and not (args.check or args.in_place or args.diff or args.explain or args.format != "text"):
        raise UsageError("several inputs need --check, -i, --diff, --explain or --format json/sarif "
                         "(the fenced PTX of one file goes to standard output or -o)")
    if len(files) > 1 and args.output is not None:
        raise UsageError("-o takes the fenced PTX of one input; use -i to rewrite several files")
    as_json = args.format == "json"
    status, results = batch.run_files(fence_one, files, args, _summary(args), _json_error if as_json else None,
                                      cost=batch.FENCE_COST)
    if args.format == "sarif":
        import json

        from . import sarif

        findings, notes = [], []
        for result in results:
            if result.status == 2:
                notes.append(sarif.notification(sarif.artifact_uri(result.name), "error", result.data))
            else:
                findings.extend(result.data["results"])
                notes.extend(result.data["notifications"])
        print(json.dumps(sarif.sarif_log(findings, notes, __version__), indent=2))
    sys.stdout.flush()
    return status


def fence_one(path: str, args):
    """Fence (or check) one input as `args` ask; returns its `FileResult` (what to print,
    the report as data for ``--format``, the number of fences).

    >>> import argparse
    >>> args = argparse.Namespace(check=True, in_place=False, output=None, diff=False, explain=False,
    ...                           format="text", placement="hoist", fence_variant=None,
    ...                           extern_policy="clobber", track_global=False, fence_side="issuer", war=True,
    ...                           max_cluster=8)
    >>> result = fence_one("samples/fence/07_wgmma_marked_async.ptx", args)
    >>> result.status, result.count, result.stderr.split(": ")[1]
    (1, 1, 'error')
    """
    from .batch import FileResult
    from .common import EXIT_FINDINGS, EXIT_OK, parse_input
    from .output import write_file

    module = parse_input(path)
    name, original = module.filename, module.source.text
    report = _nothing_to_fence(module, original, args)
    if report is None:
        from ptxkit.cfg.fence import fence_module

        report = fence_module(module, fence_options(args), rewrite=_writes(args))
    err = [f"{name}:{w.line}:{w.column}: warning: {w.text}\n" for w in report.warnings]
    if report.skipped:
        err.append(f"{name}: note: left unchanged: {report.skipped}\n")
    fenced = str(module) if report.changed else original
    out = []
    if args.check:
        err.extend(_check_lines(name, fence) for fence in report.fences)
    elif args.in_place:
        if report.changed:
            write_file(path, fenced.encode("utf-8"))
    elif args.output is not None:
        write_file(args.output, fenced.encode("utf-8"))
    elif not (args.diff or args.explain or args.format != "text"):
        out.append(fenced)
    if args.diff:
        import difflib

        out.extend(difflib.unified_diff(original.splitlines(keepends=True),
                                        _planned_text(module, report, original),
                                        fromfile=name, tofile=f"{name} (fenced)"))
    elif args.explain:
        out.append(report.explain())
    elif args.format == "json":
        import json

        out.append(json.dumps(report.to_json()) + "\n")
    status = EXIT_FINDINGS if args.check and report.fences else EXIT_OK
    return FileResult(name, status, "".join(out), "".join(err), _data(report, path, args), len(report.fences))


def _writes(args) -> bool:
    """True when the fenced PTX goes somewhere (standard output, ``-o``, ``-i``): only then
    is the module rewritten, and the report says "inserted"; otherwise (``--check``, or
    ``--diff``, ``--explain`` or a format alone) the fences are reported missing.

    >>> import argparse
    >>> base = dict(check=False, in_place=False, output=None, diff=False, explain=False, format="text")
    >>> _writes(argparse.Namespace(**base)), _writes(argparse.Namespace(**{**base, "explain": True}))
    (True, False)
    """
    if args.check:
        return False
    return args.in_place or args.output is not None or not (args.diff or args.explain or args.format != "text")


def _check_lines(name: str, fence) -> str:
    """One missing fence in ``--check``'s text: an error at the statement the fence goes
    before or after, naming the first pair it orders, then a note at each other async
    op it orders; each with its witness path.

    >>> from ptxkit.cfg.fence import fence_text
    >>> site, = fence_text(open("samples/fence/13_hoist_out_of_if.ptx").read(), rewrite=False)[1].fences
    >>> print(_check_lines("k.ptx", site))  # doctest: +NORMALIZE_WHITESPACE
    k.ptx:35:2: error: missing fence.proxy.async.shared::cta before this statement: generic-proxy write at line 32
        (st.shared.b16) of shared::cta may reach the async-proxy access at line 36 (wgmma.mma_async) with no proxy
        fence in between
        path: line 32 (st.shared.b16) -> line 36 (wgmma.mma_async)
    k.ptx:39:2: note: the same fence also orders: generic-proxy write at line 32 (st.shared.b16) of shared::cta may
        reach the async-proxy access at line 39 (wgmma.mma_async) with no proxy fence in between
        path: line 32 (st.shared.b16) -> line 38 (E) -> line 39 (wgmma.mma_async)
    <BLANKLINE>
    """
    first, *others = fence.pairs
    lines = [f"{name}:{fence.line}:{fence.column}: error: missing {fence.variant} {fence.where} this statement: "
             f"{first.reason()}\n    path: {first.path_text()}\n"]
    for pair in others:
        lines.append(f"{name}:{pair.op.line}:{pair.op.column}: note: the same fence also orders: {pair.reason()}\n"
                     f"    path: {pair.path_text()}\n")
    return "".join(lines)


def _nothing_to_fence(module, text: str, args):
    """The report of a module no function of which can need a fence, found without
    loading the pass: no async-proxy opcode or call in its text (`ptxkit.isa.may_need_fence`),
    no device function the pass would analyse on its own, and an output that is the
    input with at most a note. None when the pass must run.

    >>> import argparse, ptxkit
    >>> args = argparse.Namespace(format="text", explain=False, diff=False)
    >>> plain = ".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n\\tret;\\n}\\n"
    >>> _nothing_to_fence(ptxkit.parse(plain), plain, args).fences
    []
    >>> _nothing_to_fence(ptxkit.parse(plain), plain.replace("ret;", "wgmma.fence.sync.aligned;"), args) is None
    True
    """
    from types import SimpleNamespace

    from ptxkit.isa import may_need_fence

    if args.format != "text" or args.explain or args.diff or may_need_fence(text) \
            or any(f.kind != "entry" for f in module.functions if not f.is_declaration):
        return None
    from ptxkit.cfg.options import check_target

    return SimpleNamespace(fences=[], warnings=[], skipped=check_target(module), changed=False)


def _data(report, path: str, args):
    """The SARIF results and notifications of one file (None unless ``--format sarif``)."""
    if args.format != "sarif":
        return None
    from . import sarif

    uri = sarif.artifact_uri(path)
    notes = [sarif.notification(uri, "warning", w.text, w.line, w.column) for w in report.warnings]
    if report.skipped:
        notes.append(sarif.notification(uri, "note", f"left unchanged: {report.skipped}"))
    return {"results": sarif.fence_results(report, uri), "notifications": notes}


def _json_error(result) -> str:
    """The JSON line of a file that could not be read as PTX."""
    import json

    return json.dumps({"file": result.name, "error": result.data}) + "\n"


def _summary(args):
    """The summary line of a run over several files."""
    from .common import plural

    verb = "inserted" if _writes(args) else "missing"

    def summary(results) -> str:
        bad = sum(result.status == 2 for result in results)
        with_fences = [result for result in results if result.status != 2 and result.count]
        text = (f"ptxkit fence: {plural(len(results), 'file')}, {len(with_fences)} with {verb} fences "
                f"({plural(sum(result.count for result in with_fences), 'fence')})")
        return text + (f", {bad} not read as PTX" if bad else "")

    return summary


def _planned_text(module, report, original: str) -> list[str]:
    """The fenced text as lines: the rewritten module, or in check mode what it would be
    (the planned edits applied to this parse; nothing is analysed twice)."""
    if not report.rewritten:
        report.apply()
    return str(module).splitlines(keepends=True) if report.fences else original.splitlines(keepends=True)
