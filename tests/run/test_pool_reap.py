"""A ``ForkPool``'s close does not wait for its workers' exits (a forked worker tears its
memory down after its last result; ``vta.run.pool._reap_later``): they are reaped once they
have exited, at the next pool's close or at this process's exit, so none is left behind. And
its first worker starts on the first item before the second worker is forked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from vta.run import pool
from vta.run.pool import ForkPool

ROOT = Path(__file__).resolve().parents[2]


def _double(x: int) -> int:
    return 2 * x


def test_closing_a_pool_waits_for_no_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    real = os.waitpid

    def waitpid(pid: int, options: int) -> Any:
        calls.append((pid, options))
        return real(pid, options)

    with ForkPool(_double, None, 2, 4) as p:
        for x in range(4):
            p.submit(x)
        p.end_input()
        monkeypatch.setattr(pool.os, "waitpid", waitpid)
        assert p.results() == [0, 2, 4, 6]  # (the pool closes after its last result)
    assert p.workers == 2
    assert calls and all(options == os.WNOHANG for _, options in calls)
    monkeypatch.setattr(pool.os, "waitpid", real)
    pids = {pid for pid, _ in calls}
    pool._reap_ended()  # (what the exit handler does)
    assert not pids & set(pool._ENDED)
    for pid in pids:
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)


def test_a_process_reaps_its_pools_workers_when_it_exits() -> None:
    """A process that ran a pool and exits as ``vta``'s console does (its exit handlers, then
    ``os._exit``): every worker was reaped (none left a zombie)."""
    code = ("import atexit, os, sys\nfrom vta.run.pool import ForkPool\n"
            "from tests.run.test_pool_reap import _double\n"
            "with ForkPool(_double, None, 2, 4) as p:\n"
            "    for x in range(4): p.submit(x)\n"
            "    pids = list(p._pool.pids)\n"
            "    p.end_input()\n    assert p.results() == [0, 2, 4, 6]\n"
            "atexit._run_exitfuncs()\n"
            "left = [pid for pid in pids if os.path.exists(f'/proc/{pid}')]\n"
            "print(len(pids), left)\nsys.stdout.flush()\nos._exit(0)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.stdout.split("\n")[0] == "2 []"


def test_the_first_worker_starts_before_the_next_is_forked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The first item goes to the first worker as soon as it is forked, so that it computes
    while this process forks the second (``_Workers.submit``)."""
    handed: list[int] = []  # at each fork, the items handed out so far
    real = pool._Workers._fork

    def fork(self: pool._Workers) -> None:
        handed.append(sum(len(q) for q in self.queued))
        real(self)

    monkeypatch.setattr(pool._Workers, "_fork", fork)
    with ForkPool(_double, None, 2, 3) as p:
        for x in range(3):
            p.submit(x)
        p.end_input()
        assert p.results() == [0, 2, 4]
    assert handed == [0, 1]
