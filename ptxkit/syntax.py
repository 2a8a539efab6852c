"""The lossless PTX syntax tree.

Every node keeps its own source text and the trivia (whitespace and comments) before
it, so printing the tree gives back the input byte for byte, and an edit touches only
the lines it changes. Structure (guard, opcode, operands, function signatures) is read
from a node's text only when asked for.

>>> from ptxkit import parse
>>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n"
...                  ".visible .entry k()\\n{\\n\\tret;\\n}\\n")
>>> ret = m.functions[0].body.items[0]
>>> _ = ret.insert_before("bar.sync 0;")
>>> print(str(m).splitlines()[-3:])
['\\tbar.sync 0;', '\\tret;', '}']
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import cached_property

from ._records import TYPE_CHECKING
from ._regex import compile as compile_pattern
from .errors import PtxSyntaxError, Source
from .declarations import parse_declaration, parse_signature
from .instruction import parse_instruction
from .lexer import INSTRUCTION_START, LABEL, LINE, PIECE, STATEMENT

if TYPE_CHECKING:
    from typing import Any

    from .declarations import Declaration, Signature
    from .instruction import Guard, InstructionView


class Node:
    """A piece of PTX: the trivia before it (`prefix`) and its own text.

    >>> from ptxkit import parse
    >>> m = parse(".version 8.0\\n.target sm_90\\n.address_size 64\\n")
    >>> target = m.items[1]
    >>> target.position, target.code()
    ((2, 1), '.target sm_90')
    >>> target.delete(); str(m)
    '.version 8.0\\n.address_size 64\\n'
    """

    __slots__ = ("prefix", "text", "offset", "parent", "_view")
    is_container = False

    def __init__(self, prefix: str, text: str, offset: int | None = None, parent: "Node | None" = None):
        self.prefix = prefix
        self.text = text
        self.offset = offset  # start of `text` in the parsed source; None when inserted
        self.parent = parent
        self._view: InstructionView | None = None  # parsed structure, filled on first use

    # -- where the node is -------------------------------------------------------------
    @property
    def module(self) -> "Module | None":
        """The module this node belongs to (None once detached)."""
        node = self
        while node.parent is not None:
            node = node.parent
        return node if isinstance(node, Module) else None

    @property
    def function(self) -> "Function | None":
        """The function whose body holds this node, if any."""
        node = self.parent
        while node is not None and not isinstance(node, Function):
            node = node.parent
        return node

    @property
    def scope(self) -> "Block | None":
        """The innermost ``{ }`` scope holding this node (None at module level)."""
        return self.parent if isinstance(self.parent, Block) else None

    @property
    def position(self) -> tuple[int, int] | None:
        """1-based (line, column) of the node's text in the input; None if inserted."""
        module = self.module
        if self.offset is None or module is None:
            return None
        return module.source.position(self.offset)

    @property
    def line(self) -> int | None:
        """1-based line of the node in the input (None for inserted nodes)."""
        pos = self.position
        return pos[0] if pos else None

    @property
    def column(self) -> int | None:
        """1-based column of the node in the input (None for inserted nodes)."""
        pos = self.position
        return pos[1] if pos else None

    def error(self, message: str, at: int = 0) -> PtxSyntaxError:
        """A `PtxSyntaxError` at character `at` of this node's text."""
        module = self.module
        if module is None or self.offset is None:
            return PtxSyntaxError(message, "<inserted>", 0, at + 1, self.text)
        return module.source.error(self.offset + at, message)

    # -- printing ----------------------------------------------------------------------
    def code(self, include_prefix: bool = False) -> str:
        """The node's PTX text (with its children for containers)."""
        out = [self.prefix, self.text] if include_prefix else [self.text]
        if self.is_container:
            assert isinstance(self, (Block, Function, Module))  # the classes that say is_container
            _render_children(self, out)
        return "".join(out)

    def __str__(self) -> str:
        return self.code()

    def __repr__(self) -> str:
        text = self.text if len(self.text) < 60 else self.text[:57] + "..."
        return f"<{type(self).__name__} {text!r}>"

    # -- editing -----------------------------------------------------------------------
    def insert_before(self, statement: "str | Node", index: int | None = None) -> "Node":
        """Insert a statement on its own line before this one, with the same indentation.

        Returns the new node. Every other byte of the module is unchanged. `index` may
        give this node's position among its parent's items, which saves searching for
        it when many statements go into one long scope (a wrong hint is ignored).
        """
        new = _as_statement(statement)
        items, index = self._siblings(index)
        head, newline, indent = _split_last_line(self.prefix)
        if newline:
            new.prefix = self.prefix
            self.prefix = newline + indent
        else:
            new.prefix, self.prefix = self.prefix, " "
        new.parent = self.parent
        items.insert(index, new)
        return new

    def insert_after(self, statement: "str | Node", index: int | None = None) -> "Node":
        """Insert a statement on its own line after this one (after a trailing comment).

        `index` is the same optional position hint as for `insert_before`.
        """
        new = _as_statement(statement)
        items, index = self._siblings(index)
        holder, attr = _following_trivia(self.parent, items, index)
        trivia = getattr(holder, attr)
        indent = _indentation_of(self, items, index)
        match = re.search(r"\r?\n", trivia)
        if match:
            new.prefix = trivia[: match.start()] + match.group() + indent
            setattr(holder, attr, trivia[match.start() :])
        else:
            new.prefix = "\n" + indent
        new.parent = self.parent
        items.insert(index + 1, new)
        return new

    def replace(self, statement: "str | Node") -> "Node":
        """Replace this node by another statement, keeping the trivia before it."""
        new = _as_statement(statement)
        items, index = self._siblings()
        new.prefix = self.prefix
        new.parent = self.parent
        items[index] = new
        self.parent = None
        return new

    def delete(self) -> None:
        """Remove this node (and its line, when it stood alone on it)."""
        items, index = self._siblings()
        head, newline, _ = _split_last_line(self.prefix)
        holder, attr = _following_trivia(self.parent, items, index)
        setattr(holder, attr, head + getattr(holder, attr))
        del items[index]
        self.parent = None

    def _siblings(self, hint: int | None = None) -> tuple[list[Node], int]:
        parent = self.parent
        items = getattr(parent, "items", None)
        if items is None:
            raise ValueError(f"{self!r} is not a statement in a module or block")
        if hint is not None and 0 <= hint < len(items) and items[hint] is self:
            if isinstance(parent, Block):
                parent._labels = None
            return items, hint
        for index, item in enumerate(items):
            if item is self:
                if isinstance(parent, Block):
                    parent._labels = None
                return items, index
        raise ValueError(f"{self!r} is not in its parent")  # pragma: no cover


