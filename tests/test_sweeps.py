"""Long sweeps (``slow`` marker, left out of the default run: ``python -m pytest -m slow``).

Every ResNet-18 layer on every shipped hardware config, with and without latency hiding,
compiled with the default schedule and simulated cycle by cycle: bit-exact against numpy, the
reference interpreter agreeing with the machine, and latency hiding never slower.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[1]
CONFIGS = sorted((ROOT / "hwconfigs").glob("*.yaml"))
LAYERS = [f"C{i}" for i in range(1, 12)]


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS, ids=lambda p: p.stem)
@pytest.mark.parametrize("layer", LAYERS)
def test_layer_bit_exact_on_every_config(config: Path, layer: str) -> None:
    hw = HwConfig.from_yaml(config)
    w = resolve(f"resnet18:{layer}", [])
    hidden = run_layer(w, AccelTarget(hw), seed=1, check_reference=layer in ("C4", "C10"))
    serial = run_layer(w, AccelTarget(hw), seed=2, latency_hiding=False)
    assert hidden.passed and serial.passed
    if layer in ("C4", "C10"):
        assert hidden.reference_agrees is True
    assert hidden.sim.stats.cycles <= serial.sim.stats.cycles
