"""What the tuner works on: a ``Job`` (a workload on a target with a trial budget), the
``TrialTask`` one point makes (what travels to a worker) and the ``Outcome`` it comes back as,
and ``op_text``, the canonical op a cached schedule is for. Both the accelerator's tuner
(``vta.tune.tuner``) and the GPU's (``vta.tune.gpu``) read these."""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.ir.space import Point
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig

#: points a job measures per round (fixed: the choices must not depend on the executor)
BATCH = 8


#: the accelerator target's name in keys and jobs
TARGET = "vta"


@dataclass(frozen=True)
class Job:
    """Tune ``workload`` on ``hw``: ``trials`` points measured at most (at least the default's
    candidates), by ``search`` with ``seed``. ``target`` ``"cuda"``: a GPU kernel family
    (``kernel``: simt, wmma, mma) for ``dtype``, timed on the GPU (``vta.tune.gpu``; ``hw`` is
    None and ``epilogue`` None means int32 out)."""

    workload: Workload
    hw: HwConfig | None
    trials: int = 64
    search: str = "auto"
    seed: int = 0
    epilogue: Epilogue | None = None
    target: str = TARGET
    kernel: str = ""
    dtype: str = "int8"

    @property
    def epi(self) -> Epilogue:
        return self.epilogue or self.workload.epilogue

    @property
    def accel(self) -> HwConfig:
        """The accelerator (an accelerator job's ``hw``)."""
        assert self.hw is not None, "a GPU job has no HwConfig"
        return self.hw

    def task(self, point: Point) -> TrialTask:
        epi = self.epi if self.target == TARGET else self.epilogue
        return TrialTask(self.workload, self.hw, point, epi, self.target, self.kernel,
                         self.dtype)


@dataclass(frozen=True)
class TrialTask:
    """One point to measure (what travels to a worker)."""

    workload: Workload
    hw: HwConfig | None
    point: Point
    epilogue: Epilogue | None
    target: str = TARGET
    kernel: str = ""
    dtype: str = "int8"


@dataclass(frozen=True)
class Outcome:
    """A measured point: its cycles, or why it did not compile or run; how long it took."""

    cost: float | None
    refused: str | None
    seconds: float
    method: str


def op_text(w: Workload, epi: Epilogue | None) -> str:
    """The canonical op of ``w`` with its epilogue (None: int32 out; what a cached schedule is
    for)."""
    s = w.spec
    if isinstance(s, Conv2dSpec):
        op = (f"conv2d(n={s.n},ic={s.ic},h={s.h},w={s.w},oc={s.oc},kh={s.kh},kw={s.kw},"
              f"stride={s.stride},pad={s.pad})")
    else:
        op = f"matmul(m={s.m},n={s.n},k={s.k})"
    e = epi
    if e is None:
        return f"{op}+acc"
    clip = f",clip={e.clip_lo}..{e.clip_hi}" if e.clip else ""
    mult = f",mult={e.mult}" if e.kind == "fixed_point" else ""
    return f"{op}+{e.kind}(shift={e.shift}{mult},bias={int(e.bias)}{clip})"
