"""Where a kernel's variables live: the regions its ``.shared``, ``.local`` and
``.global`` declarations give, and the zero-filled templates a ``-G`` build copies from.

The register analysis (`ptxkit.cfg.values.registers`) starts a ``mov`` of a variable's name at
its region (docs/fence.md §3.1); every ``extern .shared`` array is the one dynamic region
(`DYNAMIC_SHARED`). A flow graph keeps the tables its analyses ask for (`SYMBOL_TABLES`),
the registers each block's function declares without ``%`` (`PLAIN_REGISTERS`) and the
module's templates (`TEMPLATES`) among its facts, so they go when the graph goes.
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.cfg.flow.graph import Fact
from ptxkit.cfg.flow.inline import Context
from ptxkit.isa import TYPE_BITS
from ptxkit.cfg.values.values import (
    GLOBAL_SPACE_NAME, LOCAL_SPACE, OTHER_SPACE, SHARED_CTA_SPACE, TOP, WINDOW, Atom, Region, address, number,
)
from ptxkit.syntax import Directive, Function

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    from ptxkit.cfg.flow.graph import FlowGraph
    from ptxkit.syntax import Module, Node

    from ptxkit.cfg.values.values import Value
    #: Name -> the value of the variable's address, or None for a register declared without ``%``.
    SymbolTable = dict[str, Value | None]

_SPACE_OF_DECLARATION = {".shared": SHARED_CTA_SPACE, ".local": LOCAL_SPACE, ".global": GLOBAL_SPACE_NAME}
#: The name of the region every ``extern .shared`` array of a kernel starts.
DYNAMIC_SHARED = "dynamic shared"


def symbol_regions(function: Function, context: Context | None = None, flow: FlowGraph | None = None) -> SymbolTable:
    """Variables visible in `function` -> the abstract value of their address
    (registers declared without a ``%``, as inline assembly does, map to None).

    Every ``extern .shared`` array is the same dynamic region (they all start at the
    dynamic shared memory); ``.local`` variables get one region per inlined copy. With
    `flow`, the graph being analysed, the tables of the module and of each function are
    built once for it (`SymbolTables`).

    >>> import ptxkit
    >>> from ptxkit.cfg.values.values import show
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.extern .shared .align 16 .b8 dyn[];\\n"
    ...                  ".visible .entry k()\\n{\\n.shared .align 8 .b64 bars[4];\\n\\tret;\\n}\\n")
    >>> regions = symbol_regions(m.function("k"))
    >>> show(regions["dyn"]), show(regions["bars"]), regions["bars"][0].region.size
    ('dynamic shared+0 (shared::cta window)', 'bars+0 (shared::cta window)', 32)
    """
    suffix = _suffix(context)
    tables = SYMBOL_TABLES.of(flow)
    module = function.module
    found = dict(tables.table(module, suffix, lambda: _scan(module.items, True, suffix))) \
        if module is not None else {}
    declared = tables.declared(function, suffix)
    found.update(declared)
    if _dynamic_alignments(declared):  # extern arrays in the function too: one region with the module's
        _one_dynamic_region(found, max(_dynamic_alignments(found)))
    for param in function.signature.params:
        found.setdefault(param.name, (Atom(WINDOW, OTHER_SPACE),))
    return found


class SymbolTables:
    """The symbol tables of a module and its functions, each built once (and once for all
    inlined copies of a function that declares no ``.local`` variable): a kernel with
    thousands of inlined calls asks for the same tables thousands of times. A flow graph
    keeps one among its facts (`SYMBOL_TABLES`, which `symbol_regions` reads).

    >>> tables, node, built = SymbolTables(), object(), []
    >>> [tables.table(node, suffix, lambda: built.append(suffix) or {}) for suffix in ("", "@1")], built
    ([{}, {}], [''])
    """

    def __init__(self) -> None:
        #: (module or function, suffix or None for every copy) -> table
        self._tables: dict[tuple[Node, str | None], SymbolTable] = {}

    def table(self, node: Node, suffix: str, build: Callable[[], SymbolTable]) -> SymbolTable:
        """`node`'s table for the inlined copy `suffix` names: `build()` the first time."""
        table = self._tables.get((node, None))
        if table is None:
            table = self._tables.get((node, suffix))
        if table is None:
            table = build()
            local = any(v is not None and v[0].space == LOCAL_SPACE for v in table.values())
            self._tables[(node, suffix if local else None)] = table
        return table

    def declared(self, function: Function, suffix: str) -> SymbolTable:
        """What `function` itself declares, for the inlined copy `suffix` names: its
        variables, and its registers declared without ``%`` (the only names mapped to
        None in `symbol_regions`, which adds the module's and the parameters').

        >>> import ptxkit
        >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
        ...                  ".reg .b32 r;\\n.local .align 4 .b8 buf[4];\\n\\tret;\\n}\\n")
        >>> table = SymbolTables().declared(m.function("k"), "@1")
        >>> table["r"], table["buf"][0].region.name
        (None, 'buf@1')
        """
        return self.table(function, suffix, lambda: _scan(function.walk(), False, suffix))


def _suffix(context: Context | None) -> str:
    """What the names of an inlined copy's ``.local`` regions end with."""
    return f"@{context.id}" if context is not None and context.id else ""


def _no_tables_yet(flow: object) -> SymbolTables:
    """Tables for `flow`, or for no graph at all: `symbol_regions` is asked without one
    too, and a compiled function checks the type its argument declares."""
    return SymbolTables()


