"""Flatten: evaluate the remaining tile loops into the concrete instruction stream.

Pre:  virtual threads are expanded; every statement left is a loop, a sequence, an
      allocation, an attribute, or a dialect statement (DMA, ``ComputeInsn``).
Post: ``Allocate``s hoisted to the top (their SRAM addresses are fixed) around one flat
      ``SeqStmt`` of ``Insn``s, each wrapping one ``vta.isa`` instruction with concrete fields
      (DRAM offsets still relative to the global buffer; micro-ops concrete, their uop-buffer
      position left to the emitter) and no dependency flags. A micro-op instruction is built
      from its definition (factors, fields, function); for an operand with a base field (an
      instruction field added to every index of it), the base is the smallest index its micro-ops
      use and the micro-ops keep the offsets. DMAs whose tile lies entirely outside the tensor
      (only possible for padded, discarded output tiles) are dropped.
"""

from __future__ import annotations

from typing import Any

from vta.compiler.accel.passes._common import IntFn, compile_int
from vta.compiler.accel.vta_ir import VTHREAD, ComputeInsn, DmaLoad, DmaStore, Insn, UopTable
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.config import HwConfig
from vta.errors import CompileError
from vta.isa import Load, MemType, Store, Uop
from vta.isa.defs import instance

__all__ = ["flatten"]


def _free_vars(node: object) -> set[E.Var]:
    """The variables under ``node``, each shared subtree visited once (a micro-op list shares
    its base expression among thousands of entries)."""
    seen: set[int] = set()
    out: set[E.Var] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, E.Var):
            out.add(n)
        elif isinstance(n, tuple):
            stack.extend(n)
        else:
            stack.extend(E.children(n))
    return out


def flatten(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    out: list[S.Stmt] = []
    allocs: list[S.Buffer] = []
    env: dict[E.Var, int] = {}
    uop_cache: dict[tuple, tuple[Uop, ...]] = {}

    compiled: dict[int, tuple[E.Expr, IntFn]] = {}

    def ev(e: E.Expr) -> int:
        if isinstance(e, E.IntImm):
            return e.value
        hit = compiled.get(id(e))  # the same field object recurs in every tile of its loop
        if hit is None:
            hit = compiled[id(e)] = (e, compile_int(e))  # e kept alive: its id stays its own
        return hit[1](env)

    #: a DMA statement's fields (``exprs()``: sram_base, dram_base, y_size, x_size, x_stride,
    #: pads) compiled once: the statement recurs in every iteration of the loops around it
    dma_fields: dict[int, tuple[S.Stmt, tuple[IntFn, ...]]] = {}

    def fields(s: DmaLoad | DmaStore) -> tuple[IntFn, ...]:
        hit = dma_fields.get(id(s))
        if hit is None:  # s kept alive: its id stays its own
            hit = dma_fields[id(s)] = (s, tuple(_field_fn(e) for e in s.exprs()))
        return hit[1]

    def uops(u: UopTable) -> tuple[Uop, ...]:
        key = (id(u), tuple(env.get(v, 0) for v in _fv(u)))
        hit = uop_cache.get(key)
        if hit is None:
            hit = uop_cache[key] = u.evaluate(ev)
        return hit

    fv_cache: dict[int, tuple[E.Var, ...]] = {}
    #: (statement, micro-op tuple) -> (instruction, micro-ops): the same instruction recurs in
    #: every tile whose micro-ops evaluate alike (and in every thread)
    insn_cache: dict[tuple[int, int], tuple[Any, tuple[Uop, ...]]] = {}

    def _fv(u: UopTable) -> tuple[E.Var, ...]:
        k = id(u)
        if k not in fv_cache:
            fv_cache[k] = tuple(sorted(_free_vars(u.base), key=lambda v: v.name + str(id(v))))
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
            visit(s.body, s.value if s.key is VTHREAD else thread)
        elif isinstance(s, DmaLoad):
            f = fields(s)
            y, x = f[2](env), f[3](env)
            if y <= 0 or x <= 0:
                return
            out.append(Insn(Load(MemType[s.mem.upper()], f[0](env), f[1](env), y, x,
                                 f[4](env), f[5](env), f[6](env), f[7](env), f[8](env)),
                            s.dram, (), thread))
        elif isinstance(s, DmaStore):
            f = fields(s)
            y, x = f[2](env), f[3](env)
            if y <= 0 or x <= 0:
                return
            out.append(Insn(Store(MemType.OUT, f[0](env), f[1](env), y, x, f[4](env)), s.dram,
                            (), thread))
        elif isinstance(s, ComputeInsn):
            u = uops(s.uops)
            key = (id(s), id(u))  # both kept alive by the function and ``uop_cache``
            made = insn_cache.get(key)
            if made is None:
                made = insn_cache[key] = _compute(s, u)
            out.append(Insn(made[0], None, made[1], thread))
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


def _field_fn(e: E.Expr) -> IntFn:
    """``e`` compiled (``compile_int``); a constant's value as written, as ``ev`` reads it."""
    if isinstance(e, E.IntImm):
        v = e.value
        return lambda env: v
    return compile_int(e)


def _compute(s: ComputeInsn, u: tuple[Uop, ...]) -> tuple[Any, tuple[Uop, ...]]:
    """The instruction of a ``ComputeInsn`` with concrete micro-ops, and the micro-ops it keeps
    (see the module docstring for operands with a base field)."""
    d = s.instruction
    fields: dict[str, object] = dict(s.params)
    fields.update(reset=s.reset, uop_bgn=0, uop_end=len(u), iter_out=s.iter_out,
                  iter_in=s.iter_in)
    by_name = {o.name: o for o in d.operands}
    for name, fo, fi in s.factors:
        factors = by_name[name].factors
        assert factors is not None
        fields[factors[0]], fields[factors[1]] = fo, fi
    for o in d.operands:
        if o.base is not None and not o.base_steps and u:
            base = min(getattr(x, o.name) for x in u)
            fields[o.base] = base
            u = tuple(Uop(**{**{k: getattr(x, k) for k in ("dst", "src", "wgt")},
                             o.name: getattr(x, o.name) - base}) for x in u)
    return instance(d, **fields), u
