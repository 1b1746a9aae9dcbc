"""``vta run`` of a built-in model draws its weights ahead (``vta.cli.early``) exactly where it
will build the model: no compile cache, or a cache file not there yet; never where the cache
may hold it (a warm run draws nothing), nor for another workload."""

from __future__ import annotations

from pathlib import Path

import pytest

from vta.cli import early, main
from vta.cli.parser import build_parser
from vta.graph import models


def _args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser("vta").parse_args(["run", *argv])


@pytest.mark.parametrize("argv, builds", [
    (("resnet18", "--no-cache"), True),
    (("resnet18_fixed", "--no-cache"), True),
    (("resnet18", "--target", "cuda-emu"), True),
    (("resnet18", "--no-cache", "--layers", "C2"), False),
    (("conv2d", "--no-cache"), False),
    (("mobilenet_v2", "--no-cache"), False),
    (("--onnx", "m.onnx", "--no-cache"), False),
])
def test_which_runs_draw_ahead(argv: tuple[str, ...], builds: bool) -> None:
    assert early._builds_model(_args(*argv)) is builds


def test_a_cache_file_there_draws_nothing(tmp_path: Path) -> None:
    """A missing cache file: the run builds the model; one that is there may hold it."""
    cache = tmp_path / "cache.sqlite"
    assert early._builds_model(_args("resnet18", "--cache", str(cache)))
    cache.write_bytes(b"")
    assert not early._builds_model(_args("resnet18", "--cache", str(cache)))


def test_start_draws_what_the_run_builds() -> None:
    """``start`` leaves the draws the run's build (``resnet18()``'s defaults) takes."""
    assert not models._EARLY
    early.start(_args("resnet18", "--no-cache"))
    assert len(models._EARLY) == 1
    models.resnet18(width=64, image=32, classes=1000)  # the run's network, a small image
    assert not models._EARLY
    early.start(_args("conv2d", "--no-cache"))
    assert not models._EARLY


def test_draws_a_run_left_are_stopped_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``vta run resnet18 --no-cache`` that ends before its build (here: refused) leaves
    no draws and no thread drawing (``early.finish``, ``models.drop_early``)."""
    started: list[models._Draws] = []
    draws = models._Draws

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        started.append(draws(*a, **k))
        return started[-1]

    monkeypatch.setattr(models, "_Draws", spy)
    assert main(["run", "resnet18", "--no-cache", "--pad", "1"]) == 2
    assert len(started) == 1 and not started[0].thread.is_alive()
    assert not models._EARLY
