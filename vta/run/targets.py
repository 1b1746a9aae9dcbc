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

import statistics
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from vta.compiler.accel import driver
from vta.compiler.accel.pipeline import compile_func
from vta.compiler.ir import stmt as S
from vta.compiler.ir.interp import run_func
from vta.compiler.ir.schedule import Schedule
from vta.compiler.ir.tiles import explain_overflow
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import ScheduleError, ScratchpadOverflow, ShapeError, TargetError
from vta.gpu.cuda import CudaKernel, render_cuda
from vta.gpu.dialect import LAUNCH
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.profile import Profile
from vta.gpu.runtime import GpuKernel, gpu_name, require_cupy, run_kernel
from vta.isa import Program
from vta.sim import SimResult, run_reference, simulate
from vta.sim.dram import MAX_DRAM_BYTES

__all__ = ["TARGET_NAMES", "Target", "AccelTarget", "CudaEmuTarget", "CudaTarget", "CompiledKernel",
           "Execution", "GpuLaunch", "Measurement", "get_target", "TargetError"]

#: every target, by the name the command line and ``vta.build`` use
TARGET_NAMES = ("vta", "cuda-emu", "cuda")


@dataclass(frozen=True)
class GpuLaunch:
    """How a GPU kernel ran: its grid and block, static shared memory, wall time, and on the
    emulator its counters (``vta.gpu.profile.Profile``: sectors per global buffer against the
    tiles' footprint, shared-memory wavefronts and bank conflicts, warp instructions by kind,
    barriers)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    shared_bytes: int
    seconds: float
    profile: Profile | None = None

    @property
    def threads(self) -> int:
        """Threads launched in all."""
        return (self.grid[0] * self.grid[1] * self.grid[2] * self.block[0] * self.block[1]
                * self.block[2])


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


@dataclass(frozen=True)
class CompiledKernel:
    """A GPU target's compiled artifact: the GPU-lowered function (what the emulator runs),
    its rendered CUDA (what a GPU runs) and the scheduled loop nest it was lowered from (the
    reference's input; None for the task-mapping kernels, built lowered)."""

    func: S.PrimFunc
    cuda: CudaKernel
    scheduled: S.PrimFunc | None = None

    @property
    def param_names(self) -> list[str]:
        return [b.name for b in self.func.params]

    @property
    def source(self) -> str:
        return str(self.cuda.source)


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
                trace_path: str | None = None) -> Execution:
        t0 = time.perf_counter()
        sim = simulate(self._program(artifact), self.hw, arrays, trace_path=trace_path)
        outputs = {k: np.asarray(v) for k, v in sim.outputs.items()}
        return Execution(outputs, sim.stats, time.perf_counter() - t0, sim)

    def reference(self, artifact: Any, arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The ISA's reference interpreter (``vta.sim.reference``): every allocation."""
        return run_reference(self._program(artifact), self.hw, arrays)

    def cycles(self, program: Program) -> int:
        """The timing-only simulator's cycles for ``program`` (the compiler's cost oracle)."""
        return simulate(program, self.hw, timing_only=True).stats.cycles

    @property
    def method(self) -> str:
        """How ``measure`` measures."""
        return f"timing-only simulator ({self.hw.timing_model} timing)"

    def measure(self, artifact: Any, arrays: Mapping[str, np.ndarray] | None = None
                ) -> Measurement:
        """The timing-only simulator's cycles (no data needed: ``arrays`` is ignored)."""
        return Measurement(float(self.cycles(self._program(artifact))), "cycles", self.method)


class _GpuTarget(Target):
    """The GPU pipeline's compile, shared by the emulator and the GPU."""

    def compile(self, func: S.PrimFunc, schedule: Schedule | None = None) -> CompiledKernel:
        """Lower ``func`` with the GPU pipeline (unless it is already: the task-mapping kernels
        carry their launch) and render it."""
        if func.attr(LAUNCH) is not None:
            return CompiledKernel(func, render_cuda(func))
        low = lower_for_gpu(func)
        return CompiledKernel(low, render_cuda(low), func)

    def reference(self, artifact: CompiledKernel, arrays: Mapping[str, np.ndarray]
                  ) -> dict[str, np.ndarray]:
        """The loop-nest interpreter on the scheduled loop nest the kernel was lowered from
        (what ``vta.build``'s ``interpret`` runs: the schedule's meaning, no threads)."""
        src = artifact.scheduled
        if src is None:
            raise TargetError(f"{artifact.func.name} was built lowered (a task-mapping kernel): "
                              f"there is no loop nest to interpret")
        mem = _ordered(artifact, arrays)
        run_func(src, dict(zip(src.params, mem, strict=True)))
        return dict(zip(artifact.param_names, mem, strict=True))

    def execute(self, artifact: CompiledKernel, arrays: Mapping[str, np.ndarray], *,
                trace_path: str | None = None) -> Execution:
        if trace_path is not None:
            raise TargetError(f"a trace is a timeline of the simulated accelerator; {self.where} "
                              f"writes none")
        mem = _ordered(artifact, arrays)
        t0 = time.perf_counter()
        out, profile = self._run(artifact, mem)
        dt = time.perf_counter() - t0
        launch = artifact.cuda.launch
        return Execution(dict(zip(artifact.param_names, out, strict=True)),
                         GpuLaunch(launch.grid, launch.block, launch.shared_bytes, dt, profile),
                         dt)

    @abstractmethod
    def _run(self, k: CompiledKernel, mem: list[np.ndarray]
             ) -> tuple[list[np.ndarray], Profile | None]:
        """Every parameter after one launch on ``mem``, and the launch's counters (if any)."""


def _ordered(k: CompiledKernel, arrays: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The kernel's parameters in order: given arrays (contiguous copies), missing ones (the
    outputs) zero."""
    out = []
    for b in k.func.params:
        if b.name in arrays:
            out.append(np.array(arrays[b.name], order="C", copy=True))
        else:
            out.append(np.zeros(b.shape, np.dtype(b.dtype)))
    return out


class CudaEmuTarget(_GpuTarget):
    """The lockstep SIMT emulator: the kernel's semantics on the CPU, barriers included.
    ``profile`` counts bank conflicts, sectors, barriers and instructions (slower)."""

    name = "cuda-emu"
    where = "the SIMT emulator"

    def __init__(self, profile: bool = False) -> None:
        self.profile = profile

    def _run(self, k: CompiledKernel, mem: list[np.ndarray]
             ) -> tuple[list[np.ndarray], Profile | None]:
        emu = Emulator(k.func, profile=self.profile)
        emu.run(*mem)  # writes the outputs in place
        return mem, emu.profile

    def measure(self, artifact: CompiledKernel, arrays: Mapping[str, np.ndarray] | None = None
                ) -> Measurement:
        raise TargetError("the SIMT emulator cannot time a kernel (it executes statement by "
                          "statement on the CPU); measure with --target cuda on a GPU")


class CudaTarget(_GpuTarget):
    """An NVIDIA GPU through CuPy (``GpuUnavailableError`` without one)."""

    name = "cuda"
    where = "the GPU"
    #: launches before timing, and timed launches (the median is the cost)
    WARMUP = 3
    REPS = 20

    def __init__(self) -> None:
        require_cupy()

    def _run(self, k: CompiledKernel, mem: list[np.ndarray]
             ) -> tuple[list[np.ndarray], Profile | None]:
        return run_kernel(k.cuda, mem), None

    def measure(self, artifact: CompiledKernel, arrays: Mapping[str, np.ndarray] | None = None
                ) -> Measurement:
        """The median of ``REPS`` launches timed with CUDA events, after ``WARMUP``, on
        ``arrays`` (zeros when not given)."""
        cp = require_cupy()
        mem = _ordered(artifact, arrays or {})
        dev = [cp.asarray(np.ascontiguousarray(a)) for a in mem]
        k = GpuKernel(artifact.cuda)
        for _ in range(self.WARMUP):
            k(*dev)
        cp.cuda.runtime.deviceSynchronize()
        times = []
        for _ in range(self.REPS):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record()
            k(*dev)
            stop.record()
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop))
        return Measurement(float(statistics.median(times)), "ms",
                           f"CUDA events, median of {self.REPS} ({gpu_name()})")


def get_target(name: str, hw: HwConfig | None = None, *, profile: bool = False) -> Target:
    """The target called ``name`` (``TARGET_NAMES``); ``vta`` needs ``hw``."""
    if name == "vta":
        if hw is None:
            raise TargetError("the vta target needs a hardware config (hw=HwConfig or a YAML "
                              "file)")
        return AccelTarget(hw)
    if name == "cuda-emu":
        return CudaEmuTarget(profile=profile)
    if name == "cuda":
        return CudaTarget()
    raise TargetError(f"unknown target {name!r} (expected one of {', '.join(TARGET_NAMES)})")
