"""ONNX import of damaged, invalid and unusual models: each is a named ``OnnxImportError``
(never a traceback, never an empty graph that passes), and every Conv / pooling attribute is
honored (``auto_pad`` computed as the ONNX specification says) or refused by name. Judged by
ONNX Runtime where the model is valid (skipped without onnx / onnxruntime)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vta.errors import OnnxImportError  # noqa: E402
from vta.graph import interp  # noqa: E402
from vta.graph.ir import Conv2d  # noqa: E402
from vta.graph.onnx_attrs import same_pads  # noqa: E402
from vta.graph.onnx_import import load_onnx  # noqa: E402
from vta.graph.onnx_ort import agreement, ort_tensors  # noqa: E402
from vta.graph.quant import quantize_linear  # noqa: E402

RNG = np.random.default_rng(7)
W = RNG.integers(-40, 40, (4, 4, 3, 3), dtype=np.int8)


def conv_model(conv: dict | None = None, pool: dict | None = None, opset: int = 17,
               w: np.ndarray = W) -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv(**conv) -> Q -> DQ -> MaxPool(**pool) -> Q -> y, scales 2**-k."""
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.float32(0.25), "s"),
             numpy_helper.from_array(np.float32(0.0625), "sw"),
             numpy_helper.from_array(np.float32(0.5), "sy"),
             numpy_helper.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "sw", "z"], ["wf"]),
             helper.make_node("Conv", ["xf", "wf"], ["c"], **(conv or {})),
             helper.make_node("QuantizeLinear", ["c", "sy", "z"], ["cq"]),
             helper.make_node("DequantizeLinear", ["cq", "sy", "z"], ["cf"]),
             helper.make_node("MaxPool", ["cf"], ["p"], **(pool or {"kernel_shape": [1, 1]})),
             helper.make_node("QuantizeLinear", ["p", "sy", "z"], ["y"])]
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.INT8, ["n", "c", "h", "w"])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


# ---------------------------------------------------------------------------- damaged files


def test_a_zero_byte_file_is_named(tmp_path: Path) -> None:
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(OnnxImportError, match=r"empty\.onnx: the file is empty \(0 bytes\)"):
        load_onnx(p)


def test_a_model_without_a_graph_is_named(tmp_path: Path) -> None:
    p = tmp_path / "nograph.onnx"
    p.write_bytes(helper.make_opsetid("", 17).SerializeToString())  # parses as a ModelProto
    with pytest.raises(OnnxImportError, match=r"nograph\.onnx: the model has no graph"):
        load_onnx(p)
    with pytest.raises(OnnxImportError, match="the ONNX model: the model has no graph"):
        load_onnx(onnx.ModelProto())


def test_an_empty_graph_is_named() -> None:
    m = helper.make_model(helper.make_graph([], "hollow", [], []))
    with pytest.raises(OnnxImportError, match="graph 'hollow' is empty \\(no nodes\\)"):
        load_onnx(m)
    m = conv_model()
    del m.graph.output[:]
    with pytest.raises(OnnxImportError, match="graph 'm' has no outputs"):
        load_onnx(m)


def test_truncated_raw_data_is_named() -> None:
    m = conv_model()
    m.graph.initializer[0].raw_data = numpy_helper.from_array(W).raw_data[:10]
    with pytest.raises(OnnxImportError, match=r"checker rejects the model: .*tensor name: w\) "
                                              r"raw_data size \(10 bytes\) is too small"):
        load_onnx(m)


def test_checker_invalid_models_are_named() -> None:
    with pytest.raises(OnnxImportError, match="checker rejects the model: No Op registered for "
                                              "QuantizeLinear with domain_version of 7"):
        load_onnx(conv_model(opset=7))
    m = conv_model()
    m.graph.node[6].CopyFrom(helper.make_node("Flatten", ["cf"], ["p"], axis=7))
    with pytest.raises(OnnxImportError, match=r"checker rejects the model: .*axis"):
        load_onnx(m)


