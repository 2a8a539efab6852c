"""``ptxkit gen KIND``: print a complete, assemblable kernel made by the reduction generators.

``ptxkit gen reduce --strategy {thread,shuffle,view} --op sum --dtype f32 …`` prints a
register-image ``.entry`` (each thread loads its src and dst registers from
``src_img[thread, slot]``/``dst_img[thread, slot]``, runs the strategy, stores dst back);
layouts use TVM's spelling, e.g. ``--src-layout "S[(32,4):(1@laneid,1)]"``.
``ptxkit gen rowreduce --cols 50257 --dtype bf16 --op logsumexp`` prints the row
reduction (any ``--cols``; ``--row-stride`` for rows of a larger tensor; ops sum, sumsq,
max, min, logsumexp, meanvar, argmax, argmin; ``--cluster`` 2, 4 or 8 CTAs of a
thread-block cluster share each row; default 1). Each kind takes only its own options,
each documented in its ``--help``. ``--nan`` is the NaN policy of max, min and the arg
ops everywhere; ``--accum`` folds the old dst values in on every path (TVM's shuffle path
would ignore it); ``--target`` is the GPU, and a request it cannot run is refused with
what it lacks. The first line of the output is the command that makes it again.
"""

from __future__ import annotations

import ast
import shlex

#: the ops of the row reduction; sum, max and min also at register level
OPS = ("sum", "sumsq", "max", "min", "logsumexp", "meanvar", "argmax", "argmin")
REGISTER_OPS = ("sum", "max", "min")

DEFAULTS = {  # strategy → src shape, src layout, dst shape, dst layout, scope
    "thread": ("4,8", None, "4", None, "thread"),
    "shuffle": ("32", "S[32:1@laneid]", "1", "S[1:1]+R[32:1@laneid]", "warp"),
    "view": ("32,64", "S[(32,64):(1@laneid,1)]", "32,1", "S[(32,1):(1@laneid,1)]", "warp"),
}

#: the options each kind of kernel writes into its first line, in order
COMMAND_OPTIONS = {
    "reduce": ("strategy", "op", "dtype", "src_shape", "src_layout", "dst_shape", "dst_layout", "axes", "scope",
               "target", "name", "nan"),
    "rowreduce": ("op", "dtype", "cols", "row_stride", "cluster", "target", "name", "nan"),
}

EXIT_CODES = ("Exit codes: 0 the kernel was written; 2 bad usage, or a request the generators refuse (the "
              "message says why: a layout that does not fit, an op or dtype a target lacks); 101 an internal "
              "error (a bug in ptxkit)")


