"""A graph's kernels compiled in worker processes (``vta.run.compile_pool``): the same programs,
schedules and cycles as the serial compile, every request the final placement makes answered
by the prefetch, the compile cache's rows used, a serial fallback where no pool starts, and
``vta run --jobs`` refused where it does not apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from vta.cli import main
from vta.config import HwConfig
from vta.graph import models
from vta.graph.compile import CompiledGraph, compile_graph
from vta.graph.ir import Graph
from vta.graph.passes.fuse import fuse
from vta.graph.passes.split_matmul import split_matmuls
from vta.graph.place import Kernel, Placer
from vta.run import pool
from vta.run.compile_pool import Prefetched, prefetch, structure_of
from vta.run.graph import compile_for
from vta.run.targets import AccelTarget
from vta.tune.cache import Cache
from vta.tune.compile_cache import CompileCache

ROOT = Path(__file__).resolve().parents[2]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")
SMALL = dict(image=32, width=16, classes=10)


def _small(batch: int = 1) -> Graph:
    return models.resnet18(batch=batch, **SMALL)


@pytest.fixture(scope="module")
def graph() -> Graph:
    return _small()


@pytest.fixture(scope="module")
def fused(graph: Graph) -> Graph:
    """The graph as ``compile_graph`` places it."""
    return fuse(split_matmuls(graph), "full")


@pytest.fixture(scope="module")
def serial(graph: Graph) -> CompiledGraph:
    """The graph compiled in this process, no memo: what every other way must equal."""
    hw = HwConfig.load(PYNQ)
    return compile_graph(graph, hw, cost=AccelTarget(hw).cycles)


class _Counting:
    """A memo over another that counts the requests it could not answer."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.missed = inner, 0

    def get(self, key: str) -> Any:
        hit = self.inner.get(key)
        self.missed += hit is None
        return hit

    def put(self, key: str, compiled: Any) -> None:
        self.inner.put(key, compiled)


def _same(a: CompiledGraph, b: CompiledGraph) -> None:
    assert [type(s) for s in a.steps] == [type(s) for s in b.steps]
    for x, y in zip(a.steps, b.steps, strict=True):
        if isinstance(x, Kernel):
            assert isinstance(y, Kernel)
            assert (x.detail, x.program, x.bound) == (y.detail, y.program, y.bound)
    assert a.programs == b.programs


def test_workers_compile_what_the_serial_placement_asks_for(
        graph: Graph, fused: Graph, serial: CompiledGraph) -> None:
    hw = serial.hw
    cost = AccelTarget(hw).cycles
    memo = prefetch(fused, hw, cost=cost, jobs=2)
    assert memo.workers == 2 and memo.compiled == len(memo.known) == len(serial.kernels)
    counting = _Counting(memo)
    pooled = compile_graph(graph, hw, cost=cost, memo=counting)
    assert counting.missed == 0  # the final placement compiled nothing itself
    _same(pooled, serial)


def test_one_job_no_fork_or_a_pool_that_cannot_start_compile_here(
        graph: Graph, fused: Graph, serial: CompiledGraph,
        monkeypatch: pytest.MonkeyPatch) -> None:
    hw = serial.hw
    cost = AccelTarget(hw).cycles
    one = prefetch(fused, hw, cost=cost, jobs=1)
    assert one.workers == 0 and one.compiled == len(one.known)
    _same(compile_graph(graph, hw, cost=cost, memo=one), serial)

    def no_pool(*a: object, **k: object) -> None:
        raise OSError("no processes here")

    monkeypatch.setattr(pool, "_pool", no_pool)
    broken = prefetch(fused, hw, cost=cost, jobs=2)
    assert broken.workers == 0 and broken.compiled == len(broken.known)
    monkeypatch.setattr(pool, "_can_fork", lambda: False)
    spawn_only = prefetch(fused, hw, cost=cost, jobs=2)
    assert spawn_only.workers == 0
    _same(compile_graph(graph, hw, cost=cost, memo=spawn_only), serial)


