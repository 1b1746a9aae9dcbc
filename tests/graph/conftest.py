"""Shared fixtures of the graph tests: a small ResNet-18 (same structure, 16 base channels,
32x32 images, 10 classes) and its compilation for pynq, built once per session."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vta.config import HwConfig
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
