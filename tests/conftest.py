"""Shared test setup: hypothesis profiles and hardware fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from vta.config import HwConfig

ROOT = Path(__file__).resolve().parent.parent

settings.register_profile("default", max_examples=60, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=1000, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture(scope="session")
def pynq() -> HwConfig:
    return HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
