"""MobileNet-V2 and ONNX Runtime's exact element-wise arithmetic.

* ``ort_add``'s tables are ORT's: every one of the 256 x 256 input pairs of a ``QLinearAdd``
  (QOperator), a float ``Add`` between DequantizeLinear and QuantizeLinear (QDQ) and a
  requantizing ``Clip`` island, for a set of scales and zero points, int8 and uint8;
* the integer form ``fit_add`` finds reproduces each table on every pair (exhaustively);
* grouped / depthwise convolutions: the interpreter, the accelerator (block-diagonal weights
  on the GEMM core) and the GPU path agree;
* MobileNet-V2 (32x32 input) quantized by ORT imports in all twelve formats and its int8
  tensors are ORT's; end to end on pynq_requant and cuda-emu (``slow``).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from vta.cli import main  # noqa: E402
from vta.errors import OnnxImportError  # noqa: E402
from vta.graph import interp  # noqa: E402
from vta.graph.builder import GraphBuilder  # noqa: E402
from vta.graph.compile import compile_graph  # noqa: E402
from vta.graph.ir import Add, Conv2d, Lut2  # noqa: E402
from vta.graph.onnx_import import load_onnx  # noqa: E402
from vta.graph.onnx_ort import (  # noqa: E402
    FORMATS,
    MODELS,
    NETWORK_FORMAT,
    SHIFT_FORMAT,
    Format,
    agreement,
    calibration_inputs,
    mobilenet_v2,
    ort_tensors,
    pow2_scales,
    quantize,
    run_fed,
)
from vta.graph.ort_add import (  # noqa: E402
    apply_form,
    fit_add,
    qdq_add_table,
    qlinear_add_table,
    rescale_table,
)
from vta.graph.place import block_diagonal  # noqa: E402
from vta.graph.quant import quantize_linear  # noqa: E402
from vta.run.graph import compile_for, run_graph  # noqa: E402
from vta.run.targets import CudaEmuTarget  # noqa: E402

from .conftest import ROOT, hw  # noqa: E402

#: (s_a, z_a, s_b, z_b, s_c, z_c, unsigned): symmetric int8, asymmetric int8, uint8, a ratio
#: above 1, and a ReLU6-like output range
SCALES = [(0.0213, 0, 0.0371, 0, 0.0452, 0, False),
          (0.0517, 17, 0.0139, -40, 0.0602, -9, False),
          (0.0310, 131, 0.0087, 200, 0.0355, 118, True),
          (0.0800, -3, 0.0150, 90, 0.0270, 5, False),
          (0.0236, -128, 0.0190, -128, 0.0259, -128, False)]


def _pairs_model(kind: str, sa: float, za: int, sb: float, zb: int, sc: float, zc: int,
                 unsigned: bool) -> Any:
    """A model applying ``kind`` (QLinearAdd, QDQ Add, or the Clip(0, 6) island of ``a``) to
    every stored pair: inputs ``a`` and ``b`` of 65,536 elements."""
    dt = TensorProto.UINT8 if unsigned else TensorProto.INT8
    inits = [helper.make_tensor(n, TensorProto.FLOAT, [], [s])
             for n, s in (("sa", sa), ("sb", sb), ("sc", sc))]
    inits += [helper.make_tensor(n, dt, [], [z]) for n, z in (("za", za), ("zb", zb), ("zc", zc))]
    inits += [helper.make_tensor("lo", TensorProto.FLOAT, [], [0.0]),
              helper.make_tensor("hi", TensorProto.FLOAT, [], [6.0])]
    if kind == "QLinearAdd":
        nodes = [helper.make_node("QLinearAdd", ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"],
                                  ["c"], domain="com.microsoft")]
    else:
        nodes = [helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["fa"]),
                 helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["fb"])]
        nodes += [helper.make_node("Add", ["fa", "fb"], ["f"])] if kind == "Add" else \
            [helper.make_node("Clip", ["fa", "lo", "hi"], ["f"])]
        nodes.append(helper.make_node("QuantizeLinear", ["f", "sc", "zc"], ["c"]))
    g = helper.make_graph(nodes, "pairs", [helper.make_tensor_value_info("a", dt, [65536]),
                                           helper.make_tensor_value_info("b", dt, [65536])],
                          [helper.make_tensor_value_info("c", dt, [65536])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid("com.microsoft", 1)])


def _ort_pairs(kind: str, params: tuple[Any, ...]) -> np.ndarray:
    unsigned = params[-1]
    v = np.arange(0, 256) if unsigned else np.arange(-128, 128)
    dtype = np.uint8 if unsigned else np.int8
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(_pairs_model(kind, *params).SerializeToString(), so,
                                providers=["CPUExecutionProvider"])
    out = sess.run(None, {"a": np.repeat(v, 256).astype(dtype),
                          "b": np.tile(v, 256).astype(dtype)})[0]
    return out.astype(np.int64).reshape(256, 256)


def _grid(unsigned: bool) -> tuple[np.ndarray, np.ndarray]:
    v = np.arange(-128, 128)  # the int8 form (a uint8 value less 128)
    return np.repeat(v, 256).reshape(256, 256), np.tile(v, 256).reshape(256, 256)


@pytest.mark.parametrize("params", SCALES)
@pytest.mark.parametrize("kind", ["QLinearAdd", "Add"])
def test_add_tables_are_onnx_runtimes_on_every_pair(kind: str, params: tuple[Any, ...]
                                                    ) -> None:
    table = (qlinear_add_table if kind == "QLinearAdd" else qdq_add_table)(*params)
    assert np.array_equal(table, _ort_pairs(kind, params))


@pytest.mark.parametrize("params", SCALES)
@pytest.mark.parametrize("kind", ["QLinearAdd", "Add"])
def test_the_integer_add_is_onnx_runtimes_on_every_pair(kind: str, params: tuple[Any, ...]
                                                        ) -> None:
    """Exhaustive: the integer form (ALU MUL, ADD, SHR, MIN, MAX) gives ORT's bits on all
    65,536 input pairs (the int8 forms of the operands, uint8 shifted by 128)."""
    sa, za, sb, zb, sc, zc, unsigned = params
    off = 128 if unsigned else 0
    want = _ort_pairs(kind, params) - off
    form = fit_add(want + off, za - off, zb - off, zc - off, (sa / sc, sb / sc), unsigned)
    if form is None:  # only where the real sum has exact ties ORT rounds both ways (to even)
        assert set(_tie_parities(params)) == {0, 1}
        return
    a, b = _grid(unsigned)
    assert np.array_equal(apply_form(form, a, za - off, b, zb - off, zc - off), want)


def _tie_parities(params: tuple[Any, ...]) -> list[int]:
    """The parity of ``floor(v)`` for each pair whose real ``v = (a - z_a) r_ac + (b - z_b) r_bc
    + z_c`` (ORT's float32 ratios, exactly) is a tie ``k + 1/2`` inside the output range."""
    sa, za, sb, zb, sc, zc, unsigned = params
    f32 = np.float32
    ra, rb = (Fraction(float(f32(f32(s) / f32(sc)))) for s in (sa, sb))
    lo, hi = (0, 255) if unsigned else (-128, 127)
    out = []
    for a in range(lo, hi + 1):
        for b in range(lo, hi + 1):
            v = (a - za) * ra + (b - zb) * rb + zc
            if v.denominator == 2 and lo <= v <= hi:
                out.append(int(v - Fraction(1, 2)) % 2)
    return out


@pytest.mark.parametrize("params", SCALES[:1])
def test_an_add_with_ties_imports_as_ort_s_table(params: tuple[Any, ...]) -> None:
    """No integer add is exact here (ties of both parities): the importer emits ORT's table
    (``lut2``, a host lookup), equal to ORT on every pair by construction."""
    sa, za, sb, zb, sc, zc, unsigned = params
    b = GraphBuilder("t")
    x, y = b.input("a", (1, 65536), sa, zero=za), b.input("b", (1, 65536), sb, zero=zb)
    table = qlinear_add_table(*params)
    assert fit_add(table, za, zb, zc, (sa / sc, sb / sc)) is None
    g = b.build([b.lut2(x, y, table, sc, name="c", zero=zc)])
    a_, b_ = _grid(unsigned)
    got = interp.run_graph(g, {g.inputs[0]: a_.reshape(1, -1).astype(np.int8),
                               g.inputs[1]: b_.reshape(1, -1).astype(np.int8)})
    assert np.array_equal(got[g.outputs[0]].reshape(256, 256), _ort_pairs("QLinearAdd", params))


@pytest.mark.parametrize("params", SCALES)
def test_the_requantizing_clip_island_is_onnx_runtimes(params: tuple[Any, ...]) -> None:
    """... and the integer form the importer emits for it (``x + x``, ``mult_b`` 0) gives
    ORT's value for every stored input."""
    sa, za, _, _, sc, zc, unsigned = params
    want = _ort_pairs("Clip", params)[:, 0]
    assert np.array_equal(rescale_table(sa, za, sc, zc, 0.0, 6.0, unsigned), want)
    off = 128 if unsigned else 0
    form = fit_add(np.repeat(want[:, None], 256, axis=1), za - off, za - off, zc - off,
                   (sa / sc, 0.0), unsigned)
    assert form is not None and form.mult_b == 0
    x = np.arange(-128, 128)
    got = apply_form(form, x, za - off, x, za - off, zc - off)
    assert np.array_equal(got, want - off)


def test_grouped_conv_interpreter_matches_the_block_diagonal_conv() -> None:
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 32, 9, 9)).astype(np.int8)
    for groups, cg in ((32, 1), (4, 8)):
        w = rng.integers(-128, 128, (32, cg, 3, 3)).astype(np.int8)
        for stride in (1, 2):
            want = interp.conv2d_int32(x, block_diagonal(w, groups), stride, 1)
            assert np.array_equal(interp.grouped_conv2d_int32(x, w, stride, 1, groups), want)


