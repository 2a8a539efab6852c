"""ptxkit.cfg: control-flow graphs, dataflow, and the generic/async proxy-fence pass.

>>> from ptxkit.cfg import fence_text
>>> text = ".version 8.0\\n.target sm_80\\n.address_size 64\\n"
>>> fence_text(text, "k.ptx")[1].skipped
'target sm_80 is older than sm_90 (no async proxy)'

Modules: `graph` (basic blocks, `build_cfg`), `dominance`, `loops`, `dataflow` (a
generic forward solver), `provenance` (where generic pointers point), `proxy` (the
proxy analysis), `placement` (where fences go), `options` (the pass's option names and
the targets it runs on), `fence` (the pass and its report),
`dot` (Graphviz drawings). The names below are imported on first use.
"""

from __future__ import annotations

from ptxkit._lazy import lazy_exports

_EXPORTS = {
    "build_cfg": "ptxkit.cfg.graph",
    "flow_graph": "ptxkit.cfg.graph",
    "solve_forward": "ptxkit.cfg.dataflow",
    "fence_module": "ptxkit.cfg.fence",
    "fence_text": "ptxkit.cfg.fence",
    "FenceOptions": "ptxkit.cfg.fence",
    "FenceReport": "ptxkit.cfg.fence",
    "module_dot": "ptxkit.cfg.dot",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
