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

A grid is checked before any work: a key given twice anywhere in the file (YAML would keep
the last silently, dropping a point), two points of one name, a ``name`` that is not a
string, an empty ``grid``/``points`` mapping or axis, and a grid of more than ``MAX_POINTS``
points (unless ``force``: then it streams) are ``SweepError``s naming the file, the field and
the count.

Every point is the base with its changes, validated as any configuration is; a combination
the schema refuses (an out buffer that no longer mirrors acc, a separate ALU without banks) is
a *refused* row naming why, not an error. ``run_sweep`` tunes every workload layer on every
valid point (``vta.tune.tuner``, all jobs together on one executor), optionally runs each
tuned layer once cycle by cycle checked bit-exact against numpy, and sums a network's layers
as often as each occurs. Per point: cycles, time and frames/s at the point's clock, the
resource estimate (``vta.resources``), whether it fits each named board and its share of the
first, and whether it is on the Pareto front (no other point is at least as fast with at most
as many DSP slices, BRAMs and LUTs), its energy per run (per frame for a network) and its
energy-delay product. ``write_csv`` and ``plot`` write the CSV and the Pareto plot (frames/s,
energy and energy-delay product against each resource, the boards' limits drawn, fit marked by
colour). A
sweep in which no point is ok (every one refused by the schema, or no schedule fits) is a
``SweepError`` with the counts.

Large grids: ``run_sweep`` tunes a chunk of points at a time (as many as carry ``CHUNK_JOBS``
layer jobs, at most ``CHUNK``: 32 points of one layer, 3 of ResNet-18; at default schedules
``CHUNK`` points, those of one structure put together within a ``WINDOW`` of points so that they
share their compiles) and hands each finished point to ``on_point`` (the CLI prints and writes
its row at once), so what it holds is the chunk's tuning state and one small summary per point,
whatever the grid's size; points that differ only in clock or board share one cache key and
are measured once (through the cache).

Default schedules (``trials`` 0): no search, so no tuner: each layer of each point gets the
schedule ``driver.compile_workload`` chooses with the timing-only simulator as its oracle (the
model's best candidates timed, the first of the fastest kept: the tuner's default, same cycles
and schedule), and the point's cycles and energy come from that timing run of the chosen
program (no program is simulated a second time for its energy); a layer is chosen and timed
once per hardware content (``cache.hw_digest``) in a chunk, so points differing only in clock,
board or energy model share it, and the layers of one op and structure
(``sweep_share.structural_digest``: points differing in timing fields) run as one
``sweep_share.default_group`` task that shares their compiles and checks (``sweep_share``).
The figures are kept in the cache file (table ``sweep_defaults``, keyed by the op, the
hardware's content, the energy model and the compiler's version, under the file's integrity
and write rules): a rerun of the same points answers from it without compiling (with
``check``, each layer is still compiled and run bit-exact).

Energy of a tuned sweep: each tuned layer's best program is built and run once more through
the timing-only simulator, the simulator whose cycles the tuner measured, and its counted
events priced by ``vta.sim.energy.energy_of``, the model ``vta run`` reports with
(``layer_energy``, on the executor; points that share a cache key and energy figures run it
once). A point's energy is its layers' summed as often as each occurs, in µJ per run of the
workloads; its energy-delay product is that times its latency in ms at its clock (µJ·ms): a
clock change alters the EDP, not the energy. A cached cost measured by an older simulator is
not re-derived: the layer keeps the tuner's cycles, and ``sim_cycles`` (with the check) says
what a run gives now.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import itertools
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import yaml

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import NETWORKS, Workload, resolve, resolve_network
from vta.config import HwConfig
from vta.errors import HwConfigError, SweepError, VtaError
from vta.resources import LIMITED, Board, board, fits, shares
from vta.sim.energy import Energy, energy_of
from vta.sim.machine import simulate
from vta.tune.cache import Cache, compiler_version, hw_digest
from vta.tune.executor import Executor
from vta.tune.job import Job, TrialTask, op_text
from vta.tune.sweep_share import DefaultGroup, default_group, structural_digest
from vta.tune.tuner import JobResult, Progress, tune, verify

