"""bench/compile_speed.py's ``--callgrind`` mode without running valgrind: it skips cleanly
when valgrind is missing (exit 0, a message saying so, nothing written), and its measured
child compiles C1-C11 and prints their chosen schedules (the ones ``per_layer`` records), or,
as the process the mode subtracts, compiles nothing."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from types import ModuleType

import pytest
from _bench import load_bench

ROOT = Path(__file__).resolve().parents[1]
HW = str(ROOT / "hwconfigs" / "pynq.yaml")


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("compile_speed")


def test_callgrind_skips_without_valgrind(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(bench.callgrind.shutil, "which", lambda name: None)
    out = tmp_path / "cg.json"
    args = argparse.Namespace(hw=HW, before=None, out=str(out))
    assert bench.callgrind_compare(args) == 0
    assert "valgrind is not installed" in capsys.readouterr().out
    assert not out.exists()


def test_callgrind_child_prints_nothing_compiled_without_work(
        bench: ModuleType, capsys: pytest.CaptureFixture[str]) -> None:
    assert bench._callgrind_child(HW, False) == 0
    assert json.loads(capsys.readouterr().out) == {"schedules": []}


@pytest.mark.slow
def test_callgrind_child_prints_the_chosen_schedules(
        bench: ModuleType, capsys: pytest.CaptureFixture[str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VTA_CACHE", str(tmp_path / "tune.sqlite"))  # never the user's
    assert bench._callgrind_child(HW, True) == 0
    got = json.loads(capsys.readouterr().out)["schedules"]
    assert len(got) == 11
    assert all(s.split()[1].startswith("tco=") for s in got)
