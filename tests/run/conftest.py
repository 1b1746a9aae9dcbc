"""Fixtures shared by the run layer's tests."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vta.config import HwConfig
from vta.graph import models
from vta.graph.compile import CompiledGraph
from vta.run.graph import compile_for
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def compiled() -> tuple[CompiledGraph, AccelTarget, np.ndarray]:
    """A small ResNet-18 (32x32 image, width 16, 10 classes) compiled for pynq, its target
    and a seeded input image."""
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    t = AccelTarget(hw)
    g = models.resnet18(image=32, width=16, classes=10)
    cg = compile_for(g, t)
    assert isinstance(cg, CompiledGraph)
    return cg, t, models.random_image(0, g.inputs[0].type.shape)
