"""Fused conv2d + requantization (one generated kernel) vs the unfused library sequence, the
same-shape cuBLAS GEMM and cuDNN, on ResNet-18's C2..C11 (batch 1, int8).

    python bench/gpu_conv2d.py [--layers C2 C5 ...] [--launches 100] [--rounds 5]
                               [--kernels mma nhwc wmma]

Ours (``--kernels``), each with the layer's calibrated epilogue ``int8(clip((acc >> shift) +
bias, lo, hi))`` applied in registers before the only global store: ``nhwc``, the
channels-last task-mapping implicit GEMM (vta.gpu.kernels.conv2d ``layout="NHWC"``: one
16-byte cp.async per pixel-tap chunk into a swizzled ring, ldmatrix + mma.sync, OHWI weights;
what ``vta run resnet18 --target cuda`` runs); ``mma``, the NCHW task-mapping kernel (input
patch per channel block, per-tap expansion); ``wmma``, the tensor-core schedule
(vta.gpu.schedules.conv2d_wmma).

Baselines:
- unfused library sequence (what a framework without fusion runs): im2col gather, the best
  library int8 GEMM reachable (``_gpu_common.int8_gemm_baseline``: cuBLASLt IMMA through
  ``torch._int_mm`` where PyTorch with CUDA is installed, else cuBLAS ``cublasGemmEx`` on
  int8), then shift, bias add, clip and the int8 cast as separate kernels;
- the same-shape cuBLAS GEMM alone (the im2col'd problem: (OC, IC*KH*KW) x (IC*KH*KW, P)),
  no im2col and no epilogue - the library's tensor-core work for this layer;
- cuDNN's convolution (``cupyx.cudnn.convolution_forward``, NCHW) in float16 and int8 where
  this CuPy/cuDNN exposes it; where not, the row names the reason.
Every time is per call: ``--launches`` calls between one pair of CUDA events (host dispatch
overlapped, as in a stream) and, where capture works, a CUDA graph of the same calls (no host
dispatch at all); the table takes the graph's figure when there is one. Our kernels are checked
bit-exact against the unfused sequence (cuDNN's outputs, without requantization, are not
compared). Results:
a table and bench/results/gpu_conv2d_<gpu>.json. Target: fused >= 1.5x unfused. Without
CuPy or a GPU the script says so and exits with status 2.
"""

from __future__ import annotations

import argparse

import numpy as np
from _gpu_common import (
    cupy_or_exit,
    int8_gemm_baseline,
    print_table,
    time_ms,
    time_ms_graph,
    write_results,
)

from vta.compiler.ops.workloads import RESNET18

