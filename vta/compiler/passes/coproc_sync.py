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
from typing import Any

import numpy as np

from vta.compiler import stmt as S
from vta.compiler.passes._common import CompileError
from vta.compiler.vta_ir import Insn
from vta.config import HwConfig
from vta.isa import TOKEN_QUEUES, Deps, MemType, Module, definition_of, flag_for, module_of

__all__ = ["insert_tokens", "accesses"]

#: (producer, consumer) -> (producer's push flag, consumer's pop flag), from the ISA's one table
FLAGS = {q: (flag_for(q, q[0], push=True), flag_for(q, q[1], push=False)) for q in TOKEN_QUEUES}


_EXTREMES: dict[tuple[int, str], tuple[tuple[Any, ...], int, int]] = {}


def _extremes(uops: tuple[Any, ...], f: str) -> tuple[int, int]:
    """The smallest and largest ``f`` field of a micro-op list (once per list object)."""
    key = (id(uops), f)
    hit = _EXTREMES.get(key)
    if hit is None or hit[0] is not uops:
        vals = [getattr(u, f) for u in uops]
        hit = _EXTREMES[key] = (uops, min(vals), max(vals))
        if len(_EXTREMES) > 4096:
            _EXTREMES.clear()
            _EXTREMES[key] = hit
    return hit[1], hit[2]


def _span(uops, f: str, fo: int, fi: int, io: int, ii: int, base: int = 0) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    lo, top = _extremes(uops, f)
    hi = top + (io - 1) * fo + (ii - 1) * fi
    return base + lo, base + hi + 1


def accesses(ins: Insn) -> list[tuple[str, int, int, bool]]:
    """(memory, lo, hi, is_write) ranges an instruction touches (acc stands for acc and out),
    from its definition: a DMA its SRAM range, a micro-op instruction each operand it uses."""
    i = ins.insn
    d = definition_of(i)
    x: Any = i
    if d.role == "load":
        if x.mem is MemType.UOP:
            return []
        return [(x.mem.kind, x.sram_base, x.sram_base + x.sram_elems, True)]
    if d.role == "store":
        return [("acc", x.sram_base, x.sram_base + x.sram_elems, False)]
    if d.role != "compute" or not ins.uops:
        return []
    out = []
    for op in (d.dst, *d.reads(i)):
        fo, fi = (getattr(x, op.factors[0]), getattr(x, op.factors[1])) if op.factors else (0, 0)
        base = getattr(x, op.base) if op.base else 0
        lo, hi = _span(ins.uops, op.name, fo, fi, x.iter_out, x.iter_in, base)
        out.append((op.memory, lo, hi, op.writes))
    return out


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
            insn: Any = ins.insn
            ins = dataclasses.replace(ins, insn=dataclasses.replace(insn, deps=Deps(**f)))
        out.append(ins)
    new: S.Stmt = S.SeqStmt(tuple(out)) if len(out) != 1 else out[0]
    for b in reversed(wrap):
        new = S.Allocate(b, new)
    return func.with_body(new)