__all__ = ["SweepError", "HwPoint", "Grid", "load_grid", "sweep_workloads", "PointResult",
           "SweepResult", "run_sweep", "write_csv", "plot", "MAX_POINTS", "CHUNK", "StreamingCsv",
           "per_unit", "layer_energy", "CHUNK_JOBS", "chunk_points", "WINDOW", "DefaultTask",
           "default_layer", "pack_groups", "largest_first"]

_T = TypeVar("_T")
_TOP = ("name", "base", "boards", "trials", "grid", "points")
#: the most points a grid may have unless forced (``vta sweep --force``): more is hours of
#: tuning, and most often a grid axis given by mistake
MAX_POINTS = 1000
#: the most points tuned at once by ``run_sweep`` (its memory is this many points' tuning
#: state)
CHUNK = 32
#: layer jobs ``run_sweep`` gives the executor at once (or twice its workers, if more): a chunk
#: holds as many points as carry this many jobs, so a network's rows (11 jobs a point for
#: ResNet-18) stream every few points instead of every ``CHUNK``
CHUNK_JOBS = 32


class _UniqueKeyLoader(yaml.SafeLoader):
    """YAML's safe loader, refusing a mapping that gives one key twice (the standard loader
    keeps the last: a duplicated point name would drop a point silently)."""


def _unique_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)  # type: ignore[no-untyped-call]
        try:
            hash(key)
        except TypeError:
            continue  # the constructor below says it is unhashable
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"{key!r} given twice (lines {seen[key] + 1} and "
                f"{key_node.start_mark.line + 1}): each key once", key_node.start_mark)
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node, deep=True)  # type: ignore[no-untyped-call]


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _unique_mapping)


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


def load_grid(path: str | Path, *, force: bool = False) -> Grid:
    """Read and check a grid file (module docstring); errors name the file and the field. A
    grid of more than ``MAX_POINTS`` points is refused unless ``force``."""
    p = Path(path)
    src = str(p)
    try:
        data = yaml.load(p.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)
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
    name = data.get("name", p.stem)
    if not isinstance(name, str) or not name:
        raise _fail(src, "name", f"expected the grid's name (a string), got {name!r}")
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
    named = _named_points(src, data.get("points"), known, p.parent)
    points = _grid_points(src, data.get("grid"), known, len(named),
                          None if force else MAX_POINTS) + named
    if not points:
        points = [HwPoint(base.name)]
    seen: dict[str, HwPoint] = {}
    for q in points:
        if q.name in seen:
            raise _fail(src, "points", f"two of its {len(points)} points are called "
                        f"{q.name!r} ({seen[q.name].describe()}; {q.describe()}): each point "
                        f"needs its own name")
        seen[q.name] = q
    return Grid(name, src, base, tuple(points), bs, trials)


def _grid_points(src: str, grid: Any, known: set[str], named: int,
                 limit: int | None) -> list[HwPoint]:
    """The grid's combinations (refused, before they are made, when with the ``named``
    points they would be more than ``limit``)."""
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
                if "name" in v and (not isinstance(v["name"], str | int | float) or
                                    isinstance(v["name"], bool)):
                    raise _fail(src, f"{where}.name", f"expected a label (a string), got "
                                f"{v['name']!r}")
                fields = {k: x for k, x in v.items() if k != "name"}
                ch = _changes(src, where, fields, known)
                axis.append((f"{label}={v['name']}" if "name" in v else _label(ch), ch))
            axes.append(axis)
        else:
            f = _check_field(src, where, label, known)
            axes.append([(_label([(f, v)]), ((f, v),)) for v in values])
    total = 1
    for axis in axes:
        total *= len(axis)
    if limit is not None and total + named > limit:
        sizes = " x ".join(str(len(a)) for a in axes)
        raise _fail(src, "grid", f"{total + named:,} points ({sizes} combinations"
                    f"{f' + {named} named' if named else ''}) is more than {limit:,}; a sweep "
                    f"tunes every layer on each; --force runs it (rows stream as points "
                    f"finish)")
    return [HwPoint(" ".join(n for n, _ in combo), sum((c for _, c in combo), ()))
            for combo in itertools.product(*axes)]


