"""``quant.even_shift``: round half to even (ONNX Runtime's rounding) from ADD, SHR and MAX
alone, judged exhaustively against numpy's ``rint`` (IEEE round half to even), and
``quant.quantize_linear`` against ONNX Runtime's QuantizeLinear."""

from __future__ import annotations

import numpy as np
import pytest

from vta.errors import GraphError
from vta.graph.quant import even_shift, ort_requantize, quantize_linear


@pytest.mark.parametrize("shift", [1, 2, 3, 7, 15, 20])
def test_even_shift_is_round_half_to_even(shift: int) -> None:
    span = 1 << (shift + 3)
    t = np.arange(-span, span + 1, dtype=np.int64)
    t = np.concatenate([t, [2**31 - 1 - 2**shift, -2**31]])
    want = np.rint(t.astype(np.float64) / 2.0**shift).astype(np.int64)
    assert np.array_equal(even_shift(t, shift), want)


def test_even_shift_refuses_shift_0() -> None:
    with pytest.raises(GraphError, match="at least 1"):
        even_shift(np.zeros(1, np.int64), 0)


def test_quantize_linear_is_onnx_runtimes() -> None:
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    from vta.graph.onnx_ort import ort_tensors

    h = onnx.helper
    x = np.random.default_rng(0).standard_normal((4, 1000)).astype(np.float32) * 3
    x[0, :8] = [0.05, 0.15, -0.05, -0.15, 0.25, 12.7, -12.85, 1e9]  # ties and saturation
    for scale in (0.1, 0.0371, 2.0**-4):
        m = h.make_model(h.make_graph(
            [h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "q",
            [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4, 1000])],
            [h.make_tensor_value_info("y", onnx.TensorProto.INT8, [4, 1000])],
            [onnx.numpy_helper.from_array(np.float32(scale), "s"),
             onnx.numpy_helper.from_array(np.int8(0), "z")]),
            opset_imports=[h.make_opsetid("", 17)])
        assert np.array_equal(quantize_linear(x, scale), ort_tensors(m, {"x": x})["y"])


def test_ort_requantize_is_float32_arithmetic_in_integers() -> None:
    """``ort_requantize`` (integers only) equals numpy's float32 ``rint(float32(acc) *
    float32(ratio))`` over the whole int32 range and many ratios (ties included)."""
    rng = np.random.default_rng(1)
    acc = np.concatenate([rng.integers(-2**31, 2**31, 20000), rng.integers(-5000, 5000, 20000),
                          [0, 1, -1, 2**31 - 1, -2**31, 2**24 + 1, -(2**24 + 3)]])
    ratios = [*rng.uniform(1e-5, 0.05, 40), 0.5, 0.25, 2.0**-13, 3.0, 0.1, 1e-3]
    for r in ratios:
        f = np.rint(acc.astype(np.float32) * np.float32(r)).astype(np.float64)
        want = np.clip(f, -128, 127).astype(np.int64)
        assert np.array_equal(ort_requantize(acc, float(r)), want), r
    for r in (0.5, 0.25, 2.0**-13):  # ties
        t = np.arange(-3000, 3000)
        want = np.clip(np.rint(t.astype(np.float32) * np.float32(r)), -128, 127)
        assert np.array_equal(ort_requantize(t, r), want.astype(np.int64))
