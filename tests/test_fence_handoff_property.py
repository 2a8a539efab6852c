"""Property test: the fence pass on random two- and three-role (warp-specialized)
kernels agrees with a brute-force explorer of every interleaving of the roles.

**The programs.** One sm_90a kernel: a prologue takes the addresses of two 4 KB
shared buffers ``X`` and ``Y`` and of three mbarriers (``bars+0`` and ``bars+8`` for
hand-offs, ``bars+16`` for TMA loads, which no role waits on), thread 0 initialises
the mbarriers (``fence.mbarrier_init`` and ``bar.sync 0`` publish the inits; some
programs leave the fence out), and the kernel splits on ``%tid.x < 128`` into role A
and role B, each a straight line of events (some inside an ``if`` on a kernel
parameter) ending in ``ret``. Events: ``st.shared`` and ``ld.shared`` of a buffer, a
wgmma reading descriptors built from buffer addresses, a TMA load into a buffer
(armed with ``expect_tx`` on ``bars+16``), a bulk store and a TMA store from a buffer,
and existing proxy fences. Hand-offs: A arrives and B waits on a *forward* object (a
named barrier or an mbarrier), and optionally B arrives and A waits on a *backward*
one. A arrives on the forward object before it waits on the backward one, so no
program can deadlock; each object is used once per role. Some programs (`programs`
with `loops`) run each role in a loop of ``k_rounds`` iterations (one hand-off each way
per round, B waiting before it releases A, so the roles keep the objects' phases in
step; the mbarrier waits expect the round's parity; in some the forward mbarrier
hand-off runs in the first round only, behind a do-once predicate), and some put the
roles one after the other: ``if (A) {...}`` then ``if (B) {...}``, where the control-flow graph has a
path from A's code into B's that no thread takes. Three-role programs
(`three_role_programs`) add CUTLASS's load-order barrier (docs/fence.md §4.5): role C
(``%tid.x`` 256 and up) runs once, waiting for A's one arrive on a third mbarrier and
then arriving once on a fourth, which B waits for in its first round.

**The model the explorer checks** (PTX ISA, chapter "Memory Consistency Model": the
proxies, base causality order and proxy-preserved base causality order; and the
``fence`` instruction). Generic-proxy accesses (``st``/``ld``/``mbarrier.init``) and
async-proxy operations (wgmma operand reads, TMA and bulk copies) reach shared memory
by different paths, so program order and synchronization alone do not order one
after the other. A bi-directional proxy fence ``fence.proxy.async`` (any variant that
covers the shared window) does, and the ISA says proxy fences compose with the other
synchronization of the model. The ISA spells the composition out for the alias proxy
only (a proxy fence "along the base causality path" from X to Y); this test applies
the same rule to the async proxy: an access W is ordered before an async op Y when
some proxy fence F lies on a base causality path W -> F -> Y, in any thread. Base
causality paths are program order plus synchronizes-with edges: ``bar.arrive`` or
``bar.sync`` to a ``bar.sync``/``barrier.sync`` of the same barrier (which completes
once all its threads, both roles here, have arrived), and an ``mbarrier.arrive``
(release by default) to the ``mbarrier.try_wait`` (acquire by default) that sees the
phase it completed. A thread's n-th operation on an object belongs to the object's
n-th phase (the roles keep them in step), and a wait hears only the arrives of its
phase. So the fence may sit in the writer after the access and before
its arrive, or in the issuer after its wait and before the op. An ``mbarrier.init``
is a generic write of the barrier, and a TMA load reaches the barrier it completes on
through the generic proxy too (PTX ISA, ``cp.async.bulk.tensor``: it "accesses its
mbarrier operand using generic-proxy"), so an init is no proxy hazard.

Hazards, at an async op Y in thread T, over the accesses W that precede Y in base
causality order with a proxy fence on no such path (T's own, or another thread's
handed to T): RAW, W writes a buffer Y reads or writes; WAR, W reads a buffer Y writes (a TMA
load). Accesses of the other role
that never precede Y in causality order are a data race of the program itself, not a
missing proxy fence: they are ignored. With ``war=False`` WAR is not counted.

The explorer reads only the PTX text (it never imports ``ptxkit.cfg``): a thread
per role (the representatives ``%tid.x`` 0, 128 and 256), step by step in every
interleaving (a step that touches only its own thread is taken before the others
move: it commutes with them), once for each ``k_rounds`` in `ROUNDS` (a loop's counter
and bound, and a nested loop's counter and constant bound, are known; each execution
of an access is its own); a branch on the other kernel parameter
takes both ways, one on a do-once predicate the way its ``mov.pred`` constant says; a
thread tracks the
set of accesses that precede it in causality order (its *view*) and the subset with a
proxy fence on the way (*fenced*); an arrive records both sets on the object, a wait
that completes adds the recorded sets to its own. Beside them it keeps the pending
set the way the pass counts it (per path, see `Memory`), only to steer the properties
around the known disagreement (docs/fence.md §8, a fence on one causality path, `fenced_on_one_path_only`:
the pass credits another thread's fence, docs/fence.md §4.4, but not a thread's fence of its own access
that comes back to it).

Properties: (a) inline, issuer-side fencing inserts a fence iff the explorer finds a
violation, for roles that loop too (where two rounds show no violation for a fence
the pass inserts, three are explored: a write can take a round more to come back); (b) in every mode the output has none left and the pass adds nothing to
it, loops, roles in sequence and three roles included (there the pass may fence more
than needed: it does not know that no thread runs both roles in sequence, and it limits
what a once-run arrive hands over only to what may run before its barrier completes); (c) with ``war=False`` WAR alone never gets a fence; every fence inline placement
inserts is needed; hand-written examples; and ptxas assembles what the test makes.
"""

from __future__ import annotations

import itertools
import operator
import re
from typing import NamedTuple

import pytest
from hypothesis import HealthCheck, assume, example, given, reject, settings
from hypothesis import strategies as st

from ptxkit.cfg.fence.fence import fence_text

# -- the programs ---------------------------------------------------------------------------

PROLOGUE = """\
.version 8.0
.target sm_90a
.address_size 64

.shared .align 1024 .b8 X[4096];
.shared .align 1024 .b8 Y[4096];
.shared .align 8 .b64 bars[6];

.visible .entry k(.param .u64 k_tmap, .param .u64 k_out, .param .u32 k_flag, .param .u32 k_rounds)
{
	.reg .pred %p<12>;
	.reg .b32 %r<25>;
	.reg .b64 %rd<12>;
	.reg .f32 %f<8>;
	ld.param.u64 %rd5, [k_tmap];
	ld.param.u64 %rd6, [k_out];
	ld.param.u32 %r13, [k_flag];
	ld.param.u32 %r21, [k_rounds];
	mov.u32 %r22, 0;
	mov.u32 %r0, 0;
	mov.u32 %r10, 1;
	mov.u32 %r1, X;
	mov.u32 %r2, Y;
	mov.u32 %r3, bars;
	add.u32 %r4, %r3, 8;
	add.u32 %r5, %r3, 16;
	mov.u32 %r6, %tid.x;
	shr.u32 %r7, %r1, 4;
	and.b32 %r8, %r7, 16383;
	cvt.u64.u32 %rd3, %r8;
	or.b64 %rd1, %rd3, 68720001024;
	shr.u32 %r11, %r2, 4;
	and.b32 %r12, %r11, 16383;
	cvt.u64.u32 %rd4, %r12;
	or.b64 %rd2, %rd4, 68720001024;
	setp.eq.u32 %p8, %r6, 0;
	@%p8 mbarrier.init.shared::cta.b64 [%r3], 128;
	@%p8 mbarrier.init.shared::cta.b64 [%r4], 128;
	@%p8 mbarrier.init.shared::cta.b64 [%r5], 1;
"""
INIT_FENCE = "\tfence.mbarrier_init.release.cluster;\n"
#: the origin `register_origins` gives ``%tid.x >> 7`` and its broadcast from lane 0
WARPGROUP = "%tid.x>>7"
ROLE_SPLIT = "\tbar.sync 0;\n\tsetp.lt.u32 %p9, %r6, 128;\n"
#: what a third role adds to the prologue and to the split: its mbarrier (bars+24), and
#: %tid.x 256 and up for role C
THIRD_ROLE = ("\tadd.u32 %r23, %r3, 24;\n\tadd.u32 %r19, %r3, 32;\n"
              "\t@%p8 mbarrier.init.shared::cta.b64 [%r23], 128;\n\t@%p8 mbarrier.init.shared::cta.b64 [%r19], 128;\n",
              "\tsetp.lt.u32 %p5, %r6, 256;\n")

