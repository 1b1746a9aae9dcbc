"""Generated tensor-core GEMM kernels vs cuBLAS (``cupy.matmul``), fp16 and int8.

    python bench/gpu_gemm.py [--sizes 1024 2048 4096 8192] [--reps 20]

For each size n, ``Y = X @ W.T`` with X, W of n x n: fp16 in / fp16 out (fp32 accumulation),
and int8 in / int32 out. Our kernel is the default WMMA schedule (vta.gpu.schedules.matmul_wmma:
128x128x32 block tiles staged in shared memory, double-buffered, 8 warps each holding a 64x32
register tile of 4x2 accumulator fragments). Times are medians of CUDA-event-timed runs; the
table gives TFLOP/s (TOP/s for int8) and the ratio to cuBLAS; results go to
bench/results/gpu_gemm_<gpu>.json. Target: >= 0.8x cuBLAS at fp16 4096^3. Without CuPy or a GPU
the script says so and exits with status 2.
"""

from __future__ import annotations

import argparse

import numpy as np
from _gpu_common import cupy_or_exit, print_table, time_ms, write_results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192])
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--dtypes", nargs="+", default=["float16", "int8"])
    args = ap.parse_args()
    cp = cupy_or_exit()

    from vta.compiler.ops.matmul import MatmulSpec
    from vta.gpu.cuda import render_cuda
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.runtime import GpuKernel, gpu_name
    from vta.gpu.schedules import matmul_wmma

    gpu = gpu_name()
    rows, table = [], []
    for dtype in args.dtypes:
        for n in args.sizes:
            out_t = "float16" if dtype == "float16" else "int32"
            kernel = render_cuda(lower_for_gpu(matmul_wmma(MatmulSpec(n, n, n), dtype, None,
                                                           out_dtype=out_t)))
            run = GpuKernel(kernel)
            rng = np.random.default_rng(0)
            if dtype == "float16":
                x = cp.asarray(rng.standard_normal((n, n)).astype(np.float16))
                w = cp.asarray(rng.standard_normal((n, n)).astype(np.float16))
                y = cp.zeros((n, n), cp.float16)
                lib = lambda: cp.matmul(x, w.T)  # noqa: E731 - cuBLAS (tensor cores)
            else:
                x = cp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
                w = cp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8))
                y = cp.zeros((n, n), cp.int32)
                xi, wi = x.astype(cp.int32), w.astype(cp.int32)
                lib = lambda: cp.matmul(xi, wi.T)  # noqa: E731 - CuPy's int32 GEMM
            ours = lambda: run(x, w, y)  # noqa: E731
            ours()
            ref = lib()
            if dtype == "float16":
                ok = bool(cp.allclose(y.astype(cp.float32), ref.astype(cp.float32),
                                      rtol=2e-2, atol=0.5))
            else:
                ok = bool(cp.array_equal(y, ref))
            t_ours = time_ms(cp, ours, reps=args.reps)
            t_lib = time_ms(cp, lib, reps=args.reps)
            flops = 2.0 * n ** 3
            r = {"dtype": dtype, "n": n, "ours_ms": t_ours, "cublas_ms": t_lib,
                 "ours_tflops": flops / t_ours / 1e9, "cublas_tflops": flops / t_lib / 1e9,
                 "ratio": t_lib / t_ours, "correct": ok, "kernel": kernel.name,
                 "grid": kernel.grid, "block": kernel.block}
            rows.append(r)
            table.append([dtype, n, f"{t_ours:.3f}", f"{t_lib:.3f}", f"{r['ours_tflops']:.1f}",
                          f"{r['cublas_tflops']:.1f}", f"{r['ratio']:.2f}x",
                          "ok" if ok else "WRONG"])
    print(f"GEMM on {gpu} (median of {args.reps} runs; TFLOP/s or TOP/s)")
    print_table(["dtype", "n", "ours ms", "lib ms", "ours T/s", "lib T/s", "vs lib", "check"],
                table)
    path = write_results("gpu_gemm", gpu, rows, {"reps": args.reps,
                                                   "baseline": "cupy.matmul (cuBLAS)"})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
