"""A graph through the GPU path (SIMT emulator): every fused group one generated kernel,
every tensor bit-exact against the graph interpreter; models imported with ONNX Runtime's
arithmetic (exact requantizes, table adds) judged by ORT too."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from vta.cli import main
from vta.graph.builder import GraphBuilder
from vta.graph.ir import Graph, Requantize
from vta.graph.models import resnet18_fixed
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import MODELS, Format, agreement, calibration_inputs, ort_tensors, quantize
from vta.graph.ort_add import fit_add, qlinear_add_table
from vta.graph.quant import quantize_linear
from vta.run.graph import GraphRun, compile_for, run_graph
from vta.run.report import format_gpu_run
from vta.run.targets import CudaEmuTarget

from .conftest import SMALL, mini_graph


def run_graph_gpu(g: Graph, inputs: dict[str, np.ndarray]) -> GraphRun:
    return run_graph(compile_for(g, CudaEmuTarget()), inputs)


@pytest.mark.parametrize("requant", ["shift", "fixed"])
def test_mini_graph_on_the_gpu_path(requant: str) -> None:
    g, x = mini_graph(requant=requant)
    r = run_graph_gpu(g, {"x": x})
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    kernels = [row["kernel"] for row in s["steps"]]
    # convolutions: the channels-last task-mapping kernel with the chain fused (the second
    # with its residual add); dense of a batch of 1: SIMT
    assert kernels == ["conv2d_nhwc_mma_int8", "max_window", "conv2d_nhwc_mma_int8",
                       "ewise_window", "sum_window", "matmul_int8_simt"]
    assert [row["layout"] for row in s["steps"]] == ["NHWC", "NCHW", "NHWC", "NCHW", "plain",
                                                    "plain"]
    assert [row["ops"] for row in s["steps"]][2] == ["conv2d", "requantize", "add", "relu"]
    assert [row["ops"] for row in s["steps"]][3] == ["add", "relu"]
    # the host transposes only where an NCHW window kernel and an NHWC convolution meet (a
    # value both convolutions read is transposed once)
    assert s["host_transposes"] == 4
    assert "PASS" in format_gpu_run(s)


def test_batch_of_two_on_the_gpu_path() -> None:
    g, x = mini_graph(batch=2)
    assert run_graph_gpu(g, {"x": x}).passed


@pytest.mark.slow
def test_small_resnet_on_the_gpu_path(small_resnet: Graph, small_image: np.ndarray) -> None:
    r = run_graph_gpu(small_resnet, {"image": small_image})
    assert r.passed and len(r.steps) == 23


@pytest.mark.slow
def test_small_fixed_point_resnet_on_the_gpu_path(small_image: np.ndarray) -> None:
    """The fixed-point variant (multipliers a GPU has) is bit-exact there too."""
    r = run_graph_gpu(resnet18_fixed(**SMALL), {"image": small_image})
    assert r.passed and len(r.steps) == 23


def test_dense_batch_of_16_takes_the_task_mapping_gemm() -> None:
    """A dense layer whose batch and features are both at least 16 runs as ``mma_gemm`` with
    its requantization and ReLU fused (bit-exact); a batch of one stays on SIMT (above)."""

    rng = np.random.default_rng(4)
    x = rng.integers(-128, 128, (16, 48), dtype=np.int8)
    b = GraphBuilder("fc", calibrate={"x": x})
    xv = b.input("x", x.shape, 1 / 128)
    w = b.const("w", rng.integers(-60, 60, (24, 48), dtype=np.int8), 1 / 128)
    fb = b.const("b", rng.integers(-50, 50, (24,), dtype=np.int32))
    g = b.build([b.relu(b.requantize(b.dense(xv, w, fb)), name="y")])
    r = run_graph_gpu(g, {"x": x})
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    assert [row["kernel"] for row in s["steps"]] == ["gemm_mma_int8"]
    assert s["steps"][0]["ops"] == ["dense", "requantize", "relu"]


# ------------------------------------------------------------------------ ORT's arithmetic


#: a small CNN and the MLP in formats with every kind of requantize the importer writes
#: exact: per-tensor and per-channel scale words, zero points, QDQ and QOperator
EXACT_CASES = [("small_cnn", "QOperator", "a8", True), ("small_cnn", "QDQ", "s8", False),
               ("small_cnn", "QOperator", "s8", False), ("mlp", "QDQ", "a8", True)]


@pytest.mark.parametrize(("model", "layout", "types", "per_channel"), EXACT_CASES,
                         ids=["-".join(map(str, c)) for c in EXACT_CASES])
def test_orts_exact_requantize_on_the_gpu_path(model: str, layout: str, types: str,
                                               per_channel: bool) -> None:
    """Imported with ORT's arithmetic (``requant="ort"``): every requantize runs in its
    GPU kernel (the ``requant_f32`` call fused into the convolution's or dense layer's
    epilogue), every tensor is bit-exact against the interpreter, and every int8 tensor ORT
    exposes is ORT's (onnxruntime, ``ORT_DISABLE_ALL``)."""
    pytest.importorskip("onnxruntime")
    q = quantize(MODELS[model](0), Format(layout, types, per_channel), seed=1)
    g = load_onnx(q, requant="ort")
    assert any(isinstance(n, Requantize) and n.exact for n in g.nodes)
    v = g.inputs[0]
    for k, x in enumerate(calibration_inputs(MODELS[model](0), 7, 2)):
        r = run_graph_gpu(g, {v.name: quantize_linear(x, v.type.scale, v.type.zero)})
        s = r.summary()
        assert r.passed, s["mismatched_tensors"]
        hosted = [row["ops"] for row in s["steps"] if row["kernel"] == "host"]
        assert hosted == [], hosted  # zero-point padding folded into the conv (fold_pad)
        a = agreement(g, {**r.reference, **r.outputs}, ort_tensors(q, {v.name: x}))
        assert a.identical and a.tensors >= 2, (k, str(a))


