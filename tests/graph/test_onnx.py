"""ONNX import: a small quantized model built inside the test, in the QDQ form and with the
QLinear operators; its results agree with ONNX's reference evaluator within one unit (the
importer turns float scale ratios into fixed-point multipliers), and the imported graph runs
bit-exact on the accelerator: with arbitrary scales on pynq_mul (its multipliers need ALU MUL;
VTA's own pynq refuses the graph by node and scale), with power-of-two scales on pynq (every
requantization a shift). Skipped without the onnx extra."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vta.errors import GraphError, OnnxImportError  # noqa: E402
from vta.graph import interp  # noqa: E402
from vta.graph.compile import compile_graph  # noqa: E402
from vta.graph.onnx_import import load_onnx  # noqa: E402
from vta.run.graph import run_graph  # noqa: E402

from .conftest import hw  # noqa: E402

RNG = np.random.default_rng(21)
W1 = RNG.integers(-60, 60, (16, 16, 3, 3), dtype=np.int8)
B1 = RNG.integers(-300, 300, (16,), dtype=np.int32)
W2 = RNG.integers(-60, 60, (16, 16, 3, 3), dtype=np.int8)
WF = RNG.integers(-60, 60, (10, 16), dtype=np.int8)


def _c(name: str, a: np.ndarray | float) -> TensorProto:
    arr = np.asarray(a, dtype=np.float32) if isinstance(a, float) else a
    return numpy_helper.from_array(arr, name)


#: the QDQ model's scales: arbitrary (fixed-point multipliers) ...
SCALES = {"x": 0.02, "w1": 0.003, "a1": 0.05, "w2": 0.004, "c2": 0.08, "a2": 0.06, "p": 0.03,
          "wf": 0.01, "y": 0.05}
#: ... and each rounded to a power of two (every ratio a power of two: shifts alone; the pool
#: averages 4 x 4 pixels, a power of two too)
POW2 = {k: float(2.0 ** round(np.log2(v))) for k, v in SCALES.items()}


def qdq_model(s: dict[str, float] = SCALES) -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv -> Relu -> Q -> DQ -> MaxPool -> Conv -> (+ skip) -> Relu -> Q ->
    DQ -> GlobalAveragePool -> Q -> DQ -> Flatten -> Gemm -> Q -> DQ -> y, with scales ``s``."""
    z = np.zeros((), np.int8)
    nodes, inits = [], []
    for k, v in s.items():
        inits.append(_c(f"s_{k}", v))
    inits += [_c("z", z), _c("w1", W1), _c("b1", B1), _c("w2", W2), _c("wf", WF),
              _c("b1_s", s["x"] * s["w1"]), _c("shape", np.array([1, 16], np.int64))]

    def q(src: str, dst: str, sc: str) -> None:
        nodes.append(helper.make_node("QuantizeLinear", [src, f"s_{sc}", "z"], [dst]))

    def dq(src: str, dst: str, sc: str) -> None:
        nodes.append(helper.make_node("DequantizeLinear", [src, sc if sc.startswith("b")
                                                           else f"s_{sc}", "z" if not
                                                           sc.startswith("b") else ""],
                                      [dst]))

    q("x", "xq", "x")
    dq("xq", "xf", "x")
    dq("w1", "w1f", "w1")
    nodes.append(helper.make_node("DequantizeLinear", ["b1", "b1_s"], ["b1f"]))
    nodes.append(helper.make_node("Conv", ["xf", "w1f", "b1f"], ["c1"], pads=[1, 1, 1, 1]))
    nodes.append(helper.make_node("Relu", ["c1"], ["r1"]))
    q("r1", "a1q", "a1")
    dq("a1q", "a1f", "a1")
    nodes.append(helper.make_node("MaxPool", ["a1f"], ["p1"], kernel_shape=[3, 3],
                                  strides=[2, 2], pads=[1, 1, 1, 1]))
    q("p1", "p1q", "a1")
    dq("p1q", "p1f", "a1")
    dq("w2", "w2f", "w2")
    nodes.append(helper.make_node("Conv", ["p1f", "w2f"], ["c2"], pads=[1, 1, 1, 1]))
    q("c2", "c2q", "c2")
    dq("c2q", "c2f", "c2")
    nodes.append(helper.make_node("Add", ["c2f", "p1f"], ["s2"]))
    nodes.append(helper.make_node("Relu", ["s2"], ["r2"]))
    q("r2", "a2q", "a2")
    dq("a2q", "a2f", "a2")
    nodes.append(helper.make_node("GlobalAveragePool", ["a2f"], ["g"]))
    q("g", "gq", "p")
    dq("gq", "gf", "p")
    nodes.append(helper.make_node("Flatten", ["gf"], ["gflat"]))
    dq("wf", "wff", "wf")
    nodes.append(helper.make_node("Gemm", ["gflat", "wff"], ["fc"], transB=1))
    q("fc", "yq", "y")
    dq("yq", "y", "y")
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                       [1, 16, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
                          inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])