def _named_points(src: str, points: Any, known: set[str], root: Path) -> list[HwPoint]:
    if points is None:
        return []
    if not isinstance(points, Mapping) or not points:
        raise _fail(src, "points", f"expected a non-empty mapping of names to field changes "
                    f"or config files, got {points!r}")
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
    #: the energy of one run of the workloads (a frame for a network), by component
    energy: Energy | None = None

    @property
    def ms(self) -> float:
        assert self.hw is not None
        return self.cycles / (self.hw.board.clock_mhz * 1e3)

    @property
    def per_s(self) -> float:
        return 1e3 / self.ms if self.cycles else 0.0

    @property
    def energy_uj(self) -> float:
        """µJ per run of the workloads (module docstring)."""
        assert self.energy is not None
        return self.energy.total_uj

    @property
    def edp(self) -> float:
        """The energy-delay product, µJ·ms: energy per run times the run's latency."""
        return self.energy_uj * self.ms

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
        has_e = ok and self.energy is not None
        r.update({"energy_uj": self.energy_uj if has_e else "",
                  "edp_uj_ms": self.edp if has_e else ""})
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
                "base_clock_mhz": self.grid.base.board.clock_mhz,
                "trials": self.trials, "boards": [b.name for b in self.grid.boards],
                "seconds": self.seconds, "verified": self.verified,
                "points": [{**p.row(self.grid.boards), "layers": p.layers,
                            "hw": p.hw.name if p.hw else None,
                            "energy": p.energy.summary() if p.energy else None,
                            "energy_model": _energy_model(p.hw)} for p in self.points]}


def _energy_model(hw: HwConfig | None) -> dict[str, Any] | None:
    """The technology figures a point's energy is priced at (``vta.sim.energy``)."""
    return {"node_nm": hw.energy.node_nm, "scale": hw.energy.scale} if hw else None


def run_sweep(grid: Grid, workloads: Sequence[str], executor: Executor, *,
              cache: Cache | None = None, trials: int | None = None, seed: int = 0,
              check: bool = True, progress: Progress | None = None,
              on_point: Callable[[PointResult], None] | None = None,
              chunk: int | None = None) -> SweepResult:
    """Tune ``workloads`` on every point of ``grid`` (module docstring), ``chunk`` points at a
    time (default: ``chunk_points``), each finished point handed to ``on_point``; ``check``:
    also run each tuned layer once, cycle by cycle, bit-exact against numpy. A ``SweepError``
    when no point is ok."""
    t0 = time.perf_counter()
    budget = grid.trials if trials is None else trials
    wl = sweep_workloads(workloads)
    if chunk is None:
        chunk = CHUNK if budget == 0 else \
            chunk_points(sum(len(layers) for _, layers in wl), executor.workers)
    results: list[PointResult] = []
    for part in _point_chunks(grid, max(1, chunk), by_structure=budget == 0):
        done = _sweep_chunk(grid, part, wl, executor, cache, budget, seed, check, progress)
        for r in done:
            if on_point is not None:
                on_point(r)
        results.extend(done)
    if budget == 0:  # the chunks grouped points by structure: the grid's order again
        at = {p.name: i for i, p in enumerate(grid.points)}
        results.sort(key=lambda r: at[r.point.name])
    ok = [r for r in results if r.status == "ok"]
    if not ok:
        why = Counter(r.status for r in results)
        first = results[0]
        raise SweepError(f"{grid.source}: none of its {len(results)} points can run ("
                         f"{', '.join(f'{n} {s}' for s, n in why.items())}; the first, "
                         f"{first.point.name!r}: {first.reason})")
    _mark_pareto(results)
    return SweepResult(grid, list(workloads), results, budget, time.perf_counter() - t0, check)


