"""Matchers: predicates over instructions that combine with ``&``, ``|`` and ``~``.

Syntactic matchers read the instruction's text (opcode, modifiers, operands, guard,
state space); fact matchers read `ptxkit.isa` (async-proxy ops, barrier and
mbarrier waits), the CFG (loop headers) and, for one question only (a generic load
or store that may reach shared memory), the value analysis through
`ptxkit.rewrite.analysis`. A matcher is called as ``matcher(instruction, facts)``,
where `facts` is the function's `ptxkit.rewrite.facts.FunctionFacts` (computed on the
spot when omitted: pass it when testing many instructions, as `find` does).

Opcode patterns: a plain pattern matches the opcode itself or the opcode with more
modifiers after it (``"ld.shared"`` matches ``ld.shared.v4.f32``, not ``ldmatrix`` or
``ld.shared::cta.u32``); a pattern with ``*``, ``?`` or ``[`` is a shell-style
pattern over the whole opcode (``"fence.proxy.async*"``); a compiled regular
expression must match the whole opcode.

>>> import ptxkit
>>> waits = opcode("mbarrier.try_wait") | opcode("wgmma.wait_group")
>>> waits(ptxkit.parse_statement("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;"))
True
>>> shared_stores = opcode("st") & space("shared") & ~guarded()
>>> [shared_stores(ptxkit.parse_statement(text)) for text in
...  ("st.shared.u32 [%r1], 0;", "@%p1 st.shared.u32 [%r1], 0;", "st.global.u32 [%rd1], 0;")]
[True, False, False]
>>> shared_stores
match.opcode('st') & match.space('shared') & ~match.guarded()
"""

from __future__ import annotations

import fnmatch
import re

from ptxkit.instruction import head_of
from ptxkit.isa import BLOCK_TERMINATORS, Effect, Sync, SyncObject, proxy_effect, sync_effect


class Matcher:
    """A predicate over instructions, with a readable description (its ``repr``).

    >>> import ptxkit
    >>> m = Matcher(lambda instruction, facts: "bar" in instruction.text, "has('bar')")
    >>> m(ptxkit.parse_statement("bar.sync 0;")), m | opcode("ret")
    (True, has('bar') | match.opcode('ret'))
    """

    __slots__ = ("test", "description")

    def __init__(self, test, description: str):
        self.test, self.description = test, description

    def __call__(self, instruction, facts=None) -> bool:
        return bool(self.test(instruction, facts))

    def __and__(self, other: "Matcher") -> "Matcher":
        return Matcher(lambda i, f: self.test(i, f) and other.test(i, f), f"{self.description} & {_wrapped(other)}")

    def __or__(self, other: "Matcher") -> "Matcher":
        return Matcher(lambda i, f: self.test(i, f) or other.test(i, f), f"{self.description} | {other.description}")

    def __invert__(self) -> "Matcher":
        return Matcher(lambda i, f: not self.test(i, f), f"~{_wrapped(self)}")

    def __repr__(self) -> str:
        return self.description


def _wrapped(matcher: Matcher) -> str:
    return f"({matcher.description})" if " | " in matcher.description else matcher.description


def _glob(pattern: str) -> bool:
    return any(char in pattern for char in "*?[")


# -- syntax ---------------------------------------------------------------------------------


def everything() -> Matcher:
    """Every instruction.

    >>> import ptxkit
    >>> everything()(ptxkit.parse_statement("ret;"))
    True
    """
    return Matcher(lambda instruction, facts: True, "match.everything()")


def opcode(pattern) -> Matcher:
    """The opcode matches `pattern` (see the module docstring).

    >>> import ptxkit
    >>> inst = ptxkit.parse_statement("fence.proxy.async.shared::cta;")
    >>> opcode("fence.proxy.async")(inst), opcode("fence.proxy.async*")(inst), opcode("fence.proxy")(inst)
    (True, True, True)
    >>> opcode("fence.proxy.as")(inst), opcode(re.compile(r"fence\\.proxy\\..*"))(inst)
    (False, True)
    """
    if isinstance(pattern, re.Pattern):
        return Matcher(lambda instruction, facts: pattern.fullmatch(head_of(instruction)[1]) is not None,
                       f"match.opcode(re.compile({pattern.pattern!r}))")
    if _glob(pattern):
        return Matcher(lambda instruction, facts: fnmatch.fnmatchcase(head_of(instruction)[1], pattern),
                       f"match.opcode({pattern!r})")
    prefix = pattern + "."

    def test(instruction, facts) -> bool:
        name = head_of(instruction)[1]
        return name == pattern or name.startswith(prefix)

    return Matcher(test, f"match.opcode({pattern!r})")


