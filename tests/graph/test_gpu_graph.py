"""A graph through the GPU path (SIMT emulator): every fused group one generated kernel,
every tensor bit-exact against the graph interpreter."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph.builder import GraphBuilder
from vta.graph.gpu import run_graph_gpu
from vta.graph.ir import Graph
from vta.graph.report import format_gpu_run


def _mini() -> tuple[Graph, np.ndarray]:
    """Every kernel kind: conv + requantize + ReLU, max-pool, conv + add + ReLU (fused), a
    stand-alone add, global average pool, dense + requantize."""
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (1, 16, 8, 8), dtype=np.int8)
    b = GraphBuilder("mini", calibrate={"x": x})
    xv = b.input("x", x.shape, 1 / 128)

    def conv(name: str, v, oc: int):  # type: ignore[no-untyped-def]
        w = b.const(f"{name}_w", rng.integers(-40, 40, (oc, v.type.shape[1], 3, 3),
                                              dtype=np.int8), 0.02)
        bias = b.const(f"{name}_b", rng.integers(-200, 200, (oc,), dtype=np.int32))
        return b.requantize(b.conv2d(v, w, bias, pad=1, name=name))

    y = b.relu(conv("c1", xv, 16))
    p = b.max_pool2d(y, 3, 2, 1)
    z = b.relu(b.add(conv("c2", p, 16), p))
    u = b.add(z, p, name="add2")  # z and p both have another reader: a stand-alone add
    a = b.global_avg_pool(b.relu(u, name="u_relu"))
    w = b.const("fc_w", rng.integers(-60, 60, (20, 16), dtype=np.int8), 0.01)
    fb = b.const("fc_b", rng.integers(-50, 50, (20,), dtype=np.int32))
    return b.build([b.requantize(b.dense(a, w, fb), name="logits"), z]), x


def test_mini_graph_on_the_gpu_path() -> None:
    g, x = _mini()
    r = run_graph_gpu(g, {"x": x})
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    kernels = [row["kernel"] for row in s["steps"]]
    assert kernels == ["conv2d_int8_wmma", "max_window", "conv2d_int8_wmma", "ewise_window",
                       "sum_window", "matmul_int8_simt"]
    assert [row["ops"] for row in s["steps"]][3] == ["add", "relu"]
    assert "PASS" in format_gpu_run(s)


@pytest.mark.slow
def test_small_resnet_on_the_gpu_path(small_resnet: Graph, small_image: np.ndarray) -> None:
    r = run_graph_gpu(small_resnet, {"image": small_image})
    assert r.passed and len(r.steps) == 23
