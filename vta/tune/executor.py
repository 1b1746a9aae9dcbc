"""Where tuning trials and sweep points run: one interface, local processes or a Dask cluster.

``Executor.map_unordered(fn, items)`` runs ``fn`` on every item and yields ``(index, result)``
as each finishes (the tuner records a trial the moment it is measured, and decides only on
whole batches, so the order results arrive in never changes what is chosen). ``fn`` must be
a module-level function and the items picklable (a ``HwConfig`` pickles without its
per-process hash).

* ``LocalExecutor(workers)``: ``workers`` processes of this machine (``fork`` where the OS has
  it: a worker starts with vta already imported); one worker runs the items in this process.
  A worker dies with the process that started it, whatever ends that process (SIGKILL and
  SIGTERM too, which run no cleanup in the parent): on Linux the kernel signals it
  (``PR_SET_PDEATHSIG``), and everywhere a watchdog thread in the worker exits it once its
  parent is gone (``os.getppid`` changes), so no worker is left holding the cache file.
* ``DaskExecutor(address)``: a Dask distributed cluster: ``tcp://HOST:PORT`` connects to a
  running scheduler; ``local:N`` starts a ``LocalCluster`` of ``N`` single-threaded worker
  processes on this machine (what the tests use). Needs the ``dask`` extra.

``make_executor(cluster, workers)`` picks one from the command line's ``--cluster`` and
``--workers``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import multiprocessing
import os
import re
import signal
import sys
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from typing import Any, TypeVar

from vta.errors import ExecutorError

__all__ = ["Executor", "LocalExecutor", "DaskExecutor", "ExecutorError", "make_executor"]

T = TypeVar("T")
R = TypeVar("R")

#: seconds to wait for a Dask scheduler to answer
CONNECT_TIMEOUT_S = 10
#: seconds between a worker's looks at whether its parent still runs (the watchdog for
#: systems without ``PR_SET_PDEATHSIG``, and its backstop on Linux)
PARENT_POLL_S = 0.5
#: prctl(2) option: the signal the kernel sends this process when its parent dies (linux/prctl.h)
_PR_SET_PDEATHSIG = 1


def _die_with(parent: int) -> None:
    """A worker's initializer: exit as soon as process ``parent`` (which started it) is gone
    (module docstring)."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the line above ran
        os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(1)

    threading.Thread(target=watch, name="vta-parent-watch", daemon=True).start()


class Executor(ABC):
    """Runs functions on items somewhere (module docstring)."""

    #: how many items run at once
    workers: int = 1
    #: what it is, for reports ("2 local processes", "Dask at tcp://...")
    description: str = ""

    @abstractmethod
    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        """``(index, fn(items[index]))`` for every item, in the order they finish."""

    @abstractmethod
    def close(self) -> None:
        """Release the workers."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LocalExecutor(Executor):
    """Processes on this machine; ``workers=1`` runs everything in this process."""

    def __init__(self, workers: int = 1) -> None:
        if workers < 1:
            raise ExecutorError(f"--workers must be >= 1, got {workers}")
        self.workers = workers
        self.description = ("this process" if workers == 1 else
                            f"{workers} local processes")
        self._pool: ProcessPoolExecutor | None = None

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            methods = multiprocessing.get_all_start_methods()
            ctx = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_die_with,
                                             initargs=(os.getpid(),))
        return self._pool

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        if self.workers == 1 or len(items) <= 1:
            for i, item in enumerate(items):
                yield i, fn(item)
            return
        pool = self._get_pool()
        futures: dict[Future[R], int] = {pool.submit(fn, item): i for i, item in enumerate(items)}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    yield futures[f], f.result()
        finally:
            for f in pending:
                f.cancel()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None


class DaskExecutor(Executor):
    """A Dask distributed cluster (module docstring)."""

    def __init__(self, address: str) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise ExecutorError(f"--cluster {address}: Dask is not installed (pip install "
                                f"'vta[dask]')") from None
        self._cluster: Any = None
        self._client: Any = None
        m = re.fullmatch(r"local:(\d+)", address)
        try:
            if m:
                n = int(m[1])
                if n < 1:
                    raise ExecutorError(f"--cluster {address}: at least one worker, got {n}")
                import logging

                self._cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                             dashboard_address=":0",
                                             silence_logs=logging.ERROR)
                self._client = Client(self._cluster, timeout=CONNECT_TIMEOUT_S)
            else:
                self._client = Client(address, timeout=CONNECT_TIMEOUT_S)
        except ExecutorError:
            raise
        except (OSError, TimeoutError, ValueError) as e:
            self.close()
            why = " ".join(str(e).split()) or type(e).__name__
            raise ExecutorError(f"--cluster {address}: cannot reach the Dask scheduler: "
                                f"{why}") from None
        info = self._client.scheduler_info()
        self.workers = max(1, sum(int(w.get("nthreads", 1))
                                  for w in info.get("workers", {}).values()))
        self.description = (f"a local Dask cluster of {self.workers} workers" if m else
                            f"the Dask cluster at {address} ({self.workers} worker threads)")

    def map_unordered(self, fn: Callable[[T], R], items: Sequence[T]) -> Iterator[tuple[int, R]]:
        from distributed import as_completed

        if not items:
            return
        futures = self._client.map(fn, list(items), pure=False)
        index = {f.key: i for i, f in enumerate(futures)}
        try:
            for f in as_completed(futures):
                yield index[f.key], f.result()
        finally:
            for f in futures:
                f.cancel()

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def make_executor(cluster: str | None, workers: int | None) -> Executor:
    """``--cluster`` (``tcp://HOST:PORT`` or ``local:N``; Dask) or else ``--workers`` local
    processes (default: the CPUs this process may use)."""
    if cluster is None:
        if workers is None:
            workers = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else \
                (os.cpu_count() or 1)
        return LocalExecutor(workers)
    if workers is not None:
        raise ExecutorError(f"--workers does not apply with --cluster {cluster} (the cluster's "
                            f"workers run the trials)")
    if not re.fullmatch(r"(tcp|tls)://[^\s/:]+:\d+|local:\d+", cluster):
        raise ExecutorError(f"--cluster {cluster!r}: expected tcp://HOST:PORT (a running Dask "
                            f"scheduler) or local:N (a local Dask cluster of N workers)")
    return DaskExecutor(cluster)
