"""Where a pointer register may point: a small forward *may* analysis over registers.

A generic ``st``/``atom``/``red`` (no state space in the opcode) writes whatever space
its address points into. This module answers "which spaces may register ``%rd4``
point into at this instruction?" from how the value was made (research fence.md §5.3):

- ``mov r, sym`` of a ``.shared`` variable: a shared::cta *window* address;
- ``cvta.shared`` / ``cvta.shared::cluster``: a *generic* shared address; the ``.to``
  forms give window addresses; ``mapa`` gives a cluster address;
- ``cvta.global`` and kernel ``.param`` pointers (``ld.param`` in an ``.entry``): global;
- ``add``/``sub``/``mad`` of one pointer and integers, ``cvt``, ``mov``, ``selp`` carry the
  pointer through; multiplications, shifts and comparisons give integers; bit
  operations on a pointer (alignment, descriptor building) and every other load give
  "unknown". A generic access through anything but a generic pointer of known space
  counts as a possible write of every space.

Only the registers that can reach a queried address are tracked, so a kernel with
one generic store costs one pass over its instructions plus a walk over the few
instructions that compute that address.

>>> import ptxkit
>>> from ptxkit.cfg.graph import flow_graph
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
...     ".visible .entry k(.param .u64 k_p)\\n{\\n.reg .b64 %rd<5>;\\n.shared .b8 smem[64];\\n"
...     "\\tmov.u64 %rd1, smem;\\n\\tcvta.shared.u64 %rd2, %rd1;\\n\\tadd.s64 %rd3, %rd2, 8;\\n"
...     "\\tld.param.u64 %rd4, [k_p];\\n\\tst.u32 [%rd3], 1;\\n\\tst.u32 [%rd4], 1;\\n\\tret;\\n}\\n")
>>> found = pointer_provenance(flow_graph(m.function("k")), {"a": (0, 4, ["%rd3"]), "b": (0, 5, ["%rd4"])})
>>> describe(found["a"]), describe(found["b"])
('generic shared::cta', 'generic global')
"""

from __future__ import annotations

import re

from ptxkit.cfg.dataflow import solve_forward
from ptxkit.isa import GLOBAL, SHARED_CLUSTER, SHARED_CTA
from ptxkit.syntax import Directive, Function

# provenance bits
WINDOW_CTA = 1  # an address in the shared::cta window (mov of a .shared symbol)
WINDOW_CLUSTER = 2  # an address in the shared::cluster window (mapa.shared::cluster)
GENERIC_CTA = 4  # a generic address into the own CTA's shared memory (cvta.shared)
GENERIC_CLUSTER = 8  # a generic address into some cluster CTA's shared memory
GENERIC_GLOBAL = 16
GENERIC_LOCAL = 32
OTHER = 64  # const, param, function addresses: no proxy effect
NOT_POINTER = 128
UNKNOWN = 256
POINTER = WINDOW_CTA | WINDOW_CLUSTER | GENERIC_CTA | GENERIC_CLUSTER | GENERIC_GLOBAL | GENERIC_LOCAL | OTHER
_NAMES = {
    WINDOW_CTA: "shared::cta window", WINDOW_CLUSTER: "shared::cluster window", GENERIC_CTA: "generic shared::cta",
    GENERIC_CLUSTER: "generic shared::cluster", GENERIC_GLOBAL: "generic global", GENERIC_LOCAL: "generic local",
    OTHER: "const/param", NOT_POINTER: "not a pointer", UNKNOWN: "unknown",
}

