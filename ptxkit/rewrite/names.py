"""Fresh names: registers, labels and parameters that clash with nothing in a function.

A name is taken when any identifier of the function's text (header, body, nested
``{ }`` scopes, inline-assembly labels, even comments) or of the module's top level
spells it, or when a ``.reg`` range declares it (``.reg .b32 %r<10>;`` declares
``%r0`` … ``%r9``). Fresh names start with ``ptxkit_`` (``%ptxkit_`` for registers,
``$ptxkit_`` for labels), then the hint the caller gives, then ``_1``, ``_2`` … as
needed; every name handed out is taken from then on.

>>> import ptxkit
>>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
...     "\\t.reg .b32 %ptxkit_t<3>;\\n\\t{\\n\\t.reg .b32 %ptxkit_t_1;\\n\\t}\\n$ptxkit_edge:\\n\\tret;\\n}\\n")
>>> names = Names(m.function("k"))
>>> names.register("t"), names.register("t"), names.label("edge"), names.taken("%ptxkit_t2")
('%ptxkit_t_2', '%ptxkit_t_3', '$ptxkit_edge_1', True)
"""

from __future__ import annotations

import re

from ptxkit.syntax import Directive, Function

_WORD = re.compile(r"[%$A-Za-z_][\w$]*")
_RANGE = re.compile(r"(.+?)\s*<\s*(\d+)\s*>")
_HINT = re.compile(r"[A-Za-z0-9_$]*")


class Names:
    """The names taken in one function (and its module's top level), and fresh ones.

    `module_wide` makes the names fresh for the whole module (every function's text
    counts): what a module-level variable needs.
    """

    def __init__(self, function=None, module=None, module_wide: bool = False):
        module = module if module is not None else function.module
        self._words: set[str] = set()
        self._ranges: dict[str, int] = {}  # prefix -> count of a %prefix<count> declaration
        for item in module.items:
            if type(item) is not Function:
                self._add_text(item.code())
            elif module_wide or item is function:
                self._add_text(item.code())
                for node in item.walk():
                    if type(node) is Directive and node.name == ".reg":
                        self._add_ranges(node)
            else:  # another function's body is its own business
                self._words.add(item.name)

    def _add_text(self, text: str) -> None:
        self._words.update(_WORD.findall(text))

    def _add_ranges(self, directive) -> None:
        declaration = directive.declaration
        for name in declaration.names if declaration is not None else ():
            match = _RANGE.fullmatch(name)
            if match:
                prefix = match.group(1)
                self._ranges[prefix] = max(self._ranges.get(prefix, 0), int(match.group(2)))

    def taken(self, name: str) -> bool:
        """True when `name` is spelled in the text or declared by a ``.reg`` range.

        >>> import ptxkit
        >>> m = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n.visible .entry k()\\n{\\n"
        ...     "\\t.reg .b64 %rd<4>;\\n\\tret;\\n}\\n")
        >>> [Names(m.function("k")).taken(name) for name in ("%rd3", "%rd4", "ret", "%rd")]
        [True, False, True, True]
        """
        if name in self._words:
            return True
        for prefix, count in self._ranges.items():
            digits = name[len(prefix):]
            if name.startswith(prefix) and digits.isdigit() and int(digits) < count:
                return True
        return False

    def fresh(self, stem: str) -> str:
        """`stem` if it is free, else ``stem_1``, ``stem_2`` …; the name is taken from now on.

        >>> Names(module=__import__("ptxkit").parse(".version 8.0\\n")).fresh("version")
        'version_1'
        """
        name, number = stem, 0
        while self.taken(name):
            number += 1
            name = f"{stem}_{number}"
        self._words.add(name)
        return name

    def register(self, hint: str = "t") -> str:
        """A fresh register name, ``%ptxkit_<hint>`` (not declared: see `ptxkit.rewrite.plan`)."""
        return self.fresh(f"%ptxkit_{_checked(hint)}")

    def label(self, hint: str = "L") -> str:
        """A fresh label name, ``$ptxkit_<hint>``."""
        return self.fresh(f"$ptxkit_{_checked(hint)}")

    def symbol(self, hint: str) -> str:
        """A fresh parameter or variable name, ``ptxkit_<hint>``."""
        return self.fresh(f"ptxkit_{_checked(hint)}")


def _checked(hint: str) -> str:
    if not _HINT.fullmatch(hint):
        raise ValueError(f"a name hint may hold letters, digits, '_' and '$' only, not {hint!r}")
    return hint
