"""A pass's edits in the making: `Plan` for a module, `FunctionPlan` for each function.

A pass finds instructions (`FunctionPlan.find` with `ptxkit.rewrite.match`), asks for
fresh registers and labels (declared for it, once per type, at the top of the
function body), puts code at positions (`ptxkit.rewrite.positions`), adds kernel
parameters or module variables, deletes or replaces statements, and returns the
plan. `Plan.edits` turns all that into the records of `ptxkit.edits`; the one apply
step (`ptxkit.edits.apply_edits`, through `apply`) changes the tree and returns the
line map. Inserted code carries no ``.loc`` unless `insert` is given one (the
``.loc`` in force at the place is then restored after it).

>>> import ptxkit
>>> from ptxkit.rewrite import match
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     "\\t.reg .b32 %r<2>;\\n\\tbar.sync 0;\\n\\tret;\\n}\\n")
>>> plan = Plan(m)
>>> k = plan.function("k")
>>> t = k.fresh_register(".u64", "t")
>>> for bar in k.find(match.barrier_wait()):
...     k.insert(k.before(bar), f"mov.u64 {t}, %globaltimer;")
>>> param = k.add_param(".u64", "buf")
>>> lines = apply(plan)
>>> print(str(m), end="")
.version 8.0
.target sm_90a
.address_size 64
.visible .entry k(.param .u64 ptxkit_buf)
{
	.reg .b32 %r<2>;
	.reg .u64 %ptxkit_t;
	mov.u64 %ptxkit_t, %globaltimer;
	bar.sync 0;
	ret;
}
>>> param.index, lines.old(7), lines.new(7)
(0, None, 9)
"""

from __future__ import annotations

import functools

from ptxkit._records import Record
from ptxkit.edits import AddParam, Comment, Delete, Insert, Replace, Retarget, apply_edits
from ptxkit.instruction import head_of
from ptxkit.lexer import LABEL, PIECE
from ptxkit.syntax import Block, Directive, Function, Instruction, Label, parse_statement

from . import positions
from .facts import FunctionFacts
from .locs import Loc
from .names import Names

#: The types a register may be declared with (PTX ISA, "Fundamental Types").
REGISTER_TYPES = frozenset(
    f".{kind}{bits}" for kind, sizes in (("b", (8, 16, 32, 64, 128)), ("u", (8, 16, 32, 64)), ("s", (8, 16, 32, 64)),
                                         ("f", (16, 32, 64))) for bits in sizes
) | {".f16x2", ".bf16", ".bf16x2", ".pred"}


class AddedParam(Record):
    """A parameter a plan added to kernel `kernel`: its `name`, `index` in the
    parameter list (it is the last one when added) and `type`. A launcher passes the
    kernel's own arguments, then one value for each added parameter in index order.
    """

    kernel: str
    name: str
    index: int
    type: str


def statements(code) -> list[str]:
    """The statements of `code`: a string of statements (one or more a line) or a
    list of them. Each must parse as one instruction, label or directive.

    >>> statements("mov.u32 %r1, 0;  add.u32 %r1, %r1, 1;\\nDONE:")
    ['mov.u32 %r1, 0;', 'add.u32 %r1, %r1, 1;', 'DONE:']
    >>> statements("mov.u32 %r1, 0")
    Traceback (most recent call last):
    ValueError: not a statement: 'mov.u32 %r1, 0'
    """
    return list(_checked_statements(code if isinstance(code, str) else tuple(code)))


@functools.lru_cache(maxsize=4096)
def _checked_statements(code) -> tuple[str, ...]:
    """`statements`, kept: a pass puts the same code at many places."""
    if not isinstance(code, str):
        found = [piece.strip() for piece in code]
    else:
        found, at = [], 0
        while at < len(code):
            piece = PIECE.match(code, at)
            if piece is None or piece.end() == at:
                if code[at:].strip():
                    raise ValueError(f"not a statement: {code[at:].strip()!r}")
                break
            found.append(piece.group(0)[len(piece.group(1)):])
            at = piece.end()
    for statement in found:  # a malformed statement raises PtxSyntaxError here, not in ptxas
        node = parse_statement(statement)
        if type(node) is Instruction:
            node.view
        elif type(node) is Directive:
            node.declaration
    return tuple(found)


