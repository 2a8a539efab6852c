"""ptxkit.rewrite.names: fresh names clash with nothing the function or module spells."""

from __future__ import annotations

import ptxkit
from ptxkit.rewrite.names import Names

TEXT = """.version 8.0
.target sm_90a
.address_size 64
.global .u32 ptxkit_buf;
.visible .entry k(.param .u64 ptxkit_buf_1)
{
	.reg .b32 %ptxkit_t<3>, %ptxkit_t_1;
	.reg .pred %ptxkit_p;
	{
		.reg .b32 %ptxkit_t_2;                 // a nested scope
		@%ptxkit_p bra $ptxkit_L;
		$ptxkit_L:                             // an inline-asm label
	}
	// %ptxkit_t_3 is only named in a comment
$ptxkit_edge:
	ret;
}
.visible .entry other()
{
	.reg .b32 %ptxkit_q;
	ret;
}
"""


def test_names_clash_with_nothing_in_the_function_its_scopes_or_the_module():
    module = ptxkit.parse(TEXT)
    names = Names(module.function("k"))
    assert names.register("t") == "%ptxkit_t_4"
    assert names.register("t") == "%ptxkit_t_5"
    assert names.register("p") == "%ptxkit_p_1"
    assert names.label("L") == "$ptxkit_L_1"
    assert names.label("edge") == "$ptxkit_edge_1"
    assert names.symbol("buf") == "ptxkit_buf_2"
    assert names.register("q") == "%ptxkit_q"  # another function's registers are its own


def test_ranges_count_as_declared():
    module = ptxkit.parse(TEXT)
    names = Names(module.function("k"))
    assert names.taken("%ptxkit_t0") and names.taken("%ptxkit_t2") and not names.taken("%ptxkit_t3")


def test_module_wide_names_see_every_function():
    module = ptxkit.parse(TEXT)
    assert Names(module=module, module_wide=True).register("q") == "%ptxkit_q_1"


def test_a_bad_hint_is_refused():
    import pytest

    with pytest.raises(ValueError, match="hint"):
        Names(ptxkit.parse(TEXT).function("k")).register("a b")
