"""GPU-backend test helpers: batched nvcc compilation of every rendered kernel, GPU detection."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from vta.gpu.nvcc import compile_ptx_batch, find_nvcc

ARCHES = ("sm_80", "sm_90")


@pytest.fixture(scope="session")
def nvcc_check() -> Callable[[Iterable[str]], None]:
    """Compile CUDA sources to PTX for sm_80 and sm_90 (one nvcc run per arch per call; each
    distinct kernel once per session). Skips, saying why, only when nvcc is absent."""

    def check(sources: Iterable[str]) -> None:
        srcs = list(sources)
        if find_nvcc() is None:
            pytest.skip("nvcc is not installed: rendered kernels cannot be compiled to PTX")
        for arch in ARCHES:
            compile_ptx_batch(srcs, arch)

    return check


def gpu_or_skip() -> None:
    from vta.gpu.runtime import gpu_available

    if not gpu_available():
        pytest.skip("no CUDA GPU with CuPy in this environment")
