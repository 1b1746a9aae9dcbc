"""bench/warm_run.py: its ``--callgrind`` mode without running valgrind (it skips cleanly when
valgrind is missing: exit 0, a message saying so, nothing written), and its machine-speed
calibration (the fixed workload, its timing, the medians of each run's wall per calibration)."""

from __future__ import annotations

import hashlib
from pathlib import Path
from types import ModuleType

import pytest
from _bench import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("warm_run")


def test_callgrind_skips_without_valgrind(bench: ModuleType, monkeypatch: pytest.MonkeyPatch,
                                          capsys: pytest.CaptureFixture[str],
                                          tmp_path: Path) -> None:
    monkeypatch.setattr(bench.callgrind.shutil, "which", lambda name: None)
    out = tmp_path / "cg.json"
    assert bench.callgrind_compare(None, str(out)) == 0
    assert "valgrind is not installed" in capsys.readouterr().out
    assert not out.exists()


#: SHA-256 of ``CALIBRATION``: the workload is fixed so that ``wall_per_calibration`` compares
#: between rounds; a change must be deliberate (and restate every earlier ratio)
CALIBRATION_SHA256 = "f1e3354189d31cd6849af9adbb0bd332318110927856f731b7a480c98ee94557"


def test_calibration_workload_is_fixed(bench: ModuleType) -> None:
    assert hashlib.sha256(bench.CALIBRATION.encode()).hexdigest() == CALIBRATION_SHA256


def test_calibrate_times_two_copies(bench: ModuleType) -> None:
    assert 0.0 < bench.calibrate() < 120.0


def test_summary_gives_wall_per_calibration(bench: ModuleType) -> None:
    def run(kind: str, wall: float, calib: float) -> dict[str, object]:
        return {"kind": kind, "wall_s": wall, "cpu_s": 2 * wall, "load_1min": 1.0,
                "parts": {"compile": wall / 2}, "cycles": 7, "passed": True,
                "calibration_s": calib}
    s = bench.summarize([run("cold", 1.5, 0.5), run("cold", 3.0, 1.0), run("cold", 2.0, 0.4),
                         run("warm", 0.5, 0.5)])
    # the median wall (2.0) over the median calibration (0.5), not a median of per-run ratios
    assert s["cold"]["calibration_s_median"] == 0.5
    assert s["cold"]["wall_per_calibration"] == 4.0
    assert s["warm"]["wall_per_calibration"] == 1.0
    uncalibrated = bench.summarize([{k: v for k, v in run("cold", 1.0, 1.0).items()
                                     if k != "calibration_s"}])
    assert "wall_per_calibration" not in uncalibrated["cold"]
