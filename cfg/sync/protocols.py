"""ptxkit.cfg.sync.protocols: what the synchronisation analyses read of the proxy
analysis's facts and of the register answers, and the events narrowed to one kind of
barrier, for the type checker only.

Nothing imports this module at run time (`ptxkit.cfg.sync.events`, `once`, `armed` and
`phases` import these names under ``TYPE_CHECKING``), so it costs no start-up time, and
mypyc, which cannot compile a class declared inside ``if TYPE_CHECKING:``, never meets
one (docs/architecture.md §5).

>>> from ptxkit.cfg.sync.protocols import Fact
>>> Fact.__name__
'Fact'
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol

from ptxkit.cfg.sync.events import Event
from ptxkit.isa import SyncObject

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ptxkit.cfg.sync.events import Query
    from ptxkit.cfg.sync.locations import Location
    from ptxkit.cfg.values.values import Value


class Fact(Protocol):
    """What `ptxkit.cfg.sync.armed` and `ptxkit.cfg.sync.once` read of a fact of the
    proxy analysis (one pending-access class): its bit, its location, and the
    ``(block, event)`` accesses that make it."""

    @property
    def index(self) -> int: ...
    @property
    def location(self) -> Location: ...
    @property
    def origins(self) -> Sequence[tuple[int, Event]]: ...


class ByThread(Protocol):
    """`RegisterAnswers.by_thread`: a query's value for the threads whose ``%tid.x`` (or
    `register`) lies in ``[low, high]``, or None where it does not depend on it."""

    def __call__(self, query: Query, low: int, high: int, register: str = ..., /) -> Value | None: ...


class Pinned(Protocol):
    """`RegisterAnswers.pinned`: a query's value where each register ``key`` held
    ``entry_values[(key, block)]`` on the last entry into join `block`, or None where
    none of those joins feeds it."""

    def __call__(self, query: Query, entry_values: Mapping[tuple[str, int], int], /) -> Value | None: ...


class NamedBarrierOp(Event):
    """An `Event` on a named barrier (`on_a_named_barrier`): `sync` holds the ids it may be on."""

    sync: tuple[Literal[SyncObject.NAMED_BARRIER], frozenset[int] | None]


class MbarrierOp(Event):
    """An `Event` on an mbarrier (`on_an_mbarrier`): `sync` holds the mbarrier's location."""

    sync: tuple[Literal[SyncObject.MBARRIER], Location]
