"""``run_heads``, the plans' grouping of sorted indices (``kernels``, ``gemm``): True where a run
of equal values starts, as ``np.r_[True, s[1:] != s[:-1]]`` gives it (an empty input too)."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from vta.sim.kernels import run_heads


@given(st.lists(st.integers(0, 6), max_size=30))
def test_run_heads_marks_each_runs_first(values: list[int]) -> None:
    s = np.sort(np.array(values, dtype=np.int64))
    got = run_heads(s)
    assert got.dtype == np.bool_
    want = [True] + [bool(s[k] != s[k - 1]) for k in range(1, s.size)]
    assert got.tolist() == want
