"""The ``vta run`` process: it runs with the garbage collector's young collections rarer
(``vta.cli.run.RUN_GC_THRESHOLDS``: the objects a run makes live until it ends) and gives the
caller's thresholds back after it, whether it passed or failed; the ``vta`` program
(``vta.cli.console``) ends it without Python's teardown (``os._exit``) once the exit handlers
ran and the output is flushed, and any other command, or a run with another thread alive,
with ``sys.exit``."""

from __future__ import annotations

import argparse
import atexit
import gc
import os
import sys
import threading
from pathlib import Path

import pytest

import vta.cli
from vta.cli import main
from vta.cli import run as run_cli
from vta.errors import UsageError

ROOT = Path(__file__).resolve().parents[2]


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


class _Exited(Exception):
    def __init__(self, how: str, status: object) -> None:
        super().__init__(how, status)
        self.how, self.status = how, status


def _console(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[_Exited, list[str]]:
    """How ``console`` ends the process for ``vta argv`` (``vta run`` itself replaced by a
    pass), and what it did before."""
    did: list[str] = []

    def quick(status: int) -> None:
        raise _Exited("os._exit", status)

    monkeypatch.setattr(run_cli, "_run_graph", lambda args: 0)
    monkeypatch.setattr(sys, "argv", ["vta", *argv])
    monkeypatch.setattr(os, "_exit", quick)
    monkeypatch.setattr(atexit, "_run_exitfuncs", lambda: did.append("exit handlers"))
    with pytest.raises((_Exited, SystemExit)) as e:
        vta.cli.console()
    if isinstance(e.value, SystemExit):
        return _Exited("sys.exit", e.value.code), did
    return e.value, did


def test_the_program_ends_a_run_at_once_after_its_exit_handlers(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the process alone (threads other tests left behind, e.g. a Dask cluster's, are not
    # this run's)
    monkeypatch.setattr(threading, "active_count", lambda: 1)
    end, did = _console(monkeypatch, ["run", "resnet18"])
    assert (end.how, end.status, did) == ("os._exit", 0, ["exit handlers"])


def test_other_commands_and_runs_beside_a_thread_exit_as_python_does(
        monkeypatch: pytest.MonkeyPatch) -> None:
    end, did = _console(monkeypatch, ["info", "--hw", str(ROOT / "hwconfigs" / "pynq.yaml")])
    assert (end.how, end.status, did) == ("sys.exit", 0, [])
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        end, did = _console(monkeypatch, ["run", "resnet18"])
    finally:
        stop.set()
        other.join()
    assert (end.how, end.status, did) == ("sys.exit", 0, [])