_CVTA = {
    ("shared",): GENERIC_CTA, ("shared::cta",): GENERIC_CTA, ("shared::cluster",): GENERIC_CLUSTER,
    ("to", "shared"): WINDOW_CTA, ("to", "shared::cta"): WINDOW_CTA, ("to", "shared::cluster"): WINDOW_CLUSTER,
    ("global",): GENERIC_GLOBAL, ("to", "global"): GENERIC_GLOBAL,
    ("local",): GENERIC_LOCAL, ("to", "local"): GENERIC_LOCAL,
}
_DECLARED = {".shared": WINDOW_CTA, ".global": GENERIC_GLOBAL, ".local": GENERIC_LOCAL, ".const": OTHER, ".param": OTHER}
_PARAM_POINTS_TO = {None: GENERIC_GLOBAL, ".global": GENERIC_GLOBAL, ".shared": GENERIC_CTA, ".local": GENERIC_LOCAL,
                    ".const": OTHER}
#: Opcodes whose result is never a pointer (scaling, comparing, counting, floating point).
_NUMERIC = frozenset(
    "mul mul24 mad24 div rem abs neg shl shr popc clz bfind brev setp set sad vote activemask testp isspacep "
    "fma rcp sqrt rsqrt ex2 lg2 sin cos tanh copysign dp4a dp2a redux match szext".split()
)
#: Opcodes that may pass a pointer through bit operations (alignment, tagging): unknown then.
_BITWISE = frozenset("and or xor not cnot lop3 prmt bfe bfi shf slct shfl min max".split())
#: Opcodes whose first register operand is read, not written.
_NO_DEFINITION = frozenset("bra brx call ret exit trap nanosleep stackrestore pmevent".split())
_FIRST_OPERAND = re.compile(r"\s*(\{[^}]*\}|[^,;]+)")
_REGISTER = re.compile(r"%[A-Za-z_$][\w$]*")


def describe(mask: int) -> str:
    """A provenance mask in words.

    >>> describe(GENERIC_CTA | GENERIC_GLOBAL)
    'generic shared::cta or generic global'
    """
    if not mask:
        return "undefined"
    return " or ".join(name for bit, name in _NAMES.items() if mask & bit)


def address_spaces(mask: int) -> tuple[tuple[str, ...], bool]:
    """The proxy spaces a generic access through a pointer with this provenance may
    touch, and whether that is certain (exactly one known space).

    Unknown, non-pointer, undefined and window addresses (which are not generic
    addresses at all) may be anything: every space, not certain.

    >>> address_spaces(GENERIC_CTA), address_spaces(GENERIC_LOCAL), address_spaces(UNKNOWN)[1]
    ((('shared::cta',), True), ((), True), False)
    """
    if not mask or mask & (UNKNOWN | NOT_POINTER | WINDOW_CTA | WINDOW_CLUSTER):
        return (SHARED_CTA, SHARED_CLUSTER, GLOBAL), False
    spaces = []
    if mask & GENERIC_CTA:
        spaces.append(SHARED_CTA)
    if mask & GENERIC_CLUSTER:
        spaces.append(SHARED_CLUSTER)
    if mask & GENERIC_GLOBAL:
        spaces.append(GLOBAL)
    return tuple(spaces), bin(mask).count("1") == 1


def shared_spaces(mask: int) -> tuple[str, ...]:
    """The shared spaces a pointer argument may point into (window or generic).

    >>> shared_spaces(WINDOW_CTA), shared_spaces(GENERIC_GLOBAL | UNKNOWN)
    (('shared::cta',), ())
    """
    spaces = []
    if mask & (WINDOW_CTA | GENERIC_CTA):
        spaces.append(SHARED_CTA)
    if mask & (WINDOW_CLUSTER | GENERIC_CLUSTER):
        spaces.append(SHARED_CLUSTER)
    return tuple(spaces)


