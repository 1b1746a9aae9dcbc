"""Run rendered kernels on an NVIDIA GPU through CuPy (``pip install -e .[gpu]``).

CuPy is imported only when a function here is called; without CuPy or without a usable GPU the
caller gets a ``GpuUnavailableError`` saying which is missing. Modules are cached per source.

Kernels are compiled by the machine's ``nvcc`` to a cubin for the device's own architecture
(``sm_90a`` on Hopper, so wgmma and the bulk-copy engine are available) and loaded with
``cupy.RawModule(path=...)``. Only where no ``nvcc`` is installed does CuPy's NVRTC compile
them: the NVRTC headers shipped in CUDA 13's pip packages lack ``crt/mma.h``, so the WMMA
kernels need the toolkit (seen on an H200 with cupy-cuda13x 14.2).
"""

from __future__ import annotations

import atexit
import functools
import hashlib
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from vta.errors import GpuUnavailableError, NvccError, VtaError
from vta.gpu.cuda import CudaKernel
from vta.gpu.nvcc import find_nvcc

__all__ = ["GpuUnavailableError", "require_cupy", "gpu_available", "gpu_name", "GpuKernel",
           "run_kernel", "device_arch", "precompile"]


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


# architectures whose arch-specific feature set ("a" suffix) the kernels may use: sm_90a holds
# wgmma, setmaxnreg and the tensor-map bulk copies; a cubin built for it runs on 9.0 only
_ARCH_SPECIFIC = frozenset({"90"})


def device_arch() -> str:
    """The nvcc ``-arch`` of the current device: ``sm_`` + its compute capability, with the
    ``a`` suffix where the kernels use that architecture's own instructions (``sm_90a``)."""
    cc = str(require_cupy().cuda.Device().compute_capability)
    return f"sm_{cc}a" if cc in _ARCH_SPECIFIC else f"sm_{cc}"


@functools.lru_cache(maxsize=1)
def _cubin_dir() -> Path:
    """A temporary folder for this process's cubins, removed when the process exits."""
    path = Path(tempfile.mkdtemp(prefix="vta_cubin_"))
    atexit.register(shutil.rmtree, path, True)
    return path


@functools.lru_cache(maxsize=256)
def _cubin(source: str, arch: str) -> Path:
    """``source`` compiled by nvcc to a cubin for ``arch`` (one file per distinct source)."""
    nvcc = find_nvcc()
    assert nvcc is not None
    digest = hashlib.sha256(f"{arch}\0{source}".encode()).hexdigest()[:24]
    cu, cubin = _cubin_dir() / f"{digest}.cu", _cubin_dir() / f"{digest}.cubin"
    cu.write_text(source)
    cmd = [nvcc, "-cubin", f"-arch={arch}", "-std=c++17", "-O3", "-o", str(cubin), str(cu)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NvccError(f"nvcc -arch={arch} failed:\n{proc.stderr.strip()}")
    return cubin


def precompile(kernels: Sequence[CudaKernel], workers: int = 8) -> None:
    """Compile ``kernels`` with nvcc in parallel (one process each, ``workers`` at a time), so
    a benchmark's many kernels cost one compile's wall time instead of their sum. A no-op
    without nvcc (NVRTC then compiles each at first launch). A kernel nvcc rejects is left for
    its first launch, which raises the NvccError naming it."""
    if find_nvcc() is None:
        return
    arch = device_arch()

    def one(kernel: CudaKernel) -> None:
        try:
            _cubin(kernel.source, arch)
        except NvccError:
            pass

    with ThreadPoolExecutor(max_workers=workers) as pool:
        list(pool.map(one, kernels))


@functools.lru_cache(maxsize=128)
def _module(source: str, name: str) -> Any:
    cp = require_cupy()
    if find_nvcc() is not None:
        return cp.RawModule(path=str(_cubin(source, device_arch()))).get_function(name)
    arch = device_arch()
    if arch.endswith("a"):  # RawModule compiles for compute_90, which has no wgmma/setmaxnreg
        return _nvrtc_function(cp, source, name, arch)
    try:
        mod = cp.RawModule(code=source, options=("-std=c++17",), name_expressions=None)
        return mod.get_function(name)
    except cp.cuda.compiler.CompileException as e:
        first = next((ln for ln in str(e).splitlines() if "error" in ln), str(e))
        raise GpuUnavailableError(
            f"{name}: CuPy's NVRTC could not compile the kernel and no nvcc was found: "
            f"{first.strip()}; install the CUDA toolkit (nvcc)") from None


def _nvrtc_function(cp: Any, source: str, name: str, arch: str) -> Any:
    """``name`` of ``source`` compiled by NVRTC to a cubin for ``arch`` itself (``sm_90a``:
    its architecture-specific instructions need the exact target)."""
    from cupy_backends.cuda.libs import nvrtc

    prog = nvrtc.createProgram(source, f"{name}.cu", (), ())
    try:
        try:
            nvrtc.compileProgram(prog, (f"-arch={arch}", "-std=c++17"))
        except Exception as e:
            raise GpuUnavailableError(f"{name}: NVRTC -arch={arch} could not compile the kernel "
                                      f"({e}): {nvrtc.getProgramLog(prog).strip()[:500]}; "
                                      f"install the CUDA toolkit (nvcc)") from None
        mod = cp.cuda.function.Module()
        mod.load(nvrtc.getCUBIN(prog))
    finally:
        destroy = getattr(nvrtc, "destroyProgram", None)
        if destroy is not None:
            destroy(prog)
    _NVRTC_MODULES.append(mod)  # the function lives as long as its module
    return mod.get_function(name)


_NVRTC_MODULES: list[Any] = []


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
    # a 0-rank array travels as one element: it comes back with its own shape
    return [cp.asnumpy(d).reshape(np.shape(a)) for d, a in zip(dev, arrays, strict=True)]
