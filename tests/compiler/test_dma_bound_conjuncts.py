"""inject_dma reads a select's conjunct as a bound of a global index by comparing linear forms
(``_bounds_index``: the conjunct's form equals the index's, or the two sum to ``n - 1``)
instead of decomposing ``lin - e`` and ``lin - (n - 1 - e)`` for every conjunct and dim. The
definition is kept here as the oracle: both differences' forms are zero."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel.passes.inject_dma import _bounds_index
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly

X, Y, Z = E.Var("x"), E.Var("y"), E.Var("z")
ATOMS = [X, Y, Z, E.FloorDiv(X, E.IntImm(4)), E.FloorMod(Y + Z, E.IntImm(3))]


def _zero(e: E.Expr) -> bool:
    terms, const = poly.linear_form(e)
    return not terms and const == 0


@st.composite
def _exprs(draw: st.DrawFn) -> E.Expr:
    """A small affine combination of ``ATOMS`` (possibly with repeated atoms, cancelling)."""
    e: E.Expr = E.IntImm(draw(st.integers(-5, 5)))
    for _ in range(draw(st.integers(0, 4))):
        atom = draw(st.sampled_from(ATOMS))
        k = draw(st.integers(-3, 3))
        e = e + atom * k if draw(st.booleans()) else e - atom * k
    return e


def _answer(lin: E.Expr, e: E.Expr, n: int) -> bool:
    terms, const = poly.linear_form(lin)
    return _bounds_index(terms, const, poly.linear_form(e), n)


@settings(max_examples=400, deadline=None)
@given(_exprs(), _exprs(), st.integers(1, 9))
def test_bounds_index_is_the_differences_being_zero(lin: E.Expr, e: E.Expr, n: int) -> None:
    assert _answer(lin, e, n) == (_zero(lin - e) or _zero(lin - (E.IntImm(n - 1) - e)))


def test_bounds_index_both_sides() -> None:
    for e in (X + Y * 2 - 1, E.FloorDiv(X, E.IntImm(4)) + 3, E.IntImm(2), X):
        # ``0 <= e`` and ``e < n`` as inject_dma writes them ("lin >= 0")
        assert _answer(e, e, 7)
        assert _answer(E.IntImm(6) - e, e, 7)
        assert not _answer(E.IntImm(5) - e, e, 7)
        assert not _answer(e + 1, e, 7)
    assert not _answer(X, Y, 4)
