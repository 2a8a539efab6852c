"""ptxkit.rewrite.pipeline: specs, the fence pass last, composition, line maps."""

from __future__ import annotations

import pytest

import ptxkit
from ptxkit.cfg.fence.fence import fence_module
from ptxkit.rewrite import Plan, match, run
from ptxkit.rewrite.pipeline import PassError, load_pass

from conftest import SAMPLES

FENCE_SAMPLES = sorted((SAMPLES / "fence").glob("*.ptx")) + sorted((SAMPLES / "hopper").glob("*.ptx"))


def instrument(module):
    """What instrumentation does: registers counting block entries, timestamps around
    waits, a buffer parameter written at every return (no shared memory touched)."""
    plan = Plan(module)
    for k in plan.kernels():
        buf = k.add_param(".u64", "buf")
        count, stamp, address = (k.fresh_register(t, h) for t, h in ((".u32", "n"), (".u64", "t"), (".u64", "a")))
        k.insert(k.entry(), [f"mov.u32 {count}, 0;", f"ld.param.u64 {address}, [{buf.name}];"])
        for block in range(len(k.flow.blocks)):
            if k.flow.blocks[block].instructions:
                k.insert(k.block_entry(block), f"add.u32 {count}, {count}, 1;")
        for wait in k.find(match.barrier_wait() | match.mbarrier_wait() | match.opcode("wgmma.wait_group")):
            k.insert(k.before(wait), f"mov.u64 {stamp}, %globaltimer;")
        k.insert(k.returns(), f"st.global.u32 [{address}], {count};")
    return plan


def site_keys(report, lines=None):
    """What a fence report says, by input lines: (function, hazard, variant, the (access,
    async op) lines of each pair it orders)."""
    back = (lambda line: line) if lines is None else lines.old
    return sorted((f.function, f.hazard, f.variant,
                   tuple((back(p.access.line) if p.access and p.access.line else None, back(p.op.line))
                         for p in f.pairs)) for f in report.fences)


@pytest.mark.parametrize("path", FENCE_SAMPLES, ids=lambda p: p.name)
def test_instrumentation_changes_nothing_fence_check_reports(path):
    text = path.read_text()
    before = fence_module(ptxkit.parse(text, path.name), rewrite=False)
    instrumented = run(text, [instrument], fence=False, filename=path.name)
    after = fence_module(instrumented.module, rewrite=False)
    assert site_keys(after, instrumented.lines) == site_keys(before)


@pytest.mark.parametrize("path", FENCE_SAMPLES[::3], ids=lambda p: p.name)
def test_a_pass_then_fence_is_fence_on_the_pass_output(path):
    text = path.read_text()
    both = run(text, [instrument], filename=path.name)
    alone = run(text, [instrument], fence=False, filename=path.name)
    fenced = ptxkit.parse(alone.text, path.name)
    report = fence_module(fenced)
    assert both.text == str(fenced)
    assert [stage.name for stage in both.stages] == ["instrument", "fence"]
    assert len(both.fence.fences) == len(report.fences)


def test_line_maps_compose_through_every_stage():
    text = (SAMPLES / "fence/14b_hoist_out_of_loop.ptx").read_text()
    result = run(text, [instrument], filename="14b.ptx")
    old, new = text.splitlines(), result.text.splitlines()
    for number, line in enumerate(old, 1):
        moved = result.lines.new(number)
        assert moved is not None and new[moved - 1].strip() == line.strip() or "entry k(" in line or "param" in line
    inserted = set(result.lines.inserted)
    assert {n for n, line in enumerate(new, 1) if "ptxkit" in line or "fence.proxy" in line} <= inserted | {
        n for n, line in enumerate(new, 1) if ".entry" in line}
    assert result.params == {"k": [result.stages[0].params[0]]} and result.params["k"][0].index == 2


def test_where_the_fence_pass_runs():
    text = (SAMPLES / "fence/expected/14b_hoist_out_of_loop.ptx").read_text()
    stripped = run(text, ["strip-fences"])
    assert [s.name for s in stripped.stages] == ["strip-fences"] and "fence.proxy" not in stripped.text
    refenced = run(text, ["strip-fences", "fence"])
    assert [s.name for s in refenced.stages] == ["strip-fences", "fence"] and refenced.text == text
    assert run(text, ["strip-fences"], fence=True).text == text
    checked = run(text, ["strip-fences"], fence=True, check=True)
    assert len(checked.fence.missing) == 1 and "fence.proxy" not in checked.text
    assert run(text, [instrument], fence=False).fence is None


def test_specs_load_shipped_module_and_file_passes(tmp_path):
    assert load_pass("strip-fences").function.__name__ == "strip_fences"
    assert load_pass("strip --opcode=bar.sync").options == {"opcode": "bar.sync"}
    path = tmp_path / "mypass.py"
    path.write_text("def nothing(module, every=1, verbose=False):\n    return []\n")
    spec = load_pass(f"{path}:nothing --every 2 --verbose")
    assert spec.options == {"every": "2", "verbose": True} and spec.fence_after
    unexpected = r"unexpected keyword argument 'colour' \(it takes --opcode\)"
    for bad, message in [("strip --opcode ret --colour red", unexpected),
                         ("strip", "missing a required argument: 'opcode'"), (f"{path}:missing", "no function"),
                         ("strip opcode", "expected an option"), ("fence --placement inline", "fence pass takes"),
                         ("nope", "not a shipped pass"), ("'unclosed", "No closing quotation")]:
        with pytest.raises(PassError, match=message):
            load_pass(bad)


def test_a_failing_pass_is_named():
    def broken(module):
        plan = Plan(module)
        k = plan.kernels()[0]
        k.insert(k.entry(), "mov.u32 %r1, ;")

    with pytest.raises(PassError, match="pass 'broken' failed: PtxSyntaxError") as caught:
        run((SAMPLES / "toolchain/vector_add.ptx").read_text(), [broken])
    assert isinstance(caught.value.cause, ptxkit.PtxSyntaxError)


def test_input_lines_of_a_later_stage():
    def mark(module):
        plan = Plan(module)
        k = plan.kernels()[0]
        k.insert(k.entry(), ["membar.cta;", "membar.cta;"])
        plan.info["ret"] = [i.line for i in k.find(match.opcode("ret"))]
        return plan

    result = run((SAMPLES / "toolchain/vector_add.ptx").read_text(), [mark, mark], fence=False)
    first, second = result.stages
    assert result.input_line(1, second.info["ret"][0]) == first.info["ret"][0] == 42


@pytest.mark.ptxas
@pytest.mark.parametrize("path", FENCE_SAMPLES[::2], ids=lambda p: p.name)
def test_instrumented_and_fenced_samples_assemble(path):
    from ptxkit.ptxas import assemble

    result = run(path.read_text(), [instrument], filename=path.name)
    assert result.changed and result.params
    assemble(result.text, result.module.targets[0], options=("-c",), filename=path.name, cache=False)
