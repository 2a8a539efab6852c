"""Which source line each statement of a function stands under: the ``.loc`` in force.

A ``.loc FILE LINE COLUMN`` directive attributes the instructions after it, in text
order, to a source position until the next ``.loc`` (PTX ISA, "Debugging
Directives"); ``.file INDEX "name"`` at module level names the files. Passes read
this to place code by source line and to restore the attribution after code they
insert with a ``.loc`` of its own; the report maps local-memory accesses to source.

>>> import ptxkit
>>> m = ptxkit.parse('.version 8.0\\n.target sm_90a\\n.address_size 64\\n.file 1 "k.cu"\\n'
...     '.visible .entry k()\\n{\\n.loc 1 7 3\\n\\tbar.sync 0;\\n\\tret;\\n}\\n')
>>> table = LocTable(m.function("k"))
>>> ret = m.function("k").body.items[-1]
>>> table.loc(ret), table.files[1], table.describe(table.loc(ret))
(Loc(file=1, line=7, column=3), 'k.cu', 'k.cu:7:3')
"""

from __future__ import annotations

import re

from ptxkit._records import Record
from ptxkit.syntax import Directive, Instruction, Label

_LOC = re.compile(r"\s*(\d+)\s+(\d+)(?:\s+(\d+))?")
_FILE = re.compile(r'\s*(\d+)\s+"((?:[^"\\]|\\.)*)"')


class Loc(Record):
    """A source position: `file` index (see `files`), 1-based `line`, `column` (0: none).

    >>> str(Loc(1, 12, 5))
    '1:12:5'
    """

    file: int
    line: int
    column: int = 0

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


def module_files(module) -> dict[int, str]:
    """The module's ``.file`` table: index -> file name.

    >>> import ptxkit
    >>> module_files(ptxkit.parse('.version 8.0\\n.target sm_90a\\n.address_size 64\\n.file 2 "a/b.py", 0, 0\\n'))
    {2: 'a/b.py'}
    """
    files = {}
    for directive in module.directives(".file"):
        match = _FILE.match(directive.arguments)
        if match:
            files[int(match.group(1))] = match.group(2)
    return files


def parse_loc(directive) -> Loc | None:
    """The position a ``.loc`` directive names (None for other directives).

    >>> import ptxkit
    >>> parse_loc(ptxkit.parse_statement(".loc 1 2 52, function_name $L__info_string0, inlined_at 1 5 37"))
    Loc(file=1, line=2, column=52)
    """
    if type(directive) is not Directive or directive.name != ".loc":
        return None
    match = _LOC.match(directive.arguments)
    if match is None:
        return None
    return Loc(int(match.group(1)), int(match.group(2)), int(match.group(3) or 0))


class LocTable:
    """The ``.loc`` in force at each instruction and label of one function.

    `directive(node)` is the ``.loc`` directive itself (to copy it verbatim), `loc(node)`
    its position; both None where no ``.loc`` came before.
    """

    def __init__(self, function):
        self.function = function
        module = function.module
        self.files = module_files(module) if module is not None else {}
        self._in_force: dict[int, Directive] = {}
        current = None
        for node in function.walk():
            kind = type(node)
            if kind is Directive:
                if node.name == ".loc":
                    current = node
            elif current is not None and (kind is Instruction or kind is Label):
                self._in_force[id(node)] = current

    def directive(self, node) -> Directive | None:
        """The ``.loc`` directive in force at `node` (an instruction or label)."""
        return self._in_force.get(id(node))

    def loc(self, node) -> Loc | None:
        """The source position of `node` (an instruction or label), or None."""
        directive = self._in_force.get(id(node))
        return parse_loc(directive) if directive is not None else None

    def describe(self, loc: Loc | None) -> str:
        """``file:line:column`` with the file's name, or ``?`` for None."""
        if loc is None:
            return "?"
        name = self.files.get(loc.file, str(loc.file))
        return f"{name}:{loc.line}:{loc.column}" if loc.column else f"{name}:{loc.line}"
