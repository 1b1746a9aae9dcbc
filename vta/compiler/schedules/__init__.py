"""Default schedules for the accelerator, derived from the HwConfig by a small cost model."""

from vta.compiler.schedules.default import ConvSchedule, ScheduleError, default_schedule, fit_report

__all__ = ["ConvSchedule", "ScheduleError", "default_schedule", "fit_report"]
