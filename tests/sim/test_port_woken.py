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
from test_sim_speed_equivalence import _CHANNEL, _WRITE, _drive_by_steps, _transfer

from vta.isa import memport as after


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
    assert _drive_by_steps(after, read, write, traffic, [], step, woken=True) == \
        _drive_by_steps(before, read, write, traffic, [], None, woken=True)