def pointer_provenance(flow, queries: dict) -> dict:
    """Provenance masks for `queries`: ``{key: (block, position, names)}``.

    `names` are registers (``%rd4``), call-argument parameters (``param:param0``) or
    variables used directly as a generic address (``symbol:smem``); each answer is
    the union over the names of their provenance just before the instruction at
    `position` of `block`.

    >>> import ptxkit
    >>> from ptxkit.cfg.graph import flow_graph
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
    ...     ".reg .b64 %rd<3>;\\n.shared .b8 smem[64];\\n\\tmov.u64 %rd1, smem;\\n\\tand.b64 %rd2, %rd1, -16;\\n"
    ...     "\\tst.u32 [%rd2], 1;\\n\\tret;\\n}\\n")
    >>> found = pointer_provenance(flow_graph(m.function("k")),
    ...                            {"mov": (0, 1, ["%rd1"]), "and": (0, 2, ["%rd2"]), "var": (0, 2, ["symbol:smem"])})
    >>> {key: describe(mask) for key, mask in found.items()}
    {'mov': 'shared::cta window', 'and': 'unknown', 'var': 'generic shared::cta'}
    """
    if not queries:
        return {}
    symbols = _symbol_spaces(flow.function)
    for name, mask in list(symbols.items()):  # a variable named in a generic access: its generic address
        symbols["symbol:" + name] = {WINDOW_CTA: GENERIC_CTA}.get(mask, mask)
    definitions = _definitions(flow)
    wanted = {name for _, _, names in queries.values() for name in names if not name.startswith("symbol:")}
    rules = _relevant_rules(flow, definitions, wanted, symbols)
    by_block: dict[int, list] = {}
    for (block, position), rule in rules.items():
        by_block.setdefault(block, []).append((position, rule))
    for items in by_block.values():
        items.sort(key=lambda item: item[0])

    def transfer(block, state):
        items = by_block.get(block)
        if not items:
            return state
        state = dict(state)
        for _, (target, kind, payload) in items:
            state[target] = _evaluate(kind, payload, state)
        return state

    result = solve_forward(flow, transfer, entry={}, bottom={}, join=_join)
    answers = {}
    for key, (block, position, names) in queries.items():
        state = dict(result.ins[block])
        for at, (target, kind, payload) in by_block.get(block, ()):
            if at >= position:
                break
            state[target] = _evaluate(kind, payload, state)
        mask = 0
        for name in names:
            mask |= state.get(name, 0) if not name.startswith("symbol:") else symbols.get(name, UNKNOWN)
        answers[key] = mask
    return answers


def _join(a: dict, b: dict) -> dict:
    if not b or a is b:
        return a
    if not a:
        return b
    merged = dict(a)
    for name, mask in b.items():
        merged[name] = merged.get(name, 0) | mask
    return merged


def _evaluate(kind: str, payload, state: dict) -> int:
    if kind == "const":
        return payload
    masks = [state.get(name, 0) for name in payload]
    if kind == "arith":
        return UNKNOWN if any(m & (POINTER | UNKNOWN) for m in masks) else NOT_POINTER
    union = 0
    for m in masks:
        union |= m
    if union & UNKNOWN:
        return UNKNOWN
    if kind == "sum" and sum(1 for m in masks if m & POINTER) > 1:
        return UNKNOWN  # pointer + pointer: no longer a pointer into one space
    if union & POINTER:
        return union & ~NOT_POINTER
    return union or NOT_POINTER


def _definitions(flow) -> dict[str, list[tuple[int, int]]]:
    """Register (or ``param:name``) -> the (block, position) of instructions writing it."""
    found: dict[str, list[tuple[int, int]]] = {}
    match = _FIRST_OPERAND.match
    for block in flow.blocks:
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            base = head[2]
            if base in _NO_DEFINITION:
                continue
            if base == "st":
                if head[1].startswith("st.param"):
                    name = _param_name(instruction.text, head[3])
                    if name is not None:
                        found.setdefault(name, []).append((block.index, position))
                continue
            operand = match(instruction.text, head[3])
            if operand is None or operand.group(1).lstrip().startswith("["):
                continue
            for register in _REGISTER.findall(operand.group(1)):
                found.setdefault(register, []).append((block.index, position))
    return found


_PARAM_TARGET = re.compile(r"\s*\[\s*([A-Za-z_$][\w$]*)")


