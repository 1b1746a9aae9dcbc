"""Dependency tokens: push/pop pairs between the load, compute and store modules
(VTA's CoProcSync, computed on the flattened instruction stream).

Pre:  a flat ``SeqStmt`` of ``Insn``s (flatten) in program order, without dependency flags.
Post: the same instructions with ``Deps`` set so that running the three modules concurrently,
      each in its own program order, gives the sequential result. For every instruction and
      every queue into its module, the latest earlier instruction of the producing module it
      conflicts with is found from the SRAM ranges both touch (inp, wgt, acc = out):

      * RAW load -> compute: a GEMM reads inp/wgt a LOAD wrote;
      * WAR compute -> load: a LOAD overwrites inp/wgt a GEMM still reads (the other thread's
        buffer is free, so only a thread's own previous use waits);
      * RAW compute -> store: a STORE reads out entries GEMM/ALU wrote;
      * WAR store -> compute: a GEMM reset/ALU/LOAD ACC overwrites entries a STORE still reads.

      The producer gets the push flag, the consumer the pop flag. Needs are strictly increasing
      per queue, so the k-th pop of a queue waits for exactly the k-th push (queues are FIFO
      counters): tokens balance by construction (every push is popped once) and every edge
      points backwards in program order (no deadlock).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from vta.compiler import stmt as S
from vta.compiler.passes._common import CompileError
from vta.compiler.vta_ir import Insn
from vta.config import HwConfig
from vta.isa import Alu, Deps, Gemm, Load, MemType, Module, Store, module_of

__all__ = ["insert_tokens", "accesses"]

L, C, ST = Module.LOAD, Module.COMPUTE, Module.STORE
#: (producer, consumer) -> (producer's push flag, consumer's pop flag)
FLAGS = {
    (L, C): ("push_next", "pop_prev"),
    (C, L): ("push_prev", "pop_next"),
    (C, ST): ("push_next", "pop_prev"),
    (ST, C): ("push_prev", "pop_next"),
}


def _span(uops, f: str, fo: int, fi: int, io: int, ii: int) -> tuple[int, int]:
    vals = [getattr(u, f) for u in uops]
    lo = min(vals)
    hi = max(vals) + (io - 1) * fo + (ii - 1) * fi
    return lo, hi + 1


def accesses(ins: Insn) -> list[tuple[str, int, int, bool]]:
    """(memory, lo, hi, is_write) ranges an instruction touches (acc stands for acc and out)."""
    i = ins.insn
    if isinstance(i, Load):
        if i.mem is MemType.UOP:
            return []
        return [(i.mem.kind, i.sram_base, i.sram_base + i.sram_elems, True)]
    if isinstance(i, Store):
        return [("acc", i.sram_base, i.sram_base + i.sram_elems, False)]
    if isinstance(i, Gemm):
        u = ins.uops
        d = _span(u, "dst", i.dst_factor_out, i.dst_factor_in, i.iter_out, i.iter_in)
        if i.reset:
            return [("acc", *d, True)]
        s = _span(u, "src", i.src_factor_out, i.src_factor_in, i.iter_out, i.iter_in)
        w = _span(u, "wgt", i.wgt_factor_out, i.wgt_factor_in, i.iter_out, i.iter_in)
        return [("acc", *d, True), ("inp", *s, False), ("wgt", *w, False)]
    if isinstance(i, Alu):
        u = ins.uops
        d = _span(u, "dst", i.dst_factor_out, i.dst_factor_in, i.iter_out, i.iter_in)
        out = [("acc", *d, True)]
        if not i.use_imm:
            out.append(("acc", *_span(u, "src", i.src_factor_out, i.src_factor_in, i.iter_out,
                                      i.iter_in), False))
        return out
    return []


def insert_tokens(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    body, wrap = func.body, []
    while isinstance(body, S.Allocate):
        wrap.append(body.buffer)
        body = body.body
    stmts = list(body.stmts) if isinstance(body, S.SeqStmt) else [body]
    insns = [x for x in stmts if isinstance(x, Insn)]
    if len(insns) != len(stmts):
        raise CompileError(f"{func.name}: token insertion needs the flattened instruction stream")
    depth = {k: hw.depth(k) for k in ("inp", "wgt", "acc")}
    last_w = {(m, k): np.full(depth[k], -1, np.int64) for m in Module for k in depth}
    last_r = {(m, k): np.full(depth[k], -1, np.int64) for m in Module for k in depth}
    satisfied = {q: -1 for q in FLAGS}
    flags: list[dict[str, bool]] = [{} for _ in insns]
    mods = [module_of(x.insn) for x in insns]
    for k, ins in enumerate(insns):
        m = mods[k]
        acc = accesses(ins)
        for (p, c) in FLAGS:
            if c is not m:
                continue
            need = -1
            for mem, lo, hi, wr in acc:
                if hi <= lo:
                    continue
                need = max(need, int(last_w[(p, mem)][lo:hi].max()))
                if wr:
                    need = max(need, int(last_r[(p, mem)][lo:hi].max()))
            if need > satisfied[(p, c)]:
                push, pop = FLAGS[(p, c)]
                flags[need][push] = True
                flags[k][pop] = True
                satisfied[(p, c)] = need
        for mem, lo, hi, wr in acc:
            (last_w if wr else last_r)[(m, mem)][lo:hi] = k
    # load <-> store have no queue: they never share a memory (checked, not assumed)
    out = []
    for ins, f in zip(insns, flags, strict=True):
        if f:
            ins = dataclasses.replace(ins, insn=dataclasses.replace(ins.insn, deps=Deps(**f)))
        out.append(ins)
    new: S.Stmt = S.SeqStmt(tuple(out)) if len(out) != 1 else out[0]
    for b in reversed(wrap):
        new = S.Allocate(b, new)
    return func.with_body(new)
