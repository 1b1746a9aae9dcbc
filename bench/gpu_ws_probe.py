"""Knob variants of the sm_90a GEMM against cuBLAS on one Hopper GPU, and what the data and
the output type do to the time.

    python bench/gpu_ws_probe.py [--reps 10] [--quick]

Times, at 4096^3 (and fp16 at 8192^3), the non-warp-specialised ``wgmma256`` kernel and the
warp-specialised one (``WgmmaKnobs(producer=True)``) over its knobs: persistent or a block a
tile, tile-group size, stages, 128x256 / 128x192 / 128x128 tiles, thread-block clusters of two
with B multicast; fp16 with fp16 and with fp32 output; fp16 operands drawn from N(0, 1),
rounded to what a bf16 holds (3 low mantissa bits zero) and all zero (the dynamic-power
question: fewer toggling bits, lower power, fewer clock cuts under the power limit); bf16 and
int8. Each kernel is first checked on ragged shapes against a float64 ``cupy.matmul`` (int8
exact) and each timed result against the library's (int8 exact, floats within fp32
accumulation). Times: ``_gpu_common.time_ms`` (median of ``--reps`` CUDA-event pairs around
100 launches, fewer above 1 ms), beside the mean SM clock and power ``nvidia-smi`` sampled
every 50 ms during that row (the GPU runs at its 700 W limit under these kernels; the order of
rows matters: later rows run hotter). Prints one table; writes
bench/results/gpu_ws_probe_<gpu>.json. Without CuPy or a GPU it says so and exits with status
2; on another compute capability than 9.0 with status 2; with any wrong result with status 1.
"""

from __future__ import annotations

import argparse
import subprocess
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

import numpy as np
from _gpu_common import (
    cupy_or_exit,
    device_info,
    float_gemm_baseline,
    int8_gemm_baseline,
    time_ms,
    write_results,
)

from vta.compiler.ops.matmul import MatmulSpec
from vta.gpu.cuda import CudaKernel, render_cuda
from vta.gpu.hopper import TENSOR_MAPS, encode_tensor_maps
from vta.gpu.kernels.wgmma_gemm import WgmmaKnobs as K
from vta.gpu.kernels.wgmma_gemm import wgmma_gemm

#: one timed row: (label, dtype, n, knobs, output dtype or None for the default, data)
Row = tuple[str, str, int, K, "str | None", str]
#: one ragged correctness check: (dtype, m, n, k, knobs)
Ragged = tuple[str, int, int, int, K]


