"""The IR core's cheaper paths against their definitions (kept below as the reference): ``walk``
pushing a node's children last first, ``map_stmt`` recursing into sequences with one visitor
and a built-in ``descend``, ``linear_form`` extending its operands' dicts in place, and
``Dispatch`` reading its cache before ``rule``. Each must give what the definition gives: the
same nodes in the same order, the same results and the same calls."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from test_substitute import VARS, exprs, stmts

from vta.compiler.accel.passes._common import map_stmt
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import Dispatch, child_slots, node_fields

# ----------------------------------------------------------------- the references


def _ref_walk(node: Any) -> Iterator[Any]:
    """Recursive pre-order over the fields that can hold nodes, tuples item by item."""
    yield node
    for name in child_slots(type(node)) or ():
        v = getattr(node, name)
        for x in (v if type(v) is tuple else (v,)):
            if node_fields(type(x)) is not None:
                yield from _ref_walk(x)


def _ref_map_stmt(s: S.Stmt, fn: Callable[[S.Stmt], S.Stmt | None]) -> S.Stmt:
    """``map_stmt`` before (a closure and a ``substitute`` per call, a Python ``descend``)."""
    def visit(n: S.Stmt) -> S.Stmt | None:
        r = fn(n)
        if r is None and isinstance(n, S.SeqStmt):
            new = tuple(_ref_map_stmt(x, fn) for x in n.stmts)
            changed = any(a is not b for a, b in zip(new, n.stmts, strict=True))
            return S.seq(*new) if changed else n
        return r

    out: S.Stmt = E.substitute(s, visit, descend=_stmt_class)
    return out


def _stmt_class(cls: type) -> bool:
    """``descend`` for statements only (``substitute`` asks it of a child's class)."""
    return issubclass(cls, S.Stmt)


def _ref_linear(e: E.Expr) -> tuple[dict[E.Expr, int], int]:
    """``linear_form`` before: every sum and product in a new dict."""
    if isinstance(e, E.IntImm):
        return {}, e.value
    if isinstance(e, (E.Add, E.Sub)):
        ta, ca = _ref_linear(e.a)
        tb, cb = _ref_linear(e.b)
        sign = 1 if isinstance(e, E.Add) else -1
        out = dict(ta)
        for atom, c in tb.items():
            out[atom] = out.get(atom, 0) + sign * c
        return {k: v for k, v in out.items() if v}, ca + sign * cb
    if isinstance(e, E.Mul):
        ta, ca = _ref_linear(e.a)
        tb, cb = _ref_linear(e.b)
        if not tb:
            return {k: v * cb for k, v in ta.items() if v * cb}, ca * cb
        if not ta:
            return {k: v * ca for k, v in tb.items() if v * ca}, ca * cb
        return {e: 1}, 0
    if isinstance(e, E.Cast) and not e.dtype.startswith("float") and e.dtype != "bool":
        return _ref_linear(e.value)
    if isinstance(e, (E.FloorDiv, E.FloorMod)):
        return {type(e)(poly.simplify(e.a), e.b, e.dtype): 1}, 0
    return {e: 1}, 0


# ----------------------------------------------------------------- the checks

_linear_exprs = st.recursive(
    st.one_of(st.sampled_from(VARS[:4]), st.integers(-3, 5).map(E.IntImm)),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from([E.Add, E.Sub, E.Mul]), inner, inner).map(
            lambda t: t[0](t[1], t[2], "int32")),
        st.tuples(inner, inner).map(lambda t: t[0] - t[1]),
        st.tuples(inner, st.integers(-2, 3)).map(lambda t: t[0] * t[1]),
        st.tuples(inner, st.integers(1, 4)).map(lambda t: E.FloorDiv(t[0], E.IntImm(t[1]))),
    ), max_leaves=14)


@settings(max_examples=300, deadline=None)
@given(st.one_of(exprs, stmts))
def test_walk_is_a_pre_order(node: Any) -> None:
    got, want = list(E.walk(node)), list(_ref_walk(node))
    assert len(got) == len(want) and all(a is b for a, b in zip(got, want, strict=True))


