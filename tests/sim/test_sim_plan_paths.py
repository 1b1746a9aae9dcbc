"""The plan builders' fast paths give what their general forms give: a micro-op loop of one
outer iteration (``kernels._loop``), and rows classified by keys (``gemm.unique_rows``)
including two distinct rows whose keys collide (then classified by peeling;
tests/sim/test_sim_gemm_paths holds both classifiers to ``np.unique``)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.sim.gemm import _row_mix, unique_rows
from vta.sim.kernels import _loop


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(-50, 5000), min_size=0, max_size=12), st.integers(1, 4),
       st.integers(1, 5), st.integers(-40, 40), st.integers(-40, 40))
def test_loop_is_the_definition(base: list[int], iter_out: int, iter_in: int, f_out: int,
                                f_in: int) -> None:
    """``_loop`` is ``base[u] + o*f_out + i*f_in`` in loop order (o, i, u), for one outer
    iteration (the shortcut) and more, one inner iteration included."""
    b = np.array(base, dtype=np.int64)
    want = [u + o * f_out + i * f_in for o in range(iter_out) for i in range(iter_in)
            for u in base]
    for out_n in (1, iter_out):
        got = _loop(b.copy(), out_n, iter_in, f_out, f_in)
        assert got.dtype == np.int64
        assert got.tolist() == want[: out_n * iter_in * len(base)]


def test_colliding_keys_are_classified_exactly() -> None:
    """Two distinct rows with the same key (``_row_mix``'s dot product modulo 2**64) are two
    classes: ``unique_rows`` finds the collision and gives ``np.unique``'s answer."""
    c1, c2 = (int(c) for c in _row_mix(2))
    a, b = 5, 7
    other = np.array([(a + c2) % 2**64, (b - c1) % 2**64], dtype=np.uint64).view(np.int64)
    seq = np.array([[a, b], other, [a, b], other, [1, 2]], dtype=np.int64)
    keys = seq.astype(np.uint64) @ _row_mix(2)
    assert keys[0] == keys[1] and not np.array_equal(seq[0], seq[1])  # a real collision
    uniq, inverse = np.unique(seq, axis=0, return_inverse=True)
    got = unique_rows(seq, 8)
    assert got is not None
    np.testing.assert_array_equal(got[0], uniq)
    np.testing.assert_array_equal(got[1], inverse.reshape(-1))
    assert unique_rows(seq, 2) is None  # three distinct rows (two keys): over the limit
