"""``vta tune``, ``vta cache`` and ``vta sweep``: argument namespaces in, reports out.

``vta.cli.parser`` builds the parsers and ``vta.cli.main`` calls these; the environment
(``VTA_CACHE``, ``XDG_CACHE_HOME``) is read here, at the command line's edge, and passed down as
a path. Progress goes to stderr (a rich progress bar per job), reports and JSON to stdout.
``tuned_compile`` and ``tuned_picker`` are ``vta run``'s use of the cache's tuned schedules,
``vta.cli.cached`` holds the cache file's lookup and ``run_compile_cache``, the compile cache's
use (re-exported here).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vta.cli.cached import cache_path, load_plugins, open_cache_for, run_compile_cache, when
from vta.cli.parser import DEFAULT_HW, flag
from vta.compiler.accel import driver
from vta.compiler.ir.space import enumerate_space
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import (
    CONV_OPTIONS,
    LAYER_SHAPE_OPTIONS,
    Workload,
    resolve,
    resolve_network,
)
from vta.config import HwConfig
from vta.errors import GpuUnavailableError, SweepError, VtaError
from vta.gpu.runtime import require_cupy
from vta.run.gpu_workloads import make_workload
from vta.tune.cache import Cache
from vta.tune.executor import LocalExecutor, make_executor
from vta.tune.gpu import gpu_problem
from vta.tune.job import Job
from vta.tune.search import SEARCHES
from vta.tune.sweep import (
    StreamingCsv,
    load_grid,
    per_unit,
    plot,
    run_sweep,
    sweep_workloads,
    write_csv,
)
from vta.tune.tuner import cached_program, tune

__all__ = ["load_plugins", "cache_path", "tune_main", "cache_main", "sweep_main", "RichProgress",
           "tuned_compile", "tuned_picker", "sweep_table", "sweep_header", "sweep_row",
           "SweepProgress", "run_compile_cache"]


class RichProgress:
    """A rich progress bar per job on stderr (the tuner's ``Progress``)."""
    def __init__(self, quiet: bool = False) -> None:

        self._console = Console(stderr=True)
        # no refresh thread: worker processes are forked while the bar is live
        self._bar = Progress(TextColumn("{task.description:28}"), BarColumn(), MofNCompleteColumn(),
                             TimeElapsedColumn(), TextColumn("{task.fields[best]}"),
                             console=self._console, auto_refresh=False,
                             disable=quiet)
        self._tasks: dict[int, Any] = {}

    def __enter__(self) -> RichProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._bar.stop()

    def _name(self, job: Any) -> str:
        where = job.hw.name if job.hw is not None else f"cuda:{job.kernel}"
        return f"{job.workload.name} on {where}"[:28]

    def start(self, job: Any, total: int) -> None:
        self._tasks[id(job)] = self._bar.add_task(self._name(job), total=total, best="")
        self._bar.refresh()

    def advance(self, job: Any, best: float | None) -> None:
        t = self._tasks.get(id(job))
        if t is not None:
            self._bar.update(t, advance=1, best=f"best {best:,.0f}" if best else "")
            self._bar.refresh()

    def done(self, result: Any) -> None:
        t = self._tasks.get(id(result.job))
        if t is None:  # answered from the cache
            t = self._bar.add_task(self._name(result.job), total=1, best="")
        what = "cached" if result.from_cache else "done"
        best = f"best {result.best_cost:,.0f} ({what})" if result.best_cost else "no schedule fits"
        self._bar.update(t, completed=self._bar.tasks[t].total, best=best)
        self._bar.refresh()


# ------------------------------------------------------------- vta run: cached schedules


def _forced(args: argparse.Namespace, knobs: dict[str, Any]) -> bool:
    return any(v is not None for v in knobs.values()) or bool(args.no_latency_hiding)


def tuned_compile(args: argparse.Namespace, w: Any, hw: Any, epi: Any,
                  knobs: dict[str, Any]) -> tuple[Any, dict[str, Any]] | None:
    """``vta run``'s program from the cache's best schedule of ``w`` (with ``epi``; None: the
    layer's own), and what to say about it; None when the cache has none, is off or a knob is
    forced. A cache file that does not exist is not created."""
    if _forced(args, knobs) or args.no_cache:
        return None
    skipped: list[str] = []
    with open_cache_for(args, create=False) as cache:
        found = cached_program(cache, w, hw, epi, skipped) if cache is not None else None
    for why in skipped:
        print(f"vta: warning: {why}", file=sys.stderr)
    if found is None:
        return None
    c, point, trial = found
    return c, {"cache": str(cache_path(args)), "key": trial.key, "point": point.as_dict(),
               "cycles": trial.cost, "method": trial.method, "measured": when(trial.measured_at),
               "workload": w.name}


def tuned_picker(args: argparse.Namespace, hw: Any, raw: bool, knobs: dict[str, Any]
                 ) -> tuple[Any, list[dict[str, Any]]]:
    """For ``vta run`` of a network's layers: a function giving a layer's tuned program (or
    None), and the list it fills with what it used."""
    used: list[dict[str, Any]] = []

    def pick(w: Any) -> Any:
        got = tuned_compile(args, w, hw, Epilogue.none() if raw else None, knobs)
        if got is None:
            return None
        used.append(got[1])
        return got[0]

    return pick, used


# ---------------------------------------------------------------------------- vta tune


def _jobs(args: argparse.Namespace) -> tuple[list[Any], Any, dict[str, int]]:

    shape = {k: getattr(args, k) for k in LAYER_SHAPE_OPTIONS}
    layers = [s.strip().upper() for s in args.layers.split(",")] if args.layers else None
    net = resolve_network(args.workload, batch=args.batch, layers=layers, sizes=args.sizes,
                          **shape)
    if layers is not None and net is None:
        raise VtaError(f"--layers does not apply to {args.workload} (it picks layers of a "
                       f"network: resnet18)")
    wl = list(net.layers) if net is not None else \
        [(resolve(args.workload, args.sizes, batch=args.batch, **shape), 1)]

    hw = HwConfig.load(args.hw or DEFAULT_HW)
    if args.trials < 1:
        raise VtaError(f"--trials must be >= 1, got {args.trials}")
    jobs = [Job(w, hw, trials=args.trials, search=args.search, seed=args.seed or 0)
            for w, _ in wl]
    return jobs, hw, {w.name: n for w, n in wl}


def tune_main(args: argparse.Namespace) -> int:
    """``vta tune``: tune a workload (or a network's layers) and print best against default."""
    load_plugins(args)
    if args.target != "vta":
        return _tune_gpu(args)
    if args.search not in SEARCHES:
        raise VtaError(f"--search {args.search}: expected one of {', '.join(SEARCHES)}")
    jobs, hw, repeats = _jobs(args)
    if args.space:
        return _print_spaces(jobs, args.json)

    t0 = time.perf_counter()
    with open_cache_for(args, create=True) as cache, \
            make_executor(args.cluster, args.workers) as ex, \
            RichProgress(quiet=args.json) as progress:
        results = tune(jobs, ex, cache, progress)
        where = ex.description
    wall = time.perf_counter() - t0
    if args.json:
        print(json.dumps({"hw": hw.name, "executor": where, "seconds": wall,
                          "cache": None if args.no_cache else str(cache_path(args)),
                          "jobs": [r.summary() for r in results]}, indent=2, default=str))
        return 0
    print(_tune_table(results, repeats))
    print(f"tuned on {where} in {wall:.1f} s; cache: "
          f"{'off' if args.no_cache else cache_path(args)}")
    return 0


def _print_spaces(jobs: list[Any], as_json: bool) -> int:

    out = []
    for j in jobs:
        problem = driver.space_of(j.workload, j.hw)
        e = enumerate_space(problem)
        doms = {k: sorted({p[k] for p in problem.points()}, key=lambda v: (str(type(v)), v))
                for k in problem.knobs}
        out.append({"workload": j.workload.name, "space": problem.name, "size": e.size,
                    "valid": len(e.valid), "refused": dict(e.refused),
                    "examples": e.examples, "knobs": doms})
    if as_json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    for s in out:
        print(f"{s['workload']}: space {s['space']}, {s['size']} points, {s['valid']} fit")
        for k, v in s["knobs"].items():
            print(f"  {k:9} {', '.join(map(str, v))}")
        for why, n in s["refused"].items():
            print(f"  refused {n:6} {why}: e.g. {s['examples'][why]}")
    return 0


def _knobs(p: dict[str, Any] | None) -> str:
    if not p:
        return "-"
    vt = f" vt={p['vthreads']}{p['vt_axis'] if p['vthreads'] > 1 else ''}"
    fold = f" fold={p['fold']}" if p.get("fold", "none") != "none" else ""
    more = "".join(f" {k}={p[k]}" for k, d in (("order", "oc"), ("operands", "once"))
                   if p.get(k, d) != d)
    return f"{p['tco']}/{p['tci']}/{p['th']}/{p['tw']}{vt}{fold}{more}"


def _tune_table(results: list[Any], repeats: dict[str, int]) -> str:
    lines = [f"{'layer':14} {'space':>11} {'trials':>9} {'default':>11} {'tuned':>11} "
             f"{'gain':>6} {'s':>6}  tuned schedule (tco/tci/th/tw)"]
    tot_d = tot_b = 0.0
    for r in results:
        s = r.summary()
        trials = "cache" if r.from_cache else f"{r.measured}+{r.reused}"
        space = f"{r.valid}/{r.space_size}" if not r.from_cache else "-"
        d, b = r.default_cost or 0, r.best_cost or 0
        n = repeats.get(r.job.workload.name, 1)
        tot_d += d * n
        tot_b += b * n
        lines.append(f"{r.job.workload.name:14} {space:>11} {trials:>9} {d:>11,.0f} {b:>11,.0f} "
                     f"{(d / b - 1) if b else 0:>6.1%} {r.seconds:>6.1f}  {_knobs(s['best'])}")
    if len(results) > 1:
        lines.append(f"{'total':14} {'':>11} {'':>9} {tot_d:>11,.0f} {tot_b:>11,.0f} "
                     f"{(tot_d / tot_b - 1) if tot_b else 0:>6.1%}   (each layer x its "
                     f"repeats)")
    gain = (1 - tot_b / tot_d) if tot_d else 0.0
    lines.append(f"best vs default: {tot_b:,.0f} cycles against {tot_d:,.0f} ({gain:.1%} fewer); "
                 f"trials = measured now + taken from the cache")
    return "\n".join(lines)


# ---------------------------------------------------------------------------- vta cache


def cache_main(args: argparse.Namespace) -> int:
    """``vta cache list|show|clear|export``."""
    path = cache_path(args)
    if args.action in ("show",) and not args.key:
        raise VtaError("vta cache show needs a KEY (a prefix of one; 'vta cache list' shows "
                       "them)")
    if args.action not in ("show", "clear") and args.key:
        raise VtaError(f"vta cache {args.action} takes no KEY, got {args.key!r}")
    if not path.exists():
        if args.action == "show":
            raise VtaError(f"no tuning cache at {path} ('vta tune' writes one; --cache FILE or "
                           f"VTA_CACHE picks another)")
        if args.action != "export":
            print(f"no tuning cache at {path} yet")
        return 0

    with Cache(path, readonly=args.action != "clear") as c:
        if args.action == "list":
            return _cache_list(c, args.json)
        if args.action == "show":
            return _cache_show(c, c.find(args.key), args.json)
        if args.action == "clear":
            key = c.find(args.key) if args.key else None
            n = c.clear(key)
            print(f"cleared {n} trials{f' of {key}' if key else ''} from {path}")
            return 0
        return _cache_export(c, args.out)


def _cache_list(c: Any, as_json: bool) -> int:
    keys = c.keys()
    if as_json:
        print(json.dumps(keys, indent=2))
        return 0
    print(f"{len(keys)} keys in {c.path}")
    print(f"{'key':20} {'target':6} {'hw':16} {'trials':>6} {'best':>11} {'measured':16}  op")
    for k in keys:
        best = f"{k['best_cost']:,.0f}" if k["best_cost"] is not None else "-"
        print(f"{k['key']:20} {k['target']:6} {k['hw_name'][:16]:16} {k['trials']:>6} "
              f"{best:>11} {when(k['last_measured']):16}  {k['op']}")
    return 0


def _cache_show(c: Any, key: str, as_json: bool) -> int:
    info = next(k for k in c.keys() if k["key"] == key)
    trials = sorted(c.trials(key).values(), key=lambda t: (t.cost is None, t.cost or 0))
    if as_json:
        print(json.dumps({**info, "trials": [{"point": _point_json(t.point), "cost": t.cost,
                                              "refused": t.refused, "method": t.method,
                                              "measured_at": t.measured_at,
                                              "seconds": t.seconds, "host": t.host}
                                             for t in trials]}, indent=2))
        return 0
    for f in ("key", "op", "dtypes", "target", "hw_name", "hw_hash", "compiler", "space"):
        print(f"{f:9} {info[f]}")
    best = trials[0] if trials and trials[0].cost is not None else None
    if best is not None:
        print(f"best      {best.cost:,.0f} at {best.point} ({best.method}, "
              f"{when(best.measured_at)} on {best.host})")
    print(f"{len(trials)} trials, cheapest first:")
    for t in trials[:25]:
        cost = f"{t.cost:,.0f}" if t.cost is not None else f"refused: {t.refused}"
        print(f"  {cost:>11}  {t.point}  ({t.seconds:.2f} s, {when(t.measured_at)})")
    if len(trials) > 25:
        print(f"  ... {len(trials) - 25} more ('vta cache export' lists all)")
    return 0


def _point_json(text: str) -> Any:
    """A stored point as JSON; its text as it is when it does not parse (a damaged record)."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _cache_export(c: Any, out: str | None) -> int:
    if out is None:
        for rec in c.export():
            sys.stdout.write(json.dumps(rec) + "\n")
        return 0
    try:
        with open(out, "w") as handle:
            for rec in c.export():
                handle.write(json.dumps(rec) + "\n")
    except OSError as e:
        raise VtaError(f"--out {out}: {e.strerror or e}") from None
    return 0


# ---------------------------------------------------------------------------- vta sweep


def sweep_main(args: argparse.Namespace) -> int:
    """``vta sweep --grid FILE WORKLOAD...``: tune every workload on every hardware point,
    printing each point's row (and writing it to the CSV) as it finishes, then the Pareto
    front and the plot."""
    load_plugins(args)
    grid = load_grid(args.grid, force=args.force)
    sweep_workloads(args.workloads)  # a bad name is refused before any work
    if args.trials is not None and args.trials < 0:
        raise VtaError(f"--trials must be >= 0, got {args.trials}")
    prefix = Path(args.out) if args.out else Path(Path(args.grid).stem)
    csv_path, png_path = prefix.with_suffix(".csv"), prefix.with_suffix(".png")
    _writable(csv_path, png_path)  # before any work
    per = _per_what(args.workloads)
    width = max([len("point"), *(len(p.name) for p in grid.points)])
    rows = StreamingCsv(csv_path, grid.boards)
    with open_cache_for(args, create=True) as cache, \
            make_executor(args.cluster, args.workers) as ex, \
            SweepProgress(len(grid.points), quiet=args.json) as progress, rows:
        if not args.json:
            print(sweep_header(grid.boards, width, per))

        def on_point(p: Any) -> None:
            rows.add(p)
            progress.point_done()
            if not args.json:
                print(sweep_row(p, grid.boards, width))

        res = run_sweep(grid, args.workloads, ex, cache=cache, trials=args.trials,
                        seed=args.seed or 0, check=not args.no_check, progress=progress,
                        on_point=on_point)
        where = ex.description
    write_csv(res, csv_path)  # again, with the Pareto column
    plot(res, png_path)
    if args.json:
        print(json.dumps({**res.summary(), "csv": str(csv_path), "png": str(png_path),
                          "executor": where}, indent=2, default=str))
    else:
        front = [p.point.name for p in res.points if p.pareto]
        print(f"Pareto front ({len(front)}): {', '.join(front)}")
        print(f"{len(res.points)} points on {where} in {res.seconds:.1f} s; wrote {csv_path} "
              f"and {png_path}")
    bad = [p for p in res.points if p.passed is False]
    return 1 if bad else 0


def _writable(*paths: Path) -> None:
    """Make the outputs' directory and check each output can be written (a ``SweepError``
    naming the path, before hours of tuning)."""
    for path in paths:
        try:
            if path.parent != Path(""):
                path.parent.mkdir(parents=True, exist_ok=True)
            existed = path.exists()
            with open(path, "a"):
                pass
            if not existed:  # a probe: no empty file is left behind by a sweep that fails
                path.unlink()
        except OSError as e:
            raise SweepError(f"--out {path}: cannot write there: {e.strerror or e}") from None


def _per_what(workloads: list[str]) -> str:
    """The throughput unit of a sweep's workloads: frames for networks, runs for layers."""
    return "fr/s" if per_unit(workloads) == "frames" else "runs/s"


