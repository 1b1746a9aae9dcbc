"""ONNX Runtime's QOperator transformer operators, judged by ONNX Runtime.

``QLinearMul``, ``QLinearSoftmax``, ``QLinearAdd``, ``QLinearConcat`` and ``QLinearAveragePool``
(com.microsoft); the first three are first checked by
exhaustion: ``ort_qop`` / ``ort_add``'s tables against ORT itself on every one of the 256 x 256
stored input pairs (random scales and zero points, int8 and uint8; a scalar operand on either
side), and the softmax on seeded rows of several lengths and axes. Then each operator as ORT's
``quantize_static`` writes it (QOperator; s8, a8, u8) from a small seeded float model, imported
with ORT's arithmetic and compared with ORT (``ORT_DISABLE_ALL``) on every int8 tensor it
exposes; the refusals by name; the QOperator BERT end to end (small here, BERT-tiny
``slow``). Skipped without onnx and onnxruntime.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from vta.cli import main
from vta.errors import OnnxImportError
from vta.graph import interp
from vta.graph.compile import compile_graph
from vta.graph.ir import Lut2, QLinearSoftmax
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import (
    Agreement,
    Format,
    agreement,
    agreement_by_kind,
    bert_tiny,
    calibration_inputs,
    float_model,
    ort_tensors,
    quantize,
    quantize_outputs,
    run_fed,
)
from vta.graph.ort_add import qlinear_add_table
from vta.graph.ort_qop import qlinear_mul_table, qlinear_softmax
from vta.graph.quant import quantize_linear
from vta.run.graph import run_graph

from .conftest import hw

MS = "com.microsoft"
FORMATS = [Format("QOperator", t, False) for t in ("s8", "a8", "u8")]


def _session(nodes: list[Any], ins: list[Any], outs: list[Any], inits: list[Any]) -> Any:
    g = helper.make_graph(nodes, "t", ins, outs, inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid(MS, 1)], ir_version=8)
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _qparams(rng: np.random.Generator, unsigned: bool, n: int) -> tuple[list[float], list[int]]:
    lo = 0 if unsigned else -128
    scales = [float(np.float32(s)) for s in rng.uniform(0.001, 0.1, n)]
    return scales, [int(z) for z in rng.integers(lo, lo + 256, n)]


def _binary(op: str, unsigned: bool, sa: float, za: int, sb: float, zb: int, sc: float,
            zc: int, shape_a: list[int], shape_b: list[int]) -> Any:
    dt, npdt = (TensorProto.UINT8, np.uint8) if unsigned else (TensorProto.INT8, np.int8)
    inits = [numpy_helper.from_array(np.array(v, np.float32), k)
             for k, v in (("sa", sa), ("sb", sb), ("sc", sc))]
    inits += [numpy_helper.from_array(np.array(v, npdt), k)
              for k, v in (("za", za), ("zb", zb), ("zc", zc))]
    node = helper.make_node(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"],
                            domain=MS)
    out = list(np.broadcast_shapes(shape_a, shape_b))
    return _session([node], [helper.make_tensor_value_info("a", dt, shape_a),
                             helper.make_tensor_value_info("b", dt, shape_b)],
                    [helper.make_tensor_value_info("y", dt, out)], inits)


def run_on_requant(q: Any, model: Any) -> tuple[Any, dict[str, np.ndarray], Any]:
    """``q`` imported with ORT's exact arithmetic and run on pynq_requant from one seeded
    calibration input of the float ``model``: the graph, ORT's float feeds of that input
    and the run."""
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    x = calibration_inputs(model, 5, 1)[0]
    ins = {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}
    return g, {v.name: x}, run_graph(compile_graph(g, hw("pynq_requant"), refine=1), ins)


@pytest.mark.parametrize("op", ["QLinearMul", "QLinearAdd"])
@pytest.mark.parametrize("unsigned", [False, True])
def test_binary_tables_are_ort_on_every_input_pair(op: str, unsigned: bool) -> None:
    """Every stored pair (256 x 256), three random scale / zero-point sets; and a scalar
    operand on either side (ORT's broadcast kernels) against the table's column / row."""
    rng = np.random.default_rng(7 + unsigned)
    arith = qlinear_mul_table if op == "QLinearMul" else qlinear_add_table
    lo = 0 if unsigned else -128
    npdt = np.uint8 if unsigned else np.int8
    v = np.arange(lo, lo + 256)
    for _ in range(3):
        (sa, sb, sc), (za, zb, zc) = _qparams(rng, unsigned, 3)
        table = arith(sa, za, sb, zb, sc, zc, unsigned)
        full = _binary(op, unsigned, sa, za, sb, zb, sc, zc, [256, 256], [256, 256])
        a = np.repeat(v[:, None], 256, axis=1).astype(npdt)
        got = full.run(None, {"a": a, "b": a.T.copy()})[0].astype(np.int64)
        assert np.array_equal(got, table), (sa, za, sb, zb, sc, zc)
        scalar_b = _binary(op, unsigned, sa, za, sb, zb, sc, zc, [256], [1])
        scalar_a = _binary(op, unsigned, sa, za, sb, zb, sc, zc, [1], [256])
        for c in (0, 77, 200, 255):
            yb = scalar_b.run(None, {"a": v.astype(npdt), "b": v[c:c + 1].astype(npdt)})[0]
            ya = scalar_a.run(None, {"a": v[c:c + 1].astype(npdt), "b": v.astype(npdt)})[0]
            assert np.array_equal(yb.astype(np.int64), table[:, c])
            assert np.array_equal(ya.astype(np.int64), table[c, :])


@pytest.mark.parametrize("unsigned", [False, True])
def test_softmax_is_ort_on_seeded_rows(unsigned: bool) -> None:
    """``qlinear_softmax`` against ORT's QLinearSoftmax: rows of 7, 16, 128 and 300 values,
    the last and an inner axis, output scale 1/256 (what the quantizer writes) or another,
    random inputs and the extreme rows (all equal; one dominant value: ORT saturates)."""
    rng = np.random.default_rng(3 + unsigned)
    dt, npdt = (TensorProto.UINT8, np.uint8) if unsigned else (TensorProto.INT8, np.int8)
    lo = 0 if unsigned else -128
    for k, d in enumerate((7, 16, 128, 300)):
        axis = -1 if k % 2 == 0 else 0
        shape = [5, d] if axis == -1 else [d, 5]
        sx = float(np.float32(rng.uniform(0.005, 0.3)))
        zx = int(rng.integers(lo, lo + 256))
        sy = 1 / 256 if k < 2 else float(np.float32(rng.uniform(0.002, 0.01)))
        zy = lo if k != 3 else int(rng.integers(lo, lo + 128))
        inits = [numpy_helper.from_array(np.array(sx, np.float32), "sx"),
                 numpy_helper.from_array(np.array(zx, npdt), "zx"),
                 numpy_helper.from_array(np.array(sy, np.float32), "sy"),
                 numpy_helper.from_array(np.array(zy, npdt), "zy")]
        node = helper.make_node("QLinearSoftmax", ["x", "sx", "zx", "sy", "zy"], ["y"],
                                domain=MS, axis=axis, opset=13)
        s = _session([node], [helper.make_tensor_value_info("x", dt, shape)],
                     [helper.make_tensor_value_info("y", dt, shape)], inits)
        xs = [rng.integers(lo, lo + 256, shape).astype(npdt) for _ in range(3)]
        xs.append(np.full(shape, lo, npdt))
        dominant = np.full(shape, lo, npdt)
        dominant[0, 0] = lo + 255
        xs.append(dominant)
        for x in xs:
            want = s.run(None, {"x": x})[0]
            got = qlinear_softmax(x, sx, sy, zy, axis, unsigned)
            assert np.array_equal(got.astype(np.int64), want.astype(np.int64)), (d, axis)


# ---------------------------------------------------------------------- imported from ORT


def _init(name: str, a: np.ndarray) -> Any:
    return numpy_helper.from_array(a, name)


def _model(nodes: list[Any], inits: list[Any], shape: list[int], out: list[int]) -> Any:
    g = helper.make_graph(nodes, "qop", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, out)], inits)
    return float_model(g)


def _w(rng: np.random.Generator, k: int, m: int) -> np.ndarray:
    return rng.normal(0, np.sqrt(1 / k), (k, m)).astype(np.float32)


def _mm(x: str, name: str, w: np.ndarray, inits: list[Any]) -> Any:
    inits.append(_init(f"{name}_w", w))
    return helper.make_node("MatMul", [x, f"{name}_w"], [name])


def mul_model() -> Any:
    """``MatMul(x, w1) * MatMul(x, w2)`` then ``* 0.5``: QLinearMul of two activations and
    of a scalar constant."""
    rng = np.random.default_rng(1)
    inits: list[Any] = [_init("half", np.array(0.5, np.float32))]
    nodes = [_mm("x", "a", _w(rng, 16, 24), inits), _mm("x", "b", _w(rng, 16, 24), inits),
             helper.make_node("Mul", ["a", "b"], ["p"]),
             helper.make_node("Mul", ["p", "half"], ["y"])]
    return _model(nodes, inits, [1, 8, 16], [1, 8, 24])


def add_model() -> Any:
    """A bias ``Add`` of a broadcast constant and an ``Add`` of the scalar 1 after a rank-3
    ``MatMul``: QLinearAdd of a constant tensor and of a scalar."""
    rng = np.random.default_rng(2)
    inits: list[Any] = [_init("bias", rng.normal(0, 0.3, (24,)).astype(np.float32)),
                        _init("one", np.array(1.0, np.float32))]
    nodes = [_mm("x", "a", _w(rng, 16, 24), inits),
             helper.make_node("Add", ["a", "bias"], ["ab"]),
             helper.make_node("Add", ["ab", "one"], ["y"])]
    return _model(nodes, inits, [1, 8, 16], [1, 8, 24])


def attention_model() -> Any:
    """One head of attention: ``softmax(Q @ K^T) @ V`` on [1, 2, 8, 16] (QLinearMatMul of two
    rank-4 activations, QLinearSoftmax)."""
    rng = np.random.default_rng(3)
    inits: list[Any] = []
    nodes = [_mm("x", "q", _w(rng, 16, 16), inits), _mm("x", "k", _w(rng, 16, 16), inits),
             _mm("x", "v", _w(rng, 16, 16), inits),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Softmax", ["s"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    return _model(nodes, inits, [1, 2, 8, 16], [1, 2, 8, 16])


def concat_model() -> Any:
    """Two convolutions of different output ranges joined along the channels: QLinearConcat
    with inputs of their own scales (ORT's rescale table for each that differs)."""
    rng = np.random.default_rng(4)
    inits = [_init("w1", rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32)),
             _init("w2", rng.normal(0, 0.9, (4, 3, 3, 3)).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "w2"], ["c2"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["c1", "c2"], ["y"], axis=1)]
    return _model(nodes, inits, [1, 3, 8, 8], [1, 12, 8, 8])


def pool_model(attrs: dict[str, Any], size: int) -> Any:
    """A convolution then an ``AveragePool`` with ``attrs``: QLinearAveragePool."""
    rng = np.random.default_rng(5)
    inits = [_init("w1", rng.normal(0, 0.3, (8, 3, 3, 3)).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("AveragePool", ["c1"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "qop", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 3, size, size])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], inits)
    return float_model(g)


MODELS = {"mul": mul_model, "add": add_model, "attention": attention_model,
          "concat": concat_model,
          "pool": lambda: pool_model({"kernel_shape": [3, 3], "strides": [1, 1],
                                      "pads": [1, 1, 1, 1]}, 7),
          "pool_include_pad": lambda: pool_model({"kernel_shape": [3, 3], "strides": [2, 2],
                                                  "pads": [1, 1, 1, 1],
                                                  "count_include_pad": 1}, 7),
          "pool_global": lambda: pool_model({"kernel_shape": [7, 7]}, 7)}


def _ops(q: Any) -> set[str]:
    return {n.op_type for n in q.graph.node}


def _judge(model: Any, fmt: Format) -> tuple[Any, Any, Agreement, dict[str, Agreement]]:
    """``model`` quantized by ORT (its float output quantized as the QDQ form does), imported
    with ORT's arithmetic: end-to-end agreement over three seeded inputs, and per kind with
    each operator fed ORT's operands."""
    q = quantize_outputs(quantize(model, fmt, seed=1), model, fmt, seed=1)
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    total = Agreement(0, 0, 0, 0)
    kinds: dict[str, Agreement] = {}
    for x in calibration_inputs(model, 5, 3):
        ort_t = ort_tensors(q, {v.name: x})
        ins = {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}
        a = agreement(g, interp.run_graph(g, ins), ort_t)
        total = Agreement(total.tensors + a.tensors, total.elements + a.elements,
                          total.equal + a.equal, max(total.max_diff, a.max_diff))
        for k, b in agreement_by_kind(g, run_fed(g, ins, ort_t), ort_t).items():
            p = kinds.get(k, Agreement(0, 0, 0, 0))
            kinds[k] = Agreement(p.tensors + b.tensors, p.elements + b.elements,
                                 p.equal + b.equal, max(p.max_diff, b.max_diff))
    return q, g, total, kinds


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.types)
@pytest.mark.parametrize("name", list(MODELS))
def test_qoperator_ops_are_ort_bits(name: str, fmt: Format) -> None:
    """Each operator, fed ORT's operands, gives ORT's bits on every tensor; end to end every
    tensor is ORT's (uint8: ORT's U8S8 QLinearMatMul saturates pairs of products on this
    CPU, which vta's exact dense layer does not model, so the u8 end-to-end run is not
    asserted; each of the operators here is)."""
    q, g, e2e, kinds = _judge(MODELS[name](), fmt)
    want = {"mul": {"QLinearMul"}, "add": {"QLinearAdd"},
            "attention": {"QLinearSoftmax", "QLinearMatMul"}, "concat": {"QLinearConcat"},
            "pool": {"QLinearAveragePool"}, "pool_include_pad": {"QLinearAveragePool"},
            "pool_global": {"QLinearAveragePool"}}[name]
    assert want <= _ops(q)
    for kind, a in kinds.items():
        if kind == "global_avg_pool":  # the existing QLinearGlobalAveragePool path: its
            assert a.max_diff <= 1, a   # fixed-point ratio, within one unit (not ORT's bits)
        elif kind not in ("dense", "conv2d") or fmt.types != "u8":
            assert a.identical, (kind, a)
    if name == "concat":
        assert "concat" in kinds
    if name.startswith("pool"):  # ORT's global path for a window over the whole image
        assert ("global_avg_pool" if name == "pool_global" else "qlinear_avg_pool") in kinds
    if fmt.types != "u8" and name != "pool_global":
        assert e2e.identical, e2e
    if name == "attention":
        assert any(isinstance(n, QLinearSoftmax) for n in g.nodes)
        assert "matmul" in kinds and "qlinear_softmax" in kinds
    if name == "mul":  # a product of two tensors has no ALU form: ORT's table
        assert any(isinstance(n, Lut2) for n in g.nodes)


