"""The graph interpreter: each operator against an independent formulation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vta.compiler.ops import conv2d as conv2d_module
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_acc
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.ir import split_shift


@given(st.integers(1, 3), st.integers(1, 9), st.integers(1, 5), st.integers(1, 3),
       st.integers(1, 2), st.integers(0, 1), st.integers(0, 2 ** 32 - 1))
def test_conv_matches_its_definition(ic: int, hw_: int, oc: int, k: int, s: int,
                                     p: int, seed: int) -> None:
    """The one convolution reference (ops.conv2d.conv2d_int32, which the graph interpreter and
    the layer runs read) against the definition written as loops over Python ints, wrapped to
    int32 at the end: int8 operands (the float64 BLAS path) and int32 operands near the limits
    (the int64 path, whose partial sums wrap)."""
    if p >= k or hw_ + 2 * p < k:
        return
    rng = np.random.default_rng(seed)
    oh = (hw_ + 2 * p - k) // s + 1
    for lo, hi, dt in ((-128, 128, np.int8), (-(2 ** 31), 2 ** 31, np.int32)):
        x = rng.integers(lo, hi, (2, ic, hw_, hw_), dtype=dt)
        w = rng.integers(lo, hi, (oc, ic, k, k), dtype=dt)
        want = np.zeros((2, oc, oh, oh), np.int64)
        xs, ws = x.tolist(), w.tolist()
        for b, o, y, z in np.ndindex(*want.shape):
            t = sum(xs[b][c][y * s + r - p][z * s + q - p] * ws[o][c][r][q]
                    for c in range(ic) for r in range(k) for q in range(k)
                    if 0 <= y * s + r - p < hw_ and 0 <= z * s + q - p < hw_)
            want[b, o, y, z] = (t + 2 ** 31) % 2 ** 32 - 2 ** 31
        spec = Conv2dSpec(2, ic, hw_, hw_, oc, k, k, s, p)
        assert np.array_equal(interp.conv2d_int32(x, w, s, p), want)
        got = conv2d_acc(x, w, spec)
        assert np.array_equal(got, want) and got.flags.c_contiguous


def test_conv_path_is_decided_by_the_dtypes_before_the_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """int8 by int8 sums exactly in float32 whatever the values (decided without reading
    them); int32 operands are read: small values take float32 too, larger ones float64 or
    int64; the result is the same exact one either way."""
    rng = np.random.default_rng(0)
    x8 = rng.integers(-128, 128, (1, 3, 6, 6), dtype=np.int8)
    w8 = rng.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    want = interp.conv2d_int32(x8.astype(np.int32), w8.astype(np.int32), 1, 1)
    with monkeypatch.context() as m:
        m.setattr(conv2d_module, "_max_abs", lambda a: pytest.fail("values read"))
        assert conv2d_module._product_bound(x8, w8, 27) == 128 * 128
        assert np.array_equal(interp.conv2d_int32(x8, w8, 1, 1), want)
    x32, w32 = x8.astype(np.int32), w8.astype(np.int32)
    mx, mw = int(np.abs(x32).max()), int(np.abs(w32).max())
    assert conv2d_module._product_bound(x32, w32, 27) == mx * mw  # (read: small)
    assert conv2d_module._product_bound(x32 << 20, w32 << 20, 27) == mx * mw << 40


def test_float32_rows_keep_every_partial_sum_exact() -> None:
    """As many rows as keep a float32 sum of products within 2**24 (every integer there is a
    float32), at least one where a product itself is exact, none where it is not."""
    assert conv2d_module.float32_rows(128 * 128, 4608) == 1024  # int8 by int8
    assert conv2d_module.float32_rows(128 * 128, 27) == 27
    assert conv2d_module.float32_rows(0, 9) == 9
    assert conv2d_module.float32_rows(1 << 24, 9) == 1
    assert conv2d_module.float32_rows((1 << 24) + 1, 9) == 0
    for product in (1, 3, 16384, 16129, 1 << 20):
        rows = conv2d_module.float32_rows(product, 1 << 30)
        assert product * rows <= 1 << 24 < product * (rows + 1)


def test_conv_sums_more_taps_than_float32_holds_exactly(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """int8 by int8 over 2,304 taps, products of +-127/128 of one sign per output: sums past
    2**24 with odd parts, which one float32 product of all taps rounds (off by hundreds) and
    the 1,024-tap parts added in int32 do not: equal to the int64 sums."""
    rng = np.random.default_rng(1)
    x = rng.choice(np.array([-128, 127], np.int8), (1, 256, 5, 5))
    w = np.where(x[:, :, :3, :3] > 0, np.int8(127), np.int8(-128)).repeat(4, axis=0)
    want = interp.conv2d_int32(x.astype(np.int64), w.astype(np.int64), 1, 1)
    assert int(np.abs(want).max()) > 2 * (1 << 24)
    assert np.array_equal(interp.conv2d_int32(x, w, 1, 1), want)
    with monkeypatch.context() as m:  # all 2,304 taps in one float32 product: rounded
        m.setattr(conv2d_module, "float32_rows", lambda product, rows: rows)
        assert not np.array_equal(interp.conv2d_int32(x, w, 1, 1), want)


@given(st.integers(-(2 ** 31), 2 ** 31 - 1), st.integers(1, 31))
def test_rounding_shift_rounds_half_up_without_overflow(t: int, shift: int) -> None:
    """The split rounding shift is floor((t + 2**(shift-1)) / 2**shift) computed exactly, for
    every int32 ``t`` (the direct form would wrap near the top)."""
    got = int(interp.rounding_shift(np.array([t], np.int32), shift)[0])
    pre, _ = split_shift(shift)
    exact = (t + (1 << (shift - 1))) >> shift
    if pre == 0 and t + (1 << (shift - 1)) >= 1 << 31:  # the direct sum wraps: so do we
        exact = (t + (1 << (shift - 1)) - (1 << 32)) >> shift
    assert got == exact


def test_operators_on_a_hand_computed_example() -> None:
    b = GraphBuilder("t")
    x = b.input("x", (1, 1, 4, 4), 1.0)
    y = b.input("y", (1, 1, 4, 4), 1.0)
    a = b.add(x, y, scale=2.0)  # (x + y) / 2, rounded half up
    m = b.max_pool2d(x, 3, 2, 1)
    g = b.global_avg_pool(x, scale=1.0)
    r = b.relu(x)
    c = b.clip(x, -2, 3)
    graph = b.build([a, m, g, r, c])
    xv = np.arange(-8, 8, dtype=np.int8).reshape(1, 1, 4, 4)
    yv = np.full((1, 1, 4, 4), 3, np.int8)
    env = interp.run_graph(graph, {"x": xv, "y": yv})
    assert np.array_equal(env[a], np.floor((xv.astype(int) + 3) / 2 + 0.5).astype(np.int8))
    # max-pool pads with -inf: the corner window of all-negative values keeps its maximum
    assert env[m].tolist() == [[[[-3, -1], [5, 7]]]]
    assert env[g].tolist() == [[0]]  # the mean, -8 / 16, rounds half up to 0
    assert np.array_equal(env[r], np.maximum(xv, 0))
    assert np.array_equal(env[c], np.clip(xv, -2, 3))