class SweepProgress(RichProgress):
    """One bar for a whole sweep (points finished of the grid's) on stderr, instead of a bar
    per job: a 10,000-point grid would draw 10,000 bars; the tuner's per-job calls count
    jobs under it."""

    def __init__(self, points: int, quiet: bool = False) -> None:
        super().__init__(quiet)
        self._sweep = self._bar.add_task("sweep: points", total=points, best="")
        self._jobs = 0

    def __enter__(self) -> SweepProgress:
        self._bar.start()
        return self

    def start(self, job: Any, total: int) -> None:
        pass

    def advance(self, job: Any, best: float | None) -> None:
        pass

    def done(self, result: Any) -> None:
        self._jobs += 1
        self._bar.update(self._sweep, best=f"{self._jobs:,} layer jobs tuned")
        self._bar.refresh()

    def point_done(self) -> None:
        self._bar.update(self._sweep, advance=1)
        self._bar.refresh()


def sweep_header(boards: Any, width: int, per: str = "fr/s") -> str:
    """The sweep table's header (``width``: the point column's)."""
    return (f"{'point':{width}} {'cycles':>12} {'default':>12} {per:>8} {'uJ':>10} "
            f"{'uJ*ms':>10} {'DSP':>5} "
            f"{'BRAM':>5} {'LUT':>7} " + " ".join(f"{b.name[:8]:>8}" for b in boards) +
            "  pareto check")


