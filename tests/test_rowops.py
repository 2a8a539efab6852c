"""The row reduction's op table: every op a state, an identity, outputs like torch's, and
the same fold/combine interface (each op is run end to end in test_rowreduce.py)."""

from __future__ import annotations

import pytest

from ptxkit.generators.builder import PtxBuilder
from ptxkit.generators.rowops import EMPTY, ROW_OPS, Element, row_op


@pytest.mark.parametrize("name", list(ROW_OPS))
def test_every_op_folds_combines_and_finishes_with_the_same_interface(name):
    op = ROW_OPS[name]
    b = PtxBuilder("sm_90a")
    states = [op.start(b) for _ in range(op.lanes("f32"))]
    index = b.reg(".b32")
    batch = [Element(b.reg(".f32"), (index, k)) for k in range(8)]
    op.fold(b, states, batch, ordered=True)
    op.combine(b, states[0], states[-1])
    outputs = op.finish(b, states[0], 8)
    assert len(states[0]) == len(op.state) and len(outputs) == len(op.outputs) == len(op.output_dtypes("bf16"))
    assert all(reg.startswith("%") for reg in outputs)


def test_identities_and_outputs():
    assert ROW_OPS["max"].identity() == (float("-inf"),) and ROW_OPS["min"].neutral == float("inf")
    assert ROW_OPS["argmax"].identity() == (float("-inf"), EMPTY)
    assert ROW_OPS["sumsq"].output_dtypes("bf16") == ("f32",) and ROW_OPS["sum"].output_dtypes("f16") == ("f16",)
    assert ROW_OPS["meanvar"].outputs == ("mean", "var") and ROW_OPS["logsumexp"].state == (".f32", ".f32")


def test_the_nan_policy_chooses_the_instructions():
    b = PtxBuilder("sm_90a")
    op = row_op("max", "ignore")
    state = op.start(b)
    op.combine(b, state, op.start(b))
    assert b.instructions()[-1].startswith("max.f32")
    b = PtxBuilder("sm_90a")
    row_op("min").combine(b, *(row_op("min").start(b) for _ in range(2)))
    assert b.instructions()[-1].startswith("min.NaN.f32")
    with pytest.raises(ValueError, match="nan must be"):
        row_op("max", "skip")


def test_argmax_scans_an_ordered_batch_with_two_instructions_an_element():
    b = PtxBuilder("sm_90a")
    op = row_op("argmax")
    index = b.reg(".b32")
    op.fold(b, [op.start(b)], [Element(b.reg(".f32"), (index, k)) for k in range(16)], ordered=True)
    text = b.instructions()
    assert sum(line.startswith("setp.eq.f32") for line in text) == 16
    assert sum(line.startswith("@") and "add.u32" in line for line in text) == 32  # numbers, then NaN
    assert not any(line.startswith("min.u32") for line in text)
