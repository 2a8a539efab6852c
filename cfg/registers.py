"""The abstract value of registers at chosen instructions (docs/fence.md §3).

A forward analysis over a flow graph (plain or inlined, `ptxkit.cfg.inline`) with
`ptxkit.cfg.values` as its lattice. It is *demand driven*: only the instructions
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

>>> import ptxkit
>>> from ptxkit.cfg.graph import flow_graph
>>> from ptxkit.cfg.values import show
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

import bisect
import math
from collections.abc import Callable

from ptxkit._records import record
from ptxkit._regex import compile as compile_pattern
from ptxkit.cfg.dominance import DominatorTree
from ptxkit.cfg.frames import Frames, StackModel, observed, stack_frames
from ptxkit.cfg.graph import derived
from ptxkit.cfg.idioms import SUM_OPCODES, align_up, constant_operand, linear, quotient_of, remainder, rounding_add
from ptxkit.cfg.inline import Context
from ptxkit.cfg.loops import on_cycles
from ptxkit.cfg.values import (
    GENERIC, GLOBAL_SPACE_NAME, INF, LOCAL_SPACE, NUM, OTHER_SPACE, SHARED_CLUSTER_SPACE, SHARED_CTA_SPACE, TOP, WINDOW,
    Atom, Region, add, address, and_, anywhere, bits_of, compare, constant, field, join, meet, mul, neg, number, or_,
    pack, refine, refine_by, shl, shr, signed, sub, truncate, unpack, widen, wrap, xor,
)
from ptxkit.syntax import Directive, Function

#: The register of `%tid.x` and friends: their ranges (PTX ISA §10).
SPECIAL_RANGES = {
    "%tid.x": (0, 1023), "%tid.y": (0, 1023), "%tid.z": (0, 63), "%ntid.x": (1, 1024), "%ntid.y": (1, 1024),
    "%ntid.z": (1, 64), "%laneid": (0, 31), "%warpid": (0, 63), "%nwarpid": (1, 64), "%cluster_ctarank": (0, 15),
    "%cluster_nctarank": (1, 16), "%cluster_ctaid.x": (0, 15), "%cluster_ctaid.y": (0, 15),
    "%cluster_ctaid.z": (0, 15), "%cluster_nctaid.x": (1, 16), "%cluster_nctaid.y": (1, 16),
    "%cluster_nctaid.z": (1, 16), "%dynamic_smem_size": (0, 232448), "%total_smem_size": (0, 233472),
    "%smid": (0, 1023), "%nsmid": (1, 1024),
    "%ctaid.x": (0, (1 << 31) - 2), "%ctaid.y": (0, 65534), "%ctaid.z": (0, 65534),
    "%nctaid.x": (1, (1 << 31) - 1), "%nctaid.y": (1, 65535), "%nctaid.z": (1, 65535),
}
#: Special registers that keep one value for a thread's whole run (PTX ISA §10; not
#: ``%warpid`` or ``%smid``, which may change when a thread is rescheduled): a branch on a
#: copy of one bounds every later read of it.
FIXED_SPECIALS = frozenset({
    "%tid.x", "%tid.y", "%tid.z", "%ntid.x", "%ntid.y", "%ntid.z", "%laneid", "%cluster_ctarank",
    "%cluster_nctarank", "%cluster_ctaid.x", "%cluster_ctaid.y", "%cluster_ctaid.z", "%cluster_nctaid.x",
    "%cluster_nctaid.y", "%cluster_nctaid.z", "%dynamic_smem_size", "%total_smem_size",
    "%ctaid.x", "%ctaid.y", "%ctaid.z", "%nctaid.x", "%nctaid.y", "%nctaid.z",
})
_WORD = (0, (1 << 64) - 1)
_TYPE_BITS = {"8": 8, "16": 16, "32": 32, "64": 64, "128": 128}
_SPACE_OF_DECLARATION = {".shared": SHARED_CTA_SPACE, ".local": LOCAL_SPACE, ".global": GLOBAL_SPACE_NAME}
_PARAM_POINTS_TO = {".global": GLOBAL_SPACE_NAME, ".shared": SHARED_CTA_SPACE, ".local": LOCAL_SPACE}


def _identity(value):
    return value


def _compared_as(kind: str):
    """How a ``setp`` of type `kind` reads a register's value: a signed one sees a number
    that may have the sign bit set as negative (`ptxkit.cfg.values.signed`)."""
    if kind[:1] == "s" and kind[1:] in _TYPE_BITS:
        bits = _TYPE_BITS[kind[1:]]
        return lambda value: signed(value, bits)
    return _identity


def _cvt_reading(modifiers: list):
    """How an integer ``cvt`` reads its source: ``(bits, view)``, the low bits it keeps
    and the function of the source's value it gives; None for a ``cvt`` of other types.
    A sign extension reads them as signed, a zero extension as unsigned, a cut keeps the
    number they are congruent to (`ptxkit.cfg.values.wrap`)."""
    types = [m for m in modifiers if m in _INTEGER_TYPES or m in _OTHER_TYPES]
    if len(types) != 2 or types[0] in _OTHER_TYPES or types[1] in _OTHER_TYPES:
        return None
    bits, source_bits = _INTEGER_TYPES[types[0]], _INTEGER_TYPES[types[1]]
    if source_bits < bits and types[1][0] == "s":
        return source_bits, lambda value: signed(value, source_bits)
    if bits <= source_bits:
        return bits, lambda value: wrap(value, bits)
    return source_bits, lambda value: truncate(value, source_bits)


def _register_and_constant(operands) -> tuple[str, int] | None:
    """``(r, C)`` for the operands ``d, r, C`` of a two-source instruction whose second
    source is an integer constant, else None."""
    if len(operands) == 3 and operands[1].kind == "register" and operands[2].kind == "immediate" \
            and isinstance(operands[2].value, int):
        return operands[1].name, operands[2].value
    return None


def _copy_of(instruction, head, z: str) -> bool:
    """True for an unguarded ``mov`` of register `z`, or an integer ``cvt`` of it to as
    many bits or fewer that does not saturate: either keeps z modulo the width of a sum
    that reads it."""
    operands = instruction.operands
    if head[0] is not None or len(operands) != 2 or operands[1].kind != "register" or operands[1].name != z:
        return False
    if head[2] == "mov":
        return True
    modifiers = head[1].split(".")[1:]
    types = [m for m in modifiers if m in _INTEGER_TYPES]
    return head[2] == "cvt" and _cvt_reading(modifiers) is not None and "sat" not in modifiers \
        and _INTEGER_TYPES[types[0]] <= _INTEGER_TYPES[types[1]]


@record
class _MultipleOf:
    """What a test ``x % modulus == 0`` bounds ``x`` by: rounding it up to `modulus` leaves
    it as it is (`_narrowing` rounds the value it narrows)."""

    modulus: int


def _inverse(opcode: str, base: str, operands, uniform: bool):
    """The inverse of one defining step for branch refinement (see `_inverse_chain`)."""
    low_bits = len(operands) == 3 and operands[2].kind == "immediate" and isinstance(operands[2].value, int)
    modulus = None
    if low_bits and opcode.startswith("rem.u"):
        modulus = operands[2].value
    elif low_bits and base == "and":
        modulus = operands[2].value + 1  # x & (N - 1) is x % N
    if modulus is not None and modulus >= 2 and not modulus & (modulus - 1):
        return lambda value: _MultipleOf(modulus) if constant(value) == 0 else (Atom(0, None, None, -INF, INF),)
    if base in ("add", "sub") and len(operands) == 3 and operands[2].kind == "immediate" \
            and isinstance(operands[2].value, int):
        step = operands[2].value if base == "add" else -operands[2].value
        return lambda value: sub(value, number(step))
    if opcode.startswith("shr.u") and len(operands) == 3 and operands[2].kind == "immediate":
        count = operands[2].value

        def widen_back(value):
            if len(value) == 1 and value[0].form == 0 and value[0].lo >= 0 and value[0].hi < INF:
                return number(value[0].lo << count, (value[0].hi << count) + (1 << count) - 1)
            return (Atom(0, None, None, -INF, INF),)
        return widen_back
    if base == "mov" and len(operands) == 2 or base == "shfl" and uniform:
        return _identity
    return None


#: CTAs per cluster without the non-portable opt-in (CUDA programming guide, thread
#: block clusters: 8 is the portable maximum, 16 needs cudaFuncAttributeNonPortableClusterSizeAllowed)
PORTABLE_CLUSTER = 8


def special_ranges(function, max_cluster: int = PORTABLE_CLUSTER) -> dict:
    """`SPECIAL_RANGES` narrowed by the kernel's ``.maxntid``/``.reqntid`` (its threads
    per block: ``%tid.x < N`` when it declares ``N, 1, 1``) and by its cluster size:
    ``.reqnctapercluster``/``.maxclusterrank`` when it declares one, else `max_cluster`
    CTAs (docs/fence.md §8).

    >>> import ptxkit
    >>> k = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...                  ".visible .entry k() .maxntid 384, 1, 1\\n{\\n\\tret;\\n}\\n").function("k")
    >>> special_ranges(k)["%tid.x"], special_ranges(k)["%tid.y"], special_ranges(k)["%cluster_ctarank"]
    ((0, 383), (0, 0), (0, 7))
    """
    ranges = dict(SPECIAL_RANGES)
    cluster = max_cluster
    for name, args in function.signature.directives:
        if name not in (".maxntid", ".reqntid", ".reqnctapercluster", ".maxclusterrank"):
            continue
        try:
            dims = [int(a.strip()) for a in args.split(",")]
        except ValueError:
            continue
        if name in (".reqnctapercluster", ".maxclusterrank"):
            cluster = math.prod(dims)
            continue
        if len(dims) == 1:
            dims = dims * 3  # a total: no dimension is larger
        for axis, size in zip("xyz", dims):
            if size >= 1:
                ranges[f"%tid.{axis}"] = (0, min(size - 1, ranges[f"%tid.{axis}"][1]))
                ranges[f"%ntid.{axis}"] = (1, min(size, ranges[f"%ntid.{axis}"][1]))
    if 1 <= cluster <= 16:
        ranges["%cluster_ctarank"] = (0, cluster - 1)
        ranges["%cluster_nctarank"] = (1, cluster)
        for axis in "xyz":
            ranges[f"%cluster_ctaid.{axis}"] = (0, cluster - 1)
            ranges[f"%cluster_nctaid.{axis}"] = (1, cluster)
    return ranges


def _one_dimensional(function) -> bool:
    """True when the kernel declares its blocks one-dimensional (``.maxntid N, 1, 1``)."""
    for name, args in function.signature.directives:
        if name in (".maxntid", ".reqntid"):
            dims = [a.strip() for a in args.split(",")]
            return all(d == "1" for d in dims[1:])
    return False


_SWAPPED = {"eq": "eq", "ne": "ne", "lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "lo": "hi", "hi": "lo",
            "ls": "hs", "hs": "ls"}
_NO_DEFINITION = frozenset("bra brx call ret exit trap nanosleep stackrestore pmevent st red bar barrier "
                           "fence membar prefetch prefetchu".split())
_COUNTS = frozenset("popc clz bfind activemask".split())
DYNAMIC_SHARED = "dynamic shared"
_PLAIN = " plain registers"  # the key of a symbol table's set of registers declared without %


def register_values(flow, queries: dict, max_cluster: int = PORTABLE_CLUSTER) -> dict:
    """Abstract values for `queries`: ``{key: (block, position, operand)}``.

    `operand` is an `ptxkit.instruction.Operand` of the instruction at `position` in
    `block` (a register, immediate, symbol, or a ``[base+offset]`` memory operand,
    whose address is wanted), or a key such as ``param:param0+0`` (a call argument);
    it is evaluated just before that instruction.
    """
    return analyse_registers(flow, queries, max_cluster)[0]


@record
class RegisterAnswers:
    """What `analyse_registers` found: the value of each query, the blocks the branch
    conditions prove unreachable (their queries answer the empty value: no value ever
    gets there), and `by_thread(query, low, high[, register])`: the query's value for the
    threads whose ``%tid.x`` (or `register`, such as ``%laneid``) lies in ``[low, high]``,
    or None where it does not depend on it (docs/fence.md §3.6)."""

    values: dict
    dead: set
    by_thread: Callable[..., tuple | None]


def analyse_registers(flow, queries: dict, max_cluster: int = PORTABLE_CLUSTER,
                      aligned: dict | None = None) -> RegisterAnswers:
    """`register_values`, the unreachable blocks and the values by thread
    (`RegisterAnswers`). `aligned` gives regions a larger alignment than they declare
    (``{region: bytes}``: what the kernel's tensor copies show, `ptxkit.cfg.events`).

    >>> import ptxkit
    >>> from ptxkit.cfg.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b32 %r<3>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tsetp.lt.u32 %p1, %r1, 4096;\\n"
    ...     "\\t@%p1 bra L;\\n\\tmov.u32 %r2, %r1;\\nL:\\n\\tret;\\n}\\n")
    >>> flow = flow_graph(m.function("k"))
    >>> values, dead, _ = analyse_registers(flow, {"r": (1, 0, flow.blocks[1].instructions[0].operands[1])})
    >>> values, dead
    ({'r': ()}, {1})
    """
    if not queries:
        return RegisterAnswers({}, set(), lambda query, low, high, register="%tid.x": None)
    analysis = _Analysis(flow, max_cluster, aligned)
    frames = stack_frames(flow)
    if frames is None or not analysis.reads_stack(queries, frames):
        values, dead = analysis.solve(queries)
        return RegisterAnswers(values, dead, analysis.by_thread)
    # a -G build: follow values through its stack frames, first assuming that a store
    # through an unknown address writes no cell, then checking every access against the
    # values found, until the check asks for nothing more (cfg/frames.py)
    probes = {("stack", i): (access.block, access.position, access.memory) for i, access in enumerate(frames.accesses)}
    answer = None  # the last round whose values the check found sound
    # an earlier analysis of the graph (the tensor copies' pre-pass, docs/fence.md §3.3)
    # probed every stack access too: the model it settled on is the likeliest to hold
    # now, and the check below makes any starting model safe
    reused = getattr(flow, "derived", {}).get(_SETTLED_MODEL)
    model = reused if reused is not None else observed(frames)
    following = _Analysis(flow, max_cluster, aligned)
    for _ in range(_STACK_ROUNDS):
        following.follow(model)
        values, dead = following.solve({**queries, **probes})
        found = observed(frames, values, dead)
        if model.holds_for(found):
            answer = RegisterAnswers({key: values[key] for key in queries}, dead, following.by_thread)
            if model.settled(found) and (model is not reused or model.matches(found)):
                if getattr(flow, "derived", None) is not None:
                    flow.derived[_SETTLED_MODEL] = model
                return answer
            following = _Analysis(flow, max_cluster, aligned)  # the answer's `by_thread` keeps this one's values
            if model is reused:  # it holds but gives stores more than these values ask: try what they ask
                model = found
                continue
        model = model.advance(found)
    if answer is None:  # no round held: the values without the stack
        values, dead = analysis.solve(queries)
        answer = RegisterAnswers(values, dead, analysis.by_thread)
    return answer


def symbol_regions(function, context: Context | None = None) -> dict:
    """Variables visible in `function` -> the abstract value of their address
    (registers declared without a ``%``, as inline assembly does, map to None).

    Every ``extern .shared`` array is the same dynamic region (they all start at the
    dynamic shared memory); ``.local`` variables get one region per inlined copy.

    >>> import ptxkit
    >>> from ptxkit.cfg.values import show
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.extern .shared .align 16 .b8 dyn[];\\n"
    ...                  ".visible .entry k()\\n{\\n.shared .align 8 .b64 bars[4];\\n\\tret;\\n}\\n")
    >>> regions = symbol_regions(m.function("k"))
    >>> show(regions["dyn"]), show(regions["bars"]), regions["bars"][0].region.size
    ('dynamic shared+0 (shared::cta window)', 'bars+0 (shared::cta window)', 32)
    """
    suffix = f"@{context.id}" if context is not None and context.id else ""
    module = function.module
    found = dict(_module_symbols(module, suffix)) if module is not None else {}
    declared = _declared(function, suffix)
    found.update(declared)
    if _dynamic_alignments(declared):  # extern arrays in the function too: one region with the module's
        _one_dynamic_region(found, max(_dynamic_alignments(found)))
    for param in function.signature.params:
        found.setdefault(param.name, (Atom(WINDOW, OTHER_SPACE),))
    return found


class _SymbolCache:
    """Symbol tables of the module being analysed (one module at a time is kept): a
    kernel with thousands of inlined calls asks for the same tables thousands of times."""

    module = None
    tables: dict[int, dict] = {}

    @classmethod
    def get(cls, module, node, suffix: str, build) -> dict:
        if cls.module is not module:
            cls.module, cls.tables = module, {}
        tables = cls.tables.setdefault(id(node), {})
        if None in tables:  # no .local variables: one table fits every inlined copy
            return tables[None]
        table = tables.get(suffix)
        if table is None:
            table = build()
            local = any(v is not None and v[0].space == LOCAL_SPACE for v in table.values())
            tables[suffix if local else None] = table
        return table


def _module_symbols(module, suffix: str) -> dict:
    """The module-scope variables and functions."""
    return _SymbolCache.get(module, module, suffix, lambda: _scan(module.items, True, suffix))


def _declared(function, suffix: str) -> dict:
    """The variables a function declares."""
    return _SymbolCache.get(function.module, function, suffix, lambda: _scan(function.walk(), False, suffix))


def _scan(nodes, module_scope: bool, suffix: str) -> dict:
    found: dict[str, tuple] = {}
    dynamic = 0  # the largest alignment an extern .shared array declares
    for node in nodes:
        if type(node) is Directive:
            if not module_scope and node.name == ".reg":
                declaration = node.declaration
                for name in declaration.base_names if declaration is not None else ():
                    if not name.startswith("%"):
                        found[name] = None
            else:
                dynamic = max(dynamic, _declare(node, found, suffix))
        elif module_scope and type(node) is Function:
            found[node.name] = (Atom(WINDOW, OTHER_SPACE),)
    if dynamic:
        _one_dynamic_region(found, dynamic)
    return found


def _dynamic_alignments(table: dict) -> set:
    return {value[0].region.align for value in table.values()
            if value is not None and value[0].region is not None and value[0].region.name == DYNAMIC_SHARED}


def _one_dynamic_region(found: dict, align: int) -> None:
    """Every extern .shared array starts at the one dynamic shared memory, aligned as
    the most aligned of them asks."""
    region = Region(DYNAMIC_SHARED, SHARED_CTA_SPACE, None, align)
    for name, value in found.items():
        if value is not None and value[0].region is not None and value[0].region.name == DYNAMIC_SHARED:
            found[name] = address(region)


def _declare(directive, found: dict, suffix: str) -> int:
    """Add the variables `directive` declares; the alignment of the dynamic shared
    memory it declares, or 0."""
    declaration = directive.declaration
    if declaration is None:
        return 0
    space = _SPACE_OF_DECLARATION.get(declaration.space)
    if space is None:
        if declaration.space in (".const", ".param"):
            for name in declaration.base_names:
                found[name] = (Atom(WINDOW, OTHER_SPACE),)
        return 0
    element = _TYPE_BITS.get((declaration.type or ".b8")[2:], 8) // 8
    dynamic = 0
    for name, base in zip(declaration.names, declaration.base_names):
        dims = [d.strip() for d in name[len(base):].strip("[]").split("][")] if "[" in name else []
        align = declaration.align or element
        if dims and not all(dims):  # extern array of unknown size
            if space == SHARED_CTA_SPACE:
                found[base] = address(Region(DYNAMIC_SHARED, space, None, align))
                dynamic = max(dynamic, align)
                continue
            size = None
        else:
            size = element
            for dim in dims:
                size *= int(dim, 0)
        found[base] = address(Region(base + (suffix if space == LOCAL_SPACE else ""), space, size, align))
    return dynamic


# -- the analysis ----------------------------------------------------------------------------


class _Overlay(dict):
    """The values one thread range gives the definitions it evaluates again; every
    other version reads through to `base`, the fixpoint's values for all threads.

    >>> overlay = _Overlay({"a": 1, "b": 2})
    >>> overlay["b"] = 3
    >>> overlay.get("a"), overlay.get("b"), overlay.get("c", 0)
    (1, 3, 0)
    """

    __slots__ = ("base",)

    def __init__(self, base: dict):
        super().__init__()
        self.base = base

    def get(self, key, default=None):
        return self[key] if key in self else self.base.get(key, default)


def _between(flow, dominators, there: int, reading: int) -> frozenset:
    """The blocks on a way from block `there` to block `reading` (`reading` included)
    that does not pass `there` again. Where `there` dominates `reading`, every block
    that reaches `reading` without passing `there` comes after it, so one walk back from
    `reading` finds them (a dominator and the block it reaches, as `-G` code recomputes a
    value, are near each other; the walk forward from `there` would cover the rest of
    the kernel)."""

    def closure(start, step):
        seen, work = set(), list(start)
        while work:
            node = work.pop()
            if node != there and node not in seen:
                seen.add(node)
                work.extend(step[node])
        return seen

    back = closure(flow.pred[reading], flow.pred) | {reading}
    if there != reading and dominators.dominates(there, reading):
        return frozenset(node for node in back if dominators.dominates(there, node))  # not the unreachable ones
    return frozenset(closure(flow.succ[there], flow.succ) & back)


def _by_block(definitions: dict) -> dict:
    """(block, key) -> the sorted positions of the block's definitions of key."""
    found: dict = {}
    for key, sites in definitions.items():
        for block, position in sites:
            found.setdefault((block, key), []).append(position)
    for positions in found.values():
        positions.sort()
    return found