ADDRESS = {"X": "%r1", "Y": "%r2"}  # the 32-bit shared address of each buffer
DESCRIPTOR = {"X": "%rd1", "Y": "%rd2"}  # a no-swizzle wgmma descriptor of each buffer (LBO 128, SBO 256)

#: Event templates: {A} is a buffer's address, {DA}/{DB} the descriptors a wgmma reads.
EVENTS = {
    "st": ["st.shared.b32 [{A}], %r10;"],
    "ld": ["ld.shared.b32 %r14, [{A}];"],
    "wgmma": ["wgmma.fence.sync.aligned;",
              "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {{%f1, %f2, %f3, %f4}}, {DA}, {DB}, %p7, 1, 1, 0, 0;"],
    "tma_load": ["mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r5], 4096;",
                 "cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [{A}], [%rd5, {{%r0}}], [%r5];"],
    "bulk_store": ["cp.async.bulk.global.shared::cta.bulk_group [%rd6], [{A}], 4096;"],
    "tma_store": ["cp.async.bulk.tensor.1d.global.shared::cta.tile.bulk_group [%rd5, {{%r0}}], [{A}];"],
    "fence": ["fence.proxy.async.shared::cta;"],
    "full_fence": ["fence.proxy.async;"],
}
GENERIC_EVENTS = ("st", "ld")
ASYNC_EVENTS = ("wgmma", "tma_load", "bulk_store", "tma_store")
FENCE_EVENTS = ("fence", "full_fence")

#: Each hand-off object, by direction and kind: (the arriving side's lines, the waiting side's lines).
HANDOFFS = {
    ("forward", "named"): (["bar.arrive 1, 256;"], ["bar.sync 1, 256;"]),
    ("forward", "named-barrier"): (["bar.arrive 1, 256;"], ["barrier.sync 1, 256;"]),
    ("forward", "mbarrier"): (["mbarrier.arrive.shared::cta.b64 _, [%r3];"],
                              ["{L}:", "mbarrier.try_wait.parity.shared::cta.b64 %p10, [%r3], %r22;", "@!%p10 bra {L};"]),
    ("forward", "mbarrier-noinc"): (["cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%r3];"],
                                    ["{L}:", "mbarrier.try_wait.parity.shared::cta.b64 %p10, [%r3], %r22;",
                                     "@!%p10 bra {L};"]),
    ("backward", "named"): (["bar.arrive 2, 256;"], ["bar.sync 2, 256;"]),
    ("backward", "mbarrier"): (["mbarrier.arrive.shared::cta.b64 _, [%r4];"],
                               ["{L}:", "mbarrier.try_wait.parity.shared::cta.b64 %p11, [%r4], %r22;", "@!%p11 bra {L};"]),
    # with a third role, used once each, waiting for the first phase (parity 0): A arrives
    # and C waits on "order", then C arrives and B waits on "ready"
    ("order", "mbarrier"): (["mbarrier.arrive.shared::cta.b64 _, [%r23];"],
                            ["{L}:", "mbarrier.try_wait.parity.shared::cta.b64 %p6, [%r23], %r0;", "@!%p6 bra {L};"]),
    ("ready", "mbarrier"): (["mbarrier.arrive.shared::cta.b64 _, [%r19];"],
                            ["{L}:", "mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r19], %r0;", "@!%p2 bra {L};"]),
}
FORWARD_KINDS = [kind for direction, kind in HANDOFFS if direction == "forward"]
BACKWARD_KINDS = [kind for direction, kind in HANDOFFS if direction == "backward"]


class Program(NamedTuple):
    """A generated kernel: each role is a tuple of statements, ``("event", name,
    buffers)``, ``("if", then, else)`` (tuples of events) or ``("arrive"|"wait",
    direction, kind)``; `init_fenced` says whether the prologue fences its inits.
    With `rounds` each role runs its statements in a loop of ``k_rounds`` iterations;
    with `in_sequence` the roles are two ``if``s one after the other (role A's code
    falls through to the test that skips role B's) instead of the two arms of one; with
    `once` the forward hand-off (an mbarrier) runs in the first round only, behind a
    do-once predicate (CUTLASS's load-order barrier, docs/fence.md §4.5); `role_c` is a
    third role, which runs once (looping roles use "order" and "ready" in their first
    round only); with `top_tested` a looping role tests its count before each round
    (``while``, as ``-G`` builds keep every loop) instead of after it."""

    role_a: tuple
    role_b: tuple
    init_fenced: bool = True
    rounds: bool = False
    in_sequence: bool = False
    once: bool = False
    role_c: tuple = ()
    top_tested: bool = False

    def is_once(self, statement: tuple) -> bool:
        """Whether a looping role runs this hand-off statement in its first round only."""
        return statement[0] in ("arrive", "wait") and (
            (self.once and statement[1] == "forward") or statement[1] in ("order", "ready"))


@st.composite
def events(draw, names: tuple[str, ...]) -> tuple:
    """One event, with the buffers it uses (a wgmma reads two descriptors)."""
    name = draw(st.sampled_from(names))
    count = 2 if name == "wgmma" else 0 if name in FENCE_EVENTS else 1
    return ("event", name, tuple(draw(st.sampled_from("XY")) for _ in range(count)))


@st.composite
def segments(draw, names: tuple[str, ...]) -> list:
    """A short straight line of events, sometimes with an if or an if/else of events."""
    out = []
    for _ in range(draw(st.integers(0, 3))):
        if draw(st.integers(0, 5)) == 0:
            then = tuple(draw(st.lists(events(names), min_size=1, max_size=2)))
            other = tuple(draw(st.lists(events(names), max_size=2)))
            out.append(("if", then, other))
        else:
            out.append(draw(events(names)))
    return out


@st.composite
def programs(draw, reads_only: bool = False, loops: bool = False) -> Program:
    """A two-role program; with `reads_only` the only generic accesses are loads. With
    `loops` some programs run their roles in loops and some put the roles in sequence;
    a loop with a forward hand-off has a backward one too, which B arrives on after its
    forward wait, so that A cannot arrive twice in one phase of an object."""
    generic = ("ld", "ld") if reads_only else GENERIC_EVENTS * 2
    names = generic + ASYNC_EVENTS + FENCE_EVENTS
    segment = lambda: draw(segments(names))
    rounds = loops and draw(st.booleans())
    in_sequence = loops and draw(st.booleans())
    forward = draw(st.sampled_from([None] + FORWARD_KINDS * 2))
    backward = draw(st.sampled_from(([] if rounds else [None]) + BACKWARD_KINDS)) if forward else None
    if forward is None:
        role_a, role_b = segment(), segment()
    elif backward is None:
        role_a = segment() + [("arrive", "forward", forward)] + segment()
        role_b = segment() + [("wait", "forward", forward)] + segment()
    else:
        role_a = (segment() + [("arrive", "forward", forward)] + segment() + [("wait", "backward", backward)]
                  + segment())
        syncs = [("wait", "forward", forward), ("arrive", "backward", backward)]
        first, second = syncs if rounds or draw(st.booleans()) else syncs[::-1]
        role_b = segment() + [first] + segment() + [second] + segment()
    init_fenced = reads_only or draw(st.sampled_from([True] * 4 + [False]))
    once = rounds and forward in ("mbarrier", "mbarrier-noinc") and draw(st.booleans())
    top_tested = rounds and draw(st.booleans())
    return Program(tuple(role_a), tuple(role_b), init_fenced, rounds, in_sequence, once, top_tested=top_tested)


