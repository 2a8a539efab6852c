"""Shared-memory locations and the footprints of async-proxy operations.

A `Location` is a byte range of one memory object in one proxy space; a range with
no region is "anywhere in that space". Two locations may overlap when their spaces
can alias (the ``shared::cta`` window lies inside ``shared::cluster``, PTX ISA
§5.1.7) and, when both name a region, the regions are the same variable and the
ranges meet: distinct variables never share bytes.

The footprint of an async op comes from its operands (docs/fence.md §3.3):

- **wgmma / tcgen05 matrix descriptors**: the start-address field (``addr >> 4``), the
  leading and stride byte offsets and the swizzle mode are decoded from how the
  descriptor was built; the shape gives the number of 8-row groups. For a K-major
  layout the bytes are ``start`` to ``start + (rows/8 - 1) * SBO + 8 * swizzle`` (the
  no-swizzle form uses ``LBO`` for the second core matrix); MN-major layouts, which
  only 16-bit wgmma can use, are bounded with the larger stride in both directions.
- **tensor copies into shared memory** write a box no larger than the transaction
  bytes armed on the mbarrier they complete on (``expect_tx``): a kernel whose box
  were larger would underflow the barrier's count, so the bound holds for every
  kernel that works;
- **tensor stores** read from their source address to the end of its region (the box
  is in the tensor map, which the analysis cannot see);
- **bulk copies** state their size; **try_cancel** writes 16 bytes.

>>> from ptxkit.cfg.values.values import Region, SHARED_CTA_SPACE
>>> tile = Region("tile", SHARED_CTA_SPACE, 8192, 1024)
>>> a, b = Location(CTA, tile, 0, 4096), Location(CTA, tile, 4096, 8192)
>>> overlaps(a, b), overlaps(a, Location(CLUSTER, None, 0, 1 << 18))
(False, True)
>>> descriptor_extent(rows=64, k_bytes=32, lbo=16, sbo=1024, swizzle=128, mn_major=False)
(127, 8192)
"""

from __future__ import annotations

from ptxkit._records import TYPE_CHECKING, Record
from ptxkit.cfg.values.values import (
    GLOBAL_SPACE_NAME, INF, NUM, SHARED_CLUSTER_SPACE, SHARED_CTA_SPACE, WINDOW, Atom, Region,
)

if TYPE_CHECKING:
    from collections.abc import Iterable

#: Proxy-space bits.
CTA, CLUSTER, GLOBAL = 1, 2, 4
SHARED = CTA | CLUSTER
SPACE_BITS = {SHARED_CTA_SPACE: CTA, SHARED_CLUSTER_SPACE: CLUSTER, GLOBAL_SPACE_NAME: GLOBAL}
SPACE_NAMES = ((CTA, SHARED_CTA_SPACE), (CLUSTER, SHARED_CLUSTER_SPACE), (GLOBAL, GLOBAL_SPACE_NAME))
_SWIZZLE_WGMMA = {0: 0, 1: 128, 2: 64, 3: 32}
_SWIZZLE_TCGEN05 = {0: 0, 1: 128, 2: 128, 4: 64, 6: 32}
#: A matrix descriptor's base offset and layout fields (PTX ISA, "Matrix Descriptor":
#: bits 49-51 and 62-63, or 61-63 for tcgen05).
_LAYOUT_WGMMA, _LAYOUT_TCGEN05 = 7 << 49 | 3 << 62, 7 << 49 | 7 << 61


class Location(Record):
    """Bytes ``[start, end)`` of `region` (None: anywhere) in the spaces `space` (bits).

    >>> str(Location(CTA, Region("smem", SHARED_CTA_SPACE, 64, 8), 8, 16)), str(everywhere(SHARED))
    ('smem[8:16]', 'shared::cta+shared::cluster')
    """

    space: int
    region: Region | None
    start: int
    end: int

    def __str__(self) -> str:
        if self.region is None:
            return spaces_text(self.space)
        end = "" if self.end >= INF else self.end
        return f"{self.region.name}[{self.start}:{end}]"