def _frontiers(flow, idom: dict) -> tuple[dict, dict]:
    """The dominance frontier of each block (where a definition in it needs a join) and
    the dominator tree's children, of one graph."""
    frontier: dict[int, set] = {}
    for block in flow.rpo:
        preds = [p for p in flow.pred[block] if p in idom]
        if len(preds) < 2:
            continue
        for runner in preds:
            while runner != idom.get(block) and runner is not None:
                frontier.setdefault(runner, set()).add(block)
                parent = idom.get(runner)
                runner = parent if parent != runner else None
    children: dict[int, list] = {}
    for node, parent in idom.items():
        if node != parent:
            children.setdefault(parent, []).append(node)
    return frontier, children


class _Analysis:
    def __init__(self, flow, max_cluster: int = PORTABLE_CLUSTER, aligned: dict | None = None,
                 stack: StackModel | None = None):
        self.flow = flow
        self.aligned = aligned or {}
        self._rules: dict[tuple, tuple] = {}  # (block, position) -> `rule`, where no stack model changes it
        self.follow(stack)
        self._rounding_blocks: dict[int, bool] = {}  # `_may_round`
        self.special = special_ranges(flow.function, max_cluster)
        self.symbols: dict[int, dict] = {}  # context id -> symbol values
        self.thresholds: set[int] = set()  # constants compared against: where widening stops
        self.returning: dict[int, Context] = {}  # block -> the inlined callee that returns into it
        for block in flow.blocks:
            context = block.context
            if context is not None and context.parent is not None:
                for successor in flow.succ[block.index]:
                    follower = flow.blocks[successor]
                    if follower.context is context.parent and (block.index, successor) in flow.kinds \
                            and flow.kinds[(block.index, successor)] == "return":
                        self.returning[successor] = context

    def follow(self, stack: StackModel | None) -> None:
        """Take `stack` as the model of the stack cells the next `solve` follows; the
        rules of instructions that do not access memory are kept from earlier solves
        (the rounds of a `-G` build solve again with each model)."""
        self.stack = stack
        self.unknown_cells = stack.unknown if stack is not None else frozenset()
        self._with_cells: dict | None = None  # the definitions with the cells the stack model follows
        self._definitions_by_block: dict | None = None  # `_definition_index`, once asked for

    # -- names ----------------------------------------------------------------------------
    def prefix(self, block: int) -> str:
        context = self.flow.blocks[block].context
        return context.prefix if context is not None else ""

    def plain(self, block: int) -> frozenset:
        """Registers declared without ``%`` in the block's function (inline assembly)."""
        table = self.symbol_values(block)
        names = table.get(_PLAIN)
        if names is None:
            names = table[_PLAIN] = frozenset(name for name, value in table.items() if value is None)
        return names

    def symbol_values(self, block: int) -> dict:
        context = self.flow.blocks[block].context
        key = context.id if context is not None else 0
        table = self.symbols.get(key)
        if table is None:
            function = context.function if context is not None else self.flow.function
            table = self.symbols[key] = symbol_regions(function, context)
            for name, value in table.items():
                if value is not None and value[0].region in self.aligned:
                    region = value[0].region
                    table[name] = (value[0]._replace(region=region._replace(align=self.aligned[region])),)
        return table

    def param_key(self, block: int, name: str, offset: int, loading: bool) -> str | None:
        """The key a ``.param`` access at `block` names: a call argument or result of
        this context, or (for ``ld.param`` in an inlined callee) the caller's argument."""
        context = self.flow.blocks[block].context
        if loading and context is not None:
            if context.parent is not None and name in context.arguments:
                return f"{context.parent.prefix}param:{context.arguments[name]}+{offset}"
            callee = self.returning.get(block)
            if callee is not None and name in callee.results:
                return f"{callee.prefix}param:{callee.results[name]}+{offset}"
        if not loading and context is not None and context.parent is not None:
            if name in {p.name for p in context.function.signature.return_params}:
                return f"{context.prefix}param:{name}+{offset}"
        return f"{self.prefix(block)}param:{name}+{offset}"

    # -- definitions and the slice ----------------------------------------------------------
    def definitions(self) -> dict:
        """key -> the ``(block, position)`` of every instruction defining it (registers
        by context, call arguments and results, the stack cells the model follows);
        the registers' computed once per graph."""
        found = derived(self.flow, "register definitions", self._definitions)
        if self.stack is None or not self.stack.exact:
            return found
        if self._with_cells is None:
            self._with_cells = dict(found)
            for site in self.stack.exact:
                key = _cell_key(next(iter(self.stack.stores[site])))
                self._with_cells[key] = [*self._with_cells.get(key, ()), site]
        return self._with_cells

    def _definitions(self) -> dict:
        found: dict[str, list[tuple[int, int]]] = {}
        for block in self.flow.blocks:
            prefix = self.prefix(block.index)
            plain = self.plain(block.index)
            for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
                base = head[2]
                if base == "st" and head[1].startswith("st.param"):
                    for key in self._param_store_keys(block.index, instruction):
                        found.setdefault(key, []).append((block.index, position))
                    continue
                if base in _NO_DEFINITION:
                    continue
                for name in destinations(instruction, head, plain):
                    found.setdefault(prefix + name, []).append((block.index, position))
        return found

    def _param_store_keys(self, block: int, instruction) -> list[str]:
        operands = instruction.operands
        if not operands or operands[0].kind != "memory" or operands[0].name is None:
            return []
        width = _element_bytes(instruction.opcode)
        count = len(operands[1].elements) if len(operands) > 1 and operands[1].kind == "vector" else 1
        offset = int(operands[0].value or 0)
        return [self.param_key(block, operands[0].name, offset + i * width, loading=False) for i in range(count)]

    def reads_stack(self, queries: dict, frames: Frames) -> bool:
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
        if head[2] == "ld" and _is_param(head[1].split(".")[1:]):
            return [k for k in self._param_load_keys(block, instruction.operands, head[1]) if k is not None]
        prefix, plain = self.prefix(block), self.plain(block)
        return [prefix + name for operand in instruction.operands[1:] for name in _reads(operand, plain)]

    def solve(self, queries: dict) -> tuple[dict, set]:
        """Values by a sparse fixpoint over the definitions that matter (docs/fence.md
        §3.1). The registers defined more than once are put in SSA form first (a version
        per definition, joins at the dominance frontiers), so every value belongs to
        one program point; a version's value is what its definition computes from the
        versions it reads, narrowed by the branch conditions that dominate the reader; a
        version whose value keeps growing is widened to the constants the code compares
        against."""
        definitions = self.definitions()
        self.defined = set(definitions)
        wanted = set()
        for block, position, operand in queries.values():
            wanted.update(self.sources_of(block, operand))
        conditions = self.branch_conditions(definitions)
        rules: dict = {}
        seen: set = set()
        self.slice(definitions, wanted, rules, seen)
        for _, (key, _, bound, _, chain), _ in conditions.values():  # conditions that bound what we follow
            keys = [key] + [source[0] if isinstance(source, tuple) else source for source, _ in chain] + \
                ([bound] if isinstance(bound, str) else [])
            if any(k in seen for k in keys):
                self.slice(definitions, set(keys) - seen, rules, seen)
        self.dominators = DominatorTree.of(self.flow)
        self.values: dict[str, tuple] = {}
        self.updates: dict[str, int] = {}
        self.thresholds_sorted = sorted(self.thresholds)
        phis = self._rename(definitions, rules, queries, conditions, seen)
        self.rules = rules
        self._self_fed = self._self_feeding(definitions, rules)
        self._refinements(conditions, definitions)
        readers: dict[str, list] = {}
        rank = {block: i for i, block in enumerate(self.flow.rpo)}
        order = sorted((key for key in rules if key[0] in rank), key=lambda key: (rank[key[0]], key[1]))
        work_items = {key: rules[key][0] for key in order}
        for key in order:
            for source in rules[key][1]:
                readers.setdefault(self.uses.get((key, source), source), []).append(key)
        for (at, target), previous in self.kept.items():  # a guarded definition may keep the old version
            readers.setdefault(previous, []).append(at)
        for version, inputs in phis.items():
            item = ("phi", version)
            work_items[item] = self._phi(version, inputs)
            order.append(item)
            for _, source in inputs:
                readers.setdefault(source, []).append(item)
        for x_key, sources in self.depends.items():  # a narrowing by a condition on x reads x
            for source in sources:
                readers.setdefault(x_key, []).extend(readers.get(source, ()))
        work = list(reversed(order))
        queued = set(order)
        while work:
            item = work.pop()
            queued.discard(item)
            self.dirty = []
            work_items[item](item)
            for changed in self.dirty:
                for reader in readers.get(changed, ()):
                    if reader not in queued:
                        queued.add(reader)
                        work.append(reader)
        self.queries, self._rank = queries, rank
        self._cones: dict = {}
        self._by_thread: dict = {}  # (register, low, high) -> (definitions evaluated, their values, update counts)
        dead = self._dead_blocks()
        answers = {}
        for key, (block, position, operand) in queries.items():
            answers[key] = () if block in dead else self.evaluate(block, operand, ("query", key, block))
        return answers, dead

    # -- values by thread ---------------------------------------------------------------------
    def by_thread(self, name, low: int, high: int, register: str = "%tid.x") -> tuple | None:
        """Query `name`'s value for the threads whose ``%tid.x`` (or another special
        `register`, such as ``%laneid``) lies in ``[low, high]``, or None when it does not
        depend on it (docs/fence.md §3.6): the definitions it is computed from, back to
        the joins, are evaluated again with that range; everything else keeps the value
        the fixpoint gave it for all threads. Two terms that both follow a bit of the
        thread index (a swizzle and a ``selp`` on the same bit) then stop adding their
        extremes."""
        cone = self._cones.get((name, register), False)
        if cone is False:
            cone = self._cones[(name, register)] = self._thread_cone(name, register)
        if cone is None:
            return None
        sites, versions = cone
        found = self._by_thread.get((register, low, high))
        if found is None:  # what earlier accesses computed for this range
            found = self._by_thread[(register, low, high)] = (set(), _Overlay(self.values), {})
        done, overlay, counts = found
        values, updates, special = self.values, self.updates, self.special
        try:
            self.values, self.updates, self.special = overlay, counts, {**special, register: (low, high)}
            if not done.issuperset(sites):
                for version in versions:
                    if version not in overlay:
                        overlay[version] = ()  # evaluated afresh for the range, not joined with all threads'
                self.dirty = []
                for site in sites:
                    if site not in done:
                        self.rules[site][0](site)
                done.update(sites)
            block, _, operand = self.queries[name]
            return self.evaluate(block, operand, ("query", name, block))
        finally:
            self.values, self.updates, self.special = values, updates, special

    _CONE_LIMIT = 256

    def _thread_cone(self, name, register: str) -> tuple[tuple, frozenset] | None:
        """The definitions query `name` is computed from, back to joins, loads and
        registers defined nowhere, in the order they run, and the versions they define;
        None when none of them reads `register`, when there are more than `_CONE_LIMIT`,
        or when one reads a version defined after it (a register read before its only
        definition, around a loop)."""
        block, _, operand = self.queries[name]
        site_of = self._site_of
        work = [(("query", name, block), key) for key in self.sources_of(block, operand)]
        sites: set = set()
        versions: set = set()
        reads: list = []  # (reading site, site of the version read)
        while work:
            at, key = work.pop()
            version = self.uses.get((at, key), key)
            site = site_of.get(version)
            only = set(self.definitions().get(key, ())) if site is None and version == key else ()
            if len(only) == 1:
                site = next(iter(only))
            if site is None or site not in self.rules:
                continue  # a join, an entry value, or nothing defines it: its value stands
            if at[0] != "query":
                reads.append((at, site))
            versions.add(version)
            if site in sites:
                continue
            sites.add(site)
            if len(sites) > self._CONE_LIMIT:
                return None
            work.extend((site, source) for source in self.rules[site][1])
        order = {site: (self._rank.get(site[0], -1), site[1]) for site in sites}
        if any(order[source] >= order[reader] for reader, source in reads):
            return None
        if not any(operand.kind == "special" and operand.name == register
                   for b, p in sites for operand in self.flow.blocks[b].instructions[p].operands[1:]):
            return None
        return tuple(sorted(sites, key=order.__getitem__)), frozenset(versions)

    def _rename(self, definitions, rules, queries, conditions, keys) -> dict:
        """SSA versions of the registers in `keys` defined more than once: fills
        `uses` ((point, key) -> version read there), `defs` ((point, key) -> version
        written), `kept` ((point, key) -> the version a guarded definition may keep),
        and returns the joins: ``{version: [(predecessor block, input version)]}``."""
        multi = {key for key in keys if len(definitions.get(key, ())) > 1}
        self.uses, self.defs, self.kept = {}, {}, {}
        if not multi:
            return {}
        flow = self.flow
        idom = self.dominators.idom
        frontier, children = derived(flow, "dominance frontiers", lambda: _frontiers(flow, idom))
        phi_at: dict[int, list] = {}
        for key in multi:
            blocks = {b for b, _ in definitions[key]}
            work, placed = list(blocks), set()
            while work:
                for target in frontier.get(work.pop(), ()):
                    if target not in placed:
                        placed.add(target)
                        phi_at.setdefault(target, []).append(key)
                        if target not in blocks:
                            blocks.add(target)
                            work.append(target)
        defined_here: dict[tuple, list] = {}  # (block, position) -> the keys of `multi` it defines
        for key in multi:
            for site in dict.fromkeys(definitions[key]):
                defined_here.setdefault(site, []).append(key)
        points: dict[int, list] = {}  # block -> [(position, order, kind, key, point)]
        for (block, position), (_, sources) in rules.items():
            point = (block, position)
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
        phis: dict[str, list] = {}
        pushed_at: dict[int, list] = {}
        stacks = {key: [key + "@entry"] for key in multi}
        root = next((n for n, p in idom.items() if n == p), None)
        if root is None:
            return {}
        stack = [(root, False)]
        while stack:
            block, leaving = stack.pop()
            if leaving:
                for key in reversed(pushed_at.pop(block)):
                    stacks[key].pop()
                continue
            pushed = []
            for key in phi_at.get(block, ()):
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
                    version = _version(key, block, position)
                    self.defs[(point, key)] = version
                    stacks[key].append(version)
                    pushed.append(key)
            for successor in flow.succ[block]:
                for key in phi_at.get(successor, ()):
                    phis.setdefault(f"{key}@join{successor}", []).append((block, stacks[key][-1]))
            pushed_at[block] = pushed
            stack.append((block, True))
            for child in children.get(block, ()):
                stack.append((child, False))
        return phis

    def _self_feeding(self, definitions: dict, rules: dict) -> frozenset:
        """The keys defined once whose definition reads them again through keys defined
        once (a register a loop reads before its one definition): the cycles no join
        breaks, so only they widen as definitions that are no join (docs/fence.md §3.1)."""
        single = {key: sites[0] for key, sites in definitions.items() if len(sites) == 1 and sites[0] in rules}
        return on_cycles({key: [source for source in rules[site][1] if source in single]
                          for key, site in single.items()})

    def _phi(self, version: str, inputs: list):
        """A join's rule: the join of what each edge in brings, each input narrowed by
        the conditions that hold at the end of its predecessor and on the edge itself
        (a loop's back edge: ``i + 1 < 64`` bounds what the loop's next turn starts
        with)."""
        join_block = int(version.rsplit("@join", 1)[1])

        def join_inputs(item):
            value = ()
            for predecessor, source in inputs:
                incoming = self._narrowed(predecessor, source, self.values.get(source, ()))
                for compared, narrow in self.edge_narrowing.get((predecessor, join_block), ()):
                    if incoming and compared in (source, self._copied_from(source)):
                        incoming = narrow(incoming)
                value = join(value, incoming)
            self.assign(item, version, value, True, versioned=True)
        return join_inputs

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

    def _refinements(self, conditions: dict, definitions: dict) -> None:
        """Where each branch condition holds: along an edge that dominates its target (the
        target's other predecessors are inside its loops), in every block the target
        dominates. The compared register is narrowed as the version the test read; the
        registers it was computed from only when defined once."""
        self.narrowing: dict[int, list] = {}  # block -> [(version, narrow(value))] that start there
        self.edge_narrowing: dict[tuple, list] = {}  # (block, successor) -> [(version, narrow)] on that edge
        self._site_of = {version: point for (point, _), version in self.defs.items()}
        self.depends: dict[str, set] = {}
        self._memo: dict[int, dict] = {}
        for branch, (negated, (key, comparison, bound, kind, chain), _) in conditions.items():
            key = self.uses.get((("branch", branch, branch), key), key)
            chain = [(self.uses.get((source[1], source[0]), source[0]) if isinstance(source, tuple) else source,
                      inverse) for source, inverse in chain
                     if isinstance(source, tuple) or len(definitions.get(source, ())) == 1 or _special(source)]
            if isinstance(bound, str):  # the other register's version at the test; narrowing follows it
                bound = (bound, self.uses.get((("branch", branch, branch), bound), bound))
                self.depends.setdefault(bound[1], set()).update([key] + [source for source, _ in chain])
            for successor in set(self.flow.succ[branch]):
                kinds = self.flow.kinds.get((branch, successor), "").split(",")
                if ("taken" in kinds) == ("fallthrough" in kinds):
                    continue
                holds = ("taken" in kinds) != negated
                narrow = self._narrowing(branch, key, comparison, bound, kind, holds, chain)
                self.edge_narrowing[(branch, successor)] = narrow
                self.depends.setdefault(key, set()).update(source for source, _ in chain)
                if any(p != branch and not self.dominators.dominates(successor, p) for p in self.flow.pred[successor]):
                    continue  # the edge must dominate the successor (other edges in are its loops' back edges)
                self.narrowing.setdefault(successor, []).extend(narrow)
                self.depends.setdefault(key, set()).update(source for source, _ in chain)

    def _narrowing(self, branch: int, key: str, comparison, bound, kind: str, holds, chain) -> list:
        """``[(key, narrow)]`` for the compared register and each register of its chain
        (`kind`: the ``setp`` type, such as ``s32``)."""
        unsigned, view = kind[0] in "ub", _compared_as(kind)

        def compared(value):
            if isinstance(bound, tuple):  # (key, version) of the register compared against
                other = self.values.get(bound[1])
                other = (() if bound[0] in self.defined else TOP) if other is None else other
                return refine_by(view(value), comparison, view(self._narrowed(branch, bound[1], other)), holds,
                                 unsigned)
            return refine(view(value), comparison, bound, holds, unsigned)

        out = [(key, compared)]
        steps: list = []
        for source, inverse in chain:
            steps.append(inverse)

            def bounded(value, steps=tuple(steps)):
                limit = compared(self._narrowed(branch, key, self.values.get(key, ())))
                for step in steps:
                    if not limit:
                        return ()
                    limit = step(limit)
                if isinstance(limit, _MultipleOf):  # x % N == 0: x is x rounded up to N
                    return _rounded_up(value, limit.modulus) if value else ()
                return meet(value, limit) if value and limit else ()

            out.append((source, bounded))
        return out

    def _narrowed_at(self, block: int) -> dict:
        """key -> the narrowings that hold in `block` (from its dominators, outermost first)."""
        memo = self._memo.get(block)
        if memo is not None:
            return memo
        chain = []  # the dominators not yet memoised, innermost first (no recursion: trees get deep)
        while memo is None:
            chain.append(block)
            parent = self.dominators.idom.get(block)
            if not isinstance(parent, int) or parent == block:
                memo = {}
                break
            block = parent
            memo = self._memo.get(block)
        for block in reversed(chain):
            own = self.narrowing.get(block)
            if own:
                memo = {key: list(value) for key, value in memo.items()}
                for key, narrow in own:
                    memo.setdefault(key, []).append(narrow)
            self._memo[block] = memo
        return memo

    def _dead_blocks(self) -> set:
        """Blocks that some dominating branch condition says no run ever reaches."""
        dead_starts = set()
        for block, narrowings in self.narrowing.items():
            parent = self.dominators.idom.get(block)
            for version, narrow in narrowings:
                base = self.values.get(version, ())
                if isinstance(parent, int):
                    base = self._narrowed(parent, version, base)
                if base and not narrow(base):
                    dead_starts.add(block)
        if not dead_starts:
            return set()
        dead = set()
        idom = self.dominators.idom
        for block in self.flow.rpo:  # a block's immediate dominator comes before it
            parent = idom.get(block)
            if block in dead_starts or (parent in dead and parent != block):
                dead.add(block)
        return dead

    def lookup(self, at, key: str) -> tuple:
        """A register's value where `at` reads it (a rule's ``(block, position)``, a
        query's point): the value of the version reaching there, narrowed by the branch
        conditions dominating the block (the empty value until its definition has been
        evaluated; top for a register nothing defines)."""
        version = self.uses.get((at, key), key)
        value = self.values.get(version)
        if value is None:
            value = () if key in self.defined else TOP
        return self._narrowed(_reading_block(at), version, value)

    def _narrowed(self, block: int, version: str, value: tuple) -> tuple:
        for narrow in self._narrowed_at(block).get(version, ()):
            if not value:
                break
            value = narrow(value)
        return value

    def assign(self, at, key: str, value: tuple, strong: bool, versioned: bool = False) -> None:
        """Record what the definition at `at` computes for `key`; a guarded one keeps the
        version it may leave in place too."""
        version = key if versioned else self.defs.get((at, key), key)
        kept = self.kept.get((at, key))
        if kept is not None:
            value = join(value, self.values.get(kept, ()))
        old = self.values.get(version, ())
        new = join(old, value)
        if new == old:
            return
        count = self.updates.get(version, 0) + 1
        self.updates[version] = count
        # widen at the joins, where loops close; a definition downstream of one keeps
        # the join's bound however often the join changes, unless it keeps growing on its
        # own (read before it is set: a cycle no join breaks)
        patience = 3 if versioned else _PATIENCE if version in self._self_fed else _SAFETY_NET
        self.values[version] = widen(old, new, self.thresholds_sorted) if count > patience and old else new
        self.dirty.append(version)

    def sources_of(self, block: int, operand) -> list[str]:
        if isinstance(operand, str):  # a key: a call argument
            return [operand]
        prefix = self.prefix(block)
        if operand.kind == "memory":
            operand = operand.elements[0] if operand.elements else None
            if operand is None:
                return []
        return [prefix + name for name in _reads(operand, self.plain(block))]

    def slice(self, definitions: dict, wanted: set, rules: dict, seen: set) -> None:
        """Add to `rules` the definitions `wanted` keys depend on (`seen`: keys done)."""
        seen.update(wanted)
        work = list(wanted)
        while work:
            key = work.pop()
            for block, position in definitions.get(key, ()):
                if (block, position) in rules:
                    continue
                rule, sources = self.rule(block, position)
                rules[(block, position)] = (rule, sources)
                for source in sources:
                    if source not in seen:
                        seen.add(source)
                        work.append(source)

    # -- evaluation ------------------------------------------------------------------------
    def evaluate(self, block: int, operand, at: int) -> tuple:
        if isinstance(operand, str):
            return self.lookup(at, operand)
        kind = operand.kind
        if kind == "register":
            return self.lookup(at, self.prefix(block) + operand.name)
        if kind == "immediate":
            value = operand.value
            return number(value) if isinstance(value, int) else TOP
        if kind == "special":
            low, high = self.special.get(operand.name, _WORD)
            if operand.name not in FIXED_SPECIALS:
                return number(low, high)
            return self._narrowed(_reading_block(at), self.prefix(block) + operand.name, number(low, high))
        if kind == "symbol":
            table = self.symbol_values(block)
            found = table.get(operand.name, TOP)
            if found is None:  # a register declared without %
                return self.lookup(at, self.prefix(block) + operand.name)
            return add(found, number(int(operand.value or 0))) if operand.value else found
        if kind == "memory":
            base = operand.elements[0] if operand.elements else None
            value = self.evaluate(block, base, at) if base is not None else number(0)
            return add(value, number(int(operand.value))) if operand.value else value
        if kind == "vector" and len(operand.elements) == 1:
            return self.evaluate(block, operand.elements[0], at)
        return TOP

    def _read_part(self, block: int, position: int) -> tuple | None:
        """``(word, byte offset, width)`` of the stack word the load at (block, position)
        reads, when its register gets those bytes as they are (an unsigned or untyped
        load of a followed word)."""
        part = self.stack.loads.get((block, position)) if self.stack is not None else None
        if part is None or part[0] in self.unknown_cells:
            return None
        modifiers = self.flow.blocks[block].heads[position][1].split(".")[1:]
        return None if any(m[:1] == "s" for m in modifiers) else part

    def _read_cell(self, block: int, position: int) -> tuple | None:
        """The stack word the load at (block, position) reads whole, as `_read_part`."""
        part = self._read_part(block, position)
        return part[0] if part is not None and part[1:] == (0, part[0][2]) else None

    def rule(self, block: int, position: int):
        """``(apply(at), source keys)`` for the instruction at (block, position); `at` is the block
        whose view of the registers it reads (its own)."""
        found = self._rules.get((block, position))
        if found is None:
            found = self._rule(block, position)
            if self.flow.blocks[block].heads[position][2] not in ("ld", "st"):  # the stack model's are its own
                self._rules[(block, position)] = found
        return found

    def _rule(self, block: int, position: int):
        instruction = self.flow.blocks[block].instructions[position]
        guard, opcode, base, _ = self.flow.blocks[block].heads[position]
        prefix = self.prefix(block)
        operands = instruction.operands
        modifiers = opcode.split(".")[1:]
        sources: list[str] = []
        plain = self.plain(block)
        for operand in operands[1:]:
            sources.extend(prefix + name for name in _reads(operand, plain))
        stack = self.stack
        if stack is not None and (block, position) in stack.exact:  # a store of a followed stack word
            word = next(iter(stack.stores[(block, position)]))
            offset, width = stack.exact[(block, position)]
            key = _cell_key(word)
            if (offset, width) == (0, word[2]):
                def spill(at, key=key, value=operands[1]):
                    self.assign(at, key, truncate(self.evaluate(block, value, at), 8 * width), True)
                return spill, sources

            def set_part(at, key=key, value=operands[1]):  # the other bytes of the word stay
                kept = self.lookup(at, key) if self.uses.get((at, key), key) not in (key, key + "@entry") else TOP
                part = truncate(self.evaluate(block, value, at), 8 * width)
                self.assign(at, key, _bit_insert(part, kept, 8 * offset, 8 * width, 8 * word[2]), True)
            return set_part, sources + [key]
        if stack is not None and (block, position) in stack.loads:  # a load of one
            word, offset, width = stack.loads[(block, position)]
            key = _cell_key(word)
            target = prefix + _targets(operands[0], plain)[0]
            known = self._read_part(block, position) is not None

            def reload(at):
                value = self.lookup(at, key)
                if (offset, width) != (0, word[2]):
                    value = bits_of(value, 8 * offset, 8 * width) if value else value
                self.assign(at, target, truncate(value, 8 * width) if known else TOP, guard is None)
            return reload, [key]
        if base == "st":  # st.param: a call argument or a return value
            keys = self._param_store_keys(block, instruction)
            values = operands[1].elements if operands[1].kind == "vector" else (operands[1],)

            def store(at, keys=keys, values=values):
                for key, value in zip(keys, values):
                    self.assign(at, key, self.evaluate(block, value, at), True)

            return store, sources
        targets = [prefix + name for name in _targets(operands[0], plain)]
        compute = plain_compute = self.computation(block, opcode, base, modifiers, operands, targets)
        if base in ("sub", "mad"):
            found = remainder(self.flow.blocks[block].instructions, self.flow.blocks[block].heads, position, plain)
            if found is not None and (found.counter is None or self.counts_alike(block, position, found)):
                compute = self.remainder_range(block, found)
                sources.append(prefix + found.x)
        if base == "mul" and len(operands) == 3:
            sliced = self.slice_offset(block, operands, compute)
            if sliced is not None:
                compute = sliced
        if base == "shl":
            shifted = self.shifted_remainder(block, position, operands, modifiers)
            if shifted is not None:
                compute, extra = shifted
                sources.extend(extra)
        if base == "and":
            masked = self.shifted_field(block, position, operands, modifiers)
            if masked is not None:
                compute, extra = masked
                sources.extend(extra)
        if base == "cvt":
            narrowed = self.narrowed_remainder(block, position, operands, modifiers)
            if narrowed is not None:
                compute, extra = narrowed
                sources.extend(extra)
        if base == "selp" and len(operands) == 4:
            refined = self.rounded_up(block, position, modifiers, compute) or \
                self.ring_refinement(block, position, operands)
            if refined is not None:
                compute, extra = refined
                sources.extend(extra)
        if base == "add" and len(targets) == 1 and self._may_round(block):
            rounding = rounding_add(self.flow.blocks[block].instructions, self.flow.blocks[block].heads, position,
                                    plain)
            if rounding is not None:
                compute = self.rounded_past(block, rounding, modifiers, compute)
                sources.extend(prefix + name for name in (rounding.x, rounding.remainder))
        if base == "add" and len(targets) == 1 and compute is plain_compute:
            stepped = self.stepped_past(block, position, operands, modifiers, compute)
            if stepped is not None:
                compute, extra = stepped
                sources.extend(extra)
        if base in SUM_OPCODES and len(targets) == 1 and compute is plain_compute:
            found = self.linear_sum(block, position, plain)
            if found is not None and found.repeats:
                compute = self.linear_range(block, found)
                sources.extend(prefix + name for name in found.terms)
            elif found is not None:
                ring = self.counter_remainder(block, position, found)
                if ring is not None:
                    compute, extra = ring
                    sources.extend(extra)
        if base in _RECOMPUTED and len(targets) == 1 and guard is None:
            twin = self._twin(block, position)
            if twin is not None:  # the same value computed before: what narrows that one narrows this
                compute = (lambda at, own=compute, twin=twin: [meet(own(at)[0], self.lookup(at, twin))])
                sources.append(twin)
        if base == "ld" and _is_param(modifiers):
            sources = [k for k in self._param_load_keys(block, operands, opcode) if k is not None]
        strong = guard is None

        def apply(at, targets=targets, compute=compute, strong=strong):
            values = compute(at)
            for target, value in zip(targets, values):
                self.assign(at, target, value, strong)

        return apply, sources

    def _param_load_keys(self, block: int, operands, opcode: str) -> list[str | None]:
        memory = operands[1] if len(operands) > 1 else None
        if memory is None or memory.kind != "memory" or memory.name is None or memory.elements[0].kind != "symbol":
            return [None]
        width = _element_bytes(opcode)
        count = len(operands[0].elements) if operands[0].kind == "vector" else 1
        offset = int(memory.value or 0)
        return [self.param_key(block, memory.name, offset + i * width, loading=True) for i in range(count)]

    def computation(self, block: int, opcode: str, base: str, modifiers: list, operands, targets: list):
        """A function ``at -> [value per target]`` for one defining instruction (`at`: the block
        whose view of the operands counts)."""
        count = len(targets)
        evaluate = self.evaluate
        args = operands[1:]

        width = _width(modifiers)
        signed_type = any(m[:1] == "s" and m[1:] in _TYPE_BITS for m in modifiers)
        if base in _SIGN_READING or base in ("mul", "mad") and ("hi" in modifiers or "wide" in modifiers):
            view = (lambda value: signed(value, width)) if signed_type else (lambda value: truncate(value, width))

            def values(at):  # these read their operands' bits as numbers of the type's width and sign
                return [view(evaluate(block, a, at)) for a in args]
        else:
            def values(at):
                return [evaluate(block, a, at) for a in args]

        if base in ("mov", "shfl") and args:
            source = args[0]
            if base == "mov" and source.kind == "vector" and count == 1:
                parts = source.elements
                return lambda at: [pack([evaluate(block, p, at) for p in parts], width // len(parts))]
            if count > 1 and base == "mov":  # mov.b64 {lo, hi}, %rd
                return lambda at: unpack(evaluate(block, source, at), count, width // count)
            return lambda at: [evaluate(block, source, at)] + [TOP] * (count - 1)
        if base == "cvt":
            reading = _cvt_reading(modifiers)
            if reading is None:
                return lambda at: [TOP] * count
            return lambda at: [reading[1](evaluate(block, args[0], at))]
        if base == "cvta":
            return lambda at: [_cvta(evaluate(block, args[0], at), modifiers)]
        if base == "mapa":
            return lambda at: [_mapa(evaluate(block, args[0], at), modifiers)]
        if base == "ld":
            if _is_param(modifiers):
                return self._param_load(block, opcode, operands, modifiers, count)
            templates = _templates(self.flow.function.module)
            if count == 1 and args and args[0].kind == "memory" and templates:
                return lambda at: [_template_load(evaluate(block, args[0], at), width // 8, templates)]
            return lambda at: [TOP] * count
        binary = _BINARY.get(base)
        if base == "shr" and len(args) == 2 and args[1].kind == "immediate" and isinstance(args[1].value, int) \
                and 0 < args[1].value < width and any(m[:1] in "bu" and m[1:] in _TYPE_BITS for m in modifiers):
            most = (1 << (width - args[1].value)) - 1  # what a logical shift leaves of `width` bits

            def logical(at):
                return [_at_most(binary(*values(at), width), most)]

            return logical
        if base == "shr" and len(args) == 2 and signed_type:
            return lambda at: [shr(*values(at), arithmetic=True)]
        if base == "rem" and len(args) == 2 and signed_type:
            return lambda at: [_rem(*values(at), width, signed=True)]
        if binary is not None and len(args) == 2:
            return lambda at: [binary(*values(at), width)]
        if base == "mad" and len(args) == 3:
            def mad(at):
                a, b, c = values(at)
                return [add(mul(a, b), c)]
            return mad
        if base == "selp" and len(args) == 3:
            def select(at):
                chosen = None if args[2].negated else constant(evaluate(block, args[2], at))
                if chosen is None:
                    return [join(evaluate(block, args[0], at), evaluate(block, args[1], at))]
                return [evaluate(block, args[0] if chosen else args[1], at)]
            return select
        if base == "slct" and len(args) >= 2:
            return lambda at: [join(evaluate(block, args[0], at), evaluate(block, args[1], at))]
        if base == "setp" and count == 1 and len(args) == 2:
            return self._comparison(block, modifiers, args)
        if base == "neg" and args:
            return lambda at: [neg(evaluate(block, args[0], at))]
        if base in _COUNTS:
            return lambda at: [number(0, 64)] + [TOP] * (count - 1)
        if base == "bfe" and len(args) == 3:
            position, length = (a.value if a.kind == "immediate" and isinstance(a.value, int) else None
                                for a in args[1:])
            if not signed_type and position is not None and length and position + length <= width:
                mask = (1 << length) - 1  # unsigned: (a >> position) & mask, as a descriptor's start field

                return lambda at: [_at_most(field(evaluate(block, args[0], at), position, length, width), mask)]
            return lambda at: [_bit_field(evaluate(block, args[2], at), signed_type)]
        if base == "bfi" and len(args) == 4 and args[2].kind == args[3].kind == "immediate":
            return lambda at: [_bit_insert(evaluate(block, args[0], at), evaluate(block, args[1], at),
                                           args[2].value, args[3].value, width)]
        return lambda at: [TOP] * count

    def _comparison(self, block: int, modifiers: list, args):
        """``setp`` of an integer register and a constant: the predicate as 0, 1 or
        ``[0, 1]`` (what `selp` then picks)."""
        comparison, kind = (modifiers[0], modifiers[-1]) if len(modifiers) >= 2 else ("", "")
        if kind[:1] not in "sub" or kind[1:] not in _TYPE_BITS or comparison not in _SWAPPED:
            return lambda at: [number(0, 1)]
        unsigned, view = kind[0] != "s", _compared_as(kind)

        def evaluate(block, operand, at):
            return view(self.evaluate(block, operand, at))

        def predicate(at):
            left, right = evaluate(block, args[0], at), evaluate(block, args[1], at)
            if not left or not right:
                return [()]
            bound = constant(right)
            if bound is not None:
                return [compare(left, comparison, bound, unsigned)]
            bound = constant(left)
            if bound is not None:
                return [compare(right, _SWAPPED[comparison], bound, unsigned)]
            return [number(0, 1)]

        return predicate

    def _param_load(self, block: int, opcode: str, operands, modifiers, count: int):
        keys = self._param_load_keys(block, operands, opcode)
        context = self.flow.blocks[block].context
        memory = operands[1]
        if keys[0] is not None and context is not None and (context.parent is not None or self.returning.get(block)):
            return lambda at: [self.lookup(at, key) if key is not None else TOP for key in keys]
        if context is None or context.parent is None:
            signature = self.flow.function.signature if context is None else context.function.signature
            if signature.kind == "entry":
                value = self._kernel_parameter(signature, memory, modifiers)
                return lambda at: [value] + [TOP] * (count - 1)
        return lambda at: [TOP] * count

    @staticmethod
    def _kernel_parameter(signature, memory, modifiers) -> tuple:
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
            bits = _INTEGER_TYPES.get(modifier)
            if bits is not None:
                negative = modifier[0] == "s"
                return number(-(1 << (bits - 1)) if negative else 0, (1 << (bits - (1 if negative else 0))) - 1)
        return TOP

    def branch_conditions(self, definitions: dict) -> dict:
        """Block -> (negated, (key, comparison, bound, unsigned, chain), setp position)
        for blocks ending in ``@p bra`` whose ``p`` comes from a ``setp`` of a register
        and a constant: in the same block, or anywhere when ``p`` and the register are
        each defined once (a test made early and branched on later). In the same block
        the bound may be another register too (`bound` is then its key: ``i < n`` bounds
        ``i`` by what ``n`` may be, `ptxkit.cfg.values.refine_by`). The `chain` lists
        ``(key, inverse)`` for the registers the compared one was computed from (see
        `_inverse_chain`): each is narrowed too."""
        found = {}
        for block in self.flow.blocks:
            terminator = block.terminator
            if terminator is None or block.heads[-1][2] != "bra" or block.heads[-1][0] is None:
                continue
            guard = block.heads[-1][0]
            instructions, heads = block.instructions, block.heads
            plain = self.plain(block.index)
            position = len(instructions) - 1
            negated = guard.negated
            at = _last_definition(instructions, heads, position, guard.register, plain)
            if at is None:
                found_elsewhere = self._single_setp(block.index, guard, negated, definitions)
                if found_elsewhere is not None:
                    found[block.index] = found_elsewhere
                continue
            if heads[at][0] is not None:  # a guarded definition may leave an older predicate
                continue
            if heads[at][1] == "not.pred":
                source = instructions[at].operands[1]
                if source.kind != "register" or _redefined(instructions, heads, at + 1, position, source.name, plain):
                    continue
                negated = not negated
                position, at = at, _last_definition(instructions, heads, at, source.name, plain)
            if at is None or heads[at][2] != "setp" or heads[at][0] is not None:
                continue
            compare = instructions[at].operands
            parts = heads[at][1].split(".")
            if len(compare) != 3 or len(parts) != 3 or compare[0].kind != "register":
                continue
            comparison, kind = parts[1], parts[2]
            prefix = self.prefix(block.index)
            if compare[1].kind == "register" and compare[2].kind == "immediate":
                register, bound = compare[1].name, compare[2].value
            elif compare[2].kind == "register" and compare[1].kind == "immediate":
                register, bound, comparison = compare[2].name, compare[1].value, _SWAPPED.get(comparison)
            elif compare[1].kind == "register" and compare[2].kind == "register" and not _redefined(
                    instructions, heads, at + 1, len(instructions) - 1, compare[2].name, plain):
                register, bound = compare[1].name, prefix + compare[2].name  # bounded by the other's value
            else:
                continue
            if comparison is None or not isinstance(bound, (int, str)) or \
                    _redefined(instructions, heads, at + 1, len(instructions) - 1, register, plain):
                continue
            if isinstance(bound, int):
                self.thresholds.update((bound - 1, bound, bound + 1))
            chain = self._inverse_chain(block.index, at, prefix + register, definitions, branch=True)
            found[block.index] = (negated, (prefix + register, comparison, bound, kind, chain), at)
        return found

    def _paired_setp(self, block: int, predicate: str) -> tuple | None:
        """``(p, x, C, comparison, type)`` of the ``setp p, x, C`` that defines
        `predicate` in another block, when `p` and `x` are each defined once and in the
        same block, unguarded, `x` first: every execution of that block sets both, so
        wherever both are read they come from the same one (a ring index advanced and
        tested in one block, selected in a later one)."""
        prefix = self.prefix(block)
        site = self._only_site(prefix, predicate)
        if site is None:
            return None
        where, at = site
        head = self.flow.blocks[where].heads[at]
        compare = self.flow.blocks[where].instructions[at].operands
        if head[2] != "setp" or head[0] is not None or len(compare) != 3 or compare[1].kind != "register":
            return None
        x_site = self._only_site(prefix, compare[1].name)
        if x_site is None or x_site[0] != where or x_site[1] >= at or self.flow.blocks[where].heads[x_site[1]][0]:
            return None
        parts = head[1].split(".")
        return (*compare, parts[1], parts[-1])

    def _only_site(self, prefix: str, name: str, definitions: dict | None = None) -> tuple[int, int] | None:
        """``(block, position)`` of the one definition of register `name` of the inlined
        copy `prefix`, when it has one and it is in that copy; else None."""
        sites = (definitions or self.definitions()).get(prefix + name, ())
        return sites[0] if len(sites) == 1 and self.prefix(sites[0][0]) == prefix else None

    def _single_setp(self, block: int, guard, negated: bool, definitions: dict):
        """The condition of a branch on a predicate set once, by a ``setp`` in another
        block of a register that is also set once, against a constant (or None)."""
        prefix = self.prefix(block)
        site = self._only_site(prefix, guard.register, definitions)
        if site is None:
            return None
        where, at = site
        head = self.flow.blocks[where].heads[at]
        compare = self.flow.blocks[where].instructions[at].operands
        parts = head[1].split(".")
        if head[0] is not None or head[2] != "setp" or len(compare) != 3 or len(parts) != 3 \
                or compare[0].kind != "register" \
                or compare[1].kind != "register" or compare[2].kind != "immediate" \
                or not isinstance(compare[2].value, int) or compare[1].name == guard.register \
                or len(definitions.get(prefix + compare[1].name, ())) != 1:
            return None
        bound = compare[2].value
        self.thresholds.update((bound - 1, bound, bound + 1))
        key = prefix + compare[1].name
        chain = self._inverse_chain(where, at, key, definitions)
        return negated, (key, parts[1], bound, parts[2], chain), at

    def _inverse_chain(self, block: int, position: int, key: str, definitions: dict, branch: bool = False) -> list:
        """``[(source key, inverse)]``: how the value compared at (block, position) bounds
        the registers it was computed from. A step needs the register's only definition
        in the function (so the relation holds wherever it is read; the registers it reads
        not set only after it in its block) to be ``add``/``sub``
        of a constant, ``shr`` by a constant, ``mov``, or the warp-uniform broadcast
        ``shfl.sync.idx`` from lane 0 of ``%tid.x >> k`` (k >= 5) in a kernel whose
        blocks are one-dimensional, where every lane holds the same value. A register
        loaded from a followed ``-G`` stack cell ends the chain with ``((cell key, load
        site), identity)``: the version of the cell that load read holds the same value
        (`_refinements` narrows that version, so a second load of it is bounded too). For
        the test of a `branch`, a register set more than once that the test's block reads
        unchanged up to the test ends the chain with ``((key, branch point), inverse)``:
        the version of it the branch sees is bounded."""
        chain = []
        current = key
        rounding = False  # the chain went through a remainder (`_MultipleOf`)
        for _ in range(8):
            sites = definitions.get(current, ())
            if len(sites) != 1:
                break
            where, at = sites[0]
            head = self.flow.blocks[where].heads[at]
            if head[0] is not None or where == block and at > position:
                break  # a guarded definition may leave an older value; a later one, a newer
            cell = self._read_cell(where, at)
            if cell is not None:  # reloaded from a -G stack cell: the version it read is bounded too
                chain.append(((_cell_key(cell), (where, at)), _identity))
                break
            operands = self.flow.blocks[where].instructions[at].operands
            if head[2] == "mov" and len(operands) == 2 and operands[1].kind == "special" \
                    and operands[1].name in FIXED_SPECIALS:  # a copy of the thread's own index
                chain.append((self.prefix(where) + operands[1].name, _identity))
                break
            if len(operands) < 2 or operands[1].kind != "register":
                break
            source = self.prefix(where) + operands[1].name
            source_sites = definitions.get(source, ())
            read_here = False  # set more than once, but the test's block reads it unchanged: its version there
            if len(source_sites) != 1 or source_sites[0][0] == where and source_sites[0][1] > at:
                if not (branch and where == block and self._kept_in_block(block, at, position, operands[1].name)):
                    break  # set more than once, or only after it is read here (an older value then)
                read_here = True
            inverse = _inverse(head[1], head[2], operands, self._uniform_broadcast(where, at, definitions))
            remainder = head[2] in ("rem", "and")  # the only `and` with an inverse: a low-bits mask
            if inverse is None or rounding and inverse is not _identity or remainder and chain:
                break  # a remainder's test bounds its dividend, and its copies, only
            rounding = rounding or remainder
            if read_here:
                chain.append(((source, ("branch", block, block)), inverse))
                break
            chain.append((source, inverse))
            current = source
        return chain

    def _kept_in_block(self, block: int, at: int, position: int, register: str) -> bool:
        """True when `register`, read at `at` in `block` before the test at `position`, is
        not set again in the rest of the block: where the block branches, it holds the
        value read at `at`."""
        code = self.flow.blocks[block]
        return at < position and not _redefined(code.instructions, code.heads, at + 1, len(code.instructions),
                                                register, self.plain(block))

    def _zero(self, block: int, operand, definitions: dict) -> bool:
        """True when `operand` is 0: an immediate, or a register whose only definition moves 0."""
        if operand.kind == "immediate":
            return operand.value == 0
        sites = definitions.get(self.prefix(block) + operand.name, ()) if operand.kind == "register" else ()
        if len(sites) != 1:
            return False
        where, at = sites[0]
        source = self.flow.blocks[where].instructions[at].operands
        return self.flow.blocks[where].heads[at][2] == "mov" and len(source) == 2 and \
            source[1].kind == "immediate" and source[1].value == 0

    def _uniform_broadcast(self, block: int, position: int, definitions: dict) -> bool:
        """True for ``shfl.sync.idx d, x, 0, 31, mask`` where ``x = %tid.x >> k``, k >= 5,
        in a kernel with one-dimensional blocks (``.maxntid``/``.reqntid`` N, 1, 1)."""
        head = self.flow.blocks[block].heads[position]
        operands = self.flow.blocks[block].instructions[position].operands
        if not head[1].startswith("shfl.sync.idx") or len(operands) < 4 or not self._zero(block, operands[2],
                                                                                       definitions):
            return False
        sites = definitions.get(self.prefix(block) + operands[1].name, ())
        if len(sites) != 1:
            return False
        where, at = sites[0]
        shift = self.flow.blocks[where].instructions[at].operands
        if not self.flow.blocks[where].heads[at][1].startswith("shr.u32") or len(shift) != 3 or \
                shift[2].kind != "immediate" or shift[2].value < 5 or shift[1].kind != "register":
            return False
        origin = definitions.get(self.prefix(where) + shift[1].name, ())
        if len(origin) != 1:
            return False
        source = self.flow.blocks[origin[0][0]].instructions[origin[0][1]].operands
        function = self.flow.blocks[block].context.function if self.flow.blocks[block].context else self.flow.function
        return len(source) == 2 and source[1].kind == "special" and source[1].name == "%tid.x" and _one_dimensional(
            function)

    def linear_sum(self, block: int, position: int, plain):
        """`ptxkit.cfg.idioms.linear` of the instruction at (block, position), also through
        a register's one definition in a block that dominates where it is read, when no
        register that definition reads is written on any way between the two blocks."""
        blocks = self.flow.blocks
        instructions, heads = blocks[block].instructions, blocks[block].heads
        definitions, context = self.definitions(), blocks[block].context
        dominators = DominatorTree.of(self.flow)

        def outside(reading: int, register: str):
            sites = definitions.get(self.prefix(reading) + register, ())
            if len(sites) != 1 or sites[0][0] == reading or blocks[sites[0][0]].context is not context \
                    or not dominators.dominates(sites[0][0], reading):
                return None
            there, at = sites[0]
            return blocks[there].instructions, blocks[there].heads, at, there

        index = self._definition_index()

        def defining(code, at: int, register: str):
            positions = index.get((code[2], self.prefix(code[2]) + register))
            found = bisect.bisect_left(positions, at) if positions else 0
            return positions[found - 1] if found else None

        declined: set = set()  # registers whose definition elsewhere reads one set on the way

        def offer(reading: int, register: str):
            return None if register in declined else outside(reading, register)

        for _ in range(3):
            found = linear(instructions, heads, position, plain, offer, block, defining, self.counts_alike)
            bad = {register for reading, there, read, register in (found.crossed if found is not None else ())
                   if not self._unwritten_between(there, reading, read)}
            if not bad:
                return found
            declined |= bad
        return linear(instructions, heads, position, plain, None, block, defining, self.counts_alike)

    def counter_remainder(self, block: int, position: int, found):
        """``(compute, sources)`` for a sum ``a * x - b * q + ...`` where ``q = z / D`` and
        ``x`` is a counter kept beside ``z`` (each set once before the loop, ``z`` to a
        constant ``c``, and advanced together in one block, ``x`` by ``s`` times ``z``'s
        step) with ``b = a * s * D``: then ``x - s * z`` keeps the value ``v`` it had when set,
        and the sum is ``a * v + a * s * (z mod D) + ...`` (nvcc's unrolled loop over a ring
        of three stages: ``x`` advances by four stages' bytes while ``z`` counts stages,
        CUTLASS 93); None otherwise. `v` is read from the version of ``x`` its setting
        defines (`_version`). `found`: the instruction at (block, position) as a
        `ptxkit.cfg.idioms.Linear` sum."""
        if len(found.terms) < 2:
            return None
        prefix = self.prefix(block)
        for q, q_coefficient in found.terms.items():
            site = self._only_site(prefix, q)
            if site is None:
                continue
            code = self.flow.blocks[site[0]]
            division = quotient_of(code.instructions, code.heads, site[1] + 1, q)
            if division is None or not self._kept_between(prefix + division[0], site, (block, position)):
                continue
            z, divides = division
            for x, coefficient in found.terms.items():
                pair = None if x == q else self._lockstep(prefix, x, z, (block, position))
                dropped = (q, x)
                if pair is None and x != q:
                    pair, partner = self._lockstep_with_partner(prefix, x, z, found.terms, coefficient,
                                                                (block, position))
                    dropped = (q, x, partner)
                if pair is None:
                    continue
                scale, origin = pair
                step = coefficient * scale  # a * s: the sum's step per stage
                if step and -q_coefficient % step == 0 and divides(-q_coefficient // step):
                    last = step * (-q_coefficient // step - 1)  # a * s * (D - 1)
                    ring = number(min(0, last), max(0, last), abs(step))
                    return self._counter_remainder_range(block, found, dropped, origin, ring, coefficient)
        return None

    def _counter_remainder_range(self, block: int, found, dropped: tuple, origin: tuple, ring: tuple,
                                 coefficient: int):
        """The compute of `counter_remainder`: `ring` (``a * s * (z mod D)``) plus `coefficient`
        times the `origin` ``x - s * z`` (`_lockstep`: a version's value plus a constant),
        plus the terms not `dropped`."""
        prefix = self.prefix(block)
        version_of, shift, read = origin
        terms = [(prefix + name, c) for name, c in found.terms.items() if name not in dropped]
        base = add(number(found.constant), ring)

        def summed(at):
            version = version_of()
            start = self.values.get(version) if version is not None else number(0)
            if not start:
                return [()]  # not evaluated yet
            kept = add(start, number(shift)) if shift else start  # x0 - s * z0
            total = add(base, kept if coefficient == 1 else mul(kept, number(coefficient)))
            for key, c in terms:
                value = self.lookup(at, key)
                if not value:
                    return [()]
                total = add(total, value if c == 1 else mul(value, number(c)))
            return [total]

        return summed, read + [key for key, _ in terms]

    def _lockstep(self, prefix: str, x: str, z: str, reading: tuple) -> tuple | None:
        """``(s, origin)`` when registers `x` and `z` are each set twice, once by an add
        ``r, r, step`` in one block (`x`'s step `s` times `z`'s), and once before: `z` to
        the constant `c` and `x` to anything, or `z` to anything and `x` to ``s * z + b``
        (``add x, (z << k), b`` with ``2**k = s``). That earlier pair must run as one: the
        first setting dominates the second and no way between them passes the adds. Then
        where the second setting dominates `reading` (block, position), and `reading` is
        not between the two adds, ``x - s * z`` is what it was when they were set: x's
        first value less ``s * c``, or b's value where x was set. `origin` is
        ``(version of that value, constant added, keys the slice needs)``."""
        x_counter = self._counter(prefix, x, any_start=True)
        if x_counter is None:
            return None
        z_counter = self._counter(prefix, z)
        paired = self._paired_lockstep(prefix, x, x_counter, z_counter, reading) if z_counter is not None else None
        return paired if paired is not None else self._scaled_lockstep(prefix, x, z, x_counter, reading)

    def _paired_lockstep(self, prefix: str, x: str, x_counter: tuple, z_counter: tuple,
                         reading: tuple) -> tuple | None:
        """`_lockstep` where z is set to a constant: the two settings must run as one."""
        if not z_counter[1] or x_counter[1] % z_counter[1]:
            return None
        (x_set, x_add), (z_set, z_add) = x_counter[2:], z_counter[2:]
        if x_add[0] != z_add[0] or x_add[0] == reading[0] and \
                min(x_add[1], z_add[1]) < reading[1] < max(x_add[1], z_add[1]) + 1:
            return None  # read between the two adds
        dominators = DominatorTree.of(self.flow)
        if x_set[0] == z_set[0]:
            first, second = sorted((x_set, z_set), key=lambda site: site[1])
        elif dominators.dominates(x_set[0], z_set[0]) or dominators.dominates(z_set[0], x_set[0]):
            first, second = (x_set, z_set) if dominators.dominates(x_set[0], z_set[0]) else (z_set, x_set)
        else:
            return None
        if x_add[0] in (first[0], second[0]) or \
                first[0] != second[0] and x_add[0] in self._blocks_between(first[0], second[0]):
            return None  # the settings do not run as one
        if not (dominators.dominates(second[0], reading[0]) if second[0] != reading[0] else second[1] < reading[1]):
            return None
        scale, x_key = x_counter[1] // z_counter[1], prefix + x
        version = _version(x_key, *x_set)
        return scale, (lambda: self.defs.get((x_set, x_key), version), -scale * z_counter[0], [x_key, version])

    def _scaled_lockstep(self, prefix: str, x: str, z: str, x_counter: tuple, reading: tuple) -> tuple | None:
        """`_lockstep` where x is set to ``s * z + b + C`` (``add x, (z << k), b``, ``2**k =
        s``; or no b) and z before the loop in any way (at a join: nvcc's remainder loop
        after an unrolled one), or to a constant once outside a loop around x's setting (Triton's
        persistent loop sets x from the stage count z each tile, while z counts on across
        tiles): ``x - s * z`` is b where x was set, as long as z changes on the way from
        there to `reading` only by its add, in the block of x's add (CUTLASS 93's K/V
        producer: ``x - 49152 * (z / 3)`` with x advancing 16384 per stage)."""
        advance = self._advance_of(prefix, z, x_counter, reading)
        if advance is None:
            return None
        scale, z_add = advance
        x_set = x_counter[2]
        found = self._scaled_from(x_set, z, scale)
        if found is None or not self._z_kept(prefix, z, z_add, x_set, found[1], reading):
            return None
        b, _, added, b_site = found
        x_key = prefix + x
        if b is None:  # x = (z << k) + C
            return scale, (lambda: None, added, [x_key])
        b_key = prefix + b  # x's setting is followed, so b's version where it is read is known
        return scale, (lambda: self.uses.get((b_site, b_key), b_key), added, [x_key, b_key])

    def _lockstep_with_partner(self, prefix: str, x: str, z: str, terms: dict, coefficient: int,
                               reading: tuple) -> tuple:
        """``((s, origin), t)`` where z starts anywhere, x beside it starts at any value x0,
        and another term t of the sum, with x's coefficient, is set once to ``(z << k) + c``
        (``2**k = s``) from z's start, in the block that sets x: ``t + x - s * z`` is ``x0 +
        c`` (CUTLASS 93's mbarrier of a stage, ``((z0 << 3) + c) + x - 24 * (z / 3)``, x
        counting 8 per stage from the barriers' base). A term t copied from z there
        (`_copy_of`) with ``s`` times x's coefficient is the same with c = 0 (Triton's
        persistent loop, whose sum went through the shift); ``(None, None)`` otherwise."""
        x_counter = self._counter(prefix, x, any_start=True)
        advance = self._advance_of(prefix, z, x_counter, reading) if x_counter is not None else None
        if advance is None:
            return None, None
        scale, z_add = advance
        x_set = x_counter[2]
        for t, t_coefficient in terms.items():
            site = self._only_site(prefix, t) if t not in (x, z) else None
            if site is None or site[0] != x_set[0]:
                continue
            if t_coefficient == coefficient:
                found = self._scaled_from(site, z, scale)
                if found is None or found[0] is not None:
                    continue
                _, read_at, added, _ = found
            elif t_coefficient == coefficient * scale and _copy_of(self.flow.blocks[site[0]].instructions[site[1]],
                                                                   self.flow.blocks[site[0]].heads[site[1]], z):
                read_at, added = site[1], 0  # the sum's expansion went through the shift: s * t
            else:
                continue
            block = site[0]
            code = self.flow.blocks[block]
            if _redefined(code.instructions, code.heads, min(read_at, x_set[1]) + 1, max(read_at, x_set[1]), z,
                          self.plain(block)) or not self._z_kept(prefix, z, z_add, x_set, min(read_at, x_set[1]),
                                                                   reading):
                continue
            x_key = prefix + x
            version = _version(x_key, *x_set)
            return (scale, (lambda: self.defs.get((x_set, x_key), version), added, [x_key, version, prefix + t])), t
        return None, None

    def _advance_of(self, prefix: str, z: str, x_counter: tuple, reading: tuple) -> tuple | None:
        """``(s, z's add site)`` where z's one advance ``add z, z, step`` is in the block of
        x's (`x_counter`), x's step is ``s`` times z's, and `reading` is not between the two."""
        z_sites = self.definitions().get(prefix + z, ())
        advances = [site for site in z_sites if self._advance_step(site, z) is not None]
        _, x_step, _, x_add = x_counter
        if len(advances) != 1 or advances[0][0] != x_add[0]:
            return None
        z_add = advances[0]
        z_step = self._advance_step(z_add, z)
        if not z_step or x_step % z_step or x_add[0] == reading[0] and \
                min(x_add[1], z_add[1]) < reading[1] < max(x_add[1], z_add[1]) + 1:
            return None
        return x_step // z_step, z_add

    def _z_kept(self, prefix: str, z: str, z_add: tuple, setting: tuple, read_at: int, reading: tuple) -> bool:
        """True when `setting` (block, position) dominates `reading` and nothing but the
        advance at `z_add` sets z after `read_at` in the setting's block or on the way
        from there to `reading`."""
        block = setting[0]
        if not (DominatorTree.of(self.flow).dominates(block, reading[0]) if block != reading[0]
                else setting[1] < reading[1]):
            return False
        between = self._blocks_between(block, reading[0]) if block != reading[0] else frozenset()
        return not any(site != z_add and (site[0] in between or site[0] == block and site[1] > read_at)
                       for site in self.definitions().get(prefix + z, ()))

    def _advance_step(self, site: tuple, name: str) -> int | None:
        """The constant of an unguarded ``add name, name, step`` at `site`, else None."""
        head, args = self.flow.blocks[site[0]].heads[site[1]], self.flow.blocks[site[0]].instructions[site[1]].operands
        found = _register_and_constant(args) if head[0] is None and head[2] == "add" else None
        return found[1] if found is not None and found[0] == name else None

    def _scaled_from(self, setting: tuple, z: str, scale: int) -> tuple | None:
        """``(b, where z is read, C, where b is read)`` where the instruction at `setting`
        sets x to ``(z << k) + b + C`` (``2**k = scale``): ``add x, a, b`` with ``a = z << k``
        set earlier in its block, or ``add x, y, C`` of such a y (z, and each register
        between, not set again before `setting`; b another register), or to ``(z << k) +
        C`` (b and its site None)."""
        block, at = setting
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        plain = self.plain(block)
        added = 0
        operands = instructions[at].operands
        if heads[at][0] is not None:
            return None  # a guarded setting may leave an older value
        while heads[at][2] == "add" and _register_and_constant(operands) is not None:
            inner = _last_definition(instructions, heads, at, operands[1].name, plain)
            if inner is None or heads[inner][0] is not None:
                return None
            added += operands[2].value
            at, operands = inner, instructions[inner].operands
        if self._shifts(instructions, heads, at, z, scale, plain) \
                and not _redefined(instructions, heads, at + 1, setting[1], z, plain):
            return None, at, added, None  # (z << k) + C, no register b
        if heads[at][2] != "add" or len(operands) != 3 or any(o.kind != "register" for o in operands[1:]):
            return None
        if any(_redefined(instructions, heads, at + 1, setting[1], o.name, plain) for o in operands[1:]):
            return None
        for a, b in ((operands[1], operands[2]), (operands[2], operands[1])):
            a_at = _last_definition(instructions, heads, at, a.name, plain)
            if a_at is None or not self._shifts(instructions, heads, a_at, z, scale, plain) \
                    or b.name in (z, operands[0].name) or _redefined(instructions, heads, a_at + 1, setting[1], z, plain):
                continue
            return b.name, a_at, added, (block, at)
        return None

    @staticmethod
    def _shifts(instructions, heads, at: int, z: str, scale: int, plain) -> bool:
        """True for an unguarded ``shl r, z, k`` at `at` with ``2**k = scale``, or a shift of
        ``w = cvt z`` set just before in the block (an integer ``cvt`` keeps z modulo the
        narrower width, which is all a sum of that width reads: Triton's 64-bit stage count
        shifted as 32 bits)."""
        head, found = heads[at], _register_and_constant(instructions[at].operands)
        if head[0] is not None or head[2] != "shl" or found is None or 1 << found[1] != scale:
            return False
        shifted = found[0]
        if shifted == z:
            return True
        inner = _last_definition(instructions, heads, at, shifted, plain)
        return inner is not None and _copy_of(instructions[inner], heads[inner], z) \
            and not _redefined(instructions, heads, inner + 1, at, z, plain)

    def _kept_between(self, key: str, site: tuple, reading: tuple) -> bool:
        """True when `key` is not set after `site` (block, position) and before `reading`:
        both in one block with nothing setting it between them, or `site`'s block
        dominating `reading`'s with nothing setting it on the way."""
        sites = self.definitions().get(key, ())
        (there, at), (block, position) = site, reading
        if there == block:
            return at < position and not any(b == block and at < p < position for b, p in sites)
        return DominatorTree.of(self.flow).dominates(there, block) and \
            not any(b == there and p > at or b == block and p < position for b, p in sites) and \
            self._unwritten_between(there, block, [key[len(self.prefix(block)):]], position)

    def _definition_index(self) -> dict:
        """(block, key) -> the positions, in order, of the block's definitions of key
        (once per graph, or per stack model when it follows cells)."""
        if self._definitions_by_block is None:
            definitions = self.definitions()
            self._definitions_by_block = derived(self.flow, "register definitions by block",
                                                 lambda: _by_block(definitions)) \
                if self.stack is None or not self.stack.exact else _by_block(definitions)
        return self._definitions_by_block

    def _unwritten_between(self, there: int, reading: int, registers, position: int | None = None) -> bool:
        """True when no definition of `registers` lies in a block on a way from block
        `there` to block `reading` (`reading` included) that does not pass `there`
        again (a way through `there` defines them anew before reaching `reading`). With
        `position`, a definition in `reading` at or after it counts only where a way
        leads from `reading` back to it without passing `there`."""
        between = self._blocks_between(there, reading)
        prefix = self.prefix(reading)
        again = position is None or any(block in between for block in self.flow.succ[reading])
        return not any(site[0] in between and (site[0] != reading or again or site[1] < position)
                       for name in registers for site in self.definitions().get(prefix + name, ()))

    def _blocks_between(self, there: int, reading: int) -> frozenset:
        """The blocks on a way from block `there` to block `reading` that does not pass
        `there` again (`_between`), kept per pair for the graph."""
        regions = derived(self.flow, "blocks between", dict)
        between = regions.get((there, reading))
        if between is None:
            between = regions[(there, reading)] = _between(self.flow, DominatorTree.of(self.flow), there, reading)
        return between

    def linear_range(self, block: int, found):
        """The value of a `ptxkit.cfg.idioms.Linear` sum, each register read once where
        the instruction is (nothing redefines them in between, `linear` checked)."""
        prefix = self.prefix(block)
        terms = [(prefix + name, coefficient) for name, coefficient in found.terms.items()]
        constant = number(found.constant)

        def summed(at):
            total = constant
            for key, coefficient in terms:
                value = self.lookup(at, key)
                if not value:
                    return [()]  # not evaluated yet
                total = add(total, value if coefficient == 1 else mul(value, number(coefficient)))
            return [total]

        return summed

    def remainder_range(self, block: int, found, wrapped: bool = False):
        """The range of a recognised remainder idiom (`ptxkit.cfg.idioms`); `wrapped`:
        up to a multiple of the mask's limit, which a following shift discards."""
        x_key = self.prefix(block) + found.x
        if found.kind == "division":
            top = found.scale * (found.modulus - 1)
            if not found.signed:
                return lambda at: [number(0, top, found.scale)]

            def truncated(at):  # the remainder has the sign of x (or of the counter x scales)
                x = self.lookup(at, x_key)
                if not x:
                    return [()]  # not evaluated yet
                low = 0 if all(atom.form == NUM and 0 <= atom.lo and atom.hi < 1 << 31 for atom in x) else -top
                return [number(low, top, found.scale)]

            return truncated

        def aligned(at):
            bias = self.evaluate(block, found.bias, at) if found.bias is not None else number(0)
            x = self.lookup(at, x_key)
            if not bias or not x:
                return [()]  # not evaluated yet
            if len(bias) != 1 or bias[0].form != 0 or bias[0].hi >= INF or bias[0].lo <= -INF:
                return [TOP]
            if found.limit is not None and not wrapped:
                z = add(x, bias)
                if len(z) != 1 or z[0].form != 0 or z[0].lo < 0 or z[0].hi >= found.limit:
                    return [TOP]
            return [number(-bias[0].hi, found.modulus - 1 - bias[0].lo)]

        return aligned

    def counts_alike(self, block: int, position: int, found) -> bool:
        """Whether register ``found.x`` holds ``found.scale`` times ``found.counter`` where
        the instruction at `position` reads them: each is set twice, by a ``mov`` of a
        constant and by an ``add`` of a constant, the two movs in one block and the two
        adds in one block (so they run together), the constants in that ratio, and the
        reads not between the two adds or the two movs."""
        prefix = self.prefix(block)
        pairs = [self._counter(prefix, name) for name in (found.x, found.counter)]
        if None in pairs:
            return False
        (start_x, step_x, init_x, add_x), (start_z, step_z, init_z, add_z) = pairs
        mask = (1 << 64) - 1
        if (start_x - found.scale * start_z) & mask or (step_x - found.scale * step_z) & mask:
            return False
        for first, second in ((init_x, init_z), (add_x, add_z)):
            if first[0] != second[0]:
                return False
            if first[0] == block and min(first[1], second[1]) < position < max(first[1], second[1]) + 1:
                return False  # the reads may fall between the two
        return True

    def _counter(self, prefix: str, name: str, any_start: bool = False) -> tuple | None:
        """``(start, step, mov site, add site)`` of a register set once by a ``mov`` of a
        constant (or of a register just set to one) and once by ``add r, r, step``; with
        `any_start`, set by any unguarded instruction instead of the ``mov`` (start None)."""
        sites = self.definitions().get(prefix + name, [])
        if len(sites) != 2:
            return None
        start = step = init = increment = None
        for site in sites:
            instructions, heads = self.flow.blocks[site[0]].instructions, self.flow.blocks[site[0]].heads
            head, args = heads[site[1]], instructions[site[1]].operands
            if head[0] is not None or len(args) < 2:
                return None
            advance = self._advance_step(site, name)
            if advance is not None:
                step, increment = advance, site
            elif head[2] == "mov":
                start, init = constant_operand(instructions, heads, site[1], args[1]), site
            elif any_start:
                init = site
        if init is None or start is None and not any_start or step is None:
            return None
        return start, step, init, increment

    def slice_offset(self, block: int, operands, otherwise):
        """``mul d, q, r`` where ``q = C / y`` and ``r = x % y`` (each register set once,
        `y` the same register): ``q * r <= (C / y) * (y - 1) <= C`` for every ``y >= 1`` and
        ``x >= 0``, so d is in ``[0, C]`` where the values say so (CUTLASS's per-rank slice
        of a multicast box, ``(16384 / cluster_dim) * (rank % cluster_dim)``); else what
        `otherwise` computes."""
        prefix = self.prefix(block)
        quotient, divisor = (self._single_definition(prefix, operand) for operand in operands[1:])
        if quotient is None or divisor is None:
            return None
        if quotient[0] != "div":
            quotient, divisor = divisor, quotient
        y, x = self._remainder_divisor(prefix, divisor) or (None, None)
        if quotient[0] != "div" or y is None or quotient[1][2].kind != "register" or quotient[1][2].name != y \
                or quotient[1][1].kind != "immediate" or not isinstance(quotient[1][1].value, int) \
                or quotient[1][1].value < 0 or len(self.definitions().get(prefix + y, ())) > 1:
            return None
        bound, y, x = quotient[1][1].value, prefix + y, prefix + x

        def compute(at):
            divisor, dividend = self.lookup(at, y), self.lookup(at, x)  # y >= 1, x >= 0: r in [0, y - 1]
            if divisor and dividend and all(atom.form == 0 and atom.lo >= 1 for atom in divisor) \
                    and all(atom.form == 0 and atom.lo >= 0 for atom in dividend):
                return [number(0, bound)]
            return otherwise(at)

        return compute

    def _single_definition(self, prefix: str, operand) -> tuple | None:
        """``(base opcode, operands)`` of the one unguarded definition of a register
        operand in the same inlined copy, else None."""
        site = self._only_site(prefix, operand.name) if operand.kind == "register" else None
        if site is None:
            return None
        head = self.flow.blocks[site[0]].heads[site[1]]
        args = self.flow.blocks[site[0]].instructions[site[1]].operands
        return (head[2], args) if head[0] is None and len(args) == 3 else None

    def _remainder_divisor(self, prefix: str, definition: tuple) -> tuple[str, str] | None:
        """The registers ``(y, x)`` of a remainder ``x % y``: ``rem r, x, y``, or ``sub r,
        x, t`` with ``t = (x / y) * y`` (nvcc's form); else None."""
        base, args = definition
        if base == "rem":
            return (args[2].name, args[1].name) if args[2].kind == args[1].kind == "register" else None
        if base != "sub" or args[1].kind != "register":
            return None
        product = self._single_definition(prefix, args[2])
        if product is None or product[0] != "mul":
            return None
        for a, b in (product[1][1:], product[1][2:0:-1]):
            division = self._single_definition(prefix, a)
            if b.kind == "register" and division is not None and division[0] == "div" \
                    and division[1][1].name == args[1].name and division[1][2].name == b.name:
                return b.name, args[1].name
        return None

    def shifted_remainder(self, block: int, position: int, operands, modifiers: list):
        """``shl d, r, k`` of a remainder ``x - ((x + c) & m)`` whose mask keeps bits only
        below a limit L (`ptxkit.cfg.idioms`): r is the remainder plus a multiple of L, and
        when ``L << k`` wraps to 0 in the register the multiple is gone, so d is the
        remainder shifted, whatever x is (nvcc's ``(k % 2) * stage_bytes`` for a signed k)."""
        if len(operands) != 3 or operands[1].kind != "register" or operands[2].kind != "immediate" \
                or not isinstance(operands[2].value, int):
            return None
        count, width = operands[2].value, _width(modifiers)
        found = self._wrapped_remainder(block, position, operands[1].name,
                                        lambda limit: (limit << count) % (1 << width) == 0)
        if found is None:
            return None
        value, sources = found
        return (lambda at: [shl(value(at)[0], number(count))]), sources

    def narrowed_remainder(self, block: int, position: int, operands, modifiers: list):
        """``cvt`` of such a remainder to fewer bits, or from a narrower type (nvcc's
        ``cvt.s16.s8`` of a 16-bit ``k % 2``): it reads only the low bits of r, where a
        multiple of L is gone when L is a multiple of their range, so d is the remainder
        as the ``cvt`` reads it."""
        reading = _cvt_reading(modifiers)
        if reading is None or len(operands) != 2 or operands[1].kind != "register":
            return None
        kept, extend = reading
        found = self._wrapped_remainder(block, position, operands[1].name, lambda limit: limit % (1 << kept) == 0)
        if found is None:
            return None
        value, sources = found
        return (lambda at: [extend(value(at)[0])]), sources

    def shifted_field(self, block: int, position: int, operands, modifiers: list):
        """``and d, r, 2**n - 1`` of ``r = x >> k`` set earlier in the block (k a constant,
        x not set again in between): d is bits ``[k, k + n)`` of x (`ptxkit.cfg.values.field`),
        so a descriptor's start field taken from a generic shared address is its window
        address's (ThunderKittens' ``tcgen05.cp`` source)."""
        mask = _register_and_constant(operands)
        if mask is None or mask[1] <= 0 or mask[1] & (mask[1] + 1):
            return None
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        plain = self.plain(block)
        at = _last_definition(instructions, heads, position, mask[0], plain)
        if at is None or heads[at][0] is not None or not heads[at][1].startswith(("shr.u", "shr.b")):
            return None
        shift = _register_and_constant(instructions[at].operands)
        if shift is None or _redefined(instructions, heads, at + 1, position, shift[0], plain):
            return None
        source, count, length, width = instructions[at].operands[1], shift[1], mask[1].bit_length(), _width(modifiers)
        evaluate = self.evaluate
        return (lambda at: [field(evaluate(block, source, at), count, length, width)]), \
            [self.prefix(block) + source.name]

    def _wrapped_remainder(self, block: int, position: int, register: str, vanishes):
        """``(compute, sources)`` of an alignment remainder last defined in `block` before
        `position` into `register`, up to a multiple of its mask's limit, where
        `vanishes(limit)` says the reader drops such multiples; None otherwise."""
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        plain = self.plain(block)
        at = _last_definition(instructions, heads, position, register, plain)
        if at is None or heads[at][2] != "sub" or heads[at][0] is not None:
            return None
        found = remainder(instructions, heads, at, plain)
        if found is None or found.kind != "alignment" or found.limit is None or not vanishes(found.limit):
            return None
        read = [found.x] + (_reads(found.bias, plain) if found.bias is not None else [])
        if any(_redefined(instructions, heads, at + 1, position, name, plain) for name in read):
            return None
        return self.remainder_range(block, found, wrapped=True), [self.prefix(block) + name for name in read]

    def _may_round(self, block: int) -> bool:
        """True when `block` has a remainder (or mask) and a ``sub``, as
        `ptxkit.cfg.idioms.rounding_add` needs."""
        found = self._rounding_blocks.get(block)
        if found is None:
            heads = self.flow.blocks[block].heads
            found = self._rounding_blocks[block] = any(head[2] == "sub" for head in heads) and \
                any(head[2] == "and" or head[1].startswith("rem.u") for head in heads)
        return found

    def rounded_past(self, block: int, found, modifiers: list, otherwise):
        """`ptxkit.cfg.idioms.rounding_add`: ``x + (N - x % N)`` is ``x`` rounded up to a
        multiple of N wherever the remainder, as the branch conditions narrow it there,
        cannot be 0; else what `otherwise` computes."""
        prefix, width, modulus = self.prefix(block), _width(modifiers), found.modulus

        def compute(at):
            rest, x = self.lookup(at, prefix + found.remainder), self.lookup(at, prefix + found.x)
            if not rest or not x:
                return [()]  # not evaluated yet
            if len(rest) == 1 and rest[0].form == NUM and 1 <= rest[0].lo and rest[0].hi < modulus:
                return [_rounded_up(x, modulus, width)]
            return otherwise(at)

        return compute

    def stepped_past(self, block: int, position: int, operands, modifiers: list, otherwise):
        """``add d, m, N`` of ``m = q & -N`` set earlier in the block (N a power of two)
        where ``r = x & (N - 1)``, x being q or the register an identical computation of q
        set (`_twin`), is not 0 as the branch conditions narrow it: d is q rounded up to N
        (ThunderKittens' allocator, ``if (p & 1023) p = (p & -1024) + 1024``); else what
        `otherwise` computes. None where the instructions do not have that shape."""
        summand = _register_and_constant(operands)
        modulus = summand[1] if summand is not None else 0
        if modulus < 2 or modulus & (modulus - 1):
            return None
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        plain = self.plain(block)
        at = _last_definition(instructions, heads, position, operands[1].name, plain)
        if at is None or heads[at][0] is not None or heads[at][2] != "and":
            return None
        masked = _register_and_constant(instructions[at].operands)
        if masked is None or masked[1] != -modulus \
                or _redefined(instructions, heads, at + 1, position, masked[0], plain):
            return None
        q = masked[0]
        prefix = self.prefix(block)
        names = {q}
        source = _last_definition(instructions, heads, at, q, plain)
        twin = self._twin(block, source) if source is not None else None
        if twin is not None:
            names.add(twin[len(prefix):])
        remainder = self._low_bits_of(block, position, names, modulus)
        if remainder is None:
            return None
        q_key, width = prefix + q, _width(modifiers)

        def compute(at):
            rest, x = self.lookup(at, remainder), self.lookup(at, q_key)
            if not rest or not x:
                return [()]  # not evaluated yet
            if len(rest) == 1 and rest[0].form == NUM and 1 <= rest[0].lo and rest[0].hi < modulus:
                return [_rounded_up(x, modulus, width)]
            return otherwise(at)

        return compute, [remainder, q_key]

    def _low_bits_of(self, block: int, position: int, names: set, modulus: int) -> str | None:
        """The key of a register set only by ``r = x & (modulus - 1)``, in `block` before
        `position` or in a block that dominates it (at most eight up), x one of `names`
        and not set again on the way to `position`."""
        dominators = DominatorTree.of(self.flow)
        prefix = self.prefix(block)
        there, stop = block, position
        for _ in range(8):
            code = self.flow.blocks[there]
            plain = self.plain(there)
            for at in range(stop - 1, -1, -1):
                head = code.heads[at]
                operands = code.instructions[at].operands
                if head[2] != "and" or head[0] is not None or len(operands) != 3 or operands[1].kind != "register" \
                        or operands[1].name not in names or operands[2].kind != "immediate" \
                        or operands[2].value != modulus - 1:
                    continue
                key, x = prefix + operands[0].name, operands[1].name
                if len(self.definitions().get(key, ())) != 1 or operands[0].name == x:
                    continue
                if there == block:
                    if not _redefined(code.instructions, code.heads, at + 1, position, x, plain):
                        return key
                elif not _redefined(code.instructions, code.heads, at + 1, len(code.instructions), x, plain) \
                        and self._unwritten_between(there, block, [x], position):
                    return key
            up = dominators.idom.get(there)
            if up is None or up == there or self.prefix(up) != prefix:
                return None
            there = up
            stop = len(self.flow.blocks[there].instructions)
        return None

    def _twin(self, block: int, position: int) -> str | None:
        """The key of the register an identical unguarded instruction set before this one,
        in this block or one that dominates it, when neither that register nor what the
        instruction reads is written in between (a ``-G`` build computes ``x % 1024``
        again after testing it): both hold the same value."""
        computations = derived(self.flow, "computations", lambda: _computations(self.flow))
        sites = computations.get((block, position))
        if sites is None:
            return None
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        plain = self.plain(block)
        read = [name for operand in instructions[position].operands[1:] for name in _reads(operand, plain)]
        if instructions[position].operands[0].name in read:
            return None
        dominators = DominatorTree.of(self.flow)
        for there, at in sites:
            if at >= position if there == block else not dominators.dominates(there, block):
                continue
            early = self.flow.blocks[there]
            target = early.instructions[at].operands[0].name
            kept = read + [target]
            if target in read or any(_redefined(early.instructions, early.heads, at + 1,
                                                position if there == block else len(early.instructions), name, plain)
                                     for name in kept):
                continue
            if there == block or self._unwritten_between(there, block, kept, position):
                return self.prefix(block) + target
        return None

    def rounded_up(self, block: int, position: int, modifiers: list, otherwise):
        """A ``selp`` that rounds a register up to a power of two (`ptxkit.cfg.idioms.
        align_up`): ``(x + N - 1) & -N`` when the other terms add up to N, else what
        `otherwise` computes."""
        found = align_up(self.flow.blocks[block].instructions, self.flow.blocks[block].heads, position,
                         self.plain(block))
        if found is None:
            return None
        prefix = self.prefix(block)
        width = _width(modifiers)

        def compute(at):
            terms = [self.lookup(at, prefix + name) for _, name in found.others]
            x = self.lookup(at, prefix + found.x)
            if not x or not all(terms):
                return [()]  # not evaluated yet
            values = [constant(term) for term in terms]
            if None in values or found.constant + sum(c * v for (c, _), v in zip(found.others, values)) != found.modulus:
                return otherwise(at)
            return [_rounded_up(x, found.modulus, width)]

        return compute, [prefix + found.x] + [prefix + name for _, name in found.others]

    def _offset_of(self, block: int, position: int, x: str, y: str, read_at: int) -> int | None:
        """k where ``x = y + k`` (an ``add`` of a constant earlier in `block`) holds both
        where x is read at `position` and where y is read at `read_at` (neither set again
        on the way), else None: ``s + 1 < N ? s + 1 : s - (N - 1)`` compares s + 1 and
        selects s - (N - 1)."""
        instructions, heads = self.flow.blocks[block].instructions, self.flow.blocks[block].heads
        plain = self.plain(block)
        at = _last_definition(instructions, heads, position, x, plain)
        if at is None or heads[at][0] is not None or heads[at][2] != "add":
            return None
        summand = _register_and_constant(instructions[at].operands)
        if summand is None or summand[0] != y \
                or _redefined(instructions, heads, min(at, read_at) + 1, max(at, read_at), y, plain):
            return None
        return summand[1]

    def ring_refinement(self, block: int, position: int, operands):
        """``selp d, a, b, p`` where ``p`` is ``setp.<cmp> p, x, C`` and `a`/`b` are
        constants, ``x`` or ``x + k`` computed in the same block: each side is
        evaluated with ``x`` refined by the comparison's outcome (a ring index
        ``(s == N-1) ? 0 : s + 1`` stays in ``[0, N-1]``)."""
        instructions = self.flow.blocks[block].instructions
        heads = self.flow.blocks[block].heads
        predicate = operands[3]
        if predicate.kind != "register":
            return None
        plain = self.plain(block)
        setp_at = _last_definition(instructions, heads, position, predicate.name, plain)
        if setp_at is None:
            compare = self._paired_setp(block, predicate.name)
            if compare is None:
                return None
            comparison, kind = compare[3:5]
        else:
            if heads[setp_at][2] != "setp" or heads[setp_at][0] is not None:  # guarded: p may be older
                return None
            compare = instructions[setp_at].operands
            parts = heads[setp_at][1].split(".")
            comparison, kind = parts[1], parts[-1]
        if len(compare) < 3 or compare[1].kind != "register" or compare[2].kind != "immediate":
            return None
        x = compare[1].name
        if setp_at is not None and _redefined(instructions, heads, setp_at + 1, position, x, plain):
            return None
        bound = compare[2].value
        if isinstance(bound, int):
            self.thresholds.update((bound - 1, bound, bound + 1))
        prefix = self.prefix(block)
        sides = []
        for operand, holds in ((operands[1], not predicate.negated), (operands[2], predicate.negated)):
            if operand.kind == "immediate":
                sides.append(("const", number(operand.value) if isinstance(operand.value, int) else TOP, holds))
                continue
            if operand.kind != "register":
                return None
            if operand.name == x:
                sides.append(("x", 0, holds))
                continue
            add_at = _last_definition(instructions, heads, position, operand.name, plain)
            if add_at is None or heads[add_at][1].split(".")[0] != "add" or heads[add_at][0] is not None:
                return None
            summand = instructions[add_at].operands
            if len(summand) != 3 or summand[1].kind != "register" or summand[2].kind != "immediate" \
                    or not isinstance(summand[2].value, int):
                return None
            base = 0 if summand[1].name == x else self._offset_of(block, position, x, summand[1].name, add_at)
            if base is None or _redefined(instructions, heads, add_at + 1, position, summand[1].name, plain):
                return None
            sides.append(("x", summand[2].value - base, holds))
        key = prefix + x
        unsigned, view = kind[0] in "ub", _compared_as(kind)

        def compute(at):
            out = ()
            x_value = self.lookup(at, key)
            if not x_value and any(side == "x" for side, _, _ in sides):
                return [()]  # not evaluated yet
            x_value = view(x_value)
            for side, value, holds in sides:  # a side only where the comparison can come out its way
                kept = refine(x_value, comparison, bound, holds, unsigned)
                if side == "const":
                    out = join(out, value) if kept or not x_value else out
                else:
                    out = join(out, add(kept, number(value)))
            return [out if out else TOP]

        return compute, [key]


#: Updates a definition that is no join, on a cycle no join breaks, may take before it is
#: widened (docs/fence.md §3.1); any other widens only after `_SAFETY_NET` (never seen).
_PATIENCE, _SAFETY_NET = 12, 256
#: Solves of a -G kernel's values with a stack model before the check must hold (cfg/frames.py).
_STACK_ROUNDS = 8
#: The `derived` key of the last stack model a graph's analysis settled on.
_SETTLED_MODEL = "settled stack model"


def _version(key: str, block: int, position: int) -> str:
    """The name of the SSA version of `key` that the definition at (block, position) makes."""
    return f"{key}@{block}:{position}"


def _templates(module) -> frozenset:
    """The names of the module's *templates*: ``.global`` variables it defines (not
    ``.extern``) with no initializer, whose name has a ``$``, which no C++ name has
    (nvcc's ``make_smem_desc…$265``, the zero-filled object a ``-G`` build copies a
    default-constructed descriptor from), and that no instruction of the module names but
    to take its address. PTX zero-fills a ``.global`` variable without an initializer
    (PTX ISA, "Global state space"), and the module never writes a template:
    docs/fence.md §3.2 and §8."""
    if module is None:
        return frozenset()
    if _TEMPLATES.get("module") is not module:  # one module at a time, as `_SymbolCache`
        _TEMPLATES.update(module=module, names=_find_templates(module))
    return _TEMPLATES["names"]


_TEMPLATES: dict = {}


def _find_templates(module) -> frozenset:
    found = set()
    for node in module.items:
        declaration = node.declaration if type(node) is Directive else None
        if declaration is not None and declaration.space == ".global" and declaration.initializer is None \
                and ".extern" not in declaration.linkage:  # defined here: zero-filled here
            found.update(name for name in declaration.base_names if "$" in name)
    if found:
        for instruction in module.instructions():
            named = {operand.name for operand in instruction.operands} | \
                {element.name for operand in instruction.operands for element in operand.elements}
            if named & found and instruction.opcode.split(".")[0] != "mov":
                found -= named
    return frozenset(found)


def _template_load(address: tuple, width: int, templates: frozenset) -> tuple:
    """What a load of `width` bytes through `address` gives when it reads inside a
    template (zero), else top."""
    if len(address) != 1:
        return TOP
    atom = address[0]
    region = atom.region
    if not atom.is_address or atom.space != GLOBAL_SPACE_NAME or region is None or region.name not in templates \
            or region.size is None or atom.lo < 0 or atom.hi + width > region.size or atom.shift or atom.high:
        return TOP
    return number(0)


#: Opcodes whose result depends on their operands alone: computed twice from registers
#: unchanged in between, they give the same value (`_Analysis._twin`).
_RECOMPUTED = frozenset("add sub mul mad div rem and or xor shl shr cvt cvta neg not min max".split())


def _computation_key(prefix: str, instruction, head) -> tuple | None:
    """What an instruction with one register target computes, whatever register it puts
    it in (its opcode and the text of what it reads), or None."""
    text = instruction.text
    comma = text.find(",")
    if comma < 0 or "{" in text[:comma] or "|" in text[:comma]:
        return None
    return prefix, head[1], text[comma + 1:].strip()


def _computations(flow) -> dict:
    """``(block, position)`` -> the sites of every unguarded instruction of a
    `_RECOMPUTED` opcode that computes the same as the one there (`_computation_key`),
    for the instructions that have such others."""
    found: dict = {}
    for block in flow.blocks:
        prefix = block.context.prefix if block.context is not None else ""
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            if head[0] is None and head[2] in _RECOMPUTED:
                key = _computation_key(prefix, instruction, head)
                if key is not None:
                    found.setdefault(key, []).append((block.index, position))
    return {site: sites for sites in found.values() if len(sites) > 1 for site in sites}


def _reading_block(at) -> int:
    """The block whose view of the registers `at` (a rule's ``(block, position)``, or a
    query's or a branch's point) reads."""
    return at[-1] if at[0] in ("query", "branch") else at[0]


def _special(key: str) -> bool:
    """True for the key of a `FIXED_SPECIALS` register (in any inlined copy: ``"12:%tid.x"``)."""
    return key.rpartition(":")[2] in FIXED_SPECIALS


def _rounded_up(value: tuple, modulus: int, width: int = 64) -> tuple:
    """`value` rounded up to a multiple of `modulus`, a power of two: ``(x + N - 1) & -N``."""
    return and_(add(value, number(modulus - 1)), number(-modulus), width)


def _last_definition(instructions, heads, position: int, register: str, plain) -> int | None:
    for index in range(position - 1, -1, -1):
        if _defines(instructions[index], heads[index], register, plain):
            return index
    return None


def _redefined(instructions, heads, start: int, stop: int, register: str, plain) -> bool:
    return any(_defines(instructions[index], heads[index], register, plain) for index in range(start, stop))


def _defines(instruction, head, register: str, plain) -> bool:
    """True when `instruction` writes `register` (its name in the text is checked first:
    most instructions of a long block do not even mention it)."""
    return register in instruction.text and head[2] not in _NO_DEFINITION \
        and register in destinations(instruction, head, plain)


_FIRST_OPERAND = compile_pattern(r"\s*(\{[^}]*\}|[^,;{]+)")
_ONE_REGISTER = compile_pattern(r"\s*(%[\w$]+)\s*,")
_NAME = compile_pattern(r"[%A-Za-z_$][\w$]*")


def destinations(instruction, head, plain) -> list[str]:
    """The registers an instruction's first operand names (what `_targets` gives),
    read from the text without parsing every operand: the fast path for passes over
    every instruction.

    >>> from ptxkit import parse_statement
    >>> from ptxkit.instruction import head_of
    >>> node = parse_statement("setp.eq.s32 %p1|%p2, %r1, 0;")
    >>> destinations(node, head_of(node), frozenset()), destinations(parse_statement("st.u32 [%r1], 2;"),
    ...     head_of(parse_statement("st.u32 [%r1], 2;")), frozenset())
    (['%p1', '%p2'], [])
    """
    text = instruction.text
    if "/" in text:  # a comment in the operands: the parser knows where it ends
        operands = instruction.operands
        return _targets(operands[0], plain) if operands else []
    match = _ONE_REGISTER.match(text, head[3])
    if match is not None:  # most instructions: one register, then the next operand
        return [match.group(1)]
    match = _FIRST_OPERAND.match(text, head[3])
    if match is None:
        return []
    first = match.group(1).lstrip()
    if not first or first[0] in "[-0123456789":
        return []
    return [name for name in _NAME.findall(first) if name[0] == "%" or name in plain]


#: a token of an operand list: a number (0x1f, 0f3F800000, 2.5: skipped) or a name (the group)
_TOKEN = compile_pattern(r"[0-9][\w.]*|([%A-Za-z_$][\w$]*)")


def written_and_read(instruction, head, plain) -> tuple[list[str], list[str]] | None:
    """`destinations`, and the registers the other operands name (what `_reads` gives
    for each, a special register by its name before the dot), read from the text
    without parsing the operands; None when a comment sits among them or the first
    operand is an address (its brackets may hold commas).

    >>> from ptxkit import parse_statement
    >>> from ptxkit.instruction import head_of
    >>> node = parse_statement("mad.lo.s32 %r1, %r2, 0x1f, %r3;")
    >>> written_and_read(node, head_of(node), frozenset())
    (['%r1'], ['%r2', '%r3'])
    """
    text = instruction.text
    if "/" in text:
        return None
    match = _FIRST_OPERAND.match(text, head[3])
    if match is None:
        return [], []
    first = match.group(1).lstrip()
    if first[:1] == "[":
        return None
    written = [] if not first or first[0] in "-0123456789" else \
        [name for name in _NAME.findall(first) if name[0] == "%" or name in plain]
    return written, [name for name in _TOKEN.findall(text, match.end()) if name and (name[0] == "%" or name in plain)]


def _is_register(operand, plain) -> bool:
    return operand.kind == "register" or (operand.kind == "symbol" and operand.name in plain)


def _targets(operand, plain) -> list[str]:
    """The registers an instruction's first operand defines (``%r``, ``{%a, %b}``,
    ``%r|%p``); `plain` names registers declared without ``%``."""
    if _is_register(operand, plain):
        return [operand.name]
    if operand.kind in ("vector", "pair"):
        return [e.name for e in operand.elements if _is_register(e, plain)]
    return []


def _reads(operand, plain) -> list[str]:
    """Every register an operand reads, recursively."""
    if _is_register(operand, plain) or operand.kind == "special":
        return [operand.name]
    found: list[str] = []
    for element in operand.elements:
        found.extend(_reads(element, plain))
    return found


_INTEGER_TYPES = {f"{kind}{bits}": bits for kind in "bsu" for bits in (8, 16, 32, 64)}
_OTHER_TYPES = frozenset("f16 f16x2 f32 f64 bf16 bf16x2 tf32 e4m3 e5m2 e4m3x2 e5m2x2 e2m3x2 e3m2x2 e2m1x2 ue8m0x2"
                         .split())


def _cell_key(cell: tuple) -> str:
    """The key a stack cell ``(region, offset, width)`` is followed under (no register's name
    has a bracket)."""
    return f"[{cell[0]}+{cell[1]}:{cell[2]}]"


def _is_param(modifiers) -> bool:
    return "param" in modifiers or "param::entry" in modifiers or "param::func" in modifiers


def _width(modifiers) -> int:
    for modifier in reversed(modifiers):
        if modifier[:1] in "bsuf" and modifier[1:] in _TYPE_BITS:
            return _TYPE_BITS[modifier[1:]]
    return 64


def _element_bytes(opcode: str) -> int:
    return max(_width(opcode.split(".")[1:]) // 8, 1)


def _cvta(value: tuple, modifiers: list) -> tuple:
    to_window = "to" in modifiers
    space = next((m for m in modifiers if m.startswith(("shared", "global", "local", "param", "const"))), None)
    target = {"shared": SHARED_CTA_SPACE, "shared::cta": SHARED_CTA_SPACE, "shared::cluster": SHARED_CLUSTER_SPACE,
              "global": GLOBAL_SPACE_NAME, "local": LOCAL_SPACE}.get(space, OTHER_SPACE)
    form = WINDOW if to_window else GENERIC
    out = ()
    for atom in value:
        if atom.is_address and atom.space == target or (target == SHARED_CLUSTER_SPACE and atom.is_address
                                                         and atom.space == SHARED_CTA_SPACE and atom.form == WINDOW):
            out = join(out, (atom._replace(form=form),))
        else:
            out = join(out, anywhere(target, form))
    return out


def _mapa(value: tuple, modifiers: list) -> tuple:
    form = WINDOW if "shared::cluster" in modifiers else GENERIC
    out = ()
    for atom in value:
        if atom.is_address and atom.space in (SHARED_CTA_SPACE, SHARED_CLUSTER_SPACE) and not atom.shift:
            out = join(out, (atom._replace(form=form, space=SHARED_CLUSTER_SPACE),))
        else:
            out = join(out, anywhere(SHARED_CLUSTER_SPACE, form))
    return out


def _bit_field(length: tuple, signed: bool) -> tuple:
    """What ``bfe`` extracts: a field of `length` bits, sign-extended when `signed`."""
    bits = constant(length)
    if bits is None or not 0 < bits <= 64:
        return TOP if signed else number(*_WORD)
    return number(-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else number(0, (1 << bits) - 1)


def _at_most(value: tuple, most: int) -> tuple:
    """`value` with its numbers (and top) kept to ``[0, most]``; addresses stay.

    >>> from ptxkit.cfg.values import show
    >>> show(_at_most(TOP, 1)), show(_at_most(number(0, 1 << 40), 1)), show(_at_most(number(2, 9, 7), 100))
    ('[0, 1]', '[0, 1]', '[2, 9] step 7')
    """
    out: tuple = ()
    for atom in value:
        if atom.form == TOP[0].form:
            atom = Atom(0, None, None, 0, most)
        elif atom.form == 0 and (atom.lo < 0 or atom.hi > most):
            lo, hi = max(atom.lo, 0), min(atom.hi, most)
            atom = Atom(0, None, None, 0, most) if lo > hi or atom.lo < 0 else atom._replace(hi=hi - (hi - lo) % atom.step)
        out = join(out, (atom,))
    return out


def _bit_insert(field: tuple, into: tuple, position, length, width: int) -> tuple:
    """``bfi d, a, b, pos, len`` with constant `position` and `length`: `into` with bits
    ``[pos, pos + len)`` replaced by the low `length` bits of `field` (PTX ISA, bfi).

    >>> from ptxkit.cfg.values import show
    >>> show(_bit_insert(number(0, 3), number(0, 3), 10, 22, 32))
    '[0, 3075]'
    """
    if not isinstance(position, int) or not isinstance(length, int) or not 0 <= position < width or length <= 0:
        return TOP
    length = min(length, width - position)
    mask = ((1 << length) - 1) << position
    kept = and_(into, number(((1 << width) - 1) ^ mask), width)
    return or_(kept, shl(and_(field, number((1 << length) - 1), width), number(position)), width)


def _divisor(b: tuple) -> tuple[int, int] | None:
    """The bounds of a divisor that is a positive number, else None."""
    if len(b) != 1 or b[0].form != 0 or b[0].lo < 1:
        return None
    return b[0].lo, b[0].hi


def _div(a: tuple, b: tuple, width: int) -> tuple:
    """``a / b`` for a non-negative `a` and a positive `b`."""
    if not a or not b:  # an operand not known yet: nothing yet (TOP would stick)
        return ()
    divisor = _divisor(b)
    if divisor is None or len(a) != 1 or a[0].form != 0 or a[0].lo < 0:
        return TOP
    least, most = divisor
    return number(a[0].lo // most if most < INF else 0, a[0].hi // least if a[0].hi < INF else INF)


def _rem(a: tuple, b: tuple, width: int, signed: bool = False) -> tuple:
    """``a % b`` for a positive `b`: below b, and `a` itself when it is already below; a
    signed remainder of a dividend that may be negative is negative or zero too. By a
    constant, the remainder keeps what the dividend's step says of it: ``a % d`` is ``a``
    modulo ``gcd(step, d)`` (an even index stays even).

    >>> from ptxkit.cfg.values import show
    >>> show(_rem(number(0, 118, 2), number(32), 32)), show(_rem(number(4, 1000, 24), number(16), 32))
    ('[0, 30] step 2', '[4, 12] step 8')
    >>> show(_rem(number(31), number(4), 32)), show(_rem(number(36, 44, 4), number(32), 32))
    ('3', '[4, 12] step 4')
    """
    if not a or not b:
        return ()
    divisor = _divisor(b)
    if divisor is None:
        return TOP
    least, most = divisor
    natural = len(a) == 1 and a[0].form == 0 and 0 <= a[0].lo
    if natural and a[0].hi < least:
        return a
    if most >= INF:
        return TOP
    if natural and least == most:
        lo, hi, step = a[0].lo, a[0].hi, a[0].step
        if hi < INF and lo // most == hi // most:  # within one period: no wrap-around
            return number(lo % most, hi % most, step) if lo < hi else number(lo % most)
        if step > 1:
            common = math.gcd(step, most)
            low = lo % common
            return number(low, most - 1 - (most - 1 - low) % common, common)
    return number(0 if natural or not signed else 1 - most, most - 1)


def _extreme(pick):
    def combine(a: tuple, b: tuple, width: int) -> tuple:
        if not a or not b:
            return ()
        if len(a) == 1 == len(b) and a[0].form == 0 == b[0].form:
            return number(pick(a[0].lo, b[0].lo), pick(a[0].hi, b[0].hi))
        return TOP
    return combine


#: Opcodes whose result depends on whether their type reads the top bit as a sign
#: (``add``, ``mul.lo`` and the bitwise ones give the same bits either way; ``mul``/``mad``
#: with ``.hi`` or ``.wide`` depend on it too).
_SIGN_READING = frozenset(("shr", "div", "rem", "min", "max", "setp", "slct"))

_BINARY = {
    "add": lambda a, b, w: add(a, b), "sub": lambda a, b, w: sub(a, b), "mul": lambda a, b, w: mul(a, b),
    "shl": lambda a, b, w: shl(a, b), "shr": lambda a, b, w: shr(a, b), "and": and_,
    "or": or_, "xor": xor, "div": _div, "rem": _rem,
    "min": _extreme(min), "max": _extreme(max),
}
