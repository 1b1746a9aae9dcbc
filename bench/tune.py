"""Tuning benchmark: every ResNet-18 layer C1-C11 on pynq, default schedule against tuned.

Per layer: the space (points, points that fit), the default schedule's cycles (the analytic
model's three best timed by the timing-only simulator, what ``vta run`` compiles), the tuned
cycles (``vta tune``'s search, ``--trials`` points measured at most, seed 0, ``--workers``
local processes), the points measured and the tuning wall time; where the space has at most
``--exhaustive`` points that fit, every one of them is measured too and the tuned result's
distance to that exhaustive best is reported. Then every layer is asked again: a tuning the
cache has finished answers without building anything (the slowest such answer and the slowest
``vta run`` lookup are reported). The cache is a fresh file under the output directory unless
``--cache`` names one.

    python bench/tune.py [--layers C2,C11] [--trials 64] [--workers 2] [--exhaustive 2100]

Prints a table and writes bench/results/tune.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from vta.compiler.ops.workloads import RESNET18, RESNET18_REPEATS, resolve  # noqa: E402
from vta.config import HwConfig  # noqa: E402
from vta.tune.cache import Cache  # noqa: E402
from vta.tune.executor import LocalExecutor  # noqa: E402
from vta.tune.job import Job  # noqa: E402
from vta.tune.tuner import lookup, tune  # noqa: E402


def bench_layer(layer: str, hw: HwConfig, cache: Cache, ex: LocalExecutor, trials: int,
                exhaustive: int) -> dict[str, Any]:
    w = resolve(f"resnet18:{layer}")
    t0 = time.perf_counter()
    r = tune([Job(w, hw, trials=trials, seed=0)], ex, cache)[0]
    wall = time.perf_counter() - t0
    row: dict[str, Any] = {
        "layer": layer, "space": r.space_size, "valid": r.valid, "search": r.search,
        "default_cycles": r.default_cost, "tuned_cycles": r.best_cost,
        "gain": (r.default_cost / r.best_cost - 1) if r.best_cost and r.default_cost else 0.0,
        "trials": r.evaluated, "measured": r.measured, "reused": r.reused, "failed": r.failed,
        "tune_s": wall, "default": r.default.as_dict() if r.default else None,
        "tuned": r.best.as_dict() if r.best else None, "exhaustive_cycles": None,
        "exhaustive": None, "from_exhaustive": None, "exhaustive_s": None}
    if r.valid <= exhaustive:
        t1 = time.perf_counter()
        e = tune([Job(w, hw, trials=r.valid, search="exhaustive")], ex, cache)[0]
        row.update({"exhaustive_cycles": e.best_cost,
                    "exhaustive": e.best.as_dict() if e.best else None,
                    "from_exhaustive": (r.best_cost / e.best_cost - 1) if e.best_cost and
                    r.best_cost else None,
                    "default_from_exhaustive": (r.default_cost / e.best_cost - 1)
                    if e.best_cost and r.default_cost else None,
                    "exhaustive_s": time.perf_counter() - t1})
    return row


def table(rows: list[dict[str, Any]]) -> str:
    out = [f"{'layer':5} {'fit/space':>11} {'default':>11} {'tuned':>11} {'gain':>6} "
           f"{'trials':>6} {'tune s':>7} {'exhaustive':>11} {'tuned-ex':>8} {'dflt-ex':>8}"]
    for r in rows:
        ex = f"{r['exhaustive_cycles']:,.0f}" if r["exhaustive_cycles"] else "-"
        d = f"{r['from_exhaustive']:+.2%}" if r["from_exhaustive"] is not None else "-"
        dd = f"{r['default_from_exhaustive']:+.2%}" if r.get("default_from_exhaustive") \
            is not None else "-"
        out.append(f"{r['layer']:5} {r['valid']:>5}/{r['space']:<5} {r['default_cycles']:>11,.0f} "
                   f"{r['tuned_cycles']:>11,.0f} {r['gain']:>6.2%} {r['trials']:>6} "
                   f"{r['tune_s']:>7.1f} {ex:>11} {d:>8} {dd:>8}")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hw", default=str(ROOT / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--layers", default=",".join(RESNET18))
    ap.add_argument("--trials", type=int, default=64)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--exhaustive", type=int, default=2100,
                    help="measure every point of spaces with at most this many points that fit")
    ap.add_argument("--cache", default=None, help="the cache file (default: a fresh one)")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "tune.json"))
    a = ap.parse_args()
    hw = HwConfig.from_yaml(a.hw)
    layers = a.layers.split(",")
    tmp = tempfile.TemporaryDirectory()
    path = Path(a.cache) if a.cache else Path(tmp.name) / "tune.sqlite"
    rows = []
    with Cache(path) as cache, LocalExecutor(a.workers) as ex:
        for layer in layers:
            rows.append(bench_layer(layer, hw, cache, ex, a.trials, a.exhaustive))
            print(f"{layer}: {rows[-1]['tune_s']:.1f} s", file=sys.stderr, flush=True)
        hits, lookups = [], []
        for layer in layers:  # asked again: answered from the cache
            w = resolve(f"resnet18:{layer}")
            t0 = time.perf_counter()
            again = tune([Job(w, hw, trials=a.trials, seed=0)], ex, cache)[0]
            hits.append(time.perf_counter() - t0)
            assert again.from_cache and again.best_cost == rows[layers.index(layer)]["tuned_cycles"]
            t0 = time.perf_counter()
            assert lookup(cache, w, hw) is not None
            lookups.append(time.perf_counter() - t0)
    net = {k: sum(r[k] * RESNET18_REPEATS[r["layer"]] for r in rows)
           for k in ("default_cycles", "tuned_cycles")} if set(layers) == set(RESNET18) else None
    result = {"hw": hw.name, "trials": a.trials, "workers": a.workers, "seed": 0,
              "exhaustive_limit": a.exhaustive, "layers": rows,
              "tune_s_total": sum(r["tune_s"] for r in rows),
              "tune_s_max": max(r["tune_s"] for r in rows),
              "cache_hit_s_max": max(hits), "lookup_s_max": max(lookups), "network": net}
    print(table(rows))
    print(f"tuning {len(rows)} layers: {result['tune_s_total']:.0f} s with {a.workers} workers "
          f"(slowest layer {result['tune_s_max']:.1f} s); a finished tuning answered from the "
          f"cache in at most {result['cache_hit_s_max'] * 1e3:.1f} ms, vta run's lookup in "
          f"{result['lookup_s_max'] * 1e3:.1f} ms")
    if net:
        print(f"ResNet-18 (20 convolutions): default {net['default_cycles']:,.0f} cycles, tuned "
              f"{net['tuned_cycles']:,.0f} ({1 - net['tuned_cycles'] / net['default_cycles']:.2%}"
              f" fewer)")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1))
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