def modifiers(*patterns: str) -> Matcher:
    """Every pattern names one of the opcode's modifiers (shell-style patterns allowed).

    >>> import ptxkit
    >>> inst = ptxkit.parse_statement("ld.global.nc.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1];")
    >>> modifiers("nc", "v4")(inst), modifiers("v[248]")(inst), modifiers("shared")(inst)
    (True, True, False)
    """
    def test(instruction, facts) -> bool:
        present = instruction.modifiers
        return all(any(fnmatch.fnmatchcase(m, p) for m in present) if _glob(p) else p in present for p in patterns)

    return Matcher(test, f"match.modifiers({', '.join(map(repr, patterns))})")


def space(*names: str) -> Matcher:
    """The opcode names one of these state spaces; ``"shared"`` stands for either
    shared window (``shared``, ``shared::cta``, ``shared::cluster``).

    >>> import ptxkit
    >>> [space("shared")(ptxkit.parse_statement(t))
    ...  for t in ("ld.shared::cluster.u32 %r1, [%r2];", "ld.u32 %r1, [%rd2];")]
    [True, False]
    >>> store = "cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%rd1, {%r1}], [%r2];"
    >>> space("global")(ptxkit.parse_statement(store))
    True
    """
    wanted = set(names)
    if "shared" in wanted:
        wanted |= {"shared::cta", "shared::cluster"}
    return Matcher(lambda instruction, facts: bool(wanted.intersection(instruction.view.state_spaces)),
                   f"match.space({', '.join(map(repr, names))})")


def guarded(register: str | None = None, negated: bool | None = None) -> Matcher:
    """The instruction has a guard (on `register`, and negated or not, when given).

    >>> import ptxkit
    >>> inst = ptxkit.parse_statement("@!%p1 bra L;")
    >>> guarded()(inst), guarded("%p1", negated=True)(inst), guarded("%p2")(inst)
    (True, True, False)
    """
    def test(instruction, facts) -> bool:
        guard = head_of(instruction)[0]
        return guard is not None and register in (None, guard.register) and negated in (None, guard.negated)

    shown = ", ".join(part for part in (repr(register) if register else "",
                                        f"negated={negated}" if negated is not None else "") if part)
    return Matcher(test, f"match.guarded({shown})")


def operand(index: int, kind: str | None = None, register: str | None = None, value=None) -> Matcher:
    """Operand `index` (negative: from the end) exists and has this `kind`
    (``register``, ``immediate``, ``memory``, ``vector``, ``symbol``…, see
    `ptxkit.instruction.Operand`), names `register` (for memory operands: as the
    base) and has `value` (an immediate's number, a memory operand's displacement).

    >>> import ptxkit
    >>> inst = ptxkit.parse_statement("st.shared.u32 [%r1+16], 7;")
    >>> operand(0, "memory", "%r1", 16)(inst), operand(-1, "immediate", value=7)(inst), operand(2)(inst)
    (True, True, False)
    """
    def test(instruction, facts) -> bool:
        operands = instruction.operands
        if not -len(operands) <= index < len(operands):
            return False
        found = operands[index]
        return (kind is None or found.kind == kind) and (register is None or found.name == register) \
            and (value is None or found.value == value)

    shown = ", ".join([repr(index)] + [f"{name}={value!r}" for name, value in
                                       (("kind", kind), ("register", register), ("value", value)) if value is not None])
    return Matcher(test, f"match.operand({shown})")


def writes(register: str) -> Matcher:
    """The instruction writes `register` (its destination operand names it).

    >>> import ptxkit
    >>> [writes("%r1")(ptxkit.parse_statement(t)) for t in ("add.s32 %r1, %r2, 1;", "st.u32 [%r1], 2;")]
    [True, False]
    """
    return Matcher(lambda instruction, facts: register in _written(instruction, register),
                   f"match.writes({register!r})")