@st.composite
def three_role_programs(draw) -> Program:
    """CUTLASS's load-order shape (docs/fence.md §4.5): A and B loop with an mbarrier
    hand-off each way per round; in its first round only (behind a do-once predicate)
    A also arrives on "order", at any point of the round; role C runs once: it waits for
    "order", then arrives on "ready", which B waits for in its first round (after
    its release of A where A arrives on "order" after waiting for it, so that no program
    deadlocks)."""
    names = GENERIC_EVENTS * 2 + ASYNC_EVENTS + FENCE_EVENTS
    segment = lambda: draw(segments(names))
    forward = draw(st.sampled_from(["mbarrier", "mbarrier-noinc"]))
    role_a = (segment() + [("arrive", "forward", forward)] + segment() + [("wait", "backward", "mbarrier")]
              + segment())
    order = draw(st.integers(0, len(role_a)))
    role_a.insert(order, ("arrive", "order", "mbarrier"))
    role_b = (segment() + [("wait", "forward", forward)] + segment() + [("arrive", "backward", "mbarrier")]
              + segment())
    released = role_b.index(("arrive", "backward", "mbarrier")) + 1
    # A arriving on "order" only after B's release must not wait for B waiting on "ready"
    late = order > role_a.index(("wait", "backward", "mbarrier"))
    role_b.insert(draw(st.integers(released if late else 0, len(role_b))), ("wait", "ready", "mbarrier"))
    role_c = segment() + [("wait", "order", "mbarrier")] + segment() + [("arrive", "ready", "mbarrier")] + segment()
    init_fenced = draw(st.sampled_from([True] * 4 + [False]))
    return Program(tuple(role_a), tuple(role_b), init_fenced, rounds=True, role_c=tuple(role_c))


def render(program: Program) -> str:
    """The kernel's PTX text."""
    labels = itertools.count()
    lines = []
    roles = [("A", program.role_a), ("B", program.role_b)] + [("C", program.role_c)] * bool(program.role_c)
    once = program.once or bool(program.role_c)
    for name, role in roles:
        looping = program.rounds and name != "C"  # the third role runs once
        if program.in_sequence:
            lines += ["@!%p9 bra END_A;"] if name == "A" else ["END_A:", "@%p9 bra END_B;"]
        elif name == "A":
            lines.append("@!%p9 bra ROLE_B;")
        else:
            lines.append(f"ROLE_{name}:")
            if name == "B" and program.role_c:
                lines.append("@!%p5 bra ROLE_C;")
        if looping:  # %r20 counts the rounds, %r22 is the parity the mbarrier waits expect
            lines += ["mov.pred %p4, 0;"] * once + ["mov.u32 %r20, 0;", f"ROUND_{name}:"]
            if program.top_tested:
                lines += ["setp.ge.u32 %p3, %r20, %r21;", f"@%p3 bra DONE_{name};"]
            lines.append("and.b32 %r22, %r20, 1;")
        for statement in role:
            if looping and program.is_once(statement):
                n = next(labels)  # the first round only: %p4 is set on the way round
                lines += [f"@%p4 bra ONCE{n};", *render_statement(statement, labels), f"ONCE{n}:"]
            else:
                lines += render_statement(statement, labels)
        if looping and program.top_tested:
            lines += ["mov.pred %p4, -1;"] * once + ["add.u32 %r20, %r20, 1;", f"bra.uni ROUND_{name};",
                                                     f"DONE_{name}:"]
        elif looping:
            lines += ["mov.pred %p4, -1;"] * once + ["add.u32 %r20, %r20, 1;", "setp.lt.u32 %p3, %r20, %r21;",
                                                     f"@%p3 bra ROUND_{name};"]
        if not program.in_sequence:
            lines.append("ret;")
    if program.in_sequence:
        lines += ["END_B:", "ret;"]
    body = "".join(line + "\n" if line.endswith(":") else "\t" + line + "\n" for line in lines)
    third = THIRD_ROLE if program.role_c else ("", "")
    return (PROLOGUE + third[0] + (INIT_FENCE if program.init_fenced else "") + ROLE_SPLIT + third[1] + body
            + "}\n")


def render_statement(statement: tuple, labels) -> list[str]:
    kind = statement[0]
    if kind == "event":
        return render_event(statement)
    if kind == "if":
        n = next(labels)
        _, then, other = statement
        head = ["setp.ne.u32 %p1, %r13, 0;"]
        then_lines = [line for event in then for line in render_event(event)]
        if not other:
            return head + [f"@%p1 bra END{n};"] + then_lines + [f"END{n}:"]
        else_lines = [line for event in other for line in render_event(event)]
        return (head + [f"@%p1 bra ELSE{n};"] + then_lines + [f"bra.uni END{n};", f"ELSE{n}:"] + else_lines
                + [f"END{n}:"])
    _, direction, object_kind = statement
    arrive, wait = HANDOFFS[direction, object_kind]
    label = f"WAIT{next(labels)}"
    return [line.format(L=label) for line in (arrive if kind == "arrive" else wait)]


def render_event(event: tuple) -> list[str]:
    _, name, buffers = event
    a, b = (buffers + ("X", "X"))[:2]
    return [line.format(A=ADDRESS[a], DA=DESCRIPTOR[a], DB=DESCRIPTOR[b]) for line in EVENTS[name]]


# -- the explorer -----------------------------------------------------------------------------

TIDS = (0, 128)  # the representative %tid.x of role A (thread 0, which initialises) and of role B
THIRD_TID = 256  # and of role C, where there is one
ROUNDS = (1, 2)  # the values of k_rounds explored (`explore` takes more where a test needs them)
COUNTER, BOUND = "%r20", "%r21"  # a role's round counter and k_rounds
INNER = "%r24"  # the counter of a loop nested in a round, compared with a constant
ROLES = "ABC"
_SHARED_SYMBOL = re.compile(r"^\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+(\w+)", re.M)
_ADDRESS = re.compile(r"\[(%\w+)(?:\+(\d+))?\]")
_GUARD = re.compile(r"@(!?)(%p\d+)\s+")
_COMPARE = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
            "ge": operator.ge}


class Access(NamedTuple):
    """A generic access: by role `thread` at statement `index` in round `round` of its
    loop, of `kind` ``write`` or ``read``, to `target` (a buffer)."""

    thread: int
    index: int
    kind: str
    target: str
    round: tuple = (0, 0)  # (round, iteration of the nested loop)


class Effect(NamedTuple):
    """What a statement does: `kind` and its operands.

    ``write``/``read``: `target`; ``async``: `reads`, `writes`, `target` (the
    mbarrier it completes on); ``fence``; ``arrive``/``sync``
    (arrive then wait)/``try_wait``: `target` (the object), ``try_wait`` sets
    `predicate`; ``setp``: `predicate` and `test` (a function of %tid.x and the
    registers a loop counts with, or None when the value is unknown); ``count``: `target`
    (the round counter, or a nested loop's) set to 0 or, with `predicate` ``"+"``, incremented;
    ``rounds``: the loop bound `target` loaded from ``k_rounds``; ``bra``: the `target`
    label; ``ret``; ``none``. Guards are kept apart, in `Kernel.guards`.
    """

    kind: str
    target: str | None = None
    reads: frozenset = frozenset()
    writes: frozenset = frozenset()
    predicate: str | None = None
    test: object = None
    value: int = 0


class Violation(NamedTuple):
    """An async op (`statement`, in `role` A or B) reached with a `hazard` pending."""

    role: str
    statement: str
    hazard: str  # raw | war (the pass's names)


class Kernel(NamedTuple):
    """The entry's statements, with labels' indices and each statement's effect and guard."""

    statements: list[str]
    labels: dict[str, int]
    effects: list[Effect]
    guards: list[tuple[str, bool] | None]  # (predicate, required value) of a guarded statement


