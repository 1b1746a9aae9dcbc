"""``Port.lone_next``: while every active transfer is alone on its channel (no jobs), the next
completion without planning, which the machine's port server reads before it plans; and
``Port.run_alone`` refusing a port that is not idle. The same completions, in the same order,
as planning them (``next_completion``) gives."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vta.isa import memport

_READ = {"latency": 12, "in_flight": 2}
_WRITE = {"latency": 9, "in_flight": 3, "command": 2, "write": True, "ack": 1}


def _port() -> memport.Port:
    return memport.Port(memport.Channel(**_READ), memport.Channel(**_WRITE))


def _lone_only(port: memport.Port) -> bool:
    """Whether every active transfer of ``port`` is alone on its channel."""
    return port.active and not port.jobs[False] and not port.jobs[True]


def test_lone_next_follows_the_lone_transfers() -> None:
    """One lone transfer per channel: the earlier completion, then the other's once that one
    retires; a second transfer on a channel (a job) turns it off."""
    port = _port()
    read, write = memport.Transfer((4, 4, 4), lead=2), memport.Transfer((3,), True)
    port.submit(read, 0)
    assert port.lone_next == memport.alone(port.channels[False], read)
    port.submit(write, 1)
    ends = sorted([memport.alone(port.channels[False], read),
                   1 + memport.alone(port.channels[True], write)])
    assert port.lone_next == ends[0] == port.next_completion()
    assert port.finish(ends[0] - 1) == [] and port.lone_next == ends[0]
    assert len(port.finish(ends[0])) == 1 and port.lone_next == ends[1]
    assert len(port.finish(ends[1])) == 1 and port.lone_next is None and not port.active
    port.submit(read, 100)
    port.submit(read, 101)
    assert port.lone_next is None and len(port.jobs[False]) == 2


@settings(max_examples=300, deadline=None)
@given(arrivals=st.lists(st.tuples(st.integers(0, 30), st.booleans(),
                                   st.lists(st.integers(1, 9), min_size=0, max_size=4),
                                   st.integers(0, 5)), min_size=1, max_size=8))
def test_lone_next_is_the_planned_completion(arrivals: list[tuple[int, bool, list[int], int]]
                                             ) -> None:
    """Transfers arriving ``gap`` cycles apart on either channel, the port driven as the
    server drives it: wherever ``lone_next`` is set, every active transfer is alone and it
    is the completion planning finds; wherever it is None, a channel has jobs or nothing is
    active."""
    port = _port()
    now = 0
    for gap, write, bursts, lead in arrivals:
        while port.active:  # retire what completes before the next arrival
            nxt = port.next_completion()
            assert nxt is not None
            if nxt > now + gap:
                break
            port.finish(nxt)
            assert (port.lone_next is not None) == _lone_only(port)
        now += gap
        port.finish(now)
        port.submit(memport.Transfer(tuple(bursts), write, lead=lead), now)
        assert (port.lone_next is not None) == _lone_only(port)
        if port.lone_next is not None:
            assert port.lone_next == port.next_completion(now) == port.next_completion()


def test_run_alone_refuses_a_port_that_is_not_idle() -> None:
    """``run_alone`` on a port with an active transfer, or a channel still busy, takes
    nothing (None; the next key unchanged); on an idle one it is ``solo_completion``."""
    port = _port()
    transfer = memport.Transfer((4, 4), lead=1)
    key = port.submit(transfer, 0)
    assert port.run_alone(transfer, 0) is None
    end = port.next_completion()
    assert end is not None and port.finish(end) == [key]
    if port._idle[False] > end:  # its bursts' slots still held after its completion
        assert port.run_alone(transfer, end) is None
    start = max(end, port._idle[False])
    assert port.solo_completion(transfer, start) == port.run_alone(transfer, start)
    assert port.submit(transfer, 10 * start + 100) == key + 2
