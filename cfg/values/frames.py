"""Values a ``-G`` build keeps in its stack frames (docs/fence.md §3.2).

A ``-G`` build keeps variables in its functions' stack frames: ``st.u64 [%SP+824], %rd96``
and later ``ld.u64 %rd402, [%SP+824]``, or through a pointer to the frame that a lambda
captured. The register analysis follows such a value through memory when a `StackModel`
says which stores write which *cells* (a frame's bytes ``offset .. offset+width`` that
one access addresses exactly) and which cell each load reads.

The model is taken from the addresses the analysis itself computes, optimistically:
first the ``[%SP+c]`` operands name their cells and a store through an address in a
register is assumed to write none, then every store and load is checked against the
values found under that assumption, and the values are solved again with what the
check adds until nothing is added (`registers.analyse_registers`). Once the
check holds, the values are sound: in any run, the first store that wrote a cell the
model does not give it (or the first load that read outside its cell) would have used
an address the analysis had already valued, and the check found none.

A frame whose address never leaves its own ``[%SP+c]`` operands is *sealed*: no pointer
reaches it, so a store through an unknown pointer writes only the other frames' cells.

>>> empty = StackModel({}, {}, {})
>>> found = StackModel({(0, 1): frozenset({"c"})}, {(0, 1): (0, 8)}, {(0, 2): ("c", 0, 8)})
>>> first = empty.advance(found)  # the new load first, the stores as they were
>>> empty.holds_for(found), first.stores, first.advance(found) == found, found.settled(found)
(False, {}, True, True)
"""

from __future__ import annotations

import bisect

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.values.values import INF, LOCAL_SPACE, NUM, TOP_FORM
from ptxkit.isa import MEMORY_WRITERS, access_width

if TYPE_CHECKING:
    from collections.abc import Hashable, Iterable, Iterator, Mapping, Set

    from ptxkit.cfg.flow.graph import FlowGraph, HeadTuple, Site
    from ptxkit.cfg.values.values import Atom, Value
    from ptxkit.instruction import Operand
    from ptxkit.syntax import Instruction

    #: Bytes of a frame that one access addresses exactly: ``(region name, offset, width)``.
    Cell = tuple[str, int, int]
    #: A cell within its frame: ``(offset, width)``.
    Shape = tuple[int, int]
    #: What a ``[%SP+c]`` operand names before the frames have names: ``(inlined copy's id, offset)``.
    Spot = tuple[int, int]

#: The stack pointers of nvcc's -G builds (generic and local-window).
STACK_POINTERS = frozenset({"%SP", "%SPL"})
#: State spaces an access names that are not the stack.
_OTHER_SPACES = ("shared", "global", "const", "param", "tex")
#: Beyond this many stack accesses the stack is not followed (its rounds would cost too much).
MOST_ACCESSES = 4000


class Access(Record):
    """One load or store that may touch a stack frame: where, what (`kind`: "load" for a
    scalar ``ld``, "store" for a scalar ``st``, "write" for anything else that writes
    through the address), its byte `width`, its memory operand, and the cell a
    ``[%SP+c]`` operand names (`direct`; None for an address in a register)."""

    block: int
    position: int
    kind: str
    width: int
    memory: "Operand"
    direct: "Cell | None"


class Frames(Record):
    """A graph's stack accesses and the regions of its sealed frames."""

    accesses: tuple[Access, ...]
    sealed: frozenset[str]


def stack_frames(flow: FlowGraph) -> Frames | None:
    """The stack accesses of `flow` and its sealed frames, once per graph; None when it
    has no stack frame or too many accesses to follow (`STACK_FRAMES`)."""
    return STACK_FRAMES.of(flow)


