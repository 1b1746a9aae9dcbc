"""Flatten: evaluate the remaining tile loops into the concrete instruction stream.

Pre:  virtual threads are expanded; every statement left is a loop, a sequence, an
      allocation, an attribute, or a dialect statement (DMA, ``GemmInsn``, ``AluInsn``).
Post: ``Allocate``s hoisted to the top (their SRAM addresses are fixed) around one flat
      ``SeqStmt`` of ``Insn``s, each wrapping one ``vta.isa`` instruction with concrete fields
      (DRAM offsets still relative to the global buffer; micro-ops concrete, their uop-buffer
      position left to the emitter) and no dependency flags. DMAs whose tile lies entirely
      outside the tensor (only possible for padded, discarded output tiles) are dropped.
"""

from __future__ import annotations

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.passes._common import CompileError, evaluate
from vta.compiler.vta_ir import AluInsn, DmaLoad, DmaStore, GemmInsn, Insn, UopExpr
from vta.config import HwConfig
from vta.isa import Alu, Gemm, Load, MemType, Store, Uop

__all__ = ["flatten"]


def flatten(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    out: list[S.Stmt] = []
    allocs: list[S.Buffer] = []
    env: dict[E.Var, int] = {}
    uop_cache: dict[tuple, tuple[Uop, ...]] = {}

    def ev(e: E.Expr) -> int:
        return e.value if isinstance(e, E.IntImm) else evaluate(e, env)

    def uops(u: tuple[UopExpr, ...]) -> tuple[Uop, ...]:
        key = (id(u), tuple(env.get(v, 0) for v in _fv(u)))
        hit = uop_cache.get(key)
        if hit is None:
            hit = uop_cache[key] = tuple(Uop(ev(d), ev(s), ev(w)) for d, s, w in u)
        return hit

    fv_cache: dict[int, tuple[E.Var, ...]] = {}

    def _fv(u: tuple) -> tuple[E.Var, ...]:
        k = id(u)
        if k not in fv_cache:
            fv_cache[k] = tuple(sorted({v for t in u for x in t for v in E.free_vars(x)},
                                       key=lambda v: v.name + str(id(v))))
        return fv_cache[k]

    def visit(s: S.Stmt, thread: int) -> None:
        if isinstance(s, S.SeqStmt):
            for child in s.stmts:
                visit(child, thread)
        elif isinstance(s, S.For):
            lo, n = ev(s.min), ev(s.extent)
            for i in range(lo, lo + n):
                env[s.var] = i
                visit(s.body, thread)
            env.pop(s.var, None)
        elif isinstance(s, S.Allocate):
            if not any(b is s.buffer for b in allocs):
                allocs.append(s.buffer)
            visit(s.body, thread)
        elif isinstance(s, S.AttrStmt):
            visit(s.body, s.value if s.key == "vthread" else thread)
        elif isinstance(s, DmaLoad):
            y, x = ev(s.y_size), ev(s.x_size)
            if y <= 0 or x <= 0:
                return
            out.append(Insn(Load(MemType[s.mem.upper()], ev(s.sram_base), ev(s.dram_base), y, x,
                                 ev(s.x_stride), ev(s.pad_y0), ev(s.pad_y1), ev(s.pad_x0),
                                 ev(s.pad_x1)), s.dram, (), thread))
        elif isinstance(s, DmaStore):
            y, x = ev(s.y_size), ev(s.x_size)
            if y <= 0 or x <= 0:
                return
            out.append(Insn(Store(MemType.OUT, ev(s.sram_base), ev(s.dram_base), y, x,
                                  ev(s.x_stride)), s.dram, (), thread))
        elif isinstance(s, GemmInsn):
            u = uops(s.uops)
            out.append(Insn(Gemm(s.reset, 0, len(u), s.iter_out, s.iter_in, s.dst_factor_out,
                                 s.dst_factor_in, s.src_factor_out, s.src_factor_in,
                                 s.wgt_factor_out, s.wgt_factor_in), None, u, thread))
        elif isinstance(s, AluInsn):
            u = uops(s.uops)
            out.append(Insn(Alu(s.op, False, 0, len(u), s.iter_out, s.iter_in, s.dst_factor_out,
                                s.dst_factor_in, s.src_factor_out, s.src_factor_in, s.use_imm,
                                s.imm), None, u, thread))
        elif isinstance(s, Insn):
            out.append(s)
        else:
            raise CompileError(f"{func.name}: flatten cannot execute {type(s).__name__} (a pass "
                               f"before it left an unlowered statement: {s})")

    visit(func.body, 0)
    body: S.Stmt = S.SeqStmt(tuple(out)) if len(out) != 1 else out[0]
    for b in reversed(allocs):
        body = S.Allocate(b, body)
    return func.with_body(body)
