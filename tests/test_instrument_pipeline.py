"""ptxkit.instrument.pipeline: `instrument()` runs a pass, then the fence pass; what it
emits for every sample assembles, with the layout line the runtime reads."""

from __future__ import annotations

from pathlib import Path

import pytest

import ptxkit
from ptxkit.instrument import instrument
from ptxkit.instrument.layout import read_layouts

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = sorted(p for p in (ROOT / "samples").rglob("*.ptx") if "expected" not in p.parts)


def shipped_arch(text: str) -> str | None:
    """The target a sample is assembled for, or None when it has no kernel or does not
    assemble as shipped (the fence samples that exist to be refused)."""
    module = ptxkit.parse(text)
    if not module.targets or not any(f.kind == "entry" and not f.is_declaration for f in module.functions):
        return None
    try:
        ptxkit.assemble(text, arch=module.targets[0])
    except (ptxkit.PtxasError, ValueError):
        return None
    return module.targets[0]


#: each pass with its defaults, then with its other buffer and options a user may set
BUILDS = [("count", {}), ("count", {"buffer": "global", "per_cta": False}),
          ("timeline", {}), ("timeline", {"buffer": "global", "warps": 4, "capacity": 100, "chunk": 3})]


@pytest.mark.ptxas
@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: str(p.relative_to(ROOT / "samples")))
def test_every_sample_instrumented_assembles(path):
    text = path.read_text()
    arch = shipped_arch(text)
    if arch is None:
        pytest.skip("the sample does not assemble as shipped")
    for kind, options in BUILDS:
        instrumented = instrument(text, kind, filename=str(path), **options)
        assert read_layouts(instrumented), (kind, options)
        ptxkit.assemble(instrumented, arch=arch, filename=str(path))


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="kind must be one of timeline, count"):
        instrument((ROOT / "samples/toolchain/vector_add.ptx").read_text(), "histogram")
