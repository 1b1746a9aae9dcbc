"""A graph through the GPU path (SIMT emulator): every fused group one generated kernel,
every tensor bit-exact against the graph interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph.ir import Graph
from vta.graph.models import resnet18_fixed
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
    from vta.graph.builder import GraphBuilder

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