class Instruction(Node):
    """An instruction: ``[@[!]pred] opcode[.mod…] operands;``.

    The structured view (`guard`, `opcode`, `base`, `modifiers`, `operands`,
    `state_space`) is parsed on first access.

    >>> from ptxkit import parse_statement
    >>> inst = parse_statement("@%p1 ld.global.v4.f32 {%f1, %f2, %f3, %f4}, [%rd1+16];")
    >>> inst.guard, inst.opcode, inst.state_space, inst.operands[1].value
    (Guard(register='%p1', negated=False), 'ld.global.v4.f32', 'global', 16)
    """

    __slots__ = ()

    @property
    def view(self) -> InstructionView:
        """The parsed `InstructionView` (raises `PtxSyntaxError` if malformed)."""
        view = self._view
        if view is None:
            view = self._view = parse_instruction(self)
        return view

    @property
    def guard(self) -> Guard | None:
        """The `Guard` (predicate register and negation), or None."""
        return self.view.guard

    @property
    def opcode(self) -> str:
        """The full dotted opcode, e.g. ``"ld.global.v4.f32"``."""
        return self.view.opcode

    @property
    def base(self) -> str:
        """The opcode before its first dot, e.g. ``"ld"``."""
        return self.view.base

    @property
    def modifiers(self) -> tuple[str, ...]:
        """The dotted modifiers without dots, e.g. ``("global", "v4", "f32")``."""
        return self.view.modifiers

    @property
    def operands(self) -> tuple[Any, ...]:
        """The operands as a tuple of `Operand`."""
        # Any to mypy, as before it was typed: the analyses read a name or a value where an
        # operand's kind promises one, which one record type cannot say (`view` has the type)
        return self.view.operands

    @property
    def state_space(self) -> str | None:
        """The state space named by the opcode (``"shared::cta"``, ``"global"``…)."""
        return self.view.state_space

    @property
    def labels(self) -> list["Label"]:
        """The labels that directly precede this instruction in its scope."""
        items, index = self._siblings()
        found: list[Label] = []
        for item in reversed(items[:index]):
            if isinstance(item, Label):
                found.append(item)
            elif not (isinstance(item, Directive) and item.name in (".loc", ".pragma")):
                break
        return found[::-1]


