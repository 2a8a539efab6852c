"""Facts about the PTX ISA that the rest of ptxkit relies on, kept in one place.

>>> is_special_register("%tid.x"), is_special_register("%r1")
(True, False)
>>> STATE_SPACES >= {"shared::cta", "global"}
True
"""

from __future__ import annotations

import re

#: State-space names as they appear as opcode modifiers (without the dot).
STATE_SPACES = frozenset(
    {
        "global",
        "shared",
        "shared::cta",
        "shared::cluster",
        "local",
        "param",
        "param::entry",
        "param::func",
        "const",
        "tex",
    }
)

#: Linkage directives that may precede a function or variable.
LINKAGES = (".visible", ".extern", ".weak", ".common")

#: Opcodes (before the first dot) that end a basic block.
BLOCK_TERMINATORS = frozenset({"bra", "brx", "ret", "exit", "trap"})

#: Opcodes after which control never falls through (unless guarded).
NO_FALLTHROUGH = frozenset({"ret", "exit", "trap"})

#: A regular expression for the special registers (``%tid.x``, ``%clock64``…).
SPECIAL_REGISTER_PATTERN = (
    r"%(?:tid|ntid|laneid|warpid|nwarpid|ctaid|nctaid|smid|nsmid|gridid|is_explicit_cluster"
    r"|clusterid|nclusterid|cluster_ctaid|cluster_nctaid|cluster_ctarank|cluster_nctarank"
    r"|lanemask_(?:eq|le|lt|ge|gt)|clock|clock_hi|clock64|pm[0-7](?:_64)?|envreg\d+"
    r"|globaltimer(?:_lo|_hi)?|reserved_smem_offset_(?:begin|end|cap|\d+)|total_smem_size"
    r"|aggr_smem_size|dynamic_smem_size|current_graph_exec)(?:\.[xyz])?(?![\w$])"
)
_SPECIAL_REGISTER = re.compile(SPECIAL_REGISTER_PATTERN)


def is_special_register(name: str) -> bool:
    """True for a PTX special register such as ``%tid.x`` or ``%cluster_ctarank``.

    >>> is_special_register("%clock64")
    True
    """
    return _SPECIAL_REGISTER.fullmatch(name) is not None


def parse_target(target: str) -> tuple[int, str] | None:
    """Split an ``sm_XY[a|f]`` target into (XY, suffix); None for other entries.

    >>> parse_target("sm_90a"), parse_target("sm_100f"), parse_target("debug")
    ((90, 'a'), (100, 'f'), None)
    """
    match = re.fullmatch(r"sm_(\d+)([af]?)", target)
    return (int(match.group(1)), match.group(2)) if match else None