def test_qoperator_ops_fixed_requant_keeps_the_exact_tables() -> None:
    """With fixed-point requantization (a config without the requant instruction) the
    matmuls approximate, but QLinearMul / QLinearSoftmax / a constant QLinearAdd are still
    ORT's tables (fed ORT's operands: identical)."""
    for name in ("mul", "attention"):
        model = MODELS[name]()
        fmt = FORMATS[1]
        q = quantize_outputs(quantize(model, fmt, seed=1), model, fmt, seed=1)
        g = load_onnx(q, requant="fixed")
        v = g.inputs[0]
        x = calibration_inputs(model, 5, 1)[0]
        ort_t = ort_tensors(q, {v.name: x})
        ins = {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}
        kinds = agreement_by_kind(g, run_fed(g, ins, ort_t), ort_t)
        for kind in ("lut2", "qlinear_softmax"):
            if kind in kinds:
                assert kinds[kind].identical, (name, kind, kinds[kind])


# ---------------------------------------------------------------------- refusals by name


def _qop_model(nodes: list[Any], inits: list[Any], ins: list[Any], out: Any) -> Any:
    g = helper.make_graph(nodes, "refused", ins, [out], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid(MS, 1)], ir_version=8)


def _qparams_inits(prefix: str = "") -> list[Any]:
    return [_init(f"{prefix}s", np.array(0.05, np.float32)),
            _init(f"{prefix}z", np.array(0, np.int8))]


