"""``int_eval.compile_int`` on linear index arithmetic (one Python expression wrapped once,
``int_eval._affine``) against the definition: every node's exact result wrapped to its own
type (``semantics``), node by node. Random trees of ``+``, ``-``, ``*`` over variables and
constants of several integer types, with casts and non-linear nodes mixed in, values near the
types' limits (so wrapping happens inside), and unbound variables (the error names the first
one read)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.ir import expr as E
from vta.compiler.ir import semantics as sem
from vta.compiler.ir.int_eval import compile_int
from vta.errors import CompileError

VARS = [E.Var(n) for n in "ijk"] + [E.Var("u", "uint8")]
TYPES = ["int32", "int8", "uint8", "int16"]


def _reference(e: E.Expr, env: dict[E.Var, int]) -> int:
    """The definition, node by node (no shortcut)."""
    if isinstance(e, E.Var):
        if e not in env:
            raise CompileError(f"variable {e.name} is not bound where it is evaluated")
        return env[e]
    t = sem.DTYPES[e.dtype]
    if isinstance(e, E.IntImm):
        return sem.wrap(e.value, t)
    if isinstance(e, E.Cast):
        return sem.wrap(_reference(e.value, env), t)
    assert isinstance(e, E.BinOp)
    x, y = _reference(e.a, env), _reference(e.b, env)
    why = sem.undefined(e.op, x, y, t)
    if why is not None:
        raise CompileError(f"{why} in {e}")
    return sem.wrap(sem.INT_OPS[e.op](x, y), t)


def _leaf(dtype: str) -> st.SearchStrategy[E.Expr]:
    return st.one_of(st.sampled_from(VARS),
                     st.integers(-300, 300).map(lambda v: E.IntImm(v, dtype)),
                     st.sampled_from([2**31 - 1, -2**31, 255, 127]).map(
                         lambda v: E.IntImm(v, dtype)))


def _tree(dtype: str) -> st.SearchStrategy[E.Expr]:
    def extend(inner: st.SearchStrategy[E.Expr]) -> st.SearchStrategy[E.Expr]:
        return st.one_of(
            st.tuples(st.sampled_from([E.Add, E.Sub, E.Mul, E.Mul, E.Add]), inner, inner)
            .map(lambda t: t[0](t[1], t[2], dtype)),
            st.tuples(st.sampled_from([E.Min, E.FloorMod]), inner, inner)
            .map(lambda t: t[0](t[1], t[2], dtype)),
            st.tuples(st.sampled_from(TYPES), inner).map(lambda t: E.Cast(dtype, E.Cast(t[0],
                                                                                       t[1]))),
            st.tuples(st.sampled_from(TYPES), inner, inner).map(
                lambda t: E.Add(E.Mul(t[1], t[2], t[0]), t[1], dtype)),  # another type inside
        )
    return st.recursive(_leaf(dtype), extend, max_leaves=10)


exprs = st.sampled_from(TYPES).flatmap(lambda d: st.tuples(st.just(d), _tree(d))).map(
    lambda t: E.Add(t[1], E.Var("j"), t[0]))  # a BinOp root
values = st.integers(-2**33, 2**33) | st.integers(-130, 300)
envs = st.dictionaries(st.sampled_from(VARS), values, max_size=4)


def _outcome(f: Any) -> tuple[str, Any]:
    try:
        return "value", f()
    except CompileError as e:
        return "error", str(e)


@settings(max_examples=600, deadline=None)
@given(exprs, envs)
def test_compiled_equals_the_definition(e: E.Expr, env: dict[E.Var, int]) -> None:
    fn = compile_int(e)
    assert _outcome(lambda: fn(env)) == _outcome(lambda: _reference(e, env))


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(TYPES), st.lists(st.tuples(st.sampled_from(VARS), values), min_size=1,
                                        max_size=4), values, envs)
def test_linear_combinations_equal_the_definition(dtype: str, terms: list[tuple[E.Var, int]],
                                                  c0: int, env: dict[E.Var, int]) -> None:
    """``c0 + sum(k * v)`` with one to four terms (each arity of the compiled form), large
    coefficients and values: wrapped once, the same as wrapped at every node."""
    e: E.Expr = E.IntImm(c0, dtype)
    for v, k in terms:
        e = E.Add(e, E.Mul(E.IntImm(k, dtype), v, dtype), dtype)
    assert isinstance(e, E.BinOp)
    fn = compile_int(e)
    assert fn.__name__ in ("one", "two", "many")  # the linear form, not the closures
    assert _outcome(lambda: fn(env)) == _outcome(lambda: _reference(e, env))


def test_linear_form_wraps_once_like_every_step() -> None:
    i, j = VARS[0], VARS[1]
    e = E.Add(E.Mul(i, E.IntImm(2**30), "int32"), E.Sub(j, i, "int32"), "int32")
    for env in ({i: 5, j: 7}, {i: 2**31 - 1, j: -2**31}, {i: -3, j: 2**40}):
        assert compile_int(e)(env) == _reference(e, env)


def test_unbound_variable_named_even_when_its_coefficient_cancels() -> None:
    i, j = VARS[0], VARS[1]
    e = E.Add(E.Sub(i, i, "int32"), j, "int32")
    with pytest.raises(CompileError, match="variable i is not bound"):
        compile_int(e)({j: 1})
    with pytest.raises(CompileError, match="variable j is not bound"):
        compile_int(e)({i: 1})
