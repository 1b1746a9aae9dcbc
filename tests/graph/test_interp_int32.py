"""The interpreter's integer steps in int32 arithmetic (``interp.rounding_shift``,
``scale_round``, ``_requantize``, ``_add``, a convolution's bias) equal the definition written
in int64 with a wrap to int32 after every step (``interp.wrap32``), on operands over the whole
int32 range where the sums and products wrap, and leave their operands as they were."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph import interp
from vta.graph import ir as G
from vta.graph.interp import wrap32

_RNG = np.random.default_rng(11)
_I32 = _RNG.integers(-(1 << 31), 1 << 31, (2, 3, 5, 7), dtype=np.int64).astype(np.int32)
_I8 = _RNG.integers(-128, 128, (2, 3, 5, 7)).astype(np.int8)


def _shift64(t: np.ndarray, shift: int) -> np.ndarray:
    pre, post = G.split_shift(shift)
    t = t.astype(np.int32) >> np.int32(pre)
    t = wrap32(t.astype(np.int64) + (1 << (post - 1)))
    return t >> np.int32(post)


def _final64(y: np.ndarray, zero: int, lo: int, hi: int) -> np.ndarray:
    return np.clip(wrap32(y.astype(np.int64) + zero), lo, hi).astype(np.int8)


@pytest.mark.parametrize("shift", [1, 7, 15, 16, 31])
@pytest.mark.parametrize("mult", [1, 3, 32767, 123_456_789])
def test_scale_round_is_the_wrapping_definition(mult: int, shift: int) -> None:
    before = _I32.copy()
    want = _shift64(wrap32(_I32.astype(np.int64) * mult), shift)
    got = interp.scale_round(_I32, mult, shift)
    assert got.dtype == np.int32 and np.array_equal(got, want)
    assert np.array_equal(_I32, before)


@pytest.mark.parametrize("zero", [0, 5, -128, (1 << 31) - 1])
def test_requantize_is_the_wrapping_definition(zero: int) -> None:
    x = G.Value("x", G.TensorType(_I32.shape, "int32"))
    out = G.Value("y", G.TensorType(_I32.shape, "int8", scale=1.0, zero=zero))
    node = G.Requantize(x, mult=3, shift=9, lo=-100, hi=90, out=out, zero=zero)
    want = _final64(_shift64(wrap32(_I32.astype(np.int64) * 3), 9), zero, -100, 90)
    got = interp.eval_node(node, {x: _I32})
    assert np.array_equal(got, want)


@pytest.mark.parametrize(("za", "zb", "ma", "mb", "offset", "zero"), [
    (0, 0, 1, 2, 0, 0), (3, -7, 32767, 1 << 20, 12345, -3), (127, -128, -5, (1 << 31) - 1,
                                                               -(1 << 31), (1 << 31) - 1)])
@pytest.mark.parametrize("channel_offsets", [False, True])
def test_add_is_the_wrapping_definition(za: int, zb: int, ma: int, mb: int, offset: int,
                                        zero: int, channel_offsets: bool) -> None:
    a = G.Value("a", G.TensorType(_I8.shape, "int8", scale=1.0, zero=za))
    b = G.Value("b", G.TensorType(_I8.shape, "int8", scale=1.0, zero=zb))
    offs = _RNG.integers(-(1 << 31), 1 << 31, _I8.shape[1], dtype=np.int64).astype(np.int32)
    ov = G.Value("o", G.TensorType(offs.shape, "int32", "C"), offs) if channel_offsets else None
    out = G.Value("y", G.TensorType(_I8.shape, "int8", scale=1.0, zero=zero))
    bv = _I8[::-1].copy()
    node = G.Add(a, b, mult_a=ma, mult_b=mb, shift=13, lo=-128, hi=127, out=out, zero_a=za,
                 zero_b=zb, zero=zero, offset=offset, offsets=ov)
    p = wrap32((_I8.astype(np.int64) - za) * ma)
    q = wrap32((bv.astype(np.int64) - zb) * mb)
    t = wrap32(p.astype(np.int64) + q + offset)
    if channel_offsets:
        t = wrap32(t.astype(np.int64) + offs.astype(np.int64)[None, :, None, None])
    want = _final64(_shift64(t, 13), zero, -128, 127)
    env = {a: _I8, b: bv, **({ov: offs} if ov is not None else {})}
    assert np.array_equal(interp.eval_node(node, env), want)


def test_conv_bias_wraps_in_place() -> None:
    x = _I8[:1]
    w = _RNG.integers(-128, 128, (4, 3, 3, 3)).astype(np.int8)
    bias = np.array([(1 << 31) - 1, -(1 << 31), 7, -7], np.int32)
    xv = G.Value("x", G.TensorType(x.shape, "int8", scale=1.0))
    wv = G.Value("w", G.TensorType(w.shape, "int8", "OIHW", 1.0), w)
    bv = G.Value("b", G.TensorType(bias.shape, "int32", "C"), bias)
    out = G.Value("y", G.TensorType((1, 4, 5, 7), "int32", scale=1.0))
    node = G.Conv2d(xv, wv, bv, stride=1, pad=1, out=out)
    acc = interp.conv2d_int32(x, w, 1, 1)
    want = wrap32(acc.astype(np.int64) + bias.astype(np.int64)[None, :, None, None])
    assert np.array_equal(interp.eval_node(node, {xv: x, wv: w, bv: bias}), want)
    assert bias[0] == (1 << 31) - 1
