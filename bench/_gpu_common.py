"""Shared helpers of the GPU benchmarks: CuPy check, CUDA-event timing, result files."""

from __future__ import annotations

import json
import platform
import re
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"
# the repository's vta, whether or not it is installed: `python bench/gpu_gemm.py` from a checkout
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def cupy_or_exit() -> Any:
    """CuPy with a GPU, or exit with a clear message (status 2: nothing was measured)."""
    from vta.errors import GpuUnavailableError
    from vta.gpu.runtime import require_cupy

    try:
        return require_cupy()
    except GpuUnavailableError as e:
        print(f"{Path(sys.argv[0]).name}: no GPU benchmark run: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def time_ms(cp: Any, fn: Callable[[], None], warmup: int = 3, reps: int = 10,
            launches: int | None = None) -> float:
    """Median milliseconds per call of ``fn``: ``reps`` CUDA-event pairs, each around
    ``launches`` back-to-back calls (so a microsecond kernel is timed on the GPU, not by the
    host's dispatch of one launch). ``launches`` defaults to 100 for calls under 1 ms and to
    enough calls for about 100 ms a pair above that (at least 5; a launch's few microseconds
    of overhead are then under 1 % of the call)."""
    for _ in range(warmup):
        fn()
    cp.cuda.runtime.deviceSynchronize()
    if launches is None:
        one = _pair_ms(cp, fn, 1)
        launches = 100 if one < 1.0 else max(5, min(100, round(100.0 / one)))
    return statistics.median(_pair_ms(cp, fn, launches) / launches for _ in range(reps))


def _pair_ms(cp: Any, fn: Callable[[], None], launches: int) -> float:
    """Milliseconds of ``launches`` calls of ``fn`` between one pair of CUDA events."""
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    start.record()
    for _ in range(launches):
        fn()
    stop.record()
    stop.synchronize()
    return float(cp.cuda.get_elapsed_time(start, stop))


def time_ms_graph(cp: Any, fn: Callable[[], None], launches: int = 100, rounds: int = 5
                  ) -> tuple[float | None, str]:
    """Milliseconds per call of ``fn`` captured once into a CUDA graph (``launches`` calls in
    the graph; no host dispatch at all), the median of ``rounds`` graph launches; (None, why)
    where CuPy or a library call inside ``fn`` refuses stream capture."""
    stream = cp.cuda.Stream(non_blocking=True)
    try:
        with stream:
            fn()  # outside the capture: plans and workspaces are made here
            stream.synchronize()
            stream.begin_capture()
            try:
                for _ in range(launches):
                    fn()
            finally:
                graph = stream.end_capture()
        times = []
        for _ in range(rounds + 1):
            start, stop = cp.cuda.Event(), cp.cuda.Event()
            start.record(stream)
            graph.launch(stream)
            stop.record(stream)
            stop.synchronize()
            times.append(cp.cuda.get_elapsed_time(start, stop) / launches)
        return statistics.median(times[1:]), "CUDA graph"
    except Exception as e:  # capture unsupported by this CuPy / library path
        return None, f"no CUDA graph: {type(e).__name__}: {e}"


def device_info(cp: Any) -> dict[str, Any]:
    """What ran the benchmark: the device, its compute capability, CUDA/CuPy versions and the
    clocks nvidia-smi reads now (SM and memory, current and maximum; power and temperature), so
    a result file says at which clocks its times were taken."""
    dev = cp.cuda.Device()
    props = cp.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"]
    info: dict[str, Any] = {
        "name": name.decode() if isinstance(name, bytes) else str(name),
        "compute_capability": str(dev.compute_capability),
        "multiprocessors": int(props["multiProcessorCount"]),
        "cuda_runtime": int(cp.cuda.runtime.runtimeGetVersion()),
        "cuda_driver": int(cp.cuda.runtime.driverGetVersion()),
        "cupy": cp.__version__,
    }
    fields = "clocks.sm,clocks.max.sm,clocks.mem,clocks.max.mem,power.draw,temperature.gpu"
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader",
                              f"--id={dev.id}"], capture_output=True, text=True, timeout=20)
        info["clocks"] = dict(zip(fields.split(","), (v.strip() for v in out.stdout.split(",")),
                                  strict=False)) if out.returncode == 0 else out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        info["clocks"] = f"nvidia-smi unavailable: {e}"
    return info


