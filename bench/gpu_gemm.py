"""Generated tensor-core GEMM kernels vs cuBLAS: fp16, bf16 and int8.

    python bench/gpu_gemm.py [--sizes 1024 2048 4096 8192] [--reps 10] [--kernels mma wmma]

For each size n, ``Y = X @ W.T`` with X, W of n x n: fp16 / bf16 in, same type out (fp32
accumulation) against ``cublasGemmEx`` with the same types and fp32 compute
(``_gpu_common.float_gemm_baseline``), and int8 in / int32 out against ``cublasGemmEx`` with
int8 operands (``_gpu_common.int8_gemm_baseline``). Our kernels: ``mma``, the task-mapping
kernel (vta.gpu.kernels.gemm: 128x128 block tiles, 4 warps of 64x64, a 3-stage cp.async ring,
swizzled shared tiles, ldmatrix + mma.sync), ``wmma``, the tensor-core schedule
(vta.gpu.schedules.matmul_wmma), and on compute capability 9.0 the sm_90a kernels of
vta.gpu.kernels.wgmma_gemm (``wgmma``, ``wgmma256``; the warp-specialised persistent
``ws256``, ``ws256c2``); each runs the dtypes it supports. Each time is the median of
``--reps`` CUDA-event pairs around 100 back-to-back launches (fewer above 1 ms a call;
``_gpu_common.time_ms``); the table gives TFLOP/s (TOP/s for int8) and the ratio to cuBLAS;
results, with the device and its clocks, go to bench/results/gpu_gemm_<gpu>.json. Integer
results are checked bit-exact against cuBLAS, float ones within fp32-accumulation rounding.
Targets (issue 24): fp16 4096^3 >= 0.8x cuBLAS, int8 >= 0.7x. Without CuPy or a GPU the script
says so and exits with status 2.
"""

from __future__ import annotations

import argparse
import dataclasses

import numpy as np
from _gpu_common import (
    cupy_or_exit,
    device_info,
    float_gemm_baseline,
    int8_gemm_baseline,
    print_table,
    time_ms,
    write_results,
)

from vta.gpu.hopper import TENSOR_MAPS, encode_tensor_maps
from vta.gpu.kernels.wgmma_gemm import WgmmaKnobs, wgmma_gemm

KERNELS: dict[str, tuple[str, ...]] = {
    "mma": ("float16", "int8"),
    "wmma": ("float16", "int8"),
    "wgmma": ("float16", "bfloat16", "int8"),
    "wgmma256": ("float16", "bfloat16", "int8"),
    "ws256": ("float16", "bfloat16", "int8"),
    "ws256c2": ("float16", "bfloat16", "int8"),
}
"""Our kernels and the operand types each one builds (``wgmma``: the sm_90a kernel, block tile
128x128, 4-stage TMA ring; ``wgmma256``: 128x256; ``ws256``: the warp-specialised persistent
kernel, 128x256 tiles, 4 stages, tiles in groups of 16 rows; ``ws256c2``: the same in clusters
of two blocks sharing B by TMA multicast, groups of 8; all only on compute capability 9.0; the
knobs are the best of bench/gpu_ws_probe.py's variants on an H100)."""

#: blocks of the persistent kernels until ``main`` reads the device's SM count
_PERSISTENT = 132

WGMMA_KNOBS = {"wgmma": WgmmaKnobs(2, 128, 4), "wgmma256": WgmmaKnobs(2, 256, 4),
               "ws256": WgmmaKnobs(2, 256, 4, producer=True, persistent=_PERSISTENT, group=16),
               "ws256c2": WgmmaKnobs(2, 256, 4, producer=True, persistent=_PERSISTENT, group=8,
                                     cluster=2)}


def out_dtype(kind: str, dtype: str) -> str:
    """Our kernel's output type: the operands' type for floats (fp32 for the sm_90a kernel's
    bf16, which has no bf16 output), int32 for int8."""
    if dtype == "int8":
        return "int32"
    return "float32" if kind in WGMMA_KNOBS and dtype == "bfloat16" else dtype


def build(kind: str, n: int, dtype: str):  # type: ignore[no-untyped-def]
    from vta.compiler.ops.matmul import MatmulSpec
    from vta.gpu.cuda import render_cuda
    from vta.gpu.kernels.gemm import mma_gemm
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.schedules import matmul_wmma

    out_t = out_dtype(kind, dtype)
    spec = MatmulSpec(n, n, n)
    if kind in WGMMA_KNOBS:
        return render_cuda(wgmma_func(kind, n, dtype))
    if kind == "mma":
        return render_cuda(mma_gemm(spec, dtype, None, out_dtype=out_t))
    return render_cuda(lower_for_gpu(matmul_wmma(spec, dtype, None, out_dtype=out_t)))


def wgmma_func(kind: str, n: int, dtype: str):  # type: ignore[no-untyped-def]
    from vta.compiler.ops.matmul import MatmulSpec

    return wgmma_gemm(MatmulSpec(n, n, n), dtype, None, WGMMA_KNOBS[kind],
                      out_dtype(kind, dtype))


def operands(cp, dtype: str, n: int):  # type: ignore[no-untyped-def]
    """Seeded X, W (n x n) and a zeroed Y on the GPU; bfloat16 as uint16 bit patterns
    (float32 rounded to nearest even)."""
    rng = np.random.default_rng(0)
    if dtype == "int8":
        x, w = (rng.integers(-128, 128, (n, n), dtype=np.int8) for _ in range(2))
        return cp.asarray(x), cp.asarray(w), cp.zeros((n, n), cp.int32)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    if dtype == "float16":
        return cp.asarray(a.astype(np.float16)), cp.asarray(b.astype(np.float16)), \
            cp.zeros((n, n), cp.float16)
    return cp.asarray(to_bf16(a)), cp.asarray(to_bf16(b)), cp.zeros((n, n), cp.uint16)