def plan(sms: int, quick: bool) -> tuple[list[Ragged], list[Row]]:
    """The checks and the timed rows; ``sms``: the device's SM count (persistent blocks)."""
    p, pe = sms, sms - sms % 2
    old, wsp = K(2, 256, 4), K(2, 256, 4, producer=True, persistent=p)
    ragged: list[Ragged] = [
        ("float16", 1000, 1100, 1040, K(2, 256, 4, producer=True, persistent=5)),
        ("int8", 1000, 1100, 1040, K(2, 128, 6, producer=True, persistent=7)),
        ("int8", 333, 520, 4096 + 128, K(2, 256, 4, producer=True)),
        ("int8", 1000, 1100, 1040, K(2, 128, 6, True, 8, 8, 2)),
        ("float16", 1000, 1100, 1040, K(2, 256, 4, True, 0, 8, 2)),
    ]
    f16 = "float16"
    rows: list[Row] = [
        ("old wgmma256 (non-WS)", f16, 4096, old, f16, "normal"),
        ("ws 128x256 s4 grid=tiles g8", f16, 4096, K(2, 256, 4, producer=True), f16, "normal"),
        ("ws 128x256 s4 persistent g8", f16, 4096, wsp, f16, "normal"),
        ("ws 128x256 s4 persistent g16", f16, 4096, K(2, 256, 4, True, p, 16), f16, "normal"),
        (f"ws 128x256 s4 cluster2 p{pe} g8", f16, 4096, K(2, 256, 4, True, pe, 8, 2), f16,
         "normal"),
    ]
    if not quick:
        rows += [
            ("ws 128x256 s4 persistent g4", f16, 4096, K(2, 256, 4, True, p, 4), f16, "normal"),
            ("ws 128x256 s3 persistent g8", f16, 4096, K(2, 256, 3, True, p, 8), f16, "normal"),
            ("ws 128x192 s5 persistent g8", f16, 4096, K(2, 192, 5, True, p, 8), f16, "normal"),
            ("ws 128x128 s7 persistent g8", f16, 4096, K(2, 128, 7, True, p, 8), f16, "normal"),
            ("ws 128x256 s4 cluster2 p128 g8", f16, 4096, K(2, 256, 4, True, 128, 8, 2), f16,
             "normal"),
            ("ws 128x256 s4 cluster2 grid=tiles", f16, 4096, K(2, 256, 4, True, 0, 8, 2), f16,
             "normal"),
        ]
    # the output type and the data (fp16 against bf16)
    rows += [("old wgmma256 -> fp32 out", f16, 4096, old, "float32", "normal"),
             ("ws 128x256 s4 persistent -> fp32", f16, 4096, wsp, "float32", "normal")]
    for kind in ("bf16exact", "zeros"):
        rows += [("old wgmma256 (non-WS)", f16, 4096, old, f16, kind),
                 ("ws 128x256 s4 persistent g8", f16, 4096, wsp, f16, kind)]
    rows += [
        ("old wgmma256 (non-WS) -> fp32", "bfloat16", 4096, old, None, "normal"),
        ("ws 128x256 s4 persistent -> fp32", "bfloat16", 4096, wsp, None, "normal"),
        (f"ws 128x256 s4 cluster2 p{pe} -> fp32", "bfloat16", 4096,
         K(2, 256, 4, True, pe, 8, 2), None, "normal"),
        ("old wgmma256 (non-WS)", "int8", 4096, old, None, "normal"),
        ("ws 128x256 s4 persistent", "int8", 4096, wsp, None, "normal"),
        (f"ws 128x256 s4 cluster2 p{pe}", "int8", 4096, K(2, 256, 4, True, pe, 8, 2), None,
         "normal"),
        ("old wgmma256 (non-WS)", f16, 8192, old, f16, "normal"),
        ("ws 128x256 s4 persistent g16", f16, 8192, K(2, 256, 4, True, p, 16), f16, "normal"),
        (f"ws 128x256 s4 cluster2 p{pe} g8", f16, 8192, K(2, 256, 4, True, pe, 8, 2), f16,
         "normal"),
    ]
    return ragged, rows


class Smi:
    """``nvidia-smi`` sampled every 50 ms in the background: mean SM clock and power of a
    time window."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        self.proc: subprocess.Popen[str] | None
        try:
            self.proc = subprocess.Popen(
                ["nvidia-smi", "--query-gpu=clocks.sm,power.draw",
                 "--format=csv,noheader,nounits", "-lms", "50"],
                stdout=subprocess.PIPE, text=True)
        except OSError:
            self.proc = None
            return
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                clk, watts = (float(v) for v in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.time(), clk, watts))

    def window(self, t0: float, t1: float) -> tuple[float | None, float | None]:
        got = [(c, w) for t, c, w in self.samples if t0 <= t <= t1]
        if not got:
            return None, None
        return float(np.mean([c for c, _ in got])), float(np.mean([w for _, w in got]))

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()


def operands(cp: Any, dtype: str, n: int, kind: str) -> tuple[Any, Any]:
    """Seeded n x n X and W on the GPU: int8 uniform; floats N(0, 1) (``normal``), rounded to
    bf16's 8 significant bits (``bf16exact``) or zeros; bf16 as int16 bit patterns."""
    rng = np.random.default_rng(0)
    if dtype == "int8":
        return (cp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8)),
                cp.asarray(rng.integers(-128, 128, (n, n), dtype=np.int8)))
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    if kind == "bf16exact":
        a, b = ((v.astype(np.float16).view(np.uint16) & np.uint16(0xFFF8)).view(np.float16)
                .astype(np.float32) for v in (a, b))
    elif kind == "zeros":
        a, b = np.zeros_like(a), np.zeros_like(b)
    if dtype == "float16":
        return cp.asarray(a.astype(np.float16)), cp.asarray(b.astype(np.float16))
    u = [v.view(np.uint32).astype(np.uint64) for v in (a, b)]
    x, w = (((t + 0x7FFF + ((t >> 16) & 1)) >> 16).astype(np.uint16).view(np.int16) for t in u)
    return cp.asarray(x), cp.asarray(w)


