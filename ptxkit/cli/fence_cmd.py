"""``ptxkit fence FILE``: insert the missing generic->async proxy fences.

The fenced PTX goes to standard output (or ``-o FILE``, or back into FILE with ``-i``);
only the inserted lines differ from the input. ``--check`` rewrites nothing and exits
with 1 when a fence is missing, printing ``file:line:col: error: …`` and the CFG path
from the generic write to the async op. ``--diff``, ``--json`` and ``--explain`` print
a unified diff, a machine-readable report or the reasons in prose instead of the PTX
(the PTX still goes to ``-o``/``-i`` when given). Warnings go to standard error.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    from ptxkit.cfg.fence import EXTERN_POLICIES
    from ptxkit.cfg.placement import FENCE_SIDES, PLACEMENTS, VARIANTS

    parser.add_argument("input", metavar="FILE", help="PTX file, or - for standard input")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", metavar="OUT", help="write the fenced PTX to OUT (atomically)")
    where.add_argument("-i", "--in-place", action="store_true", help="rewrite FILE in place (atomically)")
    where.add_argument("--check", action="store_true",
                       help="rewrite nothing; exit 1 and list each missing fence with its reason")
    shown = parser.add_mutually_exclusive_group()
    shown.add_argument("--diff", action="store_true", help="print a unified diff instead of the PTX")
    shown.add_argument("--json", action="store_true", help="print a JSON report (fences, reasons, paths)")
    shown.add_argument("--explain", action="store_true", help="print why each fence is needed, in prose")
    parser.add_argument("--placement", choices=PLACEMENTS, default="hoist",
                        help="hoist: one fence in a loop preheader or before a branch where that replaces "
                             "fences inside (TileLang's placement, default); inline: right before each async op")
    parser.add_argument("--fence-variant", choices=tuple(VARIANTS), default=None,
                        help="force this fence variant instead of the narrowest correct one "
                             "(full = fence.proxy.async)")
    parser.add_argument("--extern-policy", choices=EXTERN_POLICIES, default="clobber",
                        help="what a call to an extern or indirect function may do: none (nothing, unless it "
                             "gets a shared pointer), clobber (leave generic writes behind; default), strict "
                             "(also start async ops: fence before it)")
    parser.add_argument("--track-global", action="store_true",
                        help="also fence generic global writes before async ops that read global memory")
    parser.add_argument("--fence-side", choices=FENCE_SIDES, default="issuer",
                        help="where a fence for an access handed between threads goes: issuer (after the wait, "
                             "before the async op; default) or writer (after the access, before the arrive; across "
                             "CTAs it stays with the issuer)")
    parser.add_argument("--no-war", dest="war", action="store_false",
                        help="do not fence generic reads before async writes of the same bytes (TileLang's model)")


def run(args) -> int:
    import difflib
    import json

    from ptxkit import parse
    from ptxkit.cfg.fence import FenceOptions, fence_module

    from .common import EXIT_FINDINGS, EXIT_OK, UsageError, read_input, write_atomically, write_output

    if args.in_place and args.input == "-":
        raise UsageError("-i needs a file: standard input cannot be rewritten in place")
    data, name = read_input(args.input)
    module = parse(data, name)
    original = module.source.text
    options = FenceOptions(args.placement, args.fence_variant, args.extern_policy, args.track_global,
                           args.fence_side, args.war)
    report = fence_module(module, options, rewrite=not args.check)
    for warning in report.warnings:
        print(f"{name}:{warning.line}:{warning.column}: warning: {warning.text}", file=sys.stderr)
    if report.skipped:
        print(f"{name}: note: left unchanged: {report.skipped}", file=sys.stderr)
    fenced = str(module) if report.changed else original
    if args.check:
        for fence in report.fences:
            print(f"{name}:{fence.line}:{fence.column}: error: missing {fence.variant} {fence.where} this "
                  f"statement: {fence.reason()}\n    path: {fence.path_text()}", file=sys.stderr)
    elif args.in_place:
        if report.changed:
            write_atomically(args.input, fenced.encode("utf-8"))
    elif args.output is not None or not (args.diff or args.json or args.explain):
        write_output(fenced, args.output)
    if args.diff:
        sys.stdout.writelines(difflib.unified_diff(
            original.splitlines(keepends=True), _planned_text(module, report, original, options, args.check),
            fromfile=name, tofile=f"{name} (fenced)"))
    elif args.json:
        print(json.dumps(report.to_json(), indent=2))
    elif args.explain:
        sys.stdout.write(report.explain())
    sys.stdout.flush()
    return EXIT_FINDINGS if args.check and report.fences else EXIT_OK


def _planned_text(module, report, original: str, options, checked: bool) -> list[str]:
    """The fenced text as lines: the rewritten module, or in check mode what it would be."""
    if not checked:
        return str(module).splitlines(keepends=True) if report.changed else original.splitlines(keepends=True)
    from dataclasses import asdict

    from ptxkit.cfg.fence import fence_text

    return fence_text(original, module.filename, **asdict(options))[0].splitlines(keepends=True)