def _softmax_model(**attrs: Any) -> Any:
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"])
    sm = helper.make_node("QLinearSoftmax", ["xq", "s", "z", "ys", "yz"], ["yq"], domain=MS,
                          **attrs)
    dq = helper.make_node("DequantizeLinear", ["yq", "ys", "yz"], ["y"])
    inits = [*_qparams_inits(), _init("ys", np.array(1 / 256, np.float32)),
             _init("yz", np.array(-128, np.int8))]
    return _qop_model([q, sm, dq], inits,
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 8])],
                      helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8]))


@pytest.mark.parametrize(("attrs", "message"), [
    ({"axis": 1, "opset": 12}, "opset 12 with axis 1"),
    ({"axis": -1}, "attribute opset is missing"),
    ({"axis": 3, "opset": 13}, "axis 3 is not an axis of a rank-3 tensor"),
    ({"axis": -1, "opset": 13, "colour": 1}, "attribute colour is not supported for "
                                             "QLinearSoftmax"),
])
def test_softmax_refusals_name_the_attribute(attrs: dict[str, Any], message: str) -> None:
    with pytest.raises(OnnxImportError, match=message):
        load_onnx(_softmax_model(**attrs), requant="ort")


def test_softmax_opset_12_on_the_last_axis_is_taken() -> None:
    g = load_onnx(_softmax_model(axis=2, opset=12), requant="ort")
    assert any(isinstance(n, QLinearSoftmax) and n.axis == 2 for n in g.nodes)


