"""Schedule spaces, whatever the target: a point, a space bound to one problem, enumeration.

A space names its knobs and, for each, the values it may take; bound to one problem (a shape)
it is a ``BoundSpace``: its points, and for each whether it fits (``refusal``). A ``Point`` is
one value per knob, hashable and JSON (the tuning cache stores points by ``key``).
``enumerate_space`` lists the points that fit and counts the refused ones by reason. The
accelerator's spaces are ``vta.compiler.accel.schedules.space``, the GPU's ``vta.gpu.space``;
the tuner (``vta.tune``) searches either through this interface.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    pass


@dataclass(frozen=True, slots=True)
class Point:
    """One value per knob, in the space's knob order: hashable, and JSON for the cache."""

    values: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, knobs: Iterable[str], values: Mapping[str, Any]) -> Point:
        """The point giving ``values`` to ``knobs`` (in that order)."""
        return cls(tuple((k, values[k]) for k in knobs))

    def __getitem__(self, knob: str) -> Any:
        for k, v in self.values:
            if k == knob:
                return v
        raise KeyError(knob)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.values)

    def replace(self, **changes: Any) -> Point:
        """This point with some knobs changed."""
        return Point(tuple((k, changes.get(k, v)) for k, v in self.values))

    def key(self) -> str:
        """Canonical JSON (the cache stores points by it)."""
        return json.dumps(self.as_dict(), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Point:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError(f"a point is a JSON object, got {text!r}")
        return cls(tuple(data.items()))

    def __str__(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.values)


class BoundSpace(Protocol):
    """A space bound to one problem (what the search and the tuner see)."""

    @property
    def name(self) -> str:
        """The space's name (a cache key part)."""
        ...

    @property
    def knobs(self) -> tuple[str, ...]:
        """The knobs, in enumeration order."""
        ...

    def domain(self, knob: str, point: Mapping[str, Any]) -> tuple[Any, ...]:
        """The values ``knob`` may take given the values of the knobs before it."""
        ...

    def points(self) -> Iterator[Point]:
        """Every point of the space, before pruning, in enumeration order."""
        ...

    def refusal(self, point: Point) -> tuple[str, str] | None:
        """None when ``point`` fits, else ``(reason, message)``."""
        ...


@dataclass
class Enumerated:
    """A bound space's points that fit (enumeration order) and the refused ones, counted by
    reason, with one message per reason."""

    valid: list[Point]
    refused: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    @property
    def size(self) -> int:
        return len(self.valid) + sum(self.refused.values())


def enumerate_space(space: BoundSpace) -> Enumerated:
    """Every point of ``space``, pruned (``BoundSpace.refusal``)."""
    out = Enumerated([])
    for p in space.points():
        why = space.refusal(p)
        if why is None:
            out.valid.append(p)
        else:
            out.refused[why[0]] += 1
            out.examples.setdefault(why[0], why[1])
    return out