#: The symbol tables of a graph's module and functions, filled as `symbol_regions` asks.
SYMBOL_TABLES: Fact[SymbolTables] = Fact("symbol tables", _no_tables_yet)


def _plain_registers(flow: FlowGraph) -> list[frozenset[str]]:
    """Block -> the registers its function declares without ``%`` (inline assembly), from
    what the function of its inlined copy declares."""
    tables = SYMBOL_TABLES.of(flow)
    by_copy: dict[int, frozenset[str]] = {}
    found: list[frozenset[str]] = []
    for block in flow.blocks:
        context = block.context
        key = context.id if context is not None else 0
        if key not in by_copy:
            function = context.function if context is not None else flow.function
            declared = tables.declared(function, _suffix(context))
            by_copy[key] = frozenset(name for name, value in declared.items() if value is None)
        found.append(by_copy[key])
    return found


#: A graph's registers declared without ``%``, by block (`_plain_registers`).
PLAIN_REGISTERS: Fact[list[frozenset[str]]] = Fact("plain registers", _plain_registers, needs=(SYMBOL_TABLES,))


def _scan(nodes: Iterable[Node], module_scope: bool, suffix: str) -> SymbolTable:
    found: SymbolTable = {}
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


def _dynamic_alignments(table: SymbolTable) -> set[int]:
    return {value[0].region.align for value in table.values()
            if value is not None and value[0].region is not None and value[0].region.name == DYNAMIC_SHARED}


def _one_dynamic_region(found: SymbolTable, align: int) -> None:
    """Every extern .shared array starts at the one dynamic shared memory, aligned as
    the most aligned of them asks."""
    region = Region(DYNAMIC_SHARED, SHARED_CTA_SPACE, None, align)
    for name, value in found.items():
        if value is not None and value[0].region is not None and value[0].region.name == DYNAMIC_SHARED:
            found[name] = address(region)


def _declare(directive: Directive, found: SymbolTable, suffix: str) -> int:
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
    element = TYPE_BITS.get((declaration.type or ".b8")[2:], 8) // 8
    dynamic = 0
    for name, base in zip(declaration.names, declaration.base_names):
        dims = [d.strip() for d in name[len(base):].strip("[]").split("][")] if "[" in name else []
        align = declaration.align or element
        if dims and not all(dims):  # extern array of unknown size
            if space == SHARED_CTA_SPACE:
                found[base] = address(Region(DYNAMIC_SHARED, space, None, align))
                dynamic = max(dynamic, align)
                continue
            size: int | None = None
        else:
            size = element
            for dim in dims:
                size *= int(dim, 0)
        found[base] = address(Region(base + (suffix if space == LOCAL_SPACE else ""), space, size, align))
    return dynamic


def templates(module: Module | None) -> frozenset[str]:
    """The names of the module's *templates*: ``.global`` variables it defines (not
    ``.extern``) with no initializer, whose name has a ``$``, which no C++ name has
    (nvcc's ``make_smem_desc…$265``, the zero-filled object a ``-G`` build copies a
    default-constructed descriptor from), and that no instruction of the module names but
    to take its address. PTX zero-fills a ``.global`` variable without an initializer
    (PTX ISA, "Global state space"), and the module never writes a template:
    docs/fence.md §3.2 and §8.

    >>> import ptxkit
    >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.global .align 8 .b8 desc$1[8];\\n"
    ...     ".global .align 8 .b8 table[8] = {1, 2, 3, 4, 5, 6, 7, 8};\\n")
    >>> sorted(templates(m))
    ['desc$1']
    """
    if module is None:
        return frozenset()
    found: set[str] = set()
    for node in module.items:
        declaration = node.declaration if type(node) is Directive else None
        if declaration is not None and declaration.space == ".global" and declaration.initializer is None \
                and ".extern" not in declaration.linkage:  # defined here: zero-filled here
            found.update(name for name in declaration.base_names if "$" in name)
    if found:
        for instruction in module.instructions():
            if "$" not in instruction.text:  # it names no template
                continue
            named = {operand.name for operand in instruction.operands} | \
                {element.name for operand in instruction.operands for element in operand.elements}
            if named & found and instruction.opcode.split(".")[0] != "mov":
                found -= named
    return frozenset(found)


#: The templates of a graph's module (`templates`).
TEMPLATES: Fact[frozenset[str]] = Fact("templates", lambda flow: templates(flow.function.module))


def template_load(address: Value, width: int, names: frozenset[str]) -> Value:
    """What a load of `width` bytes through `address` gives when it reads inside a
    template (zero) of `names`, else top.

    >>> from ptxkit.cfg.values.values import show
    >>> from ptxkit.cfg.values.values import GENERIC
    >>> desc = address(Region("desc$1", GLOBAL_SPACE_NAME, 8, 8), form=GENERIC)
    >>> show(template_load(desc, 8, frozenset({"desc$1"}))), show(template_load(desc, 8, frozenset()))
    ('0', 'top')
    """
    if len(address) != 1:
        return TOP
    atom = address[0]
    region = atom.region
    if not atom.is_address or atom.space != GLOBAL_SPACE_NAME or region is None or region.name not in names \
            or region.size is None or atom.lo < 0 or atom.hi + width > region.size or atom.shift or atom.above:
        return TOP
    return number(0)
