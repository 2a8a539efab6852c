"""Where a row's elements are: vectors every thread reads, guarded ones, head and tail."""

from __future__ import annotations

import pytest

from ptxkit.generators.rowload import RowShape


@pytest.mark.parametrize(
    "cols, dtype, threads, vectors, full, rounds, leftover",
    [(1, "f32", 1, (0, 0), 0, 0, 1), (3, "f32", 1, (0, 0), 0, 0, 3), (4, "f32", 1, (0, 1), 0, 1, 4),
     (7, "f32", 1, (1, 1), 1, 1, 3), (8, "f32", 2, (1, 2), 0, 1, 4), (7, "bf16", 4, (0, 0), 0, 0, 7),
     (4096, "bf16", 128, (511, 512), 3, 4, 8), (50257, "f32", 512, (12563, 12564), 24, 25, 5)],
)
def test_row_shapes(cols, dtype, threads, vectors, full, rounds, leftover):
    shape = RowShape(cols, dtype, threads)
    assert (shape.vectors, shape.full_rounds, shape.vector_rounds, shape.most_leftover) == \
        (vectors, full, rounds, leftover)
    # every alignment: head h (0 to V-1, at most cols), then whole vectors, then the tail
    v = shape.per_vector
    for head in range(min(v, cols + 1)):
        whole = (cols - head) // v
        assert vectors[0] <= whole <= vectors[1] and cols - whole * v <= leftover
        assert shape.elements_per_thread() >= -(-(whole * v) // threads)