def _param_name(text: str, end: int) -> str | None:
    match = _PARAM_TARGET.match(text, end)
    return "param:" + match.group(1) if match else None


def _relevant_rules(flow, definitions: dict, wanted: set, symbols: dict) -> dict:
    """Transfer rules ``(target, kind, payload)`` for the definitions that can reach `wanted`."""
    rules: dict[tuple[int, int], tuple] = {}
    seen = set(wanted)
    work = list(wanted)
    blocks = flow.blocks
    while work:
        name = work.pop()
        for block, position in definitions.get(name, ()):
            key = (block, position)
            if key in rules:
                continue
            instruction = blocks[block].instructions[position]
            head = blocks[block].heads[position]
            rules[key] = rule = _rule(instruction, head, name, symbols, flow.function)
            if rule[1] != "const":
                for source in rule[2]:
                    if source not in seen:
                        seen.add(source)
                        work.append(source)
    return rules


def _rule(instruction, head, target: str, symbols: dict, function) -> tuple:
    """How an instruction computes `target`'s provenance from other registers."""
    opcode, base = head[1], head[2]
    operands = instruction.operands
    modifiers = tuple(opcode.split(".")[1:])
    if target.startswith("param:"):  # st.param [param], value
        return target, "union", _registers(operands[1:])
    sources = operands[1:]
    if base == "cvta":
        space = tuple(m for m in modifiers if m == "to" or m.startswith(("shared", "global", "local")))
        return target, "const", _CVTA.get(space, OTHER)
    if base == "mapa":
        return target, "const", WINDOW_CLUSTER if "shared::cluster" in modifiers else GENERIC_CLUSTER
    if base == "ld":
        if "param" in modifiers or "param::entry" in modifiers:
            if not {"u64", "b64", "s64"} & set(modifiers):
                return target, "const", NOT_POINTER  # narrower than a 64-bit generic address
            return target, "const", _parameter(sources, function)
        return target, "const", UNKNOWN
    if base in ("mov", "cvt") and len(sources) == 1:
        source = sources[0]
        if source.kind == "symbol":
            return target, "const", symbols.get(source.name, UNKNOWN)
        if source.kind in ("special", "immediate"):
            return target, "const", NOT_POINTER
        if source.kind == "register":
            return target, "union", (source.name,)
    if base in ("add", "sub", "mad"):
        return target, "sum", _registers(sources)
    if base == "selp":
        return target, "union", _registers(sources[:2])
    if base in _NUMERIC:
        return target, "const", NOT_POINTER
    if base in _BITWISE:
        return target, "arith", _registers(sources)
    return target, "const", UNKNOWN


def _registers(operands) -> tuple[str, ...]:
    names: list[str] = []
    for operand in operands:
        names.extend(operand.registers)
    return tuple(names)


def _parameter(sources, function) -> int:
    if not sources or sources[0].kind != "memory":
        return UNKNOWN
    name = sources[0].name
    signature = function.signature
    if signature.kind != "entry":
        return UNKNOWN  # a .func parameter may hold any pointer
    for param in signature.params:
        if param.name == name:
            return _PARAM_POINTS_TO.get(param.pointer_space, GENERIC_GLOBAL)
    return UNKNOWN


def _symbol_spaces(function) -> dict[str, int]:
    """Variables visible in the function -> the provenance of their address."""
    spaces: dict[str, int] = {}
    module = function.module
    if module is not None:
        for item in module.items:
            if type(item) is Directive:
                _declare(item, spaces)
            elif type(item) is Function:
                spaces[item.name] = OTHER  # function addresses
    for node in function.walk():
        if type(node) is Directive:
            _declare(node, spaces)
    for param in function.signature.params:
        spaces[param.name] = OTHER
    return spaces


def _declare(directive, spaces: dict) -> None:
    declaration = directive.declaration
    if declaration is None or declaration.space not in _DECLARED:
        return
    for name in declaration.base_names:
        spaces[name] = _DECLARED[declaration.space]
