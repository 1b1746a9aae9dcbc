"""Copy task mappings shared by the hand-mapped kernels: coalesced row copies, vector widths and
sector-aligned windows."""

from __future__ import annotations

import math

from vta.compiler.ir import expr as E
from vta.errors import GpuLoweringError
from vta.gpu.profile import SECTOR
from vta.gpu.target import WARP_LANES
from vta.gpu.taskmap import TaskMapping, repeat, spatial

__all__ = ["vector_bytes", "sector_windows", "copy_mapping", "window_mapping", "window_offset"]


def vector_bytes(*sizes: int) -> int:
    """The widest access (16, 8, 4, 2 or 1 bytes) dividing every byte size given: vectors that
    start at multiples of those sizes stay aligned."""
    for v in (16, 8, 4, 2):
        if all(s % v == 0 for s in sizes):
            return v
    return 1


def sector_windows(length: int, item: int) -> int:
    """Copy tasks per row for element copies in sector-aligned windows: a row segment of
    ``length`` elements starts anywhere in a sector, so ``length + sector - 1`` elements,
    rounded up to whole warp requests of ``WARP_LANES`` (L) lanes, cover it with every request
    inside whole sectors (lane ``l`` of window ``w`` takes element ``L w + l - start % sector``).
    """
    spe = SECTOR // item
    return -(-(length + spe - 1) // WARP_LANES) * WARP_LANES


def copy_mapping(rows: int, chunks: int, threads: int, what: str) -> TaskMapping:
    """Threads over a ``rows x chunks`` grid of copy tasks: consecutive lanes take consecutive
    chunks of a row (then the next row), each thread repeating down the rows; threads beyond
    the grid idle (``emit`` guards them)."""
    per_row = math.gcd(chunks, threads)  # lanes along a row
    r_per = threads // per_row
    if r_per >= rows:
        return repeat(1, chunks // per_row) * spatial(rows, per_row)
    if rows % r_per:
        raise GpuLoweringError(f"{what}: {rows} rows do not spread over {r_per} thread rows")
    return repeat(rows // r_per, chunks // per_row) * spatial(r_per, per_row)


def window_mapping(nranges: int, max_len: int, ce: int, item: int, threads: int,
                   what: str) -> tuple[TaskMapping, int]:
    """Copy tasks for ``nranges`` contiguous global ranges of at most ``max_len`` elements,
    moved ``ce`` elements (``ce * item`` bytes: 1 element, or a 4/8/16-byte chunk) per lane.
    Each warp request is one *sector-aligned window* of ``WARP_LANES`` (L) lanes: lane ``l``
    of window ``w`` of a range starting at flat element ``start`` takes the elements from
    ``e = ce * (L w + l) - start % (SECTOR / item)`` (see ``window_offset``), so no sector is
    touched by two requests. Returns the mapping over (range, window lane) and the lanes a
    range gets."""
    spe = SECTOR // item
    chunks = -(-(max_len + spe - 1) // ce)  # a window may start up to a sector early
    lanes = -(-chunks // WARP_LANES) * WARP_LANES
    return copy_mapping(nranges, lanes, threads, what), lanes


def window_offset(lane_task: E.Expr, start: E.Expr, ce: int, item: int) -> E.Expr:
    """The first element (within its range) of the window-lane task ``lane_task`` of a range
    starting at flat element ``start`` (see ``window_mapping``); the caller guards
    ``0 <= e < length`` (ranges' starts are multiples of ``ce``)."""
    return lane_task * ce - start % (SECTOR // item)
