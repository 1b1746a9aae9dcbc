"""Work of one run spread over the machine's cores: ``fork_map(fn, items, job, jobs)``.

The workers are processes started by ``fork``, so they inherit ``job`` (whatever the items
refer to: a graph, the hardware, registered intrinsics, a cost oracle; none of it needs to
pickle) and read it with ``current_job()``; only the items and ``fn``'s results travel. The
results come back in the items' order, whichever worker finishes first. With one job or one
item, where ``fork`` is not available, in a daemonic process (a worker of another pool), or
when the pool cannot start, breaks or a task fails there, ``fn`` runs on every item in this
process: the same results, serially (and a task's own error raised from here).
``vta.run.compile_pool`` compiles a graph's kernels this way and ``vta.run.graph`` simulates
them. ``ForkedChild`` is one forked process that reports progress in fixed-size frames over a
pipe (``vta.run.graph.Reference.start``: the graph interpreter in a process of its own, its
values written to memory the parent shares).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:  # the executor's modules load with the first pool (``_pool``): a run in
    # this process alone (``--jobs 1``, a busy machine) never loads them
    from concurrent.futures import Executor, Future

__all__ = ["fork_map", "ForkPool", "ForkedChild", "current_job", "default_jobs",
           "one_blas_thread", "BLAS_THREAD_VARIABLES"]

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


#: the environment variables by which a user sets BLAS's threads (OpenBLAS, OpenMP builds,
#: MKL, BLIS, Apple's Accelerate): where any is set, ``one_blas_thread`` leaves BLAS alone
BLAS_THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                         "BLIS_NUM_THREADS", "VECLIB_MAXIMUM_THREADS")


def one_blas_thread() -> bool:
    """Limit the BLAS numpy calls to one thread in this process and the workers it forks
    (threadpoolctl), unless the user chose a number (``BLAS_THREAD_VARIABLES``); whether it
    did. A run's parallelism is its processes (the simulation and compile workers, the
    interpreter's child): BLAS threads of their own only contend with them for the cores, and
    OpenBLAS's waiting threads spin. A warm ``vta run resnet18`` on 2 cores took 2.1 s with
    OpenBLAS's default threads and 1.2-1.3 s with one (load average ~2, back to back)."""
    if any(os.environ.get(v) for v in BLAS_THREAD_VARIABLES):
        return False
    from threadpoolctl import threadpool_limits
    threadpool_limits(limits=1, user_api="blas")
    return True


def current_job() -> Any:
    """The job of the ``fork_map`` running (in a worker: the parent's, inherited)."""
    return _JOB


def fork_map(fn: Callable[[T], R], items: Sequence[T], job: Any, jobs: int | None = None, *,
             costs: Sequence[float] | None = None, meanwhile: Callable[[], None] | None = None
             ) -> tuple[list[R], int]:
    """``[fn(item) for item in items]`` on ``jobs`` worker processes (default: the idle cores,
    ``default_jobs``), with ``current_job()`` returning ``job`` in them; and how many workers
    ran (0: this process). ``fn`` must be a module-level function (a pool sends it by name).
    ``costs`` (one per item, any unit): the items are handed out most costly first, so that a
    long one does not start last and keep one worker busy alone (the results still come in
    the items' order). ``meanwhile``: run in this process while the workers work (not at all
    when the items run here: it is for work that can wait); its errors are raised from here."""
    order = sorted(range(len(items)), key=lambda i: -costs[i]) if costs is not None \
        else range(len(items))
    with ForkPool(fn, job, jobs, len(items)) as pool:
        for i in order:
            pool.submit(items[i])
        if meanwhile is not None and pool.parallel:
            meanwhile()
        done = pool.results()
    out: list[Any] = [None] * len(items)
    for i, r in zip(order, done, strict=True):
        out[i] = r
    return out, pool.workers


