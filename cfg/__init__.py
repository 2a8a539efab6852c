"""ptxkit.cfg: control-flow graphs, dataflow, and the generic/async proxy-fence pass.

>>> from ptxkit.cfg import fence_text
>>> text = ".version 8.0\\n.target sm_80\\n.address_size 64\\n"
>>> fence_text(text, "k.ptx")[1].skipped
'target sm_80 is older than sm_90 (no async proxy)'

Its modules live in four subpackages, each importing only itself and those before it
(docs/architecture.md §4, enforced by tests/test_architecture.py):

- `flow`: graphs, inlining, dominators, loops, the dataflow solver, SSA, operands;
- `values`: the abstract values of registers and the analysis that computes them, and
  which threads run each block;
- `sync`: what instructions do to shared memory and barriers, and which hand-offs can meet;
- `fence`: the proxy fixpoint, fence placement, the pass and its options, DOT drawings.

The names below are imported on first use.
"""

from __future__ import annotations

from ptxkit._lazy import lazy_exports

_EXPORTS = {
    "build_cfg": "ptxkit.cfg.flow.graph",
    "flow_graph": "ptxkit.cfg.flow.graph",
    "solve_forward": "ptxkit.cfg.flow.dataflow",
    "fence_module": "ptxkit.cfg.fence.fence",
    "fence_text": "ptxkit.cfg.fence.fence",
    "FenceOptions": "ptxkit.cfg.fence.fence",
    "FenceReport": "ptxkit.cfg.fence.fence",
    "module_dot": "ptxkit.cfg.fence.dot",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
