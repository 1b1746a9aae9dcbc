"""ResNet-18 C1-C11 on every shipped hardware config: cycles, utilization with and without
latency hiding, their ratio, two bounds, compile time and simulation wall time.

Bounds (vta.compiler.accel.driver.roofline): the classic roofline max(ideal GEMM cycles, compulsory
DRAM bytes / bus bytes) — ``bound`` says which side limits it — and the machine bound, which
adds the ALU epilogue the compute module runs serially with its GEMMs (per acc entry: GEMM
reset, SHR, bias ADD at alu.ii, MAX, MIN); ``ceil`` is the utilization that bound allows.
Both count the layer's true MACs (2*OH*OW*K^2*IC*OC ops; C1's 3 channels, not the 16 the
packed layout pads them to), also when the compiler folds the window into the channels
(``fold``: kw / khkw, vta.compiler.accel.ops.fold); ``util`` is the GEMM core's busy fraction
(padded lanes included), ``useful`` the true MACs per cycle over the core's peak;
``DRAM`` the bytes the simulator moved.

    python bench/resnet18_layers.py [--hw hwconfigs/pynq.yaml ...] [--layers C2,C5]

Prints a table per config and writes bench/results/resnet18_layers.json. Every run is checked
bit-exact against numpy (a mismatch is reported in the table and the JSON).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.compiler.ops.workloads import RESNET18, resolve  # noqa: E402
from vta.config import HwConfig  # noqa: E402
from vta.run.layer import run_layer  # noqa: E402
from vta.run.targets import AccelTarget  # noqa: E402


def bench(hw: HwConfig, layers: list[str]) -> list[dict]:
    rows = []
    for layer in layers:
        w = resolve(f"resnet18:{layer}")
        on = run_layer(w, AccelTarget(hw))
        off = run_layer(w, AccelTarget(hw), latency_hiding=False)
        s, s0 = on.summary(), off.summary()
        mem_bound = s["memory_bound"]
        rows.append({
            "layer": layer, "passed": on.passed and off.passed, "cycles": s["cycles"],
            "cycles_no_lh": s0["cycles"], "utilization": s["utilization"],
            "utilization_no_lh": s0["utilization"], "lh_speedup": s0["cycles"] / s["cycles"],
            "roofline_cycles": s["roofline_cycles"], "of_roofline": s["of_roofline"],
            "memory_bound": mem_bound, "machine_bound_cycles": s["machine_bound_cycles"],
            "of_machine_bound": s["of_machine_bound"],
            "utilization_ceiling": s["utilization_ceiling"], "gops": s["gops"],
            "useful_utilization": s["useful_utilization"], "fold": s["fold"],
            "device_shape": s["device_shape"], "dram_bytes": s["dram_bytes"],
            "schedule": s["schedule"],
            "schedule_no_lh": s0["schedule"], "instructions": s["instructions"],
            "acc_hazards": s["acc_hazards"], "compile_s": s["compile_s"], "sim_s": s["sim_s"],
            "compile_s_no_lh": s0["compile_s"], "sim_s_no_lh": s0["sim_s"],
        })
    return rows


def table(name: str, rows: list[dict]) -> str:
    head = (f"{'layer':5} {'ok':3} {'cycles':>10} {'util':>6} {'no-LH cyc':>10} {'util':>6} "
            f"{'LH x':>5} {'roofline':>9} {'%roof':>6} {'bound':>6} {'machine':>9} {'%mach':>6} "
            f"{'ceil':>5} {'useful':>6} {'DRAM':>10} {'compile':>8} {'sim':>6}  fold  schedule")
    lines = [f"== {name} ==", head]
    for r in rows:
        sc = r["schedule"]
        lines.append(
            f"{r['layer']:5} {'ok' if r['passed'] else 'BAD':3} {r['cycles']:>10,} "
            f"{r['utilization']:>6.3f} {r['cycles_no_lh']:>10,} {r['utilization_no_lh']:>6.3f} "
            f"{r['lh_speedup']:>5.2f} {r['roofline_cycles']:>9,.0f} {r['of_roofline']:>6.1%} "
            f"{'mem' if r['memory_bound'] else 'comp':>6} {r['machine_bound_cycles']:>9,.0f} "
            f"{r['of_machine_bound']:>6.1%} {r['utilization_ceiling']:>5.3f} "
            f"{r['useful_utilization']:>6.3f} {r['dram_bytes']:>10,} "
            f"{r['compile_s'] * 1e3:>6.0f}ms "
            f"{r['sim_s']:>5.2f}s  {r['fold']:5} {sc['tco']}/{sc['tci']}/{sc['th']}/{sc['tw']} "
            f"vt={sc['vthreads']}{sc['vt_axis'] if sc['vthreads'] > 1 else ''}")
    tot_sim = sum(r["sim_s"] for r in rows)
    lines.append(f"total simulated wall time (LH on, C1-C11): {tot_sim:.2f} s; max compile "
                 f"{max(r['compile_s'] for r in rows) * 1e3:.0f} ms")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", action="append", help="config YAML (default: every shipped one)")
    ap.add_argument("--layers", default=",".join(RESNET18))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "resnet18_layers.json"))
    a = ap.parse_args()
    cfgs = [Path(p) for p in a.hw] if a.hw else sorted((ROOT / "hwconfigs").glob("*.yaml"))
    layers = a.layers.split(",")
    results = {}
    t0 = time.perf_counter()
    for c in cfgs:
        hw = HwConfig.from_yaml(c)
        rows = bench(hw, layers)
        results[hw.name] = rows
        print(table(hw.name, rows), flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=1))
    print(f"wrote {a.out} ({time.perf_counter() - t0:.0f} s)")
    return 0 if all(r["passed"] for rows in results.values() for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