def parse_kernel(text: str) -> Kernel:
    """The entry's statements (labels included), with their effects and guards."""
    symbols = set(_SHARED_SYMBOL.findall(text))
    body = text[text.index("{") + 1:text.rindex("}")]
    statements = [line.strip() for line in body.splitlines()
                  if line.strip() and not line.strip().startswith((".reg", "//"))]
    origins = register_origins(statements, symbols)
    labels = {s[:-1]: i for i, s in enumerate(statements) if s.endswith(":")}
    guards, effects = [], []
    for statement in statements:
        guard = _GUARD.match(statement)
        guards.append((guard.group(2), guard.group(1) != "!") if guard else None)
        effects.append(effect(statement[guard.end():] if guard else statement, origins))
    return Kernel(statements, labels, effects, guards)


def register_origins(statements: list[str], symbols: set[str]) -> dict[str, tuple[str, int | None]]:
    """What each register holds: ``(symbol, byte offset)`` for an address of a shared
    symbol (offset None once shifted or masked into a descriptor), ``("%tid.x", 0)``."""
    origins: dict[str, tuple[str, int | None]] = {}
    for statement in statements:
        parts = re.split(r"[\s,;]+", statement.strip(";"))
        opcode, operands = parts[0], [p for p in parts[1:] if p]
        if not operands or not operands[0].startswith("%"):
            continue
        destination, sources = operands[0], operands[1:]
        if opcode.startswith("mov") and sources and (sources[0] in symbols or sources[0] == "%tid.x"):
            origins[destination] = (sources[0], 0)
        elif opcode.startswith("add") and sources[0] in origins and sources[1].isdigit():
            symbol, offset = origins[sources[0]]
            origins[destination] = (symbol, None if offset is None else offset + int(sources[1]))
        elif opcode.startswith("shr") and origins.get(sources[0]) == ("%tid.x", 0) and sources[1] == "7":
            origins[destination] = (WARPGROUP, 0)
        elif opcode.startswith("shfl.sync.idx") and origins.get(sources[0]) == (WARPGROUP, 0):
            origins[destination] = (WARPGROUP, 0)  # every lane of a warp holds its warpgroup's index
        elif opcode.split(".")[0] in ("shr", "and", "cvt", "or") and sources and sources[0] in origins:
            origins[destination] = (origins[sources[0]][0], None)
    return origins


def address(operand: re.Match, origins) -> str:
    """A buffer name, or ``symbol+offset`` for an mbarrier in an array."""
    symbol, offset = origins[operand.group(1)]
    offset += int(operand.group(2) or 0)
    return symbol if symbol in ADDRESS else f"{symbol}+{offset}"


def effect(statement: str, origins) -> Effect:
    """The `Effect` of one (unguarded) statement."""
    opcode = statement.split()[0].rstrip(";")
    operands = [address(m, origins) for m in _ADDRESS.finditer(statement) if m.group(1) in origins]
    if opcode.startswith("st.shared"):
        return Effect("write", operands[0])
    if opcode.startswith("ld.shared"):
        return Effect("read", operands[0])
    if opcode.startswith(("mbarrier.init", "fence.mbarrier_init")):
        return Effect("none")  # a write of a barrier, which the copies reach through the generic proxy too
    if opcode.startswith("wgmma.mma_async"):
        descriptors = statement.split("}")[1].split(",")[1:3]
        return Effect("async", reads=frozenset(origins[d.strip()][0] for d in descriptors))
    if opcode.startswith("cp.async.bulk") and ".shared::cluster.global" in opcode:  # a load into shared memory
        return Effect("async", operands[1], writes=frozenset([operands[0]]))
    if opcode.startswith("cp.async.bulk") and ".global.shared::cta" in opcode:  # a store from shared memory
        return Effect("async", reads=frozenset(operands))
    if opcode.startswith("fence.proxy.async"):
        return Effect("none" if opcode.endswith(".global") else "fence")
    if opcode in ("bar.arrive", "barrier.arrive"):
        return Effect("arrive", f"barrier {statement.split()[1].rstrip(',;')}")
    if opcode in ("bar.sync", "barrier.sync"):
        return Effect("sync", f"barrier {statement.split()[1].rstrip(',;')}")
    if opcode.startswith(("mbarrier.arrive", "cp.async.mbarrier.arrive")):
        return Effect("arrive", operands[0])
    if opcode.startswith("mbarrier.try_wait.parity"):
        return Effect("try_wait", operands[0], predicate=statement.split()[1].rstrip(","))
    if opcode.startswith("setp"):
        return setp_effect(statement, origins)
    if opcode == "mov.pred":  # a do-once predicate's constant
        value = statement.split()[-1].rstrip(";") != "0"
        return Effect("setp", predicate=statement.split()[1].rstrip(","), test=lambda tid, registers: value)
    if statement == f"ld.param.u32 {BOUND}, [k_rounds];":
        return Effect("rounds", BOUND)
    if statement == f"mov.u32 {COUNTER}, 0;":
        return Effect("count", COUNTER)
    if statement == f"add.u32 {COUNTER}, {COUNTER}, 1;":
        return Effect("count", COUNTER, predicate="+")
    if statement == f"mov.u32 {INNER}, 0;":
        return Effect("count", INNER)
    if statement == f"add.u32 {INNER}, {INNER}, 1;":
        return Effect("count", INNER, predicate="+")
    if opcode.startswith("bra"):
        return Effect("bra", statement.split()[1].rstrip(";"))
    if opcode == "ret":
        return Effect("ret")
    return Effect("none")


def setp_effect(statement: str, origins) -> Effect:
    """A comparison of %tid.x with a constant, or of the round counter with the bound,
    is known per thread; others are not."""
    opcode, predicate, left, right = re.split(r"[\s,;]+", statement.strip(";"))[:4]
    compare = _COMPARE[opcode.split(".")[1]]
    if origins.get(left, (None,))[0] == "%tid.x":
        return Effect("setp", predicate=predicate, test=lambda tid, registers: compare(tid, int(right)))
    if origins.get(left) == (WARPGROUP, 0):
        return Effect("setp", predicate=predicate, test=lambda tid, registers: compare(tid >> 7, int(right)))
    if (left, right) == (COUNTER, BOUND):
        return Effect("setp", predicate=predicate, test=lambda tid, registers: compare(registers[left], registers[right]))
    if left == INNER and right.isdigit():
        return Effect("setp", predicate=predicate, test=lambda tid, registers: compare(registers[left], int(right)))
    return Effect("setp", predicate=predicate)


class Memory(NamedTuple):
    """The generic accesses that precede a point of a thread in causality order
    (`view`) and those of them with a proxy fence on some path to the point
    (`fenced`). `per_path`: the pending accesses as the pass counts them, each path's
    kept apart and unioned at a wait, so that one fenced path does not order an access
    another path brings unfenced (docs/fence.md §8, a fence on one causality path; used only to steer around it)."""

    view: frozenset = frozenset()
    fenced: frozenset = frozenset()
    per_path: frozenset = frozenset()

    @property
    def pending(self) -> frozenset:
        return self.view - self.fenced

    def after_access(self, access: Access) -> "Memory":
        return Memory(self.view | {access}, self.fenced, self.per_path | {access})

    def after_fence(self) -> "Memory":
        """After a proxy fence, which orders every access in view."""
        return Memory(self.view, self.fenced | self.view, self.per_path - self.view)

    def merged(self, other: "Memory") -> "Memory":
        return Memory(self.view | other.view, self.fenced | other.fenced, self.per_path | other.per_path)


class Thread(NamedTuple):
    """One role's state: `pc` (None once returned), predicate values, `memory`, the
    round counter and bound (`registers`) and how many times it has synchronized on
    each object (`uses`, which gives the phase of its next operation there)."""

    pc: int | None
    predicates: frozenset
    memory: Memory
    registers: frozenset = frozenset()
    uses: frozenset = frozenset()

    def phase(self, target: str) -> int:
        return dict(self.uses).get(target, 0)

    def used(self, target: str) -> frozenset:
        return frozenset({**dict(self.uses), target: self.phase(target) + 1}.items())


class Arrival(NamedTuple):
    """A record left on a synchronization object: who arrived, in which `phase` (the
    thread's count of earlier operations on it: each role takes part once per phase),
    with what memory."""

    target: str
    thread: int
    memory: Memory
    phase: int = 0


