"""A seeded input kept in the compile cache (``CompileCache.array``, beside the built models
in an ``inputs`` table): built once, read back as the same array, its row written by
``write_pending``; nothing kept by a read-only cache; not counted as the graph's hit. A warm
``vta run`` of a built-in model reads its input image instead of drawing it again (which
imports ``numpy.random``)."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from vta.cli import main
from vta.cli import run as cli_run
from vta.config import HwConfig
from vta.graph import models
from vta.graph.models import random_image
from vta.tune.cache import Cache
from vta.tune.compile_cache import CompileCache

ROOT = Path(__file__).resolve().parents[2]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")


def _counted(calls: list[tuple[Any, ...]]) -> Any:
    """``random_image`` under its own name, recording its calls."""
    @functools.wraps(random_image)
    def image(seed: int, shape: tuple[int, ...]) -> np.ndarray:
        calls.append((seed, tuple(shape)))
        return random_image(seed, shape)
    return image


def test_an_input_is_built_once_and_read_back(tmp_path: Path) -> None:
    hw = HwConfig.load(PYNQ)
    calls: list[tuple[Any, ...]] = []
    image = _counted(calls)
    path = tmp_path / "c.sqlite"
    want = random_image(3, (1, 3, 32, 32))
    with Cache(path) as cache:
        memo = CompileCache(cache, hw)
        got = memo.array(image, seed=3, shape=(1, 3, 32, 32))
        assert len(calls) == 1 and len(memo.pending_inputs) == 1 and memo.pending is None
        memo.write_pending()
        assert memo.pending_inputs == []
    for readonly in (False, True):
        with Cache(path, readonly=readonly) as cache:
            memo = CompileCache(cache, hw)
            again = memo.array(image, seed=3, shape=(1, 3, 32, 32))
            assert len(calls) == 1 and memo.graph_hits == 0 and memo.pending_inputs == []
    for a in (got, again):
        assert a.dtype == want.dtype and np.array_equal(a, want)
    with Cache(path, readonly=True) as cache:
        memo = CompileCache(cache, hw)
        memo.array(image, seed=4, shape=(1, 3, 32, 32))  # another seed: built, not kept
        assert len(calls) == 2 and memo.pending_inputs == []


def test_a_warm_run_reads_its_input_image(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    small = dict(image=32, width=16, classes=10)
    monkeypatch.setitem(models.MODELS, "resnet18",
                        lambda batch=1: models.resnet18(batch=batch, **small))
    calls: list[tuple[Any, ...]] = []
    monkeypatch.setattr(cli_run, "random_image", _counted(calls))
    run = ["run", "--hw", PYNQ, "resnet18", "--cache", str(tmp_path / "c.sqlite")]
    assert main(run) == 0
    cold = capsys.readouterr()
    assert calls == [(0, (1, 3, 32, 32))]
    assert main(run) == 0
    warm = capsys.readouterr()
    assert len(calls) == 1 and "; the graph from the cache" in warm.err
    table = lambda out: [r for r in out.splitlines() if r[:3].strip().isdigit()  # noqa: E731
                         or r.startswith(("output", "PASS"))]
    assert table(cold.out) == table(warm.out) and "PASS" in warm.out
    assert main([*run, "--no-cache"]) == 0
    assert table(capsys.readouterr().out) == table(cold.out) and len(calls) == 2
