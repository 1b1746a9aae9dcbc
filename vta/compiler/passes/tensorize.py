"""Tensorize: regions under ``AttrStmt("tensorize")`` become GEMM nests on the intrinsic.

Pre:  DMA insertion has run. ``lower`` wraps the intrinsic's own loops (batch x block_out x
      block_in) in ``AttrStmt("tensorize", intrinsic)``; the loops around it up to the
      enclosing allocation or sequence form a perfect nest (the GEMM's outer loops) and the body
      is ``acc[.., b, o] = acc[.., b, o] + int32(inp[.., b, i]) * int32(wgt[.., o, i])``; all
      other loops index entries. A perfect nest that stores the constant 0 into an acc buffer
      (the reduction's init nest) is a GEMM reset.
Post: each such nest is a ``GemmNest`` (the outer loops, and the acc/inp/wgt entry indices as
      affine expressions including each buffer's SRAM base) under ``AttrStmt("stage",
      "<acc>.update")``; init nests are ``GemmNest(reset)`` under ``"<acc>.init"``. The
      intrinsic's own loops are gone (one micro-op executes them all).
"""

from __future__ import annotations

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.passes._common import (
    CompileError,
    flat_entry,
    loop_nest,
    map_stmt,
    sram_map,
    strip_cast,
)
from vta.compiler.vta_ir import GemmNest
from vta.config import HwConfig

__all__ = ["tensorize", "TensorizeError"]


class TensorizeError(CompileError):
    """A tensorize region does not match the GEMM intrinsic."""


def tensorize(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    bases = sram_map(func)

    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.AttrStmt) and s.key == "tensorize":
            g = _gemm(func, [], s.body, bases, hw)
            return S.AttrStmt("stage", f"{g.acc_buf.name}.update", g)
        if not isinstance(s, S.For):
            return None
        outer, inner = _peel(s)
        if isinstance(inner, S.AttrStmt) and inner.key == "tensorize":
            g = _gemm(func, outer, inner.body, bases, hw)
            return S.AttrStmt("stage", f"{g.acc_buf.name}.update", g)
        r = _reset(s, bases)
        return None if r is None else S.AttrStmt("stage", f"{r.acc_buf.name}.init", r)

    return func.with_body(map_stmt(func.body, rewrite))


def _peel(s: S.Stmt) -> tuple[list[tuple[E.Var, int]], S.Stmt]:
    loops: list[tuple[E.Var, int]] = []
    while (isinstance(s, S.For) and E.is_const(s.min, 0) and isinstance(s.extent, E.IntImm)):
        loops.append((s.var, s.extent.value))
        s = s.body
    return loops, s


def _reset(nest: S.Stmt, bases: dict[S.Buffer, E.Expr]) -> GemmNest | None:
    try:
        loops, body = loop_nest(nest)
    except CompileError:
        return None
    if not (isinstance(body, S.BufferStore) and body.buffer.scope == "acc"
            and isinstance(body.value, E.IntImm) and body.value.value == 0):
        return None
    entry = set(body.indices[-2:])
    outer = tuple((v, n) for v, n in loops if v not in entry)
    dst = bases[body.buffer] + flat_entry(body.buffer, body.indices)
    return GemmNest(True, outer, E.simplify_int(dst), E.IntImm(0), E.IntImm(0), body.buffer,
                    None, None)


def _gemm(func: S.PrimFunc, outer_loops: list[tuple[E.Var, int]], region: S.Stmt,
          bases: dict[S.Buffer, E.Expr], hw: HwConfig) -> GemmNest:
    where = f"{func.name}: tensorize region"
    inner, body = loop_nest(region)
    loops = [*outer_loops, *inner]
    if not isinstance(body, S.BufferStore) or body.buffer.scope != "acc":
        raise TensorizeError(f"{where}: the body must update an acc buffer")
    acc = body.buffer
    v = body.value
    if not isinstance(v, E.Add):
        raise TensorizeError(f"{where}: expected acc = acc + inp * wgt, got {v}")
    a, prod = v.a, v.b
    if not (isinstance(a, S.BufferLoad) and a.buffer is acc and a.indices == body.indices):
        a, prod = prod, a
    prod = strip_cast(prod)
    if not (isinstance(a, S.BufferLoad) and a.buffer is acc and isinstance(prod, E.Mul)):
        raise TensorizeError(f"{where}: expected acc = acc + inp * wgt, got {v}")
    x, w = strip_cast(prod.a), strip_cast(prod.b)
    if isinstance(x, S.BufferLoad) and x.buffer.scope == "wgt":
        x, w = w, x
    if not (isinstance(x, S.BufferLoad) and x.buffer.scope == "inp"
            and isinstance(w, S.BufferLoad) and w.buffer.scope == "wgt"):
        raise TensorizeError(f"{where}: the product must read an inp and a wgt buffer")
    b_, o_ = body.indices[-2:]
    xb, xi = x.indices[-2:]
    wo, wi = w.indices[-2:]
    g = hw.gemm
    # a batch of one: its loop was folded (unit_loops) and both indices are the constant 0
    unit_b = g.batch == 1 and E.is_const(b_, 0) and E.is_const(xb, 0)
    if not ((b_ is xb or unit_b) and o_ is wo and xi is wi
            and isinstance(o_, E.Var) and isinstance(xi, E.Var)
            and (unit_b or isinstance(b_, E.Var))):
        raise TensorizeError(f"{where}: the intrinsic's batch/block loops must index the entry "
                             f"dims: acc[.., b, o] += inp[.., b, i] * wgt[.., o, i]")
    ext = dict(loops)
    want: dict[E.Var, int] = {o_: g.block_out, xi: g.block_in}
    if not unit_b:
        assert isinstance(b_, E.Var)  # checked above
        want[b_] = g.batch
    for var, n in want.items():
        if ext.get(var) != n:
            raise TensorizeError(f"{where}: loop {var.name} has extent {ext.get(var)}, the "
                                 f"{hw.name} GEMM intrinsic needs {n} "
                                 f"({g.batch}x{g.block_in}x{g.block_out})")
    outer = tuple((var, n) for var, n in loops if var not in want and n != 1)
    dst = E.simplify_int(bases[acc] + flat_entry(acc, body.indices))
    src = E.simplify_int(bases[x.buffer] + flat_entry(x.buffer, x.indices))
    wgt = E.simplify_int(bases[w.buffer] + flat_entry(w.buffer, w.indices))
    return GemmNest(False, outer, dst, src, wgt, acc, x.buffer, w.buffer)
