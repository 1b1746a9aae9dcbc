"""ONNX Runtime's QLinearGlobalAveragePool, bit for bit.

``quant_mlas.qlinear_global_avg_pool`` (MLAS ``qlgavgpool.cpp``: the exact channel sum minus
``N * z_x``, ``MlasRequantizeOutput`` by the float32 ratio ``s_x / (s_y * float(N))``) is
checked against ORT itself on **every** channel sum an image can have (one channel per sum),
for seeded scales and zero points, int8 and uint8, 2x2, 3x3 and 7x7 images; then vta's exact
import (``load_onnx(requant="ort")``) on the same inputs, and its lowering on the
accelerator (pynq_requant) and the GPU emulator. The fixed-point ``global_avg_pool`` (one
multiplier and a rounding shift) is not ORT's for most ratios: the import keeps it only where
it equals the kernel on every sum (``onnx_import._fixed_gap_is_orts``), else the pool carries
ORT's scale word (``GlobalAvgPool.exact``: REQUANT_F32 after the window sum).

Skipped without onnx and onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper

from vta.errors import GraphError, OnnxImportError
from vta.graph import interp
from vta.graph.compile import compile_graph
from vta.graph.ir import GlobalAvgPool, TensorType, Value
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import FLOAT_IR_VERSION, agreement, ort_tensors
from vta.graph.quant_mlas import qlinear_gap_ratio, qlinear_global_avg_pool
from vta.graph.verify import infer_type
from vta.run.graph import compile_for, run_graph
from vta.run.targets import get_target

from .conftest import hw

#: (image side, unsigned) of the exhaustive cases; each gets ``SCALES`` seeded scale pairs
SHAPES = [(2, False), (2, True), (3, False), (3, True), (7, False), (7, True)]
SCALES = 4


def gap_model(c: int, side: int, sx: float, zx: int, sy: float, zy: int,
              unsigned: bool) -> Any:
    """A float input ``x`` (1, c, side, side) quantized by ``QuantizeLinear`` (scale ``sx``,
    zero point ``zx``) and pooled by com.microsoft's QLinearGlobalAveragePool to (``sy``,
    ``zy``); output ``y`` (1, c, 1, 1)."""
    dt, np_t = (TensorProto.UINT8, np.uint8) if unsigned else (TensorProto.INT8, np.int8)
    inits = [numpy_helper.from_array(np.array(sx, np.float32), "sx"),
             numpy_helper.from_array(np.array(zx, np_t), "zx"),
             numpy_helper.from_array(np.array(sy, np.float32), "sy"),
             numpy_helper.from_array(np.array(zy, np_t), "zy")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("QLinearGlobalAveragePool", ["xq", "sx", "zx", "sy", "zy"],
                              ["y"], domain="com.microsoft", channels_last=0)]
    g = helper.make_graph(nodes, "gap", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, c, side, side])],
        [helper.make_tensor_value_info("y", dt, [1, c, 1, 1])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                               helper.make_opsetid("com.microsoft", 1)],
                             ir_version=FLOAT_IR_VERSION)


def every_sum(side: int, lo: int, hi: int) -> np.ndarray:
    """(1, C, side, side) integers in [lo, hi] whose channel ``k`` sums to ``N * lo + k``:
    every sum an image of ``N = side**2`` pixels can have, once."""
    n = side * side
    extra = np.arange(n * (hi - lo) + 1, dtype=np.int64)
    full, rest = np.divmod(extra, hi - lo)
    k = np.arange(n)
    px = np.where(k[None, :] < full[:, None], hi, lo)
    px = np.where(k[None, :] == full[:, None], lo + rest[:, None], px)
    return px.reshape(1, -1, side, side)


def cases() -> list[tuple[int, bool, float, int, float, int]]:
    """Seeded (side, unsigned, sx, zx, sy, zy): output scales from 0.3 to 1.2 times the
    input's (a mean's range is the input's or less), zero points anywhere."""
    rng = np.random.default_rng(21)
    out = []
    for side, unsigned in SHAPES:
        lo, hi = (0, 255) if unsigned else (-128, 127)
        for _ in range(SCALES):
            sx = float(np.float32(rng.uniform(0.002, 0.2)))
            sy = float(np.float32(sx * rng.uniform(0.3, 1.2)))
            out.append((side, unsigned, sx, int(rng.integers(lo, hi + 1)), sy,
                        int(rng.integers(lo, hi + 1))))
    return out


CASES = cases()
IDS = [f"{s}x{s}-{'u8' if u else 's8'}-{k % SCALES}" for k, (s, u, *_) in enumerate(CASES)]


def _run_ort(case: tuple[int, bool, float, int, float, int]
             ) -> tuple[Any, np.ndarray, np.ndarray]:
    side, unsigned, sx, zx, sy, zy = case
    lo, hi = (0, 255) if unsigned else (-128, 127)
    xq = every_sum(side, lo, hi)
    m = gap_model(xq.shape[1], side, sx, zx, sy, zy, unsigned)
    x = ((xq - zx) * np.float32(sx)).astype(np.float32)  # quantizes back to xq exactly
    ort = ort_tensors(m, {"x": x})
    assert np.array_equal(ort["xq"].astype(np.int64), xq)
    return m, xq, ort["y"].astype(np.int64).reshape(1, -1)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_orts_kernel_is_the_exact_sum_and_mlas_requantize(case: Any) -> None:
    side, unsigned, sx, zx, sy, zy = case
    _, xq, want = _run_ort(case)
    lo, hi = (0, 255) if unsigned else (-128, 127)
    got = qlinear_global_avg_pool(xq, zx, qlinear_gap_ratio(sx, sy, side * side), zy, lo, hi)
    assert np.array_equal(got, want)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_the_exact_import_gives_orts_bits_for_every_sum(case: Any) -> None:
    unsigned = case[1]
    m, xq, want = _run_ort(case)
    g = load_onnx(m, requant="ort")
    v = g.inputs[0]
    env = interp.run_graph(g, {v.name: (xq - (128 if unsigned else 0)).astype(np.int8)})
    y = next(val for val in g.outputs)
    assert np.array_equal(env[y].astype(np.int64) + (128 if unsigned else 0), want)


