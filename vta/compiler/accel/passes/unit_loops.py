"""Unit loops: a loop of one iteration has its variable equal to 0 in its body.

Pre:  a lowered ``PrimFunc``. ``lower`` keeps every leaf loop, and bound inference (isl) pins a
      variable that can only be 0 (a tile loop of one iteration), so a buffer's base may be 0
      where the index still names that variable (``o_o * 2 + o_i`` with ``o_o`` in [0, 1)).
Post: the same loops; inside each loop of extent 1 its variable is replaced by 0 and indices
      re-folded, so on-chip indices depend only on loops that really iterate (DMA insertion
      and tensorize read copy and GEMM indices relative to their allocation).
"""

from __future__ import annotations

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig

__all__ = ["fold_unit_loops"]


def fold_unit_loops(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    zero = E.IntImm(0)
    active: set[E.Var] = set()  # the variables of the unit loops around the node rewritten

    def rewrite(n: object) -> object | None:
        """One walk of the body: inside a unit loop its variable reads 0, the loop itself kept.
        Unit loops nest (C1-C11's candidates on pynq: 728, up to 9 deep), and substituting
        each one's variable in its body, then walking that body for the next, walked a body
        once per unit loop around it; here each node is rewritten once, under every unit
        loop around it at once."""
        if isinstance(n, E.Var):
            return zero if n in active else None
        if not isinstance(n, S.For):
            return None
        # its bounds as the loops around it make them (a bound may fold to 1 only so)
        lo = E.substitute(n.min, rewrite) if active else n.min
        ext = E.substitute(n.extent, rewrite) if active else n.extent
        if not (E.is_const(ext, 1) and E.is_const(lo, 0)):
            return None  # not a unit loop: rewritten field by field
        added = n.var not in active
        active.add(n.var)
        try:
            body = E.substitute(n.body, rewrite)
        finally:
            if added:
                active.discard(n.var)
        if body is n.body and lo is n.min and ext is n.extent:
            return n
        return S.For(n.var, lo, ext, body, n.kind, n.thread)

    body = E.substitute(func.body, rewrite, descend=_is_stmt)  # expressions: only under one
    return func if body is func.body else func.with_body(body)


def _is_stmt(x: object) -> bool:
    return isinstance(x, S.Stmt)