class Directive(Node):
    """A directive: ``.version``, ``.reg``, a variable, ``.loc``, a ``.section`` block…

    >>> from ptxkit import parse_statement
    >>> reg = parse_statement(".reg .b32 %r<4>;")
    >>> reg.name, reg.arguments, reg.declaration.registers()
    ('.reg', '.b32 %r<4>', ['%r0', '%r1', '%r2', '%r3'])
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """The leading directive word, e.g. ``".reg"``; for variables the first word."""
        match = _WORD.match(self.text)
        return match.group() if match else self.text

    @property
    def arguments(self) -> str:
        """The text after the directive name (without a final ``;``)."""
        rest = self.text[len(self.name) :]
        return rest[:-1].strip() if rest.endswith(";") else rest.strip()

    @property
    def declaration(self) -> Declaration | None:
        """The `Declaration` of a ``.reg`` or variable directive, or None."""
        return parse_declaration(self)


class Label(Node):
    """A label ``name:``; it names the position of the statement after it.

    >>> from ptxkit import parse
    >>> body = parse(".visible .entry k()\\n{\\nLOOP:\\n\\tbra LOOP;\\n}\\n").functions[0].body
    >>> label = body.resolve_label("LOOP")
    >>> label.name, label.line, body.items[1].labels == [label]
    ('LOOP', 3, True)
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """The label's identifier."""
        return self.text[:-1].rstrip()


class Block(Node):
    """A ``{ … }`` scope: a function body or a nested scope inside one.

    >>> from ptxkit import parse
    >>> body = parse(".visible .entry k()\\n{\\n\\t{\\n\\t\\tret;\\n\\t}\\n}\\n").functions[0].body
    >>> [type(node).__name__ for node in body.walk()]
    ['Block', 'Instruction']
    """

    __slots__ = ("_items", "_lazy", "tail", "_labels")
    is_container = True

    def __init__(self, prefix: str, text: str = "{", offset: int | None = None, parent: Node | None = None):
        Node.__init__(self, prefix, text, offset, parent)
        self._items: list[Node] | None = []
        self._lazy: list[Segment] | None = None  # unscanned runs of statements, see `ptxkit.parser`
        self.tail = ""  # trivia before the closing brace
        self._labels: dict[str, Label] | None = None

    items = property(lambda self: _items_of(self), doc="The statements and nested scopes, in order.")

    @property
    def closing(self) -> str:
        return self.tail + "}"

    @property
    def label_map(self) -> dict[str, Label]:
        """Labels declared directly in this scope, by name."""
        if self._labels is None:
            self._labels = {item.name: item for item in self.items if isinstance(item, Label)}
        return self._labels

    def resolve_label(self, name: str) -> Label | None:
        """Find a label from this scope outwards (innermost scope wins)."""
        scope: Node | None = self
        while isinstance(scope, Block):
            label = scope.label_map.get(name)
            if label is not None:
                return label
            scope = scope.parent
        return None

    def walk(self) -> Iterator[Node]:
        """Every node inside, depth first in source order (not the block itself)."""
        stack = [iter(self.items)]
        while stack:
            for node in stack[-1]:
                yield node
                if isinstance(node, Block):
                    stack.append(iter(node.items))
                    break
            else:
                stack.pop()


class Function(Node):
    """An ``.entry`` or ``.func``: its header text and its body (None for a declaration).

    >>> from ptxkit import parse
    >>> m = parse(".extern .func f();\\n.visible .entry k()\\n{\\n\\tcall f;\\n\\tret;\\n}\\n")
    >>> [(f.name, f.kind, f.is_declaration) for f in m.functions]
    [('f', 'func', True), ('k', 'entry', False)]
    >>> [inst.opcode for inst in m.function("k").instructions()]
    ['call', 'ret']
    """

    __slots__ = ("body", "__dict__")
    is_container = True
    closing = ""

    def __init__(self, prefix: str, text: str, offset: int | None = None, parent: Node | None = None):
        Node.__init__(self, prefix, text, offset, parent)
        self.body: Block | None = None

    @property
    def items(self) -> list[Node]:
        return [self.body] if self.body is not None else []

    @cached_property
    def signature(self) -> Signature:
        """The parsed `Signature` of the header (name, kind, linkage, parameters…)."""
        return parse_signature(self)

    @property
    def name(self) -> str:
        """The function's name."""
        return self.signature.name

    @property
    def kind(self) -> str:
        """``"entry"`` or ``"func"``."""
        return self.signature.kind

    @property
    def is_declaration(self) -> bool:
        """True for a prototype without a body (``.extern .func f(...);``)."""
        return self.body is None

    def walk(self) -> Iterator[Node]:
        """Every node of the body, depth first in source order."""
        return self.body.walk() if self.body is not None else iter(())

    def instructions(self) -> Iterator[Instruction]:
        """The instructions of the body in source order."""
        return (node for node in self.walk() if type(node) is Instruction)


