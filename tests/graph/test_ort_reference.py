"""Which ONNX Runtime configuration judges a quantized model (``onnx_ort.reference_for``), and
that vta's exact import is bit-identical to it.

* QDQ, int8 activations: ``FUSED`` (``ORT_ENABLE_EXTENDED`` with
  ``session.qdqisint8allowed=1``, Level 2's float fusions off): every DQ -> Conv / Gemm /
  Add / GlobalAveragePool -> Q group becomes ORT's integer kernel, also when the judge asks
  for every int8 tensor as a graph output. One level lower (``ORT_ENABLE_BASIC``) fuses
  nothing; without ``qdqisint8allowed`` x64 ORT rewrites int8 activations to uint8 and leaves
  a float Conv where a tensor feeds two consumers.
* uint8 activations (both layouts): ``FUSED_U8`` (``session.x64quantprecision=1``): ORT's
  own switch for the AVX2 U8S8 overflow; the graph's operators are unchanged.
* QOperator, int8 activations: ``AS_WRITTEN`` (``ORT_DISABLE_ALL``).

Skipped without onnx and onnxruntime (the ``test`` extra has both)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from vta.graph import interp
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import (
    AS_WRITTEN,
    FORMATS,
    FUSED,
    FUSED_U8,
    MODELS,
    Format,
    OrtReference,
    activation_types,
    agreement,
    calibration_inputs,
    exposed,
    optimized_ops,
    ort_verdict,
    reference_for,
)
from vta.graph.quant import quantize_linear

from .test_onnx_requant import _judge, _model

#: seeded inputs each model is judged on (distinct from the calibration's)
INPUTS = 6
QDQ = [f for f in FORMATS if f.layout == "QDQ"]
#: what may be left in ORT's fused graph: integer kernels, the quantize of the float input,
#: the dequantize of the float output, and the integer operators ORT runs on int8 as written
#: (a ReLU between DequantizeLinear and QuantizeLinear of one scale is exact on integers)
FUSED_OPS = {"QuantizeLinear", "DequantizeLinear", "QLinearConv", "QGemm", "QLinearMatMul",
             "QLinearAdd", "QLinearGlobalAveragePool", "MaxPool", "Flatten", "Relu"}
#: float operators whose result depends on float32 sums (what the fusion must remove)
FLOAT_SUMS = {"Conv", "Gemm", "MatMul", "Add", "GlobalAveragePool"}


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
def test_each_format_gets_its_reference(fmt: Format) -> None:
    q = _model("small_cnn", fmt)
    assert activation_types(q) == {"uint8" if fmt.types == "u8" else "int8"}
    want = FUSED_U8 if fmt.types == "u8" else FUSED if fmt.layout == "QDQ" else AS_WRITTEN
    assert reference_for(q) == want


@pytest.mark.parametrize("fmt", QDQ, ids=[f.name for f in QDQ])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_fused_reference_runs_integer_kernels_only(model: str, fmt: Format) -> None:
    """ORT's optimized graph in the reference: no float Conv / Gemm / Add / pool left, the
    same with every int8 tensor asked for as an output (what ``ort_tensors`` runs)."""
    q = _model(model, fmt)
    ref = reference_for(q)
    plain, judged = optimized_ops(q, ref), optimized_ops(exposed(q)[0], ref)
    assert Counter(plain) == Counter(judged)
    assert set(plain) <= FUSED_OPS, sorted(set(plain) - FUSED_OPS)
    kernels = {"QLinearConv", "QGemm"} if model == "small_cnn" else {"QGemm"}
    assert kernels <= set(plain)
    # one level lower fuses nothing: every float Conv / Gemm is still there
    basic = OrtReference("basic", "ORT_ENABLE_BASIC", ref.config, ref.disabled)
    assert FLOAT_SUMS & set(optimized_ops(q, basic))


def test_without_int8_allowed_x64_rewrites_int8_and_leaves_a_float_conv() -> None:
    """Why ``FUSED`` sets ``session.qdqisint8allowed``: ORT's default on x64 converts int8
    activations to uint8 (``QDQS8ToU8Transformer``, tensors renamed) and the second Conv of
    the small CNN (its input also feeds the Add) stays float. On ARM the default is FUSED's."""
    q = _model("small_cnn", Format("QDQ", "s8", False))
    default = OrtReference("x64 default", "ORT_ENABLE_EXTENDED", (), FUSED.disabled)
    ops = optimized_ops(q, default)
    if "Conv" not in ops:
        pytest.skip("this ORT build keeps int8 QDQ activations by default (an ARM host)")
    assert ops.count("QLinearConv") < 2 and "Add" in ops


@pytest.mark.parametrize("fmt", [f for f in FORMATS if f.types == "u8"],
                         ids=[f.name for f in FORMATS if f.types == "u8"])
def test_u8_reference_keeps_the_operators(fmt: Format) -> None:
    """``x64quantprecision`` changes the weights' type (U8U8 kernels), not the operators: the
    QOperator graph ORT runs has the operators the file names."""
    q = _model("small_cnn", fmt)
    if fmt.layout == "QOperator":
        assert Counter(optimized_ops(q, FUSED_U8)) == Counter(optimized_ops(q, AS_WRITTEN))


def judge(model: str, fmt: Format, fed: bool) -> list[Any]:
    """Each of ``INPUTS`` calibration inputs judged against ORT's tensors (the judging loop
    of test_onnx_requant, with this file's input count)."""
    return [agreement(*t) for t in _judge(model, fmt, fed, INPUTS)]


@pytest.mark.parametrize("fmt", FORMATS, ids=[f.name for f in FORMATS])
@pytest.mark.parametrize("model", sorted(MODELS))
def test_the_requantize_variant_is_bit_identical_to_the_reference(model: str,
                                                                  fmt: Format) -> None:
    """Every int8 tensor ORT computes, end to end: the exact import (what pynq_requant runs)
    against the model's reference, each of the twelve formats."""
    results = judge(model, fmt, fed=False)
    n_tensors = 5 if model == "small_cnn" else 2
    for a in results:
        assert a.identical and a.tensors >= n_tensors, a


def test_ort_verdict_reports_the_graph_as_written_beside_the_reference() -> None:
    q = _model("small_cnn", Format("QDQ", "a8", True))
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    x = calibration_inputs(MODELS["small_cnn"](0), 99, 1)[0]
    values = interp.run_graph(g, {v.name: quantize_linear(x, v.type.scale, v.type.zero)})
    verdict = ort_verdict(q, g, values, {v.name: x})
    assert verdict["judged"] and verdict["identical"]
    assert "ORT_ENABLE_EXTENDED, session.qdqisint8allowed=1" in verdict["reference"]
    w = verdict["as_written"]
    assert w["reference"].endswith("ORT_DISABLE_ALL") and w["tensors"] == verdict["tensors"]
    assert np.isfinite(w["max_diff"]) and w["equal"] <= w["elements"]
