"""Self-check and timing of the sm_90a GEMM (TMA + mbarrier ring + wgmma) on a Hopper GPU.

    python bench/gpu_wgmma_check.py [--sizes 256 512 1024 2048 4096] [--pairs 5]
                                    [--launches 100] [--out DIR] [--variants ...]

For each size n (Y = X @ W.T, X and W n x n) and variant, builds
``vta.gpu.kernels.wgmma_gemm`` and compiles it for sm_90a through ``vta.gpu.runtime`` (nvcc's
cubin for the device's architecture where nvcc is installed, NVRTC ``-arch=sm_90a``
otherwise), recording ptxas's registers and spills (``vta.gpu.nvcc.kernel_resources``, and
whether ``check_resources`` refuses the kernel), makes the two tensor maps with the driver, runs it
once and checks it: int8 bit-exact against numpy (exact float64 BLAS; the requantizing
epilogue through ``apply_epilogue``), fp16/bf16 against a float64 ``cupy.matmul`` within the
fp32 accumulation bound (``(k/16 + 1) 2^-23 |X| |W|^T``, plus half an fp16 ulp for fp16
outputs). Only a correct kernel is timed (``_gpu_common.time_ms``: CUDA events around
``--launches`` back-to-back launches, median of ``--pairs`` event pairs) beside the library on
the same data: ``cublasGemmEx`` fp16 -> fp16 and fp16/bf16 -> fp32 (fp32 accumulation), and
for int8 ``_gpu_common.int8_gemm_baseline`` (cuBLASLt IMMA through ``torch._int_mm`` where
PyTorch is installed, else ``cublasGemmEx``); the int8 -> int8 requantizing kernel is compared
with that int8 -> int32 GEMM.

Prints a table (TFLOP/s or TOP/s, ratio to the library) and writes
``<out>/gpu_wgmma_<gpu>.json`` (default bench/results) with the device, clocks, compiler
report and every row, failures included with their message. Needs numpy, cupy and pyyaml
(islpy is not imported on this path); without CuPy or a GPU it says so and exits with status
2; with any wrong result it exits with status 1.
"""

from __future__ import annotations

import argparse
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the repository's vta

from _gpu_common import (
    cupy_or_exit,
    device_info,
    float_gemm_baseline,
    int8_gemm_baseline,
    print_table,
    time_ms,
    write_results,
)

from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import KernelResourceError, VtaError
from vta.gpu.cuda import CudaKernel, render_cuda
from vta.gpu.hopper import TENSOR_MAPS, encode_tensor_maps
from vta.gpu.kernels.wgmma_gemm import SM90, WgmmaKnobs, wgmma_gemm
from vta.gpu.nvcc import check_resources, find_nvcc, kernel_resources
from vta.gpu.runtime import GpuKernel

#: the requantizing epilogue of the int8 -> int8 variant (fixed point, with bias)
EPI = Epilogue(14, True, -128, 127, kind="fixed_point", mult=11585)


@dataclass(frozen=True)
class Variant:
    """One kernel configuration: operand dtype, output dtype, epilogue, tiles."""

    name: str
    dtype: str
    out: str
    epi: Epilogue | None
    knobs: WgmmaKnobs


