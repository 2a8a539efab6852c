"""Natural kernels: TVM's reduction tests written literally, addresses computed from the lane.

The register-image harness checks the generators through the layouts; these kernels
check the same generators the way TVM's tests use them: a lane loads ``A[lane]`` or
``A[4·lane+i]``, a warp loads its WGMMA accumulator fragment, and four warps sum rows in a
loop, combining through shared memory under a warp-uniform branch (TVM's multi-warp loop,
the 144th local-variant test): docs/reduction.md §4.3, §4.9, §4.10, §4.6 and §4.12.

>>> from ptxkit.generators.harness import simulator
>>> case = warp_shuffle_natural("sum", "f32")
>>> case.run_and_check(simulator(module_text([case])))     # raises if a lane is wrong
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import numpy as np

from .accuracy import assert_within, sum_bound
from .builder import PtxBuilder, module_text as _module_text
from .dispatch import reduce_local
from .dtypes import dtype as as_dtype, round_to
from .layout import R, S, TileLayout, laneid
from .parity import RED_VIEW, wgmma_acc_layout
from .regtile import RegTile


@dataclass
class NaturalCase:
    """A hand-addressed kernel: its entry, arguments, which arguments it writes, the reference.

    >>> case = warp_shuffle_natural("sum", "f32")
    >>> case.name, case.threads, case.outputs, [a.shape for a in case.inputs(np.random.default_rng(0))]
    ('natural_shuffle_sum_f32', 32, (1,), [(32,), (32,)])
    """

    name: str
    group: str
    entry: str
    version: tuple
    threads: int
    inputs: Callable  # rng -> list of kernel arguments (numpy arrays)
    outputs: tuple  # indices of the arguments the kernel writes
    expected: Callable  # arguments before the run -> expected values of the outputs
    op: str
    depth: int  # roundings on a term's way into a sum (`accuracy`)
    dtype: str = "f32"
    seed: int = 0

    def run_and_check(self, runner) -> None:
        """Run on `runner` (see `harness.simulator`) and compare every output with the
        reference: max and min exactly, sums within γ_depth · Σ|terms|."""
        arrays = self.inputs(np.random.default_rng(self.seed))
        want = self.expected([a.copy() for a in arrays])
        magnitudes = self.expected([np.abs(a.astype(np.float64)) for a in arrays])
        runner(self.name, arrays, self.threads)
        for index, expected, magnitude in zip(self.outputs, want, magnitudes):
            got = arrays[index].astype(np.float64)
            atol = sum_bound(self.depth, self.dtype, magnitude) if self.op == "sum" else 0.0
            assert_within(got, expected, atol, f"argument {index}")


def module_text(cases) -> str:
    """One sm_90a module with every natural kernel.

    >>> text = module_text([warp_shuffle_natural("max", "f16"), multi_warp_loop_natural()])
    >>> text.splitlines()[:2], text.count(".entry")
    (['.version 8.0', '.target sm_90a'], 2)
    """
    return _module_text([c.entry for c in cases], "sm_90a", max(c.version for c in cases))


def _load_type(t) -> str:
    return {".f32": "f32", ".b16": "b16", ".b32": "b32"}[t.reg_type]


def _address(b, base, index, nbytes) -> str:
    """``base + index * nbytes`` (index a .b32 register) in a fresh .b64 register."""
    offset, address = b.reg(".b64"), b.reg(".b64")
    b.ins("mul.wide.u32", offset, index, nbytes)
    b.ins("add.s64", address, base, offset)
    return address


def _params(b, names) -> list[str]:
    regs = []
    for name in names:
        reg = b.reg(".b64")
        b.ins("ld.param.u64", reg, f"[{name}]")
        b.ins("cvta.to.global.u64", reg, reg)
        regs.append(reg)
    return regs


def _lane(b) -> str:
    lane = b.reg(".b32")
    b.ins("mov.u32", lane, "%laneid")
    return lane


def warp_shuffle_natural(op: str, dt: str) -> NaturalCase:
    """docs/reduction.md §4.9: ``src[0] = A[lane]``; warp reduce; ``B[lane] = dst[0]``.

    >>> from ptxkit.generators.harness import simulator
    >>> case = warp_shuffle_natural("max", "f16"); case.name
    'natural_shuffle_max_f16'
    >>> case.run_and_check(simulator(module_text([case])))
    """
    b = PtxBuilder()
    a_ptr, b_ptr = _params(b, ("A", "B"))
    t = as_dtype(dt)
    src = RegTile(b, (32,), dt, TileLayout(S[32 : 1 @ laneid]))
    dst = RegTile(b, (1,), dt, TileLayout(S[1:1] + R[32 : 1 @ laneid]))
    lane = _lane(b)
    b.ins(f"ld.global.{_load_type(t)}", src.regs[0], f"[{_address(b, a_ptr, lane, t.nbytes)}]")
    reduce_local(dst, src, op=op, scope="warp")
    b.ins(f"st.global.{_load_type(t)}", f"[{_address(b, b_ptr, lane, t.nbytes)}]", dst.regs[0])
    name = f"natural_shuffle_{op}_{dt}"

    def inputs(rng):
        return [round_to(dt, rng.random(32)).astype(t.numpy), np.zeros(32, t.numpy)]

    def expected(arrays):
        return [np.full(32, getattr(np, op)(arrays[0].astype(np.float64)))]

    return NaturalCase(name, "natural_shuffle", b.entry(name, [(".u64", "A"), (".u64", "B")]), b.version, 32,
                       inputs, (1,), expected, op, depth=5, dtype=dt)


def warp_shuffle_multi_natural(op: str, dt: str) -> NaturalCase:
    """docs/reduction.md §4.10: ``src[i] = A[4·lane+i]``; warp reduce; every lane stores ``B[i] = dst[i]``.

    >>> from ptxkit.generators.harness import simulator
    >>> case = warp_shuffle_multi_natural("sum", "f32")
    >>> [a.shape for a in case.inputs(np.random.default_rng(0))]
    [(128,), (4,)]
    >>> case.run_and_check(simulator(module_text([case])))
    """
    b = PtxBuilder()
    a_ptr, b_ptr = _params(b, ("A", "B"))
    t = as_dtype(dt)
    src = RegTile(b, (128,), dt, TileLayout(S[(32, 4) : (1 @ laneid, 1)]))
    dst = RegTile(b, (4,), dt, TileLayout(S[4:1] + R[32 : 1 @ laneid]))
    lane = _lane(b)
    first = b.reg(".b32")
    b.ins("shl.b32", first, lane, 2)
    row = _address(b, a_ptr, first, t.nbytes)
    for i in range(4):
        b.ins(f"ld.global.{_load_type(t)}", src.regs[i], f"[{row}+{i * t.nbytes}]")
    reduce_local(dst, src, op=op, scope="warp")
    for i in range(4):
        b.ins(f"st.global.{_load_type(t)}", f"[{b_ptr}+{i * t.nbytes}]", dst.regs[i])
    name = f"natural_shuffle_multi_{op}_{dt}"

    def inputs(rng):
        return [round_to(dt, rng.random(128)).astype(t.numpy), np.zeros(4, t.numpy)]

    def expected(arrays):
        return [getattr(np, op)(arrays[0].astype(np.float64).reshape(32, 4), axis=0)]

    return NaturalCase(name, "natural_shuffle_multi", b.entry(name, [(".u64", "A"), (".u64", "B")]), b.version, 32,
                       inputs, (1,), expected, op, depth=5, dtype=dt)


def wgmma_fragment_natural(groups: int, warps: int, op: str, dt: str, shuffle: bool, accum: bool) -> NaturalCase:
    """docs/reduction.md §4.6 with TVM's loads: ``acc[j, 2i+v] = A[row0 + 8j + lane/4, 8i + 2(lane%4) + v]``.

    >>> from ptxkit.generators.harness import simulator
    >>> case = wgmma_fragment_natural(1, 4, "max", "f16", shuffle=False, accum=False)
    >>> case.name, case.threads
    ('natural_wgmma_g1w4_max_f16_noshfl', 128)
    >>> case.run_and_check(simulator(module_text([case])))
    """
    b = PtxBuilder()
    a_ptr, b_ptr = _params(b, ("A", "B"))
    t = as_dtype(dt)
    acc = RegTile(b, (16, 128), dt, wgmma_acc_layout())
    red = RegTile(b, (16, 4), dt, RED_VIEW)
    tid, lane, warp, quad, row, col = b.regs(".b32", 6)
    b.ins("mov.u32", tid, "%tid.x")
    b.ins("and.b32", lane, tid, 31)
    b.ins("shr.u32", warp, tid, 5)
    per_group = warps // groups
    # row0 = (warp / per_group) * 64 + (warp % per_group) * 16, plus lane / 4
    group_of, in_group = b.regs(".b32", 2)
    b.ins("div.u32", group_of, warp, per_group)
    b.ins("rem.u32", in_group, warp, per_group)
    b.ins("mul.lo.u32", row, group_of, 64)
    b.ins("mad.lo.u32", row, in_group, 16, row)
    b.ins("shr.u32", quad, lane, 2)
    b.ins("add.u32", row, row, quad)
    b.ins("and.b32", col, lane, 3)
    b.ins("shl.b32", col, col, 1)
    element = b.reg(".b32")
    b.ins("mad.lo.u32", element, row, 128, col)  # A[row, 2(lane%4)]
    base = _address(b, a_ptr, element, t.nbytes)
    for j in range(2):
        for i in range(16):
            for v in range(2):
                offset = (8 * j * 128 + 8 * i + v) * t.nbytes
                b.ins(f"ld.global.{_load_type(t)}", acc.regs[2 * j + 4 * i + v], f"[{base}+{offset}]")
    out_index = b.reg(".b32")
    b.ins("and.b32", out_index, lane, 3)
    b.ins("mad.lo.u32", out_index, row, 4, out_index)  # B[row, lane%4]
    out = _address(b, b_ptr, out_index, t.nbytes)
    if accum:
        for i in range(2):
            b.ins(f"ld.global.{_load_type(t)}", red.regs[i], f"[{out}+{8 * i * 4 * t.nbytes}]")
    reduce_local(red, acc, op=op, accum=accum, scope="warp", thread_reduce=shuffle)
    if not shuffle:
        reduce_local(red, red, op=op, scope="warp", thread_reduce=True)
    for i in range(2):
        b.ins(f"st.global.{_load_type(t)}", f"[{out}+{8 * i * 4 * t.nbytes}]", red.regs[i])
    name = f"natural_wgmma_g{groups}w{warps}_{op}_{dt}_{'shfl' if shuffle else 'noshfl'}{'_acc' if accum else ''}"
    rows = 16 * warps

    def inputs(rng):
        return [round_to(dt, rng.random((rows, 128))).astype(t.numpy),
                round_to(dt, rng.random((rows, 4)) * 0.5).astype(t.numpy)]

    def expected(arrays):
        a, old = (x.astype(np.float64) for x in arrays)
        total = np.broadcast_to(getattr(np, op)(a, axis=1, keepdims=True), old.shape)
        if accum:
            total = {"sum": np.add, "max": np.maximum, "min": np.minimum}[op](total, old)
        return [total]

    # 32 of a row's elements per lane folded in turn, 2 butterfly steps, the old value
    return NaturalCase(name, "natural_wgmma", b.entry(name, [(".u64", "A"), (".u64", "B")]), b.version, 32 * warps,
                       inputs, (1,), expected, op, depth=33 + accum, dtype=dt)


def multi_warp_loop_natural(iterations: int = 3) -> NaturalCase:
    """docs/reduction.md §4.12: 4 warps sum a row of 128 each iteration; warps combine through shared memory,
    warp 0 alone (a warp-uniform branch) reduces the 4 partial sums.

    >>> from ptxkit.generators.harness import simulator
    >>> case = multi_warp_loop_natural(2)
    >>> case.threads, [a.shape for a in case.inputs(np.random.default_rng(0))]
    (128, [(2, 128), (2,)])
    >>> case.run_and_check(simulator(module_text([case])))
    """
    b = PtxBuilder()
    a_ptr, b_ptr = _params(b, ("A", "B"))
    smem = b.shared("sum_smem", 16, 4)
    partial = RegTile(b, (32,), "f32", TileLayout(S[32 : 1 @ laneid]))
    result = RegTile(b, (1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid]))
    cross = RegTile(b, (32,), "f32", TileLayout(S[32 : 1 @ laneid]))
    total = RegTile(b, (1,), "f32", TileLayout(S[1:1] + R[32 : 1 @ laneid]))
    tid, tx, ty, it, index, slot, base = b.regs(".b32", 7)
    not_first_warp, low_lane, first_thread, more = b.regs(".pred", 4)
    b.ins("mov.u32", tid, "%tid.x")
    b.ins("and.b32", tx, tid, 31)
    b.ins("shr.u32", ty, tid, 5)
    b.ins("mov.u32", base, smem)
    b.ins("mad.lo.u32", slot, ty, 4, base)  # &sum_smem[ty]
    b.ins("setp.ne.u32", not_first_warp, ty, 0)
    b.ins("setp.lt.u32", low_lane, tx, 4)
    b.ins("setp.eq.u32", first_thread, tid, 0)
    b.ins("mov.u32", it, 0)
    loop, skip = b.label("loop"), b.label("skip")
    b.place(loop)
    b.ins("mad.lo.u32", index, it, 128, tid)  # A[it, 32·ty + tx]
    b.ins("ld.global.f32", partial.regs[0], f"[{_address(b, a_ptr, index, 4)}]")
    reduce_local(result, partial, op="sum", scope="warp")
    b.ins("st.shared.f32", f"[{slot}]", result.regs[0])
    b.ins("bar.sync", 0)
    b.ins("bra.uni", skip, guard=not_first_warp)
    lane_slot = b.reg(".b32")
    b.ins("mad.lo.u32", lane_slot, tx, 4, base)
    b.ins("mov.f32", cross.regs[0], "0f00000000")
    b.ins("ld.shared.f32", cross.regs[0], f"[{lane_slot}]", guard=low_lane)
    reduce_local(total, cross, op="sum", scope="warp")
    b.ins("st.shared.f32", f"[{base}]", total.regs[0])
    b.place(skip)
    b.ins("bar.sync", 0)
    value = b.reg(".f32")
    b.ins("ld.shared.f32", value, f"[{base}]", guard=first_thread)
    b.ins("st.global.f32", f"[{_address(b, b_ptr, it, 4)}]", value, guard=first_thread)
    b.ins("bar.sync", 0)
    b.ins("add.u32", it, it, 1)
    b.ins("setp.lt.u32", more, it, iterations)
    b.ins("bra.uni", loop, guard=more)

    def inputs(rng):
        return [rng.random((iterations, 128)).astype(np.float32), np.zeros(iterations, np.float32)]

    def expected(arrays):
        return [arrays[0].astype(np.float64).sum(axis=1)]

    # a butterfly over 32 lanes, then one over the 4 warps' sums
    return NaturalCase("multi_warp_loop", "multi_warp_loop", b.entry("multi_warp_loop", [(".u64", "A"), (".u64", "B")]),
                       b.version, 128, inputs, (1,), expected, "sum", depth=7, seed=42)


def natural_cases() -> list[NaturalCase]:
    """Every natural kernel: 4 + 4 + 54 + 1 of docs/reduction.md §4.9, §4.10, §4.6 and §4.12.

    >>> cases = natural_cases()
    >>> len(cases), cases[-1].name, sum(c.group == "natural_wgmma" for c in cases)
    (63, 'multi_warp_loop', 54)
    """
    cases = [warp_shuffle_natural(op, dt) for op in ("sum", "max") for dt in ("f32", "f16")]
    cases += [warp_shuffle_multi_natural(op, dt) for op in ("sum", "max") for dt in ("f32", "f16")]
    for groups, warps in ((1, 1), (1, 4), (2, 8)):
        for op in ("sum", "max", "min"):
            for dt in ("f32", "f16"):
                for shuffle in (True, False):
                    for accum in (False, True):
                        if accum and not shuffle:
                            continue
                        cases.append(wgmma_fragment_natural(groups, warps, op, dt, shuffle, accum))
    return cases + [multi_warp_loop_natural()]
