"""Hoist accumulator resets on a separate ALU pipeline: each runs as early as its data allows.

On hardware whose ALU is a pipeline of its own (``alu.separate_pipeline``), an accumulator
reset is an ALU instruction (``cost.reset_instruction``) and the ALU module executes its queue in
program order. Virtual threads leave the reset of a thread's next tile after the other
thread's epilogue, so the GEMMs of that next tile would wait, through the reset, for an
epilogue they do not depend on. This pass moves every reset to just after the last earlier
instruction it conflicts with (the STORE that reads the entries it zeroes, or the epilogue
that last wrote them): the ALU then zeroes the next tile while the GEMM core still works on
the other thread's.

Pre:  a flat ``SeqStmt`` of ``Insn``s (flatten) in program order, before token insertion.
Post: the same instructions, each reset moved up past instructions it shares no SRAM entry
      with (a reordering that keeps every read-after-write, write-after-read and
      write-after-write order, so the sequential result is unchanged); on hardware without a
      separate ALU, unchanged.
"""

from __future__ import annotations

import numpy as np

from vta.compiler.accel.passes._common import flat_stream, with_stream
from vta.compiler.accel.passes.coproc_sync import accesses
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import stmt as S
from vta.config import HwConfig
from vta.isa import definition_of

__all__ = ["hoist_resets"]


def hoist_resets(func: S.PrimFunc, hw: HwConfig) -> S.PrimFunc:
    if not hw.alu.separate_pipeline:
        return func
    stream = flat_stream(func)
    if stream is None:
        return func
    insns, wrap = stream
    return with_stream(func, _hoisted(insns, hw), wrap)


def _is_reset(ins: Insn, hw: HwConfig) -> bool:
    d = definition_of(ins.insn)
    return bool(d.alu) and d.reset_mode(ins.insn, hw) == "zero"


def _hoisted(insns: list[Insn], hw: HwConfig) -> list[Insn]:
    """``insns`` with each reset placed right after its last conflicting predecessor."""
    depth = {k: hw.depth(k) for k in ("inp", "wgt", "acc", "uop")}
    last_w = {k: np.full(n, -1, np.int64) for k, n in depth.items()}
    last_r = {k: np.full(n, -1, np.int64) for k, n in depth.items()}
    after: dict[int, list[Insn]] = {}  # anchor index -> resets moved right after it
    stay: list[tuple[int, Insn]] = []
    last_reset = -1
    for k, ins in enumerate(insns):
        acc = accesses(ins, hw)
        anchor = k
        if _is_reset(ins, hw):
            need = last_reset  # resets keep their order among themselves (the ALU's queue)
            for mem, lo, hi, wr in acc:
                if hi > lo:
                    need = max(need, int(last_w[mem][lo:hi].max()))
                    if wr:
                        need = max(need, int(last_r[mem][lo:hi].max()))
            anchor = need
            last_reset = need
            after.setdefault(need, []).append(ins)
        else:
            stay.append((k, ins))
        for mem, lo, hi, wr in acc:
            # a hoisted reset stands where it now sits: later instructions order after it
            (last_w if wr else last_r)[mem][lo:hi] = anchor
    out: list[Insn] = list(after.get(-1, []))
    for k, ins in stay:
        out.append(ins)
        out += after.get(k, [])
    return out