def test_orts_table_add_on_the_gpu_path() -> None:
    """An add with exact ties of both parities (no integer add gives ORT's bits: ``Lut2``)
    runs as the table-lookup kernel with the ReLU after it fused, on every input pair:
    bit-exact against the interpreter and equal to ORT's QLinearAdd pair by pair."""
    pytest.importorskip("onnxruntime")
    from .test_mobilenet import SCALES, _ort_pairs

    sa, za, sb, zb, sc, zc, _ = params = SCALES[0]
    table = qlinear_add_table(*params)
    assert fit_add(table, za, zb, zc, (sa / sc, sb / sc)) is None
    b = GraphBuilder("t")
    x, y = b.input("a", (1, 65536), sa, zero=za), b.input("b", (1, 65536), sb, zero=zb)
    g = b.build([b.relu(b.lut2(x, y, table, sc, name="c", zero=zc), name="r")])
    grid = np.arange(-128, 128)
    ins = {"a": np.repeat(grid, 256).reshape(1, -1).astype(np.int8),
           "b": np.tile(grid, 256).reshape(1, -1).astype(np.int8)}
    r = run_graph_gpu(g, ins)
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    assert [row["kernel"] for row in s["steps"]] == ["lut2_window"]
    assert s["steps"][0]["ops"] == ["lut2", "relu"]
    got = r.outputs[g.outputs[0]].astype(np.int64).reshape(256, 256)
    assert np.array_equal(got, np.maximum(_ort_pairs("QLinearAdd", params), 0))


def test_vta_run_onnx_on_cuda_emu_imports_orts_arithmetic(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``vta run --onnx --target cuda-emu`` imports with ``requant="ort"`` (the GPU computes
    it) and is bit-identical to ORT from a random input; before, the fixed-point import."""
    onnx = pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    path = tmp_path / "cnn_a8.onnx"
    onnx.save(quantize(MODELS["small_cnn"](0), Format("QOperator", "a8", True), seed=1),
              str(path))
    assert main(["run", "--onnx", str(path), "--target", "cuda-emu", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    v = s["onnx_runtime"]
    assert s["passed"] and v["judged"] and v["identical"] and v["max_diff"] == 0, v


@pytest.mark.slow
def test_mobilenet_v2_32_on_cuda_emu_is_onnx_runtimes(capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """``vta run --target cuda-emu mobilenet_v2_32``: ORT's exact requantizes and adds in the
    GPU kernels, every int8 tensor ORT exposes bit-identical (as on pynq_requant)."""
    pytest.importorskip("onnxruntime")
    assert main(["run", "--target", "cuda-emu", "mobilenet_v2_32", "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    v = s["onnx_runtime"]
    assert s["passed"] and v["judged"] and v["identical"], v
    assert not [row["ops"] for row in s["steps"] if row["kernel"] == "host"]  # pads folded


@pytest.mark.parametrize("shape", [(7,), (1, 5, 7), (2, 3, 5, 7)])
def test_the_table_kernel_takes_one_to_four_dimensions(shape: tuple[int, ...]) -> None:
    """An element-wise kernel sees a tensor of rank 1 to 4 as (N, C, H, W) with trailing
    ones (``gpu_place._four``): a transformer's 3-D tensors too."""
    rng = np.random.default_rng(len(shape))
    b = GraphBuilder("t")
    x, y = b.input("a", shape, 0.02), b.input("b", shape, 0.03)
    table = rng.integers(-128, 128, (256, 256)).astype(np.int8)
    g = b.build([b.lut2(x, y, table, 0.04, name="c")])
    ins = {"a": rng.integers(-128, 128, shape).astype(np.int8),
           "b": rng.integers(-128, 128, shape).astype(np.int8)}
    r = run_graph_gpu(g, ins)
    assert r.passed and [row["kernel"] for row in r.summary()["steps"]] == ["lut2_window"]
    want = table[ins["a"].astype(np.int64) + 128, ins["b"].astype(np.int64) + 128]
    assert np.array_equal(r.outputs[g.outputs[0]], want)
