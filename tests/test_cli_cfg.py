"""``ptxkit cfg``: the block listing, DOT, SVG through Graphviz, --function, errors."""

from __future__ import annotations

import os
import shutil
import stat

import pytest

from ptxkit.cli.main import main

from conftest import SAMPLES

FENCES = SAMPLES / "fence"
CALLS = FENCES / "x06_call_func_that_starts_with_wgmma.ptx"
LOOP = FENCES / "14b_hoist_out_of_loop.ptx"


def test_block_listing(capsys):
    assert main(["cfg", str(LOOP)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "entry k: 3 blocks, 1 fence to insert"
    assert lines[1].split()[:5] == ["B0", "line", "23", "->", "L"]
    assert lines[1].endswith("in: nothing pending")
    assert lines[2].strip() == "+ fence.proxy.async.shared::cta; after line 34 (loop)"
    assert lines[3].split()[:6] == ["L", "line", "35", "->", "L,", "B2"]
    assert lines[3].endswith("in: nothing pending")  # the hoisted fence ordered the store before the loop


def test_dot_marks_state_fences_and_back_edges(capsys, tmp_path):
    target = tmp_path / "k.dot"
    assert main(["cfg", str(LOOP), "--dot", "-o", str(target)]) == 0
    dot = target.read_text()
    assert dot.startswith('digraph "k" {') and dot.rstrip().endswith("}")
    assert "+ fence.proxy.async.shared::cta;   <- loop" in dot
    assert "st.shared.b16 [%r1], %h0;  [write]" in dot and "[async]" in dot
    assert 'b1 -> b1 [label="taken", style="bold"];' in dot
    assert 'b0 [label="B0  (line 23)\\lin:  nothing pending' in dot


def test_function_selection(capsys):
    assert main(["cfg", str(CALLS), "--dot"]) == 0
    both = capsys.readouterr().out
    assert 'subgraph "cluster_0"' in both and 'label="mma_tile";' in both and 'label="k";' in both
    assert main(["cfg", str(CALLS), "--dot", "--function", "mma_tile"]) == 0
    one = capsys.readouterr().out
    assert one.startswith('digraph "mma_tile" {') and "subgraph" not in one
    assert main(["cfg", str(CALLS), "--function", "nope"]) == 2
    assert "no function 'nope' in module (functions: mma_tile, k)" in capsys.readouterr().err
    extern = FENCES / "03_unknown_extern_default_is_none.ptx"
    assert main(["cfg", str(extern), "--function", "custom_op"]) == 2
    assert "'custom_op' is a declaration without a body" in capsys.readouterr().err


def test_svg_without_graphviz_says_so(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["cfg", str(LOOP), "--svg"]) == 2
    err = capsys.readouterr().err
    assert "--svg needs the Graphviz 'dot' program, which is not on PATH" in err


def test_svg_runs_dot(capsys, monkeypatch, tmp_path):
    """A stand-in `dot` shows that the DOT text goes in and its output comes out."""
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\n[ \"$1\" = -Tsvg ] || exit 3\necho '<svg>'\nwc -l\necho '</svg>'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(tmp_path) + os.pathsep + os.environ["PATH"])
    assert main(["cfg", str(LOOP), "--svg"]) == 0
    out = capsys.readouterr().out.split()
    assert out[0] == "<svg>" and int(out[1]) > 5 and out[2] == "</svg>"


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_svg_with_real_graphviz(capsys):
    assert main(["cfg", str(LOOP), "--svg"]) == 0
    assert "<svg" in capsys.readouterr().out