def _scan(flow: FlowGraph) -> Frames | None:
    accesses: list[Access] = []
    spots: list[Spot | None] = []  # what each access's [%SP+c] operand names, if it has one
    depots: dict[int, str] = {}  # context id -> the frame's region name
    unsealed: set[int] = set()
    for block in flow.blocks:
        context = block.context
        key = context.id if context is not None else 0
        for position, (instruction, head) in enumerate(zip(block.instructions, block.heads)):
            text = instruction.text
            if "%SP" in text or "__local_depot" in text:
                _frame_use(instruction, head, key, depots, unsealed)
            base = head[2]
            if base not in ("ld", "st") and base not in MEMORY_WRITERS:
                continue
            modifiers = head[1].split(".")[1:]
            if any(m.startswith(_OTHER_SPACES) for m in modifiers):
                continue
            operands = instruction.operands
            at = next((i for i, operand in enumerate(operands) if operand.kind == "memory"), None)
            if at is None:
                continue
            scalar = len(operands) == 2 and operands[1 - at].kind in ("register", "immediate")
            kind = "load" if base == "ld" else "store" if base == "st" and scalar else "write"
            if kind == "load" and not (scalar and operands[0].kind == "register"):
                continue  # a vector load: its registers are not followed anyway
            memory = operands[at]
            names_a_cell = memory.name in STACK_POINTERS and len(memory.elements) == 1
            spots.append((key, memory.value or 0) if names_a_cell else None)
            accesses.append(Access(block.index, position, kind, access_width(modifiers), memory, None))
    if not depots or len(accesses) > MOST_ACCESSES:
        return None
    region = {key: name + (f"@{key}" if key else "") for key, name in depots.items()}
    located = [Access(a.block, a.position, a.kind, a.width, a.memory, (region[spot[0]], spot[1], a.width))
               if spot is not None and spot[0] in region else a for a, spot in zip(accesses, spots)]
    sealed = frozenset(region[key] for key in depots if key not in unsealed)
    return Frames(tuple(located), sealed)


#: A graph's stack accesses and sealed frames (`stack_frames`).
STACK_FRAMES: Fact[Frames | None] = Fact("stack frames", _scan)


def _frame_use(instruction: Instruction, head: HeadTuple, key: int, depots: dict[int, str], unsealed: set[int]) -> None:
    """Note the frame `instruction` sets up (``mov %SPL, __local_depotN``) or whether it
    lets the frame's address out (anything but a ``[%SP+c]`` operand of ``ld``/``st``)."""
    operands = instruction.operands
    base = head[2]
    depot = operands[1].name if len(operands) == 2 and operands[1].kind == "symbol" else None  # a symbol has a name
    if base == "mov" and depot is not None and operands[0].name == "%SPL":
        depots[key] = depot
        return
    if base == "cvta" and len(operands) == 2 and operands[0].name == "%SP" and operands[1].name == "%SPL":
        return
    for index, operand in enumerate(operands):
        names = {e.name for e in operand.elements} if operand.kind in ("memory", "vector") else {operand.name}
        if not (STACK_POINTERS & names or any((n or "").startswith("__local_depot") for n in names)):
            continue
        direct = operand.kind == "memory" and len(operand.elements) == 1 and index == (1 if base == "ld" else 0) \
            and base in ("ld", "st")
        if not direct:
            unsealed.add(key)


class StackModel(Record):
    """Which cells each store writes and each load reads (see the module docstring).

    A cell is ``(region name, offset, width)``. Cells that share bytes form a *word*
    when one of them, at most 8 bytes wide, holds all the others: a ``-G`` build writes
    a descriptor's stack copy whole, then sets its fields with ``st.u16``/``st.u8`` and
    reads it back whole. A lone cell is a word of its own. `stores`: ``{(block,
    position): frozenset of words}`` a store may write; `exact`: ``{(block, position):
    (byte offset, width)}`` for the stores that write one known part of one word with
    a known value (the others leave their words unknown); `loads`: ``{(block,
    position): (word, byte offset, width)}`` for the loads that read a known part of
    one word; `unreached`: the loads the values say no run reaches (a block a branch
    condition rules out under this model), which agree with any model."""

    stores: "dict[Site, frozenset[Cell]]"
    exact: "dict[Site, Shape]"
    loads: "dict[Site, tuple[Cell, int, int]]"
    unreached: "frozenset[Site]" = frozenset()

    @property
    def unknown(self) -> frozenset[Cell]:
        """The words some store may write with a value not followed."""
        return frozenset().union(*{id(words): words for site, words in self.stores.items()
                                   if site not in self.exact}.values())

    def advance(self, found: StackModel) -> StackModel:
        """The next assumption. A load keeps its word only where the two models agree, or
        takes the one `found` gives it first. While `found` follows new loads, the stores
        stay as they were (a store whose address came from such a load may turn out to
        be known); after that every store writes what either model says."""
        loads = {site: part for site, part in found.loads.items() if self.loads.get(site, part) == part}
        loads.update((site, part) for site, part in self.loads.items() if site in found.unreached)
        if not found.loads.keys() <= self.loads.keys():
            return StackModel(self.stores, self.exact, loads, self.unreached)
        shared: dict[frozenset[Cell], frozenset[Cell]] = {}
        stores = {site: _union(self.stores.get(site, _NO_CELLS), found.stores.get(site, _NO_CELLS), shared)
                  for site in self.stores.keys() | found.stores.keys()}
        exact: dict[Site, Shape] = {}
        for site, words in stores.items():
            parts = {model.exact.get(site) for model in (self, found) if site in model.stores}
            part = parts.pop() if len(parts) == 1 else None
            if len(words) == 1 and part is not None:
                exact[site] = part
        return StackModel(stores, exact, loads)

    def holds_for(self, found: StackModel) -> bool:
        """True when `found` (the model the values solved under this one show) asks
        nothing this model does not already give: no store writes more, no load reads
        elsewhere. The values are then sound."""
        for site, words in found.stores.items():
            given = self.stores.get(site, _NO_CELLS)
            if words is not given and not words <= given:
                return False
            if site in self.exact and found.exact.get(site) != self.exact[site]:
                return False
        return all(found.loads.get(site) == part or site in found.unreached for site, part in self.loads.items())

    def matches(self, found: StackModel) -> bool:
        """True when `found` asks for exactly this model (a fixed point of the rounds)."""
        return self.stores == found.stores and self.exact == found.exact and \
            {site: part for site, part in self.loads.items() if site not in found.unreached} == found.loads

    def settled(self, found: StackModel) -> bool:
        """`holds_for`, and `found` follows no load this model does not: nothing more to have."""
        return self.holds_for(found) and found.loads.keys() <= self.loads.keys()


