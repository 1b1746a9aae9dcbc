"""Shared-memory layouts without bank conflicts: an XOR swizzle for ``ldmatrix`` operand tiles
and padded pitches chosen with the emulator's bank model.

Swizzle. A tile row of ``R`` 16-byte units is stored with unit ``u`` of row ``r`` at unit
``u ^ f(r)``, ``f(r) = (r // max(1, 8 // R)) % min(R, 8)``. The 8 rows an ``ldmatrix`` phase
reads at one logical unit (and the 8 units a phase of 16-byte ``cp.async`` writes) then land
in 8 different 16-byte bank groups of a 128-byte line: no conflicts, and no padding bytes
(CUTLASS's "crosswise" layouts are the same idea).

Choosing. For the epilogue's staging tiles the access patterns (fragment pairs in, vectors
out) are known exactly, so ``choose_layout`` tries the swizzle, then pitches padded in 16-byte
steps, and keeps the first whose patterns, evaluated with ``vta.gpu.profile.bank_conflicts``
(the same model the emulator counts with), have no conflicts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir.expr import DTYPES
from vta.errors import GpuLoweringError
from vta.gpu.mma import bitxor
from vta.gpu.profile import BANKS, WORD, bank_conflicts

__all__ = ["SwizzledTile", "PaddedTile", "Tile", "Pattern", "conflicts", "choose_layout",
           "storage_shape"]


#: 16-byte units in the line of 32 banks x 4 bytes one conflict-free wavefront serves: 8
LINE_UNITS = BANKS * WORD // 16


@dataclass(frozen=True)
class SwizzledTile:
    """A ``rows x cols`` tile of ``dtype`` with the XOR swizzle of the module docstring."""

    rows: int
    cols: int
    dtype: str

    def __post_init__(self) -> None:
        if (self.cols * self.item) % 16:
            raise GpuLoweringError(f"a swizzled tile row must be whole 16-byte units: "
                                   f"{self.cols} x {self.dtype}")

    @property
    def item(self) -> int:
        return DTYPES[self.dtype] // 8

    @property
    def units(self) -> int:
        """16-byte units per row."""
        return self.cols * self.item // 16

    @property
    def unit_elems(self) -> int:
        return 16 // self.item

    def col(self, r: E.ExprLike, c: E.ExprLike) -> E.Expr:
        """Physical column (in elements) of logical element ``(r, c)``."""
        r, c = E.as_expr(r), E.as_expr(c)
        if self.units == 1:
            return c
        ue = self.unit_elems
        f = (r // max(1, LINE_UNITS // self.units)) % min(self.units, LINE_UNITS)
        unit = bitxor(c // ue, f)
        return unit * ue + c % ue if not _multiple(c, ue) else unit * ue

    def byte_addr(self, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        """Byte offsets of logical elements (numpy; for bank analysis)."""
        if self.units == 1:
            return (r * self.cols + c) * self.item
        ue = self.unit_elems
        f = (r // max(1, LINE_UNITS // self.units)) % min(self.units, LINE_UNITS)
        return (r * self.cols + ((c // ue) ^ f) * ue + c % ue) * self.item


def _multiple(e: E.Expr, n: int) -> bool:
    """Whether ``e`` is visibly a multiple of ``n`` (a constant, or a product by one)."""
    if isinstance(e, E.IntImm):
        return e.value % n == 0
    if isinstance(e, E.Mul):
        return any(isinstance(x, E.IntImm) and x.value % n == 0 for x in (e.a, e.b))
    if isinstance(e, E.Add):
        return _multiple(e.a, n) and _multiple(e.b, n)
    return False


@dataclass(frozen=True)
class PaddedTile:
    """A ``rows x cols`` tile of ``dtype`` whose rows are ``pitch`` elements apart."""

    rows: int
    cols: int
    dtype: str
    pitch: int

    @property
    def item(self) -> int:
        return DTYPES[self.dtype] // 8

    def col(self, r: E.ExprLike, c: E.ExprLike) -> E.Expr:
        return E.as_expr(c)

    def byte_addr(self, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        return (r * self.pitch + c) * self.item


Tile = SwizzledTile | PaddedTile

#: a warp access in logical tile coordinates: (rows (32,), cols (32,), active (32,), bytes
#: per lane)
Pattern = tuple[np.ndarray, np.ndarray, np.ndarray, int]


def conflicts(tile: Tile, pattern: Pattern) -> int:
    """Bank conflicts of one warp access to ``tile`` (the emulator's bank model)."""
    r, c, act, width = pattern
    return bank_conflicts(np.where(act, tile.byte_addr(r, c), -1), width)


def choose_layout(rows: int, cols: int, dtype: str, patterns: Sequence[Pattern],
                  align: int = 16) -> Tile:
    """The first tile layout free of bank conflicts for every pattern: the XOR swizzle (no
    extra bytes) when rows are whole 16-byte units, else rows padded by ``align``-byte steps
    (keeping vector accesses aligned). When no candidate is free of conflicts (narrow tiles
    whose patterns want incompatible pitches), the one with the fewest."""
    item = DTYPES[dtype] // 8
    cands: list[Tile] = []
    if cols * item % 16 == 0:
        cands.append(SwizzledTile(rows, cols, dtype))
    step = max(1, align // item)
    base = -(-cols // step) * step
    cands += [PaddedTile(rows, cols, dtype, base + k * step) for k in range(9)]
    cost = [sum(conflicts(t, p) for p in patterns) for t in cands]
    return cands[cost.index(min(cost))]


def storage_shape(tile: Tile) -> tuple[int, int]:
    """(rows, elements per row) a tile occupies."""
    return (tile.rows, tile.pitch if isinstance(tile, PaddedTile) else tile.cols)
