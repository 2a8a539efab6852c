"""ptxkit.rewrite.names: fresh names clash with nothing the function or module spells."""

from __future__ import annotations

import collections

from hypothesis import given, settings
from hypothesis import strategies as st

import ptxkit
from ptxkit.rewrite import Plan, apply
from ptxkit.rewrite.names import Names

from rewrite_programs import programs

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


# -- on random programs ------------------------------------------------------------------------

HINTS = st.sampled_from(["count", "count_1", "t", "t0", "edge", "skip", "L", "p"])


def declarations(function) -> list[str]:
    """Every register, label and parameter name the function declares (ranges expanded),
    as often as it is declared."""
    names = [p.name for p in function.signature.params]
    for node in function.walk():
        kind = type(node).__name__
        if kind == "Directive" and node.declaration is not None:
            names.extend(node.declaration.registers())
        elif kind == "Label":
            names.append(node.name)
    return names


def declared(function) -> set[str]:
    return set(declarations(function))


@settings(max_examples=100, deadline=None)
@given(programs(), st.lists(st.tuples(st.sampled_from([".u32", ".pred", ".b64"]), HINTS), min_size=1, max_size=8),
       st.lists(HINTS, max_size=4))
def test_fresh_names_never_clash_and_are_declared_once_in_the_body(program, registers, labels):
    module = ptxkit.parse(program.text)
    module_before = ptxkit.parse(program.text).function("k")
    before = declared(module.function("k"))
    plan = Plan(module)
    k = plan.function("k")
    fresh = [k.fresh_register(kind, hint) for kind, hint in registers]
    fresh_labels = [k.fresh_label(hint) for hint in labels]
    param = k.add_param(".u64", registers[0][1]).name
    for label in fresh_labels:  # a label needs a statement after it: put each before the first return
        k.insert(k.returns()[0], [f"{label}:"])
    apply(plan)
    names = fresh + fresh_labels + [param]
    assert len(set(names)) == len(names) and not set(names) & before
    function = ptxkit.parse(str(module)).function("k")
    body = function.body.items
    for name in fresh:  # one declaration, in the body's own scope (every nested scope sees it)
        holders = [node for node in function.walk() if type(node).__name__ == "Directive"
                   and node.declaration is not None and name in node.declaration.registers()]
        assert len(holders) == 1 and any(holders[0] is item for item in body)
    after = declared(function)
    assert before | set(names) <= after
    counts, old = collections.Counter(declarations(function)), collections.Counter(declarations(module_before))
    assert all(count == old.get(name, 1) for name, count in counts.items())  # nothing declared twice anew
    created = after - before - set(names)  # the labels of split returns
    assert all(name.startswith(("$ptxkit_skip", "$ptxkit_edge")) for name in created)
