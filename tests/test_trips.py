"""ptxkit.cfg.values.trips: loops whose trips a counter bounds, and the registers they step
(docs/fence.md §3.1), through the register analysis's public entry point.

The kernels are LLVM's shape for ``for (i = 0; i < m; i++)`` with ``m = max(min(n, C), 1)``
unrolled ``U`` times, in the three forms nvcc writes: the counter tested against ``m & -U``
through a sum (``i + ((m & (U - 1)) - m) != 0``), against ``m - (m & (U - 1))`` directly,
and a second counter that runs from ``m & -U`` down to 0. Each runs in the simulator for
every count ``n``, and every index a run reaches at each point must lie in what the
analysis says there (and, for the counts it can tell apart, stay below ``C``: the bound
is what the fence pass needs). A property test does the same for loops of every shape
the bounds read and some they must not, nvcc's own loops are compiled and read."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.cfg.flow.graph import flow_graph
from ptxkit.cfg.values.registers import register_values
from ptxkit.cfg.values.trips import trip_loops
from ptxkit.cfg.values.values import INF, show
from ptxkit.generators.simulate import launch
from test_registers import HEAD, REGS, raw_value_at, value_at
from test_values import contains_number

#: Where each point that stores an index keeps its hits (`_unrolled`): 64 words each.
_SLOT = 64


def _store(site: int, register: str) -> str:
    """Mark `out[site * 64 + index]` where `register` holds the index."""
    return (f"\tshl.b32 %r20, {register}, 2;\n\tcvt.u64.u32 %rd2, %r20;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
            f"\tst.global.u32 [%rd3+{site * _SLOT * 4}], 1;\n")


def _unrolled(cap: int, unroll: int, form: str, late: bool = False) -> str:
    """The kernel of the module docstring; `late` tests the counter before its step (a
    loop that makes one trip more than the count says)."""
    mask = unroll - 1
    body = ("\tld.param.u64 %rd1, [k_out];\n\tld.param.u32 %r1, [k_n];\n"
            f"\tmin.s32 %r2, %r1, {cap};\n\tmax.s32 %r3, %r2, 1;\n\tadd.s32 %r4, %r3, -1;\n"
            f"\tand.b32 %r5, %r3, {mask};\n\tsub.s32 %r6, %r5, %r3;\n\tsub.s32 %r8, %r3, %r5;\n"
            f"\tsetp.lt.u32 %p1, %r4, {mask};\n\tmov.u32 %r7, 0;\n\t@%p1 bra REST;\n\tmov.u32 %r9, %r8;\nLOOP:\n")
    for j in range(unroll):
        body += f"\tadd.s32 %r10, %r7, {j};\n" + _store(j, "%r10")
    step = f"\tadd.s32 %r7, %r7, {unroll};\n"
    test = {"sum": "\tadd.s32 %r11, %r6, %r7;\n\tsetp.ne.s32 %p2, %r11, 0;\n",
            "direct": "\tsetp.ne.s32 %p2, %r7, %r8;\n",
            "down": "\tsetp.ne.s32 %p2, %r9, 0;\n"}[form]
    if form == "down":
        step += f"\tadd.s32 %r9, %r9, {-unroll};\n"
    body += (test + step if late else step + test) + "\t@%p2 bra LOOP;\nREST:\n"
    for j in range(mask):
        body += f"\tsetp.eq.s32 %p3, %r5, {j};\n\t@%p3 bra DONE;\n\tadd.s32 %r12, %r7, {j};\n" + \
            _store(unroll + j, "%r12")
    return body + "DONE:\n"


def _kernel(body: str) -> str:
    return f"{HEAD}.visible .entry k(.param .u64 k_out, .param .u32 k_n)\n{{\n{REGS}{body}\tret;\n}}\n"


def _analysed(body: str) -> list:
    """The value of the index each store marks, in the order of the stores."""
    flow = flow_graph(ptxkit.parse(_kernel(body), "k.ptx").function("k"))
    queries = {(b.index, i): (b.index, i, b.instructions[i].operands[1]) for b in flow.blocks
               for i, instruction in enumerate(b.instructions) if instruction.opcode == "shl.b32"}
    values = register_values(flow, queries)
    return [values[site] for site in sorted(queries, key=lambda site: flow.blocks[site[0]].line)]


def _reached(body: str, counts: range) -> list[set[int]]:
    """The indices each store marks over runs with every count of `counts`."""
    stores = body.count("st.global")
    reached: list[set[int]] = [set() for _ in range(stores)]
    for n in counts:
        out = np.zeros(stores * _SLOT, np.uint32)
        launch(_kernel(body), "k", out, np.uint32(n), grid=1, block=1)
        for site in range(stores):
            reached[site].update(int(i) for i in np.flatnonzero(out[site * _SLOT:(site + 1) * _SLOT]))
    return reached


def _highest(value: tuple) -> int:
    return max((atom.hi for atom in value), default=-1)


@pytest.mark.parametrize("form", ["sum", "direct", "down"])
@pytest.mark.parametrize("cap, unroll", [(8, 4), (9, 4), (7, 4), (16, 8), (5, 2), (3, 4)])
def test_every_index_a_run_reaches_is_in_the_bound(cap, unroll, form):
    body = _unrolled(cap, unroll, form)
    reached = _reached(body, range(0, cap + 3))
    for value, indices in zip(_analysed(body), reached):
        assert all(contains_number(value, i) for i in indices), (show(value), sorted(indices))
    assert set().union(*reached) == set(range(cap))  # every index runs for some count


@pytest.mark.parametrize("form", ["sum", "direct", "down"])
@pytest.mark.parametrize("cap, unroll", [(8, 4), (7, 4), (16, 8), (5, 2), (3, 4)])
def test_no_index_past_the_count(cap, unroll, form):
    """The bound the fence pass needs: every index below the count, in the loop (its
    trips) and after it (its exit, where ``m & (U - 1) != 0`` leaves ``m`` below ``C``
    when ``C`` is a multiple of ``U``, or none of the counts past the last multiple
    reaches the copy). A loop the guard never enters (``C < U``) stores nothing there."""
    assert all(_highest(value) < cap for value in _analysed(_unrolled(cap, unroll, form)))


def test_after_a_count_past_a_multiple_the_bound_may_reach_it():
    """Where ``C = 9`` and ``U = 4``, the copies after the loop run at ``i = m & -4``
    plus 0, 1, 2 where ``m & 3`` is above that: the first reaches 8 (``m = 9``), the
    others 5 and 6 (``m`` 6 or 7). The intervals keep ``m`` in ``[1, 9]`` past ``m & 3 !=
    1`` (it takes no end away that ``m & 3 != 0`` left) and bound them by 9 and 10:
    sound, and loose; ThunderKittens' count of warps stops at 8."""
    body = _unrolled(9, 4, "sum")
    assert [show(value) for value in _analysed(body)[4:]] == ["[0, 8] step 4", "[1, 9] step 4", "[2, 10] step 4"]
    assert [max(indices) for indices in _reached(body, range(0, 12))[4:]] == [8, 5, 6]


