"""``expr.substitute`` against the rewriter it replaced (kept below, verbatim, as the
reference): random expressions and statements, variable mappings and node callables, with and
without ``descend`` (asked of a child's class here, of the child there); the results must be
equal, share the same unchanged subtrees, and the callable must see the same nodes in the
same order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.visitor import evolve, node_fields

# ----------------------------------------------------------------- the reference (before)


def _ref_substitute(node: Any, mapping: dict[E.Var, Any] | Callable[[Any], Any | None],
                    descend: Callable[[Any], bool] | None = None) -> Any:
    fn: Callable[[Any], Any | None]
    if isinstance(mapping, dict):
        m = mapping
        fn = lambda n: (E.as_expr(m[n]) if isinstance(n, E.Var) and n in m else None)  # noqa: E731
    else:
        fn = mapping
    return _ref_rewrite(node, fn, descend, {})


def _ref_rewrite(node: Any, fn: Callable[[Any], Any | None],
                 descend: Callable[[Any], bool] | None, memo: dict[int, Any]) -> Any:
    done = memo.get(id(node))
    if done is not None:
        return done[1]
    out = _ref_rewrite_node(node, fn, descend, memo)
    memo[id(node)] = (node, out)
    return out


def _ref_rewrite_node(node: Any, fn: Callable[[Any], Any | None],
                      descend: Callable[[Any], bool] | None, memo: dict[int, Any]) -> Any:
    r = fn(node)
    if r is not None:
        return r
    cls = type(node)
    names = node_fields(cls)
    if names is None:
        return node
    changed: dict[str, Any] | None = None
    for name in names:
        v = getattr(node, name)
        if type(v) is tuple:
            items: list[Any] = []
            diff = False
            for x in v:
                if node_fields(type(x)) is not None and (descend is None or descend(x)):
                    y = _ref_rewrite(x, fn, descend, memo)
                    diff = diff or y is not x
                    items.append(y)
                else:
                    items.append(x)
            if diff:
                if changed is None:
                    changed = {}
                changed[name] = tuple(items)
        elif node_fields(type(v)) is not None and (descend is None or descend(v)):
            nv = _ref_rewrite(v, fn, descend, memo)
            if nv is not v:
                if changed is None:
                    changed = {}
                changed[name] = nv
    if changed is None:
        return node
    if isinstance(node, E.BinOp):
        return E._bin(cls, changed.get("a", node.a), changed.get("b", node.b))
    return evolve(node, **changed)


# ----------------------------------------------------------------- random IR

VARS = [E.Var(n) for n in "ijkl"] + [E.Var("b", "int8")]
BUF = S.Buffer("A", (4, 4), "int32")
OPS = [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max, E.Shr, E.Shl, E.BitAnd]


def _leaf() -> st.SearchStrategy[E.Expr]:
    return st.one_of(st.sampled_from(VARS),
                     st.integers(-3, 5).map(E.IntImm),
                     st.integers(-3, 5).map(lambda v: E.IntImm(v, "int8")))


def _extend(inner: st.SearchStrategy[E.Expr]) -> st.SearchStrategy[E.Expr]:
    return st.one_of(
        st.tuples(st.sampled_from(OPS), inner, inner).map(lambda t: t[0](t[1], t[2], "int32")),
        st.tuples(inner, inner).map(lambda t: t[0] + t[1]),  # built with folding
        st.tuples(inner, inner, inner).map(lambda t: E.Select(E.Cmp("<", t[0], t[1]), t[1],
                                                               t[2])),
        inner.map(lambda e: E.Cast("int16", e)),
        st.tuples(inner, inner).map(lambda t: BUF.load(t[0], t[1])),
    )


exprs = st.recursive(_leaf(), _extend, max_leaves=12)


def _shared(e: E.Expr) -> E.Expr:
    """A tree that reuses one subtree object twice (what the memo is for)."""
    return E.Add(e, E.Mul(e, E.IntImm(3)))


stmts = st.recursive(
    st.tuples(exprs, exprs, exprs).map(lambda t: BUF.store(t[0], t[1], t[2])),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(VARS[:4]), st.integers(1, 3), inner).map(
            lambda t: S.For(t[0], E.IntImm(0), E.IntImm(t[1]), t[2])),
        st.lists(inner, min_size=1, max_size=3).map(lambda xs: S.SeqStmt(tuple(xs))),
        st.tuples(exprs, inner).map(lambda t: S.IfThenElse(E.Cmp("<", t[0], E.IntImm(2)),
                                                          t[1])),
    ),
    max_leaves=6)

values = st.one_of(st.integers(-2, 4), st.sampled_from(VARS),
                   st.tuples(st.sampled_from(VARS), st.integers(-2, 4)).map(
                       lambda t: t[0] + t[1]))
mappings = st.dictionaries(st.sampled_from(VARS), values, max_size=3)


def _same(new: Any, old: Any, node: Any) -> None:
    assert new == old
    assert (new is node) == (old is node)


@settings(max_examples=300, deadline=None)
@given(exprs, mappings)
def test_variable_mapping_same_as_before(e: E.Expr, m: dict[E.Var, Any]) -> None:
    for node in (e, _shared(e)):
        _same(E.substitute(node, m), _ref_substitute(node, m), node)


@settings(max_examples=200, deadline=None)
@given(stmts, mappings)
def test_statement_mapping_same_as_before(s: S.Stmt, m: dict[E.Var, Any]) -> None:
    _same(E.substitute(s, m), _ref_substitute(s, m), s)


def _stmt_class(cls: type) -> bool:
    return issubclass(cls, S.Stmt)


def _not_var_class(cls: type) -> bool:
    return cls is not E.Var


#: ``substitute``'s ``descend`` (a class's) and the reference's (an instance's) for it
DESCENDS: dict[str, tuple[Callable[[type], bool], Callable[[Any], bool]]] = {
    "statements": (_stmt_class, lambda x: isinstance(x, S.Stmt)),
    "not variables": (_not_var_class, lambda x: not isinstance(x, E.Var)),
}


@settings(max_examples=200, deadline=None)
@given(stmts, st.integers(0, 4), st.sampled_from([None, *DESCENDS]))
def test_callable_same_as_before_and_sees_the_same_nodes(s: S.Stmt, k: int,
                                                          descend: str | None) -> None:
    """A callable replacing the k-th constant it sees (everywhere, or where ``descend``
    allows: the reference asks it of every child, ``substitute`` once per class): the same
    result and the same calls, in order."""
    def make() -> tuple[Callable[[Any], Any | None], list[Any]]:
        seen: list[Any] = []

        def fn(n: Any) -> Any | None:
            seen.append(n)
            if isinstance(n, E.IntImm) and sum(isinstance(x, E.IntImm) for x in seen) == k:
                return E.IntImm(n.value + 7)
            return None
        return fn, seen

    new, old = DESCENDS[descend] if descend is not None else (None, None)
    fn_new, seen_new = make()
    fn_old, seen_old = make()
    _same(E.substitute(s, fn_new, new), _ref_substitute(s, fn_old, old), s)
    assert len(seen_new) == len(seen_old)
    assert all(a is b for a, b in zip(seen_new, seen_old, strict=True))


@settings(max_examples=200, deadline=None)
@given(stmts, mappings, st.sampled_from(list(DESCENDS)))
def test_mapping_with_descend_same_as_before(s: S.Stmt, m: dict[E.Var, Any],
                                             descend: str) -> None:
    """A variable mapping where ``descend`` allows (a class's) against the reference asking
    it of every child (an instance's)."""
    new, old = DESCENDS[descend]
    _same(E.substitute(s, m, new), _ref_substitute(s, m, old), s)


def test_folds_after_substitution() -> None:
    i, j = VARS[0], VARS[1]
    e = (i * 4 + j) * 2
    assert E.substitute(e, {i: 1, j: 3}) == E.IntImm(14)
    assert E.substitute(e, {}) is e
    x = E.substitute(e, {i: j})
    assert x == (j * 4 + j) * 2


def test_unconvertible_value_raises_only_when_used() -> None:
    i, j = VARS[0], VARS[1]
    assert E.substitute(i + 1, {j: object()}) == i + 1
    try:
        E.substitute(j + 1, {j: object()})
    except TypeError as err:
        assert "cannot use" in str(err)
    else:
        raise AssertionError("no TypeError")


def test_free_vars_of_a_leaf_without_a_walk(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A variable's free variables are itself and a constant's none, answered without walking
    (most indices are one or the other); any other node is walked as before."""
    from vta.compiler.ir import expr

    i, j = E.Var("i"), E.Var("j")
    tree = i * 4 + j
    assert E.free_vars(tree) == {i, j}

    def no_walk(node: object) -> object:
        raise AssertionError("walked")

    monkeypatch.setattr(expr, "walk", no_walk)
    assert E.free_vars(i) == {i}
    assert E.free_vars(E.IntImm(3)) == set()


def test_descend_tables_stay_few() -> None:
    """A ``descend`` made anew per call (a lambda) gets a table each time, as a module-level
    one does once; the tables kept never pass 32."""
    s = S.For(VARS[0], E.IntImm(0), E.IntImm(2), BUF.store(VARS[0], VARS[1], VARS[0]))
    for _ in range(100):
        out = E.substitute(s, {VARS[0]: 1}, lambda cls: issubclass(cls, S.Stmt))
        assert out is s
        assert len(E._DESCEND_KINDS) <= 32
