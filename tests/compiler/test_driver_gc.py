"""``driver.compile_workload`` chooses among its candidates (each compiled, bounded and timed)
with the cycle collector paused (``pipeline.collector_paused``), and leaves it as it was."""

from __future__ import annotations

import gc

from _vta_helpers import hw

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.isa import Program


def test_the_candidates_are_timed_with_the_collector_paused() -> None:
    seen: list[bool] = []

    def cost(program: Program) -> int:
        seen.append(gc.isenabled())
        return len(program.instructions)

    w = resolve("resnet18:C11", [], height=7, in_channels=64, out_channels=64)
    assert gc.isenabled()
    driver.compile_workload(w, hw(), cost=cost, refine=3)
    assert seen and not any(seen)
    assert gc.isenabled()
