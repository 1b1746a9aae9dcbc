"""Bound inference: the region of every on-chip buffer each stage touches.

Pre:  a lowered ``PrimFunc`` (docs/ir.md): on-chip buffers (scopes inp/wgt/acc) allocated with
      ``Allocate`` at their attach point and sized by lower's bound inference; loops start at 0
      with constant extents; on-chip indices affine in the loops inside the allocation.
Post: the same body; ``attrs["bounds"]`` = ((buffer, per-dim (lo, hi) inclusive), ...) for each
      on-chip buffer; raises ``BoundsError`` naming the buffer, dimension and range when an
      access falls outside the declared shape (so no DMA or micro-op can address past it).
"""

from __future__ import annotations

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.passes._common import ONCHIP, CompileError, affine, set_attr
from vta.config import HwConfig

__all__ = ["infer_bounds", "BoundsError"]


class BoundsError(CompileError):
    """An on-chip buffer is accessed outside its declared shape."""


def infer_bounds(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    ranges: dict[S.Buffer, list[tuple[int, int]]] = {}
    loops: dict[E.Var, int] = {}

    def access(buf: S.Buffer, idx: tuple[E.Expr, ...]) -> None:
        if buf.scope not in ONCHIP:
            return
        r = ranges.setdefault(buf, [(1 << 60, -(1 << 60))] * buf.ndim)
        for d, e in enumerate(idx):
            coeffs, rest = affine(e, loops)
            if not isinstance(rest, E.IntImm):
                raise BoundsError(f"{func.name}: index {e} of on-chip buffer {buf.name} depends "
                                  f"on loops outside its allocation")
            lo = hi = rest.value
            for v, c in coeffs.items():
                span = c * (loops[v] - 1)
                lo, hi = lo + min(0, span), hi + max(0, span)
            if lo < 0 or hi >= buf.shape[d]:
                raise BoundsError(f"{func.name}: {buf.name} dimension {d} accessed over [{lo}, "
                                  f"{hi}], outside its extent {buf.shape[d]}")
            r[d] = (min(r[d][0], lo), max(r[d][1], hi))

    def expr(e: E.Expr) -> None:
        for n in E.walk(e):
            if isinstance(n, S.BufferLoad):
                access(n.buffer, n.indices)

    def stmt(s: S.Stmt, onchip_depth: int) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.stmts:
                stmt(x, onchip_depth)
        elif isinstance(s, S.For):
            ext = s.extent.value if isinstance(s.extent, E.IntImm) else None
            # only loops inside an on-chip allocation index it; outer loops select the tile
            if onchip_depth and ext is not None:
                loops[s.var] = ext
                stmt(s.body, onchip_depth)
                del loops[s.var]
            else:
                stmt(s.body, onchip_depth)
        elif isinstance(s, S.Allocate):
            stmt(s.body, onchip_depth + (s.buffer.scope in ONCHIP))
        elif isinstance(s, S.BufferStore):
            access(s.buffer, s.indices)
            expr(s.value)
        elif isinstance(s, (S.AttrStmt, S.LetStmt)):
            stmt(s.body, onchip_depth)
        elif isinstance(s, S.IfThenElse):
            stmt(s.then_case, onchip_depth)
            if s.else_case is not None:
                stmt(s.else_case, onchip_depth)

    stmt(func.body, 0)
    table = tuple((b, tuple(r)) for b, r in ranges.items())
    return S.PrimFunc(func.name, func.params, func.body, set_attr(func, "bounds", table))
