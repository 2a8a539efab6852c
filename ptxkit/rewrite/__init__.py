"""ptxkit.rewrite: write PTX passes with matchers, fresh names and code on CFG edges.

>>> import ptxkit
>>> from ptxkit.rewrite import Plan, apply, match
>>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
>>> plan = Plan(m)
>>> k = plan.function("k")
>>> count = k.fresh_register(".u32", "n")
>>> k.insert(k.entry(), f"mov.u32 {count}, 0;")
>>> for op in k.find(match.async_proxy()):
...     k.insert(k.before(op), f"add.u32 {count}, {count}, 1;")
>>> lines = apply(plan)
>>> [line.strip() for line in str(m).splitlines() if "ptxkit_n" in line][:2]
['.reg .u32 %ptxkit_n;', 'mov.u32 %ptxkit_n, 0;']

Modules, one job each: `match` (matchers), `names` (fresh names), `positions`
(where code goes), `plan` (a pass's edits: `Plan`, `FunctionPlan`, `apply`),
`pipeline` (running passes, the fence pass last; `run`, `load_pass`), `facts` (what
matchers know about a function), `analysis` (the one adapter to the value analysis),
`locs` (``.loc`` source lines), `passes` (the shipped passes). Design: docs/rewrite.md.
"""

from __future__ import annotations

from ptxkit._lazy import lazy_exports

_EXPORTS = {
    "Plan": "ptxkit.rewrite.plan",
    "FunctionPlan": "ptxkit.rewrite.plan",
    "AddedParam": "ptxkit.rewrite.plan",
    "apply": "ptxkit.rewrite.plan",
    "Position": "ptxkit.rewrite.positions",
    "run": "ptxkit.rewrite.pipeline",
    "load_pass": "ptxkit.rewrite.pipeline",
    "RewriteResult": "ptxkit.rewrite.pipeline",
    "PassError": "ptxkit.rewrite.pipeline",
    "Loc": "ptxkit.rewrite.locs",
}

__all__ = sorted(_EXPORTS) + ["match"]


def __getattr__(name: str):
    if name == "match":  # the matchers module, as `from ptxkit.rewrite import match`
        import importlib

        return importlib.import_module("ptxkit.rewrite.match")
    return _lazy_getattr(name)


_lazy_getattr, __dir__ = lazy_exports(__name__, _EXPORTS)