def space_bits(names: Iterable[str]) -> int:
    """The bits of state-space names (``("shared::cta", "global")`` and the like).

    >>> space_bits(("shared::cta", "global")) == CTA | GLOBAL
    True
    """
    bits = 0
    for name in names:
        bits |= SPACE_BITS[name]
    return bits


def everywhere(spaces: int) -> Location:
    """Any byte of `spaces`."""
    return Location(spaces, None, 0, INF)


def spaces_text(spaces: int) -> str:
    """Names of a space set.

    >>> spaces_text(CTA | GLOBAL), spaces_text(0)
    ('shared::cta+global', '-')
    """
    return "+".join(name for bit, name in SPACE_NAMES if spaces & bit) or "-"


def alias(spaces: int) -> int:
    """The spaces whose bytes may be those of `spaces` (the two shared windows alias).

    >>> alias(CTA) == SHARED, alias(GLOBAL) == GLOBAL
    (True, True)
    """
    return spaces | SHARED if spaces & SHARED else spaces


def overlaps(a: Location, b: Location) -> bool:
    """True when the two locations may share a byte (see the module docstring). Offsets
    from an object's rounded-up start (`ptxkit.cfg.values.values.aligned_start`) and from
    its own start are compared as offsets from its own start.

    >>> from ptxkit.cfg.values.values import aligned_start
    >>> dyn = Region("dyn", SHARED_CTA_SPACE, None, 16)
    >>> up = aligned_start(dyn, 1024)
    >>> overlaps(Location(CTA, up, 0, 64), Location(CTA, dyn, 1000, 1008)), overlaps(Location(CTA, up, 0, 64),
    ...     Location(CTA, dyn, 1072, 1080))
    (True, False)
    """
    if not alias(a.space) & b.space:
        return False
    if a.region is None or b.region is None:
        return True
    if a.region != b.region:
        if a.region.root != b.region.root:
            return False
        a, b = in_root(a), in_root(b)
    return a.start < b.end and b.start < a.end


def covers(outer: Location, inner: Location) -> bool:
    """True when every byte `inner` may name lies in `outer`: the same region, from the
    same start, and a space that aliases (so any access inside `inner` overlaps `outer`).

    >>> tile = Region("tile", SHARED_CTA_SPACE, 8192, 1024)
    >>> covers(Location(CTA, tile, 0, 4096), Location(CLUSTER, tile, 64, 80)), covers(Location(CTA, tile, 0, 4096),
    ...     Location(CTA, tile, 4080, 4112))
    (True, False)
    """
    return outer.region is not None and outer.region == inner.region and bool(alias(outer.space) & inner.space) \
        and outer.start <= inner.start and inner.end <= outer.end


def in_root(location: Location) -> Location:
    """A location given from a rounded-up start, as bytes of the object itself: the
    start may lie up to the region's `slack` past the object's."""
    region = location.region
    if region is None or region.parent is None:
        return location
    return Location(location.space, region.parent, location.start,
                    min(location.end + region.slack, region.parent.limit))


def of_atom(atom: Atom, width: int, space: int) -> Location:
    """The location an access of `width` bytes through an address atom touches, in the
    proxy space `space` (the opcode's or the generic address's)."""
    if atom.form == NUM or atom.region is None or atom.shift or atom.above:
        return everywhere(space)
    _, region, start, end = atom.location(width)
    return Location(space, region, start, max(end, start + 1))


