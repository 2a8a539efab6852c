"""Instrumentation passes: what each warp does inside a kernel, and how often.

- `ptxkit.instrument.timeline`: begin/end records per warp at chosen points (function,
  barrier and mbarrier waits, wgmma waits, TMA issue, named regions);
- `ptxkit.instrument.count`: executions of each basic block per warp;
- `ptxkit.instrument.layout`: the buffers' format and the layout a pass leaves for the
  decoder; `ptxkit.instrument.snippets`: the PTX the passes insert.

`instrument(ptx, kind, **options)` (`ptxkit.instrument.pipeline`) runs one of them and
the fence pass. `ptxkit.runtime` allocates and decodes the buffers of the kernels it
launches; `ptxkit.trace` decodes a buffer read back any other way. Design:
docs/instrument.md.
"""

from __future__ import annotations

from .._lazy import lazy_exports

__getattr__, __dir__ = lazy_exports(__name__, {"instrument": "ptxkit.instrument.pipeline"})
