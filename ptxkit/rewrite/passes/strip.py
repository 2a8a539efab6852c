"""``strip-fences`` and ``strip --opcode PATTERN``: remove instructions, to test race
detection (strip a kernel's proxy fences, then ``ptxkit fence --check`` must report
the races they closed) and for experiments. Neither is followed by the fence pass
unless asked (``--pass fence``), which would put the fences back.

>>> import ptxkit
>>> m = ptxkit.parse_file("samples/fence/expected/14b_hoist_out_of_loop.ptx")
>>> plan = strip_fences(m)
>>> [edit.node.text for edit in plan.edits()]
['fence.proxy.async.shared::cta;']
"""

from __future__ import annotations

from ptxkit.rewrite import Plan, match


def strip(module, opcode) -> Plan:
    """Remove every instruction whose opcode matches one of the patterns `opcode`
    (a pattern or a list; see `ptxkit.rewrite.match.opcode`).

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/hopper/ws_named_barrier.ptx")
    >>> len(strip(m, opcode="bar.*").edits()) > 0
    True
    """
    patterns = [opcode] if isinstance(opcode, str) else list(opcode)
    matcher = match.opcode(patterns[0])
    for pattern in patterns[1:]:
        matcher = matcher | match.opcode(pattern)
    plan = Plan(module)
    removed = plan.find(matcher)
    for function, instruction in removed:
        function.delete(instruction)
    plan.info["removed"] = [instruction.line for _, instruction in removed]
    return plan


def strip_fences(module) -> Plan:
    """Remove every proxy fence: ``fence.proxy.async*`` and ``fence.mbarrier_init*``."""
    return strip(module, ["fence.proxy.async*", "fence.mbarrier_init*"])


strip.fence_after = False
strip_fences.fence_after = False
