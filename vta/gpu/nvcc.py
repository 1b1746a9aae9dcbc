"""Compile CUDA source to PTX with the machine's ``nvcc`` (used by tests and ``--emit-cuda``).

Results are memoised per (source, arch) in this process, so a test session compiles each
distinct kernel once per architecture.
"""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterable
from pathlib import Path

from vta.errors import NvccError

__all__ = ["NvccError", "find_nvcc", "compile_ptx", "compile_ptx_batch"]


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
def compile_ptx(source: str, arch: str = "sm_80") -> str:
    """PTX text for ``source`` compiled for ``arch`` (``sm_80``, ``sm_90``, ...)."""
    return _nvcc(source, arch)


_BATCHED: set[tuple[str, str]] = set()


def compile_ptx_batch(sources: Iterable[str], arch: str = "sm_80") -> int:
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