def sweep_row(p: Any, boards: Any, width: int) -> str:
    """One point's row of the sweep table (the Pareto column is known once all are done)."""
    if p.status != "ok":
        return f"{p.point.name:{width}} {p.status}: {p.reason}"
    e = p.resources
    fit = " ".join(f"{'fits' if p.fits[b.name] else 'NO':>8}" for b in boards)
    check = "-" if p.passed is None else ("ok" if p.passed else "BAD")
    return (f"{p.point.name:{width}} {p.cycles:>12,} {p.default_cycles:>12,} "
            f"{p.per_s:>8.2f} {p.energy_uj:>10,.2f} {p.edp:>10.4g} {e['dsp']:>5} "
            f"{e['bram36']:>5} {e['lut']:>7} {fit}  "
            f"{'*' if p.pareto else ' ':>6} {check}")


def sweep_table(res: Any) -> str:
    """The sweep's points: cycles, frames/s (runs/s for layers), energy per run (µJ) and
    energy-delay product (µJ·ms), resources, board fit, Pareto
    front (the point column as wide as the longest name: grid points are named by every field
    they set)."""
    boards = res.grid.boards
    w = max([len("point"), *(len(p.point.name) for p in res.points)])
    lines = [sweep_header(boards, w, _per_what(res.workloads))]
    lines += [sweep_row(p, boards, w) for p in res.points]
    return "\n".join(lines)


