"""``kernels.permuted_run`` by one count of each entry (``np.bincount``) is its definition
(the sorted entries are one run of consecutive ones), including entries far from 0, runs
with one entry repeated or missing, and negative entries (fields set by hand: counted from
the least)."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.sim.kernels import permuted_run


def _definition(values: list[int]) -> int | None:
    lo = min(values)
    return lo if sorted(values) == list(range(lo, lo + len(values))) else None


@settings(max_examples=300, deadline=None)
@given(st.integers(-40, 3000), st.integers(1, 60), st.randoms(use_true_random=False),
       st.sampled_from(["run", "repeat", "gap", "any"]))
def test_counts_give_the_definition(lo: int, n: int, rnd: random.Random, how: str) -> None:
    """A shuffled run starting at ``lo`` (negative included), the same with one entry
    repeated in place of another, with a gap past its end, or arbitrary entries near it."""
    values = list(range(lo, lo + n))
    rnd.shuffle(values)
    if how == "repeat" and n > 1:
        values[0] = values[-1]
    elif how == "gap":
        values[0] = lo + n
    elif how == "any":
        values = [lo + rnd.randrange(n + 2) for _ in range(n)]
    assert permuted_run(np.array(values, dtype=np.int64)) == _definition(values)


def test_a_single_entry_and_entry_zero() -> None:
    """One execution is a run of one; a run that starts at entry 0; a run ending below its
    length's worth of entries (bincount shorter than the executions) is none."""
    assert permuted_run(np.array([7], dtype=np.int64)) == 7
    assert permuted_run(np.array([2, 0, 1], dtype=np.int64)) == 0
    assert permuted_run(np.array([1, 1, 1], dtype=np.int64)) is None
    assert permuted_run(np.array([-2, -1, -3], dtype=np.int64)) == -3
