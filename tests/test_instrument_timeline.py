"""ptxkit.instrument.timeline: where the records go (points, spin loops, TMA loops,
regions by label and by source line), what a simulated run writes (every warp's spans,
sampling, overflow counted and never out of bounds), every sample instrumented
assembles; on the GPU, the warp-specialized GEMM's producer and consumer overlap."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import ptxkit
from ptxkit.generators.rowreduce import row_reduce_kernel
from ptxkit.generators.simulate import launch
from ptxkit.instrument import instrument
from ptxkit.instrument.layout import read_layouts
from ptxkit.instrument.timeline import timeline
from ptxkit.trace import decode

ROOT = Path(__file__).resolve().parent.parent
HOPPER = ROOT / "samples" / "hopper"


def statements(text: str) -> list[str]:
    return [line.split("//")[0].strip() for line in text.splitlines() if line.split("//")[0].strip()]


def records_around(text: str, marker: str) -> tuple[int, int]:
    """(index of the statement `marker`, index of the nearest record store before it)."""
    lines = statements(text)
    at = lines.index(marker)
    store = max(i for i in range(at) if "st.global.v4.b32" in lines[i] and "ptxkit_tl" in lines[i])
    return at, store


def test_spin_loops_are_bracketed_on_their_edges():
    """ws_mbarrier's waits are loops of try_wait and a branch: the begin record goes
    before the loop's label (on the edge into it), the end after the loop, not inside."""
    text = instrument((HOPPER / "ws_mbarrier.ptx").read_text(), "timeline", points="mbarrier", fence=False)
    lines = statements(text)
    record_end = "add.u32 %ptxkit_tl_slot, %ptxkit_tl_slot, 1;"
    for label in ("$empty_wait:", "$full_wait:"):
        at = lines.index(label)
        loop_end = next(i for i in range(at, len(lines)) if lines[i].startswith("@!%p7 bra"))
        assert lines[at - 1] == record_end  # a record just before the loop
        assert not any("ptxkit_tl" in line for line in lines[at + 1: loop_end + 1])  # nothing inside it
        assert lines[loop_end + 1] == "mov.u64 %ptxkit_tl_time, %clock64;"  # and one after
    (layout,) = read_layouts(text).values()
    assert [p.name for p in layout.points] == ["mbarrier wait @77", "mbarrier wait @125"]


