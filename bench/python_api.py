"""ResNet-18 layers written once as a user's logical compute, on both targets, against the
built-in ops.

Per layer: the logical NCHW convolution with the layer's calibrated epilogue (the stages of
``Epilogue.stages``, the padding as a ``select`` stage) is packed for the accelerator
(``vta.pack``), scheduled with ``schedule_packed`` (the default model, whole tiles only),
built (``vta.build``) and simulated; the built-in op (``vta.run.layer.run_layer``, the program
``vta run`` compiles) gives the reference cycles. On the GPU the same logical compute goes
through the implicit GEMM's tensor-core schedule in the SIMT emulator, against the built-in
``conv2d_wmma`` kernel. Every output is checked bit-exact against numpy.

    python bench/python_api.py [--hw hwconfigs/pynq.yaml] [--layers C2,C11]

Prints a table and writes bench/results/python_api.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import vta  # noqa: E402
from vta.compiler import compute, placeholder, reduce_axis, schedule_packed, sum_  # noqa: E402
from vta.compiler.ir.expr import select  # noqa: E402
from vta.compiler.ops.conv2d import Conv2dSpec, conv2d_reference  # noqa: E402
from vta.compiler.ops.epilogue import Epilogue, random_bias  # noqa: E402
from vta.compiler.ops.workloads import resolve  # noqa: E402
from vta.gpu.implicit_gemm import tensorcore  # noqa: E402
from vta.run.targets import AccelTarget  # noqa: E402

LAYERS = ("C2", "C5", "C8", "C11")


def logical_conv2d(s: Conv2dSpec, epi: Epilogue) -> list:  # type: ignore[type-arg]
    """The user's compute: NCHW input, OIHW weights, a padding stage, the epilogue's stages."""
    data = placeholder((s.n, s.ic, s.h, s.w), "int8", "data")
    kern = placeholder((s.oc, s.ic, s.kh, s.kw), "int8", "kernel")
    bias = placeholder((s.oc,), "int32", "bias")
    p = s.pad
    pad = compute((s.n, s.ic, s.h + 2 * p, s.w + 2 * p), lambda n, c, y, x: select(
        (y >= p) & (y < s.h + p) & (x >= p) & (x < s.w + p), data[n, c, y - p, x - p], 0),
        "data_pad")
    ic, kh, kw = reduce_axis(s.ic, "ic"), reduce_axis(s.kh, "kh"), reduce_axis(s.kw, "kw")
    cur = compute((s.n, s.oc, s.oh, s.ow), lambda n, o, y, x: sum_(
        pad[n, ic, y * s.stride + kh, x * s.stride + kw].astype("int32")
        * kern[o, ic, kh, kw].astype("int32"), [ic, kh, kw]), "conv")
    for name, fn in epi.stages():
        prev = cur
        cur = compute(cur.shape, lambda *i, prev=prev, fn=fn: fn(prev[i], bias[i[1]]), name)
    last = cur
    res = compute(cur.shape, lambda *i: last[i].astype("int8"), "res")
    return [data, kern, bias, res]


def bench(hw: vta.HwConfig, layers: list[str]) -> list[dict]:  # type: ignore[type-arg]
    from vta.gpu.emulator import Emulator
    from vta.gpu.lower_gpu import lower_for_gpu
    from vta.gpu.schedules import conv2d_wmma
    from vta.run.layer import run_layer

    rows = []
    for name in layers:
        w = resolve(f"resnet18:{name}")
        s, epi = w.spec, w.epilogue
        assert isinstance(s, Conv2dSpec)
        rng = np.random.default_rng(0)
        ins = {"data": rng.integers(-128, 128, (s.n, s.ic, s.h, s.w), dtype=np.int8),
               "kernel": rng.integers(-128, 128, (s.oc, s.ic, s.kh, s.kw), dtype=np.int8),
               "bias": random_bias(epi, s.oc, rng)}
        want = conv2d_reference(ins["data"], ins["kernel"], ins["bias"], s, epi)
        t0 = time.perf_counter()
        P = vta.pack(logical_conv2d(s, epi), hw)
        mod = vta.build(schedule_packed(P, hw), P, "vta", hw=hw)
        t_compile = time.perf_counter() - t0
        r = mod(ins)
        builtin = run_layer(w, AccelTarget(hw))
        t1 = time.perf_counter()
        # no counters: timed like the built-in kernel's plain emulation below
        tc = vta.build(tensorcore(logical_conv2d(s, epi)), target="cuda-emu", profile=False)
        t_tc_build = time.perf_counter() - t1
        g = tc(ins)
        ref_func = lower_for_gpu(conv2d_wmma(s, "int8", epi))
        arrays = [ins["data"], np.ascontiguousarray(ins["kernel"].reshape(s.oc, -1)),
                  ins["bias"], np.zeros(want.shape, np.int8)]
        t2 = time.perf_counter()
        Emulator(ref_func).run(*arrays)
        t_ref_emu = time.perf_counter() - t2
        rows.append({
            "layer": name, "shape": s.describe(), "hw": hw.name,
            "logical_cycles": r.cycles, "builtin_cycles": builtin.cycles,
            "cycle_ratio": r.cycles / builtin.cycles,
            "logical_utilization": r.stats.gemm_cycles / r.cycles,
            "builtin_utilization": builtin.stats.gemm_cycles / builtin.cycles,
            "logical_compile_s": t_compile, "builtin_compile_s": builtin.seconds_compile,
            "logical_sim_s": r.seconds, "acc_hazards": r.stats.acc_hazards,
            "vta_bit_exact": bool(np.array_equal(r["res"], want)) and builtin.passed,
            "tc_build_s": t_tc_build, "tc_emulate_s": g.seconds,
            "builtin_tc_emulate_s": t_ref_emu,
            "tc_bit_exact": bool(np.array_equal(g["res"], want)
                                 and np.array_equal(arrays[-1], want)),
        })
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(ROOT / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--layers", default=",".join(LAYERS))
    a = ap.parse_args()
    hw = vta.HwConfig.from_yaml(a.hw)
    rows = bench(hw, a.layers.split(","))
    print(f"{'layer':6} {'logical cycles':>15} {'built-in':>11} {'ratio':>6} {'util':>6} "
          f"{'compile s':>9} {'TC emu s':>8} {'built-in TC emu s':>17} exact")
    for r in rows:
        print(f"{r['layer']:6} {r['logical_cycles']:>15,} {r['builtin_cycles']:>11,} "
              f"{r['cycle_ratio']:>6.3f} {r['logical_utilization']:>6.3f} "
              f"{r['logical_compile_s']:>9.2f} {r['tc_emulate_s']:>8.2f} "
              f"{r['builtin_tc_emulate_s']:>17.2f} {r['vta_bit_exact'] and r['tc_bit_exact']}")
    out = ROOT / "bench" / "results" / "python_api.json"
    out.write_text(json.dumps({"hw": hw.name, "rows": rows}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
