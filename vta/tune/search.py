"""Searches over a bound schedule space: which points to measure next.

A search is asked for a batch of points (``ask``), told their measured costs (``tell``; None
for a point that did not compile) and asked again until it returns an empty batch. It never
runs anything: the tuner measures the batches (``vta.tune.tuner``). Both searches start from
the analytic model's view of the space (``schedules.model.rank``: every point that fits, with
its estimate), so the model is the cheap pre-filter and the measurements decide.

* ``Exhaustive``: every point that fits, ``first`` (the default schedule's candidates) first
  and then in the model's order, ``batch`` at a time.
* ``Evolution``: a model-guided evolutionary search with a fixed budget of measured points and
  a seed. Generation 0 is ``first`` and the model's best points; each later generation breeds
  children from the best points measured so far (tournament selection, uniform crossover,
  mutation of one or two knobs to a neighbouring or a random value of the knob's domain),
  keeps those that fit and were not measured, and measures half of the batch chosen by the
  model's estimate and half at random among the rest (exploration where the model is wrong).
  The same space, budget and seed give the same points in the same order.

``make_search(name, ...)``: ``"exhaustive"``, ``"evolution"`` or ``"auto"`` (exhaustive when
the points that fit are no more than the budget, else evolution).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

from vta.compiler.ir.space import BoundSpace, Point
from vta.errors import SearchError

__all__ = ["Search", "Exhaustive", "Evolution", "make_search", "SEARCHES", "SearchError"]

SEARCHES = ("auto", "exhaustive", "evolution")


class Search(ABC):
    """Chooses points to measure (module docstring)."""

    name: str = ""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.costs: dict[Point, float | None] = {}

    @abstractmethod
    def ask(self) -> list[Point]:
        """The next points to measure (empty: done)."""

    def tell(self, results: Sequence[tuple[Point, float | None]]) -> None:
        """The measured costs of the last batch (None: the point did not compile)."""
        for p, c in results:
            self.costs[p] = c

    @property
    def left(self) -> int:
        return max(0, self.budget - len(self.costs))

    def best(self) -> tuple[Point, float] | None:
        """The cheapest point measured so far (ties: the first measured)."""
        done = [(c, i, p) for i, (p, c) in enumerate(self.costs.items()) if c is not None]
        if not done:
            return None
        c, _, p = min(done, key=lambda e: (e[0], e[1]))
        return p, c


class Exhaustive(Search):
    """Every point that fits (module docstring)."""

    name = "exhaustive"

    def __init__(self, ranked: Sequence[Point], first: Sequence[Point], batch: int) -> None:
        order = list(dict.fromkeys([*first, *ranked]))
        super().__init__(len(order))
        self._order = order
        self._batch = batch
        self._next = 0

    def ask(self) -> list[Point]:
        out = self._order[self._next:self._next + self._batch]
        self._next += len(out)
        return out


class Evolution(Search):
    """The model-guided evolutionary search (module docstring)."""

    name = "evolution"

    def __init__(self, space: BoundSpace, ranked: Sequence[tuple[float, Point]],
                 first: Sequence[Point], budget: int, seed: int, batch: int = 8,
                 population: int = 16) -> None:
        super().__init__(budget)
        self._space = space
        self._estimate = {p: est for est, p in ranked}
        self._model_order = [p for _, p in ranked]
        self._first = list(dict.fromkeys(first))
        self._rng = random.Random(seed)
        self._batch = batch
        self._population = population
        self._asked: set[Point] = set()

    def _fresh(self, p: Point) -> bool:
        return p in self._estimate and p not in self._asked

    def ask(self) -> list[Point]:
        n = min(self._batch, self.left)
        if n <= 0:
            return []
        if not self._asked:  # generation 0: the default's candidates, then the model's best
            out = [p for p in self._first if self._fresh(p)][:n]
            out += [p for p in self._model_order if self._fresh(p) and p not in out][:n - len(out)]
        else:
            out = self._breed(n)
        self._asked.update(out)
        return out

    def _breed(self, n: int) -> list[Point]:
        measured = sorted(((c, i, p) for i, (p, c) in enumerate(self.costs.items())
                           if c is not None), key=lambda e: (e[0], e[1]))
        parents = [p for _, _, p in measured[:self._population]]
        children: list[Point] = []
        seen: set[Point] = set()
        for _ in range(60 * n):
            if len(children) >= 4 * n or not parents:
                break
            a = self._tournament(parents)
            child = a
            if len(parents) > 1 and self._rng.random() < 0.3:
                child = self._crossover(a, self._tournament(parents))
            child = self._mutate(child, 1 + (self._rng.random() < 0.3))
            if self._fresh(child) and child not in seen:
                seen.add(child)
                children.append(child)
        by_model = sorted(children, key=lambda p: self._estimate[p])
        half = (n + 1) // 2
        out = by_model[:half]
        rest = by_model[half:]
        self._rng.shuffle(rest)
        out += rest[:n - len(out)]
        if len(out) < n:  # the neighbourhood is exhausted: continue in the model's order
            out += [p for p in self._model_order if self._fresh(p) and p not in out][:n - len(out)]
        return out

    def _tournament(self, parents: list[Point]) -> Point:
        a, b = self._rng.randrange(len(parents)), self._rng.randrange(len(parents))
        return parents[min(a, b)]  # parents are sorted cheapest first

    def _crossover(self, a: Point, b: Point) -> Point:
        values: dict[str, Any] = {}
        for k in self._space.knobs:
            values[k] = (a if self._rng.random() < 0.5 else b)[k]
        return self._repair(values)

    def _mutate(self, p: Point, changes: int) -> Point:
        values = p.as_dict()
        knobs = list(self._space.knobs)
        for k in self._rng.sample(knobs, min(changes, len(knobs))):
            dom = self._space.domain(k, values)
            if len(dom) < 2:
                continue
            i = dom.index(values[k]) if values[k] in dom else 0
            if self._rng.random() < 0.5:  # a neighbour in the domain's order
                j = min(len(dom) - 1, max(0, i + self._rng.choice((-1, 1))))
            else:
                j = self._rng.randrange(len(dom))
            values[k] = dom[j]
            values = self._repair(values).as_dict()
        return Point.of(self._space.knobs, values)

    def _repair(self, values: dict[str, Any]) -> Point:
        """``values`` with each knob moved into its domain given the knobs before it (the
        nearest value for numbers, else the first)."""
        out: dict[str, Any] = {}
        for k in self._space.knobs:
            dom = self._space.domain(k, out)
            v = values.get(k)
            if v not in dom:
                nums = [d for d in dom if isinstance(d, int)]
                if nums and isinstance(v, int):
                    want = v
                    v = min(nums, key=lambda d: (abs(d - want), d))
                else:
                    v = dom[0]
            out[k] = v
        return Point.of(self._space.knobs, out)


def make_search(name: str, space: BoundSpace, ranked: Sequence[tuple[float, Point]],
                first: Sequence[Point], budget: int, seed: int, batch: int = 8) -> Search:
    """The search called ``name`` over ``space`` (module docstring); ``ranked``: the points
    that fit with the model's estimates, cheapest first; ``first``: measured first."""
    if name not in SEARCHES:
        raise SearchError(f"unknown search {name!r}; expected one of {', '.join(SEARCHES)}")
    if budget < 1:
        raise SearchError(f"--trials must be >= 1, got {budget}")
    if name == "exhaustive" or (name == "auto" and len(ranked) <= budget):
        return Exhaustive([p for _, p in ranked], first, batch)
    return Evolution(space, ranked, first, budget, seed, batch)
