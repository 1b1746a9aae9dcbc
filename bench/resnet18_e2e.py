"""The whole quantized ResNet-18 on every shipped hardware config, fused versus unfused.

For each config: ``resnet18`` (every requantization a shift: VTA's ALU) compiled with full
fusion (element-wise operators in their producer's epilogue) and with the unfused baseline
(only each requantize in its convolution: ReLU and the residual adds as kernels of their own),
and, on a config whose ALU has MUL (pynq_mul, research_32x32), ``resnet18_fixed`` (fixed-point
multipliers) with full fusion (row ``fixed``); each simulated from the input image to the
logits with every stored tensor checked bit-exact against the graph interpreter. Reported:
total cycles, time and frames/s at the config's clock, the sum of the per-kernel machine
bounds and the share of it achieved, DRAM bytes moved, peak activation DRAM (and without
reuse), the share of MACs on the accelerator, host fallbacks, the instructions of every kernel
(and those that are not VTA's: ALU MUL), and wall-clock seconds to compile and to simulate +
check (``sim+check``: the simulation of every kernel, the comparison of every tensor and the
interpreter's run). Fusion's saving is the unfused baseline's cycles and bytes minus the fused
ones.

    python bench/resnet18_e2e.py [--hw hwconfigs/pynq.yaml ...] [--no-unfused] [--no-fixed]

Prints a table and writes bench/results/resnet18_e2e.json (per config: ``full``, ``unfused``
and ``fixed``). Exit status 1 if any run differs from the interpreter.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.config import HwConfig  # noqa: E402
from vta.graph.compile import compile_graph  # noqa: E402
from vta.graph.models import random_image, resnet18, resnet18_fixed  # noqa: E402
from vta.run.graph import run_graph  # noqa: E402
from vta.run.targets import AccelTarget  # noqa: E402


def run(hw: HwConfig, fusion: str, fixed: bool = False) -> dict:
    graph = resnet18_fixed() if fixed else resnet18()
    image = random_image(0, graph.inputs[0].type.shape)
    t0 = time.perf_counter()
    cg = compile_graph(graph, hw, fusion=fusion, cost=AccelTarget(hw).cycles)
    t_compile = time.perf_counter() - t0
    t1 = time.perf_counter()
    r = run_graph(cg, image)
    t_run = time.perf_counter() - t1
    s = r.summary()
    keep = ("passed", "kernels", "host_ops", "cycles", "time_ms", "frames_per_s", "gops",
            "utilization", "useful_utilization", "machine_bound_cycles", "of_machine_bound",
            "dram_bytes", "peak_dram_bytes", "naive_dram_bytes", "const_dram_bytes",
            "mac_share", "macs", "accelerated_macs", "instructions", "non_vta_instructions")
    out = {"model": graph.name, **{k: s[k] for k in keep}}
    out.update({"compile_s": t_compile, "sim_check_s": t_run, "sim_s": s["sim_s"],
                "check_s": s["check_s"], "reference_s": s["reference_s"],
                "steps": [{k: row.get(k) for k in ("op", "ops", "placement", "cycles",
                                                   "machine_bound_cycles", "dram_bytes",
                                                   "utilization", "mismatches", "schedule",
                                                   "reason", "instructions")}
                          for row in s["steps"]]})
    return out


def table(rows: dict[str, dict]) -> str:
    head = (f"{'config':15} {'fusion':8} {'ok':3} {'kernels':>7} {'cycles':>11} {'ms':>8} "
            f"{'fps':>6} {'%bound':>7} {'DRAM moved':>11} {'peak DRAM':>10} {'MACs acc':>8} "
            f"{'compile':>8} {'sim+check':>9}")
    lines = [head]
    for name, by in rows.items():
        for fusion, r in by.items():
            lines.append(
                f"{name:15} {fusion:8} {'ok' if r['passed'] else 'BAD':3} {r['kernels']:>7} "
                f"{r['cycles']:>11,} {r['time_ms']:>8.2f} {r['frames_per_s']:>6.1f} "
                f"{r['of_machine_bound']:>7.1%} {r['dram_bytes']:>11,} "
                f"{r['peak_dram_bytes']:>10,} {r['mac_share']:>8.1%} {r['compile_s']:>7.1f}s "
                f"{r['sim_check_s']:>8.2f}s")
        for fusion, r in by.items():
            alu = ", ".join(f"{k[4:]} {n:,}" for k, n in r["instructions"].items()
                            if k.startswith("ALU."))
            lines.append(f"{'':15} {fusion} ({r['model']}): ALU {alu}; not VTA's: "
                         f"{r['non_vta_instructions'] or 'none'}")
        if "unfused" in by:
            f, u = by["full"], by["unfused"]
            lines.append(f"{'':15} fusion saves {u['cycles'] - f['cycles']:,} cycles "
                         f"({1 - f['cycles'] / u['cycles']:.1%}) and "
                         f"{u['dram_bytes'] - f['dram_bytes']:,} DRAM bytes "
                         f"({1 - f['dram_bytes'] / u['dram_bytes']:.1%}); "
                         f"{u['kernels'] - f['kernels']} fewer kernels")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", action="append", help="config YAML (default: every shipped one)")
    ap.add_argument("--no-unfused", action="store_true", help="skip the unfused baseline")
    ap.add_argument("--no-fixed", action="store_true",
                    help="skip resnet18_fixed (run where the config's ALU has MUL)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "resnet18_e2e.json"))
    a = ap.parse_args()
    cfgs = [Path(p) for p in a.hw] if a.hw else sorted((ROOT / "hwconfigs").glob("*.yaml"))
    results: dict[str, dict] = {}
    t0 = time.perf_counter()
    for c in cfgs:
        hw = HwConfig.from_yaml(c)
        by = {"full": run(hw, "full")}
        if not a.no_unfused:
            by["unfused"] = run(hw, "requant")
        if not a.no_fixed and "mul" in hw.alu.ops:
            by["fixed"] = run(hw, "full", fixed=True)
        results[hw.name] = by
        print(table({hw.name: by}).split("\n", 1)[1] if len(results) > 1 else
              table({hw.name: by}), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=1))
    print(f"wrote {a.out} ({time.perf_counter() - t0:.0f} s)")
    return 0 if all(r["passed"] for by in results.values() for r in by.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
