"""The memory port as the machine's port server drives it when a request wakes it: the
transfer is submitted at its arrival and ``finish`` is asked at that same cycle at once
(``_PortServer._waited``: retire what is done, then plan afresh). ``Port._commit`` skips a
commit to the cycle it last committed to (``Port._upto``), so that ``finish`` after a
``submit`` issues no burst again; every completion and plan must stay the previous
implementation's (tests/sim/_memport_before.py)."""

from __future__ import annotations

from typing import Any

import _memport_before as before
from hypothesis import given, settings
from hypothesis import strategies as st
from test_sim_speed_equivalence import _CHANNEL, _WRITE, _arrivals, _transfer

from vta.isa import memport as after


def _drive_woken(mod: Any, read: dict[str, Any], write: dict[str, Any],
                 traffic: list[tuple[int, dict[str, Any]]], step: int | None) -> list[Any]:
    """Run ``traffic`` through ``mod.Port``: each transfer submitted at its arrival and the
    port finished at that cycle at once (before a completion due at that cycle: a request's
    wake may come before the server's timeout), else the next completion awaited and
    retired (planned by horizons ``step`` apart, as the lean engine's server plans, or
    whole); the log of every answer and of the plan after each arrival."""
    port = mod.Port(mod.Channel(**read), mod.Channel(**write))
    arrivals = _arrivals(mod, traffic)
    log: list[Any] = []
    i, now = 0, 0
    while i < len(arrivals) or port.active:
        arrive = arrivals[i][0] if i < len(arrivals) else None
        nxt = None
        if port.active and step is None:
            nxt = port.next_completion()
        elif port.active:
            horizon = now
            while True:
                horizon += step or 1
                nxt = port.next_completion(horizon)
                if nxt is not None or (arrive is not None and arrive <= horizon):
                    break
        if arrive is not None and (nxt is None or arrive <= nxt):  # the wake first
            key = port.submit(arrivals[i][1], arrive)
            log.append(("woken", arrive, key, port.finish(arrive),
                        sorted(port.predictions().items())))
            i, now = i + 1, arrive
            continue
        assert nxt is not None
        log.append(("done", nxt, port.finish(nxt)))
        now = nxt
    return log


@settings(max_examples=300, deadline=None)
@given(read=_CHANNEL, write=_WRITE, traffic=st.lists(_transfer(), min_size=1, max_size=7),
       step=st.one_of(st.none(), st.integers(1, 80)))
def test_port_finished_at_each_arrival_same_as_before(read: dict[str, Any],
                                                      write: dict[str, Any],
                                                      traffic: list[tuple[int, dict[str, Any]]],
                                                      step: int | None) -> None:
    """A port finished at the cycle of each submit (the commit there skipped: nothing more
    issues before that cycle) gives every completion and plan the previous implementation
    gives."""
    assert _drive_woken(after, read, write, traffic, step) == \
        _drive_woken(before, read, write, traffic, None)
