"""The strip passes: they remove exactly the fences (or the opcodes asked for), the
result assembles, and ``fence --check`` then reports the races the fences closed."""

from __future__ import annotations

import re

import pytest

import ptxkit
from ptxkit.cfg.fence.fence import fence_module
from ptxkit.rewrite import run

from conftest import SAMPLES

EXPECTED = sorted((SAMPLES / "fence" / "expected").glob("*.ptx"))
ALL = sorted(SAMPLES.rglob("*.ptx"))
FENCE = re.compile(r"^\s*(?:@!?%\w+\s+)?fence\.(?:proxy\.async|mbarrier_init)", re.M)
BARRIER = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:bar\.sync|barrier\.sync)\b", re.M)


@pytest.mark.parametrize("path", EXPECTED, ids=lambda p: p.name)
def test_stripping_a_fenced_file_gives_the_stripped_input(path):
    """What the fence pass added is all that goes (with the input's own fences)."""
    fenced = path.read_text()
    if "$ptxkit_preheader" in fenced:
        pytest.skip("the fence pass also created a loop preheader here")
    original = (path.parent.parent / path.name).read_text()
    assert run(fenced, ["strip-fences"]).text == run(original, ["strip-fences"]).text


@pytest.mark.parametrize("path", EXPECTED, ids=lambda p: p.name)
def test_check_reports_what_the_pass_fenced_once_the_fences_are_stripped(path):
    input_report = fence_module(ptxkit.parse_file(path.parent.parent / path.name), rewrite=False)
    stripped = run(path.read_text(), ["strip-fences"], fence=True, check=True, filename=path.name)
    assert not FENCE.search(stripped.text)
    assert len(stripped.fence.missing) >= len(input_report.missing)


@pytest.mark.ptxas
@pytest.mark.parametrize("path", ALL, ids=lambda p: str(p.relative_to(SAMPLES)))
def test_every_sample_assembles_after_stripping(path):
    from ptxkit.ptxas import assemble

    text = path.read_text()
    result = run(text, ["strip-fences", "strip --opcode bar.sync --opcode barrier.sync*"], filename=path.name)
    removed = len(FENCE.findall(text)) + len(BARRIER.findall(text))
    if not result.changed:
        assert not removed
        return
    assert len(result.text.splitlines()) == len(text.splitlines()) - removed
    arch = result.module.targets[0]
    assemble(result.text, arch, options=("-c",), filename=path.name, cache=False)


def test_strip_an_opcode_pattern():
    text = (SAMPLES / "hopper/ws_named_barrier.ptx").read_text()
    result = run(text, ["strip --opcode bar.sync --opcode bar.arrive"], filename="ws.ptx")
    removed = result.stages[0].info["removed"]
    lines = text.splitlines()
    assert removed and all(re.match(r"\s*bar\.(sync|arrive)", lines[n - 1]) for n in removed)
    assert not re.search(r"^\s*bar\.(sync|arrive)", result.text, re.M)
    assert [s.name for s in result.stages] == ["strip"]
