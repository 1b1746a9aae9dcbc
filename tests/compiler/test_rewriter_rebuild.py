"""The rewriter's per-class rebuilders (``expr._rebuilder``), the fields it skips
(``visitor.child_slots``) and ``visitor.evolve``'s keyword copier: each gives what the general
path gave (``tests/compiler/test_substitute.py`` checks random trees against the rewriter
before them), without the general path's work."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import ClassVar

import pytest
from test_evolve import _Checked

from vta.compiler.accel.vta_ir import ComputeNest
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir import visitor
from vta.compiler.ir.visitor import _scalar_only, child_slots, evolve


@pytest.mark.parametrize("annotation, scalar", [
    ("int", True), (int, True), ("str | None", True), ("None | bool", True),
    ("tuple[int, ...]", True), ("tuple[str, ...]", True), ("tuple[int | None, ...]", True),
    ("Expr", False), ("tuple[Expr, ...]", False), ("Stmt | None", False), ("Any", False),
    ("tuple[tuple[str, Any], ...]", False), ("str | Expr", False), ("None", False),
])
def test_scalar_only_annotations(annotation: object, scalar: bool) -> None:
    assert _scalar_only(annotation) is scalar


def test_fields_of_scalars_are_no_children() -> None:
    """A buffer's shape, a loop's thread name and a nest's operand names hold no node: a
    traversal does not read them (a ``Buffer`` is a leaf)."""
    assert child_slots(S.Buffer) == ()
    assert child_slots(S.For) == ("var", "min", "extent", "body", "kind")
    names = child_slots(ComputeNest)
    assert names is not None and "operands" not in names and "indices" in names


def _tree() -> tuple[S.Stmt, E.Var, E.Var]:
    i, j = E.Var("i"), E.Var("j")
    buf = S.Buffer("A", (4, 4), "int32")
    store = buf.store(buf.load(i, j) * 2 + 1, i, j)
    loop = S.For(j, E.IntImm(0), E.IntImm(4), S.AttrStmt(S.STAGE, "s", store))
    return S.For(i, E.IntImm(0), E.IntImm(4), loop), i, j


def test_rebuilt_without_evolve_nor_replace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slotted nodes are rebuilt by their class's rebuilder through the slots' setters, a
    class with a ``__post_init__`` (``AttrStmt``) by evolve's keyword copier: neither goes
    through ``dataclasses.replace``; the result is the one ``replace`` builds."""
    s, i, j = _tree()
    k = E.Var("k")
    expected = S.For(k, E.IntImm(0), E.IntImm(4), S.For(
        j, E.IntImm(0), E.IntImm(4), S.AttrStmt(S.STAGE, "s", dataclasses.replace(
            s.body.body.body, value=s.body.body.body.value.a.a.buffer.load(k, j) * 2 + 1,
            indices=(k, j)))))

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("dataclasses.replace called")

    monkeypatch.setattr(visitor.dataclasses, "replace", refuse)
    out = E.substitute(s, {i: k})
    assert out == expected and isinstance(out, S.For)
    assert out.var is k and out.body.var is j  # a loop's variable is replaced too
    assert out.min is s.min  # unchanged children are the same objects


def test_unchanged_tree_is_itself() -> None:
    s, _i, _j = _tree()
    assert E.substitute(s, {E.Var("x"): 3}) is s
    assert E.substitute(s, lambda n: None) is s


def test_rebuilt_binop_is_folded_again() -> None:
    i, j = E.Var("i"), E.Var("j")
    assert E.substitute(i * 4 + j, {i: 2, j: 1}) == E.IntImm(9)
    assert E.substitute(i * 4 + j, {i: 0}) is j


def test_post_init_class_called_with_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class with a ``__post_init__`` is copied by calling it with every field by keyword
    (its check runs, as under ``replace``), not through ``dataclasses.replace``."""
    expected = dataclasses.replace(_Checked(2), x=5)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("dataclasses.replace called")

    monkeypatch.setattr(visitor.dataclasses, "replace", refuse)
    new = evolve(_Checked(2), x=5)
    assert new == expected and new.doubled == 10
    with pytest.raises(TypeError):  # the AttrStmt's own key check
        evolve(S.AttrStmt(S.STAGE, "s", S.Evaluate(E.IntImm(0))), key="not a key")


@dataclass(frozen=True, slots=True)
class _Logged(E.BinOp):
    """An operator whose construction does more than fill its slots."""

    made: ClassVar[list[str]] = []

    def __post_init__(self) -> None:
        _Logged.made.append(f"{self.a}")


def test_binop_made_by_its_slots_or_by_its_class(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_bin`` fills a built-in operator's slots without calling its ``__init__`` (the same
    node as the class makes), and calls a class whose construction does more."""
    i, j = E.Var("i"), E.Var("j")
    expected = E.Add(i, j, "int32")
    assert i + j == expected  # the setters are looked up

    def refuse(*args: object) -> None:
        raise AssertionError("__init__ called")

    monkeypatch.setattr(E.Add, "__init__", refuse)
    made = i + j
    assert made == expected and type(made) is E.Add and made.dtype == "int32"
    monkeypatch.undo()
    assert E._bin(_Logged, i, 3) == _Logged(i, E.IntImm(3), "int32")
    assert _Logged.made == [str(i), str(i)]


def _ref_walk(node: object) -> list[object]:
    """Pre-order, every node, reading every field (``visitor.node_fields``)."""
    out = [node]
    for name in visitor.node_fields(type(node)) or ():
        v = getattr(node, name)
        for x in (v if type(v) is tuple else (v,)):
            if visitor.node_fields(type(x)) is not None:
                out += _ref_walk(x)
    return out


def test_walk_is_pre_order_by_the_pushers() -> None:
    """``walk`` (each class's pusher putting its children on the stack) visits what a
    recursive pre-order walk over every field visits, in the same order, shared subtrees as
    often as they occur."""
    s, i, j = _tree()
    shared = i * 3 + j
    seq = S.SeqStmt((s, S.IfThenElse(E.Cmp("<", shared, E.IntImm(2)), S.Evaluate(
        E.Call("f", (shared, E.Select(E.Cmp("<", i, j), i, j), shared))), None), s))
    for node in (seq, shared, i, S.Buffer("B", (2,), "int8")):
        got = list(E.walk(node))
        assert len(got) == len(_ref_walk(node))
        assert all(a is b for a, b in zip(got, _ref_walk(node), strict=True))
    assert E.free_vars(seq) == {i, j}


def test_constant_folds_memoised(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folding the same constants in the same type asks ``semantics`` once: a division's
    answer (and a division by zero's refusal) is remembered, by the operands' types too."""
    from vta.compiler.ir import semantics

    a, b = E.IntImm(12347, "int16"), E.IntImm(-7, "int16")
    first = E._bin(E.FloorDiv, a, b)
    zero = E._bin(E.FloorMod, a, E.IntImm(0, "int16"))

    def refuse(*args: object) -> None:
        raise AssertionError("semantics asked again")

    monkeypatch.setattr(semantics, "undefined", refuse)
    assert E._bin(E.FloorDiv, a, b) == first == E.IntImm(12347 // -7, "int16")
    assert E._bin(E.FloorMod, a, E.IntImm(0, "int16")) == zero
    assert isinstance(zero, E.FloorMod)  # no meaning: left unfolded
    with pytest.raises(AssertionError, match="asked again"):
        E._bin(E.FloorDiv, E.IntImm(True, "int16"), b)  # a bool is another key