class Exploration(NamedTuple):
    violations: set[Violation]
    per_path_violations: set[Violation]  # the same under `Memory.per_path` (docs/fence.md §8, a fence on one causality path)
    finished: bool  # some interleaving runs every role to `ret` (the program cannot deadlock for sure)


#: the statements that read or change what the threads share (the arrival records)
SHARED_STEPS = ("arrive", "sync", "try_wait")
#: The most states one exploration visits before the program is rejected from a property
#: test. Random programs reach up to 39,000 (three roles, five segments of ifs on the
#: flag, each taken both ways in each round by each thread); one drawn with seed 303 ran
#: for more than five minutes. The worked examples stay far below it.
STATE_BUDGET = 200_000


def explore(text: str, rounds_explored: tuple = ROUNDS) -> Exploration:
    """Every violation of any interleaving of the roles, for each number of rounds
    in `rounds_explored` (see the module docstring). Past `STATE_BUDGET` states the
    program is rejected (`hypothesis.reject`: only property tests explore such ones)."""
    kernel = parse_kernel(text)
    tids = TIDS + (THIRD_TID,) * ("ROLE_C" in kernel.labels)
    found = {"isa": set(), "per-path": set()}
    finished = True
    looping = any(effect.kind == "count" for effect in kernel.effects)
    for rounds in rounds_explored if looping else rounds_explored[:1]:
        start = (tuple(Thread(0, frozenset(), Memory()) for _ in tids), frozenset())
        seen, work, ended = {start}, [start], False
        while work:
            threads, arrivals = work.pop()
            ended |= all(thread.pc is None for thread in threads)
            running = [index for index, thread in enumerate(threads) if thread.pc is not None]
            # a step that touches only its own thread commutes with every other thread's:
            # take it alone (the interleavings that order it later reach the same states)
            local = next((index for index in running if kernel.effects[threads[index].pc].kind not in SHARED_STEPS),
                         None)
            for index in running if local is None else [local]:
                thread = threads[index]
                for moved, arrived, violations in step(kernel, tids, index, thread, arrivals, rounds):
                    for model, violation in violations:
                        found[model].add(violation)
                    state = (threads[:index] + (moved,) + threads[index + 1:], arrived)
                    if state not in seen:
                        seen.add(state)
                        work.append(state)
            if len(seen) > STATE_BUDGET:
                reject()  # too many interleavings to wait for: hypothesis draws another program
        finished &= ended
    return Exploration(found["isa"], found["per-path"], finished)


def step(kernel: Kernel, tids: tuple, index: int, thread: Thread, arrivals: frozenset, rounds: int):
    """The ways `thread` (role `index`, ``%tid.x`` ``tids[index]``) can execute its next statement, with `rounds` in
    ``k_rounds``: a list of (its new state, the arrival records, violations found as
    ``(model, violation)``); empty when it is blocked."""
    pc, predicates, memory = thread.pc, dict(thread.predicates), thread.memory
    registers = dict(thread.registers)
    statement, action = kernel.statements[pc], kernel.effects[pc]
    guard = kernel.guards[pc]
    if statement.endswith(":") or (guard and predicates.get(guard[0]) != guard[1]):
        action = Effect("none")
    at = lambda **changes: thread._replace(pc=pc + 1, **changes)
    kind = action.kind
    if kind in ("write", "read"):
        access = Access(index, pc, kind, action.target, (registers.get(COUNTER, 0), registers.get(INNER, 0)))
        return [(at(memory=memory.after_access(access)), arrivals, set())]
    if kind == "fence":
        return [(at(memory=memory.after_fence()), arrivals, set())]
    if kind == "async":
        found = {("isa", v) for v in hazards(memory.pending, action, ROLES[index], statement)}
        found |= {("per-path", v) for v in hazards(memory.per_path, action, ROLES[index], statement)}
        return [(at(), arrivals, found)]
    if kind == "arrive":
        arrival = Arrival(action.target, index, memory, thread.phase(action.target))
        return [(at(uses=thread.used(action.target)), arrivals | {arrival}, set())]
    if kind == "sync":
        return barrier_sync(thread, index, action.target, arrivals, len(tids))
    if kind == "try_wait":
        phase = thread.phase(action.target)
        completed = [a for a in arrivals if a.target == action.target and a.phase == phase]
        waited = at(memory=imported(memory, completed),
                    predicates=with_value(predicates, action.predicate, bool(completed)),
                    uses=thread.used(action.target) if completed else thread.uses)
        return [(waited, arrivals, set())]
    if kind in ("count", "rounds"):
        value = rounds if kind == "rounds" else registers.get(action.target, 0) + 1 if action.predicate else 0
        return [(at(registers=frozenset({**registers, action.target: value}.items())), arrivals, set())]
    if kind == "setp":
        values = [action.test(tids[index], registers)] if action.test else [False, True]
        return [(at(predicates=with_value(predicates, action.predicate, value)), arrivals, set()) for value in values]
    if kind == "bra":
        return [(thread._replace(pc=kernel.labels[action.target]), arrivals, set())]
    if kind == "ret":
        return [(thread._replace(pc=None), arrivals, set())]
    return [(at(), arrivals, set())]


def barrier_sync(thread: Thread, index: int, target: str, arrivals: frozenset, roles: int):
    """``bar.sync``: arrive (staying on the statement), then pass once all `roles` have
    arrived in this phase (the barriers count every thread the roles stand for: named
    barriers appear only in two-role programs), importing all their views."""
    phase = thread.phase(target)
    records = [a for a in arrivals if a.target == target and a.phase == phase]
    if index not in {a.thread for a in records}:
        return [(thread, arrivals | {Arrival(target, index, thread.memory, phase)}, set())]
    if len(records) < roles:
        return []
    moved = thread._replace(pc=thread.pc + 1, memory=imported(thread.memory, records), uses=thread.used(target))
    return [(moved, arrivals, set())]


def imported(memory: Memory, records) -> Memory:
    """`memory` after a wait that observes the arrival `records`."""
    for record in records:
        memory = memory.merged(record.memory)
    return memory


def with_value(predicates: dict, name: str, value: bool) -> frozenset:
    return frozenset({**predicates, name: value}.items())


def hazards(pending: frozenset, op: Effect, role: str, statement: str) -> set[Violation]:
    """The violations an async op meets with these accesses pending."""
    found = set()
    for access in pending:
        if access.kind == "write" and access.target in op.reads | op.writes:
            found.add(Violation(role, statement, "raw"))
        elif access.kind == "read" and access.target in op.writes:
            found.add(Violation(role, statement, "war"))
    return found


def counted(violations: set[Violation], war: bool) -> set[Violation]:
    """The violations the pass is asked to fence: all, or all but WAR."""
    return {v for v in violations if war or v.hazard != "war"}


# -- where the pass and the explorer disagree (docs/fence.md §8) ---------------------------------


def fenced_on_one_path_only(exploration: Exploration, war: bool) -> bool:
    """An access reaches an async op along two causality paths and only one of them
    holds a proxy fence (docs/fence.md §8, a fence on one causality path). The ISA orders it (a fence on *a* path
    W -> F -> Y suffices); the pass unions what each path leaves pending and fences.
    Here: A's accesses that go to B and come back while A (or B) fenced them on one of
    the ways."""
    return counted(exploration.violations, war) != counted(exploration.per_path_violations, war)


# -- the properties ---------------------------------------------------------------------------

PASS_MODES = [dict(placement=placement, fence_side=side)
              for placement in ("inline", "hoist") for side in ("issuer", "writer")]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.booleans())
def test_pass_fences_exactly_the_programs_with_a_violation(program, war):
    """(a), and (c) with `war` off: inline, issuer side, the pass inserts a fence iff
    the explorer finds a violation of a hazard it is asked about, and reports only
    hazards the explorer found."""
    text = render(program)
    exploration = explore(text)
    assert exploration.finished
    assume(not fenced_on_one_path_only(exploration, war))  # docs/fence.md §8, a fence on one causality path
    expected = counted(exploration.violations, war)
    _, report = fence_text(text, "k.ptx", placement="inline", fence_side="issuer", war=war)
    assert bool(report.fences) == bool(expected), (text, expected, [f.message() for f in report.fences])
    assert {f.hazard for f in report.fences} <= {v.hazard for v in expected}


