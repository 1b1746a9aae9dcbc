"""The stock-ALU import's arithmetic on a real GPU (``-m gpu``; skipped without CuPy and a GPU):
ORT's round half to even by a power of two (``Requantize.even`` / ``Add.even``: the stage
``ops.chain.even_round_stage`` inlined in the kernels' epilogues) and ``--approx shift-add``'s
multipliers by shifts and adds, run by CUDA on the device and judged against the graph
interpreter (own reference), the SIMT emulator's bits (own) and, for the networks, ONNX
Runtime's (outside reference).

First run of these graphs on an H100 (bench/results/gpu_stock_rounding_nvidia_h100_80gb_hbm3.txt):
every case passed but the per-channel shift-add formats, not reached: their kernels' CUDA source
(megabytes: a shared subexpression printed as a tree) took CuPy's compiler minutes. Since
``vta.gpu.passes.share_values`` they are a tenth of the size (tests/gpu/test_shift_add_kernels.py);
on an H200 (2026-11-27, bench/results/gpu_tests_nvidia_h200.txt) all twelve formats passed.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pytest

from vta.gpu.runtime import gpu_available
from vta.graph.ir import Graph
from vta.graph.models import random_image
from vta.graph.onnx_import import load_onnx
from vta.graph.onnx_ort import FORMATS, ort_verdict, quantize, quantized_network, small_cnn
from vta.graph.quant import quantize_linear, shift_add_multipliers
from vta.run.graph import GraphRun, compile_for, run_graph
from vta.run.targets import CudaEmuTarget, CudaTarget

from .conftest import even_add_graph, even_conv_graph

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not gpu_available(), reason="no CUDA GPU with CuPy here")]


def _int8_inputs(g: Graph, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.integers(-128, 128, v.type.shape, dtype=np.int8) for v in g.inputs}


def _on_cuda(g: Graph, feed: Mapping[str, np.ndarray]) -> GraphRun:
    r = run_graph(compile_for(g, CudaTarget()), dict(feed))
    assert r.passed, r.summary()["mismatched_tensors"]
    return r


@pytest.mark.parametrize("seed", [3, 4])
@pytest.mark.parametrize("graph", ["conv 1/2", "conv 1/4", "conv 2^-9", "add 1/2+1/2"])
def test_even_rounding_kernels_on_the_gpu(graph: str, seed: int) -> None:
    g = {"conv 1/2": lambda: even_conv_graph(0.5), "conv 1/4": lambda: even_conv_graph(0.25),
         "conv 2^-9": lambda: even_conv_graph(2.0**-9), "add 1/2+1/2": even_add_graph}[graph]()
    feed = _int8_inputs(g, seed)
    r = _on_cuda(g, feed)
    e = run_graph(compile_for(g, CudaEmuTarget()), feed)
    for v in g.outputs:
        assert np.array_equal(r.outputs[v], e.outputs[v])


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.name)
def test_shift_add_multipliers_on_the_gpu(fmt: object) -> None:
    sa = shift_add_multipliers(load_onnx(quantize(small_cnn(0), fmt, seed=1)))  # type: ignore[arg-type]
    v = sa.inputs[0]
    x = np.random.default_rng(7).standard_normal(v.type.shape).astype(np.float32)
    _on_cuda(sa, {v.name: quantize_linear(x, v.type.scale or 1.0, v.type.zero)})


@pytest.mark.parametrize("net", ["mobilenet_v2_32", "bert_tiny"])
def test_stock_networks_on_the_gpu_are_onnx_runtimes(net: str) -> None:
    """The networks as ``vta run --hw hwconfigs/pynq.yaml NAME`` imports them (scales rounded
    to powers of two, ORT's half to even), on the device: every int8 tensor is ORT's."""
    pytest.importorskip("onnxruntime")
    model = quantized_network(net, pow2=True, seed=0)
    g = load_onnx(model, requant="fixed")
    image = {v.name: random_image(k, v.type.shape) for k, v in enumerate(g.inputs)}
    real = {v.name: (image[v.name].astype(np.float32) - np.float32(v.type.zero))
            * np.float32(v.type.scale or 1.0) for v in g.inputs}
    r = _on_cuda(g, image)
    verdict = ort_verdict(model, g, {**r.reference, **r.outputs}, real)
    assert verdict["judged"] and verdict["identical"], verdict
