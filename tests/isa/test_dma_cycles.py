"""``DmaTiming.cycles`` (comparisons instead of ``max``, the simulator asks once per DMA) is
the rule it states: at least one cycle, the later of the port and the overlapped work, then
the work after."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from vta.isa.memport import Channel, Transfer
from vta.isa.timing import DmaTiming


@given(st.integers(0, 300), st.integers(0, 300), st.integers(-5, 300))
def test_cycles_is_the_stated_rule(port: int, overlap: int, after: int) -> None:
    timing = DmaTiming(Transfer((4,)), Channel(32, 4), overlap, after)
    assert timing.cycles(port) == max(1, max(port, overlap) + after)
