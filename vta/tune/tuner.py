"""The tuner: search a workload's schedule space, measuring points on an executor, into the cache.

A ``Job`` is one workload on one hardware config with a trial budget, a search and a seed. The
tuner binds the workload's space (``driver.space_of``), lets the analytic model rank every
point that fits (``schedules.model.rank``: the cheap pre-filter), and runs the search
(``vta.tune.search``): each batch it asks for is measured by ``measure`` (build the point,
``driver.build``, and time it with the timing-only simulator) on the executor, and every
result is committed to the cache as it arrives. Points the cache already holds are not measured
again (a killed run resumes where it stopped), and a job the cache has finished with the same
search, seed and at least the budget is answered from the cache without building anything.

The default schedule's candidates (``driver.default_points``: the model's three best, of which
``vta run`` keeps the fastest) are measured first, so every job ends with best against
default. Several jobs (a network's layers, a sweep's points) run in rounds: one batch of every
job per round, all of them on the executor at once; a job decides only on whole batches, and
batches have a fixed size, so the points chosen do not depend on the executor, the number of
workers or the order results arrive in.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from vta.compiler.accel import driver
from vta.compiler.accel.schedules import model
from vta.compiler.accel.schedules.space import ConvSpace
from vta.compiler.ir.space import BoundSpace, Enumerated, Point, enumerate_space
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import ScheduleError, VtaError
from vta.gpu.runtime import gpu_name
from vta.run.layer import run_layer
from vta.run.targets import AccelTarget
from vta.tune.cache import Cache, Trial, TuneKey, Tuning, compiler_version, hw_digest
from vta.tune.executor import Executor
from vta.tune.gpu import gpu_key, gpu_problem, measure_gpu
from vta.tune.job import BATCH, TARGET, Job, Outcome, TrialTask, op_text
from vta.tune.search import make_search

__all__ = ["Job", "JobResult", "Outcome", "TrialTask", "Progress", "tune", "measure", "verify",
           "job_key", "hw_digest", "lookup", "cached_program", "BATCH", "TARGET", "op_text"]


def measure(task: TrialTask) -> Outcome:
    """Build ``task.point`` and time it: with the timing-only simulator on the accelerator
    (``AccelTarget.measure``), on the GPU for a GPU task (``vta.tune.gpu.measure_gpu``). Runs
    in a worker."""
    if task.target != TARGET:
        return measure_gpu(task)
    assert task.hw is not None
    target = AccelTarget(task.hw)
    t0 = time.perf_counter()
    try:
        c = driver.build(task.workload, task.hw, task.point, epilogue=task.epilogue)
        m = target.measure(c)
    except VtaError as e:
        return Outcome(None, f"{type(e).__name__}: {e}", time.perf_counter() - t0,
                       target.method)
    return Outcome(m.value, None, time.perf_counter() - t0, m.method)


def verify(task: TrialTask) -> dict[str, Any]:
    """Build ``task.point``, simulate it cycle by cycle on random data and check it bit-exact
    against numpy (``vta.run.layer.run_layer``): what a sweep reports for each tuned layer."""
    assert task.hw is not None
    c = driver.build(task.workload, task.hw, task.point, epilogue=task.epilogue)
    r = run_layer(task.workload, AccelTarget(task.hw), compiled=c)
    s = r.summary()
    return {"passed": r.passed, "cycles": r.cycles, "mismatches": r.mismatches,
            "utilization": s["utilization"], "of_machine_bound": s["of_machine_bound"],
            "machine_bound_cycles": s["machine_bound_cycles"]}


def job_key(w: Workload, hw: HwConfig, epi: Epilogue) -> TuneKey:
    """The cache key of ``w`` with ``epi`` on the accelerator ``hw``."""
    g = hw.gemm
    return TuneKey(op_text(w, epi), f"{g.inp_dtype}*{g.wgt_dtype}->{g.acc_dtype}->{g.out_dtype}",
                   TARGET, hw_digest(hw), hw.name, compiler_version(), ConvSpace.name)


def point_in_space(space: BoundSpace, text: str) -> Point:
    """The point a cache record's ``text`` names, checked against ``space``: JSON of an
    object giving each of the space's knobs (no other) a value of its domain, and fitting the
    problem. A ``ValueError`` saying what is wrong otherwise (a hand-edited or foreign
    record)."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise ValueError(f"the point is not JSON ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"the point is not a JSON object: {text[:60]!r}")
    knobs = space.knobs
    missing = [k for k in knobs if k not in data]
    foreign = [k for k in data if k not in knobs]
    if missing or foreign:
        parts = ([f"lacks {', '.join(missing)}"] if missing else []) + \
            ([f"has knobs the space {space.name} does not ({', '.join(foreign)})"]
             if foreign else [])
        raise ValueError(f"the point {' and '.join(parts)}")
    given: dict[str, Any] = {}
    for k in knobs:
        dom = space.domain(k, given)
        if data[k] not in dom:
            raise ValueError(f"the point's {k}={data[k]!r} is not one of the space's values "
                             f"({', '.join(map(str, dom))})")
        given[k] = data[k]
    point = Point.of(knobs, given)
    why = space.refusal(point)
    if why is not None:
        raise ValueError(f"the point does not fit: {why[1]}")
    return point


