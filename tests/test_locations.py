"""ptxkit.cfg.sync.locations: overlaps, descriptor footprints, bounds."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from ptxkit.cfg.sync.locations import (
    CLUSTER, CTA, GLOBAL, SHARED, Location, alias, bounded, descriptor_extent, descriptor_location, everywhere,
    in_root, overlaps, spaces_text,
)
from ptxkit.cfg.values.values import SHARED_CTA_SPACE, WINDOW, Atom, Region, aligned_start

TILE = Region("tile", SHARED_CTA_SPACE, 65536, 1024)
OTHER = Region("other", SHARED_CTA_SPACE, 64, 8)


def test_overlaps():
    assert not overlaps(Location(CTA, TILE, 0, 64), Location(CTA, TILE, 64, 128))  # touching is not sharing
    assert overlaps(Location(CTA, TILE, 0, 65), Location(CLUSTER, TILE, 64, 128))  # the windows alias
    assert not overlaps(Location(CTA, TILE, 0, 64), Location(CTA, OTHER, 0, 64))  # different variables
    assert overlaps(everywhere(CTA), Location(CTA, OTHER, 0, 8))
    assert not overlaps(everywhere(GLOBAL), Location(CTA, OTHER, 0, 8))
    assert alias(CLUSTER) == SHARED and spaces_text(alias(GLOBAL)) == "global"


@given(st.integers(0, 63), st.integers(0, 4096), st.integers(1, 256), st.integers(0, 4096), st.integers(1, 256))
def test_offsets_from_a_rounded_up_start_meet_the_objects_own(start, a, width_a, b, width_b):
    """`overlaps` and `in_root` hold for every start the object may have (16-byte aligned)."""
    dyn = Region("dyn", SHARED_CTA_SPACE, None, 16)
    up = aligned_start(dyn, 1024)
    base = 16 * start
    rounded = -(-base // 1024) * 1024 - base  # how far the rounded start lies past the object's
    from_up, from_own = Location(CTA, up, a, a + width_a), Location(CTA, dyn, b, b + width_b)
    if rounded + a < b + width_b and b < rounded + a + width_a:  # they share a byte at this start
        assert overlaps(from_up, from_own) and overlaps(from_own, from_up)
    own = in_root(from_up)
    assert own.region == dyn and own.start <= rounded + a and rounded + a + width_a <= own.end


def wgmma_addresses(start: int, rows: int, lbo: int, sbo: int, swizzle: int) -> set[int]:
    """Every byte a K-major wgmma operand of 32 bytes per row reads (PTX ISA's canonical
    layouts): core matrices of 8 rows x 16 bytes; with a swizzle, rows of `swizzle` bytes
    in 8-row atoms, 16-byte chunks XOR-ed by the row within the atom."""
    out = set()
    for row in range(rows):
        group, r = divmod(row, 8)
        for chunk in range(2):  # 32 bytes of K: two 16-byte chunks
            if swizzle == 0:
                base = start + group * sbo + chunk * lbo + r * 16
            else:
                row_start = start - start % swizzle + group * sbo + r * swizzle
                column = (start % swizzle) // 16 + chunk
                base = row_start + (column ^ (r % (swizzle // 16))) * 16
            out.update(range(base, base + 16))
    return out


@given(st.sampled_from([0, 32, 64, 128]), st.sampled_from([64, 8, 128, 256]), st.integers(0, 3), st.data())
def test_descriptor_extent_holds_every_byte(swizzle, rows, k_step, data):
    lbo, sbo = (128, rows * 16) if swizzle == 0 else (16, 8 * swizzle)
    start = 1024 * data.draw(st.integers(0, 4)) + (k_step * 32 % swizzle if swizzle else 0)
    before, after = descriptor_extent(rows, 32, lbo, sbo, swizzle, mn_major=False)
    addresses = wgmma_addresses(start, rows, lbo, sbo, swizzle)
    assert min(addresses) >= start - before and max(addresses) < start + after


def test_descriptor_location_decodes_the_fields():
    high = (0x40 << 32) | (1 << 16) | (1 << 62)  # SBO 1024, LBO 16, 128-byte swizzle
    atom = Atom(WINDOW, SHARED_CTA_SPACE, TILE, 32768, 32768 + 3 * 16384, 4, high)
    location = descriptor_location(atom, rows=64, k_bytes=32, mn_major=False, tcgen05=False)
    # TILE is 1024-aligned: the swizzle atoms start on 128-byte offsets, clamped to the buffer's end
    assert (location.start, location.end) == (32768, 65536)
    big = atom._replace(region=Region("big", SHARED_CTA_SPACE, 1 << 17, 1024))
    location = descriptor_location(big, rows=64, k_bytes=32, mn_major=False, tcgen05=False)
    assert location.end == 32768 + 3 * 16384 + 7 * 1024 + 1024
    # a K step into the atom (start + 64) reads the same atom, not 64 bytes past it
    assert descriptor_location(big._replace(lo=32768 + 64, hi=32768 + 64), 64, 32, False, False).end == 32768 + 8192
    # a region aligned only to 16 bytes: the atom may begin up to 127 bytes before the start
    loose = big._replace(region=Region("loose", SHARED_CTA_SPACE, 1 << 17, 16))
    assert descriptor_location(loose, rows=64, k_bytes=32, mn_major=False, tcgen05=False).start == 32768 - 127
    assert descriptor_location(Atom(WINDOW, SHARED_CTA_SPACE, None), 64, 32, False, False) == everywhere(CTA)
    # an LBO not known: a swizzled K-major operand does not use it; an MN-major one takes
    # the largest the loose bits allow; a layout not known is no traced descriptor
    unknown = big._replace(high=high & ~(0x3FFF << 16), loose=0x3FFF << 16)
    assert descriptor_location(unknown, 64, 32, False, False) == descriptor_location(big, 64, 32, False, False)
    widest = big._replace(high=high | 0x3FFF << 16)
    assert descriptor_location(unknown, 64, 32, True, False) == descriptor_location(widest, 64, 32, True, False)
    layout_not_known = big._replace(high=high & ~(1 << 62), loose=1 << 62)
    assert descriptor_location(layout_not_known, 64, 32, False, False) == everywhere(CTA)


def test_bounded_copies():
    assert bounded(Location(CTA, TILE, 1024, 1025), 4096) == Location(CTA, TILE, 1024, 5120)
    assert bounded(Location(CTA, TILE, 1024, 2049), None).end == 65536  # to the end of the buffer
    assert bounded(everywhere(CTA), 16) == everywhere(CTA)
