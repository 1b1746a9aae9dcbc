"""``quant.even_shift``: round half to even (ONNX Runtime's rounding) from ADD, SHR and MAX
alone, judged exhaustively against numpy's ``rint`` (IEEE round half to even), and
``quant.quantize_linear`` against ONNX Runtime's QuantizeLinear."""

from __future__ import annotations

import numpy as np
import pytest

from vta.errors import GraphError
from vta.graph.quant import even_shift, quantize_linear


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
