"""The command line's policy for Python's cyclic collector, for a process ptxkit runs.

A library call (parsing, a flow graph, the fence pass, a rewrite) leaves the collector
as its caller set it, neither paused nor tuned: the fence pass makes no reference
cycle, and a parsed tree, whose nodes point at their parents, goes by reference counting
once `Module.release` detaches them (docs/architecture.md §4). A ``ptxkit`` or
``ptxkit-ptxas`` process is ptxkit's own: there the collector runs less often
(`collect_less_often`) and is not asked to walk everything at exit
(`exit_keeping_objects`).
"""

from __future__ import annotations

import gc
import sys


#: The youngest generation's threshold the command line sets (CPython's default: 700).
COMMAND_LINE_THRESHOLD = 1_000_000


def collect_less_often() -> None:
    """The command line's collector policy, for a process ptxkit runs (``ptxkit``,
    ``ptxkit-ptxas`` and their workers), never inside a library call: collect the
    youngest generation only after `COMMAND_LINE_THRESHOLD` net allocations of
    containers instead of CPython's 700. The fence pass makes no reference cycle
    (`tests/test_fence.py`, both trees) and a released module goes by reference counting,
    so a collection during its work walks what it keeps and frees nothing: once per 10,000
    allocations (the threshold this set before), a whole ``ptxkit fence -o`` process of
    the compiled tree spent 2-8% of its time there on the eleven README builds, and a
    batch of 41 CUTLASS builds in one process 7-12% (19.0-19.9 s against 17.6-17.8 s,
    the same peak memory; measured here). The threshold still bounds what cyclic garbage,
    from a user's rewrite pass for instance, can pile up before it is collected. The
    other thresholds stay as they are.

    >>> import gc
    >>> before = gc.get_threshold()
    >>> collect_less_often(); gc.get_threshold()[0] >= COMMAND_LINE_THRESHOLD
    True
    >>> gc.set_threshold(*before)
    """
    first, middle, oldest = gc.get_threshold()
    gc.set_threshold(max(first, COMMAND_LINE_THRESHOLD), middle, oldest)


def exit_keeping_objects(status: int) -> None:
    """End a command-line process with `status` without the interpreter's last garbage
    collection over everything the command built (a parsed module and its analysis:
    about a quarter of a ``ptxkit fence --check`` process on a 1.5 MB kernel, and 30 ms
    on a 30 KB one, measured here). They are frozen first (``gc.freeze``), so the final
    collection skips them; the process's memory goes back to the system as it ends.
    Flushing and ``atexit`` handlers run as in any exit.

    >>> import pytest
    >>> with pytest.raises(SystemExit) as ended:
    ...     exit_keeping_objects(3)
    >>> ended.value.code, gc.get_freeze_count() > 0
    (3, True)
    >>> gc.unfreeze()
    """
    gc.freeze()
    sys.exit(status)