class Module(Node):
    """A parsed PTX file: its top-level items and the trivia at its end.

    >>> from ptxkit import parse
    >>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n", "k.ptx")
    >>> m.version, m.targets, m.address_size, m.filename
    ((8, 0), ['sm_90a'], 64, 'k.ptx')
    """

    __slots__ = ("_items", "_lazy", "tail", "source")
    is_container = True

    def __init__(self, source: Source):
        Node.__init__(self, "", "", 0, None)
        self._items: list[Node] | None = []
        self._lazy: list[Segment] | None = None
        self.tail = ""
        self.source = source

    items = property(lambda self: _items_of(self), doc="The top-level items, in order.")

    @property
    def closing(self) -> str:
        return self.tail

    @property
    def filename(self) -> str:
        return self.source.filename

    @property
    def functions(self) -> list[Function]:
        """All ``.entry``/``.func`` definitions and declarations, in order."""
        return [item for item in self.items if isinstance(item, Function)]

    def function(self, name: str) -> Function:  # type: ignore[override]  # in no function, a module finds one by name
        """The function definition called `name` (``KeyError`` listing names if absent)."""
        candidates = [f for f in self.functions if f.name == name]
        defined = [f for f in candidates if not f.is_declaration]
        if defined or candidates:
            return (defined or candidates)[0]
        names = ", ".join(f.name for f in self.functions) or "none"
        raise KeyError(f"no function {name!r} in module (functions: {names})")

    def directives(self, name: str) -> list[Directive]:
        """Top-level directives with this name, e.g. ``".target"``."""
        return [i for i in self.items if isinstance(i, Directive) and i.name == name]

    @property
    def version(self) -> tuple[int, int] | None:
        """The ``.version`` as (major, minor), or None."""
        found = self.directives(".version")
        match = found and re.fullmatch(r"(\d+)\.(\d+)", found[0].arguments)
        return (int(match.group(1)), int(match.group(2))) if match else None

    @property
    def targets(self) -> list[str]:
        """The ``.target`` entries, e.g. ``["sm_90a"]`` or ``["sm_80", "debug"]``."""
        found = self.directives(".target")
        return [t.strip() for t in found[0].arguments.split(",")] if found else []

    @property
    def address_size(self) -> int | None:
        """The ``.address_size`` (32 or 64), or None when absent."""
        found = self.directives(".address_size")
        return int(found[0].arguments) if found and found[0].arguments.isdigit() else None

    def walk(self) -> Iterator[Node]:
        """Every node, depth first in source order (functions, then their bodies)."""
        for item in self.items:
            yield item
            if isinstance(item, Function):
                if item.body is not None:
                    yield item.body
                    yield from item.body.walk()

    def instructions(self) -> Iterator[Instruction]:
        """Every instruction of every function body, in source order."""
        return (node for node in self.walk() if type(node) is Instruction)

    def release(self) -> None:
        """Detach every node from its parent, for a caller done with the module.

        A tree whose children point back at their parents is full of reference cycles,
        which only Python's cyclic collector frees, at a full collection of the process's
        heap; released, the tree goes by reference counting as soon as nothing holds the
        module. It still prints as before (`str`), but its nodes no longer know their
        module, position or scope, and cannot be edited. The command line releases each
        file's module when it is done with it, and the Triton hook each kernel's, so a long
        batch or a training job's compiler keeps no trees for the collector. Unscanned
        statement runs stay unscanned: nothing is built to be released.

        >>> from ptxkit import parse
        >>> m = parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n\\tret;\\n}\\n")
        >>> ret = next(m.instructions()); text = str(m); m.release()
        >>> ret.position, ret.module, str(m) == text
        (None, None, True)
        """
        stack: list[Node] = [self]
        while stack:
            container = stack.pop()
            if isinstance(container, Block):
                container._labels = None
            for node in _segments(container):  # type: ignore[arg-type]  # every node on the stack is a container
                if isinstance(node, tuple):  # an unscanned run of statements: no nodes yet
                    continue
                node.parent = None
                if node.is_container:
                    stack.append(node)

    def check(self) -> "Module":
        """Parse the structure of every statement now; returns the module.

        Raises `PtxSyntaxError` at the first malformed function header, declaration or
        instruction (these are otherwise parsed on first use).
        """
        for node in self.walk():
            if isinstance(node, Instruction):
                node.view
            elif isinstance(node, Function):
                node.signature
            elif isinstance(node, Directive):
                node.declaration
        return self

    def __str__(self) -> str:
        out: list[str] = []
        _render_children(self, out)
        return "".join(out)