def _depthwise_graph() -> tuple[Any, dict[str, np.ndarray]]:
    """x -> depthwise 3x3/2 conv + requantize + ReLU -> 1x1 conv + requantize, + the exact
    add of an ORT form."""
    rng = np.random.default_rng(5)
    b = GraphBuilder("dw", requant="fixed")
    x = b.input("x", (1, 32, 8, 8), 0.05)
    w = b.const("w", rng.integers(-60, 60, (32, 1, 3, 3)).astype(np.int8), 0.01)
    bias = b.const("b", rng.integers(-200, 200, 32).astype(np.int32))
    y = b.relu(b.requantize(b.conv2d(x, w, bias, 2, 1, name="dw", groups=32), 0.03))
    w2 = b.const("w2", rng.integers(-60, 60, (32, 32, 1, 1)).astype(np.int8), 0.01)
    z = b.requantize(b.conv2d(y, w2, bias, 1, 0, name="pw"), 0.04)
    form = fit_add(qlinear_add_table(0.03, 0, 0.04, 0, 0.05, 0), 0, 0, 0,
                   (0.03 / 0.05, 0.04 / 0.05))
    assert form is not None
    out = b.add_form(y, z, form, 0.05, name="sum")
    return b.build([out]), {"x": rng.integers(-128, 128, (1, 32, 8, 8)).astype(np.int8)}


