"""``models._rounded`` draws a network's int8 weights a chunk at a time: the same values as
the whole draw at once (``rng.normal``, rounded, clipped), for shapes smaller than a chunk,
a chunk's multiple and not, and the generator left at the same state for the next draw."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph.models import _CHUNK, WEIGHT_STD, _rounded


@pytest.mark.parametrize("shape", [(1,), (64, 3, 7, 7), (_CHUNK,), (2, _CHUNK),
                                   (3, _CHUNK + 17), (1000, 512)])
def test_chunks_draw_the_whole_draws_values(shape: tuple[int, ...]) -> None:
    ours, theirs = np.random.default_rng(5), np.random.default_rng(5)
    want = np.clip(np.rint(theirs.normal(0, WEIGHT_STD, shape)), -127, 127).astype(np.int8)
    got = _rounded(ours, shape)
    assert got.dtype == np.int8 and got.shape == shape
    assert np.array_equal(got, want)
    assert ours.normal(0, 1.0, 8).tolist() == theirs.normal(0, 1.0, 8).tolist()


def test_values_past_the_range_clip() -> None:
    class Wide:  # a generator whose draws leave int8's range after the scale
        def standard_normal(self, out: np.ndarray) -> None:
            out[:] = np.linspace(-9, 9, out.size)

    got = _rounded(Wide(), (101,))  # type: ignore[arg-type]
    want = np.clip(np.rint(np.linspace(-9, 9, 101) * WEIGHT_STD), -127, 127).astype(np.int8)
    assert np.array_equal(got, want)
