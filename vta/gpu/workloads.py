"""Named GPU workloads (ResNet-18 layers, matmul/dense) and their inputs and references."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from vta.compiler import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec, matmul_reference
from vta.errors import VtaError

RESNET18_LAYERS = tuple(f"C{i}" for i in range(2, 12))

__all__ = ["GpuWorkload", "make_workload", "random_inputs", "reference",
           "build_func"]

@dataclass(frozen=True)
class GpuWorkload:
    name: str
    spec: Conv2dSpec | MatmulSpec
    dtype: str = "int8"
    epi: Epilogue | None = field(default_factory=Epilogue)

    @property
    def is_conv(self) -> bool:
        return isinstance(self.spec, Conv2dSpec)


def make_workload(name: str, dtype: str = "int8", sizes: list[int] | None = None,
                  **over: int | None) -> GpuWorkload:
    """A workload by the accelerator's names (``vta.compiler.workloads.resolve``: ``conv2d`` =
    resnet18:C2, ``resnet18:C1..C11``, ``matmul``, ``dense``), with the same default epilogue."""
    from vta.compiler.workloads import resolve

    w = resolve(name, sizes, **over)
    return GpuWorkload(w.name, w.spec, dtype, Epilogue() if dtype == "int8" else None)


def random_inputs(params: tuple[S.Buffer, ...], rng: np.random.Generator) -> list[np.ndarray]:
    """Random inputs for every parameter but the last (the output, zero-filled)."""
    from vta.gpu.emulator import NP_DTYPES

    out: list[np.ndarray] = []
    for b in params[:-1]:
        dt = NP_DTYPES[b.dtype]
        if b.dtype == "int8":
            out.append(rng.integers(-128, 128, b.shape, dtype=np.int8))
        elif b.dtype == "int32":  # bias
            out.append(rng.integers(-(1 << 10), 1 << 10, b.shape, dtype=np.int32))
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
        if w.epi is None:
            return conv2d_reference(x, kk, None, s, Epilogue(shift=0, bias=False, clip_lo=-128,
                                                             clip_hi=127))
        return conv2d_reference(x, kk, bias, s, w.epi)
    if w.epi is None:
        return (x.astype(np.int64) @ k.astype(np.int64).T).astype(np.int32)
    return matmul_reference(x, k, bias, w.epi)


def build_func(w: GpuWorkload, schedule: str = "wmma") -> S.PrimFunc:
    """The scheduled (not yet GPU-lowered) function of a workload."""
    from vta.gpu import schedules as G

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
        from vta.gpu.kernels.conv2d import mma_conv2d
        from vta.gpu.kernels.gemm import mma_gemm

        if w.is_conv:
            return mma_conv2d(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
        return mma_gemm(w.spec, w.dtype, w.epi)  # type: ignore[arg-type]
    raise VtaError(f"unknown GPU schedule {schedule!r} (wmma, simt or mma)")