def as_f32(cp: Any, y: Any) -> Any:
    if y.dtype in (cp.int16, cp.uint16):  # bf16 bit patterns
        return (y.view(cp.uint16).astype(cp.uint32) << 16).view(cp.float32)
    return y.astype(cp.float32)


class Probe:
    def __init__(self, cp: Any, reps: int) -> None:
        self.cp, self.reps = cp, reps
        self.smi = Smi()
        self.rows: list[dict[str, Any]] = []
        self.table: list[str] = []
        self.data: dict[tuple[str, int, str], tuple[Any, Any]] = {}
        self.lib: dict[tuple[str, int, str], tuple[Any, float]] = {}
        self.t0 = time.time()

    def timed(self, fn: Callable[[], Any]) -> tuple[float, float | None, float | None]:
        t0 = time.time()
        t = time_ms(self.cp, fn, reps=self.reps)
        return (t, *self.smi.window(t0, time.time()))

    def line(self, text: str) -> None:
        self.table.append(text)
        print(f"{text} [{time.time() - self.t0:.0f}s]", flush=True)

    def kernel(self, func: Any, x: Any, w: Any, y: Any) -> tuple[Callable[[], Any], CudaKernel]:
        from vta.gpu.runtime import GpuKernel

        k = render_cuda(func)
        run = GpuKernel(k)
        maps = self.cp.asarray(encode_tensor_maps(func.attr(TENSOR_MAPS),
                                                  [x.data.ptr, w.data.ptr]))
        return (lambda: run(x, w, y, maps)), k

    def library(self, dtype: str, n: int, kind: str) -> tuple[Any, float]:
        key = (dtype, n, kind)
        if key not in self.lib:
            x, w = self.data[key]
            fn, name = int8_gemm_baseline(self.cp, x, w) if dtype == "int8" \
                else float_gemm_baseline(self.cp, x, w, dtype)
            ref = fn().copy()
            t, clk, watts = self.timed(fn)
            self.rows.append({"what": "cuBLAS", "dtype": dtype, "n": n, "data": kind, "ms": t,
                              "tflops": 2 * n ** 3 / t / 1e9, "sm_mhz": clk, "watts": watts,
                              "baseline": name})
            self.line(f"{dtype:9s} {n:5d} {kind:9s} {'cuBLAS':36s} {t:8.3f} "
                      f"{2 * n ** 3 / t / 1e9:7.1f}   1.00x  {clk or 0:6.0f} {watts or 0:5.0f}")
            self.lib[key] = (ref, t)
        return self.lib[key]

    def row(self, label: str, dtype: str, n: int, kb: K, out: str | None, kind: str) -> None:
        cp = self.cp
        base: dict[str, Any] = {"what": label, "dtype": dtype, "n": n, "data": kind,
                                "knobs": asdict(kb)}
        try:
            key = (dtype, n, kind)
            if key not in self.data:
                self.data[key] = operands(cp, dtype, n, kind)
            x, w = self.data[key]
            ref, t_lib = self.library(dtype, n, kind)
            func = wgmma_gemm(MatmulSpec(n, n, n), dtype, None, kb, out)
            y = cp.zeros((n, n), np.dtype(func.params[2].dtype))
            call, k = self.kernel(func, x, w, y)
            call()
            cp.cuda.runtime.deviceSynchronize()
            ok = bool(cp.array_equal(y, ref)) if dtype == "int8" else bool(
                cp.allclose(as_f32(cp, y), as_f32(cp, ref), rtol=2e-2, atol=0.5))
            t, clk, watts = self.timed(call)
            row = {**base, "out": str(y.dtype), "ms": t, "tflops": 2 * n ** 3 / t / 1e9,
                   "ratio": t_lib / t, "correct": ok, "sm_mhz": clk, "watts": watts,
                   "grid": k.grid, "block": k.block, "dynamic_shared": k.dynamic_shared}
            self.line(f"{dtype:9s} {n:5d} {kind:9s} {label:36s} {t:8.3f} {row['tflops']:7.1f}"
                      f"  {row['ratio']:5.2f}x  {clk or 0:6.0f} {watts or 0:5.0f}  "
                      f"{'ok' if ok else 'WRONG'}")
        except Exception as e:  # one variant's failure is a row, not the end of the run
            row = {**base, "correct": False, "error": f"{type(e).__name__}: {e}",
                   "trace": traceback.format_exc(limit=4)}
            self.line(f"{dtype:9s} {n:5d} {kind:9s} {label:36s} ERROR {type(e).__name__}: "
                      f"{str(e).splitlines()[0][:80] if str(e) else ''}")
        self.rows.append(row)

    def ragged(self, dtype: str, m: int, n: int, kk: int, kb: K) -> None:
        cp = self.cp
        label = (f"ragged {m}x{n}x{kk} {kb.bn}/{kb.stages}/p{kb.persistent}/c{kb.cluster}")
        try:
            rng = np.random.default_rng(1)
            if dtype == "int8":
                x = cp.asarray(rng.integers(-128, 128, (m, kk), dtype=np.int8))
                w = cp.asarray(rng.integers(-128, 128, (n, kk), dtype=np.int8))
            else:
                x = cp.asarray(rng.standard_normal((m, kk)).astype(np.float16))
                w = cp.asarray(rng.standard_normal((n, kk)).astype(np.float16))
            func = wgmma_gemm(MatmulSpec(m, n, kk), dtype, None, kb)
            y = cp.zeros((m, n), np.dtype(func.params[2].dtype))
            call, _ = self.kernel(func, x, w, y)
            call()
            want = cp.matmul(x.astype(cp.float64), w.astype(cp.float64).T)
            if dtype == "int8":
                ok = bool(cp.array_equal(y, want.astype(cp.int64).astype(cp.int32)))
            else:
                ok = bool(cp.max(cp.abs(y - want)) <= 1e-3 * float(cp.max(cp.abs(want))))
            row: dict[str, Any] = {"what": label, "dtype": dtype, "correct": ok,
                                   "knobs": asdict(kb)}
            self.line(f"{dtype:9s} {'':5s} {'':9s} {label:36s} {'ok' if ok else 'WRONG'}")
        except Exception as e:
            row = {"what": label, "dtype": dtype, "correct": False,
                   "error": f"{type(e).__name__}: {e}", "trace": traceback.format_exc(limit=4)}
            self.line(f"{dtype:9s} {label} ERROR {type(e).__name__}: {str(e)[:100]}")
        self.rows.append(row)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--quick", action="store_true", help="fewer fp16 knob variants")
    args = ap.parse_args()
    cp = cupy_or_exit()
    if str(cp.cuda.Device().compute_capability) != "90":
        print("gpu_ws_probe: wgmma and TMA need compute capability 9.0 (sm_90a)")
        raise SystemExit(2)
    from vta.gpu.runtime import gpu_name, precompile

    sms = int(cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["multiProcessorCount"])
    ragged, rows = plan(sms, args.quick)
    before = device_info(cp)
    precompile([render_cuda(wgmma_gemm(MatmulSpec(m, n, k), d, None, kb))
                for d, m, n, k, kb in ragged]
               + [render_cuda(wgmma_gemm(MatmulSpec(n, n, n), d, None, kb, o))
                  for _l, d, n, kb, o, _k in rows], workers=16)
    pr = Probe(cp, args.reps)
    for r in ragged:
        pr.ragged(*r)
    for t in rows:
        pr.row(*t)
    pr.smi.stop()
    print(f"\nsm_90a GEMM variants on {gpu_name()} ({sms} SMs; median of {args.reps} event "
          f"pairs; T/s = TFLOP/s or TOP/s; SM MHz and W: nvidia-smi during the row)")
    print(f"{'dtype':9s} {'n':>5s} {'data':9s} {'kernel':36s} {'ms':>8s} {'T/s':>7s} "
          f"{'vs lib':>7s}  {'SM MHz':>6s} {'W':>5s}  check")
    print("\n".join(pr.table))
    path = write_results("gpu_ws_probe", gpu_name(), pr.rows,
                         {"reps": args.reps, "sms": sms, "device_before": before}, cp=cp)
    print(f"wrote {path}")
    if not all(r.get("correct", True) for r in pr.rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