def reads(register: str) -> Matcher:
    """The instruction reads `register`: a source operand, an address or the guard.

    >>> import ptxkit
    >>> [reads("%r1")(ptxkit.parse_statement(t)) for t in ("st.u32 [%r1], 2;", "mov.u32 %r1, 0;", "@%r1 bra L;")]
    [True, False, True]
    """
    def test(instruction, facts) -> bool:
        guard = head_of(instruction)[0]
        if guard is not None and guard.register == register:
            return True
        operands = instruction.operands
        if operands and _written(instruction, register) and operands[0].kind != "memory":
            operands = operands[1:]
        return any(register in op.registers for op in operands)

    return Matcher(test, f"match.reads({register!r})")


def uses(register: str) -> Matcher:
    """The instruction reads or writes `register`.

    >>> import ptxkit
    >>> uses("%p1")(ptxkit.parse_statement("setp.eq.s32 %p1, %r1, 0;"))
    True
    """
    return Matcher(lambda instruction, facts: reads(register).test(instruction, facts)
                   or writes(register).test(instruction, facts), f"match.uses({register!r})")


def _written(instruction, register: str) -> list[str]:
    from ptxkit.cfg.flow.operands import destinations

    head = head_of(instruction)
    if head[2] in _NO_DESTINATION:
        return []
    return destinations(instruction, head, frozenset([register]) if register[:1] != "%" else frozenset())


_NO_DESTINATION = frozenset({"bra", "brx", "call", "ret", "exit", "trap", "st", "red", "bar", "barrier", "fence",
                             "membar", "prefetch", "prefetchu"})


def text(pattern: str) -> Matcher:
    """The instruction's text contains a match of the regular expression `pattern`.

    >>> import ptxkit
    >>> text(r"%tid\\.x")(ptxkit.parse_statement("mov.u32 %r1, %tid.x;"))
    True
    """
    compiled = re.compile(pattern)
    return Matcher(lambda instruction, facts: compiled.search(instruction.text) is not None, f"match.text({pattern!r})")


def line(*lines) -> Matcher:
    """The instruction starts on one of these input lines (ints or ranges).

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n\\tret;\\n}\\n")
    >>> line(range(5, 8))(m.function("k").body.items[0]), line(5)(m.function("k").body.items[0])
    (True, False)
    """
    def test(instruction, facts) -> bool:
        where = instruction.line
        return where is not None and any(where in item if isinstance(item, range) else where == item for item in lines)

    return Matcher(test, f"match.line({', '.join(map(repr, lines))})")


def terminator() -> Matcher:
    """The instruction ends a basic block (``bra``, ``brx``, ``ret``, ``exit``, ``trap``).

    >>> import ptxkit
    >>> terminator()(ptxkit.parse_statement("@%p1 bra L;")), terminator()(ptxkit.parse_statement("call f;"))
    (True, False)
    """
    return Matcher(lambda instruction, facts: head_of(instruction)[2] in BLOCK_TERMINATORS, "match.terminator()")


# -- facts ------------------------------------------------------------------------------------


def async_proxy() -> Matcher:
    """An async-proxy operation (wgmma.mma_async, TMA and bulk copies, tcgen05.mma/cp…;
    `ptxkit.isa.proxy_effect`).

    >>> import ptxkit
    >>> load = ("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
    ...         " [%r1], [%rd1, {%r2, %r3}], [%r4];")
    >>> async_proxy()(ptxkit.parse_statement(load))
    True
    >>> async_proxy()(ptxkit.parse_statement("wgmma.wait_group.sync.aligned 0;"))
    False
    """
    return Matcher(lambda instruction, facts: proxy_effect(head_of(instruction)[1]).kind is Effect.ASYNC,
                   "match.async_proxy()")


def barrier_wait() -> Matcher:
    """A wait on a named barrier or the cluster barrier (``bar.sync``, ``barrier.sync``,
    ``bar.red``, ``barrier.cluster.wait``; `ptxkit.isa.sync_effect`).

    >>> import ptxkit
    >>> [barrier_wait()(ptxkit.parse_statement(t)) for t in ("bar.sync 1, 128;", "bar.arrive 1, 128;",
    ...                                                      "barrier.cluster.wait.aligned;")]
    [True, False, True]
    """
    def test(instruction, facts) -> bool:
        sync = sync_effect(head_of(instruction)[1])
        return sync is not None and sync.kind in (Sync.WAIT, Sync.ARRIVE_WAIT) \
            and sync.object in (SyncObject.NAMED_BARRIER, SyncObject.CLUSTER_BARRIER)

    return Matcher(test, "match.barrier_wait()")