def lookup(cache: Cache, w: Workload, hw: HwConfig, epi: Epilogue | None = None,
           skipped: list[str] | None = None) -> tuple[Point, Trial] | None:
    """The cache's best schedule of ``w`` on ``hw`` (None when it has none): its cheapest
    trial whose point is a point of the space (``point_in_space``); each record passed over
    is described in ``skipped`` (the caller warns)."""
    digest = job_key(w, hw, epi or w.epilogue).digest
    trials = sorted((t for t in cache.trials(digest).values() if t.cost is not None),
                    key=lambda t: (t.cost, t.measured_at))
    if not trials:
        return None
    space = driver.space_of(w, hw)
    for t in trials:
        try:
            return point_in_space(space, t.point), t
        except ValueError as e:
            if skipped is not None:
                skipped.append(f"{cache.path}: key {digest}: a trial of {t.cost:,.0f} cycles "
                               f"skipped: {e}")
    return None


def cached_program(cache: Cache, w: Workload, hw: HwConfig, epi: Epilogue | None = None,
                   skipped: list[str] | None = None
                   ) -> tuple[driver.Compiled, Point, Trial] | None:
    """``w``'s program built from the cache's best schedule on ``hw`` (with ``epi``; None:
    the layer's own), the point and its trial; None when the cache has none (what ``vta run``
    uses). Records that are not points of the space are described in ``skipped``."""
    found = lookup(cache, w, hw, epi, skipped)
    if found is None:
        return None
    point, trial = found
    return driver.build(w, hw, point, epilogue=epi), point, trial


@dataclass
class JobResult:
    """What a job found: best and default points and cycles, how many points were evaluated
    (measured now, or taken from the cache), the space's size and its refusals."""

    job: Job
    key: TuneKey
    best: Point | None
    best_cost: float | None
    default: Point | None
    default_cost: float | None
    search: str
    evaluated: int = 0
    measured: int = 0
    reused: int = 0
    measured_elsewhere: int = 0
    failed: int = 0
    space_size: int = 0
    valid: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    from_cache: bool = False

    @property
    def gain(self) -> float:
        """Default cycles over best cycles (1.0: the default was the best)."""
        if not self.best_cost or not self.default_cost:
            return 1.0
        return self.default_cost / self.best_cost

    def summary(self) -> dict[str, Any]:
        return {"workload": self.job.workload.name, "shape": self.job.workload.spec.describe(),
                "hw": self.key.hw_name, "target": self.key.target, "key": self.key.digest,
                "search": self.search,
                "seed": self.job.seed, "budget": self.job.trials,
                "best": self.best.as_dict() if self.best else None,
                "best_cycles": self.best_cost,
                "default": self.default.as_dict() if self.default else None,
                "default_cycles": self.default_cost, "gain": self.gain,
                "evaluated": self.evaluated, "measured": self.measured, "reused": self.reused,
                "measured_elsewhere": self.measured_elsewhere,
                "failed": self.failed, "failures": dict(self.failures),
                "space_size": self.space_size, "valid": self.valid,
                "refused": dict(self.refused), "refusal_examples": dict(self.examples),
                "seconds": self.seconds, "from_cache": self.from_cache}


class Progress(Protocol):
    """What the tuner reports while it works (the CLI draws a progress bar)."""

    def start(self, job: Job, total: int) -> None: ...

    def advance(self, job: Job, best: float | None) -> None: ...

    def done(self, result: JobResult) -> None: ...


class _Quiet:
    def start(self, job: Job, total: int) -> None:
        pass

    def advance(self, job: Job, best: float | None) -> None:
        pass

    def done(self, result: JobResult) -> None:
        pass


