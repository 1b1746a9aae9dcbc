"""Fused conv2d + requantization (one generated kernel) vs the unfused library sequence,
on ResNet-18's C2..C11 (batch 1, int8).

    python bench/gpu_conv2d.py [--layers C2 C5 ...] [--reps 20] [--kernels mma wmma]

Ours (``--kernels``): ``mma``, the task-mapping implicit GEMM (vta.gpu.kernels.conv2d: input
patch per channel block through cp.async, per-tap expansion into a swizzled A tile, ldmatrix +
mma.sync, OHWI weights), and ``wmma``, the tensor-core schedule (vta.gpu.schedules.conv2d_wmma),
each with the layer's calibrated epilogue ``int8(clip((acc >> shift) + bias, lo, hi))``
applied in registers before the only global store. Unfused library sequence (what a
framework without fusion runs): im2col gather, the best int8 GEMM CuPy reaches
(``_gpu_common.int8_gemm_baseline``: cuBLAS ``cublasGemmEx`` on int8), then shift, bias
add, clip and the int8 cast as separate kernels (each a full pass over the int32
activations). All are checked bit-exact against each other. Results: a table (GOP/s, ratio)
and bench/results/gpu_conv2d_<gpu>.json. Target: fused >= 1.5x unfused. Without CuPy or a
GPU the script says so and exits with status 2.
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

from vta.compiler.ops.workloads import RESNET18

LAYERS = [name for name in RESNET18 if name != "C1"]  # C1 (3 input channels) is not a GEMM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=LAYERS)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--kernels", nargs="+", default=["mma", "wmma"], choices=["mma", "wmma"])
    args = ap.parse_args()
    cp = cupy_or_exit()

    from vta.compiler.ops.conv2d import Conv2dSpec
    from vta.compiler.ops.epilogue import random_bias
    from vta.compiler.ops.workloads import resolve
    from vta.gpu.cuda import render_cuda
    from vta.gpu.kernels.conv2d import mma_conv2d
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.runtime import GpuKernel, gpu_name
    from vta.gpu.schedules import conv2d_wmma

    gpu = gpu_name()
    rows, table = [], []
    for layer in args.layers:
        wl = resolve(f"resnet18:{layer}")
        s, epi = wl.spec, wl.epilogue  # the layer's calibrated epilogue: informative outputs
        assert isinstance(s, Conv2dSpec)
        rng = np.random.default_rng(0)
        x = cp.asarray(rng.integers(-128, 128, (s.n, s.ic, s.h, s.w), dtype=np.int8))
        w_oihw = rng.integers(-128, 128, (s.oc, s.ic, s.kh, s.kw), dtype=np.int8)
        w = cp.asarray(w_oihw.reshape(s.oc, -1))                  # (OC, IC*KH*KW)
        w_ohwi = cp.asarray(w_oihw.transpose(0, 2, 3, 1).reshape(s.oc, -1))
        b = cp.asarray(random_bias(epi, s.oc, rng))
        # im2col indices, computed once (not timed): column j of pixel p, (P, IC*KH*KW)
        assert s.n == 1, "the unfused baseline is written for batch 1 (ResNet-18's layers)"
        xp_shape = (s.n, s.ic, s.h + 2 * s.pad, s.w + 2 * s.pad)
        c_, r_, t_, p_, q_ = np.ix_(range(s.ic), range(s.kh), range(s.kw), range(s.oh),
                                    range(s.ow))
        idx = np.ravel_multi_index((np.zeros_like(c_), c_, p_ * s.stride + r_,
                                    q_ * s.stride + t_), xp_shape)
        idx_t = cp.asarray(idx.reshape(s.ic * s.kh * s.kw, s.oh * s.ow).T.copy())
        cols_t = cp.empty((s.oh * s.ow, s.ic * s.kh * s.kw), cp.int8)
        gemm, gemm_name = int8_gemm_baseline(cp, w, cols_t)   # (OC, P) int32

        def unfused():  # type: ignore[no-untyped-def]
            xp = cp.pad(x, ((0, 0), (0, 0), (s.pad, s.pad), (s.pad, s.pad)))
            cp.take(xp.ravel(), idx_t, out=cols_t)                # im2col
            acc = gemm()                                          # GEMM
            acc = acc >> epi.shift                                # requant: shift
            acc = acc + b[:, None]                                # bias
            acc = cp.clip(acc, epi.clip_lo, epi.clip_hi)          # clip
            return acc.astype(cp.int8).reshape(s.n, s.oc, s.oh, s.ow)  # cast

        want = unfused()
        t_u = time_ms(cp, unfused, reps=args.reps)
        for kind in args.kernels:
            if kind == "mma":
                kernel = render_cuda(mma_conv2d(s, "int8", epi))
                weight = w_ohwi
            else:
                kernel = render_cuda(lower_for_gpu(conv2d_wmma(s, "int8", epi)))
                weight = w
            run = GpuKernel(kernel)
            y = cp.zeros((s.n, s.oc, s.oh, s.ow), cp.int8)
            fused = lambda: run(x, weight, b, y)  # noqa: E731
            fused()
            ok = bool(cp.array_equal(y, want))
            t_f = time_ms(cp, fused, reps=args.reps)
            r = {"layer": layer, "kernel": kind, "gemm": gemm_name, "shape": s.describe(),
                 "fused_ms": t_f,
                 "unfused_ms": t_u, "fused_gops": s.ops / t_f / 1e6,
                 "unfused_gops": s.ops / t_u / 1e6, "speedup": t_u / t_f, "correct": ok,
                 "grid": kernel.grid, "block": kernel.block,
                 "dynamic_shared": kernel.dynamic_shared}
            rows.append(r)
            table.append([layer, kind, f"{t_f:.3f}", f"{t_u:.3f}", f"{r['fused_gops']:.0f}",
                          f"{r['unfused_gops']:.0f}", f"{r['speedup']:.2f}x",
                          "ok" if ok else "WRONG"])
    print(f"ResNet-18 conv2d + requant, int8, on {gpu} (median of {args.reps} runs)")
    print_table(["layer", "kernel", "fused ms", "unfused ms", "fused GOP/s", "unfused GOP/s",
                 "speedup", "check"], table)
    baseline = "im2col + cupy.matmul + elementwise shift/bias/clip/cast"
    path = write_results("gpu_conv2d", gpu, rows, {"reps": args.reps, "baseline": baseline})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
