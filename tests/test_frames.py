"""-G stack frames: which frames are sealed, the cells accesses address, and the rounds'
assumption (cfg/values/frames.py)."""

from __future__ import annotations

import ptxkit
from ptxkit.cfg.flow.graph import flow_graph
from ptxkit.cfg.values.frames import StackModel, observed, stack_frames
from ptxkit.cfg.values.registers import analyse_registers

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n"
FRAME = (".local .align 8 .b8 __local_depot0[64];\n.reg .b64 %SP;\n.reg .b64 %SPL;\n.reg .b64 %rd<9>;\n"
         "\tmov.u64 %SPL, __local_depot0;\n\tcvta.local.u64 %SP, %SPL;\n")


def flow_of(body: str):
    return flow_graph(ptxkit.parse(f"{HEAD}.visible .entry k()\n{{\n{FRAME}{body}\tret;\n}}\n").function("k"))


def test_a_frame_is_sealed_until_its_address_leaves_its_own_operands():
    assert stack_frames(flow_of("\tst.u64 [%SP+8], %rd1;\n\tld.u64 %rd2, [%SPL+8];\n")).sealed == {"__local_depot0"}
    for escape in ("\tadd.u64 %rd3, %SP, 8;\n", "\tst.u64 [%rd1], %SP;\n", "\tmov.u64 %rd3, __local_depot0;\n"):
        assert stack_frames(flow_of("\tst.u64 [%SP+8], %rd1;\n" + escape)).sealed == frozenset(), escape


def test_a_kernel_without_a_frame_has_nothing_to_follow():
    flow = flow_graph(ptxkit.parse(f"{HEAD}.visible .entry k()\n{{\n.reg .b64 %rd<3>;\n\tst.u64 [%rd1], %rd2;\n"
                                   "\tret;\n}\n").function("k"))
    assert stack_frames(flow) is None


def model_of(body: str, start: bool) -> tuple:
    """The model the values of `body` show (or, with `start`, the first assumption), with
    the accesses' lines for reading it."""
    flow = flow_of(body)
    frames = stack_frames(flow)
    probes = {("stack", i): (a.block, a.position, a.memory) for i, a in enumerate(frames.accesses)}
    line = {(a.block, a.position): flow.blocks[a.block].instructions[a.position].text for a in frames.accesses}
    if start:
        return observed(frames), line
    answers = analyse_registers(flow, probes)
    return observed(frames, answers.values, answers.dead), line


def test_exact_stores_and_loads_name_their_cell():
    body = "\tst.u64 [%SP+8], %rd1;\n\tadd.u64 %rd3, %SP, 8;\n\tld.u64 %rd2, [%rd3];\n\tld.u64 %rd4, [%SP+8];\n"
    whole = (("__local_depot0", 8, 8), 0, 8)
    first, line = model_of(body, True)  # the [%SP+c] operands alone
    assert {line[s]: c for s, c in first.loads.items()} == {"ld.u64 %rd4, [%SP+8];": whole}
    model, _ = model_of(body, False)
    assert {line[s]: c for s, c in model.loads.items()} == {"ld.u64 %rd2, [%rd3];": whole,
                                                             "ld.u64 %rd4, [%SP+8];": whole}
    assert {line[s]: p for s, p in model.exact.items()} == {line[s]: p for s, p in first.exact.items()} == \
        {"st.u64 [%SP+8], %rd1;": (0, 8)}


def test_a_word_set_part_by_part_is_followed_through_its_parts():
    """A -G descriptor: stored whole, then a 16-bit field and a byte set through a pointer
    to it, read back whole and by part. The parts lie inside the word, so every access
    is exact; a store that crosses the word's end is not."""
    body = ("\tst.u64 [%SP+8], 0;\n\tadd.u64 %rd3, %SP, 8;\n\tst.u16 [%rd3+2], 64;\n\tst.u8 [%rd3+7], 64;\n"
            "\tld.u16 %rs1, [%rd3+2];\n\tld.u64 %rd4, [%SP+8];\n")
    model, line = model_of(body.replace("%rs1", "%rd5"), False)
    word = ("__local_depot0", 8, 8)
    assert {line[s]: p for s, p in model.loads.items()} == {"ld.u16 %rd5, [%rd3+2];": (word, 2, 2),
                                                             "ld.u64 %rd4, [%SP+8];": (word, 0, 8)}
    assert sorted(model.exact.values()) == [(0, 8), (2, 2), (7, 1)] and not model.unknown
    crossing, _ = model_of(body.replace("%rs1", "%rd5") + "\tst.u32 [%SP+14], 1;\n", False)
    assert not crossing.loads and not crossing.exact


