"""A whole graph's kernels simulated side by side (``vta.run.graph._speculate``): each on the
inputs the interpreter predicts, taken only when the kernel's real inputs are exactly those;
the run equals the kernels run one after another (cycles, every allocation's final contents,
statistics and timelines), and a wrong guess is never used."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from vta.graph.compile import CompiledGraph
from vta.run import graph as run_graph_module
from vta.run.graph import GraphRun, run_graph
from vta.run.targets import AccelTarget


def _same_run(a: GraphRun, b: GraphRun, timelines: bool = True) -> None:
    """``b`` the same run as ``a``; without ``timelines`` a kernel of ``b`` may come without
    its timeline (``run_graph(timelines=False)``), all else equal."""
    assert a.cycles == b.cycles and a.passed and b.passed
    for x, y in zip(a.steps, b.steps, strict=True):
        assert x.start == y.start and x.check == y.check
        if x.execution is None:
            assert y.execution is None
            continue
        assert y.execution is not None
        assert x.execution.stats == y.execution.stats
        assert x.sim.slices == y.sim.slices or (not timelines and y.sim.slices == ())
        assert x.sim.program == y.sim.program
        assert x.execution.outputs.keys() == y.execution.outputs.keys()
        for name, arr in x.execution.outputs.items():
            other = y.execution.outputs[name]
            assert arr.dtype == other.dtype and np.array_equal(arr, other), name
    for v, arr in a.outputs.items():
        assert np.array_equal(arr, b.outputs[v])
    # the report, energy included (the workers work it out beside the simulation), but the
    # seconds
    seconds = {"compile_s", "sim_s", "check_s", "reference_s", "reference_total_s", "host_ms"}
    sa, sb = a.summary(), b.summary()
    assert {k: v for k, v in sa.items() if k not in seconds} == \
        {k: v for k, v in sb.items() if k not in seconds}


def test_side_by_side_is_the_run_in_order(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray]) -> None:
    cg, t, image = compiled
    side = run_graph(cg, image, target=t, jobs=2)
    assert all(s.energy is not None for s in side.steps if s.execution is not None)
    _same_run(run_graph(cg, image, target=t, jobs=1), side)


def test_a_worker_s_unchanged_allocations_are_read_only_views_of_its_inputs(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray]) -> None:
    """An allocation a worker's kernel left as it was (its weights) comes back as a view of
    the input it was given, not a copy, and no write through it can change that input; the
    input keeps its own flag (a graph's constants stay writable, an earlier kernel's output,
    read-only as every run's outputs are, stays so)."""
    cg, t, image = compiled
    side = run_graph(cg, image, target=t, jobs=2)
    views = writable_inputs = 0
    for s in side.steps:
        if s.execution is None or s.energy is None:  # (a kernel simulated here)
            continue
        for name, arr in s.execution.outputs.items():
            given = s.sim.inputs.get(name)
            if given is not None and np.shares_memory(arr, given):
                assert not arr.flags.writeable and arr is not given
                with pytest.raises(ValueError):
                    arr.reshape(-1)[0] = 0
                views += 1
                writable_inputs += bool(given.flags.writeable)
    assert views > 0 and writable_inputs > 0


def test_a_guess_on_other_inputs_is_not_used(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every guess's inputs changed by one byte and its execution poisoned (no cycles): the
    run simulates every kernel itself and equals the run in order."""
    cg, t, image = compiled
    real = run_graph_module._speculate

    def wrong(*a: object, **k: object) -> object:
        spec = real(*a, **k)  # type: ignore[arg-type]
        for step, inputs in spec.given.items():
            changed = {n: x.copy() for n, x in inputs.items()}
            first = next(n for n in changed if not n.startswith("#") and "#" not in n)
            changed[first].reshape(-1)[0] ^= 1
            spec.given[step] = changed
        spec.result = lambda step: (None, None)  # type: ignore[method-assign]  # used, this
        return spec  # would fail at once

    monkeypatch.setattr(run_graph_module, "_speculate", wrong)
    _same_run(run_graph(cg, image, target=t, jobs=1), run_graph(cg, image, target=t, jobs=2))


def test_a_reference_computed_beforehand_is_the_same_run(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray]) -> None:
    """``vta run`` computes the interpreter's run while the compile workers work and hands it
    to ``run_graph``: the same run as when the kernels' simulations and the interpreter
    interleave; the interpreter's time is then all beside the workers."""
    cg, t, image = compiled
    ref = run_graph_module.Reference(cg.graph, image)
    ref.compute()
    before = run_graph(cg, image, target=t, jobs=2, reference=ref)
    assert before.seconds_reference == 0.0
    assert before.summary()["reference_total_s"] == ref.seconds > 0
    _same_run(run_graph(cg, image, target=t, jobs=1), before)


def test_without_timelines_the_workers_send_none_and_the_run_is_the_same(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray], tmp_path: Path) -> None:
    """``timelines=False`` (``vta run`` without ``--trace``): the kernels simulated in the
    workers come back without their timelines, and the run is otherwise the run in order
    (cycles, outputs, statistics, the report); a trace keeps them all the same."""
    cg, t, image = compiled
    in_order = run_graph(cg, image, target=t, jobs=1)
    side = run_graph(cg, image, target=t, jobs=2, timelines=False)
    assert any(s.energy is not None for s in side.steps)  # some ran in a worker
    assert all(s.sim.slices == () for s in side.steps if s.energy is not None)
    _same_run(in_order, side, timelines=False)
    traced = run_graph(cg, image, target=t, jobs=2, timelines=False,
                       trace_path=str(tmp_path / "t.json"))
    _same_run(in_order, traced)
