"""``ptxkit fence FILE…``: insert the missing generic->async proxy fences.

The fenced PTX goes to standard output (or ``-o FILE``, or back into each FILE with
``-i``); only the inserted lines differ from the input. ``--check`` rewrites nothing and
exits with 1 when a fence is missing, printing ``file:line:col: error: … [rule]`` and the
CFG path from the generic access to the async op (one report per fence, with a note for
each other async op it orders). ``--diff`` and ``--explain`` print a unified diff or the
reasons in prose instead of the PTX; ``--format json`` (``--json``) prints one JSON
report per file, one per line (docs/report-format.md), ``--format sarif`` one SARIF 2.1.0
log for all files and ``--format github`` GitHub workflow annotations (the PTX still goes
to ``-o``/``-i`` when given). Warnings go to standard error.

A ``// ptxkit: ignore[war]`` comment on an async op's line or the line before silences
its reports of that class (`ptxkit.suppressions`); ``--baseline FILE`` silences the
reports recorded with ``--write-baseline FILE`` (`ptxkit.baseline`); ``--strict`` also
fails on suppressions that silence nothing. ``[tool.ptxkit]`` in the nearest
``pyproject.toml`` sets what the command line leaves unset (`ptxkit.cli.config`).

Several files and folders (walked for ``*.ptx``, `ptxkit.cli.inputs`) can be given with
``--check``, ``-i``, ``--diff``, ``--explain`` or a format, in as many processes as the
batch is worth (``-j N``: N). The exit code is the worst result (2 for a file that is not
PTX, 1 for missing fences); a summary line follows on standard error.
"""

from __future__ import annotations

import sys

#: The pass options' values when neither the command line nor ``pyproject.toml`` sets them.
PASS_DEFAULTS = {"placement": "hoist", "fence_variant": None, "extern_policy": "clobber", "track_global": False,
                 "fence_side": "issuer", "war": True, "max_cluster": 8}


def add_arguments(parser) -> None:
    from . import batch
    from .colour import CHOICES
    from .common import help_epilog

    parser.epilog = help_epilog({
        0: "no fence is missing (--check), or the fenced PTX was written",
        1: "--check: a fence is missing",
        2: "a file is not PTX, or cannot be read or written (the message names it), or bad usage; over several "
           "files the worst status wins"},
        {"NO_COLOR": "set to anything: no colour under --color auto (so is TERM=dumb)"})

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
    shown.add_argument("--format", choices=("text", "json", "sarif", "github"), default="text",
                       help="json: a JSON report per file (one per line; docs/report-format.md); sarif: one "
                            "SARIF 2.1.0 log for code scanning; github: GitHub Actions annotations (default: text)")
    shown.add_argument("--json", dest="format", action="store_const", const="json", help="same as --format json")
    reports = parser.add_argument_group("reports")
    reports.add_argument("--baseline", metavar="FILE",
                         help="fail only on reports that FILE (made with --write-baseline) does not hold")
    reports.add_argument("--write-baseline", metavar="FILE",
                         help="record every report in FILE as accepted for now (rewrites nothing; exit 0)")
    reports.add_argument("--strict", action="store_true", default=None,
                         help="also report each '// ptxkit: ignore[...]' that silences nothing (an error)")
    reports.add_argument("--exclude", action="append", metavar="GLOB",
                         help="leave out inputs matching GLOB, as a .gitignore line (repeatable; adds to "
                              "[tool.ptxkit] exclude)")
    reports.add_argument("-q", "--quiet", action="store_true",
                         help="print only what fails the check: no warnings, notes or summary")
    reports.add_argument("--color", choices=CHOICES, default="auto",
                         help="colour diagnostics: auto (on a terminal, unless NO_COLOR is set; default), always "
                              "or never")
    add_pass_arguments(parser, unset=True)
    batch.add_arguments(parser)


