"""``vta.run.pool.fork_map``: results in the items' order from forked workers that inherit the
job; a task's error raised (from the serial rerun); serial inside a daemonic process (which may
have no children), inside a worker and with one job; no helper thread, and a busy worker
given its next item while this process is away. ``ForkedChild``: its frames in order, fewer
when it fails (exit status 1), killed and reaped when no longer wanted, none where no process
can fork."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from vta.run import pool
from vta.run.pool import ForkedChild, ForkPool, current_job, fork_map


def _square_plus_job(x: int) -> tuple[int, int]:
    return x * x + current_job(), os.getpid()


def _boom(x: int) -> int:
    if x == 3:
        raise ValueError(f"task {x} fails")
    return x


def _nested(x: int) -> int:
    """How many workers a ``fork_map`` inside a worker gets."""
    return fork_map(_square_plus_job, [1, 2], 0, 2)[1]


def test_results_come_back_in_order_from_workers_that_inherit_the_job() -> None:
    out, workers = fork_map(_square_plus_job, list(range(8)), 100, 2)
    assert workers == 2
    assert [v for v, _ in out] == [x * x + 100 for x in range(8)]
    assert os.getpid() not in {pid for _, pid in out}
    assert current_job() is None  # reset once done


def test_one_job_runs_here() -> None:
    out, workers = fork_map(_square_plus_job, [1, 2, 3], 5, 1)
    assert workers == 0 and [v for v, _ in out] == [6, 9, 14]
    assert {pid for _, pid in out} == {os.getpid()}


def test_a_failing_task_raises_its_own_error() -> None:
    with pytest.raises(ValueError, match="task 3 fails"):
        fork_map(_boom, [1, 2, 3, 4], None, 2)


def test_a_daemonic_worker_runs_its_items_itself() -> None:
    """A ``multiprocessing.Pool``'s workers are daemonic: a ``fork_map`` in one runs serially
    instead of failing to start children."""
    import multiprocessing

    with multiprocessing.get_context("fork").Pool(1) as p:
        assert p.apply(_nested, (0,)) == 0


def test_a_worker_runs_its_own_pools_items_itself() -> None:
    assert fork_map(_nested, [0, 1], 0, 2) == ([0, 0], 2)
    assert fork_map(_nested, [0, 1], 0, 1) == ([2, 2], 0)  # (here, a pool's workers)


def _mark(item: tuple[str, int]) -> int:
    """Leave a file for the item, then take a while."""
    Path(item[0], str(item[1])).write_text("")
    time.sleep(0.2)
    return item[1]


def test_busy_workers_get_their_next_items_while_this_process_is_away(tmp_path: Path
                                                                     ) -> None:
    """Four small items on two workers: each worker is handed its second item while it
    computes its first, so all four start while this process neither submits nor waits
    for results (one item per worker at a time would start two); no helper thread."""
    with ForkPool(_mark, None, 2) as pool:
        for k in range(4):
            pool.submit((str(tmp_path), k))
        assert threading.active_count() == 1
        deadline = time.monotonic() + 60
        while len(list(tmp_path.iterdir())) < 4 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert sorted(int(p.name) for p in tmp_path.iterdir()) == [0, 1, 2, 3]
        assert pool.results() == [0, 1, 2, 3] and pool.workers == 2


def test_a_busy_worker_holds_at_most_one_item_beyond_its_own(tmp_path: Path) -> None:
    """The rest wait in this process for whichever worker is free first (balance)."""
    with ForkPool(_mark, None, 2) as pool:
        for k in range(6):
            pool.submit((str(tmp_path), k))
        workers = pool._pool
        assert workers is not None
        assert [len(q) for q in workers.queued] == [2, 2] and len(workers.waiting) == 2
        assert pool.results() == list(range(6))


def test_costs_hand_out_the_longest_first_and_keep_the_items_order() -> None:
    """With one worker the hand-out order is the run order: the most costly item first."""
    out, workers = fork_map(_square_plus_job, [1, 2, 3], 0, 1, costs=[1.0, 3.0, 2.0])
    assert workers == 0 and [v for v, _ in out] == [1, 4, 9]
    order: list[int] = []

    def record(x: int) -> int:
        order.append(x)
        return x

    assert fork_map(record, [1, 2, 3], None, 1, costs=[1.0, 3.0, 2.0])[0] == [1, 2, 3]
    assert order == [2, 3, 1]


def test_meanwhile_runs_here_while_workers_work_and_not_without_them() -> None:
    ran: list[int] = []
    out, workers = fork_map(_square_plus_job, [1, 2, 3], 0, 2,
                            meanwhile=lambda: ran.append(os.getpid()))
    assert workers == 2 and [v for v, _ in out] == [1, 4, 9] and ran == [os.getpid()]
    fork_map(_square_plus_job, [1, 2, 3], 0, 1, meanwhile=lambda: ran.append(0))
    assert ran == [os.getpid()]  # no workers: nothing to overlap, not run


def test_a_fork_pool_takes_items_while_this_process_works() -> None:
    """Items submitted one at a time (the workers forked at the first) come back in the order
    submitted; the same with one job, run here at ``results``."""
    for jobs, here in ((2, False), (1, True)):
        with ForkPool(_square_plus_job, 10, jobs, expect=4) as pool:
            for x in range(4):
                pool.submit(x)
            out = pool.results()
        assert [v for v, _ in out] == [10, 11, 14, 19]
        assert ({pid for _, pid in out} == {os.getpid()}) is here
        assert pool.workers == (0 if here else 2)
    assert current_job() is None


def test_results_stream_in_order_and_a_failure_reruns_the_rest_here() -> None:
    with ForkPool(_square_plus_job, 0, 2, expect=3) as pool:
        for x in (1, 2, 3):
            pool.submit(x)
        assert [v for v, _ in pool.iter_results()] == [1, 4, 9]
    with pytest.raises(ValueError, match="task 3 fails"), ForkPool(_boom, None, 2) as pool:
        for x in (1, 2, 3, 4):
            pool.submit(x)
        got = []
        for r in pool.iter_results():
            got.append(r)
    assert got == [1, 2]  # the workers' results, then task 3 fails again here


def _count_to(n: int, fail_at: int | None = None) -> Any:
    def work(report: Any) -> None:
        for k in range(n):
            if k == fail_at:
                raise RuntimeError("the child fails")
            report(k.to_bytes(4, "little"))
    return work


def test_a_forked_child_reports_its_frames_in_order_and_is_reaped() -> None:
    child = ForkedChild.start(_count_to(50), 4)
    assert child is not None and child.pid != os.getpid()
    assert [int.from_bytes(f, "little") for f in child.frames()] == list(range(50))
    assert child.status == 0 and child.fd == -1


def test_a_child_that_fails_stops_its_frames_early_with_status_1() -> None:
    child = ForkedChild.start(_count_to(50, fail_at=7), 4)
    assert child is not None
    assert [int.from_bytes(f, "little") for f in child.frames()] == list(range(7))
    assert child.status == 1


def test_a_child_no_longer_wanted_is_ended() -> None:
    def forever(report: Any) -> None:
        report(b"\0" * 4)
        while True:
            time.sleep(0.01)

    child = ForkedChild.start(forever, 4)
    assert child is not None
    assert next(iter(child.frames())) == b"\0" * 4
    child.close()
    assert child.status == -9  # killed (SIGKILL)
    child.close()  # once is enough


def test_no_child_where_none_can_fork(monkeypatch: Any) -> None:
    monkeypatch.setattr(pool, "_can_fork", lambda: False)
    assert ForkedChild.start(_count_to(3), 4) is None


def _blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info
    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


def test_one_blas_thread_limits_blas_unless_the_user_chose(monkeypatch: pytest.MonkeyPatch
                                                           ) -> None:
    """A run's parallelism is its processes: numpy's BLAS gets one thread, in this process and
    in the workers it forks; a number the user set in the environment is left alone."""
    import numpy as np  # noqa: F401 - BLAS is loaded with numpy
    from threadpoolctl import threadpool_limits

    assert _blas_threads(), "numpy's BLAS is visible to threadpoolctl"
    with threadpool_limits(limits=2, user_api="blas"):  # restored on leaving
        for v in pool.BLAS_THREAD_VARIABLES:
            monkeypatch.delenv(v, raising=False)
        assert pool.one_blas_thread()
        assert set(_blas_threads()) == {1}
        got, workers = fork_map(_threads_in_worker, [0, 1], None, jobs=2)
        assert got == [[1] * len(_blas_threads())] * 2 and workers in (0, 2)
    with threadpool_limits(limits=2, user_api="blas"):
        before = _blas_threads()
        monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
        assert not pool.one_blas_thread()
        assert _blas_threads() == before


def _threads_in_worker(_: int) -> list[int]:
    return _blas_threads()


def test_every_command_runs_with_one_blas_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    import vta.cli

    calls: list[int] = []
    monkeypatch.setattr(vta.cli, "one_blas_thread", lambda: calls.append(1) or True)
    assert vta.cli.main(["info", "--hw", "pynq", "--json"]) == 0
    assert calls == [1]
