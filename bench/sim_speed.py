"""Simulator speed on ResNet-18 layer C2 (bit-exact, cycle-level), pynq config.

Anchor: SCALE-Sim takes a median 52 s for C2 on a 2-core machine; the target here is <= 0.2 s
for a bit-exact, cycle-level run. Prints a table and writes bench/results/sim_speed.json.

    python bench/sim_speed.py [--hw hwconfigs/pynq.yaml] [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from c2_program import c2_program, conv2d_expected, pack_c2, unpack_c2  # noqa: E402

from vta.config import HwConfig  # noqa: E402
from vta.sim import simulate  # noqa: E402


def _timed(fn, runs: int) -> tuple[float, object]:
    walls, result = [], None
    for _ in range(runs):
        t = time.perf_counter()
        result = fn()
        walls.append(time.perf_counter() - t)
    return statistics.median(walls), result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(HERE.parent / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    hw = HwConfig.from_yaml(args.hw)
    program = c2_program(hw)
    rng = np.random.default_rng(0)
    data = rng.integers(-128, 128, (1, 64, 56, 56), dtype=np.int8)
    kernel = rng.integers(-128, 128, (64, 64, 3, 3), dtype=np.int8)
    inputs = pack_c2(hw, data, kernel)

    full_wall, full = _timed(lambda: simulate(program, hw, inputs), args.runs)
    timing_wall, timing = _timed(lambda: simulate(program, hw, inputs, timing_only=True),
                                 args.runs)
    got = unpack_c2(hw, full.outputs["O"], 64, 56)
    exact = bool(np.array_equal(got, conv2d_expected(hw, data, kernel)))
    same_cycles = timing.cycles == full.cycles
    rows = {
        "bit-exact, cycle-level": (full_wall, full.cycles),
        "timing only": (timing_wall, timing.cycles),
    }
    table = Table(title=f"C2 on {hw.name}: {len(program.instructions)} instructions, "
                        f"median of {args.runs} runs")
    for col in ("mode", "wall s", "sim cycles", "sim cycles / wall s"):
        table.add_column(col, justify="left" if col == "mode" else "right")
    for mode, (wall, cycles) in rows.items():
        table.add_row(mode, f"{wall:.4f}", f"{cycles:,}", f"{cycles / wall:,.0f}")
    console = Console()
    console.print(table)
    s = full.stats
    console.print(f"utilization {s.utilization:.1%} ({s.gemm_cycles:,} tensor-op cycles), "
                  f"{s.gops:.1f} GOP/s at {s.clock_mhz:g} MHz; bit-exact vs numpy conv2d: "
                  f"{'PASS' if exact else 'FAIL'}; timing-only cycles equal: {same_cycles}; "
                  f"target <= 0.2 s: {'met' if full_wall <= 0.2 else 'MISSED'} "
                  f"(SCALE-Sim anchor: 52 s)")
    out = HERE / "results" / "sim_speed.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({
        "workload": "resnet18:C2", "hw": hw.name, "runs": args.runs,
        "instructions": len(program.instructions),
        "wall_s_median": full_wall, "timing_only_wall_s_median": timing_wall,
        "cycles": full.cycles, "cycles_per_wall_s": full.cycles / full_wall,
        "gemm_cycles": s.gemm_cycles, "utilization": s.utilization,
        "bit_exact": exact, "timing_only_same_cycles": same_cycles,
        "narrowing": "out = low 8 bits of the int32 sums (no epilogue)",
        "target_wall_s": 0.2, "scale_sim_anchor_wall_s": 52.0,
    }, indent=2) + "\n")
    return 0 if exact and same_cycles else 1


if __name__ == "__main__":
    sys.exit(main())
