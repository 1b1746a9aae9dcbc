"""Generated tensor-core GEMM kernels vs the library, fp16 and int8.

    python bench/gpu_gemm.py [--sizes 1024 2048 4096 8192] [--reps 20] [--kernels mma wmma]

For each size n, ``Y = X @ W.T`` with X, W of n x n: fp16 in / fp16 out (fp32 accumulation)
against ``cupy.matmul`` (cuBLAS), and int8 in / int32 out against the best int8 GEMM CuPy
reaches (``cublasGemmEx`` with int8 operands; ``_gpu_common.int8_gemm_baseline``). Our kernels:
``mma``, the task-mapping kernel (vta.gpu.kernels.gemm: 128x128 block tiles, 4 warps of 64x64,
a 3-stage cp.async ring, swizzled shared tiles, ldmatrix + mma.sync), and ``wmma``, the
tensor-core schedule (vta.gpu.schedules.matmul_wmma). Times are medians of CUDA-event-timed
runs; the table gives TFLOP/s (TOP/s for int8) and the ratio to the library; results go to
bench/results/gpu_gemm_<gpu>.json. Targets (issue 13): fp16 4096^3 >= 0.8x cuBLAS, int8
4096^3 >= 0.8x the int8 baseline. Without CuPy or a GPU the script says so and exits with
status 2.
"""

from __future__ import annotations

import argparse

import numpy as np
from _gpu_common import (
    cupy_or_exit,
    int8_gemm_baseline,
    print_table,
    time_ms,
    write_results,
)


def build(kind: str, n: int, dtype: str):  # type: ignore[no-untyped-def]
    from vta.compiler.ops.matmul import MatmulSpec
    from vta.gpu.cuda import render_cuda
    from vta.gpu.kernels.gemm import mma_gemm
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.schedules import matmul_wmma

    out_t = "float16" if dtype == "float16" else "int32"
    spec = MatmulSpec(n, n, n)
    if kind == "mma":
        return render_cuda(mma_gemm(spec, dtype, None, out_dtype=out_t))
    return render_cuda(lower_for_gpu(matmul_wmma(spec, dtype, None, out_dtype=out_t)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dtypes", nargs="+", default=["float16", "int8"])
    ap.add_argument("--kernels", nargs="+", default=["mma", "wmma"], choices=["mma", "wmma"])
    args = ap.parse_args()
    cp = cupy_or_exit()

    from vta.gpu.runtime import GpuKernel, gpu_name

    gpu = gpu_name()
    rows, table = [], []
    for dtype in args.dtypes:
        for n in args.sizes:
            rng = np.random.default_rng(0)
            if dtype == "float16":
                x = cp.asarray(rng.standard_normal((n, n)).astype(np.float16))
                w = cp.asarray(rng.standard_normal((n, n)).astype(np.float16))
                y = cp.zeros((n, n), cp.float16)
                lib, lib_name = (lambda: cp.matmul(x, w.T)), "cupy.matmul (cuBLAS)"
            else:
                x = cp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
                w = cp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
                y = cp.zeros((n, n), cp.int32)
                lib, lib_name = int8_gemm_baseline(cp, x, w)
            ref = lib()
            t_lib = time_ms(cp, lib, reps=args.reps)
            flops = 2.0 * n ** 3
            for kind in args.kernels:
                kernel = build(kind, n, dtype)
                run = GpuKernel(kernel)
                ours = lambda: run(x, w, y)  # noqa: E731
                ours()
                if dtype == "float16":
                    ok = bool(cp.allclose(y.astype(cp.float32), ref.astype(cp.float32),
                                          rtol=2e-2, atol=0.5))
                else:
                    ok = bool(cp.array_equal(y, ref))
                t_ours = time_ms(cp, ours, reps=args.reps)
                r = {"dtype": dtype, "n": n, "kernel": kind, "ours_ms": t_ours,
                     "lib_ms": t_lib, "ours_tflops": flops / t_ours / 1e9,
                     "lib_tflops": flops / t_lib / 1e9, "ratio": t_lib / t_ours,
                     "correct": ok, "baseline": lib_name, "name": kernel.name,
                     "grid": kernel.grid, "block": kernel.block,
                     "dynamic_shared": kernel.dynamic_shared}
                rows.append(r)
                table.append([dtype, n, kind, f"{t_ours:.3f}", f"{t_lib:.3f}",
                              f"{r['ours_tflops']:.1f}", f"{r['lib_tflops']:.1f}",
                              f"{r['ratio']:.2f}x", "ok" if ok else "WRONG"])
    print(f"GEMM on {gpu} (median of {args.reps} runs; TFLOP/s or TOP/s)")
    print_table(["dtype", "n", "kernel", "ours ms", "lib ms", "ours T/s", "lib T/s", "vs lib",
                 "check"], table)
    path = write_results("gpu_gemm", gpu, rows, {"reps": args.reps})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