def test_depthwise_and_exact_add_on_the_accelerator() -> None:
    g, x = _depthwise_graph()
    c = compile_graph(g, hw("pynq_requant"), refine=1)
    r = run_graph(c, x)
    s = r.summary()
    assert r.passed and s["host_ops"] == 0, s
    assert s["accelerated_macs"] == s["macs"] == g.macs  # useful MACs (zeros not counted)
    dw = next(row for row in s["steps"] if row["ops"][0] == "conv2d")
    assert "groups=32 (block-diagonal: 96.9% of GEMM MACs on zeros)" in dw["schedule"]


def test_depthwise_and_exact_add_on_the_gpu_path() -> None:
    g, x = _depthwise_graph()
    r = run_graph(compile_for(g, CudaEmuTarget()), x)
    assert r.passed, r.summary()["mismatched_tensors"]


def test_mobilenet_v2_layout() -> None:
    m = mobilenet_v2(size=32, classes=10)
    ops = [n.op_type for n in m.graph.node]
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    groups = [next((a.i for a in n.attribute if a.name == "group"), 1) for n in convs]
    assert len(convs) == 52 and ops.count("Add") == 10 and ops.count("Clip") == 35
    assert sum(gr > 1 for gr in groups) == 17  # one depthwise conv per inverted residual


@pytest.fixture(scope="module")
def mobilenet() -> Any:
    return mobilenet_v2(size=32, classes=10)


@pytest.mark.parametrize("fmt", [f for f in FORMATS if not (f.layout == "QOperator"
                                                             and f.types == "u8")],
                         ids=lambda f: f.name)
