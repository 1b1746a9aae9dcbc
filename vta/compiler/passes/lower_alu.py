"""ALU lowering: element-wise epilogue stages on acc buffers become ALU nests.

Pre:  tensorize has run. An epilogue stage is a perfect loop nest storing into an acc buffer a
      chain of operations on the same element: ``acc[i] = f(acc[i])`` with f built from
      ``>> k`` (SHR imm), ``<< k`` (SHR -k), ``+ c`` / ``- c`` (ADD imm), ``+ acc2[j]``
      (ADD reg: bias add after the bias LOAD into acc), ``* c`` (MUL imm), ``max(., c)`` /
      ``min(., c)`` (MAX/MIN imm: ReLU is max 0, clip is max lo then min hi). The innermost two
      indices are the entry (one ALU vector).
Post: each such stage is a sequence of ``AluNest``s, one per operation, in evaluation order.
      Immediates are checked against the ALU's immediate width and ops against the config's
      ALU op list (a named error otherwise). The narrowing cast stays with the out copy (the
      STORE of the out scratchpad).
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
from vta.compiler.vta_ir import AluNest
from vta.config import HwConfig
from vta.isa import AluOp

__all__ = ["lower_alu"]


def lower_alu(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    bases = sram_map(func)

    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.AttrStmt) and s.key == "stage" and isinstance(s.body, S.For):
            r = _alu(func, str(s.value), s.body, bases, hw)
            return None if r is None else S.AttrStmt("stage", s.value, r)
        return None

    return func.with_body(map_stmt(func.body, rewrite))


def _alu(func: S.PrimFunc, name: str, nest: S.Stmt, bases: dict[S.Buffer, E.Expr],
         hw: HwConfig) -> S.Stmt | None:
    try:
        loops, body = loop_nest(nest)
    except CompileError:
        return None
    if not isinstance(body, S.BufferStore) or body.buffer.scope != "acc":
        return None
    acc = body.buffer
    me = S.BufferLoad(acc, body.indices, acc.dtype)
    where = f"{func.name}: stage {name}"

    def is_me(e: E.Expr) -> bool:
        e = strip_cast(e)
        return isinstance(e, S.BufferLoad) and e.buffer is acc and e.indices == body.indices

    def chain(e: E.Expr) -> list[tuple[AluOp, object]] | None:
        e = strip_cast(e)
        if is_me(e):
            return []
        if isinstance(e, (E.Shr, E.Shl)) and isinstance(e.b, E.IntImm):
            c = chain(e.a)
            k = e.b.value if isinstance(e, E.Shr) else -e.b.value
            return None if c is None else [*c, (AluOp.SHR, k)]
        if isinstance(e, (E.Add, E.Sub, E.Mul, E.Min, E.Max)):
            op = {E.Add: AluOp.ADD, E.Sub: AluOp.ADD, E.Mul: AluOp.MUL, E.Min: AluOp.MIN,
                  E.Max: AluOp.MAX}[type(e)]
            for inner, other in ((e.a, e.b), (e.b, e.a)):
                if isinstance(e, E.Sub) and inner is e.b:
                    continue
                c = chain(inner)
                if c is None:
                    continue
                other = strip_cast(other)
                if isinstance(other, E.IntImm):
                    return [*c, (op, -other.value if isinstance(e, E.Sub) else other.value)]
                if (isinstance(other, S.BufferLoad) and other.buffer.scope == "acc"
                        and not isinstance(e, E.Sub)):
                    return [*c, (op, other)]
                raise CompileError(f"{where}: operand {other} must be a constant or an acc buffer")
        return None

    ops = chain(body.value)
    if not ops:  # not an ALU chain on the acc entry itself (or a bare copy): leave it
        return None
    entry = set(body.indices[-2:])
    outer = tuple((v, n) for v, n in loops if v not in entry)
    dst = E.simplify_int(bases[acc] + flat_entry(acc, body.indices))
    lim = 1 << (hw.alu.imm_bits - 1)
    out: list[S.Stmt] = []
    for op, operand in ops:
        if op.name.lower() not in hw.alu.ops:
            raise CompileError(f"{where}: ALU op {op.name} is not in {hw.name}'s alu.ops "
                               f"({', '.join(hw.alu.ops)})")
        if isinstance(operand, int):
            if not -lim <= operand < lim:
                raise CompileError(f"{where}: immediate {operand} does not fit the ALU's "
                                   f"{hw.alu.imm_bits}-bit immediate")
            out.append(AluNest(op, outer, dst, None, operand, acc))
        else:
            ld = operand
            assert isinstance(ld, S.BufferLoad)
            if tuple(ld.indices[-2:]) != tuple(body.indices[-2:]):
                raise CompileError(f"{where}: register operand {ld.buffer.name} must share the "
                                   f"entry dims of {acc.name}")
            src = E.simplify_int(bases[ld.buffer] + flat_entry(ld.buffer, ld.indices))
            out.append(AluNest(op, outer, dst, src, None, acc))
    _ = me
    return S.seq(*out)
