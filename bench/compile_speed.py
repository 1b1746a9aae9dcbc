"""Compile speed: ResNet-18's layers one by one, and ``vta run resnet18`` cold and warm.

Three measurements (issue 22), printed as tables and written to bench/results/compile_speed.json:

* per layer (C1-C11): ``AccelTarget(hw).compile_layer`` (what ``vta run resnet18:Ck``
  compiles: the model ranks the space, its best candidates are compiled and timed on the
  timing-only simulator) in this process with no compile cache and the compiler's memos
  cleared before every run (the cold figure): the median of ``--runs`` of its wall and of the
  process's CPU seconds (on a shared machine the CPU time moves much less with the load than
  the wall), and the chosen schedule;
* the whole graph: the wall and the CPU seconds of ``vta run --hw HW resnet18`` as a
  subprocess, cold (a fresh, empty cache file each run: everything compiled, the programs
  kept) and warm (the same file again: nothing compiled), median of ``--graph-runs``, with
  the compile and simulate seconds the run reports;
* how many candidates are compiled (the VTA pipeline run, ``compile_func``) and timed (the
  cost oracle called) for C1-C11 one by one and for the whole ResNet-18 graph's kernels
  (``compile_graph`` in this process, serially: the requests ``vta run`` makes, without its
  worker processes), counted by wrapping the two (``_Counts``); not timed;
* with ``--breakdown`` (a checkout with ``cost.program_bound``): C1-C11's candidates' CPU
  seconds by stage (``op_compute``, ``lower_op``, the pass pipeline, the lower bound, the
  timing-only simulation), and the choice among the compiled candidates by branch and bound
  (``driver.fastest``) against timing every one (the loop it replaced), alternately
  ``--choice-reps`` times (median).

"Cold" per layer also forgets every memo of the compiler's modules (the schedule model's
rankings, its instruction timings, isl's boxes: every ``functools`` cache of ``vta.compiler``),
as a fresh process would.

The tuning cache changes schedules, so every run gets its own cache file (``VTA_CACHE``) and the
user's is never read. ``--before CHECKOUT`` first runs this same script against another
checkout (e.g. main at the commit before a change: ``git worktree add`` or ``git archive`` it
somewhere) in a subprocess, then this one, back to back, and prints both with the ratio; the
load average before each half is recorded (the machine may be shared). A vta without a
compile cache compiles every run (warm = cold).

CPU seconds swing by tens of percent on a shared machine; ``--callgrind`` instead counts the
instructions (valgrind's callgrind, ``bench/callgrind.py``) of compiling C1-C11 one by one as
the per-layer figure does, in a fresh interpreter (less one that compiles nothing), for this
tree and ``--before``'s side by side, their chosen schedules checked equal; nothing else is
measured in that mode, and without valgrind it says so and exits 0.

    OPENBLAS_NUM_THREADS=1 python bench/compile_speed.py [--hw hwconfigs/pynq.yaml] [--runs 3]
        [--graph-runs 3] [--count-configs all] [--breakdown] [--before CHECKOUT]
        [--out bench/results/compile_speed.json]
    python bench/compile_speed.py --callgrind [--before CHECKOUT] [--out FILE]
"""

from __future__ import annotations

import argparse
import collections
import functools
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
from types import SimpleNamespace
from typing import Any

import callgrind
from rich.console import Console
from rich.table import Table

import vta
from vta.compiler.accel import cost as accel_cost
from vta.compiler.accel import driver
from vta.compiler.accel.ops import window_packed
from vta.compiler.accel.pipeline import compile_func
from vta.compiler.accel.schedules import model
from vta.compiler.accel.schedules.build import lower_op
from vta.compiler.ir.lower import lower
from vta.compiler.ops.window import WindowSpec
from vta.compiler.ops.workloads import RESNET18, resolve
from vta.config import HwConfig
from vta.graph.compile import compile_graph
from vta.graph.models import MODELS
from vta.isa import Program, definition_of
from vta.run.targets import AccelTarget

HERE = Path(__file__).resolve().parent


def _clear_memos() -> None:
    """Forget what the compiler memoised in this process (a cold compile): the schedule
    model's rankings and every ``functools`` cache of a ``vta.compiler`` module."""
    getattr(model, "_RANKED", {}).clear()
    for name, mod in list(sys.modules.items()):
        if not name.startswith("vta.compiler") or mod is None:
            continue
        for obj in list(vars(mod).values()):
            if isinstance(obj, functools._lru_cache_wrapper):
                obj.cache_clear()


