"""The tuning cache: records round-trip; 4 processes writing 500 records each into one file
leave all 2,000 intact; a tuning process killed with SIGKILL loses at most its trial in
flight and a rerun resumes; corrupt, foreign and newer files are named errors; ``vta cache``."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from vta.cli import main
from vta.errors import CacheError
from vta.tune import cache as cache_module
from vta.tune.cache import CACHE_ENV, Cache, TuneKey, Tuning, compiler_version, default_cache_path

ROOT = Path(__file__).resolve().parents[2]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")
KEY = TuneKey("conv2d(n=1)", "int8*int8->int32->int8", "vta", "h" * 16, "pynq",
              compiler_version(), "vta.conv2d")


def _point(writer: int, i: int) -> str:
    return json.dumps({"writer": writer, "i": i}, separators=(",", ":"))


def test_records_round_trip(tmp_path: Path) -> None:
    with Cache(tmp_path / "c.sqlite") as c:
        k = c.add_key(KEY)
        c.add_key(KEY)  # once
        c.add_trial(k, _point(0, 1), 120.0, method="timing-only simulator", seconds=0.5)
        c.add_trial(k, _point(0, 2), 100.0, method="timing-only simulator", seconds=0.4)
        c.add_trial(k, _point(0, 3), None, refused="ScheduleError: no", method="m", seconds=0.1)
        assert c.best(k) is not None and c.best(k).cost == 100.0  # type: ignore[union-attr]
        assert set(c.trials(k)) == {_point(0, i) for i in (1, 2, 3)}
        c.add_tuning(Tuning(k, "auto", 0, 8, 3, _point(0, 2), 100.0, _point(0, 1), 120.0,
                            1.0, time.time(), ""))
        assert c.tuning(k, "auto", 0, 8) is not None and c.tuning(k, "auto", 0, 9) is None
        assert c.tuning(k, "auto", 1, 8) is None
        [info] = c.keys()
        assert (info["trials"], info["best_cost"], info["op"]) == (3, 100.0, "conv2d(n=1)")
        assert c.find(k[:6]) == k
        assert len(list(c.export())) == 3 and c.integrity() == "ok"
        assert c.clear() == 3 and c.keys() == []


def _writer(path: str, writer: int, n: int) -> None:
    with Cache(path) as c:
        k = c.add_key(KEY)
        for i in range(n):
            c.add_trial(k, _point(writer, i), float(writer * 10_000 + i), method=f"w{writer}",
                        seconds=0.0)


def test_four_processes_write_500_records_each(tmp_path: Path) -> None:
    path = str(tmp_path / "c.sqlite")
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                      else "spawn")
    procs = [ctx.Process(target=_writer, args=(path, w, 500)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with Cache(path) as c:
        assert c.integrity() == "ok"
        trials = c.trials(KEY.digest)
        assert len(trials) == 2000
        for w in range(4):
            for i in range(500):
                t = trials[_point(w, i)]
                assert (t.cost, t.method, t.refused) == (float(w * 10_000 + i), f"w{w}", None)


def _count(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=10) as db:
            return int(db.execute("SELECT COUNT(*) FROM trials").fetchone()[0])
    except sqlite3.OperationalError:  # the schema is not written yet
        return 0


def test_a_killed_tuning_loses_at_most_its_trial_in_flight(tmp_path: Path) -> None:
    """``vta tune`` in a subprocess, killed with SIGKILL after its third committed trial: the
    file is sound, every committed trial whole, and a rerun measures only the rest."""
    path = tmp_path / "c.sqlite"
    argv = ["tune", "--hw", PYNQ, "resnet18:C11", "--height", "14", "--in-channels", "64",
            "--out-channels", "64", "--trials", "16", "--workers", "1", "--cache", str(path)]
    child = subprocess.Popen([sys.executable, "-m", "vta.cli", *argv],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 120
        while _count(path) < 3 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child.poll() is None, "the tuning finished before it could be killed"
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    finally:
        if child.poll() is None:
            child.kill()
    with Cache(path) as c:
        assert c.integrity() == "ok"
        [info] = c.keys()
        kept = c.trials(info["key"])
        assert len(kept) >= 3 and all(t.cost is not None and t.cost > 0 for t in kept.values())
        assert c.tuning(info["key"], "auto", 0, 16) is None  # the job did not finish
    assert main([*argv, "--json"]) == 0
    with Cache(path) as c:
        assert len(c.trials(info["key"])) == 16


def test_rerun_after_kill_reuses_every_committed_trial(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """What a resumed job reports: points taken from the cache are not measured again."""
    path = tmp_path / "c.sqlite"
    argv = ["tune", "--hw", PYNQ, "matmul", "32", "32", "32", "--workers", "1", "--cache",
            str(path), "--json"]
    assert main([*argv, "--trials", "6"]) == 0
    first = json.loads(capsys.readouterr().out)["jobs"][0]
    with Cache(path) as c:  # forget that the job finished: as if it had been killed
        c._db.execute("DELETE FROM tunings")
    assert main([*argv, "--trials", "9"]) == 0
    again = json.loads(capsys.readouterr().out)["jobs"][0]
    assert again["reused"] == first["measured"] == 6 and again["measured"] == 3


def test_corrupt_foreign_and_newer_files_are_named_errors(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(os.urandom(4096))
    with pytest.raises(CacheError, match="not a vta tuning cache"):
        Cache(junk)
    foreign = tmp_path / "other.sqlite"
    with sqlite3.connect(foreign) as db:
        db.execute("CREATE TABLE photos (id INTEGER)")
    with pytest.raises(CacheError, match="another application"):
        Cache(foreign)
    newer = tmp_path / "newer.sqlite"
    Cache(newer).close()
    with sqlite3.connect(newer) as db:
        db.execute("PRAGMA user_version=99")
    with pytest.raises(CacheError, match="schema 99"):
        Cache(newer)
    for bad in (junk, foreign, newer):
        for argv in (["cache", "list"], ["tune", "matmul", "16", "16", "16", "--trials", "1"],
                     ["run", "--hw", PYNQ, "matmul", "16", "16", "16"]):
            assert main([*argv, "--cache", str(bad)]) == 2
            err = capsys.readouterr().err
            assert err.startswith("vta: error: ") and err.count("\n") == 1 and str(bad) in err
            assert "Traceback" not in err


def test_truncated_file_is_a_named_error(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.sqlite"
    _writer(str(path), 0, 300)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])
    assert main(["cache", "export", "--cache", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("vta: error: ") and str(path) in err and err.count("\n") == 1


def _quick_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ``quick_check`` statements every connection opened from now on runs (a list the
    test reads)."""
    ran: list[str] = []
    real = sqlite3.connect

    def traced(*args: Any, **kw: Any) -> sqlite3.Connection:
        db = real(*args, **kw)
        db.set_trace_callback(lambda sql: ran.append(sql) if "quick_check" in sql else None)
        return db

    monkeypatch.setattr(sqlite3, "connect", traced)
    return ran


