"""BERT-tiny (a transformer encoder) through ONNX Runtime's quantizer, judged by ONNX Runtime.

Each transformer operator is imported from a one-operator float model quantized by ORT's
``quantize_static`` (QDQ: the operator between DequantizeLinear and QuantizeLinear) and its
int8 output compared with ORT's (``ORT_DISABLE_ALL``, the reference); the typing rules and the
named refusals; then a small BERT (1 layer, sequence 16, hidden 32) end to end against ORT on
the interpreter, the simulator (pynq_requant: ORT's requantize arithmetic; pynq: the model's
scales rounded to powers of two) and cuda-emu. Skipped without onnx and onnxruntime.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from vta.cli import main
from vta.errors import GraphError, OnnxImportError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.ir import FloatStep, HostFloat, MatMul, Reshape, Transpose
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import (
    Agreement,
    Format,
    agreement,
    agreement_by_kind,
    bert_tiny,
    calibration_inputs,
    ort_tensors,
    pow2_scales,
    quantize,
    run_fed,
)
from vta.graph.quant import needs_mul, quantize_linear
from vta.run.graph import compile_for, run_graph
from vta.run.targets import get_target

from .conftest import ROOT, hw

S8 = Format("QDQ", "s8", False)
#: the small BERT the end-to-end tests run (the structure of BERT-tiny, smaller sizes)
SMALL = {"layers": 1, "hidden": 32, "heads": 2, "ffn": 64, "seq": 16}


def one_op(nodes: list[Any], shape: list[int], out_shape: list[int],
           inits: list[Any] | None = None, opset: int = 17) -> Any:
    """A float model ``x -> nodes -> y`` (input ``x`` of ``shape``)."""
    g = helper.make_graph(nodes, "one_op",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)],
                          inits or [])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def judged(model: Any, fmt: Format = S8, inputs: int = 3) -> tuple[Agreement, Any]:
    """``model`` quantized by ORT in ``fmt``, imported with ORT's arithmetic, run by the
    interpreter on seeded inputs: the agreement with ORT over all of them, and the graph."""
    q = quantize(model, fmt, seed=1)
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    total = Agreement(0, 0, 0, 0)
    for x in calibration_inputs(model, 5, inputs):
        ort = ort_tensors(q, {v.name: x})
        env = interp.run_graph(g, {v.name: quantize_linear(x, v.type.scale or 1.0,
                                                            v.type.zero)})
        a = agreement(g, env, ort)
        total = Agreement(total.tensors + a.tensors, total.elements + a.elements,
                          total.equal + a.equal, max(total.max_diff, a.max_diff))
    return total, g


def _f32(name: str, a: Any) -> Any:
    return numpy_helper.from_array(np.asarray(a, dtype=np.float32), name)


# ------------------------------------------------------------------------ one operator


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax_is_ort_bits(axis: int) -> None:
    m = one_op([helper.make_node("Softmax", ["x"], ["y"], axis=axis)], [1, 6, 10], [1, 6, 10])
    a, g = judged(m)
    assert a.identical, a
    (hf,) = [n for n in g.nodes if isinstance(n, HostFloat)]
    assert hf.name == "softmax" and hf.steps[0].attr("axis") == axis


def test_layer_norm_is_ort_bits() -> None:
    rng = np.random.default_rng(3)
    m = one_op([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1,
                                 epsilon=1e-3)], [1, 8, 24], [1, 8, 24],
               [_f32("g", 1 + rng.normal(0, 0.1, 24)), _f32("b", rng.normal(0, 0.1, 24))])
    a, g = judged(m)
    assert a.identical, a
    (hf,) = [n for n in g.nodes if isinstance(n, HostFloat)]
    assert hf.steps[-1].op == "layer_norm" and hf.steps[-1].attr("epsilon") == \
        pytest.approx(1e-3)


def test_gelu_as_pytorch_writes_it_is_ort_bits() -> None:
    inits = [_f32("r2", np.sqrt(2.0)), _f32("one", 1.0), _f32("half", 0.5)]
    nodes = [helper.make_node("Div", ["x", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]),
             helper.make_node("Mul", ["x", "p"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["y"])]
    for fmt in (S8, Format("QDQ", "a8", False), Format("QDQ", "u8", False)):
        a, g = judged(one_op(nodes, [1, 4, 32], [1, 4, 32], inits), fmt)
        assert a.identical, (fmt.name, a)
        assert {n.name for n in g.nodes if isinstance(n, HostFloat)} >= {"div+erf", "mul"}


@pytest.mark.parametrize("perm", [[0, 2, 1, 3], [0, 2, 3, 1], [3, 1, 0, 2]])
def test_transpose_moves_ort_bytes(perm: list[int]) -> None:
    shape = [1, 4, 2, 8]
    m = one_op([helper.make_node("Softmax", ["x"], ["s"], axis=-1),
                helper.make_node("Transpose", ["s"], ["y"], perm=perm)], shape,
               [shape[p] for p in perm])
    a, g = judged(m)
    assert a.identical and a.tensors == 2 * 3, a  # the softmax and the transpose, 3 inputs
    (t,) = [n for n in g.nodes if isinstance(n, Transpose)]
    assert t.perm == tuple(perm)


@pytest.mark.parametrize("target", [[1, 4, 2, 8], [0, 4, 2, -1], [1, 0, 16]])
def test_reshape_zero_and_minus_one_dims(target: list[int]) -> None:
    m = one_op([helper.make_node("Softmax", ["x"], ["s"], axis=-1),
                helper.make_node("Reshape", ["s", "shape"], ["y"])], [1, 4, 16],
               [1, 4, 2, 8] if len(target) == 4 else [1, 4, 16],
               [numpy_helper.from_array(np.array(target, np.int64), "shape")])
    a, g = judged(m)
    assert a.identical, a
    views = [n.shape for n in g.nodes if isinstance(n, Reshape)]
    assert views == ([(1, 4, 2, 8)] if len(target) == 4 else [])  # [1, 4, 16] is (4, 16)


def attention_model(seq: int = 8, dim: int = 16, seed: int = 0) -> Any:
    """x -> two projections (Q, K) -> Q @ K^T: a product of two activations."""
    rng = np.random.default_rng(seed)
    inits = [_f32("wq", rng.normal(0, 0.3, (dim, dim))), _f32("wk", rng.normal(0, 0.3, (dim, dim)))]
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["q"]),
             helper.make_node("MatMul", ["x", "wk"], ["k"]),
             helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
             helper.make_node("MatMul", ["q", "kt"], ["y"])]
    return one_op(nodes, [1, seq, dim], [1, seq, seq], inits)


@pytest.mark.parametrize("types", ["s8", "a8", "u8"])
def test_matmul_of_two_activations(types: str) -> None:
    """ORT's QDQ MatMul sums float32 products of the dequantized operands; vta sums the
    integers exactly (zero points subtracted) and requantizes with ORT's float32 ratio: the
    same bits except where ORT's float32 sum lands across a rounding boundary."""
    a, g = judged(attention_model(), Format("QDQ", types, False))
    assert a.max_diff <= 1 and a.equal >= 0.99 * a.elements, a
    (mm,) = [n for n in g.nodes if isinstance(n, MatMul)]
    assert mm.a.type.shape == (8, 16) and mm.b.type.shape == (16, 8)
    assert (mm.zero_a, mm.zero_b) == (mm.a.type.zero, mm.b.type.zero)


