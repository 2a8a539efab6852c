"""The fence log (``PTXKIT_FENCE_LOG``): one JSON line per PTX input that the ptxas
wrapper or the Triton hook saw: the file, the kernels in it (``.entry`` names), the mode,
the fences it added (or found missing) with their function, place and reason, and why
the pass was skipped or could not run.

>>> import io, json
>>> out = io.StringIO()
>>> write_entry({"file": "k.ptx", "mode": "check", "fences": [], "skipped": None}, out)
>>> json.loads(out.getvalue())["mode"]
'check'
"""

from __future__ import annotations

import os
import sys


def describe(site) -> dict:
    """A fence of the pass's report as plain data: it goes `where` ("before"/"after") the
    statement at `line`:`column` of the input; `reason` names its first pair, `pairs`
    lists every (access, async op) pair it orders (as in ``ptxkit fence --format json``).

    >>> from ptxkit.cfg.fence.fence import fence_text
    >>> text = open("samples/fence/06b_tma_store_after_shared_store.ptx").read()
    >>> site = fence_text(text, rewrite=False)[1].fences[0]
    >>> describe(site)["variant"], describe(site)["line"]
    ('fence.proxy.async.shared::cta', 33)
    """
    return {
        "function": site.function,
        "line": site.line,
        "column": site.column,
        "where": site.where,
        "hazard": site.hazard,
        "variant": site.variant,
        "placement": site.placement,
        "reason": site.reason(),
        "pairs": [pair.to_json() for pair in site.pairs],
    }


def pipeline_fences(result) -> tuple[list[dict], str | None]:
    """The fences the fence pass of a `ptxkit.rewrite.run` result placed or asks for,
    each `describe`d with its line in the pipeline's input (the passes before it may have
    moved it), and why the pass skipped the module (None when it ran or was left out).

    >>> from ptxkit.rewrite.pipeline import run
    >>> result = run(open("samples/fence/06b_tma_store_after_shared_store.ptx").read(), [])
    >>> fences, skipped = pipeline_fences(result)
    >>> [fence["line"] for fence in fences], skipped
    ([33], None)
    """
    from ptxkit.rewrite.pipeline import FENCE

    if result.fence is None:
        return [], None
    stage = [s.name for s in result.stages].index(FENCE)
    fences = []
    for site in result.fence.fences:
        fence = describe(site)
        fence["line"] = result.input_line(stage, fence["line"]) if fence["line"] else fence["line"]
        fences.append(fence)
    return fences, str(result.fence.skipped) if result.fence.skipped else None


def entry_names(text: str) -> list[str]:
    """The kernels (``.entry`` names) a PTX text defines or declares, in order: what the
    log names beside a file that may be a compiler's temporary one (Triton's ptxas input).

    >>> entry_names(".visible .entry matmul_kernel(\\n.param .u64 a)\\n{\\n}\\n.entry  $k2()")
    ['matmul_kernel', '$k2']
    """
    import re

    return re.findall(r"\.entry\s+([A-Za-z_$%][\w$]*)", text)


def write_entry(entry: dict, stream=None) -> None:
    """Append `entry` as one JSON line to `stream`, or to the file ``$PTXKIT_FENCE_LOG``
    names (``-``: standard error); nothing when the variable is unset.

    >>> write_entry({"file": "k.ptx"})  # PTXKIT_FENCE_LOG unset: nothing happens
    """
    target = os.environ.get("PTXKIT_FENCE_LOG")
    if stream is None and not target:
        return
    import json

    line = json.dumps(entry) + "\n"
    if stream is not None:
        stream.write(line)
        return
    if target == "-":
        sys.stderr.write(line)
        return
    with open(target, "a", encoding="utf-8") as handle:
        handle.write(line)
