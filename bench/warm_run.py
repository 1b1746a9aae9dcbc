"""The whole-graph ``vta run`` cold and warm (issue 22): where its wall time goes.

Runs ``vta run --hw hwconfigs/pynq.yaml resnet18`` in a child process with a fresh cache file
(``VTA_CACHE``): once cold (every kernel compiled, the model built and calibrated), then
``--warm`` times warm (the compile cache answers every kernel and the built model). With
``--before DIR`` (another checkout, e.g. main's) the same runs of that tree are interleaved
with this one's, run for run, so both see the same machine load. For each run: wall seconds,
CPU seconds (user + system of the child, from ``wait4``), the load average before it, and the
run's own breakdown (the report's seconds line: startup, graph, compile, simulate, check,
interpreter, other; an older tree prints fewer parts) and ``wall - simulate``, the issue's
warm target (<= 0.5 s besides the simulation, <= 1 s in all).

    python bench/warm_run.py [--warm 3] [--before /work/main]

Prints a table and writes bench/results/warm_run.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
#: the report's seconds line: ``name 1.23 s`` pairs
_PART = re.compile(r"(startup|graph|compile|simulate|check|interpreter|other|wall) "
                   r"([0-9.]+) s")


def one_run(tree: Path, cache: Path) -> dict[str, Any]:
    """``vta run resnet18`` of ``tree`` with ``cache``: its wall and CPU seconds, the load
    before it and its seconds line's parts."""
    argv = [sys.executable, "-m", "vta.cli", "run", "--hw", "hwconfigs/pynq.yaml", "resnet18"]
    env = {**os.environ, "PYTHONPATH": str(tree), "VTA_CACHE": str(cache),
           "OPENBLAS_NUM_THREADS": "1"}
    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    child = subprocess.Popen(argv, cwd=tree, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    out, err = child.communicate()
    wall = time.perf_counter() - t0
    if child.returncode != 0:
        raise SystemExit(f"{tree}: vta run exited {child.returncode}: {err.strip()[-500:]}")
    line = next((x for x in out.splitlines() if "simulate" in x and " s" in x), "")
    parts = {k: float(v) for k, v in _PART.findall(line)}
    return {"wall_s": round(wall, 3), "load_1min": round(load, 2), "parts": parts,
            "cache_line": err.strip().splitlines()[-1] if err.strip() else "",
            "passed": "PASS" in out}


def cpu_seconds(before: Any) -> float:
    """CPU seconds of the children reaped since ``before`` (``resource.getrusage``)."""
    now = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (now.ru_utime - before.ru_utime) + (now.ru_stime - before.ru_stime)


def measured(tree: Path, cache: Path) -> dict[str, Any]:
    """``one_run`` with the child's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    r = one_run(tree, cache)
    r["cpu_s"] = round(cpu_seconds(before), 3)
    sim = r["parts"].get("simulate")
    r["wall_minus_simulate_s"] = round(r["wall_s"] - sim, 3) if sim is not None else None
    return r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--warm", type=int, default=3, help="warm runs per tree")
    ap.add_argument("--before", default=None, help="another checkout to run alongside")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "warm_run.json"))
    a = ap.parse_args()
    trees = {"this": ROOT}
    if a.before:
        trees = {"before": Path(a.before).resolve(), "this": ROOT}
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    with tempfile.TemporaryDirectory() as d:
        caches = {k: Path(d) / f"{k}.sqlite" for k in trees}
        for i in range(1 + a.warm):
            for k, tree in trees.items():
                r = measured(tree, caches[k])
                r["kind"] = "cold" if i == 0 else "warm"
                runs[k].append(r)
                print(f"{k:>6} {r['kind']:4}  wall {r['wall_s']:6.2f} s  cpu {r['cpu_s']:6.2f} s"
                      f"  load {r['load_1min']:4.1f}  {r['parts']}", flush=True)
    summary = {}
    for k, rs in runs.items():
        warm = [r for r in rs if r["kind"] == "warm"]
        summary[k] = {
            "tree": str(trees[k]),
            "cold_wall_s": rs[0]["wall_s"], "cold_cpu_s": rs[0]["cpu_s"],
            "warm_wall_s_median": statistics.median(r["wall_s"] for r in warm),
            "warm_cpu_s_median": statistics.median(r["cpu_s"] for r in warm),
            "warm_wall_minus_simulate_s_median": statistics.median(
                r["wall_minus_simulate_s"] for r in warm),
            "warm_parts_median": {p: statistics.median(r["parts"][p] for r in warm)
                                  for p in warm[0]["parts"]}}
    print(f"{'tree':>6} {'cold wall':>9} {'cold cpu':>8} {'warm wall':>9} {'warm cpu':>8} "
          f"{'warm - simulate':>15}")
    for k, s in summary.items():
        print(f"{k:>6} {s['cold_wall_s']:>9.2f} {s['cold_cpu_s']:>8.2f} "
              f"{s['warm_wall_s_median']:>9.2f} {s['warm_cpu_s_median']:>8.2f} "
              f"{s['warm_wall_minus_simulate_s_median']:>15.2f}")
    Path(a.out).write_text(json.dumps({
        "command": "vta run --hw hwconfigs/pynq.yaml resnet18 (VTA_CACHE=a fresh file; "
                   "OPENBLAS_NUM_THREADS=1)",
        "target": "warm <= 1 s wall; warm minus simulate <= 0.5 s",
        "note": "medians of the warm runs; runs of the trees interleaved; CPU = the child's "
                "user + system seconds; load = 1-minute load average before each run",
        "summary": summary, "runs": runs}, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
