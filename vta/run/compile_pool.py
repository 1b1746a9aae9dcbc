"""A graph's kernels compiled on the idle cores: what ``compile_graph`` would compile, compiled in
worker processes first, so that its own (serial, authoritative) placement only looks them up.

``vta.graph.compile.compile_graph`` places the fused groups in order with one ``Placer``: the
first group of a structure chooses its schedule (the model's best candidates timed on the
timing-only simulator), the later ones of that structure are compiled with its knobs. Every
compile goes through a memo (``driver.CompileMemo``) by a canonical key of its request, so
the same program answers every request with that key. ``place_parallel`` (``compile_graph``'s
``place``, as ``vta.run.graph.compile_for`` passes it) goes:

1. a dry run: one ``Placer`` over the groups in order with a memo that answers what the
   compile cache holds and, for anything else, records the request's key and stops that
   group (``_Missing``) instead of compiling. When nothing is missing (a warm run) its
   placement is the placement, and nothing more is done;
2. the missing requests grouped by structure (the key without the chain's labels, which
   carry the requantization constants, nor the forced knobs), each structure's groups in
   graph order a task; a task runs a ``Placer`` over its groups in a worker, so its first
   group chooses and the rest follow, exactly as in the serial order; a request asked twice
   (a network's repeated layers, constants included) is compiled once;
3. the workers' programs come back as bytes (``vta.run.codec``, not pickled dataclasses),
   decoded here as each task returns and put in task order (the result never depends on
   which worker finished first) into the memo (``Prefetched``, and through it into the
   compile cache), while the workers compile the next (the interpreter's run, ``meanwhile``,
   goes first); the groups are placed in order over that memo (``place_all``'s placement),
   each as soon as its programs are here (``_Placing``), the rest after the last task.

Nothing here decides what is compiled: a request the dry run did not foresee is simply a
miss in the final placement and compiled there, so the programs, schedules and cycles are
those of the serial compile by construction. The pool is ``vta.run.pool.ForkPool``:
``os.cpu_count()`` processes started by ``fork`` (the workers inherit the graph, the hardware,
registered intrinsics and the cost oracle, none of which need to pickle); with one core, one
task, no ``fork`` or a pool that fails to start or dies, the tasks run in this process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vta.compiler.accel import driver
from vta.config import HwConfig
from vta.graph.ir import Graph
from vta.graph.place import Cost, Placer, Step
from vta.run.codec import pack_compiled, unpack_compiled
from vta.run.pool import ForkPool, current_job

__all__ = ["Prefetched", "place_parallel", "prefetch", "structure_of"]


class _Missing(Exception):
    """Raised by the dry run's memo for a request it does not hold (carries the key)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


@dataclass
class Prefetched:
    """A ``driver.CompileMemo`` over an optional persistent one (the compile cache): what was
    looked up or compiled in this process is held here (``known``), what is put is also kept
    in the persistent memo. ``prefetch`` fills it; ``compile_graph`` then reads it."""

    persistent: driver.CompileMemo | None = None
    known: dict[str, Any] = field(default_factory=dict)
    #: requests compiled by ``prefetch`` (in worker processes or, falling back, here)
    compiled: int = 0
    #: worker processes used (0: compiled in this process)
    workers: int = 0

    def get(self, key: str) -> Any:
        if key in self.known:
            return self.known[key]
        hit = self.persistent.get(key) if self.persistent is not None else None
        if hit is not None:
            self.known[key] = hit
        return hit

    def put(self, key: str, compiled: Any) -> None:
        self.known[key] = compiled
        if self.persistent is not None:
            self.persistent.put(key, compiled)

    def put_packed(self, key: str, blob: bytes, compiled: Any) -> None:
        """``put`` of a program that came as ``pack_compiled``'s bytes: a persistent memo that
        keeps bytes (``put_packed``: the compile cache) keeps these, not packed again."""
        self.known[key] = compiled
        keep = getattr(self.persistent, "put_packed", None)
        if keep is not None:
            keep(key, blob, compiled)
        elif self.persistent is not None:
            self.persistent.put(key, compiled)


class _DryRun:
    """The dry run's memo: answers what ``memo`` holds, records every key asked (by the group
    being placed) and stops a group whose request is missing."""

    def __init__(self, memo: Prefetched) -> None:
        self.memo = memo
        self.asked: list[str] = []

    def get(self, key: str) -> Any:
        self.asked.append(key)
        hit = self.memo.get(key)
        if hit is None:
            raise _Missing(key)
        return hit

    def put(self, key: str, compiled: Any) -> None:  # pragma: no cover - never compiles
        raise AssertionError("the dry run compiles nothing")


