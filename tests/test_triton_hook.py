"""``ptxkit.triton_hook``: the fence pass inside Triton's compiler.

On the CPU (Triton compiles for an explicit ``GPUTarget("cuda", 90, 32)`` without a GPU):
the pointer matmul's PTX, Triton's own fences stripped, gets its fence, check mode only warns, the log and the kernel's
metadata say what was done, a second compile is a cache hit, a changed mode compiles
again, a hook installed before ptxkit's still runs. On the GPU (marker ``gpu``): the
pointer matmul and the TMA matmul with its own fence stripped, launched through
``@triton.jit``, give numpy's float64 product; the in-memory cache of a jit function
keeps its hits and recompiles when the mode changes.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

triton = pytest.importorskip("triton", reason="Triton is not installed (pip install -e '.[triton]')")

from ptxkit import triton_hook  # noqa: E402

from conftest import SAMPLES  # noqa: E402

sys.path.insert(0, str(SAMPLES / "triton"))
from generate import compile_sample  # noqa: E402  (samples/triton: the kernels and their compiles)
from triton_kernels import (FENCE, hopper_unavailable_reason, launch_pointer, launch_tma,  # noqa: E402
                            matmul_pointer, matmul_tma, strip_fences)


@pytest.fixture
def fresh_triton(tmp_path, monkeypatch):
    """An empty Triton cache, no hook, and a record of every compile: cache hit or not."""
    compiles = []
    monkeypatch.setattr(triton.knobs.cache, "dir", str(tmp_path / "triton-cache"))
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", None)
    monkeypatch.setattr(triton.knobs.compilation, "listener",
                        lambda **event: compiles.append((event["metadata"]["name"], event["cache_hit"])))
    yield compiles
    triton_hook.uninstall()


def compile_pointer():
    """The 64 x 64 x 32 pointer matmul of samples/triton, compiled now for sm_90."""
    return compile_sample("matmul_pointer_64x64x32")


@pytest.fixture
def stripped(fresh_triton, monkeypatch):
    """Triton's own fence.proxy.async taken out by a hook of Triton's kind: Triton 3.6
    leaves the pointer matmul's fence out, later Triton writes it; stripped, every
    version needs ptxkit's. Returns the PTX without ptxkit."""
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", strip_fences)
    ptx = compile_pointer().asm["ptx"]
    assert "fence.proxy.async" not in ptx
    return ptx