def test_mobilenet_v2_int8_tensors_are_onnx_runtimes(mobilenet: Any, fmt: Format) -> None:
    """Imported with ORT's arithmetic (``requant="ort"``): in the QOperator form (ORT's
    integer kernels) every int8 tensor is ORT's, end to end. In the QDQ form ORT convolves the
    dequantized floats, whose float32 sums now and then land one unit away from the integer
    result; fed ORT's own operands (``run_fed``) every operator is within one unit and all but
    a handful of values equal (end to end such a unit then propagates)."""
    q = quantize(mobilenet, fmt)
    g = load_onnx(q, requant="ort")
    x = np.random.default_rng(9).standard_normal((1, 3, 32, 32)).astype(np.float32)
    v = g.inputs[0]
    xq = quantize_linear(x, v.type.scale or 1.0, v.type.zero)
    ort_t = ort_tensors(q, {v.name: x})
    if fmt.layout == "QOperator":
        a = agreement(g, interp.run_graph(g, {v: xq}), ort_t)
        assert a.identical and a.tensors >= 21, a
    else:
        a = agreement(g, run_fed(g, {v.name: xq}, ort_t), ort_t)
        assert a.tensors >= 64 and a.max_diff <= 1 and a.elements - a.equal <= 4, a
    grouped = [n for n in g.nodes if isinstance(n, Conv2d) and n.groups > 1]
    assert len(grouped) == 17
    adds = [n for n in g.nodes if isinstance(n, Add) and n.a is not n.b]
    luts = [n for n in g.nodes if isinstance(n, Lut2)]
    assert len(adds) + len(luts) == 10


@pytest.mark.slow
def test_mobilenet_v2_on_pynq_requant_is_onnx_runtimes(mobilenet: Any) -> None:
    """The QOperator layout (ORT's integer kernels), symmetric and asymmetric: every int8
    tensor ORT computes is the accelerator's, bit for bit, end to end."""
    for fmt in (NETWORK_FORMAT, Format("QOperator", "a8", False)):
        _on_pynq_requant(quantize(mobilenet, fmt))


def _on_pynq_requant(q: Any) -> None:
    g = load_onnx(q, requant="ort")
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    v = g.inputs[0]
    xq = quantize_linear(x, v.type.scale or 1.0, v.type.zero)
    r = run_graph(compile_graph(g, hw("pynq_requant"), refine=1), {v.name: xq})
    assert r.passed
    a = agreement(g, {**r.reference, **r.outputs}, ort_tensors(q, {v.name: x}))
    assert a.identical, a


@pytest.mark.slow
def test_mobilenet_v2_on_the_gpu_path(mobilenet: Any) -> None:
    q = quantize(mobilenet, Format("QDQ", "a8", False))
    g = load_onnx(q)  # the fixed-point import (ORT's exact one: test_gpu_graph.py)
    x = np.random.default_rng(4).standard_normal((1, 3, 32, 32)).astype(np.float32)
    v = g.inputs[0]
    r = run_graph(compile_for(g, CudaEmuTarget()),
                  {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)})
    assert r.passed, r.summary()["mismatched_tensors"]