# ------------------------------------------------------------------------ typing rules


def test_typing_rules_name_the_problem() -> None:
    b = GraphBuilder("t")
    x = b.input("x", (2, 4, 8), 0.1)
    y = b.input("y", (2, 6, 4), 0.1)
    with pytest.raises(GraphError, match="same batch dimensions"):
        b.matmul(x, y)
    with pytest.raises(GraphError, match=r"cannot view x \[2, 4, 8\] as \[3, 21\]"):
        b.reshape(x, (3, 21))
    with pytest.raises(GraphError, match="not a permutation"):
        b.transpose(x, (0, 0, 1))
    with pytest.raises(GraphError, match="unknown float operator 'gelu'"):
        b.host_float([x], [0.1], [0], [(2, 4, 8)], [], [FloatStep("gelu", (("in", 0),))],
                     (2, 4, 8), 0.1)
    with pytest.raises(GraphError, match=r"reads tmp 0, which does not exist"):
        b.host_float([x], [0.1], [0], [(2, 4, 8)], [], [FloatStep("erf", (("tmp", 0),))],
                     (2, 4, 8), 0.1)
    assert b.matmul(x, b.transpose(x, (0, 2, 1))).type.shape == (2, 4, 4)
    assert b.reshape(x, (8, 8)).type.layout == "NC"


