"""ALU lowering: element-wise epilogue stages on acc buffers become instructions, chosen by
instruction selection over the hardware's element-wise instructions.

Pre:  tensorize has run. An epilogue stage is a perfect loop nest storing into an acc buffer an
      expression of the same element: ``acc[i] = f(acc[i], ...)`` with ``f`` built from
      operations some element-wise instruction of the hardware computes (the ALU's ``>> k``,
      ``<< k``, ``+ c``, ``+ acc2[j]`` (the bias after its LOAD into acc), ``* c``, ``max``,
      ``min``; or a user's fused instruction). The innermost two indices are the entry (one
      vector).
Post: each such stage is a sequence of ``ComputeNest``s, one per selected instruction, in
      evaluation order (``vta.compiler.accel.select.cover``: the cheapest cover of ``f`` by the
      patterns of the instructions ``hw`` implements), each binding loop variables of its own.
      An expression no instruction covers is a ``CompileError`` naming the stage, the
      expression and what was refused (an op not in the config's ALU, an immediate too wide for
      its field). The narrowing cast stays with the out copy (the STORE of the out scratchpad).
"""

from __future__ import annotations

from vta.compiler.accel.passes._common import flat_entry, loop_nest, map_stmt, sram_map, strip_cast
from vta.compiler.accel.select import candidates, cover
from vta.compiler.accel.vta_ir import ComputeNest
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig
from vta.errors import CompileError

__all__ = ["lower_alu"]


def lower_alu(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    bases = sram_map(func)
    cands = candidates(hw)

    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, S.AttrStmt) and s.key is S.STAGE and isinstance(s.body, S.For):
            r = _alu(func, str(s.value), s.body, bases, hw, cands)
            return None if r is None else S.AttrStmt(S.STAGE, s.value, r)
        return None

    return func.with_body(map_stmt(func.body, rewrite))


def _alu(func: S.PrimFunc, name: str, nest: S.Stmt, bases: dict[S.Buffer, E.Expr],
         hw: HwConfig, cands: list) -> S.Stmt | None:  # type: ignore[type-arg]
    try:
        loops, body = loop_nest(nest)
    except CompileError:
        return None
    if not isinstance(body, S.BufferStore) or body.buffer.scope != "acc":
        return None
    acc = body.buffer
    me = S.BufferLoad(acc, body.indices, acc.dtype)
    reads_me = any(isinstance(n, S.BufferLoad) and n.buffer is acc and n.indices == body.indices
                   for n in E.walk(body.value))
    if not reads_me or strip_cast(body.value) == me:
        return None  # not an update of the entry itself (or a bare copy): not the ALU's
    why: list[str] = []
    lanes = tuple(body.indices[-2:])

    def register(e: E.Expr) -> bool:
        return (isinstance(e, S.BufferLoad) and e.buffer.scope == "acc"
                and tuple(e.indices[-2:]) == lanes)

    chosen = cover(body.value, me, register, hw, cands, why)
    where = f"{func.name}: stage {name}"
    if chosen is None:
        have = sorted({c.instruction.name for c in cands if c.instruction is not None})
        detail = f" ({why[0]})" if why else ""
        raise CompileError(f"{where}: no instruction of {hw.name} computes {body.value} in "
                           f"place{detail}; available: {', '.join(have)} (alu.ops: "
                           f"{', '.join(hw.alu.ops)})")
    entry = set(body.indices[-2:])
    outer = tuple((v, n) for v, n in loops if v not in entry)
    dst = bases[acc] + flat_entry(acc, body.indices)
    out: list[S.Stmt] = []
    for k, sel in enumerate(chosen):
        defn = sel.intrin.instruction
        assert defn is not None
        ops, idx, bufs = ["dst"], [dst], [acc]
        for role, ld in sel.operands.items():
            assert isinstance(ld, S.BufferLoad)
            ops.append(role)
            idx.append(bases[ld.buffer] + flat_entry(ld.buffer, ld.indices))
            bufs.append(ld.buffer)
        nest_loops = outer
        if k:  # a nest binds its loop variables: each after the first gets its own
            fresh = {v: E.Var(v.name, v.dtype) for v, _n in outer}
            nest_loops = tuple((fresh[v], n) for v, n in outer)
            idx = [E.substitute(x, fresh) for x in idx]
        out.append(ComputeNest(defn, False, nest_loops, tuple(ops), tuple(idx),
                               tuple(sorted(sel.fields.items())), tuple(bufs)))
    return S.seq(*out)
