"""Accelerator schedules: the schedule space (``space``), its analytic cost model (``model``),
the construction of a schedule from a point (``build``), the default schedule (``default``: the
model ranking the space), post-scheduling fusion (``fusion``) and packed computes (``packed``)."""

from vta.compiler.accel.schedules.default import (
    ConvSchedule,
    ScheduleError,
    default_schedule,
    fit_report,
)

__all__ = ["ConvSchedule", "ScheduleError", "default_schedule", "fit_report"]
