"""``GraphBuilder._quantile_scale`` takes its argument's magnitudes and selects the quantile
in place (the caller's own temporary): the scale is numpy's quantile of ``|real|`` as before,
bit for bit, over a layer's worth of values with ties, signs and zeros."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph.builder import CALIBRATION_QUANTILE, INT8_MAX, GraphBuilder


@pytest.mark.parametrize("n", [0, 1, 2, 7, 10_000, 200_003])
def test_in_place_quantile_is_numpys(n: int) -> None:
    rng = np.random.default_rng(n)
    ints = rng.integers(-(1 << 20), 1 << 20, n).astype(np.int32)
    ints[: n // 3] = ints[: n // 3] // 1000  # ties and zeros
    real = ints.astype(np.float64) * 0.000123
    want = max(float(np.quantile(np.abs(real), CALIBRATION_QUANTILE)) if n else 0.0,
               1e-12) / INT8_MAX
    b = GraphBuilder("t")
    assert b._quantile_scale(real.copy()) == want
