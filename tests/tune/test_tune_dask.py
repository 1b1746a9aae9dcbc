"""Scale-out on Dask: a real ``dask.distributed.LocalCluster`` runs a small tuning job and a
small sweep with the same results as the local run; ``--cluster`` on the command line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from vta.cli import main
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.errors import ExecutorError
from vta.tune.cache import Cache
from vta.tune.executor import DaskExecutor, LocalExecutor, make_executor
from vta.tune.job import Job
from vta.tune.sweep import load_grid, run_sweep
from vta.tune.tuner import tune

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")


@pytest.fixture(scope="module")
def dask() -> Iterator[DaskExecutor]:
    with DaskExecutor("local:2") as ex:
        yield ex


def _same(a: list, b: list) -> None:  # type: ignore[type-arg]
    for x, y in zip(a, b, strict=True):
        sx, sy = x.summary(), y.summary()
        for k in ("best", "best_cycles", "default", "default_cycles", "evaluated", "measured",
                  "valid", "refused"):
            assert sx[k] == sy[k], k


def test_a_tuning_job_on_a_local_cluster_matches_the_local_run(dask: DaskExecutor,
                                                               tmp_path: Path) -> None:
    jobs = [Job(resolve("matmul", [32, 48, 32]), PYNQ, trials=12, seed=5),
            Job(resolve("resnet18:C11", [], height=7, in_channels=32, out_channels=32), PYNQ,
                trials=10, seed=5)]
    assert dask.workers == 2 and "Dask" in dask.description
    with Cache(tmp_path / "d.sqlite") as c:
        on_dask = tune(jobs, dask, c)
    with LocalExecutor(1) as ex, Cache(tmp_path / "l.sqlite") as c:
        local = tune(jobs, ex, c)
    _same(on_dask, local)
    assert all(r.measured == r.evaluated > 0 for r in on_dask)


def test_a_sweep_on_a_local_cluster_matches_the_local_run(dask: DaskExecutor,
                                                          tmp_path: Path) -> None:
    g = tmp_path / "g.yaml"
    g.write_text(f"base: {ROOT / 'hwconfigs' / 'pynq.yaml'}\ntrials: 3\n"
                 f"grid: {{memory.bus_bytes: [8, 16]}}\n"
                 f"points: {{tsim: {ROOT / 'hwconfigs' / 'pynq_tsim.yaml'}}}\n")
    grid = load_grid(g)
    res_d = run_sweep(grid, ["matmul:32x32x16"], dask)
    with LocalExecutor(1) as ex:
        res_l = run_sweep(grid, ["matmul:32x32x16"], ex)
    rows_d = [p.row(grid.boards) for p in res_d.points]
    rows_l = [p.row(grid.boards) for p in res_l.points]
    assert rows_d == rows_l and all(r["status"] == "ok" and r["passed"] for r in rows_d)


def test_cluster_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "matmul", "16", "16", "16", "--trials", "3", "--cluster", "local:1",
                 "--cache", str(tmp_path / "c.sqlite")]) == 0
    assert "a local Dask cluster of 1 workers" in capsys.readouterr().out
    for argv, culprit in ((["--cluster", "dask-host"], "expected tcp://HOST:PORT"),
                          (["--cluster", "local:2", "--workers", "2"], "--workers does not "
                                                                        "apply"),
                          (["--cluster", "tcp://127.0.0.1:9"], "cannot reach the Dask "
                                                              "scheduler")):
        assert main(["tune", "matmul", "16", "16", "16", "--no-cache", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("vta: error:") and culprit in err and err.count("\n") == 1
    with pytest.raises(ExecutorError, match="at least one worker"):
        make_executor("local:0", None)
