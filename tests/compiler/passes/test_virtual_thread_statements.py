"""virtual_thread's statement walk (``_statements``): every statement in pre-order, children
last first (a stack), without expressions; one at a time, so ``_composite`` and ``_skewable``
stop at the first answer."""

from __future__ import annotations

from collections.abc import Iterator

from vta.compiler.accel.passes.virtual_thread import _statements
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import buf, loop, seq, stage

A = buf("a", (4, 16), "int32", "acc")


def _preorder(s: S.Stmt) -> list[S.Stmt]:
    """The walk's definition: a statement, then its statement children's walks, last first."""
    out = [s]
    for c in reversed(list(E.children(s))):
        if isinstance(c, S.Stmt):
            out += _preorder(c)
    return out


def test_statements_in_preorder_without_expressions() -> None:
    body = seq(
        stage("a", loop(4, lambda i: loop(16, lambda j: A.store(A.load(i, j) + 1, i, j)))),
        S.IfThenElse(E.IntImm(1) > 0, A.store(0, 0, 0), seq(A.store(1, 1, 1), A.store(2, 2, 2))),
        S.Allocate(A, loop(2, lambda k: A.store(k, k, 0))))
    walked = list(_statements(body))
    assert [id(x) for x in walked] == [id(x) for x in _preorder(body)]
    assert all(isinstance(x, S.Stmt) for x in walked)


def test_statements_come_one_at_a_time() -> None:
    s = stage("a", loop(4, lambda i: A.store(0, i, 0)))
    walk = _statements(s)
    assert isinstance(walk, Iterator) and next(walk) is s