def test_matmul_interpreter_subtracts_zero_points() -> None:
    rng = np.random.default_rng(0)
    b = GraphBuilder("t")
    x = b.input("x", (2, 3, 5), 0.1, zero=7)
    y = b.input("y", (2, 5, 4), 0.1, zero=-3)
    out = b.matmul(x, y)
    g = b.build([out])
    xs = rng.integers(-128, 128, (2, 3, 5), dtype=np.int8)
    ys = rng.integers(-128, 128, (2, 5, 4), dtype=np.int8)
    got = interp.run_graph(g, {"x": xs, "y": ys})[out]
    want = (xs.astype(np.int64) - 7) @ (ys.astype(np.int64) + 3)
    assert got.dtype == np.int32 and np.array_equal(got, want)


# ------------------------------------------------------------------------ refusals


def test_importer_refuses_by_name() -> None:
    m = one_op([helper.make_node("Softmax", ["x"], ["y"], axis=1)], [1, 4, 8], [1, 4, 8],
               opset=11)
    q = quantize(m, S8)
    with pytest.raises(OnnxImportError, match="Softmax before opset 13"):
        load_onnx(q)
    g_ = [_f32("g", np.ones(8)), _f32("b", np.zeros(8))]
    m = one_op([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], stash_type=0)],
               [1, 4, 8], [1, 4, 8], g_)
    with pytest.raises(OnnxImportError, match="stash_type 0 is not supported"):
        load_onnx(quantize(m, S8))
    m = one_op([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y", "mean"])],
               [1, 4, 8], [1, 4, 8], g_)
    with pytest.raises(OnnxImportError, match="Mean and InvStdDev outputs"):
        load_onnx(quantize(m, S8))
    m = one_op([helper.make_node("Softmax", ["x"], ["s"]),
                helper.make_node("Reshape", ["s", "shape"], ["y"])],
               [1, 4, 8], [1, 4, 8], [numpy_helper.from_array(np.array([1, 0, 8], np.int64),
                                                            "shape")])
    q = quantize(m, S8)  # then allowzero=1: the 0 is a dimension of size 0, not a copy
    q.graph.node[[n.op_type for n in q.graph.node].index("Reshape")].attribute.append(
        helper.make_attribute("allowzero", 1))
    with pytest.raises(OnnxImportError, match=r"checker rejects the model.*differ in dimension"):
        load_onnx(q)
    m = one_op([helper.make_node("Softmax", ["x"], ["s"], axis=-1),
                helper.make_node("Sqrt", ["s"], ["y"])], [1, 4, 8], [1, 4, 8])
    with pytest.raises(OnnxImportError, match=r"\(Sqrt\): operator Sqrt is not supported"):
        load_onnx(quantize(m, S8))


def test_pow2_scales_refuses_zero_points() -> None:
    q = quantize(attention_model(), Format("QDQ", "a8", False))
    with pytest.raises(OnnxImportError, match="only symmetric models"):
        pow2_scales(q)


# ------------------------------------------------------------------------ a small BERT


@cache
def small_bert(pow2: bool = False) -> Any:
    q = quantize(bert_tiny(0, **SMALL), S8, seed=0)
    return pow2_scales(q) if pow2 else q


def _feeds(q: Any, g: Any) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    v = g.inputs[0]
    x = calibration_inputs(bert_tiny(0, **SMALL), 9, 1)[0]
    return {v.name: quantize_linear(x, v.type.scale, v.type.zero)}, {v.name: x}


def test_small_bert_interpreter_is_ort_bits_per_operator() -> None:
    """Fed ORT's operands, every float island and dense layer gives ORT's bits; end to end
    with ORT's arithmetic every tensor agrees."""
    q = small_bert()
    g = load_onnx(q, requant="ort")
    ins, real = _feeds(q, g)
    ort = ort_tensors(q, real)
    kinds = agreement_by_kind(g, run_fed(g, ins, ort), ort)
    assert {"dense", "matmul", "add", "host_float:softmax", "host_float:layer_norm",
            "host_float:div+erf"} <= set(kinds)
    for kind, a in kinds.items():
        assert a.max_diff <= 1, (kind, a)
        if kind.startswith("host_float") or kind == "dense":
            assert a.identical, (kind, a)
    e2e = agreement(g, interp.run_graph(g, ins), ort)
    assert e2e.equal >= 0.99 * e2e.elements, e2e


def test_small_bert_on_the_simulator_with_ort_arithmetic() -> None:
    q = small_bert()
    g = load_onnx(q, requant="ort")
    ins, real = _feeds(q, g)
    cg = compile_graph(g, hw("pynq_requant"), refine=1)
    r = run_graph(cg, ins)
    s = r.summary()
    assert r.passed, s["verdict"]
    on_vta = {row["ops"][0] for row in s["steps"] if row["placement"] == "vta"}
    assert on_vta == {"dense", "add"}
    host = {row["ops"][0] for row in s["steps"] if row["placement"] == "cpu"}
    assert host == {"host_float", "reshape", "transpose", "take", "stack"}
    assert all(row["host_ms"] >= 0 and row["reason"] for row in s["steps"]
               if row["placement"] == "cpu")
    # Q @ K^T and P @ V, per head (2): dense layers whose weight the host packs at run time
    runtime = [row for row in s["steps"] if "weight packed at run time" in
               row.get("schedule", "")]
    assert len(runtime) == 4 and all(row["mismatches"] == 0 for row in runtime)
    assert s["mac_share"] == 1.0 and s["cycles"] > 0
    a = agreement(g, {**r.reference, **r.outputs}, ort_tensors(q, real))
    assert a.equal >= 0.99 * a.elements, a


def test_small_bert_on_stock_pynq_with_power_of_two_scales() -> None:
    q = small_bert(pow2=True)
    g = load_onnx(q)
    assert not needs_mul(g)  # every requantization a shift
    with pytest.raises(GraphError, match="needs ALU MUL"):
        compile_graph(load_onnx(small_bert()), hw("pynq"), refine=1)
    ins, real = _feeds(q, g)
    r = run_graph(compile_graph(g, hw("pynq"), refine=1), ins)
    assert r.passed, r.summary()["verdict"]
    a = agreement(g, {**r.reference, **r.outputs}, ort_tensors(q, real))
    assert a.tensors > 0 and a.max_diff <= 16, a


def test_small_bert_on_cuda_emu() -> None:
    q = small_bert()
    g = load_onnx(q)
    ins, _ = _feeds(q, g)
    r = run_graph(compile_for(g, get_target("cuda-emu")), ins)
    s = r.summary()
    assert r.passed, s["verdict"]
    kernels = {row["ops"][0] for row in s["steps"] if row["kernel"] != "host"}
    assert kernels == {"dense", "add"}
    assert not any(row["ops"][0] == "matmul" for row in s["steps"])  # split into dense


# ------------------------------------------------------------------------ vta run bert_tiny


def test_vta_run_bert_tiny_on_cuda_emu(capsys: pytest.CaptureFixture[str]) -> None:
    """The whole BERT-tiny (2 layers, hidden 128, sequence 128), judged by ORT."""
    assert main(["run", "--target", "cuda-emu", "bert_tiny", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["onnx_runtime"]["judged"], s.get("onnx_runtime")
    kernels = [row for row in s["steps"] if row["kernel"] != "host"]
    # per layer 6 dense layers with constant weights, 2 residual adds, and 4 dense layers with
    # runtime weights (Q @ K^T and P @ V for each of 2 heads)
    assert len(kernels) == 24
    assert {row["ops"][0] for row in kernels} == {"dense", "add"}


@pytest.mark.slow
def test_vta_run_bert_tiny_on_pynq(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hw", str(ROOT / "hwconfigs" / "pynq.yaml"), "bert_tiny"]) == 0
    text = capsys.readouterr().out
    assert "MACs on the accelerator: 100.0% of 58,720,256" in text
    assert "float32 on the host (softmax" in text and "ms on the host" in text
    assert "ONNX Runtime (onnxruntime" in text and "PASS" in text


def test_vta_run_bert_tiny_refuses_batch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--target", "cuda-emu", "bert_tiny", "--batch", "2"]) != 0
    assert "--batch does not apply to bert_tiny" in capsys.readouterr().err


# ------------------------------------------------------------------------ passes.split_matmul


def _attention_graph(zero: int = 0) -> tuple[Any, Any]:
    rng = np.random.default_rng(4)
    b = GraphBuilder("att")
    q = b.input("q", (1, 2, 6, 16), 0.05, zero=zero)
    k = b.input("k", (1, 2, 16, 6), 0.05)
    y = b.requantize(b.matmul(q, k, name="s"), 0.2, name="scores")
    g = b.build([y])
    ins = {"q": rng.integers(-128, 128, (1, 2, 6, 16), dtype=np.int8),
           "k": rng.integers(-128, 128, (1, 2, 16, 6), dtype=np.int8)}
    return g, ins


def test_split_matmul_before_and_after() -> None:
    from vta.graph.passes.split_matmul import split_matmuls

    g, ins = _attention_graph()
    s = split_matmuls(g)
    assert [n.op for n in g.nodes] == ["matmul", "requantize"]
    assert [n.op for n in s.nodes] == [
        "reshape", "reshape",
        "take", "take", "transpose", "dense", "requantize",
        "take", "take", "transpose", "dense", "requantize",
        "stack", "reshape"]
    assert s.outputs == g.outputs and s.nodes[-1].output is g.outputs[0]
    dense = [n for n in s.nodes if n.op == "dense"]
    assert all(d.weight.type.shape == (6, 16) and not d.weight.is_const for d in dense)
    a, b = interp.run_graph(g, ins), interp.run_graph(s, ins)
    assert np.array_equal(a[g.outputs[0]], b[g.outputs[0]])
    assert s.macs == g.macs == 2 * 6 * 6 * 16
    zg, zins = _attention_graph(zero=3)  # a zero point: its cross terms along an extended K
    zs = split_matmuls(zg)
    assert [n.op for n in zs.nodes].count("concat") == 4 and "matmul" not in \
        [n.op for n in zs.nodes]
    assert zs.macs == zg.macs
    assert np.array_equal(interp.run_graph(zg, zins)[zg.outputs[0]],
                          interp.run_graph(zs, zins)[zg.outputs[0]])


def test_runtime_weight_dense_on_the_simulator() -> None:
    g, ins = _attention_graph()
    r = run_graph(compile_graph(g, hw("pynq_mul"), refine=1), ins)
    s = r.summary()
    assert r.passed and s["mac_share"] == 1.0, s["verdict"]
    assert sum("weight packed at run time" in row.get("schedule", "") for row in s["steps"]) == 2
    packs = [t for t in s["transforms"] if t["kind"] == "pack"]
    assert {t["tensor"] for t in packs} >= {"k_h0_t", "k_h1_t"}


def test_qoperator_int8_transpose_and_reshape() -> None:
    """ORT's QOperator form moves int8 tensors through Transpose and Reshape directly."""
    w = np.random.default_rng(2).normal(0, 0.4, (6, 6))
    m = one_op([helper.make_node("MatMul", ["x", "w"], ["h"]),
                helper.make_node("Transpose", ["h"], ["t"], perm=[1, 0]),
                helper.make_node("Reshape", ["t", "shape"], ["y"])], [4, 6], [2, 12],
               [_f32("w", w), numpy_helper.from_array(np.array([2, -1], np.int64), "shape")])
    q = quantize(m, Format("QOperator", "s8", False))
    assert {"QLinearMatMul", "Transpose", "Reshape"} <= {n.op_type for n in q.graph.node}
    a, g = judged(m, Format("QOperator", "s8", False))
    assert {"transpose", "reshape"} <= {n.op for n in g.nodes}
    assert a.identical and a.tensors == 3 * 3, a  # the matmul, transpose, reshape; 3 inputs


# ------------------------------------------------------------------------ QOperator BERT-tiny


@pytest.mark.slow
def test_qoperator_bert_tiny_is_ort_bits_on_the_interpreter() -> None:
    """``bert_tiny_qop`` (BERT-tiny in ORT's QOperator layout, a8; tests/graph/
    test_qoperator_ops.py holds each of its operators) with ORT's arithmetic, on two seeded
    inputs: each operator fed ORT's operands gives ORT's bits (layer norm's float island too:
    ``quant_mlas.ort_layer_norm``), and so, end to end, does every value of the 64 tensors."""
    from vta.graph.onnx_ort import quantized_network

    q = quantized_network("bert_tiny_qop")
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    for x in calibration_inputs(bert_tiny(0), 5, 2):
        ort = ort_tensors(q, {v.name: x})
        ins = {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}
        kinds = agreement_by_kind(g, run_fed(g, ins, ort), ort)
        assert {"dense", "matmul", "add", "lut2", "qlinear_softmax"} <= set(kinds)
        for kind, k in kinds.items():
            assert k.identical, (kind, k)
        a = agreement(g, interp.run_graph(g, ins), ort)
        assert a.tensors == 64 and a.identical, a


@pytest.mark.slow
def test_vta_run_bert_tiny_qop_on_pynq_requant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--hw", str(ROOT / "hwconfigs" / "pynq_requant.yaml"),
                 "bert_tiny_qop", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["macs"] == 58_720_256
    assert s["onnx_runtime"]["identical"], s["onnx_runtime"]
    host = {row["ops"][0] for row in s["steps"] if row["placement"] == "cpu"}
    assert {"qlinear_softmax", "lut2", "host_float"} <= host and "matmul" not in host
    assert s["accelerated_macs"] == s["macs"]  # attention's zero points folded (split_matmul)
