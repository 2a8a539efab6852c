"""ptxkit.cfg.sync.phases: named-barrier operations that cannot meet in one phase."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.flow.inline import inlined_graph
from ptxkit.cfg.sync.events import EventOptions, Kind, classify
from ptxkit.cfg.sync.locations import SHARED
from ptxkit.cfg.sync.phases import separate_phases
from ptxkit.isa import SyncObject

HEAD = ".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u32 n)\n{\n.reg .b32 %r<4>;\n.reg .pred %p<2>;\n"


def syncs(body: str):
    flow = inlined_graph(ptxkit.parse(HEAD + body + "\tret;\n}\n").function("k"))
    events = classify(flow, EventOptions(SHARED)).by_block
    found = [e for block in events for e in block if e.kind in (Kind.ARRIVE, Kind.ARRIVE_WAIT)]
    return separate_phases(flow, events, lambda a, b: a[1] is None or b[1] is None or bool(a[1] & b[1])), found


def test_the_prologue_barrier_does_not_meet_the_epilogue_one():
    pairs, (prologue, epilogue) = syncs("\tbar.sync 0;\n\tld.param.u32 %r1, [n];\n\tbar.sync 0;\n")
    assert pairs == {(id(prologue), id(epilogue)), (id(epilogue), id(prologue))}


def test_other_barriers_and_loops_keep_their_pairs():
    pairs, _ = syncs("\tbar.sync 0;\n\tbar.sync 1;\n")
    assert pairs == set()  # different barriers: nothing to separate
    pairs, _ = syncs("\tmov.u32 %r1, %tid.x;\nLOOP:\n\tbar.sync 0;\n\tbar.sync 0;\n\tadd.u32 %r1, %r1, 1;\n"
                     "\tsetp.lt.u32 %p1, %r1, 32;\n\t@%p1 bra LOOP;\n")
    assert pairs == set()  # each thread goes round its own number of times: no phase is certain


def test_a_barrier_after_a_branch_is_first_only_if_nothing_before_it_syncs():
    branch = "\tld.param.u32 %r1, [n];\n\tsetp.ne.u32 %p1, %r1, 0;\n\t@%p1 bra JOIN;\n"
    pairs, _ = syncs(branch + "\tbar.arrive 0, 64;\nJOIN:\n\tbar.sync 0;\n\tbar.sync 0;\n")
    assert pairs == set()  # some threads may have arrived once already
    pairs, (first, later) = syncs(branch + "JOIN:\n\tbar.sync 0;\n\tbar.sync 0;\n")
    assert pairs == {(id(first), id(later)), (id(later), id(first))}


LOOP = ("\tld.param.u32 %r1, [n];\n\tmov.u32 %r2, 0;\nLOOP:\n\tbar.sync 1;\n\tadd.s32 %r2, %r2, 1;\n"
        "\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra LOOP;\n\tbar.sync 1;\n")


def test_a_loop_every_thread_runs_alike_keeps_its_phases_apart_from_the_code_after_it():
    pairs, (inside, after) = syncs(LOOP)
    assert pairs == {(id(inside), id(after)), (id(after), id(inside))}


def test_a_loop_bound_read_from_read_only_memory_keeps_its_phases_apart():
    """The bound loaded with ``ld.global.nc`` at an address every thread computes alike
    (a scheduler's metadata, FlashMLA's sm100 decode): every thread reads one value and
    runs the loop as often; with a coherent ``ld.global`` another thread may change the
    value between the loads, and nothing is kept apart."""
    read_only = LOOP.replace("\tld.param.u32 %r1, [n];\n", ".reg .b64 %rd<3>;\n\tld.param.u32 %r0, [n];\n"
                             "\tcvt.u64.u32 %rd1, %r0;\n\tld.global.nc.u32 %r1, [%rd1+4];\n")
    pairs, (inside, after) = syncs(read_only)
    assert pairs == {(id(inside), id(after)), (id(after), id(inside))}
    pairs, _ = syncs(read_only.replace("ld.global.nc.u32", "ld.global.u32"))
    assert pairs == set()


TWO_IN_A_LOOP = LOOP.replace("LOOP:\n\tbar.sync 1;\n", "LOOP:\n\tbar.sync 1;\n\tbar.sync 1;\n")


def test_two_barriers_every_iteration_runs_in_order_never_meet():
    pairs, (first, second, after) = syncs(TWO_IN_A_LOOP)
    assert {(id(first), id(second)), (id(second), id(first))} <= pairs
    assert (id(first), id(first)) not in pairs  # the same one, an iteration later: the next phase of both


def test_a_third_barrier_the_whole_cta_skips_or_not_keeps_them_apart():
    """A third ``bar.sync`` behind a test of the round (CTA-uniform): every thread runs
    the same ones in each round, so none meets another; behind a test of the thread
    index one thread's third may be another's first of the next round."""
    skip = "\tsetp.eq.u32 %p2, {}, 3;\n\t@%p2 bra SKIP;\n\tbar.sync 1;\nSKIP:\n\tadd.s32 %r2, %r2, 1;\n"
    uniform = TWO_IN_A_LOOP.replace("\tadd.s32 %r2, %r2, 1;\n", skip.format("%r2"))
    pairs, (first, second, third, _) = syncs(uniform)
    assert {(id(first), id(second)), (id(second), id(third)), (id(third), id(first))} <= pairs
    by_thread = TWO_IN_A_LOOP.replace("\tadd.s32 %r2, %r2, 1;\n", "\tmov.u32 %r3, %tid.x;\n" + skip.format("%r3"))
    pairs, (first, second, _, _) = syncs(by_thread)
    assert (id(first), id(second)) not in pairs and (id(second), id(first)) not in pairs


def test_a_loop_whose_count_depends_on_the_thread_does_not():
    pairs, _ = syncs(LOOP.replace("\tld.param.u32 %r1, [n];\n", "\tmov.u32 %r1, %tid.x;\n"))
    assert pairs == set()


def test_a_barrier_some_threads_skip_in_some_iterations_does_not():
    """Skipped in the round the whole CTA skips, it still comes before the code after
    the loop in every thread; skipped by some threads only, it may meet it."""
    skip = "LOOP:\n\tsetp.eq.u32 %p2, {}, 3;\n\t@%p2 bra SKIP;\n\tbar.sync 1;\nSKIP:\n"
    pairs, (inside, after) = syncs(LOOP.replace("LOOP:\n\tbar.sync 1;\n", skip.format("%r2")))
    assert pairs == {(id(inside), id(after)), (id(after), id(inside))}
    by_thread = "\tmov.u32 %r3, %tid.x;\n" + LOOP.replace("LOOP:\n\tbar.sync 1;\n", skip.format("%r3"))
    pairs, _ = syncs(by_thread)
    assert pairs == set()


def test_operations_every_path_reaches_after_as_many_others_have_their_own_phase():
    pairs, (one, two, three) = syncs("\tbar.sync 0;\n\tbar.sync 0;\n\tbar.sync 0;\n")
    assert pairs == {(id(a), id(b)) for a in (one, two, three) for b in (one, two, three) if a is not b}


def test_a_guarded_operation_leaves_the_count_open():
    pairs, _ = syncs("\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 bar.sync 0;\n\tbar.sync 0;\n\tbar.sync 0;\n")
    assert pairs == set()



#: Warpgroup 0 runs the first loop, warpgroup 1 the second (two ``if``s one after the other).
ROLES_IN_SEQUENCE = (
    "\tld.param.u32 %r1, [n];\n\tmov.u32 %r3, %tid.x;\n\tsetp.lt.u32 %p0, %r3, 128;\n\t@!%p0 bra CONSUMER;\n"
    "\tmov.u32 %r2, 0;\nPRODUCER:\n\tbar.arrive 1, 256;\n\tadd.s32 %r2, %r2, 1;\n"
    "\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra PRODUCER;\n"
    "CONSUMER:\n\t@%p0 bra END;\n"
    "\tmov.u32 %r2, 0;\nLOOP:\n\tbar.sync 1, 256;\n\tadd.s32 %r2, %r2, 1;\n"
    "\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra LOOP;\nEND:\n")


def test_roles_in_sequence_keep_their_pairs():
    """The producer's loop precedes the consumer's in the graph, but no thread runs
    both, so the i-th arrive meets the i-th sync."""
    pairs, found = syncs(ROLES_IN_SEQUENCE)
    assert len(found) == 2 and pairs == set()


def test_an_operation_only_some_threads_run_before_the_loop_keeps_its_pairs():
    """``if (producer) bar.arrive`` before a loop every thread runs: the consumers'
    first iteration can meet it; an operation after the loop that every thread runs
    stays apart from the loop."""
    guarded = ("\tmov.u32 %r3, %tid.x;\n\tsetp.lt.u32 %p0, %r3, 128;\n\t@%p0 bra SKIP;\n"
               "\tbar.arrive 1, 256;\nSKIP:\n")
    pairs, (before, inside, after) = syncs(guarded + LOOP)
    assert (id(before), id(inside)) not in pairs and (id(inside), id(before)) not in pairs
    assert (id(inside), id(after)) in pairs


def test_a_loop_behind_a_uniform_guard_keeps_its_phases_apart_from_the_code_after_it():
    """``if (n > 0) { loop }`` then an operation every thread runs: the guard sends the
    whole CTA one way, so the operation after the loop is run by the threads of the
    loop; with a guard on the thread index it is not."""
    guarded = ("\tld.param.u32 %r1, [n];\n\tsetp.eq.u32 %p0, %r1, 0;\n\t@%p0 bra AFTER;\n\tmov.u32 %r2, 0;\n"
               "LOOP:\n\tbar.sync 1;\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra LOOP;\n"
               "AFTER:\n\tbar.sync 1;\n")
    pairs, (inside, after) = syncs(guarded)
    assert pairs == {(id(inside), id(after)), (id(after), id(inside))}
    by_thread = guarded.replace("\tsetp.eq.u32 %p0, %r1, 0;\n", "\tmov.u32 %r3, %tid.x;\n\tsetp.eq.u32 %p0, %r3, 0;\n")
    pairs, _ = syncs(by_thread)
    assert pairs == set()


def test_operations_on_either_side_of_a_loop_run_alike_have_their_own_phases():
    """Triton's attention: a ``bar.sync`` between two loops and one after the second
    (behind ``if (n > 0)``): every thread passes as many operations in the first loop,
    so the one between has a count and the one after comes later in every thread; when
    each thread goes round the first loop its own number of times, no count is certain."""
    second = ("\tbar.sync 1;\n\tsetp.eq.u32 %p0, %r1, 0;\n\t@%p0 bra AFTER;\n\tmov.u32 %r2, 0;\n"
              "SECOND:\n\tbar.sync 1;\n\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra SECOND;\n"
              "AFTER:\n\tbar.sync 1;\n")
    pairs, (_, _, between, _, last) = syncs(LOOP + second)
    assert (id(between), id(last)) in pairs and (id(last), id(between)) in pairs
    by_thread = LOOP.replace("\tld.param.u32 %r1, [n];\n", "\tmov.u32 %r1, %tid.x;\n")
    pairs, (_, _, between, _, last) = syncs(by_thread + second.replace("%r1", "%r3").replace(
        "\tbar.sync 1;\n\tsetp", "\tbar.sync 1;\n\tld.param.u32 %r3, [n];\n\tsetp", 1))
    assert (id(between), id(last)) not in pairs and (id(last), id(between)) not in pairs


def test_the_two_sides_of_a_branch_the_whole_cta_takes_never_meet():
    """``if (n == 0) { sync } else { sync }``: a CTA runs one side; with the test on the
    thread index one thread's sync meets another's."""
    arms = ("\tsetp.eq.u32 %p0, {}, 0;\n\t@%p0 bra OTHER;\n\tbar.sync 1;\n\tbra.uni END;\n"
            "OTHER:\n\tbar.sync 1;\nEND:\n")
    pairs, (one, other) = syncs("\tld.param.u32 %r1, [n];\n" + arms.format("%r1"))
    assert pairs == {(id(one), id(other)), (id(other), id(one))}
    pairs, _ = syncs("\tmov.u32 %r1, %tid.x;\n" + arms.format("%r1"))
    assert pairs == set()


#: Triton's persistent GEMM: a tile loop syncs before its K loop, in it, and after it
NESTED = ("\tld.param.u32 %r1, [n];\n\tmov.u32 %r2, 0;\nTILE:\n\tbar.sync 1;\n\tmov.u32 %r3, 0;\nK:\n\tbar.sync 1;\n"
          "\tadd.s32 %r3, %r3, 1;\n\tsetp.lt.u32 %p1, %r3, %r1;\n\t@%p1 bra K;\n\tbar.sync 1;\n"
          "\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra TILE;\n")


def test_barriers_in_a_nested_loop_every_thread_runs_alike_keep_apart():
    """Every thread runs the tile loop's syncs and the K loop's the same number of times
    (both loops exit on CTA-wide values), so each phase is one static ``bar.sync`` in
    every thread: the three never meet one another (each meets itself, rounds later)."""
    pairs, (before, inner, after) = syncs(NESTED)
    apart = {(id(a), id(b)) for a in (before, inner, after) for b in (before, inner, after) if a is not b}
    assert pairs == apart


def test_a_nested_loop_whose_count_depends_on_the_thread_keeps_nothing_apart():
    """One thread's extra K round puts its sync after the K loop beside another's sync
    in the K loop."""
    by_thread = NESTED.replace("\tmov.u32 %r3, 0;\nK:\n", "\tmov.u32 %r3, %tid.x;\nK:\n")
    pairs, _ = syncs(by_thread)
    assert pairs == set()


#: one warpgroup's loop tested at its top (``while (i < n)``, as ``-G`` builds keep it)
WHILE_IN_A_ROLE = ("\tmov.u32 %r3, %tid.x;\n\tsetp.ge.u32 %p0, %r3, 128;\n\t@%p0 bra DONE;\n"
                   "\tld.param.u32 %r1, [n];\n\tmov.u32 %r2, 0;\nTEST:\n\tsetp.ge.u32 %p1, %r2, %r1;\n"
                   "\t@%p1 bra AFTER;\n\tbar.sync 4, 128;\n\tadd.s32 %r2, %r2, 1;\n\tbra.uni TEST;\n"
                   "AFTER:\n\tbar.sync 4, 128;\nDONE:\n")


def test_a_loop_tested_at_its_top_keeps_its_phases_apart_from_the_code_after_it():
    """The test's way on into the body says how often the body runs, not which threads:
    the warpgroup that enters the loop runs its ``bar.sync`` in every round and the one
    after it once (ThunderKittens' ``-G`` attention backward); with the test on the
    thread index one thread's last round meets another's sync after the loop."""
    pairs, (inside, after) = syncs(WHILE_IN_A_ROLE)
    assert pairs == {(id(inside), id(after)), (id(after), id(inside))}
    pairs, _ = syncs(WHILE_IN_A_ROLE.replace("\tld.param.u32 %r1, [n];\n", "\tmov.u32 %r1, %tid.x;\n"))
    assert pairs == set()


#: Triton's Hopper warp-specialization loop: each warp reads its partition from shared
#: memory in every round (a test no value shared by the CTA decides), and partition 0 runs
#: its barrier's whole sequence in one visit: a sync, a K loop of CTA-uniform length with
#: a sync in it, then two syncs around its epilogue.
DISPATCH = ("\tld.param.u32 %r1, [n];\n\tmov.u32 %r0, %tid.x;\nROUND:\n{round}\tbar.sync 1;\n"
            "\tld.shared.u32 %r3, [%r0];\n\tsetp.eq.u32 %p1, %r3, 0;\n\t@%p1 bra PART;\n"
            "\tsetp.eq.u32 %p1, %r3, 2;\n\t@%p1 bra DONE;\n\tbra.uni ROUND;\n"
            "PART:\n\tbar.sync 2, 128;\n\tmov.u32 %r2, 0;\nK:\n\tbar.sync 2, 128;\n\tadd.s32 %r2, %r2, 1;\n"
            "\tsetp.lt.u32 %p0, %r2, {bound};\n\t@%p0 bra K;\n\tbar.sync 2, 128;\n{before}\tbar.sync 2, 128;\n"
            "\tbra.uni ROUND;\nDONE:\n")


def dispatch(bound="%r1", before="", round=""):
    return DISPATCH.replace("{bound}", bound).replace("{before}", before).replace("{round}", round)


def test_a_partition_in_a_dispatch_loop_runs_its_sequence_in_every_visit():
    """Visit after visit each thread runs the partition's four syncs outside the K loop in
    order, and the loop as often: the first never meets the last, nor either of them the
    K loop's (docs/fence.md §4.2)."""
    pairs, (_, first, inside, third, last) = syncs(dispatch())
    assert {(id(first), id(last)), (id(last), id(first)), (id(first), id(inside)), (id(inside), id(last)),
            (id(third), id(last))} <= pairs
    assert (id(first), id(first)) not in pairs


def test_a_partition_whose_visits_differ_keeps_its_pairs():
    """A K loop bound read from shared memory, or one the whole CTA shares that grows round
    by round, a K count carried from the previous visit, a sync some threads skip, a way
    out of the partition before its last sync: the visits may run different sequences,
    so no phase inside is certain."""
    carried = "\tmov.u32 %r2, 0;\n" + dispatch().replace("\tmov.u32 %r2, 0;\nK:", "K:")  # K's count runs on
    for body in (dispatch(bound="%r3"), dispatch(round="\tadd.s32 %r1, %r1, 1;\n"), carried,
                 dispatch(before="\t@%p1 bar.sync 2, 128;\n"),
                 dispatch(before="\t@%p1 bra DONE;\n")):
        pairs, found = syncs(body)
        partition = [e for e in found if e.sync[1] == {2}]
        assert (id(partition[0]), id(partition[-1])) not in pairs


def test_a_sync_no_path_reaches_leaves_the_visits_uncounted():
    """A sync on the barrier after an ``exit`` (code no path from the entry reaches): the
    operations have no common dominator, so no visit is counted; before, the search for
    one raised StopIteration (found by mutating samples/fence/h01)."""
    pairs, found = syncs(dispatch().replace("DONE:\n", "DONE:\n\texit;\n\tbar.sync 2, 128;\n"))
    partition = [e for e in found if e.sync[1] == {2}]
    assert len(partition) == 5
    assert (id(partition[0]), id(partition[-2])) not in pairs


#: Random partition bodies for the dispatch loop, kept in step as docs/fence.md §4.2 assumes (every
#: thread runs as many syncs as the others up to each point of the body): a sync; a
#: do-while loop of syncs whose bound is a parameter or the round count; such a loop
#: behind a skip on one of those values; as many syncs on the two sides of a branch on
#: the thread index. A visit's syncs differ from thread to thread only across that
#: branch, and from visit to visit with the round count.
_SOURCES = ("p0", "p1", "round")
_REGISTER = {"p0": "%r10", "p1": "%r11", "round": "%r8"}
_LOOP = st.tuples(st.just("loop"), st.integers(1, 2), st.sampled_from(_SOURCES))
_BODY = st.lists(st.one_of(st.just(("op",)), _LOOP, st.tuples(st.just("skip"), st.sampled_from(_SOURCES), _LOOP),
                           st.integers(1, 2).map(lambda n: ("split", n, n))), min_size=1, max_size=5)
_SYNC = "\tbar.sync 2, 128;\n"


def _body_lines(body: list, sync: str = _SYNC) -> str:
    """The code of `body` (the items of `_BODY`), each operation `sync`."""
    lines, label = [], iter(range(100))

    def loop(ops: int, source: str) -> None:
        name = f"L{next(label)}"
        lines.append(f"\tmov.u32 %r9, 0;\n{name}:\n" + sync * ops +
                     f"\tadd.s32 %r9, %r9, 1;\n\tsetp.lt.u32 %p2, %r9, {_REGISTER[source]};\n\t@%p2 bra {name};\n")

    for item in body:
        if item[0] == "op":
            lines.append(sync)
        elif item[0] == "loop":
            loop(item[1], item[2])
        elif item[0] == "skip":
            name = f"S{next(label)}"
            lines.append(f"\tsetp.eq.u32 %p3, {_REGISTER[item[1]]}, 0;\n\t@%p3 bra {name};\n")
            loop(item[2][1], item[2][2])
            lines.append(f"{name}:\n")
        else:
            zero, join = f"Z{next(label)}", f"J{next(label)}"
            lines.append(f"\tsetp.eq.u32 %p3, %r0, 0;\n\t@%p3 bra {zero};\n" + sync * item[2] +
                         f"\tbra.uni {join};\n{zero}:\n" + sync * item[1] + f"{join}:\n")
    return "".join(lines)


_KERNEL = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k(.param .u32 p0, .param .u32 p1)\n{\n"
           ".reg .b32 %r<16>;\n.reg .pred %p<4>;\n\tld.param.u32 %r10, [p0];\n\tld.param.u32 %r11, [p1];\n"
           "\tmov.u32 %r0, %tid.x;\n")


def _partition(body: list, round_sync: str = "\tbar.sync 1;\n") -> str:
    """The dispatch loop of `DISPATCH` with `body` as partition 0's code, each round begun
    with `round_sync`."""
    return (_KERNEL + "\tmov.u32 %r8, 0;\nROUND:\n" + round_sync + "\tadd.s32 %r8, %r8, 1;\n"
            "\tld.shared.u32 %r3, [%r0];\n\tsetp.eq.u32 %p1, %r3, 0;\n\t@%p1 bra PART;\n"
            "\tsetp.eq.u32 %p1, %r3, 2;\n\t@%p1 bra DONE;\n\tbra.uni ROUND;\nPART:\n"
            + _body_lines(body) + "\tbra.uni ROUND;\nDONE:\n\tret;\n}\n")


def _run(body: list, values: dict) -> list[int]:
    """The syncs one visit of one thread runs, as indexes of the body's syncs in text order."""
    order, static = [], 0

    def loop(ops: int, source: str) -> None:
        for _ in range(max(1, values[source])):
            order.extend(range(static, static + ops))

    for item in body:
        if item[0] == "op":
            order.append(static)
        elif item[0] == "loop":
            loop(item[1], item[2])
        elif item[0] == "skip" and values[item[1]] != 0:
            loop(item[2][1], item[2][2])
        elif item[0] == "split":  # the text has the other side (thread index != 0) first
            first, taken = (static + item[2], item[1]) if values["tid"] == 0 else (static, item[2])
            order.extend(range(first, first + taken))
        static += {"op": 1, "loop": item[1] if item[0] == "loop" else 0,
                   "skip": item[2][1] if item[0] == "skip" else 0,
                   "split": item[1] + item[2] if item[0] == "split" else 0}[item[0]]
    return order


def _apart_and_sync_ids(text: str, marker: str) -> tuple[set, list[int]]:
    """The pairs `separate_phases` keeps apart in kernel `text`, and the ids of the events of
    its ``bar.sync 2`` lines (those holding `marker`), in the order of the lines."""
    flow = inlined_graph(ptxkit.parse(text, "k.ptx").function("k"))
    events = classify(flow, EventOptions(SHARED)).by_block
    pairs = separate_phases(flow, events, lambda a, b: a[1] is None or b[1] is None or bool(a[1] & b[1]))
    lines = [number for number, line in enumerate(text.splitlines(), 1) if marker in line]
    syncs = {flow.blocks[block].instructions[e.position].line: id(e)
             for block, found in enumerate(events) for e in found if e.sync is not None and e.sync[1] == {2}}
    return pairs, [syncs[line] for line in lines]


def _assert_never_meet(body: list, runs: list[list[int]], pairs: set, ids: list[int]) -> None:
    """The k-th sync of one thread's run meets the k-th of the other's: no such pair may be
    one `separate_phases` keeps apart (runs of different lengths hang: nothing to check)."""
    if len(runs[0]) != len(runs[1]):
        return  # a phase one thread never arrives at: a kernel that hangs on its own barrier
    for mine, theirs in zip(*runs):
        assert mine == theirs or (ids[mine], ids[theirs]) not in pairs, (body, mine, theirs)


@settings(max_examples=200, deadline=None)
@given(_BODY, st.lists(st.integers(0, 2), min_size=2, max_size=2), st.sets(st.integers(1, 3), min_size=1),
       st.sets(st.integers(1, 3), min_size=1))
def test_syncs_kept_apart_in_a_partition_never_meet(body, params, rounds_0, rounds_1):
    """Two threads of the partition (thread index 0 and 1) each visit it in some rounds of
    the dispatch loop. The CTA-wide ``bar.sync 1`` that begins each round holds the rounds
    in step: a phase begun in a round completes in it (no thread passes the next round's
    ``bar.sync 1`` before), so in each round both visit, the k-th sync of one meets the
    k-th of the other, and a round whose runs differ in length hangs there. No pair that
    `separate_phases` keeps apart may meet, whatever the parameters and the rounds."""
    pairs, ids = _apart_and_sync_ids(_partition(body), "bar.sync 2, 128")
    for round_ in sorted(rounds_0 & rounds_1):
        runs = [_run(body, {"p0": params[0], "p1": params[1], "round": round_, "tid": thread}) for thread in (0, 1)]
        if len(runs[0]) != len(runs[1]):
            break  # the kernel hangs in this round: no later one runs
        _assert_never_meet(body, runs, pairs, ids)


@settings(max_examples=200, deadline=None)
@given(_BODY, st.lists(st.integers(0, 2), min_size=2, max_size=2), st.sets(st.integers(1, 3), min_size=1),
       st.sets(st.integers(1, 3), min_size=1))
def test_syncs_kept_apart_in_a_partition_without_a_round_barrier_never_meet(body, params, rounds_0, rounds_1):
    """The same dispatch loop with no ``bar.sync 1`` at the top of its rounds: nothing
    holds one thread's round beside the other's, so the k-th sync of one thread's visits,
    one after the other, meets the k-th of the other's."""
    pairs, ids = _apart_and_sync_ids(_partition(body, round_sync=""), "bar.sync 2, 128")
    runs = []
    for thread, rounds in ((0, rounds_0), (1, rounds_1)):
        runs.append([op for round_ in sorted(rounds) for op in _run(body, {
            "p0": params[0], "p1": params[1], "round": round_, "tid": thread})])
    _assert_never_meet(body, runs, pairs, ids)


#: A dispatch loop whose partition 0 runs a loop of two syncs as often as the round's
#: number: a thread that visits in rounds 1 and 2 arrives a, b, a, b, a, b and one that
#: visits in round 3 only a, b, a, b, a, b too, unless a barrier every thread passes at
#: the top of each round holds them in the same round.
ROUNDS = (".version 8.0\n.target sm_90a\n.address_size 64\n.visible .entry k()\n{\n.reg .b32 %r<16>;\n"
          ".reg .pred %p<4>;\n\tmov.u32 %r0, %tid.x;\n\tmov.u32 %r8, 0;\nROUND:\n{top}\tadd.s32 %r8, %r8, 1;\n"
          "\tld.shared.u32 %r3, [%r0];\n\tsetp.eq.u32 %p1, %r3, 0;\n\t@%p1 bra PART;\n"
          "\tsetp.eq.u32 %p1, %r3, 2;\n\t@%p1 bra DONE;\n\tbra.uni ROUND;\n"
          "PART:\n\tmov.u32 %r9, 0;\nL0:\n\tbar.sync 2, 128;\n\tbar.sync 2, 128;\n\tadd.s32 %r9, %r9, 1;\n"
          "\tsetp.lt.u32 %p2, %r9, %r8;\n\t@%p2 bra L0;\n\tmov.u32 %r9, 0;\nL1:\n\tbar.sync 2, 128;\n"
          "\tadd.s32 %r9, %r9, 1;\n\tsetp.lt.u32 %p2, %r9, %r8;\n\t@%p2 bra L1;\n\tbra.uni ROUND;\n"
          "DONE:\n\tret;\n}\n")


def test_a_loop_in_rounds_a_cta_barrier_holds_in_step_keeps_its_syncs_apart():
    """With ``bar.sync 1`` at the top of each round, threads blocked in L0 are in the same
    round and go round it as often: its two syncs never meet. Without it, a thread that
    visited in rounds 1 and 2 arrives L0's first, L0's second, L1's, L0's first ... and one
    that visits in round 3 only L0's first, L0's second, L0's first, L0's second ...: the
    fourth phase holds L0's first and L0's second (the hypothesis example that found it)."""
    pairs, (first, second, _) = _apart_and_sync_ids(ROUNDS.replace("{top}", "\tbar.sync 1;\n"), "bar.sync 2, 128")
    assert {(first, second), (second, first)} <= pairs
    for top in ("", "\tbar.sync 1, 64;\n", "\t@%p1 bar.sync 1;\n", "\tbar.arrive 1, 128;\n"):
        pairs, (first, second, _) = _apart_and_sync_ids(ROUNDS.replace("{top}", top), "bar.sync 2, 128")
        assert (first, second) not in pairs and (second, first) not in pairs, top


def test_a_loop_some_threads_visit_in_a_uniform_loop_does_not_keep_its_syncs_apart():
    """The rounds counted to a parameter (a CTA-uniform exit) but partition 0 chosen by
    each thread in each round: a thread that visits in rounds 1 and 2 and one that visits
    in round 3 meet as without a barrier at the top of the rounds."""
    uniform = ROUNDS.replace("{top}", "").replace("k()", "k(.param .u32 n)").replace(
        "\tsetp.eq.u32 %p1, %r3, 2;\n\t@%p1 bra DONE;\n\tbra.uni ROUND;\n", "\tbra.uni NEXT;\n").replace(
        "\tbra.uni ROUND;\nDONE:\n", "NEXT:\n\tld.param.u32 %r10, [n];\n\tsetp.lt.u32 %p1, %r8, %r10;\n"
        "\t@%p1 bra ROUND;\nDONE:\n")
    pairs, (first, second, _) = _apart_and_sync_ids(uniform, "bar.sync 2, 128")
    assert (first, second) not in pairs and (second, first) not in pairs


SKIPPED = "\tbar.sync 0;\n\tld.param.u32 %r1, [n];\n\tsetp.eq.u32 %p1, {}, 0;\n\t@%p1 bra SKIP;\n" \
    "\tbar.sync 0;\nSKIP:\n\tbar.sync 0;\n"


def test_a_region_the_whole_cta_skips_keeps_its_barrier_apart_from_the_code_after_it():
    """Every thread of a CTA runs the same ``bar.sync 0`` in the same order: the region's
    is the second of each thread that runs it, the last one the second or the third."""
    pairs, (first, region, last) = syncs(SKIPPED.format("%r1"))
    assert pairs == {(id(a), id(b)) for a in (first, region, last) for b in (first, region, last) if a is not b}


def test_a_region_some_threads_skip_or_a_thread_count_keeps_the_pair():
    """Skipped by some threads, the region's ``bar.sync`` is one thread's second and the
    last one another's; a thread count lets a phase complete with some threads only."""
    by_thread = SKIPPED.format("%r2").replace("\tld.param.u32 %r1, [n];\n", "\tmov.u32 %r2, %tid.x;\n")
    pairs, (first, region, last) = syncs(by_thread)
    assert (id(region), id(last)) not in pairs and (id(last), id(region)) not in pairs
    counted = SKIPPED.format("%r1").replace("SKIP:\n\tbar.sync 0;\n", "SKIP:\n\tbar.sync 0, 128;\n")
    pairs, (first, region, last) = syncs(counted)
    assert (id(region), id(last)) not in pairs and (id(last), id(region)) not in pairs


@settings(max_examples=200, deadline=None)
@given(_BODY, st.lists(st.integers(0, 2), min_size=2, max_size=2))
def test_syncs_kept_apart_in_straight_code_never_meet(body, params):
    """The same bodies as the dispatch loop's partitions, as a whole kernel whose
    ``bar.sync 2`` has no thread count: two threads (thread index 0 and 1) run it, and
    the k-th sync of one meets the k-th of the other. No pair that `separate_phases`
    keeps apart may meet."""
    text = _KERNEL + "\tmov.u32 %r8, 2;\n" + _body_lines(body, "\tbar.sync 2;\n") + "\tret;\n}\n"
    pairs, ids = _apart_and_sync_ids(text, "bar.sync 2;")
    runs = [_run(body, {"p0": params[0], "p1": params[1], "round": 2, "tid": thread}) for thread in (0, 1)]
    _assert_never_meet(body, runs, pairs, ids)


MBARRIER = ".shared .align 8 .b64 full;\n.reg .pred %q<2>;\n\tmov.u32 %r1, full;\n" \
    "W:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], 0;\n\t@!%p1 bra W;\n" \
    "{between}\tmbarrier.arrive.shared::cta.b64 _, [%r1];\n"


def mbarrier_pair(between: str) -> tuple[set, int, int]:
    """The pairs `separate_phases` keeps apart, and the wait and the arrive of `MBARRIER`."""
    flow = inlined_graph(ptxkit.parse(HEAD + MBARRIER.format(between=between) + "\tret;\n}\n").function("k"))
    events = classify(flow, EventOptions(SHARED)).by_block
    pairs = separate_phases(flow, events, lambda a, b: a[1] is None or b[1] is None or bool(a[1] & b[1]))
    found = [e for block in events for e in block if e.sync is not None and e.sync[0] is SyncObject.MBARRIER]
    wait = next(e for e in found if e.kind is Kind.WAIT)
    arrive = next(e for e in found if e.kind is Kind.ARRIVE)
    return pairs, id(wait), id(arrive)


def test_a_bar_sync_between_an_mbarrier_wait_and_an_arrive_keeps_them_apart():
    """Every thread that waits passes the ``bar.sync`` after the wait returned, and the
    arrive comes after it: the wait cannot be waiting for that arrive."""
    pairs, wait, arrive = mbarrier_pair("\tbar.sync 0;\n")
    assert (wait, arrive) in pairs


@pytest.mark.parametrize("between", [
    "",  # nothing between them
    "\tbar.sync 0, 64;\n",  # 64 threads: the waiting ones need not be among them
    "\tsetp.eq.u32 %q1, %r2, 0;\n\t@%q1 bar.sync 0;\n",  # guarded: some threads pass it by
    "\tmov.u32 %r2, %tid.x;\n\tsetp.eq.u32 %q1, %r2, 0;\n\t@%q1 bra SKIP;\n\tbar.sync 0;\nSKIP:\n",  # some skip it
])
def test_an_mbarrier_wait_and_an_arrive_without_a_whole_cta_sync_between_keep_their_pair(between):
    pairs, wait, arrive = mbarrier_pair(between)
    assert (wait, arrive) not in pairs


def cluster_ops(body: str):
    flow = inlined_graph(ptxkit.parse(HEAD + body + "\tret;\n}\n").function("k"))
    events = classify(flow, EventOptions(SHARED)).by_block
    found = [e for block in events for e in block if e.sync is not None and e.kind in (Kind.ARRIVE, Kind.WAIT)]
    return separate_phases(flow, events, lambda a, b: True), found


PAIR = "\tbarrier.cluster.arrive;\n\tbarrier.cluster.wait;\n"


def test_cluster_barrier_phases_in_straight_line_code_never_meet():
    """Each thread arrives once per phase and waits for the phase it arrived in: the
    second arrive is not heard by the first wait, nor the first arrive by the second."""
    pairs, (arrive1, wait1, arrive2, wait2) = cluster_ops(PAIR + "\tld.param.u32 %r1, [n];\n" + PAIR)
    assert pairs == {(id(wait1), id(arrive2)), (id(wait2), id(arrive1))}
    # the same phases after a branch whose sides both leave the count as it is
    pairs, _ = cluster_ops(PAIR + "\tld.param.u32 %r1, [n];\n\tsetp.ne.u32 %p1, %r1, 0;\n\t@%p1 bra J;\n"
                           "\tmov.u32 %r2, 1;\nJ:\n" + PAIR)
    assert len(pairs) == 2


def test_cluster_barrier_counts_a_loop_or_a_guard_leaves_open():
    loop = ("\tld.param.u32 %r1, [n];\n\tmov.u32 %r2, 0;\nL:\n" + PAIR + "\tadd.u32 %r2, %r2, 1;\n"
            "\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra L;\n")
    pairs, _ = cluster_ops(PAIR + loop + PAIR)
    assert pairs == set()  # any number of phases may lie between the first pair and the last
    pairs, (arrive1, wait1, arrive2, wait2, arrive3, wait3) = cluster_ops(
        PAIR + "\tsetp.eq.u32 %p1, %r1, 0;\n\t@%p1 barrier.cluster.arrive;\n\tbarrier.cluster.wait;\n" + PAIR)
    assert (id(wait1), id(arrive2)) in pairs  # the guarded arrive's own phase is certain
    assert not {(id(wait3), id(arrive1)), (id(wait1), id(arrive3))} & pairs  # the phases after it are not


def test_cluster_barrier_code_that_breaks_the_alternation_keeps_every_pair():
    pairs, _ = cluster_ops("\tbarrier.cluster.wait;\n" + PAIR)
    assert pairs == set()


def test_a_loop_bound_set_apart_by_the_thread_index_is_no_uniform_bound():
    """Threads below 64 go round twice, the others once: the loop's syncs may meet the
    one after it (the bound %r1 is 1 or 2 by thread, though each write is a constant)."""
    pairs, _ = syncs("\tmov.u32 %r3, %tid.x;\n\tsetp.lt.u32 %p0, %r3, 64;\n\t@%p0 bra A;\n\tmov.u32 %r1, 1;\n"
                     "\tbra.uni J;\nA:\n\tmov.u32 %r1, 2;\nJ:\n\tmov.u32 %r2, 0;\nLOOP:\n\tbar.sync 1;\n\tbar.sync 1;\n"
                     "\tadd.s32 %r2, %r2, 1;\n\tsetp.lt.u32 %p1, %r2, %r1;\n\t@%p1 bra LOOP;\n\tbar.sync 1;\n")
    assert pairs == set()


def _threads_of(body: str):
    """A kernel's `_Threads`, with its loop forest."""
    from ptxkit.cfg.flow.dominance import DominatorTree
    from ptxkit.cfg.flow.loops import find_loops
    from ptxkit.cfg.sync.phases import _Threads

    flow = inlined_graph(ptxkit.parse(HEAD + body + "\tret;\n}\n").function("k"))
    dominators = DominatorTree.of(flow)
    forest = find_loops(flow, dominators)
    return flow, forest, _Threads(flow, dominators, forest.innermost())


THREAD_LOOP = ("\tmov.u32 %r1, %tid.x;\nLOOP:\n\tbar.sync 0;\n\tadd.u32 %r1, %r1, 1;\n"
               "\tsetp.lt.u32 %p1, %r1, 32;\n\t@%p1 bra LOOP;\n\tbar.sync 0;\n")


@pytest.mark.parametrize("body", [LOOP, THREAD_LOOP])
def test_the_answers_kept_per_loop_and_block_are_those_worked_out_each_time(body):
    """`_Threads` keeps each loop's uniform exit and each block's control dependences:
    asked twice, the same answer as a fresh computation."""
    from ptxkit.cfg.sync.phases import _uniform_exit

    flow, forest, threads = _threads_of(body)
    for loop in forest.loops:
        fresh = _uniform_exit(flow, loop, _threads_of(body)[2])
        assert threads.uniform_exit(loop) == fresh == threads.uniform_exit(loop)
    for block in range(len(flow)):
        fresh = _threads_of(body)[2]._find_control_dependences(block)
        assert threads._control_dependences(block) == fresh == threads._control_dependences(block)


def test_a_loop_answer_is_not_shared_between_two_kernels():
    """The same loop header in two kernels: one bound is the whole CTA's, the other the
    thread's; each kernel's `_Threads` answers for its own graph."""
    flow, forest, uniform = _threads_of(LOOP)
    other_flow, other_forest, by_thread = _threads_of(THREAD_LOOP)
    (loop,), (other,) = forest.loops, other_forest.loops
    assert loop.header == other.header
    assert uniform.uniform_exit(loop) is not None and by_thread.uniform_exit(other) is None


@pytest.mark.parametrize("state", [None, (0, frozenset()), (3, frozenset({4, 9}))])
def test_one_way_in_gives_the_count_two_equal_ways_give(state):
    """`_join` of one count is that count: what the general rule gives for two ways that
    bring the same count (no loop skipped, so no block's threads are asked about)."""
    from ptxkit.cfg.sync.phases import _join

    _, _, threads = _threads_of(LOOP)
    assert _join([state], 0, threads) == _join([state, state], 0, threads) == state
