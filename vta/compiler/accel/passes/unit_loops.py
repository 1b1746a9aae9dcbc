"""Unit loops: a loop of one iteration has its variable equal to 0 in its body.

Pre:  a lowered ``PrimFunc``. ``lower`` keeps every leaf loop, and bound inference (isl) pins a
      variable that can only be 0 (a tile loop of one iteration), so a buffer's base may be 0
      where the index still names that variable (``o_o * 2 + o_i`` with ``o_o`` in [0, 1)).
Post: the same loops; inside each loop of extent 1 its variable is replaced by 0 and indices
      re-folded, so on-chip indices depend only on loops that really iterate (DMA insertion
      and tensorize read copy and GEMM indices relative to their allocation).

One walk: the variables of the unit loops met on the way down are pinned together and each
expression is rewritten once with all of them (a loop nested in k unit loops is not rewritten
k times over: C1-C11's bodies were rewritten about four times each). Rewriting with several
variables at once gives the expression that rewriting with one and then another gives: each
node is re-folded from its children alone (``expr._bin``), so the order in which constants
reach it does not change what it folds to.
"""

from __future__ import annotations

from typing import Any

from vta.compiler.accel.passes._common import is_stmt_class
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig

__all__ = ["fold_unit_loops"]

_ZERO = E.IntImm(0)


def fold_unit_loops(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    body = _folded(func.body, {})
    return func if body is func.body else func.with_body(body)


def _folded(s: S.Stmt, pinned: dict[E.Var, E.Expr]) -> S.Stmt:
    """``s`` with the variables of ``pinned`` (those of the unit loops around it) replaced by
    0, and inside every unit loop of ``s`` that loop's variable too. A loop or a sequence,
    most of the statements met, is answered here as the rewrite's ``fn`` answers it, without
    a rewrite of its own (the tree's leaf loops are thousands over a layer's candidates)."""
    cls = type(s)
    if cls is S.For:
        return _loop(s, pinned)  # type: ignore[arg-type]
    if cls is S.SeqStmt:
        return _sequence(s, pinned)  # type: ignore[arg-type]

    def fn(n: Any) -> Any:
        if isinstance(n, S.For):
            return _loop(n, pinned)
        if isinstance(n, S.SeqStmt):
            return _sequence(n, pinned)
        if isinstance(n, E.Expr):
            return _pin(n, pinned) if pinned else n
        if type(n) is S.BufferStore and pinned:  # expressions only: one rewrite of them all
            return E.substitute(n, pinned)
        return None

    out: S.Stmt = E.substitute(s, fn, descend=None if pinned else is_stmt_class)
    return out


def _sequence(s: S.SeqStmt, pinned: dict[E.Var, E.Expr]) -> S.Stmt:
    """A sequence with each statement folded; rebuilt sequences stay flat (as ``map_stmt``
    keeps them), an unchanged one is itself."""
    new = tuple(_folded(x, pinned) for x in s.stmts)
    changed = any(a is not b for a, b in zip(new, s.stmts, strict=True))
    return S.seq(*new) if changed else s


def _loop(s: S.For, pinned: dict[E.Var, E.Expr]) -> S.For:
    """A loop: its bounds with ``pinned`` replaced; its body folded, with its own variable
    pinned where it runs once from 0."""
    lo = _pin(s.min, pinned) if pinned else s.min
    ext = _pin(s.extent, pinned) if pinned else s.extent
    inner = {**pinned, s.var: _ZERO} if E.is_const(ext, 1) and E.is_const(lo, 0) else pinned
    body = _folded(s.body, inner)
    if lo is s.min and ext is s.extent and body is s.body:
        return s
    return S.For(s.var, lo, ext, body, s.kind, s.thread)


def _pin(e: E.Expr, pinned: dict[E.Var, E.Expr]) -> E.Expr:
    """``E.substitute(e, pinned)``, a constant and a variable answered without a rewrite (a
    loop's bounds and many indices are one or the other; ``pinned`` maps to expressions)."""
    t = type(e)
    if t is E.IntImm:
        return e
    if t is E.Var:
        return pinned.get(e, e)  # type: ignore[call-overload]
    out: E.Expr = E.substitute(e, pinned)
    return out