def _two_input_model(op: str, shape_a: list[int], shape_b: list[int], out: list[int]) -> Any:
    qa = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xa"])
    qb = helper.make_node("QuantizeLinear", ["x2", "s", "z"], ["xb"])
    node = helper.make_node(op, ["xa", "s", "z", "xb", "s", "z", "s", "z"], ["yq"],
                            domain=MS if op != "QLinearMatMul" else "")
    dq = helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"])
    return _qop_model([qa, qb, node, dq], _qparams_inits(),
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape_a),
                       helper.make_tensor_value_info("x2", TensorProto.FLOAT, shape_b)],
                      helper.make_tensor_value_info("y", TensorProto.FLOAT, out))


def test_broadcast_between_activations_is_refused_by_name() -> None:
    with pytest.raises(OnnxImportError, match=r"QLinearMul.*broadcasting between two "
                                              "activations"):
        load_onnx(_two_input_model("QLinearMul", [4, 8], [1, 8], [4, 8]), requant="ort")
    with pytest.raises(OnnxImportError, match=r"QLinearMatMul.*same leading dimensions"):
        load_onnx(_two_input_model("QLinearMatMul", [2, 4, 8], [1, 8, 4], [2, 4, 4]),
                  requant="ort")


def test_concat_refusals_name_the_input() -> None:
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"])
    cat = helper.make_node("QLinearConcat", ["s", "z", "xq", "s", "z", "c", "s", "z"], ["yq"],
                           domain=MS, axis=1)
    dq = helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"])
    m = _qop_model([q, cat, dq], [*_qparams_inits(), _init("c", np.ones((4, 8), np.int8))],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 16]))
    with pytest.raises(OnnxImportError, match="input c is a constant"):
        load_onnx(m)
    m.graph.node[1].attribute[0].i = 5
    with pytest.raises(OnnxImportError, match="axis 5 is not an axis of a rank-2 tensor"):
        load_onnx(m)