#: seed 1025: A writes X after the backward hand-off and hands it over at the next forward
#: one; B's TMA load of X in the round after that needs a fence (a raw hazard, which two
#: rounds of the explorer do not reach), besides B's own ld X before that load (war)
THIRD_ROUND = Program(
    role_a=(("arrive", "forward", "named"), ("wait", "backward", "named"), ("event", "st", ("X",)),
            ("event", "st", ("X",))),
    role_b=(("event", "tma_load", ("X",)), ("wait", "forward", "named"), ("arrive", "backward", "named"),
            ("event", "ld", ("X",))),
    init_fenced=True, rounds=True, in_sequence=False, once=False, role_c=())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(loops=True), st.booleans())
@example(THIRD_ROUND, True)
def test_pass_fences_exactly_the_looping_programs_with_a_violation(program, war):
    """(a) for roles that loop (roles in sequence aside: there the pass follows paths
    from one role's code into the other's that no thread takes)."""
    assume(not program.in_sequence)
    text = render(program)
    _, report = fence_text(text, "k.ptx", placement="inline", fence_side="issuer", war=war)
    exploration = explore(text)
    if {f.hazard for f in report.fences} - {v.hazard for v in counted(exploration.violations, war)}:
        # a write may take a third round to come back: A writes after the hand-off of one
        # round, hands it over in the next, and B's copy of the round after reads it
        exploration = explore(text, ROUNDS + (3,))
    assume(not fenced_on_one_path_only(exploration, war))  # docs/fence.md §8, a fence on one causality path
    expected = counted(exploration.violations, war)
    assert bool(report.fences) == bool(expected), (text, expected, [f.message() for f in report.fences])
    assert {f.hazard for f in report.fences} <= {v.hazard for v in expected}


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.booleans())
def test_every_inline_issuer_fence_is_needed(program, war):
    """Inline, issuer side: taking out any one inserted fence brings a violation back
    (under the ISA, or, where docs/fence.md §8, a fence on one causality path makes the pass fence, per path)."""
    text = render(program)
    fenced, _ = fence_text(text, "k.ptx", placement="inline", fence_side="issuer", war=war)
    for index in inserted_lines(text, fenced):
        lines = fenced.splitlines(keepends=True)
        exploration = explore("".join(lines[:index] + lines[index + 1:]))
        assert counted(exploration.violations | exploration.per_path_violations, war), (fenced, index + 1)


def inserted_lines(original: str, fenced: str) -> list[int]:
    """The 0-based indices of the lines of `fenced` that `original` does not have
    (the pass only inserts lines, without loops in the input)."""
    before, after = original.splitlines(), fenced.splitlines()
    inserted, position = [], 0
    for index, line in enumerate(after):
        if position < len(before) and line == before[position]:
            position += 1
        else:
            inserted.append(index)
    return inserted


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(PASS_MODES), st.booleans())
def test_fenced_output_has_no_violation(program, mode, war):
    """(b): in every mode the output has no violation left, and the pass adds nothing
    to its own output."""
    text = render(program)
    fenced, _ = fence_text(text, "k.ptx", war=war, **mode)
    assert counted(explore(fenced).violations, war) == set(), (text, fenced)
    assert not fence_text(fenced, "k.ptx", war=war, **mode)[1].fences


#: drawn unseeded in December 2026: A writes X, hands it to B at bar.arrive 1, writes X
#: again, and waits for B's bar.arrive 2 before its wgmma on X. B's fence after bar.sync
#: 1 orders A's first write only, but both writes are one fact (the same bytes), and
#: the credit B's arrive carried back cleared A's second, unfenced, write too
#: (docs/fence.md §4.4: a thread's own instance is credited only for a fact one access makes)
WRITTEN_AGAIN_AFTER_THE_HAND_OFF = Program(
    role_a=(("if", (("event", "st", ("X",)),), ()), ("arrive", "forward", "named"), ("event", "st", ("X",)),
            ("event", "tma_load", ("Y",)), ("wait", "backward", "named"), ("event", "wgmma", ("X", "X"))),
    role_b=(("wait", "forward", "named"), ("event", "fence", ()), ("arrive", "backward", "named")),
    init_fenced=True, rounds=False, in_sequence=False, once=False, role_c=())


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(loops=True), st.sampled_from(PASS_MODES), st.booleans())
@example(WRITTEN_AGAIN_AFTER_THE_HAND_OFF, {"placement": "inline", "fence_side": "issuer"}, False)
def test_fenced_loops_and_roles_in_sequence_have_no_violation(program, mode, war):
    """(b) for roles that loop (one hand-off each way per round, so that the roles
    keep the phases of their objects in step) and for roles one after the other."""
    text = render(program)
    assert explore(text).finished
    fenced, _ = fence_text(text, "k.ptx", war=war, **mode)
    assert counted(explore(fenced).violations, war) == set(), (text, fenced)


def by_warpgroup(text: str, declared: str) -> str:
    """`text` with its roles chosen as CUTLASS chooses them: by the warpgroup index
    broadcast from lane 0 (``shfl.sync.idx`` of ``%tid.x >> 7``), in a kernel that
    declares `declared` (nvcc writes ``__launch_bounds__(384)`` as ``.maxntid 384, 1, 1``
    for sm_90a, as ``.maxntid 384`` for sm_100a)."""
    text = text.replace("k_rounds)\n{", f"k_rounds)\n{declared}\n{{")
    text = text.replace(ROLE_SPLIT, "\tbar.sync 0;\n\tshr.u32 %r9, %r6, 7;\n"
                                    "\tshfl.sync.idx.b32 %r15, %r9, 0, 31, -1;\n\tsetp.lt.u32 %p9, %r15, 1;\n")
    return text.replace(THIRD_ROLE[1], "\tsetp.lt.u32 %p5, %r15, 2;\n")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(programs(loops=True), three_role_programs()), st.sampled_from([".maxntid 384, 1, 1", ".maxntid 384"]),
       st.sampled_from(PASS_MODES), st.booleans())
def test_roles_chosen_by_a_broadcast_warpgroup_index_have_no_violation_once_fenced(program, declared, mode, war):
    """(b) with the roles split as CUTLASS splits them, where the thread sets follow the
    broadcast (a one-dimensional block: which threads run each role's code keeps one role's
    fence from crediting the other's, docs/fence.md §4.4) and where they cannot (a lone
    ``.maxntid``)."""
    text = by_warpgroup(render(program), declared)
    assert explore(text).finished
    fenced, _ = fence_text(text, "k.ptx", war=war, **mode)
    assert counted(explore(fenced).violations, war) == set(), (text, fenced)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(three_role_programs(), st.sampled_from(PASS_MODES), st.booleans())
def test_fenced_three_role_programs_have_no_violation(program, mode, war):
    """(b) for three roles, where what A hands over at its one arrive on "order" is
    limited to what may run before that barrier completes (docs/fence.md §4.5): the
    limit never lets a violation through."""
    text = render(program)
    assert explore(text).finished
    fenced, _ = fence_text(text, "k.ptx", war=war, **mode)
    assert counted(explore(fenced).violations, war) == set(), (text, fenced)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(reads_only=True))
def test_war_off_leaves_read_only_programs_alone(program):
    """(c): without generic writes the only hazard is WAR: none with ``war=False``, and
    with WAR on a fence iff the explorer finds one."""
    text = render(program)
    exploration = explore(text)
    assert {v.hazard for v in exploration.violations} <= {"war"}
    assert not fence_text(text, "k.ptx", placement="inline", war=False)[1].fences
    assume(not fenced_on_one_path_only(exploration, war=True))  # docs/fence.md §8, a fence on one causality path
    assert bool(fence_text(text, "k.ptx", placement="inline")[1].fences) == bool(exploration.violations)


# -- hand-written examples --------------------------------------------------------------------

FORWARD_NAMED = (("arrive", "forward", "named"), ("wait", "forward", "named"))
FORWARD_MBARRIER = (("arrive", "forward", "mbarrier"), ("wait", "forward", "mbarrier"))


