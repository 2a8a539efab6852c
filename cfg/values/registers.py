"""The abstract value of registers at chosen instructions (docs/fence.md §3).

A forward analysis over a flow graph (plain or inlined, `ptxkit.cfg.flow.inline`) with
`ptxkit.cfg.values.values` as its lattice. It is *demand driven*: only the instructions
that can contribute to a queried operand are evaluated (the backward slice of the
queries through register definitions, call parameters and return values), so a
kernel with a dozen shared-memory accesses costs a walk over a few hundred
instructions, not over the whole function. Loops settle through widening.

What it knows (the rest is top): ``mov`` of constants, special registers (``%tid.x``
is ``[0, 1023]``) and variables (a ``.shared`` symbol is a window address into its
`Region`; every ``extern .shared`` array is the one dynamic region); integer
arithmetic (``add sub mul mad shl shr and or xor min max div rem bfe bfi``, ``cvt`` between
integer widths, ``mov`` packing and unpacking, ``shfl``); ``cvta`` and ``mapa``;
kernel parameters (pointers are global unless declared ``.ptr .shared``/``.local``);
``selp`` with the ``stage == N ? 0 : stage + 1`` pattern of a ring buffer refined by
its ``setp``; parameters and results of inlined calls.

Its parts: `ptxkit.cfg.flow.ssa` (versions and joins), `ptxkit.cfg.flow.operands` (what an
instruction writes and reads), `ptxkit.cfg.values.arithmetic` (what it computes),
`ptxkit.cfg.values.symbols` and `ptxkit.cfg.values.specials` (where values start),
`ptxkit.cfg.values.conditions` (what branches say) and `ptxkit.cfg.values.counters` (values that move
together); this module slices, renames and solves.

What the solver runs is made once per instruction, join and branch: an instruction's
*rule* ``rule(analysis, at)``, a join's, and a branch condition's *narrowing*
``narrow(analysis, value)``. Each is a function of what it was made from (the
instruction's operands, the versions joined, the comparison) and is handed the analysis
when it runs: none refers to the analysis, so nothing the analysis holds refers back to
it, and it is freed by reference counting when its last user lets it go, with no help
from the cyclic collector (docs/fence.md §3.2).

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> from ptxkit.cfg.values.values import show
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
...     ".extern .shared .align 1024 .b8 smem[];\\n.visible .entry k()\\n{\\n.reg .b32 %r<9>;\\n.reg .pred %p<2>;\\n"
...     "\\tmov.u32 %r1, 0;\\nLOOP:\\n\\tshl.b32 %r2, %r1, 10;\\n\\tmov.u32 %r3, smem;\\n\\tadd.s32 %r4, %r3, %r2;\\n"
...     "\\tst.shared.u32 [%r4+16], %r1;\\n\\tadd.s32 %r5, %r1, 1;\\n\\tsetp.eq.s32 %p1, %r1, 3;\\n"
...     "\\tselp.b32 %r1, 0, %r5, %p1;\\n\\tbra.uni LOOP;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> store = flow.blocks[1].instructions[3]
>>> show(register_values(flow, {"st": (1, 3, store.operands[0])})["st"])
'dynamic shared+[16, 3088] step 1024 (shared::cta window)'
"""

from __future__ import annotations

import functools
from bisect import bisect_left
from collections.abc import Callable, Sequence

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.flow.dominance import DOMINATORS, DominatorTree
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.flow.inline import Context
from ptxkit.cfg.flow.loops import on_cycles
from ptxkit.cfg.flow.operands import (
    element_bytes, is_param, operand_reads, operand_targets,
    type_width,
)
from ptxkit.cfg.flow.ssa import by_block, cell_key, frontiers, reading_block, version_name
from ptxkit.cfg.values.arithmetic import (
    BINARY, WORD, any_number_of_type, at_most, bit_field, bit_insert, clamped, compared_as,
    cvt_reading, cvta, mapa, remainder_of,
)
from ptxkit.cfg.values.conditions import (
    branch_conditions, dead_blocks, joined_at_merges, narrowed_at, refinements, uniform_broadcast,
)
from ptxkit.cfg.values.definitions import REGISTER_DEFINITIONS, param_store_keys
from ptxkit.cfg.values.counters import (
    RECOMPUTED, counter_remainder, counts_alike, linear_range, linear_sum, may_round, narrowed_remainder,
    remainder_range, ring_refinement, rounded_past, rounded_up, selected_step, shifted_field, shifted_remainder,
    slice_offset, stepped_past, twin_of,
)
from ptxkit.cfg.values.frames import Frames, StackModel, observed, stack_frames
from ptxkit.cfg.values.idioms import SUM_OPCODES, quotient_of, remainder, rounding_add
from ptxkit.cfg.values.lanes import lane_table
from ptxkit.cfg.values.specials import PORTABLE_CLUSTER, special_ranges
from ptxkit.cfg.values.symbols import PLAIN_REGISTERS, TEMPLATES, symbol_regions, template_load
from ptxkit.cfg.values.trips import stepped_offset, trip_bounds, trip_loops
from ptxkit.isa import (
    FIXED_SPECIALS, INTEGER_TYPES, RESULT_RANGES, SIGN_READING, SWAPPED_COMPARISONS, TYPE_BITS,
)
from ptxkit.isa_eval import operation
from ptxkit.cfg.values.values import (
    GENERIC, GLOBAL_SPACE_NAME, INF, LOCAL_SPACE, NUM, SHARED_CTA_SPACE, TOP, add, anywhere, bits_of, compare,
    constant, field, join, may_be, meet, mul, neg, number, pack, shr, signed, truncate, unpack, widen,
)

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Mapping, MutableMapping, Set
    from typing import Any, Literal, TypeAlias

    from ptxkit.cfg.flow.graph import FlowGraph
    from ptxkit.cfg.values.arithmetic import Binary
    from ptxkit.cfg.values.conditions import Condition, Definitions, Narrow, Narrowings, Point, Site
    from ptxkit.cfg.values.counters import Compute, Refined
    from ptxkit.cfg.values.trips import TripLoop
    from ptxkit.cfg.values.idioms import Quotient, Remainder
    from ptxkit.cfg.values.protocols import ByThread, Pinned, Solving
    from ptxkit.cfg.values.values import Region, Value
    from ptxkit.instruction import Operand
    from ptxkit.isa_eval import Operation

    #: What a query asks: the value of an operand (or of a key, such as a call argument's)
    #: just before the instruction at ``(block, position)``.
    Question = tuple[int, int, "Operand | str"]
    #: Queries by the caller's own keys, which the analysis only hands back (any hashable:
    #: `ptxkit.cfg.sync.events` asks by ``(block, position, count)``), and their answers.
    Queries: TypeAlias = "Mapping[Any, Question]"
    Answers: TypeAlias = "dict[Any, Value]"
    #: What the solver runs for an instruction (at its `Site`) or a join (at
    #: ``("phi", version, block)``), handed the analysis and that point.
    Rule: TypeAlias = "Callable[[_Analysis, Point], None]"
    #: An instruction's rule and the keys it reads.
    SourcedRule = tuple[Rule, tuple[str, ...]]
    #: A stack word or part of one: ``(region name, offset, width)`` (`ptxkit.cfg.values.frames`).
    Cell = tuple[str, int, int]
    #: What `_rule_key` makes a rule from: the site, and for a ``ld``/``st`` the stack model's part in it.
    RuleKey = Site | tuple[Site, None] | tuple[Site, Cell, tuple[int, int]] | tuple[Site, tuple[Cell, int, int], bool]
    #: A symbol table of `ptxkit.cfg.values.symbols` (still untyped): name -> value, None for a
    #: register declared without ``%``.
    SymbolTable = dict[str, Any]
    #: ``(position, order, kind, key, point)``: where a block reads or writes a key (`_rename_points`).
    RenamePoint = tuple[int, int, str, str, Point]
    #: A join: its version -> ``[(predecessor block, input version)]``.
    Joins = dict[str, list[tuple[int, str]]]
    #: The definitions a query is computed from, in the order they run, the versions they
    #: define, the special registers they read, the join versions they read, and the
    #: versions each defines.
    Cone = tuple[tuple[Site, ...], frozenset[str], frozenset[str], frozenset[str], dict[Site, tuple[str, ...]]]
    #: What one thread range gave: the definitions evaluated, their values, their update counts.
    ThreadRange: TypeAlias = "tuple[set[Site], _Overlay, dict[str, int]]"
    #: How an instruction reads an operand's value (`_reading`).
    View = Callable[[Value], Value]
    #: ``(operation, saturation, signed result)`` of an opcode (`_integer_facts`).
    IntegerFacts = tuple[Operation | None, tuple[int, int] | None, bool]

_PARAM_POINTS_TO = {".global": GLOBAL_SPACE_NAME, ".shared": SHARED_CTA_SPACE, ".local": LOCAL_SPACE}


def register_values(flow: FlowGraph, queries: Queries, max_cluster: int = PORTABLE_CLUSTER) -> Answers:
    """Abstract values for `queries`: ``{key: (block, position, operand)}``.

    `operand` is an `ptxkit.instruction.Operand` of the instruction at `position` in
    `block` (a register, immediate, symbol, or a ``[base+offset]`` memory operand,
    whose address is wanted), or a key such as ``param:param0+0`` (a call argument);
    it is evaluated just before that instruction.
    """
    return analyse_registers(flow, queries, max_cluster).values


class RegisterAnswers(Record):
    """What `analyse_registers` found: the value of each query, the blocks the branch
    conditions prove unreachable (their queries answer the empty value: no value ever
    gets there), and `by_thread(query, low, high[, register])`: the query's value for the
    threads whose ``%tid.x`` (or `register`, such as ``%laneid``) lies in ``[low, high]``,
    or None where it does not depend on it (docs/fence.md §3.6); and `pinned(query,
    entry_values)`: its value where registers held given numbers on entry to joins, or
    None where that changes nothing, whose `joins_read(query)` name (docs/fence.md §3.7)."""

    values: "Answers"
    dead: set[int]
    by_thread: "ByThread"
    pinned: "Pinned"
    joins_read: "Callable[[Hashable], frozenset[tuple[str, int]]]"


