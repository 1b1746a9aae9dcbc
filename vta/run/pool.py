"""Work of one run spread over the machine's cores: ``fork_map(fn, items, job, jobs)``.

The workers are processes started by ``fork``, so they inherit ``job`` (whatever the items
refer to: a graph, the hardware, registered intrinsics, a cost oracle; none of it needs to
pickle) and read it with ``current_job()``; only the items and ``fn``'s results travel. The
results come back in the items' order, whichever worker finishes first. With one job or one
item, where ``fork`` is not available, in a daemonic process (a worker of another pool), or
when the pool cannot start, breaks or a task fails there, ``fn`` runs on every item in this
process: the same results, serially (and a task's own error raised from here).
``vta.run.compile_pool`` compiles a graph's kernels this way and ``vta.run.graph`` simulates
them. The workers are this module's own (``_Workers``): each reads items from a pipe and
writes back results, one at a time; this process hands items out and collects results at
each ``submit`` and while waiting for results, with no helper thread (``concurrent.futures``'s
process pool cost a warm ``vta run resnet18`` about 20 ms to import and 20-30 ms of its
helper threads' CPU, its queue feeder and manager contending for the interpreter's lock
with this process's own work). ``ForkedChild`` is one forked process that reports progress
in fixed-size frames over a pipe (``vta.run.graph.Reference.start``: the graph interpreter
in a process of its own, its values written to memory the parent shares).
"""

from __future__ import annotations

import atexit
import os
import pickle
import select
import signal
import struct
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from vta import _dataclass_code

__all__ = ["fork_map", "ForkPool", "ForkedChild", "current_job", "default_jobs",
           "one_blas_thread", "BLAS_THREAD_VARIABLES"]

T = TypeVar("T")
R = TypeVar("R")

#: where Linux counts the runnable tasks (``default_jobs``)
LOADAVG = Path("/proc/loadavg")

#: the job the forked workers inherit (set in the parent just before the pool starts)
_JOB: Any = None

#: whether this process is a worker of a ``ForkPool`` (its own pools run their items in it)
_IN_WORKER = False


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
    ran (0: this process). ``fn`` may be any callable (the workers inherit it, as ``job``).
    ``costs`` (one per item, any unit): the items are handed out most costly first, so that a
    long one does not start last and keep one worker busy alone (the results still come in
    the items' order). ``meanwhile``: run in this process while the workers work (not at all
    when the items run here: it is for work that can wait); its errors are raised from here."""
    order = sorted(range(len(items)), key=lambda i: -costs[i]) if costs is not None \
        else range(len(items))
    with ForkPool(fn, job, jobs, len(items)) as pool:
        for i in order:
            pool.submit(items[i])
        pool.end_input()
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
    (``expect``), no ``fork``, in a daemonic process or a worker, or when the pool cannot
    start, breaks or a task fails, every item runs in this process at ``results()`` (the same
    results; a task's own error raised from there). ``workers``: how many ran (0: this
    process)."""

    def __init__(self, fn: Callable[[T], R], job: Any, jobs: int | None = None,
                 expect: int | None = None) -> None:
        self.fn, self.job = fn, job
        want = jobs if jobs is not None else default_jobs()
        self.want = min(want, expect) if expect is not None else want
        self.items: list[T] = []
        self.workers = 0
        self._pool: _Workers | None = None

    def __enter__(self) -> ForkPool[T, R]:
        global _JOB
        _JOB = self.job
        if self.want > 1 and _can_fork():
            try:
                self._pool = _pool(self.want, self.fn)  # its processes fork at the first item
            except Exception:  # no processes here: the items run in this process
                self._close()
        return self

    @property
    def parallel(self) -> bool:
        """Whether the items go to worker processes (so far)."""
        return self._pool is not None and not self._pool.broken

    def submit(self, item: T) -> None:
        """Hand ``item`` to a worker (or keep it for this process)."""
        self.items.append(item)
        if self._pool is not None:
            self._pool.submit(item)

    def end_input(self) -> None:
        """No more items: the workers end as soon as they have computed their last one
        (``_Workers.end_input``), not when the pool closes."""
        if self._pool is not None:
            self._pool.end_input()

    def results(self) -> list[R]:
        """``fn`` of every item submitted, in that order."""
        return list(self.iter_results())

    def iter_results(self) -> Iterator[R]:
        """``fn`` of every item submitted, in that order, each as soon as it and those before
        it are done (the caller can work on one while the workers compute the next). When the
        pool breaks or a task fails, the items from there on run in this process."""
        n = 0
        if self._pool is not None:
            try:
                for n in range(len(self.items)):
                    r = self._pool.result(n)
                    if r is _FAILED:
                        break
                    yield r
                else:
                    n = len(self.items)
                    self.workers = self._pool.started
            finally:
                self._close()
        for item in self.items[n:]:
            yield self.fn(item)

    def result(self, n: int) -> R:
        """``fn`` of the ``n``-th item submitted (from 0), waiting for it: the results in any
        order, each asked for once, while the workers compute the others
        (``vta.run.graph``'s run in order checks each kernel as it comes). Where the pool
        broke or that item failed, it is computed in this process (a task's own error raised
        from here); the items never asked for are not computed anywhere else."""
        if self._pool is not None:
            r = self._pool.result(n)
            if r is not _FAILED:
                return r  # type: ignore[no-any-return]
        return self.fn(self.items[n])

    def __exit__(self, *exc: object) -> None:
        global _JOB
        self._close()
        _JOB = None

    def _close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool = None


