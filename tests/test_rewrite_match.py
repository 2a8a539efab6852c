"""ptxkit.rewrite.match: matchers over the samples, and the one value-analysis question."""

from __future__ import annotations

import re

import pytest

import ptxkit
from ptxkit.rewrite import match
from ptxkit.rewrite.match import find

from conftest import SAMPLES


def opcodes(path: str, matcher) -> list[str]:
    module = ptxkit.parse_file(SAMPLES / path)
    return [i.opcode for f in module.functions if not f.is_declaration for i in find(f, matcher)]


def test_opcode_patterns_prefix_glob_and_regex():
    found = opcodes("hopper/ws_mbarrier.ptx", match.opcode("mbarrier"))
    assert found and all(name.startswith("mbarrier.") for name in found)
    assert opcodes("hopper/ws_mbarrier.ptx", match.opcode("mbarrier.try_wait*")) == \
        opcodes("hopper/ws_mbarrier.ptx", match.opcode(re.compile(r"mbarrier\.try_wait.*")))
    assert not opcodes("hopper/ws_mbarrier.ptx", match.opcode("mbarrier.try"))  # a prefix stops at a dot


def test_facts_on_warp_specialized_kernels():
    waits = opcodes("hopper/ws_mbarrier.ptx", match.mbarrier_wait())
    assert waits and all("wait" in name for name in waits)
    assert opcodes("hopper/ws_named_barrier.ptx", match.barrier_wait())
    asyncs = opcodes("hopper/tma_wgmma_mainloop.ptx", match.async_proxy())
    assert any(name.startswith("wgmma.mma_async") for name in asyncs)
    assert any(name.startswith("cp.async.bulk.tensor") for name in asyncs)
    assert not any(name.startswith(("wgmma.fence", "wgmma.commit", "wgmma.wait")) for name in asyncs)


def test_shared_access_asks_the_value_analysis_only_for_generic_addresses():
    assert opcodes("fence/x13_generic_store_through_cvta_shared.ptx", match.shared_access()) == ["st.u32"]
    assert opcodes("fence/x13_generic_store_through_cvta_shared.ptx", match.shared_access(resolve=False)) == []
    assert opcodes("fence/x14_generic_store_unknown_pointer.ptx", match.shared_access()) == []
    assert opcodes("fence/x14b_generic_store_pointer_may_be_shared.ptx", match.shared_access()) == ["st.u32"]
    stores = opcodes("fence/06b_tma_store_after_shared_store.ptx", match.shared_access() & match.opcode("st"))
    assert stores == ["st.shared.b16"]


def test_combinators_and_operands():
    module = ptxkit.parse_file(SAMPLES / "toolchain/vector_add.ptx")
    kernel = module.function("vector_add")
    loads = find(kernel, match.opcode("ld.global") & match.operand(1, "memory", "%rd8"))
    assert [i.line for i in loads] == [37]
    assert [i.opcode for i in find(kernel, match.guarded("%p1"))] == ["bra"]
    assert [i.opcode for i in find(kernel, match.writes("%r4"))] == ["mad.lo.s32"]
    assert [i.opcode for i in find(kernel, match.reads("%r4"))] == ["setp.ge.u32", "mul.wide.u32"]
    assert len(find(kernel, ~match.everything())) == 0
    assert len(find(kernel, match.space("param") | match.terminator())) == 6


def test_loop_headers_and_source_lines():
    module = ptxkit.parse_file(SAMPLES / "fence/15_hoist_out_of_while_loop.ptx")
    kernel = module.functions[0]
    headers = find(kernel, match.loop_header())
    assert len(headers) == 1
    triton = ptxkit.parse_file(SAMPLES / "triton/layernorm_1024.ptx")
    lines = find(triton.functions[0], match.source_line(80, file=1))
    assert lines and all(40 < i.line < 100 for i in lines)  # under the .loc 1 80 … lines 69-92
    assert not find(triton.functions[0], match.source_line(80, file=2))


@pytest.mark.parametrize("matcher, shown", [
    (match.opcode("st") & ~match.space("shared"), "match.opcode('st') & ~match.space('shared')"),
    (match.guarded("%p1", negated=True) | match.line(range(3, 5)),
     "match.guarded('%p1', negated=True) | match.line(range(3, 5))"),
])
def test_matchers_say_what_they_are(matcher, shown):
    assert repr(matcher) == shown