def analyse_registers(flow: FlowGraph, queries: Queries, max_cluster: int = PORTABLE_CLUSTER,
                      aligned: dict[Region, int] | None = None) -> RegisterAnswers:
    """`register_values`, the unreachable blocks and the values by thread
    (`RegisterAnswers`). `aligned` gives regions a larger alignment than they declare
    (``{region: bytes}``: what the kernel's tensor copies show, `ptxkit.cfg.sync.events`).

    >>> import ptxkit
    >>> from ptxkit.cfg.flow.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<3>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tsetp.lt.u32 %p1, %r1, 4096;\\n"
    ...     "\\t@%p1 bra L;\\n\\tmov.u32 %r2, %r1;\\nL:\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> answers = analyse_registers(flow, {"r": (1, 0, flow.blocks[1].instructions[0].operands[1])})
    >>> answers.values, answers.dead
    ({'r': ()}, {1})
    """
    if not queries:
        return RegisterAnswers({}, set(), lambda query, low, high, register="%tid.x": None,
                               lambda query, entry_values: None, lambda query: frozenset())
    analysis = _Analysis(flow, max_cluster, aligned)
    frames = stack_frames(flow)
    if frames is None or not analysis.reads_stack(queries, frames):
        values, dead = analysis.solve(queries)
        return RegisterAnswers(values, dead, analysis.by_thread, analysis.pinned, analysis.joins_read)
    # a -G build: follow values through its stack frames, first assuming that a store
    # through an unknown address writes no cell, then checking every access against the
    # values found, until the check asks for nothing more (cfg/values/frames.py)
    probes = {("stack", i): (access.block, access.position, access.memory) for i, access in enumerate(frames.accesses)}
    answer = None  # the last round whose values the check found sound, and that round's solution
    # an earlier analysis of the graph (the tensor copies' pre-pass, docs/fence.md §3.3)
    # probed every stack access too: the model it settled on is the likeliest to hold
    # now, and the check below makes any starting model safe
    settled = SETTLED_MODELS.of(flow)
    reused = settled[-1] if settled else None
    model = reused if reused is not None else observed(frames)
    following = analysis  # one analysis for every round: the rules of what no model changes are made once
    for _ in range(_STACK_ROUNDS):
        following.follow(model)
        dead = following.fixpoint({**queries, **probes})
        found = observed(frames, following.answers(probes, dead), dead)
        if model.holds_for(found):  # only a round whose values hold answers the queries
            answer = RegisterAnswers(following.answers(queries, dead), dead, following.by_thread,
                                     following.pinned, following.joins_read), \
                following.solution()
            if model.settled(found) and (model is not reused or model.matches(found)):
                settled[:] = [model]
                return answer[0]
            following.start_afresh()  # the answer keeps this round's solution
            if model is reused:  # it holds but gives stores more than these values ask: try what they ask
                model = found
                continue
        model = model.advance(found)
    if answer is None:  # no round held: the values without the stack
        following.start_afresh()
        following.follow(None)
        values, dead = following.solve(queries)
        return RegisterAnswers(values, dead, following.by_thread, following.pinned, following.joins_read)
    following.restore(answer[1])  # its `by_thread` and `pinned` ask that round's values
    return answer[0]


# -- the analysis ----------------------------------------------------------------------------


class _Overlay(dict[str, "Value"]):
    """The values one thread range gives the definitions it evaluates again; every
    other version reads through to `base`, the fixpoint's values for all threads.

    Where one may be held, the type is a `Mapping`, not a ``dict``: compiled by mypyc, a
    ``dict``'s ``get`` is a C call that skips this one (the overlay then read as empty, and
    the per-thread addresses of five CUTLASS sm100 builds were lost).

    >>> overlay = _Overlay({"a": 1, "b": 2})
    >>> overlay["b"] = 3
    >>> overlay.get("a"), overlay.get("b"), overlay.get("c", 0)
    (1, 3, 0)
    """

    __slots__ = ("base",)

    def __init__(self, base: Mapping[str, Value]) -> None:
        super().__init__()
        self.base = base

    # dict.get's overloads in one signature: a default is a value or None
    def get(self, key: str, default: Value | None = None) -> Value | None:  # type: ignore[override]
        return self[key] if key in self else self.base.get(key, default)


