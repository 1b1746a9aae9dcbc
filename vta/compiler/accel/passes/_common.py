"""Helpers shared by the VTA passes: affine index analysis, integer evaluation (re-exported from
``vta.compiler.ir.int_eval``, the IR's one compiled form), statement rewriting and the
scratchpad layout of buffers (leading dims row-major, the last two dims are one entry)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from vta.compiler.accel.vta_ir import SRAM, Insn
from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.compiler.ir.int_eval import IntFn, compile_int, evaluate
from vta.config import BUFFER_KINDS
from vta.errors import CompileError, NotAffine

__all__ = ["CompileError", "NotAffine", "affine", "evaluate", "compile_int", "IntFn",
           "entry_shape", "flat_entry", "map_stmt", "stages", "sram_map", "entries_of",
           "strip_cast", "flat_stream", "with_stream", "distinct", "is_stmt_class"]

#: scratchpad scopes (acc also backs the out scratchpad: out[i] mirrors acc[i])
ONCHIP = BUFFER_KINDS


def strip_cast(e: E.Expr) -> E.Expr:
    while isinstance(e, E.Cast) and not e.dtype.startswith("float"):
        e = e.value
    return e


def affine(e: E.Expr, vars_: Iterable[E.Var]) -> tuple[dict[E.Var, int], E.Expr]:
    """Split ``e`` into ``sum(coeff[v] * v for v in vars_) + rest`` (rest free of ``vars_``):
    the IR's one affine decomposition (``poly.linear_form``) read for these variables."""
    vs = set(vars_)
    terms, const = poly.linear_form(e)
    coef: dict[E.Var, int] = {}
    rest: dict[E.Expr, int] = {}
    for atom, c in terms.items():
        if isinstance(atom, E.Var) and atom in vs:
            coef[atom] = c
        elif E.free_vars(atom) & vs:
            raise NotAffine(f"index {e} is not affine in the loop variables ({atom})")
        else:
            rest[atom] = c
    return coef, poly.from_linear(rest, const, e.dtype)


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
    """Rewrite statements: ``fn`` returns a replacement (not recursed) or None to recurse. The
    IR's one rewriter (``expr.substitute``) restricted to statements (expressions are not
    visited). A sequence's statements are each rewritten as ``map_stmt(x, fn)`` would (one
    ``substitute`` each: a statement shared by two of them meets ``fn`` in both)."""
    def visit(n: S.Stmt) -> S.Stmt | None:
        r = fn(n)
        if r is None and isinstance(n, S.SeqStmt):  # rebuilt sequences stay flat
            old = n.stmts
            new = tuple([sub(x, visit, is_stmt_class) for x in old])
            for a, b in zip(new, old, strict=True):
                if a is not b:
                    return S.seq(*new)
            return n
        return r

    sub = E.substitute
    result: S.Stmt = sub(s, visit, is_stmt_class)
    return result


def is_stmt_class(cls: type) -> bool:
    """Whether a class of IR nodes is a statement class: the ``descend`` of a rewrite of
    statements only (``map_stmt``'s), asked once per class."""
    return issubclass(cls, S.Stmt)


def stages(s: S.Stmt) -> Iterable[S.AttrStmt]:
    """Every ``AttrStmt(STAGE, ...)`` under ``s``, in program order."""
    if isinstance(s, S.AttrStmt) and s.key is S.STAGE:
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
    table = func.attr(SRAM)
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


def flat_stream(func: S.PrimFunc) -> tuple[list[Insn], list[S.Buffer]] | None:
    """The flat instruction stream of ``func`` (what ``flatten`` leaves: allocations around a
    sequence of ``Insn``s) and the allocations' buffers, outermost first; None when the body
    holds anything else."""
    body, wrap = func.body, []
    while isinstance(body, S.Allocate):
        wrap.append(body.buffer)
        body = body.body
    stmts = list(body.stmts) if isinstance(body, S.SeqStmt) else [body]
    insns = [x for x in stmts if isinstance(x, Insn)]
    return (insns, wrap) if len(insns) == len(stmts) else None


def with_stream(func: S.PrimFunc, insns: list[Insn], wrap: list[S.Buffer]) -> S.PrimFunc:
    """``func`` with ``insns`` as its flat stream inside the allocations of ``wrap``."""
    new: S.Stmt = S.SeqStmt(tuple(insns)) if len(insns) != 1 else insns[0]
    for b in reversed(wrap):
        new = S.Allocate(b, new)
    return func.with_body(new)


def distinct(a: np.ndarray) -> np.ndarray:
    """The sorted distinct values of a 1-D array: ``np.unique(a)``, without its question to
    numpy's masked-array module. ``np.unique`` asks ``np.ma.is_masked`` whenever it returns
    the values alone, which imports ``numpy.ma`` on first use (about 30 ms of a compiling
    process, a tenth of a layer's compile: nothing else a compile runs needs it)."""
    s = np.sort(a)
    if s.size < 2:
        return s
    keep = np.empty(s.size, bool)
    keep[0] = True
    np.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]