@settings(max_examples=300, deadline=None)
@given(st.one_of(exprs, _linear_exprs))
def test_linear_form_as_before(e: E.Expr) -> None:
    """The same terms in the same order and the same constant; the caller owns its dict (a
    second decomposition is not changed by mutating the first)."""
    terms, c = poly.linear_form(e)
    ref_terms, ref_c = _ref_linear(e)
    assert (list(terms.items()), c) == (list(ref_terms.items()), ref_c)
    terms[E.Var("x")] = 5
    assert list(poly.linear_form(e)[0].items()) == list(ref_terms.items())


def test_linear_form_cancels_and_scales() -> None:
    i, j = VARS[0], VARS[1]
    assert poly.linear_form(i + j - i + 3) == ({j: 1}, 3)
    assert poly.linear_form((i * 2 + j) * 1 - j) == ({i: 2}, 0)
    assert poly.linear_form(E.Mul(i + 1, E.IntImm(0))) == ({}, 0)


@settings(max_examples=200, deadline=None)
@given(stmts, st.integers(0, 5))
def test_map_stmt_as_before(s: S.Stmt, k: int) -> None:
    """A function replacing the k-th store it sees: the same result, the same unchanged
    statements kept, and the same statements seen in the same order."""
    def make() -> tuple[Callable[[S.Stmt], S.Stmt | None], list[Any]]:
        seen: list[Any] = []

        def fn(n: S.Stmt) -> S.Stmt | None:
            seen.append(n)
            stores = sum(isinstance(x, S.BufferStore) for x in seen)
            if isinstance(n, S.BufferStore) and stores == k:
                return S.seq(n, n)
            return None
        return fn, seen

    fn_new, seen_new = make()
    fn_old, seen_old = make()
    new, old = map_stmt(s, fn_new), _ref_map_stmt(s, fn_old)
    assert new == old and (new is s) == (old is s)
    assert len(seen_new) == len(seen_old)
    assert all(a is b for a, b in zip(seen_new, seen_old, strict=True))


def test_dispatch_reads_a_rule_registered_after_a_call() -> None:
    d: Dispatch[str] = Dispatch("t", {E.BinOp: lambda n: "binop"}, default=lambda n: "other")
    i = VARS[0]
    assert d(E.Add(i, i)) == "binop" and d(i) == "other"
    d.register(E.Add)(lambda n: "add")
    assert d(E.Add(i, i)) == "add" and d(E.Sub(i, i)) == "binop"


@settings(max_examples=300, deadline=None)
@given(st.integers(-(2**40), 2**40), st.sampled_from(["int8", "int16", "int32", "uint8", "bool"]),
       st.sampled_from([E.FloorDiv, E.FloorMod, E.Shr, E.Shl]), st.integers(-9, 9))
def test_integer_closures_wrap_inline(x: int, dtype: str, op: type[E.BinOp], k: int) -> None:
    """A cast and a partial operator wrap their result to their type inline, as
    ``semantics`` defines it (``semantics.wrap`` outside the type's range), and a partial
    operator without a meaning is the same error."""
    from vta.compiler.ir import semantics as sem
    from vta.compiler.ir.int_eval import evaluate
    from vta.errors import CompileError

    v = VARS[0]
    t = sem.DTYPES[dtype]
    cast = E.Cast(dtype, v)
    assert evaluate(cast, {v: x}) == sem.wrap(x, t)
    if dtype == "bool":
        return
    e = op(cast, E.IntImm(k, dtype), dtype)
    a, kk = sem.wrap(x, t), sem.wrap(k, t)  # a constant reads as its type holds it
    if sem.undefined(op.op, a, kk, t) is not None:
        try:
            evaluate(e, {v: x})
        except CompileError:
            return
        raise AssertionError("no error")
    assert evaluate(e, {v: x}) == sem.binary(op.op, a, kk, t)
