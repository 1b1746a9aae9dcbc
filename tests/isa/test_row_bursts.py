"""A row's bursts are built per piece between burst boundaries, not burst by burst (issue 22:
a first-time DMA timing of a row of micro-ops walked dozens of bursts). Held here: the result
equals the burst-by-burst reading of the rule (each burst as long as the burst size, the row's
end and the next boundary allow), for any address, row length, beat and entry width, and
boundaries that the burst size does not divide."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vta.isa.timing import _row_bursts


def _burst_by_burst(bus_beats: int, boundary: int, addr: int, row_bytes: int,
                    beat_bytes: int, entry_bytes: int | None) -> tuple[int, ...]:
    """The rule read literally: one burst at a time, each cut at the burst size, the row's
    end or the next multiple of ``boundary``."""
    out = []
    left, at = row_bytes, addr
    while left > 0:
        chunk = min(left, bus_beats * beat_bytes, boundary - at % boundary)
        cycles = -(-chunk // beat_bytes)
        if entry_bytes is not None:
            cycles += max(0, -(-chunk // entry_bytes) - 1)
        out.append(cycles)
        left -= chunk
        at += chunk
    return tuple(out)


@settings(max_examples=500, deadline=None)
@given(bus_beats=st.sampled_from([1, 2, 3, 4, 16, 32]),
       boundary=st.sampled_from([48, 64, 96, 100, 128, 256, 4096]),
       addr=st.integers(0, 20_000), row_bytes=st.integers(0, 5_000),
       beat_bytes=st.sampled_from([1, 3, 4, 8, 16]),
       entry_bytes=st.sampled_from([None, 1, 4, 5, 16, 64]))
def test_row_bursts_as_burst_by_burst(bus_beats: int, boundary: int, addr: int,
                                      row_bytes: int, beat_bytes: int,
                                      entry_bytes: int | None) -> None:
    args = (bus_beats, boundary, addr, row_bytes, beat_bytes, entry_bytes)
    assert _row_bursts.__wrapped__(*args) == _burst_by_burst(*args)


def test_a_row_across_boundaries() -> None:
    # 16-beat bursts of 8 bytes (128 bytes), boundary 256, a 600-byte row at byte 200: 56 to
    # the boundary, a whole boundary (2 bursts), then 288 bytes (2 bursts and 4 beats)
    assert _row_bursts.__wrapped__(16, 256, 200, 600, 8, None) == (7, 16, 16, 16, 16, 4)