def _tune_gpu(args: argparse.Namespace) -> int:
    """``vta tune --target cuda [--gpu-schedule simt|wmma|mma]``: the kernel family's space
    searched with kernels timed on a GPU (``vta.tune.gpu``)."""
    kernel = args.gpu_schedule or "wmma"
    if args.target == "cuda-emu" and not args.space:
        raise VtaError("vta tune --target cuda-emu: the SIMT emulator runs a kernel on the CPU "
                       "and counts its instructions, but cannot time it on a GPU; tune with "
                       "--target cuda on a machine with a GPU (--space lists the space here)")
    for dest in ("layers", "cluster"):
        if getattr(args, dest):
            raise VtaError(f"{flag(dest)} does not apply to --target {args.target}")
    if args.hw is not None:
        raise VtaError(f"--hw does not apply to --target {args.target} (it describes the "
                       f"accelerator)")
    over = {k: getattr(args, k) for k in CONV_OPTIONS}
    gw = make_workload(args.workload, "int8", args.sizes or None, **over)
    job = Job(Workload(gw.name, gw.spec), None, trials=args.trials, search=args.search,
              seed=args.seed or 0, epilogue=gw.epi, target="cuda", kernel=kernel, dtype="int8")
    problem = gpu_problem(job)
    if args.space:
        e = enumerate_space(problem)
        print(f"{gw.name}: space {problem.name}, {e.size} points, {len(e.valid)} fit; default "
              f"{problem.default()}")
        for k in problem.knobs:
            print(f"  {k:8} {', '.join(map(str, problem.domain(k, {})))}")
        for why, n in e.refused.items():
            print(f"  refused {n:6} {why}: e.g. {e.examples[why]}")
        return 0

    try:
        require_cupy()
    except GpuUnavailableError as e:
        raise GpuUnavailableError(f"vta tune --target cuda times kernels on a GPU, and none is "
                                  f"usable here; the SIMT emulator cannot time a GPU kernel, so "
                                  f"nothing is tuned without one (--space lists the space). "
                                  f"{e}") from None
    if args.workers not in (None, 1):
        raise VtaError("--workers: one GPU runs one trial at a time (kernels timed side by "
                       "side would time each other); leave --workers out")

    with open_cache_for(args, create=True) as cache, LocalExecutor(1) as ex, \
            RichProgress(quiet=args.json) as progress:
        results = tune([job], ex, cache, progress)
    if args.json:
        print(json.dumps([r.summary() for r in results], indent=2, default=str))
    else:
        print(_tune_table(results, {}).replace("cycles", "ms"))
    return 0
