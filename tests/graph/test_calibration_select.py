"""The calibration's quantile without a full partition (``builder.linear_quantile``,
``builder.top_order_stats``) and a requantize's calibration on the integers themselves
(``GraphBuilder._calibrated``): the same floats as numpy's quantile of the scaled float64
magnitudes, bit for bit, at every size, quantile, scale and tie pattern, and when the
threshold's sample misleads (the partition's fallback)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from vta.graph.builder import (
    CALIBRATION_QUANTILE,
    INT8_MAX,
    GraphBuilder,
    linear_quantile,
    top_order_stats,
)


def _select(m: np.ndarray, scale: float = 1.0) -> Callable[[int, int], tuple[float, float]]:
    return lambda lo, hi: top_order_stats(m, lo, hi, scale)


@pytest.mark.parametrize("q", [CALIBRATION_QUANTILE, 0.0, 0.123, 0.5, 0.99, 1.0])
@pytest.mark.parametrize("n", [1, 2, 3, 17, 1_000, 65_537, 300_001])
def test_linear_quantile_is_numpys(n: int, q: float) -> None:
    rng = np.random.default_rng(n)
    real = np.abs(rng.standard_t(2, n) * 1000 + rng.normal(0, 1e-3, n))
    real[: n // 4] = np.round(real[: n // 4])  # ties
    want = float(np.quantile(real, q))
    assert linear_quantile(n, q, _select(real.copy())) == want


@pytest.mark.parametrize("scale", [2.0 ** -20, 1.37e-5, 3.3e-7, 0.1])
@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32])
def test_integer_magnitudes_scaled_after_selection(dtype: type, scale: float) -> None:
    rng = np.random.default_rng(7)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, int(info.max) + 1, 250_000).astype(dtype)
    x[:5] = info.min  # |min| is max + 1: the unsigned view holds it
    want = float(np.quantile(np.abs(x.astype(np.float64) * scale), CALIBRATION_QUANTILE))
    mag = np.abs(x).view(np.dtype(f"u{x.dtype.itemsize}"))
    assert linear_quantile(x.size, CALIBRATION_QUANTILE, _select(mag, scale)) == want


def test_a_misleading_sample_falls_back_to_the_partition() -> None:
    # every sampled value (each 16th) large, the rest small: the threshold keeps too few
    n = 160_000
    m = np.zeros(n, np.uint32)
    m[::16] = 1_000_000 + np.arange(n // 16, dtype=np.uint32)
    m[1::16] = 5
    lo, hi = n - 20, n - 19
    want = np.sort(m)[[lo, hi]]
    assert top_order_stats(m.copy(), lo, hi) == tuple(float(v) for v in want)
    q = 1 - 19.5 / (n - 1)
    assert linear_quantile(n, q, _select(m.copy())) == float(np.quantile(m.astype(np.float64), q))


@pytest.mark.parametrize("s_in", [2.0 ** -17, 0.000123])
def test_calibrated_requantize_scale_is_the_float64_one(s_in: float) -> None:
    rng = np.random.default_rng(3)
    b = GraphBuilder("t", calibrate={"x": np.zeros((1, 8, 4, 4), np.int8)})
    x = b.input("x", (1, 8, 4, 4), 1.0)
    acc = rng.integers(-(1 << 31), 1 << 31, 200_000, dtype=np.int64).astype(np.int32)
    acc[:3] = np.iinfo(np.int32).min
    acc[3:50_000] //= 1 << 12  # ties and small values
    b.values[x] = acc
    real = acc.astype(np.float64) * s_in
    want = max(float(np.quantile(np.abs(real), CALIBRATION_QUANTILE)), 1e-12) / INT8_MAX
    assert b._calibrated(x, s_in) == want
    assert b.values[x] is acc and acc[0] == np.iinfo(np.int32).min  # left as it was


def test_channel_bounds_are_the_int64_sums() -> None:
    rng = np.random.default_rng(9)
    w = rng.integers(-128, 128, (16, 8, 3, 3)).astype(np.int8)
    w[0] = -128  # |-128| in the int16 copy
    bias = rng.integers(-(1 << 20), 1 << 20, 16).astype(np.int32)
    b = GraphBuilder("t")
    x = b.input("x", (1, 8, 6, 6), 1.0)
    y = b.conv2d(x, b.const("w", w, 1.0), b.const("b", bias), pad=1)
    want = np.abs(w.reshape(16, -1).astype(np.int64)).sum(axis=1) * 128 + np.abs(
        bias.astype(np.int64))
    assert b.channel_magnitudes(y) == want.tolist()
    assert b.magnitude(y) == int(want.max())
