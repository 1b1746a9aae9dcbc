"""The memory port: how DMA transfers share it, burst by burst.

One implementation serves two readers: an instruction's ``duration`` (its transfer alone on an
idle port, ``alone``) and the simulator (every unit's transfers together, ``Port``), so a DMA
that meets no other traffic takes exactly the cycles its definition states, and the cost
model and the simulator agree on it by construction.

A port has a **read channel** and a **write channel** (AXI's R and W channels are independent:
a STORE streams while a LOAD's data arrives). Each channel moves one beat of ``bus_bytes`` per
cycle. A transfer is a sequence of bursts (``Transfer``), each a number of beats:

* a burst is *issued* (its address handshake) at most one per cycle per channel, when fewer
  than ``in_flight`` bursts of the channel are outstanding;
* a read burst's data starts ``latency`` cycles after its issue, or when the channel is free,
  whichever is later, and occupies the channel for its beats; it is outstanding until its last
  beat;
* a write burst's data starts ``command`` cycles after its issue (the write-address handshake)
  or when the channel is free, occupies the channel for its beats, and is outstanding until
  its write response, ``latency`` cycles after its last beat;
* a write burst's slot frees ``ack`` cycles after its response (the cycle a master spends
  taking the response before its next command: Chisel's ``sWriteAck``);
* a transfer may be **grouped** (``Transfer.groups``: bursts per row) so that its rows run one
  after another: the first burst of a row issues ``gap`` cycles after the previous row
  completed (its last beat; a write row: its last response), as VTA's HLS design does with one
  ``memcpy`` per iteration of its row loop; and it may have a ``lead``: cycles after its
  submission before its first burst may issue (the unit's work before the transfer);
* the transfers active on a channel take turns burst by burst, so no transfer holds the port
  through its latency: among the transfers whose next burst can issue earliest, the channel
  picks round robin in arrival order (``Channel.priority`` false: the SmartConnect before
  VTA's HLS masters) or by each transfer's ``priority`` (lower first: the fixed-priority
  arbiter of VTA's Chisel VME, shell/VME.scala:242);
* a read transfer completes with its last beat, a write transfer with its last response.

The channel is the resource the bound counts (``bus_bytes`` per cycle); the in-flight limit is
what makes a transfer of few bursts latency-bound: with ``in_flight`` bursts outstanding the
next waits for the oldest to finish, so every batch of bursts costs a latency and its beats.
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


@dataclass(slots=True, eq=False)
class _Job:
    """A transfer on its channel: how far it has issued. Compared by identity (``_run``
    removes a finished one from its list: a field-by-field ``__eq__`` per comparison)."""

    key: int
    transfer: Transfer
    arrival: int
    next: int = 0  # index of the next burst to issue
    done: int = -1  # completion time once its last burst is issued (its last beat/response)
    #: the earliest cycle its next burst may issue (its lead; a new row: the gap after the
    #: previous row's completion); -1: the arrival plus the lead
    ready: int = -1
    #: its number of bursts, and the indices of the bursts that begin a row after the first
    #: (``_row_starts``): read on every issue, so kept here rather than derived each time
    n: int = 0
    starts: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        if self.ready < 0:
            self.ready = self.arrival + self.transfer.lead
        if not self.n:
            self.n = len(self.transfer.bursts)
            self.starts = _row_starts(self.transfer.groups)

    def copy(self) -> _Job:
        """A copy to plan on (every trial plan copies the channel's jobs), made field by
        field, as ``__init__`` and ``__post_init__`` would leave it (``n`` and ``starts`` are
        already derived), without their two calls."""
        job = _new_job(_Job)
        job.key, job.transfer, job.arrival, job.next, job.done = \
            self.key, self.transfer, self.arrival, self.next, self.done
        job.ready, job.n, job.starts = self.ready, self.n, self.starts
        return job


_new_job = object.__new__


#: ``_row_starts(())``: an ungrouped transfer has no row after the first
_NO_STARTS: frozenset[int] = frozenset()


def _job(key: int, transfer: Transfer, arrival: int) -> _Job:
    """``_Job(key, transfer, arrival)``, without its two Python calls (``__init__`` and
    ``__post_init__``): a port makes one per transfer that meets another."""
    job = _new_job(_Job)
    job.key, job.transfer, job.arrival, job.next, job.done = key, transfer, arrival, 0, -1
    job.ready, job.n = arrival + transfer.lead, len(transfer.bursts)
    job.starts = _row_starts(transfer.groups) if transfer.groups else _NO_STARTS
    return job


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


#: a transfer alone on the channel it arrived at idle (``Port._lone``): its key, the transfer,
#: its arrival, its completion (``alone`` after the arrival), its solo plan's channel state
#: and the cycle the channel is idle from after it (``Port._alone_of``, shifted by the arrival)
_Lone = tuple[int, Transfer, int, int, _State, int]

#: ``Port._alone_of``: a transfer's completion alone on an idle channel from cycle 0 (its
#: ``alone``), the channel's state once it has issued every burst (``_alone_plan``) and the
#: first cycle that channel is idle from (``_idle_from``)
_Solo = tuple[int, _State, int]


def _run(ch: Channel, st: _State, jobs: list[_Job], until: int | None,
         first_done: bool = False) -> int | None:
    """Issue bursts of ``jobs`` (one burst per turn: among the jobs whose next burst can issue
    earliest, round robin by arrival order or, on a priority channel, the lowest
    ``priority``) on ``st`` until every burst is issued or the next issue would be at or after
    ``until``; with ``first_done``, also stop once some job has issued its last burst and no
    later issue can complete before it (what comes next no longer changes the first
    completion). Returns, with ``first_done``, that first completion (None while no job has
    issued its last burst; without ``first_done``, None)."""
    # the earliest completion among the jobs that have issued every burst (``first_done``):
    # a finished job's ``done`` no longer changes, so this only falls as jobs finish
    done_by: int | None = None
    live = []
    for j in jobs:  # (one loop for both: a comprehension and min() are a frame each)
        if j.next < j.n:
            live.append(j)
        elif first_done and (done_by is None or j.done < done_by):
            done_by = j.done
    in_flight, priority = ch.in_flight, ch.priority
    # the channel's state in locals (written back before ``_run_one`` or returning)
    delay = ch.command if ch.write else ch.latency
    tail = ch.latency + ch.ack if ch.write else 0
    slots, free, last_issue, last_key = st.slots, st.free, st.last_issue, st.last_key
    while len(live) > 1:
        if len(live) == 2 and not priority:
            # two transfers taking turns (the usual contention): the same rule, without the
            # loops over ``live`` (``_run_pair``)
            st.slots, st.free, st.last_issue, st.last_key = slots, free, last_issue, last_key
            stopped, done_by = _run_pair(ch, st, live[0], live[1], until, done_by, first_done)
            slots, free, last_issue, last_key = st.slots, st.free, st.last_issue, st.last_key
            if stopped:
                break
            live = [j for j in live if j.next < j.n]
            continue
        # the earliest issue: a burst issues after the previous issue, not before its job is
        # ready (its lead, or its previous row's completion and gap), and when fewer than
        # ``in_flight`` bursts are outstanding: ``slots`` ascends (each burst's data ends
        # after the previous one's), so the bursts outstanding at ``t`` are a suffix and the
        # one whose release frees a slot is the ``in_flight``-th from the end. That bound is
        # shared by all jobs, so the earliest issue is the later of it and the least
        # ``ready``, and the jobs that can issue then are those ready by then
        base = last_issue + 1
        k = len(slots) - in_flight
        if k >= 0 and slots[k] > base:
            base = slots[k]
        t = live[0].ready
        for j in live:
            if j.ready < t:
                t = j.ready
        if t < base:
            t = base
        if (until is not None and t >= until) or (done_by is not None and done_by <= t):
            break
        if priority:
            job = min((j for j in live if j.ready <= t),
                      key=lambda j: (j.transfer.priority, j.key))
        else:  # round robin: the first ready after the one served last, else the first ready
            chosen: _Job | None = None
            first: _Job | None = None
            for j in live:
                if j.ready <= t:
                    if first is None:
                        first = j
                    if j.key > last_key:
                        chosen = j
                        break
            if chosen is None:
                chosen = first
            assert chosen is not None
            job = chosen
        # issue its next burst at ``t``: its data starts ``latency`` after (a write:
        # ``command``) or when the channel is free; a write's slot frees ``latency + ack``
        # after its last beat (its response), a read's at its last beat
        start = t + delay
        if free > start:
            start = free
        free = start + job.transfer.bursts[job.next]
        release = free + tail
        if slots and slots[0] <= t:  # ascending: keep the outstanding suffix
            slots = slots[bisect_right(slots, t):]
        slots.append(release)
        last_issue, last_key = t, job.key
        job.next += 1
        if release > job.done:
            job.done = release
        if job.next in job.starts:
            job.ready = job.done + job.transfer.gap  # the next row waits for this one
        if job.next >= job.n:
            live.remove(job)
            if first_done and (done_by is None or job.done < done_by):
                done_by = job.done
    st.slots, st.free, st.last_issue, st.last_key = slots, free, last_issue, last_key
    if len(live) == 1:
        # one job left issuing: nothing else takes a turn, so its bursts go one after
        # another (the jobs done already are done: their earliest completion is fixed)
        last = live[0]
        _run_one(ch, st, last, until, done_by)
        if first_done and last.next >= last.n and (done_by is None or last.done < done_by):
            done_by = last.done
    return done_by


def _run_pair(ch: Channel, st: _State, a: _Job, b: _Job, until: int | None,
              done_by: int | None, first_done: bool) -> tuple[bool, int | None]:
    """``_run``'s loop for exactly two jobs issuing (``a`` arrived first) on a round-robin
    channel, until one has issued its last burst or ``_run`` would stop (the next issue at or
    after ``until``, or at or after ``done_by``: the earliest completion of a finished job,
    with ``first_done``). Returns whether it stopped so, and ``done_by`` (with ``first_done``,
    lowered by the job that finished). The same issue rule and burst timing as ``_run``'s:
    the earliest issue is the later of the channel's bound and the earlier ``ready``; when both
    are ready by then, round robin takes the first with a key after the last one served
    (``b`` only when ``a.key <= last_key < b.key``), else the one that is ready."""
    in_flight = ch.in_flight
    delay = ch.command if ch.write else ch.latency
    tail = ch.latency + ch.ack if ch.write else 0
    slots, free, last_issue, last_key = st.slots, st.free, st.last_issue, st.last_key
    a_key, b_key = a.key, b.key
    a_bursts, b_bursts = a.transfer.bursts, b.transfer.bursts
    stopped = False
    # the loop stops at the first of ``until`` and ``done_by`` (which changes only when a job
    # finishes, and then the loop ends)
    limit = until if done_by is None else done_by if until is None else min(until, done_by)
    while True:
        # (``slots`` keeps the released bursts until the end: ``_trimmed``)
        base = last_issue + 1
        k = len(slots) - in_flight
        if k >= 0 and slots[k] > base:
            base = slots[k]
        ra, rb = a.ready, b.ready
        t = ra if ra <= rb else rb
        if t < base:
            t = base
        if limit is not None and t >= limit:
            stopped = True
            break
        if ra <= t and not (rb <= t and a_key <= last_key < b_key):
            job, beats = a, a_bursts[a.next]
        else:
            job, beats = b, b_bursts[b.next]
        start = t + delay
        if free > start:
            start = free
        free = start + beats
        release = free + tail
        slots.append(release)
        last_issue, last_key = t, job.key
        nxt = job.next = job.next + 1
        if release > job.done:
            job.done = release
        if nxt in job.starts:
            job.ready = job.done + job.transfer.gap  # the next row waits for this one
        if nxt >= job.n:
            if first_done and (done_by is None or job.done < done_by):
                done_by = job.done
            break
    st.slots, st.free, st.last_issue, st.last_key = _trimmed(slots, last_issue), free, \
        last_issue, last_key
    return stopped, done_by


def _settled(jobs: list[_Job], done: int | None, until: int) -> bool:
    """Whether ``_run(..., until, first_done=True)``, which returned ``done``, found the
    first completion: every burst is issued, or some job's completion ``done`` is at or
    before ``until`` (a burst not issued yet issues at or after ``until`` and completes after
    it). Else the first completion is after ``until``: every job issuing still completes
    after its next issue, and a finished job's ``done`` is after ``until``."""
    if done is not None and done <= until:
        return True
    for j in jobs:  # (a loop: ``all`` of a generator is a frame more)
        if j.next < j.n:
            return False
    return True


def _trimmed(slots: list[int], t: int) -> list[int]:
    """The bursts of ``slots`` (ascending release times) still outstanding after an issue at
    ``t``. The issue loops trim only once they stop: a released burst left in the list never
    binds the next issue (it was released by an earlier issue, at or before ``t``, and the
    next issue is after ``t``), and the in-flight bound reads the ``in_flight``-th release from
    the end, which trimming a prefix does not move."""
    if slots and slots[0] <= t:
        return slots[bisect_right(slots, t):]
    return slots


def _run_one(ch: Channel, st: _State, job: _Job, until: int | None,
             done_by: int | None) -> None:
    """``_run`` with ``job`` the only one issuing: its bursts in order until they are all
    issued, the next issue would be at or after ``until``, or (``done_by``: the earliest
    completion of a finished job, with ``first_done``) at or after that completion.
    The same issue rule and burst timing as ``_run``'s, the state in locals."""
    limit = until if done_by is None else done_by if until is None else min(until, done_by)
    bursts, n, starts, gap = job.transfer.bursts, job.n, job.starts, job.transfer.gap
    in_flight = ch.in_flight
    delay = ch.command if ch.write else ch.latency
    tail = ch.latency + ch.ack if ch.write else 0
    slots, free, last_issue = st.slots, st.free, st.last_issue
    nxt, done, ready = job.next, job.done, job.ready
    first = nxt
    while nxt < n:
        t = last_issue + 1
        if ready > t:
            t = ready
        k = len(slots) - in_flight
        if k >= 0 and slots[k] > t:
            t = slots[k]
        if limit is not None and t >= limit:
            break
        start = t + delay
        if free > start:
            start = free
        free = start + bursts[nxt]
        release = free + tail
        slots.append(release)  # (trimmed when it stops: ``_trimmed``)
        last_issue = t
        nxt += 1
        if release > done:
            done = release
        if nxt in starts:
            ready = done + gap  # the next row waits for this one
    if nxt != first:
        st.slots, st.free, st.last_issue, st.last_key = _trimmed(slots, last_issue), free, \
            last_issue, job.key
        job.next, job.done, job.ready = nxt, done, ready


@lru_cache(maxsize=65536)
def _alone_plan(ch: Channel, transfer: Transfer) -> tuple[int, _State]:
    """A transfer alone on an idle channel from cycle 0: its completion and the channel's state
    once every burst is issued (rows one after another: ``_rows_alone``)."""
    groups = transfer.groups
    if len(groups) > 1 and all(groups):
        return _rows_alone(ch, transfer)
    job = _Job(0, transfer, 0)
    st = _State()
    _run(ch, st, [job], None)
    return job.done, st


def _rows_alone(ch: Channel, transfer: Transfer) -> tuple[int, _State]:
    """``_alone_plan`` of a transfer of rows (``groups``, none empty), row by row: a row's
    first burst issues ``gap`` after the previous row completed, when every burst before it
    has been released (a read's with its last beat, a write's with its response: the row's
    completion), the channel's data lines are free and its last issue is past, so the row
    issues exactly as it would alone on an idle channel from that cycle. Its plan (an
    ungrouped transfer of its bursts, ``_alone_plan``) is shifted there; the channel's state
    at the end is the last row's (every earlier burst was released before it began). A
    tiled DMA's rows repeat a few burst patterns, so this plans a few rows instead of every
    burst."""
    start = transfer.lead
    bursts, write = transfer.bursts, transfer.write
    rows: dict[tuple[int, ...], tuple[int, _State]] = {}
    first = 0
    end, last, at = 0, _State(), 0
    for n in transfer.groups:
        row = bursts[first: first + n]
        first += n
        plan = rows.get(row)
        if plan is None:
            plan = rows[row] = _alone_plan(ch, Transfer(row, write))
        end, last, at = start + plan[0], plan[1], start
        start = end + transfer.gap
    return end, _State(last.last_issue + at, last.free + at, [r + at for r in last.slots],
                       last.last_key)


def _idle_from(st: _State, at: int = 0) -> int:
    """The first cycle from which a channel in state ``st`` (its times shifted by ``at``) is
    idle: its last issue is past, its data lines are free and every burst is released
    (``slots`` ascends: its last is the latest)."""
    t = st.free if st.free > st.last_issue else st.last_issue + 1
    slots = st.slots
    if slots and slots[-1] > t:
        t = slots[-1]
    return t + at


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
        #: per channel, its committed state (``_state``: with ``_lazy`` applied)
        self.state = {False: _State(), True: _State()}
        #: per channel, a state not made yet: a transfer's solo plan state (``_alone_plan``),
        #: its times to shift by the transfer's arrival, and the key served last; set where a
        #: lone transfer retires (``finish``, ``run_alone``) instead of shifting every time,
        #: since the next transfer on the idle channel usually reads only ``_idle``
        self._lazy: dict[bool, tuple[_State, int, int] | None] = {False: None, True: None}
        #: per channel without jobs, the first cycle it is idle from (``_idle_from``)
        self._idle = {False: 0, True: 0}
        self.jobs: dict[bool, list[_Job]] = {False: [], True: []}
        #: per channel, the transfer that arrived at it idle and is alone on it, while no
        #: other has arrived (``_Lone``); then ``jobs`` is empty. Most transfers stay alone
        #: and retire so: their ``_Job`` is made only when a second one arrives (``submit``)
        self._lone: dict[bool, _Lone | None] = {False: None, True: None}
        self._keys = 0
        #: per channel, the next completion under the current plan (a new transfer or a
        #: retired one on that channel plans again)
        self._next: dict[bool, int | None] = {False: None, True: None}
        #: per channel, the plan that found ``_next`` (the state and jobs once it has issued
        #: every burst before that completion), adopted by ``finish`` at that cycle instead of
        #: issuing the same bursts again
        self._trial: dict[bool, tuple[_State, list[_Job]] | None] = {False: None, True: None}
        #: ``_alone_of`` per transfer object (a program's DMAs share theirs), kept by
        #: identity so the transfer is hashed once per run, not on every submission
        self._alone: dict[int, tuple[Transfer, _Solo]] = {}
        #: per channel whose ``_trial`` is partial (``next_completion`` with a horizon): its
        #: next completion is after this cycle
        self._after: dict[bool, int] = {False: -1, True: -1}
        #: per channel, the cycle its state was last committed up to (``_commit``; -1 once
        #: it is replaced otherwise): a commit to the same cycle again issues nothing (the
        #: next issue was at or after it then, and a transfer submitted since is not ready
        #: before its arrival), so ``finish`` after a ``submit`` at its cycle skips it
        self._upto: dict[bool, int] = {False: -1, True: -1}
        #: whether some transfer is active (submitted, not yet retired): kept by ``submit``
        #: and ``finish`` (the server asks after every turn)
        self.active = False
        #: the next completion while every active transfer is alone on its channel (no
        #: jobs: ``_lone``), the earliest of theirs, which no plan changes (what
        #: ``next_completion`` returns then, with or without a horizon); None otherwise (a
        #: channel has jobs, or nothing is active). Kept by ``submit`` and ``finish``: the
        #: server reads it before planning (most transfers run alone)
        self.lone_next: int | None = None

    def _alone_of(self, ch: Channel, transfer: Transfer) -> _Solo:
        """``transfer`` alone on an idle channel ``ch`` (its channel) from cycle 0: its
        completion (``alone``: a transfer without bursts completes after its lead), the
        channel's state after it (``_alone_plan``) and the cycle it is idle from."""
        got = self._alone.get(id(transfer))
        if got is None or got[0] is not transfer:
            done, st = _alone_plan(ch, transfer)
            solo = (done if transfer.bursts else transfer.lead, st, _idle_from(st))
            got = self._alone[id(transfer)] = (transfer, solo)
        return got[1]

    def submit(self, transfer: Transfer, now: int) -> int:
        """Add ``transfer`` at cycle ``now``; returns its key."""
        w = transfer.write
        self._keys += 1
        self.active = True
        self._next[w] = self._trial[w] = None
        jobs = self.jobs[w]
        lone = self._lone[w]
        if not jobs and lone is None and self._idle[w] <= now:
            # an idle channel: as its definition says (``alone``); no job unless one joins
            end, st, idle = self._alone_of(self.channels[w], transfer)
            solo = now + end
            self._lone[w] = (self._keys, transfer, now, solo, st, idle + now)
            if self.jobs[not w]:
                self.lone_next = None
            else:
                other = self._lone[not w]
                self.lone_next = solo if other is None or solo < other[3] else other[3]
            return self._keys
        self.lone_next = None
        if lone is not None:
            jobs.append(_job(lone[0], lone[1], lone[2]))
            self._lone[w] = None
        if jobs:
            self._commit(w, now)
        jobs.append(_job(self._keys, transfer, now))
        return self._keys

    def solo_completion(self, transfer: Transfer, now: int) -> int | None:
        """When ``transfer``, submitted at ``now``, completes if nothing else is submitted
        meanwhile and the port is idle (no transfer active, its channel's bursts all over by
        ``now``): as its definition says (``alone``); None when the port is not idle."""
        if self.active or self._idle[transfer.write] > now:
            return None
        return now + self._alone_of(self.channels[transfer.write], transfer)[0]

    def run_alone(self, transfer: Transfer, now: int) -> int | None:
        """Take ``transfer`` at ``now`` on an idle port and retire it at once: its completion
        (``solo_completion``); None, taking nothing, when the port is not idle. The same
        state as ``submit``, ``next_completion`` and ``finish`` at that completion leave (its
        channel's issues as its solo plan, shifted to ``now``; the key it would have had
        used), for a caller that knows nothing else is submitted before it completes (the
        machine's idle-port DMA)."""
        w = transfer.write
        if self.active or self._idle[w] > now:
            return None
        self._keys += 1
        done, st, idle = self._alone_of(self.channels[w], transfer)
        self._lazy[w] = (st, now, self._keys)
        self._idle[w] = idle + now
        self._upto[w] = -1
        self._next[w] = self._trial[w] = None
        return now + done

    def _state(self, w: bool) -> _State:
        """Channel ``w``'s committed state, made from ``_lazy`` first if it is pending."""
        lazy = self._lazy[w]
        if lazy is not None:
            st, t0, key = lazy
            self.state[w] = _State(st.last_issue + t0, st.free + t0, [r + t0 for r in st.slots],
                                   key)
            self._lazy[w] = None
        return self.state[w]

    def _commit(self, w: bool, now: int) -> None:
        """Issue the bursts of channel ``w`` before ``now`` (nothing when none is left, or
        when they were issued up to ``now`` already: ``_upto``)."""
        if self._upto[w] == now:
            return
        self._upto[w] = now
        jobs = self.jobs[w]
        for j in jobs:
            if j.next < j.n:
                _run(self.channels[w], self._state(w), jobs, now)
                return

    def next_completion(self, horizon: int | None = None) -> int | None:
        """The cycle at which the next active transfer completes, planning the bursts not yet
        issued only as far as that (a burst issued later completes later).

        With ``horizon``, planning only the bursts that issue by ``horizon``: None when no
        transfer completes by then (the plan so far is kept: a later call goes on from it, so
        calls with growing horizons issue each burst once, the bursts one call without a
        horizon would). A port whose transfers keep arriving discards most of a plan made to
        the first completion (a new transfer re-plans); one made by steps discards less."""
        best = None
        open_ = False  # some channel's completion is known only to be after ``horizon``
        for w in (False, True):
            jobs = self.jobs[w]
            if not jobs:
                lone = self._lone[w]
                if lone is not None and (best is None or lone[3] < best):
                    best = lone[3]
                continue
            done = self._next[w]
            if done is None:
                trial = self._trial[w]
                if trial is None:
                    trial = self._trial[w] = (self._state(w).copy(),
                                              [j.copy() for j in jobs])
                state, planned = trial
                until = None if horizon is None else horizon + 1
                done = _run(self.channels[w], state, planned, until, first_done=True)
                if until is not None and not _settled(planned, done, until):
                    self._after[w] = until - 1
                    open_ = True
                    continue
                assert done is not None  # run to the end, some job issued its last burst
                # every burst it issued is before ``done``: committing up to ``done``
                # issues exactly these (``finish``)
                self._next[w] = done
            best = done if best is None else min(best, done)
        if open_ and (best is None or horizon is None or best > horizon):
            return None
        assert best is not None, "no transfer is active"
        return best

    def predictions(self) -> dict[int, int]:
        """Completion cycle of every active transfer under the current plan (the whole plan;
        for tests and reports)."""
        out: dict[int, int] = {}
        for w in (False, True):
            lone = self._lone[w]
            if lone is not None:
                out[lone[0]] = lone[3]
            trial = [j.copy() for j in self.jobs[w]]
            _run(self.channels[w], self._state(w).copy(), trial, None)
            out.update((j.key, j.done) for j in trial)
        return out

    def finish(self, now: int) -> list[int]:
        """Commit the issues before ``now`` and retire the transfers complete by ``now``;
        returns their keys."""
        lone_next = self.lone_next
        if lone_next is not None and lone_next > now:
            return []  # only transfers alone on their channels, none complete yet
        done: list[int] = []
        for w in (False, True):
            jobs = self.jobs[w]
            if not jobs:
                lone = self._lone[w]
                if lone is not None and lone[3] <= now:
                    # it ran alone from an idle channel: its plan, shifted, is the channel's
                    # state (made when read: ``_state``), and it is complete
                    key, _, t0, _, st, idle = lone
                    self._lazy[w] = (st, t0, key)
                    self._idle[w] = idle
                    self._upto[w] = -1
                    done.append(key)
                    self._lone[w] = None
                continue
            nxt = self._next[w]
            if nxt is not None:
                if nxt > now:
                    continue  # nothing on this channel completes yet (its issues commit later)
            elif self._trial[w] is not None and self._after[w] >= now:
                continue  # likewise: a partial plan says it completes after ``_after``
            trial = self._trial[w]
            if trial is not None and nxt == now:
                self.state[w], jobs = trial
                self._upto[w] = -1
            else:
                self._commit(w, now)
            self._trial[w] = None
            keep = []
            for j in jobs:
                if j.next == j.n and j.done <= now:
                    done.append(j.key)
                else:
                    keep.append(j)
            if len(keep) != len(jobs):
                self._next[w] = None
                if not keep:
                    self._idle[w] = _idle_from(self._state(w))
            self.jobs[w] = keep
        if done:
            self.active = bool(self.jobs[False] or self.jobs[True] or self._lone[False]
                               or self._lone[True])
            self.lone_next = self._lone_only()
        return done

    def _lone_only(self) -> int | None:
        """``lone_next`` of the port as it stands: the earliest completion of the transfers
        alone on their channels when no channel has jobs, else None."""
        if self.jobs[False] or self.jobs[True]:
            return None
        a, b = self._lone[False], self._lone[True]
        if a is None:
            return None if b is None else b[3]
        return a[3] if b is None or a[3] < b[3] else b[3]
