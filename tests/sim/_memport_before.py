"""The memory port as it was before the simulator-speed work of issue 22 (vta/isa/memport.py at
main eb3de65), kept verbatim as the oracle for the optimized implementation:
``tests/sim/test_sim_speed_equivalence.py`` drives both with the same random submissions and
requires the same completions at the same cycles. Not used by vta itself.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["Channel", "Transfer", "Port", "alone"]


@dataclass(frozen=True, slots=True)
class Channel:
    """How one channel of the port serves bursts (see the module docstring)."""

    latency: int
    in_flight: int
    #: cycles from a write burst's issue to its first beat (0 for reads: they wait ``latency``)
    command: int = 0
    write: bool = False
    #: cycles after a write response before its slot frees (and a transfer ending with it ends)
    ack: int = 0
    #: choose among ready transfers by their ``priority`` (else round robin in arrival order)
    priority: bool = False


@dataclass(frozen=True, slots=True)
class Transfer:
    """One DMA's bursts, in issue order: the beats of each (a beat is one cycle of the
    channel); optionally grouped into rows that run one after another (``groups``: bursts per
    row, ``gap`` cycles between a row's completion and the next row's first issue), a ``lead``
    before the first burst, and the master's ``priority`` (lower wins under a priority
    arbiter)."""

    bursts: tuple[int, ...]
    write: bool = False
    groups: tuple[int, ...] = ()
    gap: int = 0
    lead: int = 0
    priority: int = 0

    def __post_init__(self) -> None:
        assert not self.groups or sum(self.groups) == len(self.bursts), self

    @property
    def beats(self) -> int:
        return sum(self.bursts)


@dataclass(slots=True)
class _Job:
    key: int
    transfer: Transfer
    arrival: int
    next: int = 0  # index of the next burst to issue
    done: int = -1  # completion time once its last burst is issued (its last beat/response)
    #: its completion if it stays alone on the channel (it arrived at an idle one); else -1
    solo: int = -1
    #: the earliest cycle its next burst may issue (its lead; a new row: the gap after the
    #: previous row's completion); -1: the arrival plus the lead
    ready: int = -1

    def __post_init__(self) -> None:
        if self.ready < 0:
            self.ready = self.arrival + self.transfer.lead

    @property
    def issuing(self) -> bool:
        return self.next < len(self.transfer.bursts)

    def copy(self) -> _Job:
        return _Job(self.key, self.transfer, self.arrival, self.next, self.done, -1, self.ready)


@lru_cache(maxsize=4096)
def _row_starts(groups: tuple[int, ...]) -> frozenset[int]:
    """Indices of the bursts that begin a row after the first."""
    out, k = set(), 0
    for n in groups[:-1]:
        k += n
        out.add(k)
    return frozenset(out)


@dataclass(slots=True)
class _State:
    """A channel's committed state: what has been issued so far."""

    last_issue: int = -(1 << 60)
    free: int = 0  # the first cycle the channel's data lines are free
    #: release times of the bursts still outstanding after ``last_issue``
    slots: list[int] = field(default_factory=list)
    last_key: int = 0  # the job served last (round robin continues after it)

    def copy(self) -> _State:
        return _State(self.last_issue, self.free, list(self.slots), self.last_key)


def _issue_time(ch: Channel, st: _State, job: _Job) -> int:
    """The earliest cycle ``job``'s next burst can issue: after the previous issue, not before
    the job is ready (its lead, or its previous row's completion and gap), and when fewer than
    ``in_flight`` bursts are outstanding."""
    t = max(st.last_issue + 1, job.ready)
    # ``slots`` ascends (each burst's data ends after the previous one's, so releases only
    # grow): the bursts outstanding at ``t`` are a suffix, and the one whose release frees a
    # slot for this burst is the ``in_flight``-th from the end
    k = len(st.slots) - ch.in_flight
    if k >= 0 and st.slots[k] > t:
        t = st.slots[k]
    return t


def _issue(ch: Channel, st: _State, job: _Job, t: int) -> None:
    beats = job.transfer.bursts[job.next]
    start = max(t + (ch.command if ch.write else ch.latency), st.free)
    end = start + beats
    st.free = end
    release = end + ch.latency + ch.ack if ch.write else end
    st.slots = st.slots[bisect_right(st.slots, t):]  # ascending: the outstanding suffix
    st.slots.append(release)
    st.last_issue = t
    st.last_key = job.key
    job.next += 1
    job.done = max(job.done, release)
    if job.next in _row_starts(job.transfer.groups):
        job.ready = job.done + job.transfer.gap  # the next row waits for this one


def _run(ch: Channel, st: _State, jobs: list[_Job], until: int | None,
         first_done: bool = False) -> None:
    """Issue bursts of ``jobs`` (one burst per turn: among the jobs whose next burst can issue
    earliest, round robin by arrival order or, on a priority channel, the lowest
    ``priority``) on ``st`` until every burst is issued or the next issue would be at or after
    ``until``; with ``first_done``, also stop once some job has issued its last burst and no
    later issue can complete before it (what comes next no longer changes the first
    completion)."""
    while True:
        live = [j for j in jobs if j.issuing]
        if not live:
            return
        if len(live) == 1:
            # one job left issuing: nothing else takes a turn, so its bursts go one after
            # another (the jobs done already are done: their earliest completion is fixed)
            _run_one(ch, st, live[0], until,
                     min((j.done for j in jobs if not j.issuing), default=None)
                     if first_done else None)
            return
        times = [_issue_time(ch, st, j) for j in live]
        t = min(times)
        ready = [j for j, tj in zip(live, times, strict=True) if tj == t]
        if ch.priority:
            job = min(ready, key=lambda j: (j.transfer.priority, j.key))
        else:
            job = next((j for j in ready if j.key > st.last_key), ready[0])
        if until is not None and t >= until:
            return
        if first_done and any(not j.issuing and j.done <= t for j in jobs):
            return
        _issue(ch, st, job, t)