def test_a_kernel_shape_contradicting_the_weights_is_named() -> None:
    with pytest.raises(OnnxImportError, match=r"ONNX node 'c' \(Conv\): kernel_shape \[5, 5\] "
                                              r"contradicts the weights' kernel \[3, 3\]"):
        load_onnx(conv_model({"kernel_shape": [5, 5]}))


# ---------------------------------------------------------------------------- attributes


@pytest.mark.parametrize("size,kernel,stride,upper,want", [
    (8, 3, 1, True, (1, 1)), (8, 2, 1, True, (0, 1)), (8, 2, 1, False, (1, 0)),
    (8, 3, 2, True, (0, 1)), (7, 3, 2, True, (1, 1)), (8, 1, 1, True, (0, 0))])
def test_same_pads_follow_the_onnx_specification(size: int, kernel: int, stride: int,
                                                 upper: bool, want: tuple[int, int]) -> None:
    assert same_pads(size, kernel, stride, upper) == want


def _run(m: onnx.ModelProto, x: np.ndarray) -> np.ndarray:
    g = load_onnx(m)
    v = g.inputs[0]
    return interp.run_graph(g, {v.name: quantize_linear(x, v.type.scale)})[g.outputs[0]]


@pytest.mark.parametrize("auto", ["SAME_UPPER", "SAME_LOWER"])
def test_same_padding_is_honored_and_judged_by_onnx_runtime(auto: str) -> None:
    """auto_pad SAME_* on a 3x3 conv and a 3x3 max-pool pads 1 on every side: the same graph
    as explicit pads, and ONNX Runtime's answer (it used to be imported as padding 0)."""
    ort_tensors = pytest.importorskip("vta.graph.onnx_ort").ort_tensors
    pytest.importorskip("onnxruntime")
    same = conv_model({"auto_pad": auto}, {"kernel_shape": [3, 3], "auto_pad": auto})
    explicit = conv_model({"pads": [1] * 4}, {"kernel_shape": [3, 3], "pads": [1] * 4})
    g = load_onnx(same)
    assert [(n.op, getattr(n, "pad", None)) for n in g.nodes] == [
        ("conv2d", 1), ("requantize", None), ("max_pool2d", 1)]
    x = np.random.default_rng(3).standard_normal((1, 4, 8, 8)).astype(np.float32) * 8
    got = _run(same, x)
    assert np.array_equal(got, _run(explicit, x))
    want = ort_tensors(same, {"x": x})["y"]
    # every ratio here is a power of two; vta rounds ties up, ORT to even: at most 1 unit
    assert got.shape == want.shape and np.abs(got.astype(int) - want).max() <= 1
    assert np.mean(got == want) > 0.9


def test_valid_padding_is_zero() -> None:
    g = load_onnx(conv_model({"auto_pad": "VALID"}))
    assert g.nodes[0].pad == 0 and g.outputs[0].type.shape == (1, 4, 6, 6)


@pytest.mark.parametrize("conv,pool,match", [
    ({"auto_pad": "SAME_UPPER", "kernel_shape": [2, 2]}, None, None),
    ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, None,
     r"'c' \(Conv\): pads \[1, 1, 0, 0\] \(top, left, bottom, right\) \(auto_pad SAME_LOWER\): "
     r"asymmetric padding is not supported"),
    ({"pads": [1, 1, 0, 0]}, None, r"'c' \(Conv\): pads \[1, 1, 0, 0\] .*: asymmetric"),
    ({"dilations": [2, 2]}, None, r"'c' \(Conv\): dilations \[2, 2\] are not supported"),
    ({"strides": [1, 2]}, None, r"'c' \(Conv\): kernel_shape \[3, 3\] and strides \[1, 2\]"),
    (None, {"kernel_shape": [2, 2], "ceil_mode": 1}, r"'p' \(MaxPool\): ceil_mode 1"),
    (None, {"kernel_shape": [2, 2], "storage_order": 1}, r"'p' \(MaxPool\): storage_order 1"),
    (None, {"kernel_shape": [3, 3], "auto_pad": "SAME_UPPER", "strides": [2, 2]},
     r"'p' \(MaxPool\): pads \[0, 0, 1, 1\] .*\(auto_pad SAME_UPPER\)"),
], ids=["same-even-kernel", "same-lower-stride2", "pads", "dilations", "strides", "ceil_mode",
        "storage_order", "pool-same-stride2"])