_WORD = compile_pattern(r"\.?[A-Za-z_$%][\w$:]*")


def parse_statement(text: str) -> Node:
    """Parse one statement (instruction, directive or label) for insertion into a tree.

    >>> parse_statement("fence.proxy.async.shared::cta;").opcode
    'fence.proxy.async.shared::cta'
    """
    source = Source(text, "<statement>")
    match = PIECE.fullmatch(text)
    if match is None or match.lastindex not in (LINE, LABEL, STATEMENT) or match.group(1):
        raise source.error(0, "expected exactly one instruction, directive or label")
    if match.lastindex == LABEL:
        return Label("", text)
    if text[0] == ".":
        return Directive("", text)
    if text[0] not in INSTRUCTION_START:
        raise source.error(0, "expected an instruction, label or directive")
    return Instruction("", text)


if TYPE_CHECKING:
    #: A container's child before its statements are scanned: a node (a function, a
    #: nested scope) or a run of statements, ``(offset, text)``.
    Segment = Node | tuple[int, str]
    #: A node with children, what `Node.is_container` says.
    Container = Block | Function | Module


def _scan_runs(container: Block | Module, segments: list[Segment]) -> list[Node]:
    """Turn a container's lazy segments into nodes (runs were validated by `_build`)."""
    items: list[Node] = []
    append = items.append
    findall = PIECE.findall  # a run was validated when scanned: its pieces cover it exactly
    for segment in segments:
        if not isinstance(segment, tuple):
            append(segment)
            continue
        offset, text = segment
        for prefix, line, section, label, statement in findall(text):
            offset += len(prefix)
            if statement:
                node_type = Instruction if statement[0] != "." else Directive
                append(node_type(prefix, statement, offset, container))
                offset += len(statement)
            elif label:
                append(Label(prefix, label, offset, container))
                offset += len(label)
            else:
                piece = line or section
                append(Directive(prefix, piece, offset, container))
                offset += len(piece)
    return items


def _items_of(container: Block | Module) -> list[Node]:
    """A container's items, scanning its statement runs into nodes on first use."""
    items = container._items
    if items is None:
        segments = container._lazy
        assert segments is not None  # unscanned: `ptxkit.parser` left its segments
        items = container._items = _scan_runs(container, segments)
        container._lazy = None
    return items


def _render_children(container: Container, out: list[str]) -> None:
    """Append the text of a container's children and its closing to `out`.

    Unscanned statement runs are copied as they are: ``(offset, text)`` tuples.
    """
    append = out.append
    stack = [(_segments(container), container.closing)]
    while stack:
        segments, closing = stack[-1]
        for node in segments:
            if isinstance(node, tuple):
                append(node[1])
                continue
            append(node.prefix)
            append(node.text)
            if node.is_container:
                assert isinstance(node, (Block, Function))  # the classes that say is_container, below a module
                stack.append((_segments(node), node.closing))
                break
        else:
            append(closing)
            stack.pop()


def _segments(container: Container) -> Iterator[Segment]:
    """A container's children in order: its unscanned segments while it has them."""
    lazy: list[Segment] | None = getattr(container, "_lazy", None)  # a function has none
    return iter(lazy if lazy is not None else container.items)


def _as_statement(statement: "str | Node") -> Node:
    if isinstance(statement, Node):
        if statement.parent is not None:
            raise ValueError(f"{statement!r} already belongs to a tree")
        return statement
    return parse_statement(statement)


def _split_last_line(trivia: str) -> tuple[str, str, str]:
    """Split trivia into (before the last newline, the newline, indentation after it)."""
    k = trivia.rfind("\n")
    if k < 0:
        return "", "", ""
    start = k - 1 if k > 0 and trivia[k - 1] == "\r" else k
    line = trivia[k + 1 :]
    indent = line[: len(line) - len(line.lstrip(" \t"))]
    return trivia[:start], trivia[start : k + 1], indent


def _following_trivia(parent: Node | None, items: list[Node], index: int) -> tuple[object, str]:
    """Where the trivia after ``items[index]`` lives: next sibling's prefix or the tail."""
    if index + 1 < len(items):
        return items[index + 1], "prefix"
    return parent, "tail"


def _indentation_of(node: Node, items: list[Node], index: int) -> str:
    """The indentation of the line `node` starts on (searching back through siblings)."""
    for item in reversed(items[: index + 1]):
        _, newline, indent = _split_last_line(item.prefix)
        if newline:
            return indent
    return "\t" if isinstance(node.parent, Block) else ""