def per_layer(hw: HwConfig, runs: int) -> list[dict[str, object]]:
    rows = []
    for layer in RESNET18:
        w = resolve(f"resnet18:{layer}")
        walls, cpus = [], []
        c = None
        for _ in range(runs):
            _clear_memos()
            t = AccelTarget(hw)
            t0, c0 = time.perf_counter(), time.process_time()
            c = t.compile_layer(w)
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        assert c is not None
        rows.append({"layer": layer, "median_s": statistics.median(walls), "runs": walls,
                     "cpu_median_s": statistics.median(cpus), "cpu_runs": cpus,
                     "schedule": _schedule_text(c)})
    return rows


def _schedule_text(c: Any) -> str:
    """A compiled layer's chosen schedule, as the tables print it."""
    s = c.schedule
    return f"{c.fold_kind} tco={s.tco} tci={s.tci} th={s.th} tw={s.tw} vt={s.vthreads}{s.vt_axis}"


def _callgrind_child(hw_path: str, work: bool) -> int:
    """``--callgrind-child``: compile C1-C11 one by one as ``per_layer`` does (no compile
    cache, a fresh process's memos) and print their chosen schedules as JSON; without
    ``work``, all but the compiles (the imports, the config, the workloads), the process
    ``callgrind_compare`` subtracts."""
    hw = HwConfig.from_yaml(hw_path)
    workloads = [resolve(f"resnet18:{layer}") for layer in RESNET18]
    chosen = [_schedule_text(AccelTarget(hw).compile_layer(w)) for w in workloads] \
        if work else []
    print(json.dumps({"schedules": chosen}))
    return 0


