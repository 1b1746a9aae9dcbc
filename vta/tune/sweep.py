"""Hardware design-space sweeps: vary HwConfig fields over workloads, tune each point, compare.

A grid file (YAML, ``sweeps/pynq_grid.yaml`` is an example) names a base configuration and
the points to try::

    name: pynq_grid
    base: ../hwconfigs/pynq.yaml       # relative to the grid file
    boards: [pynq-z1, zcu104]          # vta.resources.BOARDS: which points fit each
    trials: 8                          # schedule trials per layer and point (--trials wins)
    grid:                              # every combination of these
      memory.bus_bytes: [8, 16]        # a dotted HwConfig field and its values
      buffers:                         # or a label and fields changed together (``name``:
        - {name: small, scratchpad.inp: 16384, scratchpad.wgt: 131072}   # how points call it)
        - {name: large, scratchpad.inp: 65536, scratchpad.wgt: 524288}
    points:                            # and/or named points
      separate ALU: {alu.separate_pipeline: true, alu.acc_banks: 2}
      tsim: ../hwconfigs/pynq_tsim.yaml   # a whole config file

Every point is the base with its changes, validated as any configuration is; a combination
the schema refuses (an out buffer that no longer mirrors acc, a separate ALU without banks) is
a *refused* row naming why, not an error. ``run_sweep`` tunes every workload layer on every
valid point (``vta.tune.tuner``, all jobs together on one executor), optionally runs each
tuned layer once cycle by cycle checked bit-exact against numpy, and sums a network's layers
as often as each occurs. Per point: cycles, time and frames/s at the point's clock, the
resource estimate (``vta.resources``), whether it fits each named board and its share of the
first, and whether it is on the Pareto front (no other point is at least as fast with at most
as many DSP slices, BRAMs and LUTs). ``write_csv`` and ``plot`` write the CSV and the Pareto
plot (frames/s against each resource, the boards' limits drawn, fit marked by colour).
"""

from __future__ import annotations

import csv
import difflib
import itertools
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vta.compiler.ops.workloads import NETWORKS, Workload, resolve, resolve_network
from vta.config import HwConfig
from vta.errors import HwConfigError, SweepError, VtaError
from vta.resources import LIMITED, Board, board, fits, shares
from vta.tune.cache import Cache
from vta.tune.executor import Executor
from vta.tune.job import Job, TrialTask
from vta.tune.tuner import JobResult, Progress, tune, verify

__all__ = ["SweepError", "HwPoint", "Grid", "load_grid", "sweep_workloads", "PointResult",
           "SweepResult", "run_sweep", "write_csv", "plot"]

_TOP = ("name", "base", "boards", "trials", "grid", "points")


@dataclass(frozen=True)
class HwPoint:
    """One hardware point: the base with ``changes`` (dotted field -> value), or ``file``."""

    name: str
    changes: tuple[tuple[str, Any], ...] = ()
    file: str | None = None

    def describe(self) -> str:
        if self.file:
            return self.file
        return " ".join(f"{k}={v}" for k, v in self.changes) or "(base)"


@dataclass(frozen=True)
class Grid:
    """A loaded grid file (module docstring)."""

    name: str
    source: str
    base: HwConfig
    points: tuple[HwPoint, ...]
    boards: tuple[Board, ...]
    trials: int = 8

    def config(self, p: HwPoint) -> HwConfig:
        """The point's configuration (a ``HwConfigError`` when the schema refuses it)."""
        if p.file is not None:
            return HwConfig.from_yaml(p.file)
        return self.base.with_changes(name=p.name, **dict(p.changes))


def _fail(source: str, where: str, msg: str) -> SweepError:
    return SweepError(f"{source}: {where}: {msg}")


def _fields(hw: HwConfig) -> set[str]:
    d = hw.to_dict()
    return {f"{sec}.{k}" for sec, v in d.items() if isinstance(v, dict) and sec != "intrinsics"
            for k in v} | {"timing_model", "stock"}


def _check_field(source: str, where: str, name: Any, known: set[str]) -> str:
    if not isinstance(name, str) or name not in known:
        hint = difflib.get_close_matches(str(name), sorted(known), n=1)
        did = f" (did you mean '{hint[0]}'?)" if hint else ""
        raise _fail(source, where, f"unknown HwConfig field {name!r}{did}")
    return name


def _changes(source: str, where: str, data: Any, known: set[str]) -> tuple[tuple[str, Any], ...]:
    if not isinstance(data, Mapping) or not data:
        raise _fail(source, where, f"expected a mapping of HwConfig fields to values, got "
                    f"{data!r}")
    return tuple((_check_field(source, f"{where}.{k}", k, known), v) for k, v in data.items())


