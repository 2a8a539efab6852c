"""ptxkit.cfg.values.divergence: predicates on the thread index, and where thread splits meet."""

from __future__ import annotations

import re

import pytest

import ptxkit
from conftest import SAMPLES
from ptxkit.cfg.flow.inline import inlined_graph
import ptxkit.cfg.values.divergence as divergence
from ptxkit.cfg.values.divergence import (
    _exposed_reads,
    _local_name,
    _reads_first,
    cta_uniform,
    deciding_branches,
    definitions,
    qualified,
    thread_meets,
    thread_only,
)

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u32 n)\n{\n"
REGS = ".reg .b32 %r<9>;\n.reg .pred %p<4>;\n"


def flow_of(body: str):
    return inlined_graph(ptxkit.parse(HEAD + REGS + body + "}\n").function("k"))


def names(flow, blocks) -> list[str]:
    return sorted(flow.blocks[b].name for b in blocks)


@pytest.mark.parametrize("body, expected", [
    ("\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 31;\n\tsetp.eq.s32 %p1, %r2, 0;\n", True),
    ("\tmov.u32 %r1, %laneid;\n\tsetp.ne.u32 %p1, %r1, 0;\n", True),
    ("\tmov.u32 %r1, %tid.x;\n\tshr.u32 %r2, %r1, 7;\n\tadd.s32 %r3, %r2, 4;\n\tsetp.eq.s32 %p1, %r3, 5;\n", True),
    # a kernel parameter, a register written twice, a guarded write, no thread index at all
    ("\tld.param.u32 %r1, [n];\n\tsetp.ne.u32 %p1, %r1, 0;\n", False),
    ("\tmov.u32 %r1, %tid.x;\n\tmov.u32 %r1, 0;\n\tsetp.ne.u32 %p1, %r1, 0;\n", False),
    ("\tmov.u32 %r1, %tid.x;\n\t@%p2 mov.u32 %r2, %r1;\n\tsetp.ne.u32 %p1, %r2, 0;\n", False),
    ("\tmov.u32 %r1, 3;\n\tsetp.ne.u32 %p1, %r1, 0;\n", False),
])
def test_thread_only(body, expected):
    flow = flow_of(body + "\tret;\n")
    assert thread_only("%p1", definitions(flow), flow) is expected


LANE0 = "\tmov.u32 %r1, %tid.x;\n\tand.b32 %r2, %r1, 31;\n\tsetp.ne.s32 %p1, %r2, 0;\n"


def test_a_lane_zero_split_meets_after_its_body():
    flow = flow_of(LANE0 + "\t@%p1 bra SKIP;\n\tfence.proxy.async;\nSKIP:\n\tret;\n")
    (meet, ends), = thread_meets(flow).items()
    assert flow.blocks[meet].name == "SKIP" and len(ends) == 2


def test_nested_thread_splits_meet_where_all_paths_do():
    body = (LANE0 + "\tshr.u32 %r3, %r1, 5;\n\tsetp.ne.s32 %p2, %r3, 0;\n\t@%p1 bra SKIP;\n\t@%p2 bra SKIP;\n"
            "\tfence.proxy.async;\nSKIP:\n\tret;\n")
    flow = flow_of(body)
    meets = thread_meets(flow)
    assert names(flow, meets) == ["SKIP"]
    assert len(next(iter(meets.values()))) == 3  # both skips and the fence


@pytest.mark.parametrize("inside", [
    "\tld.param.u32 %r4, [n];\n\tsetp.eq.u32 %p3, %r4, 0;\n\t@%p3 bra SKIP;\n",  # a data-dependent branch
    "\tret;\n",  # an exit
    "LOOP:\n\tld.param.u32 %r4, [n];\n\tsetp.eq.u32 %p3, %r4, 0;\n\t@%p3 bra LOOP;\n",  # a loop
])
def test_a_split_with_other_control_flow_inside_does_not_count(inside):
    flow = flow_of(LANE0 + "\t@%p1 bra SKIP;\n" + inside + "\tfence.proxy.async;\nSKIP:\n\tret;\n")
    assert thread_meets(flow) == {}


def test_a_data_dependent_split_does_not_count():
    flow = flow_of("\tld.param.u32 %r1, [n];\n\tsetp.ne.u32 %p1, %r1, 0;\n\t@%p1 bra SKIP;\n"
                   "\tfence.proxy.async;\nSKIP:\n\tret;\n")
    assert thread_meets(flow) == {}


@pytest.mark.parametrize("body, expected", [
    ("\tld.param.u32 %r1, [n];\n\tmov.u32 %r2, %ctaid.x;\n\tadd.s32 %r3, %r1, %r2;\n"
     "\tsetp.lt.u32 %p1, %r3, 9;\n", True),
    # a counter: defined twice, from itself and a constant
    ("\tmov.u32 %r1, 0;\nL:\n\tadd.s32 %r1, %r1, 1;\n\tsetp.lt.u32 %p1, %r1, 9;\n\t@%p1 bra L;\n", True),
    ("\tmov.u32 %r1, %tid.x;\n\tsetp.lt.u32 %p1, %r1, 9;\n", False),
    ("\tld.shared.u32 %r1, [%r2];\n\tsetp.lt.u32 %p1, %r1, 9;\n", False),  # memory may differ by thread
    # -G: a field of the kernel's parameter read through a generic pointer (cvta.param)
    (".reg .b64 %rd<4>;\n\tmov.b64 %rd1, n;\n\tcvta.param.u64 %rd2, %rd1;\n\tadd.s64 %rd3, %rd2, 0;\n"
     "\tld.u32 %r1, [%rd3];\n\tsetp.lt.u32 %p1, %r1, 9;\n", True),
    (".reg .b64 %rd<4>;\n\tmov.b64 %rd1, n;\n\tcvta.param.u64 %rd2, %rd1;\n\tld.global.u32 %r1, [%rd2];\n"
     "\tsetp.lt.u32 %p1, %r1, 9;\n", False),
    (".reg .b64 %rd<4>;\n\tcvta.param.u64 %rd2, %rd1;\n\tld.u32 %r1, [%rd2];\n\tsetp.lt.u32 %p1, %r1, 9;\n",
     False),  # %rd1 is no parameter's address
    # read-only global data (ld.global.nc) at an address every thread computes alike, unpacked
    (".reg .b64 %rd<4>;\n\tld.param.u32 %r1, [n];\n\tcvt.u64.u32 %rd2, %r1;\n\tmov.u32 %r2, %ctaid.x;\n"
     "\tmad.wide.u32 %rd1, %r2, 8, %rd2;\n"
     "\tld.global.nc.u64 %rd3, [%rd1+8];\n\tmov.b64 {%r3, %r4}, %rd3;\n\tsetp.lt.u32 %p1, %r4, %r1;\n", True),
    (".reg .b64 %rd<4>;\n\tld.global.nc.u32 %r1, [%rd1];\n\tsetp.lt.u32 %p1, %r1, 9;\n", False),  # %rd1: unset
    (".reg .b64 %rd<4>;\n\tmov.u32 %r2, %tid.x;\n\tmul.wide.u32 %rd1, %r2, 4;\n\tld.global.nc.u32 %r1, [%rd1];\n"
     "\tsetp.lt.u32 %p1, %r1, 9;\n", False),  # each thread its own address
    (".reg .b64 %rd<4>;\n\tmov.u32 %r2, %ctaid.x;\n\tmul.wide.u32 %rd1, %r2, 4;\n\tld.global.u32 %r1, [%rd1];\n"
     "\tsetp.lt.u32 %p1, %r1, 9;\n", False),  # coherent memory another thread may write meanwhile
])
def test_cta_uniform(body, expected):
    flow = flow_of(body + "\tret;\n")
    assert cta_uniform("%p1", definitions(flow), flow) is expected


def test_a_register_of_an_inlined_function_is_not_the_callers():
    """-G builds reuse register names in every function: the callee's %r1 (the thread
    index) does not make the kernel's %r1 (a parameter) differ by thread."""
    text = (".version 8.0\n.target sm_90a\n.address_size 64\n"
            ".func f()\n{\n.reg .b32 %r<2>;\n\tmov.u32 %r1, %tid.x;\n\tret;\n}\n" + HEAD + REGS
            + "\tld.param.u32 %r1, [n];\n\tcall.uni f, ();\n\tsetp.lt.u32 %p1, %r1, 9;\n\tret;\n}\n")
    flow = inlined_graph(ptxkit.parse(text).function("k"))
    defined = definitions(flow)
    assert cta_uniform("%p1", defined, flow)
    assert len(defined["%r1"]) == 1 and sum(key.endswith(":%r1") for key in defined) == 1


SPLIT = "\tmov.u32 %r3, %tid.x;\n\tsetp.lt.u32 %p0, %r3, 64;\n"
PARAM_SPLIT = "\tld.param.u32 %r3, [n];\n\tsetp.lt.u32 %p0, %r3, 64;\n"
TWO_SIDES = "\t@%p0 bra A;\n\tmov.u32 %r1, 1;\n\tbra.uni J;\nA:\n\tmov.u32 %r1, 2;\nJ:\n"


@pytest.mark.parametrize("body, expected", [
    # which write reaches the read depends on the thread index: different values by thread
    (SPLIT + TWO_SIDES + "\tsetp.lt.u32 %p1, %r1, 2;\n", False),
    (PARAM_SPLIT + TWO_SIDES + "\tsetp.lt.u32 %p1, %r1, 2;\n", True),  # the whole CTA goes one way
    # the split decides nothing the threads after it read: each side reads its own write
    (SPLIT + "\t@%p0 bra A;\n\tmov.u32 %r1, 1;\n\tsetp.lt.u32 %p1, %r1, 9;\n\tbra.uni J;\nA:\n\tmov.u32 %r1, 2;\n"
     "\tsetp.lt.u32 %p1, %r1, 9;\nJ:\n", True),
    # a count of the rounds that took the thread's side: per thread
    (SPLIT + "\tmov.u32 %r1, 0;\n\tmov.u32 %r2, 0;\nROUND:\n\t@%p0 bra SKIP;\n\tadd.s32 %r1, %r1, 1;\nSKIP:\n"
     "\tbar.sync 0;\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p2, %r2, 8;\n\t@%p2 bra ROUND;\n"
     "\tsetp.lt.u32 %p1, %r1, 3;\n", False),
    # a counter read after a loop that each thread leaves in its own round
    (SPLIT + "\tmov.u32 %r1, 0;\nL:\n\tadd.s32 %r1, %r1, 1;\n\tsetp.lt.u32 %p2, %r1, %r3;\n\t@%p2 bra L;\n"
     "\tsetp.lt.u32 %p1, %r1, 9;\n", False),
    # a wait loop in a counted loop: every thread leaves it, and the count stays the CTA's
    ("\tmov.u32 %r1, 0;\nL:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;\n\t@!%p2 bra L2;\n"
     "\tadd.s32 %r1, %r1, 1;\n\tsetp.lt.u32 %p1, %r1, 9;\n\t@%p1 bra L;\n\tbra.uni DONE;\nL2:\n"
     "\tmbarrier.try_wait.parity.shared::cta.b64 %p2, [%r4], 0;\n\t@!%p2 bra L2;\n\tbra.uni L;\nDONE:\n", True),
    # a split in a round whose sides meet again before the loop's test: the same round on
    # both sides, the uniform test decides who leaves (Triton's elected MMA issue)
    (SPLIT + "\tmov.u32 %r1, 0;\nL:\n\tbar.sync 0;\nW:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p3, [%r4], 0;\n\t@!%p3 bra W;\n"
     "\tadd.s32 %r1, %r1, 1;\n\t@%p0 bra S;\n\tadd.s32 %r5, %r1, 4;\nS:\n"
     "\tbar.sync 0;\n\tsetp.lt.u32 %p2, %r1, 8;\n\t@%p2 bra L;\n\tsetp.lt.u32 %p1, %r1, 9;\n", True),
    # ... but one side going round again before the sides meet: a round more for those threads
    (SPLIT + "\tmov.u32 %r1, 0;\nL:\n\tadd.s32 %r1, %r1, 1;\n\t@%p0 bra L;\n"
     "\tbar.sync 0;\n\tsetp.lt.u32 %p2, %r1, 8;\n\t@%p2 bra L;\n\tsetp.lt.u32 %p1, %r1, 9;\n", False),
])
def test_cta_uniform_sees_which_write_a_thread_reads(body, expected):
    flow = flow_of(body + "\tret;\n")
    assert cta_uniform("%p1", definitions(flow), flow) is expected


def _every_register(flow) -> set[str]:
    """Every register a block of `flow` names, qualified as that block reads it."""
    found = set()
    for block in flow.blocks:
        for instruction in block.instructions:
            for token in re.findall(r"%[\w$]+(?:\.[xyzw])?|\b[A-Z]\w*\b", instruction.text):
                found.add(qualified(flow, block.index, token))
    return found


def _exposed_by_every_block(flow, register: str) -> set[int]:
    """`_exposed_reads` the slow way: `_reads_first` asked of every block, no text looked at."""
    found = set()
    for block in flow.blocks:
        name = _local_name(register, block.context.prefix if block.context is not None else "")
        if name is not None and _reads_first(flow, block.index, name):
            found.add(block.index)
    return found


INDEXED = (HEAD + ".reg .b32 %r<12>;\n.reg .v2 .b32 %v<2>;\n.reg .b64 %rd<3>;\n.reg .pred %p<2>;\n"
           "\tmov.u32 %r11, %tid.x;\n\tmov.b32 %v1.x, %r11;\nL:\n\tadd.s32 %r11, %r1, %v1.x;\n"
           "\tld.shared.u32 %r10, [%rd1+4];\n\t{\n\t.reg .pred P1;\n\tsetp.ne.u32 P1, %r10, 0;\n"
           "\t@P1 add.s32 %r2, %r2, 1;\n\t}\n\tsetp.lt.u32 %p1, %r11, 9;\n\t@%p1 bra.uni L;\n\tret;\n}\n")


def _check_exposed_reads(module) -> int:
    """`_exposed_reads` against `_exposed_by_every_block` for every register of every
    function of `module`; how many registers some block reads first."""
    exposed = 0
    for function in module.functions:
        if function.body is not None:
            flow = inlined_graph(function)
            for register in sorted(_every_register(flow)):
                assert _exposed_reads(flow, register) == _exposed_by_every_block(flow, register), register
                exposed += bool(_exposed_reads(flow, register))
    return exposed


def test_exposed_reads_finds_the_blocks_by_whole_names():
    """``%r1`` is not ``%r11``; ``%v1.x`` and ``[%rd1+4]`` are found under their ``%``
    name; the inline-assembly predicate ``P1`` is looked for in the blocks' texts."""
    flow = inlined_graph(ptxkit.parse(INDEXED).function("k"))
    assert {register: names(flow, _exposed_reads(flow, register))
            for register in ("%r1", "%r2", "%r10", "%r11", "%v1.x", "%rd1")} == {
        "%r1": ["L"], "%r2": ["L"], "%r10": [], "%r11": [], "%v1.x": ["L"], "%rd1": ["L"]}
    assert _check_exposed_reads(ptxkit.parse(INDEXED)) >= 4


def test_exposed_reads_finds_every_block_that_reads_first():
    """On every fence sample, the blocks found through the index of `%` names are those
    where `_reads_first` holds, asked of every block: the index leaves none out."""
    assert sum(_check_exposed_reads(ptxkit.parse(sample.read_text()))
               for sample in sorted((SAMPLES / "fence").glob("*.ptx"))) > 100


def _deciding_everywhere(module) -> dict[tuple[str, str], frozenset[int]]:
    """`deciding_branches` of every register of every function of `module`."""
    found = {}
    for function in module.functions:
        if function.body is not None:
            flow = inlined_graph(function)
            for register, sites in sorted(definitions(flow).items()):
                found[(function.name, register)] = deciding_branches(flow, register, sites)
    return found


@pytest.mark.pure  # compiled code calls `_between_sides` directly, past the patch
def test_a_branch_with_no_write_before_its_sides_meet_decides_nothing(monkeypatch):
    """`_sides_differ` answers without walking where no write of the register lies
    between a branch and its post-dominator (`_between_sides`): on every fence sample,
    the branches that decide each register are those found when every block counts as
    lying between (32 registers with deciding branches, 52 branches in all; some 200
    branches asked for their regions)."""
    modules = [ptxkit.parse(sample.read_text()) for sample in sorted((SAMPLES / "fence").glob("*.ptx"))]
    regions = divergence._between_sides
    short = []
    monkeypatch.setattr(divergence, "_between_sides",
                        lambda flow, branch, meet: short.append(regions(flow, branch, meet)) or short[-1])
    found = [_deciding_everywhere(module) for module in modules]
    monkeypatch.setattr(divergence, "_between_sides", lambda flow, branch, meet: (1 << len(flow.blocks)) - 1)
    assert found == [_deciding_everywhere(module) for module in modules]
    assert sum(bool(branches) for found in found for branches in found.values()) >= 30 and len(short) >= 200
