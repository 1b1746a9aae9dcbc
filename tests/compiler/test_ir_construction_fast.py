"""Node construction without the general path's calls (issue 22, round 15): a rebuilt
``BinOp`` with nothing to fold made directly instead of through ``expr._bin``; integer
constants made through ``IntImm``'s slot setters (``expr._imm``) instead of its ``__init__``;
an ``AttrStmt`` rebuilt around a new body without its key's check again; ``linear_form``'s
constant and variable operands read without the dispatch; a mapping substitution's
variables met again and constants read by the rebuilders without a call; the IR's generated code
(rebuilders, ``evolve``'s copiers, ``int_eval``'s makers) read from vta's table of compiled
texts (``vta._dataclass_code.code_of``). Each gives exactly what the general path gave."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import pytest

from vta import _dataclass_code as dc
from vta.compiler.ir import expr as E
from vta.compiler.ir import int_eval, poly, visitor
from vta.compiler.ir import semantics as sem
from vta.compiler.ir import stmt as S


def _same(a: Any, b: Any) -> bool:
    """Equal trees of the same classes, field by field (``==`` alone lets ``1 == True``)."""
    if type(a) is not type(b):
        return False
    if type(a) is E.Var:
        return a is b
    fields = visitor.node_fields(type(a))
    if fields is None:
        return bool(a == b)
    return all(_same(getattr(a, f), getattr(b, f)) for f in fields)


x8, y8 = E.Var("x", "int8"), E.Var("y", "int8")
x, y, z = E.Var("x"), E.Var("y"), E.Var("z")


@pytest.mark.parametrize("tree, mapping", [
    (x + y, {x: z}),  # plain operands of one type: made directly
    (x * y, {y: E.Cast("int32", x8)}),
    (x8 - y8, {x8: E.Var("w", "int8")}),  # int8 stays int8
    (x + y, {x: 3}),  # one side a constant: ``_bin``'s identities and folds
    (x + y, {x: 0}),
    (x * y, {x: 2, y: 5}),
    (x + y, {x: x8}),  # operands of two types: ``_bin``'s common type
    (E.FloorDiv(x, y), {y: 1}),
    (E.Min(x + 1, y * 2), {x: z, y: z}),
    (E.BinOp.__subclasses__()[0](x, y), {y: E.FloatImm(1.5)}),
])
def test_rebuilt_binop_is_what_bin_makes(tree: E.Expr, mapping: dict[E.Var, Any]) -> None:
    """Both rewriters (a mapping, a callable) rebuild an operator as ``_bin`` rebuilds it
    from the rewritten operands."""
    def expected(e: Any) -> Any:
        if isinstance(e, E.Var):
            return E.as_expr(mapping[e]) if e in mapping else e
        if isinstance(e, E.BinOp):
            a, b = expected(e.a), expected(e.b)
            return e if a is e.a and b is e.b else E._bin(type(e), a, b)
        return e

    def fn(n: Any) -> Any:
        return E.as_expr(mapping[n]) if isinstance(n, E.Var) and n in mapping else None

    want = expected(tree)
    assert _same(E.substitute(tree, mapping), want)
    assert _same(E.substitute(tree, fn), want)


@dataclass(frozen=True, slots=True)
class _Op(E.BinOp):
    """An operator of this test's own: its rebuilders are made after the test's patch."""

    symbol: ClassVar[str] = "op"
    op: ClassVar[sem.Op] = sem.Op.ADD


def test_plain_operands_skip_bin(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rebuild whose operands are non-constant expressions of one type does not call
    ``_bin`` (the rebuilder makes the node itself); one with a constant operand does."""
    calls: list[type] = []
    real = E._bin

    def counted(cls: type[E.BinOp], a: E.ExprLike, b: E.ExprLike) -> E.Expr:
        calls.append(cls)
        return real(cls, a, b)

    monkeypatch.setattr(E, "_bin", counted)
    for table in (E._REBUILD_FN, E._REBUILD_VARS):
        monkeypatch.delitem(table, _Op, raising=False)
    tree = _Op(x, y)
    out = E.substitute(tree, {x: z})
    assert _same(out, _Op(z, y)) and not calls
    assert _same(E.substitute(tree, lambda n: z if n is y else None), _Op(x, z)) and not calls
    assert _same(E.substitute(tree, {x: 1, y: 2}), E.IntImm(3)) and calls == [_Op]


def test_constants_skip_init(monkeypatch: pytest.MonkeyPatch) -> None:
    """``const``, an int operand and a folded result are made through ``IntImm``'s slot
    setters, never its ``__init__``; equal to the constant ``__init__`` makes."""
    made = []
    real = E.IntImm.__init__
    two = E.IntImm(2)

    def init(self: E.IntImm, value: int, dtype: str = "int32") -> None:
        made.append(value)
        real(self, value, dtype)

    monkeypatch.setattr(E.IntImm, "__init__", init)
    got = [E.const(7), E.const(7, "int8"), (x * 4).b, two + 3, x % 1]  # type: ignore[attr-defined]
    assert not made
    monkeypatch.undo()
    want = [E.IntImm(7), E.IntImm(7, "int8"), E.IntImm(4), E.IntImm(5), E.IntImm(0)]
    assert all(_same(a, b) and hash(a) == hash(b) for a, b in zip(got, want, strict=True))
    assert _same(E.const(True), E.IntImm(1, "bool"))


