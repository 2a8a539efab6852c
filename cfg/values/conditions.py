"""Branch conditions in the register analysis: what a ``setp`` and the branch on it say
of the registers it compared (docs/fence.md §3.2).

A condition narrows the compared register, and the registers it was computed from
through steps that can be undone (an added constant, a shift, a copy, ``x % N == 0``),
along an edge that dominates its target; a block that a dominating condition rules out
is dead. `BranchConditions` is the part of the analysis (`ptxkit.cfg.values.registers`) that
finds them; the analysis's tests show it at work (``tests/test_registers.py``,
``tests/test_conditions.py``). Past ``if ((tid >> 4) < 3)`` the thread index is below 48:

>>> import ptxkit
>>> from ptxkit.cfg.flow.graph import flow_graph
>>> from ptxkit.cfg.values.registers import register_values
>>> from ptxkit.cfg.values.values import show
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     ".reg .b32 %r<4>;\\n.reg .pred %p<2>;\\n\\tmov.u32 %r1, %tid.x;\\n\\tshr.u32 %r2, %r1, 4;\\n"
...     "\\tsetp.lt.u32 %p1, %r2, 3;\\n\\t@!%p1 bra OUT;\\n\\tshl.b32 %r3, %r1, 2;\\nOUT:\\n\\tret;\\n}\\n")
>>> flow = flow_graph(m.function("k"))
>>> shift = flow.blocks[1].instructions[0]
>>> show(register_values(flow, {"tid": (1, 0, shift.operands[1])})["tid"])
'[0, 47]'
"""

from __future__ import annotations

from ptxkit._records import record
from ptxkit.cfg.flow.ssa import cell_key
from ptxkit.cfg.values.arithmetic import compared_as, identity, rounded_up_to
from ptxkit.cfg.values.specials import is_fixed_special, one_dimensional
from ptxkit.cfg.values.values import INF, TOP, Atom, constant, meet, number, refine, refine_by, sub
from ptxkit.isa import FIXED_SPECIALS, SWAPPED_COMPARISONS


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
        return identity
    return None