def test_both_constant_operands_are_refused_by_name() -> None:
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"])
    mul = helper.make_node("QLinearMul", ["c", "s", "z", "c", "s", "z", "s", "z"], ["cq"],
                           domain=MS)
    add = helper.make_node("QLinearAdd", ["xq", "s", "z", "cq", "s", "z", "s", "z"], ["yq"],
                           domain=MS)
    dq = helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"])
    m = _qop_model([q, mul, add, dq], [*_qparams_inits(), _init("c", np.array([3], np.int8))],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])],
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8]))
    with pytest.raises(OnnxImportError, match="both operands are constants"):
        load_onnx(m, requant="ort")


@pytest.mark.parametrize(("attrs", "message"), [
    ({"kernel_shape": [2, 2], "channels_last": 1}, "channels_last 1 is not supported"),
    ({"kernel_shape": [2, 2], "ceil_mode": 1}, "ceil_mode 1 is not supported"),
    ({"kernel_shape": [2, 2], "pads": [0, 0, 1, 1]}, "asymmetric padding is not supported"),
    ({"kernel_shape": [2, 2], "colour": 1}, "attribute colour is not supported for "
                                            "QLinearAveragePool"),
])
def test_average_pool_refusals_name_the_attribute(attrs: dict[str, Any], message: str,
                                                  tmp_path: Any,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """Refused by name, in the library and by the CLI (status 2, no traceback)."""
    q = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"])
    node = helper.make_node("QLinearAveragePool", ["xq", "s", "z", "s", "z"], ["yq"],
                            domain=MS, **attrs)
    dq = helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"])
    m = _qop_model([q, node, dq], _qparams_inits(),
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 4, 4])],
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 2, 2]))
    with pytest.raises(OnnxImportError, match=message):
        load_onnx(m, requant="ort")
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    assert main(["run", "--onnx", str(path)]) == 2
    err = capsys.readouterr().err
    assert message.split(" is")[0] in err and "Traceback" not in err