class _Site:
    """The code put at one position, in the order given."""

    __slots__ = ("position", "code")

    def __init__(self, position):
        self.position, self.code = position, []


class FunctionPlan:
    """The edits a pass makes in one function (see the module docstring).

    `facts` (`ptxkit.rewrite.facts.FunctionFacts`) describes the function as parsed,
    `names` hands out fresh names (`ptxkit.rewrite.names.Names`); `plan` is its `Plan`
    until the plan's edits are made, after which every edit is refused.
    """

    def __init__(self, plan: "Plan", function: Function):
        self.plan = plan
        self.function = function
        self.facts = FunctionFacts(function)  # computes what it is asked for, when asked
        self._sites: dict[tuple, _Site] = {}
        self._registers: dict[int, tuple[Block, dict[str, list[str]]]] = {}
        self._params: list[AddedParam] = []

    def __repr__(self) -> str:
        return f"<FunctionPlan {self.function.name}>"

    @property
    def name(self) -> str:
        return self.function.name

    @functools.cached_property
    def names(self) -> Names:
        """The function's `ptxkit.rewrite.names.Names` (made on first use: a pass that
        only finds and deletes never reads the function's names)."""
        return Names(self.function)

    @property
    def flow(self):
        """The function's `ptxkit.cfg.flow.graph.FlowGraph` (blocks, successors, edge kinds)."""
        return self.facts.flow

    # -- finding --------------------------------------------------------------------------
    def find(self, matcher) -> list[Instruction]:
        """The instructions `matcher` accepts, in source order."""
        from .match import find

        return find(self.function, matcher, self.facts)

    # -- names ----------------------------------------------------------------------------
    def fresh_register(self, type: str, hint: str = "t", scope: Block | None = None) -> str:
        """A new register of `type` (``.u64``, ``b32``, ``.pred``…) that clashes with no
        name of the function, declared in `scope` (default: the function body, where
        every nested scope sees it).

        >>> import ptxkit
        >>> plan = Plan(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
        ...                          ".visible .entry k()\\n{\\n\\t.reg .b32 %ptxkit_t;\\n\\tret;\\n}\\n"))
        >>> plan.function("k").fresh_register("b32"), plan.function("k").fresh_register(".pred", "p")
        ('%ptxkit_t_1', '%ptxkit_p')
        """
        kind = type if type.startswith(".") else "." + type
        if kind not in REGISTER_TYPES:
            raise ValueError(f"not a register type: {type!r}")
        scope = scope if scope is not None else self.function.body
        name = self.names.register(hint)
        self._registers.setdefault(id(scope), (scope, {}))[1].setdefault(kind, []).append(name)
        return name

    def fresh_label(self, hint: str = "L") -> str:
        """A new label name (``$ptxkit_<hint>``) that clashes with no name of the function."""
        return self.names.label(hint)

    # -- positions ------------------------------------------------------------------------
    def before(self, instruction) -> positions.Position:
        """Right before `instruction` (`ptxkit.rewrite.positions.before`)."""
        return positions.before(instruction)

    def after(self, instruction) -> positions.Position:
        """Right after `instruction` (`ptxkit.rewrite.positions.after`)."""
        return positions.after(instruction)

    def block_entry(self, block: int) -> positions.Position:
        """After block `block`'s labels (`ptxkit.rewrite.positions.block_entry`)."""
        return positions.block_entry(self.facts, block)

    def block_exit(self, block: int) -> positions.Position:
        """Before block `block`'s terminator (`ptxkit.rewrite.positions.block_exit`)."""
        return positions.block_exit(self.facts, block)

    def on_edge(self, u, v) -> positions.Position:
        """On the CFG edge ``u -> v`` (`ptxkit.rewrite.positions.on_edge`)."""
        return positions.on_edge(self.facts, u, v)

    def entry(self) -> positions.Position:
        """At function entry (`ptxkit.rewrite.positions.function_entry`)."""
        return positions.function_entry(self.facts)

    def returns(self) -> list[positions.Position]:
        """Before every return (`ptxkit.rewrite.positions.before_returns`)."""
        return positions.before_returns(self.facts)

    # -- edits ----------------------------------------------------------------------------
    def insert(self, where, code, loc: Loc | tuple | None = None) -> None:
        """Put `code` (statements, see `statements`) at `where` (a `Position` or a list
        of them). Code put at one position runs in the order given. With `loc`
        (``Loc`` or ``(file, line, column)``), a ``.loc`` before the code attributes
        it to that source position, and the ``.loc`` in force there is restored after.
        """
        self.plan._check_open()
        body = statements(code)
        if loc is not None:
            loc = Loc(*loc)
            if loc.file not in self.facts.locs.files:
                raise ValueError(f"no '.file {loc.file}' in the module for .loc {loc}")
        for position in ([where] if isinstance(where, positions.Position) else where):
            site = self._sites.get(position.key)
            if site is None:
                site = self._sites[position.key] = _Site(position)
            if loc is None:
                site.code.extend(body)
                continue
            site.code.append(f".loc {loc.file} {loc.line} {loc.column}")
            site.code.extend(body)
            restore = self.facts.locs.directive(position.node)
            if restore is not None:
                site.code.append(restore.text)

    def delete(self, node) -> None:
        """Remove statement `node`."""
        self.plan.delete(node)

    def replace(self, node, code: str) -> None:
        """Replace statement `node` by one statement."""
        self.plan.replace(node, code)

    def add_param(self, type: str = ".u64", hint: str = "buf", pointer: str | None = None,
                  align: int | None = None) -> AddedParam:
        """Add a parameter at the end of this kernel's parameter list: ``.param TYPE
        [.ptr .POINTER .align ALIGN] ptxkit_<hint>``. Returns the `AddedParam` (its
        index tells the launcher where its value goes; see docs/rewrite.md).

        >>> import ptxkit
        >>> plan = Plan(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
        ...                          ".visible .entry k(.param .u32 n)\\n{\\n\\tret;\\n}\\n"))
        >>> plan.function("k").add_param(".u64", "buf", pointer="global", align=16)
        AddedParam(kernel='k', name='ptxkit_buf', index=1, type='.u64')
        >>> plan.edits()[0].text
        '.param .u64 .ptr .global .align 16 ptxkit_buf'
        """
        self.plan._check_open()
        if self.function.kind != "entry":
            raise ValueError(f"{self.function.name} is a .func: its callers would have to pass the new parameter")
        kind = type if type.startswith(".") else "." + type
        name = self.names.symbol(hint)
        index = len(self.function.signature.params) + len(self._params)
        pointed = f" .ptr .{pointer.lstrip('.')}" + (f" .align {align}" if align else "") if pointer else ""
        added = AddedParam(self.function.name, name, index, kind)
        self._params.append(added)
        self.plan.params.append(added)
        self.plan._edits.append(AddParam(self.function, f".param {kind}{pointed} {name}"))
        return added

    # -- turning it into edits --------------------------------------------------------------
    def _declarations(self) -> list:
        edits = []
        for scope, by_type in self._registers.values():
            anchor, after = _declaration_anchor(scope)
            edits.extend(Insert(anchor, f".reg {kind} {', '.join(names)};", after=after)
                         for kind, names in by_type.items())
        return edits

    def _code(self) -> list:
        edits: list = []
        fallen_into: set[int] = set()  # labels before which an edge block was already put
        indent = _instruction_indent(self.function)
        # code after a guarded ret that is also split for a return goes after the split's label (the
        # fall-through path starts there); edge blocks go last, so that function-entry code put before the
        # same label runs first and then jumps over them
        order = {"before": 0, "exit": 0, "after": 1, "edge": 2}
        for site in sorted(self._sites.values(), key=lambda site: order[site.position.kind]):
            position = site.position
            node = position.node
            if position.kind in ("before", "after"):
                edits.extend(_inserts(node, site.code, position.kind == "after",
                                      indent if type(node) is Label else None))
            elif position.kind == "edge":
                u, v = position.edge
                label = self.names.label("edge")
                branch = self.flow.blocks[u].terminator
                edits.append(Retarget(branch, label))
                falls = id(node) in fallen_into or v == self.flow.start or any(
                    "fallthrough" in kind.split(",") for (a, b), kind in self.flow.kinds.items() if b == v)
                jump = [f"bra.uni {node.name};"] if falls else []
                edits.extend(_inserts(node, [*jump, f"{label}:", *site.code], False, indent))
                fallen_into.add(id(node))
            else:  # a guarded ret/exit: @!p bra skip; code; ret; skip:
                guard, opcode, _, _ = head_of(node)
                skip = self.names.label("skip")
                edits.append(Replace(node, f"@{'' if guard.negated else '!'}{guard.register} bra {skip};"))
                returned = node.text[node.text.index(opcode):]
                edits.extend(_inserts(node, [*site.code, returned, f"{skip}:"], True, None))
        return edits


