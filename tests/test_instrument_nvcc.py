"""The nvcc recipe (samples/nvcc, docs/instrument.md section 4): nvcc's PTX instrumented
by the ptxas wrapper (``PTXKIT_PASSES``), the buffer variable set and read back by a
host program built with nvcc, decoded by ``ptxkit trace``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RECIPE = Path(__file__).resolve().parent.parent / "samples" / "nvcc"
PASSES = "timeline --buffer global --points function --points barrier --capacity 256"  # no commas: they separate passes

pytestmark = [pytest.mark.nvcc, pytest.mark.ptxas]


def build(tmp_path: Path) -> Path:
    """row_sums.cu -> PTX (nvcc) -> instrumented cubin and its layout file (the wrapper)."""
    subprocess.run(["nvcc", "-arch=sm_90a", "-ptx", str(RECIPE / "row_sums.cu"), "-o", "row_sums.ptx"],
                   cwd=tmp_path, check=True, capture_output=True, timeout=300)
    done = subprocess.run([sys.executable, "-m", "ptxkit", "ptxas", "-arch=sm_90a", "row_sums.ptx", "-o",
                           "row_sums.cubin"], cwd=tmp_path, capture_output=True, timeout=300,
                          env=dict(os.environ, PTXKIT_PASSES=PASSES))
    assert done.returncode == 0, done.stderr.decode()
    return tmp_path


def test_the_wrapper_instruments_nvccs_ptx(tmp_path):
    folder = build(tmp_path)
    (kernel, layout), = json.loads((folder / "row_sums.cubin.ptxkit.json").read_text())["layouts"].items()
    assert kernel == "row_sums" and layout["buffer"] == ["global", "ptxkit_trace_row_sums"]
    assert [point[1] for point in layout["points"]] == ["function", "barrier"]
    assert b"ptxkit_trace_row_sums" in (folder / "row_sums.cubin").read_bytes()


@pytest.mark.gpu
def test_the_host_recipe_reads_the_buffer_back(tmp_path):
    """512 rows, one CTA of 8 warps each: every warp's kernel span and __syncthreads span."""
    folder = build(tmp_path)
    subprocess.run(["nvcc", "-arch=sm_90a", str(RECIPE / "trace_host.cu"), "-o", "trace_host"], cwd=folder,
                   check=True, capture_output=True, timeout=300)
    ran = subprocess.run(["./trace_host", "row_sums.cubin", "256", "row_sums.trace.bin"], cwd=folder,
                         capture_output=True, timeout=120)
    assert ran.returncode == 0, ran.stdout + ran.stderr  # the sums match float64 ones
    decoded = subprocess.run([sys.executable, "-m", "ptxkit", "trace", "row_sums.trace.bin", "--layout",
                              "row_sums.cubin.ptxkit.json", "--chrome", "row_sums.json"], cwd=folder,
                             capture_output=True, timeout=120)
    assert decoded.returncode == 0, decoded.stderr
    assert "512 CTAs (512 ran), 4096 warps recorded, 8192 spans from 16384 records, 0 dropped, 0 unmatched" \
        in decoded.stdout.decode()
    events = json.loads((folder / "row_sums.json").read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 8192