def observed(frames: Frames, values: Mapping[Hashable, Value] | None = None,
             dead: Set[int] = frozenset()) -> StackModel:
    """The model the addresses in `values` show (``values[("stack", i)]`` is the address
    of access ``i``; `dead`: the blocks the branch conditions rule out): a store through
    an address not known writes every word of every frame that is not sealed. Without
    `values`, the first assumption: the ``[%SP+c]`` accesses name their cells, and every
    other store is taken to write none."""
    located: list[tuple[Access, Cell | None]]
    if values is None:
        located = [(access, access.direct) for access in frames.accesses]
    else:
        located = [(access, _cell_of(access, values.get(("stack", i), ())))
                   for i, access in enumerate(frames.accesses)]
    cells = _Cells(cell for _, cell in located if cell is not None)
    words = cells.words()
    anywhere = frozenset() if values is None else cells.outside(frames.sealed)
    stores: dict[Site, frozenset[Cell]] = {}
    exact: dict[Site, Shape] = {}
    loads: dict[Site, tuple[Cell, int, int]] = {}
    unreached: set[Site] = set()
    shared: dict[frozenset[Cell], frozenset[Cell]] = {}  # one object for each set of words the stores write
    anywhere_words: frozenset[Cell] | None = None  # the words of `anywhere`, once a store may write them

    def words_of(hit: Set[Cell]) -> frozenset[Cell]:
        written = frozenset(words[c][0] if c in words else c for c in hit)
        return shared.setdefault(written, written)

    for i, (access, cell) in enumerate(located):
        site = (access.block, access.position)
        part = words.get(cell) if cell is not None else None
        if access.kind == "load":
            if cell is not None and part is not None:
                loads[site] = (*part, cell[2])
            elif access.block in dead:
                unreached.add(site)
            continue
        parts = [cells.hit(atom, access.width, anywhere) for atom in values.get(("stack", i), ())] \
            if values is not None else []
        if parts and all(hit is anywhere for hit in parts):  # an address not known: the common case of a -G build
            if anywhere_words is None:
                anywhere_words = words_of(anywhere)
            written = anywhere_words
        else:
            hit: set[Cell] = cells.touching(*cell) if values is None and cell is not None else set()
            for some in parts:
                hit |= some
            written = words_of(hit)
        if access.kind == "store" and cell is not None and part is not None and written == {part[0]}:
            exact[site] = (part[1], cell[2])
        if written:
            stores[site] = written
    return StackModel(stores, exact, loads, frozenset(unreached))


#: The empty set of cells (a store the model does not give any).
_NO_CELLS: frozenset[Cell] = frozenset()


