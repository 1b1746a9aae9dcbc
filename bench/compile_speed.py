"""Compile speed: ResNet-18's layers one by one, and ``vta run resnet18`` cold and warm.

Two measurements (issue 22), printed as tables and written to bench/results/compile_speed.json:

* per layer (C1-C11): the wall of ``AccelTarget(hw).compile_layer`` (what ``vta run
  resnet18:Ck`` compiles: the model ranks the space, its best candidates are compiled and
  timed on the timing-only simulator), median of ``--runs``, in this process, with no compile
  cache and the model's in-process memo cleared before every run (the cold figure); the chosen
  schedule is printed beside it;
* the whole graph: the wall of ``vta run --hw HW resnet18`` as a subprocess, cold (a fresh,
  empty cache file each run: everything compiled, the programs kept) and warm (the same file
  again: nothing compiled), median of ``--graph-runs``, with the compile and simulate seconds
  the run reports.

The tuning cache changes schedules, so every run gets its own cache file (``VTA_CACHE``) and the
user's is never read. Run it against another checkout (e.g. main, for a before figure) with
``PYTHONPATH=/path/to/checkout python bench/compile_speed.py``; a vta without a compile cache
compiles every run (warm = cold).

    OPENBLAS_NUM_THREADS=1 python bench/compile_speed.py [--hw hwconfigs/pynq.yaml] [--runs 3]
        [--graph-runs 3] [--out bench/results/compile_speed.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import vta
from vta.compiler.accel.schedules import model
from vta.compiler.ops.workloads import RESNET18, resolve
from vta.config import HwConfig
from vta.run.targets import AccelTarget

HERE = Path(__file__).resolve().parent


def _clear_memos() -> None:
    """Forget the schedule model's in-process rankings (a cold compile; a vta without the
    memo has none)."""
    getattr(model, "_RANKED", {}).clear()


def per_layer(hw: HwConfig, runs: int) -> list[dict[str, object]]:
    rows = []
    for layer in RESNET18:
        w = resolve(f"resnet18:{layer}")
        walls = []
        c = None
        for _ in range(runs):
            _clear_memos()
            t = AccelTarget(hw)
            t0 = time.perf_counter()
            c = t.compile_layer(w)
            walls.append(time.perf_counter() - t0)
        assert c is not None
        s = c.schedule
        rows.append({"layer": layer, "median_s": statistics.median(walls), "runs": walls,
                     "schedule": f"{c.fold_kind} tco={s.tco} tci={s.tci} th={s.th} tw={s.tw} "
                                 f"vt={s.vthreads}{s.vt_axis}"})
    return rows


def _graph_run(hw_path: str, cache: Path) -> dict[str, float]:
    env = {**os.environ, "VTA_CACHE": str(cache), "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    # run in the checkout this process imported vta from: ``-m`` puts the working directory
    # first on the path, so another checkout's vta would run instead
    p = subprocess.run([sys.executable, "-m", "vta.cli", "run", "--hw", hw_path, "resnet18"],
                       capture_output=True, text=True, env=env, check=False,
                       cwd=Path(vta.__file__).resolve().parents[1])
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"vta run failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    m = re.search(r"compile ([\d.]+) s\s+simulate ([\d.]+) s", p.stdout)
    compiled = re.search(r"(\d+) from the cache, (\d+) compiled", p.stderr)
    return {"wall_s": wall, "compile_s": float(m.group(1)) if m else float("nan"),
            "simulate_s": float(m.group(2)) if m else float("nan"),
            "from_cache": int(compiled.group(1)) if compiled else 0,
            "compiled": int(compiled.group(2)) if compiled else -1}


def whole_graph(hw_path: str, runs: int) -> dict[str, list[dict[str, float]]]:
    cold, warm = [], []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            cache = Path(d) / "tune.sqlite"
            cold.append(_graph_run(hw_path, cache))
            warm.append(_graph_run(hw_path, cache))
    return {"cold": cold, "warm": warm}


def _median(rows: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(HERE.parent / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--graph-runs", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "compile_speed.json"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:  # never the user's tuning cache
        os.environ["VTA_CACHE"] = str(Path(d) / "tune.sqlite")
        hw = HwConfig.from_yaml(args.hw)
        layers = per_layer(hw, args.runs)
    graph = whole_graph(args.hw, args.graph_runs) if args.graph_runs > 0 else None

    con = Console()
    t = Table(title=f"per-layer compile on {hw.name} (median of {args.runs}, cold)")
    for col in ("layer", "median s", "schedule"):
        t.add_column(col)
    for r in layers:
        t.add_row(str(r["layer"]), f"{r['median_s']:.3f}", str(r["schedule"]))
    meds = [float(r["median_s"]) for r in layers]  # type: ignore[arg-type]
    t.add_row("median", f"{statistics.median(meds):.3f}", f"sum {sum(meds):.2f} s")
    con.print(t)
    if graph is not None:
        g = Table(title=f"vta run --hw {Path(args.hw).name} resnet18 (median of "
                        f"{args.graph_runs})")
        for col in ("run", "wall s", "compile s", "simulate s", "kernels compiled"):
            g.add_column(col)
        for name, rows in graph.items():
            g.add_row(name, f"{_median(rows, 'wall_s'):.2f}", f"{_median(rows, 'compile_s'):.2f}",
                      f"{_median(rows, 'simulate_s'):.2f}", str(rows[0]["compiled"]))
        con.print(g)
    result = {"hw": hw.name, "vta": str(Path(vta.__file__).resolve().parent.parent),
              "runs": args.runs, "layers": layers,
              "layer_median_s": statistics.median(meds), "layer_sum_s": sum(meds),
              "graph": graph, "cpus": os.cpu_count(),
              "load_avg": os.getloadavg()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
