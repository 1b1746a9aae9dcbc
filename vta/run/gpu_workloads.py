"""Named GPU workloads (ResNet-18 layers, matmul/dense) and their inputs and references.

A workload's int8 epilogue is the accelerator's calibrated one (``Workload.epilogue``), its
random bias is drawn within that epilogue's bound, and ``raw=True`` drops the epilogue so the
kernel writes the int32 accumulators. Workloads whose tensors exceed ``MAX_HOST_BYTES`` are
refused, naming the shape, before anything is allocated.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vta.compiler.ir import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_acc, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue, random_bias
from vta.compiler.ops.matmul import MatmulSpec, matmul_acc, matmul_reference
from vta.compiler.ops.workloads import resolve
from vta.errors import ShapeError, VtaError
from vta.gpu import schedules as G
from vta.gpu.emulator import NP_DTYPES
from vta.gpu.kernels.conv2d import mma_conv2d
from vta.gpu.kernels.gemm import mma_gemm

RESNET18_LAYERS = tuple(f"C{i}" for i in range(2, 12))

__all__ = ["MAX_HOST_BYTES", "GpuWorkload", "host_bytes", "make_workload", "random_inputs",
           "reference", "build_func"]

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
    """A workload by the accelerator's names (``vta.compiler.workloads.resolve``: ``conv2d`` =
    resnet18:C2, ``resnet18:C1..C11``, ``matmul``, ``dense``), with the same calibrated epilogue
    (none with ``raw``: the kernel writes int32 accumulators). A ``ShapeError`` names a shape
    whose tensors exceed ``MAX_HOST_BYTES``."""
    w = resolve(name, sizes, **over)
    need = host_bytes(w.spec, dtype)
    if need > MAX_HOST_BYTES:
        raise ShapeError(f"{w.name} ({w.spec.describe()}) is too large for the GPU targets: its "
                         f"tensors take {need:,} bytes of host memory, more than the "
                         f"{MAX_HOST_BYTES:,}-byte limit")
    epi = w.epilogue if dtype == "int8" and not raw else None
    return GpuWorkload(w.name, w.spec, dtype, epi)


def random_inputs(params: tuple[S.Buffer, ...], rng: np.random.Generator,
                  epi: Epilogue | None = None) -> list[np.ndarray]:
    """Random inputs for every parameter but the last (the output, zero-filled): int8 uniform
    over its range, an int32 bias within ``epi``'s bias bound (the default epilogue's when
    not given), floats standard normal."""
    out: list[np.ndarray] = []
    for b in params[:-1]:
        dt = NP_DTYPES[b.dtype]
        if b.dtype == "int8":
            out.append(rng.integers(-128, 128, b.shape, dtype=np.int8))
        elif b.dtype == "int32":  # bias
            out.append(random_bias(epi or Epilogue(), int(np.prod(b.shape)), rng)
                       .reshape(b.shape))
        else:
            out.append(rng.standard_normal(b.shape).astype(dt))
    last = params[-1]
    out.append(np.zeros(last.shape, NP_DTYPES[last.dtype]))
    return out


def reference(w: GpuWorkload, arrays: list[np.ndarray]) -> np.ndarray:
    """The numpy reference for the kernel's output given its inputs (bit-exact for int8)."""
    bias = arrays[2] if w.epi is not None and w.epi.bias else None
    x, k = arrays[0], arrays[1]
    if w.dtype != "int8":
        if isinstance(w.spec, Conv2dSpec):
            raise VtaError("fp16 conv2d has no reference here")
        return x.astype(np.float32) @ k.astype(np.float32).T
    if isinstance(w.spec, Conv2dSpec):
        s = w.spec
        kk = k.reshape(s.oc, s.ic, s.kh, s.kw)
        if w.epi is None:  # the int32 accumulators
            return conv2d_acc(x, kk, s)
        return conv2d_reference(x, kk, bias, s, w.epi)
    if w.epi is None:
        return matmul_acc(x, k)
    return matmul_reference(x, k, bias, w.epi)


def build_func(w: GpuWorkload, schedule: str = "wmma") -> S.PrimFunc:
    """The scheduled (not yet GPU-lowered) function of a workload."""
    if schedule == "wmma":
        s = w.spec
        m, n = (s.n * s.oh * s.ow, s.oc) if isinstance(s, Conv2dSpec) else (s.m, s.n)
        if min(m, n) < 16:  # smaller than one tensor-core tile
            return build_func(w, "simt")
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
    raise VtaError(f"unknown GPU schedule {schedule!r} (wmma, simt or mma)")
