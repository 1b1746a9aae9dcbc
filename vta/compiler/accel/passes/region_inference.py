"""Bound inference: check the region of every on-chip buffer each statement touches.

Pre:  a lowered ``PrimFunc`` (docs/ir.md): on-chip buffers (scopes inp/wgt/acc) allocated with
      ``Allocate`` at their attach point and sized by ``lower``'s bound inference
      (vta.compiler.ir.regions, isl); loops start at 0 with constant extents; on-chip indices
      affine in the enclosing loops.
Post: the same body; ``attr(BOUNDS)`` = ((buffer, per-dim (lo, hi) inclusive), ...) for each
      on-chip buffer: the exact box of every access over all its enclosing loops (an isl
      footprint, ``poly.footprint_at``: in closed form for affine indices, else one cached
      isl call per access expression, never per iteration); raises ``RegionError`` naming
      the buffer, dimension and range when an access falls outside the declared shape (so no
      DMA or micro-op can address past it).
"""

from __future__ import annotations

from vta.compiler.accel.passes._common import ONCHIP
from vta.compiler.accel.vta_ir import BOUNDS
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.config import HwConfig
from vta.errors import RegionError

__all__ = ["infer_regions", "RegionError"]


def infer_regions(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    ranges: dict[S.Buffer, list[tuple[int, int]]] = {}
    loops: dict[E.Var, int] = {}

    def access(buf: S.Buffer, idx: tuple[E.Expr, ...]) -> None:
        if buf.scope not in ONCHIP:
            return
        r = ranges.setdefault(buf, [(1 << 60, -(1 << 60))] * buf.ndim)
        used = set().union(*(E.free_vars(e) for e in idx))
        free = used - loops.keys()
        if free:
            raise RegionError(f"{func.name}: index {list(idx)} of on-chip buffer {buf.name} "
                              f"uses {sorted(v.name for v in free)}, bound by no loop")
        try:
            box = poly.footprint_at(idx, {v: n for v, n in loops.items() if v in used})
        except poly.PolyError as e:
            raise RegionError(f"{func.name}: on-chip buffer {buf.name}: {e}") from None
        for d, ((lo, ext), n) in enumerate(zip(box, buf.shape, strict=True)):
            hi = lo + ext - 1
            if lo < 0 or hi >= n:
                raise RegionError(f"{func.name}: {buf.name} dimension {d} accessed over [{lo}, "
                                  f"{hi}], outside its extent {n}")
            r[d] = (min(r[d][0], lo), max(r[d][1], hi))

    def expr(e: E.Expr) -> None:
        for n in E.walk(e):
            if isinstance(n, S.BufferLoad):
                access(n.buffer, n.indices)

    def stmt(s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            for x in s.stmts:
                stmt(x)
        elif isinstance(s, S.For):
            if not isinstance(s.extent, E.IntImm) or not E.is_const(s.min, 0):
                raise RegionError(f"{func.name}: loop {s.var.name} must start at 0 with a "
                                  f"constant extent")
            loops[s.var] = s.extent.value
            stmt(s.body)
            del loops[s.var]
        elif isinstance(s, S.BufferStore):
            access(s.buffer, s.indices)
            expr(s.value)
        elif isinstance(s, (S.AttrStmt, S.LetStmt, S.Allocate)):
            stmt(s.body)
        elif isinstance(s, S.IfThenElse):
            expr(s.cond)
            stmt(s.then_case)
            if s.else_case is not None:
                stmt(s.else_case)

    stmt(func.body)
    table = tuple((b, tuple(r)) for b, r in ranges.items())
    return func.with_attr(BOUNDS, table)
