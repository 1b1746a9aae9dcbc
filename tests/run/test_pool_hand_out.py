"""While this process waits for a ``ForkPool``'s results it hands an item only to an idle
worker (``vta.run.pool._free_worker``): an item queued ahead behind a busy worker's long one
would wait there while the other worker ends idle (the compile pool's last tasks); ahead of
time only when it goes off to other work (``submit``, ``end_input``)."""

from __future__ import annotations

import os
import time

from vta.run.pool import ForkPool, _free_worker


def test_an_idle_worker_first_and_a_busy_one_only_ahead() -> None:
    room = [1 << 20, 1 << 20]
    assert _free_worker([1, 0], room, 100, ahead=False) == 1
    assert _free_worker([1, 0], room, 100, ahead=True) == 1
    assert _free_worker([2, 1], room, 100, ahead=True) == 1
    assert _free_worker([2, 1], room, 100, ahead=False) is None
    assert _free_worker([1, 1], [10, 1 << 20], 100, ahead=True) == 1  # (the frame fits there)
    assert _free_worker([2, 2], room, 100, ahead=True) is None


def _nap(seconds: float) -> int:
    time.sleep(seconds)
    return os.getpid()


def test_the_last_item_goes_to_the_worker_free_first() -> None:
    """Worker A computes 0 then the long 2 (queued ahead at submit), B computes 1 then 3;
    item 4 waits here: it goes to B once B is idle, not ahead behind A's long item."""
    naps = [0.3, 0.4, 1.5, 0.05, 0.0]
    with ForkPool(_nap, None, 2, len(naps)) as p:
        for s in naps:
            p.submit(s)
        p.end_input()
        pids = p.results()
    assert pids[0] == pids[2] != pids[1] == pids[3]
    assert pids[4] == pids[1]