class _Recorder:
    """A worker's memo: answers the programs it was given, keeps what it compiles."""

    def __init__(self, given: dict[str, Any]) -> None:
        self.given = given
        self.fresh: dict[str, Any] = {}

    def get(self, key: str) -> Any:
        return self.given.get(key, self.fresh.get(key))

    def put(self, key: str, compiled: Any) -> None:
        self.fresh[key] = compiled


def structure_of(key: str) -> str:
    """The structure a compile request belongs to (``Placer``'s reuse of a chosen schedule):
    its key without the fused chain's labels (the requantization constants) and without
    forced knobs or schedule (what a later group of the structure is given). A coarser
    grouping than the placer's only puts more groups in one task; it never changes a
    program."""
    try:
        parts = json.loads(key)
    except ValueError:
        return key
    if not isinstance(parts, dict):
        return key
    chain = parts.get("chain")
    if isinstance(chain, list) and len(chain) == 2:
        stages, operands = chain
        parts["chain"] = [[[s[0], s[2]] for s in stages], [o[1] for o in operands]]
    parts.pop("knobs", None)
    parts.pop("schedule", None)
    return json.dumps(parts, sort_keys=True)


@dataclass(frozen=True)
class _Job:
    """What every task of one ``prefetch`` shares (inherited by the forked workers)."""

    fused: Graph
    hw: HwConfig
    cost: Cost | None
    refine: int


def _run_task(task: tuple[tuple[int, ...], dict[str, bytes]]) -> dict[str, bytes]:
    """A worker's task: place the groups (indices into the fused graph's nodes, in order)
    with one ``Placer`` over the programs given (bytes by key); the programs it compiled, as
    bytes by key (a program that does not survive the encoding is left out: the final
    placement compiles it)."""
    job = current_job()
    assert isinstance(job, _Job)  # the pool's, inherited
    indices, given = task
    memo = _Recorder({k: c for k, b in given.items()
                      if (c := unpack_compiled(b, job.hw)) is not None})
    placer = Placer(job.fused, job.hw, job.cost, job.refine, memo)
    for i in indices:
        placer.place(job.fused.nodes[i])
    out = {}
    for k, c in memo.fresh.items():
        blob = pack_compiled(c, job.hw)
        if blob is not None:
            out[k] = blob
    return out


def _dry_run(job: _Job, memo: Prefetched
             ) -> tuple[list[Step] | None, list[tuple[tuple[int, ...], dict[str, bytes]]]]:
    """The dry run: the placement when ``memo`` holds every kernel (and no task), else None
    and the tasks: the groups whose requests ``memo`` lacks, by structure, each structure's
    groups (with any of them ``memo`` holds, given as bytes so its choice is not redone) a
    task (a request asked twice is compiled once: the worker's memo answers the second)."""
    dry = _DryRun(memo)
    placer = Placer(job.fused, job.hw, job.cost, job.refine, dry)
    asked: list[tuple[int, str, bool]] = []  # (group, key, held)
    steps: list[Step] = []
    for i, group in enumerate(job.fused.nodes):
        before = len(dry.asked)
        try:
            steps.append(placer.place(group))
        except _Missing as e:
            asked.append((i, e.key, False))
            continue
        if len(dry.asked) > before:  # a kernel the memo holds (a host step asks nothing)
            asked.append((i, dry.asked[-1], True))
    if all(held for _, _, held in asked):
        return steps, []
    by_structure: dict[str, list[tuple[int, str, bool]]] = {}
    for a in asked:
        by_structure.setdefault(structure_of(a[1]), []).append(a)
    tasks = []
    for members in by_structure.values():
        missing = [m for m in members if not m[2]]
        if not missing:
            continue
        indices = tuple(m[0] for m in members)  # all, in order: the first chooses
        given = {}
        for _, key, held in members:
            blob = pack_compiled(memo.known[key], job.hw) if held else None
            if blob is not None:
                given[key] = blob
        tasks.append((indices, given))
    return None, tasks


