"""ONNX Runtime's requantization on the accelerator: ``ALU.REQUANT_F32`` (``vta.isa.requant``)
on ``hwconfigs/pynq_requant.yaml`` and models imported with ``load_onnx(requant="ort")``.

The arithmetic is judged against numpy's float32 (the definition ORT's MLAS computes:
``float32(acc) * float32 scale``, rounded half to even), the graphs against ONNX Runtime itself
(CPU, each model's reference configuration, ``onnx_ort.reference_for``) on every int8 tensor,
and the simulated runs against the graph
interpreter on every stored tensor. The adds are ORT's too since ``vta.graph.ort_add``
(``tests/graph/test_mobilenet.py`` holds them and the small CNN end to end);
``test_small_cnn_requantizes_are_orts_bits`` compares the requantizes alone."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from vta.cli import main
from vta.config import HwConfig
from vta.errors import GraphError, HwConfigError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.ir import Requantize
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import (
    FORMATS,
    MODELS,
    Format,
    agreement,
    calibration_inputs,
    ort_tensors,
    quantize,
    run_fed,
)
from vta.graph.quant import ort_scale_word, quantize_linear
from vta.isa import decode, encode
from vta.isa.requant import INSTRUCTION, RequantF32, scale_mul, scale_word, unpack_scale
from vta.resources import REQUANT_F32, breakdown
from vta.run.graph import run_graph

from .conftest import hw

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

#: the formats this variant is held to: symmetric and asymmetric int8 (uint8 QOperator
#: models meet ORT's own saturating U8S8 kernels: test_ort_kernels)
S8_A8 = [f for f in FORMATS if f.types in ("s8", "a8")]
INPUTS = 4
#: the issue's count of inputs for the bit-identity tests (bench/onnx_models.py's default)
ISSUE_INPUTS = 20
#: every format of both models: judged on its reference configuration
#: (``onnx_ort.reference_for``: QDQ fused into ORT's integer kernels, uint8 on its exact U8U8
#: kernels), each of ORT's kernels is an integer GEMM and ORT's requantize; ORT's graph as
#: written differs in three of them (tests/graph/test_ort_kernels.py proves why)
EXACT = [(m, f) for m in ("mlp", "small_cnn") for f in FORMATS]


# ------------------------------------------------------------------------ the arithmetic


def test_scale_mul_is_numpys_float32_product_rounded_half_to_even() -> None:
    rng = np.random.default_rng(0)
    acc = np.concatenate([rng.integers(-(1 << 31), 1 << 31, 20000),
                          rng.integers(-(1 << 20), 1 << 20, 20000),
                          np.array([0, 1, -1, (1 << 31) - 1, -(1 << 31)])])
    ratios = np.concatenate([10.0 ** rng.uniform(-7, -0.1, 40), [0.5, 0.25, 1 / 3, 0.75]])
    for r in ratios:
        f = np.float32(r)
        want = np.rint(acc.astype(np.float32) * f).astype(np.float64)  # float32 product
        keep = np.abs(want) < 2.0 ** 31
        got = scale_mul(acc, scale_word(float(r)))
        assert np.array_equal(got[keep], want[keep].astype(np.int64)), r


def test_ties_round_half_to_even() -> None:
    # 0.5 is m=1, s=1: 3 * 0.5 = 1.5 -> 2, 5 * 0.5 = 2.5 -> 2, -1.5 -> -2, -2.5 -> -2
    got = scale_mul(np.array([3, 5, -3, -5, 1, -1]), scale_word(0.5))
    assert got.tolist() == [2, 2, -2, -2, 0, 0]


def test_scale_words_hold_the_float32_ratio_exactly() -> None:
    for r in (0.00123, 1 / 3, 0.7, 2.5, 3e-6, 1.0):
        m, s = unpack_scale(np.array(scale_word(r)))
        assert float(m) / 2.0 ** int(s) == float(np.float32(r))
        assert 0 < int(m) < 1 << 24


@pytest.mark.parametrize("bad", [0.0, -0.5, float("inf"), float("nan"), 2.0 ** 25, 1e-80])
def test_a_ratio_no_word_holds_is_refused_by_name(bad: float) -> None:
    with pytest.raises(ValueError, match="requantize"):
        scale_word(bad)
    with pytest.raises(GraphError, match="requantize conv1"):
        ort_scale_word(bad, "requantize conv1")


def test_a_ratio_that_could_leave_int32_is_refused_by_name() -> None:
    b = GraphBuilder("big")
    x = b.input("x", (1, 4), 0.1)
    acc = b.dense(x, b.const("w", np.full((2, 4), 127, np.int8), 0.1),
                  b.const("b", np.zeros(2, np.int32)), name="fc")
    with pytest.raises(GraphError, match=r"requantize fc_q: channel 0: ratio .* leaves int32"):
        b.requantize_exact(acc, [1e6], 1.0)
    with pytest.raises(GraphError, match="3 ratios"):
        b.requantize_exact(acc, [0.1, 0.2, 0.3], 1.0)


def test_every_word_means_a_scale_and_saturates_to_int32() -> None:
    rng = np.random.default_rng(1)
    words = rng.integers(-(1 << 31), 1 << 31, 5000)
    acc = rng.integers(-(1 << 31), 1 << 31, 5000)
    y = scale_mul(acc, words)
    assert y.min() >= -(1 << 31) and y.max() < 1 << 31


# ------------------------------------------------------------------------ the instruction


def test_pynq_requant_lists_the_intrinsic_and_fits_the_pynq() -> None:
    rq, mul = hw("pynq_requant"), hw("pynq_mul")
    assert rq.intrinsic(REQUANT_F32) is not None and not rq.stock
    assert rq.fits_board()
    est, base = rq.resource_estimate(), mul.resource_estimate()
    assert est["dsp"] == base["dsp"]  # the product runs on ALU MUL's multipliers
    assert est["lut"] > base["lut"] and est["ff"] > base["ff"]
    rows = [r for r in breakdown(rq) if r[1].startswith("REQUANT_F32")]
    assert {r[0] for r in rows} == {"dsp", "lut", "ff"}
    # without ALU MUL it brings its own multipliers: 2 DSP48 per 16 lanes
    alone = hw("pynq").with_changes(**{"stock": False, f"intrinsics.{REQUANT_F32}": {}})
    assert alone.resource_estimate()["dsp"] == hw("pynq").resource_estimate()["dsp"] + 32


def test_an_unknown_intrinsic_parameter_is_a_named_config_error() -> None:
    with pytest.raises(HwConfigError, match=REQUANT_F32):
        hw("pynq_mul").with_changes(**{f"intrinsics.{REQUANT_F32}": {"lanes": 3}})


def test_the_instruction_encodes_and_assembles_round_trip() -> None:
    h = hw("pynq_requant")
    insn = RequantF32(reset=False, uop_bgn=3, uop_end=9, iter_out=4, iter_in=2,
                      dst_factor_out=64, dst_factor_in=1, src_factor_out=0, src_factor_in=0)
    assert decode(encode(insn, h), h) == insn
    # 4 x 2 x 6 micro-ops at the intrinsic's ii (2) on one 16-lane issue, plus its pipeline
    assert INSTRUCTION.duration(insn, h) >= 4 * 2 * 6 * 2


@cache
def _model(model: str, fmt: Format):  # type: ignore[no-untyped-def]
    return quantize(MODELS[model](0), fmt, seed=1)


def _judge(model: str, fmt: Format, fed: bool = False,  # type: ignore[no-untyped-def]
           inputs: int = INPUTS):
    q = _model(model, fmt)
    g = load_onnx(q, requant="ort")
    v = g.inputs[0]
    out = []
    for x in calibration_inputs(MODELS[model](0), 99, inputs):
        ort = ort_tensors(q, {v.name: x})
        xq = {v.name: quantize_linear(x, v.type.scale, v.type.zero)}
        values = run_fed(g, xq, ort) if fed else interp.run_graph(g, xq)
        out.append((g, values, ort))
    return out


# ------------------------------------------------------------------------ judged by ORT


@pytest.mark.parametrize(("model", "fmt"), EXACT, ids=[f"{m}-{f.name}" for m, f in EXACT])
def test_exact_import_is_bit_identical_to_ort_end_to_end(model: str, fmt: Format) -> None:
    """The requantize variant's import is ORT's on every int8 tensor, from the quantized input
    to the output, on the issue's 20 inputs, in all twelve formats of both models, each
    against its reference configuration (``onnx_ort.reference_for``)."""
    for g, values, ort in _judge(model, fmt, inputs=ISSUE_INPUTS):
        a = agreement(g, values, ort)
        assert a.identical and a.tensors >= (5 if model == "small_cnn" else 2), \
            (fmt.name, str(a))
        assert all(n.exact for n in g.nodes if isinstance(n, Requantize))


QOPERATOR = [f for f in S8_A8 if f.layout == "QOperator"]


@pytest.mark.parametrize("fmt", QOPERATOR, ids=[f.name for f in QOPERATOR])
def test_small_cnn_requantizes_are_orts_bits(fmt: Format) -> None:
    """Every requantize output (each QLinearConv and QGemm), fed ORT's operands, is ORT's
    tensor bit for bit: the integer kernels whose arithmetic ALU.REQUANT_F32 reproduces."""
    for g, values, ort in _judge("small_cnn", fmt, fed=True):
        rq = [n for n in g.nodes if isinstance(n, Requantize)]
        assert rq and all(n.exact for n in rq)
        for n in rq:
            want = np.asarray(ort[n.output.name]).astype(np.int64).reshape(-1)
            got = np.asarray(values[n.output]).astype(np.int64).reshape(-1)
            assert np.array_equal(got, want), (fmt.name, n.output.name)


# ------------------------------------------------------------------------ on the accelerator


@pytest.mark.parametrize(("model", "fmt"), [
    ("mlp", Format("QOperator", "s8", False)), ("mlp", Format("QDQ", "a8", True)),
    ("small_cnn", Format("QOperator", "a8", True)), ("small_cnn", Format("QDQ", "s8", False))])
def test_pynq_requant_runs_ort_requantizes_bit_exact(model: str, fmt: Format) -> None:
    q = _model(model, fmt)
    g = load_onnx(q, requant="ort")
    cg = compile_graph(g, hw("pynq_requant"), refine=1)
    v = g.inputs[0]
    x = calibration_inputs(MODELS[model](0), 5, 1)[0]
    r = run_graph(cg, {v.name: quantize_linear(x, v.type.scale, v.type.zero)})
    assert r.passed  # every stored tensor equals the interpreter's
    used = [i for p in cg.programs if p for i in p.instructions if isinstance(i, RequantF32)]
    assert len(used) >= sum(isinstance(n, Requantize) for n in g.nodes)
    assert not [h for h in cg.host_ops if "requantize" in h.group.op]
    a = agreement(g, {**r.reference, **r.outputs}, ort_tensors(q, {v.name: x}))
    assert a.tensors >= 2


def test_exact_requantizes_are_refused_by_name_without_the_intrinsic() -> None:
    g = load_onnx(_model("mlp", Format("QOperator", "s8", False)), requant="ort")
    with pytest.raises(GraphError, match=r"requant_f32.*pynq_mul.*pynq_requant"):
        compile_graph(g, hw("pynq_mul"))


def test_an_unknown_requant_mode_is_refused_by_name() -> None:
    with pytest.raises(Exception, match="requant must be one of fixed, ort"):
        load_onnx(_model("mlp", Format("QOperator", "s8", False)), requant="float")


def test_stock_configs_know_nothing_of_it() -> None:
    for name in ("pynq", "pynq_mul"):
        assert HwConfig.from_yaml(hw(name).source).intrinsic(REQUANT_F32) is None


def test_vta_run_on_pynq_requant_gives_orts_bits_from_a_random_input(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``vta run --onnx`` imports ORT's arithmetic on a config with the intrinsic; its random
    int8 input is judged as the real image it stands for (less its zero point: asymmetric)."""
    path = tmp_path / "mlp_a8.onnx"
    onnx.save(_model("mlp", Format("QOperator", "a8", False)), str(path))
    hw_path = str(hw("pynq_requant").source)
    assert main(["run", "--onnx", str(path), "--hw", hw_path, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    v = s["onnx_runtime"]
    assert v["judged"] and v["identical"] and v["max_diff"] == 0, v
