"""A transfer alone on the channel it arrived at idle has no ``_Job`` (``Port._lone``): the
port makes its job only when a second transfer arrives on that channel, and plans, predicts
and retires both as before (the previous port, ``_memport_before``). Most of a program's
DMAs meet no other traffic, so most submissions skip the job and its retirement."""

from __future__ import annotations

from typing import Any

import _memport_before as before
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.isa import memport as after

_READ = {"latency": 12, "in_flight": 2}
_WRITE = {"latency": 9, "in_flight": 3, "command": 2, "write": True, "ack": 1}


def test_a_lone_transfer_has_no_job() -> None:
    """Submitted on an idle port it is predicted and retired at its ``alone`` time, and the
    port holds no job for it meanwhile."""
    port = after.Port(after.Channel(**_READ), after.Channel(**_WRITE))
    transfer = after.Transfer((4, 4, 4), lead=2)
    key = port.submit(transfer, 10)
    end = 10 + after.alone(port.channels[False], transfer)
    assert port.jobs == {False: [], True: []} and port.active
    assert port.next_completion(12) == end and port.predictions() == {key: end}
    assert port.finish(end - 1) == [] and port.active
    assert port.finish(end) == [key] and not port.active


@settings(max_examples=300, deadline=None)
@given(first=st.lists(st.integers(1, 12), min_size=1, max_size=5),
       then=st.lists(st.integers(1, 12), min_size=1, max_size=5),
       lead=st.integers(0, 4), delay=st.integers(0, 40), write=st.booleans(),
       other=st.booleans())
def test_a_second_transfer_joins_the_lone_one(first: list[int], then: list[int], lead: int,
                                              delay: int, write: bool, other: bool) -> None:
    """A second transfer ``delay`` after the lone one (on its channel, or with ``other`` on
    the other one): the predictions after it and every completion are the previous
    port's; on the same channel, before the lone one completes, both have jobs."""
    logs = []
    for mod in (before, after):
        port: Any = mod.Port(mod.Channel(**_READ), mod.Channel(**_WRITE))
        a = mod.Transfer(tuple(first), write, lead=lead)
        b = mod.Transfer(tuple(then), write != other)
        log: list[Any] = [port.submit(a, 0), port.next_completion()]
        if delay < log[-1]:
            log.append(port.finish(delay))
        log += [port.submit(b, delay), sorted(port.predictions().items())]
        if mod is after and not other and delay < log[1]:
            assert len(port.jobs[write]) == 2
        while port.active:
            nxt = port.next_completion()
            log.append((nxt, port.finish(nxt)))
        logs.append(log)
    assert logs[0] == logs[1]
