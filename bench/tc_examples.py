"""The TC examples (examples/tc/) on a hardware config: cycles and the accelerator's share.

Each definition is mapped automatically (``vta.compiler.accel.tc_map``: contractions on the GEMM
core, ALU chains on the ALU, the rest on the host's CPU fallback), simulated cycle by cycle and
checked bit-exact against the TC interpreter. Per example: total cycles (every program run:
batches and byte planes included), the fraction of the work (domain points: MACs and element
operations) that ran on the accelerator, the MACs on the GEMM core and their share of the core's
peak over the run (``useful``), the tasks, compile and simulation wall time.

    python bench/tc_examples.py [--hw hwconfigs/pynq.yaml] [--only matmul,conv2d]

Prints a table and writes bench/results/tc_examples.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.compiler.tc import load_file  # noqa: E402
from vta.config import HwConfig  # noqa: E402
from vta.run.targets import AccelTarget  # noqa: E402
from vta.run.tc import run_vta  # noqa: E402

#: (file, entry, sizes): layer-like sizes the simulator runs in seconds
EXAMPLES: list[tuple[str, str, dict[str, int]]] = [
    ("matmul.tc", "matmul", {"M": 128, "K": 128, "N": 128}),
    ("transposed_matmul.tc", "tmm", {"K": 128, "M": 128, "N": 128}),
    ("tbmm.tc", "tbmm", {"B": 4, "N": 64, "M": 64, "K": 64}),
    ("conv.tc", "conv2d", {"N": 1, "C": 64, "H": 58, "W": 58, "K": 64, "R": 3, "S": 3}),
    ("conv.tc", "conv2d_strided",
     {"N": 1, "C": 64, "HP": 58, "WP": 58, "K": 128, "R": 3, "S": 3}),
    ("depthwise.tc", "depthwise", {"N": 1, "C": 32, "H": 30, "W": 30, "R": 3, "S": 3}),
    ("grouped_conv.tc", "grouped_conv",
     {"N": 1, "G": 4, "C": 16, "H": 16, "W": 16, "K": 16, "R": 3, "S": 3}),
    ("tensordot.tc", "tensordot", {"N": 2, "C1": 32, "C2": 64, "C3": 32, "H": 8, "W": 8}),
    ("mlp.tc", "mlp2", {"B": 16, "M": 512, "N": 256, "P": 128}),
    ("maxpool.tc", "maxpool", {"N": 1, "C": 64, "H": 57, "W": 57}),
    ("kronecker.tc", "kronecker", {"M": 8, "N": 8, "P": 16, "Q": 16}),
    ("intermediate.tc", "avg_fc", {"M": 64, "K": 256, "N": 128}),
]


def bench(hw: HwConfig, only: set[str] | None) -> list[dict]:
    rows = []
    for file, entry, sizes in EXAMPLES:
        if only and entry not in only:
            continue
        d = load_file(ROOT / "examples" / "tc" / file, entry)
        t0 = time.perf_counter()
        r = run_vta(d, sizes, AccelTarget(hw), refine=3)
        wall = time.perf_counter() - t0
        useful = r.macs / (r.cycles * hw.macs_per_cycle) if r.cycles else 0.0
        rows.append({
            "example": entry, "file": file, "sizes": sizes, "passed": r.passed,
            "cycles": r.cycles, "time_ms": r.cycles / (hw.board.clock_mhz * 1e3),
            "accelerator_fraction": r.fraction, "work": r.work,
            "work_on_accelerator": r.work_accel, "gemm_macs": r.macs,
            "useful_utilization": useful,
            "tasks": [{"kind": t.kind, "statements": t.statements, "detail": t.detail,
                       "cycles": t.cycles, "runs": t.runs} for t in r.tasks],
            "compile_s": r.seconds_compile, "sim_s": r.seconds_sim, "wall_s": wall,
        })
    return rows


def _tasks(row: dict) -> str:
    kinds = [t["kind"] for t in row["tasks"]]
    return " + ".join(f"{k}" + (f" x{kinds.count(k)}" if kinds.count(k) > 1 else "")
                      for k in dict.fromkeys(kinds))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--hw", default=str(ROOT / "hwconfigs" / "pynq.yaml"))
    p.add_argument("--only", default=None, help="comma-separated example entries")
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "tc_examples.json"))
    args = p.parse_args()
    hw = HwConfig.from_yaml(args.hw)
    rows = bench(hw, set(args.only.split(",")) if args.only else None)
    print(f"TC examples on {hw.name} ({hw.board.clock_mhz:g} MHz), bit-exact against the TC "
          f"interpreter")
    print(f"{'example':16} {'cycles':>11} {'ms':>8} {'accel':>6} {'GEMM MACs':>12} "
          f"{'useful':>6}  {'tasks':18} {'ok':>3}")
    for r in rows:
        print(f"{r['example']:16} {r['cycles']:>11,} {r['time_ms']:>8.3f} "
              f"{r['accelerator_fraction']:>6.1%} {r['gemm_macs']:>12,} "
              f"{r['useful_utilization']:>6.3f}  {_tasks(r):18} "
              f"{'ok' if r['passed'] else 'BAD':>3}")
    Path(args.out).write_text(json.dumps({"hw": hw.name, "rows": rows}, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
