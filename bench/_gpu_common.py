"""Shared helpers of the GPU benchmarks: CuPy check, CUDA-event timing, result files."""

from __future__ import annotations

import json
import platform
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def cupy_or_exit() -> Any:
    """CuPy with a GPU, or exit with a clear message (status 2: nothing was measured)."""
    from vta.errors import GpuUnavailableError
    from vta.gpu.runtime import require_cupy

    try:
        return require_cupy()
    except GpuUnavailableError as e:
        print(f"{Path(sys.argv[0]).name}: no GPU benchmark run: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def time_ms(cp: Any, fn: Callable[[], None], warmup: int = 3, reps: int = 20) -> float:
    """Median milliseconds of ``fn`` over ``reps`` runs, each timed with CUDA events."""
    for _ in range(warmup):
        fn()
    cp.cuda.runtime.deviceSynchronize()
    times = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times)


def write_results(kind: str, gpu: str, rows: list[dict[str, Any]], extra: dict[str, Any]) -> Path:
    RESULTS.mkdir(exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_").lower()
    path = RESULTS / f"{kind}_{slug}.json"
    payload = {"gpu": gpu, "host": platform.node(), **extra, "rows": rows}
    path.write_text(json.dumps(payload, indent=2) + "\n")
    return path


def print_table(headers: list[str], rows: list[list[Any]]) -> None:
    cols = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = "  ".join(str(h).rjust(w) for h, w in zip(headers, cols, strict=False))
    print(line)
    print("-" * len(line))
    for r in rows:
        print("  ".join(str(x).rjust(w) for x, w in zip(r, cols, strict=False)))


def int8_gemm_baseline(cp: Any, x: Any, w: Any) -> tuple[Callable[[], Any], str]:
    """The best int8 GEMM CuPy reaches, ``y = x @ w.T`` (int8 in, int32 out): cuBLAS's
    ``cublasGemmEx`` with int8 operands (tensor-core IMMA, the "TN" layout it requires) through
    CuPy's cuBLAS binding; where that call is refused, ``cupy.matmul`` on int32 copies. Returns
    (the call, its name) - the name goes into the results."""
    import numpy as np

    m, k = x.shape
    n = w.shape[0]
    y = cp.zeros((m, n), cp.int32)
    try:
        from cupy_backends.cuda.libs import cublas

        handle = cp.cuda.device.get_cublas_handle()
        one, zero = np.ones(1, np.int32), np.zeros(1, np.int32)
        r8i, r32i = cp.cuda.runtime.CUDA_R_8I, cp.cuda.runtime.CUDA_R_32I

        def gemm() -> Any:
            # column-major: Y^T (n x m) = W (n x k, stored k-major: op T) . X^T (k x m)
            cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                          one.ctypes.data, w.data.ptr, r8i, k, x.data.ptr, r8i, k,
                          zero.ctypes.data, y.data.ptr, r32i, n, cublas.CUBLAS_COMPUTE_32I,
                          cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP)
            return y

        gemm()
        cp.cuda.runtime.deviceSynchronize()
        return gemm, "cublasGemmEx int8 -> int32 (IMMA)"
    except Exception as e:  # an older CuPy/cuBLAS: the int32 path CuPy always has
        xi, wi = x.astype(cp.int32), w.astype(cp.int32)
        return (lambda: cp.matmul(xi, wi.T)), f"cupy.matmul int32 (cublasGemmEx int8: {e})"
