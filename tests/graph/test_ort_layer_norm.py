"""ONNX Runtime's float LayerNormalization reproduced bit for bit (``quant_mlas.ort_layer_norm``).

ORT's CPU kernel (``LayerNormImpl``, shared by the ONNX operator and com.microsoft's contrib
one) runs, from onnxruntime 1.30, MLAS's AVX2 kernel on rows of at least 8 values where the
CPU has AVX2 and FMA3, else its scalar Welford ComputeJob (every row in 1.27 - 1.29; float32
sums before): ``quant_mlas.ort_layer_norm_path`` picks the installed version's path
(docs/graph.md). Each test builds a
float model of one LayerNormalization with its optional Mean and InvStdDev outputs, runs ORT
on seeded inputs and compares all three with the reproduction, value for value: row lengths
across the kernel's 4-, 8-wide blocks and tails, both paths, with and without a bias, several
axes, epsilons and input magnitudes. The BERT-tiny networks' graphs as ORT runs them under
their reference configuration (``onnx_ort.reference_for``) keep the LayerNormalization
operator (no fusion into a contrib kernel). Skipped without onnx and onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from vta.errors import GraphError, OnnxImportError
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import (
    AS_WRITTEN,
    Format,
    optimized_ops,
    quantize,
    quantized_network,
    reference_for,
)
from vta.graph.quant_mlas import (
    LAYER_NORM_PATHS,
    ort_layer_norm,
    ort_layer_norm_path,
)

F32 = np.float32
#: row lengths: below the kernel's threshold (scalar path), the 4-wide and 8-wide blocks with
#: every tail length, BERT-tiny's hidden 128, and longer rows
LENGTHS = [1, 2, 3, 5, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 20, 23, 31, 32, 33, 100, 128,
           130, 256, 768]


def _model(shape: list[int], axis: int, epsilon: float, bias: bool, seed: int,
           contrib: bool = False) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """A float model ``x -> LayerNormalization -> (y, mean, inv_std_dev)`` with seeded scale
    and bias: the ONNX operator (opset 17), or with ``contrib`` ORT's contrib kernel, which
    ORT registers as ``LayerNormalization`` of the ONNX domain before opset 17 (what its
    LayerNormFusion writes; the model is opset 16)."""
    rng = np.random.default_rng(seed)
    norm = shape[axis:]
    g = rng.normal(1, 0.5, norm).astype(F32)
    b = rng.normal(0, 0.5, norm).astype(F32) if bias else None
    inits = [numpy_helper.from_array(g, "g")]
    if b is not None:
        inits.append(numpy_helper.from_array(b, "b"))
    node = helper.make_node("LayerNormalization", ["x", "g"] + (["b"] if bias else []),
                            ["y", "mean", "inv_std_dev"], axis=axis, epsilon=epsilon)
    outs = [helper.make_tensor_value_info(k, TensorProto.FLOAT, None)
            for k in ("y", "mean", "inv_std_dev")]
    graph = helper.make_graph([node], "ln", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, shape)], outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16 if contrib else
                                                                          17)])
    model.ir_version = 8
    return model, g, b


def _check(shape: list[int], axis: int = -1, epsilon: float = 1e-5, bias: bool = True,
           seed: int = 0, contrib: bool = False, inputs: int = 3) -> None:
    """ORT's y, mean and inv_std_dev of ``_model`` on ``inputs`` seeded inputs (offsets and
    spreads from small to large) equal the reproduction's, value for value."""
    model, g, b = _model(shape, axis, epsilon, bias, seed, contrib)
    session = AS_WRITTEN.session(model)
    rng = np.random.default_rng(seed + 1000)
    n = int(np.prod(shape[axis:]))
    path = LAYER_NORM_PATHS[ort_layer_norm_path(n)]
    for k in range(inputs):
        spread, offset = [(1.0, 0.0), (3.0, 0.5), (100.0, 1000.0)][k % 3]
        x = (rng.normal(offset, spread, shape)).astype(F32)
        y, mean, inv = session.run(None, {"x": x})
        ry, rmean, rinv = path(x.reshape(-1, n), g.ravel(), None if b is None else b.ravel(),
                               epsilon)
        where = f"{shape} axis {axis} eps {epsilon} bias {bias} input {k}"
        np.testing.assert_array_equal(mean.ravel(), rmean, err_msg=f"mean, {where}")
        np.testing.assert_array_equal(inv.ravel(), rinv, err_msg=f"inv_std_dev, {where}")
        np.testing.assert_array_equal(y.reshape(-1, n), ry, err_msg=f"y, {where}")
        np.testing.assert_array_equal(ort_layer_norm(x, g, b, axis, epsilon), y, err_msg=where)