VARIANTS = {
    "fp16-fp16": Variant("fp16-fp16", "float16", "float16", None, WgmmaKnobs(2, 128, 4)),
    "fp16-fp16-n256": Variant("fp16-fp16-n256", "float16", "float16", None,
                              WgmmaKnobs(2, 256, 4)),
    # 3 stages: 98 KiB of shared memory, two blocks an SM (one block's TMA waits overlap the
    # other's wgmma: what warp specialisation buys within one block)
    "fp16-fp16-s3": Variant("fp16-fp16-s3", "float16", "float16", None, WgmmaKnobs(2, 128, 3)),
    "fp16-fp32": Variant("fp16-fp32", "float16", "float32", None, WgmmaKnobs(2, 128, 4)),
    "bf16-fp32": Variant("bf16-fp32", "bfloat16", "float32", None, WgmmaKnobs(2, 128, 4)),
    "int8-int32": Variant("int8-int32", "int8", "int32", None, WgmmaKnobs(2, 128, 4)),
    "int8-int8": Variant("int8-int8", "int8", "int8", EPI, WgmmaKnobs(2, 128, 4)),
    # warp-specialised (a producer warpgroup, setmaxnreg), persistent over 132 blocks
    "ws-fp16-fp16": Variant("ws-fp16-fp16", "float16", "float16", None,
                            WgmmaKnobs(2, 256, 4, producer=True, persistent=132)),
    "ws-bf16-fp32": Variant("ws-bf16-fp32", "bfloat16", "float32", None,
                            WgmmaKnobs(2, 256, 4, producer=True, persistent=132)),
    "ws-int8-int8": Variant("ws-int8-int8", "int8", "int8", EPI,
                            WgmmaKnobs(2, 128, 7, producer=True, persistent=132)),
    # clusters of two blocks sharing the B tile through TMA multicast
    "ws-c2-fp16-fp16": Variant("ws-c2-fp16-fp16", "float16", "float16", None,
                               WgmmaKnobs(2, 256, 4, producer=True, persistent=132,
                                          cluster=2)),
    "ws-c2-int8-int8": Variant("ws-c2-int8-int8", "int8", "int8", EPI,
                               WgmmaKnobs(2, 256, 4, producer=True, persistent=132,
                                          cluster=2)),
}


# ---------------------------------------------------------------------------- compiling


def ptxas_report(k: CudaKernel) -> dict[str, Any]:
    """ptxas's registers and spills for ``k`` on sm_90a (``vta.gpu.nvcc.kernel_resources``),
    and whether ``check_resources`` refuses it; ``compiler: nvrtc`` without nvcc."""
    if find_nvcc() is None:
        return {"compiler": "nvrtc"}
    res = kernel_resources(k.source, SM90.arch)[k.name]
    try:
        check_resources(res, k.launch.threads_per_block, k.dynamic_shared, SM90)
        refused = ""
    except KernelResourceError as e:
        refused = str(e)
    return {"compiler": "nvcc", "registers": res.registers, "spill_stores": res.spill_stores,
            "spill_loads": res.spill_loads, "refused": refused}


def compile_kernel(cp: Any, k: CudaKernel) -> tuple[Any, dict[str, Any]]:
    """(the CuPy function, the compiler's report) for sm_90a, through ``vta.gpu.runtime``
    (nvcc's cubin for the device's architecture, NVRTC where no nvcc is installed)."""
    report = ptxas_report(k)
    fn = GpuKernel(k).fn
    report["registers_attr"] = getattr(fn, "num_regs", None)
    return fn, report


# ---------------------------------------------------------------------------- data, checks


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest even), as int16 bit patterns."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).view(np.int16)


