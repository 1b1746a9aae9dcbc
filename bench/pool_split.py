"""How the whole-graph worker pools split their work (issue 22): per worker, the CPU seconds of
its tasks, for the compile (``vta.run.compile_pool``, every kernel compiled: no cache) and the
side-by-side simulation (``vta.run.graph``), with two workers.

On two free cores a phase's wall is about its busier worker's CPU seconds plus the parent's
share, whatever the load the machine had when this ran (CPU seconds, unlike wall times, do
not stretch with other jobs), so this estimates what the pools give on a quiet machine where
none is at hand. Checks that the run is the serial run's (cycles) and passes.

    python bench/pool_split.py [--model resnet18] [--hw hwconfigs/pynq.yaml]

Prints the split and writes bench/results/pool_split.json.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from vta.config import HwConfig
from vta.graph import models
from vta.run import compile_pool, pool
from vta.run import graph as run_graph_module
from vta.run.targets import AccelTarget

ROOT = Path(__file__).resolve().parents[1]


def _timed_compile(item: Any) -> tuple[Any, int, float]:
    c0 = time.process_time()
    out = compile_pool._run_task(item)
    return out, os.getpid(), time.process_time() - c0


def _timed_sim(item: Any) -> tuple[Any, int, float]:
    c0 = time.process_time()
    out = run_graph_module._simulate_step(item)
    return out, os.getpid(), time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="resnet18", choices=sorted(models.MODELS))
    ap.add_argument("--hw", default=str(ROOT / "hwconfigs" / "pynq.yaml"))
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "pool_split.json"))
    a = ap.parse_args()
    hw = HwConfig.load(a.hw)
    target = AccelTarget(hw)
    graph = models.MODELS[a.model](batch=1)
    per: dict[str, dict[int, float]] = {}
    tasks: dict[str, int] = {}
    timed: dict[str, Callable[[Any], tuple[Any, int, float]]] = {
        "_run_task": _timed_compile, "_simulate_step": _timed_sim}

    class TimedPool(pool.ForkPool):  # type: ignore[type-arg]
        """The runs' pool on two workers, each task timed in its worker."""

        def __init__(self, fn: Any, job: Any, jobs: int | None = None,
                     expect: int | None = None) -> None:
            self.name = "compile" if fn.__name__ == "_run_task" else "simulate"
            super().__init__(timed[fn.__name__], job, 2, expect)

        def iter_results(self) -> Iterator[Any]:
            d = per.setdefault(self.name, {})
            n = 0
            for out, pid, cpu in super().iter_results():
                d[pid] = d.get(pid, 0.0) + cpu
                n += 1
                yield out
            tasks[self.name] = n

    compile_pool.ForkPool = TimedPool  # type: ignore[misc]
    run_graph_module.ForkPool = TimedPool  # type: ignore[misc]
    load = os.getloadavg()[0]
    c0 = time.process_time()
    cg = run_graph_module.compile_for(graph, target, jobs=2)
    c1 = time.process_time()
    image = models.random_image(0, graph.inputs[0].type.shape)
    r = run_graph_module.run_graph(cg, image, target=target, jobs=2)
    c2 = time.process_time()
    parent = {"compile": round(c1 - c0, 3), "simulate": round(c2 - c1, 3)}
    phases = {}
    for name, d in per.items():
        cpus = sorted((round(v, 3) for v in d.values()), reverse=True)
        phases[name] = {"tasks": tasks[name], "worker_cpu_s": cpus, "busier_worker_cpu_s": cpus[0],
                        "total_cpu_s": round(sum(cpus), 3), "parent_cpu_s": parent[name]}
        print(f"{name:>8}: {tasks[name]} tasks, workers' CPU {cpus} s (sum {sum(cpus):.2f} s), "
              f"the parent's {parent[name]:.2f} s")
    print(f"cycles {r.cycles:,}; {'PASS' if r.passed else 'FAIL'}")
    Path(a.out).write_text(json.dumps({
        "command": f"python bench/pool_split.py --model {a.model} --hw {a.hw}",
        "note": "CPU seconds per worker (time.process_time of its tasks) with two workers; "
                "the parent's CPU in the phase (the run phase includes the interpreter); load "
                "= 1-minute load average before",
        "load_1min": round(load, 2), "cycles": r.cycles, "passed": r.passed,
        "phases": phases}, indent=2) + "\n")
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