#: a result that did not come (the task failed in its worker, or the worker or a pipe broke)
_FAILED: Any = object()

#: a frame's header on a worker's pipes: the length of the pickle that follows
_LENGTH = struct.Struct("<Q")


class _Workers:
    """``want`` worker processes forked at the first item (``submit``), each running ``fn``
    on one item at a time: the item pickled down its task pipe, ``(ok, result)`` pickled back
    up its result pipe. This process collects results as they come (``_collect``: at each
    ``submit`` without waiting, in ``result`` waiting) and hands the items in waiting out as it
    does: to an idle worker, or as a busy worker's next item when the frame fits in its task
    pipe's buffer (``PIPE_BYTES``, both pipes enlarged to it where the system allows), so that
    a worker starts its next item at once even while this process is busy elsewhere (the
    interpreter's next node, the compile's ``meanwhile``). No write here waits on a worker
    that waits on this process: an idle worker reads, and a busy one's pipe holds at most
    the rest of the frame it is reading besides the one written. ``broken``: a task failed or
    a worker or pipe broke (``result`` then gives ``_FAILED`` from the first result
    missing)."""

    def __init__(self, want: int, fn: Callable[[Any], Any]) -> None:
        self.want, self.fn = want, fn
        #: per worker: its pid, task pipe (written here), result pipe (read here), its task
        #: pipe's buffer in bytes and the items handed to it whose results are still to come
        self.pids: list[int] = []
        self.tasks: list[int] = []
        self.outs: list[int] = []
        self.room: list[int] = []
        self.queued: list[deque[int]] = []
        self.items: list[Any] = []
        self.waiting: deque[tuple[int, bytes]] = deque()
        self.done: dict[int, Any] = {}
        self.broken = False
        #: no more items will come (``end_input``): each worker is told to end (an empty
        #: frame) once it holds its last item; ``told``: per worker, whether it was
        self.ending = False
        self.told: list[bool] = []

    @property
    def started(self) -> int:
        return len(self.pids)

    def submit(self, item: Any) -> None:
        """Keep ``item`` for the next worker free for it (the ``want`` workers forked at the
        first item) and hand out what can be handed out now."""
        self.items.append(item)
        try:
            frame = pickle.dumps(item, pickle.HIGHEST_PROTOCOL)
        except Exception:  # an item that does not pickle: it runs here
            self.broken = True
            return
        self.waiting.append((len(self.items) - 1, frame))
        while not self.broken and len(self.pids) < self.want:
            before = len(self.pids)
            self._fork()
            if len(self.pids) == before:  # (no more processes: those there are do the work)
                break
            # the first item to the worker just forked, which starts on it while this
            # process forks the next (a fork of a process holding a graph, its programs and
            # the interpreter's values takes several milliseconds)
            self._hand_out()
        self._collect(wait=False)

    def result(self, k: int) -> Any:
        """Item ``k``'s result, waiting for it; ``_FAILED`` when it will not come."""
        while k not in self.done and not self.broken:
            self._collect(wait=True)
        return self.done.pop(k, _FAILED)

    def _fork(self) -> None:
        task_r, task_w = os.pipe()
        out_r, out_w = os.pipe()
        try:
            pid = os.fork()
        except OSError:
            for fd in (task_r, task_w, out_r, out_w):
                os.close(fd)
            if not self.pids:
                self.broken = True  # (no worker at all: everything runs here)
            return
        if pid == 0:  # the worker: never returns
            for fd in (task_w, out_r, *self.tasks, *self.outs):
                os.close(fd)  # (the other workers' pipes: their ends stay with the parent)
            _serve(self.fn, task_r, out_w)
        os.close(task_r)
        os.close(out_w)
        self.pids.append(pid)
        self.tasks.append(task_w)
        self.outs.append(out_r)
        self.room.append(_enlarged(task_w))
        _enlarged(out_r)
        self.queued.append(deque())
        self.told.append(False)

    def _hand_out(self, ahead: bool = True) -> None:
        """The items in waiting, in order, each to a worker free for it (``_free_worker``): an
        idle one, else, ``ahead``, one computing a single item whose task pipe's buffer holds
        this frame. No worker holds more than one item beyond the one it computes: the items
        wait here for whichever worker is free first (a kernel's simulation takes 5-100 ms;
        handing out more at once left one worker 0.2 s of work after the other's last)."""
        while self.waiting and not self.broken:
            k, frame = self.waiting[0]
            w = _free_worker([len(q) for q in self.queued], self.room,
                             _LENGTH.size + len(frame), ahead)
            if w is None:
                return
            try:
                _write_frame(self.tasks[w], frame)
            except OSError:  # a worker gone
                self.broken = True
                return
            self.waiting.popleft()
            self.queued[w].append(k)
        if self.ending and not self.waiting:
            self._tell_to_end()

    def end_input(self) -> None:
        """No item will be submitted any more: each worker is told to end as soon as it
        holds its last item, so that it ends when it has computed it, while this process
        takes the results (a forked worker's exit, its memory torn down, took 5-25 ms that
        ``close`` waited for after the last result)."""
        self.ending = True
        self._hand_out()

    def _tell_to_end(self) -> None:
        """The end frame to each worker not told yet that holds at most one item (its task
        pipe then holds at most the rest of that item's frame: a write here waits, if at all,
        only for the worker to read it, never on a worker that waits on this process)."""
        for w, q in enumerate(self.queued):
            if self.told[w] or len(q) > 1:
                continue
            try:
                _write_frame(self.tasks[w], b"")
            except OSError:  # a worker gone: its results, if any are missing, say so
                continue
            self.told[w] = True

    def _collect(self, wait: bool) -> None:
        """Hand out what waits, then read the results ready (waiting for one when ``wait``
        and a worker is busy), then hand out again. While this process waits for results it
        hands an item only to an idle worker (it takes each result as it comes, and gives
        that worker the next item at once): an item queued behind a busy worker's own could
        wait there while another worker is idle (the compile pool's last tasks, one worker
        compiling two while the other had ended); a worker's next item is queued ahead only
        when this process is about to do something else (``submit``, ``end_input``)."""
        self._hand_out(ahead=not wait)
        busy = [w for w, q in enumerate(self.queued) if q]
        if not busy:
            if wait:
                self.broken = True  # (nothing computes what is asked for: never, in order)
            return
        poller = select.poll()  # (not select.select: any file descriptor number)
        for w in busy:
            poller.register(self.outs[w], select.POLLIN)
        ready = {fd for fd, _ in poller.poll(None if wait else 0)}  # (an end too: POLLHUP)
        for w in busy:
            if self.outs[w] not in ready:
                continue
            frame = _read_frame(self.outs[w])
            k = self.queued[w].popleft()
            try:
                ok, value = pickle.loads(frame) if frame else (False, None)
            except Exception:
                ok, value = False, None
            if ok:
                self.done[k] = value
            else:
                self.broken = True
        self._hand_out(ahead=not wait)

    def close(self) -> None:
        """End the workers (an idle one told so, an empty frame; a busy one killed: its
        results are not wanted any more), reaped later (``_reap_later``): not waited for
        here."""
        for w, pid in enumerate(self.pids):
            try:
                if self.queued[w]:
                    os.kill(pid, signal.SIGKILL)
                elif not self.told[w]:
                    _write_frame(self.tasks[w], b"")
            except OSError:  # (gone already)
                pass
            os.close(self.tasks[w])
            os.close(self.outs[w])
        _reap_later(self.pids)
        self.pids, self.tasks, self.outs, self.room, self.queued = [], [], [], [], []
        self.told = []