def handed_off(before_arrive: list, after_wait: list, handoff=FORWARD_NAMED, **extra) -> Program:
    """A writes/reads, arrives; B waits, then issues."""
    arrive, wait = handoff
    return Program(tuple(before_arrive) + (arrive,), (wait,) + tuple(after_wait), **extra)


def ev(name: str, *buffers: str) -> tuple:
    return ("event", name, buffers)


EXAMPLES = {
    # name: (program, violations the explorer finds as (role, hazard), fences with war on, with war off)
    "st X, bar | bar, wgmma X": (handed_off([ev("st", "X")], [ev("wgmma", "X", "X")]), {("B", "raw")}, 1, 1),
    "st X, mbarrier | try_wait, wgmma X": (
        handed_off([ev("st", "X")], [ev("wgmma", "X", "X")], FORWARD_MBARRIER), {("B", "raw")}, 1, 1),
    "st Y, bar | bar, wgmma X": (handed_off([ev("st", "Y")], [ev("wgmma", "X", "X")]), set(), 0, 0),
    "st X, fence, bar | bar, wgmma X": (
        handed_off([ev("st", "X"), ev("fence")], [ev("wgmma", "X", "X")]), set(), 0, 0),
    "st X, bar | bar, fence, TMA store X": (
        handed_off([ev("st", "X")], [ev("fence"), ev("tma_store", "X")]), set(), 0, 0),
    "ld X, bar | bar, TMA load X": (handed_off([ev("ld", "X")], [ev("tma_load", "X")]), {("B", "war")}, 1, 0),
    "ld X, bar | bar, bulk store X": (handed_off([ev("ld", "X")], [ev("bulk_store", "X")]), set(), 0, 0),
    "st X | wgmma X, never handed off": (
        Program((ev("st", "X"),), (ev("wgmma", "X", "X"),)), set(), 0, 0),
    "bar, st X | bar, wgmma X: written after the arrive": (
        Program((FORWARD_NAMED[0], ev("st", "X")), (FORWARD_NAMED[1], ev("wgmma", "X", "X"))), set(), 0, 0),
    "st X, arrive, fence, wait, wgmma X | st X, wait, arrive: B's own write is not A's to credit": (
        Program((ev("st", "X"), ("arrive", "forward", "named"), ev("fence"), ("wait", "backward", "named"),
                 ev("wgmma", "X", "X")),
                (ev("st", "X"), ("wait", "forward", "named"), ("arrive", "backward", "named"))),
        {("A", "raw")}, 1, 1),
    "unfenced mbarrier.init | TMA load: the copy reaches its barrier through the generic proxy": (
        Program((), (ev("tma_load", "Y"),), init_fenced=False), set(), 0, 0),
    "rounds of: bar, fence, bar, TMA load X | st X, bar, bar: A's fence comes before this round's write": (
        Program((("arrive", "forward", "named"), ev("fence"), ("wait", "backward", "named"), ev("tma_load", "X")),
                (ev("st", "X"), ("wait", "forward", "named"), ("arrive", "backward", "named")), rounds=True),
        {("A", "raw")}, 1, 1),
}


@pytest.mark.parametrize("name", EXAMPLES)
def test_examples(name):
    program, expected, fences, fences_without_war = EXAMPLES[name]
    text = render(program)
    assert {(v.role, v.hazard) for v in explore(text).violations} == expected
    for war, count in ((True, fences), (False, fences_without_war)):
        fenced, report = fence_text(text, "k.ptx", placement="inline", war=war)
        assert len(report.fences) == count, [f.message() for f in report.fences]
        assert counted(explore(fenced).violations, war) == set()


def test_wgmma_on_y_is_not_fenced_for_a_store_to_x():
    """The pass localizes the descriptors: a wgmma reading Y's descriptors ignores X."""
    text = render(Program((ev("st", "X"), ev("wgmma", "Y", "Y"), ev("wgmma", "X", "Y")), ()))
    _, report = fence_text(text, "k.ptx", placement="inline")
    assert [f.line for f in report.fences] == [line_of(text, "%rd1, %rd2")]


FORWARD, BACKWARD = ("arrive", "forward", "named"), ("wait", "backward", "named")
BACK_TO_A = (("wait", "forward", "named"), ("arrive", "backward", "named"))

#: docs/fence.md §8, a fence on one causality path: an access fenced on one causality path to the async op and not on another.
FENCED_ON_ONE_PATH = {
    "B fences A's write before handing it back": Program(
        (ev("st", "X"), FORWARD, BACKWARD, ev("wgmma", "X", "X")),
        (("wait", "forward", "named"), ev("fence"), ("arrive", "backward", "named"))),
    "A fences its own write, which also comes back through B": Program(
        (ev("st", "X"), FORWARD, ev("fence"), BACKWARD, ev("wgmma", "X", "X")), BACK_TO_A),
}


@pytest.mark.parametrize("name", FENCED_ON_ONE_PATH)
def test_the_explorer_orders_an_access_fenced_on_one_path(name):
    """The ISA orders these (no violation); counting pending accesses per path does not."""
    exploration = explore(render(FENCED_ON_ONE_PATH[name]))
    assert exploration.violations == set() and exploration.per_path_violations


def test_the_explorer_sees_a_write_come_back_unfenced():
    program = Program((ev("st", "X"), FORWARD, BACKWARD, ev("wgmma", "X", "X")), BACK_TO_A)
    assert {(v.role, v.hazard) for v in explore(render(program)).violations} == {("A", "raw")}


#: the one the pass still fences: A's credit for its own write (a thread credits only
#: what another thread handed it, docs/fence.md §4.4 and §8)
OWN_WRITE_BACK = "A fences its own write, which also comes back through B"


@pytest.mark.parametrize("name", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="docs/fence.md §8, a fence on one causality "
                                               "path: a thread's fence of its own access is not credited"))
    if name == OWN_WRITE_BACK else name for name in FENCED_ON_ONE_PATH])
def test_the_pass_orders_an_access_fenced_on_one_path(name):
    """Another thread's fence, credited through the hand-offs (docs/fence.md §4.4)."""
    assert not fence_text(render(FENCED_ON_ONE_PATH[name]), "k.ptx", placement="inline")[1].fences


#: A's one arrive on "order" comes before its first wait for B's release, so nothing B
#: does reaches C through it; whether B reads X before or after waiting for C's "ready"
READ_BY_B = {
    "after": Program((("arrive", "forward", "mbarrier"), ("arrive", "order", "mbarrier"),
                      ("wait", "backward", "mbarrier")),
                     (("wait", "forward", "mbarrier"), ("wait", "ready", "mbarrier"), ev("ld", "X"),
                      ("arrive", "backward", "mbarrier")),
                     rounds=True, role_c=(("wait", "order", "mbarrier"), ev("tma_load", "X"),
                                          ("arrive", "ready", "mbarrier"))),
    "before": Program((("arrive", "forward", "mbarrier"), ("arrive", "order", "mbarrier"),
                       ("wait", "backward", "mbarrier")),
                      (("wait", "forward", "mbarrier"), ev("ld", "X"), ("arrive", "backward", "mbarrier"),
                       ("wait", "ready", "mbarrier")),
                      rounds=True, role_c=(("wait", "order", "mbarrier"), ev("tma_load", "X"),
                                           ("arrive", "ready", "mbarrier"))),
}


@pytest.mark.parametrize("when", ["after", "before"])
def test_a_read_that_cannot_reach_the_one_arrive_needs_no_fence(when):
    """The explorer finds no violation, and the pass agrees: where B reads after waiting
    for C (CUTLASS's epilogue) no read of B runs before 'order' completes; where B reads
    before, its read reaches A only through A's wait, after A's one arrive, which hands
    on only what the waits before it import (docs/fence.md §4.5, items 4 and 5)."""
    text = render(READ_BY_B[when])
    assert explore(text) == Exploration(set(), set(), True)
    assert not fence_text(text, "k.ptx", placement="inline")[1].fences