@dataclass
class _State:
    """A job under way."""

    job: Job
    result: JobResult
    search: Any
    defaults: list[Point]
    known: dict[str, Outcome]
    t0: float
    pending: list[Point] = field(default_factory=list)


def _from_tuning(job: Job, key: TuneKey, t: Tuning, seconds: float) -> JobResult | None:
    """A finished tuning's result; None when its points are not points of the job's space
    (a hand-edited record: the job runs again, reusing the trials that are sound)."""
    space = gpu_problem(job) if job.target != TARGET else driver.space_of(job.workload,
                                                                          job.accel)
    try:
        best = point_in_space(space, t.best_point) if t.best_point else None
        default = point_in_space(space, t.default_point) if t.default_point else None
    except ValueError:
        return None
    return JobResult(job, key, best, t.best_cost, default, t.default_cost, t.search,
                     evaluated=t.evaluated, reused=t.evaluated, seconds=seconds,
                     from_cache=True)


def _bind(job: Job) -> tuple[BoundSpace, list[tuple[float, Point]], Enumerated, list[Point]]:
    """The job's bound space, its points that fit ranked by the analytic model (the GPU
    kernels have none: all tie), its enumeration and the default schedule's candidates."""
    if job.target != TARGET:
        gp = gpu_problem(job)
        listed = enumerate_space(gp)
        if not listed.valid:
            raise ScheduleError(f"no point of {gp.name} fits {job.workload.name}")
        return gp, [(0.0, p) for p in listed.valid], listed, [gp.default()]
    w, hw, epi = job.workload, job.accel, job.epi
    problem = driver.space_of(w, hw)
    listed = enumerate_space(problem)
    ranked = model.rank(problem, epi, every_order=True, fits=frozenset(listed.valid))
    return problem, ranked, listed, driver.default_points(w, hw, epilogue=epi)


def job_key_of(job: Job) -> TuneKey:
    """The cache key of a job of either target."""
    if job.target != TARGET:
        return gpu_key(job, gpu_name())
    return job_key(job.workload, job.accel, job.epi)


def _start(job: Job, key: TuneKey, cache: Cache | None, progress: Progress) -> _State:
    t0 = time.perf_counter()
    problem, ranked, listed, defaults = _bind(job)
    budget = max(job.trials, len(defaults))
    search = make_search(job.search, problem, ranked, defaults, budget, job.seed, BATCH)
    known: dict[str, Outcome] = {}
    if cache is not None:
        cache.add_key(key)
        for p, t in cache.trials(key.digest).items():
            known[p] = Outcome(t.cost, t.refused, t.seconds, t.method)
    result = JobResult(job, key, None, None, defaults[0], None, search.name,
                       space_size=listed.size, valid=len(listed.valid),
                       refused=listed.refused, examples=listed.examples)
    progress.start(job, min(search.budget, len(ranked)))
    return _State(job, result, search, defaults, known, t0)


def _finish(st: _State, cache: Cache | None, progress: Progress) -> JobResult:
    r, s = st.result, st.search
    best = s.best()
    if best is not None:
        r.best, r.best_cost = best
    timed = [(st.known[p.key()].cost, i, p) for i, p in enumerate(st.defaults)
             if p.key() in st.known and st.known[p.key()].cost is not None]
    if timed:
        c, _, p = min(timed, key=lambda e: (e[0], e[1]))
        r.default, r.default_cost = p, c
    r.evaluated = len(s.costs)
    r.seconds = time.perf_counter() - st.t0
    if cache is not None:
        cache.add_tuning(Tuning(r.key.digest, st.job.search, st.job.seed, st.job.trials,
                                r.evaluated,
                                r.best.key() if r.best else None, r.best_cost,
                                r.default.key() if r.default else None, r.default_cost,
                                r.seconds, time.time(), ""))
    progress.done(r)
    return r