def _free_worker(queued: Sequence[int], room: Sequence[int], size: int, ahead: bool
                 ) -> int | None:
    """The worker ``_Workers._hand_out`` gives the next item (a frame of ``size`` bytes): the
    first idle one (``queued``: the items each holds), else, when ``ahead``, the first one
    computing a single item whose task pipe holds the frame (``room``: each pipe's bytes);
    None when none is free for it."""
    for w, n in enumerate(queued):
        if n == 0:
            return w
    if ahead:
        for w, n in enumerate(queued):
            if n == 1 and size <= room[w]:
                return w
    return None


#: workers ``_Workers.close`` ended and did not wait for (``_reap_later``)
_ENDED: list[int] = []


def _reap_later(pids: Sequence[int]) -> None:
    """Reap ``pids`` (workers told to end or killed) when they have exited, not now: a forked
    worker's exit tears its memory down for 5-30 ms after its last result, which ``close``
    waited for on the run's critical path (the simulation pool's close at the end of every
    ``vta run``, while the run in order checked its last kernels). Those exited already are
    reaped now; the rest at the next pool's close or at this process's exit (``_reap_ended``,
    an exit handler: their CPU time then counts among this process's children's, as
    before)."""
    _ENDED.extend(pids)
    _reap_ended(wait=False)


