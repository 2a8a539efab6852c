"""Benchmark: the shape of the fence pass's cost, as Python function calls per analysed
instruction, and where its own time goes, by module.

The pass's speed in pure Python follows the number of calls it makes more than any one
hot spot (docs/architecture.md): a call costs about the same whatever it does. So this
counts them (``cProfile``, every Python and builtin call the pass makes) and divides by
the instructions of the functions the pass analyses (the inlined kernels that name an
async-proxy operation or a call: `ptxkit.cfg.fence.fence.analyse_module`), next to the
anchor measured in the same run: the calls that parsing those same files makes, per
instruction. A rebuilt core shows here first.

    python benchmarks/fence_profile.py                    # the samples/fence inputs
    python benchmarks/fence_profile.py /tmp/rk/*/*.ptx    # and these kernels, each on its own
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
from collections import Counter
from pathlib import Path

from ptxkit import parse
from ptxkit.cfg.fence.fence import FenceOptions, analyse_module, fence_module

ROOT = Path(__file__).resolve().parent.parent
PACKAGE_FOLDERS = ("cfg/flow", "cfg/values", "cfg/sync", "cfg/fence", "ptxkit")
#: the columns of own time: the package's folders, and the standard library and builtins
LAYERS = (*PACKAGE_FOLDERS, "other")


def analysed_instructions(text: str, name: str) -> int:
    """The instructions of the flow graphs the pass analyses in `text`.

    >>> analysed_instructions((ROOT / "samples/fence/14b_hoist_out_of_loop.ptx").read_text(), "14b.ptx")
    17
    """
    results = analyse_module(parse(text, name))
    return sum(len(block.instructions) for result in results for block in result.analysis.flow.blocks)


def profile_of(action) -> pstats.Stats:
    """The profile of one call of `action`."""
    profiler = cProfile.Profile()
    profiler.enable()
    action()
    profiler.disable()
    return pstats.Stats(profiler)


def calls_and_layers(stats: pstats.Stats) -> tuple[int, Counter]:
    """Every call the profile counted, and its own time summed by folder of the package.

    >>> calls, layers = calls_and_layers(profile_of(lambda: parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n")))
    >>> calls > 0, set(layers) <= set(LAYERS)
    (True, True)
    """
    calls = 0
    layers: Counter = Counter()
    for (filename, _, _), (_, total_calls, own_seconds, _, _) in stats.stats.items():
        calls += total_calls
        path = filename.replace("\\", "/")
        layers[next((folder for folder in PACKAGE_FOLDERS if f"/{folder}/" in path), "other")] += own_seconds
    return calls, layers


def measure(text: str, name: str) -> dict:
    """Calls of parsing and of the pass over `text`, per analysed instruction, and the
    pass's own time by layer (fractions of its profiled time)."""
    instructions = analysed_instructions(text, name)
    parse_calls, _ = calls_and_layers(profile_of(lambda: list(parse(text, name).walk())))
    module = parse(text, name)
    list(module.walk())
    pass_calls, layers = calls_and_layers(profile_of(lambda: fence_module(module, FenceOptions())))
    total = sum(layers.values()) or 1.0
    return {"instructions": instructions, "parse": parse_calls, "pass": pass_calls,
            "layers": {layer: seconds / total for layer, seconds in layers.items()}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ptx", nargs="*", help="also profile these files (real kernels), each on its own")
    args = parser.parse_args(argv)
    samples = sorted((ROOT / "samples" / "fence").glob("*.ptx"))
    workloads = [(f"samples/fence ({len(samples)} files)", [(p.read_text(), p.name) for p in samples])]
    workloads += [(Path(path).name[:40], [(Path(path).read_text(), Path(path).name)]) for path in args.ptx]
    header = ("workload", "instructions", "parse calls/instr", "pass calls/instr", "pass/parse",
              *(f"{folder} %" for folder in LAYERS))
    rows = []
    for label, texts in workloads:
        found = [measure(text, name) for text, name in texts]
        instructions = sum(f["instructions"] for f in found)
        if not instructions:
            continue
        parse_calls, pass_calls = sum(f["parse"] for f in found), sum(f["pass"] for f in found)
        shares = {folder: sum(f["layers"].get(folder, 0.0) for f in found) / len(found) for folder in LAYERS}
        rows.append((label, str(instructions), f"{parse_calls / instructions:.0f}", f"{pass_calls / instructions:.0f}",
                     f"{pass_calls / parse_calls:.1f}x", *(f"{100 * shares[folder]:.0f}" for folder in LAYERS)))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print("ptxkit fence: Python calls per analysed instruction (cProfile), the parse of the same files as the anchor,")
    print("and the pass's own time by layer")
    for row in (header, *rows):
        print("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w) for i, (cell, w) in enumerate(zip(row, widths))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