@pytest.mark.parametrize("form", ["sum", "direct", "down"])
def test_a_test_before_the_step_bounds_nothing(form):
    """The latch tests the counter before stepping it: the test ends the loop one trip
    later than the count says (and the sum form never, where it steps past the limit),
    so no bound is taken from it; what the runs reach is still in the values."""
    body = _unrolled(8, 4, form, late=True)
    assert not trip_loops(flow_graph(ptxkit.parse(_kernel(body), "k.ptx").function("k")))
    for value in _analysed(body)[:4]:
        assert _highest(value) >= INF


def test_a_count_that_may_be_below_the_unrolling_bounds_nothing():
    """Without LLVM's guard (``m - 1 >= U - 1``) the loop may start with ``m & -4`` = 0,
    where ``i != 0`` holds for every ``i`` the counter reaches: no bound."""
    body = _unrolled(8, 4, "sum").replace("\t@%p1 bra REST;\n", "")
    assert _highest(_analysed(body)[0]) >= INF


def test_a_limit_written_in_the_loop_makes_no_trip_loop():
    body = _unrolled(8, 4, "direct").replace("\tsetp.ne.s32 %p2, %r7, %r8;\n",
                                              "\tadd.s32 %r8, %r8, 4;\n\tsetp.ne.s32 %p2, %r7, %r8;\n")
    assert not trip_loops(flow_graph(ptxkit.parse(_kernel(body), "k.ptx").function("k")))


