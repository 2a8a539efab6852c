"""What a rewrite pass costs: a pass that counts every block (a register incremented at
each block's entry, stored at every return) run through `ptxkit.rewrite.run`.

For each sample kernel, and a synthetic kernel of many blocks, this prints the anchor
(parse + print of the file, no edits), the pass (parse, plan, apply, print; no fence
pass) and their ratio, and the fence pass alone against the pass followed by the fence
pass (the pipeline users run), with that ratio.

Run: ``python benchmarks/rewrite_bench.py [--blocks 4000] [--repeat 3]``
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import ptxkit
from ptxkit.cfg.fence.fence import fence_text
from ptxkit.rewrite import Plan, run

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ["triton/matmul_tma_128x128x64.ptx", "triton/matmul_pointer_64x64x64.ptx", "triton/softmax_4096.ptx",
           "hopper/ws_mbarrier.ptx", "hopper/tma_wgmma_mainloop.ptx",
           "reduction/rowreduce_argmax_f16_1000_stride1003.ptx"]


def count_blocks(module):
    """The benchmark's pass: one counter per kernel, +1 at every block's entry."""
    plan = Plan(module)
    for k in plan.kernels():
        count = k.fresh_register(".u32", "blocks")
        k.insert(k.entry(), f"mov.u32 {count}, 0;")
        for block in k.flow.blocks:
            if block.instructions:
                k.insert(k.block_entry(block.index), f"add.u32 {count}, {count}, 1;")
        k.insert(k.returns(), f"mov.u32 {count}, {count};")
    return plan


def synthetic(blocks: int) -> str:
    """A kernel of `blocks` blocks: a chain of guarded forward branches."""
    body = [".version 8.0", ".target sm_90a", ".address_size 64", ".visible .entry chain(.param .u32 n)", "{",
            "\t.reg .b32 %r<4>;", "\t.reg .pred %p<2>;", "\tld.param.u32 %r1, [n];"]
    for i in range(blocks):
        body += [f"L{i}:", "\tadd.u32 %r2, %r2, %r1;", f"\tsetp.lt.u32 %p1, %r2, {i};", f"\t@%p1 bra L{i + 1};"]
    body += [f"L{blocks}:", "\tret;", "}"]
    return "\n".join(body) + "\n"


def best(action, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    workloads = [(name, (ROOT / "samples" / name).read_text()) for name in SAMPLES]
    workloads.append((f"synthetic, {args.blocks} blocks", synthetic(args.blocks)))
    print(f"{'workload':46} {'KB':>6} {'parse+print':>11} {'pass':>9} {'ratio':>6} {'fence':>9} "
          f"{'pass+fence':>10} {'ratio':>6}")
    for name, text in workloads:
        anchor = best(lambda: str(ptxkit.parse(text, name)), args.repeat)
        rewrite = best(lambda: run(text, [count_blocks], fence=False, filename=name).text, args.repeat)
        fence = best(lambda: fence_text(text, name)[0], args.repeat)
        both = best(lambda: run(text, [count_blocks], filename=name).text, args.repeat)
        print(f"{name:46} {len(text) / 1024:6.1f} {anchor * 1e3:9.1f}ms {rewrite * 1e3:7.1f}ms {rewrite / anchor:6.1f} "
              f"{fence * 1e3:7.1f}ms {both * 1e3:8.1f}ms {both / fence:6.2f}")


if __name__ == "__main__":
    main()
