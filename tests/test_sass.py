"""ptxkit.sass: nvdisasm's listing read back, spills told apart from local arrays."""

from __future__ import annotations

import pytest

from ptxkit.sass import SassInstruction, parse_sass

from conftest import SAMPLES

LISTING = """\t.target\tsm_90a
//--------------------- .text.first         --------------------------
\t.section\t.text.first,"ax",@progbits
first:
\t//## File ".nv_debug_ptx_txt", line 272
        /*0000*/                   LDC R1, c[0x0][0x28] ;
        /*0010*/              @!P0 STL.128 [R1+0x10], R4                       (*"SpillRefill"*);
\t//## File ".nv_debug_ptx_txt", line 289
        /*0020*/                   LDL.LU.64 R16, [R1+0x90]                 (*"SpillRefill"*);
.L_x_1:
        /*0030*/                   STL.U8 [R27], R26 ;
//--------------------- .text.second         --------------------------
        /*0000*/                   EXIT ;
//--------------------- SYMBOLS --------------------------
"""


def test_a_listing_is_read_function_by_function():
    found = parse_sass(LISTING)
    assert sorted(found) == ["first", "second"]
    ldc, spill_store, refill, local = found["first"]
    assert (ldc.ptx_line, ldc.local_bytes) == (272, 0)
    assert (spill_store.opcode, spill_store.spill, spill_store.local_bytes, spill_store.is_store) == \
        ("STL.128", True, 16, True)
    assert (refill.ptx_line, refill.spill, refill.local_bytes, refill.is_store) == (289, True, 8, False)
    assert (local.spill, local.local_bytes, local.offset) == (False, 1, 0x30)
    assert found["second"] == [SassInstruction("second", 0, "EXIT", None, False)]


@pytest.mark.ptxas
def test_nvdisasm_marks_exactly_the_bytes_ptxas_says_it_spilled():
    import ptxkit
    from ptxkit.sass import disassemble

    try:
        from ptxkit.sass import find_nvdisasm

        find_nvdisasm()
    except FileNotFoundError:
        pytest.skip("no nvdisasm")
    cubin = ptxkit.assemble((SAMPLES / "toolchain/spill.ptx").read_text(), "sm_90a", options=("-lineinfo",))
    found = parse_sass(disassemble(cubin.data))
    usage = cubin.resources["spill"]
    spills = [i for i in found["spill"] if i.spill]
    assert sum(i.local_bytes for i in spills if i.is_store) == usage.spill_stores > 0
    assert sum(i.local_bytes for i in spills if not i.is_store) == usage.spill_loads > 0
    assert all(i.ptx_line for i in spills)
    assert not any(i.spill for i in found["local_array"]) and any(i.local_bytes for i in found["local_array"])
