"""bench/sim_speed.py's ``--callgrind`` mode without running valgrind: it skips cleanly when
valgrind is missing (exit 0, a message saying so, nothing written) and reads the instruction
total of a callgrind output file."""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

import pytest
from _bench import load_bench

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("sim_speed")


def test_callgrind_skips_without_valgrind(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(bench.callgrind.shutil, "which", lambda name: None)
    out = tmp_path / "cg.json"
    args = argparse.Namespace(hw=str(ROOT / "hwconfigs" / "pynq.yaml"), cache=None,
                              baseline=None, out=str(out))
    assert bench.callgrind_compare(args) == 0
    assert "valgrind is not installed" in capsys.readouterr().out
    assert not out.exists()


def test_callgrind_totals(bench: ModuleType) -> None:
    text = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfl=(1) a.c\nfn=(1) f\n3 5\n" \
           "summary: 1234567\ntotals: 1234567\n"
    assert bench.callgrind.totals(text) == 1234567
    with pytest.raises(SystemExit):
        bench.callgrind.totals("events: Ir\n")
