"""Instrumentation passes: what each warp does inside a kernel, and how often.

- `ptxkit.instrument.timeline`: begin/end records per warp at chosen points (function,
  barrier and mbarrier waits, wgmma waits, TMA issue, named regions);
- `ptxkit.instrument.count`: executions of each basic block per warp;
- `ptxkit.instrument.layout`: the buffers' format and the layout a pass leaves for the
  decoder; `ptxkit.instrument.snippets`: the PTX the passes insert.

`ptxkit.runtime` allocates and decodes the buffers of the kernels it launches;
`ptxkit.trace` decodes a buffer read back any other way. Design: docs/instrument.md.
"""

from __future__ import annotations

KINDS = ("timeline", "count")


def instrument(ptx, kind: str, filename: str | None = None, fence: bool | None = None, **options) -> str:
    """`ptx` (text or a parsed module) instrumented by pass `kind` (``timeline`` or
    ``count``, with its `options`), then fenced (`ptxkit.rewrite.run`'s `fence`), with a
    ``// ptxkit-instrument:`` line per kernel that carries its layout, so that
    `ptxkit.assemble` and `ptxkit.runtime` find it.

    >>> text = instrument(open("samples/toolchain/vector_add.ptx").read(), "count")
    >>> from ptxkit.instrument.layout import read_layouts
    >>> read_layouts(text)["vector_add"].counters
    2
    """
    from ptxkit.rewrite.pipeline import PassSpec, load_pass, run

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    spec = PassSpec(kind, load_pass(kind).function, options)
    return run(ptx, [spec], fence=fence, filename=filename).text