def _reap_ended(wait: bool = True) -> None:
    """Reap the workers in ``_ENDED``: those exited (all of them, waiting, when ``wait``)."""
    for pid in list(_ENDED):
        try:
            done = os.waitpid(pid, 0 if wait else os.WNOHANG)[0] != 0
        except ChildProcessError:  # reaped already (or not this process's child: a fork's)
            done = True
        if done:
            _ENDED.remove(pid)


atexit.register(_reap_ended)


#: the buffer ``_Workers`` asks for each pipe (Linux's default ceiling for a user's pipe,
#: ``/proc/sys/fs/pipe-max-size``): a kernel's activations or outputs (up to about 0.8 MB in
#: ResNet-18) then wait in the pipe rather than keep the writer waiting for the reader
PIPE_BYTES = 1 << 20


def _enlarged(fd: int) -> int:
    """The buffer of the pipe ``fd`` is an end of, enlarged to ``PIPE_BYTES`` where the
    system allows (Linux's ``F_SETPIPE_SZ``): its size in bytes (``select.PIPE_BUF``, the
    least any system guarantees, where it cannot be read)."""
    try:
        import fcntl

        try:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:  # above the system's ceiling: the size it has
            pass
        return int(fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ))
    except (ImportError, AttributeError, OSError):
        return select.PIPE_BUF


def _serve(fn: Callable[[Any], Any], tasks: int, out: int) -> None:
    """A worker's life (``_Workers``): ``fn`` of each item read from ``tasks``, written to
    ``out`` as ``(True, result)``, or ``(False, None)`` when it failed (this process's parent
    runs that item again, to raise its own error); an empty frame or the end of ``tasks``
    ends it (``os._exit``: none of the parent's exit handlers run here, so a worker that ends
    as told keeps the code it compiled of vta's generated source itself: ``_keep_code``)."""
    global _IN_WORKER
    _IN_WORKER = True
    _dataclass_code.forked()
    code = 1
    try:
        while True:
            frame = _read_frame(tasks)
            if not frame:  # told to end (an empty frame), or the pipe's end
                code = 0
                break
            try:
                data = pickle.dumps((True, fn(pickle.loads(frame))), pickle.HIGHEST_PROTOCOL)
            except Exception:
                data = pickle.dumps((False, None))
            _write_frame(out, data)
    finally:
        if code == 0:
            _keep_code()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # (a closed stream: nothing to flush)
                pass
        os._exit(code)


def _keep_code() -> None:
    """What the parent's exit handler would do for the code this worker compiled (``vta.
    _dataclass_code.save``: the table of generated source beside vta's bytecode, rewritten
    only when a text was new): the compile workers make most of a cold run's rebuilders,
    copiers and evaluators, so without this every cold run on several cores compiled them
    again. A table that cannot be written is left as it is (``save``'s own rule)."""
    try:
        _dataclass_code.save()
    except Exception:  # a worker's result is already given: nothing here may fail it
        pass


def _write_frame(fd: int, data: bytes) -> None:
    _write_all(fd, _LENGTH.pack(len(data)) + data)


def _read_frame(fd: int) -> bytes | None:
    """The next frame's bytes from ``fd``; None at its end (or a partial frame)."""
    head = _read_exactly(fd, _LENGTH.size)
    if head is None:
        return None
    return _read_exactly(fd, _LENGTH.unpack(head)[0])


def _can_fork() -> bool:
    """Whether worker processes can start by ``fork`` here (they inherit the job): not in a
    ``ForkPool``'s worker nor in a daemonic process (a ``multiprocessing`` pool's or an
    executor's worker, which may have no children; a process that never imported
    ``multiprocessing`` is none of those, and does not import it to ask)."""
    if _IN_WORKER or not hasattr(os, "fork"):
        return False
    mp = sys.modules.get("multiprocessing")
    return mp is None or not mp.current_process().daemon


def _pool(workers: int, fn: Callable[[Any], Any]) -> _Workers:
    """``workers`` processes started by ``fork`` running ``fn``, forked at the first item."""
    return _Workers(workers, fn)


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
