"""A hand-set schedule knob below 1 is refused by name before any schedule space is built
around it (the model's arrays would be divided by it first: numpy warnings, then the error)."""

from __future__ import annotations

import warnings

import pytest

from vta.compiler.accel.driver import compile_workload
from vta.compiler.accel.schedules.space import TILE_KNOBS, ConvSchedule, check_tile_knobs
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.errors import ScheduleError

HW = HwConfig.from_yaml("hwconfigs/pynq.yaml")


@pytest.mark.parametrize("knob", TILE_KNOBS)
@pytest.mark.parametrize("value", [0, -1])
def test_a_fixed_knob_below_one_is_refused_without_warnings(knob: str, value: int) -> None:
    w = resolve("resnet18:C6")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a division by the knob would warn first
        with pytest.raises(ScheduleError, match=rf"^schedule: {knob} must be >= 1, got {value}$"):
            compile_workload(w, HW, **{knob: value})


def test_the_driver_and_the_schedule_share_the_rule() -> None:
    with pytest.raises(ScheduleError, match="tw must be >= 1, got 0"):
        ConvSchedule(1, 1, 1, 0)
    with pytest.raises(ScheduleError, match="tw must be >= 1, got 0"):
        check_tile_knobs([("tco", 1), ("tw", 0)])
    check_tile_knobs([("tco", None), ("th", 1)])  # not given, or >= 1: nothing to refuse
