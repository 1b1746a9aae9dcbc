"""Unit loops pin a variable without a rewrite where the expression is a constant or a
variable (``unit_loops._pin``): the same object ``expr.substitute`` gives, on every kind."""

from __future__ import annotations

from vta.compiler.accel.passes.unit_loops import _ZERO, _pin
from vta.compiler.ir import expr as E


def test_pin_is_substitute() -> None:
    x, y = E.Var("x"), E.Var("y")
    pinned: dict[E.Var, E.Expr] = {x: _ZERO}
    for e in (x, y, E.IntImm(3), E.IntImm(0), x * 4 + y, y * 2 - 1, E.max_(x, y)):
        want = E.substitute(e, pinned)
        got = _pin(e, pinned)
        assert got is want or (got == want and type(e) not in (E.Var, E.IntImm))
    assert _pin(x, pinned) is _ZERO and _pin(y, pinned) is y
