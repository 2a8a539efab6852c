"""`alias`: a dst that shares registers with its src (a view, or another region of the same
tile) is computed apart and copied in; accum on shared registers is refused."""

from __future__ import annotations

import pytest

from ptxkit.generators.alias import separate, shares_registers
from ptxkit.generators.analysis import ReductionError
from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.layout import S, TileLayout, laneid
from ptxkit.generators.regtile import RegTile

GAPPED = TileLayout(S[(32, 2, 2) : (1 @ laneid, 2, 4)])  # a lane's 4 elements in slots 0, 4, 2, 6


def test_shared_registers_are_those_of_the_two_regions():
    b = PtxBuilder()
    t = RegTile(b, (4, 4), "f32")
    assert shares_registers(t[0:1, 0:1], t) and shares_registers(t, t)
    assert not shares_registers(t[0:1], t[1:4]) and not shares_registers(t[:, 3:4], t[:, 0:3])
    assert shares_registers(t.view((16,)), t) and not shares_registers(RegTile(b, (16,), "f32"), t)
    gapped = RegTile(b, (32, 2, 2), "f32", GAPPED)
    assert not shares_registers(gapped[:, 1:2], gapped[:, 0:1])  # slots 2, 6 and 0, 4
    assert shares_registers(gapped[:, :, 1:2], gapped[:, 1:2])  # slot 6 is in both


def test_separate_writes_fresh_registers_in_the_region_slots_and_copies_them_in():
    b = PtxBuilder()
    t = RegTile(b, (4, 4), "f32")  # %f0..%f15
    region = t[1:2, 2:4]
    out, finish = separate(region, t[0:1], accum=False)
    finish()
    assert out is region and b.instructions() == []
    alone, nothing = separate(t[1:2, 2:4], t[2:4], accum=True)
    assert alone.regs == t.regs and alone.start == (1, 2)
    out, finish = separate(t[1:2, 2:4], t, accum=False)
    assert out.regs[6:8] == ["%f16", "%f17"] and out.regs[:6] == t.regs[:6] and out.start == (1, 2)
    assert out.extent == (1, 2) and not out.same_buffer(t)
    finish()
    assert b.instructions() == ["mov.f32 %f6, %f16;", "mov.f32 %f7, %f17;"]


def test_accum_on_shared_registers_is_refused_even_where_the_path_is_safe():
    b = PtxBuilder()
    t = RegTile(b, (4,), "f32")
    with pytest.raises(ReductionError, match=r"^accum=True on a dst that shares registers with src \(a region of the "
                                             r"same tile\) would fold src's own values in again"):
        separate(t[0:1], t, accum=True)
    with pytest.raises(ReductionError, match=r"\(a view of its registers\)"):
        separate(t.view((2, 2)), t, accum=True, safe=True)
    same, _ = separate(t.view((4,)), t, accum=False, safe=True)
    assert same.regs == t.regs and b.instructions() == []
