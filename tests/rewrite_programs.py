"""Random branchy PTX kernels for the rewrite tests, with a reference interpreter.

`programs()` is a hypothesis strategy for `Program`s: straight-line and branchy
blocks (forward branches, bounded loops, guarded and plain returns and exits), nested
``{ }`` scopes with their own declarations and local branches, and names that a
fresh-name generator must step around (``%ptxkit_count``, ``$ptxkit_edge``…).
`Program.text` is the kernel ``k(.param .u64 out)``; `Program.edges(tid)` replays one
thread in Python and counts the CFG edges it takes (by block index, as
`ptxkit.cfg.flow.graph.flow_graph` numbers them).
"""

from __future__ import annotations

from hypothesis import strategies as st

MASK = 0xFFFFFFFF
REGISTERS = ("%r1", "%r2", "%r3", "%r4")
#: Names that fresh names must not take: declared at the top, in nested scopes, as labels.
BAIT_REGISTERS = ("%ptxkit_count", "%ptxkit_count_1", "%ptxkit_t")
BAIT_LABELS = ("$ptxkit_edge", "$ptxkit_skip", "$ptxkit_edge_1", "$ptxkit_skip_1", "$ptxkit_L")


class Block:
    """One source block: arithmetic `ops`, an optional nested scope with a local branch
    (`nested`: the label it uses), and a terminator."""

    def __init__(self, ops, nested, terminator):
        self.ops, self.nested, self.terminator = ops, nested, terminator


class Program:
    def __init__(self, blocks: list[Block]):
        self.blocks = blocks
        self.targets = {t[-1] for b in blocks for t in [b.terminator] if t[0] in ("bra", "cbra", "loop")}
        self.loops = [i for i, b in enumerate(blocks) if b.terminator[0] == "loop"]
        self.text = self._emit()

    # -- PTX --------------------------------------------------------------------------------
    def _emit(self) -> str:
        out = [".version 8.0", ".target sm_90a", ".address_size 64", ".visible .entry k(.param .u64 out)", "{",
               "\t.reg .b32 %r<5>;", "\t.reg .pred %p<2>;", "\t.reg .b64 %rd<4>;",
               f"\t.reg .b32 %c<{max(len(self.loops), 1)}>;", f"\t.reg .b32 {', '.join(BAIT_REGISTERS)};",
               "\tld.param.u64 %rd1, [out];", "\tmov.u32 %r1, %tid.x;", "\tmul.wide.u32 %rd2, %r1, 4;",
               "\tadd.s64 %rd3, %rd1, %rd2;", "\tmul.lo.u32 %r2, %r1, 3;", "\tmov.u32 %r3, 5;",
               "\txor.b32 %r4, %r1, 7;"]
        out.extend(f"\tmov.u32 %c{k}, 0;" for k in range(len(self.loops)))
        for i, block in enumerate(self.blocks):
            if i in self.targets:
                out.append(f"B{i}:")
            out.extend(f"\t{op} {dst}, {src}, {imm};" for op, dst, src, imm in block.ops)
            if block.nested is not None:
                label, register = block.nested
                out += ["\t{", "\t.reg .pred %ptxkit_count_2;", "\t.reg .b32 %ptxkit_t<2>;",
                        f"\tand.b32 %ptxkit_t0, {register}, 1;", "\tsetp.ne.u32 %ptxkit_count_2, %ptxkit_t0, 0;",
                        f"\t@%ptxkit_count_2 bra {label};", f"\tadd.u32 {register}, {register}, 1;", f"{label}:",
                        f"\txor.b32 {register}, {register}, 2;", "\t}"]
            out.extend(self._terminator(block.terminator))
        out.append("}")
        return "\n".join(out) + "\n"

    def _terminator(self, term) -> list[str]:
        kind = term[0]
        if kind == "fall":
            return []
        if kind == "bra":
            return [f"\tbra B{term[1]};"]
        if kind == "ret":
            return [f"\t{term[1]};"]
        if kind == "cbra":
            (register, bound), target = term[1], term[2]
            return [f"\tsetp.lt.u32 %p1, {register}, {bound};", f"\t@%p1 bra B{target};"]
        if kind == "cret":
            (register, bound), opcode = term[1], term[2]
            return [f"\tsetp.lt.u32 %p1, {register}, {bound};", f"\t@%p1 {opcode};"]
        counter, bound, target = self.loops.index(self.blocks.index(next(
            b for b in self.blocks if b.terminator is term))), term[1], term[2]
        return [f"\tadd.u32 %c{counter}, %c{counter}, 1;", f"\tsetp.lt.u32 %p1, %c{counter}, {bound};",
                f"\t@%p1 bra B{target};"]

    # -- reference --------------------------------------------------------------------------
    def edges(self, tid: int) -> dict:
        """CFG edge -> times taken by thread `tid` (blocks numbered as flow_graph does)."""
        regs = {"%r1": tid, "%r2": tid * 3 & MASK, "%r3": 5, "%r4": tid ^ 7}
        counters = [0] * len(self.loops)
        numbers = self._numbering()
        taken: dict = {}

        def step(u, v):
            taken[(u, v)] = taken.get((u, v), 0) + 1

        if numbers[0][0] != 0:  # the prologue falls into block 0's label
            step(0, numbers[0][0])
        i = 0
        while True:
            block = self.blocks[i]
            first, *inner = numbers[i]
            for op, dst, src, imm in block.ops:
                regs[dst] = _apply(op, regs[src], imm)
            current = first
            if block.nested is not None:  # and + setp + @bra | add, then the label's block
                label, register = block.nested
                skip = regs[register] & 1
                step(first, inner[1] if skip else inner[0])
                if not skip:
                    regs[register] = (regs[register] + 1) & MASK
                    step(inner[0], inner[1])
                regs[register] ^= 2
                current = inner[1]
            kind = block.terminator[0]
            after = numbers[i + 1][0] if i + 1 < len(self.blocks) else "exit"
            if kind == "fall":
                if after != current:  # else the next source block continues this CFG block
                    step(current, after)
                i += 1
            elif kind == "bra":
                step(current, numbers[block.terminator[1]][0])
                i = block.terminator[1]
            elif kind == "ret":
                step(current, "exit")
                return taken
            elif kind in ("cbra", "loop"):
                if kind == "cbra":
                    (register, bound), target = block.terminator[1], block.terminator[2]
                    go = regs[register] < bound
                else:
                    k = self.loops.index(i)
                    counters[k] = (counters[k] + 1) & MASK
                    go = counters[k] < block.terminator[1]
                    target = block.terminator[2]
                if go:
                    step(current, numbers[target][0])
                    i = target
                else:
                    step(current, after)
                    i += 1
            else:  # cret
                (register, bound), _ = block.terminator[1], block.terminator[2]
                if regs[register] < bound:
                    step(current, "exit")
                    return taken
                step(current, after)
                i += 1
            if i >= len(self.blocks):
                return taken

    def _numbering(self) -> list[list[int]]:
        """The flow-graph block numbers of each source block (a nested scope adds two);
        the prologue before block 0 is flow block 0."""
        numbers, count, last, falls = [], 1, 0, True
        for i, block in enumerate(self.blocks):
            if falls and i not in self.targets:  # the same CFG block goes on
                own = [last]
            else:
                own, count = [count], count + 1
            if block.nested is not None:
                own, count = own + [count, count + 1], count + 2
            numbers.append(own)
            last, falls = own[-1], block.terminator[0] == "fall"
        return numbers