def add_pass_arguments(parser, same_as_fence: bool = False, unset: bool = False) -> None:
    """The options of the fence pass (shared with ``ptxkit cfg`` and ``ptxkit rewrite``),
    defaulting to `PASS_DEFAULTS`; with `unset` (``ptxkit fence``) to None, so that
    `settle` can tell them from ``pyproject.toml``'s.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(); add_pass_arguments(parser)
    >>> fence_options(parser.parse_args(["--placement", "inline"])).placement
    'inline'
    """
    import argparse

    from ptxkit.cfg.fence.options import EXTERN_POLICIES, FENCE_SIDES, FENCE_VARIANTS, PLACEMENTS

    def help_(text: str) -> str:
        return "as for ptxkit fence" if same_as_fence else text

    def default(name: str):
        return None if unset else PASS_DEFAULTS[name]

    parser.add_argument("--placement", choices=PLACEMENTS, default=default("placement"),
                        help=help_("hoist: one fence in a loop preheader or before a branch where that replaces "
                                   "fences inside (TileLang's placement, default); inline: right before each async "
                                   "op"))
    parser.add_argument("--fence-variant", choices=FENCE_VARIANTS, default=default("fence_variant"),
                        help=help_("force this fence variant instead of the narrowest correct one "
                                   "(full = fence.proxy.async)"))
    parser.add_argument("--extern-policy", choices=EXTERN_POLICIES, default=default("extern_policy"),
                        help=help_("what a call to an extern or indirect function may do: none (nothing, unless "
                                   "it gets a shared pointer), clobber (leave generic writes behind; default), "
                                   "strict (also start async ops: fence before it)"))
    parser.add_argument("--track-global", action=argparse.BooleanOptionalAction, default=default("track_global"),
                        help=help_("also fence generic global writes before async ops that read global memory "
                                   "(default: no)"))
    parser.add_argument("--fence-side", choices=FENCE_SIDES, default=default("fence_side"),
                        help=help_("where a fence for an access handed between threads goes: issuer (after the "
                                   "wait, before the async op; default) or writer (after the access, before the "
                                   "arrive; across CTAs it stays with the issuer)"))
    parser.add_argument("--war", action=argparse.BooleanOptionalAction, default=default("war"),
                        help=help_("fence generic reads before async writes of the same bytes (default: yes; "
                                   "--no-war gives TileLang's model)"))
    parser.add_argument("--max-cluster-size", dest="max_cluster", type=int, choices=range(1, 17),
                        default=default("max_cluster"), metavar="N",
                        help=help_("the most CTAs per cluster when the kernel declares none "
                                   "(default 8, the portable limit; 16 for non-portable launches)"))


def fence_options(args):
    """The `FenceOptions` the command line asks for (the one place they are built).

    >>> import argparse
    >>> fence_options(argparse.Namespace(placement="inline", fence_variant=None, extern_policy="none",
    ...                                  track_global=False, fence_side="writer", war=False, max_cluster=16)).fence_side
    'writer'
    """
    from ptxkit.cfg.fence.fence import FenceOptions

    return FenceOptions(placement=args.placement, fence_variant=args.fence_variant,
                        extern_policy=args.extern_policy, track_global=args.track_global,
                        fence_side=args.fence_side, war=args.war, max_cluster=args.max_cluster)


def settle(args):
    """Complete parsed arguments: ``[tool.ptxkit]`` of the nearest ``pyproject.toml``
    where the command line set nothing, then `PASS_DEFAULTS`; the exclude rules, the
    baseline and the colour choice. Returns `args`.

    >>> from ptxkit.cli.main import build_parser
    >>> args = settle(build_parser("fence").parse_args(["fence", "--no-war", "samples/fence"]))
    >>> args.war, args.placement, args.strict, args.baseline_data
    (False, 'hoist', False, None)
    """
    import os

    from . import colour, config
    from .common import UsageError
    from .inputs import Exclude

    try:
        found = config.find(args.inputs)
    except ValueError as err:
        raise UsageError(str(err)) from None
    settings = dict(found.settings)
    rules = [Exclude(pattern, base) for pattern, base in settings.pop("exclude", [])]
    rules += [Exclude(pattern, os.getcwd()) for pattern in args.exclude or ()]
    args.exclude_rules = rules
    for name, value in {**PASS_DEFAULTS, "baseline": None, "strict": False}.items():
        if getattr(args, name) is None:
            setattr(args, name, settings.get(name, value))
    args.baseline_data = None
    if args.baseline is not None and args.write_baseline is None:
        from ptxkit import baseline

        try:
            args.baseline_data = baseline.load(args.baseline)
        except (OSError, ValueError) as err:
            raise UsageError(str(err) if isinstance(err, ValueError) else f"{args.baseline}: {err.strerror}") from None
    args.colour = colour.wanted(args.color, sys.stderr)
    args.source_root = None
    if args.format in ("sarif", "github"):
        from .sarif import source_root

        args.source_root = source_root()
    return args


