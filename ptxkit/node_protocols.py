"""ptxkit.node_protocols: what the parsers of a node's structure (`ptxkit.instruction`,
`ptxkit.declarations`) read of the node they are handed, for the type checker only.

Those modules sit below `ptxkit.syntax`, which imports them, so they do not name its
classes, not even under ``TYPE_CHECKING`` (that would close an import cycle,
tests/test_startup.py); every `ptxkit.syntax.Node` has what these protocols list.
Nothing imports this module at run time, as with the protocols of `cfg/`
(docs/architecture.md §5).

>>> from ptxkit.node_protocols import Located, Viewed
>>> Located.__name__, Viewed.__name__
('Located', 'Viewed')
"""

from __future__ import annotations

from typing import Protocol, TypeVar

from .errors import PtxSyntaxError

#: What a node's structure parses into (an `Instruction`'s is an `InstructionView`).
View = TypeVar("View", covariant=True)


class Located(Protocol):
    """A node's text, and a `PtxSyntaxError` at a character of it."""

    @property
    def text(self) -> str: ...
    def error(self, message: str, at: int = 0) -> PtxSyntaxError: ...


class Viewed(Located, Protocol[View]):
    """A node whose structure is parsed on first use and kept (an `Instruction`'s `view`)."""

    @property
    def view(self) -> View: ...
