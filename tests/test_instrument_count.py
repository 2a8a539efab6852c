"""ptxkit.instrument.count: block counts, checked exactly against the SIMT simulator's own
count of warps at each instruction (an independent count: the simulator counts what it
executes, the pass counts through the code it inserts), on kernels the simulator runs,
random branchy programs included; every sample instrumented assembles; and on the GPU,
against the simulator and against counts derived from the launch shape."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, note, settings

import ptxkit
from ptxkit.generators.rowreduce import row_reduce_kernel
from ptxkit.generators.simulate import Placed, launch
from ptxkit.instrument import instrument
from ptxkit.instrument.count import count, counter_classes
from ptxkit.instrument.layout import read_layouts
from ptxkit.rewrite import apply
from ptxkit.rewrite.facts import FunctionFacts
from ptxkit.trace import decode
from rewrite_programs import programs

ROOT = Path(__file__).resolve().parent.parent
def simulate_both(text: str, name: str, args, grid, block, cluster=1, **options):
    """Run `text` and its count-instrumented build on the simulator with the same
    arguments (copied); returns (counts decoded from the buffer, the simulator's own
    count per line of the plain run, the outputs of both runs)."""
    instrumented = instrument(text, "count", fence=False, **options)
    layout = read_layouts(instrumented)[name]
    executions: dict[int, int] = {}
    plain_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    launch(text, name, *plain_args, grid=grid, block=block, cluster=cluster, executions=executions)
    ctas = grid
    buffer = np.zeros(layout.buffer_bytes(ctas), np.uint8)
    counted_args = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    launch(instrumented, name, *counted_args, buffer, grid=grid, block=block, cluster=cluster)
    return decode(buffer, layout, grid=grid), executions, plain_args, counted_args


def assert_exact(counts, executions, plain_args, counted_args):
    ran = {line: count for line, count in counts.by_line.items() if count}
    assert ran == executions  # every instruction line that ran, the same number of warp executions
    assert set(counts.by_line) >= set(executions)
    for before, after in zip(plain_args, counted_args):
        if isinstance(before, np.ndarray):
            assert before.tobytes() == after.tobytes()  # the results did not change


def test_vector_add_with_a_partial_last_warp():
    text = (ROOT / "samples/toolchain/vector_add.ptx").read_text()
    a, b = np.random.default_rng(1).random((2, 1000), np.float32)
    args = [a, b, np.zeros(1000, np.float32), np.uint32(1000)]
    counts, executions, *outputs = simulate_both(text, "vector_add", args, grid=5, block=256)
    assert_exact(counts, executions, *outputs)
    assert counts.blocks == {"B0": 40, "B1": 32, "DONE": 40}  # 40 warps, 8 of them past n
    assert [row[0] for row in counts.rows] == [8] * 5  # per CTA


@pytest.mark.parametrize("cols, op, dtype, rows", [(4096, "sum", "f32", 5), (1000, "argmax", "f16", 37),
                                                   (4097, "logsumexp", "bf16", 3), (7, "meanvar", "f32", 70),
                                                   (100, "argmin", "f32", 9)])
def test_row_reductions_count_exactly(cols, op, dtype, rows):
    """Generated row reductions: loops, tails, several rows per thread, argmax's
    data-dependent index search (divergent branches)."""
    k = row_reduce_kernel(cols, dtype, op)
    rng = np.random.default_rng(cols + rows)
    host = {"f32": np.float32, "f16": np.float16, "bf16": np.uint16}[dtype]
    values = rng.standard_normal(rows * cols).astype(np.float32)
    src = values.astype(host) if dtype != "bf16" else (values.view(np.uint32) >> 16).astype(np.uint16)
    outs = [np.zeros(rows + 1, {"f32": np.float32, "f16": np.float16, "bf16": np.uint16, "s64": np.int64}[kind])
            for _, kind in k.outputs]
    args = [Placed(src, 2 * (src.dtype.itemsize == 2)), *outs, np.uint32(rows)]
    counts, executions, *outputs = simulate_both(k.ptx, k.name, args, grid=k.grid(rows), block=k.block)
    assert_exact(counts, executions, *outputs)


def test_one_row_for_the_whole_grid_and_a_cluster():
    k = row_reduce_kernel(4096, "f32", "sum", cluster=2)
    x = np.random.default_rng(4).standard_normal((3, 4096)).astype(np.float32)
    args = [x.reshape(-1), np.zeros(4, np.float32), np.uint32(3)]
    counts, executions, *outputs = simulate_both(k.ptx, k.name, args, grid=k.grid(3), block=k.block, cluster=2,
                                                 per_cta=False)
    assert_exact(counts, executions, *outputs)
    assert counts.rows.shape[0] == 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs())
def test_random_branchy_programs_count_exactly(program):
    """Divergent forward branches, loops with data-dependent trip counts, guarded and
    plain returns, nested scopes: the counts equal the simulator's per line."""
    note(program.text)
    out = np.zeros(64, np.uint32)
    counts, executions, *outputs = simulate_both(program.text, "k", [out], grid=2, block=64)
    assert_exact(counts, executions, *outputs)


