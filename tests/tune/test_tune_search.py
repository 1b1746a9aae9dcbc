"""The searches, on a real bound space with synthetic costs (nothing is compiled): exhaustive
covers every point that fits, evolution keeps its budget, proposes only fresh points that fit,
is reproducible from its seed and improves on its first generation."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.schedules.model import rank
from vta.compiler.ir.space import Point
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.errors import SearchError
from vta.tune.search import Evolution, Exhaustive, make_search

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
W = resolve("resnet18:C5")
PROBLEM = driver.space_of(W, PYNQ)
RANKED = rank(PROBLEM, W.epilogue, every_order=True)
FIRST = driver.default_points(W, PYNQ)


def _run(search: object, cost: Callable[[Point], float | None]) -> list[Point]:
    asked: list[Point] = []
    while True:
        batch = search.ask()  # type: ignore[attr-defined]
        if not batch:
            return asked
        asked += batch
        search.tell([(p, cost(p)) for p in batch])  # type: ignore[attr-defined]


def _far_from_model(p: Point) -> float:
    """A cost the analytic model gets wrong: best at small tiles on one thread."""
    return float(p["th"] * p["tw"] * p["tco"] + 50 * p["vthreads"] + 3 * p["tci"])


def test_exhaustive_measures_every_point_once_default_first() -> None:
    s = Exhaustive([p for _, p in RANKED], FIRST, batch=8)
    asked = _run(s, lambda p: 1.0)
    assert asked[:len(FIRST)] == FIRST and len(asked) == len(set(asked)) == len(RANKED)
    assert make_search("auto", PROBLEM, RANKED, FIRST, len(RANKED), 0).name == "exhaustive"
    assert make_search("auto", PROBLEM, RANKED, FIRST, 10, 0).name == "evolution"


def test_evolution_keeps_the_budget_and_proposes_fresh_points_that_fit() -> None:
    s = Evolution(PROBLEM, RANKED, FIRST, budget=60, seed=3, batch=8)
    asked = _run(s, _far_from_model)
    assert len(asked) == 60 and len(set(asked)) == 60
    assert asked[:len(FIRST)] == FIRST
    assert all(PROBLEM.refusal(p) is None for p in asked)


def test_evolution_is_reproducible_from_its_seed() -> None:
    a = _run(Evolution(PROBLEM, RANKED, FIRST, 48, seed=7), _far_from_model)
    b = _run(Evolution(PROBLEM, RANKED, FIRST, 48, seed=7), _far_from_model)
    c = _run(Evolution(PROBLEM, RANKED, FIRST, 48, seed=8), _far_from_model)
    assert a == b and a != c


def test_evolution_improves_where_the_model_is_wrong() -> None:
    """Generation 0 is the model's choice; later generations, bred from the measured best,
    find much cheaper points of a cost the model does not know."""
    s = Evolution(PROBLEM, RANKED, FIRST, budget=96, seed=0)
    asked = _run(s, _far_from_model)
    first_gen = min(_far_from_model(p) for p in asked[:8])
    best = s.best()
    assert best is not None and best[1] < 0.5 * first_gen


def test_points_that_do_not_compile_are_never_best() -> None:
    s = Evolution(PROBLEM, RANKED, FIRST, budget=24, seed=1)
    _run(s, lambda p: None if p["vt_axis"] == "oc" else _far_from_model(p))
    best = s.best()
    assert best is not None and best[0]["vt_axis"] == "oh"


def test_bad_search_and_budget_are_named() -> None:
    with pytest.raises(SearchError, match="unknown search 'random'"):
        make_search("random", PROBLEM, RANKED, FIRST, 8, 0)
    with pytest.raises(SearchError, match="--trials must be >= 1"):
        make_search("auto", PROBLEM, RANKED, FIRST, 0, 0)