def test_the_compile_cache_answers_first_and_keeps_what_the_workers_compiled(
        graph: Graph, fused: Graph, serial: CompiledGraph, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    hw = serial.hw
    t = AccelTarget(hw)
    with Cache(tmp_path / "c.sqlite") as cache:
        cold = CompileCache(cache, hw)
        t.memo = cold
        first = compile_for(graph, t, jobs=2)
        n = len(serial.kernels)
        assert cold.stats == {"hits": 0, "misses": n, "rejected": 0} and cold.count() == n
        t.memo = warm = CompileCache(cache, hw)
        memo = prefetch(fused, hw, cost=t.cycles, memo=warm, jobs=2)
        assert memo.compiled == 0 and memo.workers == 0  # nothing to compile: no pool
        assert warm.stats["hits"] == n
        # warm, the dry run's placement is the placement: every group placed once
        placed: list[object] = []
        real = Placer.place
        monkeypatch.setattr(Placer, "place", lambda self, g: placed.append(g) or real(self, g))
        t.memo = CompileCache(cache, hw)
        again = compile_for(graph, t, jobs=2)
        assert len(placed) == len(fused.nodes)
    assert isinstance(first, CompiledGraph) and isinstance(again, CompiledGraph)
    _same(first, serial)
    _same(again, serial)


def test_a_structure_is_its_request_without_constants_or_forced_knobs() -> None:
    def key(label: str, knobs: dict[str, int]) -> str:
        return json.dumps({"op": "Conv2dSpec", "spec": "Conv2dSpec(1, 16, 8, 8)",
                           "chain": [[["s0", label, ["acc"]]], [["opnd0", "tensor", "*3"]]],
                           "knobs": knobs}, sort_keys=True)

    a, b = key("requant(5, 9)", {}), key("requant(7, 10)", {"tco": 2})
    assert a != b and structure_of(a) == structure_of(b)
    other = json.dumps({"op": "Conv2dSpec", "spec": "Conv2dSpec(1, 32, 8, 8)",
                        "chain": [[["s0", "requant(5, 9)", ["acc"]]],
                                  [["opnd0", "tensor", "*3"]]], "knobs": {}}, sort_keys=True)
    assert structure_of(other) != structure_of(a)
    assert structure_of("not json") == "not json"


def test_a_prefetched_memo_keeps_what_is_put_in_the_persistent_one() -> None:
    class Dict:
        def __init__(self) -> None:
            self.rows: dict[str, Any] = {"old": 1}

        def get(self, key: str) -> Any:
            return self.rows.get(key)

        def put(self, key: str, compiled: Any) -> None:
            self.rows[key] = compiled

    inner = Dict()
    memo = Prefetched(inner)
    assert memo.get("old") == 1 and memo.get("new") is None
    memo.put("new", 2)
    assert inner.rows["new"] == 2 and memo.known == {"old": 1, "new": 2}
    memo.put_packed("bytes", b"3", 3)  # a memo that keeps no bytes is given the object
    assert inner.rows["bytes"] == 3 and memo.known["bytes"] == 3

    class Bytes(Dict):
        def put_packed(self, key: str, blob: bytes, compiled: Any) -> None:
            self.rows[key] = blob

    keeps = Bytes()
    Prefetched(keeps).put_packed("k", b"4", 4)
    assert keeps.rows["k"] == b"4"


def _count_results(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A one-element list counting the pool's results as they come back (``iter_results``)."""
    came_back = [0]
    results = pool.ForkPool.iter_results

    def counted(self: pool.ForkPool[Any, Any]) -> Any:
        for r in results(self):
            came_back[0] += 1
            yield r

    monkeypatch.setattr(pool.ForkPool, "iter_results", counted)
    return came_back


def test_a_task_s_programs_are_kept_as_it_comes_back(
        fused: Graph, serial: CompiledGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compile cache's writes go while the workers compile the next tasks, not after the
    last: each task's programs are put as its result comes back, in task order."""
    came_back = _count_results(monkeypatch)

    class Cache:  # keeps bytes, as the compile cache does
        def __init__(self) -> None:
            self.when: list[int] = []  # tasks come back at each put

        def get(self, key: str) -> Any:
            return None

        def put(self, key: str, compiled: Any) -> None:
            raise AssertionError("the workers' programs are kept as their bytes")

        def put_packed(self, key: str, blob: bytes, compiled: Any) -> None:
            self.when.append(came_back[0])

    cache = Cache()
    hw = serial.hw
    memo = prefetch(fused, hw, cost=AccelTarget(hw).cycles, memo=cache, jobs=1)
    assert len(cache.when) == memo.compiled == len(serial.kernels)
    assert came_back[0] > 1 and cache.when[0] == 1 and cache.when == sorted(cache.when)


def test_groups_are_placed_as_their_programs_come_back(
        graph: Graph, serial: CompiledGraph, monkeypatch: pytest.MonkeyPatch) -> None:
    """The final placement advances after each task (a group as soon as the programs it
    asks for are here), not after the last task; the steps are the serial compile's."""
    came_back = _count_results(monkeypatch)
    placed: list[int] = []  # tasks come back at each group placed in this process
    real = Placer.place

    def place(self: Placer, group: Any) -> Any:
        step = real(self, group)  # a group stopped for a missing program is not placed
        placed.append(came_back[0])
        return step

    monkeypatch.setattr(Placer, "place", place)
    hw = serial.hw
    pooled = compile_for(graph, AccelTarget(hw), jobs=2)  # (the workers' groups not here)
    tasks = came_back[0]
    assert tasks > 1 and len(placed) == len(serial.steps) and placed == sorted(placed)
    assert 0 < placed[0] < tasks
    assert sum(k < tasks for k in placed) > len(placed) // 2  # most before the last task
    assert isinstance(pooled, CompiledGraph)
    _same(pooled, serial)


@pytest.mark.parametrize("argv, says", [
    (["run", "--hw", PYNQ, "resnet18:C11", "--jobs", "2"], "--jobs does not apply to"),
    (["run", "resnet18", "--target", "cuda-emu", "--jobs", "2"], "--jobs does not apply to "
                                                                 "--target cuda-emu"),
    (["run", "--hw", PYNQ, "resnet18", "--jobs", "0"], "must be >= 1"),
])
def test_jobs_is_refused_where_it_does_not_apply(argv: list[str], says: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert says in capsys.readouterr().err


def test_vta_run_jobs_one_and_two_print_the_same_run(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(models.MODELS, "resnet18", _small)
    outs = []
    for jobs in ("1", "2"):
        assert main(["run", "--hw", PYNQ, "resnet18", "--no-cache", "--jobs", jobs,
                     "--json"]) == 0
        s = json.loads(capsys.readouterr().out)
        outs.append([{k: v for k, v in r.items() if k != "compile_s"} for r in s["steps"]])
        assert s["passed"]
    assert outs[0] == outs[1]


@pytest.mark.parametrize("loadavg, cpus, jobs", [
    ("0.10 0.20 0.30 1/120 999", 2, 2),   # only this process runs: every core
    ("1.00 1.00 1.00 2/120 999", 2, 1),   # one other job: the one idle core
    ("8.00 8.00 8.00 9/120 999", 2, 1),   # a busy machine: this process alone
    ("8.00 8.00 8.00 3/120 999", 8, 6),
    ("not a load average", 4, 4),         # unreadable: every core
])
def test_the_default_pool_takes_the_cores_no_other_job_runs_on(
        loadavg: str, cpus: int, jobs: int, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    f = tmp_path / "loadavg"
    f.write_text(loadavg + "\n")
    monkeypatch.setattr(pool, "LOADAVG", f)
    monkeypatch.setattr(pool.os, "cpu_count", lambda: cpus)
    assert pool.default_jobs() == jobs
