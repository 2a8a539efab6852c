"""``ptxkit trace BUFFER --layout FILE``: decode an instrumentation buffer read back by
host code of your own (an nvcc build, a Triton launch): a summary and the time per phase
per warpgroup (timelines) or the most executed blocks, source lines and opcodes (counts)
on standard output; ``--chrome`` writes a Chrome/Perfetto trace, ``--plot`` a picture,
``--json`` the counts or phases as JSON.

The layout comes from the ``.ptxkit.json`` file the ptxas wrapper writes beside its
output, or from the instrumented PTX itself (its ``// ptxkit-instrument:`` lines). The
buffer is the raw bytes (or a ``.npy`` array) the kernel wrote.
"""

from __future__ import annotations

import sys


def add_arguments(parser) -> None:
    from .common import help_epilog

    parser.epilog = help_epilog({0: "decoded (and the files asked for written)",
                                 2: "no layout for the kernel, a buffer too small for it, an output that cannot "
                                    "be written, --plot without matplotlib, or bad usage"})
    parser.add_argument("buffer", metavar="BUFFER", help="the buffer's bytes (a raw file, or .npy)")
    parser.add_argument("--layout", metavar="FILE", required=True,
                        help="the wrapper's OUTPUT.ptxkit.json, or the instrumented PTX")
    parser.add_argument("--kernel", metavar="NAME", help="the kernel (when the layout file has several)")
    parser.add_argument("--grid", metavar="X[,Y[,Z]]", help="the launch's grid in CTAs (names CTAs by coordinates)")
    parser.add_argument("--clock-ghz", type=float, metavar="GHZ",
                        help="the SM clock, for traces too short to measure it (default 1.755)")
    parser.add_argument("--chrome", metavar="OUT.json", help="write a Chrome/Perfetto trace (timelines)")
    parser.add_argument("--plot", metavar="OUT.png|svg", help="draw the timeline (needs matplotlib)")
    parser.add_argument("--ctas", metavar="A,B,...", help="the CTAs --plot draws (default: two on one SM)")
    parser.add_argument("--json", metavar="OUT", help="write the counts, or the phases, as JSON")


def run(args) -> int:
    import json

    from ptxkit.trace import Trace, decode

    from .common import UsageError
    from .output import write_output

    layout = load_layout(args.layout, args.kernel)
    buffer = _read_buffer(args.buffer)
    grid = _ints(args.grid, "--grid") if args.grid else None
    try:
        decoded = decode(buffer, layout, grid=grid, clock_ghz=args.clock_ghz)
    except ValueError as err:
        raise UsageError(f"{args.buffer}: {err}") from None
    if isinstance(decoded, Trace):
        print(decoded.summary())
        print(decoded.phase_table())
        if args.chrome:
            write_output(json.dumps(decoded.to_chrome()), args.chrome)
        if args.plot:
            try:
                decoded.plot(args.plot, ctas=_ints(args.ctas, "--ctas") if args.ctas else None)
            except ImportError:
                raise UsageError("--plot needs matplotlib: pip install 'ptxkit[plot]'") from None
        if args.json:
            write_output(json.dumps(decoded.phases()), args.json)
    else:
        if args.chrome or args.plot:
            raise UsageError("--chrome and --plot draw timelines; this buffer holds block counts")
        print(decoded.report())
        if args.json:
            write_output(json.dumps(decoded.to_json()), args.json)
    sys.stdout.flush()
    return 0


def load_layout(path: str, kernel: str | None):
    """The `Layout` of `kernel` (or the only one) in a ``.ptxkit.json`` file or an
    instrumented PTX file."""
    import json

    from ptxkit.instrument.layout import Layout, read_layouts

    from .common import UsageError

    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    if text.lstrip().startswith("{"):
        try:
            layouts = {name: Layout.from_dict(fields) for name, fields in json.loads(text)["layouts"].items()}
        except (ValueError, KeyError, TypeError) as err:
            raise UsageError(f"{path}: not a ptxkit layout file ({err})") from None
    else:
        layouts = read_layouts(text)
    if not layouts:
        raise UsageError(f"{path}: no instrumented kernel (no '// ptxkit-instrument:' line)")
    if kernel is None:
        if len(layouts) > 1:
            raise UsageError(f"{path} describes several kernels ({', '.join(layouts)}): name one with --kernel")
        return next(iter(layouts.values()))
    if kernel not in layouts:
        raise UsageError(f"{path}: no kernel {kernel!r} (kernels: {', '.join(layouts)})")
    return layouts[kernel]


def _read_buffer(path: str):
    import numpy as np

    if path.endswith(".npy"):
        return np.load(path)
    with open(path, "rb") as handle:
        return handle.read()


def _ints(text: str, option: str) -> tuple[int, ...]:
    from .common import UsageError

    try:
        values = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise UsageError(f"{option} takes integers separated by commas, not {text!r}") from None
    return values
