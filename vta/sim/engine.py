"""A lean discrete-event engine with exactly simpy's ordering, for the subset the machine uses.

The cycle-level machine (``machine.py``) is written against simpy's API: an ``Environment``
with ``event``/``timeout``/``process``, ``Store`` (bounded FIFO put/get), ``Resource``
(request/release), ``AllOf`` and ``a | b`` (``AnyOf``). simpy spends most of a run on
generality the machine does not use (context managers, interrupts, failure propagation,
condition values, ``BoundClass`` binding per resource, ``active_process`` bookkeeping). This
module re-implements that subset with the same ordering rules, so a run gives the same event
order, hence the same cycles, statistics and values (tests/sim/test_sim_engine.py runs the
goldens' programs and hypothesis-drawn random ones on both and compares everything):

* the event queue is a heap of ``(time, priority, event id, event)``; an event id is taken
  from one counter when the event is scheduled; ``URGENT`` (0) is only a new process's start,
  everything else is ``NORMAL`` (1);
* processing an event runs its callbacks in the order they were added; a process waiting on
  it is one such callback, so a process resumes after the callbacks added before it waited;
* a process that yields an event not yet processed waits for it (even one already triggered);
  one already processed resumes it at once with that event's value;
* ``Store.put``/``get`` and ``Resource.request``/``release`` append to their queue, add the
  opposite trigger as the event's first callback and try only the head of their own queue
  (simpy's ``_do_put``/``_do_get`` return None, so its trigger loops stop after the head);
* a condition counts its events as they are processed (an event processed already counts at
  construction) and succeeds when its rule holds; its value is not built (the machine never
  reads it) and a dead ``_check`` left on a later event does nothing, as in simpy.

A deferred timeout (``Environment.reserve``, ``schedule_as``): a timeout whose cycle is not
known yet may take its event id at once and be pushed later, before its cycle comes, under
that id: it is then processed where it would have been. Meanwhile an entry under the same id
(a checkpoint whose callbacks change nothing another process sees, or that at most push it)
may stand at an earlier cycle: it changes only what the shortcuts below find scheduled, and
they have the same effect either way.

Shortcuts with the same effect (``Environment.skip``, ``Store.take``, ``Store.give``,
``Event.process_now``; the machine's idle-port DMA, ``Environment.quiet_through``): a process
about to wait on an event that would be the very next one processed (nothing else is scheduled
at or before its cycle) may instead do at once what processing it would do (advance the clock,
run the callbacks it would run) and go on without yielding: the run loop would pop that event
next and resume this process right after those callbacks, so every later event keeps its
relative order (only unused event ids are skipped). Likewise code that triggers an event which
would be the next one processed, and does nothing more before the run loop would pop it, may
process it at once (``process_now``). The machine takes them on this engine only;
simpy, the reference, always yields, and the tests compare the two.

What it does not do, because the machine never asks: fail events, interrupt processes,
``until``. An exception in a process propagates at once (simpy re-raises a copy when the
failed process is processed; a failing run is over either way, with the same error).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable
from heapq import heappop, heappush
from itertools import count
from typing import Any

__all__ = ["Environment", "Event", "Store", "Resource", "AllOf", "AnyOf", "URGENT", "NORMAL",
           "MISS"]

#: heap priorities, as simpy's: a process's start before anything else at the same cycle
URGENT, NORMAL = 0, 1


class _Pending:
    """The value of an event not yet triggered."""

    def __repr__(self) -> str:
        return "PENDING"


PENDING: Any = _Pending()


class _Miss:
    """What ``Store.take`` returns when the shortcut does not apply (the caller yields)."""

    def __repr__(self) -> str:
        return "MISS"


MISS: Any = _Miss()

Callback = Callable[["Event"], None]


class Event:
    """An event: pending until triggered (``succeed``), processed when popped from the queue
    (its callbacks run, then ``callbacks`` is None)."""

    __slots__ = ("_value", "callbacks", "env")

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.callbacks: list[Callback] | None = []
        self._value: Any = PENDING

    @property
    def triggered(self) -> bool:
        return self._value is not PENDING

    @property
    def processed(self) -> bool:
        return self.callbacks is None

    @property
    def value(self) -> Any:
        return self._value

    def succeed(self, value: Any = None) -> Event:
        """Trigger now with ``value`` (scheduled NORMAL at the current cycle)."""
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        self._value = value
        env = self.env
        heappush(env._queue, (env.now, NORMAL, next(env._eid), self))
        return self

    def process_now(self, value: Any = None) -> None:
        """Trigger this pending event with ``value`` and process it at once (run its callbacks,
        as the run loop does when it pops an event): for a caller that knows it would be the
        very next event processed (nothing is scheduled at or before the current cycle,
        ``Environment.quiet_through``), so that every later event keeps its relative order."""
        if self._value is not PENDING:
            raise RuntimeError(f"{self!r} has already been triggered")
        self._value = value
        callbacks = self.callbacks
        self.callbacks = None
        for callback in callbacks:  # type: ignore[union-attr]
            callback(self)

    def __or__(self, other: Event) -> Condition:
        return AnyOf(self.env, (self, other))

    def __and__(self, other: Event) -> Condition:
        return AllOf(self.env, (self, other))


#: ``object.__new__``: the engine's hot paths make their events without ``Event.__init__``
#: (a class call runs ``__init__`` as a frame of its own), setting its three fields inline
_alloc = object.__new__


class _Item(Event):
    """A store's put event (the item it carries) or a resource's release (its request)."""

    __slots__ = ("item",)

    def __init__(self, env: Environment, item: Any) -> None:
        Event.__init__(self, env)
        self.item = item


class Process(Event):
    """A generator driven by the events it yields; the process is itself an event that
    triggers (with the generator's return value) when it ends."""

    __slots__ = ("_resume_cb", "_send")

    def __init__(self, env: Environment, generator: Generator[Event, Any, Any]) -> None:
        Event.__init__(self, env)
        #: the generator's ``send``, bound once (a run resumes each process thousands of times)
        self._send = generator.send
        self._resume_cb: Callback = self._resume
        start = Event(env)
        start.callbacks.append(self._resume_cb)  # type: ignore[union-attr]
        start._value = None
        heappush(env._queue, (env.now, URGENT, next(env._eid), start))

    @property
    def is_alive(self) -> bool:
        return self._value is PENDING

    def _resume(self, event: Event) -> None:
        send = self._send
        while True:
            try:
                event = send(event._value)
            except StopIteration as stop:
                self._value = stop.value
                env = self.env
                heappush(env._queue, (env.now, NORMAL, next(env._eid), self))
                return
            callbacks = event.callbacks
            if callbacks is not None:  # not processed yet (triggered or not): wait for it
                callbacks.append(self._resume_cb)
                return


class Condition(Event):
    """Succeeds when ``evaluate(events, processed count)`` holds (``AllOf``/``AnyOf``)."""

    __slots__ = ("_count", "_evaluate", "_events")

    def __init__(self, env: Environment, evaluate: Callable[[tuple[Event, ...], int], bool],
                 events: Iterable[Event]) -> None:
        Event.__init__(self, env)
        self._evaluate = evaluate
        self._events = tuple(events)
        self._count = 0
        if not self._events:
            self.succeed()
            return
        for event in self._events:
            if event.env is not env:
                raise ValueError("It is not allowed to mix events from different environments")
        for event in self._events:
            if event.callbacks is None:
                self._check(event)
            else:
                event.callbacks.append(self._check)

    def _check(self, event: Event) -> None:
        if self._value is not PENDING:
            return
        self._count += 1
        if self._evaluate(self._events, self._count):
            self.succeed()


def _all(events: tuple[Event, ...], n: int) -> bool:
    return len(events) == n


def _any(events: tuple[Event, ...], n: int) -> bool:
    return n > 0 or not events


class AllOf(Condition):
    """Succeeds once every one of ``events`` is processed."""

    __slots__ = ()

    def __init__(self, env: Environment, events: Iterable[Event]) -> None:
        Condition.__init__(self, env, _all, events)


class AnyOf(Condition):
    """Succeeds once one of ``events`` is processed."""

    __slots__ = ()

    def __init__(self, env: Environment, events: Iterable[Event]) -> None:
        Condition.__init__(self, env, _any, events)


class Environment:
    """The clock and the event queue; ``run()`` processes events until none is left."""

    def __init__(self, initial_time: int = 0) -> None:
        #: the current cycle (a plain attribute: the machine reads it on every step)
        self.now = initial_time
        self._queue: list[tuple[int, int, int, Event]] = []
        self._eid = count()

    def event(self) -> Event:
        ev: Event = _alloc(Event)  # ``Event(self)``
        ev.env, ev.callbacks, ev._value = self, [], PENDING
        return ev

    def timeout(self, delay: int, value: Any = None) -> Event:
        """An event triggered ``delay`` cycles from now."""
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        ev: Event = _alloc(Event)  # ``Event(self)`` with ``value``
        ev.env, ev.callbacks, ev._value = self, [], value
        heappush(self._queue, (self.now + delay, NORMAL, next(self._eid), ev))
        return ev

    def process(self, generator: Generator[Event, Any, Any]) -> Process:
        return Process(self, generator)

    def quiet_through(self, t: int) -> bool:
        """Whether no event is scheduled at or before cycle ``t``: until then nothing happens
        but what the running process does."""
        queue = self._queue
        return not queue or queue[0][0] > t

    def skip(self, delay: int) -> bool:
        """``yield timeout(delay)`` without the event, when nothing else is scheduled at or
        before its cycle: advance the clock and return True (the caller goes on); else
        False (the caller yields the timeout)."""
        t = self.now + delay
        queue = self._queue
        if queue and queue[0][0] <= t:
            return False
        if delay < 0:
            raise ValueError(f"Negative delay {delay}")
        self.now = t
        return True

    def schedule(self, event: Event, priority: int = NORMAL, delay: int = 0) -> None:
        heappush(self._queue, (self.now + delay, priority, next(self._eid), event))

    def reserve(self) -> int:
        """An event id taken now for an event whose cycle is not known yet (``schedule_as``):
        the id ``timeout`` would take now."""
        return next(self._eid)

    def schedule_as(self, event: Event, at: int, eid: int) -> None:
        """Schedule ``event`` (NORMAL) at cycle ``at`` (not before now) under ``eid``, an id
        ``reserve`` gave: it is then processed exactly where a timeout to ``at`` made when
        the id was taken would be, provided no other entry holds ``eid`` meanwhile (the
        deferred timeout of the machine's port server, and the checkpoints it plans at)."""
        heappush(self._queue, (at, NORMAL, eid, event))

    def run(self) -> None:
        """Process every event, in (time, priority, id) order, until the queue is empty."""
        queue = self._queue
        while queue:
            self.now, _, _, event = heappop(queue)
            callbacks = event.callbacks
            event.callbacks = None
            for callback in callbacks:  # type: ignore[union-attr]
                callback(event)


class Store:
    """A FIFO of at most ``capacity`` items: ``put(item)`` and ``get()`` events, served in the
    order they were made."""

    def __init__(self, env: Environment, capacity: int = 1 << 62) -> None:
        if capacity <= 0:
            raise ValueError('"capacity" must be > 0.')
        self.env = env
        #: the environment's event queue (``take``/``give`` look at its head)
        self._queue = env._queue
        self.capacity = capacity
        #: the items held, oldest first (a deque: a command queue holds hundreds, and every
        #: get takes the oldest)
        self.items: deque[Any] = deque()
        self.put_queue: list[_Item] = []
        self.get_queue: list[Event] = []
        self._trigger_put_cb: Callback = self._trigger_put
        self._trigger_get_cb: Callback = self._trigger_get

    def put(self, item: Any) -> Event:
        ev = _Item(self.env, item)
        ev.callbacks.append(self._trigger_get_cb)  # type: ignore[union-attr]
        if self.put_queue:  # it queues behind the others (only the head is tried)
            self.put_queue.append(ev)
            self._trigger_put(None)
        elif len(self.items) < self.capacity:  # it is the head and there is room
            self.items.append(item)
            ev.succeed()
        else:
            self.put_queue.append(ev)
        return ev

    def get(self) -> Event:
        ev: Event = _alloc(Event)  # ``env.event()``, inline (its callback added at once)
        ev.env, ev.callbacks, ev._value = self.env, [self._trigger_put_cb], PENDING
        if self.get_queue:  # it queues behind the others (only the head is tried)
            self.get_queue.append(ev)
            self._trigger_get(None)
        elif self.items:  # it is the head and there is an item: ``ev.succeed(item)``, inline
            ev._value = self.items.popleft()
            env = self.env
            heappush(self._queue, (env.now, NORMAL, next(env._eid), ev))
        else:
            self.get_queue.append(ev)
        return ev

    def take(self) -> Any:
        """``yield get()`` without the event, when the get would succeed at once and be the
        next event processed: the item (its callback, a waiting put, runs now: ``_trigger_put``
        inline, there being room now); else ``MISS`` (the caller yields ``get()``)."""
        items = self.items
        if not items or self.get_queue:
            return MISS
        queue = self._queue
        if queue and queue[0][0] <= self.env.now:
            return MISS
        item = items.popleft()
        puts = self.put_queue
        if puts:
            ev = puts.pop(0)
            items.append(ev.item)
            ev.succeed()
        return item

    def give(self, item: Any) -> bool:
        """``yield put(item)`` without the event, when the put would succeed at once and be
        the next event processed: True (its callback, a waiting get, runs now:
        ``_trigger_get`` inline, there being an item now); else False (the caller yields
        ``put(item)``)."""
        items = self.items
        if self.put_queue or len(items) >= self.capacity:
            return False
        queue = self._queue
        if queue and queue[0][0] <= self.env.now:
            return False
        items.append(item)
        gets = self.get_queue
        if gets:  # the waiting get (pending): ``succeed(item)``, inline
            ev = gets.pop(0)
            ev._value = items.popleft()
            env = self.env
            heappush(queue, (env.now, NORMAL, next(env._eid), ev))
        return True

    def _trigger_put(self, _: Event | None) -> None:
        queue = self.put_queue
        if queue and len(self.items) < self.capacity:
            ev = queue.pop(0)
            self.items.append(ev.item)
            ev.succeed()

    def _trigger_get(self, _: Event | None) -> None:
        queue = self.get_queue
        if queue and self.items:
            queue.pop(0).succeed(self.items.popleft())


class Resource:
    """``capacity`` users at a time: ``request()`` events granted in order, ``release(req)``."""

    def __init__(self, env: Environment, capacity: int = 1) -> None:
        if capacity <= 0:
            raise ValueError('"capacity" must be > 0.')
        self.env = env
        self.capacity = capacity
        self.users: list[Event] = []
        self.put_queue: list[Event] = []
        self.get_queue: list[_Item] = []
        self._trigger_put_cb: Callback = self._trigger_put
        self._trigger_get_cb: Callback = self._trigger_get

    @property
    def queue(self) -> list[Event]:
        return self.put_queue

    def request(self) -> Event:
        ev = Event(self.env)
        self.put_queue.append(ev)
        ev.callbacks.append(self._trigger_get_cb)  # type: ignore[union-attr]
        self._trigger_put(None)
        return ev

    def release(self, request: Event) -> Event:
        ev = _Item(self.env, request)
        self.get_queue.append(ev)
        ev.callbacks.append(self._trigger_put_cb)  # type: ignore[union-attr]
        self._trigger_get(None)
        return ev

    def _trigger_put(self, _: Event | None) -> None:
        queue = self.put_queue
        if queue and len(self.users) < self.capacity:
            ev = queue.pop(0)
            self.users.append(ev)
            ev.succeed()

    def _trigger_get(self, _: Event | None) -> None:
        queue = self.get_queue
        if queue:
            ev = queue.pop(0)
            if ev.item in self.users:
                self.users.remove(ev.item)
            ev.succeed()