def _run_one(ch: Channel, st: _State, job: _Job, until: int | None,
             done_by: int | None) -> None:
    """``_run`` with ``job`` the only one issuing: its bursts in order until they are all
    issued, the next issue would be at or after ``until``, or (``done_by``: the earliest
    completion of a finished job, with ``first_done``) at or after that completion."""
    while job.issuing:
        t = _issue_time(ch, st, job)
        if until is not None and t >= until:
            return
        if done_by is not None and done_by <= t:
            return
        _issue(ch, st, job, t)


@lru_cache(maxsize=65536)
def _alone_plan(ch: Channel, transfer: Transfer) -> tuple[int, _State]:
    """A transfer alone on an idle channel from cycle 0: its completion and the channel's state
    once every burst is issued."""
    job = _Job(0, transfer, 0)
    st = _State()
    _run(ch, st, [job], None)
    return job.done, st


def alone(ch: Channel, transfer: Transfer) -> int:
    """Cycles ``transfer`` takes on an idle channel (its definition's duration reads this)."""
    if not transfer.bursts:
        return transfer.lead
    return _alone_plan(ch, transfer)[0]


class Port:
    """The simulator's port: transfers submitted at the current cycle, completions predicted
    exactly from the committed issues plus the round-robin plan of what remains. Adding a
    transfer re-plans the bursts not yet issued (those issued before it stay)."""

    def __init__(self, read: Channel, write: Channel) -> None:
        self.channels = {False: read, True: write}
        self.state = {False: _State(), True: _State()}
        self.jobs: dict[bool, list[_Job]] = {False: [], True: []}
        self._keys = 0
        #: per channel, the next completion under the current plan (a new transfer or a
        #: retired one on that channel plans again)
        self._next: dict[bool, int | None] = {False: None, True: None}

    def submit(self, transfer: Transfer, now: int) -> int:
        """Add ``transfer`` at cycle ``now``; returns its key."""
        w = transfer.write
        self._commit(w, now)
        self._keys += 1
        job = _Job(self._keys, transfer, now)
        st, ch = self.state[w], self.channels[w]
        if not self.jobs[w] and st.free <= now and st.last_issue < now \
                and all(r <= now for r in st.slots):
            job.solo = now + alone(ch, transfer)  # an idle channel: as its definition says
        else:
            for other in self.jobs[w]:
                other.solo = -1
        self.jobs[w].append(job)
        self._next[w] = None
        return self._keys

    def _commit(self, w: bool, now: int) -> None:
        _run(self.channels[w], self.state[w], self.jobs[w], now)

    def next_completion(self) -> int:
        """The cycle at which the next active transfer completes, planning the bursts not yet
        issued only as far as that (a burst issued later completes later)."""
        best = None
        for w in (False, True):
            jobs = self.jobs[w]
            if not jobs:
                continue
            done = self._next[w]
            if done is None:
                if len(jobs) == 1 and jobs[0].solo >= 0:
                    done = jobs[0].solo
                else:
                    trial = [j.copy() for j in jobs]
                    _run(self.channels[w], self.state[w].copy(), trial, None, first_done=True)
                    done = min(j.done for j in trial if not j.issuing)
                self._next[w] = done
            best = done if best is None else min(best, done)
        assert best is not None, "no transfer is active"
        return best

    def predictions(self) -> dict[int, int]:
        """Completion cycle of every active transfer under the current plan (the whole plan;
        for tests and reports)."""
        out: dict[int, int] = {}
        for w in (False, True):
            trial = [j.copy() for j in self.jobs[w]]
            _run(self.channels[w], self.state[w].copy(), trial, None)
            out.update((j.key, j.done) for j in trial)
        return out

    def finish(self, now: int) -> list[int]:
        """Commit the issues before ``now`` and retire the transfers complete by ``now``;
        returns their keys."""
        done: list[int] = []
        for w in (False, True):
            if not self.jobs[w]:
                continue
            nxt = self._next[w]
            if nxt is not None and nxt > now:
                continue  # nothing on this channel completes yet (its issues commit later)
            lone = self.jobs[w][0]
            if len(self.jobs[w]) == 1 and lone.solo >= 0 and lone.next == 0 \
                    and lone.solo <= now:
                # it ran alone from an idle channel: its plan, shifted, is the channel's state
                done_at, st = _alone_plan(self.channels[w], lone.transfer)
                t0 = lone.arrival
                self.state[w] = _State(st.last_issue + t0, st.free + t0,
                                       [r + t0 for r in st.slots], lone.key)
                lone.next, lone.done = len(lone.transfer.bursts), done_at + t0
                lone.ready = lone.done
            self._commit(w, now)
            keep = []
            for j in self.jobs[w]:
                if j.next == len(j.transfer.bursts) and j.done <= now:
                    done.append(j.key)
                else:
                    keep.append(j)
            if len(keep) != len(self.jobs[w]):
                self._next[w] = None
            self.jobs[w] = keep
        return done

    @property
    def active(self) -> bool:
        return bool(self.jobs[False] or self.jobs[True])
