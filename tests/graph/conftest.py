"""Shared fixtures of the graph tests: a small ResNet-18 (same structure, 16 base channels,
32x32 images, 10 classes) and its compilation for pynq, built once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vta.config import HwConfig
from vta.graph.builder import GraphBuilder
from vta.graph.ir import Graph
from vta.graph.models import random_image, resnet18

ROOT = Path(__file__).resolve().parents[2]
SMALL = {"width": 16, "image": 32, "classes": 10}


def hw(name: str = "pynq") -> HwConfig:
    return HwConfig.from_yaml(ROOT / "hwconfigs" / f"{name}.yaml")


@pytest.fixture(scope="session")
def small_resnet() -> Graph:
    return resnet18(**SMALL)


@pytest.fixture(scope="session")
def small_image(small_resnet: Graph) -> np.ndarray:
    return random_image(11, small_resnet.inputs[0].type.shape)


@pytest.fixture(scope="session")
def compiled_small(small_resnet: Graph):  # type: ignore[no-untyped-def]
    """Compiled with the schedule model's first choices (no timing oracle: fast)."""
    from vta.graph.compile import compile_graph

    return compile_graph(small_resnet, hw(), refine=1)


def mini_graph(batch: int = 1, requant: str = "shift") -> tuple[Graph, np.ndarray]:
    """Every kernel kind: conv + requantize + ReLU, max-pool, conv + add + ReLU (fused), a
    stand-alone add, global average pool, dense + requantize; every requantization a shift
    (``requant="shift"``: power-of-two scales, VTA's ALU) or fixed-point (``"fixed"``)."""
    rng = np.random.default_rng(8)
    x = rng.integers(-128, 128, (batch, 16, 8, 8), dtype=np.int8)
    b = GraphBuilder("mini", calibrate={"x": x}, requant=requant)
    xv = b.input("x", x.shape, 1 / 128)
    sw, sf = (1 / 64, 1 / 128) if requant == "shift" else (0.02, 0.01)

    def conv(name: str, v, oc: int):  # type: ignore[no-untyped-def]
        w = b.const(f"{name}_w", rng.integers(-40, 40, (oc, v.type.shape[1], 3, 3),
                                              dtype=np.int8), sw)
        bias = b.const(f"{name}_b", rng.integers(-200, 200, (oc,), dtype=np.int32))
        return b.requantize(b.conv2d(v, w, bias, pad=1, name=name))

    y = b.relu(conv("c1", xv, 16))
    p = b.max_pool2d(y, 3, 2, 1)
    z = b.relu(b.add(conv("c2", p, 16), p))
    u = b.add(z, p, name="add2")  # z and p both have another reader: a stand-alone add
    a = b.global_avg_pool(b.relu(u, name="u_relu"))
    w = b.const("fc_w", rng.integers(-60, 60, (20, 16), dtype=np.int8), sf)
    fb = b.const("fc_b", rng.integers(-50, 50, (20,), dtype=np.int32))
    return b.build([b.requantize(b.dense(a, w, fb), name="logits"), z]), x


def even_conv_graph(ratio: float, even: bool = True) -> Graph:
    """A 3x3 convolution, its requantize by ``ratio`` rounding half to even (``even``) with a
    zero point of 3, then relu: ORT's rounding on the stock ALU (a power-of-two ``ratio``)."""
    rng = np.random.default_rng(2)
    b = GraphBuilder("even")
    x = b.input("x", (1, 16, 8, 8), 1 / 128)
    w = b.const("w", rng.integers(-3, 4, (32, 16, 3, 3), dtype=np.int8), 1 / 128)
    bias = b.const("b", rng.integers(-9, 9, (32,), dtype=np.int32))
    q = b.requantize(b.conv2d(x, w, bias, pad=1), ratio=ratio, even=even, zero=3)
    return b.build([b.relu(q)])


def even_add_graph() -> Graph:
    """Two int8 tensors added at half scale each, rounded half to even: every odd sum a tie."""
    b = GraphBuilder("even_add")
    x = b.input("x", (1, 16, 8, 8), 1 / 128)
    y = b.input("y", (1, 16, 8, 8), 1 / 128)
    return b.build([b.add(x, y, 1 / 128, ratios=(0.5, 0.5), even=True)])
