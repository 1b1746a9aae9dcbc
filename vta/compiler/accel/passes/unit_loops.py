"""Unit loops: a loop of one iteration has its variable equal to 0 in its body.

Pre:  a lowered ``PrimFunc``. ``lower`` keeps every leaf loop, and bound inference (isl) pins a
      variable that can only be 0 (a tile loop of one iteration), so a buffer's base may be 0
      where the index still names that variable (``o_o * 2 + o_i`` with ``o_o`` in [0, 1)).
Post: the same loops; inside each loop of extent 1 its variable is replaced by 0 and indices
      re-folded, so on-chip indices depend only on loops that really iterate (DMA insertion
      and tensorize read copy and GEMM indices relative to their allocation).
"""

from __future__ import annotations

from vta.compiler.accel.passes._common import map_stmt
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig

__all__ = ["fold_unit_loops"]


def fold_unit_loops(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.For) and E.is_const(s.extent, 1) and E.is_const(s.min, 0):
            body = map_stmt(E.substitute(s.body, {s.var: E.IntImm(0)}), rewrite)
            return s if body is s.body else S.For(s.var, s.min, s.extent, body, s.kind, s.thread)
        return None

    body = map_stmt(func.body, rewrite)
    return func if body is func.body else func.with_body(body)