def callgrind_compare(args: argparse.Namespace) -> int:
    """``--callgrind``: instructions (valgrind's Ir, ``callgrind.py``) of compiling C1-C11 one
    by one in a fresh interpreter (the process less one that compiles nothing), this tree and
    ``--before``'s, printed side by side and written to ``--out``; the chosen schedules must
    agree. A fresh process's compile is what ``vta run resnet18:Ck`` and a cold graph's
    workers pay, with no CPU-time noise."""
    if not callgrind.available():
        print("compile_speed --callgrind: valgrind is not installed (no valgrind on PATH): "
              "skipped, nothing measured")
        return 0
    trees = [("this tree", str(Path(vta.__file__).resolve().parents[1]))]
    if args.before is not None:
        trees.insert(0, ("before", str(Path(args.before).resolve())))
    rows: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for label, root in trees:
            print(f"callgrind: {label} ({root}) ...", flush=True)
            env = {**callgrind.child_env(root), "VTA_CACHE": str(tmp / f"{len(rows)}.sqlite")}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--hw", args.hw,
                   "--callgrind-child"]
            subprocess.run([*cmd, "compile"], env=env, capture_output=True, check=False)  # .pyc
            ir_none, _ = callgrind.count([*cmd, "none"], env, tmp / f"{label}.none.out")
            ir_all, out = callgrind.count([*cmd, "compile"], env, tmp / f"{label}.all.out")
            rows[label] = {"tree": root, "process_ir": ir_all, "no_compile_ir": ir_none,
                           "compile_ir": ir_all - ir_none,
                           "schedules": json.loads(out.strip().splitlines()[-1])["schedules"]}
    table = Table(title="callgrind instructions (Ir) of compiling C1-C11 one by one, fresh "
                        "interpreter, no compile cache")
    for col in ("tree", "compile Ir", "process Ir", "no-compile Ir"):
        table.add_column(col, justify="left" if col == "tree" else "right")
    for label, r in rows.items():
        table.add_row(label, *(f"{r[k] / 1e6:,.1f}M" for k in (
            "compile_ir", "process_ir", "no_compile_ir")))
    console = Console()
    console.print(table)
    same = len({tuple(r["schedules"]) for r in rows.values()}) == 1
    result: dict[str, Any] = {"mode": "callgrind", "hw": args.hw, "layers": list(RESNET18),
                              "load_average": [round(x, 2) for x in os.getloadavg()],
                              "trees": rows, "same_schedules": same}
    if "before" in rows:
        b, a = rows["before"]["compile_ir"], rows["this tree"]["compile_ir"]
        result["compile_ir_ratio"] = a / b
        console.print(f"compile Ir this tree / before: {a / b:.4f} ({(a - b) / 1e6:+,.1f}M); "
                      f"same schedules: {same}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0 if same else 1


class _Counts:
    """Counts the VTA pipeline runs of the conv/matmul driver and of the window ops (their
    modules' ``compile_func``, wrapped while it is entered) and the oracle's calls
    (``cost``)."""

    def __init__(self, hw: HwConfig) -> None:
        self.target = AccelTarget(hw)
        self.compiled = self.timed = 0
        self._saved: list[tuple[Any, Any]] = []

    def cost(self, program: Program) -> int:
        self.timed += 1
        return self.target.cycles(program)

    def __enter__(self) -> _Counts:
        for mod in (driver, window_packed):
            orig = getattr(mod, "compile_func")  # noqa: B009 (a name each module imported)
            self._saved.append((mod, orig))

            def counted(func: Any, hw: HwConfig, _orig: Any = orig) -> Any:
                self.compiled += 1
                return _orig(func, hw)
            setattr(mod, "compile_func", counted)  # noqa: B010
        return self

    def __exit__(self, *exc: object) -> None:
        for mod, orig in self._saved:
            setattr(mod, "compile_func", orig)  # noqa: B010
        self._saved.clear()


def layer_candidates(hw: HwConfig) -> dict[str, dict[str, int]]:
    """Candidates compiled and timed for each of C1-C11 on ``hw``."""
    layers = {}
    for layer in RESNET18:
        _clear_memos()
        with _Counts(hw) as n:
            driver.compile_workload(resolve(f"resnet18:{layer}"), hw, cost=n.cost)
        layers[layer] = {"compiled": n.compiled, "timed": n.timed}
    return layers


def candidates(hw: HwConfig) -> dict[str, Any]:
    """Candidates compiled and timed per layer (C1-C11) and for the whole graph's kernels."""
    layers = layer_candidates(hw)
    _clear_memos()
    with _Counts(hw) as n:
        g = compile_graph(MODELS["resnet18"](batch=1), hw, cost=n.cost)
    kernels = sum(p is not None for p in g.programs)
    return {"layers": layers,
            "layers_compiled": sum(v["compiled"] for v in layers.values()),
            "layers_timed": sum(v["timed"] for v in layers.values()),
            "graph": {"kernels": kernels, "compiled": n.compiled, "timed": n.timed}}


def _time_all(cands: list[Any], compile_one: Any, cost: Any, hw: HwConfig) -> Any:
    """The choice before branch and bound: every candidate timed, the first of the fewest
    cycles kept."""
    built = [compile_one(c) for c in cands]
    best = min(range(len(built)), key=lambda k: (cost(built[k].program), k))
    return built[best]


def breakdown(hw: HwConfig, reps: int) -> dict[str, Any] | None:
    """C1-C11's candidates' CPU seconds by stage (one cold pass), and the choice among the
    compiled candidates by branch and bound against timing all (``reps`` alternations,
    median); None for a vta without ``cost.program_bound``."""
    bound = getattr(accel_cost, "program_bound", None)
    fastest = getattr(driver, "fastest", None)
    if bound is None or fastest is None:
        return None
    _clear_memos()
    target = AccelTarget(hw)
    stages = dict.fromkeys(("op_compute", "lower_op", "pipeline", "bound", "simulate"), 0.0)
    built: dict[str, list[Any]] = {}
    pairs: dict[str, list[tuple[int, int]]] = {}  # each candidate's (bound, cycles)
    for layer in RESNET18:
        w = resolve(f"resnet18:{layer}")
        problem = driver.space_of(w, hw)
        built[layer] = []
        for p in driver.default_points(w, hw):
            fold, sch = problem.schedule(p)
            c0 = time.process_time()
            op = driver.op_compute(w, hw, sch, w.epilogue, fold)
            c1 = time.process_time()
            func = lower_op(op, hw, sch)
            c2 = time.process_time()
            prog = compile_func(func, hw).program
            c3 = time.process_time()
            lower = bound(prog, hw)
            c4 = time.process_time()
            cycles = target.cycles(prog)
            c5 = time.process_time()
            pairs.setdefault(layer, []).append((lower, cycles))
            for k, dt in zip(stages, (c1 - c0, c2 - c1, c3 - c2, c4 - c3, c5 - c4),
                             strict=True):
                stages[k] += dt
            built[layer].append(SimpleNamespace(program=prog))
    choice: dict[str, list[float]] = {"branch_and_bound": [], "time_all": []}
    for _ in range(reps):
        for name, choose in (("branch_and_bound", fastest), ("time_all", _time_all)):
            c0 = time.process_time()
            for layer in RESNET18:
                choose(built[layer], lambda c: c, target.cycles, hw)
            choice[name].append(time.process_time() - c0)
    pool = _maxpool(hw, target, bound)
    ratios = [b / c for v in pairs.values() for b, c in v]
    spread = [max(c for _, c in v) / min(c for _, c in v) - 1 for v in pairs.values()]
    return {"candidates": sum(len(v) for v in built.values()), "stage_cpu_s": stages,
            "bound_cycles": pairs, "bound_over_cycles": [min(ratios), max(ratios)],
            "candidates_spread": [min(spread), max(spread)], "maxpool": pool,
            "choice_cpu_s": {k: statistics.median(v) for k, v in choice.items()},
            "choice_cpu_runs": choice}


#: ResNet-18's max-pool (after C1), as its graph places it on the accelerator
MAXPOOL = WindowSpec("max", 1, 64, 112, 112, 3, 2, 1)


def _maxpool(hw: HwConfig, target: AccelTarget, bound: Any) -> list[dict[str, Any]]:
    """Each ``compile_window`` candidate of ResNet-18's max-pool: its instructions by
    definition, the CPU seconds of its lowering and pass pipeline, its bound and cycles."""
    op = window_packed.window_compute(MAXPOOL, hw)
    rows = []
    for s in window_packed.candidates(MAXPOOL, hw)[:window_packed.REFINE]:
        c0 = time.process_time()
        func = lower(window_packed.schedule_window(op, MAXPOOL, hw, s), op.args, op.name)
        c1 = time.process_time()
        prog = compile_func(func, hw).program
        c2 = time.process_time()
        kinds = collections.Counter(definition_of(i).name for i in prog.instructions)
        rows.append({"schedule": repr(s), "instructions": len(prog.instructions),
                     "by_definition": dict(kinds), "lower_cpu_s": c1 - c0,
                     "pipeline_cpu_s": c2 - c1, "bound": bound(prog, hw),
                     "cycles": target.cycles(prog)})
    return rows


def by_config(names: str) -> dict[str, dict[str, int]]:
    """C1-C11's candidates compiled and timed in all, per shipped config (``names``)."""
    shipped = sorted(p.stem for p in (HERE.parent / "hwconfigs").glob("*.yaml"))
    out = {}
    for name in shipped if names == "all" else names.split(","):
        if name not in shipped:
            raise SystemExit(f"--count-configs: no hwconfigs/{name}.yaml (shipped: "
                             f"{', '.join(shipped)})")
        layers = layer_candidates(HwConfig.from_yaml(str(HERE.parent / "hwconfigs" /
                                                         f"{name}.yaml")))
        out[name] = {"compiled": sum(v["compiled"] for v in layers.values()),
                     "timed": sum(v["timed"] for v in layers.values())}
    return out


def _graph_run(hw_path: str, cache: Path) -> dict[str, float]:
    env = {**os.environ, "VTA_CACHE": str(cache), "OPENBLAS_NUM_THREADS": "1"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    # run in the checkout this process imported vta from: ``-m`` puts the working directory
    # first on the path, so another checkout's vta would run instead
    p = subprocess.run([sys.executable, "-m", "vta.cli", "run", "--hw", hw_path, "resnet18"],
                       capture_output=True, text=True, env=env, check=False,
                       cwd=Path(vta.__file__).resolve().parents[1])
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if p.returncode != 0:
        raise SystemExit(f"vta run failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    m = re.search(r"compile ([\d.]+) s\s+simulate ([\d.]+) s", p.stdout)
    compiled = re.search(r"(\d+) from the cache, (\d+) compiled", p.stderr)
    total = re.search(r"^total ([\d,]+) cycles", p.stdout, re.M)
    return {"wall_s": wall, "cpu_s": cpu, "compile_s": float(m.group(1)) if m else float("nan"),
            "cycles": int(total.group(1).replace(",", "")) if total else -1,
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
    ap.add_argument("--count-configs", metavar="NAMES", default="",
                    help="also count C1-C11's candidates compiled/timed on these shipped "
                         "configs (comma-separated stems of hwconfigs/*.yaml, or 'all')")
    ap.add_argument("--breakdown", action="store_true",
                    help="also C1-C11's candidates' CPU by stage and the choice's CPU by branch "
                         "and bound against timing every candidate")
    ap.add_argument("--choice-reps", type=int, default=5)
    ap.add_argument("--before", metavar="CHECKOUT",
                    help="first measure the vta of this checkout the same way (a subprocess)")
    ap.add_argument("--callgrind", action="store_true",
                    help="only count the instructions of compiling C1-C11 in a fresh "
                         "interpreter under valgrind's callgrind (this tree and --before's)")
    ap.add_argument("--callgrind-child", choices=("compile", "none"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.callgrind_child is not None:
        return _callgrind_child(args.hw, args.callgrind_child == "compile")
    if args.callgrind:
        return callgrind_compare(args)
    before = _before(args) if args.before else None
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as d:  # never the user's tuning cache
        os.environ["VTA_CACHE"] = str(Path(d) / "tune.sqlite")
        hw = HwConfig.from_yaml(args.hw)
        layers = per_layer(hw, args.runs)
    graph = whole_graph(args.hw, args.graph_runs) if args.graph_runs > 0 else None
    counts = candidates(hw)
    if args.count_configs:
        counts["configs"] = by_config(args.count_configs)
    split = breakdown(hw, args.choice_reps) if args.breakdown else None

    meds = [float(r["median_s"]) for r in layers]  # type: ignore[arg-type]
    cpu = [float(r["cpu_median_s"]) for r in layers]  # type: ignore[arg-type]
    result: dict[str, Any] = {
        "hw": hw.name, "vta": str(Path(vta.__file__).resolve().parent.parent),
        "runs": args.runs, "layers": layers,
        "layer_median_s": statistics.median(meds), "layer_sum_s": sum(meds),
        "layer_cpu_median_s": statistics.median(cpu), "layer_cpu_sum_s": sum(cpu),
        "graph": graph, "candidates": counts, "breakdown": split, "cpus": os.cpu_count(),
        "load_avg": load}
    _print(result, before, args)
    if before is not None:
        result = {"command": " ".join(["python", *sys.argv]), "before": before,
                  "after": result}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {args.out}")
    return 0


def _before(args: argparse.Namespace) -> dict[str, Any]:
    """This script's result for the vta of ``args.before`` (run first, in a subprocess)."""
    checkout = Path(args.before).resolve()
    with tempfile.TemporaryDirectory() as d:
        out = Path(d) / "before.json"
        env = {**os.environ, "PYTHONPATH": str(checkout), "OPENBLAS_NUM_THREADS": "1"}
        subprocess.run([sys.executable, str(Path(__file__).resolve()), "--hw", args.hw,
                        "--runs", str(args.runs), "--graph-runs", str(args.graph_runs),
                        "--count-configs", args.count_configs, "--out", str(out),
                        *(["--breakdown"] if args.breakdown else []),
                        "--choice-reps", str(args.choice_reps)],
                       env=env, check=True, cwd=checkout)
        data: dict[str, Any] = json.loads(out.read_text())
        return data


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.1f}x" if b > 0 else "-"


def _print(after: dict[str, Any], before: dict[str, Any] | None,
           args: argparse.Namespace) -> None:
    """The per-layer and whole-graph tables, before beside after when there is a before."""
    con = Console(width=160)  # the tables unwrapped in a log
    t = Table(title=f"per-layer compile on {after['hw']} (median of {args.runs}, cold)")
    cols = ["layer", "wall s", "cpu s", "schedule"] if before is None else \
        ["layer", "wall before", "wall after", "cpu before", "cpu after", "cpu ratio",
         "schedule"]
    for col in cols:
        t.add_column(col)
    old = {r["layer"]: r for r in before["layers"]} if before else {}
    for r in after["layers"]:
        if before is None:
            t.add_row(str(r["layer"]), f"{r['median_s']:.3f}", f"{r['cpu_median_s']:.3f}",
                      str(r["schedule"]))
            continue
        b = old[r["layer"]]
        same = "" if b["schedule"] == r["schedule"] else f" (before: {b['schedule']})"
        t.add_row(str(r["layer"]), f"{b['median_s']:.3f}", f"{r['median_s']:.3f}",
                  f"{b['cpu_median_s']:.3f}", f"{r['cpu_median_s']:.3f}",
                  _ratio(b["cpu_median_s"], r["cpu_median_s"]), f"{r['schedule']}{same}")
    a_med, a_sum = float(after["layer_median_s"]), float(after["layer_sum_s"])
    a_cpu, a_csum = float(after["layer_cpu_median_s"]), float(after["layer_cpu_sum_s"])
    if before is None:
        t.add_row("median", f"{a_med:.3f}", f"{a_cpu:.3f}",
                  f"sum {a_sum:.2f} s wall, {a_csum:.2f} s cpu")
    else:
        b_med, b_cpu = float(before["layer_median_s"]), float(before["layer_cpu_median_s"])
        b_csum = float(before["layer_cpu_sum_s"])
        t.add_row("median", f"{b_med:.3f}", f"{a_med:.3f}", f"{b_cpu:.3f}", f"{a_cpu:.3f}",
                  _ratio(b_cpu, a_cpu), f"cpu sum {b_csum:.2f} s -> {a_csum:.2f} s")
    con.print(t)
    graph = after["graph"]
    if graph is not None:
        g = Table(title=f"vta run --hw {Path(args.hw).name} resnet18 (median of "
                        f"{args.graph_runs})")
        for col in ("checkout", "run", "wall s", "cpu s", "compile s", "simulate s",
                    "kernels compiled", "cycles"):
            g.add_column(col)
        halves = [("before", before), ("after", after)] if before else [("this", after)]
        for who, res in halves:
            for name, rows in res["graph"].items():
                g.add_row(who, name, f"{_median(rows, 'wall_s'):.2f}",
                          f"{_median(rows, 'cpu_s'):.2f}", f"{_median(rows, 'compile_s'):.2f}",
                          f"{_median(rows, 'simulate_s'):.2f}", str(rows[0]["compiled"]),
                          f"{rows[0].get('cycles', -1):,}")
        con.print(g)
    halves = [("before", before), ("after", after)] if before else [("this", after)]
    c = Table(title="candidates compiled / timed (cost oracle calls)")
    for col in ("checkout", *RESNET18, "C1-C11", "resnet18 graph"):
        c.add_column(col)
    for who, res in halves:
        n = res.get("candidates")
        if n is None:
            continue
        c.add_row(who, *(f"{n['layers'][k]['compiled']}/{n['layers'][k]['timed']}"
                         for k in RESNET18),
                  f"{n['layers_compiled']}/{n['layers_timed']}",
                  f"{n['graph']['compiled']}/{n['graph']['timed']} "
                  f"({n['graph']['kernels']} kernels)")
    con.print(c)
    if any("configs" in (res.get("candidates") or {}) for _, res in halves):
        k = Table(title="C1-C11 candidates compiled / timed per shipped config")
        names = next(res["candidates"]["configs"] for _, res in halves
                     if "configs" in (res.get("candidates") or {}))
        for col in ("checkout", *names):
            k.add_column(col)
        for who, res in halves:
            got = (res.get("candidates") or {}).get("configs")
            if got:
                k.add_row(who, *(f"{got[n]['compiled']}/{got[n]['timed']}" for n in names))
        con.print(k)
    split = after.get("breakdown")
    if split:
        b = Table(title=f"C1-C11's {split['candidates']} candidates: CPU s by stage (cold), "
                        f"and the choice among them (median)")
        for col in ("op_compute", "lower_op", "pipeline", "bound", "simulate",
                    "choice: branch and bound", "choice: time all"):
            b.add_column(col)
        st, ch = split["stage_cpu_s"], split["choice_cpu_s"]
        b.add_row(*(f"{st[k]:.3f}" for k in ("op_compute", "lower_op", "pipeline", "bound",
                                             "simulate")),
                  f"{ch['branch_and_bound']:.3f}", f"{ch['time_all']:.3f}")
        con.print(b)
        lo, hi = split["bound_over_cycles"]
        a, z = split["candidates_spread"]
        con.print(f"bound / simulated cycles over the candidates: {lo:.4f}-{hi:.4f}; a layer's "
                  f"slowest candidate over its fastest: +{100 * a:.2f} % to +{100 * z:.2f} %")
        for r in split["maxpool"]:
            con.print(f"max-pool {r['schedule']}: {r['instructions']} instructions "
                      f"({r['by_definition']}), lower {r['lower_cpu_s']:.3f} s, pipeline "
                      f"{r['pipeline_cpu_s']:.3f} s CPU, bound {r['bound']}, cycles "
                      f"{r['cycles']}")
    loads = [("before", before), ("after", after)] if before else [("run", after)]
    con.print("load average (1, 5, 15 min) at the start: " + "; ".join(
        f"{who} {', '.join(f'{x:.2f}' for x in res['load_avg'])}"
        for who, res in loads) + f"; {os.cpu_count()} CPUs")


if __name__ == "__main__":
    raise SystemExit(main())