def test_fence_mode_adds_the_missing_fence_and_records_it(stripped, fresh_triton, tmp_path, monkeypatch):
    log = tmp_path / "fences.jsonl"
    monkeypatch.setenv("PTXKIT_FENCE_LOG", str(log))
    hook = triton_hook.install("fence")
    kernel = compile_pointer()
    fenced = kernel.asm["ptx"]
    assert fenced.count("fence.proxy.async") == 1
    assert FENCE.sub("", fenced) == stripped  # only the fence differs
    (entry,) = hook.log
    assert entry["file"] == "<triton matmul_pointer>" and entry["mode"] == "fence"
    assert entry["kernels"] == ["matmul_pointer"]
    assert [f["function"] for f in entry["fences"]] == ["matmul_pointer"]
    assert [f["variant"] for f in entry["fences"]] == ["fence.proxy.async.shared::cta"]
    assert "(cp.async.cg.shared.global)" in entry["fences"][0]["reason"]  # the cp.async write the wait completed
    assert 0 < entry["seconds"] < 5
    assert kernel.metadata.ptxkit["fences"] == entry["fences"]
    (logged,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert logged["fences"] == entry["fences"]
    assert fresh_triton == [("matmul_pointer", False), ("matmul_pointer", False)]


def test_check_mode_warns_and_keeps_the_ptx(stripped, capsys):
    hook = triton_hook.install("check")
    assert compile_pointer().asm["ptx"] == stripped
    warnings = [line for line in capsys.readouterr().err.splitlines() if "[ptxkit]" in line]
    assert len(warnings) == 1
    assert re.match(r"<triton matmul_pointer>:\d+:\d+: warning: missing fence\.proxy\.async\.shared::cta", warnings[0])
    assert len(hook.log[0]["fences"]) == 1


def test_cache_hits_stay_hits_and_a_changed_mode_recompiles(fresh_triton):
    triton_hook.install("fence")
    first = compile_pointer()
    again = compile_pointer()  # the same mode: from Triton's cache, with what ptxkit did
    assert again.asm["ptx"] == first.asm["ptx"] and again.metadata.ptxkit == first.metadata.ptxkit
    triton_hook.install("check")
    compile_pointer()
    triton_hook.install("off")
    compile_pointer()
    triton_hook.install("fence")
    compile_pointer()
    assert [hit for _, hit in fresh_triton] == [False, True, False, False, True]


def test_the_cache_key_holds_version_mode_and_options():
    from ptxkit import __version__
    from ptxkit.cfg.fence.fence import FenceOptions

    fence, check = triton_hook.Hook("fence").cache_key(), triton_hook.Hook("check").cache_key()
    inline = triton_hook.Hook("fence", FenceOptions(placement="inline")).cache_key()
    assert fence[0].startswith(f"ptxkit-{__version__}-") and "-fence-" in fence[0]
    assert len({fence[1], check[1], inline[1]}) == 3
    assert fence == triton_hook.Hook("fence").cache_key()
    with pytest.raises(ValueError, match="mode must be fence or check"):
        triton_hook.Hook("off")


def test_a_previous_hook_runs_first_and_stays_after_uninstall(fresh_triton, monkeypatch):
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", strip_fences)
    hook = triton_hook.install("fence")
    assert hook.previous is strip_fences
    assert triton_hook.install("check").previous is strip_fences  # installing again replaces ptxkit's
    triton_hook.uninstall()
    assert triton.knobs.runtime.add_stages_inspection_hook is strip_fences


def test_a_bad_mode_is_refused(fresh_triton):
    with pytest.raises(ValueError, match="mode must be one of fence, check, off"):
        triton_hook.install("sometimes")


# -- when the pass cannot run: fail closed, or compile unfenced when asked ------------------------


def _unreadable(monkeypatch):
    """The parser made to refuse the kernel, as it refuses a construct it does not know."""
    import ptxkit
    from ptxkit.errors import PtxSyntaxError

    def parse(text, name="<input>"):
        raise PtxSyntaxError("unexpected operand '%3'", name, 12, 5)

    monkeypatch.setattr(ptxkit, "parse", parse)


def _buggy(monkeypatch):
    """The pass made to raise, as a bug in it would."""
    import ptxkit.cfg.fence.fence

    def fence_module(*args, **kwargs):
        raise RuntimeError("the pass broke")

    monkeypatch.setattr(ptxkit.cfg.fence.fence, "fence_module", fence_module)


BREAK_THE_PASS = {"unreadable": _unreadable, "bug": _buggy}
PROBLEMS = {
    "unreadable": "<triton matmul_pointer>:12:5: the proxy-fence pass cannot read this PTX: unexpected operand '%3'",
    "bug": "<triton matmul_pointer>: the proxy-fence pass failed (a bug in ptxkit; please report it): "
           "RuntimeError: the pass broke",
}


@pytest.mark.parametrize("kind", list(BREAK_THE_PASS))
def test_a_kernel_the_pass_cannot_run_on_is_not_compiled(kind, stripped, fresh_triton, monkeypatch):
    hook = triton_hook.install("fence")
    with monkeypatch.context() as broken:
        BREAK_THE_PASS[kind](broken)
        with pytest.raises(triton_hook.FencePassError) as failure:
            compile_pointer()
    assert str(failure.value) == (PROBLEMS[kind] + " (install(on_error='ptxas') or PTXKIT_ON_ERROR=ptxas compiles it "
                                                    "without the pass)")
    assert isinstance(failure.value.__cause__, Exception) and hook.log == []
    assert compile_pointer().asm["ptx"].count("fence.proxy.async") == 1  # the pass works again: no cached kernel
    assert len(hook.log) == 1 and fresh_triton[-1] == ("matmul_pointer", False)


@pytest.mark.parametrize("kind", list(BREAK_THE_PASS))
@pytest.mark.parametrize("opt_out", ["argument", "environment"])
def test_opting_out_compiles_triton_ptx_unfenced_with_a_warning(kind, opt_out, stripped, monkeypatch, capsys):
    if opt_out == "argument":
        hook = triton_hook.install("fence", on_error="ptxas")
    else:
        monkeypatch.setenv("PTXKIT_ON_ERROR", "ptxas")
        hook = triton_hook.install("fence")
    BREAK_THE_PASS[kind](monkeypatch)
    kernel = compile_pointer()
    assert kernel.asm["ptx"] == stripped and "cubin" in kernel.asm
    warnings = [line for line in capsys.readouterr().err.splitlines() if "[ptxkit]" in line]
    assert warnings == [f"{PROBLEMS[kind]}; compiled without the pass (on error: ptxas) [ptxkit]"]
    (entry,) = hook.log
    assert entry["fences"] == [] and entry["skipped"] == f"the pass could not run: {PROBLEMS[kind]}"
    assert kernel.metadata.ptxkit["skipped"] == entry["skipped"]


def test_on_error_is_checked_and_in_the_cache_key(fresh_triton):
    assert triton_hook.install("fence").on_error == "fail"
    with pytest.raises(ValueError, match="on_error must be one of fail, ptxas"):
        triton_hook.install("fence", on_error="ignore")
    fail, ptxas = triton_hook.Hook("fence").cache_key(), triton_hook.Hook("fence", on_error="ptxas").cache_key()
    assert fail[1] != ptxas[1]  # a kernel compiled unfenced under "ptxas" is never a hit under "fail"


def test_without_triton_install_says_how_to_get_it():
    code = ("import sys\nsys.modules['triton'] = None\nimport ptxkit.triton_hook\n"
            "try:\n    ptxkit.triton_hook.install()\nexcept ModuleNotFoundError as err:\n"
            "    print(type(err).__name__, err.name, err)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ("ModuleNotFoundError triton ptxkit.triton_hook needs Triton 3.6 or newer, which is not "
                           "installed: pip install 'ptxkit[triton]' (or pip install triton)\n")


# -- the ptxas wrapper as Triton's ptxas (TRITON_PTXAS_PATH) -------------------------------------------


@pytest.mark.ptxas
def test_the_wrappers_log_names_the_kernel_not_tritons_temporary_file(fresh_triton, tmp_path, monkeypatch):
    wrapper = tmp_path / "ptxkit-ptxas"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m ptxkit.cli.ptxas_cmd "$@"\n')
    wrapper.chmod(0o755)
    bundled = os.path.join(os.path.dirname(triton.knobs.__file__), "backends", "nvidia", "bin", "ptxas")
    real = bundled if os.access(bundled, os.X_OK) else None
    if real is None:
        from ptxkit.cli.ptxas_cmd import real_ptxas

        real = real_ptxas()
    log = tmp_path / "fences.jsonl"
    monkeypatch.setenv("TRITON_PTXAS_PATH", str(wrapper))
    monkeypatch.setenv("PTXKIT_REAL_PTXAS", real)
    monkeypatch.setenv("PTXKIT_FENCE_LOG", str(log))
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", strip_fences)
    kernel = compile_pointer()
    assert "cubin" in kernel.asm
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["kernels"] == ["matmul_pointer"] and entry["mode"] == "fence"
    assert [f["function"] for f in entry["fences"]] == ["matmul_pointer"]
    assert "matmul_pointer" not in os.path.basename(entry["file"])  # the file is Triton's temporary one


def stamp_entry(module):
    """A pass: the %globaltimer into a fresh register at every kernel's entry."""
    from ptxkit.rewrite import Plan

    plan = Plan(module)
    for k in plan.kernels():
        k.insert(k.entry(), f"mov.u64 {k.fresh_register('.u64', 'start')}, %globaltimer;")
    plan.info["kernels"] = [k.name for k in plan.kernels()]
    return plan


def test_passes_run_before_the_fence_pass_and_are_recorded(stripped, fresh_triton):
    hook = triton_hook.install("fence", passes=[stamp_entry])
    kernel = compile_pointer()
    ptx = kernel.asm["ptx"]
    assert "mov.u64 %ptxkit_start, %globaltimer;" in ptx and ptx.count("fence.proxy.async") == 1
    assert kernel.metadata.ptxkit["passes"] == ["stamp_entry"]
    assert kernel.metadata.ptxkit["info"] == {"stamp_entry": {"kernels": ["matmul_pointer"]}}
    assert [f["variant"] for f in hook.log[0]["fences"]] == ["fence.proxy.async.shared::cta"]
    lines = stripped.splitlines()  # the fence's line is the Triton PTX's, before the pass
    assert lines[hook.log[0]["fences"][0]["line"] - 1].strip()
    triton_hook.install("off", passes=[stamp_entry])  # passes only: the race stays
    alone = compile_pointer().asm["ptx"]
    assert "%ptxkit_start" in alone and "fence.proxy.async" not in alone
    assert [hit for _, hit in fresh_triton][-1] is False  # another key: compiled again


def test_the_cache_key_holds_the_passes_and_their_source():
    plain = triton_hook.Hook("fence").cache_key()
    with_pass = triton_hook.Hook("fence", passes=[stamp_entry]).cache_key()
    strip = triton_hook.Hook("fence", passes=["strip --opcode bar.sync"]).cache_key()
    assert len({plain[1], with_pass[1], strip[1]}) == 3 and "stamp_entry" in with_pass[0]
    assert with_pass == triton_hook.Hook("fence", passes=[stamp_entry]).cache_key()


# -- on the GPU ---------------------------------------------------------------------------------


@pytest.fixture
def torch_gpu():
    reason = hopper_unavailable_reason()
    if reason is not None:
        pytest.skip(f"the GPU tests launch Triton kernels on torch tensors: {reason}")
    import torch

    return torch


def operands(torch, size: int, seed: int):
    generator = torch.Generator().manual_seed(seed)
    a = torch.randn(size, size, generator=generator, dtype=torch.float32).to(torch.float16)
    b = torch.randn(size, size, generator=generator, dtype=torch.float32).to(torch.float16)
    expected = a.double().numpy() @ b.double().numpy()  # numpy's float64 product
    return a.cuda(), b.cuda(), expected


def worst_error(launch, kernel, torch, a, b, expected, rounds: int) -> float:
    """The largest relative error of `rounds` launches (C zeroed before each)."""
    worst = 0.0
    for _ in range(rounds):
        c, _ = launch(kernel, a, b)
        torch.cuda.synchronize()
        worst = max(worst, float(np.abs(c.double().cpu().numpy() - expected).max() / np.abs(expected).max()))
    return worst


@pytest.mark.gpu
def test_pointer_matmul_gets_its_fence_and_the_right_product(fresh_triton, torch_gpu):
    torch = torch_gpu
    a, b, expected = operands(torch, 1024, seed=11)
    hook = triton_hook.install("fence")
    kernel = triton.jit(matmul_pointer)
    _, compiled = launch_pointer(kernel, a, b)
    assert [f["variant"] for f in compiled.metadata.ptxkit["fences"]] == ["fence.proxy.async.shared::cta"]
    assert "FENCE.VIEW.ASYNC.S" in compiled.asm["sass"]
    assert worst_error(launch_pointer, kernel, torch, a, b, expected, rounds=20) < 1e-2
    assert len(hook.log) == 1  # 21 launches, one compile


@pytest.mark.gpu
def test_tma_matmul_with_its_fence_stripped_is_put_right(fresh_triton, torch_gpu, monkeypatch):
    torch = torch_gpu
    a, b, expected = operands(torch, 1024, seed=12)
    monkeypatch.setattr(triton.knobs.runtime, "add_stages_inspection_hook", strip_fences)
    hook = triton_hook.install("fence")
    kernel = triton.jit(matmul_tma)
    _, compiled = launch_tma(kernel, a, b)
    reasons = [fence["reason"] for fence in compiled.metadata.ptxkit["fences"]]
    assert any("stmatrix" in reason and "cp.async.bulk.tensor" in reason for reason in reasons), reasons
    assert "FENCE.VIEW.ASYNC.S" in compiled.asm["sass"]
    assert worst_error(launch_tma, kernel, torch, a, b, expected, rounds=50) < 1e-2
    assert len(hook.log) == 1


@pytest.mark.gpu
def test_jit_cache_keeps_hits_and_recompiles_for_another_mode(fresh_triton, torch_gpu):
    torch = torch_gpu
    a, b, expected = operands(torch, 512, seed=13)
    triton_hook.install("fence")
    kernel = triton.jit(matmul_pointer)
    launch_pointer(kernel, a, b)
    launch_pointer(kernel, a, b)  # the in-memory cache: no compile at all
    assert fresh_triton == [("matmul_pointer", False)]
    triton_hook.install("check")
    _, checked = launch_pointer(kernel, a, b)
    assert checked.metadata.ptxkit["mode"] == "check"
    triton_hook.install("fence")
    c, fenced = launch_pointer(kernel, a, b)  # back to the first: in memory again
    assert fenced.metadata.ptxkit["mode"] == "fence"
    assert fresh_triton == [("matmul_pointer", False), ("matmul_pointer", False)]
    other = triton.jit(matmul_pointer)  # a fresh jit function: from the disk cache
    launch_pointer(other, a, b)
    assert fresh_triton[-1] == ("matmul_pointer", True)
    torch.cuda.synchronize()
    assert np.abs(c.double().cpu().numpy() - expected).max() / np.abs(expected).max() < 1e-2


# -- the README's recipe ---------------------------------------------------------------------


def test_the_readmes_cpu_recipe_runs_and_prints_what_it_says(tmp_path):
    """The script under "Triton without a GPU" in the README, run as a user would (a fresh
    process and Triton cache), prints the lines the README shows (on the Triton the
    README names; another Triton only has to run it)."""
    from conftest import ROOT

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("**Triton without a GPU.**"):]
    script = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    shown = re.search(r"It prints\n\n```text\n(.*?)```", section, re.S).group(1)
    (tmp_path / "recipe.py").write_text(script)
    environment = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"))
    environment.pop("PTXKIT_FENCE_MODE", None)
    done = subprocess.run([sys.executable, "recipe.py"], cwd=tmp_path, env=environment, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    if triton.__version__.startswith("3.6."):
        assert done.stdout == shown
    else:
        assert done.stdout.endswith("True\n")


# -- instrumentation through the hook ------------------------------------------------------------


def test_a_timeline_records_into_tritons_profile_scratch(fresh_triton):
    """With ``timeline --buffer last`` the hook records into the kernel's last parameter,
    Triton's profile scratch, and tells Triton's launcher how much to allocate per CTA."""
    import ptxkit
    from ptxkit.instrument.layout import read_layouts

    triton_hook.install("fence", passes=["timeline --buffer last --capacity 256"])
    compiled = compile_pointer()
    (layout,) = read_layouts(compiled.asm["ptx"]).values()
    (kernel,) = [f for f in ptxkit.parse(compiled.asm["ptx"]).functions if f.kind == "entry"]
    assert layout.buffer == ("param", kernel.signature.params[-1].name)  # after the global scratch
    assert compiled.metadata.profile_scratch_size == layout.cta_bytes == 32 + 256 * 8
    assert compiled.metadata.profile_scratch_align == 16
    assert triton_hook.layout_of(compiled) == layout
    assert {p.category for p in layout.points} >= {"function", "barrier"}


@pytest.mark.gpu
def test_triton_kernels_traced_and_counted_on_the_gpu(fresh_triton, torch_gpu):
    """The TMA matmul (timeline) and the pointer matmul (count) launched by Triton: right
    products, and the buffers read back as torch tensors through `recording`."""
    torch = torch_gpu
    a, b, expected = operands(torch, 1024, seed=14)
    triton_hook.install("fence", passes=["timeline --buffer last --capacity 2048"])  # 8 first slots for 32 warps
    with triton_hook.recording() as recorded:
        c, compiled = launch_tma(triton.jit(matmul_tma), a, b)
        torch.cuda.synchronize()
    assert float(np.abs(c.double().cpu().numpy() - expected).max() / np.abs(expected).max()) < 1e-2
    (buffer,) = recorded.buffers
    assert isinstance(buffer, torch.Tensor) and buffer.dtype == torch.uint8 and buffer.is_cuda
    trace = recorded.decode(compiled)
    ctas = (1024 // 128) * (1024 // 128)
    assert trace.ctas == ctas and trace.ran.all() and trace.unmatched == 0 and int(trace.dropped.sum()) == 0
    categories = {trace.points[p].category for p in trace.spans["point"]}
    assert {"function", "mbarrier", "wgmma"} <= categories
    kernel_spans = trace.spans[trace.spans["point"] == 0]
    assert len(kernel_spans) == ctas * compiled.metadata.num_warps
    triton_hook.install("fence", passes=["count --buffer last"])
    with triton_hook.recording() as recorded:
        c, compiled = launch_pointer(triton.jit(matmul_pointer), a, b)
        torch.cuda.synchronize()
    assert float(np.abs(c.double().cpu().numpy() - expected).max() / np.abs(expected).max()) < 1e-2
    counts = recorded.decode(compiled)
    entry = counts.layout.blocks[0].name
    assert [counts.cta(cta)[entry] for cta in range(ctas)] == [compiled.metadata.num_warps] * ctas
