"""TC test helpers: compile rendered kernels to PTX for sm_80 and sm_90 (skips without nvcc)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import pytest

from vta.gpu.nvcc import compile_ptx_batch, find_nvcc


@pytest.fixture(scope="session")
def nvcc_check() -> Callable[[Iterable[str]], None]:
    """One nvcc run per architecture for all the given sources (each kernel once a session)."""

    def check(sources: Iterable[str]) -> None:
        srcs = list(sources)
        if find_nvcc() is None:
            pytest.skip("nvcc is not installed: rendered kernels cannot be compiled to PTX")
        for arch in ("sm_80", "sm_90"):
            compile_ptx_batch(srcs, arch)

    return check