def to_bf16(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bit patterns (uint16), rounding to nearest even."""
    u = a.view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def as_float(cp, y, dtype: str):  # type: ignore[no-untyped-def]
    """A GPU result as float32 (bfloat16 bit patterns widened)."""
    if y.dtype == cp.uint16:  # bfloat16 bit patterns
        return (y.astype(cp.uint32) << 16).view(cp.float32)
    return y.astype(cp.float32)


def measure(cp, kind: str, n: int, dtype: str, arrays, ref, reps: int):  # type: ignore[no-untyped-def]
    """Build, run, check and time one of our kernels on ``arrays`` = (X, W, Y)."""
    from vta.gpu.runtime import GpuKernel

    x, w, y = arrays
    kernel = build(kind, n, dtype)
    run = GpuKernel(kernel)
    if kind in WGMMA_KNOBS:  # the tensor maps of X and W travel as a fifth array
        y = cp.zeros(y.shape, np.dtype(out_dtype(kind, dtype)))
        maps = cp.asarray(encode_tensor_maps(wgmma_func(kind, n, dtype).attr(TENSOR_MAPS),
                                             [x.data.ptr, w.data.ptr]))
        ours = lambda: run(x, w, y, maps)  # noqa: E731
    else:
        ours = lambda: run(x, w, y)  # noqa: E731
    y.fill(0)
    ours()
    if dtype == "int8":
        ok = bool(cp.array_equal(y, ref))
    else:
        ok = bool(cp.allclose(as_float(cp, y, dtype), as_float(cp, ref, dtype),
                              rtol=2e-2, atol=0.5))
    t = time_ms(cp, ours, reps=reps)
    return {"dtype": dtype, "n": n, "kernel": kind, "ours_ms": t,
            "ours_tflops": 2.0 * n ** 3 / t / 1e9, "correct": ok, "name": kernel.name,
            "grid": kernel.grid, "block": kernel.block, "dynamic_shared": kernel.dynamic_shared}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--dtypes", nargs="+", default=["float16", "bfloat16", "int8"])
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS), choices=list(KERNELS))
    args = ap.parse_args()
    cp = cupy_or_exit()
    if str(cp.cuda.Device().compute_capability) != "90":  # wgmma and TMA are sm_90a's
        args.kernels = [k for k in args.kernels if k not in WGMMA_KNOBS]
    sms = int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])
    for kind, kb in WGMMA_KNOBS.items():  # a persistent kernel launches a block an SM
        if kb.persistent:
            WGMMA_KNOBS[kind] = dataclasses.replace(kb, persistent=sms - sms % kb.cluster)

    from vta.gpu.runtime import gpu_name, precompile

    gpu = gpu_name()
    before = device_info(cp)
    # every kernel compiled up front, in parallel (nvcc takes seconds a kernel)
    precompile([build(kind, n, dt) for dt in args.dtypes for n in args.sizes
                for kind in args.kernels if dt in KERNELS[kind]])
    rows, table = [], []
    for dtype in args.dtypes:
        for n in args.sizes:
            x, w, y = operands(cp, dtype, n)
            try:
                if dtype == "int8":
                    lib, lib_name = int8_gemm_baseline(cp, x, w)
                else:
                    lib, lib_name = float_gemm_baseline(cp, x, w, dtype)
                ref = lib().copy()
            except Exception as e:  # e.g. a cuBLAS without this type: say so, go on
                err = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                rows.append({"dtype": dtype, "n": n, "kernel": "cuBLAS", "correct": False,
                             "error": err})
                table.append([dtype, n, "cuBLAS", "", "", "", "", "", err[:60]])
                continue
            t_lib = time_ms(cp, lib, reps=args.reps)
            flops = 2.0 * n ** 3
            table.append([dtype, n, "cuBLAS", "", f"{t_lib:.3f}", "", f"{flops / t_lib / 1e9:.1f}",
                          "", ""])
            for kind in args.kernels:
                if dtype not in KERNELS[kind]:
                    continue
                try:
                    r = measure(cp, kind, n, dtype, (x, w, y), ref, args.reps)
                except Exception as e:  # one kernel's failure is a row, not the end of the run
                    r = {"dtype": dtype, "n": n, "kernel": kind, "correct": False,
                         "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"}
                    rows.append(r)
                    table.append([dtype, n, kind, "", "", "", "", "", r["error"][:60]])
                    continue
                r.update(lib_ms=t_lib, lib_tflops=flops / t_lib / 1e9, ratio=t_lib / r["ours_ms"],
                         baseline=lib_name)
                rows.append(r)
                table.append([dtype, n, kind, f"{r['ours_ms']:.3f}", f"{t_lib:.3f}",
                              f"{r['ours_tflops']:.1f}", f"{r['lib_tflops']:.1f}",
                              f"{r['ratio']:.2f}x", "ok" if r["correct"] else "WRONG"])
    print(f"GEMM on {gpu} (median of {args.reps} event pairs; TFLOP/s or TOP/s)")
    print_table(["dtype", "n", "kernel", "ours ms", "lib ms", "ours T/s", "lib T/s", "vs lib",
                 "check"], table)
    path = write_results("gpu_gemm", gpu, rows, {"reps": args.reps, "device_before": before},
                         cp=cp)
    print(f"wrote {path}")
    if not all(r["correct"] for r in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