def _union(first: frozenset[Cell], second: frozenset[Cell],
           shared: dict[frozenset[Cell], frozenset[Cell]]) -> frozenset[Cell]:
    """``first | second``, as one of the two where it holds the other, else as the set
    `shared` already holds that is equal to it: the models of a ``-G`` build's rounds
    give hundreds of stores the same words, which then take the memory of one set.

    >>> a, b, shared = frozenset({("f", 0, 4)}), frozenset({("f", 0, 4), ("f", 4, 4)}), {}
    >>> _union(a, b, shared) is b, _union(b, a, shared) is b, _union(a, _NO_CELLS, shared) is a
    (True, True, True)
    >>> c = frozenset({("f", 8, 4)})
    >>> _union(a, c, shared) is _union(c, a, shared), sorted(_union(a, c, shared))
    (True, [('f', 0, 4), ('f', 8, 4)])
    """
    if second <= first:
        return first
    if first <= second:
        return second
    union = first | second
    return shared.setdefault(union, union)


def _cell_of(access: Access, value: Value) -> Cell | None:
    """The cell an access addresses exactly: one local address with a known offset."""
    if len(value) != 1:
        return None
    atom = value[0]
    if not atom.is_address or atom.space != LOCAL_SPACE or atom.region is None or atom.lo != atom.hi \
            or atom.shift or atom.above:
        return None
    return atom.region.name, atom.lo, access.width


class _Cells:
    """The cells of each frame, sorted by offset, for "which cells do these bytes touch"."""

    def __init__(self, cells: Iterable[Cell]) -> None:
        by_region: dict[str, list[Shape]] = {}
        for region, offset, width in set(cells):
            by_region.setdefault(region, []).append((offset, width))
        self.shapes = {region: sorted(shapes) for region, shapes in by_region.items()}
        self.starts = {region: [offset for offset, _ in shapes] for region, shapes in self.shapes.items()}
        self.widest = {region: max(width for _, width in shapes) for region, shapes in self.shapes.items()}

    def touching(self, region: str, start: int, width: int) -> set[Cell]:
        """The cells of `region` that share a byte with ``start .. start+width``."""
        shapes = self.shapes.get(region)
        if not shapes:
            return set()
        first = bisect.bisect_left(self.starts[region], start - self.widest[region] + 1)
        last = bisect.bisect_left(self.starts[region], start + width)
        return {(region, offset, size) for offset, size in shapes[first:last] if start < offset + size}

    def words(self) -> dict[Cell, tuple[Cell, int]]:
        """``{cell: (word, byte offset in it)}`` for the cells that lie in a word (see
        `StackModel`): each run of cells that share bytes, when one of them spans the
        run and is at most 8 bytes wide, or the run is one cell."""
        found: dict[Cell, tuple[Cell, int]] = {}
        for region, shapes in self.shapes.items():
            for run, end in _runs(shapes):
                start = run[0][0]
                if len(run) == 1 or ((start, end - start) in run and end - start <= 8):
                    word = (region, start, end - start)
                    found.update(((region, o, w), (word, o - start)) for o, w in run)
        return found

    def outside(self, sealed: frozenset[str]) -> frozenset[Cell]:
        """Every cell of every frame not sealed: what a store through an unknown address may write."""
        return frozenset((region, *shape) for region, shapes in self.shapes.items() if region not in sealed
                         for shape in shapes)

    def hit(self, atom: Atom, width: int, anywhere: frozenset[Cell]) -> Set[Cell]:
        """The cells an access of `width` bytes through `atom` may touch (`anywhere`: what
        an unknown address may)."""
        if atom.form == TOP_FORM or atom.form == NUM or (atom.space == LOCAL_SPACE and atom.region is None):
            return anywhere
        if not atom.is_address or atom.space != LOCAL_SPACE or atom.region is None:  # (a local one has a region)
            return set()
        region = atom.region.name
        if atom.shift or atom.above or atom.hi >= INF:
            return {(region, *shape) for shape in self.shapes.get(region, ())}
        return self.touching(region, atom.lo, atom.hi - atom.lo + width)


def _runs(shapes: list[Shape]) -> Iterator[tuple[list[Shape], int]]:
    """The runs of `shapes` (sorted by offset) whose cells share bytes, each with its end.

    >>> list(_runs([(0, 8), (0, 2), (4, 4), (8, 4)]))
    [([(0, 8), (0, 2), (4, 4)], 8), ([(8, 4)], 12)]
    """
    run: list[Shape] = []
    end = 0
    for offset, width in shapes:
        if run and offset >= end:
            yield run, end
            run = []
        end = max(end, offset + width) if run else offset + width
        run.append((offset, width))
    if run:
        yield run, end
