"""The default schedule: the analytic cost model ranking the schedule space.

The space of an accelerator conv2d/matmul (``schedules.space.ConvSpace``: tile knobs tco, tci,
th, tw, virtual threads and their axis, the layout fold) bound to a problem is ranked by the
analytic cost model (``schedules.model.estimate``) under the model's rule "two virtual threads
whenever two copies fit" (as VTA); ``ranked_schedules`` returns the cheapest few,
``default_schedule`` the first. ``driver.compile_workload`` times the best ``REFINE`` with the
timing-only simulator and keeps the fastest, and ``vta tune`` searches the same space with the
simulator (docs/tuning.md). Every knob can be forced; ``fit_report`` checks a given schedule
and raises a named error. A one-row strided kernel's input tile holds only the rows it reads
(``ops.conv2d.row_subsampled``); the bias of every output channel is loaded once, before the
first tile.

The pieces live apart (issue 11): the space and its pruning in ``schedules/space.py``, the
cost model in ``schedules/model.py``, the construction of a schedule from a point in
``schedules/build.py``; the names callers import from here are re-exported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from vta.compiler.accel.schedules.build import lower_op, schedule_op
from vta.compiler.accel.schedules.model import estimate, rank
from vta.compiler.accel.schedules.space import (
    Accept,
    ConvSchedule,
    ConvSpace,
    fit_report,
    footprint,
)
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.config import HwConfig
from vta.errors import ScheduleError

if TYPE_CHECKING:
    from vta.compiler.accel.ops.chain_plan import ChainCost

__all__ = ["ConvSchedule", "ScheduleError", "default_schedule", "fit_report", "lower_op",
           "ranked_schedules", "schedule_op", "estimate", "footprint", "Accept"]


def default_schedule(spec: Conv2dSpec, hw: HwConfig, *, vthreads: int | None = None,
                     epi: Epilogue | None = None, **overrides: int | str) -> ConvSchedule:
    """The model's best schedule, with any knob in ``overrides`` fixed (tco, tci, th, tw,
    vt_axis) and ``vthreads`` (None: 2 when two copies fit, else 1)."""
    knobs: dict[str, Any] = dict(overrides)
    return ranked_schedules(spec, hw, 1, vthreads=vthreads, epi=epi, **knobs)[0]


def ranked_schedules(spec: Conv2dSpec, hw: HwConfig, k: int, *, vthreads: int | None = None,
                     epi: Epilogue | None = None, fused: ChainCost | None = None,
                     accept: Accept | None = None, row_view: bool = True,
                     **overrides: Any) -> list[ConvSchedule]:
    """The model's ``k`` best schedules of the convolution ``spec`` in its own layout (no
    fold), cheapest estimate first (``default_schedule`` is the first; ``driver.
    compile_workload`` can let the timing-only simulator pick among them). ``fused``: a chain
    fused after the epilogue (its scratchpad tiles and instructions); ``accept``: only
    schedules it accepts (none accepted is a ``ScheduleError``); ``row_view=False``: the
    input's padding stage keeps every row (``space.in_rows``)."""
    problem = ConvSpace(hw).bind(spec, fused=fused, accept=accept, fold="none",
                                 vthreads=vthreads, row_view=row_view, **overrides)
    ranked = rank(problem, epi, limit=k, prefer_two_threads=vthreads is None)
    if not ranked:
        raise problem.no_fit_error(problem.folds[0])
    return [problem.schedule(p)[1] for _, p in ranked]