def write_results(kind: str, gpu: str, rows: list[dict[str, Any]], extra: dict[str, Any],
                  cp: Any = None) -> Path:
    """Write ``rows`` to bench/results/<kind>_<gpu>.json, with the device and its clocks when
    ``cp`` (CuPy) is given."""
    RESULTS.mkdir(exist_ok=True)
    slug = re.sub(r"[^A-Za-z0-9]+", "_", gpu).strip("_").lower()
    path = RESULTS / f"{kind}_{slug}.json"
    payload = {"gpu": gpu, "host": platform.node(), **extra, "rows": rows}
    if cp is not None:
        payload["device_after"] = device_info(cp)
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
    """The best library int8 GEMM reachable here, ``y = x @ w.T`` (int8 in, int32 out).

    First choice: cuBLASLt's IMMA kernels through PyTorch's ``torch._int_mm`` (operands shared
    with CuPy by DLPack, no copy), where PyTorch with CUDA is installed and the shape suits it
    (it needs the output's columns a multiple of 8). Second: ``cublasGemmEx`` with int8
    operands through CuPy's cuBLAS binding; last, ``cupy.matmul`` on int32 copies made at each
    call (22 TOP/s at 4096^3 on an H200: no tensor cores; it would flatter any kernel measured
    against it, so the name says which ran). The first choice is checked bit-exact against the
    second before it is used. Every choice reads its operands' current contents at each call.
    Returns (the call, its name) - the name goes into the results."""
    legacy, legacy_name = _gemmex_int8(cp, x, w)
    try:
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch has no CUDA device")
        xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)

        def lt() -> Any:
            return cp.from_dlpack(torch._int_mm(xt, wt.t()))

        got = lt()
        cp.cuda.runtime.deviceSynchronize()
        if not bool(cp.array_equal(got, legacy())):
            raise RuntimeError("torch._int_mm differs from cublasGemmEx")
        return lt, f"torch._int_mm int8 -> int32 (cuBLASLt IMMA, torch {torch.__version__})"
    except Exception as e:  # no PyTorch, or it refused the shape: say why in the name
        return legacy, f"{legacy_name} (torch._int_mm unavailable: {str(e)[:120]})"


def _gemmex_int8(cp: Any, x: Any, w: Any) -> tuple[Callable[[], Any], str]:
    """``cublasGemmEx`` with int8 operands (the "TN" layout IMMA requires); where that call is
    refused, ``cupy.matmul`` on int32 copies."""
    import numpy as np

    m, k = x.shape
    n = w.shape[0]
    y = cp.zeros((m, n), cp.int32)
    try:
        from cupy_backends.cuda.libs import cublas

        handle = cp.cuda.device.get_cublas_handle()
        one, zero = np.ones(1, np.int32), np.zeros(1, np.int32)
        # cudaDataType / cublasComputeType values (library_types.h, cublas_api.h), for CuPy
        # builds that do not export them (CuPy 14 has no CUDA_R_32I)
        rt = cp.cuda.runtime
        r8i, r32i = getattr(rt, "CUDA_R_8I", 3), getattr(rt, "CUDA_R_32I", 10)
        c32i = getattr(cublas, "CUBLAS_COMPUTE_32I", 72)
        tensor_op = getattr(cublas, "CUBLAS_GEMM_DEFAULT_TENSOR_OP", 99)

        def gemm() -> Any:
            cublas.setStream(handle, cp.cuda.get_current_stream().ptr)  # capturable
            # column-major: Y^T (n x m) = W (n x k, stored k-major: op T) . X^T (k x m)
            cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                          one.ctypes.data, w.data.ptr, r8i, k, x.data.ptr, r8i, k,
                          zero.ctypes.data, y.data.ptr, r32i, n, c32i, tensor_op)
            return y

        gemm()
        cp.cuda.runtime.deviceSynchronize()
        return gemm, "cublasGemmEx int8 -> int32"
    except Exception as e:  # a CuPy/cuBLAS refusing it: the int32 path CuPy always has
        return ((lambda: cp.matmul(x.astype(cp.int32), w.astype(cp.int32).T)),
                f"cupy.matmul int32 (cublasGemmEx int8: {e})")


def float_gemm_baseline(cp: Any, x: Any, w: Any, dtype: str) -> tuple[Callable[[], Any], str]:
    """cuBLAS's ``y = x @ w.T`` for ``float16`` or ``bfloat16`` operands with fp32 accumulation
    and an output of the operands' type (``cublasGemmEx``, tensor-core HMMA/HGMMA), the same
    contract as our kernels. bfloat16 arrays travel as uint16 bit patterns (numpy has no
    bfloat16). Returns (the call, its name)."""
    import numpy as np
    from cupy_backends.cuda.libs import cublas

    m, k = x.shape
    n = w.shape[0]
    # cudaDataType values (library_types.h): CUDA_R_16F = 2, CUDA_R_16BF = 14
    rt = cp.cuda.runtime
    code = {"float16": getattr(rt, "CUDA_R_16F", 2),
            "bfloat16": getattr(rt, "CUDA_R_16BF", 14)}[dtype]
    y = cp.zeros((m, n), x.dtype)
    handle = cp.cuda.device.get_cublas_handle()
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)

    def gemm() -> Any:
        # column-major: Y^T (n x m) = W (n x k, stored k-major: op T) . X^T (k x m)
        cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                      one.ctypes.data, w.data.ptr, code, k, x.data.ptr, code, k,
                      zero.ctypes.data, y.data.ptr, code, n, cublas.CUBLAS_COMPUTE_32F,
                      cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP)
        return y

    gemm()
    cp.cuda.runtime.deviceSynchronize()
    return gemm, f"cublasGemmEx {dtype} -> {dtype} (fp32 accumulation)"