class BranchConditions:
    """How branch conditions narrow values: the methods of the register analysis that find
    each branch's comparison (`branch_conditions`), the chain of definitions it also bounds
    (`_inverse_chain`), and where each narrowing holds (`_refinements`, `_narrowed_at`).
    They read the analysis's graph, definitions and values (`ptxkit.cfg.values.registers`)."""

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
                     if isinstance(source, tuple) or len(definitions.get(source, ())) == 1 or is_fixed_special(source)]
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
        unsigned, view = kind[0] in "ub", compared_as(kind)

        def compared(a, value):
            if isinstance(bound, tuple):  # (key, version) of the register compared against
                other = a.values.get(bound[1])
                other = (() if bound[0] in a.defined else TOP) if other is None else other
                return refine_by(view(value), comparison, view(a._narrowed(branch, bound[1], other)), holds,
                                 unsigned)
            return refine(view(value), comparison, bound, holds, unsigned)

        out = [(key, compared)]
        steps: list = []
        for source, inverse in chain:
            steps.append(inverse)

            def bounded(a, value, steps=tuple(steps)):
                limit = compared(a, a._narrowed(branch, key, a.values.get(key, ())))
                for step in steps:
                    if not limit:
                        return ()
                    limit = step(limit)
                if isinstance(limit, _MultipleOf):  # x % N == 0: x is x rounded up to N
                    return rounded_up_to(value, limit.modulus) if value else ()
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
                if base and not narrow(self, base):
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

    def branch_conditions(self, definitions: dict) -> dict:
        """Block -> (negated, (key, comparison, bound, unsigned, chain), setp position)
        for blocks ending in ``@p bra`` whose ``p`` comes from a ``setp`` of a register
        and a constant: in the same block, or anywhere when ``p`` and the register are
        each defined once (a test made early and branched on later). In the same block
        the bound may be another register too (`bound` is then its key: ``i < n`` bounds
        ``i`` by what ``n`` may be, `ptxkit.cfg.values.values.refine_by`). The `chain` lists
        ``(key, inverse)`` for the registers the compared one was computed from (see
        `_inverse_chain`): each is narrowed too."""
        found = {}
        for block in self.flow.blocks:
            terminator = block.terminator
            if terminator is None or block.heads[-1][2] != "bra" or block.heads[-1][0] is None:
                continue
            guard = block.heads[-1][0]
            instructions, heads = block.instructions, block.heads
            position = len(instructions) - 1
            negated = guard.negated
            at = self.last_definition(block.index, position, guard.register)
            if at is None:
                found_elsewhere = self._single_setp(block.index, guard, negated, definitions)
                if found_elsewhere is not None:
                    found[block.index] = found_elsewhere
                continue
            if heads[at][0] is not None:  # a guarded definition may leave an older predicate
                continue
            if heads[at][1] == "not.pred":
                source = instructions[at].operands[1]
                if source.kind != "register" or self.redefined(block.index, at + 1, position, source.name):
                    continue
                negated = not negated
                position, at = at, self.last_definition(block.index, at, source.name)
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
                register, bound, comparison = compare[2].name, compare[1].value, SWAPPED_COMPARISONS.get(comparison)
            elif compare[1].kind == "register" and compare[2].kind == "register" \
                    and not self.redefined(block.index, at + 1, len(instructions) - 1, compare[2].name):
                register, bound = compare[1].name, prefix + compare[2].name  # bounded by the other's value
            else:
                continue
            if comparison is None or not isinstance(bound, (int, str)) or \
                    self.redefined(block.index, at + 1, len(instructions) - 1, register):
                continue
            if isinstance(bound, int):
                self.thresholds.update((bound - 1, bound, bound + 1))
            chain = self._inverse_chain(block.index, at, prefix + register, definitions, branch=True)
            found[block.index] = (negated, (prefix + register, comparison, bound, kind, chain), at)
        return found

    def _paired_setp(self, block: int, predicate: str) -> tuple | None:
        """``(p, x, C, comparison, type)`` of the ``setp p, x, C`` that defines
        `predicate` in another block, when `p` and `x` are each defined once, unguarded,
        and `block` reads the `x` that the last ``setp`` compared: `x` set first in the
        same block (every execution of that block sets both), or in a third block that
        lies on no way from the ``setp``'s to `block` (`_unwritten_between`: a ring index
        advanced in one block, tested in a later one and selected in a third, FlashMLA's
        sm100 backward kernel)."""
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
        if x_site is None or self.flow.blocks[x_site[0]].heads[x_site[1]][0] is not None:
            return None
        if x_site[0] == where and x_site[1] > at:
            return None
        if x_site[0] != where and (block in (where, x_site[0])
                                   or not self._unwritten_between(where, block, (compare[1].name,))):
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
        block of a register that is also set once, against a constant (or None). The
        register, and those its chain bounds, must hold at the branch what they held at
        the test: none is set again on a way from the ``setp`` to the branch (in a loop,
        the branch may read a predicate set one turn earlier, `_unwritten_between`)."""
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
        key = prefix + compare[1].name
        x_site = definitions[key][0]
        if x_site[0] == where and x_site[1] > at:
            return None  # set after the test: the branch reads a newer value
        chain = self._inverse_chain(where, at, key, definitions)
        bounded = [key] + [source if isinstance(source, str) else source[0] for source, _ in chain]
        names = [name[len(prefix):] for name in bounded if isinstance(name, str) and name.startswith(prefix)]
        if not self._unwritten_between(where, block, names):
            return None
        bound = compare[2].value
        self.thresholds.update((bound - 1, bound, bound + 1))
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
                chain.append(((cell_key(cell), (where, at)), identity))
                break
            operands = self.flow.blocks[where].instructions[at].operands
            if head[2] == "mov" and len(operands) == 2 and operands[1].kind == "special" \
                    and operands[1].name in FIXED_SPECIALS:  # a copy of the thread's own index
                chain.append((self.prefix(where) + operands[1].name, identity))
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
            if inverse is None or rounding and inverse is not identity or remainder and chain:
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
        return at < position and not self.redefined(block, at + 1, len(self.flow.blocks[block].instructions), register)

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
        return len(source) == 2 and source[1].kind == "special" and source[1].name == "%tid.x" and one_dimensional(
            function)
