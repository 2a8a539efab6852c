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
import re
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
    from ptxkit.cfg.fence import FenceOptions

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