def chunk_points(jobs_per_point: int, workers: int) -> int:
    """Points per chunk: enough for ``CHUNK_JOBS`` layer jobs (or two per worker, if more) to
    keep the executor busy, at most ``CHUNK``, at least one."""
    want = max(CHUNK_JOBS, 2 * workers)
    return max(1, min(CHUNK, -(-want // max(1, jobs_per_point))))


#: points ``run_sweep`` looks ahead at default schedules to put points of one structure
#: (``sweep_share.structural_digest``) in one chunk, where they share their compiles
WINDOW = 8 * CHUNK


def _point_chunks(grid: Grid, size: int, *, by_structure: bool
                  ) -> Iterator[list[tuple[HwPoint, HwConfig | HwConfigError]]]:
    """The grid's points a chunk of ``size`` at a time, each with its configuration (or why
    the schema refuses it). ``by_structure``: within each ``WINDOW`` of points, those of one
    structural digest are put together (in the order each structure first appears) and packed
    into chunks without splitting a structure that fits in one (``pack_groups``), so a chunk
    holds few structures and each structure's default-schedule layers share their compiles in
    one chunk; memory stays bounded by the window."""
    def built(p: HwPoint) -> tuple[HwPoint, HwConfig | HwConfigError]:
        try:
            return p, grid.config(p)
        except HwConfigError as e:
            return p, e

    if not by_structure:
        for at in range(0, len(grid.points), size):
            yield [built(p) for p in grid.points[at:at + size]]
        return
    for at in range(0, len(grid.points), WINDOW):
        groups: dict[str, list[tuple[HwPoint, HwConfig | HwConfigError]]] = {}
        for p in grid.points[at:at + WINDOW]:
            x = built(p)
            key = structural_digest(x[1]) if isinstance(x[1], HwConfig) else ""
            groups.setdefault(key, []).append(x)
        yield from pack_groups(list(groups.values()), size)


def pack_groups(groups: Sequence[Sequence[Any]], size: int) -> Iterator[list[Any]]:
    """``groups`` (in order) as chunks of at most ``size`` items that split no group that fits
    in a chunk: a group that does not fit in the chunk being filled starts the next one, and a
    group larger than ``size`` is cut into whole chunks and a rest."""
    chunk: list[Any] = []
    for g in groups:
        rest = list(g)
        if chunk and len(chunk) + len(rest) > size:
            yield chunk
            chunk = []
        while len(rest) > size:
            yield rest[:size]
            rest = rest[size:]
        chunk += rest
    if chunk:
        yield chunk


def _sweep_chunk(grid: Grid, points: Sequence[tuple[HwPoint, HwConfig | HwConfigError]],
                 wl: list[tuple[str, list[tuple[Workload, int]]]], executor: Executor,
                 cache: Cache | None, budget: int, seed: int, check: bool,
                 progress: Progress | None) -> list[PointResult]:
    """``points`` of a sweep (each with its configuration, or the schema's refusal) tuned
    (and checked) together: their results, Pareto aside."""
    results: list[PointResult] = []
    jobs: list[Job] = []
    owner: list[tuple[PointResult, Workload, int]] = []
    for p, hw in points:
        if isinstance(hw, HwConfigError):
            results.append(PointResult(p, "refused", _short(str(hw))))
            continue
        r = PointResult(p, "ok", hw=hw, resources=hw.resource_estimate())
        results.append(r)
        for _, layers in wl:
            for w, n in layers:
                jobs.append(Job(w, hw, trials=max(1, budget), seed=seed))
                owner.append((r, w, n))
    if budget == 0:  # default schedules: no search, so no tuner (``default_layer``)
        _default_all(owner, executor, check, cache)
        return _finish_points(grid, results)
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
    done = [(r, jr) for (r, _, _), jr in zip(owner, tuned, strict=True) if jr.best is not None]
    if check:
        _check_all(done, executor)
    _energy_all([(r, jr) for r, jr in done if r.status == "ok"], executor)
    return _finish_points(grid, results)


def _finish_points(grid: Grid, results: list[PointResult]) -> list[PointResult]:
    """Each ok point's totals from its layers (summed as often as each occurs), its energy,
    and its fit on the grid's boards."""
    for r in results:
        if r.status != "ok" or r.hw is None:
            continue
        r.cycles = sum(x["cycles"] * x["repeats"] for x in r.layers)
        r.energy = Energy.total(Energy(x.pop("_energy_pj")).times(x["repeats"])
                                for x in r.layers)
        r.default_cycles = sum(x["default_cycles"] * x["repeats"] for x in r.layers)
        r.fits = {b.name: fits(r.resources, b.limits) for b in grid.boards}
        r.share = max(shares(r.resources, grid.boards[0].limits).values(), default=0.0)
    return results


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


def layer_energy(task: TrialTask) -> dict[str, Any]:
    """Build ``task.point`` and run it through the timing-only simulator (the tuner's
    measure): the energy of its counted events by component, pJ (``vta.sim.energy.
    energy_of``, what ``vta run`` reports). Runs in a worker."""
    assert task.hw is not None
    c = driver.build(task.workload, task.hw, task.point, epilogue=task.epilogue)
    st = simulate(c.program, task.hw, timing_only=True).stats
    return {"pj": energy_of(c.program, dict(st.bytes), task.hw).pj}


def _energy_all(tuned: list[tuple[PointResult, JobResult]], executor: Executor) -> None:
    """Each tuned layer's energy (``layer_energy``) into its row: ``energy_uj`` per run and
    the components (pJ, ``_energy_pj``, summed into the point and dropped). Layers of one
    cache key, best point and energy figures (points differing only in board or clock) run
    once."""
    def key(jr: JobResult) -> tuple[str, str, int, float]:
        assert jr.best is not None
        hw = jr.job.accel
        return jr.key.digest, jr.best.key(), hw.energy.node_nm, hw.energy.scale

    tasks: dict[tuple[str, str, int, float], TrialTask] = {}
    for _, jr in tuned:
        assert jr.best is not None
        tasks.setdefault(key(jr), jr.job.task(jr.best))
    order = list(tasks)
    got: dict[tuple[str, str, int, float], dict[str, Any]] = {}
    for k, res in executor.map_unordered(layer_energy, [tasks[o] for o in order]):
        got[order[k]] = res
    for r, jr in tuned:
        res = got[key(jr)]
        for layer in r.layers:
            if layer["key"] == jr.key.digest:
                layer.update({"energy_uj": Energy(res["pj"]).total_uj,
                              "_energy_pj": dict(res["pj"])})


@dataclass(frozen=True)
class DefaultTask:
    """One layer of a default-schedule sweep (``trials`` 0) to compile and measure in a
    worker; ``check``: also run it cycle by cycle, bit-exact against numpy."""

    workload: Workload
    hw: HwConfig
    check: bool


def default_layer(task: DefaultTask) -> dict[str, Any]:
    """``task.workload``'s default schedule on ``task.hw`` and the figures of a sweep row:
    ``sweep_share.default_group`` at this one point (the model's best candidates timed on the
    timing-only simulator, the fastest kept, as ``driver.compile_workload`` chooses; cycles
    and energy from that timing run of the chosen program, no second simulation). With
    ``check``, the program also runs cycle by cycle on random data against numpy. A layer no
    schedule fits comes back with ``refused``. Runs in a worker."""
    return default_group(DefaultGroup(task.workload, (task.hw,), task.check))[0]


def _default_all(owner: list[tuple[PointResult, Workload, int]], executor: Executor,
                 check: bool, cache: Cache | None) -> None:
    """Every layer of every point at its default schedule into its point's rows; layers of
    one hardware content (``cache.hw_digest``: points differing only in board or clock) and
    op run once, priced at each energy model their points use; those of one op and
    structure (``sweep_share.structural_digest``: points differing in timing fields) run as
    one ``sweep_share.default_group`` task, sharing their compiles."""
    def key(r: PointResult, w: Workload) -> tuple[str, str, int, float]:
        assert r.hw is not None
        return hw_digest(r.hw), op_text(w, w.epilogue), r.hw.energy.node_nm, r.hw.energy.scale

    tasks: dict[tuple[str, str, int, float], tuple[Workload, HwConfig]] = {}
    for r, w, _ in owner:
        assert r.hw is not None
        tasks.setdefault(key(r, w), (w, r.hw))
    got: dict[tuple[str, str, int, float], dict[str, Any]] = {}
    if cache is not None and not check:
        got.update(_kept_defaults(cache, list(tasks)))
    groups: dict[tuple[str, str], list[tuple[str, str, int, float]]] = {}
    for k in tasks:
        if k not in got:
            groups.setdefault((k[1], structural_digest(tasks[k][1])), []).append(k)
    order = largest_first(list(groups.values()), lambda ks: tasks[ks[0]][0].spec.ops * len(ks))
    work = [DefaultGroup(tasks[ks[0]][0], tuple(tasks[k][1] for k in ks), check) for ks in order]
    for i, figures in executor.map_unordered(default_group, work):
        got.update(zip(order[i], figures, strict=True))
    order_keys = [k for ks in order for k in ks]
    if cache is not None and not cache.readonly:
        _keep_defaults(cache, {k: got[k] for k in order_keys if "refused" not in got[k]})
    for r, w, n in owner:
        res = got[key(r, w)]
        if r.status != "ok":
            continue
        if "refused" in res:
            r.status, r.reason = "failed", f"{w.name}: {res['refused']}"
            continue
        layer = {"workload": w.name, "repeats": n, "cycles": res["cycles"],
                 "default_cycles": res["cycles"], "schedule": res["schedule"],
                 "evaluated": res["evaluated"], "valid": None, "key": _digest(key(r, w)),
                 "energy_uj": Energy(res["pj"]).total_uj, "_energy_pj": dict(res["pj"])}
        if "verify" in res:
            v = res["verify"]
            layer.update({"passed": v["passed"], "utilization": v["utilization"],
                          "of_machine_bound": v["of_machine_bound"], "sim_cycles": v["cycles"]})
            r.passed = v["passed"] if r.passed is None else (r.passed and v["passed"])
        r.layers.append(layer)


def largest_first(tasks: list[_T], work: Callable[[_T], int]) -> list[_T]:
    """``tasks`` by their estimated ``work``, largest first (equal ones in their order): the
    executor's workers take tasks in the order given, and a chunk's rows wait for its last
    task, so the largest go first and the smallest fill the end (the longest-processing-time
    rule: in the network's order a ResNet-18 chunk's last task can be one of its largest,
    with the other worker idle meanwhile; docs/tuning.md). An order only: no result depends
    on it."""
    return sorted(tasks, key=lambda t: -work(t))


_DEFAULTS_TABLE = """
CREATE TABLE IF NOT EXISTS sweep_defaults (
    key TEXT PRIMARY KEY, op TEXT NOT NULL, hw_hash TEXT NOT NULL, compiler TEXT NOT NULL,
    figures TEXT NOT NULL, created REAL NOT NULL)
"""
#: the figures a kept default-schedule layer must carry to be used
_FIGURES = ("cycles", "pj", "schedule", "evaluated")


def _row_key(key: tuple[Any, ...]) -> str:
    """A ``sweep_defaults`` row's key: the layer's (op, hardware content, energy model) and
    the compiler's version."""
    return _digest((*key, compiler_version()))


def _kept_defaults(cache: Cache, keys: list[tuple[str, str, int, float]]
                   ) -> dict[tuple[str, str, int, float], dict[str, Any]]:
    """The default-schedule figures the cache file holds for ``keys`` (a row that is not
    such figures is skipped: the layer is compiled again and its row replaced)."""
    with cache.errors("read"):
        if cache.db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND "
                            "name='sweep_defaults'").fetchone() is None:
            return {}
    out = {}
    for k in keys:
        with cache.errors("read"):
            row = cache.db.execute("SELECT figures FROM sweep_defaults WHERE key=?",
                                   (_row_key(k),)).fetchone()
        if row is None:
            continue
        try:
            figures = json.loads(row[0])
        except ValueError:
            continue
        if isinstance(figures, dict) and all(f in figures for f in _FIGURES):
            out[k] = figures
    return out


def _keep_defaults(cache: Cache, got: dict[tuple[str, str, int, float], dict[str, Any]]
                   ) -> None:
    """Keep each layer's default-schedule figures in the cache file (one transaction)."""
    if not got:
        return
    cache.ensure_tables(_DEFAULTS_TABLE)
    rows = [(_row_key(k), k[1], k[0], compiler_version(),
             json.dumps({f: res[f] for f in _FIGURES}), time.time()) for k, res in got.items()]
    with cache.errors("write"), cache.write():
        cache.db.executemany("INSERT OR REPLACE INTO sweep_defaults VALUES (?,?,?,?,?,?)", rows)


def _digest(key: tuple[Any, ...]) -> str:
    """A short stable name of a default-schedule layer's key (its rows' ``key``)."""
    return hashlib.sha256(json.dumps(list(key)).encode()).hexdigest()[:20]


def _mark_pareto(results: list[PointResult]) -> None:
    ok = [r for r in results if r.status == "ok" and r.cycles]
    for r in ok:
        r.pareto = not any(
            o is not r and o.ms <= r.ms and all(o.resources[k] <= r.resources[k] for k in LIMITED)
            and (o.ms < r.ms or any(o.resources[k] < r.resources[k] for k in LIMITED))
            for o in ok)


class StreamingCsv:
    """The sweep's CSV written a row at a time as points finish (``write_csv`` rewrites it at
    the end with the Pareto column)."""

    def __init__(self, path: Path, boards: Sequence[Board]) -> None:
        self.path, self.boards = path, boards
        self._file: Any = None
        self._writer: Any = None

    def __enter__(self) -> StreamingCsv:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._file is not None:
            self._file.close()

    def add(self, p: PointResult) -> None:
        row = p.row(self.boards)
        try:
            if self._writer is None:
                self._file = open(self.path, "w", newline="")
                self._writer = csv.DictWriter(self._file, fieldnames=list(row))
                self._writer.writeheader()
            self._writer.writerow(row)
            self._file.flush()
        except OSError as e:
            raise SweepError(f"{self.path}: cannot write the CSV: {e.strerror or e}") from None


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
#: Pareto points named on the plot at most (a large grid's front would be unreadable)
_NAMED = 24


def per_unit(workloads: Sequence[str]) -> str:
    """What a sweep's throughput counts: frames for networks, runs of the workloads for
    layers (a single layer is not a frame)."""
    return "frames" if workloads and all(w in NETWORKS for w in workloads) else "runs"


#: the plot's rows: (row key, y label, log scale); energy rows only when the points carry it
_VIEWS = (("frames_per_s", "{what}: {unit} per second", False),
          ("energy_uj", "energy, uJ per {one} (vta.sim.energy)", True),
          ("edp_uj_ms", "energy-delay product, uJ*ms per {one}", True))


def plot(result: SweepResult | Mapping[str, Any], path: str | Path, what: str = "") -> None:
    """The Pareto plot of a sweep (or of its ``summary()``, as a JSON file keeps it): one row
    of panels per view, one panel per resource estimate: frames/s (runs/s for layers: one run
    of the workloads at each point's clock), energy per run and energy-delay product (log
    scales; rows left out for a summary written before sweeps carried energy) against each
    resource; the boards' limits as dashed lines; colour by the boards a point fits (legend);
    the Pareto front (latency against resources) with a black edge (its first ``_NAMED``
    points named); points whose clock differs from the base's drawn as triangles: the resource
    model does not cost a clock (it does not check timing closure), so such a point's gain is
    not free. Points are drawn half-transparent, one call per group, so points on top of each
    other stay visible and a 10,000-point grid draws in seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = result.summary() if isinstance(result, SweepResult) else result
    boards = [board(b) for b in s["boards"]]
    ok = [r for r in s["points"] if r["status"] == "ok" and r["cycles"]]
    unit = per_unit(s["workloads"])
    views = [v for v in _VIEWS if all(r.get(v[0], "") != "" for r in ok)]
    fig, axes = plt.subplots(len(views), len(LIMITED), figsize=(5 * len(LIMITED),
                             4.8 * len(views)), sharey="row", squeeze=False)
    for row, (key, label, log) in zip(axes, views, strict=True):
        for ax, res in zip(row, LIMITED, strict=True):
            _panel(ax, ok, boards, res, key, s.get("base_clock_mhz"))
            if log:
                ax.set_yscale("log")
        row[0].set_ylabel(label.format(what=what or "+".join(s["workloads"]), unit=unit,
                                       one=unit[:-1]))
    more = sum(r["pareto"] for r in ok) - _NAMED
    fig.suptitle(f"{s['grid']}: {len(ok)} points, {s['trials']} schedule trials a layer; black "
                 f"edge: Pareto front (latency vs resources)"
                 f"{f' ({more} more unnamed)' if more > 0 else ''}; triangles: a clock other "
                 f"than the base's, which the resource model does not cost", fontsize=9)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except OSError as e:
        raise SweepError(f"{path}: cannot write the plot: {e.strerror or e}") from None
    finally:
        plt.close(fig)


def _panel(ax: Any, ok: Sequence[Mapping[str, Any]], boards: Sequence[Board], res: str,
           key: str, base_clock: Any) -> None:
    """One panel of ``plot``: the points' ``key`` against resource ``res``, coloured by fit,
    the front edged and named, the boards' limits drawn, with its legend."""
    names = ", ".join(b.name for b in boards)
    kinds = (f"fits {boards[0].name}", "fits only a larger board" if len(boards) > 1 else "",
             f"fits none of {names}")

    def kind(r: Mapping[str, Any]) -> int:
        k = next((i for i, b in enumerate(boards) if r[f"fits_{b.name}"]), len(boards))
        return min(k, 1) if k < len(boards) else 2

    for k in range(3):
        for clocked in (False, True):
            for front in (False, True):
                grp = [r for r in ok if kind(r) == k and r["pareto"] == front and
                       (base_clock is not None and r["clock_mhz"] != base_clock) == clocked]
                if not grp:
                    continue
                ax.scatter([r[res] for r in grp], [r[key] for r in grp],
                           color=_COLOURS[k], marker="^" if clocked else "o", s=40,
                           alpha=0.6, zorder=4 if front else 3,
                           edgecolors="black" if front else "none", linewidths=1.2,
                           label=kinds[k] + (", clock changed (not costed)" if clocked
                                             else "") + (", Pareto front" if front else ""))
    at: dict[tuple[Any, Any], list[str]] = {}  # points on one spot: one label, counted
    for r in ok:
        if r["pareto"]:
            at.setdefault((r[res], r[key]), []).append(r["point"])
    for (x, y), here in list(at.items())[:_NAMED]:
        ax.annotate(here[0] + (f" (+{len(here) - 1} here)" if len(here) > 1 else ""),
                    (x, y), fontsize=7, textcoords="offset points", xytext=(5, 4))
    for i, b in enumerate(boards):
        ax.axvline(b.limits[res], color=_COLOURS[min(i, 1)], lw=1, ls="--",
                   label=f"{b.name} ({b.part}) {res}: {b.limits[res]:,}")
    ax.set_xlabel(f"{res} (estimate, vta.resources)")
    ax.grid(True, alpha=0.3)
    # a fixed corner: "best" weighs every point, slow for a large grid
    ax.legend(fontsize=6, loc="lower right" if key == "frames_per_s" else "upper right")