def _apply(op: str, value: int, imm: int) -> int:
    if op == "add.u32":
        return (value + imm) & MASK
    if op == "xor.b32":
        return value ^ imm
    return (value * imm) & MASK  # mul.lo.u32


@st.composite
def programs(draw) -> Program:
    count = draw(st.integers(2, 7))
    labels = list(BAIT_LABELS)
    blocks = []
    for i in range(count):
        ops = draw(st.lists(st.tuples(st.sampled_from(["add.u32", "xor.b32", "mul.lo.u32"]),
                                      st.sampled_from(REGISTERS), st.sampled_from(REGISTERS), st.integers(0, 9)),
                            min_size=1, max_size=3))
        nested = None
        if labels and draw(st.booleans()):
            nested = (labels.pop(0), draw(st.sampled_from(REGISTERS)))
        condition = st.tuples(st.sampled_from(REGISTERS), st.integers(0, 40))
        choices = [st.just(("fall",)), st.tuples(st.just("cret"), condition, st.sampled_from(["ret", "exit"]))]
        if i + 1 < count:
            later = st.integers(i + 1, count - 1)
            choices += [st.tuples(st.just("bra"), later), st.tuples(st.just("cbra"), condition, later)]
        choices.append(st.tuples(st.just("loop"), st.integers(1, 3), st.integers(0, i)))
        terminator = ("ret", "ret") if i == count - 1 else draw(st.one_of(choices))
        if i == count - 1 and draw(st.booleans()):
            terminator = ("ret", draw(st.sampled_from(["ret", "exit"])))
        blocks.append(Block(ops, nested, terminator))
    return Program(blocks)