def add_arguments(parser) -> None:
    """``gen reduce`` and ``gen rowreduce``, each with its own options, every one documented.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="gen"); add_arguments(parser)
    >>> args = parser.parse_args(["rowreduce", "--cols", "7", "--target", "sm_75"])
    >>> args.what, args.cols, args.op, args.target
    ('rowreduce', 7, 'sum', 'sm_75')
    """
    parser.epilog = ("Run 'ptxkit gen reduce --help' or 'ptxkit gen rowreduce --help' for the options of each. "
                     + EXIT_CODES)
    kinds = parser.add_subparsers(dest="what", metavar="KIND", required=True)
    formatter = parser.formatter_class
    reduce = kinds.add_parser(
        "reduce", formatter_class=formatter, epilog=EXIT_CODES,
        help="a register-level reduction in a test harness kernel (one CTA; registers loaded from and stored to "
             "images)",
        description="A register-level reduction (Path 1, 2 or 3 of the generators) wrapped in a complete .entry: "
                    "thread t loads its src and dst registers from src_img[t, slot] and dst_img[t, slot], runs "
                    "the reduction and stores dst back. Layouts use TVM's spelling.")
    reduce.add_argument("--strategy", choices=tuple(DEFAULTS), default="thread",
                        help="thread: each thread reduces its own registers (Path 1); shuffle: lanes combine "
                             "through shfl.sync butterflies (Path 2); view: a warp or warpgroup view of the "
                             "registers (Path 3). Default thread")
    reduce.add_argument("--op", type=_register_op, default="sum", metavar="{sum,max,min}",
                        help="the reduction (default sum)")
    reduce.add_argument("--dtype", default="f32", help="the element type: f32 (default), f16, bf16, s32 or u32")
    reduce.add_argument("--src-shape", metavar="N,N...",
                        help="the source tile's shape, comma-separated (default: thread 4,8; shuffle 32; view 32,64)")
    reduce.add_argument("--src-layout", metavar="LAYOUT",
                        help='the source tile\'s register layout in TVM\'s spelling, e.g. "S[(32,4):(1@laneid,1)]" '
                             "(default: thread, row-major in each thread's registers; shuffle S[32:1@laneid]; view "
                             "S[(32,64):(1@laneid,1)])")
    reduce.add_argument("--dst-shape", metavar="N,N...",
                        help="the result tile's shape, comma-separated (default: thread 4; shuffle 1; view 32,1)")
    reduce.add_argument("--dst-layout", metavar="LAYOUT",
                        help="the result tile's register layout in TVM's spelling; R[...] replicates it over lanes "
                             "(default: thread, row-major in each thread's registers; shuffle S[1:1]+R[32:1@laneid]; view "
                             "S[(32,1):(1@laneid,1)])")
    reduce.add_argument("--axes", default="-1", metavar="A,A...",
                        help="the source axes reduced, comma-separated (default -1, the last); shuffle: checked "
                             "when the source shape without them is the result's, else the layouts decide as in TVM")
    reduce.add_argument("--accum", action="store_true",
                        help="fold the old dst values in, on every strategy (TVM ignores it on the shuffle path)")
    reduce.add_argument("--thread-reduce", action="store_true",
                        help="view: finish with xor shuffles across the lanes that hold parts of one result")
    reduce.add_argument("--scope", choices=("warp", "warpgroup"),
                        help="view: the threads the view spans, a warp (default) or a warpgroup of four")
    reduce.add_argument("--no-pack", action="store_true",
                        help="shuffle: move f16/bf16 one element per shfl, as TVM does (default: two per shfl)")
    _add_common(reduce, "max/min")

    rows = kinds.add_parser(
        "rowreduce", formatter_class=formatter, epilog=EXIT_CODES,
        help="the row reduction of [rows, cols]: any length, stride and alignment; launch it on any grid",
        description="The row reduction of a [rows, cols] tensor to one or two values per row (ptxkit.generators."
                    "rowreduce). The first comment lines give the parameters, the block size and the grid.")
    rows.add_argument("--cols", type=int, required=True, metavar="N", help="the row length: any number from 1")
    rows.add_argument("--op", choices=OPS, default="sum",
                      help="sum, sumsq (f32 result), max, min, logsumexp, meanvar (mean and population variance), "
                           "argmax, argmin (s64 index); default sum")
    rows.add_argument("--dtype", choices=("f32", "f16", "bf16"), default="f32",
                      help="the element type (default f32); results are rounded to it once, but for sumsq and "
                           "the indices")
    rows.add_argument("--row-stride", type=int, metavar="N",
                      help="elements from one row to the next, at least --cols (default: --cols)")
    rows.add_argument("--cluster", type=int, choices=(1, 2, 4, 8),
                      help="CTAs of a thread-block cluster that share each row (sm_90 and newer; default 1)")
    _add_common(rows, "max/min/argmax/argmin")


def _add_common(parser, nan_ops: str) -> None:
    parser.add_argument("--nan", choices=("propagate", "ignore"), default="propagate",
                        help=f"{nan_ops}: a NaN wins (propagate, as torch; the default) or loses to "
                             "every number (ignore, as IEEE maxNum and TVM)")
    parser.add_argument("--target", default="sm_90a", metavar="sm_XY",
                        help="the GPU the kernel is for, sm_XY with an optional a or f suffix (default sm_90a): "
                             "its .target, and the instructions chosen; a request the target cannot run is refused")
    parser.add_argument("--name", help="the kernel's name (default: made from the options)")
    parser.add_argument("-o", "--output", metavar="OUT",
                        help="write the kernel to OUT (atomically) instead of standard output")


def _register_op(value: str) -> str:
    """``--op`` of ``gen reduce``: sum, max or min; an op of the row reduction says where it is."""
    import argparse

    if value in REGISTER_OPS:
        return value
    where = " is an op of the row reduction (ptxkit gen rowreduce)" if value in OPS else ""
    raise argparse.ArgumentTypeError(f"gen reduce takes --op sum, max or min; {value}{where}")


def run(args) -> int:
    from .common import UsageError
    from .output import write_output

    try:
        text = _rowreduce(args) if args.what == "rowreduce" else _reduce(args)
    except (ValueError, KeyError, SyntaxError) as err:  # ReductionError and LayoutError are ValueErrors
        raise UsageError(str(err)) from None
    write_output(f"// generated by: {_command(args)}\n{text}", args.output)
    return 0