def test_a_loop_head_left_for_an_outer_head_keeps_its_own_counter():
    """Found by the random programs: B1 heads a loop whose turn may instead go back to
    the enclosing loop's head B0, so B1 runs twice a warp where the block after it (which
    B1 dominates and which post-dominates B1) runs once."""
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u64 out)\n{\n"
            ".reg .b32 %r<3>;\n.reg .pred %p<2>;\n.reg .b64 %rd<3>;\n\tmov.u32 %r1, 0;\n\tmov.u32 %r2, 0;\n"
            "B0:\n\tadd.u32 %r1, %r1, 0;\nB1:\n\tadd.u32 %r1, %r1, 1;\n\tsetp.lt.u32 %p1, %r1, 2;\n\t@%p1 bra B0;\n"
            "\tadd.u32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, 1;\n\t@%p1 bra B1;\n"
            "\tld.param.u64 %rd1, [out];\n\tst.global.u32 [%rd1], %r1;\n\tret;\n}\n")
    classes = counter_classes(FunctionFacts(ptxkit.parse(text).function("k")))
    assert classes[3] == 3 != classes[2]  # the block after B1: its own counter
    out = np.zeros(1, np.uint32)
    counts, executions, *outputs = simulate_both(text, "k", [out], grid=1, block=32)
    assert_exact(counts, executions, *outputs)
    assert outputs[0][0].tolist() == [2]


def test_blocks_that_run_together_share_a_counter():
    """The loop's header and its join share one increment per iteration; the code before
    and after the loop shares the entry's counter; each if's arm has its own."""
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n.reg .pred %p<3>;\n"
            "\tbar.sync 0;\n\t@%p1 bra SKIP;\n\tbar.sync 1;\nSKIP:\n\tbar.sync 2;\nLOOP:\n\tbar.sync 3;\n"
            "\t@%p2 bra NEXT;\n\tbar.sync 5;\nNEXT:\n\tbar.sync 4;\n\t@%p1 bra LOOP;\n\tret;\n}\n")
    module = ptxkit.parse(text)
    classes = counter_classes(FunctionFacts(module.function("k")))
    assert len(set(classes.values())) == 4  # entry (+ join + after the loop), arm, loop (+ its join), arm
    assert classes[0] == classes[2] == classes[6] and classes[3] == classes[5] != classes[4]
    plan = count(module)
    layout = plan.info["layouts"]["k"]
    assert layout["counters"] == 4
    apply(plan)
    assert str(module).count("red.global.add.u64") == 4


def test_bad_options_are_refused():
    text = (ROOT / "samples/toolchain/vector_add.ptx").read_text()
    with pytest.raises(ValueError, match="no kernel nope"):
        count(ptxkit.parse(text), kernel="nope")
    with pytest.raises(ValueError, match="buffer must be param, global, last"):
        count(ptxkit.parse(text), buffer="shared")
    with pytest.raises(ValueError, match="no parameter"):
        count(ptxkit.parse(text), buffer="param:x")
    with pytest.raises(ValueError, match="no 64-bit address"):
        count(ptxkit.parse(text), buffer="last")  # vector_add's last parameter is its u32 n


@pytest.mark.gpu
def test_gpu_counts_equal_the_simulators():
    """The same argmax (data-dependent index search, partial last CTA) on the GPU and on
    the simulator, on the same fresh random data: the same count at every line."""
    from ptxkit import runtime

    k = row_reduce_kernel(1000, "f32", "argmax")
    rows = 37
    x = np.random.default_rng().standard_normal((rows, 1000)).astype(np.float32)
    text = instrument(k.ptx, "count")
    kernel = runtime.load(ptxkit.assemble(text)).kernel(k.name)
    index = np.zeros(rows, np.int64)
    counts = kernel.launch(x, runtime.Out(index), np.uint32(rows), grid=k.grid(rows), block=k.block)
    assert index.tolist() == np.argmax(x.astype(np.float64), axis=1).tolist()
    executions: dict[int, int] = {}
    launch(k.ptx, k.name, x, np.zeros(rows, np.int64), np.uint32(rows), grid=k.grid(rows), block=k.block,
           executions=executions)
    assert {line: count for line, count in counts.by_line.items() if count} == executions


@pytest.mark.gpu
def test_gemm_counts_follow_from_the_launch_shape():
    """ws_tma_pipeline over 4 x 3 tiles and 16 K blocks: per CTA, 8 warps enter; warp 0
    alone runs the producer's loop (16 times) and issue loop (8 x 16); the 4 consumer
    warps run their loop 16 times each; the spin loops run at least as often."""
    import test_hopper_samples as hopper

    from ptxkit import runtime

    sample = hopper.SAMPLES["ws_tma_pipeline"]
    text = instrument(sample.text, "count")
    kernel = runtime.load(ptxkit.assemble(text)).kernel(sample.name)
    a, b = hopper.inputs(sample, seed=np.random.default_rng().integers(1 << 30), m=192, n=256, k=1024)
    arguments, out = hopper.device_arguments(sample, a, b)
    counts = kernel.launch(*arguments, **hopper.launch_shape(sample, a, b))
    np.testing.assert_allclose(out.to_numpy().astype(np.float64), hopper.reference(a, b), **hopper.tolerance(sample))
    blocks = 16
    expected = {"B0": 8, "B1": 1, "$init_done": 8, "B3": 4, "$produce_loop": blocks, "B6": blocks,
                "$issue_loop": 8 * blocks, "B8": blocks, "$producer_done": 4, "$consumer": 4,
                "$consume_loop": 4 * blocks, "B13": 4 * blocks, "$epilogue": 4}
    for cta in range(12):
        got = counts.cta(cta)
        assert {name: got[name] for name in expected} == expected
        assert got["$empty_wait"] >= blocks and got["$full_wait"] >= 4 * blocks