def tune(jobs: Sequence[Job], executor: Executor, cache: Cache | None = None,
         progress: Progress | None = None) -> list[JobResult]:
    """Run every job (module docstring); results in the jobs' order."""
    prog = progress or _Quiet()
    out: list[JobResult | None] = [None] * len(jobs)
    active: list[tuple[int, _State]] = []
    # jobs of one key (a sweep's points that differ only in clock, board or name) share their
    # measurements: a point is measured once however many of them ask for it
    shared: dict[str, dict[str, Outcome]] = {}
    for i, job in enumerate(jobs):
        t0 = time.perf_counter()
        key = job_key_of(job)
        hit = cache.tuning(key.digest, job.search, job.seed, job.trials) if cache else None
        done = _from_tuning(job, key, hit, time.perf_counter() - t0) if hit else None
        if done is not None:
            out[i] = done
            prog.done(done)
            continue
        try:
            st = _start(job, key, cache, prog)
            pool = shared.setdefault(key.digest, {})
            pool.update(st.known)
            st.known = pool
            active.append((i, st))
        except ScheduleError as e:  # no point of the space fits this hardware
            out[i] = JobResult(job, key, None, None, None, None, job.search,
                               failures={"no fit": str(e)},
                               seconds=time.perf_counter() - t0)
            prog.done(out[i])  # type: ignore[arg-type]
    while active:
        items: list[tuple[_State, Point]] = []
        later: list[tuple[_State, Point]] = []  # asked by two jobs of one key: measured once
        queued: set[tuple[str, str]] = set()
        still: list[tuple[int, _State]] = []
        for i, st in active:
            st.pending = st.search.ask()
            if not st.pending:
                out[i] = _finish(st, cache, prog)
                continue
            still.append((i, st))
            for p in st.pending:
                if p.key() in st.known:
                    st.result.reused += 1
                    prog.advance(st.job, _best_so_far(st, p))
                elif (st.result.key.digest, p.key()) in queued:
                    st.result.reused += 1
                    later.append((st, p))
                else:
                    queued.add((st.result.key.digest, p.key()))
                    items.append((st, p))
        active = still
        items, waiting = _claim(cache, items, prog)
        _measure(items, executor, cache, prog)
        while waiting:  # points another process is measuring: take its trials (or, when it
            time.sleep(_POLL_S)  # died, the points)
            items, waiting = _claim(cache, waiting, prog)
            _measure(items, executor, cache, prog)
        for st, p in later:
            prog.advance(st.job, _best_so_far(st, p))
        for _, st in active:
            st.search.tell([(p, st.known[p.key()].cost) for p in st.pending])
    assert all(r is not None for r in out)
    return [r for r in out if r is not None]


#: seconds between looks at the cache for points another process is measuring
_POLL_S = 0.05


def _claim(cache: Cache | None, items: list[tuple[_State, Point]], prog: Progress
           ) -> tuple[list[tuple[_State, Point]], list[tuple[_State, Point]]]:
    """Of ``items``, those this process measures (leased in the cache, ``Cache.lease``) and
    those another process is measuring; items another process has measured meanwhile are
    recorded as reused. Without a cache every item is this process's."""
    if cache is None or not items:
        return items, []
    by_key: dict[str, list[str]] = {}
    for st, p in items:
        by_key.setdefault(st.result.key.digest, []).append(p.key())
    got: set[tuple[str, str]] = set()
    done: dict[tuple[str, str], Trial] = {}
    for key, points in by_key.items():
        mine, theirs = cache.lease(key, points)
        got |= {(key, p) for p in mine}
        done |= {(key, p): t for p, t in theirs.items()}
    ours: list[tuple[_State, Point]] = []
    wait: list[tuple[_State, Point]] = []
    for st, p in items:
        k = (st.result.key.digest, p.key())
        if k in done:
            t = done[k]
            st.known[p.key()] = Outcome(t.cost, t.refused, t.seconds, t.method)
            st.result.reused += 1
            st.result.measured_elsewhere += 1
            prog.advance(st.job, _best_so_far(st, p))
        elif k in got:
            ours.append((st, p))
        else:
            wait.append((st, p))
    return ours, wait


def _measure(items: list[tuple[_State, Point]], executor: Executor, cache: Cache | None,
             prog: Progress) -> None:
    """Measure ``items`` on ``executor``, committing each trial as it arrives."""
    tasks = [st.job.task(p) for st, p in items]
    for k, o in executor.map_unordered(measure, tasks):
        st, p = items[k]
        st.known[p.key()] = o
        st.result.measured += 1
        if o.cost is None:
            st.result.failed += 1
            st.result.failures.setdefault((o.refused or "").split(":")[0], o.refused or "")
        if cache is not None:
            cache.add_trial(st.result.key.digest, p.key(), o.cost, refused=o.refused,
                            method=o.method, seconds=o.seconds)
        prog.advance(st.job, _best_so_far(st, p))


def _best_so_far(st: _State, p: Point) -> float | None:
    costs = [c for c in st.search.costs.values() if c is not None]
    now = st.known[p.key()].cost
    if now is not None:
        costs.append(now)
    return min(costs) if costs else None
