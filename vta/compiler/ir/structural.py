"""Structural equality of IR: two trees are equal when they are the same up to variable identity.

``Var`` and ``Buffer`` are identified by object (expr.py, stmt.py), so two functions written
separately never share a variable. As TVM's ``StructuralEqual`` does, variables (and buffers)
are bound positionally: the first time a left-hand variable meets a right-hand one (a loop's
variable, a let's, a parameter, in traversal order, so at its definition) the two are paired,
and every later occurrence must meet its partner. The pairing is one-to-one; names are printing
hints and are not compared (a buffer's shape, dtype and scope are). Everything else compares
field by field: dataclass nodes (expressions, statements, dialect statements, annotations such
as ``LaunchConfig``) of the same class, tuples element-wise, other values with ``==``. Fields
declared ``compare=False`` (an ``Insn``'s note) are skipped.

``assert_structural_equal`` is the form tests use: on a mismatch it raises ``AssertionError``
with the path to the first difference and a unified diff of both printed IRs.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.printer import expr_str, func_str, stmt_str
from vta.compiler.ir.visitor import node_fields

__all__ = ["structural_equal", "assert_structural_equal", "first_difference"]


def structural_equal(a: Any, b: Any) -> bool:
    """Whether ``a`` and ``b`` are the same IR up to the identity of variables and buffers."""
    return first_difference(a, b) is None


def first_difference(a: Any, b: Any) -> str | None:
    """Where ``a`` and ``b`` first differ (``path: left != right``), or None when equal."""
    return _Comparer().diff(a, b, "")


def assert_structural_equal(actual: Any, expected: Any) -> None:
    """Raise ``AssertionError`` unless ``actual`` and ``expected`` are structurally equal; the
    message names the first difference and shows both IRs printed, as a unified diff."""
    where = first_difference(actual, expected)
    if where is None:
        return
    left, right = _text(actual), _text(expected)
    diff = "\n".join(difflib.unified_diff(right.splitlines(), left.splitlines(), "expected",
                                          "actual", lineterm=""))
    if not diff:
        diff = "(the printed IRs are identical: the difference is in something the printer " \
               "does not show)\n--- both:\n" + left
    raise AssertionError(f"IR differs at {where}\n{diff}")


def _text(x: Any) -> str:
    if isinstance(x, S.PrimFunc):
        return func_str(x)
    if isinstance(x, S.Stmt):
        return stmt_str(x)
    if isinstance(x, E.Expr):
        return expr_str(x)
    return repr(x)


#: what may hold a variable or buffer: compared in full even when both sides share the object
#: (the same subtree under loops whose variables were paired differently means different IR)
_MAY_BIND = (E.Expr, S.Stmt, S.Buffer, tuple, list)

_COMPARED: dict[type, tuple[str, ...]] = {}


def _compared_fields(cls: type) -> tuple[str, ...]:
    hit = _COMPARED.get(cls)
    if hit is None:
        hit = _COMPARED[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.compare)
    return hit


class _Comparer:
    def __init__(self) -> None:
        self.fwd: dict[int, Any] = {}  # id(left object) -> right object
        self.back: dict[int, Any] = {}  # id(right object) -> left object
        self.keep: list[Any] = []  # keep paired objects alive so ids stay theirs

    def pair(self, a: Any, b: Any, path: str) -> str | None:
        """Pair (or check the pairing of) two identity-compared objects."""
        fa, fb = self.fwd.get(id(a)), self.back.get(id(b))
        if fa is None and fb is None:
            self.fwd[id(a)], self.back[id(b)] = b, a
            self.keep += [a, b]
            return None
        if fa is b:
            return None
        what = type(a).__name__.lower()
        if fa is None:
            return (f"{path}: {what} {_name(a)} meets {_name(b)}, which is already paired "
                    f"with {_name(fb)}")
        return f"{path}: {what} {_name(a)} is paired with {_name(fa)}, here meets {_name(b)}"

    def diff(self, a: Any, b: Any, path: str) -> str | None:
        if a is b and not isinstance(a, _MAY_BIND):
            return None  # a shared leaf (an instruction definition, an intrinsic)
        if type(a) is not type(b):
            return f"{path or 'root'}: {_show(a)} ({type(a).__name__}) != " \
                   f"{_show(b)} ({type(b).__name__})"
        if isinstance(a, E.Var):
            if a.dtype != b.dtype:
                return f"{path}: variable {a.name}: dtype {a.dtype} != {b.dtype}"
            return self.pair(a, b, path)
        if isinstance(a, S.Buffer):
            for f in ("shape", "dtype", "scope"):
                if getattr(a, f) != getattr(b, f):
                    return (f"{path}: buffer {a.name} {f} {getattr(a, f)} != "
                            f"{b.name} {getattr(b, f)}")
            return self.pair(a, b, path)
        if isinstance(a, S.PrimFunc):
            return self.fields(a, b, path, ("name", "params", "body", "attrs"))
        if isinstance(a, (tuple, list)):
            if len(a) != len(b):
                return f"{path or 'root'}: {len(a)} elements != {len(b)}"
            for k, (x, y) in enumerate(zip(a, b, strict=True)):
                d = self.diff(x, y, f"{path}[{k}]")
                if d is not None:
                    return d
            return None
        if node_fields(type(a)) is not None or (dataclasses.is_dataclass(a)
                                                 and not getattr(a, "_ir_opaque", False)):
            return self.fields(a, b, path, _compared_fields(type(a)))
        if a != b:
            return f"{path or 'root'}: {_show(a)} != {_show(b)}"
        return None

    def fields(self, a: Any, b: Any, path: str, names: tuple[str, ...]) -> str | None:
        for n in names:
            d = self.diff(getattr(a, n), getattr(b, n), f"{path}.{n}" if path else n)
            if d is not None:
                return d
        return None


def _name(x: Any) -> str:
    return getattr(x, "name", repr(x))


def _show(x: Any) -> str:
    text = _text(x) if isinstance(x, (S.Stmt, E.Expr, S.PrimFunc)) else repr(x)
    return text if len(text) <= 80 else text[:77] + "..."
