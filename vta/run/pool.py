"""Work of one run spread over the machine's cores: ``fork_map(fn, items, job, jobs)``.

The workers are processes started by ``fork``, so they inherit ``job`` (whatever the items
refer to: a graph, the hardware, registered intrinsics, a cost oracle; none of it needs to
pickle) and read it with ``current_job()``; only the items and ``fn``'s results travel. The
results come back in the items' order, whichever worker finishes first. With one job or one
item, where ``fork`` is not available, in a daemonic process (a worker of another pool), or
when the pool cannot start, breaks or a task fails there, ``fn`` runs on every item in this
process: the same results, serially (and a task's own error raised from here).
``vta.run.compile_pool`` compiles a graph's kernels this way and ``vta.run.graph`` simulates
them.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["fork_map", "current_job", "default_jobs"]

T = TypeVar("T")
R = TypeVar("R")

#: where Linux counts the runnable tasks (``default_jobs``)
LOADAVG = Path("/proc/loadavg")

#: the job the forked workers inherit (set in the parent just before the pool starts)
_JOB: Any = None


def default_jobs() -> int:
    """Worker processes for a run's parallel parts: the machine's cores that nothing else is
    running on, at least 1 (``os.cpu_count()`` less the other tasks the kernel counts as
    runnable now: ``/proc/loadavg``'s fourth field, this process excluded; every core where
    that cannot be read). On a quiet machine every core; on one whose cores other jobs keep
    busy, workers would only take turns with those jobs, and measured slower there than the
    one process (bench/warm_run.py at load average 8 on 2 cores)."""
    cpus = os.cpu_count() or 1
    try:
        running = int(LOADAVG.read_text().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return cpus
    return max(1, cpus - max(0, running - 1))


def current_job() -> Any:
    """The job of the ``fork_map`` running (in a worker: the parent's, inherited)."""
    return _JOB


def fork_map(fn: Callable[[T], R], items: Sequence[T], job: Any, jobs: int | None = None
             ) -> tuple[list[R], int]:
    """``[fn(item) for item in items]`` on ``jobs`` worker processes (default: the idle cores,
    ``default_jobs``),
    with ``current_job()`` returning ``job`` in them; and how many workers ran (0: this
    process). ``fn`` must be a module-level function (a pool sends it by name)."""
    global _JOB
    _JOB = job
    try:
        workers = min(jobs if jobs is not None else default_jobs(), len(items))
        if workers > 1 and _can_fork():
            try:
                with _pool(workers) as pool:
                    return list(pool.map(fn, items)), workers
            except Exception:  # no processes here, a broken pool, or an error in a task:
                pass  # the items run in this process (a task's own error is raised again)
        return [fn(item) for item in items], 0
    finally:
        _JOB = None


def _can_fork() -> bool:
    """Whether worker processes can start by ``fork`` here (they inherit the job): not in a
    daemonic process (a pool's or an executor's worker, which may have no children)."""
    import multiprocessing  # the standard library's, loaded only for a pool

    return "fork" in multiprocessing.get_all_start_methods() \
        and not multiprocessing.current_process().daemon


def _pool(workers: int) -> Executor:
    """``workers`` processes started by ``fork``."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))
