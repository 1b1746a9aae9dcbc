"""``GpuTarget``: the one home of the facts about a GPU architecture the GPU layers use.

Every layer that needs a limit of the device reads it from a ``GpuTarget``: the kernel frame
(``kernels.common.finish``: threads per block, shared memory per block), the thread-binding pass
(static shared memory), the register check (registers per thread), the CUDA renderer (where
static shared memory ends and dynamic begins), the SIMT emulator (lanes of a warp), nvcc
(``-arch``) and the ptxas resource check (``vta.gpu.nvcc.kernel_resources``). A lowered kernel
carries its target as ``func.attr(GPU_TARGET)``; ``target_of(func)`` reads it (the default,
sm_80, for a function lowered without one).

The figures are NVIDIA's (CUDA C++ Programming Guide, "Features and Technical Specifications",
table "Technical Specifications per Compute Capability"): 32 lanes per warp, 1,024 threads and
48 KiB of static shared memory per block, 64 Ki 32-bit registers per SM and at most 255 per
thread on every architecture here; dynamic shared memory per block (opt-in) 163 KiB on sm_80,
99 KiB on sm_86/sm_89, 227 KiB on sm_90. ``sm_90a`` is sm_90 with the architecture-specific
features (wgmma, setmaxnreg) that only ``-arch=sm_90a`` code may use.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.ir import stmt as S
from vta.errors import GpuTargetError

__all__ = ["GpuTarget", "GpuTargetError", "TARGETS", "DEFAULT_TARGET", "GPU_TARGET", "WARP_LANES",
           "gpu_target",
           "target_of"]

_KIB = 1024


@dataclass(frozen=True, slots=True)
class GpuTarget:
    """One GPU architecture's limits (see the module docstring for the sources)."""

    #: the nvcc/ptxas architecture name (``sm_80``, ``sm_90a``)
    arch: str
    #: lanes of a warp
    warp_size: int = 32
    #: threads one block may have
    max_threads: int = 1024
    #: bytes of ``__shared__`` memory a block may declare statically (more must be dynamic)
    static_shared: int = 48 * _KIB
    #: bytes of dynamic shared memory one block may request (``cudaFuncSetAttribute`` opt-in)
    max_dynamic_shared: int = 163 * _KIB
    #: 32-bit registers one thread may use (more spill to local memory)
    max_registers: int = 255
    #: 32-bit registers of one SM's register file
    registers_per_sm: int = 64 * _KIB
    #: threads one SM may hold at once
    max_threads_per_sm: int = 2048

    def __post_init__(self) -> None:
        if not (self.arch.startswith("sm_") and self.arch[3:5].isdigit()):
            raise GpuTargetError(f"GPU target: arch must look like sm_80 or sm_90a, "
                                 f"got {self.arch!r}")
        for name in ("warp_size", "max_threads", "static_shared", "max_dynamic_shared",
                     "max_registers", "registers_per_sm", "max_threads_per_sm"):
            if getattr(self, name) <= 0:
                raise GpuTargetError(f"GPU target {self.arch}: {name} must be positive, "
                                     f"got {getattr(self, name)}")
        if self.max_threads % self.warp_size:
            raise GpuTargetError(f"GPU target {self.arch}: max_threads {self.max_threads} is "
                                 f"not a whole number of {self.warp_size}-lane warps")
        if self.max_dynamic_shared < self.static_shared:
            raise GpuTargetError(f"GPU target {self.arch}: max_dynamic_shared "
                                 f"{self.max_dynamic_shared} B is below static_shared "
                                 f"{self.static_shared} B")

    @property
    def compute_capability(self) -> int:
        """``80`` for sm_80, ``90`` for sm_90a."""
        return int(self.arch[3:5])

    @property
    def max_shared(self) -> int:
        """Bytes of shared memory one block may use in all (static or dynamic)."""
        return max(self.static_shared, self.max_dynamic_shared)

    def whole_warps(self, threads: int) -> bool:
        """Whether ``threads`` is a positive whole number of warps within the block limit."""
        return 0 < threads <= self.max_threads and threads % self.warp_size == 0

    def __str__(self) -> str:
        return self.arch


#: the architectures the back end knows, by ``arch`` name
TARGETS: dict[str, GpuTarget] = {t.arch: t for t in (
    GpuTarget("sm_80", max_dynamic_shared=163 * _KIB),
    GpuTarget("sm_86", max_dynamic_shared=99 * _KIB, max_threads_per_sm=1536),
    GpuTarget("sm_89", max_dynamic_shared=99 * _KIB, max_threads_per_sm=1536),
    GpuTarget("sm_90", max_dynamic_shared=227 * _KIB),
    GpuTarget("sm_90a", max_dynamic_shared=227 * _KIB),
)}

#: the target a kernel is built for when none is named (A100-class; its PTX runs on later GPUs)
DEFAULT_TARGET = TARGETS["sm_80"]

#: lanes of a warp on every target here: for code whose instruction definitions fix the warp
#: (mma.sync and ldmatrix fragment layouts, the profiler's warp requests); a kernel's own
#: target still checks its block (``GpuTarget.whole_warps``)
WARP_LANES: int = DEFAULT_TARGET.warp_size
if any(t.warp_size != WARP_LANES for t in TARGETS.values()):  # pragma: no cover - table check
    raise GpuTargetError("GPU targets: every target here must share one warp size")

#: over a lowered ``PrimFunc``: the ``GpuTarget`` it was built for
GPU_TARGET: S.AttrKey[GpuTarget] = S.AttrKey("gpu_target", __name__)


def gpu_target(arch: str | GpuTarget | None = None) -> GpuTarget:
    """The target named ``arch`` (a ``GpuTarget`` is returned as it is; None: the default)."""
    if arch is None:
        return DEFAULT_TARGET
    if isinstance(arch, GpuTarget):
        return arch
    try:
        return TARGETS[arch]
    except KeyError:
        raise GpuTargetError(f"unknown GPU arch {arch!r} (known: {', '.join(TARGETS)})") from None


def target_of(func: S.PrimFunc) -> GpuTarget:
    """The target ``func`` was lowered for (``DEFAULT_TARGET`` when it records none)."""
    t = func.attr(GPU_TARGET)
    return t if isinstance(t, GpuTarget) else DEFAULT_TARGET