def test_a_tma_issue_loop_is_one_span_and_waits_bracket_their_instruction():
    text = instrument((HOPPER / "ws_tma_pipeline.ptx").read_text(), "timeline", fence=False)
    (layout,) = read_layouts(text).values()
    names = [p.name for p in layout.points]
    assert names == ["kernel", "bar.sync @74", "mbarrier wait @90", "TMA issue @102", "mbarrier wait @125",
                     "wgmma wait @159"]
    lines = statements(text)
    issue = lines.index("$issue_loop:")
    loop_end = lines.index("@%p5 bra $issue_loop;")
    assert lines[issue - 1] == "add.u32 %ptxkit_tl_slot, %ptxkit_tl_slot, 1;"  # the begin, on the edge into it
    assert lines.count("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                       "[%r33], [%rd1, {%r31, %r43}], [%r27];") == 1
    assert not any("ptxkit_tl" in line for line in lines[issue + 1: loop_end + 1])
    wait = next(i for i, line in enumerate(lines) if line.startswith("wgmma.wait_group"))
    assert lines[wait - 1] == "add.u32 %ptxkit_tl_slot, %ptxkit_tl_slot, 1;"
    assert lines[wait + 1] == "mov.u64 %ptxkit_tl_time, %clock64;"


def test_regions_by_label_and_by_source_line():
    text = instrument((HOPPER / "ws_tma_pipeline.ptx").read_text(), "timeline", points="function",
                      region=["consume=$consume_loop:$epilogue", "epilogue=$epilogue:"], fence=False)
    (layout,) = read_layouts(text).values()
    assert [(p.name, p.category) for p in layout.points] == [("kernel", "function"), ("consume", "region"),
                                                             ("epilogue", "region")]
    debug = (ROOT / "samples/syntax/debug.ptx").read_text()
    module = ptxkit.parse(debug)
    kernel = next(f for f in module.functions if f.kind == "entry" and not f.is_declaration)
    loc_lines = sorted({int(d.arguments.split()[1]) for d in kernel.walk()
                        if isinstance(d, ptxkit.Directive) and d.name == ".loc"})
    spec = f"body={loc_lines[0]}-{loc_lines[-1]}"
    instrumented = instrument(debug, "timeline", kernel=kernel.name, points="function", region=spec, fence=False)
    assert [p.name for p in read_layouts(instrumented)[kernel.name].points] == ["kernel", "body"]
    with pytest.raises(ValueError, match="no instruction of"):
        timeline(ptxkit.parse(debug), kernel=kernel.name, region="x=999999-999999")
    with pytest.raises(ValueError, match="no label"):
        timeline(ptxkit.parse(text), region="x=$nope:")
    with pytest.raises(ValueError, match="expected NAME"):
        timeline(ptxkit.parse(text), region="just-a-name")
    with pytest.raises(ValueError, match="unknown point kinds"):
        timeline(ptxkit.parse(text), points="function,sleep")


def rowreduce_run(rows: int, capacity: int, warps=None, chunk: int = 8):
    """A 4096-column sum (two rows per CTA, bar.sync to combine the warps) on the
    simulator, with the kernel and every bar.sync recorded."""
    k = row_reduce_kernel(4096, "f32", "sum")
    text = instrument(k.ptx, "timeline", points="function,barrier", capacity=capacity, chunk=chunk, warps=warps,
                      fence=False)
    layout = read_layouts(text)[k.name]
    x = np.random.default_rng(rows).standard_normal((rows, 4096)).astype(np.float32)
    out, plain = np.zeros(rows, np.float32), np.zeros(rows, np.float32)
    buffer = np.zeros(layout.buffer_bytes(k.grid(rows)), np.uint8)
    launch(text, k.name, x, out, np.uint32(rows), buffer, grid=k.grid(rows), block=k.block)
    launch(k.ptx, k.name, x, plain, np.uint32(rows), grid=k.grid(rows), block=k.block)
    assert out.tobytes() == plain.tobytes()
    return decode(buffer, layout, grid=k.grid(rows), clock_ghz=1.0), k


def test_every_warp_records_its_spans_in_a_simulated_run():
    trace, k = rowreduce_run(rows=6, capacity=64)
    assert trace.unmatched == 0 and int(trace.dropped.sum()) == 0 and trace.ran.all()
    warps = {(int(c), int(w)) for c, w in zip(trace.spans["cta"], trace.spans["warp"])}
    assert warps == {(c, w) for c in range(3) for w in range(8)}
    kernel = trace.spans[trace.spans["point"] == 0]
    barrier = trace.spans[trace.spans["point"] == 1]
    assert len(kernel) == 24 and len(barrier) == 24  # one row pair per CTA, one bar.sync per pass
    assert np.all(barrier["depth"] == 1) and np.all(barrier["cycles"] > 0)
    for span in barrier:  # inside its warp's kernel span
        whole = kernel[(kernel["cta"] == span["cta"]) & (kernel["warp"] == span["warp"])][0]
        assert whole["start"] < span["start"] < span["end"] < whole["end"]


def test_sampled_warps_and_a_full_buffer():
    trace, _ = rowreduce_run(rows=6, capacity=64, warps=4)
    assert sorted({int(w) for w in trace.spans["warp"]}) == [0, 4]
    full, _ = rowreduce_run(rows=6, capacity=5, chunk=2)  # 8 warps x 4 records: 27 of 32 do not fit
    assert full.records == 3 * 5 and int(full.dropped.sum()) == 3 * 27  # and nothing was written out of bounds


@pytest.mark.gpu
def test_the_warp_specialized_gemm_overlaps_producer_and_consumer():
    """ws_tma_pipeline on the GPU, every point recorded: the result matches numpy; in
    every CTA the producer (warp 0) issues block j's TMA only after every consumer warp
    finished its wgmma on block j - 4 (the ring has 4 stages: the cycle counts of one SM
    order them exactly), and issues some blocks before the consumer is done with the
    previous one (the overlap the pipeline is for)."""
    import test_hopper_samples as hopper

    from ptxkit import runtime

    sample = hopper.SAMPLES["ws_tma_pipeline"]
    text = instrument(sample.text, "timeline", capacity=1024)
    kernel = runtime.load(ptxkit.assemble(text)).kernel(sample.name)
    blocks = 24
    a, b = hopper.inputs(sample, seed=np.random.default_rng().integers(1 << 30), m=256, n=128, k=64 * blocks)
    arguments, out = hopper.device_arguments(sample, a, b)
    trace = kernel.launch(*arguments, **hopper.launch_shape(sample, a, b))
    np.testing.assert_allclose(out.to_numpy().astype(np.float64), hopper.reference(a, b), **hopper.tolerance(sample))
    assert trace.unmatched == 0 and int(trace.dropped.sum()) == 0 and trace.ran.all() and trace.ctas == 8
    category = {i: p.category for i, p in enumerate(trace.points)}
    overlapped = 0
    for cta in range(8):
        mine = trace.spans[trace.spans["cta"] == cta]
        tma = mine[[category[p] == "tma" for p in mine["point"]]]
        assert set(tma["warp"].tolist()) == {0} and len(tma) == blocks
        starts = np.sort(tma["start"])
        for warp in range(4, 8):
            wgmma = mine[(mine["warp"] == warp) & np.array([category[p] == "wgmma" for p in mine["point"]])]
            ends = np.sort(wgmma["end"])
            assert len(ends) == blocks
            assert np.all(starts[4:] > ends[:-4])  # a stage is refilled only once it was consumed
            overlapped += int(np.sum(starts[1:] < ends[:-1]))
    assert overlapped > 0