def test_a_step_in_an_inner_loop_is_not_a_step_a_trip():
    """``%r2`` steps by 8 in an inner loop that runs twice a trip: it is not one of the
    registers the outer loop steps, and keeps its own bound."""
    body = ("\tmov.u32 %r1, 0;\n\tmov.u32 %r2, 0;\nOUTER:\n\tmov.u32 %r3, 0;\nINNER:\n\tadd.s32 %r2, %r2, 8;\n"
            "\tadd.s32 %r3, %r3, 1;\n\tsetp.lt.u32 %p1, %r3, 2;\n\t@%p1 bra INNER;\n\tadd.s32 %r1, %r1, 1;\n"
            "\tsetp.ne.s32 %p2, %r1, 3;\n\t@%p2 bra OUTER;\n\t// here\n\tmov.u32 %r4, %r2;\n")
    flow = flow_graph(ptxkit.parse(_kernel(body), "k.ptx").function("k"))
    stepped = {flow.blocks[loop.header].labels[0].name: [found.key for found in loop.stepped]
               for loop in trip_loops(flow)}
    assert stepped == {"OUTER": ["%r1"], "INNER": ["%r2", "%r3"]}
    assert contains_number(raw_value_at(body, "%r2", ".param .u64 k_out, .param .u32 k_n"), 48)


def test_a_start_plus_a_constant_bounds_the_trips_and_the_offset_from_the_start():
    """``for (i = s; i < s + 2; i++)`` with ``s`` unknown: two trips, whatever ``s`` is;
    ``i - s`` is 0 or 1 and an address stepped beside ``i`` moves by one step (the shape
    of ThunderKittens' FFT convolution loads)."""
    body = ("\tld.param.u32 %r1, [k_n];\n\tadd.s32 %r2, %r1, 2;\n\tmov.u32 %r3, %r1;\n\tmov.u32 %r4, dyn;\nL:\n"
            "\tsub.s32 %r5, %r3, %r1;\n\tshl.b32 %r6, %r5, 13;\n\t// here\n\tst.shared.u32 [%r4], %r6;\n"
            "\tadd.s32 %r3, %r3, 1;\n\tadd.s32 %r4, %r4, 8192;\n\tsetp.lt.u32 %p1, %r3, %r2;\n\t@%p1 bra L;\n")
    params = ".param .u64 k_out, .param .u32 k_n"
    assert value_at(body, "%r6", params) == "[0, 8192] step 8192"
    assert value_at(body, "%r4", params) == "dynamic shared+[0, 8192] step 8192 (shared::cta window)"


def test_an_exact_test_leaves_the_loop_with_the_counter_at_its_limit():
    """``i != 16`` stepping by 4 from 0 leaves with i = 16 and the address stepped beside
    it four steps on; the loop has no other way in or out, so they are known exactly."""
    body = ("\tmov.u32 %r1, 0;\n\tmov.u32 %r2, dyn;\nL:\n\tadd.s32 %r1, %r1, 4;\n\tadd.s32 %r2, %r2, 100;\n"
            "\tsetp.ne.s32 %p1, %r1, 16;\n\t@%p1 bra L;\n")
    assert value_at(body, "%r1") == "16"
    assert value_at(body, "%r2") == "dynamic shared+400 (shared::cta window)"


@pytest.mark.parametrize("test, shown", [
    # i < min(n, 8): the first trip past 7 ends it, whatever n is (nvcc's plain loop)
    ("\tmin.s32 %r3, %r9, 8;\n", "dynamic shared+[0, 14336] step 2048 (shared::cta window)"),
    # i < n unsigned, stepping by 2: n may be 2^32 - 1, and i may step past it and wrap
    ("\tmov.u32 %r3, %r9;\n", "dynamic shared+[0, inf] step 2048 (shared::cta window)"),
])
def test_an_ordered_test_ends_the_loop_on_the_first_trip_past_its_limit(test, shown):
    step = 1 if "min" in test else 2
    comparison = "lt.s32" if "min" in test else "lt.u32"
    body = (f"\tld.param.u32 %r9, [k_n];\n{test}\tmov.u32 %r1, 0;\n\tmov.u32 %r2, dyn;\nL:\n\t// here\n"
            f"\tst.shared.u32 [%r2], %r1;\n\tadd.s32 %r1, %r1, {step};\n\tadd.s32 %r2, %r2, 2048;\n"
            f"\tsetp.{comparison} %p1, %r1, %r3;\n\t@%p1 bra L;\n")
    assert value_at(body, "%r2", ".param .u64 k_out, .param .u32 k_n") == shown