def descriptor_extent(rows: int, k_bytes: int, lbo: int, sbo: int, swizzle: int, mn_major: bool) -> tuple[int, int]:
    """Bytes a matrix-descriptor operand touches relative to its start address:
    ``(before, after)``, so the footprint is ``[start - before, start + after)``.

    `rows` is the M or N extent, `k_bytes` the K extent in bytes (32 for every dense
    wgmma), `swizzle` the swizzle width in bytes (0 for none). Swizzled atoms are
    aligned to the swizzle width, and the start may point into one (a K offset).

    >>> descriptor_extent(rows=64, k_bytes=32, lbo=128, sbo=256, swizzle=0, mn_major=False)
    (0, 2048)
    >>> descriptor_extent(rows=128, k_bytes=32, lbo=4096, sbo=1024, swizzle=128, mn_major=True)
    (127, 6144)
    """
    groups = max(rows // 8, 1)
    if not mn_major:
        if not swizzle:
            return 0, (groups - 1) * sbo + (max(k_bytes // 16, 1) - 1) * lbo + 128
        return swizzle - 1, (groups - 1) * sbo + 8 * swizzle
    atom = max(swizzle, 16)
    along_mn = max(rows * 2 // atom, 1)  # 16-bit elements only
    along_k = max(k_bytes // 16, 1)
    # one offset steps between atoms along MN, the other between 8-deep groups along K;
    # either assignment is covered, so the extent does not hang on which is which
    steps = max((along_mn - 1) * lbo + (along_k - 1) * sbo, (along_mn - 1) * sbo + (along_k - 1) * lbo)
    return atom - 1, steps + 8 * atom


def descriptor_swizzle(atom: Atom, tcgen05: bool) -> tuple[int, int] | None:
    """``(swizzle width in bytes, base offset)`` of a traced (wgmma or tcgen05) matrix
    descriptor value (PTX ISA, "Matrix Descriptor": the layout in bits 62-63, or 61-63
    for tcgen05, the base offset in bits 49-51); None for another value or layout.

    >>> from ptxkit.cfg.values.values import Region
    >>> smem = Region("smem", SHARED_CTA_SPACE, None, 1024)
    >>> descriptor_swizzle(Atom(WINDOW, SHARED_CTA_SPACE, smem, 2048, 2048, 4, 1 << 62 | 2 << 49), tcgen05=False)
    (128, 2)
    """
    if atom.form != WINDOW or atom.shift != 4 or atom.region is None:
        return None
    if atom.loose & (_LAYOUT_TCGEN05 if tcgen05 else _LAYOUT_WGMMA):
        return None  # a layout or base offset not known
    high = atom.high
    swizzle = _SWIZZLE_TCGEN05.get((high >> 61) & 7) if tcgen05 else _SWIZZLE_WGMMA[(high >> 62) & 3]
    return None if swizzle is None else (swizzle, (high >> 49) & 7)


def descriptor_location(atom: Atom, rows: int, k_bytes: int, mn_major: bool, tcgen05: bool) -> Location:
    """Where the matrix a (wgmma or tcgen05) descriptor value names lies, or
    anywhere in ``shared::cta`` when the value is not a traced descriptor."""
    layout, region = descriptor_swizzle(atom, tcgen05), atom.region
    if layout is None or region is None:
        return everywhere(CTA)
    most = atom.high | atom.loose  # a stride not known is taken at the largest its bits allow
    lbo = ((most >> 16) & 0x3FFF) << 4
    sbo = ((most >> 32) & 0x3FFF) << 4
    swizzle = layout[0]
    before, after = descriptor_extent(rows, k_bytes, lbo, sbo, swizzle, mn_major)
    atom_bytes = before + 1
    if before and region.align % atom_bytes == 0:  # the atoms are where the region's own alignment puts them
        start, end = atom.lo - atom.lo % atom_bytes, atom.hi - atom.hi % atom_bytes + after
    else:
        start, end = atom.lo - before, atom.hi + after
    start, end = max(start, 0), min(end, region.limit)
    return Location(CTA, region, start, max(end, start + 1))


def bounded(location: Location, size: int | None) -> Location:
    """A location starting where `location` does and `size` bytes long at most past
    its last start (None: to the end of its region or space)."""
    if location.region is None:
        return location
    end = location.region.limit if size is None else min(location.end - 1 + size, location.region.limit)
    return Location(location.space, location.region, location.start, max(end, location.start + 1))