def _inserts(anchor, code: list[str], after: bool, indent: str | None) -> list[Insert]:
    """One `Insert` per statement at `anchor` (labels at the start of their line)."""
    return [Insert(anchor, statement, after=after, indent="" if PIECE.fullmatch(statement).group(LABEL) else indent)
            for statement in code]


def _declaration_anchor(scope: Block) -> tuple[object, bool]:
    """Where new ``.reg`` lines go in `scope`: after the last ``.reg`` of its leading
    declarations, else before its first statement."""
    items = scope.items
    last = None
    for item in items:
        if type(item) is not Directive:
            break
        if item.name == ".reg":
            last = item
    if last is not None:
        return last, True
    if not items:
        raise ValueError("cannot declare a register in an empty scope")
    return items[0], False


def _instruction_indent(function) -> str:
    """The indentation of the function's first instruction (for code put before labels)."""
    for node in function.walk():
        if type(node) is Instruction:
            newline = node.prefix.rfind("\n")
            if newline >= 0:
                return node.prefix[newline + 1:]
    return "\t"


class Plan:
    """The edits one pass makes to `module` (see the module docstring).

    `params` lists the kernel parameters added (`AddedParam`); `info` is the pass's
    own record of what it did (what a decoder or a report needs), kept with the
    pipeline's result.
    """

    def __init__(self, module):
        self.module = module
        self.params: list[AddedParam] = []
        self.info: dict = {}
        self._functions: dict[int, FunctionPlan] = {}
        self._edits: list = []
        self._globals: list[str] = []
        self._comments: list[str] = []
        self._finished: list | None = None
        self._names: Names | None = None

    def __repr__(self) -> str:
        return f"<Plan of {self.module.filename}: {len(self._functions)} functions>"

    def function(self, function) -> FunctionPlan:
        """The `FunctionPlan` of `function` (a `Function` with a body, or its name)."""
        if isinstance(function, str):
            function = self.module.function(function)
        plan = self._functions.get(id(function))
        if plan is None:
            plan = self._functions[id(function)] = FunctionPlan(self, function)
        return plan

    def functions(self, kind: str | None = None) -> list[FunctionPlan]:
        """The plans of every function with a body (only ``entry`` or ``func`` ones
        when `kind` says so), in source order."""
        return [self.function(f) for f in self.module.functions
                if not f.is_declaration and kind in (None, f.kind)]

    def kernels(self) -> list[FunctionPlan]:
        """The plans of every ``.entry``."""
        return self.functions("entry")

    def find(self, matcher, kind: str | None = None) -> list[tuple[FunctionPlan, Instruction]]:
        """``(function plan, instruction)`` for every instruction `matcher` accepts."""
        return [(function, instruction) for function in self.functions(kind) for instruction in function.find(matcher)]

    def declare_global(self, type: str, hint: str, count: int | None = None, align: int | None = None,
                       space: str = "global", initializer: str | None = None, linkage: str | None = None) -> str:
        """Declare a module-level variable (``.global .u64 ptxkit_<hint>``, an array of
        `count` when given) before the first function; returns its fresh name. `linkage`
        (``visible``, ``extern``, ``weak``…) goes first: a ``visible`` variable is one the
        host finds by name in the loaded module (``cuModuleGetGlobal``).

        >>> import ptxkit
        >>> plan = Plan(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
        ...                          ".visible .entry k()\\n{\\n\\tret;\\n}\\n"))
        >>> plan.declare_global(".u32", "count", 4, align=4), plan.edits()[0].text
        ('ptxkit_count', '.global .align 4 .u32 ptxkit_count[4];')
        >>> plan = Plan(plan.module)
        >>> plan.declare_global(".u64", "buffer", linkage="visible"), plan.edits()[0].text
        ('ptxkit_buffer', '.visible .global .u64 ptxkit_buffer;')
        """
        self._check_open()
        if self._names is None:
            self._names = Names(module=self.module, module_wide=True)
        name = self._names.symbol(hint)
        kind = type if type.startswith(".") else "." + type
        text = (f".{linkage.lstrip('.')} " if linkage else "") + f".{space.lstrip('.')}" + \
            (f" .align {align}" if align else "") + f" {kind} {name}" + \
            (f"[{count}]" if count is not None else "") + (f" = {initializer}" if initializer is not None else "") + ";"
        self._globals.append(text)
        return name

    def comment(self, text: str) -> None:
        """Put a line ``// text`` before the module's first function (after the variables
        the plan declares): what the pass leaves for tools that read its output, such as
        an instrumentation pass's buffer layout.

        >>> import ptxkit
        >>> plan = Plan(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
        ...                          ".visible .entry k()\\n{\\n\\tret;\\n}\\n"))
        >>> plan.comment("made by my pass")
        >>> _ = apply(plan); str(plan.module).splitlines()[3]
        '// made by my pass'
        """
        self._check_open()
        if "\n" in text:
            raise ValueError("a comment is one line")
        self._comments.append(text)

    def delete(self, node) -> None:
        """Remove statement `node`."""
        self._check_open()
        self._edits.append(Delete(node))

    def replace(self, node, code: str) -> None:
        """Replace statement `node` by one statement."""
        self._check_open()
        found = statements(code)
        if len(found) != 1:
            raise ValueError(f"a statement is replaced by one statement, not {len(found)}: {code!r}")
        self._edits.append(Replace(node, found[0]))

    def _check_open(self) -> None:
        if self._finished is not None:
            _CLOSED._check_open()

    def edits(self) -> list:
        """The plan as `ptxkit.edits` records (made once; the plan is closed after)."""
        if self._finished is None:
            edits: list = []
            if self._globals or self._comments:
                first = next((item for item in self.module.items if type(item) is Function), None)
                if first is None:
                    raise ValueError("a module-level variable or comment needs a function to go before")
                edits.extend(Insert(first, text) for text in self._globals)
                edits.extend(Comment(first, text) for text in self._comments)
            for function in self._functions.values():
                edits.extend(function._declarations())
            for function in self._functions.values():
                edits.extend(function._code())
            self._finished = edits + self._edits
            for function in self._functions.values():  # closed: nothing to edit through them
                function.plan = _CLOSED
        return self._finished

    def __iter__(self):
        return iter(self.edits())


class _Closed:
    """What a `FunctionPlan` edits through once its plan's edits are made: every edit is
    refused. The plan and its function plans then no longer refer to each other, a cycle
    that would keep the plan, and its module, until the cyclic collector runs."""

    def _check_open(self) -> None:
        raise RuntimeError("this plan's edits were already made: start a new Plan")

    def delete(self, node) -> None:
        self._check_open()

    def replace(self, node, code: str) -> None:
        self._check_open()


_CLOSED = _Closed()


def apply(plan) -> "LineMap":  # noqa: F821 (ptxkit.edits.LineMap)
    """Apply a `Plan` (or any list of `ptxkit.edits` records) to its module: the one
    apply step every pass goes through. Returns the `ptxkit.edits.LineMap`."""
    return apply_edits(plan.edits() if isinstance(plan, Plan) else list(plan))