LAYERS = [name for name in RESNET18 if name != "C1"]  # C1 (3 input channels) is not a GEMM


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", nargs="+", default=LAYERS)
    ap.add_argument("--launches", type=int, default=100,
                    help="calls per CUDA event pair / per CUDA graph")
    ap.add_argument("--rounds", type=int, default=5, help="event pairs / graph launches")
    ap.add_argument("--kernels", nargs="+", default=["nhwc", "mma", "wmma"],
                    choices=["nhwc", "mma", "wmma"])
    args = ap.parse_args()
    cp = cupy_or_exit()

    def timed(fn, capturable=True):  # type: ignore[no-untyped-def]
        """(ms per call, how): the CUDA graph's figure where capture works, else batched.
        Calls through PyTorch are not captured (they launch on PyTorch's stream, outside
        CuPy's capture, so the graph would time less than the call)."""
        batched = time_ms(cp, fn, reps=args.rounds, launches=args.launches)
        if not capturable:
            return batched, f"{args.launches} launches per event pair (PyTorch: not captured)"
        graph, why = time_ms_graph(cp, fn, args.launches, args.rounds)
        if graph is not None:
            return graph, f"CUDA graph of {args.launches} (batched events: {batched:.4f} ms)"
        return batched, f"{args.launches} launches per event pair ({why})"

    from vta.compiler.ops.conv2d import Conv2dSpec
    from vta.compiler.ops.epilogue import random_bias
    from vta.compiler.ops.workloads import resolve
    from vta.gpu.cuda import render_cuda
    from vta.gpu.kernels.conv2d import mma_conv2d
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.runtime import GpuKernel, gpu_name, precompile
    from vta.gpu.schedules import conv2d_wmma

    def render(kind: str, s, epi):  # type: ignore[no-untyped-def]
        if kind == "nhwc":
            return render_cuda(mma_conv2d(s, "int8", epi, layout="NHWC"))
        if kind == "mma":
            return render_cuda(mma_conv2d(s, "int8", epi))
        return render_cuda(lower_for_gpu(conv2d_wmma(s, "int8", epi)))

    gpu = gpu_name()
    # every kernel compiled up front, in parallel (nvcc takes seconds a kernel)
    precompile([render(k, resolve(f"resnet18:{ly}").spec, resolve(f"resnet18:{ly}").epilogue)
                for ly in args.layers for k in args.kernels])
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
        capturable = not gemm_name.startswith("torch")
        t_u, how_u = timed(unfused, capturable)
        t_g, how_g = timed(gemm, capturable)
        base = {"layer": layer, "shape": s.describe(), "gemm": gemm_name, "unfused_ms": t_u,
                "unfused_timing": how_u, "cublas_gemm_ms": t_g, "cublas_gemm_timing": how_g}
        libs = _cudnn(cp, s, x, w_oihw, want)
        for name, (t_l, note) in libs.items():
            base[f"{name}_ms"], base[f"{name}_note"] = t_l, note
        for kind in args.kernels:
            kernel = render(kind, s, epi)
            if kind == "nhwc":
                weight, xin = w_ohwi, cp.ascontiguousarray(x.transpose(0, 2, 3, 1))
                y = cp.zeros((s.n * s.oh * s.ow, s.oc), cp.int8)
            elif kind == "mma":
                weight, xin = w_ohwi, x
                y = cp.zeros((s.n, s.oc, s.oh, s.ow), cp.int8)
            else:
                weight, xin = w, x
                y = cp.zeros((s.n, s.oc, s.oh, s.ow), cp.int8)
            try:
                run = GpuKernel(kernel)
            except Exception as e:  # one kernel's failure is a row, not the end of the run
                err = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                rows.append({**base, "kernel": kind, "correct": False, "error": err})
                table.append([layer, kind, "", "", "", "", "", "", "", err[:50]])
                continue
            fused = lambda run=run, xin=xin, weight=weight, y=y: run(xin, weight, b, y)  # noqa: E731
            fused()
            got = y.reshape(s.n, s.oh, s.ow, s.oc).transpose(0, 3, 1, 2) if kind == "nhwc" \
                else y
            ok = bool(cp.array_equal(got, want))
            t_f, how_f = timed(fused)
            r = {**base, "kernel": kind, "fused_ms": t_f, "fused_timing": how_f,
                 "fused_gops": s.ops / t_f / 1e6, "unfused_gops": s.ops / t_u / 1e6,
                 "speedup": t_u / t_f, "of_cublas_gemm": t_g / t_f, "correct": ok,
                 "grid": kernel.grid, "block": kernel.block,
                 "dynamic_shared": kernel.dynamic_shared}
            rows.append(r)
            lib = "  ".join(f"{n}={t:.4f}" if t is not None else f"{n}=n/a"
                            for n, (t, _) in libs.items())
            table.append([layer, kind, f"{t_f:.4f}", f"{t_u:.4f}", f"{t_g:.4f}", lib,
                          f"{r['fused_gops']:.0f}", f"{r['speedup']:.2f}x",
                          f"{r['of_cublas_gemm']:.2f}x", "ok" if ok else "WRONG"])
    print(f"ResNet-18 conv2d + requant, int8, batch 1, on {gpu} (ms per call: "
          f"{args.launches} calls per CUDA graph or event pair, median of {args.rounds})")
    print_table(["layer", "kernel", "fused ms", "unfused ms", "cuBLAS GEMM ms", "cuDNN ms",
                 "fused GOP/s", "vs unfused", "vs GEMM", "check"], table)
    for row in rows[:1]:
        for name in ("cudnn_fp16", "cudnn_int8"):
            print(f"{name}: {row.get(name + '_note')}")
    baseline = ("im2col (cupy.take) + int8_gemm_baseline + elementwise shift/bias/clip/cast; "
                "the same-shape int8_gemm_baseline alone; cupyx.cudnn.convolution_forward "
                "fp16/int8")
    path = write_results("gpu_conv2d", gpu, rows, {"launches": args.launches,
                                                   "rounds": args.rounds,
                                                   "baseline": baseline}, cp)
    print(f"wrote {path}")


