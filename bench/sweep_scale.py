"""Sweep scale benchmark: a grid of N x N points through ``vta sweep --force``, peak memory.

The issue-25 case: a 100 x 100 grid printed nothing in 300 s and grew to 3.1 GB. Here the grid
varies the clock and the board's LUT limit (``board.*`` fields: every point shares one cache
key, so the benchmark measures the sweep's own machinery, not the simulator), at ``--trials
0`` (the default schedule) without the bit-exact check. ``vta sweep`` runs in a child process;
its peak resident set (``ru_maxrss`` of the child), wall time, the time to its first row on
stdout, and the rows it printed are reported for each size, so memory against grid size reads
off the table: bounded means it does not grow with the point count.

    python bench/sweep_scale.py [--sizes 10,32,100] [--workload matmul:16x16x16]

Prints a table and writes bench/results/sweep_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def grid_text(n: int) -> str:
    """An n x n grid over ``board.clock_mhz`` and ``board.lut`` around pynq."""
    clocks = ", ".join(str(100 + i) for i in range(n))
    luts = ", ".join(str(53200 + i) for i in range(n))
    return (f"name: scale{n}\nbase: {ROOT / 'hwconfigs' / 'pynq.yaml'}\nboards: [pynq-z1]\n"
            f"trials: 0\ngrid:\n  board.clock_mhz: [{clocks}]\n  board.lut: [{luts}]\n")


def run_one(n: int, workload: str, tmp: Path) -> dict[str, Any]:
    """One ``vta sweep --force`` of an n x n grid in a child; its peak RSS and timings."""
    grid = tmp / f"scale{n}.yaml"
    grid.write_text(grid_text(n))
    argv = [sys.executable, "-m", "vta.cli", "sweep", "--grid", str(grid), workload, "--force",
            "--workers", "1", "--no-check", "--out", str(tmp / f"scale{n}"), "--cache",
            str(tmp / f"scale{n}.sqlite")]
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert child.stdout is not None
    first: float | None = None
    rows = 0
    for line in child.stdout:
        if line.startswith("clock_mhz="):
            rows += 1
            if first is None:
                first = time.perf_counter() - t0
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - t0
    if child.returncode != 0:
        raise SystemExit(f"vta sweep of {n}x{n} exited {child.returncode}: {' '.join(argv)}")
    return {"grid": f"{n}x{n}", "points": n * n, "rows_printed": rows,
            "first_row_s": round(first or 0.0, 2), "wall_s": round(wall, 1),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "command": " ".join(argv[1:])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10,32,100", help="grid sides, comma-separated")
    ap.add_argument("--workload", default="matmul:16x16x16")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "sweep_scale.json"))
    args = ap.parse_args()
    out: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as d:
        for n in (int(x) for x in args.sizes.split(",")):
            out.append(run_one(n, args.workload, Path(d)))
            r = out[-1]
            print(f"{r['grid']:>8} {r['points']:>7,} points  rows {r['rows_printed']:>7,}  "
                  f"first row {r['first_row_s']:>6.1f} s  wall {r['wall_s']:>7.1f} s  "
                  f"peak RSS {r['peak_rss_mib']:>7.1f} MiB", flush=True)
    Path(args.out).write_text(json.dumps({"workload": args.workload, "runs": out,
                                          "note": "--workers 1 on a shared 2-core machine"},
                                         indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