def run(args) -> int:
    from . import batch
    from .common import EXIT_BAD_INPUT, UsageError

    settle(args)
    if args.write_baseline is not None and (args.in_place or args.output is not None):
        raise UsageError("--write-baseline records the reports and rewrites nothing: leave out -o and -i")
    files = batch.expand_inputs(args.inputs, args.exclude_rules)
    if args.in_place and "-" in files:
        raise UsageError("-i needs a file: standard input cannot be rewritten in place")
    if len(files) > 1 and not (args.check or args.in_place or args.diff or args.explain or args.format != "text"
                               or args.write_baseline):
        raise UsageError("several inputs need --check, -i, --diff, --explain or --format json/sarif/github "
                         "(the fenced PTX of one file goes to standard output or -o)")
    if len(files) > 1 and args.output is not None:
        raise UsageError("-o takes the fenced PTX of one input; use -i to rewrite several files")
    status, results = batch.run_files(fence_one, files, args, None if args.quiet else _summary(args),
                                      _error_output(args) if args.format in ("json", "github") else None,
                                      cost=batch.FENCE_COST)
    if args.format == "sarif":
        _print_sarif(results, args)
    if args.write_baseline is not None:
        from ptxkit import baseline

        from .output import write_file

        keys = [key for result in results if result.status != EXIT_BAD_INPUT for key in result.data["keys"]]
        write_file(args.write_baseline, baseline.dumps(keys).encode("utf-8"))
        if not args.quiet:
            print(f"ptxkit fence: {len(keys)} report{'s' * (len(keys) != 1)} recorded in {args.write_baseline}",
                  file=sys.stderr)
        status = EXIT_BAD_INPUT if status == EXIT_BAD_INPUT else 0
    sys.stdout.flush()
    return status


def _print_sarif(results, args) -> None:
    import json

    from ptxkit import __version__

    from . import sarif

    findings, notes = [], []
    for result in results:
        if result.status == 2:
            notes.append(sarif.notification(sarif.artifact(result.name, args.source_root), "error", result.data))
        else:
            findings.extend(result.data["results"])
            notes.extend(result.data["notifications"])
    print(json.dumps(sarif.sarif_log(findings, notes, __version__, args.source_root), indent=2))


def fence_one(path: str, args):
    """Fence (or check) one input as `args` ask (`settle`d); returns its `FileResult`
    (what to print, the report as data for ``--format``, the number of reported fences).

    >>> from ptxkit.cli.main import build_parser
    >>> args = settle(build_parser("fence").parse_args(["fence", "--check", "--color", "never", "k.ptx"]))
    >>> result = fence_one("samples/fence/07_wgmma_marked_async.ptx", args)
    >>> result.status, result.count, result.stderr.split(": ")[1], result.stderr.splitlines()[0].split()[-1]
    (1, 1, 'error', '[ptxkit.fence.raw]')
    """
    from . import fence_report
    from .batch import FileResult
    from .common import EXIT_FINDINGS, EXIT_OK, parse_input
    from .output import write_file

    module = parse_input(path)
    name, original = module.filename, module.source.text
    report = _nothing_to_fence(module, original, args)
    if report is None:
        from ptxkit.cfg.fence.fence import fence_module

        report = fence_module(module, fence_options(args), rewrite=_writes(args))
    keyed = args.write_baseline or args.baseline
    file_key = _file_key(path, name, keyed)
    baseline = args.baseline_data.of_file(file_key) if args.baseline_data is not None else None
    judged = fence_report.judge(report, original, name, baseline, file_key)
    checking = args.check or args.write_baseline is not None
    err = "" if args.format == "github" else fence_report.text_report(judged, checking, args.strict, args.quiet,
                                                                      args.colour)
    fenced = str(module) if report.changed else original
    out = []
    if args.in_place:
        if report.changed:
            write_file(path, fenced.encode("utf-8"))
    elif args.output is not None:
        write_file(args.output, fenced.encode("utf-8"))
    elif _writes(args):
        out.append(fenced)
    if args.diff:
        if report.fences:  # the planned edits, applied to this parse in check mode: nothing is analysed twice
            from ptxkit.diff import unified_diff

            lines = report.apply()
            out.extend(unified_diff(original, fenced if report.changed else str(module), lines,
                                    name, f"{name} (fenced)"))
    elif args.explain:
        out.append(report.explain())
    elif args.format == "json":
        import json

        out.append(json.dumps(fence_report.json_report(judged)) + "\n")
    elif args.format == "github":
        out.append(fence_report.github_report(judged, args.strict, args.quiet, _shown_path(path, name, args)))
    reported = judged.reported()
    failed = checking and (reported or (args.strict and judged.unused))
    data = {"keys": judged.keys, "file_key": file_key, "suppressed": judged.count("suppressed"),
            "baselined": judged.count("baselined"), "unused": len(judged.unused) if args.strict else 0,
            "baselined_pairs": sum(v.status == "baselined" for verdicts in judged.verdicts for v in verdicts)}
    if args.format == "sarif":
        data.update(_sarif_data(judged, path, name, args))
    module.release()  # its tree goes now, by reference counting (`Module.release`)
    return FileResult(name, EXIT_FINDINGS if failed else EXIT_OK, "".join(out), err, data, len(reported))


