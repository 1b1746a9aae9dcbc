"""What the SIMT emulator counts for the GPU kernels (no GPU needed): shared-memory bank
conflicts, global sectors against the tiles' footprint, barriers and instructions per block.

    python bench/gpu_profile.py [--gemm 256] [--layers C2 ... C11] [--kernels mma nhwc wmma]

For the task-mapping kernels (``mma``: vta.gpu.kernels.gemm / conv2d, NCHW; ``nhwc``: the
channels-last conv2d, convolutions only) and the tensor-core schedules (``wmma``:
vta.gpu.schedules), on an n^3 GEMM (int8 with the requantizing epilogue, fp16 -> fp16) and
ResNet-18 C2..C11 (batch 1, int8, fused epilogue), every kernel checked against numpy. Issue
13's targets for the task-mapping kernels: zero bank conflicts and global sectors at 1.00x the
minimum. Prints a table and writes bench/results/gpu_profile.json (rows of the kernels and
workloads run replace the file's rows of the same name; the others are kept).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path
from typing import Any

import numpy as np

from vta.compiler.ops.conv2d import conv2d_reference
from vta.compiler.ops.epilogue import Epilogue, apply_epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.compiler.ops.workloads import RESNET18, resnet18_layer
from vta.gpu.emulator import Emulator
from vta.gpu.profile import Profile

RESULTS = Path(__file__).resolve().parent / "results"


def _row(what: str, kind: str, prof: Profile, ok: bool, seconds: float) -> dict[str, Any]:
    ld, ld_min = prof.sectors(False)
    st, st_min = prof.sectors(True)
    return {"workload": what, "kernel": kind, "correct": ok, "blocks": prof.blocks,
            "bank_conflicts": prof.bank_conflicts, "load_sectors": ld,
            "load_min_sectors": ld_min, "store_sectors": st, "store_min_sectors": st_min,
            "load_ratio": ld / max(1, ld_min), "store_ratio": st / max(1, st_min),
            "barriers_per_block": prof.barriers / max(1, prof.blocks),
            "instructions_per_block": {k: v / max(1, prof.blocks)
                                       for k, v in sorted(prof.instructions.items())},
            "emulated_s": seconds}


def gemm(n: int, dtype: str, kind: str) -> dict[str, Any]:
    from vta.gpu.kernels.gemm import mma_gemm
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.schedules import matmul_wmma

    spec = MatmulSpec(n, n, n)
    rng = np.random.default_rng(0)
    if dtype == "int8":
        epi = Epilogue()
        x = rng.integers(-128, 128, (n, n), dtype=np.int8)
        w = rng.integers(-128, 128, (n, n), dtype=np.int8)
        b = rng.integers(-(1 << 10), 1 << 10, n, dtype=np.int32)
        acc = (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)
        want = apply_epilogue(acc, b, epi, 1)
        args, y = [x, w, b], np.zeros_like(want)
        func = mma_gemm(spec, dtype, epi) if kind == "mma" else \
            lower_for_gpu(matmul_wmma(spec, dtype, epi))
    else:
        x = rng.standard_normal((n, n)).astype(np.float16)
        w = rng.standard_normal((n, n)).astype(np.float16)
        want = (x.astype(np.float32) @ w.astype(np.float32).T).astype(np.float16)
        args, y = [x, w], np.zeros((n, n), np.float16)
        func = mma_gemm(spec, dtype, None, out_dtype="float16") if kind == "mma" else \
            lower_for_gpu(matmul_wmma(spec, dtype, None, out_dtype="float16"))
    em = Emulator(func, profile=True)
    t0 = time.perf_counter()
    em.run(*args, y)
    dt = time.perf_counter() - t0
    ok = bool(np.array_equal(y, want)) if dtype == "int8" else bool(
        np.allclose(y.astype(np.float32), want.astype(np.float32), rtol=2e-2, atol=0.1))
    assert em.profile is not None
    return _row(f"gemm {n}^3 {dtype}", kind, em.profile, ok, dt)


def conv(layer: str, kind: str) -> dict[str, Any]:
    from vta.gpu.kernels.conv2d import mma_conv2d, ohwi_weight
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.schedules import conv2d_wmma

    s = resnet18_layer(layer)
    epi = Epilogue()
    rng = np.random.default_rng(0)
    x = rng.integers(-128, 128, (s.n, s.ic, s.h, s.w), dtype=np.int8)
    w = rng.integers(-128, 128, (s.oc, s.ic, s.kh, s.kw), dtype=np.int8)
    b = rng.integers(-(1 << 10), 1 << 10, s.oc, dtype=np.int32)
    want = conv2d_reference(x, w, b, s, epi)
    y = np.zeros_like(want)
    if kind == "mma":
        func, wk = mma_conv2d(s, "int8", epi), ohwi_weight(w)
    elif kind == "nhwc":
        func, wk = mma_conv2d(s, "int8", epi, layout="NHWC"), ohwi_weight(w)
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
        want = np.ascontiguousarray(want.transpose(0, 2, 3, 1).reshape(-1, s.oc))
        y = np.zeros_like(want)
    else:
        func, wk = lower_for_gpu(conv2d_wmma(s, "int8", epi)), w.reshape(s.oc, -1)
    em = Emulator(func, profile=True)
    t0 = time.perf_counter()
    em.run(x, wk, b, y)
    dt = time.perf_counter() - t0
    assert em.profile is not None
    return _row(f"resnet18:{layer}", kind, em.profile, bool(np.array_equal(y, want)), dt)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gemm", type=int, default=256, help="GEMM size n (n^3)")
    ap.add_argument("--layers", nargs="+", default=[k for k in RESNET18 if k != "C1"])
    ap.add_argument("--kernels", nargs="+", default=["mma", "nhwc", "wmma"],
                    choices=["mma", "nhwc", "wmma"])
    ap.add_argument("--no-gemm", action="store_true", help="convolutions only")
    args = ap.parse_args()
    rows = []
    for kind in args.kernels:
        if kind != "nhwc" and not args.no_gemm:
            rows += [gemm(args.gemm, dt, kind) for dt in ("int8", "float16")]
        rows += [conv(layer, kind) for layer in args.layers]
    hdr = f"{'workload':22} {'kernel':6} {'ok':3} {'conflicts':>10} {'ld x min':>9} " \
          f"{'st x min':>9} {'bar/blk':>8} {'mma/blk':>8} {'emu s':>6}"
    print(hdr)
    print("-" * len(hdr))
    for r in rows:
        mma = r["instructions_per_block"].get("mma.sync",
                                              r["instructions_per_block"].get("wmma.mma", 0))
        print(f"{r['workload']:22} {r['kernel']:6} {'ok' if r['correct'] else 'NO':3} "
              f"{r['bank_conflicts']:>10,} {r['load_ratio']:>9.2f} {r['store_ratio']:>9.2f} "
              f"{r['barriers_per_block']:>8.0f} {mma:>8.0f} {r['emulated_s']:>6.1f}")
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / "gpu_profile.json"
    done = {(r["workload"], r["kernel"]) for r in rows}
    kept = [r for r in (json.loads(path.read_text())["rows"] if path.exists() else [])
            if (r["workload"], r["kernel"]) not in done]
    path.write_text(json.dumps({"host": platform.node(), "command": "python bench/gpu_profile.py",
                                "rows": kept + rows}, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
