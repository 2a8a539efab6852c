"""Pause Python's cyclic garbage collector while building many objects at once.

Building the nodes of a large module allocates hundreds of thousands of objects that
all live on (the tree is full of parent/child cycles). With the collector running,
every young-generation collection walks them again, and re-enabling it afterwards
would make the next collection walk all of them at once. So while paused nothing is
collected, and on exit the objects built meanwhile are moved straight to the oldest
generation (``gc.freeze()`` then ``gc.unfreeze()``: two list splices, no scan), where
only the collector's rare full collections look at them.

>>> import gc
>>> with paused_gc():
...     gc.isenabled()
False
"""

from __future__ import annotations

import gc
from contextlib import contextmanager


@contextmanager
def paused_gc():
    """Disable the cyclic collector inside the block; age what was built, then restore.

    >>> import gc
    >>> with paused_gc():
    ...     inside = gc.isenabled()
    >>> inside, gc.isenabled()
    (False, True)
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
