"""``ForkPool.result``: one item's result by its position, in any order, while the workers
compute the others; an item that failed in its worker computed in this process; items never
asked for computed nowhere here. ``ForkPool.end_input``: the workers end by themselves once
they have computed their last item, before the pool closes. And the graph run that uses them
(``vta.run.graph``): the run in order takes each kernel's simulation from its worker as it
reaches the kernel, after every kernel was handed out."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from vta.graph.compile import CompiledGraph
from vta.run import graph as run_graph_module
from vta.run.graph import run_graph
from vta.run.pool import ForkPool, current_job
from vta.run.targets import AccelTarget

#: the items this process computed itself (a worker's appends stay in the worker)
_HERE: list[int] = []


def _square(x: int) -> tuple[int, int]:
    _HERE.append(x)
    return x * x + current_job(), os.getpid()


def _fails_in_a_worker(x: int) -> int:
    """``x``, but item 2 fails anywhere but in the process that made the pool."""
    _HERE.append(x)
    if x == 2 and os.getpid() != current_job():
        raise ValueError("item 2 fails in its worker")
    return x


def test_results_in_any_order_from_the_workers() -> None:
    _HERE.clear()
    with ForkPool(_square, 10, 2, 6) as p:
        for x in range(6):
            p.submit(x)
        got = {n: p.result(n) for n in (5, 0, 3, 1)}
    assert {n: v for n, (v, _) in got.items()} == {n: n * n + 10 for n in (5, 0, 3, 1)}
    assert {pid for _, pid in got.values()} - {os.getpid()} != set()  # workers computed them
    assert _HERE == []  # nothing here, not even the items never asked for (2, 4)


def test_a_failed_item_is_computed_here_and_the_others_still_come() -> None:
    _HERE.clear()
    with ForkPool(_fails_in_a_worker, os.getpid(), 2, 4) as p:
        for x in range(4):
            p.submit(x)
        assert [p.result(n) for n in (3, 2, 0, 1)] == [3, 2, 0, 1]
    assert 2 in _HERE  # the failed item, again here


def test_without_workers_an_item_is_computed_when_asked() -> None:
    _HERE.clear()
    with ForkPool(_square, 1, 1, 3) as p:
        for x in range(3):
            p.submit(x)
        assert p.result(2)[0] == 5 and _HERE == [2]


def _ended(pid: int) -> bool:
    """Whether process ``pid`` (a child) ends within a minute (reaped here if so)."""
    for _ in range(1200):
        if os.waitpid(pid, os.WNOHANG)[0] == pid:
            return True
        time.sleep(0.05)
    return False


def test_after_end_input_the_workers_end_once_their_items_are_done() -> None:
    with ForkPool(_square, 0, 2, 5) as p:
        for x in range(5):
            p.submit(x)
        p.end_input()
        assert [p.result(n)[0] for n in range(5)] == [x * x for x in range(5)]
        workers = p._pool
        assert workers is not None and workers.started == 2
        assert all(_ended(pid) for pid in workers.pids)  # before the pool closes


def test_without_end_input_the_workers_wait_for_more() -> None:
    with ForkPool(_square, 0, 2, 2) as p:
        p.submit(1)
        p.submit(2)
        assert [p.result(0)[0], p.result(1)[0]] == [1, 4]
        workers = p._pool
        assert workers is not None
        assert [os.waitpid(pid, os.WNOHANG)[0] for pid in workers.pids] == [0, 0]


def test_the_run_in_order_takes_each_kernel_as_it_reaches_it(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every kernel is handed out before the first is taken; each kernel a worker simulated
    is asked for once, in the order of the steps, and the run is the run on one process."""
    cg, t, image = compiled
    events: list[tuple[str, int]] = []
    real_submit = run_graph_module._Speculation.submit
    real_result = run_graph_module._Speculation.result

    def submit(self: run_graph_module._Speculation, k: int, inputs: dict[str, np.ndarray]
               ) -> None:
        events.append(("submit", k))
        real_submit(self, k, inputs)

    def result(self: run_graph_module._Speculation, k: int) -> object:
        events.append(("result", k))
        return real_result(self, k)

    monkeypatch.setattr(run_graph_module._Speculation, "submit", submit)
    monkeypatch.setattr(run_graph_module._Speculation, "result", result)
    side = run_graph(cg, image, target=t, jobs=2)
    kernels = [s.index for s in side.steps if s.execution is not None]
    kinds = [e for e, _ in events]
    assert kinds == ["submit"] * len(kernels) + ["result"] * len(kernels)
    assert sorted(k for e, k in events if e == "submit") == kernels
    assert [k for e, k in events if e == "result"] == kernels
    alone = run_graph(cg, image, target=t, jobs=1)
    assert alone.cycles == side.cycles and alone.passed and side.passed
    for a, b in zip(alone.steps, side.steps, strict=True):
        assert a.check == b.check and a.cycles == b.cycles


def test_the_instructions_are_counted_beside_the_workers(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run beside workers counts each kernel's instructions as it reaches the kernel
    (``StepRun.instructions``); the report counts none again and says the same as the run on
    one process, which leaves them to the report."""
    from vta.isa.builtins import instruction_counts

    cg, t, image = compiled
    side = run_graph(cg, image, target=t, jobs=2)
    alone = run_graph(cg, image, target=t, jobs=1)
    kernels = [s for s in side.steps if s.execution is not None]
    assert kernels and all(s.instructions == instruction_counts(s.step.program)
                           for s in kernels)
    assert all(s.instructions is None for s in alone.steps)
    want = alone.summary()

    def counted_again(program: object) -> dict[str, int]:
        raise AssertionError("counted again")

    monkeypatch.setattr(run_graph_module, "instruction_counts", counted_again)
    got = side.summary()
    assert got["instructions"] == want["instructions"]
    assert [r["instructions"] for r in got["steps"] if r["placement"] == "vta"] == \
        [r["instructions"] for r in want["steps"] if r["placement"] == "vta"]
