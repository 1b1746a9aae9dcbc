"""The built-in networks' seeded weights: drawn ahead in a thread (``models._Draws``) while
the build calibrates, the same graph as drawing each when the build asks."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from vta.graph import models
from vta.graph.ir import Graph

#: small networks of each shape the build takes (batch, width, classes, requantization)
SHAPES = [dict(width=8, image=32, classes=10), dict(width=16, image=64, classes=7, batch=2),
          dict(width=8, image=32, classes=10, requant="fixed")]


def _constants(g: Graph) -> list[tuple[str, tuple[int, ...], float | None, bytes]]:
    return [(v.name, v.type.shape, v.type.scale, v.data.tobytes()) for v in g.values()
            if v.data is not None]


def _scales(g: Graph) -> list[tuple[str, float | None]]:
    return [(n.output.name, n.output.type.scale) for n in g.nodes]


@pytest.mark.parametrize("shape", SHAPES)
def test_drawn_ahead_is_the_same_network(shape: dict) -> None:  # type: ignore[type-arg]
    ahead = models.resnet18(seed=3, **shape)
    asked = models.resnet18(seed=3, draw_ahead=False, **shape)
    assert _constants(ahead) == _constants(asked)
    assert _scales(ahead) == _scales(asked)
    assert len(_constants(ahead)) == 2 * 21  # 20 convolutions and the dense layer


def test_the_plan_is_what_the_build_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple[int, ...]] = []
    weights = models._Init.weights

    def record(self: models._Init, shape: tuple[int, ...]) -> np.ndarray:
        asked.append(shape)
        return weights(self, shape)

    monkeypatch.setattr(models._Init, "weights", record)
    models.resnet18(width=8, image=32, classes=10, draw_ahead=False)
    assert models._weight_shapes(3, 8, 10) == asked
    assert len(asked) == 21 and asked[0] == (8, 3, 7, 7) and asked[-1] == (10, 64)


def test_draws_are_made_in_a_thread_of_their_own() -> None:
    seen: list[str] = []
    rng = np.random.default_rng(0)

    class Spy(np.random.Generator):
        def normal(self, *a, **k):  # type: ignore[no-untyped-def, override]
            seen.append(threading.current_thread().name)
            return rng.normal(*a, **k)

        def standard_normal(self, *a, **k):  # type: ignore[no-untyped-def, override]
            seen.append(threading.current_thread().name)  # (the weights, a chunk at a time)
            return rng.standard_normal(*a, **k)

    draws = models._Draws(Spy(np.random.PCG64(0)), [(4, 2, 3, 3)])
    w = draws.take("weights", (4, 2, 3, 3))
    b = draws.take("bias", (4,))
    draws.close()
    assert seen == ["resnet18-draws"] * 2
    # the same generator, the same order as drawing when asked
    again = np.random.default_rng(0)
    assert np.array_equal(w, models._rounded(again, (4, 2, 3, 3)))
    assert np.array_equal(b, again.normal(0, models.BIAS_STD, 4))


def test_a_draw_the_plan_did_not_make_is_refused() -> None:
    draws = models._Draws(np.random.default_rng(0), [(4, 2, 3, 3)])
    with pytest.raises(AssertionError, match=r"asks for \('weights', \(4, 2, 1, 1\)\)"):
        draws.take("weights", (4, 2, 1, 1))
    draws.close()


@pytest.mark.parametrize("shape", SHAPES)
def test_drawn_early_is_the_same_network(shape: dict) -> None:  # type: ignore[type-arg]
    """``draw_early`` then the build: the same graph as drawing each weight when the build
    asks (the general path), and the build took the early draws (none left over)."""
    models.draw_early(seed=5, width=shape["width"], classes=shape["classes"])
    early = models._EARLY[(5, tuple(models._weight_shapes(3, shape["width"],
                                                          shape["classes"])))]
    built = models.resnet18(seed=5, **shape)
    assert not models._EARLY and not early.thread.is_alive()
    asked = models.resnet18(seed=5, draw_ahead=False, **shape)
    assert _constants(built) == _constants(asked)
    assert _scales(built) == _scales(asked)


def test_early_draws_of_another_network_are_left() -> None:
    """Draws started for another seed or size are not taken (the build draws its own); the
    defaults of ``draw_early`` are ``resnet18``'s (what ``vta run`` builds)."""
    models.draw_early(seed=1, width=8, classes=10)
    try:
        built = models.resnet18(seed=2, width=8, image=32, classes=10)
        assert len(models._EARLY) == 1
        asked = models.resnet18(seed=2, width=8, image=32, classes=10, draw_ahead=False)
        assert _constants(built) == _constants(asked)
    finally:
        for d in models._EARLY.values():
            d.close()
        models._EARLY.clear()
    models.draw_early()
    (key,) = models._EARLY
    draws = models._EARLY.pop(key)
    draws.close()
    assert key == (0, tuple(models._weight_shapes(3, 64, 1000)))
