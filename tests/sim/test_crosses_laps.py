"""``timing._crosses`` compares one row per lap of the boundary (a DMA whose rows wrap past a
burst boundary): the same answer as comparing every row's start."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vta.isa.timing import _crosses


def _every_row(rows: int, row_bytes: int, boundary: int, addr: int, stride: int) -> bool:
    """The definition: some row ``r < rows`` starting at ``(addr + r * stride) % boundary``
    runs past the boundary."""
    return max((addr + r * stride) % boundary for r in range(rows)) > boundary - row_bytes


@st.composite
def _dmas(draw: st.DrawFn) -> tuple[int, int, int, int, int]:
    boundary = draw(st.sampled_from([16, 64, 128, 4096]))
    return (draw(st.integers(1, 80)), draw(st.integers(1, boundary)), boundary,
            draw(st.integers(0, boundary - 1)), draw(st.integers(0, boundary - 1)))


@settings(max_examples=3000, deadline=None)
@given(_dmas())
def test_crosses_is_every_row(dma: tuple[int, int, int, int, int]) -> None:
    assert _crosses(*dma) == _every_row(*dma)


def test_crosses_wrapping_rows() -> None:
    # rows of 32 bytes every 48 bytes from 4000 in a 4096-byte boundary: row 2 starts at 4
    # (after wrapping), row 4 at 100, ... none runs past 4064 until one starts above it
    for rows in range(1, 200):
        for addr in (0, 1000, 4000, 4064, 4065):
            assert _crosses(rows, 32, 4096, addr, 48) == _every_row(rows, 32, 4096, addr, 48)