def mbarrier_wait() -> Matcher:
    """A wait on an mbarrier (``mbarrier.try_wait``, ``mbarrier.test_wait``).

    >>> import ptxkit
    >>> mbarrier_wait()(ptxkit.parse_statement("mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;"))
    True
    """
    def test(instruction, facts) -> bool:
        sync = sync_effect(head_of(instruction)[1])
        return sync is not None and sync.kind is Sync.WAIT and sync.object is SyncObject.MBARRIER

    return Matcher(test, "match.mbarrier_wait()")


def shared_access(resolve: bool = True) -> Matcher:
    """A generic-proxy access of shared memory: an opcode naming a shared window
    (``ld.shared``, ``st.shared::cluster``, ``atom.shared``, ``cp.async…shared``,
    ``mbarrier…shared``), ``ldmatrix``/``stmatrix``, and with `resolve` a generic
    ``ld``/``st``/``atom``/``red`` whose address may point into shared memory (asked
    of the value analysis: `ptxkit.rewrite.analysis`). Async-proxy ops that read
    shared memory through descriptors (wgmma) are `async_proxy`.

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/x13_generic_store_through_cvta_shared.ptx")
    >>> [i.opcode for i in m.function("k").instructions() if shared_access()(i)]
    ['st.u32']
    """
    def test(instruction, facts) -> bool:
        head = head_of(instruction)
        if head[2] not in _ACCESSES:
            return False
        if head[2] in ("ldmatrix", "stmatrix"):
            return True
        spaces = instruction.view.state_spaces
        if spaces:
            return any(name.startswith("shared") for name in spaces)
        if not resolve or head[2] not in ("ld", "st", "atom", "red"):
            return False
        return id(instruction) in _facts(instruction, facts).generic_shared

    return Matcher(test, "match.shared_access()" if resolve else "match.shared_access(resolve=False)")


#: Opcodes (before the first dot) that access memory: a state space on others (``cvta``,
#: ``mapa``, ``isspacep``, fences) names no access.
_ACCESSES = frozenset({"ld", "ldu", "st", "atom", "red", "cp", "mbarrier", "ldmatrix", "stmatrix"})


def loop_header() -> Matcher:
    """The first instruction of a natural loop's header block (`ptxkit.cfg.flow.loops`).

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
    >>> [i.line for i in m.function("k").instructions() if loop_header()(i)]
    [36]
    """
    return Matcher(lambda instruction, facts: _facts(instruction, facts).is_loop_header(instruction),
                   "match.loop_header()")


def source_line(*lines, file: int | None = None) -> Matcher:
    """The ``.loc`` in force at the instruction names one of these source lines (ints
    or ranges), in file index `file` when given (`ptxkit.rewrite.locs`).

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/syntax/debug.ptx")
    >>> [i.opcode for i in m.functions[-1].instructions() if source_line(range(1, 10**6))(i)][:2]
    ['ld.param.u64', 'cvta.to.global.u64']
    """
    def test(instruction, facts) -> bool:
        loc = _facts(instruction, facts).locs.loc(instruction)
        return loc is not None and file in (None, loc.file) and any(
            loc.line in item if isinstance(item, range) else loc.line == item for item in lines)

    shown = ", ".join([*map(repr, lines)] + ([f"file={file}"] if file is not None else []))
    return Matcher(test, f"match.source_line({shown})")


def _facts(instruction, facts):
    if facts is not None:
        return facts
    from .facts import FunctionFacts

    return FunctionFacts(instruction.function)


def find(function, matcher: Matcher, facts=None) -> list:
    """The instructions of `function` that `matcher` accepts, in source order.

    >>> import ptxkit
    >>> m = ptxkit.parse_file("samples/fence/14b_hoist_out_of_loop.ptx")
    >>> [i.opcode for i in find(m.function("k"), async_proxy())]
    ['wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16']
    """
    if facts is None:
        from .facts import FunctionFacts

        facts = FunctionFacts(function)
    return [instruction for instruction in function.instructions() if matcher.test(instruction, facts)]
