"""``int_eval.compile_int`` of a non-linear tree is one generated Python function
(``int_eval._generated``) against the definition (``test_int_eval_linear._reference``: every
node's exact result wrapped to its own type). The generated text leaves out a wrap where the
operands' spans keep the result in range (the clamps ``min(max(x, 0), n)`` of a DMA field and
the sums and differences of them), writes ``min``/``max`` as comparisons, and nests operands
as written: random clamp trees with nested right operands (``a - (b - c)``, ``a * (b + c)``),
constants near the limits and values far outside them, and unbound variables."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.compiler.test_int_eval_linear import TYPES, VARS, _outcome, _reference
from vta.compiler.ir import expr as E
from vta.compiler.ir import int_eval
from vta.compiler.ir.int_eval import compile_int
from vta.errors import CompileError

_OPS = [E.Add, E.Sub, E.Mul, E.Min, E.Max, E.Min, E.Max, E.FloorDiv, E.BitAnd]


def _leaf(dtype: str) -> st.SearchStrategy[E.Expr]:
    return st.one_of(st.sampled_from(VARS),
                     st.integers(-4, 300).map(lambda v: E.IntImm(v, dtype)),
                     st.sampled_from([2**31 - 1, -2**31, 255, 127, -128, 0, 1]).map(
                         lambda v: E.IntImm(v, dtype)))


def _tree(dtype: str) -> st.SearchStrategy[E.Expr]:
    def extend(inner: st.SearchStrategy[E.Expr]) -> st.SearchStrategy[E.Expr]:
        return st.one_of(
            st.tuples(st.sampled_from(_OPS), inner, inner).map(lambda t: t[0](t[1], t[2],
                                                                               dtype)),
            st.tuples(inner, st.integers(-3, 200)).map(  # a clamp min(max(x, 0), n)
                lambda t: E.Min(E.Max(t[0], E.IntImm(0, dtype), dtype), E.IntImm(t[1], dtype),
                                dtype)),
            st.tuples(st.sampled_from(TYPES), inner).map(lambda t: E.Cast(dtype, E.Cast(t[0],
                                                                                       t[1]))),
        )
    return st.recursive(_leaf(dtype), extend, max_leaves=12)


exprs = st.sampled_from(TYPES).flatmap(_tree).filter(lambda e: isinstance(e, E.BinOp | E.Cast))
values = st.integers(-2**33, 2**33) | st.integers(-130, 300)
envs = st.dictionaries(st.sampled_from(VARS), values, max_size=4)


@settings(max_examples=800, deadline=None)
@given(exprs, envs)
def test_generated_equals_the_definition(e: E.Expr, env: dict[E.Var, int]) -> None:
    fn = compile_int(e)
    assert _outcome(lambda: fn(env)) == _outcome(lambda: _reference(e, env))


def test_a_clamp_is_one_function_without_wraps() -> None:
    """``4 - min(max(-x, 0), 2)``: one generated function (no closure per node) whose only
    range test is the linear ``-x``'s (the clamp lies in [0, 2], its difference in [2, 4])."""
    i = VARS[0]
    pad = E.Min(E.Max(E.Sub(E.IntImm(0), E.Mul(i, E.IntImm(2), "int32"), "int32"),
                      E.IntImm(0), "int32"), E.IntImm(2), "int32")
    e = E.Sub(E.IntImm(4), pad, "int32")
    src = int_eval._Source()
    text, span = int_eval._text(e, src, 0)
    assert span == (2, 4)
    assert text.count("<= (") == 1 + 1  # the linear part's range test and min's comparison
    fn = compile_int(e)
    assert fn.__name__ == "fn"
    assert [fn({i: v}) for v in (-5, -1, 0, 3, 2**31)] == [2, 2, 4, 4, 4]


def test_right_operands_keep_their_grouping() -> None:
    i, j = VARS[0], VARS[1]
    small = E.Min(E.Max(j, E.IntImm(0), "int32"), E.IntImm(5), "int32")
    e = E.Sub(E.Min(i, E.IntImm(9), "int32"), E.Sub(small, E.IntImm(3), "int32"), "int32")
    m = E.Mul(E.Min(i, E.IntImm(9), "int32"), E.Add(small, E.IntImm(3), "int32"), "int32")
    for env in ({i: 4, j: 2}, {i: -7, j: 100}, {i: 2**40, j: -2**40}):
        assert compile_int(e)(env) == _reference(e, env)
        assert compile_int(m)(env) == _reference(m, env)


def test_equal_trees_over_other_constants_share_code() -> None:
    i = VARS[0]

    def clamp(n: int) -> E.Expr:
        return E.Min(E.Max(E.Sub(i, E.IntImm(n), "int32"), E.IntImm(0), "int32"),
                     E.IntImm(n), "int32")
    f, g = compile_int(clamp(3)), compile_int(clamp(70))
    assert f.__code__ is g.__code__
    assert (f({i: 5}), g({i: 5}), g({i: 100})) == (2, 0, 30)


def test_unbound_and_undefined_name_the_variable_and_the_operation() -> None:
    i, j = VARS[0], VARS[1]
    e = E.Min(E.Add(i, E.FloorDiv(j, i, "int32"), "int32"), E.IntImm(7), "int32")
    with pytest.raises(CompileError, match="variable i is not bound"):
        compile_int(e)({j: 1})
    with pytest.raises(CompileError, match="variable j is not bound"):
        compile_int(e)({i: 1})
    with pytest.raises(CompileError, match="division by zero"):
        compile_int(e)({i: 0, j: 1})


def test_deep_trees_are_split_into_called_functions() -> None:
    """A tree deeper than ``_MAX_DEPTH`` compiles (Python's parser refuses 200 nested
    parentheses) and computes as defined."""
    i = VARS[0]
    e: E.Expr = i
    for k in range(100):
        e = E.Min(E.Max(e, E.IntImm(-k), "int32"), E.IntImm(10_000 + k), "int32")
    for v in (-10**6, 5, 10**6):
        assert compile_int(e)({i: v}) == _reference(e, {i: v})
