"""``ptxkit cache info`` and ``ptxkit cache clear``: the cubin cache of ``ptxkit
assemble`` and ``ptxkit.assemble`` (`ptxkit.cubin_cache`).

``info`` prints where it is, how many entries it holds, their size and the cap;
``clear`` removes every entry (nothing else in the folder). ``$PTXKIT_CACHE_DIR`` moves
the cache (``0`` turns it off) and ``$PTXKIT_CACHE_MAX`` sets the cap.
"""

from __future__ import annotations

import os
import sys


def add_arguments(parser) -> None:
    from .assemble_cmd import CACHE_ENVIRONMENT
    from .common import help_epilog

    epilog = help_epilog({0: "done", 2: "PTXKIT_CACHE_MAX is not a size, a file could not be removed, or bad usage"},
                         CACHE_ENVIRONMENT)
    parser.epilog = epilog
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    actions.add_parser("info", help="print the cache's folder, entries, size and cap", epilog=epilog,
                       description="Print the cubin cache's folder, number of entries, size and cap.",
                       formatter_class=parser.formatter_class)
    actions.add_parser("clear", help="remove every cached cubin", epilog=epilog,
                       description="Remove every cached cubin (the folder's other files are left alone).",
                       formatter_class=parser.formatter_class)


def run(args) -> int:
    from ptxkit.cubin_cache import CubinCache, cache_directory, cache_limit

    from .common import UsageError

    directory = cache_directory()
    if directory is None:
        print("the cubin cache is off (PTXKIT_CACHE_DIR=0)")
        return 0
    try:
        limit = cache_limit()
    except ValueError as err:
        raise UsageError(str(err)) from None
    store = CubinCache(directory, limit)
    if args.action == "clear":
        count, size = store.clear()
        left = store.scan()
        print(f"removed {count} {'entry' if count == 1 else 'entries'} ({human_size(size)}) from {directory}")
        if left:
            print(f"ptxkit: error: {len(left)} files could not be removed from {directory}", file=sys.stderr)
            return 2
        return 0
    entries = [entry for entry in store.scan() if entry.path.endswith(".entry")]
    size = sum(entry.size for entry in entries)
    if limit is None:
        cap = "none (PTXKIT_CACHE_MAX=0)"
    elif os.environ.get("PTXKIT_CACHE_MAX", "").strip():
        cap = f"{human_size(limit)} (PTXKIT_CACHE_MAX)"
    else:
        cap = f"{human_size(limit)} (the default; PTXKIT_CACHE_MAX sets it)"
    print(f"path:    {directory}\nentries: {len(entries)}\nsize:    {human_size(size)}\ncap:     {cap}")
    return 0


def human_size(size: int) -> str:
    """``1.5 MiB (1572864 bytes)``, ``0 bytes``.

    >>> human_size(1572864), human_size(0), human_size(1 << 30)
    ('1.5 MiB (1572864 bytes)', '0 bytes', '1.0 GiB (1073741824 bytes)')
    """
    if size < 1024:
        return f"{size} byte{'s' * (size != 1)}"
    value, unit = float(size), "bytes"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024:
            break
    return f"{value:.1f} {unit} ({size} bytes)"
