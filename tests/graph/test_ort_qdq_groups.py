"""The difference named: BERT's QDQ float groups under ORT's fused reference.

In a QDQ model with an integer matmul, ORT's reference configuration (``onnx_ort.reference_for``:
``FUSED`` / ``FUSED_U8``, QDQ groups fused into ORT's integer kernels) also fuses the groups
around BERT's float operators: ``DequantizeLinear -> Softmax -> QuantizeLinear`` becomes
``QLinearSoftmax``, GELU's ``Add`` of the constant 1 and its two ``Mul`` s become
``QLinearAdd`` / ``QLinearMul`` (com.microsoft). vta's QDQ import computes those groups as float
islands (``ir.HostFloat``: dequantize, the float operator, quantize), which is what ORT's
graph *as written* computes (tests/graph/test_bert.py), not what the fused kernels compute.

For each such group, on seeded inputs, the tests here show:

* ORT's fused output is its QOperator kernel's arithmetic applied to ORT's own int8 operand
  (``ort_qop.qlinear_softmax``, ``ort_qop.qlinear_mul_table``, ``ort_add.qlinear_add_table``,
  the same functions the QOperator import runs): equal on every value;
* vta's float island fed the same operands differs from it by one unit at most, on a
  measured share of values: the difference is the kernel ORT fuses to, not an error of the
  island (whose float arithmetic is ORT's graph as written). Measured (onnxruntime 1.32.0,
  this machine, 4 inputs of [1, 32, 64]: 8,192 values per group): GELU's add of 1
  (``QLinearAdd``) on 475 (s8) and 2,522 (a8, u8), the softmax on 144 in a8 and u8 (none in
  s8); the two products and the final add of two activations on none.

Importing a fused group with the QOperator arithmetic (the kernel ORT runs) is the fix; it is
not done (docs/graph.md, "Not done"). Skipped without onnx and onnxruntime."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx
from onnx import TensorProto, helper, numpy_helper

from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import Format, ort_tensors, quantize, reference_for, run_fed
from vta.graph.ort_add import qlinear_add_table
from vta.graph.ort_qop import qlinear_mul_table, qlinear_softmax
from vta.graph.quant import quantize_linear

F32 = np.float32
SHAPE = [1, 32, 64]
INPUTS = 4
FORMATS = {"s8": Format("QDQ", "s8", False), "a8": Format("QDQ", "a8", False),
           "u8": Format("QDQ", "u8", False)}


def _model() -> Any:
    """``x -> MatMul(W) -> h``; ``Softmax(h)``; GELU as PyTorch writes it on ``h``; the two
    summed (so both are graph results)."""
    rng = np.random.default_rng(11)
    f = [numpy_helper.from_array(np.asarray(a, F32), n) for n, a in
         (("W", rng.normal(0, 0.2, (SHAPE[-1], SHAPE[-1]))), ("r2", np.sqrt(2.0)),
          ("one", 1.0), ("half", 0.5))]
    nodes = [helper.make_node("MatMul", ["x", "W"], ["h"]),
             helper.make_node("Softmax", ["h"], ["s"], axis=-1),
             helper.make_node("Div", ["h", "r2"], ["d"]), helper.make_node("Erf", ["d"], ["e"]),
             helper.make_node("Add", ["e", "one"], ["p"]),
             helper.make_node("Mul", ["h", "p"], ["m"]),
             helper.make_node("Mul", ["m", "half"], ["g"]),
             helper.make_node("Add", ["s", "g"], ["y"])]
    graph = helper.make_graph(nodes, "qdq_groups",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, SHAPE)], f)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@cache
def _quantized(types: str) -> Any:
    return quantize(_model(), FORMATS[types], seed=1)


def _fused_nodes(q: Any) -> tuple[list[Any], dict[str, np.ndarray]]:
    """The QLinear* nodes of the graph ORT runs for ``q`` in its reference configuration, and
    that graph's initializers."""
    with tempfile.TemporaryDirectory() as d:
        path = str(Path(d) / "optimized.onnx")
        reference_for(q).session(q, path)
        opt = onnx.load(path)
    inits = {t.name: numpy_helper.to_array(t) for t in opt.graph.initializer}
    return [n for n in opt.graph.node if n.op_type in ("QLinearSoftmax", "QLinearMul",
                                                       "QLinearAdd")], inits