def test_a_store_through_an_unknown_address_is_assumed_away_only_at_the_start():
    body = "\tst.u64 [%SP+8], %rd1;\n\tadd.u64 %rd3, %SP, 16;\n\tld.global.u64 %rd4, [%rd5];\n\tst.u32 [%rd4], 1;\n"
    first, line = model_of(body, True)
    later, _ = model_of(body, False)
    unknown = next(s for s in line if line[s] == "st.u32 [%rd4], 1;")
    assert unknown not in first.stores
    assert later.stores[unknown] == {("__local_depot0", 8, 8)} and ("__local_depot0", 8, 8) in later.unknown
    assert not first.holds_for(later) and first.advance(later).holds_for(later)


def test_stores_that_write_the_same_words_share_one_set():
    """A -G build's stores through unknown pointers each write every word of the frames
    that are not sealed: one set for all of them (hundreds of stores, each of hundreds of
    words), in the model the values show and in the next one the rounds take."""
    body = ("\tst.u64 [%SP+8], %rd1;\n\tst.u64 [%SP+16], %rd1;\n\tadd.u64 %rd3, %SP, 16;\n"
            "\tld.global.u64 %rd4, [%rd5];\n\tld.global.u64 %rd6, [%rd5+8];\n"
            "\tst.u32 [%rd4], 1;\n\tst.u32 [%rd6], 2;\n\tst.u32 [%rd4+4], 3;\n")
    later, line = model_of(body, False)
    unknown = [later.stores[s] for s in line if line[s].startswith("st.u32")]
    words = {("__local_depot0", 8, 8), ("__local_depot0", 16, 8)}
    assert unknown == [words] * 3 and unknown[0] is unknown[1] is unknown[2]
    first, _ = model_of(body, True)
    step = first.advance(later)
    assert step.stores == later.stores and len({id(w) for w in step.stores.values()}) == 3  # two [%SP+c] stores


def test_a_partly_overlapping_store_is_not_exact():
    model, line = model_of("\tst.u64 [%SP+8], %rd1;\n\tst.u64 [%SP+12], 7;\n\tld.u64 %rd2, [%SP+8];\n", False)
    assert not model.loads and not model.exact and ("__local_depot0", 8, 8) in model.unknown


#: two words of the stack, as cells are written: (region, offset, width)
A, B = ("a", 0, 8), ("b", 0, 8)


def test_loads_are_followed_before_stores_grow():
    load, store = (0, 3), (0, 4)
    model = StackModel({}, {}, {})
    found = StackModel({store: frozenset({A, B})}, {}, {load: (A, 0, 8)})
    step = model.advance(found)
    assert step.loads == {load: (A, 0, 8)} and step.stores == {}
    assert step.advance(found) == found and found.settled(found)
    assert not found.holds_for(StackModel({}, {}, {load: (B, 0, 8)}))  # the load reads elsewhere now
    exact = StackModel({store: frozenset({A})}, {store: (0, 4)}, {})
    assert not exact.holds_for(exact._replace(exact={store: (4, 4)}))  # the store writes another part now


def test_a_load_no_run_reaches_agrees_with_any_model():
    """Under one model a branch condition may rule out the block of a load the model
    follows, and the analysis counts its block dead. No run reaches it while the model
    holds, so it asks nothing: the model still holds and keeps following it."""
    load = (2, 0)
    model = StackModel({}, {}, {load: (A, 0, 8)})
    unreached = StackModel({}, {}, {}, frozenset({load}))
    assert model.holds_for(unreached) and model.settled(unreached) and model.matches(unreached)
    assert model.advance(unreached).loads == model.loads
    assert not model.holds_for(StackModel({}, {}, {}))  # not found for another reason: it does not hold
    body = (".reg .b32 %r<2>;\n.reg .pred %p<2>;\n\tst.u64 [%SP+8], %rd1;\n\tmov.u32 %r1, 5;\n"
            "\tsetp.eq.u32 %p1, %r1, 5;\n\t@%p1 bra L;\n\tcvt.u64.u32 %rd4, %r1;\n\tadd.s64 %rd5, %SP, %rd4;\n"
            "\tld.u64 %rd2, [%rd5];\nL:\n")
    found, line = model_of(body, False)  # the load the branch always skips: no value reaches it
    assert [line[s] for s in found.unreached] == ["ld.u64 %rd2, [%rd5];"] and not found.loads