def test_an_unchanged_file_is_checked_once_and_damage_after_is_named(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``quick_check`` runs when the file changed since it last passed: its stamp is recorded
    beside it (``-checked``) once the file has settled, an unchanged file is opened without
    the check (read-only and for writing), and a page zeroed in place afterwards (same size)
    is named at the next open."""
    monkeypatch.setattr(cache_module, "SETTLED_S", 0.2)
    path = tmp_path / "c.sqlite"
    _writer(str(path), 0, 300)
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ran = _quick_checks(monkeypatch)
    Cache(path, readonly=True).close()  # just written: checked, not recorded
    assert len(ran) == 1 and not (tmp_path / "c.sqlite-checked").exists()
    time.sleep(0.3)  # (SETTLED_S) the file settles
    Cache(path, readonly=True).close()
    assert len(ran) == 2 and (tmp_path / "c.sqlite-checked").exists()
    Cache(path, readonly=True).close()
    Cache(path).close()
    assert len(ran) == 2
    with path.open("r+b") as f:
        f.seek(4096)
        f.write(bytes(4096))
    with pytest.raises(CacheError, match="damaged"):
        Cache(path, readonly=True)
    assert len(ran) == 3


def test_cache_path_from_flag_environment_and_xdg(tmp_path: Path) -> None:
    assert default_cache_path({CACHE_ENV: str(tmp_path / "x.sqlite")}) == tmp_path / "x.sqlite"
    assert default_cache_path({"XDG_CACHE_HOME": str(tmp_path)}) == \
        tmp_path / "vta" / "tune.sqlite"
    assert default_cache_path({}) == Path.home() / ".cache" / "vta" / "tune.sqlite"


def test_vta_cache_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "c.sqlite"
    assert main(["cache", "list", "--cache", str(path)]) == 0
    assert "no tuning cache" in capsys.readouterr().out and not path.exists()
    assert main(["tune", "--hw", PYNQ, "matmul", "32", "32", "32", "--trials", "4",
                 "--workers", "1", "--cache", str(path)]) == 0
    capsys.readouterr()
    assert main(["cache", "list", "--cache", str(path), "--json"]) == 0
    [info] = json.loads(capsys.readouterr().out)
    assert info["trials"] == 4 and info["op"].startswith("matmul(m=32,n=32,k=32)")
    assert main(["cache", "show", info["key"][:8], "--cache", str(path)]) == 0
    shown = capsys.readouterr().out
    assert "best" in shown and "timing-only simulator" in shown and "4 trials" in shown
    out = tmp_path / "all.jsonl"
    assert main(["cache", "export", "--cache", str(path), "--out", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(recs) == 4 and {"key", "point", "cost", "method", "measured_at"} <= set(recs[0])
    assert main(["cache", "show", "zzz", "--cache", str(path)]) == 2
    assert "no key starts with 'zzz'" in capsys.readouterr().err
    assert main(["cache", "show", "--cache", str(path)]) == 2
    assert main(["cache", "clear", "--cache", str(path)]) == 0
    assert "cleared 4 trials" in capsys.readouterr().out


def _open_new(path: str, errors: Any) -> None:
    try:
        with Cache(path) as c:
            c.keys()
    except CacheError as e:
        errors.put(str(e))


def test_processes_opening_one_new_file_at_once_all_get_the_cache(tmp_path: Path) -> None:
    """Eight processes open the same new file at once, fifteen times: each sees a vta cache
    (one creates it; the others read its header in one snapshot and retry SQLite's immediate
    "locked" answers), never "another application" (what a worker of the 500-record test
    once saw: the application id read before the creator's commit, the tables after)."""
    ctx = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods()
                                      else "spawn")
    for r in range(15):
        path = str(tmp_path / f"c{r}.sqlite")
        errors = ctx.Queue()
        procs = [ctx.Process(target=_open_new, args=(path, errors)) for _ in range(8)]
        for p in procs:
            p.start()
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
        assert errors.empty(), errors.get()
        with Cache(path) as c:
            assert c.integrity() == "ok" and c.keys() == []


def test_hw_digest_is_computed_once_per_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """``hw_digest`` remembers its digest per config (a warm ``vta run`` keys every kernel on
    one): an equal config, another object, reads it without ``to_dict``; the digest is the
    one computed afresh, and a config that differs in what makes a program gets another."""
    from vta.config import HwConfig
    from vta.tune.cache import hw_digest

    hw = HwConfig.load("pynq")
    twin = HwConfig.from_dict(hw.to_dict(), "copy")
    fresh = hw_digest.__wrapped__(hw)
    hw_digest.cache_clear()
    calls = []
    to_dict = HwConfig.to_dict
    monkeypatch.setattr(HwConfig, "to_dict", lambda self: calls.append(self) or to_dict(self))
    assert hw_digest(hw) == hw_digest(twin) == hw_digest(hw) == fresh
    assert len(calls) == 1
    other = hw.with_changes(**{"gemm.block_out": 32})
    assert hw_digest(other) != fresh and len(calls) == 3  # (with_changes reads it too)