def test_unsupported_attributes_are_refused_by_name(conv: dict | None, pool: dict | None,
                                                    match: str | None) -> None:
    if conv and conv.get("kernel_shape") == [2, 2]:
        w = W[:, :, :2, :2].copy()
        with pytest.raises(OnnxImportError, match=r"'c' \(Conv\): pads \[0, 0, 1, 1\] .*"
                                                  r"\(auto_pad SAME_UPPER\)"):
            load_onnx(conv_model(conv, pool, w=w))
        return
    with pytest.raises(OnnxImportError, match=match):
        load_onnx(conv_model(conv, pool))


def test_groups_are_honored_and_judged_by_onnx_runtime() -> None:
    """``group`` 2 (and 4: depthwise) imports as a grouped conv2d whose integers are ORT's."""
    pytest.importorskip("onnxruntime")
    for groups in (2, 4):
        m = conv_model({"group": groups, "pads": [1, 1, 1, 1]}, w=W[:, :4 // groups].copy())
        g = load_onnx(m, requant="ort")  # ORT's rounding (half to even) too
        (conv,) = [n for n in g.nodes if isinstance(n, Conv2d)]
        assert conv.groups == groups
        x = np.random.default_rng(groups).standard_normal((1, 4, 8, 8)).astype(np.float32)
        v = g.inputs[0]
        env = interp.run_graph(g, {v: quantize_linear(x, v.type.scale or 1.0, v.type.zero)})
        a = agreement(g, env, ort_tensors(m, {v.name: x}))
        assert a.identical, a


def test_groups_that_do_not_match_the_weights_are_refused_by_name() -> None:
    m = conv_model({"group": 2})  # weights with all 4 input channels: 4 * 2 != 4
    with pytest.raises(OnnxImportError, match=r"(group|channels)"):
        load_onnx(m)


def test_an_attribute_the_importer_does_not_read_is_refused() -> None:
    m = conv_model()
    m.graph.node[3].attribute.append(helper.make_attribute("foo", 1))
    with pytest.raises(OnnxImportError):  # the checker or the importer, both by name
        load_onnx(m)
    m = conv_model()
    m.graph.node[0].attribute.append(helper.make_attribute("saturate", 1))
    m.opset_import[0].version = 21
    load_onnx(m)  # a known attribute (QuantizeLinear's saturate, int8 ignores it) is read


def test_a_flatten_that_is_not_n_c_is_refused() -> None:
    """Flatten axis=2 of a pooled (1, 4, 1, 1) tensor is (4, 1), not (N, C): refused by name
    (it used to be accepted as the (N, C) no-op)."""
    m = conv_model(pool={"kernel_shape": [6, 6]})  # (1, 4, 6, 6) -> (1, 4, 1, 1)
    m.graph.node.append(helper.make_node("DequantizeLinear", ["y", "sy", "z"], ["yf"]))
    m.graph.node.append(helper.make_node("Flatten", ["yf"], ["flat"], axis=2))
    m.graph.node.append(helper.make_node("QuantizeLinear", ["flat", "sy", "z"], ["out"]))
    m.graph.output[0].CopyFrom(helper.make_tensor_value_info("out", TensorProto.INT8,
                                                             ["a", "b"]))
    with pytest.raises(OnnxImportError, match=r"'flat' \(Flatten\): Flatten of \[1, 4, 1, 1\] to "
                                              r"\[4, 1\]: only the \(N, C, 1, 1\) -> \(N, C\)"):
        load_onnx(m)
