"""Instrument PTX in one call: a pass (``timeline`` or ``count``), then the fence pass,
through `ptxkit.rewrite.run`.

>>> text = instrument(open("samples/toolchain/vector_add.ptx").read(), "count", per_cta=False)
>>> text.count("red.global.add.u64")
2
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
