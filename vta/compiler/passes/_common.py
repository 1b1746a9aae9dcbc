"""Helpers shared by the VTA passes: affine index analysis, integer evaluation, statement
rewriting and the scratchpad layout of buffers (leading dims row-major, the last two dims are
one entry)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.errors import VtaError

__all__ = ["CompileError", "NotAffine", "affine", "evaluate", "entry_shape", "flat_entry",
           "map_stmt", "stages", "sram_map", "entries_of", "strip_cast"]

#: scratchpad scopes (acc also backs the out scratchpad: out[i] mirrors acc[i])
ONCHIP = ("inp", "wgt", "acc", "out", "uop")


class CompileError(VtaError):
    """The VTA pipeline cannot compile this function; the message names the culprit."""


class NotAffine(CompileError):
    """An index expression is not affine in the loop variables."""


def strip_cast(e: E.Expr) -> E.Expr:
    while isinstance(e, E.Cast) and not e.dtype.startswith("float"):
        e = e.value
    return e


def affine(e: E.Expr, vars_: Iterable[E.Var]) -> tuple[dict[E.Var, int], E.Expr]:
    """Split ``e`` into ``sum(coeff[v] * v for v in vars_) + rest`` (rest free of ``vars_``)."""
    vs = set(vars_)

    def go(x: E.Expr) -> tuple[dict[E.Var, int], E.Expr]:
        x = strip_cast(x)
        if isinstance(x, E.Var):
            return ({x: 1}, E.IntImm(0)) if x in vs else ({}, x)
        if isinstance(x, E.IntImm):
            return {}, x
        if isinstance(x, (E.Add, E.Sub)):
            ca, ra = go(x.a)
            cb, rb = go(x.b)
            sign = 1 if isinstance(x, E.Add) else -1
            c = dict(ca)
            for v, k in cb.items():
                c[v] = c.get(v, 0) + sign * k
            return {v: k for v, k in c.items() if k}, (ra + rb if sign > 0 else ra - rb)
        if isinstance(x, E.Mul):
            ca, ra = go(x.a)
            cb, rb = go(x.b)
            if not ca and isinstance(ra, E.IntImm):
                return {v: k * ra.value for v, k in cb.items()}, ra * rb
            if not cb and isinstance(rb, E.IntImm):
                return {v: k * rb.value for v, k in ca.items()}, ra * rb
            if not ca and not cb:
                return {}, ra * rb
            raise NotAffine(f"index {x} is not affine (product of loop variables)")
        if not (E.free_vars(x) & vs):
            return {}, x
        raise NotAffine(f"index {x} is not affine in the loop variables")

    return go(e)


def evaluate(e: Any, env: dict[E.Var, int]) -> int:
    """Evaluate an integer expression under ``env`` (every free variable must be bound)."""
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        try:
            return env[e]
        except KeyError:
            raise CompileError(f"variable {e.name} is not bound where it is evaluated") from None
    if isinstance(e, E.Cast):
        return evaluate(e.value, env)
    if isinstance(e, E.BinOp):
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        t = type(e)
        if t is E.Add:
            return a + b
        if t is E.Sub:
            return a - b
        if t is E.Mul:
            return a * b
        if t is E.FloorDiv:
            return a // b
        if t is E.FloorMod:
            return a % b
        if t is E.Min:
            return min(a, b)
        if t is E.Max:
            return max(a, b)
        if t is E.Shr:
            return a >> b
        if t is E.Shl:
            return a << b
    raise CompileError(f"cannot evaluate {e} as an integer")


def entry_shape(buf: S.Buffer) -> tuple[int, ...]:
    """The leading (entry-indexing) dims of a packed buffer: all but the last two."""
    return buf.shape[:-2]


def entries_of(buf: S.Buffer) -> int:
    n = 1
    for d in entry_shape(buf):
        n *= d
    return n


def flat_entry(buf: S.Buffer, idx: tuple[E.Expr, ...]) -> E.Expr:
    """Row-major entry index of ``buf[idx]`` (the last two indices select inside the entry)."""
    shape = entry_shape(buf)
    out: E.Expr = E.IntImm(0)
    for d, i in zip(shape, idx[: len(shape)], strict=True):
        out = out * d + i
    return out


def map_stmt(s: S.Stmt, fn: Callable[[S.Stmt], S.Stmt | None]) -> S.Stmt:
    """Post-order-free rewrite: ``fn`` returns a replacement (not recursed) or None to recurse."""
    r = fn(s)
    if r is not None:
        return r
    if isinstance(s, S.SeqStmt):
        new = tuple(map_stmt(x, fn) for x in s.stmts)
        return s if all(a is b for a, b in zip(new, s.stmts, strict=True)) else S.seq(*new)
    if isinstance(s, (S.For, S.Allocate, S.AttrStmt, S.LetStmt)):
        body = map_stmt(s.body, fn)
        if body is s.body:
            return s
        import dataclasses

        return dataclasses.replace(s, body=body)
    if isinstance(s, S.IfThenElse):
        t = map_stmt(s.then_case, fn)
        f = None if s.else_case is None else map_stmt(s.else_case, fn)
        if t is s.then_case and f is s.else_case:
            return s
        return S.IfThenElse(s.cond, t, f)
    return s


def stages(s: S.Stmt) -> Iterable[S.AttrStmt]:
    """Every ``AttrStmt("stage", ...)`` under ``s``, in program order."""
    if isinstance(s, S.AttrStmt) and s.key == "stage":
        yield s
    if isinstance(s, S.SeqStmt):
        for x in s.stmts:
            yield from stages(x)
    elif hasattr(s, "body") and isinstance(s.body, S.Stmt):
        yield from stages(s.body)
    elif isinstance(s, S.IfThenElse):
        yield from stages(s.then_case)
        if s.else_case is not None:
            yield from stages(s.else_case)


def sram_map(func: S.PrimFunc) -> dict[S.Buffer, E.Expr]:
    """Buffer -> SRAM base entry (an expression in the virtual-thread variable when the buffer
    is duplicated per thread), as recorded by scratchpad allocation."""
    table = func.attr("sram")
    if table is None:
        raise CompileError(f"{func.name}: scratchpad allocation has not run")
    return {b: base for b, base, _n in table}


def loop_nest(s: S.Stmt) -> tuple[list[tuple[E.Var, int]], S.Stmt]:
    """Peel perfectly nested constant-extent loops: ([(var, extent)...], innermost body)."""
    loops: list[tuple[E.Var, int]] = []
    while isinstance(s, S.For):
        if not (isinstance(s.min, E.IntImm) and s.min.value == 0
                and isinstance(s.extent, E.IntImm)):
            raise CompileError(f"loop {s.var.name} must start at 0 with a constant extent")
        loops.append((s.var, s.extent.value))
        s = s.body
    return loops, s


def set_attr(func: S.PrimFunc, key: str, value: Any) -> tuple[tuple[str, Any], ...]:
    return (*((k, v) for k, v in func.attrs if k != key), (key, value))
