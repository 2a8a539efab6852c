"""``ptxkit cfg FILE``: a function's control-flow graph, with its proxy state.

Without ``--dot``/``--svg`` it prints one line per basic block (label, input line,
successors, proxy state on entry, fences the pass would insert). ``--dot`` writes
Graphviz DOT; ``--svg`` renders it with Graphviz's ``dot`` program, which must be on
PATH. ``--function NAME`` picks one function; otherwise every function with a body
is drawn (one cluster each).
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    from .common import help_epilog
    from .fence_cmd import add_pass_arguments

    parser.epilog = help_epilog({0: "the graph was written",
                                 2: "the input is not PTX, the function does not exist, --svg without Graphviz, the "
                                    "output cannot be written, or bad usage"})

    parser.add_argument("input", metavar="FILE", help="PTX file, or - for standard input")
    parser.add_argument("--function", metavar="NAME", help="only this function (default: all with a body)")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--dot", action="store_true", help="write Graphviz DOT")
    form.add_argument("--svg", action="store_true", help="write SVG (needs the Graphviz 'dot' program)")
    parser.add_argument("-o", "--output", metavar="OUT", help="write to OUT (default, and -: standard output)")
    add_pass_arguments(parser, same_as_fence=True)


def run(args) -> int:
    from ptxkit.cfg.fence.dot import module_dot, render_svg

    from .common import UsageError, parse_input
    from .output import write_output
    from .fence_cmd import fence_options

    module = parse_input(args.input)
    options = fence_options(args)
    if args.function is not None:
        try:
            function = module.function(args.function)
        except KeyError as err:
            raise UsageError(err.args[0]) from None
        if function.is_declaration:
            raise UsageError(f"{args.function!r} is a declaration without a body: it has no control flow")
    try:
        if args.dot or args.svg:
            text = module_dot(module, options, args.function)
            if args.svg:
                text = render_svg(text)
        else:
            text = summarise(module, options, args.function)
    except KeyError as err:
        raise UsageError(err.args[0]) from None
    except FileNotFoundError:
        raise UsageError("--svg needs the Graphviz 'dot' program, which is not on PATH "
                         "(install graphviz, or write DOT with --dot)") from None
    write_output(text, args.output)
    sys.stdout.flush()
    return 0


def summarise(module, options, function: str | None = None) -> str:
    """One line per basic block: name, line, successors, entry state, planned fences.

    >>> from ptxkit.cfg.fence.fence import FenceOptions
    >>> from ptxkit.cli.common import parse_input
    >>> print(summarise(parse_input("samples/fence/14b_hoist_out_of_loop.ptx"), FenceOptions()), end="")
    entry k: 3 blocks, 1 fence to insert
      B0               line 23     -> L                        in: ...
          + fence.proxy.async.shared::cta; after line 34 (loop)
      L                line 35     -> L, B2                    in: ...
      B2               line 40     -> exit                     in: ...
    """
    from ptxkit.cfg.fence.fence import analyse_module

    out = []
    for result in analyse_module(module, options, everything=True):
        analysis = result.analysis
        if function is not None and analysis.function.name != function:
            continue
        flow, ins, _, blocks = result.planned_graph()  # with the loop preheaders the plan creates
        out.append(f"{analysis.function.kind} {analysis.function.name}: "
                   f"{len(flow.blocks)} block{'s' * (len(flow.blocks) != 1)}, "
                   f"{len(result.plans)} fence{'s' * (len(result.plans) != 1)} to insert")
        planned = {}
        for block, site in zip(blocks, result.sites):
            planned.setdefault(block, []).append(site)
        reachable = set(flow.rpo)
        for block in flow.blocks:
            succ = [flow.blocks[s].name for s in flow.succ[block.index]] + (["exit"] if block.index in flow.exits
                                                                                else [])
            state = analysis.state_text(ins[block.index]) if block.index in reachable else "unreachable"
            line = f"  {block.name:<16} line {block.line or '-':<6} -> {', '.join(succ) or '-':<24} in: {state}"
            out.append(line.rstrip())
            for site in planned.get(block.index, ()):
                out.append(f"      + {site.text} {site.where} line {site.line} ({site.placement})")
    return "\n".join(out) + "\n"