def bf16_values(b: np.ndarray) -> np.ndarray:
    return (b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def operands(v: Variant, n: int, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(X, W as the kernel takes them, X, W as float64 values)."""
    if v.dtype == "int8":
        x = rng.integers(-128, 128, (n, n), dtype=np.int8)
        w = rng.integers(-128, 128, (n, n), dtype=np.int8)
        return x, w, x.astype(np.float64), w.astype(np.float64)
    xf, wf = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    if v.dtype == "bfloat16":
        x, w = bf16_bits(xf), bf16_bits(wf)
        return x, w, bf16_values(x).astype(np.float64), bf16_values(w).astype(np.float64)
    x, w = xf.astype(np.float16), wf.astype(np.float16)
    return x, w, x.astype(np.float64), w.astype(np.float64)


def check(cp: Any, v: Variant, y: Any, xv: np.ndarray, wv: np.ndarray,
          bias: np.ndarray | None) -> tuple[bool, str]:
    """Whether the kernel's ``y`` is right, and how far off it is."""
    n = xv.shape[0]
    if v.dtype == "int8":
        acc = (xv @ wv.T).astype(np.int64).astype(np.int32)  # exact: |sums| < 2^53
        want = apply_epilogue(acc, bias, v.epi, 1) if v.epi is not None else acc
        got = cp.asnumpy(y)
        bad = int(np.count_nonzero(got != want))
        return bad == 0, f"{bad} of {got.size} differ" if bad else "bit-exact"
    xd, wd = cp.asarray(xv), cp.asarray(wv)
    want = cp.matmul(xd, wd.T)
    bound = (n // 16 + 1) * 2.0 ** -23 * cp.matmul(cp.abs(xd), cp.abs(wd).T)
    if v.out == "float16":
        bound = bound + cp.abs(want) * 2.0 ** -11 + 2.0 ** -24
    err = cp.abs(y.astype(cp.float64) - want)
    worst = float(cp.max(err / bound))
    return worst <= 1.0, f"max |err| / bound = {worst:.3g}"


# ---------------------------------------------------------------------------- timing


def gemm_ex(cp: Any, x: Any, w: Any, in_type: int, y: Any, out_type: int) -> Callable[[], Any]:
    """cuBLAS ``cublasGemmEx`` ``y = x @ w.T`` with fp32 compute (the "TN" layout)."""
    from cupy_backends.cuda.libs import cublas

    m, k = x.shape
    n = w.shape[0]
    handle = cp.cuda.device.get_cublas_handle()
    one, zero = np.ones(1, np.float32), np.zeros(1, np.float32)
    compute = getattr(cublas, "CUBLAS_COMPUTE_32F", 68)  # cublas_api.h

    def run() -> Any:
        cublas.gemmEx(handle, cublas.CUBLAS_OP_T, cublas.CUBLAS_OP_N, n, m, k,
                      one.ctypes.data, w.data.ptr, in_type, k, x.data.ptr, in_type, k,
                      zero.ctypes.data, y.data.ptr, out_type, n, compute,
                      cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP)
        return y
    return run


def baseline(cp: Any, v: Variant, x: Any, w: Any) -> tuple[Callable[[], Any], str]:
    """The library call this variant is compared with, and its name."""
    rt = cp.cuda.runtime
    if v.dtype == "int8":
        fn, name = int8_gemm_baseline(cp, x, w)
        return fn, name + (" (no fused requantization)" if v.epi is not None else "")
    if v.out == "float16":
        return float_gemm_baseline(cp, x, w, "float16")
    # cudaDataType (library_types.h): CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14
    r16 = getattr(rt, "CUDA_R_16BF", 14) if v.dtype == "bfloat16" else rt.CUDA_R_16F
    y = cp.zeros((x.shape[0], w.shape[0]), cp.float32)
    return gemm_ex(cp, x, w, r16, y, rt.CUDA_R_32F), f"cublasGemmEx {v.dtype} -> fp32"


# ---------------------------------------------------------------------------- one run


def tensor_maps(cp: Any, func: Any, x: Any, w: Any) -> Any:
    """The kernel's ``maps`` argument on the device: X's and W's tensor maps."""
    return cp.asarray(encode_tensor_maps(func.attr(TENSOR_MAPS), [x.data.ptr, w.data.ptr]))


def run_one(cp: Any, v: Variant, n: int, launches: int, pairs: int) -> dict[str, Any]:
    row: dict[str, Any] = {"variant": v.name, "n": n, "knobs": vars(v.knobs).copy()}
    func = wgmma_gemm(MatmulSpec(n, n, n), v.dtype, v.epi, v.knobs, v.out)
    k = render_cuda(func)
    fn, report = compile_kernel(cp, k)
    row.update(report, grid=k.grid, block=k.block, dynamic_shared=k.dynamic_shared)
    rng = np.random.default_rng(n)
    xh, wh, xv, wv = operands(v, n, rng)
    x, w = cp.asarray(xh), cp.asarray(wh)
    bias = rng.integers(-(1 << 12), 1 << 12, n, dtype=np.int32) \
        if v.epi is not None and v.epi.bias else None
    y = cp.zeros((n, n), np.dtype(v.out))
    maps = tensor_maps(cp, func, x, w)
    args = (x, w) + ((cp.asarray(bias),) if bias is not None else ()) + (y, maps)

    def ours() -> None:
        fn(k.grid, k.block, args, shared_mem=k.dynamic_shared)

    ours()
    cp.cuda.runtime.deviceSynchronize()
    ok, how = check(cp, v, y, xv, wv, bias)
    row.update(correct=ok, check=how)
    if not ok:
        return row
    lib, lib_name = baseline(cp, v, x, w)
    lib()
    flops = 2.0 * n ** 3
    t_ours = time_ms(cp, ours, reps=pairs, launches=launches)
    t_lib = time_ms(cp, lib, reps=pairs, launches=launches)
    row.update(ours_ms=t_ours, lib_ms=t_lib, ours_tflops=flops / t_ours / 1e9,
               lib_tflops=flops / t_lib / 1e9, ratio=t_lib / t_ours, baseline=lib_name)
    return row


def dry_run(variants: list[str], sizes: list[int]) -> int:
    """Build and compile every kernel without a GPU (nvcc needed): registers and spills."""
    if find_nvcc() is None:
        print("gpu_wgmma_check: --dry-run needs nvcc on PATH", file=sys.stderr)
        return 2
    table = []
    for name in variants:
        v = VARIANTS[name]
        for n in sorted(sizes):
            try:
                k = render_cuda(wgmma_gemm(MatmulSpec(n, n, n), v.dtype, v.epi, v.knobs, v.out))
                rep = ptxas_report(k)
            except VtaError as e:
                table.append([name, n, "-", "-", "-", "-", str(e).splitlines()[0][:70]])
                continue
            table.append([name, n, rep["registers"], rep["spill_stores"], rep["spill_loads"],
                          k.dynamic_shared, rep["refused"][:70]])
    print_table(["variant", "n", "regs", "spill st", "spill ld", "smem B", "refused"], table)
    return 0 if all(r[3] == 0 and r[4] == 0 and not r[6] for r in table) else 1


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048, 4096])
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    ap.add_argument("--launches", type=int, default=100)
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="results folder (bench/results)")
    ap.add_argument("--dry-run", action="store_true",
                    help="no GPU: build, render and compile every kernel with nvcc, report")
    a = ap.parse_args()
    if a.dry_run:
        return dry_run(a.variants, a.sizes)
    cp = cupy_or_exit()
    info = device_info(cp)
    if info["compute_capability"] != "90":
        print(f"gpu_wgmma_check: {info['name']} is compute capability "
              f"{info['compute_capability']}; wgmma "
              f"needs sm_90a (H100/H200)", file=sys.stderr)
        return 2
    rows, table = [], []
    for name in a.variants:
        v = VARIANTS[name]
        for n in sorted(a.sizes):
            try:
                r = run_one(cp, v, n, a.launches, a.pairs)
            except Exception as e:  # keep going: one run of the script must report everything
                r = {"variant": name, "n": n, "correct": False,
                     "error": f"{type(e).__name__}: {e}",
                     "trace": traceback.format_exc(limit=4)}
                print(f"{name} n={n}: {r['error']}", file=sys.stderr)
            rows.append(r)
            table.append([name, n, r.get("registers", r.get("registers_attr", "")),
                          r.get("spill_stores", ""),
                          f"{r['ours_ms']:.3f}" if "ours_ms" in r else "-",
                          f"{r['lib_ms']:.3f}" if "lib_ms" in r else "-",
                          f"{r['ours_tflops']:.0f}" if "ours_tflops" in r else "-",
                          f"{r['lib_tflops']:.0f}" if "lib_tflops" in r else "-",
                          f"{r['ratio']:.2f}x" if "ratio" in r else "-",
                          r.get("check", r.get("error", ""))[:60]])
            print(" ".join(str(c) for c in table[-1]), flush=True)
    print(f"\nsm_90a wgmma GEMM on {info['name']} ({a.launches} launches per event pair, "
          f"median of {a.pairs}; T/s = TFLOP/s or TOP/s)")
    print_table(["variant", "n", "regs", "spill", "ours ms", "lib ms", "ours T/s", "lib T/s",
                 "vs lib", "check"], table)
    extra = {"device": info, "launches": a.launches, "pairs": a.pairs,
             "command": " ".join(["python", *sys.argv])}
    if a.out is not None:
        import _gpu_common

        _gpu_common.RESULTS = a.out
    path = write_results("gpu_wgmma", info["name"], rows, extra, cp)
    print(f"wrote {path}")
    return 0 if all(r.get("correct") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