#: nvcc's loops over ``m = min(n, 8)`` rows, plain and unrolled four times
#: (``#pragma unroll 4``: LLVM's loop to ``m - (m & 3)``, counted down, then a loop of
#: the rest counted down from ``m & 3``)
NVCC_LOOPS = """
__global__ void __launch_bounds__(128) k(const int *in, int n, int *out) {
  __shared__ int buf[8 * 512 + 128];
  int m = min(n, 8);
  if (threadIdx.x == 0) {
    PRAGMA
    for (int i = 0; i < m; i++) buf[i * 512] = in[i];
  }
  __syncthreads();
  out[threadIdx.x] = buf[threadIdx.x * 33];
}
"""


@pytest.mark.nvcc
@pytest.mark.parametrize("pragma", ["", "#pragma unroll 4"])
def test_what_nvcc_writes_for_a_loop_over_a_bounded_count(pragma, tmp_path):
    """Every store of nvcc's loops lands below ``buf + 8 * 2048``: the rows ``i < m <= 8``
    (the remainder loop of the unrolled form starts past the first loop's last row,
    ``m & -4``, counted on from its exit, and runs where its count ``m & 3``, kept in a
    register that loop writes again, is not 0: ``m`` is at most 7 there, row 6 the last)."""
    import subprocess
    (tmp_path / "k.cu").write_text(NVCC_LOOPS.replace("PRAGMA", pragma))
    subprocess.run(["nvcc", "-arch=sm_90a", "-ptx", "k.cu", "-o", "k.ptx"], cwd=tmp_path, check=True)
    function = ptxkit.parse((tmp_path / "k.ptx").read_text(), "k.ptx").functions[0]
    flow = flow_graph(function)
    assert len(trip_loops(flow)) == (2 if pragma else 1)
    stores = {(b.index, i): (b.index, i, instruction.operands[0]) for b in flow.blocks
              for i, instruction in enumerate(b.instructions) if instruction.opcode.startswith("st.shared")}
    highest = [max(atom.hi for atom in value) for value in register_values(flow, stores).values()]
    assert highest == ([14336] if not pragma else [8192, 10240, 12288, 14336, 12288])


#: How each ``setp`` comparison reads two 32-bit registers (`_trips_made`).
_COMPARE = {"ne": lambda a, b: a != b, "lt": lambda a, b: a < b, "gt": lambda a, b: a > b,
            "le": lambda a, b: a <= b, "ge": lambda a, b: a >= b}
_WRAP = 1 << 32


def _as(value: int, kind: str) -> int:
    value %= _WRAP
    return value - _WRAP if kind == "s32" and value >= 1 << 31 else value


def _trips_made(start: int, step: int, limit: int, comparison: str, kind: str, most: int) -> int | None:
    """How many trips the loop of `test_every_value_a_counted_loop_steps_to_is_in_its_bound`
    makes by its own test (at least one: the test is at the bottom), None past `most`."""
    counter, trips = start, 0
    while trips <= most:
        trips += 1
        counter = (counter + step) % _WRAP
        if not _COMPARE[comparison](_as(counter, kind), _as(limit, kind)):
            return trips
    return None


#: Numbers near the ends of the 32-bit types, where a counter's step may wrap.
_EDGES = [2**31 - 5, 2**31 - 2, 2**31 - 1, 2**32 - 5, 2**32 - 1, -2**31 + 3]


@settings(max_examples=150, deadline=None)
@given(start=st.one_of(st.integers(-6, 6), st.sampled_from(_EDGES)), step=st.sampled_from([-4, -2, -1, 1, 2, 3, 4, 8]),
       comparison=st.sampled_from(sorted(_COMPARE)), kind=st.sampled_from(["s32", "u32"]),
       limit=st.sampled_from(["\tmin.s32 %r2, %r1, {c};\n", "\tand.b32 %r2, %r1, {c};\n", "\tmov.u32 %r2, {c};\n",
                              "\tadd.s32 %r2, %r3, {c};\n", "\tsub.s32 %r2, %r1, %r5;\n"]),
       c=st.one_of(st.integers(-8, 24), st.sampled_from(_EDGES)), stride=st.sampled_from([-12, 4, 2048]),
       late=st.booleans())
