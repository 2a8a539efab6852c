"""``ptxkit trace``: a buffer written by an instrumented kernel (run here on the SIMT
simulator) decoded from the command line, with the layout from the instrumented PTX or
from a ``.ptxkit.json`` file; bad input exits 2 with a message."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ptxkit.cli.main import main
from ptxkit.generators.rowreduce import row_reduce_kernel
from ptxkit.generators.simulate import launch
from ptxkit.instrument import instrument
from ptxkit.instrument.layout import read_layouts

VECTOR_ADD = Path(__file__).resolve().parent.parent / "samples" / "toolchain" / "vector_add.ptx"


@pytest.fixture(scope="module")
def timeline_run(tmp_path_factory):
    """A 4096-column row sum, kernel and bar.sync recorded, on the simulator: (folder with
    the instrumented PTX and the raw buffer, the layout)."""
    folder = tmp_path_factory.mktemp("trace")
    k = row_reduce_kernel(4096, "f32", "sum")
    text = instrument(k.ptx, "timeline", points="function,barrier", capacity=64, fence=False)
    (folder / "k.ptx").write_text(text)
    layout = read_layouts(text)[k.name]
    buffer = np.zeros(layout.buffer_bytes(k.grid(6)), np.uint8)
    x = np.random.default_rng(5).standard_normal((6, 4096)).astype(np.float32)
    launch(text, k.name, x, np.zeros(6, np.float32), np.uint32(6), buffer, grid=k.grid(6), block=k.block)
    (folder / "k.bin").write_bytes(buffer.tobytes())
    return folder, layout


def test_a_timeline_from_the_instrumented_ptx(timeline_run, capsys):
    folder, layout = timeline_run
    chrome, phases = folder / "k.json", folder / "phases.json"
    assert main(["trace", str(folder / "k.bin"), "--layout", str(folder / "k.ptx"), "--clock-ghz", "1",
                 "--grid", "3", "--chrome", str(chrome), "--json", str(phases)]) == 0
    out = capsys.readouterr().out
    assert "3 CTAs (3 ran), 24 warps recorded, 48 spans from 96 records, 0 dropped" in out
    assert "bar.sync @" in out and "kernel" in out
    events = json.loads(chrome.read_text())["traceEvents"]
    assert sum(e["ph"] == "X" for e in events) == 48
    assert {row["phase"] for row in json.loads(phases.read_text())} == {p.name for p in layout.points}


def test_a_picture_and_a_layout_file(timeline_run, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    folder, layout = timeline_run
    sidecar = tmp_path / "k.cubin.ptxkit.json"
    sidecar.write_text(json.dumps({"layouts": {layout.kernel: layout.to_dict()}}))
    picture = tmp_path / "k.svg"
    assert main(["trace", str(folder / "k.bin"), "--layout", str(sidecar), "--plot", str(picture),
                 "--ctas", "0,2"]) == 0
    assert "CTA 2 warp 7" in picture.read_text()


def test_counts(tmp_path, capsys):
    text = instrument(VECTOR_ADD.read_text(), "count")
    (tmp_path / "k.ptx").write_text(text)
    layout = read_layouts(text)["vector_add"]
    buffer = np.zeros(layout.buffer_bytes(4), np.uint8)
    a = np.ones(1000, np.float32)
    launch(text, "vector_add", a, a, np.zeros(1000, np.float32), np.uint32(1000), buffer, grid=4, block=256)
    np.save(tmp_path / "k.npy", buffer)
    counts = tmp_path / "counts.json"
    assert main(["trace", str(tmp_path / "k.npy"), "--layout", str(tmp_path / "k.ptx"), "--json", str(counts)]) == 0
    assert "vector_add: 704 warp-level instructions executed" in capsys.readouterr().out  # 32 warps x 22
    assert json.loads(counts.read_text())["blocks"] == {"B0": 32, "B1": 32, "DONE": 32}


def test_bad_input_exits_2(timeline_run, tmp_path, capsys):
    folder, layout = timeline_run
    plain = tmp_path / "plain.ptx"
    plain.write_text(VECTOR_ADD.read_text())
    assert main(["trace", str(folder / "k.bin"), "--layout", str(plain)]) == 2
    assert "no instrumented kernel" in capsys.readouterr().err
    assert main(["trace", str(folder / "k.bin"), "--layout", str(folder / "k.ptx"), "--kernel", "nope"]) == 2
    assert "no kernel 'nope'" in capsys.readouterr().err
    assert main(["trace", str(folder / "k.bin"), "--layout", str(folder / "k.ptx"), "--grid", "3,x"]) == 2
    assert "--grid takes integers" in capsys.readouterr().err
    (tmp_path / "short.bin").write_bytes(b"\0" * 10)
    assert main(["trace", str(tmp_path / "short.bin"), "--layout", str(folder / "k.ptx")]) == 2
    assert "no whole CTA region" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text('{"layouts": {"k": {"kind": "fence"}}}')
    assert main(["trace", str(folder / "k.bin"), "--layout", str(broken)]) == 2
    assert "not a ptxkit layout file" in capsys.readouterr().err
    assert main(["trace", str(folder / "k.bin"), "--layout", str(tmp_path / "missing.json")]) == 2