#: A arrives on `forward` in its first round only, meets B at `bar.sync`, then writes X;
#: B waits for `forward` in its first round, arrives on the named barrier, loads X. A's
#: bar.sync completes only with B's arrive, after B's wait: no write of A precedes the
#: completion of `forward`, so no write of A reaches a load through it, and A's later
#: writes never precede B's loads (B never waits for A again): no violation.
WRITE_AFTER_THE_NAMED_WAIT = Program(
    (("arrive", "forward", "mbarrier"), ("wait", "backward", "named"), ev("st", "X")),
    (("wait", "forward", "mbarrier"), ("arrive", "backward", "named"), ev("tma_load", "X")),
    rounds=True, once=True)


def test_a_write_after_a_named_wait_that_follows_the_one_arrive_needs_no_fence():
    """A's write follows its one arrive in every round, and what A's bar.sync hands back
    to A itself comes after that arrive too: the arrive hands on neither
    (docs/fence.md §4.5, item 5)."""
    text = render(WRITE_AFTER_THE_NAMED_WAIT)
    assert explore(text) == Exploration(set(), set(), True)
    assert not fence_text(text, "k.ptx", placement="inline")[1].fences


def nested_kernel(body: list, top_tested: bool = False) -> str:
    """Every thread runs one loop of ``k_rounds`` rounds, the bar.syncs in it included;
    ``("A", lines)`` and ``("B", lines)`` run in role A's or B's threads only (behind a
    test of ``%tid.x``), and ``INNER`` ... ``END`` is a loop of two iterations nested in
    the round (Triton's persistent GEMMs: every warp runs the tile loop and its K loop).
    With `top_tested` the round loop tests its count before each round (``while``, as
    ``-G`` builds keep every loop) instead of after it."""
    lines = ["mov.u32 %r20, 0;", "ROUND:"]
    if top_tested:
        lines += ["setp.ge.u32 %p3, %r20, %r21;", "@%p3 bra DONE;"]
    lines.append("and.b32 %r22, %r20, 1;")
    for n, item in enumerate(body):
        if isinstance(item, tuple):
            role, statements = item
            lines += [f"@{'!' if role == 'A' else ''}%p9 bra SKIP{n};", *statements, f"SKIP{n}:"]
        else:
            lines += {"INNER": [f"mov.u32 {INNER}, 0;", "NESTED:"],
                      "END": [f"add.u32 {INNER}, {INNER}, 1;", f"setp.lt.u32 %p2, {INNER}, 2;",
                              "@%p2 bra NESTED;"]}.get(item, [item])
    if top_tested:
        lines += ["add.u32 %r20, %r20, 1;", "bra.uni ROUND;", "DONE:", "ret;"]
    else:
        lines += ["add.u32 %r20, %r20, 1;", "setp.lt.u32 %p3, %r20, %r21;", "@%p3 bra ROUND;", "ret;"]
    body_text = "".join(line + "\n" if line.endswith(":") else "\t" + line + "\n" for line in lines)
    return PROLOGUE + INIT_FENCE + ROLE_SPLIT + body_text + "}\n"


SYNC = "bar.sync 3;"
WRITE_X = ("A", ["st.shared.b32 [%r1], %r10;"])
LOAD_X = ("B", render_event(("event", "tma_load", ("X",))))


NESTED_BODIES = [
    # A's write goes to B at the first sync of the nested loop; B loads X after the loop
    ([SYNC, WRITE_X, "INNER", SYNC, "END", LOAD_X, SYNC], True),
    # the same, A fencing its write before the nested loop
    ([SYNC, ("A", [*WRITE_X[1], "fence.proxy.async.shared::cta;"]), "INNER", SYNC, "END", LOAD_X, SYNC], False),
    # B fences after the nested loop, before its load
    ([SYNC, WRITE_X, "INNER", SYNC, "END", ("B", ["fence.proxy.async.shared::cta;", *LOAD_X[1]]), SYNC], False),
]
NESTED_IDS = ["handed-in-the-nested-loop", "writer-fenced", "issuer-fenced"]


@pytest.mark.parametrize("top_tested", [False, True], ids=["do-while", "while"])
@pytest.mark.parametrize("body, violation", NESTED_BODIES, ids=NESTED_IDS)
def test_bar_syncs_in_a_nested_loop_every_thread_runs_alike(body, violation, top_tested):
    """The explorer and the pass agree on a loop every thread runs, which syncs before,
    in and after a loop nested in its rounds, each the same number of times: the
    syncs of the nested loop hand over what was written before them (docs/fence.md
    §4.2 keeps them apart only from the other syncs of the round), whether the round
    loop tests its count after each round or before it. (The pass follows
    paths from A's code into B's that no thread takes, around the round, so a write of A
    after B's fence in the round is not a case it can be silent on.)"""
    text = nested_kernel(body, top_tested)
    exploration = explore(text)
    assert exploration.finished
    assert bool(counted(exploration.violations, False)) == violation
    fenced, report = fence_text(text, "k.ptx", placement="inline", fence_side="issuer", war=False)
    assert bool(report.fences) == violation, [f.message() for f in report.fences]
    assert counted(explore(fenced).violations, False) == set()


@st.composite
def nested_bodies(draw) -> list:
    """A random round for `nested_kernel`: events of role A or B, a sync before and after
    a nested loop or not, and one in the nested loop among more events."""
    names = GENERIC_EVENTS * 2 + ASYNC_EVENTS + FENCE_EVENTS

    def part() -> list:
        return [(draw(st.sampled_from("AB")), render_event(draw(events(names))))
                for _ in range(draw(st.integers(0, 2)))]

    syncs = lambda: [SYNC] * draw(st.integers(0, 1))
    return (part() + syncs() + part() + ["INNER"] + part() + [SYNC] + part() + ["END"] + part() + syncs()
            + part())


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(nested_bodies(), st.sampled_from(PASS_MODES), st.booleans(), st.booleans())
def test_fenced_nested_loops_have_no_violation(body, mode, war, top_tested):
    """(b) for a loop every thread runs (tested after or before each round), which may
    sync before and after a loop nested in its rounds and syncs in it: in every mode,
    fences hoisted out of either loop included, the output has no violation left. (Role
    A's and B's events sit in one loop here, so the pass also follows paths from one
    role's code into the other's: this checks placement and soundness, not how
    precisely phases are told apart.)"""
    text = nested_kernel(body, top_tested)
    assert explore(text).finished
    fenced, _ = fence_text(text, "k.ptx", war=war, **mode)
    assert counted(explore(fenced).violations, war) == set(), (text, fenced)


def line_of(text: str, fragment: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if fragment in line)


# -- ptxas ------------------------------------------------------------------------------------


def assemble(text: str, name: str) -> None:
    from ptxkit.ptxas import assemble as run_ptxas

    run_ptxas(text, "sm_90a", options=("-c",), filename=f"{name}.ptx", cache=False)  # raises PtxasError if not


@pytest.mark.ptxas
@pytest.mark.parametrize("name", EXAMPLES)
def test_examples_assemble(name):
    text = render(EXAMPLES[name][0])
    assemble(text, "example")
    assemble(fence_text(text, "k.ptx", placement="inline", fence_side="writer")[0], "fenced")


@pytest.mark.ptxas
@pytest.mark.parametrize("top_tested", [False, True], ids=["do-while", "while"])
@pytest.mark.parametrize("body, violation", NESTED_BODIES, ids=NESTED_IDS)
def test_nested_loop_examples_assemble(body, violation, top_tested):
    text = nested_kernel(body, top_tested)
    assemble(text, "nested")
    assemble(fence_text(text, "k.ptx", placement="inline", fence_side="writer")[0], "fenced")


@pytest.mark.ptxas
@pytest.mark.parametrize("when", READ_BY_B)
def test_three_role_examples_assemble(when):
    text = render(READ_BY_B[when])
    assemble(text, "three")
    assemble(fence_text(text, "k.ptx", placement="inline", fence_side="writer")[0], "fenced")


@pytest.mark.ptxas
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(loops=True), st.sampled_from(PASS_MODES))
def test_generated_programs_assemble(program, mode):
    text = render(program)
    assemble(text, "generated")
    assemble(fence_text(text, "k.ptx", **mode)[0], "fenced")
