"""Targets: where a compiled computation runs. One interface, three implementations.

A ``Target`` compiles the loop-nest IR (``compile``) and runs what it compiled on arrays in
the stored layouts of its parameters (``execute``), runs the same thing on its own functional
oracle (``reference``) and says what one run costs (``measure``):

=============  ============================  =============================  ==================
target         compile                       execute / reference            measure
=============  ============================  =============================  ==================
``vta``        accelerator pipeline ->       cycle-level simulator /        timing-only
               ``isa.Program``               ISA reference interpreter      simulator: cycles
``cuda-emu``   GPU pipeline -> CUDA text     lockstep SIMT emulator /       (none: an emulator
                                             loop-nest interpreter          cannot time)
``cuda``       GPU pipeline -> CUDA text     a GPU through CuPy /           CUDA events: ms
                                             loop-nest interpreter
=============  ============================  =============================  ==================

``compile_layer`` compiles a named workload (``ops.workloads.Workload``) with the target's
default schedule; the runs in this package (``layer``, ``network``, ``graph``, ``tc``,
``build``) are written against this interface, so each of them works on every target and
decides PASS/FAIL with one function (``vta.run.check``).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import import_module
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from vta.compiler.accel import driver
from vta.compiler.accel.pipeline import compile_func
from vta.compiler.ir import stmt as S
from vta.compiler.ir.schedule import Schedule
from vta.compiler.ir.tiles import explain_overflow
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import ScheduleError, ScratchpadOverflow, ShapeError, TargetError
from vta.isa import Program
from vta.sim import SimResult, run_reference, simulate
from vta.sim.dram import MAX_DRAM_BYTES
from vta.sim.machine import cycles_of

if TYPE_CHECKING:
    from vta.run.gpu_targets import CompiledKernel, CudaEmuTarget, CudaTarget, GpuLaunch

__all__ = ["TARGET_NAMES", "Target", "AccelTarget", "CudaEmuTarget", "CudaTarget", "CompiledKernel",
           "Execution", "GpuLaunch", "Measurement", "get_target", "TargetError"]

#: every target, by the name the command line and ``vta.build`` use
TARGET_NAMES = ("vta", "cuda-emu", "cuda")

#: the GPU targets' names, defined in ``vta.run.gpu_targets`` (the GPU back end, which a run on
#: the accelerator never loads) and read from there on first use
_GPU_NAMES = ("CudaEmuTarget", "CudaTarget", "CompiledKernel", "GpuLaunch")


def __getattr__(name: str) -> Any:
    if name in _GPU_NAMES:
        value = getattr(import_module("vta.run.gpu_targets"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'vta.run.targets' has no attribute {name!r}")


@dataclass(frozen=True)
class Execution:
    """One run of a compiled artifact: every output by parameter (or DRAM allocation) name,
    in its stored layout; ``stats`` the simulator's ``SimStats`` or a ``GpuLaunch``; ``sim``
    the whole ``SimResult`` on the accelerator (per-unit table, trace)."""

    outputs: dict[str, np.ndarray]
    stats: Any
    seconds: float
    sim: SimResult | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Measurement:
    """What one run costs: ``value`` in ``unit`` (``cycles`` or ``ms``), and how it was
    measured."""

    value: float
    unit: str
    method: str


class Target(ABC):
    """Compile, execute, reference, measure (module docstring)."""

    #: the target's name (``TARGET_NAMES``)
    name: ClassVar[str]
    #: where it runs, for reports ("the simulated accelerator", ...)
    where: ClassVar[str]

    @abstractmethod
    def compile(self, func: S.PrimFunc, schedule: Schedule | None = None) -> Any:
        """The artifact ``execute`` runs, from a lowered loop-nest function (``schedule``, when
        given, names the splits an error should blame)."""

    @abstractmethod
    def execute(self, artifact: Any, arrays: Mapping[str, np.ndarray], *,
                trace_path: str | None = None) -> Execution:
        """Run ``artifact`` on ``arrays`` (by parameter name, stored layouts)."""

    @abstractmethod
    def reference(self, artifact: Any, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The target's functional oracle on the same arrays: every output by name."""

    @abstractmethod
    def measure(self, artifact: Any, arrays: Mapping[str, np.ndarray] | None = None
                ) -> Measurement:
        """What one run of ``artifact`` costs on this target (on ``arrays`` by parameter
        name where the data matters; zeros when not given)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class AccelTarget(Target):
    """The simulated accelerator described by ``hw``."""

    name = "vta"
    where = "the simulated accelerator"

    def __init__(self, hw: HwConfig, memo: driver.CompileMemo | None = None) -> None:
        self.hw = hw
        #: a compile cache for this hardware (``vta.tune.compile_cache``, which ``vta run``
        #: opens unless ``--no-cache``): layers and graph kernels it holds are not compiled
        self.memo = memo

    def __repr__(self) -> str:
        return f"AccelTarget({self.hw.name})"

    def compile(self, func: S.PrimFunc, schedule: Schedule | None = None) -> Any:
        """The accelerator pipeline (``compile_func``: a ``CompileResult`` whose ``program`` is
        the ``isa.Program``). A tile that overflows a scratchpad is reported with the splits
        that size it and the factors that would fit (``vta.compiler.ir.tiles``)."""
        try:
            return compile_func(func, self.hw)
        except ScratchpadOverflow as e:
            if e.buffer is None or schedule is None:
                raise
            why = explain_overflow(schedule, func, e.buffer.name, e.entries, e.copies,
                                   e.available)
            if not why:
                raise
            raise ScheduleError(f"{e}; {why}") from None

    def check_size(self, w: Workload) -> None:
        """A ``ShapeError`` naming ``w``'s shape when its packed tensors (each moved once,
        before any tile padding: a lower bound) exceed the simulator's DRAM image limit."""
        conv = w.spec if isinstance(w.spec, Conv2dSpec) else w.spec.as_conv(self.hw.gemm.batch)
        need = driver.packed_bytes(conv, self.hw, bias=True)
        if need > MAX_DRAM_BYTES:
            raise ShapeError(f"{w.name} ({w.spec.describe()}) is too large to simulate: its "
                             f"packed tensors need at least {need:,} bytes of DRAM, more than "
                             f"the simulator's {MAX_DRAM_BYTES:,}-byte image")

    def compile_layer(self, w: Workload, **knobs: Any) -> driver.Compiled:
        """``w`` compiled with its default schedule (or ``knobs``), the timing-only simulator
        choosing among the schedule model's best candidates (``driver.compile_workload``),
        after ``check_size``."""
        self.check_size(w)
        return driver.compile_workload(w, self.hw, cost=self.cycles, memo=self.memo,
                                       **knobs)

    @staticmethod
    def _program(artifact: Any) -> Program:
        return artifact if isinstance(artifact, Program) else artifact.program

    def execute(self, artifact: Any, arrays: Mapping[str, np.ndarray], *,
                trace_path: str | None = None, timeline: bool = True) -> Execution:
        """The cycle-level simulator's run (``simulate``); ``timeline=False``: without its
        timeline (``sim.slices`` empty), for a caller that reads none."""
        t0 = time.perf_counter()
        sim = simulate(self._program(artifact), self.hw, arrays, trace_path=trace_path,
                       timeline=timeline)
        outputs = {k: np.asarray(v) for k, v in sim.outputs.items()}
        return Execution(outputs, sim.stats, time.perf_counter() - t0, sim)

    def reference(self, artifact: Any, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The ISA's reference interpreter (``vta.sim.reference``): every allocation."""
        return run_reference(self._program(artifact), self.hw, arrays)

    def cycles(self, program: Program) -> int:
        """The timing-only simulator's cycles for ``program`` (the compiler's cost oracle)."""
        return cycles_of(program, self.hw)

    @property
    def method(self) -> str:
        """How ``measure`` measures."""
        return f"timing-only simulator ({self.hw.timing_model} timing)"

    def measure(self, artifact: Any, arrays: Mapping[str, np.ndarray] | None = None
                ) -> Measurement:
        """The timing-only simulator's cycles (no data needed: ``arrays`` is ignored)."""
        return Measurement(float(self.cycles(self._program(artifact))), "cycles", self.method)


def get_target(name: str, hw: HwConfig | None = None, *, profile: bool = False) -> Target:
    """The target called ``name`` (``TARGET_NAMES``); ``vta`` needs ``hw``."""
    if name == "vta":
        if hw is None:
            raise TargetError("the vta target needs a hardware config (hw=HwConfig or a YAML "
                              "file)")
        return AccelTarget(hw)
    if name == "cuda-emu":
        return _gpu().CudaEmuTarget(profile=profile)  # type: ignore[no-any-return]
    if name == "cuda":
        return _gpu().CudaTarget()  # type: ignore[no-any-return]
    raise TargetError(f"unknown target {name!r} (expected one of {', '.join(TARGET_NAMES)})")


def _gpu() -> Any:
    """``vta.run.gpu_targets``, loaded when a GPU target is asked for."""
    return import_module("vta.run.gpu_targets")
