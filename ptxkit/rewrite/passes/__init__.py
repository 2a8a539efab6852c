"""The passes that ship with ptxkit, each a short module that reads as an example of
the rewrite API (docs/rewrite.md).

`SHIPPED` maps the name a pass is run by (``ptxkit rewrite --pass NAME``,
``PTXKIT_PASSES``, the Triton hook) to its ``module:function``.

>>> sorted(SHIPPED)
['count', 'report', 'strip', 'strip-fences', 'timeline']
"""

from __future__ import annotations

SHIPPED = {
    "strip-fences": "ptxkit.rewrite.passes.strip:strip_fences",
    "strip": "ptxkit.rewrite.passes.strip:strip",
    "report": "ptxkit.rewrite.passes.report:report",
    "timeline": "ptxkit.instrument.timeline:timeline",
    "count": "ptxkit.instrument.count:count",
}
