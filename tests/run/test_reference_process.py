"""``Reference.start``: the graph interpreter in a forked process of its own, each node's
outputs written to memory the parent shares: the same values, in the same steps, as the
interpreter here; the process's failure costs only time (the rest computed here); where no
process can be forked it is not started. ``vta run`` starts it where a core is free."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from tests.graph.conftest import ROOT, SMALL, hw
from vta.cli import main
from vta.cli import run as cli_run
from vta.graph import interp, models
from vta.graph.compile import accelerator_graph, compile_graph
from vta.graph.models import random_image, resnet18
from vta.run import graph as run_graph_module
from vta.run import pool
from vta.run.graph import Reference, run_graph


@pytest.fixture(scope="module")
def small() -> tuple[Any, dict[str, np.ndarray]]:
    g = accelerator_graph(resnet18(width=8, image=32, classes=10))
    return g, {v.name: random_image(k, v.type.shape) for k, v in enumerate(g.inputs)}


def _same_values(got: dict[Any, np.ndarray], want: dict[Any, np.ndarray]) -> None:
    assert got.keys() == want.keys()
    for v, a in want.items():
        assert got[v].dtype == a.dtype and np.array_equal(got[v], a), v.name


def test_the_process_gives_the_interpreters_values_node_by_node(small: Any) -> None:
    g, image = small
    want = interp.run_graph(g, image)
    ref = Reference(g, image)
    assert ref.start()
    assert not ref.start()  # once
    seen = [len(values) for values in ref.steps()]
    # the inputs and constants, then one step per node (and the complete values once more)
    assert len(seen) == len(g.nodes) + 2 and seen == sorted(seen)
    assert ref.done and ref._child is not None and ref._child.status == 0
    assert ref.seconds > 0
    _same_values(ref.values, want)
    for v in g.constants():
        assert ref.host[v] is v.data


def test_a_process_that_fails_costs_only_time(small: Any, monkeypatch: Any) -> None:
    """The process stops after three nodes (an error in it): the other nodes are computed
    here, the values are the interpreter's all the same."""
    g, image = small
    fill = run_graph_module._Slots.fill

    def three_then_fail(self: Any, steps: Any, report: Any) -> None:
        sent: list[bytes] = []

        def report_three(frame: bytes) -> None:
            if len(sent) == 3:
                raise RuntimeError("the interpreter's process fails")
            sent.append(frame)
            report(frame)

        fill(self, steps, report_three)

    monkeypatch.setattr(run_graph_module._Slots, "fill", three_then_fail)
    ref = Reference(g, image)
    assert ref.start()
    ref.compute()
    assert ref._child is not None and ref._child.status == 1
    _same_values(ref.values, interp.run_graph(g, image))


def test_no_process_where_none_can_fork(small: Any, monkeypatch: Any) -> None:
    g, image = small
    monkeypatch.setattr(pool, "_can_fork", lambda: False)
    ref = Reference(g, image)
    assert not ref.start() and ref._child is None
    ref.compute()
    _same_values(ref.values, interp.run_graph(g, image))


def test_not_started_once_computed(small: Any) -> None:
    g, image = small
    ref = Reference(g, image)
    ref.compute()
    assert not ref.start()


def test_a_run_checked_against_the_process_is_the_serial_run(small: Any) -> None:
    """The kernels simulated side by side on two workers from the process's values, against
    the run in order with the interpreter here: the same outputs and cycles, PASS."""
    g, image = small
    cg = compile_graph(g, hw("pynq"), refine=1)
    ref = Reference(cg.graph, image)
    assert ref.start()
    side = run_graph(cg, image, jobs=2, reference=ref)
    serial = run_graph(cg, image, jobs=1)
    assert side.passed and serial.passed
    assert side.cycles == serial.cycles
    assert [s.cycles for s in side.steps] == [s.cycles for s in serial.steps]
    _same_values(side.outputs, serial.outputs)
    _same_values(side.reference, serial.reference)


def test_vta_run_forks_it_only_where_a_core_is_idle(monkeypatch: Any,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """``vta run`` of a whole graph starts the interpreter's process when ``default_jobs``
    finds an idle core (not with ``--jobs 1``, not on a busy machine): the same cycles and
    PASS either way."""
    monkeypatch.setitem(models.MODELS, "resnet18",
                        lambda batch=1: models.resnet18(batch=batch, **SMALL))
    started: list[bool] = []
    start = Reference.start
    monkeypatch.setattr(Reference, "start", lambda self: started.append(start(self)) or True)
    argv = ["run", "--hw", str(ROOT / "hwconfigs" / "pynq.yaml"), "resnet18", "--json",
            "--no-cache"]
    cycles = []
    for idle, extra, want in ((2, [], [True]), (2, ["--jobs", "1"], []), (1, ["--jobs", "2"], [])):
        monkeypatch.setattr(cli_run, "default_jobs", lambda idle=idle: idle)
        started.clear()
        assert main([*argv, *extra]) == 0
        s = json.loads(capsys.readouterr().out)
        assert started == want and s["passed"]
        cycles.append(s["cycles"])
    assert len(set(cycles)) == 1


def test_the_workers_are_counted_before_the_interpreter_forks(monkeypatch: Any,
                                                              capsys: pytest.CaptureFixture[str]
                                                              ) -> None:
    """Without ``--jobs``, the compile and the simulations get the idle cores counted before
    the interpreter's process starts: counted after, that process is the runnable task that
    left them one worker (bench/warm_run.py: the default's cold run 8.7 s against 5.6 s with
    ``--jobs 2``)."""
    monkeypatch.setitem(models.MODELS, "resnet18",
                        lambda batch=1: models.resnet18(batch=batch, **SMALL))
    counts = iter([2])  # the first count sees an idle core; any later one would see none
    monkeypatch.setattr(cli_run, "default_jobs", lambda: next(counts, 1))
    asked: list[int | None] = []
    compile_for, run = cli_run.compile_for, cli_run.run_graph

    def spy_compile(*a: Any, jobs: int | None = None, **k: Any) -> Any:
        asked.append(jobs)
        return compile_for(*a, jobs=jobs, **k)

    def spy_run(*a: Any, jobs: int | None = None, **k: Any) -> Any:
        asked.append(jobs)
        return run(*a, jobs=jobs, **k)

    monkeypatch.setattr(cli_run, "compile_for", spy_compile)
    monkeypatch.setattr(cli_run, "run_graph", spy_run)
    argv = ["run", "--hw", str(ROOT / "hwconfigs" / "pynq.yaml"), "resnet18", "--json",
            "--no-cache"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["passed"]
    assert asked == [2, 2]
