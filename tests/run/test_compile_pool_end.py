"""The compile pool (``vta.run.compile_pool``) tells its workers that no task will come once
it has submitted them all (``ForkPool.end_input``): each worker ends as soon as it has
computed its last task, while this process takes the results, instead of being told so, and
waited for, when the pool closes (a forked worker's exit took 5-25 ms of a cold run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vta.config import HwConfig
from vta.graph import models
from vta.graph.passes.fuse import fuse
from vta.graph.passes.split_matmul import split_matmuls
from vta.run import pool
from vta.run.compile_pool import prefetch
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[2]


def test_the_workers_are_told_to_end_before_the_pool_closes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    hw = HwConfig.load(ROOT / "hwconfigs" / "pynq.yaml")
    fused = fuse(split_matmuls(models.resnet18(image=32, width=16, classes=10)), "full")
    told: list[list[bool]] = []
    real = pool._Workers.close

    def close(self: pool._Workers) -> None:
        told.append(list(self.told))
        real(self)

    monkeypatch.setattr(pool._Workers, "close", close)
    memo: Any = prefetch(fused, hw, cost=AccelTarget(hw).cycles, jobs=2)
    assert memo.workers == 2 and memo.compiled > 0
    assert told == [[True, True]]
