"""Speed of the CPU executors of the loop-nest IR: the SIMT emulator (vta/gpu/emulator.py) on
the default SIMT and tensor-core schedules, and the reference interpreter
(vta/compiler/ir/interp.py).

The issue's anchor: a 128x128x128 int8 GEMM runs in well under a second in the SIMT emulator
(with race checking), against ~70 s for the Numba CUDA simulator. Prints a table and writes
bench/results/emulator_speed.json. Timing lives here; tests assert only correctness.

    python bench/emulator_speed.py [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from vta.compiler.ops.matmul import MatmulSpec

RESULTS = Path(__file__).resolve().parent / "results"


def _gemm_inputs(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.integers(-128, 128, (n, n), dtype=np.int8),
            rng.integers(-128, 128, (n, n), dtype=np.int8), np.zeros((n, n), np.int32))


def _emulated(kind: str, n: int) -> Callable[[], None]:
    from vta.gpu.emulator import Emulator
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.schedules import matmul_simt, matmul_wmma

    build = matmul_simt if kind == "simt" else matmul_wmma
    emu = Emulator(lower_for_gpu(build(MatmulSpec(n, n, n), "int8")))
    x, w, y = _gemm_inputs(n)
    want = (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)

    def run() -> None:
        emu.run(x, w, y)
        assert np.array_equal(y, want)

    return run


def _interpreted(n: int) -> Callable[[], None]:
    from vta.compiler.ir.interp import run_func
    from vta.compiler.ir.lower import lower
    from vta.compiler.ir.schedule import create_schedule
    from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_

    A = placeholder((n, n), "int8", "A")
    B = placeholder((n, n), "int8", "B")
    k = reduce_axis(n, "k")
    C = compute((n, n), lambda i, j: sum_(A[i, k].astype("int32") * B[j, k].astype("int32"), k),
                "C")
    s = create_schedule(C)
    s[C].tile(*s[C].axis, 16, 16)
    f = lower(s, [A, B, C])
    a, b, c = _gemm_inputs(n)

    def run() -> None:
        run_func(f, {"A": a, "B": b, "C": c})

    return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=5)
    args = p.parse_args()
    cases = [("SIMT emulator, SIMT schedule", "int8 GEMM 128^3", lambda: _emulated("simt", 128)),
             ("SIMT emulator, WMMA schedule", "int8 GEMM 128^3", lambda: _emulated("wmma", 128)),
             ("interpreter, 16x16 tiles", "int8 GEMM 64^3", lambda: _interpreted(64))]
    rows = []
    print(f"{'executor':32} {'workload':18} {'median s':>9} {'min s':>9}")
    for name, work, make in cases:
        run = make()
        run()  # warm-up (compiles the closures once)
        ts = []
        for _ in range(args.reps):
            t0 = time.perf_counter()
            run()
            ts.append(time.perf_counter() - t0)
        med = statistics.median(ts)
        rows.append({"executor": name, "workload": work, "median_s": med, "min_s": min(ts),
                     "reps": args.reps})
        print(f"{name:32} {work:18} {med:9.3f} {min(ts):9.3f}")
    print("reference: the Numba CUDA simulator takes ~70 s for the 128^3 int8 GEMM")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / "emulator_speed.json"
    out.write_text(json.dumps({"machine": platform.processor() or platform.machine(),
                               "python": platform.python_version(), "results": rows}, indent=2))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