@pytest.mark.parametrize("make, marker", [
    (lambda: E._rebuilders(_Fresh), "def rebuild("),
    (lambda: visitor.evolve(_Fresh(x, 1), _fresh_child=y), "def evolve("),
    (lambda: int_eval.compile_int(E.Min(x * 3, y) // (x + y))({x: 1, y: 2}), "def make("),
])
def test_generated_code_is_kept(monkeypatch: pytest.MonkeyPatch, make: Callable[[], Any],
                                marker: str) -> None:
    """The IR's generated texts go through ``code_of``: each is in the table that is saved
    beside vta's bytecode (a later process compiles none of them)."""
    monkeypatch.setattr(dc, "_used", {})
    for table in (E._REBUILD_FN, E._REBUILD_VARS):
        monkeypatch.delitem(table, _Fresh, raising=False)
    monkeypatch.delitem(visitor._EVOLVERS, (_Fresh, ("_fresh_child",)), raising=False)
    int_eval._maker.cache_clear()
    E._compiled.cache_clear()
    make()
    assert any(marker in text for text in dc._used)


@dataclass(frozen=True, slots=True)
class _Fresh:
    _fresh_child: E.Expr
    n: int


def test_attr_stmt_rebuilt_without_its_check(monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``AttrStmt`` rebuilt around a rewritten body keeps its key (which passed the check
    when it was made): it is made without ``__post_init__``'s check, equal to the statement
    the class makes."""
    seen: list[object] = []
    monkeypatch.setattr(S, "_check_key", lambda key, where: seen.append(key))
    buf = S.Buffer("b", (4,), "int32")
    stmt = S.AttrStmt(S.STAGE, "s", S.BufferStore(buf, x, (x,)))
    seen.clear()
    out = E.substitute(stmt, {x: z})
    assert not seen
    assert _same(out, S.AttrStmt(S.STAGE, "s", S.BufferStore(buf, z, (z,))))
    assert S.AttrStmt.post_init_checks == ("key",)


def test_linear_operands_read_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """``linear_form``'s sums and products read a constant or variable operand themselves:
    only the operators are dispatched; the form is the rules' own."""
    calls: list[type] = []
    real = poly._LINEAR

    def counted(e: E.Expr) -> tuple[dict[E.Expr, int], int]:
        calls.append(type(e))
        return real(e)

    monkeypatch.setattr(poly, "_LINEAR", counted)
    terms, c = poly.linear_form(x * 4 + y - 3 + (z + x) * 2)
    assert calls == [E.Add, E.Sub, E.Add, E.Mul, E.Mul, E.Add]
    assert terms == {x: 6, y: 1, z: 2} and list(terms) == [x, y, z] and c == -3
    assert poly.linear_form(E.Sub(x, x)) == ({}, 0)


def _leaves_answered(monkeypatch: pytest.MonkeyPatch) -> list[E.Expr]:
    """The variables and constants ``_rewrite_vars`` is called on from now on, in order."""
    leaves: list[E.Expr] = []
    real = E._rewrite_vars

    def counted(node: Any, *args: Any) -> Any:
        if type(node) in (E.Var, E.IntImm):
            leaves.append(node)
        return real(node, *args)

    monkeypatch.setattr(E, "_rewrite_vars", counted)
    return leaves


def test_variables_met_again_are_read_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A mapping substitution answers each variable once (``_rewrite_vars``): a rebuilder
    reads a variable met before, mapped or not, from the made values, and keeps a constant
    child, without the call; the tree is what answering every one gives."""
    leaves = _leaves_answered(monkeypatch)
    for table in (E._REBUILD_FN, E._REBUILD_VARS):
        monkeypatch.delitem(table, _Op, raising=False)
    one = E.IntImm(1)
    tree = _Op(_Op(x, y), _Op(_Op(x, one), _Op(y, x)))
    out = E.substitute(tree, {x: z})
    assert _same(out, _Op(_Op(z, y), _Op(_Op(z, one), _Op(y, z))))
    assert leaves == [x, y]


def test_tuple_items_met_again_are_read_directly(monkeypatch: pytest.MonkeyPatch) -> None:
    """A tuple field's variables (a load's indices) are read as a field's are: each variable
    answered once by ``_rewrite_vars``, a constant item kept."""
    leaves = _leaves_answered(monkeypatch)
    for table in (E._REBUILD_FN, E._REBUILD_VARS):
        for cls in (_Op, S.BufferLoad):
            monkeypatch.delitem(table, cls, raising=False)
    buf = S.Buffer("b", (4, 4, 4), "int32")
    one = E.IntImm(1)
    tree = _Op(S.BufferLoad(buf, (x, one, y), "int32"), S.BufferLoad(buf, (y, x, one), "int32"))
    out = E.substitute(tree, {x: z})
    assert _same(out, _Op(S.BufferLoad(buf, (z, one, y), "int32"),
                          S.BufferLoad(buf, (y, z, one), "int32")))
    assert leaves == [x, y]
