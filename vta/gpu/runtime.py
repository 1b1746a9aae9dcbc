"""Run rendered kernels on an NVIDIA GPU through CuPy (``pip install -e .[gpu]``).

CuPy is imported only when a function here is called; without CuPy or without a usable GPU the
caller gets a ``GpuUnavailableError`` saying which is missing. Modules are cached per source.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np

from vta.errors import GpuUnavailableError, VtaError
from vta.gpu.cuda import CudaKernel

__all__ = ["GpuUnavailableError", "require_cupy", "gpu_available", "gpu_name", "GpuKernel",
           "run_kernel"]


def require_cupy() -> Any:
    """The ``cupy`` module with a working GPU, or a GpuUnavailableError saying what is missing."""
    try:
        import cupy
    except ImportError as e:
        raise GpuUnavailableError(
            "the cuda target needs CuPy: pip install -e '.[gpu]' (or a cupy-cudaXXx wheel); "
            f"import failed: {e}. Use --target cuda-emu to run the kernel in the SIMT "
            "emulator instead") from None
    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as e:
        raise GpuUnavailableError(f"CuPy is installed but no CUDA GPU is usable ({e}); use "
                                  f"--target cuda-emu for the SIMT emulator") from None
    if n < 1:
        raise GpuUnavailableError("CuPy is installed but found no CUDA GPU; use --target "
                                  "cuda-emu for the SIMT emulator")
    return cupy


def gpu_available() -> bool:
    try:
        require_cupy()
    except GpuUnavailableError:
        return False
    return True


def gpu_name() -> str:
    cp = require_cupy()
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


@functools.lru_cache(maxsize=128)
def _module(source: str, name: str) -> Any:
    cp = require_cupy()
    mod = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=None)
    return mod.get_function(name)


class GpuKernel:
    """A compiled kernel bound to its launch shape; call it with CuPy arrays."""

    def __init__(self, kernel: CudaKernel) -> None:
        self.kernel = kernel
        self.fn = _module(kernel.source, kernel.name)
        if kernel.dynamic_shared:
            # opt in to more than the static limit of dynamic shared memory (the device caps
            # it: GpuTarget.max_dynamic_shared)
            try:
                self.fn.max_dynamic_shared_size_bytes = kernel.dynamic_shared
            except Exception as e:
                raise GpuUnavailableError(f"{kernel.name}: this GPU cannot give a block "
                                          f"{kernel.dynamic_shared} B of shared memory ({e})"
                                          ) from None

    def __call__(self, *arrays: Any, stream: Any = None) -> None:
        k = self.kernel
        if len(arrays) != len(k.params):
            raise VtaError(f"{k.name}: takes {len(k.params)} arrays, got {len(arrays)}")
        self.fn(k.grid, k.block, tuple(arrays), shared_mem=k.dynamic_shared, stream=stream)


def run_kernel(kernel: CudaKernel, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Copy ``arrays`` to the GPU, launch, and return every parameter copied back."""
    cp = require_cupy()
    dev = [cp.asarray(np.ascontiguousarray(a)) for a in arrays]
    GpuKernel(kernel)(*dev)
    cp.cuda.runtime.deviceSynchronize()
    return [cp.asnumpy(d) for d in dev]
