"""``gemm.affine_grid`` checks each level of a grid on the one difference array that finds
its run; it gives what the row-by-row form (every row minus its first against the first row
minus its first, kept here as the oracle) gives: the same grid, or None, for every
sequence: grids, grids with an entry changed, and arbitrary small sequences."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.sim.gemm import _MAX_GRID_DIMS, _Grid, affine_grid


def _rowwise(seq: np.ndarray) -> _Grid | None:
    """The row-by-row decomposition (the form before the difference check): the oracle."""
    shape: list[int] = []
    steps: list[int] = []
    cur = seq.astype(np.int64, copy=False)
    while cur.size > 1:
        if len(shape) == _MAX_GRID_DIMS:
            return None
        step = int(cur[1] - cur[0])
        bad = (cur[1:] - cur[:-1] != step).nonzero()[0]
        run = int(bad[0]) + 1 if bad.size else cur.size
        if cur.size % run:
            return None
        rows = cur.reshape(-1, run)
        if not bool((rows - rows[:, :1] == rows[0] - rows[0, 0]).all()):
            return None
        shape.append(run)
        steps.append(step)
        cur = rows[:, 0]
    return _Grid(int(seq[0]), tuple(reversed(shape)), tuple(reversed(steps)))


def _expand(dims: list[tuple[int, int]], first: int) -> np.ndarray:
    out = np.full(1, first, dtype=np.int64)
    for n, step in dims:
        out = (out[:, None] + step * np.arange(n)[None, :]).ravel()
    return out


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(-9, 9)), min_size=0, max_size=10),
       st.integers(-100, 100), st.lists(st.tuples(st.integers(0, 10**6), st.integers(-3, 3)),
                                        max_size=3))
def test_grids_and_poked_grids_as_the_rowwise_form(dims: list[tuple[int, int]], first: int,
                                                   pokes: list[tuple[int, int]]) -> None:
    """A grid (up to ten dimensions: past ``_MAX_GRID_DIMS`` both refuse), then the same with
    a few entries changed (a break inside a row, between rows, or none)."""
    seq = _expand(dims, first)
    assert affine_grid(seq) == _rowwise(seq)
    for at, by in pokes:
        seq[at % seq.size] += by
    assert affine_grid(seq) == _rowwise(seq)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=40),
       st.sampled_from([np.int64, np.int32, np.uint16]))
def test_arbitrary_sequences_as_the_rowwise_form(values: list[int], dtype: type) -> None:
    """Small sequences of few values (many near-grids: periodic runs, runs of unequal length),
    in the index dtypes a plan may hand over."""
    seq = np.array(values, dtype=dtype)
    assert affine_grid(seq) == _rowwise(seq)


def test_breaks_off_the_row_boundaries_refuse() -> None:
    """Rows of the first run's length whose later rows step differently inside: not a grid
    (the differences other than the step must all fall between rows)."""
    seq = np.array([0, 1, 2, 10, 11, 12, 20, 22, 23], dtype=np.int64)
    assert _rowwise(seq) is None and affine_grid(seq) is None
    good = np.array([0, 1, 2, 10, 11, 12, 20, 21, 22], dtype=np.int64)
    assert affine_grid(good) == _Grid(0, (3, 3), (10, 1)) == _rowwise(good)
