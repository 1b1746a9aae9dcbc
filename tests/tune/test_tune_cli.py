"""``vta tune`` and ``vta run`` with the cache: the table ends with best against default, the
tuned schedule is never slower than the default, a finished job is answered from the cache,
``vta run`` compiles the cached best and says so (a forced knob or ``--no-cache`` wins), and
bad command lines are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vta.cli import main
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.tune.cache import Cache
from vta.tune.executor import LocalExecutor
from vta.tune.job import Job
from vta.tune.tuner import lookup, tune

ROOT = Path(__file__).resolve().parents[2]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")
SMALL = ["resnet18:C11", "--height", "7", "--in-channels", "64", "--out-channels", "64"]


def test_tune_prints_best_against_default_and_caches(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "c.sqlite"
    argv = ["tune", "--hw", PYNQ, *SMALL, "--trials", "12", "--workers", "1", "--cache",
            str(cache)]
    assert main(argv) == 0
    out, err = capsys.readouterr()
    # a changed shape is labelled by its shape, not as the ResNet-18 layer it started from
    name = "conv2d(64x7x7->64,k3,s1,p1)"
    assert "best vs default:" in out and name in out and "resnet18:C11" not in out
    assert "12+0" in out
    assert name in err  # the progress bar, on stderr
    assert main([*argv, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    [job] = s["jobs"]
    assert job["from_cache"] and job["best_cycles"] <= job["default_cycles"]
    assert job["key"] in {k["key"] for k in Cache(cache).keys()}


def test_run_uses_the_cached_best_and_says_so(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "c.sqlite"
    hw = HwConfig.from_yaml(PYNQ)
    w = resolve(SMALL[0], [], height=7, in_channels=64, out_channels=64)
    with LocalExecutor(1) as ex, Cache(cache) as c:
        [r] = tune([Job(w, hw, trials=8)], ex, c)
        found = lookup(c, w, hw)
    assert found is not None and found[0] == r.best
    run = ["run", "--hw", PYNQ, *SMALL, "--cache", str(cache)]
    assert main([*run, "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["passed"] and s["tuned"]["cycles"] == r.best_cost == s["cycles"]
    assert {k: s["schedule"][k] for k in ("tco", "tci", "th", "tw")} == \
        {k: r.best[k] for k in ("tco", "tci", "th", "tw")}  # type: ignore[index]
    assert main(run) == 0
    assert "schedule from the tuning cache" in capsys.readouterr().out
    for extra in (["--no-cache"], ["--th", "7"], ["--no-latency-hiding"]):
        assert main([*run, *extra, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["tuned"] is None
    # a network's layers: the tuned one from the cache, the other by default
    with LocalExecutor(1) as ex, Cache(cache) as c:
        tune([Job(resolve("resnet18:C10"), hw, trials=3)], ex, c)
    assert main(["run", "--hw", PYNQ, "resnet18", "--layers", "C10,C4", "--cache",
                 str(cache)]) == 0
    out = capsys.readouterr().out
    assert "1 of 2 layers with their schedule from the tuning cache" in out
    assert "resnet18:C10" in out.splitlines()[-2] and "PASS" in out


def test_run_without_a_cache_file_keeps_only_its_program(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The tuning lookup writes nothing; the compile cache (issue 22) makes the file and keeps
    the compiled program there; ``--no-cache`` creates no file."""
    cache = tmp_path / "none.sqlite"
    assert main(["run", "--hw", PYNQ, "matmul", "16", "16", "16", "--cache", str(cache)]) == 0
    with Cache(cache) as c:
        assert c.keys() == []
    nothing = tmp_path / "nothing.sqlite"
    assert main(["run", "--hw", PYNQ, "matmul", "16", "16", "16", "--cache", str(nothing),
                 "--no-cache"]) == 0
    assert not nothing.exists()


def test_tune_a_network_layer_by_layer(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--hw", PYNQ, "resnet18", "--layers", "C10,C4", "--trials", "3",
                 "--workers", "2", "--cache", str(tmp_path / "c.sqlite")]) == 0
    out = capsys.readouterr().out
    assert "resnet18:C10" in out and "resnet18:C4" in out and "total" in out
    assert "2 local processes" in out


@pytest.mark.parametrize("argv, culprit", [
    (["--trials", "0"], "--trials must be >= 1"),
    (["--workers", "0"], "--workers: must be >= 1"),
    (["--search", "random"], "--search random"),
    (["--target", "cuda-emu"], "cannot time it on a GPU"),
    (["--target", "cuda"], "times kernels on a GPU"),
    (["--target", "cuda", "--hw", PYNQ, "--space"], "--hw does not apply"),
    (["--layers", "C2"], "--layers does not apply"),
    (["--seed", "-1"], "--seed"),
])
def test_bad_tune_command_lines(argv: list[str], culprit: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["tune", "matmul", "16", "16", "16", "--no-cache", *argv])
    out, err = capsys.readouterr()
    assert rc == 2 and err.startswith("vta: error: ") and err.count("\n") == 1, (out, err)
    assert culprit in err and "Traceback" not in err


def test_space_listing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tune", "--hw", PYNQ, "resnet18:C1", "--space"]) == 0
    out = capsys.readouterr().out
    assert "fold      khkw, kw, none" in out and "vthreads  1, 2" in out
    assert "order     oc, px" in out and "operands  once, tile" in out
    assert "refused" in out and "40320 points, 20286 fit" in out
    assert main(["tune", "--target", "cuda", "--gpu-schedule", "mma", "matmul", "256", "256",
                 "256", "--space"]) == 0
    assert "cuda.mma" in capsys.readouterr().out


def test_jobs_of_one_key_share_their_measurements(tmp_path: Path) -> None:
    """Two sweep points that differ only in the clock (not in the cache key) measure each
    point once between them, in one call and without a cache, and agree on the best."""
    hw = HwConfig.from_yaml(PYNQ)
    fast = hw.with_changes(name="pynq_200", **{"board.clock_mhz": 200})
    w = resolve(SMALL[0], [], height=7, in_channels=64, out_channels=64)
    with LocalExecutor(1) as ex:
        [alone] = tune([Job(w, hw, trials=6)], ex, None)
        a, b = tune([Job(w, hw, trials=6), Job(w, fast, trials=6)], ex, None)
    assert a.key.digest == b.key.digest
    assert a.measured + b.measured == alone.measured > 0
    assert (a.best, a.best_cost) == (b.best, b.best_cost) == (alone.best, alone.best_cost)


def test_the_stock_claim_is_not_in_the_cache_key() -> None:
    """``stock`` is a validated claim, not hardware: pynq without it keys the same
    measurements; ALU MUL (pynq_mul) changes what the compiler may emit: another key."""
    from vta.tune.tuner import hw_digest

    hw = HwConfig.from_yaml(PYNQ)
    assert hw_digest(hw.with_changes(stock=False)) == hw_digest(hw)
    assert hw_digest(HwConfig.load("pynq_mul")) != hw_digest(hw)