def test_the_fixed_point_pool_is_kept_only_where_it_is_orts() -> None:
    """Across the cases both forms occur: the fixed-point pool where it is ORT's on every
    sum, the exact pool elsewhere; the fixed-point import itself (``requant="fixed"``) differs
    from ORT somewhere."""
    kinds, fixed_differs = set(), 0
    for case in CASES:
        m, xq, want = _run_ort(case)
        g = load_onnx(m, requant="ort")
        (pool,) = [n for n in g.nodes if isinstance(n, GlobalAvgPool)]
        kinds.add("exact" if pool.exact else "fixed")
        f = load_onnx(m)
        v = f.inputs[0]
        env = interp.run_graph(f, {v.name: (xq - (128 if case[1] else 0)).astype(np.int8)})
        got = env[f.outputs[0]].astype(np.int64) + (128 if case[1] else 0)
        fixed_differs += int(not np.array_equal(got, want))
    assert kinds == {"fixed", "exact"}
    assert fixed_differs > 0


def _pool(g: Any) -> GlobalAvgPool:
    (pool,) = [n for n in g.nodes if isinstance(n, GlobalAvgPool)]
    return pool


def _small(seed: int, unsigned: bool) -> tuple[Any, np.ndarray, np.ndarray]:
    """A 64-channel 4x4 pool with seeded scales whose fixed-point form is not ORT's, a seeded
    input, ORT's output."""
    rng = np.random.default_rng(seed)
    lo, hi = (0, 255) if unsigned else (-128, 127)
    for _ in range(100):
        sx = float(np.float32(rng.uniform(0.01, 0.1)))
        sy = float(np.float32(sx * rng.uniform(0.3, 1.0)))
        zx, zy = int(rng.integers(lo, hi + 1)), int(rng.integers(lo, hi + 1))
        m = gap_model(64, 4, sx, zx, sy, zy, unsigned)
        if _pool(load_onnx(m, requant="ort")).exact:
            break
    xq = rng.integers(lo, hi + 1, (1, 64, 4, 4))
    x = ((xq - zx) * np.float32(sx)).astype(np.float32)
    return m, x, ort_tensors(m, {"x": x})["y"]


@pytest.mark.parametrize("unsigned", [False, True], ids=["s8", "u8"])
def test_the_exact_pool_runs_on_the_accelerator_and_the_gpu(unsigned: bool) -> None:
    m, x, want = _small(3, unsigned)
    g = load_onnx(m, requant="ort")
    assert _pool(g).exact  # ORT's scale word after the window sum
    v = g.inputs[0]
    xq = {v.name: np.clip(np.rint(x / v.type.scale) + v.type.zero, -128, 127).astype(np.int8)}
    for compiled in (compile_graph(g, hw("pynq_requant"), refine=1),
                     compile_for(g, get_target("cuda-emu"))):
        r = run_graph(compiled, xq)
        s = r.summary()
        assert r.passed, s["verdict"]
        a = agreement(g, {**r.reference, **r.outputs}, {"y": want})
        assert a.identical, a
        # a kernel, not a host fallback: the window sum, then REQUANT_F32 by the words
        (step,) = s["steps"]
        assert step.get("placement", "vta") == "vta" and not step.get("reason"), step


def test_a_ratio_ort_refuses_is_refused_by_name() -> None:
    m = gap_model(4, 2, 1.0, 0, 1e-3, 0, False)  # s_x / (s_y * 4) = 250: fine
    load_onnx(m, requant="ort")
    m = gap_model(4, 2, 4.0, 0, 1e-3, 0, False)  # 1000 >= 256: ORT refuses it
    with pytest.raises(OnnxImportError, match=r"QLinearGlobalAveragePool refuses the ratio"):
        load_onnx(m, requant="ort")


def test_an_exact_pool_without_its_scale_words_is_refused() -> None:
    """``GlobalAvgPool.exact`` reads its scale words like an exact requantize: the type rules
    refuse one without them, or with a multiplier besides them."""
    x = Value("x", TensorType((1, 4, 2, 2), "int8", "NCHW", 0.1))
    attrs = {"mult": 1, "shift": 0, "lo": -128, "hi": 127, "exact": True}
    with pytest.raises(GraphError, match="needs its scale words"):
        infer_type(GlobalAvgPool, (x,), attrs, "global_avg_pool p")
    words = Value("w", TensorType((4,), "int32", "C"), np.full(4, 1 << 23, np.int32))
    with pytest.raises(GraphError, match="mult 1 and shift 0"):
        infer_type(GlobalAvgPool, (x, words), {**attrs, "mult": 3}, "global_avg_pool p")
    assert infer_type(GlobalAvgPool, (x, words), {**attrs, "scale": 0.05},
                      "global_avg_pool p").shape == (1, 4)


def test_an_exact_pool_needs_the_requant_instruction() -> None:
    """Like an exact requantize, an exact pool is refused by name on a config without
    ``requant_f32`` (pynq_mul), naming the pool."""
    m, _, _ = _small(3, False)
    with pytest.raises(GraphError, match=r"global_avg_pool y: ONNX Runtime's float32 "
                                         r"arithmetic .* needs the requant_f32 intrinsic"):
        compile_graph(load_onnx(m, requant="ort"), hw("pynq_mul"), refine=1)