# ---------------------------------------------------------------------- BERT, QOperator

SMALL = {"layers": 1, "hidden": 32, "heads": 2, "ffn": 64, "seq": 16}


@pytest.mark.parametrize("types", ["s8", "a8"])
def test_small_qoperator_bert_is_ort_bits_on_the_interpreter(types: str) -> None:
    """The QOperator BERT (every operator it holds: QLinearMatMul of rank 3 and 4,
    QLinearAdd of a constant and of activations, QLinearMul, QLinearSoftmax, the float
    islands), end to end with ORT's arithmetic: every int8 tensor ORT computes."""
    model = bert_tiny(0, **SMALL)
    fmt = Format("QOperator", types, False)
    q = quantize_outputs(quantize(model, fmt, seed=0), model, fmt, seed=0)
    assert {"QLinearSoftmax", "QLinearMul", "QLinearAdd", "QLinearMatMul"} <= _ops(q)
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    for x in calibration_inputs(model, 5, 2):
        ort_t = ort_tensors(q, {v.name: x})
        ins = {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}
        a = agreement(g, interp.run_graph(g, ins), ort_t)
        assert a.identical and a.tensors >= 20, a


def test_small_qoperator_bert_on_the_simulator() -> None:
    """pynq_requant: dense layers (attention's too, zero points folded into an extended K)
    and the integer adds on the accelerator, the tables, softmax and float islands on the
    host by name; every stored tensor bit-exact against the interpreter and every int8 tensor
    ORT's."""
    model = bert_tiny(0, **SMALL)
    fmt = Format("QOperator", "a8", False)
    q = quantize_outputs(quantize(model, fmt, seed=0), model, fmt, seed=0)
    g, feeds, r = run_on_requant(q, model)
    s = r.summary()
    assert r.passed, s["verdict"]
    on_vta = {row["ops"][0] for row in s["steps"] if row["placement"] == "vta"}
    assert "dense" in on_vta
    host = {row["ops"][0]: row["reason"] for row in s["steps"] if row["placement"] == "cpu"}
    assert "QLinearSoftmax" in host["qlinear_softmax"] and "table" in host["lut2"]
    a = agreement(g, {**r.reference, **r.outputs}, ort_tensors(q, feeds))
    assert a.identical, a


