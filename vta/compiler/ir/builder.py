"""Short constructors for writing loop-nest IR by hand (pass tests, examples).

The node constructors (``stmt.For(var, IntImm(0), IntImm(n), body, kind, thread)``) spell out
every field; these helpers take the common defaults and make each bound variable fresh, handing
it to a function that builds the body, so a nest reads like the code it stands for::

    A = buf("A", (4, 16), "int8")
    body = loop(4, lambda i: loop(16, lambda j: B.store(A.load(i, j) + 1, i, j)))
    f = func("add_one", [A, B], body)

Two nests written this way never share a variable; ``structural.assert_structural_equal``
pairs them positionally.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S

__all__ = ["buf", "loop", "let", "alloc", "attr", "stage", "func", "seq", "const"]

const = E.const
seq = S.seq


def buf(name: str, shape: tuple[int, ...], dtype: str = "int32", scope: str = "global"
        ) -> S.Buffer:
    """A buffer (``stmt.Buffer``): identity is the object."""
    return S.Buffer(name, tuple(shape), dtype, scope)


def loop(extent: E.ExprLike, body: Callable[[E.Var], S.Stmt], *, name: str = "i",
         start: E.ExprLike = 0, kind: S.ForKind = S.ForKind.SERIAL, thread: str | None = None,
         var: E.Var | None = None) -> S.For:
    """``for v in [start, start + extent): body(v)`` with a fresh ``v`` (or ``var``)."""
    v = var if var is not None else E.Var(name)
    return S.For(v, E.as_expr(start), E.as_expr(extent), body(v), kind, thread)


def let(value: E.ExprLike, body: Callable[[E.Var], S.Stmt], *, name: str = "x",
        dtype: str = "int32") -> S.LetStmt:
    """``let v = value in body(v)`` with a fresh ``v``."""
    v = E.Var(name, dtype)
    return S.LetStmt(v, E.as_expr(value), body(v))


def alloc(buffer: S.Buffer, *body: S.Stmt) -> S.Allocate:
    """``buffer`` allocated around ``body`` (several statements become a sequence)."""
    return S.Allocate(buffer, S.seq(*body))


def attr(key: S.AttrKey[Any] | str, value: Any, *body: S.Stmt) -> S.AttrStmt:
    """``AttrStmt(key, value)`` over ``body``; ``key`` by its name as ``func``'s keywords."""
    return S.AttrStmt(key if isinstance(key, S.AttrKey) else S.AttrKey.named(key), value,
                      S.seq(*body))


def stage(name: str, *body: S.Stmt) -> S.AttrStmt:
    """``AttrStmt(STAGE, name)``: how ``lower`` marks each stage of a schedule."""
    return attr(S.STAGE, name, *body)


def func(name: str, params: list[S.Buffer] | tuple[S.Buffer, ...], *body: S.Stmt,
         **attrs: Any) -> S.PrimFunc:
    """A ``PrimFunc`` (attributes as keywords by their keys' names, in order: ``launch=...``
    is ``gpu.dialect.LAUNCH``)."""
    return S.PrimFunc(name, tuple(params), S.seq(*body),
                      tuple((S.AttrKey.named(k), v) for k, v in attrs.items()))