def _label(changes: Sequence[tuple[str, Any]]) -> str:
    return " ".join(f"{k.split('.')[-1]}={v}" for k, v in changes)


def load_grid(path: str | Path) -> Grid:
    """Read and check a grid file (module docstring); errors name the file and the field."""
    p = Path(path)
    src = str(p)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise SweepError(f"{src}: cannot read the grid file: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise SweepError(f"{src}: not UTF-8 text; a grid is a YAML file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark else ""
        raise SweepError(f"{src}: not valid YAML{at}: {getattr(e, 'problem', e)}") from None
    if not isinstance(data, Mapping):
        raise SweepError(f"{src}: expected a mapping with keys {', '.join(_TOP)}")
    for k in data:
        if k not in _TOP:
            hint = difflib.get_close_matches(str(k), _TOP, n=1)
            did = f" (did you mean '{hint[0]}'?)" if hint else ""
            raise _fail(src, str(k), f"unknown key{did}; expected one of {', '.join(_TOP)}")
    if "base" not in data:
        raise _fail(src, "base", "missing: the configuration the points change")
    base_path = (p.parent / str(data["base"]))
    base = HwConfig.from_yaml(base_path)
    known = _fields(base)
    name = str(data.get("name") or p.stem)
    trials = data.get("trials", 8)
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 0:
        raise _fail(src, "trials", f"expected an integer >= 0, got {trials!r}")
    boards = data.get("boards", ["pynq-z1"])
    if not isinstance(boards, list) or not boards:
        raise _fail(src, "boards", f"expected a list of board names, got {boards!r}")
    try:
        bs = tuple(board(str(b)) for b in boards)
    except VtaError as e:
        raise _fail(src, "boards", str(e)) from None
    points = _grid_points(src, data.get("grid"), known) + _named_points(
        src, data.get("points"), known, p.parent)
    if not points:
        points = [HwPoint(base.name)]
    names = [q.name for q in points]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise _fail(src, "points", f"two points are called {dup!r}")
    return Grid(name, src, base, tuple(points), bs, trials)


def _grid_points(src: str, grid: Any, known: set[str]) -> list[HwPoint]:
    if grid is None:
        return []
    if not isinstance(grid, Mapping) or not grid:
        raise _fail(src, "grid", f"expected a mapping of fields (or labels) to lists of "
                    f"values, got {grid!r}")
    axes: list[list[tuple[str, tuple[tuple[str, Any], ...]]]] = []
    for label, values in grid.items():
        where = f"grid.{label}"
        if not isinstance(values, list) or not values:
            raise _fail(src, where, f"expected a non-empty list of values, got {values!r}")
        if all(isinstance(v, Mapping) for v in values):  # fields changed together
            axis = []
            for v in values:
                fields = {k: x for k, x in v.items() if k != "name"}
                ch = _changes(src, where, fields, known)
                axis.append((f"{label}={v['name']}" if "name" in v else _label(ch), ch))
            axes.append(axis)
        else:
            f = _check_field(src, where, label, known)
            axes.append([(_label([(f, v)]), ((f, v),)) for v in values])
    return [HwPoint(" ".join(n for n, _ in combo), sum((c for _, c in combo), ()))
            for combo in itertools.product(*axes)]


def _named_points(src: str, points: Any, known: set[str], root: Path) -> list[HwPoint]:
    if points is None:
        return []
    if not isinstance(points, Mapping):
        raise _fail(src, "points", f"expected a mapping of names to field changes or config "
                    f"files, got {points!r}")
    out = []
    for name, value in points.items():
        if isinstance(value, str):
            out.append(HwPoint(str(name), file=str(root / value)))
        else:
            out.append(HwPoint(str(name), _changes(src, f"points.{name}", value, known)))
    return out


def sweep_workloads(names: Sequence[str]) -> list[tuple[str, list[tuple[Workload, int]]]]:
    """Workload names (``resnet18``, ``resnet18:C2``, ``conv2d``, ``matmul``, ``dense``, and
    ``matmul:MxNxK`` / ``dense:MxNxK`` with sizes) as ``(name, [(layer, repeats)])``: a
    network is its distinct layers, each as often as it occurs."""
    out = []
    for n in names:
        net = resolve_network(n) if n in NETWORKS else None
        sized = re.fullmatch(r"(matmul|dense):(\d+)x(\d+)x(\d+)", n)
        if net is not None:
            out.append((n, list(net.layers)))
        elif sized:
            w = resolve(sized[1], [int(sized[2]), int(sized[3]), int(sized[4])])
            out.append((n, [(Workload(n, w.spec), 1)]))
        else:
            out.append((n, [(resolve(n), 1)]))
    return out


@dataclass
class PointResult:
    """One hardware point of a sweep (module docstring)."""

    point: HwPoint
    status: str  # "ok", "refused" (the schema) or "failed" (a layer no schedule fits)
    reason: str = ""
    hw: HwConfig | None = None
    layers: list[dict[str, Any]] = field(default_factory=list)
    cycles: int = 0
    default_cycles: int = 0
    resources: dict[str, int] = field(default_factory=dict)
    fits: dict[str, bool] = field(default_factory=dict)
    share: float = 0.0
    pareto: bool = False
    passed: bool | None = None

    @property
    def ms(self) -> float:
        assert self.hw is not None
        return self.cycles / (self.hw.board.clock_mhz * 1e3)

    @property
    def per_s(self) -> float:
        return 1e3 / self.ms if self.cycles else 0.0

    def row(self, boards: Sequence[Board]) -> dict[str, Any]:
        """The CSV row."""
        r: dict[str, Any] = {"point": self.point.name, "changes": self.point.describe(),
                             "status": self.status, "reason": self.reason}
        ok = self.status == "ok" and self.hw is not None
        r.update({"clock_mhz": self.hw.board.clock_mhz if self.hw else "",
                  "cycles": self.cycles if ok else "",
                  "default_cycles": self.default_cycles if ok else "",
                  "ms": round(self.ms, 4) if ok else "",
                  "frames_per_s": round(self.per_s, 3) if ok else ""})
        for k in (*LIMITED, "ff"):
            r[k] = self.resources.get(k, "")
        for b in boards:
            r[f"fits_{b.name}"] = self.fits.get(b.name, "")
        r["share_" + boards[0].name] = round(self.share, 4) if self.resources else ""
        r["pareto"] = self.pareto if ok else ""
        r["passed"] = "" if self.passed is None else self.passed
        return r


@dataclass
class SweepResult:
    grid: Grid
    workloads: list[str]
    points: list[PointResult]
    trials: int
    seconds: float
    verified: bool

    def summary(self) -> dict[str, Any]:
        return {"grid": self.grid.name, "source": self.grid.source, "workloads": self.workloads,
                "trials": self.trials, "boards": [b.name for b in self.grid.boards],
                "seconds": self.seconds, "verified": self.verified,
                "points": [{**p.row(self.grid.boards), "layers": p.layers,
                            "hw": p.hw.name if p.hw else None} for p in self.points]}


def run_sweep(grid: Grid, workloads: Sequence[str], executor: Executor, *,
              cache: Cache | None = None, trials: int | None = None, seed: int = 0,
              check: bool = True, progress: Progress | None = None) -> SweepResult:
    """Tune ``workloads`` on every point of ``grid`` (module docstring); ``check``: also run
    each tuned layer once, cycle by cycle, bit-exact against numpy."""
    t0 = time.perf_counter()
    budget = grid.trials if trials is None else trials
    wl = sweep_workloads(workloads)
    results: list[PointResult] = []
    jobs: list[Job] = []
    owner: list[tuple[PointResult, Workload, int]] = []
    for p in grid.points:
        try:
            hw = grid.config(p)
        except HwConfigError as e:
            results.append(PointResult(p, "refused", _short(str(e))))
            continue
        r = PointResult(p, "ok", hw=hw, resources=hw.resource_estimate())
        results.append(r)
        for _, layers in wl:
            for w, n in layers:
                jobs.append(Job(w, hw, trials=max(1, budget), seed=seed))
                owner.append((r, w, n))
    tuned = tune(jobs, executor, cache, progress)
    for (r, w, n), jr in zip(owner, tuned, strict=True):
        if jr.best is None:
            why = next(iter(jr.failures.values()), "no point of the space compiles")
            r.status, r.reason = "failed", f"{w.name}: {why}"
            continue
        r.layers.append({"workload": w.name, "repeats": n, "cycles": int(jr.best_cost or 0),
                         "default_cycles": int(jr.default_cost or 0),
                         "schedule": jr.best.as_dict(), "evaluated": jr.evaluated,
                         "valid": jr.valid, "key": jr.key.digest})
    if check:
        _check_all([(r, jr) for (r, _, _), jr in zip(owner, tuned, strict=True)
                    if jr.best is not None], executor)
    for r in results:
        if r.status != "ok" or r.hw is None:
            continue
        r.cycles = sum(x["cycles"] * x["repeats"] for x in r.layers)
        r.default_cycles = sum(x["default_cycles"] * x["repeats"] for x in r.layers)
        r.fits = {b.name: fits(r.resources, b.limits) for b in grid.boards}
        r.share = max(shares(r.resources, grid.boards[0].limits).values(), default=0.0)
    _mark_pareto(results)
    return SweepResult(grid, list(workloads), results, budget, time.perf_counter() - t0, check)


def _short(msg: str) -> str:
    return re.sub(r"^<dict>: ", "", msg)


def _check_all(tuned: list[tuple[PointResult, JobResult]], executor: Executor) -> None:
    """Run every tuned layer once, bit-exact against numpy; a layer tuned to the same point on
    the same hardware (points differing only in their board or clock) runs once."""
    tasks: dict[tuple[str, str], TrialTask] = {}
    for _, jr in tuned:
        assert jr.best is not None
        tasks.setdefault((jr.key.digest, jr.best.key()), jr.job.task(jr.best))
    order = list(tasks)
    got: dict[tuple[str, str], dict[str, Any]] = {}
    for k, res in executor.map_unordered(verify, [tasks[o] for o in order]):
        got[order[k]] = res
    for r, jr in tuned:
        assert jr.best is not None
        res = got[(jr.key.digest, jr.best.key())]
        for layer in r.layers:
            if layer["key"] == jr.key.digest:
                layer.update({"passed": res["passed"], "utilization": res["utilization"],
                              "of_machine_bound": res["of_machine_bound"],
                              "sim_cycles": res["cycles"]})
        r.passed = res["passed"] if r.passed is None else (r.passed and res["passed"])


def _mark_pareto(results: list[PointResult]) -> None:
    ok = [r for r in results if r.status == "ok" and r.cycles]
    for r in ok:
        r.pareto = not any(
            o is not r and o.ms <= r.ms and all(o.resources[k] <= r.resources[k] for k in LIMITED)
            and (o.ms < r.ms or any(o.resources[k] < r.resources[k] for k in LIMITED))
            for o in ok)


def write_csv(result: SweepResult, path: str | Path) -> None:
    """One row per hardware point (``PointResult.row``)."""
    rows = [p.row(result.grid.boards) for p in result.points]
    try:
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    except OSError as e:
        raise SweepError(f"{path}: cannot write the CSV: {e.strerror or e}") from None


#: colours: fits the first board, fits only a later one, fits none
_COLOURS = ("#2b7bba", "#e08a1e", "#d64541")


def plot(result: SweepResult | Mapping[str, Any], path: str | Path, what: str = "") -> None:
    """The Pareto plot of a sweep (or of its ``summary()``, as a JSON file keeps it):
    frames/s (runs of the workloads per second at each point's clock) against each resource
    estimate; the boards' limits as dashed lines; colour by the boards a point fits; the
    Pareto front with a black edge and its points named."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result.summary() if isinstance(result, SweepResult) else result
    boards = [board(b) for b in s["boards"]]
    ok = [r for r in s["points"] if r["status"] == "ok" and r["cycles"]]
    fig, axes = plt.subplots(1, len(LIMITED), figsize=(5 * len(LIMITED), 4.6), sharey=True)
    for ax, res in zip(axes, LIMITED, strict=True):
        for r in ok:
            k = next((i for i, b in enumerate(boards) if r[f"fits_{b.name}"]), len(boards))
            colour = _COLOURS[min(k, 1) if k < len(boards) else 2]
            ax.scatter([r[res]], [r["frames_per_s"]], color=colour, zorder=3, s=40,
                       edgecolors="black" if r["pareto"] else "none", linewidths=1.2)
            if r["pareto"]:
                ax.annotate(r["point"], (r[res], r["frames_per_s"]), fontsize=7,
                            textcoords="offset points", xytext=(5, 4))
        for i, b in enumerate(boards):
            ax.axvline(b.limits[res], color=_COLOURS[min(i, 1)], lw=1, ls="--",
                       label=f"{b.name} ({b.part}): {b.limits[res]:,}")
        ax.set_xlabel(f"{res} (estimate, vta.resources)")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    axes[0].set_ylabel(f"{what or '+'.join(s['workloads'])} per second")
    names = ", ".join(b.name for b in boards)
    fig.suptitle(f"{s['grid']}: {len(ok)} points, {s['trials']} schedule trials a layer; colour:"
                 f" fits {boards[0].name} / only a larger board / none of {names}; black "
                 f"edge: Pareto front", fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise SweepError(f"{path}: cannot write the plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)
