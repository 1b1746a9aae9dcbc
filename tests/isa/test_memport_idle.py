"""The memory port's idle test and pending state (``memport.Port._idle``, ``_lazy``): a lone
transfer that retires leaves its channel's state as its solo plan to shift, made only when a
later plan reads it; whether the channel is idle at a cycle is answered from the first cycle
it is idle (``_idle_from``) instead, which must agree with the state's own rule (last issue
past, data lines free, every burst released) at every cycle."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vta.isa.memport import Channel, Port, Transfer, _idle_from, _State

_BURSTS = st.lists(st.integers(1, 9), min_size=1, max_size=6).map(tuple)


def _idle_at(s: _State, now: int) -> bool:
    """The channel rule ``_idle_from`` stands for."""
    return s.free <= now and s.last_issue < now and (not s.slots or max(s.slots) <= now)


@settings(max_examples=200, deadline=None)
@given(latency=st.integers(0, 40), in_flight=st.integers(1, 5), write=st.booleans(),
       ack=st.integers(0, 3), bursts=_BURSTS, lead=st.integers(0, 5), start=st.integers(0, 50),
       served=st.booleans())
def test_idle_from_is_the_first_idle_cycle(latency: int, in_flight: int, write: bool, ack: int,
                                           bursts: tuple[int, ...], lead: int, start: int,
                                           served: bool) -> None:
    """After a lone transfer retires (by ``run_alone``, or submitted, planned and finished),
    ``_idle`` is the first cycle at which the made state is idle by the channel rule, and the
    pending state is made once (then none is pending)."""
    channel = Channel(latency, in_flight, command=1 if write else 0, write=write,
                      ack=ack if write else 0)
    port = Port(Channel(latency, in_flight), channel) if write else Port(channel, channel)
    transfer = Transfer(bursts, write=write, lead=lead)
    if served:
        key = port.submit(transfer, start)
        assert port.finish(port.next_completion()) == [key]  # type: ignore[arg-type]
    else:
        port.run_alone(transfer, start)
    assert port._lazy[write] is not None
    state = port._state(write)
    assert port._lazy[write] is None and port.state[write] is state
    first = port._idle[write]
    assert first == _idle_from(state)
    assert _idle_at(state, first) and not _idle_at(state, first - 1)
