"""``kernels._loop`` with the instruction's base field folded in (``offset``): the loop's few
offsets made first (listed in Python up to ``_LISTED_ITERS`` iterations, by arange past it),
then added to the micro-ops' column once; the definition's indices either way."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.sim.kernels import _LISTED_ITERS, _loop


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 5000), min_size=0, max_size=9), st.integers(1, 12),
       st.integers(1, 12), st.integers(-40, 40), st.integers(-40, 40), st.integers(0, 900))
def test_loop_with_offset_is_the_definition(base: list[int], iter_out: int, iter_in: int,
                                            f_out: int, f_in: int, offset: int) -> None:
    """``base[u] + offset + o*f_out + i*f_in`` in loop order (o, i, u), int64, a fresh array
    (the caller's column is a view of the micro-op buffer: left as it was), on both sides of
    ``_LISTED_ITERS`` (up to 144 iterations here)."""
    b = np.array(base, dtype=np.int64)
    keep = b.copy()
    want = [u + offset + o * f_out + i * f_in for o in range(iter_out)
            for i in range(iter_in) for u in base]
    got = _loop(b, iter_out, iter_in, f_out, f_in, offset)
    assert got.dtype == np.int64 and got.tolist() == want
    assert not np.shares_memory(got, b)
    np.testing.assert_array_equal(b, keep)


def test_both_offset_forms_are_exercised() -> None:
    """One loop listed, one past the limit: the same indices as the definition."""
    b = np.array([3, 1, 4], dtype=np.int64)
    for iter_out, iter_in in ((2, 3), (_LISTED_ITERS // 4 + 1, 5)):
        want = [u + 7 + o * 11 + i * 2 for o in range(iter_out) for i in range(iter_in)
                for u in (3, 1, 4)]
        assert _loop(b, iter_out, iter_in, 11, 2, 7).tolist() == want
    assert (_LISTED_ITERS // 4 + 1) * 5 > _LISTED_ITERS
