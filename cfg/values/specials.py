"""Special registers (PTX ISA §10): the ranges they take, narrowed by what a kernel
declares of its block and cluster shape, and which of them keep one value for a run.

>>> is_fixed_special("12:%tid.x"), is_fixed_special("%smid")
(True, False)
"""

from __future__ import annotations

import math

from ptxkit._records import TYPE_CHECKING
from ptxkit.isa import FIXED_SPECIALS, SPECIAL_RANGES

if TYPE_CHECKING:
    from ptxkit.syntax import Function

#: CTAs per cluster without the non-portable opt-in (CUDA programming guide, thread
#: block clusters: 8 is the portable maximum, 16 needs cudaFuncAttributeNonPortableClusterSizeAllowed)
PORTABLE_CLUSTER = 8


def special_ranges(function: Function, max_cluster: int = PORTABLE_CLUSTER) -> dict[str, tuple[int, int]]:
    """`SPECIAL_RANGES` narrowed by the kernel's ``.maxntid``/``.reqntid`` (its threads
    per block: ``%tid.x < N`` when it declares ``N, 1, 1``) and by its cluster size:
    ``.reqnctapercluster``/``.maxclusterrank`` when it declares one, else `max_cluster`
    CTAs (docs/fence.md §8).

    >>> import ptxkit
    >>> k = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...                  ".visible .entry k() .maxntid 384, 1, 1\\n{\\n\\tret;\\n}\\n").function("k")
    >>> special_ranges(k)["%tid.x"], special_ranges(k)["%tid.y"], special_ranges(k)["%cluster_ctarank"]
    ((0, 383), (0, 0), (0, 7))
    """
    ranges = dict(SPECIAL_RANGES)
    cluster = max_cluster
    for name, args in function.signature.directives:
        if name not in (".maxntid", ".reqntid", ".reqnctapercluster", ".maxclusterrank"):
            continue
        try:
            dims = [int(a.strip()) for a in args.split(",")]
        except ValueError:
            continue
        if name in (".reqnctapercluster", ".maxclusterrank"):
            cluster = math.prod(dims)
            continue
        if len(dims) == 1:
            dims = dims * 3  # a total: no dimension is larger
        for axis, size in zip("xyz", dims):
            if size >= 1:
                ranges[f"%tid.{axis}"] = (0, min(size - 1, ranges[f"%tid.{axis}"][1]))
                ranges[f"%ntid.{axis}"] = (1, min(size, ranges[f"%ntid.{axis}"][1]))
    if 1 <= cluster <= 16:
        ranges["%cluster_ctarank"] = (0, cluster - 1)
        ranges["%cluster_nctarank"] = (1, cluster)
        for axis in "xyz":
            ranges[f"%cluster_ctaid.{axis}"] = (0, cluster - 1)
            ranges[f"%cluster_nctaid.{axis}"] = (1, cluster)
    return ranges


def one_dimensional(function: Function) -> bool:
    """True when the kernel declares its blocks one-dimensional (``.maxntid N, 1, 1``; a
    lone ``N`` bounds the number of threads, not the shape, as `special_ranges` reads it).

    >>> import ptxkit
    >>> k = ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".visible .entry k() .maxntid 256, 1, 1\\n{\\n\\tret;\\n}\\n").function("k")
    >>> one_dimensional(k), one_dimensional(ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...     ".visible .entry k() .maxntid 256\\n{\\n\\tret;\\n}\\n").function("k"))
    (True, False)
    """
    for name, args in function.signature.directives:
        if name in (".maxntid", ".reqntid"):
            dims = [a.strip() for a in args.split(",")]
            return len(dims) > 1 and all(d == "1" for d in dims[1:])
    return False


def is_fixed_special(key: str) -> bool:
    """True for the key of a `FIXED_SPECIALS` register (in any inlined copy: ``"12:%tid.x"``;
    an example in the module's docstring)."""
    return key.rpartition(":")[2] in FIXED_SPECIALS
