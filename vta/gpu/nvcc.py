"""Compile CUDA source with the machine's ``nvcc``: PTX (tests, ``--emit-cuda``) and ptxas's
resource report.

``compile_ptx`` returns PTX for an architecture. ``kernel_resources`` compiles to a cubin with
``-Xptxas -v`` and reads, per kernel, what ptxas allocated: registers per thread, spill stores
and loads, stack frame, static shared memory, barriers. ``check_resources`` refuses a kernel
that spills or exceeds a limit of its ``GpuTarget`` (registers per thread, registers of a block
in one SM's register file, shared memory per block): ptxas's count is the authority the
IR-level estimate (``passes.check_registers``) is calibrated against. Results are memoised per
(source, arch) in this process, so a test session compiles each distinct kernel once per
architecture.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from vta.errors import KernelResourceError, NvccError
from vta.gpu.cuda import CudaKernel
from vta.gpu.target import DEFAULT_TARGET, GpuTarget, gpu_target

__all__ = ["NvccError", "KernelResourceError", "find_nvcc", "compile_ptx", "compile_ptx_batch",
           "KernelResources", "kernel_resources", "check_resources", "check_kernel", "parse_ptxas"]


def find_nvcc() -> str | None:
    """Path of ``nvcc`` on PATH (or the usual CUDA install locations), or None."""
    found = shutil.which("nvcc")
    if found:
        return found
    for cand in ("/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc"):
        if Path(cand).exists():
            return cand
    return None


@functools.lru_cache(maxsize=512)
def compile_ptx(source: str, arch: str = DEFAULT_TARGET.arch) -> str:
    """PTX text for ``source`` compiled for ``arch`` (``sm_80``, ``sm_90``, ...)."""
    return _nvcc(source, arch)


_BATCHED: set[tuple[str, str]] = set()


def compile_ptx_batch(sources: Iterable[str], arch: str = DEFAULT_TARGET.arch) -> int:
    """Compile many rendered kernels in one nvcc run (nvcc's start-up dominates small kernels).

    Each ``extern "C"`` kernel is renamed with a numeric suffix so the names do not collide (the
    renderer's prelude has an include guard). Sources already compiled for ``arch`` in this
    process are skipped. On failure the kernels are compiled one by one, so the error names the
    kernel nvcc rejected. Returns the number of kernels compiled."""
    todo = [s for s in dict.fromkeys(sources) if (s, arch) not in _BATCHED]
    if not todo:
        return 0
    parts = [re.sub(r"(__global__ void (?:__launch_bounds__\(\d+\) )?)(\w+)\(",
                    functools.partial(_suffixed, n=n), src, count=1)
             for n, src in enumerate(todo)]
    try:
        _nvcc("\n".join(parts), arch)
    except NvccError:
        for src in todo:
            compile_ptx(src, arch)  # raises for the culprit, with its diagnostics
        raise
    _BATCHED.update((s, arch) for s in todo)
    return len(todo)


def _suffixed(m: re.Match[str], n: int) -> str:
    """The kernel declaration matched by ``m`` with ``_n`` appended to its name."""
    return f"{m.group(1)}{m.group(2)}_{n}("


def _nvcc(source: str, arch: str) -> str:
    nvcc = find_nvcc()
    if nvcc is None:
        raise NvccError("nvcc was not found on PATH; install the CUDA toolkit to compile kernels")
    with tempfile.TemporaryDirectory(prefix="vta_nvcc_") as tmp:
        cu = Path(tmp) / "kernel.cu"
        ptx = Path(tmp) / "kernel.ptx"
        cu.write_text(source)
        cmd = [nvcc, "-ptx", f"-arch={arch}", "-std=c++17", "-O3", "-o", str(ptx), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise NvccError(f"nvcc -arch={arch} failed:\n{proc.stderr.strip()}")
        return ptx.read_text()


@dataclass(frozen=True, slots=True)
class KernelResources:
    """What ptxas allocated for one kernel (``nvcc -Xptxas -v``)."""

    name: str
    arch: str
    #: 32-bit registers per thread
    registers: int
    #: bytes spilled to local memory (stores, loads) and the stack frame
    spill_stores: int = 0
    spill_loads: int = 0
    stack: int = 0
    #: bytes of static ``__shared__`` memory (dynamic shared memory is the launch's)
    shared: int = 0
    #: named barriers used
    barriers: int = 0

    @property
    def spills(self) -> bool:
        return self.spill_stores > 0 or self.spill_loads > 0


_ENTRY = re.compile(r"Compiling entry function '(\w+)' for '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_BARS = re.compile(r"used (\d+) barriers")


def parse_ptxas(report: str) -> dict[str, KernelResources]:
    """Per kernel, the resources in ptxas's ``-v`` report (its stderr)."""
    out: dict[str, KernelResources] = {}
    entry: tuple[str, str] | None = None
    nums: dict[str, int] = {}
    for line in report.splitlines():
        m = _ENTRY.search(line)
        if m:
            entry, nums = (m.group(1), m.group(2)), {}
            continue
        if entry is None:
            continue
        f = _FRAME.search(line)
        if f:
            nums.update(stack=int(f.group(1)), spill_stores=int(f.group(2)),
                        spill_loads=int(f.group(3)))
        u = _USED.search(line)
        if u:
            sm, bars = _SMEM.search(line), _BARS.search(line)
            out[entry[0]] = KernelResources(
                entry[0], entry[1], int(u.group(1)), nums.get("spill_stores", 0),
                nums.get("spill_loads", 0), nums.get("stack", 0),
                int(sm.group(1)) if sm else 0, int(bars.group(1)) if bars else 0)
            entry = None
    return out


@functools.lru_cache(maxsize=256)
def kernel_resources(source: str, arch: str = DEFAULT_TARGET.arch) -> dict[str, KernelResources]:
    """Compile ``source`` to a cubin for ``arch`` with ``-Xptxas -v``; per kernel, what ptxas
    allocated. A kernel ptxas reports nothing for is an ``NvccError``."""
    nvcc = find_nvcc()
    if nvcc is None:
        raise NvccError("nvcc was not found on PATH; install the CUDA toolkit to read ptxas's "
                        "resource report")
    with tempfile.TemporaryDirectory(prefix="vta_ptxas_") as tmp:
        cu = Path(tmp) / "kernel.cu"
        cu.write_text(source)
        cmd = [nvcc, "-cubin", f"-arch={arch}", "-std=c++17", "-O3", "-Xptxas", "-v",
               "-o", str(Path(tmp) / "kernel.cubin"), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise NvccError(f"nvcc -cubin -arch={arch} failed:\n{proc.stderr.strip()}")
    res = parse_ptxas(proc.stderr + proc.stdout)
    if not res:
        raise NvccError(f"nvcc -arch={arch}: ptxas reported no kernel:\n{proc.stderr.strip()}")
    return res


def check_resources(res: KernelResources, threads: int, dynamic_shared: int = 0,
                    target: GpuTarget | str | None = None) -> KernelResources:
    """``res`` unchanged, or a ``KernelResourceError`` naming the kernel, the resource, the
    amount and the limit: a kernel that spills registers to local memory, needs more registers
    per thread than ``target`` allows, or whose block of ``threads`` threads needs more
    registers than one SM's file (it could not launch), or more shared memory per block (static
    plus ``dynamic_shared``) than ``target`` allows."""
    t = gpu_target(target)
    where = f"{res.name} on {t}"
    if res.spills:
        raise KernelResourceError(f"{where}: ptxas spills registers ({res.spill_stores} B "
                                  f"stores, {res.spill_loads} B loads at {res.registers} "
                                  f"registers per thread); use smaller register tiles")
    if res.registers > t.max_registers:
        raise KernelResourceError(f"{where}: {res.registers} registers per thread exceed "
                                  f"{t.max_registers}")
    if res.registers * threads > t.registers_per_sm:
        raise KernelResourceError(f"{where}: {res.registers} registers x {threads} threads = "
                                  f"{res.registers * threads} exceed the {t.registers_per_sm} "
                                  f"registers of an SM; use fewer threads per block")
    smem = res.shared + dynamic_shared
    if smem > t.max_shared:
        raise KernelResourceError(f"{where}: {smem} B of shared memory per block exceed "
                                  f"{t.max_shared} B")
    return res


def check_kernel(kernel: CudaKernel, target: GpuTarget | str | None = None) -> KernelResources:
    """ptxas's resources of a rendered kernel for ``target``, refused by ``check_resources``
    (spills, registers, shared memory with the launch's dynamic part)."""
    t = gpu_target(target)
    res = kernel_resources(kernel.source, t.arch)
    if kernel.name not in res:
        raise NvccError(f"ptxas reported no kernel {kernel.name} (it reported "
                        f"{', '.join(sorted(res))})")
    return check_resources(res[kernel.name], kernel.launch.threads_per_block,
                           kernel.dynamic_shared, t)