def test_mobilenet_v2_on_stock_pynq_runs_with_power_of_two_scales(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Stock pynq has no ALU MUL: ``vta run`` quantizes the network in the symmetric QDQ form
    with every scale rounded to a power of two (``onnx_ort.SHIFT_FORMAT``, ``pow2_scales``),
    so every requantization is a shift; its ORT agreement is printed beside the PASS."""
    assert main(["run", "--hw", str(ROOT / "hwconfigs" / "pynq.yaml"), "mobilenet_v2_32",
                 "--no-cache"]) == 0
    out = capsys.readouterr().out
    assert "PASS: the outputs and all" in out and "ONNX Runtime" in out
    alu = next(line for line in out.splitlines() if line.startswith("ALU instructions"))
    assert "SHR" in alu and "MUL" not in alu and "REQUANT" not in alu


def test_pow2_scales_keep_the_bias_rule() -> None:
    """Each Conv's int32 bias scale is its input's times its weight's new scale after
    ``pow2_scales`` (ORT's rule, which the importer checks), every scale a power of two."""
    q = pow2_scales(quantize(mobilenet_v2(0, size=32), SHIFT_FORMAT, 0))
    inits = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    dq = {n.output[0]: n for n in q.graph.node if n.op_type == "DequantizeLinear"}
    convs = [n for n in q.graph.node if n.op_type == "Conv" and len(n.input) > 2]
    assert convs
    for n in convs:
        x, w, b = (inits[dq[i].input[1]] for i in n.input[:3])
        np.testing.assert_array_equal(b, x * w)
    for name, s in inits.items():
        if name.endswith("scale"):
            assert np.all(np.exp2(np.round(np.log2(s))) == s), name


def test_mobilenet_v2_takes_no_batch(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "mobilenet_v2_32", "--batch", "2"]) == 2
    assert "--batch does not apply to mobilenet_v2_32" in capsys.readouterr().err


SMALL_CNN_FORMATS = [f for f in FORMATS if f.layout == "QOperator" and f.types != "u8"]


@pytest.mark.parametrize("fmt", SMALL_CNN_FORMATS, ids=lambda f: f.name)
def test_small_cnn_with_its_residual_add_is_onnx_runtimes(fmt: Format) -> None:
    """With the exact add, the small CNN (conv, max-pool, conv + residual QLinearAdd, pool,
    QGemm) is ORT's on every int8 tensor, end to end (it was within one unit)."""
    fm = MODELS["small_cnn"](0)
    q = quantize(fm, fmt, seed=1)
    g = load_onnx(q, requant="ort")
    assert any(isinstance(n, Add) for n in g.nodes)  # an integer form was found
    v = g.inputs[0]
    for x in calibration_inputs(fm, 99, 4):
        xq = quantize_linear(x, v.type.scale or 1.0, v.type.zero)
        a = agreement(g, interp.run_graph(g, {v: xq}), ort_tensors(q, {v.name: x}))
        assert a.identical, (fmt.name, str(a))


def _clip_model(clip_inputs: list[str], after_conv: bool) -> Any:
    """x -> Q -> DQ -> [Conv ->] Clip(clip_inputs) -> Q -> y (QDQ form, scales 2**-k)."""
    w = np.random.default_rng(1).integers(-40, 40, (4, 4, 1, 1), dtype=np.int8)
    inits = [onnx.numpy_helper.from_array(w, "w"),
             onnx.numpy_helper.from_array(np.float32(0.25), "s"),
             onnx.numpy_helper.from_array(np.float32(0.0625), "sw"),
             onnx.numpy_helper.from_array(np.int8(0), "z"),
             onnx.numpy_helper.from_array(np.float32(0.0), "lo"),
             onnx.numpy_helper.from_array(np.float32(6.0), "hi")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xf"])]
    src = "xf"
    if after_conv:
        nodes += [helper.make_node("DequantizeLinear", ["w", "sw", "z"], ["wf"]),
                  helper.make_node("Conv", ["xf", "wf"], ["c"])]
        src = "c"
    nodes += [helper.make_node("Clip", [src, *clip_inputs], ["r"]),
              helper.make_node("QuantizeLinear", ["r", "s", "z"], ["y"])]
    extra = [helper.make_tensor_value_info("m", TensorProto.FLOAT, [])] \
        if "m" in clip_inputs else []
    g = helper.make_graph(nodes, "clip", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4, 4, 4]), *extra], [helper.make_tensor_value_info(
            "y", TensorProto.INT8, [1, 4, 4, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_clip_forms_the_importer_does_not_take_are_refused_by_name() -> None:
    with pytest.raises(OnnxImportError, match=r"'r' \(Clip\): Clip of c, which is not a "
                                              r"dequantized int8 tensor"):
        load_onnx(_clip_model(["lo", "hi"], after_conv=True))
    with pytest.raises(OnnxImportError, match=r"\bm\b"):  # a bound that is not a constant
        load_onnx(_clip_model(["lo", "m"], after_conv=False))


def test_a_same_scale_relu6_island_is_a_clip_and_onnx_runtimes() -> None:
    m = _clip_model(["lo", "hi"], after_conv=False)
    g = load_onnx(m, requant="ort")
    x = np.random.default_rng(2).standard_normal((1, 4, 4, 4)).astype(np.float32) * 3
    v = g.inputs[0]
    env = interp.run_graph(g, {v: quantize_linear(x, v.type.scale or 1.0, v.type.zero)})
    assert agreement(g, env, ort_tensors(m, {v.name: x})).identical