def _reduce(args) -> str:
    from ptxkit.generators.analysis import ReductionError, validate_reduction_local
    from ptxkit.generators.harness import ImageCase, TileSpec, module_text
    from ptxkit.generators.shuffle import gen_reduce_warp_shuffle
    from ptxkit.generators.thread import gen_reduce_thread
    from ptxkit.generators.view import gen_reduce_view

    src_shape, src_layout, dst_shape, dst_layout, scope = DEFAULTS[args.strategy]
    src = TileSpec(_shape(args.src_shape or src_shape), args.dtype, _layout(args.src_layout or src_layout))
    dst = TileSpec(_shape(args.dst_shape or dst_shape), args.dtype, _layout(args.dst_layout or dst_layout))
    axes = _shape(args.axes)
    if args.strategy == "thread":
        def generate(d, s):
            gen_reduce_thread(d, s, axes, args.op, args.accum, nan=args.nan)
    elif args.strategy == "shuffle":
        def generate(d, s):
            gen_reduce_warp_shuffle(d, s, args.op, args.accum, pack=not args.no_pack, nan=args.nan, axes=axes)
    else:
        def generate(d, s):
            ok, message = validate_reduction_local(d, s, axes, args.scope or scope, args.thread_reduce)
            if not ok:
                raise ReductionError(message)
            gen_reduce_view(d, s, axes, args.op, args.accum, args.thread_reduce, args.scope or scope,
                            pack=not args.no_pack, nan=args.nan)
    name = args.name or f"reduce_{args.strategy}_{args.op}_{src.dtype}"
    case = ImageCase(name, src, dst, generate, target=args.target)
    header = (f"// {name}: {args.strategy} reduction, {args.op}, {src.dtype}; launch one CTA of "
              f"{case.total_threads} threads with\n// src_img[{case.total_threads}][{src.span}] and "
              f"dst_img[{case.total_threads}][{dst.span}] (thread t's registers, slot by slot)\n")
    return header + module_text([case])


def _rowreduce(args) -> str:
    from ptxkit.generators.rowreduce import row_reduce_kernel

    kernel = row_reduce_kernel(args.cols, args.dtype, args.op, target=args.target, cluster=args.cluster or 1,
                               row_stride=args.row_stride, nan=args.nan)
    if kernel.cluster > 1:
        launch = (f"{kernel.threads_per_row} threads per row in each CTA of a cluster of {kernel.cluster}, "
                  f"any grid of whole clusters")
    else:
        launch = f"{kernel.threads_per_row} threads per row, {kernel.rows_per_thread} row(s) per thread, any grid"
    outputs = ", ".join(f"{name} {kind}[rows]" for name, kind in kernel.outputs)
    part = f" (the first {args.cols} of each row)" if kernel.row_stride != args.cols else ""
    return (f"// {kernel.name}(src {kernel.dtype}[rows][{kernel.row_stride}]{part}, {outputs}, u32 rows):\n"
            f"// block {kernel.block}, {launch}\n" + kernel.ptx)


def _shape(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise ValueError(f"expected comma-separated integers, got {text!r}") from None


def _layout(text: str | None):
    """A layout in TVM's spelling, read without eval: S[...], R[...], n@axis, +, ints, tuples."""
    if text is None:
        return None
    from ptxkit.generators import layout as layouts

    names = {"S": layouts.S, "R": layouts.R, "TileLayout": layouts.TileLayout}

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.Tuple):
            return tuple(value(e) for e in node.elts)
        if isinstance(node, ast.Name):
            return names[node.id] if node.id in names else layouts.axis(node.id)
        if isinstance(node, ast.Slice) and node.step is None:
            return slice(value(node.lower), value(node.upper))
        if isinstance(node, ast.Subscript):
            return value(node.value)[value(node.slice)]
        if isinstance(node, ast.Call) and not node.keywords and value(node.func) is layouts.TileLayout:
            return layouts.TileLayout(*(value(a) for a in node.args))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.MatMult)):
            left, right = value(node.left), value(node.right)
            return left + right if isinstance(node.op, ast.Add) else left @ right
        raise ValueError(f"unexpected {ast.unparse(node)!r} in layout {text!r}")

    try:
        result = value(ast.parse(text, mode="eval").body)
    except (SyntaxError, TypeError) as err:
        raise ValueError(f"cannot read layout {text!r}: {err}") from None
    if not isinstance(result, layouts.TileLayout):
        raise ValueError(f"{text!r} is not a layout")
    return result


def _command(args) -> str:
    """The command line that makes this kernel again (its options in a fixed order).

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="gen"); add_arguments(parser)
    >>> _command(parser.parse_args(["rowreduce", "--cols", "7", "--nan", "ignore", "--op", "max"]))
    'ptxkit gen rowreduce --op max --dtype f32 --cols 7 --target sm_90a --nan ignore'
    """
    parts = ["ptxkit", "gen", args.what]
    for option in COMMAND_OPTIONS[args.what]:
        value = getattr(args, option)
        if value is not None and not (option == "nan" and value == "propagate"):
            parts += [f"--{option.replace('_', '-')}", str(value)]
    if args.what == "reduce":
        parts += [f"--{flag.replace('_', '-')}" for flag in ("accum", "thread_reduce", "no_pack") if getattr(args, flag)]
    return shlex.join(parts)
