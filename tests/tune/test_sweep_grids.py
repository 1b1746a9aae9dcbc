"""Sweeps as a user meets them (issue 25): duplicate names, wrong types, empty and all-invalid
grids are errors with the count; a grid beyond ``MAX_POINTS`` is refused unless ``--force``
and then streams its rows; an output path that cannot be made is a named error."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from vta.cli import main
from vta.errors import SweepError
from vta.tune.executor import LocalExecutor
from vta.tune.sweep import (
    CHUNK,
    CHUNK_JOBS,
    MAX_POINTS,
    PointResult,
    chunk_points,
    load_grid,
    run_sweep,
)

ROOT = Path(__file__).resolve().parents[2]
PYNQ = ROOT / "hwconfigs" / "pynq.yaml"


def write(tmp_path: Path, text: str, name: str = "g.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, culprit", [
    # the "duplicate point names drop a point silently": YAML kept the last
    (f"base: {PYNQ}\npoints:\n  a: {{alu.ii: 1}}\n  a: {{alu.ii: 2}}\n",
     "'a' given twice (lines 3 and 4)"),
    (f"base: {PYNQ}\ngrid:\n  alu.ii: [1, 2]\n  alu.ii: [3]\n", "'alu.ii' given twice"),
    (f"base: {PYNQ}\ngrid: {{alu.ii: [1, 1]}}\n", "two of its 2 points are called 'ii=1'"),
    (f"base: {PYNQ}\ngrid:\n  g:\n    - {{name: x, alu.ii: 1}}\n    - {{name: x, alu.ii: 2}}\n",
     "two of its 2 points are called 'g=x'"),
    # the "`name: [1, 2]` is ignored"
    (f"name: [1, 2]\nbase: {PYNQ}\n", "name: expected the grid's name (a string), got [1, 2]"),
    (f"base: {PYNQ}\ngrid:\n  g:\n    - {{name: [1, 2], alu.ii: 1}}\n",
     "grid.g.name: expected a label (a string), got [1, 2]"),
    (f"base: {PYNQ}\npoints: {{}}\n", "points: expected a non-empty mapping"),
    (f"base: {PYNQ}\ngrid: {{}}\n", "grid: expected a mapping"),
    (f"base: {PYNQ}\ngrid: {{alu.ii: []}}\n", "grid.alu.ii: expected a non-empty list"),
])
def test_bad_grids_are_named_errors(tmp_path: Path, text: str, culprit: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(SweepError) as e:
        load_grid(path)
    assert str(e.value).startswith(str(path)) and culprit in str(e.value), str(e.value)


def _big(tmp_path: Path, n: int) -> Path:
    """An n x n grid over the clock and the board's LUTs: every point one cache key."""
    clocks = ", ".join(str(100 + i) for i in range(n))
    luts = ", ".join(str(53200 + i) for i in range(n))
    return write(tmp_path, f"base: {PYNQ}\nboards: [pynq-z1]\ntrials: 0\ngrid:\n"
                           f"  board.clock_mhz: [{clocks}]\n  board.lut: [{luts}]\n")


def test_a_10000_point_grid_is_refused_with_its_count(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's 100x100 grid printed nothing in 300 s and grew to 3.1 GB: now refused at
    once with the count (``--force`` runs it, streaming: bench/sweep_scale.py)."""
    path = _big(tmp_path, 100)
    with pytest.raises(SweepError, match=r"10,000 points \(100 x 100 combinations\) is more "
                                         rf"than {MAX_POINTS:,}.*--force"):
        load_grid(path)
    assert len(load_grid(path, force=True).points) == 10_000
    assert main(["sweep", "--grid", str(path), "matmul:16x16x16", "--out",
                 str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error:") and "10,000 points" in err and err.count("\n") == 1


def test_force_streams_rows_as_points_finish(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """Rows reach ``on_point`` chunk by chunk, in grid order, before the sweep returns; the
    CLI prints each and writes it to the CSV as it comes."""
    grid = load_grid(_big(tmp_path, 5))
    seen: list[PointResult] = []
    with LocalExecutor(1) as ex:
        res = run_sweep(grid, ["matmul:16x16x16"], ex, check=False, on_point=seen.append,
                        chunk=4)
    assert [p.point.name for p in seen] == [p.name for p in grid.points]
    assert len({p.cycles for p in seen}) == 1 and all(p.status == "ok" for p in seen)
    assert seen == res.points
    out = tmp_path / "o"
    assert main(["sweep", "--grid", str(_big(tmp_path, 3)), "matmul:16x16x16", "--workers",
                 "1", "--no-check", "--out", str(out), "--cache",
                 str(tmp_path / "c.sqlite")]) == 0
    text = capsys.readouterr().out
    assert "runs/s" in text and "fr/s" not in text  # a layer runs, a network has frames
    rows_out = [line for line in text.splitlines() if line.startswith("clock_mhz=")]
    assert len(rows_out) == 9  # the fastest clock wins; the LUT limits change no estimate
    assert "Pareto front (3): clock_mhz=102 lut=53200, clock_mhz=102 lut=53201, " in text
    rows = list(csv.DictReader(out.with_suffix(".csv").open()))
    assert len(rows) == 9 and sum(r["pareto"] == "True" for r in rows) == 3


def test_chunks_hold_a_few_points_of_a_network() -> None:
    """A chunk carries about ``CHUNK_JOBS`` layer jobs (two per worker on a big cluster): 32
    points of one layer, 3 of ResNet-18's 11 layers (its rows every 3 points, not every 32), 12
    on 64 workers; never more than ``CHUNK`` points, never none (issue 22)."""
    assert CHUNK_JOBS == 32 and CHUNK == 32
    assert chunk_points(1, 1) == 32 and chunk_points(1, 2) == 32
    assert chunk_points(11, 1) == 3 and chunk_points(11, 2) == 3
    assert chunk_points(11, 64) == 12
    assert chunk_points(1, 1000) == CHUNK and chunk_points(500, 1) == 1
    assert chunk_points(0, 1) == CHUNK


def test_all_invalid_grid_is_an_error_with_the_count(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: a grid whose every point is invalid exited 0."""
    path = write(tmp_path, f"base: {PYNQ}\ngrid: {{alu.acc_banks: [0, 3]}}\n")
    assert main(["sweep", "--grid", str(path), "matmul:16x16x16", "--workers", "1",
                 "--out", str(tmp_path / "o"), "--no-cache"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]  # after the progress bar's last state
    assert err.startswith(f"vta: error: {path}: none of its 2 points can run (2 refused; "
                          f"the first, 'acc_banks=0': "), err


def test_an_output_path_that_cannot_be_made_is_named(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: an output directory it cannot create was an internal error."""
    grid = write(tmp_path, f"base: {PYNQ}\n")
    blocker = write(tmp_path, "", "file")
    assert main(["sweep", "--grid", str(grid), "matmul:16x16x16", "--out",
                 str(blocker / "sub" / "o"), "--no-cache"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"vta: error: --out {blocker / 'sub' / 'o.csv'}: cannot write "
                          f"there"), err
