"""What ``drain_tail`` buys: cycles with and without the pass on random shapes and configs.

For random conv2d and matmul shapes on several configs, each workload is compiled twice (the
pass on, and switched off) and both programs timed by the timing-only simulator; the table
lists every case where the pass changed the cycle count, and the summary counts the cases it
made faster, slower and left alone. Writes bench/results/drain_tail.json.

    python bench/drain_tail.py [--seed 0] [--cases 12] [--hw pynq,pynq_tsim,pynq_overlap,ultra96]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

import vta.compiler.accel.passes.drain_tail as DT
from vta.compiler.ops.workloads import Workload, resolve
from vta.config import HwConfig
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[1]


def _workload(rng: random.Random) -> Workload:
    if rng.random() < 0.5:
        return resolve("matmul", [rng.choice([16, 32, 48, 64, 128, 256]) for _ in range(3)])
    k = rng.choice([1, 3])
    hw_ = rng.choice([7, 8, 14, 16, 28])
    return resolve("conv2d", in_channels=rng.choice([16, 32, 64, 128]),
                   out_channels=rng.choice([16, 32, 64, 128]), height=hw_, width=hw_,
                   kernel=k, stride=rng.choice([1, 2]), pad=k // 2)


def _cycles(w: Workload, hw: HwConfig, on: bool) -> int:
    drained = DT._drained
    if not on:
        DT._drained = lambda insns, hw: None  # type: ignore[assignment]
    try:
        return AccelTarget(hw).cycles(AccelTarget(hw).compile_layer(w).program)
    finally:
        DT._drained = drained  # type: ignore[assignment]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=12, help="workloads per config")
    ap.add_argument("--hw", default="pynq,pynq_tsim,pynq_overlap,ultra96")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "drain_tail.json"))
    args = ap.parse_args()
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    for name in args.hw.split(","):
        hw = HwConfig.from_yaml(ROOT / "hwconfigs" / f"{name}.yaml")
        for _ in range(args.cases):
            w = _workload(rng)
            off, on = _cycles(w, hw, False), _cycles(w, hw, True)
            rows.append({"hw": name, "workload": w.name, "shape": str(w.spec), "off": off,
                         "on": on, "saved": off - on})
    t = Table(title=f"drain_tail on {len(rows)} random workloads (seed {args.seed})")
    for c in ("config", "shape", "without", "with", "saved"):
        t.add_column(c, justify="left" if c in ("config", "shape") else "right")
    for r in rows:
        if r["saved"]:
            t.add_row(r["hw"], r["shape"], f"{r['off']:,}", f"{r['on']:,}", f"{r['saved']:,}")
    con = Console()
    con.print(t)
    faster = sum(r["saved"] > 0 for r in rows)
    slower = sum(r["saved"] < 0 for r in rows)
    con.print(f"{faster} faster, {slower} slower, {len(rows) - faster - slower} unchanged; "
              f"largest saving {max(r['saved'] for r in rows):,} cycles")
    Path(args.out).write_text(json.dumps({"seed": args.seed, "rows": rows, "faster": faster,
                                          "slower": slower}, indent=1))
    con.print(f"wrote {args.out}")
    return 0 if slower == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