def _cudnn(cp, s, x, w_oihw, want):  # type: ignore[no-untyped-def]
    """cuDNN's convolution of the layer (no epilogue: a lower bound on a library conv plus
    requantization) in float16 and int8: name -> (ms per call or None, what ran or why not).
    Neither output is compared (cuDNN's has no requantization to match ``want``)."""
    out = {}
    try:
        from cupyx import cudnn as xcudnn  # type: ignore[import-not-found]
    except Exception as e:  # CuPy without cuDNN (CuPy 14 dropped it): PyTorch's, if any
        why = f"cupyx.cudnn unavailable: {type(e).__name__}: {e}"
        return {"cudnn_fp16": _torch_cudnn_fp16(cp, s, x, w_oihw, why),
                "cudnn_int8": (None, why + "; PyTorch exposes no int8 cuDNN convolution")}
    import numpy as np

    for name, dt in (("cudnn_fp16", cp.float16), ("cudnn_int8", cp.int8)):
        try:
            xd = x.astype(dt)
            wd = cp.asarray(w_oihw).astype(dt)
            yd = cp.zeros((s.n, s.oc, s.oh, s.ow), cp.float32 if dt == cp.int8 else dt)

            def conv(xd=xd, wd=wd, yd=yd):  # type: ignore[no-untyped-def]
                xcudnn.convolution_forward(xd, wd, None, yd, (s.pad, s.pad),
                                           (s.stride, s.stride), (1, 1), 1, auto_tune=True,
                                           tensor_core="always")

            conv()
            cp.cuda.runtime.deviceSynchronize()
            from _gpu_common import time_ms

            out[name] = (time_ms(cp, conv, launches=100), f"cupyx.cudnn.convolution_forward "
                         f"{np.dtype(dt).name} NCHW, tensor_core=always, auto_tune")
        except Exception as e:  # this cuDNN/CuPy refuses the data type or layout
            out[name] = (None, f"cupyx.cudnn.convolution_forward {np.dtype(dt).name} refused: "
                         f"{type(e).__name__}: {str(e)[:160]}")
    return out


def _torch_cudnn_fp16(cp, s, x, w_oihw, why):  # type: ignore[no-untyped-def]
    """cuDNN's fp16 convolution through PyTorch (``torch.nn.functional.conv2d``, channels-last,
    cudnn.benchmark on), on the same data shared by DLPack: (ms per call or None, what ran or
    why not). Timed with 100 launches per event pair (not captured: PyTorch's stream)."""
    try:
        import torch
        import torch.nn.functional as F

        if not torch.cuda.is_available():
            raise RuntimeError("PyTorch has no CUDA device")
        torch.backends.cudnn.benchmark = True
        xt = torch.from_dlpack(x).half().contiguous(memory_format=torch.channels_last)
        wt = torch.from_dlpack(cp.asarray(w_oihw)).half().contiguous(
            memory_format=torch.channels_last)

        def conv():  # type: ignore[no-untyped-def]
            return F.conv2d(xt, wt, None, s.stride, s.pad)

        for _ in range(3):  # cudnn.benchmark picks its algorithm on the first calls
            conv()
        torch.cuda.synchronize()
        from _gpu_common import time_ms

        return (time_ms(cp, conv, launches=100),
                f"torch.nn.functional.conv2d fp16 NHWC (cuDNN {torch.backends.cudnn.version()}, "
                f"benchmark=True; {why})")
    except Exception as e:
        return (None, f"{why}; torch cuDNN fp16 refused: {type(e).__name__}: {str(e)[:160]}")


if __name__ == "__main__":
    main()