def qlinear_model() -> onnx.ModelProto:
    """x -> Q -> QLinearConv -> Relu -> QLinearMatMul (on the flattened pool) -> DQ."""
    inits = [_c("sx", 0.02), _c("sw", 0.003), _c("sy", 0.05), _c("sf", 0.01), _c("so", 0.04),
             _c("z", np.zeros((), np.int8)), _c("w1", W1), _c("b1", B1), _c("wf", WF.T.copy()),
             _c("sp", 0.03)]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "z"], ["xq"]),
             helper.make_node("QLinearConv", ["xq", "sx", "z", "w1", "sw", "z", "sy", "z", "b1"],
                              ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("QLinearGlobalAveragePool", ["r1", "sy", "z", "sp", "z"], ["g"],
                              domain="com.microsoft"),
             helper.make_node("Flatten", ["g"], ["gf"]),
             helper.make_node("QLinearMatMul", ["gf", "sp", "z", "wf", "sf", "z", "so", "z"],
                              ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "so", "z"], ["y"])]
    g = helper.make_graph(nodes, "qlinear", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 16, 8, 8])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 21),
                                               helper.make_opsetid("com.microsoft", 1)])


@pytest.mark.parametrize("scales,config", [(SCALES, "pynq_mul"), (POW2, "pynq")],
                         ids=["fixed-point on pynq_mul", "power-of-two on pynq"])
def test_qdq_model_matches_onnx_and_runs_on_the_accelerator(tmp_path: Path, scales: dict,
                                                            config: str) -> None:
    m = qdq_model(scales)
    onnx.checker.check_model(m)
    path = tmp_path / "m.onnx"
    onnx.save(m, str(path))
    g = load_onnx(path)
    assert [n.op for n in g.nodes] == ["conv2d", "requantize", "relu", "max_pool2d", "conv2d",
                                       "requantize", "add", "relu", "global_avg_pool", "dense",
                                       "requantize"]
    sx, sy = scales["x"], scales["y"]
    xf = np.random.default_rng(1).uniform(-2.5, 2.5, (1, 16, 8, 8)).astype(np.float32)
    xq = np.clip(np.rint(xf / sx), -128, 127).astype(np.int8)
    ours = interp.run_graph(g, {"x": xq})[g.outputs[0]]
    from onnx.reference import ReferenceEvaluator

    ref = ReferenceEvaluator(m).run(None, {"x": xq.astype(np.float32) * np.float32(sx)})[0]
    ref_q = np.rint(ref / sy).astype(np.int64)
    diff = np.abs(ours.astype(np.int64) - ref_q)
    assert diff.max() <= 1 and diff.mean() < 0.5, (ours, ref_q)
    h = hw(config)
    r = run_graph(compile_graph(g, h, refine=1), {"x": xq})
    s = r.summary()
    assert r.passed and s["host_ops"] == 0 and s["mac_share"] == 1.0
    assert ("ALU.MUL" in s["instructions"]) == (scales is SCALES)
    assert s["non_vta_instructions"] == ({"ALU.MUL": s["instructions"]["ALU.MUL"]}
                                         if scales is SCALES else {})


def test_arbitrary_scales_are_refused_on_vtas_alu_by_node_and_scale() -> None:
    """VTA's ALU has no MUL: a graph whose scale ratios are not powers of two is refused up
    front, naming the first node, its multiplier and ratio, and the config that has MUL."""
    g = load_onnx(qdq_model())
    with pytest.raises(GraphError, match=r"graph qdq: requantize a1q_acc_q: its multiplier 2517 "
                                         r"\(scale ratio 0\.0012002 = 2517 / 2\*\*21, not a "
                                         r"power of two\) needs ALU MUL \(and 4 more\), which "
                                         r"pynq does not have \(VTA's ALU has no MUL: alu\.ops "
                                         r"min, max, add, shr\); run it on pynq_mul"):
        compile_graph(g, hw(), refine=1)
    # (and 1 more: the global average pool's non-shift multiplier runs on the host)
    with pytest.raises(GraphError, match=r"requantize c1: its multiplier 2517 .* needs ALU MUL "
                                         r"\(and 1 more\), which ultra96 does not have .* run "
                                         r"it on a config with mul in alu\.ops \(shipped: "
                                         r"pynq_mul, pynq_requant, research_32x32\)"):
        compile_graph(load_onnx(qlinear_model()), hw("ultra96"), refine=1)


def test_qlinear_model() -> None:
    g = load_onnx(qlinear_model())
    assert [n.op for n in g.nodes] == ["conv2d", "requantize", "relu", "global_avg_pool",
                                       "dense", "requantize"]
    conv = g.nodes[0]
    assert np.array_equal(conv.weight.data, W1) and np.array_equal(conv.bias.data, B1)
    xq = np.random.default_rng(2).integers(-128, 128, (1, 16, 8, 8), dtype=np.int8)
    r = run_graph(compile_graph(g, hw("pynq_mul"), refine=1), {"x": xq})
    assert r.passed and r.summary()["mac_share"] == 1.0


def test_unsupported_models_are_named(tmp_path: Path) -> None:
    m = qlinear_model()
    m.graph.initializer[5].CopyFrom(_c("z", np.array(3, np.int8)))  # a zero point of 3
    g = load_onnx(m)  # asymmetric: imported, the ReLU a clip at the zero point
    assert g.inputs[0].type.zero == 3 and any(n.op == "clip" and n.lo == 3 for n in g.nodes)
    m = qlinear_model()
    m.graph.initializer.append(_c("z5", np.array(5, np.int8)))
    m.graph.node[5].input[2] = "z5"  # QLinearMatMul reads gf with another zero point
    with pytest.raises(OnnxImportError, match="reads gf with zero point 5, but it was "
                                              "quantized with zero point 0"):
        load_onnx(m)
    m = qlinear_model()
    m.graph.node[2].op_type = "Identity"
    with pytest.raises(OnnxImportError, match="'r1' \\(Identity\\): operator Identity is not"):
        load_onnx(m)
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(OnnxImportError, match=r"bad\.onnx: not an ONNX model"):
        load_onnx(bad)
