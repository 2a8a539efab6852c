"""What the fence pass can be asked, and where it can run.

The option choices are plain names, so the command line can offer them without loading
the analysis; `check_target` says whether a module may be fenced at all. Both are all a
``ptxkit fence`` run over PTX with no async-proxy operation needs (`ptxkit.isa.may_need_fence`).

>>> PLACEMENTS, FENCE_SIDES, FENCE_VARIANTS, EXTERN_POLICIES
(('hoist', 'inline'), ('issuer', 'writer'), ('shared::cta', 'shared::cluster', 'full'), ('none', 'clobber', 'strict'))
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING
from ptxkit.isa import parse_target

if TYPE_CHECKING:
    from ptxkit.syntax import Module

#: hoist: one fence before a loop or branch where that replaces fences inside; inline: before each op.
PLACEMENTS = ("hoist", "inline")
#: Where a fence for an access handed between threads goes.
FENCE_SIDES = ("issuer", "writer")
#: The fence variants a user may force (full: ``fence.proxy.async``).
FENCE_VARIANTS = ("shared::cta", "shared::cluster", "full")
#: What a call to an extern or indirect function may do.
EXTERN_POLICIES = ("none", "clobber", "strict")


def check_target(module: Module) -> str | None:
    """Why the pass must leave `module` alone, or None when it may run.

    >>> import ptxkit
    >>> check_target(ptxkit.parse(".version 8.0\\n.target sm_80\\n.address_size 64\\n"))
    'target sm_80 is older than sm_90 (no async proxy)'
    """
    targets = [(name, parse_target(name)) for name in module.targets]
    sm = next(((name, parsed) for name, parsed in targets if parsed is not None), None)
    if sm is None:
        return "no sm_XY .target"
    if sm[1][0] < 90:
        return f"target {sm[0]} is older than sm_90 (no async proxy)"
    version = module.version
    if version is None or version < (8, 0):
        shown = ".".join(map(str, version)) if version else "missing"
        return f".version {shown} is older than 8.0 (fence.proxy.async needs PTX ISA 8.0)"
    return None