@pytest.mark.parametrize("n", LENGTHS)
def test_each_row_length_is_ort_bits(n: int) -> None:
    _check([2, 24, n], seed=n)


@pytest.mark.parametrize("n", [3, 12, 13, 128])
def test_without_bias(n: int) -> None:
    _check([4, 16, n], bias=False, seed=n)


@pytest.mark.parametrize(("shape", "axis"), [([2, 3, 4, 5], 2), ([2, 3, 4, 5], 1),
                                             ([6, 2, 4], -2), ([5, 40], 0)])
def test_normalizing_several_axes(shape: list[int], axis: int) -> None:
    _check(shape, axis=axis, seed=len(shape) + axis)


@pytest.mark.parametrize("epsilon", [0.0, 1e-12, 1e-3, 0.5])
def test_epsilons(epsilon: float) -> None:
    _check([1, 32, 128], epsilon=epsilon, seed=7)
    _check([8, 5], epsilon=epsilon, seed=8)


@pytest.mark.parametrize("seed", range(10))
def test_bert_tiny_shape_on_many_inputs(seed: int) -> None:
    """BERT-tiny's LayerNormalization: [1, 128, 128] over the hidden axis."""
    _check([1, 128, 128], seed=100 + seed, inputs=3)


@pytest.mark.parametrize("n", [5, 128, 130])
def test_contrib_layer_normalization(n: int) -> None:
    """ORT's contrib LayerNormalization (what its LayerNormFusion writes) runs the same
    kernel."""
    _check([3, 8, n], seed=n, contrib=True)


def test_constant_rows() -> None:
    """Rows of one repeated value: a zero variance, ``1 / sqrt(eps)``."""
    model, g, b = _model([4, 16], -1, 1e-5, True, 3)
    x = np.repeat(np.array([[0.0], [1.5], [-1e4], [3.3e7]], F32), 16, axis=1)
    y = AS_WRITTEN.session(model).run(None, {"x": x})[0]
    np.testing.assert_array_equal(ort_layer_norm(x, g, b, -1, 1e-5), y)


def test_scale_of_the_wrong_size_and_an_unknown_path_are_named() -> None:
    with pytest.raises(GraphError, match="needs a scale and bias of 16 values, got 8"):
        ort_layer_norm(np.zeros((2, 16), F32), np.ones(8, F32), None, -1, 1e-5)
    with pytest.raises(GraphError, match="unknown layer norm path 'neon'"):
        ort_layer_norm(np.zeros((2, 16), F32), np.ones(16, F32), None, -1, 1e-5, path="neon")


def test_the_paths_differ() -> None:
    """The three paths are three arithmetics (so the choice by version and CPU matters): on
    BERT-sized rows each pair disagrees somewhere."""
    rng = np.random.default_rng(9)
    x = rng.normal(0.5, 3, (64, 128)).astype(F32)
    g, b = rng.normal(1, 0.5, 128).astype(F32), rng.normal(0, 0.5, 128).astype(F32)
    ys = {k: ort_layer_norm(x, g, b, -1, 1e-5, path=k) for k in LAYER_NORM_PATHS}
    for a in ys:
        for c in ys:
            assert a == c or (ys[a] != ys[c]).any(), (a, c)


@pytest.mark.parametrize("name", ["bert_tiny", "bert_tiny_qop"])
def test_bert_tiny_reference_keeps_layer_normalization(name: str) -> None:
    """ORT's graph for each BERT-tiny under its reference configuration still holds the
    LayerNormalization operators (four: two per layer), not a fused contrib kernel."""
    q = quantized_network(name)
    ops = optimized_ops(q, reference_for(q))
    assert ops.count("LayerNormalization") == 4, ops
    assert not {"SkipLayerNormalization", "SimplifiedLayerNormalization"} & set(ops)


def test_a_broadcast_scale_is_refused_by_name() -> None:
    """A scale of more values than a row (one per row position too: ORT's broadcasting path,
    float64 arithmetic) is refused by name, not run with the row kernel's arithmetic."""
    rng = np.random.default_rng(5)
    node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)
    graph = helper.make_graph(
        [node], "ln_broadcast", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                               [1, 4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8])],
        [numpy_helper.from_array(rng.normal(1, 0.1, (4, 8)).astype(F32), "g"),
         numpy_helper.from_array(rng.normal(0, 0.1, (8,)).astype(F32), "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by older onnxruntime releases too
    try:
        q = quantize(model, Format("QDQ", "s8", False), seed=1)
    except OnnxImportError as e:  # onnxruntime before its broadcasting path refuses it itself
        pytest.skip(str(e))
    with pytest.raises(OnnxImportError, match=r"scale .* has 32 values; only one per "
                                              r"normalized value \(8: \[8\]\)"):
        load_onnx(q, requant="ort")
