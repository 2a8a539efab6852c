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
    """`SPECIAL_RANGES` narrowed by the kernel's ``.maxntid``/``.reqntid`` (its block's
    extents, `block_shape`: ``%tid.x < N`` and ``%tid.y`` 0 when it declares ``N, 1, 1``)
    and by its cluster size: ``.reqnctapercluster``/``.maxclusterrank`` when it declares
    one, else `max_cluster` CTAs (docs/fence.md §8).

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
        dims = _numbers(args)
        if dims is None:
            continue
        if name in (".reqnctapercluster", ".maxclusterrank"):
            cluster = math.prod(dims)
            continue
        for axis, size in zip("xyz", block_shape(name, dims)):
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
    """True when the kernel declares its blocks one-dimensional (``.maxntid N, 1, 1`` or
    ``N, 1``, ``.reqntid N`` too: `block_shape`).

    >>> import ptxkit
    >>> def k(directive):
    ...     return ptxkit.parse(".version 8.0\\n.target sm_90a\\n.address_size 64\\n"
    ...                         f".visible .entry k() {directive}\\n{{\\n\\tret;\\n}}\\n").function("k")
    >>> [one_dimensional(k(d)) for d in (".maxntid 256, 1, 1", ".reqntid 256", ".maxntid 256", ".maxntid 128, 2")]
    [True, True, False, False]
    """
    for name, args in function.signature.directives:
        if name in (".maxntid", ".reqntid"):
            dims = _numbers(args)
            return dims is not None and block_shape(name, dims)[1:] == [1, 1]
    return False


def _numbers(args: str) -> list[int] | None:
    """A directive's comma-separated numbers (``"128, 3"``), or None where one is not."""
    try:
        return [int(a.strip()) for a in args.split(",")]
    except ValueError:
        return None


def block_shape(directive: str, dims: list[int]) -> list[int]:
    """The largest x, y and z extents a ``.maxntid``/``.reqntid`` of `dims` declares
    (docs/fence.md §8): the dimensions it leaves out are 1 (the PTX ISA gives the extent
    of each dimension of a 1D, 2D or 3D CTA; the driver holds a launch of ``.reqntid
    384`` to 384 x 1 x 1), except a lone ``.maxntid N``, read as a bound on the number of
    threads in any shape.

    >>> block_shape(".reqntid", [384]), block_shape(".maxntid", [128, 3]), block_shape(".maxntid", [384])
    ([384, 1, 1], [128, 3, 1], [384, 384, 384])
    """
    if directive == ".maxntid" and len(dims) == 1:
        return dims * 3
    return dims + [1] * (3 - len(dims))


def is_fixed_special(key: str) -> bool:
    """True for the key of a `FIXED_SPECIALS` register (in any inlined copy: ``"12:%tid.x"``;
    an example in the module's docstring)."""
    return key.rpartition(":")[2] in FIXED_SPECIALS
