"""The tuning cache and its workers as a user meets them (issue 25): a damaged file is one
named error for every command; hand-edited records are checked against the space before use;
a read-only cache is read; two tunes of one key at once measure each point once; workers die
with their parent on SIGKILL and SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from vta.cli import main
from vta.errors import CacheError
from vta.tune.cache import Cache

ROOT = Path(__file__).resolve().parents[2]
PYNQ = str(ROOT / "hwconfigs" / "pynq.yaml")
MATMUL = ["matmul", "32", "32", "32"]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache holding a finished tuning of a 32x32x32 matmul on pynq (4 trials)."""
    path = tmp_path_factory.mktemp("tuned") / "c.sqlite"
    assert main(["tune", "--hw", PYNQ, *MATMUL, "--trials", "4", "--workers", "1",
                 "--cache", str(path), "--json"]) == 0
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


def _copy(src: Path, dst: Path) -> Path:
    dst.write_bytes(src.read_bytes())
    return dst


def test_second_page_zeroed_is_one_named_error_everywhere(
        tuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's case: page 2 zeroed; `cache list` used to say "malformed" while `run` and
    `tune` used the file and exited 0."""
    bad = _copy(tuned, tmp_path / "z.sqlite")
    data = bytearray(bad.read_bytes())
    data[4096:8192] = bytes(4096)
    bad.write_bytes(bytes(data))
    for argv in (["cache", "list"], ["cache", "export"], ["run", "--hw", PYNQ, *MATMUL],
                 ["tune", "--hw", PYNQ, *MATMUL, "--trials", "4", "--workers", "1"]):
        assert main([*argv, "--cache", str(bad)]) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith(f"vta: error: {bad}: the tuning cache is damaged"), err
        assert err.count("\n") == 1
    with pytest.raises(CacheError, match="damaged"):
        Cache(bad, readonly=True)


def _edit_best(path: Path, point: str) -> None:
    """Make the cheapest trial of the cache's one key claim 1 cycle at ``point``."""
    with sqlite3.connect(path) as db:
        key, old = db.execute("SELECT key, point FROM trials ORDER BY cost LIMIT 1").fetchone()
        db.execute("UPDATE trials SET point=?, cost=1 WHERE key=? AND point=?",
                   (point, key, old))
        db.execute("UPDATE tunings SET best_point=?, best_cost=1", (point,))


@pytest.mark.parametrize(("point", "says"), [
    ("{not json", "the point is not JSON"),
    ('{"tco": 1}', "the point lacks fold, vthreads"),
    (None, "has knobs the space vta.conv2d does not (bogus)"),
    (None, "tco=999 is not one of the space's values"),
])
def test_hand_edited_best_trial_is_skipped_with_a_warning(
        tuned: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        point: str | None, says: str) -> None:
    """`vta run` warns, names the record and uses the next sound trial; `cache export` and
    `cache show --json` export it as it is; `vta tune` re-runs the job (no internal error)."""
    path = _copy(tuned, tmp_path / "e.sqlite")
    if point is None:
        with sqlite3.connect(path) as db:
            good = json.loads(db.execute("SELECT point FROM trials LIMIT 1").fetchone()[0])
        good.update({"bogus": 3} if "bogus" in says else {"tco": 999})
        point = json.dumps(good)
    _edit_best(path, point)
    assert main(["run", "--hw", PYNQ, *MATMUL, "--cache", str(path)]) == 0
    out, err = capsys.readouterr()
    assert "vta: warning:" in err and says in err and "a trial of 1 cycles skipped" in err
    assert "schedule from the tuning cache" in out
    assert main(["cache", "export", "--cache", str(path)]) == 0
    recs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(recs) == 4
    with Cache(path, readonly=True) as c:
        [info] = c.keys()
    assert main(["cache", "show", info["key"], "--json", "--cache", str(path)]) == 0
    assert len(json.loads(capsys.readouterr().out)["trials"]) == 4
    assert main(["tune", "--hw", PYNQ, *MATMUL, "--trials", "4", "--workers", "1",
                 "--cache", str(path)]) == 0
    assert "internal error" not in capsys.readouterr().err


def test_read_only_cache_is_read(tuned: Path, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A cache in a read-only directory (no WAL index can be made there): `vta run` and
    `vta cache list` read it; `vta tune` says it is read-only."""
    d = tmp_path / "ro"
    d.mkdir()
    path = _copy(tuned, d / "c.sqlite")
    path.chmod(0o444)
    d.chmod(0o555)
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode, **kw: False if mode == os.W_OK and
                        Path(p).parent == d else real(p, mode, **kw))
    try:
        with Cache(path, readonly=True) as c:
            [info] = c.keys()
            assert info["trials"] == 4
            with pytest.raises(CacheError, match="read-only"):
                c.add_trial(info["key"], "{}", 1.0, method="m", seconds=0.0)
        assert main(["run", "--hw", PYNQ, *MATMUL, "--cache", str(path)]) == 0
        assert "schedule from the tuning cache" in capsys.readouterr().out
        assert main(["cache", "list", "--cache", str(path)]) == 0
        assert "1 keys" in capsys.readouterr().out
        assert main(["tune", "--hw", PYNQ, *MATMUL, "--trials", "4", "--workers", "1",
                     "--cache", str(path)]) == 2
        assert "read-only" in capsys.readouterr().err
    finally:
        d.chmod(0o755)


def test_two_tunes_of_one_key_at_once_measure_each_point_once(tmp_path: Path) -> None:
    """Two `vta tune` processes of one layer on one cache: each point measured by one of
    them (a lease per point), the other takes its trial."""
    path = tmp_path / "c.sqlite"
    Cache(path).close()
    argv = [sys.executable, "-m", "vta.cli", "tune", "--hw", PYNQ, "resnet18:C11", "--height",
            "14", "--in-channels", "64", "--out-channels", "64", "--trials", "12",
            "--workers", "1", "--cache", str(path), "--json"]
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1] for o in outs]
    jobs = [json.loads(o[0])["jobs"][0] for o in outs]
    with Cache(path, readonly=True) as c:
        [info] = c.keys()
        stored = len(c.trials(info["key"]))
    assert sum(j["measured"] for j in jobs) == stored
    assert all(j["evaluated"] == 12 for j in jobs)
    assert jobs[0]["best_cycles"] == jobs[1]["best_cycles"]


def _children(pid: int) -> set[int]:
    """Every descendant of ``pid`` (from /proc)."""
    kids: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        kids.setdefault(ppid, []).append(int(entry.name))
    out: set[int] = set()
    todo = [pid]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.add(k)
            todo.append(k)
    return out


def _running(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rpartition(")")[2].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_killed_tune_leaves_no_worker(tmp_path: Path, sig: signal.Signals) -> None:
    """The issue's case: SIGKILL or SIGTERM on `vta tune --workers 2` left both workers
    alive, holding the cache file."""
    path = tmp_path / "c.sqlite"
    child = subprocess.Popen(
        [sys.executable, "-m", "vta.cli", "tune", "--hw", PYNQ, "resnet18:C11", "--height",
         "14", "--in-channels", "64", "--out-channels", "64", "--trials", "64", "--workers",
         "2", "--cache", str(path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        env=ENV, start_new_session=True)
    workers: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while len(workers) < 2 and child.poll() is None and time.monotonic() < deadline:
            workers = _children(child.pid)
            time.sleep(0.05)
        assert len(workers) >= 2 and child.poll() is None, "no workers seen"
        child.send_signal(sig)
        child.wait(30)
        deadline = time.monotonic() + 10
        while any(_running(w) for w in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        left = [w for w in workers if _running(w)]
        assert not left, f"workers {left} outlived their parent"
    finally:
        for w in _children(child.pid) | workers:
            if _running(w):
                os.kill(w, signal.SIGKILL)
        if child.poll() is None:
            child.kill()