def test_every_value_a_counted_loop_steps_to_is_in_its_bound(start, step, comparison, kind, limit, c, stride, late):
    """Loops of every shape the trip bounds read and some they must not (a test before the
    step, ``<=``, a limit the counter may step past and wrap, a start plus a constant):
    each run in the simulator for several counts ``n`` (a second exit stops a run after
    64 trips, so a counter that wraps shows what it steps to), every value the register
    stepped beside the counter takes is in what the analysis says it is, in the loop and
    after it."""
    defs = ("\tld.param.u64 %rd1, [k_out];\n\tld.param.u32 %r1, [k_n];\n\tand.b32 %r5, %r1, 3;\n"
            "\tsub.s32 %r6, %r1, %r5;\n" f"\tmov.u32 %r3, {start};\n" + limit.format(c=c) + "\tmov.u32 %r4, 0;\n"
            "\tmov.u32 %r7, 0;\nL:\n\tmul.wide.u32 %rd2, %r7, 4;\n\tadd.s64 %rd3, %rd1, %rd2;\n"
            "\tst.global.u32 [%rd3+4], %r4;\n\tadd.s32 %r7, %r7, 1;\n\tsetp.ge.u32 %p2, %r7, 64;\n"
            "\t@%p2 bra DONE;\n")
    step_counter = f"\tadd.s32 %r3, %r3, {step};\n"
    test = f"\tsetp.{comparison}.{kind} %p1, %r3, %r2;\n"
    body = defs + f"\tadd.s32 %r4, %r4, {stride};\n" + (test + step_counter if late else step_counter + test) + \
        "\t@%p1 bra L;\nDONE:\n\tst.global.u32 [%rd1], %r7;\n\tst.global.u32 [%rd1+260], %r4;\n"
    flow = flow_graph(ptxkit.parse(_kernel(body), "k.ptx").function("k"))
    stores = [(b.index, i, instruction.operands[1]) for b in flow.blocks for i, instruction in enumerate(b.instructions)
              if instruction.opcode == "st.global.u32" and "%r4" in instruction.text]
    inside, after = register_values(flow, dict(enumerate(stores))).values()
    for n in (0, 1, 2, 3, 5, 8, 13, 100, 2**31 - 1, 2**32 - 1):
        s_n = _as(n, "s32")
        limits = {"min": min(s_n, _as(c, "s32")), "and": n & (c % _WRAP), "mov": c, "add": start + c,
                  "sub": n - (n & 3)}
        bound = limits[limit.split()[0].split(".")[0]]
        counter_start = start - step if late else start  # a test before the step sees the count one behind
        trips = _trips_made(counter_start, step, bound, comparison, kind, 64) or 64  # a run stops at 64
        out = np.zeros(66, np.uint32)  # the trips, what each trip stored, what the loop left
        launch(_kernel(body), "k", out, np.uint32(n), grid=1, block=1)
        assert out[0] == trips
        for value, seen in [(inside, int(seen)) for seen in out[1:1 + trips]] + [(after, int(out[65]))]:
            assert contains_number(value, seen) or contains_number(value, seen - _WRAP), (n, seen, show(value))


def test_a_count_set_in_two_places_bounds_nothing_and_keeps_the_loop():
    """``m`` set on two branches (a join, not one register set once): its value where
    the loop is entered is no one key's, so the masked limit is not taken; the loop's
    stores keep every index a run reaches (taken as dead before this test)."""
    body = _unrolled(8, 4, "sum").replace(
        "\tmax.s32 %r3, %r2, 1;\n", "\tsetp.lt.s32 %p7, %r2, 1;\n\t@%p7 bra ONE;\n\tmov.u32 %r3, %r2;\n"
        "\tbra.uni SET;\nONE:\n\tmov.u32 %r3, 1;\nSET:\n")
    for value, indices in zip(_analysed(body), _reached(body, range(0, 11))):
        assert all(contains_number(value, i) for i in indices), (show(value), sorted(indices))
