"""Structural verifier for the loop-nest IR (a pass that changes nothing, or raises).

Checks that hold after every pass, for every target: each variable is bound (by a loop, a let
or a thread binding) before use and bound only once; each buffer access has as many indices as
the buffer has dimensions; each non-global buffer is allocated around its uses; loop extents
are positive when constant. Target pipelines add their own checks (scratchpad fit, ISA ranges).

A target dialect statement states what it holds (docs/ir.md): ``exprs()`` (checked like any
expression), ``buffers()`` (each must be a parameter or allocated around it) and, when it binds
variables of its own (an accelerator ``ComputeNest``'s loops), ``binds()``: those are bound,
once, for its expressions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import VerifyError

__all__ = ["VerifyError", "verify", "verify_after"]


def verify(func: S.PrimFunc) -> S.PrimFunc:
    """Return ``func`` unchanged if it is well formed, else raise VerifyError."""
    _Checker(func).run()
    return func


def verify_after(pass_name: str, func: S.PrimFunc) -> S.PrimFunc:
    """``verify`` on the output of pass ``pass_name``: the error names the pass that broke the
    IR (both pipelines run it after every pass)."""
    try:
        return verify(func)
    except VerifyError as e:
        raise VerifyError(f"after pass {pass_name}: {e}") from e


class _Checker:
    def __init__(self, func: S.PrimFunc) -> None:
        self.func = func
        self.bound: set[E.Var] = set()
        self.ever_bound: set[E.Var] = set()
        self.live: set[S.Buffer] = set(func.params)

    def fail(self, msg: str) -> VerifyError:
        return VerifyError(f"{self.func.name}: {msg}")

    def run(self) -> None:
        self.stmt(self.func.body)

    def bind(self, v: E.Var) -> None:
        if v in self.ever_bound:
            raise self.fail(f"variable {v.name} is bound twice")
        self.bound.add(v)
        self.ever_bound.add(v)

    def expr(self, e: E.Expr) -> None:
        """Check every node under ``e`` in pre-order (``expr.walk``'s order, so the first
        culprit is the one reported), reading only the fields that can hold nodes."""
        bound = self.bound
        for n in E.walk(e):
            if isinstance(n, E.Var):
                if n not in bound:
                    raise self.fail(f"variable {n.name} is used outside the loop or let binding "
                                    f"it")
            elif isinstance(n, S.BufferLoad):
                self.access(n.buffer, n.indices, "load from")

    def access(self, b: S.Buffer, idx: tuple[E.Expr, ...], what: str) -> None:
        if len(idx) != b.ndim:
            raise self.fail(f"{what} {b.name}: {len(idx)} indices for {b.ndim} dimensions")
        if b not in self.live:
            raise self.fail(f"{what} {b.name} (scope {b.scope}) outside its allocation")

    def stmt(self, s: S.Stmt) -> None:
        if isinstance(s, S.SeqStmt):
            stmt, dialect, known = self.stmt, self.dialect, _DIALECT.get
            for x in s.stmts:
                # the statements of a flat stream are dialect ones, checked directly with
                # their class's methods
                m = known(type(x))
                if m is None:
                    stmt(x)
                else:
                    dialect(x, m)
        elif isinstance(s, S.For):
            self.expr(s.min)
            self.expr(s.extent)
            if isinstance(s.extent, E.IntImm) and s.extent.value <= 0:
                raise self.fail(f"loop {s.var.name} has extent {s.extent.value}")
            self.bind(s.var)
            self.stmt(s.body)
            self.bound.discard(s.var)
        elif isinstance(s, S.LetStmt):
            self.expr(s.value)
            self.bind(s.var)
            self.stmt(s.body)
            self.bound.discard(s.var)
        elif isinstance(s, S.BufferStore):
            self.access(s.buffer, s.indices, "store to")
            self.expr(s.value)
            for i in s.indices:
                self.expr(i)
        elif isinstance(s, S.IfThenElse):
            self.expr(s.cond)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, S.Allocate):
            self.live.add(s.buffer)
            self.stmt(s.body)
            self.live.discard(s.buffer)
        elif isinstance(s, S.Evaluate):
            self.expr(s.value)
        elif isinstance(s, S.AttrStmt):
            self.stmt(s.body)
        elif isinstance(s, S.Barrier):
            pass
        else:
            self.dialect(s)

    def dialect(self, s: S.Stmt, methods: _Methods | None = None) -> None:
        """A target dialect statement: its own variables, expressions and buffers (``methods``:
        its class's, ``_dialect_methods``, where the caller has them)."""
        binds, exprs, buffers = methods or _dialect_methods(type(s))
        own = tuple(binds(s)) if binds is not None else ()
        for v in own:
            self.bind(v)
        if exprs is not None:
            for e in exprs(s):
                self.expr(e)
        for v in own:
            self.bound.discard(v)
        if buffers is not None:
            live = self.live
            for b in buffers(s):
                if b not in live:
                    raise self.fail(f"{type(s).__name__} uses {b.name} outside its allocation")


_Method = Callable[[Any], Iterable[Any]] | None
_Methods = tuple[_Method, _Method, _Method]
#: per dialect statement class: its ``binds``, ``exprs`` and ``buffers`` (None: it has none)
_DIALECT: dict[type, _Methods] = {}


def _dialect_methods(cls: type) -> _Methods:
    """What a dialect class states about its statements, looked up once per class (a flat
    instruction stream verifies thousands of statements of one class)."""
    hit = _DIALECT.get(cls)
    if hit is None:
        hit = _DIALECT[cls] = (getattr(cls, "binds", None), getattr(cls, "exprs", None),
                               getattr(cls, "buffers", None))
    return hit
