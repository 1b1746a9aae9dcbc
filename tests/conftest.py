"""Shared test setup: hypothesis profiles, hardware fixtures, the golden-file option."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from vta.compiler.accel import pipeline
from vta.config import HwConfig
from vta.testing import register_profiles

ROOT = Path(__file__).resolve().parent.parent

register_profiles("default")  # vta.testing.PROFILES: default, thorough, fast


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="rewrite the golden files under tests/golden/data instead of "
                          "comparing with them (review the diff before committing)")


@pytest.fixture(scope="session")
def pynq() -> HwConfig:
    return HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")


@pytest.fixture(autouse=True, scope="session")
def _own_tuning_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """``vta run`` compiles the tuning cache's best schedules: the tests read and write an
    empty cache of their own, never the user's (``VTA_CACHE``)."""
    os.environ["VTA_CACHE"] = str(tmp_path_factory.mktemp("cache") / "tune.sqlite")


@pytest.fixture(autouse=True, scope="session")
def _verify_every_pass() -> Iterator[None]:
    """The tests verify the IR after every pass of the VTA pipeline (``VERIFY_EVERY_PASS``;
    a production compile verifies its input and result), as TVM runs its IR verifiers in
    debug builds."""
    was = pipeline.VERIFY_EVERY_PASS
    pipeline.VERIFY_EVERY_PASS = True
    yield
    pipeline.VERIFY_EVERY_PASS = was
