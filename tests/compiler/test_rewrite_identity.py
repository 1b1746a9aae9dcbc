"""The rewriter returns an unchanged tree itself, and ``poly.simplify`` of a ``min``, ``max``
or other atom is its argument without a walk.

The first is why ``expr.simplify_int`` is gone: it was ``substitute`` with a function that
replaces nothing, and the rewriter rebuilds a node only where a child changed (integer
constants are folded where a node is made: the Python operators and a rewrite's changed
``BinOp`` go through ``_bin``), so it returned every tree itself after visiting each node
(0.8 % of a serial cold ``vta run resnet18``). Its callers now use the tree they had."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_substitute import VARS, exprs

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly

#: trees made by the constructors, so not folded (a constant sum, a product by one)
_unfolded = st.recursive(
    st.one_of(st.sampled_from(VARS[:3]), st.integers(-3, 5).map(E.IntImm)),
    lambda inner: st.tuples(st.sampled_from([E.Add, E.Sub, E.Mul, E.Min, E.Max]), inner,
                            inner).map(lambda t: t[0](t[1], t[2])),
    max_leaves=12)


@settings(max_examples=300, deadline=None)
@given(st.one_of(exprs, _unfolded))
def test_a_rewrite_that_replaces_nothing_returns_the_tree_itself(e: E.Expr) -> None:
    assert E.substitute(e, lambda n: None) is e


def test_unfolded_constants_stay_unfolded() -> None:
    e = E.Add(E.IntImm(1), E.IntImm(2))
    assert E.substitute(e, lambda n: None) is e


def test_simplify_int_is_gone() -> None:
    assert not hasattr(E, "simplify_int")


# ------------------------------------------- poly.simplify of an atom of ``linear_form``

_atoms = st.tuples(st.sampled_from([E.Min, E.Max, E.Shr, E.BitAnd]), _unfolded, _unfolded).map(
    lambda t: t[0](t[1], t[2]))


@settings(max_examples=200, deadline=None)
@given(_atoms, st.sampled_from(["int32", "int8", "uint8", "int64"]))
def test_simplify_gives_an_atom_back(e: E.Expr, dtype: str) -> None:
    """The decomposition's own answer (``from_linear`` of ``{e: 1}`` and 0) is ``e``."""
    e = type(e)(e.a, e.b, dtype)  # type: ignore[attr-defined]
    terms, const = poly.linear_form(e)
    assert terms == {e: 1} and const == 0
    assert poly.from_linear(terms, const, e.dtype) is e
    assert poly.simplify(e) is e


def test_simplify_of_an_atom_hashes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    e = E.min_(E.max_(VARS[0] * 2 - 3, 0), 7)

    def refuse(_e: object) -> None:
        raise AssertionError("simplify decomposed an atom")

    monkeypatch.setattr(poly, "linear_form", refuse)
    assert poly.simplify(e) is e
