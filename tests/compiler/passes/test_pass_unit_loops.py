"""unit_loops: inside a loop of one iteration its variable is 0."""

import pytest
from _accel_ir import PYNQ

from vta.compiler.accel.passes._common import map_stmt
from vta.compiler.accel.passes.unit_loops import fold_unit_loops
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop
from vta.compiler.ir.structural import assert_structural_equal

A = buf("A", (2, 4, 1, 16), "int8")


def test_unit_loop_variable_becomes_zero() -> None:
    t = buf("t", (1, 4, 1, 16), "int8", "inp")

    def body(zero: bool) -> object:
        return alloc(t, loop(1, lambda o: loop(4, lambda x: loop(16, lambda k: t.store(
            A.load(o * 2 if not zero else 0, x, 0, k), 0 if zero else o, x, 0, k)))))

    before = func("f", [A], body(False))
    expected = func("f", [A], body(True))
    assert_structural_equal(fold_unit_loops(before, PYNQ), expected)


def test_nested_unit_loops_fold_inside_out() -> None:
    before = func("f", [A], loop(1, lambda a: loop(1, lambda b: A.store(0, a + b, 0, 0, 0))))
    expected = func("f", [A], loop(1, lambda a: loop(1, lambda b: A.store(0, 0, 0, 0, 0))))
    assert_structural_equal(fold_unit_loops(before, PYNQ), expected)


def test_without_unit_loops_the_function_is_returned_unchanged() -> None:
    f = func("f", [A], loop(2, lambda i: A.store(0, i, 0, 0, 0)))
    assert fold_unit_loops(f, PYNQ) is f


def _one_at_a_time(f: S.PrimFunc) -> S.PrimFunc:
    """The pass's meaning, written as its first form ran it: at each unit loop (outermost
    first) its variable replaced by 0 in its whole body, then the body walked again."""
    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.For) and E.is_const(s.extent, 1) and E.is_const(s.min, 0):
            body = map_stmt(E.substitute(s.body, {s.var: E.IntImm(0)}), rewrite)
            return s if body is s.body else S.For(s.var, s.min, s.extent, body, s.kind, s.thread)
        return None

    return f.with_body(map_stmt(f.body, rewrite))


def _nested() -> S.PrimFunc:
    """Three unit loops around a loop whose extent is 1 only once the outer ones are 0, a
    real loop and a sequence: indices that fold only when several variables are pinned."""
    t = buf("t", (8, 4, 1, 16), "int8", "inp")
    return func("f", [A], alloc(t, loop(1, lambda a: loop(1, lambda b: S.seq(
        loop(1 + a * 3, lambda c: loop(4, lambda x: t.store(
            A.load((a * 3 + b) * 2 + c - b, x, 0, 0), (a + b) * 2 + c * 4 + 1, x, 0, 0))),
        loop(2, lambda y: loop(1, lambda d: t.store(
            A.load(y, d * a + b, 0, 0), y * (d + 1) + a, d, 0, 0))))))))


def test_pinning_together_is_pinning_one_at_a_time() -> None:
    f = _nested()
    t = buf("t", (8, 4, 1, 16), "int8", "inp")
    expected = func("f", [A], alloc(t, loop(1, lambda a: loop(1, lambda b: S.seq(
        loop(1, lambda c: loop(4, lambda x: t.store(A.load(0, x, 0, 0), 1, x, 0, 0))),
        loop(2, lambda y: loop(1, lambda d: t.store(A.load(y, 0, 0, 0), y, 0, 0, 0))))))))
    got = fold_unit_loops(f, PYNQ)
    assert_structural_equal(got, expected)
    assert_structural_equal(got, _one_at_a_time(f))


def test_each_expression_is_rewritten_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nested unit loops do not rewrite their bodies once per enclosing unit loop: the nodes
    handed to the rewriter with a mapping are at most the function's (the first form handed
    each innermost body over once per unit loop around it)."""
    f = _nested()
    handed: list[int] = []
    real = E.substitute

    def spy(node: object, mapping: object, descend: object = None) -> object:
        if isinstance(mapping, dict):
            handed.append(sum(1 for _ in E.walk(node)))
        return real(node, mapping, descend)  # type: ignore[arg-type]

    monkeypatch.setattr(E, "substitute", spy)
    fold_unit_loops(f, PYNQ)
    assert 0 < sum(handed) <= sum(1 for _ in E.walk(f.body))


def test_nested_unit_loops_rewrite_their_body_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Under four nested unit loops the store is rebuilt once, with every variable around it
    0 (not once per loop around it); a loop whose extent is 1 only once an outer unit loop's
    variable is 0 is a unit loop too, as substituting loop by loop made it."""
    before = func("f", [A], loop(1, lambda a: loop(1, lambda b: loop(1, lambda c: loop(
        1, lambda d: A.store(0, a + b + c + d, 0, 0, 0))))))
    expected = func("f", [A], loop(1, lambda a: loop(1, lambda b: loop(1, lambda c: loop(
        1, lambda d: A.store(0, 0, 0, 0, 0))))))
    rebuilt = []

    def counting(real):  # type: ignore[no-untyped-def]
        def counted(node, *args):  # type: ignore[no-untyped-def]
            rebuilt.append(type(node).__name__)
            return real(node, *args)
        return counted
    for table, real in zip((E._REBUILD_FN, E._REBUILD_VARS), E._rebuilders(S.BufferStore),
                           strict=True):
        monkeypatch.setitem(table, S.BufferStore, counting(real))
    assert_structural_equal(fold_unit_loops(before, PYNQ), expected)
    assert rebuilt.count("BufferStore") == 1
    monkeypatch.undo()

    grown = func("f", [A], loop(1, lambda a: loop(
        E.IntImm(1) + a * 3, lambda x: A.store(0, x + a, 0, 0, 0))))
    folded = func("f", [A], loop(1, lambda a: loop(1, lambda x: A.store(0, 0, 0, 0, 0))))
    assert_structural_equal(fold_unit_loops(grown, PYNQ), folded)
