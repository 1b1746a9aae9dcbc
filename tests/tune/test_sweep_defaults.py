"""Default-schedule sweeps (``trials: 0``, issue 22): each layer compiled once per hardware
content by ``driver.compile_workload`` with the timing-only simulator as its oracle, and the
point's cycles and energy taken from that timing run of the chosen program, not from a second
simulation. The figures are the tuner's at its default (same cycles, schedule and energy)."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.sim.energy import Energy
from vta.tune import sweep, sweep_share
from vta.tune.cache import Cache
from vta.tune.executor import LocalExecutor
from vta.tune.job import Job
from vta.tune.sweep import DefaultTask, default_layer, layer_energy, load_grid, run_sweep
from vta.tune.sweep_share import default_group
from vta.tune.tuner import tune

ROOT = Path(__file__).resolve().parents[2]
PYNQ = ROOT / "hwconfigs" / "pynq.yaml"
#: a small convolution: C11's shape at 7x7 with 64 channels (three default candidates)
SMALL = dict(height=7, in_channels=64, out_channels=64)

GRID = f"""
base: {PYNQ}
boards: [pynq-z1]
trials: 0
points:
  base: {{memory.latency: 40}}
  fast clock: {{memory.latency: 40, board.clock_mhz: 200}}
  half energy: {{memory.latency: 40, energy.scale: 0.5}}
  wide bus: {{memory.latency: 40, memory.bus_bytes: 16}}
"""


def _conv() -> Any:
    return resolve("resnet18:C11", [], **SMALL)


def counting_executor(calls: list[DefaultTask]) -> type[LocalExecutor]:
    """A local executor class that records in ``calls`` every layer and point it is given to
    run at its default schedule (a ``DefaultGroup`` counts its points)."""

    class Counting(LocalExecutor):
        def map_unordered(self, fn: Any, items: Any) -> Any:
            items = list(items)
            if fn is default_group:
                calls.extend(DefaultTask(t.workload, hw, t.check) for t in items
                             for hw in t.hws)
            return super().map_unordered(fn, items)

    return Counting


def test_a_default_layer_is_the_tuners_default_with_one_timing_run_per_candidate(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Same cycles, schedule and energy (pJ by component) as tuning at the default
    (``trials`` 1) and building the best point again for its energy; the timing-only
    simulator runs once per candidate ``driver.compile_workload`` times (branch and bound,
    ``driver.fastest``: one whose bound cannot win is not timed), nothing more."""
    hw = HwConfig.load(PYNQ).with_changes(**{"memory.latency": 40})
    w = _conv()
    runs: list[int] = []
    real = sweep_share.simulate

    def counting(program: Any, hw_: Any, **kw: Any) -> Any:
        runs.append(len(program.instructions))
        return real(program, hw_, **kw)

    with monkeypatch.context() as m:
        m.setattr(sweep_share, "simulate", counting)
        got = default_layer(DefaultTask(w, hw, check=False))
    timed: list[int] = []

    def cost(program: Any) -> int:
        timed.append(len(program.instructions))
        return int(real(program, hw, timing_only=True).stats.cycles)

    driver.compile_workload(w, hw, cost=cost)
    assert got["evaluated"] == 3  # the candidates it chose among
    assert runs == timed and 1 <= len(runs) <= 3  # those it timed; no run for the energy
    with LocalExecutor(1) as ex:
        [jr] = tune([Job(w, hw, trials=1)], ex)
    assert jr.best is not None and got["cycles"] == jr.best_cost == jr.default_cost
    assert got["schedule"] == jr.best.as_dict()
    assert got["pj"] == layer_energy(jr.job.task(jr.best))["pj"]
    assert Energy(got["pj"]).total_uj > 0


def test_a_default_sweep_runs_each_hardware_content_once_and_prices_each_point(
        tmp_path: Path) -> None:
    """Points differing only in clock share a layer run (one per hardware content and
    energy model); the clock changes the EDP, the energy scale the energy, the bus the
    cycles; every ok point has its energy; with the check each layer is bit-exact."""
    path = tmp_path / "g.yaml"
    path.write_text(GRID)
    grid = load_grid(path)
    calls: list[DefaultTask] = []
    Counting = counting_executor(calls)

    with Counting(1) as ex:
        res = run_sweep(grid, ["resnet18:C11"], ex, check=True)
    assert len(calls) == 3  # base and fast clock share one; half energy prices apart
    rows = {p.point.name: p for p in res.points}
    assert all(p.status == "ok" and p.energy is not None and p.passed for p in res.points)
    base, fast, half, wide = (rows[n] for n in ("base", "fast clock", "half energy",
                                                "wide bus"))
    assert fast.cycles == base.cycles and fast.energy_uj == base.energy_uj
    assert fast.edp == pytest.approx(base.edp / 2)
    assert half.cycles == base.cycles and half.energy_uj == pytest.approx(base.energy_uj / 2)
    assert wide.cycles < base.cycles
    [layer] = base.layers
    assert layer["sim_cycles"] == layer["cycles"] == base.cycles  # the check's run agrees
    assert layer["default_cycles"] == layer["cycles"]
    assert "_energy_pj" not in layer and layer["energy_uj"] == base.energy_uj


def test_a_layer_no_schedule_fits_fails_its_point_by_name(tmp_path: Path) -> None:
    """A layer whose every schedule overflows the point's scratchpads: that point is
    ``failed`` naming the layer and why; the others are ok."""
    path = tmp_path / "g.yaml"
    path.write_text(f"base: {PYNQ}\nboards: [pynq-z1]\ntrials: 0\npoints:\n"
                    f"  base: {{memory.latency: 40}}\n"
                    f"  tiny: {{scratchpad.wgt: 1024}}\n")
    grid = load_grid(path)
    with LocalExecutor(1) as ex:
        res = run_sweep(grid, ["resnet18:C11"], ex, check=False)
    rows = {p.point.name: p for p in res.points}
    assert rows["base"].status == "ok"
    tiny = rows["tiny"]
    assert tiny.status == "failed" and tiny.energy is None
    assert tiny.reason.startswith("resnet18:C11: ScheduleError: ")
    assert "does not fit the wgt scratchpad of tiny" in tiny.reason


def test_a_rerun_answers_from_the_cache_file_and_a_damaged_row_is_recomputed(
        tmp_path: Path) -> None:
    """The second sweep of the same points compiles nothing (the figures kept in the cache
    file's ``sweep_defaults``) and gives the same rows; a row that is not such figures is
    computed again and replaced; another compiler version is another key."""
    path = tmp_path / "g.yaml"
    path.write_text(GRID)
    grid = load_grid(path)
    calls: list[DefaultTask] = []
    Counting = counting_executor(calls)

    db = tmp_path / "c.sqlite"

    def once() -> list[tuple[int, float]]:
        with Counting(1) as ex, Cache(db) as c:
            res = run_sweep(grid, ["resnet18:C11"], ex, cache=c, check=False)
        return [(p.cycles, p.energy_uj) for p in res.points]

    cold = once()
    assert len(calls) == 3
    calls.clear()
    assert once() == cold and calls == []
    con = sqlite3.connect(db)
    con.execute("UPDATE sweep_defaults SET figures = 'not json' WHERE rowid = 1")
    con.commit()
    con.close()
    assert once() == cold and len(calls) == 1
    calls.clear()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(sweep, "compiler_version", lambda: "another")
        assert once() == cold and len(calls) == 3
