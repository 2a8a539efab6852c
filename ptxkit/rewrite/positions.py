"""Where code can go in a function: next to an instruction, at a block's entry or
exit, on a CFG edge, at function entry, before every return.

Each constructor returns a `Position` (or, for `before_returns`, one per way out);
`ptxkit.rewrite.plan` turns the code put there into edits. The code runs exactly
when the place is reached:

- `before` / `after` an instruction: just before or after it (after a label, when the
  instruction starts a block: branches to the label run it too). Code after an
  unconditional branch or return would never run, so that is refused.
- `block_entry`: after the block's labels, before its first instruction.
- `block_exit`: before the block's terminator (``bra``/``ret``/``exit``… guarded or
  not, it runs on every way out), else after its last instruction.
- `on_edge(u, v)`: at the exit of `u` when `u` has no other successor, at the entry
  of `v` when `v` has no other predecessor; otherwise the edge is critical, and the
  code goes after `u`'s last statement for a fall-through edge, or into a new block
  for a taken branch: a fresh label before `v`'s first label, the branch retargeted
  to it, and a ``bra.uni`` to `v` in front of it when something falls into that place.
  An edge to the function's end from a guarded ``ret``/``exit`` splits the return:
  ``@!p bra skip; <code>; ret; skip:``.
- `function_entry`: before the first label or instruction (after the declarations),
  so that it runs once even when the first block heads a loop.
- `before_returns`: on every edge to the function's end (``ret``, ``exit``, falling
  off the end of the body), as `on_edge` places it.

>>> import ptxkit
>>> from ptxkit.rewrite.facts import FunctionFacts
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .pred %p<2>;\\nL:\\n\\tbar.sync 0;\\n\\t@%p1 bra L;\\n\\t@%p1 ret;\\n\\tbar.sync 1;\\n\\tret;\\n}\\n")
>>> facts = FunctionFacts(m.function("k"))
>>> [(p.kind, str(p.node)) for p in (function_entry(facts), on_edge(facts, 0, 0), on_edge(facts, 0, 1))]
[('before', 'L:'), ('edge', 'L:'), ('before', '@%p1 ret;')]
>>> [(p.kind, str(p.node)) for p in before_returns(facts)]
[('exit', '@%p1 ret;'), ('before', 'ret;')]
"""

from __future__ import annotations

from ptxkit._records import Record
from ptxkit.cfg.flow.graph import ENTRY, EXIT
from ptxkit.instruction import head_of
from ptxkit.syntax import Instruction, Label


class Position(Record):
    """A place for code in one function.

    kind:
        ``before`` / ``after``: next to statement `node`; ``edge``: a new block for
        the CFG edge `edge` ``(u, v)``, put before `node` (the first label of `v`);
        ``exit``: the guarded ``ret``/``exit`` `node`, split so that the code runs
        only when it returns.
    """

    kind: str
    node: object
    edge: tuple = ()

    @property
    def key(self) -> tuple:
        """What identifies the place (code put at one place runs in the order given)."""
        return (self.kind, id(self.node), self.edge)


def before(instruction) -> Position:
    """Right before `instruction` (after the labels of the block it starts).

    >>> import ptxkit
    >>> before(ptxkit.parse_statement("ret;")).kind
    'before'
    """
    return Position("before", instruction)


def after(instruction) -> Position:
    """Right after `instruction`; refused after an unconditional branch or return.

    >>> import ptxkit
    >>> after(ptxkit.parse_statement("ret;"))
    Traceback (most recent call last):
    ValueError: code after 'ret;' would never run: use block_exit or on_edge
    """
    guard, _, base, _ = head_of(instruction)
    if guard is None and base in ("bra", "brx", "ret", "exit", "trap"):
        raise ValueError(f"code after {instruction.text.strip()!r} would never run: use block_exit or on_edge")
    return Position("after", instruction)


def block_entry(facts, block: int) -> Position:
    """After block `block`'s labels, before its first instruction."""
    basic = facts.flow.blocks[block]
    if basic.instructions:
        return Position("before", basic.instructions[0])
    if basic.labels:
        return Position("after", basic.labels[-1])
    raise ValueError(f"block {block} of {facts.function.name} has no statement to place code at")


def block_exit(facts, block: int) -> Position:
    """Before block `block`'s terminator (every way out of it), else after its last
    instruction."""
    basic = facts.flow.blocks[block]
    if basic.terminator is not None:
        return Position("before", basic.terminator)
    if basic.instructions:
        return Position("after", basic.instructions[-1])
    return block_entry(facts, block)


def function_entry(facts) -> Position:
    """Before the function's first label or instruction: once per call."""
    for node in facts.function.walk():
        if type(node) is Instruction or type(node) is Label:
            return Position("before", node)
    raise ValueError(f"{facts.function.name} has no instruction to place code before")


def on_edge(facts, u, v) -> Position:
    """On the CFG edge ``u -> v`` (`v` may be ``EXIT``; ``u`` may be ``ENTRY``): code
    that runs exactly when control passes along that edge (see the module docstring).

    Raises ValueError for an edge the graph does not have, and for a critical edge
    out of a ``brx.idx`` (its targets come from a ``.branchtargets`` list).
    """
    flow = facts.flow
    kind = flow.kinds.get((u, v))
    if kind is None:
        raise ValueError(f"{facts.function.name} has no CFG edge {u} -> {v}")
    if u == ENTRY:
        return function_entry(facts)
    out = len(set(flow.succ[u])) + (u in flow.exits)
    if out == 1:
        return block_exit(facts, u)
    if v != EXIT and len(set(flow.pred[v])) + (v == flow.start) == 1:
        return block_entry(facts, v)
    last = flow.blocks[u].instructions[-1]
    if "fallthrough" in kind.split(","):
        return Position("after", last)
    if v == EXIT:
        return Position("exit", last)
    if kind != "taken":
        raise ValueError(f"cannot place code on the {kind} edge {u} -> {v} of {facts.function.name}: "
                         "a critical edge out of an indirect branch")
    return Position("edge", flow.blocks[v].labels[0], (u, v))


def before_returns(facts) -> list[Position]:
    """A position on every edge to the function's end (``ret``, ``exit``, falling off
    the end of the body; not ``trap``)."""
    flow = facts.flow
    return [on_edge(facts, u, EXIT) for u in flow.exits
            if set(flow.kinds[(u, EXIT)].split(",")) & {"return", "exit", "fallthrough"}]