class _Analysis:
    #: The versions the rule running now changed (`assign` adds them: the solver queues their readers).
    dirty: list[str]

    def __init__(self, flow: FlowGraph, max_cluster: int = PORTABLE_CLUSTER, aligned: dict[Region, int] | None = None,
                 stack: StackModel | None = None) -> None:
        self.flow = flow
        self.aligned = aligned or {}
        # each block's inlined copy's prefix to register names, the registers its function
        # declares without %, and the graph's register definitions (`definitions`,
        # `written_at`) once taken from its facts
        self._prefixes = [block.context.prefix if block.context is not None else "" for block in flow.blocks]
        self._plains = PLAIN_REGISTERS.of(flow)
        self._registers: dict[str, tuple[Site, ...]] | None = None
        self._written: dict[tuple[int, str], tuple[int, ...]] | None = None
        # `_rule_key` -> `rule`, and the thresholds making it added where it added some: the
        # graph's, which every analysis of it fills and takes (`MADE_RULES`, `RULE_THRESHOLDS`)
        self._rules: dict[RuleKey, SourcedRule] = MADE_RULES.of(flow)
        self._rule_thresholds: dict[RuleKey, frozenset[int]] = RULE_THRESHOLDS.of(flow)
        # the idioms found at a site, which depend on the graph alone: the rules of the
        # instructions that extend a sum or read a quotient ask for the same ones again
        self._remainders: dict[Site, Remainder | None] = {}
        self._quotients: dict[tuple[int, int, str], Quotient | None] = {}
        self.follow(stack)
        self.special: dict[str, tuple[int, int]] = special_ranges(flow.function, max_cluster)
        self.symbols: dict[int, SymbolTable] = {}  # context id -> symbol values
        self.start_afresh()
        self.returning: dict[int, Context] = {}  # block -> the inlined callee that returns into it
        for block in flow.blocks:
            context = block.context
            if context is not None and context.parent is not None:
                for successor in flow.succ[block.index]:
                    follower = flow.blocks[successor]
                    if follower.context is context.parent and (block.index, successor) in flow.kinds \
                            and flow.kinds[(block.index, successor)] == "return":
                        self.returning[successor] = context

    def start_afresh(self) -> None:
        """Widen from here on as a new analysis would: only to the constants compared by
        the rules the next solves make or take (`rule`) and by the branch conditions. The
        rounds of a `-G` build start afresh after a round whose values hold (docs/fence.md
        §3.2); the rules made so far are kept."""
        self.thresholds: set[int] = set()  # constants compared against: where widening stops
        self._taken: set[RuleKey] = set()  # the `_rule_key`s whose thresholds are in `thresholds`

    #: Every attribute an analysis has once it has solved (tests/test_registers.py checks
    #: the list against one): what `solution` keeps and `restore` puts back. Named, not
    #: read from ``__dict__``, which a class compiled by mypyc does not have.
    _STATE = ("_again_under", "_cones", "_cones_from", "_memo", "_pinned_cones", "_plains", "_prefixes",
              "_quotients", "_rank", "_registers", "_remainders", "_rule_thresholds", "_rules", "_self_fed", "_site_of",
              "_taken", "_with_cells", "_written", "aligned", "defined", "defs", "depends", "dirty", "dominators",
              "edge_narrowing", "flow", "kept", "narrowing", "queries", "returning", "rules", "special", "stack",
              "symbols", "thresholds", "thresholds_sorted", "trip_offsets", "unknown_cells", "updates", "uses", "values")

    def solution(self) -> dict[str, object]:
        """What the last `solve` found, for `restore`: `solve` replaces (never changes in
        place) each attribute it sets, so a shallow copy keeps it."""
        return {name: getattr(self, name) for name in self._STATE}

    def restore(self, solution: dict[str, object]) -> None:
        """Make `solution` the analysis's values again (its `by_thread` asks them)."""
        for name, value in solution.items():
            setattr(self, name, value)

    def follow(self, stack: StackModel | None) -> None:
        """Take `stack` as the model of the stack cells the next `solve` follows. Rules
        are kept from earlier solves: those of instructions that do not access memory,
        and those of stack accesses under the same cell (`_rule_key`), so a round of a
        `-G` build makes rules only for the accesses its model changes."""
        self.stack = stack
        self.unknown_cells = stack.unknown if stack is not None else frozenset()
        # the definitions with the cells the stack model follows
        self._with_cells: dict[str, tuple[Site, ...]] | None = None

    # -- names ----------------------------------------------------------------------------
    def prefix(self, block: int) -> str:
        return self._prefixes[block]

    def plain(self, block: int) -> frozenset[str]:
        """Registers declared without ``%`` in the block's function (inline assembly):
        the graph's `PLAIN_REGISTERS`, which every rule asks for."""
        return self._plains[block]

    def symbol_values(self, block: int) -> SymbolTable:
        context = self.flow.blocks[block].context
        key = context.id if context is not None else 0
        table = self.symbols.get(key)
        if table is None:
            function = context.function if context is not None else self.flow.function
            table = self.symbols[key] = symbol_regions(function, context, self.flow)
            for name, value in table.items():
                if value is not None and value[0].region in self.aligned:
                    region = value[0].region
                    table[name] = (value[0]._replace(region=region._replace(align=self.aligned[region])),)
        return table

    def param_key(self, block: int, name: str, offset: int) -> str:
        """The key a ``ld.param`` at `block` reads: a call argument or result of this
        context, or (in an inlined callee) the caller's argument (a ``st.param``'s key:
        `ptxkit.cfg.values.definitions.param_store_keys`)."""
        context = self.flow.blocks[block].context
        if context is not None:
            if context.parent is not None and name in context.arguments:
                return f"{context.parent.prefix}param:{context.arguments[name]}+{offset}"
            callee = self.returning.get(block)
            if callee is not None and name in callee.results:
                return f"{callee.prefix}param:{callee.results[name]}+{offset}"
        return f"{self.prefix(block)}param:{name}+{offset}"

    # -- definitions and the slice ----------------------------------------------------------
    def definitions(self) -> dict[str, tuple[Site, ...]]:
        """key -> the ``(block, position)`` of every instruction defining it (registers
        by context, call arguments and results, the stack cells the model follows);
        the registers' computed once per graph."""
        found = self._register_definitions()
        if self.stack is None or not self.stack.exact:
            return found
        if self._with_cells is None:
            self._with_cells = dict(found)
            for site in self.stack.exact:
                key = cell_key(next(iter(self.stack.stores[site])))
                self._with_cells[key] = (*self._with_cells.get(key, ()), site)
        return self._with_cells

    def written_at(self, block: int, register: str) -> Sequence[int]:
        """The positions, in order, of the instructions of `block` that write `register`
        (named as the block's code names it): the registers' `definitions` by block, once
        per graph."""
        by_position = self._written
        if by_position is None:
            by_position = self._written = REGISTER_DEFINITIONS_BY_BLOCK.of(self.flow)
        return by_position.get((block, self._prefixes[block] + register), ())

    def _register_definitions(self) -> dict[str, tuple[Site, ...]]:
        """The registers' `definitions` (no stack cells): the graph's, taken from its
        cache once per analysis."""
        found = self._registers
        if found is None:
            found = self._registers = REGISTER_DEFINITIONS.of(self.flow)
        return found

    def last_definition(self, block: int, position: int, register: str) -> int | None:
        """The position of the last instruction of `block` before `position` that writes
        `register`, or None."""
        positions = self.written_at(block, register)
        found = bisect_left(positions, position)
        return positions[found - 1] if found else None

    def redefined(self, block: int, start: int, stop: int, register: str) -> bool:
        """True when an instruction of `block` in ``[start, stop)`` writes `register`."""
        positions = self.written_at(block, register)
        found = bisect_left(positions, start)
        return found < len(positions) and positions[found] < stop

    def remainder_at(self, block: int, position: int) -> Remainder | None:
        """`ptxkit.cfg.values.idioms.remainder` of the instruction at (block, position),
        found once per analysis."""
        site = (block, position)
        if site in self._remainders:
            return self._remainders[site]
        code = self.flow.blocks[block]
        found = self._remainders[site] = remainder(code.instructions, code.heads, position, self.plain(block))
        return found

    def quotient_at(self, block: int, position: int, register: str) -> Quotient | None:
        """`ptxkit.cfg.values.idioms.quotient_of` `register` as the instruction at
        (block, position) reads it, found once per analysis."""
        key = (block, position, register)
        if key in self._quotients:
            return self._quotients[key]
        code = self.flow.blocks[block]
        found = self._quotients[key] = quotient_of(code.instructions, code.heads, position, register)
        return found

    def reads_stack(self, queries: Queries, frames: Frames) -> bool:
        """True when some query is computed from a load that may read a stack frame."""
        loads = {(access.block, access.position) for access in frames.accesses if access.kind == "load"}
        definitions = self.definitions()
        work = [key for block, position, operand in queries.values() for key in self.sources_of(block, operand)]
        seen = set(work)
        while work:  # the slice of `slice`, by what each definition reads (its idioms read no more)
            for site in definitions.get(work.pop(), ()):
                if site in loads:
                    return True
                for source in self._reads_of(*site):
                    if source not in seen:
                        seen.add(source)
                        work.append(source)
        return False

    def _reads_of(self, block: int, position: int) -> list[str]:
        """The keys the definition at (block, position) reads, as `rule` gives them."""
        instruction = self.flow.blocks[block].instructions[position]
        head = self.flow.blocks[block].heads[position]
        if head[2] == "ld" and is_param(head[1].split(".")[1:]):
            return [k for k in self._param_load_keys(block, instruction.operands, head[1]) if k is not None]
        prefix, plain = self.prefix(block), self.plain(block)
        return [prefix + name for operand in instruction.operands[1:] for name in operand_reads(operand, plain)]

    def solve(self, queries: Queries) -> tuple[Answers, set[int]]:
        """`fixpoint` for `queries`, and their `answers`: ``(answers, dead blocks)``."""
        dead = self.fixpoint(queries)
        return self.answers(queries, dead), dead

    def fixpoint(self, queries: Queries) -> set[int]:
        """Values by a sparse fixpoint over the definitions that matter (docs/fence.md
        §3.1), for the queries to be answered (`answers`); returns the blocks no run
        reaches. The registers defined more than once are put in SSA form first (a version
        per definition, joins at the dominance frontiers), so every value belongs to
        one program point; a version's value is what its definition computes from the
        versions it reads, narrowed by the branch conditions that dominate the reader; a
        version whose value keeps growing is widened to the constants the code compares
        against."""
        definitions = self.definitions()
        self.defined = set(definitions)
        conditions = branch_conditions(self, definitions)
        loops = trip_loops(self.flow)
        rules, seen = self._sliced(definitions, queries, conditions, loops)
        self.dominators = DominatorTree.of(self.flow)
        self.values: MutableMapping[str, Value] = {}  # an `_Overlay` during `by_thread`
        self.updates: dict[str, int] = {}
        self.thresholds_sorted = sorted(self.thresholds)
        phis = self._rename(definitions, rules, queries, conditions, seen)
        self.rules = rules
        self._self_fed: frozenset[str] | None = None  # `self_fed`, found when an update first asks
        held = refinements(self, conditions, definitions)  # where the conditions hold, and the loops' trips
        bounded = trip_bounds(self, loops, phis, held.narrowing)
        self.edge_narrowing = held.edge_narrowing
        tested = _merged(held.narrowing, bounded.narrowing)
        self.narrowing = _merged(tested, joined_at_merges(self.flow, self.dominators, tested, self.edge_narrowing))
        self.depends = {key: held.depends.get(key, set()) | bounded.depends.get(key, set())
                        for key in held.depends.keys() | bounded.depends.keys()}
        self.trip_offsets = bounded.offsets
        # a version's definition is an instruction (the joins' versions are not in it)
        self._site_of: dict[str, Site] = held.site_of  # type: ignore[assignment]
        self._memo: dict[int, dict[str, list[Narrow]]] = {}  # `narrowed_at`'s
        readers: dict[str, list[Point]] = {}
        rank = {block: i for i, block in enumerate(self.flow.rpo)}
        sites = sorted((site for site in rules if site[0] in rank), key=lambda site: (rank[site[0]], site[1]))
        work_items: dict[Point, Rule] = {site: rules[site][0] for site in sites}
        for site in sites:
            for source in rules[site][1]:
                readers.setdefault(self.uses.get((site, source), source), []).append(site)
        for (at, target), previous in self.kept.items():  # a guarded definition may keep the old version
            readers.setdefault(previous, []).append(at)
        joins: list[Point] = []
        for version, inputs in phis.items():
            item, join_rule = self._phi(version, inputs)
            work_items[item] = join_rule
            joins.append(item)
            for _, source in inputs:
                readers.setdefault(source, []).append(item)
        for x_key, sources in self.depends.items():  # a narrowing by a condition on x reads x
            for source in sources:
                readers.setdefault(x_key, []).extend(readers.get(source, ()))
        work: list[Point] = [*reversed(joins), *reversed(sites)]  # the sites in order, then the joins
        queued = set(work)
        self.dirty = []  # set even where nothing is to run: `solution` keeps it
        while work:
            item = work.pop()
            queued.discard(item)
            self.dirty = []
            work_items[item](self, item)
            for changed in self.dirty:
                for reader in readers.get(changed, ()):
                    if reader not in queued:
                        queued.add(reader)
                        work.append(reader)
        self.queries, self._rank = queries, rank
        self._cones: dict[Hashable, Cone | None] = {}
        self._cones_from: dict[tuple[tuple[str, str], ...], Cone | None] = {}  # start versions -> `_cone`
        # (query, pinned joins) -> the definitions of its cone that read them, and the versions those define
        self._pinned_cones: dict[tuple[Hashable, frozenset[str]], tuple[tuple[Site, ...], frozenset[str]]] = {}
        # a thread range ``(register, low, high)`` or a set of pins -> what evaluating under it gave
        self._again_under: dict[Hashable, ThreadRange] = {}
        return dead_blocks(self, tested)

    def _sliced(self, definitions: Definitions, queries: Queries, conditions: Mapping[int, Condition],
                loops: Sequence[TripLoop]) -> tuple[dict[Site, SourcedRule], set[str]]:
        """The rules of the definitions the queries read (`slice`), and of those that the
        loops' trips and the branch conditions bounding any of them read, until no more
        are wanted (a register brought in for one condition may be one another bounds);
        with the keys they define. A condition narrows what it compared and the registers
        that was computed from together, so all of them are followed once one of them has
        a value (also one an instruction taken for another register writes): a narrowing
        read from a register left unsolved would leave nothing, and make blocks dead."""
        wanted: set[str] = set()
        for block, position, operand in queries.values():
            wanted.update(self.sources_of(block, operand))
        rules: dict[Site, SourcedRule] = {}
        seen: set[str] = set()
        valued: set[str] = set()
        self.slice(definitions, wanted, rules, seen, valued)
        bounds = [({stepped.key for stepped in loop.stepped}, set(loop.reads)) for loop in loops]
        for _, (key, _, bound, _, chain), _ in conditions.values():  # conditions that bound what we follow
            keys = {key, *(source[0] if isinstance(source, tuple) else source for source, _ in chain),
                    *([bound] if isinstance(bound, str) else [])}
            bounds.append((keys, keys))
        while True:  # until no loop or condition asks for more
            more = {key for followed, read in bounds if not followed.isdisjoint(valued) for key in read - seen}
            if not more:
                return rules, seen
            self.slice(definitions, more, rules, seen, valued)

    def answers(self, asked: Iterable[Hashable], dead: Set[int]) -> Answers:
        """The value of each query named in `asked` (keys of those the last `fixpoint` was
        given) from its values; the empty value in a block of `dead`, which no run reaches.
        Reading values changes none: queries may be answered in any order, or not at all."""
        answers: Answers = {}
        for query in asked:
            block, _, operand = self.queries[query]
            answers[query] = () if block in dead else self.evaluate(block, operand, ("query", query, block))
        return answers

    # -- values by thread ---------------------------------------------------------------------
    def by_thread(self, name: Hashable, low: int, high: int, register: str = "%tid.x") -> Value | None:
        """Query `name`'s value for the threads whose ``%tid.x`` (or another special
        `register`, such as ``%laneid``) lies in ``[low, high]``, or None when it does not
        depend on it (docs/fence.md §3.6): the definitions it is computed from, back to
        the joins, are evaluated again with that range; everything else keeps the value
        the fixpoint gave it for all threads. Two terms that both follow a bit of the
        thread index (a swizzle and a ``selp`` on the same bit) then stop adding their
        extremes."""
        cone = self._cone(name)
        if cone is None or register not in cone[2]:
            return None
        return self._again(name, cone[0], cone[1], (register, low, high), {**self.special, register: (low, high)},
                           {})

    def pinned(self, name: Hashable, entry_values: Mapping[tuple[str, int], int]) -> Value | None:
        """Query `name`'s value where each register ``key`` held the number
        ``entry_values[(key, block)]`` on the last entry into join `block`, or None when
        its definitions back to the joins read none of those joins, or a number lies
        outside what the fixpoint found there (docs/fence.md §3.7): the same evaluation
        as `by_thread`'s, with those joins' versions set to the numbers."""
        cone = self._cone(name)
        if cone is None:
            return None
        pins: dict[str, Value] = {}
        for version in cone[3]:
            key, block = version.rsplit("@join", 1)
            found = entry_values.get((key, int(block)))
            if found is not None:  # the number, or the same bits read unsigned, as the fixpoint holds it
                held = self.values.get(version, ())
                which = next((n for n in (found, found % (1 << 32), found % (1 << 64)) if may_be(held, n)), None)
                if which is None:
                    return None
                pins[version] = number(which)
        if not pins:
            return None
        pinned = frozenset(pins)
        part = self._pinned_cones.get((name, pinned))
        if part is None:  # only the definitions that read a pinned join, directly or through others, change
            changed = set(pinned)
            sites = []
            for site in cone[0]:
                if any(self.uses.get((site, key), key) in changed for key in self.rules[site][1]):
                    sites.append(site)
                    changed.update(cone[4][site])
            part = self._pinned_cones[(name, pinned)] = (tuple(sites), frozenset(changed - pinned))
        return self._again(name, part[0], part[1], tuple(sorted(pins.items())), self.special, pins)

    def joins_read(self, name: Hashable) -> frozenset[tuple[str, int]]:
        """``(register, join block)`` of each join whose value query `name`'s definitions
        back to the joins read: what `pinned` may set.

        >>> analysis = _Analysis.__new__(_Analysis)
        >>> analysis._cones = {"q": ((), frozenset(), frozenset(), frozenset({"%r1@join3"}), {})}
        >>> analysis.joins_read("q")
        frozenset({('%r1', 3)})
        """
        cone = self._cone(name)
        if cone is None:
            return frozenset()
        return frozenset((key, int(block)) for key, block in (version.rsplit("@join", 1) for version in cone[3]))

    _CONE_LIMIT = 256

    def _cone(self, name: Hashable) -> Cone | None:
        """`_definitions_back_to_joins` of the versions query `name` reads, found once for
        each query and each set of versions (the copies of one ring read the same)."""
        cone: Cone | None | Literal[False] = self._cones.get(name, False)
        if cone is False:
            block, _, operand = self.queries[name]
            at: Point = ("query", name, block)
            start = tuple(sorted((key, self.uses.get((at, key), key)) for key in self.sources_of(block, operand)))
            cone = self._cones_from.get(start, False)
            if cone is False:
                cone = self._cones_from[start] = self._definitions_back_to_joins(start)
            self._cones[name] = cone
        return cone

    def _again(self, name: Hashable, sites: Sequence[Site], versions: Set[str], key: Hashable,
               special: dict[str, tuple[int, int]], pins: Mapping[str, Value]) -> Value:
        """Query `name`'s value with the definitions at `sites` (in the order they run)
        evaluated again under the special register ranges `special` and the join versions
        `pins` set to theirs, the `versions` they define afresh; what the evaluations under
        one `key` (a thread range, a set of pins) computed is kept for the next query asked
        under it."""
        found = self._again_under.get(key)
        if found is None:  # what earlier accesses computed under it
            overlay = _Overlay(self.values)
            overlay.update(pins)
            found = self._again_under[key] = (set(), overlay, {})
        done, overlay, counts = found
        values, updates, kept_special = self.values, self.updates, self.special
        try:
            self.values, self.updates, self.special = overlay, counts, special
            if not done.issuperset(sites):
                for version in versions:
                    if version not in overlay:
                        overlay[version] = ()  # evaluated afresh, not joined with the fixpoint's value
                self.dirty = []
                for site in sites:
                    if site not in done:
                        self.rules[site][0](self, site)
                done.update(sites)
            block, _, operand = self.queries[name]
            return self.evaluate(block, operand, ("query", name, block))
        finally:
            self.values, self.updates, self.special = values, updates, kept_special

    def _definitions_back_to_joins(self, start: Sequence[tuple[str, str]]) -> Cone | None:
        """The definitions the ``(register, version)`` pairs `start` (what a query reads)
        are computed from, back to joins, loads and registers defined nowhere, in the
        order they run, the versions they define, the special registers they read, the
        join versions they read and the versions each defines; None when there are more
        than `_CONE_LIMIT`, or when one reads a version defined after it (a register read
        before its only definition, around a loop)."""
        site_of, uses, rules, blocks, definitions = self._site_of, self.uses, self.rules, self.flow.blocks, \
            self.definitions()
        work: list[tuple[Point | None, str]] = [(None, key) for key, _ in start]
        started = dict(start)
        sites: set[Site] = set()
        versions: set[str] = set()
        joins: set[str] = set()
        defines: dict[Site, list[str]] = {}  # site -> the versions it defines
        reads: list[tuple[Point, Site]] = []  # (reading site, site of the version read)
        while work:
            at, key = work.pop()
            version = started[key] if at is None else uses.get((at, key), key)
            site = site_of.get(version)
            if site is None and version == key:
                only = set(definitions.get(key, ()))
                if len(only) == 1:
                    site = next(iter(only))
            if site is None or site not in rules:
                if "@join" in version:
                    joins.add(version)
                continue  # a join, an entry value, or nothing defines it: its value stands
            if blocks[site[0]].heads[site[1]][2] == "shfl" and \
                    not uniform_broadcast(self, site[0], site[1], definitions):
                continue  # another lane's value, which the range's own index does not give: it stands
            if at is not None:
                reads.append((at, site))
            if version not in versions:
                versions.add(version)
                defines.setdefault(site, []).append(version)
            if site in sites:
                continue
            sites.add(site)
            if len(sites) > self._CONE_LIMIT:
                return None
            work.extend((site, source) for source in rules[site][1])
        order: dict[Point, tuple[int, int]] = {site: (self._rank.get(site[0], -1), site[1]) for site in sites}
        if any(order[source] >= order[reader] for reader, source in reads):
            return None
        specials = frozenset(operand.name for b, p in sites for operand in blocks[b].instructions[p].operands[1:]
                             if operand.kind == "special" and operand.name is not None)
        return (tuple(sorted(sites, key=order.__getitem__)), frozenset(versions), specials, frozenset(joins),
                {site: tuple(found) for site, found in defines.items()})

    def _rename(self, definitions: Definitions, rules: Mapping[Site, SourcedRule], queries: Queries,
                conditions: Mapping[int, Condition], keys: Iterable[str]) -> Joins:
        """SSA versions of the registers in `keys` defined more than once: fills
        `uses` ((point, key) -> version read there), `defs` ((point, key) -> version
        written), `kept` ((point, key) -> the version a guarded definition may keep),
        and returns the joins: ``{version: [(predecessor block, input version)]}``."""
        # sorted: the joins are made, and so solved, in one order whatever the hash seed
        multi = dict.fromkeys(sorted(key for key in keys if len(definitions.get(key, ())) > 1))
        self.uses: dict[tuple[Point, str], str] = {}
        self.defs: dict[tuple[Point, str], str] = {}
        self.kept: dict[tuple[Point, str], str] = {}
        if not multi:
            return {}
        flow = self.flow
        idom: dict[int, int] = self.dominators.idom  # type: ignore[assignment]  # of blocks, from block 0: no EXIT
        frontier, children = DOMINANCE_FRONTIERS.of(flow)
        joins_at = _join_blocks(multi, definitions, frontier)
        points = self._rename_points(multi, definitions, rules, queries, conditions)
        root = next((n for n, p in idom.items() if n == p), None)
        if root is None:
            return {}
        return self._versions(multi, joins_at, points, root, children)

    def _rename_points(self, multi: Mapping[str, None], definitions: Definitions, rules: Mapping[Site, SourcedRule],
                       queries: Queries, conditions: Mapping[int, Condition]) -> dict[int, list[RenamePoint]]:
        """Where each block reads and writes the keys of `multi`, in order:
        ``{block: [(position, order, kind, key, point)]}``, `kind` "use", "keep" (what a
        guarded definition may keep) or "def", `point` the reading or writing site."""
        flow = self.flow
        defined_here: dict[Site, list[str]] = {}  # (block, position) -> the keys of `multi` it defines
        for key in multi:
            for site in dict.fromkeys(definitions[key]):
                defined_here.setdefault(site, []).append(key)
        points: dict[int, list[RenamePoint]] = {}  # block -> [(position, order, kind, key, point)]
        for (block, position), (_, sources) in rules.items():
            point: Site = (block, position)
            for source in sources:
                if source in multi:
                    points.setdefault(block, []).append((position, 0, "use", source, point))
            guard = flow.blocks[block].heads[position][0]
            for key in defined_here.get(point, ()):
                if guard is not None:
                    points.setdefault(block, []).append((position, 1, "keep", key, point))
                points.setdefault(block, []).append((position, 2, "def", key, point))
        for name, (block, position, operand) in queries.items():
            for source in self.sources_of(block, operand):
                if source in multi:
                    points.setdefault(block, []).append((position, 0, "use", source, ("query", name, block)))
        for block, (_, (key, _, bound, _, chain), at) in conditions.items():
            read = [source[0] for source, _ in chain if isinstance(source, tuple) and source[1][0] == "branch"]
            for used in [key, bound, *read] if isinstance(bound, str) else [key, *read]:
                if used in multi:
                    points.setdefault(block, []).append((at, 0, "use", used, ("branch", block, block)))
        for items in points.values():
            items.sort(key=lambda item: (item[0], item[1]))
        return points

    def _versions(self, multi: Mapping[str, None], joins_at: Mapping[int, list[str]],
                  points: Mapping[int, list[RenamePoint]], root: int, children: Mapping[int, Sequence[int]]) -> Joins:
        """Name the version each of `points` reads or writes, walking the dominator tree
        from `root` (fills `uses`, `defs` and `kept`); returns the joins as `_rename` does."""
        flow = self.flow
        phis: Joins = {}
        pushed_at: dict[int, list[str]] = {}
        stacks = {key: [key + "@entry"] for key in multi}
        stack = [(root, False)]
        while stack:
            block, leaving = stack.pop()
            if leaving:
                for key in reversed(pushed_at.pop(block)):
                    stacks[key].pop()
                continue
            pushed = []
            for key in joins_at.get(block, ()):
                version = f"{key}@join{block}"
                phis.setdefault(version, [])
                stacks[key].append(version)
                pushed.append(key)
            for position, _, kind, key, point in points.get(block, ()):
                if kind == "use":
                    self.uses[(point, key)] = stacks[key][-1]
                elif kind == "keep":
                    self.kept[(point, key)] = stacks[key][-1]
                else:
                    version = version_name(key, block, position)
                    self.defs[(point, key)] = version
                    stacks[key].append(version)
                    pushed.append(key)
            for successor in flow.succ[block]:
                for key in joins_at.get(successor, ()):
                    phis.setdefault(f"{key}@join{successor}", []).append((block, stacks[key][-1]))
            pushed_at[block] = pushed
            stack.append((block, True))
            for child in children.get(block, ()):
                stack.append((child, False))
        return phis

    def self_fed(self) -> frozenset[str]:
        """`_self_feeding` of the solve under way, found the first time `assign` asks: most
        solves never update a definition that is no join often enough to ask."""
        if self._self_fed is None:
            self._self_fed = self._self_feeding(self.definitions(), self.rules)
        return self._self_fed

    def _self_feeding(self, definitions: Definitions, rules: Mapping[Site, SourcedRule]) -> frozenset[str]:
        """The keys defined once whose definition reads them again through keys defined
        once (a register a loop reads before its one definition): the cycles no join
        breaks, so only they widen as definitions that are no join (docs/fence.md §3.1)."""
        single = {key: sites[0] for key, sites in definitions.items() if len(sites) == 1 and sites[0] in rules}
        return on_cycles({key: [source for source in rules[site][1] if source in single]
                          for key, site in single.items()})

    def _phi(self, version: str, inputs: list[tuple[int, str]]) -> tuple[Point, Rule]:
        """A join's point, ``("phi", version, block)``, and its rule: the join of what each
        edge in brings, each input narrowed by the conditions that hold at the end of its
        predecessor and on the edge itself (a loop's back edge: ``i + 1 < 64`` bounds what
        the loop's next turn starts with)."""
        join_block = int(version.rsplit("@join", 1)[1])

        def join_inputs(a: _Analysis, item: Point, inputs: list[tuple[int, str]] = inputs, join_block: int = join_block,
                        version: str = version) -> None:
            value: Value = ()
            for predecessor, source in inputs:
                incoming = a._narrowed(predecessor, source, a.values.get(source, ()))
                for compared, narrow in a.edge_narrowing.get((predecessor, join_block), ()):
                    if incoming and compared in (source, a._copied_from(source)):
                        incoming = narrow(a, incoming)
                value = join(value, incoming)
            a.assign(item, version, value, True, versioned=True)
        return ("phi", version, join_block), join_inputs

    def _copied_from(self, version: str) -> str | None:
        """The version a ``mov`` copied into `version` (the register a loop test compared,
        copied into the loop's carried register after the test), else None."""
        site = self._site_of.get(version)
        if site is None or site not in self.rules:
            return None
        block, position = site
        guard, _, base, _ = self.flow.blocks[block].heads[position]
        if base != "mov" or guard is not None:
            return None
        sources = self.rules[site][1]
        return self.uses.get((site, sources[0]), sources[0]) if len(sources) == 1 else None

    def lookup(self, at: Point, key: str) -> Value:
        """A register's value where `at` reads it (a rule's ``(block, position)``, a
        query's point): the value of the version reaching there, narrowed by the branch
        conditions dominating the block (the empty value until its definition has been
        evaluated; top for a register nothing defines)."""
        version = self.uses.get((at, key), key)
        value = self.values.get(version)
        if value is None:
            value = () if key in self.defined else TOP
        return self._narrowed(reading_block(at), version, value)

    def _narrowed(self, block: int, version: str, value: Value) -> Value:
        held = self._memo.get(block)  # `narrowed_at`'s memo, read here first: most reads find it
        if held is None:
            held = narrowed_at(self._memo, self.narrowing, self.dominators, block)
        narrows = held.get(version)
        if narrows is not None:
            for narrow in narrows:
                if not value:
                    break
                value = narrow(self, value)
        return value

    def assign(self, at: Point, key: str, value: Value, strong: bool, versioned: bool = False) -> None:
        """Record what the definition at `at` computes for `key`; a guarded one keeps the
        version it may leave in place too."""
        point = (at, key)
        version = key if versioned else self.defs.get(point, key)
        kept = self.kept.get(point)
        if kept is not None:
            value = join(value, self.values.get(kept, ()))
        old = self.values.get(version, ())
        new = join(old, value) if old else value
        if new == old:
            return
        count = self.updates.get(version, 0) + 1
        self.updates[version] = count
        # widen at the joins, where loops close; a definition downstream of one keeps
        # the join's bound however often the join changes, unless it keeps growing on its
        # own (read before it is set: a cycle no join breaks; asked only past `_PATIENCE`
        # updates, where the answer counts)
        patience = 3 if versioned else \
            _PATIENCE if count <= _PATIENCE or version in self.self_fed() else _SAFETY_NET
        self.values[version] = widen(old, new, self.thresholds_sorted) if count > patience and old else new
        self.dirty.append(version)

    def sources_of(self, block: int, operand: Operand | str) -> list[str]:
        if isinstance(operand, str):  # a key: a call argument
            return [operand]
        prefix = self.prefix(block)
        if operand.kind == "memory":
            base: Operand | None = operand.elements[0] if operand.elements else None
            if base is None:
                return []
            operand = base
        return [prefix + name for name in operand_reads(operand, self.plain(block))]

    def slice(self, definitions: Definitions, wanted: set[str], rules: dict[Site, SourcedRule], seen: set[str],
              valued: set[str]) -> None:
        """Add to `rules` the definitions `wanted` keys depend on (`seen`: keys done), and to
        `valued` those keys and every register those definitions write
        (`REGISTER_KEYS_BY_SITE`, the instructions that write several): an instruction that
        writes two registers gives both a value, followed or not."""
        written = REGISTER_KEYS_BY_SITE.of(self.flow)
        seen.update(wanted)
        valued.update(wanted)
        work = list(wanted)
        while work:
            key = work.pop()
            for site in definitions.get(key, ()):
                if site in rules:
                    continue
                rules[site] = sourced = self.rule(site[0], site[1])
                valued.update(written.get(site, ()))
                for source in sourced[1]:
                    if source not in seen:
                        seen.add(source)
                        valued.add(source)
                        work.append(source)

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, block: int, operand: Operand | str, at: Point) -> Value:
        if isinstance(operand, str):
            return self.lookup(at, operand)
        kind = operand.kind  # a register, a special register or a symbol has a name
        if kind == "register":
            return self.lookup(at, self.prefix(block) + operand.name)  # type: ignore[operator]
        if kind == "immediate":
            value = operand.value
            return number(value) if isinstance(value, int) else TOP
        if kind == "special":
            low, high = self.special.get(operand.name, WORD)  # type: ignore[arg-type]
            if operand.name not in FIXED_SPECIALS:
                return number(low, high)
            return self._narrowed(reading_block(at), self.prefix(block) + operand.name, number(low, high))
        if kind == "symbol":
            table = self.symbol_values(block)
            found = table.get(operand.name, TOP)  # type: ignore[arg-type]
            if found is None:  # a register declared without %
                return self.lookup(at, self.prefix(block) + operand.name)  # type: ignore[operator]
            return add(found, number(int(operand.value or 0))) if operand.value else found
        if kind == "memory" or kind == "offset":  # [base+imm], or %r+imm as an operand
            base = operand.elements[0] if operand.elements else None
            address = self.evaluate(block, base, at) if base is not None else number(0)
            return add(address, number(int(operand.value))) if operand.value else address
        if kind == "vector" and len(operand.elements) == 1:
            return self.evaluate(block, operand.elements[0], at)
        return TOP

    def _read_part(self, block: int, position: int) -> tuple[Cell, int, int] | None:
        """``(word, byte offset, width)`` of the stack word the load at (block, position)
        reads, when its register gets those bytes as they are (an unsigned or untyped
        load of a followed word)."""
        part: tuple[Cell, int, int] | None = self.stack.loads.get((block, position)) if self.stack is not None else None
        if part is None or part[0] in self.unknown_cells:
            return None
        modifiers = self.flow.blocks[block].heads[position][1].split(".")[1:]
        return None if any(m[:1] == "s" for m in modifiers) else part

    def _read_cell(self, block: int, position: int) -> Cell | None:
        """The stack word the load at (block, position) reads whole, as `_read_part`."""
        part = self._read_part(block, position)
        return part[0] if part is not None and part[1:] == (0, part[0][2]) else None

    def rule(self, block: int, position: int) -> SourcedRule:
        """``(apply(at), source keys)`` for the instruction at (block, position); `at` is the block
        whose view of the registers it reads (its own). Made once per `_rule_key`; its
        thresholds count from the first solve since `start_afresh` that takes it."""
        key = self._rule_key(block, position)
        found = self._rules.get(key)
        if found is None:
            thresholds, self.thresholds = self.thresholds, set()
            try:
                found = self._rules[key] = self._rule(block, position)
            finally:
                thresholds, self.thresholds = self.thresholds, thresholds
            if thresholds:  # most make none
                self._rule_thresholds[key] = frozenset(thresholds)
        if key not in self._taken:
            self._taken.add(key)
            self.thresholds |= self._rule_thresholds.get(key, _NO_THRESHOLDS)
        return found

    def _rule_key(self, block: int, position: int) -> RuleKey:
        """What `_rule` makes the rule from besides the instruction: the site, and for a
        ``ld``/``st`` the stack model's part in it (the word a followed store writes and
        where; the part a followed load reads and whether its value is known)."""
        site: Site = (block, position)
        if self.flow.blocks[block].heads[position][2] not in ("ld", "st"):
            return site
        stack = self.stack
        if stack is not None and site in stack.exact:
            return site, next(iter(stack.stores[site])), stack.exact[site]
        if stack is not None and site in stack.loads:
            return site, stack.loads[site], self._read_part(block, position) is not None
        return site, None

    def _rule(self, block: int, position: int) -> SourcedRule:
        """`rule` made afresh for the instruction at (block, position)."""
        instruction = self.flow.blocks[block].instructions[position]
        guard, opcode, base, _ = self.flow.blocks[block].heads[position]
        prefix = self.prefix(block)
        operands = instruction.operands
        modifiers = opcode.split(".")[1:]
        plain = self.plain(block)
        sources = [prefix + name for operand in operands[1:] for name in operand_reads(operand, plain)]
        stack = self.stack
        if stack is not None and (block, position) in stack.exact:  # a store of a followed stack word
            return self._stack_store_rule(stack, block, position, operands[1], sources)
        if stack is not None and (block, position) in stack.loads:  # a load of one
            target = prefix + operand_targets(operands[0], plain)[0]
            return self._stack_load_rule(stack, block, position, target, guard is None)
        if base == "st":  # st.param: a call argument or a return value
            keys = param_store_keys(self.flow, block, instruction)
            values = operands[1].elements if operands[1].kind == "vector" else (operands[1],)

            def store(a: _Analysis, at: Point, keys: list[str] = keys, values: tuple[Operand, ...] = values,
                      block: int = block) -> None:
                for key, value in zip(keys, values):
                    a.assign(at, key, a.evaluate(block, value, at), True)

            return store, tuple(sources)
        targets = [prefix + name for name in operand_targets(operands[0], plain)]
        compute = self._refined_computation(block, position, operands, targets, sources)
        if base == "ld" and is_param(modifiers):
            sources = [k for k in self._param_load_keys(block, operands, opcode) if k is not None]
        strong = guard is None

        def apply(a: _Analysis, at: Point, targets: tuple[str, ...] = tuple(targets), compute: Compute = compute,
                  strong: bool = strong) -> None:
            values = compute(a, at)
            for target, value in zip(targets, values):
                a.assign(at, target, value, strong)

        return apply, tuple(sources)

    def _stack_store_rule(self, stack: StackModel, block: int, position: int, value: Operand,
                          sources: list[str]) -> SourcedRule:
        """The rule of a store of `value` to a stack word the `stack` model follows: the
        whole word, or some of its bytes (the others stay)."""
        word: Cell = next(iter(stack.stores[(block, position)]))
        offset, width = stack.exact[(block, position)]
        key = cell_key(word)
        if (offset, width) == (0, word[2]):
            def spill(a: _Analysis, at: Point, key: str = key, value: Operand = value, block: int = block,
                      width: int = width) -> None:
                a.assign(at, key, truncate(a.evaluate(block, value, at), 8 * width), True)
            return spill, tuple(sources)

        def set_part(a: _Analysis, at: Point, key: str = key, value: Operand = value, block: int = block,
                     width: int = width, offset: int = offset, word: Cell = word) -> None:  # the others stay
            kept = a.lookup(at, key) if a.uses.get((at, key), key) not in (key, key + "@entry") else TOP
            part = truncate(a.evaluate(block, value, at), 8 * width)
            a.assign(at, key, bit_insert(part, kept, 8 * offset, 8 * width, 8 * word[2]), True)
        return set_part, (*sources, key)

    def _stack_load_rule(self, stack: StackModel, block: int, position: int, target: str, strong: bool) -> SourcedRule:
        """The rule of a load into `target` from a stack word the `stack` model follows:
        the bytes it reads of the word's value where that value is known, else top."""
        word: Cell
        word, offset, width = stack.loads[(block, position)]
        key = cell_key(word)
        known = self._read_part(block, position) is not None

        def reload(a: _Analysis, at: Point, key: str = key, offset: int = offset, width: int = width, word: Cell = word,
                   target: str = target, known: bool = known, strong: bool = strong) -> None:
            value = a.lookup(at, key)
            if (offset, width) != (0, word[2]):
                value = bits_of(value, 8 * offset, 8 * width) if value else value
            a.assign(at, target, truncate(value, 8 * width) if known else TOP, strong)
        return reload, (key,)

    def _refined_computation(self, block: int, position: int, operands: Sequence[Operand], targets: list[str],
                             sources: list[str]) -> Compute:
        """`computation` of the instruction at (block, position), refined by the idiom it
        completes where it completes one (a remainder, a ring buffer's step, a rounding, a
        sum of counters, a value computed before); the keys the refinement reads go to
        `sources`."""
        guard, opcode, base, _ = self.flow.blocks[block].heads[position]
        modifiers = opcode.split(".")[1:]
        prefix = self.prefix(block)
        plain = self.plain(block)
        compute = plain_compute = self.computation(block, opcode, base, modifiers, operands, targets)
        if base in ("sub", "mad"):
            found = self.remainder_at(block, position)
            if found is not None and (found.counter is None or counts_alike(self, block, position, found)):
                compute = remainder_range(self, block, found)
                sources.append(prefix + found.x)
        if base == "mul" and len(operands) == 3:
            sliced = slice_offset(self, block, operands, compute)
            if sliced is not None:
                compute = sliced
        refined: Refined | None = None  # the idioms one opcode completes
        if base == "sub":
            refined = stepped_offset(self, block, operands, compute)
        elif base == "shl":
            refined = shifted_remainder(self, block, position, operands, modifiers)
        elif base == "and":
            refined = shifted_field(self, block, position, operands, modifiers, compute)
        elif base == "cvt":
            refined = narrowed_remainder(self, block, position, operands, modifiers)
        elif base == "selp" and len(operands) == 4:
            refined = rounded_up(self, block, position, modifiers, compute) or \
                ring_refinement(self, block, position, operands)
        elif base == "shfl":
            refined = lane_table(self, block, position, operands, len(targets))
        if refined is not None:
            compute, extra = refined
            sources.extend(extra)
        if base == "add" and len(targets) == 1 and len(operands) == 3:
            selected = selected_step(self, block, position, operands)
            if selected is not None:
                compute, extra = selected
                sources.extend(extra)
        if base == "add" and len(targets) == 1 and compute is plain_compute and may_round(self, block):
            rounding = rounding_add(self.flow.blocks[block].instructions, self.flow.blocks[block].heads, position,
                                    plain)
            if rounding is not None:
                compute = rounded_past(self, block, rounding, modifiers, compute)
                sources.extend(prefix + name for name in (rounding.x, rounding.remainder))
        if base == "add" and len(targets) == 1 and compute is plain_compute:
            stepped = stepped_past(self, block, position, operands, modifiers, compute)
            if stepped is not None:
                compute, extra = stepped
                sources.extend(extra)
        if base in SUM_OPCODES and len(targets) == 1 and compute is plain_compute:
            summed = linear_sum(self, block, position, plain)
            if summed is not None and summed.repeats:
                compute = linear_range(self, block, summed)
                sources.extend(prefix + name for name in summed.terms)
            elif summed is not None:
                ring = counter_remainder(self, block, position, summed)
                if ring is not None:
                    compute, extra = ring
                    sources.extend(extra)
        if base in RECOMPUTED and len(targets) == 1 and guard is None:
            twin = twin_of(self, block, position)
            if twin is not None:  # the same value computed before: what narrows that one narrows this
                compute = functools.partial(_met_with_twin, compute, twin)
                sources.append(twin)
        return compute

    def _param_load_keys(self, block: int, operands: Sequence[Operand], opcode: str) -> list[str | None]:
        memory = operands[1] if len(operands) > 1 else None
        if memory is None or memory.kind != "memory" or memory.name is None or memory.elements[0].kind != "symbol":
            return [None]
        width = element_bytes(opcode)
        count = len(operands[0].elements) if operands[0].kind == "vector" else 1
        offset = int(memory.value or 0)
        return [self.param_key(block, memory.name, offset + i * width) for i in range(count)]

    def computation(self, block: int, opcode: str, base: str, modifiers: list[str], operands: Sequence[Operand],
                    targets: list[str]) -> Compute:
        """A function ``at -> [value per target]`` for one defining instruction (`at`: the block
        whose view of the operands counts): its abstract operation, and where that may not
        give the one number the instruction computes from numbers, the number the evaluator
        gives (`_folded`)."""
        args = operands[1:]
        found, bounds, signed_result = _integer_facts(opcode, base, modifiers)
        if found is not None and (len(targets) != 1 or found.arity != len(args) or any(
                arg.negated or arg.kind == "immediate" and not isinstance(arg.value, int) for arg in args)):
            found = None
        read: list[list[Value] | None] | None = [None] if found is not None else None  # the operand values read
        compute = self._abstract_computation(block, opcode, base, modifiers, operands, args, targets, read)
        if bounds is not None:
            compute = _saturating(compute, *bounds)
        if found is None or read is None:
            return compute
        return _folded(found, block, args, compute, read, signed_result)

    def _abstract_computation(self, block: int, opcode: str, base: str, modifiers: list[str],
                              operands: Sequence[Operand], args: Sequence[Operand], targets: list[str],
                              read: list[list[Value] | None] | None) -> Compute:
        """`computation` on abstract values alone (`args`: the operands it reads, all but the
        first, one tuple for every function made here to keep); the operand values that
        `values` reads go to ``read[0]`` when `read` is given."""
        width, signed_type = type_width(modifiers), _signed_type(modifiers)  # read from the modifiers once
        values = _operand_values(block, base, modifiers, args, read, width, signed_type)
        moved = self._moved_value(block, opcode, base, modifiers, operands, args, len(targets), values, width)
        if moved is not None:
            return moved
        return self._operation(block, base, modifiers, args, len(targets), values, width, signed_type)

    def _moved_value(self, block: int, opcode: str, base: str, modifiers: list[str], operands: Sequence[Operand],
                     args: Sequence[Operand], count: int, values: Compute, width: int) -> Compute | None:
        """`_abstract_computation` of an instruction that moves, converts or loads a value
        (``mov shfl cvt cvta mapa ld``) of `width` bits, else None (`args`: `operands` but
        the first)."""
        if base in ("mov", "shfl") and args:
            source = args[0]
            if base == "mov" and source.kind == "vector" and count == 1:
                parts = source.elements
                return lambda a, at: [pack([a.evaluate(block, p, at) for p in parts], width // len(parts))]
            if count > 1 and base == "mov":  # mov.b64 {lo, hi}, %rd
                return lambda a, at: unpack(a.evaluate(block, source, at), count, width // count)
            if count > 1:
                return lambda a, at: [a.evaluate(block, source, at)] + [TOP] * (count - 1)

            def moved(a: Solving, at: Point, block: int = block, source: Operand = source) -> list[Value]:
                return [a.evaluate(block, source, at)]
            return moved
        if base == "cvt":
            reading = cvt_reading(modifiers)
            if reading is None:
                return _unknown(count)
            if "sat" in modifiers:  # the source as its type reads it (then clamped: `_saturation`)
                source_type = [m for m in modifiers if m in INTEGER_TYPES][1]
                view = _reading(INTEGER_TYPES[source_type], source_type[0] == "s")
                return lambda a, at: [view(values(a, at)[0])]
            return lambda a, at: [reading[1](values(a, at)[0])]
        if base == "cvta":
            return lambda a, at: [cvta(a.evaluate(block, args[0], at), modifiers)]
        if base == "mapa":
            return lambda a, at: [mapa(a.evaluate(block, args[0], at), modifiers)]
        if base == "ld":
            if is_param(modifiers):
                return self._param_load(block, opcode, operands, modifiers, count)
            zero_filled = TEMPLATES.of(self.flow)
            if count == 1 and args and args[0].kind == "memory" and zero_filled:
                return lambda a, at: [template_load(a.evaluate(block, args[0], at), width // 8, zero_filled)]
            return _unknown(count)
        return None

    def _operation(self, block: int, base: str, modifiers: list[str], args: Sequence[Operand], count: int,
                   values: Compute, width: int, signed_type: bool) -> Compute:
        """`_abstract_computation` of the other instructions: arithmetic, selection,
        comparison and bit fields (top where it knows none), of `width` bits, of a signed
        type or not."""
        binary = BINARY.get(base)
        if binary is not None and base == "shr" and len(args) == 2 and args[1].kind == "immediate" \
                and isinstance(args[1].value, int) \
                and 0 < args[1].value < width and any(m[:1] in "bu" and m[1:] in TYPE_BITS for m in modifiers):
            most = (1 << (width - args[1].value)) - 1  # what a logical shift leaves of `width` bits

            def logical(a: Solving, at: Point, values: Compute = values, binary: Binary = binary, width: int = width,
                        most: int = most) -> list[Value]:
                left, right = values(a, at)
                return [at_most(binary(left, right, width), most)]

            return logical
        if base == "shr" and len(args) == 2 and signed_type:
            def arithmetic_shift(a: Solving, at: Point, values: Compute = values) -> list[Value]:
                value, amount = values(a, at)
                return [shr(value, amount, arithmetic=True)]
            return arithmetic_shift
        if base == "rem" and len(args) == 2 and signed_type:
            def signed_remainder(a: Solving, at: Point, values: Compute = values, width: int = width) -> list[Value]:
                dividend, divisor = values(a, at)
                return [remainder_of(dividend, divisor, width, signed=True)]
            return signed_remainder
        high = "hi" in modifiers and base in ("mul", "mad")
        if binary is not None and len(args) == 2 and not high:
            def both(a: Solving, at: Point, values: Compute = values, binary: Binary = binary,
                     width: int = width) -> list[Value]:
                left, right = values(a, at)
                return [binary(left, right, width)]
            return both
        if high and len(args) == 2:  # the high half of the product: floor(a * b / 2**width)
            return lambda a, at: [shr(mul(*values(a, at)), number(width), arithmetic=True)]
        if base == "mad" and len(args) == 3:
            def mad(a: Solving, at: Point, values: Compute = values, width: int = width,
                    high: bool = high) -> list[Value]:
                left, right, addend = values(a, at)
                product = mul(left, right)
                return [add(shr(product, number(width), arithmetic=True) if high else product, addend)]
            return mad
        if base == "selp" and len(args) == 3:
            def select(a: Solving, at: Point, block: int = block, args: Sequence[Operand] = args) -> list[Value]:
                chosen = None if args[2].negated else constant(a.evaluate(block, args[2], at))
                if chosen is None:
                    return [join(a.evaluate(block, args[0], at), a.evaluate(block, args[1], at))]
                return [a.evaluate(block, args[0] if chosen else args[1], at)]
            return select
        if base == "slct" and len(args) >= 2:
            return lambda a, at: [join(a.evaluate(block, args[0], at), a.evaluate(block, args[1], at))]
        if base == "setp" and count == 1 and len(args) == 2:
            return self._comparison(block, modifiers, args)
        if base == "neg" and args:
            return lambda a, at: [neg(a.evaluate(block, args[0], at))]
        if base in RESULT_RANGES:
            low, top = RESULT_RANGES[base]
            return lambda a, at: [number(low, top)] + [TOP] * (count - 1)
        if base == "bfe" and len(args) == 3:
            position, length = (a.value if a.kind == "immediate" and isinstance(a.value, int) else None
                                for a in args[1:])
            if not signed_type and position is not None and length and position + length <= width:
                mask = (1 << length) - 1  # unsigned: (a >> position) & mask, as a descriptor's start field

                return lambda a, at: [at_most(field(a.evaluate(block, args[0], at), position, length, width), mask)]
            return lambda a, at: [bit_field(a.evaluate(block, args[2], at), signed_type)]
        if base == "bfi" and len(args) == 4 and args[2].kind == args[3].kind == "immediate":
            start, size = args[2].value, args[3].value
            if isinstance(start, int) and isinstance(size, int):  # a float there is no bfi the ISA has
                return lambda a, at: [bit_insert(a.evaluate(block, args[0], at), a.evaluate(block, args[1], at),
                                               start, size, width)]
        return _unknown(count)

    def _comparison(self, block: int, modifiers: list[str], args: Sequence[Operand]) -> Compute:
        """``setp`` of an integer register and a constant: the predicate as 0, 1 or
        ``[0, 1]`` (what `selp` then picks)."""
        comparison, kind = (modifiers[0], modifiers[-1]) if len(modifiers) >= 2 else ("", "")
        if kind[:1] not in "sub" or kind[1:] not in TYPE_BITS or comparison not in SWAPPED_COMPARISONS:
            return lambda a, at: [number(0, 1)]
        unsigned, view = kind[0] != "s", compared_as(kind)

        def predicate(a: Solving, at: Point) -> list[Value]:
            left, right = view(a.evaluate(block, args[0], at)), view(a.evaluate(block, args[1], at))
            if not left or not right:
                return [()]
            bound = constant(right)
            if bound is not None:
                return [compare(left, comparison, bound, unsigned)]
            bound = constant(left)
            if bound is not None:
                return [compare(right, SWAPPED_COMPARISONS[comparison], bound, unsigned)]
            return [number(0, 1)]

        return predicate

    def _param_load(self, block: int, opcode: str, operands: Sequence[Operand], modifiers: list[str],
                    count: int) -> Compute:
        keys = self._param_load_keys(block, operands, opcode)
        context = self.flow.blocks[block].context
        memory = operands[1]
        if keys[0] is not None and context is not None and (context.parent is not None or self.returning.get(block)):
            def passed(a: Solving, at: Point, keys: list[str | None] = keys) -> list[Value]:
                return [a.lookup(at, key) if key is not None else TOP for key in keys]
            return passed
        if context is None or context.parent is None:
            signature = self.flow.function.signature if context is None else context.function.signature
            if signature.kind == "entry":
                value = self._kernel_parameter(signature, memory, modifiers)
                return lambda a, at: [value] + [TOP] * (count - 1)
        return _unknown(count)

    @staticmethod
    def _kernel_parameter(signature: Any, memory: Operand, modifiers: list[str]) -> Value:
        """A kernel parameter's value: a 64-bit one is a global pointer (or, declared
        ``.ptr .shared``/``.local``, one of those), a narrower one a number of its type."""
        if memory.kind != "memory" or memory.elements[0].kind != "symbol" or memory.value:
            return TOP
        param = next((p for p in signature.params if p.name == memory.name), None)
        if param is None:
            return TOP
        if {"u64", "b64", "s64"} & set(modifiers):
            return anywhere(_PARAM_POINTS_TO.get(param.pointer_space, GLOBAL_SPACE_NAME), GENERIC)
        for modifier in modifiers:
            bits = INTEGER_TYPES.get(modifier)
            if bits is not None:
                negative = modifier[0] == "s"
                return number(-(1 << (bits - 1)) if negative else 0, (1 << (bits - (1 if negative else 0))) - 1)
        return TOP


def _merged(ours: dict[int, Narrowings], theirs: Mapping[int, Narrowings]) -> dict[int, Narrowings]:
    """The narrowings of both tables, ours first where both have some."""
    if not theirs:
        return ours
    merged = dict(ours)
    for block, narrowings in theirs.items():
        merged[block] = [*ours.get(block, ()), *narrowings]
    return merged


def keys_by_site(definitions: Definitions) -> dict[Site, tuple[str, ...]]:
    """Site -> the keys the instruction there writes (`definitions` turned round), for
    the instructions that write more than one (a vector load, ``mov.b64 {lo, hi}``): a
    site that writes one key is found through that key alone, and most write one.

    >>> keys_by_site({"%r1": ((0, 2),), "%r2": ((0, 2), (3, 0))})
    {(0, 2): ('%r1', '%r2')}
    """
    written: dict[Site, list[str]] = {}
    for key, sites in definitions.items():
        for site in sites:
            written.setdefault(site, []).append(key)
    return {site: tuple(keys) for site, keys in written.items() if len(keys) > 1}


def _join_blocks(multi: Mapping[str, None], definitions: Definitions, frontier: Mapping[int, Sequence[int]]
                 ) -> dict[int, list[str]]:
    """Where the keys of `multi` need a join: ``{block: [key]}``, the iterated dominance
    frontier of each key's definitions, keys in the order of `multi`."""
    joins_at: dict[int, list[str]] = {}
    for key in multi:
        blocks = {b for b, _ in definitions[key]}
        work, placed = list(blocks), set()
        while work:
            for target in frontier.get(work.pop(), ()):
                if target not in placed:
                    placed.add(target)
                    joins_at.setdefault(target, []).append(key)
                    if target not in blocks:
                        blocks.add(target)
                        work.append(target)
    return joins_at


#: Opcodes whose abstract operation gives the one number an instruction computes from
#: numbers (congruent to it: tests/test_isa_eval.py checks it), so `_folded` leaves them
#: alone; setp with two operands too.
_KEEPS_NUMBERS = frozenset(("mov", "selp", "add", "sub", "and", "or", "xor", "neg", "min", "max", "setp"))


def _integer_facts(opcode: str, base: str, modifiers: list[str]) -> IntegerFacts:
    """``(operation, saturation, signed result)`` of an opcode, worked out once: the
    evaluator's operation (`ptxkit.isa_eval`) when `_folded` must check the instruction
    (an abstract operation that may not keep numbers numbers), else None; `_saturation`;
    `_signed_result`."""
    found = _FACTS.get(opcode)
    if found is None:
        evaluated = operation(opcode)
        if base in _KEEPS_NUMBERS and not (base == "setp" and evaluated is not None and evaluated.arity == 3):
            evaluated = None
        found = _FACTS[opcode] = (evaluated, _saturation(base, modifiers), _signed_result(base, modifiers))
    return found


_FACTS: dict[str, IntegerFacts] = {}


def _saturation(base: str, modifiers: list[str]) -> tuple[int, int] | None:
    """The range a saturating instruction clamps its result to (``.sat``, ``.relu``), or None.

    >>> _saturation("add", ["sat", "s32"]), _saturation("cvt", ["sat", "u8", "s32"]), _saturation("max", ["s32"])
    ((-2147483648, 2147483647), (0, 255), None)
    """
    if "relu" in modifiers:
        return 0, INF
    if "sat" not in modifiers:
        return None
    types = [m for m in modifiers if m in INTEGER_TYPES]
    if not types:
        return None
    bits = INTEGER_TYPES[types[0]]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if types[0][0] == "s" else (0, (1 << bits) - 1)


def _unknown(count: int) -> Compute:
    """The computation of `count` values nothing is known of (`_top` for one)."""
    return _top if count == 1 else lambda a, at: [TOP] * count


def _top(a: Solving, at: Point) -> list[Value]:
    """One value nothing is known of."""
    return [TOP]


def _met_with_twin(own: Compute, twin: str, a: Solving, at: Point) -> list[Value]:
    """What `own` computes, narrowed by the value of `twin`, the same value computed before
    (a partial of it is a rule's computation: compiled, a nested function that a variable
    of its own environment holds makes a cycle, docs/architecture.md §5)."""
    return [meet(own(a, at)[0], a.lookup(at, twin))]


def _saturating(compute: Compute, low: int, high: int) -> Compute:
    """`compute` with its values clamped to ``[low, high]``."""
    return lambda a, at: [clamped(value, low, high) for value in compute(a, at)]


def _folded(found: Operation, block: int, args: Sequence[Operand], compute: Compute, read: list[list[Value] | None],
            signed_result: bool) -> Compute:
    """`compute`, but where every operand is one number (the values `compute` read, kept
    in ``read[0]``, or else each operand of `block`'s instruction as the analysis
    evaluates it), the instruction's result from the
    evaluator (`ptxkit.isa_eval`). A number stands for the register bits it is congruent
    to (`ptxkit.cfg.values.values.signed`): the abstract operation's own number is kept when it is
    congruent to the result, else the result is read as the destination type reads it."""

    def fold(a: Solving, at: Point, found: Operation = found, block: int = block, args: Sequence[Operand] = args,
             compute: Compute = compute, read: list[list[Value] | None] = read, signed_result: bool = signed_result,
             modulus: int = 1 << found.bits) -> list[Value]:
        read[0] = None
        abstract = compute(a, at)
        values = read[0]
        if values is None:  # an operation that reads its operands otherwise (bfe, not, popc)
            values = [a.evaluate(block, operand, at) for operand in args]
        constants = []
        for value in values:
            if len(value) != 1:
                return abstract
            atom = value[0]
            if atom.form != NUM or atom.lo != atom.hi:
                return abstract
            constants.append(atom.lo)
        exact = found.apply(*constants)
        if exact is None:  # the ISA leaves it unspecified (a division by zero)
            return abstract
        kept = constant(abstract[0])
        if kept is not None and (kept - exact) % modulus == 0:
            return abstract
        return [number(exact - modulus if signed_result and exact >= modulus >> 1 else exact)]

    return fold


def _operand_values(block: int, base: str, modifiers: list[str], args: Sequence[Operand],
                    read: list[list[Value] | None] | None, width: int, signed_type: bool) -> Compute:
    """``values(a, at)``: the values of the operands `args` of an instruction of `block`
    (`width` bits, of a signed type or not), each as the instruction reads it; also kept
    in ``read[0]`` when `read` is given. (The functions made here and by the other rule
    makers take what they use as default arguments, not from the maker's scope: a rule
    then keeps one object where a closure keeps a tuple and a cell per name, and a `-G`
    kernel's analysis keeps some 10,000 rules for the collector to walk.)"""
    if base in SIGN_READING or base in ("mul", "mad") and ("hi" in modifiers or "wide" in modifiers) \
            or "sat" in modifiers and base != "cvt":  # a saturating sum too
        views = [_reading(width, signed_type)] * len(args)
        if base in ("min", "max"):  # an unknown operand is still a number of the type: max(x, 0) >= 0
            views = [any_number_of_type(view, width, signed_type) for view in views]
        if base == "mad" and "wide" in modifiers and len(args) == 3:  # the addend has the product's width
            views[2] = _reading(2 * width, signed_type)
        if base == "shr" and len(args) == 2:  # a shift amount is a .u32
            views[1] = _reading(32, False)

        def viewed(a: Solving, at: Point, block: int = block, args: Sequence[Operand] = args,
                   read: list[list[Value] | None] | None = read, views: list[View] = views) -> list[Value]:
            found = [view(a.evaluate(block, arg, at)) for view, arg in zip(views, args)]  # as the type reads them
            if read is not None:
                read[0] = found
            return found
        return viewed

    def values(a: Solving, at: Point, block: int = block, args: Sequence[Operand] = args,
               read: list[list[Value] | None] | None = read) -> list[Value]:
        found = [a.evaluate(block, arg, at) for arg in args]
        if read is not None:
            read[0] = found
        return found
    return values


def _signed_type(modifiers: list[str]) -> bool:
    """True where the modifiers name a signed integer type."""
    for m in modifiers:  # a loop, not any() over a generator: asked for every rule made
        if m[:1] == "s" and m[1:] in TYPE_BITS:
            return True
    return False


def _reading(width: int, signed_type: bool) -> View:
    """How an instruction of a `width`-bit type, signed or not, reads an operand's value
    (`ptxkit.cfg.values.values.signed`, `ptxkit.cfg.values.values.truncate`)."""
    if signed_type:
        return lambda value: signed(value, width)
    return lambda value: truncate(value, width)


def _signed_result(base: str, modifiers: list[str]) -> bool:
    """True when the destination of an integer instruction has a signed type (the first
    type its modifiers name; a comparison's and a bit count's result are unsigned).

    >>> _signed_result("cvt", ["s64", "u32"]), _signed_result("setp", ["lt", "s32"]), _signed_result("popc", ["b32"])
    (True, False, False)
    """
    types = [m for m in modifiers if m in INTEGER_TYPES]
    return bool(types) and types[0][0] == "s" and base not in _UNSIGNED_RESULTS


#: Opcodes whose destination is unsigned whatever the type their modifiers name.
_UNSIGNED_RESULTS = frozenset(("setp", "popc", "clz", "bfind"))
#: The thresholds of a rule that made none (most).
_NO_THRESHOLDS: frozenset[int] = frozenset()
#: Updates a definition that is no join, on a cycle no join breaks, may take before it is
#: widened (docs/fence.md §3.1); any other widens only after `_SAFETY_NET` (never seen).
_PATIENCE, _SAFETY_NET = 12, 256
#: Solves of a -G kernel's values with a stack model before the check must hold (cfg/values/frames.py).
_STACK_ROUNDS = 8


def _dominance_frontiers(flow: FlowGraph) -> tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]:
    idom: dict[int, int] = DOMINATORS.of(flow).idom  # type: ignore[assignment]  # of blocks, from block 0: no EXIT
    return frontiers(flow, idom)


#: The graph's `REGISTER_DEFINITIONS` by block: ``(block, key)`` -> the positions that write it, in order (`by_block`).
REGISTER_DEFINITIONS_BY_BLOCK: Fact[dict[tuple[int, str], tuple[int, ...]]] = Fact(
    "register definitions by block", lambda flow: by_block(REGISTER_DEFINITIONS.of(flow)),
    needs=(REGISTER_DEFINITIONS,))
#: The graph's `REGISTER_DEFINITIONS` by site: ``(block, position)`` -> the keys written there, where there
#: are several (`keys_by_site`).
REGISTER_KEYS_BY_SITE: Fact[dict[Site, tuple[str, ...]]] = Fact(
    "register keys by site", lambda flow: keys_by_site(REGISTER_DEFINITIONS.of(flow)), needs=(REGISTER_DEFINITIONS,))
#: The dominance frontier of each block of a graph, and its dominator tree's children (`frontiers`).
DOMINANCE_FRONTIERS: Fact[tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]] = Fact(
    "dominance frontiers", _dominance_frontiers, needs=(DOMINATORS,))
#: The stack model the last analysis of a graph settled on, once one has (`analyse_registers`).
SETTLED_MODELS: Fact[list[StackModel]] = Fact("settled stack models", lambda flow: [])
#: The rules made for a graph's instructions (`_Analysis.rule`), by `_Analysis._rule_key`:
#: every analysis of the graph takes them, the tensor copies' first analysis and the one
#: after it (docs/fence.md §3.3) as much as the rounds of a `-G` build. A rule is made
#: from the graph and the stack model, which its key names, and reads everything else
#: (values, symbols, alignment) from the analysis it is applied with.
MADE_RULES: Fact[dict[RuleKey, SourcedRule]] = Fact("register rules", lambda flow: {})
#: The thresholds a made rule added (`MADE_RULES`), for the rules that added some.
RULE_THRESHOLDS: Fact[dict[RuleKey, frozenset[int]]] = Fact("register rule thresholds", lambda flow: {})