def _kernel(node: Any, inits: dict[str, np.ndarray], ort: dict[str, np.ndarray]
            ) -> np.ndarray:
    """ORT's QOperator kernel arithmetic for fused ``node`` on ORT's own operands (stored
    values), as the QOperator import computes it."""
    def val(name: str) -> np.ndarray:
        return np.asarray(inits[name] if name in inits else ort[name])

    unsigned = val(node.input[0]).dtype == np.uint8
    if node.op_type == "QLinearSoftmax":
        x, sx, _zx, sy, zy = (val(i) for i in node.input)
        return qlinear_softmax(x.astype(np.int64), float(sx), float(sy), int(zy), -1, unsigned)
    a, sa, za, b, sb, zb, sc, zc = (val(i) for i in node.input)
    table = (qlinear_mul_table if node.op_type == "QLinearMul" else qlinear_add_table)(
        float(sa), int(za), float(sb), int(zb), float(sc), int(zc), unsigned)
    lo = 0 if unsigned else -128
    ia, ib = np.broadcast_arrays(a.astype(np.int64) - lo, b.astype(np.int64) - lo)
    return table[ia, ib]


@pytest.mark.parametrize("types", list(FORMATS))
def test_fused_groups_are_ort_qoperator_kernels(types: str) -> None:
    """Every fused group's output (QLinearSoftmax, GELU's QLinearAdd and both QLinearMul) is
    its QOperator kernel on ORT's own operand, on every value of every input."""
    q = _quantized(types)
    nodes, inits = _fused_nodes(q)
    assert sorted(n.op_type for n in nodes) == ["QLinearAdd", "QLinearAdd", "QLinearMul",
                                                "QLinearMul", "QLinearSoftmax"], nodes
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    for k, x in enumerate(_inputs()):
        ort = ort_tensors(q, {v.name: x})
        for n in nodes:
            got = np.asarray(ort[n.output[0]]).astype(np.int64)
            np.testing.assert_array_equal(_kernel(n, inits, ort), got,
                                          err_msg=f"{types} input {k}: {n.op_type} {n.name}")


def _inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    return [rng.normal(0, spread, SHAPE).astype(F32) for spread in (0.5, 1.0, 2.0, 4.0)][:INPUTS]


@pytest.mark.parametrize("types", list(FORMATS))
def test_float_islands_differ_from_the_fused_kernels_by_one_unit(types: str) -> None:
    """vta's float islands fed ORT's operands against ORT's fused kernels: within one unit
    everywhere; where they differ, the fused kernel's arithmetic is the cause (the first
    test) and the island is ORT's graph as written (test_bert)."""
    q = _quantized(types)
    nodes, _ = _fused_nodes(q)
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    by_name = {w.name: w for w in g.values()}
    differ: dict[str, int] = {}
    total: dict[str, int] = {}
    for x in _inputs():
        ort = ort_tensors(q, {v.name: x})
        env = run_fed(g, {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)}, ort)
        for n in nodes:
            stored = np.asarray(ort[n.output[0]])
            want = stored.astype(np.int64) - (128 if stored.dtype == np.uint8 else 0)
            got = env[by_name[n.output[0]]].astype(np.int64).reshape(want.shape)
            assert np.abs(got - want).max() <= 1, (types, n.op_type, n.name)
            differ[n.op_type] = differ.get(n.op_type, 0) + int((got != want).sum())
            total[n.op_type] = total.get(n.op_type, 0) + want.size
    print(f"{types}: " + ", ".join(f"{op} {differ[op]} of {total[op]}" for op in sorted(total)))
    assert sum(differ.values()) > 0, (types, differ)  # the cause is seen, not assumed
