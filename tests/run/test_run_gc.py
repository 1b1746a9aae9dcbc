"""``vta run`` runs with the garbage collector's young collections rarer
(``vta.cli.run.RUN_GC_THRESHOLDS``: the objects a run makes live until it ends), and gives the
caller's thresholds back after it, whether it passed or failed."""

from __future__ import annotations

import argparse
import gc

import pytest

from vta.cli import main
from vta.cli import run as run_cli
from vta.errors import UsageError


@pytest.mark.parametrize("fails", [False, True])
def test_a_run_collects_rarely_and_restores_the_callers_thresholds(
        monkeypatch: pytest.MonkeyPatch, fails: bool) -> None:
    seen: list[tuple[int, ...]] = []

    def graph(args: argparse.Namespace) -> int:
        seen.append(gc.get_threshold())
        if fails:
            raise UsageError("refused")
        return 0

    monkeypatch.setattr(run_cli, "_run_graph", graph)
    before = gc.get_threshold()
    assert before != run_cli.RUN_GC_THRESHOLDS
    assert main(["run", "resnet18"]) == (2 if fails else 0)
    assert seen == [run_cli.RUN_GC_THRESHOLDS]
    assert gc.get_threshold() == before