@pytest.mark.parametrize("op", ["MatMul", "Conv"])
def test_dynamic_quantization_is_refused_by_name(op: str) -> None:
    """ORT's ``quantize_dynamic`` writes DynamicQuantizeLinear -> MatMulInteger /
    ConvInteger -> Cast -> Mul: scales known only at run time, refused naming the operator;
    a MatMulInteger met on its own is refused by name too."""
    import tempfile
    from pathlib import Path

    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    rng = np.random.default_rng(0)
    if op == "MatMul":
        w, shape, out = rng.normal(0, 0.3, (16, 8)), [4, 16], [4, 8]
    else:
        w, shape, out = rng.normal(0, 0.3, (4, 3, 3, 3)), [1, 3, 8, 8], [1, 4, 6, 6]
    m = _model([helper.make_node(op, ["x", "w"], ["y"])], [_init("w", w.astype(np.float32))],
               shape, out)
    with tempfile.TemporaryDirectory() as d:
        onnx.save(m, str(Path(d) / "f.onnx"))
        quantize_dynamic(str(Path(d) / "f.onnx"), str(Path(d) / "q.onnx"),
                         weight_type=QuantType.QInt8 if op == "MatMul" else QuantType.QUInt8)
        q = onnx.load(str(Path(d) / "q.onnx"))
    assert f"{op}Integer" in _ops(q)
    with pytest.raises(OnnxImportError, match=r"feeds DynamicQuantizeLinear .*dynamic "
                                              "quantization"):
        load_onnx(q)
    qz = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"])
    mi = helper.make_node("MatMulInteger", ["xq", "wq"], ["acc"])
    cast = helper.make_node("Cast", ["acc"], ["y"], to=TensorProto.FLOAT)
    g = _qop_model([qz, mi, cast], [*_qparams_inits(),
                                    _init("wq", np.ones((16, 8), np.int8))],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
                   helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 8]))
    with pytest.raises(OnnxImportError, match=r"\(MatMulInteger\): MatMulInteger .* is not "
                                              r"supported"):
        load_onnx(g)


def test_concat_on_the_simulator() -> None:
    """The convolutions on the accelerator, a rescale on the ALU where one is proven, the
    concat on the host (a layout operator); ORT's bits."""
    model = concat_model()
    fmt = FORMATS[1]
    q = quantize(model, fmt, seed=1)
    g, feeds, r = run_on_requant(q, model)
    s = r.summary()
    assert r.passed, s["verdict"]
    host = {row["ops"][0]: row["reason"] for row in s["steps"] if row["placement"] == "cpu"}
    assert "layout operator" in host["concat"]
    assert agreement(g, {**r.reference, **r.outputs}, ort_tensors(q, feeds)).identical
