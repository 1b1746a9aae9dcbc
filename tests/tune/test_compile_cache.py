"""The persistent compile cache (``vta.tune.compile_cache``): a warm request compiles nothing and
gives the same program; the key follows the hardware's content, the request and the compiler;
a damaged row is compiled again, never used; ``vta run`` (a layer, a network's layers, the
whole graph) keeps and reuses programs, and ``--no-cache`` neither reads nor writes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from vta.cli import main
from vta.compiler.accel import driver
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.graph import models
from vta.run.targets import AccelTarget
from vta.tune.cache import Cache
from vta.tune.compile_cache import CompileCache

ROOT = Path(__file__).resolve().parents[2]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")
#: a small layer: C11's shape at 7x7 with 64 channels
SMALL = dict(height=7, in_channels=64, out_channels=64)


def _w():  # type: ignore[no-untyped-def]
    return resolve("resnet18:C11", [], **SMALL)


def _no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*a: object, **k: object) -> None:
        raise AssertionError("compiled although the cache holds the program")

    monkeypatch.setattr(driver, "_compile_with", refuse)


def test_warm_request_compiles_nothing_and_gives_the_same_program(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = HwConfig.load(PYNQ)
    t = AccelTarget(hw)
    with Cache(tmp_path / "c.sqlite") as cache:
        t.memo = memo = CompileCache(cache, hw)
        cold = t.compile_layer(_w())
        assert memo.stats == {"hits": 0, "misses": 1, "rejected": 0} and memo.count() == 1
        with monkeypatch.context() as m:
            _no_compiling(m)
            warm = t.compile_layer(_w())
        assert memo.stats["hits"] == 1
    assert warm.program == cold.program and warm.schedule == cold.schedule
    assert warm.fold_kind == cold.fold_kind and warm.hw is hw
    assert warm.result.seconds < cold.result.seconds
    # the same as compiling without any cache
    plain = AccelTarget(hw).compile_layer(_w())
    assert plain.program == warm.program


def test_key_is_the_hardware_content_the_request_and_the_compiler(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hw = HwConfig.load(PYNQ)
    with Cache(tmp_path / "c.sqlite") as cache:
        memo = CompileCache(cache, hw)
        driver.compile_workload(_w(), hw, memo=memo)
        # a renamed copy of the same hardware: a hit, answered with the caller's config
        renamed = hw.with_changes(name="pynq_copy")
        other = CompileCache(cache, renamed)
        with monkeypatch.context() as m:
            _no_compiling(m)
            c = driver.compile_workload(_w(), renamed, memo=other)
        assert other.stats["hits"] == 1 and c.hw is renamed
        # another request (a forced knob, another epilogue) or hardware: a miss
        driver.compile_workload(_w(), hw, memo=memo, vthreads=1)
        bigger = hw.with_changes(**{"memory.bus_bytes": 16})
        driver.compile_workload(_w(), bigger, memo=CompileCache(cache, bigger))
        assert memo.count() == 3
        # another compiler version: a miss
        monkeypatch.setattr("vta.tune.compile_cache.compiler_version", lambda: "changed")
        fresh = CompileCache(cache, hw)
        driver.compile_workload(_w(), hw, memo=fresh)
        assert fresh.stats == {"hits": 0, "misses": 1, "rejected": 0}


def test_a_damaged_row_is_compiled_again_and_replaced(tmp_path: Path) -> None:
    hw = HwConfig.load(PYNQ)
    path = tmp_path / "c.sqlite"
    with Cache(path) as cache:
        good = driver.compile_workload(_w(), hw, memo=CompileCache(cache, hw))
    db = sqlite3.connect(path)
    db.execute("UPDATE compiled SET blob = CAST('junk' AS BLOB)")
    db.commit()
    db.close()
    with Cache(path) as cache:
        memo = CompileCache(cache, hw)
        again = driver.compile_workload(_w(), hw, memo=memo)
        assert memo.stats == {"hits": 0, "misses": 1, "rejected": 1}
        assert again.program == good.program
        driver.compile_workload(_w(), hw, memo=memo)
        assert memo.stats["hits"] == 1  # the row was replaced by a sound one


def test_vta_run_keeps_and_reuses_programs(tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "c.sqlite"
    run = ["run", "--hw", PYNQ, "resnet18", "--layers", "C11,C10", "--cache", str(cache)]
    assert main(run) == 0
    cold = capsys.readouterr()
    assert "0 from the cache, 2 compiled" in cold.err
    assert main(run) == 0
    warm = capsys.readouterr()
    assert "2 from the cache, 0 compiled" in warm.err
    cycles = [line.split()[:3] for line in cold.out.splitlines() if "resnet18:C1" in line]
    assert cycles == [line.split()[:3] for line in warm.out.splitlines()
                      if "resnet18:C1" in line]
    # --no-cache: nothing read, nothing written
    fresh = tmp_path / "none.sqlite"
    assert main([*run[:-1], str(fresh), "--no-cache"]) == 0
    assert "compile cache" not in capsys.readouterr().err and not fresh.exists()
    # --dump-ir needs the IR after each pass, which the cache does not keep: it compiles
    shape = [a for k, v in SMALL.items() for a in (f"--{k.replace('_', '-')}", str(v))]
    assert main(["run", "--hw", PYNQ, "resnet18:C11", *shape, "--cache", str(cache),
                 "--dump-ir", "emit"]) == 0
    assert "compile cache" not in capsys.readouterr().err


def test_the_whole_graph_takes_the_cache_and_no_cache(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    small = dict(image=32, width=16, classes=10)
    monkeypatch.setitem(models.MODELS, "resnet18",
                        lambda batch=1: models.resnet18(batch=batch, **small))
    cache = tmp_path / "c.sqlite"
    run = ["run", "--hw", PYNQ, "resnet18", "--cache", str(cache)]
    assert main(run) == 0
    cold = capsys.readouterr()
    assert "0 from the cache, " in cold.err and "PASS" in cold.out
    assert main(run) == 0
    warm = capsys.readouterr()
    n = int(cold.err.split("0 from the cache, ")[1].split()[0])
    assert f"{n} from the cache, 0 compiled" in warm.err and "PASS" in warm.out
    table = lambda out: [r for r in out.splitlines() if r[:3].strip().isdigit()]  # noqa: E731
    assert table(cold.out) == table(warm.out)
    assert main([*run, "--no-cache"]) == 0
    assert "compile cache" not in capsys.readouterr().err