class ForkPool(Generic[T, R]):
    """``fn`` over items handed in one at a time (``submit``), on worker processes started by
    ``fork`` at the first item (module docstring: they inherit ``job`` and this process as it
    is then), so that later items can be submitted while this process computes them:
    ``vta.run.graph`` hands each kernel to a worker as soon as the interpreter has computed
    its inputs. ``results()``:
    ``fn``'s results in the order submitted. With one job or at most one item expected
    (``expect``), no ``fork``, in a daemonic process, or when the pool cannot start, breaks
    or a task fails, every item runs in this process at ``results()`` (the same results; a
    task's own error raised from there). ``workers``: how many ran (0: this process)."""

    def __init__(self, fn: Callable[[T], R], job: Any, jobs: int | None = None,
                 expect: int | None = None) -> None:
        self.fn, self.job = fn, job
        want = jobs if jobs is not None else default_jobs()
        self.want = min(want, expect) if expect is not None else want
        self.items: list[T] = []
        self.futures: list[Future[R]] | None = None
        self.workers = 0
        self._pool: Executor | None = None

    def __enter__(self) -> ForkPool[T, R]:
        global _JOB
        _JOB = self.job
        if self.want > 1 and _can_fork():
            try:
                self._pool = _pool(self.want)  # its processes fork at the first item
                self.futures = []
            except Exception:  # no processes here: the items run in this process
                self._close()
        return self

    @property
    def parallel(self) -> bool:
        """Whether the items go to worker processes (so far)."""
        return self._pool is not None and self.futures is not None

    def submit(self, item: T) -> None:
        """Hand ``item`` to a worker (or keep it for this process)."""
        self.items.append(item)
        if self._pool is not None and self.futures is not None:
            try:
                self.futures.append(self._pool.submit(self.fn, item))
            except Exception:  # a broken pool: everything runs here at ``results``
                self.futures = None

    def results(self) -> list[R]:
        """``fn`` of every item submitted, in that order."""
        return list(self.iter_results())

    def iter_results(self) -> Iterator[R]:
        """``fn`` of every item submitted, in that order, each as soon as it and those before
        it are done (the caller can work on one while the workers compute the next). When the
        pool breaks or a task fails, the items from there on run in this process."""
        n = 0
        if self.futures is not None:
            try:
                for f in self.futures:
                    r = f.result()
                    n += 1
                    yield r
                self.workers = min(self.want, len(self.futures))
                return
            except Exception:  # a broken pool or an error in a task: the rest run here (a
                pass  # task's own error is raised again)
            finally:
                self._close()
        for item in self.items[n:]:
            yield self.fn(item)

    def __exit__(self, *exc: object) -> None:
        global _JOB
        self._close()
        _JOB = None

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


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


class ForkedChild:
    """``work(report)`` in a process started by ``fork`` (it inherits this process as it is,
    shared memory mappings included), reporting progress as ``frame``-byte frames
    (``report(bytes)``); this process reads them with ``frames()``. The child ends with
    ``os._exit`` (0 when ``work`` returned, 1 on any error: it runs none of this process's exit
    handlers and flushes none of its buffers); ``frames`` ends at the child's end, early when it
    failed, so the caller can tell (the frames it got) and do the rest itself. ``start`` is None
    where no process can be forked (module docstring: ``_can_fork``). ``close`` ends and reaps
    the child (its CPU time then counts among this process's children's)."""

    def __init__(self, pid: int, fd: int, frame: int) -> None:
        self.pid, self.fd, self.frame = pid, fd, frame
        self.status: int | None = None

    @classmethod
    def start(cls, work: Callable[[Callable[[bytes], None]], None], frame: int
              ) -> ForkedChild | None:
        """The child running ``work``; None when none can start here."""
        if not _can_fork():
            return None
        r, w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            os.close(r)
            os.close(w)
            return None
        if pid == 0:  # the child: never returns
            code = 1
            try:
                os.close(r)
                work(lambda b: _write_all(w, b))
                code = 0
            finally:
                os._exit(code)
        os.close(w)
        return cls(pid, r, frame)

    def frames(self) -> Iterator[bytes]:
        """The child's frames as they come (waiting for each), until it ends."""
        while self.fd >= 0:
            got = _read_exactly(self.fd, self.frame)
            if got is None:  # the child ended (or failed): it has closed the pipe
                self._reap(kill=False)
                return
            yield got

    def close(self) -> None:
        """End the child if it still runs (killed: its work is not wanted any more) and reap
        it; ``status``: its exit status (0: ``work`` returned; None before it ended)."""
        self._reap(kill=True)

    def _reap(self, kill: bool) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        if self.status is not None:
            return
        try:
            if kill and os.waitpid(self.pid, os.WNOHANG)[0] == 0:
                os.kill(self.pid, signal.SIGKILL)
            self.status = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        except ChildProcessError:  # reaped already
            self.status = -1


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _read_exactly(fd: int, n: int) -> bytes | None:
    """``n`` bytes from ``fd``; None at its end (a partial frame included)."""
    chunks, left = [], n
    while left:
        b = os.read(fd, left)
        if not b:
            return None
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)