def _file_key(path: str, name: str, baseline_path: str | None) -> str:
    """How a baseline names the input: relative to the baseline file's folder."""
    if baseline_path is None or path == "-":
        return name
    import os

    from ptxkit.baseline import file_key

    return file_key(path, os.path.dirname(os.path.abspath(baseline_path)))


def _shown_path(path: str, name: str, args) -> str:
    """The input as the repository names it (GitHub annotations, SARIF)."""
    if path == "-":
        return name
    from .sarif import relative_path

    return relative_path(path, args.source_root)


def _writes(args) -> bool:
    """True when the fenced PTX goes somewhere (standard output, ``-o``, ``-i``): only then
    is the module rewritten, and the report says "inserted"; otherwise (``--check``, or
    ``--diff``, ``--explain`` or a format alone) the fences are reported missing.

    >>> import argparse
    >>> base = dict(check=False, in_place=False, output=None, diff=False, explain=False, format="text",
    ...             write_baseline=None)
    >>> _writes(argparse.Namespace(**base)), _writes(argparse.Namespace(**{**base, "explain": True}))
    (True, False)
    """
    if args.check or args.write_baseline is not None:
        return False
    return args.in_place or args.output is not None or not (args.diff or args.explain or args.format != "text")


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

    if args.format != "text" or args.explain or may_need_fence(text) \
            or any(f.kind != "entry" for f in module.functions if not f.is_declaration):
        return None
    from ptxkit.cfg.fence.options import check_target

    return SimpleNamespace(fences=[], warnings=[], skipped=check_target(module), changed=False, rewritten=False)


def _sarif_data(judged, path: str, name: str, args) -> dict:
    """The SARIF results and notifications of one file."""
    from . import sarif

    where = sarif.artifact(path if path != "-" else name, args.source_root)
    notes = []
    if judged.report.skipped:
        notes.append(sarif.notification(where, "note", f"left unchanged: {judged.report.skipped}"))
    return {"results": sarif.fence_results(judged, where, args.strict), "notifications": notes}


def _error_output(args):
    """What a file that could not be read as PTX prints on standard output in the
    machine-read formats (JSON, GitHub annotations)."""
    import json

    from .fence_report import github_error

    if args.format == "json":
        return lambda result: json.dumps({"file": result.name, "error": result.data}) + "\n"
    return lambda result: github_error(_shown_path(result.name, result.name, args), result.data)


def _summary(args):
    """The summary line of a run over several files: how many files have reported
    fences, how many fences a suppression or the baseline silenced, unused suppressions
    (``--strict``), baseline entries that no longer occur, files not read as PTX.

    >>> import argparse
    >>> from ptxkit.cli.batch import FileResult
    >>> data = {"suppressed": 1, "baselined": 0, "unused": 0, "baselined_pairs": 0, "file_key": "a.ptx"}
    >>> args = argparse.Namespace(check=True, baseline_data=None)
    >>> _summary(args)([FileResult("a.ptx", 1, data=data, count=2), FileResult("b.ptx", 2)])
    'ptxkit fence: 2 files, 1 with missing fences (2 fences), 1 suppressed, 1 not read as PTX'
    """
    from .common import plural

    verb = "inserted" if _writes(args) else "missing"

    def summary(results) -> str:
        read = [result for result in results if result.status != 2]
        with_fences = [result for result in read if result.count]
        parts = [f"ptxkit fence: {plural(len(results), 'file')}, {len(with_fences)} with {verb} fences "
                 f"({plural(sum(result.count for result in with_fences), 'fence')})"]
        for key, text in (("suppressed", "suppressed"), ("baselined", "in the baseline")):
            count = sum(result.data[key] for result in read)
            if count:
                parts.append(f"{count} {text}")
        unused = sum(result.data["unused"] for result in read)
        if unused:
            parts.append(plural(unused, "unused suppression"))
        if args.baseline_data is not None:
            checked = {result.data["file_key"] for result in read}
            held = sum(count for key, count in args.baseline_data.counts.items() if key.file in checked)
            gone = held - sum(result.data["baselined_pairs"] for result in read)
            if gone > 0:
                parts.append(f"{gone} baseline {'entry' if gone == 1 else 'entries'} no longer reported "
                             "(--write-baseline drops them)")
        bad = len(results) - len(read)
        if bad:
            parts.append(f"{bad} not read as PTX")
        return ", ".join(parts)

    return summary
