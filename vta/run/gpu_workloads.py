"""Named workloads (ResNet-18 layers, matmul/dense) on the GPU targets: the workload in a
dtype, and the scheduled kernel function of each GPU schedule (``build_func``).

A workload's int8 epilogue is the accelerator's calibrated one (``Workload.epilogue``), and
``raw=True`` drops it so the kernel writes the int32 accumulators. Workloads whose tensors
exceed ``MAX_HOST_BYTES`` are refused, naming the shape, before anything is allocated. The
inputs and the numpy reference are the layer run's (``vta.run.layer``), the same for every
target.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vta.compiler.ir import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import Workload, resolve
from vta.errors import ShapeError, VtaError
from vta.gpu import schedules as G
from vta.gpu.kernels.conv2d import mma_conv2d
from vta.gpu.kernels.gemm import mma_gemm

RESNET18_LAYERS = tuple(f"C{i}" for i in range(2, 12))

__all__ = ["MAX_HOST_BYTES", "GpuWorkload", "host_bytes", "make_workload", "gpu_workload",
           "build_func"]

#: Largest total of a workload's tensors (inputs and output) the GPU targets allocate on the
#: host (1 GiB): the numpy reference works in int64, about eight times that again.
MAX_HOST_BYTES = 1 << 30

@dataclass(frozen=True)
class GpuWorkload:
    name: str
    spec: Conv2dSpec | MatmulSpec
    dtype: str = "int8"
    epi: Epilogue | None = field(default_factory=Epilogue)

    @property
    def is_conv(self) -> bool:
        return isinstance(self.spec, Conv2dSpec)


def host_bytes(spec: Conv2dSpec | MatmulSpec, dtype: str) -> int:
    """Bytes of a workload's input, weight and output tensors (output as wide as the
    accumulator: the largest it can be)."""
    item = np.dtype(np.float16 if dtype == "float16" else np.int8).itemsize
    if isinstance(spec, Conv2dSpec):
        ins = spec.n * spec.ic * spec.h * spec.w + spec.oc * spec.ic * spec.kh * spec.kw
        outs = spec.n * spec.oc * spec.oh * spec.ow
    else:
        ins, outs = (spec.m + spec.n) * spec.k, spec.m * spec.n
    return ins * item + outs * 4


def make_workload(name: str, dtype: str = "int8", sizes: list[int] | None = None,
                  raw: bool = False, **over: int | None) -> GpuWorkload:
    """A workload by the accelerator's names (``vta.compiler.ops.workloads.resolve``: ``conv2d`` =
    resnet18:C2, ``resnet18:C1..C11``, ``matmul``, ``dense``), with the same calibrated epilogue
    (none with ``raw``: the kernel writes int32 accumulators). A ``ShapeError`` names a shape
    whose tensors exceed ``MAX_HOST_BYTES``."""
    return gpu_workload(resolve(name, sizes, **over), dtype, raw)


def gpu_workload(w: Workload, dtype: str = "int8", raw: bool = False) -> GpuWorkload:
    """``w`` on a GPU target in ``dtype``: its calibrated epilogue for int8 (none with ``raw``
    or a float dtype: the kernel writes the accumulators). A ``ShapeError`` names a shape whose
    tensors exceed ``MAX_HOST_BYTES``."""
    need = host_bytes(w.spec, dtype)
    if need > MAX_HOST_BYTES:
        raise ShapeError(f"{w.name} ({w.spec.describe()}) is too large for the GPU targets: its "
                         f"tensors take {need:,} bytes of host memory, more than the "
                         f"{MAX_HOST_BYTES:,}-byte limit")
    epi = w.epilogue if dtype == "int8" and not raw else None
    return GpuWorkload(w.name, w.spec, dtype, epi)


#: the smallest output rows and columns a tensor-core (WMMA) tile covers
WMMA_MIN = 16


def build_func(w: GpuWorkload, schedule: str = "auto") -> S.PrimFunc:
    """The scheduled (not yet GPU-lowered) function of a workload. ``auto`` (the default):
    the tensor-core schedule where the output holds one tensor-core tile, else SIMT; an
    explicit ``wmma`` on a smaller output is a ``VtaError`` naming the shape (never a silent
    SIMT run)."""
    if schedule in ("wmma", "auto"):
        s = w.spec
        m, n = (s.n * s.oh * s.ow, s.oc) if isinstance(s, Conv2dSpec) else (s.m, s.n)
        if min(m, n) < WMMA_MIN:  # smaller than one tensor-core tile
            if schedule == "auto":
                return build_func(w, "simt")
            raise VtaError(f"--gpu-schedule wmma: {w.name}'s output is {m} x {n} (rows x "
                           f"columns), smaller than one {WMMA_MIN} x {WMMA_MIN} tensor-core "
                           f"tile; use --gpu-schedule simt (or leave it out: wmma where a tile "
                           f"fits, else simt)")
        if w.is_conv:
            return G.conv2d_wmma(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
        return G.matmul_wmma(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
    if schedule == "simt":
        if w.is_conv:
            return G.conv2d_simt(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
        return G.matmul_simt(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
    if schedule == "mma":  # the task-mapping kernels (already lowered; OHWI conv weights)

        if w.is_conv:
            return mma_conv2d(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
        return mma_gemm(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
    raise VtaError(f"unknown GPU schedule {schedule!r} (auto, wmma, simt or mma)")
