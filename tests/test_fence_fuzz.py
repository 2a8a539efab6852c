"""The fence pass on mutated kernels: it either fences them or rejects them as bad input
at a line and column, never fails otherwise, and what it fences it finds nothing more
to fence in (the pass's own fixpoint).

Mutations of the fence samples, line by line: drop, duplicate or swap instructions, put
a synchronization or shared-memory instruction in place of one, drop an operand, or read
another register. Each kind of failure this found once is a test of its own module
(tests/test_phases.py, test_thread_sets.py, test_cfg_graph.py)."""

from __future__ import annotations

import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.fence.fence import FenceOptions, fence_module

from conftest import SAMPLES

TEXTS = [path.read_text() for path in sorted((SAMPLES / "fence").glob("*.ptx"))]
INSERTED = ["bar.sync 0;", "bar.arrive 1, 256;", "fence.proxy.async.shared::cta;", "exit;", "ret;",
            "mbarrier.arrive.shared::cta.b64 _, [%r1];", "st.shared.u32 [%r1], %r2;", "ld.shared.u32 %r2, [%r1];",
            "mbarrier.init.shared::cta.b64 [%r1], 1;", "wgmma.fence.sync.aligned;", "@%p1 bra $L__BB0_1;",
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r2, %r3}], "
            "[%r4];"]
REGISTER = re.compile(r"%[a-z]+\d+")
OPERANDS = re.compile(r",(?![^\[{]*[\]}])")  # the commas between operands, not inside [ ] or { }


@st.composite
def mutated(draw) -> str:
    lines = draw(st.sampled_from(TEXTS)).splitlines(keepends=True)
    body = [i for i, line in enumerate(lines) if line.startswith("\t") and line.rstrip().endswith(";")]
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.sampled_from(body))
        kind = draw(st.sampled_from(["drop", "duplicate", "swap", "insert", "operand", "register"]))
        if kind == "drop":
            lines[at] = ""
        elif kind == "duplicate":
            lines[at] += lines[draw(st.sampled_from(body))]
        elif kind == "swap":
            other = draw(st.sampled_from(body))
            lines[at], lines[other] = lines[other], lines[at]
        elif kind == "insert":
            lines[at] = "\t" + draw(st.sampled_from(INSERTED)) + "\n"
        elif kind == "operand":
            opcode, _, rest = lines[at].rstrip().rstrip(";").partition(" ")
            operands = OPERANDS.split(rest) if rest else []
            if len(operands) > 1:
                del operands[draw(st.integers(0, len(operands) - 1))]
                lines[at] = f"{opcode} {','.join(operands)};\n"
        else:
            names = REGISTER.findall(lines[at])
            others = REGISTER.findall(lines[draw(st.sampled_from(body))])
            if names and others:
                lines[at] = lines[at].replace(draw(st.sampled_from(names)), draw(st.sampled_from(others)), 1)
    return "".join(lines)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated(), st.sampled_from([FenceOptions(), FenceOptions(placement="inline"), FenceOptions(fence_side="writer"),
                                   FenceOptions(war=False)]))
def test_a_mutated_kernel_is_fenced_or_rejected_at_a_place(text, options):
    module = ptxkit.parse(text, "fuzz.ptx")
    try:
        report = fence_module(module, options)
    except ptxkit.PtxSyntaxError as err:
        assert err.filename == "fuzz.ptx" and 1 <= err.line <= text.count("\n") + 1 and err.column >= 1
        return
    again = fence_module(ptxkit.parse(str(module), "fuzz.ptx"), options, rewrite=False)
    assert not again.missing, (report.fences, again.missing)