def place_parallel(fused: Graph, hw: HwConfig, *, cost: Cost | None = None,
                   refine: int = driver.REFINE, memo: driver.CompileMemo | None = None,
                   jobs: int | None = None, meanwhile: Callable[[], None] | None = None
                   ) -> list[Step]:
    """The steps ``place_all(fused, hw, cost, refine, memo)`` gives, the kernels ``memo`` (the
    compile cache) lacks compiled on ``jobs`` worker processes first (module docstring;
    default: the idle cores; 1: in this process). When ``memo`` holds every kernel the dry run's
    placement is the placement (nothing is placed twice). ``compile_graph``'s ``place``.
    ``meanwhile``: run in this process while the workers compile (not when nothing is
    compiled in workers)."""
    return _placed(fused, hw, cost, refine, memo, jobs, meanwhile)[0]


def prefetch(fused: Graph, hw: HwConfig, *, cost: Cost | None = None,
             refine: int = driver.REFINE, memo: driver.CompileMemo | None = None,
             jobs: int | None = None) -> Prefetched:
    """A memo holding every program ``place_all(fused, hw, cost, refine, memo)`` asks for:
    those ``memo`` holds and those compiled by ``place_parallel``."""
    return _placed(fused, hw, cost, refine, memo, jobs)[1]


def _placed(fused: Graph, hw: HwConfig, cost: Cost | None, refine: int,
            memo: driver.CompileMemo | None, jobs: int | None,
            meanwhile: Callable[[], None] | None = None) -> tuple[list[Step], Prefetched]:
    out = Prefetched(memo)
    job = _Job(fused, hw, cost, refine)
    steps, tasks = _dry_run(job, out)
    if steps is not None:  # the memo held every kernel: that placement is the one
        return steps, out
    placing = _Placing(job, out)
    with ForkPool(_run_task, job, jobs, len(tasks)) as pool:
        for task in tasks:
            pool.submit(task)
        # every task is out: each worker ends once it has its last one, while this process
        # takes the results (not when the pool closes: a worker's exit took 5-25 ms)
        pool.end_input()
        if meanwhile is not None and pool.parallel:
            meanwhile()
        # each task's programs decoded and kept as it comes back (in task order, whichever
        # worker finished first), and the groups they complete placed, while the workers
        # compile the next
        for fresh in pool.iter_results():
            _keep(out, fresh, hw)
            placing.advance()
        out.workers = pool.workers
    return placing.finish(), out


class _Placing:
    """``place_all(fused, hw, cost, refine, memo)`` as the tasks come back: one ``Placer`` over
    the groups in order, each placed (``advance``, after each task) as soon as ``memo`` holds
    in this process what it asks for; a group that asks for a program not come back yet
    stops the advance (``_Missing``, raised before the placer records anything of it), and
    ``finish`` places the rest over ``memo`` itself (its compile cache; a request nobody
    foresaw compiled there). The same placer, the same groups in the same order and the
    same programs as ``place_all`` over the full memo: the same steps, most of them placed
    while the workers compile the last tasks instead of after them."""

    def __init__(self, job: _Job, memo: Prefetched) -> None:
        self.nodes, self.memo = job.fused.nodes, memo
        self.placer = Placer(job.fused, job.hw, job.cost, job.refine, self)
        self.steps: list[Step] = []

    def get(self, key: str) -> Any:
        """The placer's memo while advancing: what came back, else stop the group."""
        hit = self.memo.known.get(key)
        if hit is None:
            raise _Missing(key)
        return hit

    def put(self, key: str, compiled: Any) -> None:  # pragma: no cover - never compiles
        raise AssertionError("placing as the tasks come back compiles nothing")

    def advance(self) -> None:
        """Place the next groups while their programs are here."""
        while len(self.steps) < len(self.nodes):
            try:
                self.steps.append(self.placer.place(self.nodes[len(self.steps)]))
            except _Missing:
                return

    def finish(self) -> list[Step]:
        """Every group's step: the rest placed over the memo itself."""
        self.placer.memo = self.memo
        self.steps += [self.placer.place(group) for group in self.nodes[len(self.steps):]]
        return self.steps


def _keep(out: Prefetched, fresh: dict[str, bytes], hw: HwConfig) -> None:
    """A task's programs (bytes by key) decoded and put into ``out`` (and so into the compile
    cache), those not kept already: done as each task comes back, the cache's writes (one
    transaction a program, a few milliseconds each of waiting for the file, 23 of them for
    ResNet-18) happen while the workers compile instead of after the last of them."""
    for key, blob in fresh.items():
        c = unpack_compiled(blob, hw)
        if c is not None and key not in out.known:
            out.put_packed(key, blob, c)
            out.compiled += 1
