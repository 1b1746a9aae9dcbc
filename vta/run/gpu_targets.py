"""The GPU targets (``cuda-emu``: the lockstep SIMT emulator, ``cuda``: a GPU through CuPy) and
their artifacts, apart from ``vta.run.targets`` so that a run on the accelerator never loads the
GPU back end (its lowering, CUDA rendering, emulator and runtime). ``vta.run.targets`` names
them too (loaded on first use) and ``get_target`` builds them.
"""

from __future__ import annotations

import statistics
import time
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from vta.compiler.ir import stmt as S
from vta.compiler.ir.interp import run_func
from vta.compiler.ir.schedule import Schedule
from vta.errors import TargetError
from vta.gpu.cuda import CudaKernel, render_cuda
from vta.gpu.dialect import LAUNCH
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import lower_for_gpu
from vta.gpu.profile import Profile
from vta.gpu.runtime import GpuKernel, gpu_name, require_cupy, run_kernel
from vta.run.targets import Execution, Measurement, Target

__all__ = ["CudaEmuTarget", "CudaTarget", "CompiledKernel", "GpuLaunch"]


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
