"""Fused conv2d + requantization (one generated kernel) vs the unfused library sequence,
on ResNet-18's C2..C11 (batch 1, int8).

    python bench/gpu_conv2d.py [--layers C2 C5 ...] [--reps 20]

Ours: the tensor-core implicit-GEMM schedule (vta.gpu.schedules.conv2d_wmma) with the layer's
calibrated epilogue ``int8(clip((acc >> shift) + bias, lo, hi))`` applied in registers before
the only global store. Unfused library sequence (what a framework without fusion runs): im2col
gather, the GEMM (``cupy.matmul`` on int32 operands), then shift, bias add, clip and the int8
cast as separate element-wise kernels (each a full pass over the int32 activations). Both are
checked bit-exact against each other. Results: a table (GOP/s, ratio) and
bench/results/gpu_conv2d_<gpu>.json. Target: fused >= 1.5x unfused. Without CuPy or a GPU the
script says so and exits with status 2.
"""

from __future__ import annotations

import argparse

import numpy as np
from _gpu_common import cupy_or_exit, print_table, time_ms, write_results

from vta.compiler.workloads import RESNET18

LAYERS = [name for name in RESNET18 if name != "C1"]  # C1 (3 input channels) is not a GEMM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=LAYERS)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    cp = cupy_or_exit()

    from vta.compiler.ops.conv2d import Conv2dSpec
    from vta.compiler.ops.epilogue import random_bias
    from vta.compiler.workloads import resolve
    from vta.gpu.cuda import render_cuda
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.runtime import GpuKernel, gpu_name
    from vta.gpu.schedules import conv2d_wmma

    gpu = gpu_name()
    rows, table = [], []
    for layer in args.layers:
        wl = resolve(f"resnet18:{layer}")
        s, epi = wl.spec, wl.epilogue  # the layer's calibrated epilogue: informative outputs
        assert isinstance(s, Conv2dSpec)
        kernel = render_cuda(lower_for_gpu(conv2d_wmma(s, "int8", epi)))
        run = GpuKernel(kernel)
        rng = np.random.default_rng(0)
        x = cp.asarray(rng.integers(-128, 128, (s.n, s.ic, s.h, s.w), dtype=np.int8))
        w = cp.asarray(rng.integers(-128, 128, (s.oc, s.ic * s.kh * s.kw), dtype=np.int8))
        b = cp.asarray(random_bias(epi, s.oc, rng))
        y = cp.zeros((s.n, s.oc, s.oh, s.ow), cp.int8)
        # im2col indices, computed once (not timed)
        xp_shape = (s.n, s.ic, s.h + 2 * s.pad, s.w + 2 * s.pad)
        n_, c_, r_, t_, p_, q_ = np.ix_(range(s.n), range(s.ic), range(s.kh), range(s.kw),
                                        range(s.oh), range(s.ow))
        idx = cp.asarray(np.ravel_multi_index(
            (n_, c_, p_ * s.stride + r_, q_ * s.stride + t_), xp_shape).reshape(
            s.n, s.ic * s.kh * s.kw, s.oh * s.ow))
        wi = w.astype(cp.int32)

        def unfused():  # type: ignore[no-untyped-def]
            xp = cp.pad(x, ((0, 0), (0, 0), (s.pad, s.pad), (s.pad, s.pad)))
            cols = xp.ravel()[idx].astype(cp.int32)              # im2col
            acc = cp.matmul(wi, cols)                             # GEMM (n, oc, oh*ow)
            acc = acc >> epi.shift                                # requant: shift
            acc = acc + b[None, :, None]                          # bias
            acc = cp.clip(acc, epi.clip_lo, epi.clip_hi)          # clip
            return acc.astype(cp.int8).reshape(s.n, s.oc, s.oh, s.ow)  # cast

        fused = lambda: run(x, w, b, y)  # noqa: E731
        fused()
        ok = bool(cp.array_equal(y, unfused()))
        t_f = time_ms(cp, fused, reps=args.reps)
        t_u = time_ms(cp, unfused, reps=args.reps)
        r = {"layer": layer, "shape": s.describe(), "fused_ms": t_f, "unfused_ms": t_u,
             "fused_gops": s.ops / t_f / 1e6, "unfused_gops": s.ops / t_u / 1e6,
             "speedup": t_u / t_f, "correct": ok, "grid": kernel.grid, "block": kernel.block}
        rows.append(r)
        table.append([layer, f"{t_f:.3f}", f"{t_u:.3f}", f"{r['fused_gops']:.0f}",
                      f"{r['unfused_gops']:.0f}", f"{r['speedup']:.2f}x", "ok" if ok else "WRONG"])
    print(f"ResNet-18 conv2d + requant, int8, on {gpu} (median of {args.reps} runs)")
    print_table(["layer", "fused ms", "unfused ms", "fused GOP/s", "unfused GOP/s", "speedup",
                 "check"], table)
    baseline = "im2col + cupy.matmul + elementwise shift/bias/clip/cast"
    path = write_results("gpu_conv2d", gpu, rows, {"reps": args.reps, "baseline": baseline})
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
