"""Shared hypothesis strategies: small hardware configs and valid, race-free VTA programs.

``programs(hw)`` draws a program of 1-3 *phases*; each phase is a group of load-unit LOADs
(inp/wgt), a group of compute-unit instructions (LOAD.UOP, LOAD.ACC, GEMM, ALU) and a group of
STOREs, with random shapes, pads, strides and in-bounds indices (the generator tracks the
micro-ops in SRAM so every derived GEMM/ALU index is in range). Dependency tokens order the
phases as VTA's runtime does (RAW load->compute->store, WAR compute->load and store->compute),
so the program is race-free: the cycle-level machine must match the in-order reference.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from vta.config import HwConfig
from vta.isa import (
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Instruction,
    Load,
    MemType,
    Program,
    ProgramBuilder,
    Store,
    Uop,
)

__all__ = ["small_hw", "hw_configs", "programs", "DRAM_ELEMS"]


def _index(hi: int) -> st.SearchStrategy[int]:
    """An index in ``0..hi``, biased towards small values so that instructions meet."""
    return st.integers(0, min(hi, 8)) | st.integers(0, hi)

#: elements of every data allocation the generated programs use
DRAM_ELEMS = 48


def small_hw(batch: int = 1, block: int = 4, depth: int = 64, **changes: Any) -> HwConfig:
    """A pynq-like config with small blocks and ``depth``-entry scratchpads (fast to test,
    and small enough that random indices hit the edges)."""
    data = {
        "name": f"small_b{batch}_k{block}",
        "gemm": {"batch": batch, "block_in": block, "block_out": block},
        "scratchpad": {"uop": depth * 4, "inp": depth * batch * block,
                       "wgt": depth * block * block, "acc": depth * batch * block * 4,
                       "out": depth * batch * block},
        "memory": {"bus_bytes": 8, "latency": 8, "burst_bytes": 32, "outstanding": 2},
    }
    hw = HwConfig.from_dict(data, source="<small_hw>")
    return hw.with_changes(**changes) if changes else hw


def hw_configs() -> st.SearchStrategy[HwConfig]:
    """A few small configurations varying batch, block, ALU lanes, port sharing and queues."""
    return st.sampled_from([
        small_hw(),
        small_hw(batch=2, block=4, **{"alu.lanes": 4, "memory.shared_port": False}),
        small_hw(block=8, **{"queues.command_depth": 2, "queues.token_depth": 2,
                             "queues.fetch_batch": 3}),
    ])


@st.composite
def _loop_fields(draw: st.DrawFn, bases: list[int], depth: int, io: int,
                 ii: int) -> tuple[int, int]:
    """(factor_out, factor_in) keeping ``max(bases) + (io-1)*f_out + (ii-1)*f_in < depth``."""
    slack = depth - 1 - max(bases, default=0)
    f_out = draw(_index(slack // (io - 1))) if io > 1 else draw(st.integers(0, 3))
    slack -= (io - 1) * f_out
    f_in = draw(_index(slack // (ii - 1))) if ii > 1 else draw(st.integers(0, 3))
    return f_out, f_in


class _Gen:
    """Draws instructions while tracking the micro-ops in SRAM."""

    def __init__(self, draw: st.DrawFn, hw: HwConfig, b: ProgramBuilder, uop_words: list[Uop]):
        self.draw, self.hw, self.b = draw, hw, b
        self.depth = {k: hw.depth(k) for k in ("uop", "inp", "wgt", "acc", "out")}
        self.sram_uops = [Uop(0, 0, 0)] * self.depth["uop"]
        self.dram_uops = uop_words

    def load(self, mem: MemType, alloc: str) -> Load:
        d = self.draw
        empty = d(st.integers(0, 7)) == 0  # an empty LOAD: VTA's token carrier
        y = 0 if empty else d(st.integers(1, 3))
        x = d(st.integers(1, min(4, len(self.dram_uops)) if mem == MemType.UOP else 4))
        stride = d(st.integers(0, x + 3)) if y > 1 else x
        pads = [d(st.integers(0, 2)) for _ in range(4)]
        if mem == MemType.UOP:  # one row: the SRAM contents stay easy to track
            y, stride, pads[0], pads[1] = 1, x, 0, 0
        span = (y - 1) * stride + x if y and x else 0
        dram = self.b._allocs[[a.name for a in self.b._allocs].index(alloc)]
        off = d(st.integers(0, dram.elems - span))
        rows, cols = pads[0] + y + pads[1], pads[2] + x + pads[3]
        n = rows * cols if y and x else 0
        base = d(_index(self.depth[mem.kind] - n))
        if mem == MemType.UOP and n:
            img = [Uop(0, 0, 0)] * pads[2] + self.dram_uops[off:off + x] + [Uop(0, 0, 0)] * pads[3]
            self.sram_uops[base:base + n] = img
        return Load(mem, base, dram.base + off, y, x, stride, pads[0], pads[1], pads[2], pads[3])

    def uop_prologue(self) -> Load:
        """Load every micro-op to SRAM entry 0 (as a compiled program starts)."""
        n = len(self.dram_uops)
        self.sram_uops[:n] = self.dram_uops
        return Load(MemType.UOP, 0, self.b._allocs[-1].base, 1, n, n)

    def store(self) -> Store:
        d = self.draw
        y, x = d(st.integers(1, 3)), d(st.integers(1, 4))
        stride = d(st.integers(0, x + 3)) if y > 1 else x
        span = (y - 1) * stride + x
        out = self.b._allocs[[a.name for a in self.b._allocs].index("O")]
        return Store(MemType.OUT, d(_index(self.depth["out"] - y * x)),
                     out.base + d(st.integers(0, out.elems - span)), y, x, stride)

    def _uop_range(self) -> tuple[int, int, list[Uop]]:
        bgn = self.draw(st.integers(0, len(self.dram_uops)))
        end = self.draw(st.integers(bgn, bgn + 4))
        return bgn, end, self.sram_uops[bgn:end]

    def gemm(self) -> Gemm:
        d = self.draw
        bgn, end, us = self._uop_range()
        io, ii = d(st.integers(0, 3)), d(st.integers(1, 3))
        fo = [_loop_fields(bases, self.depth[k], max(io, 1), ii) for bases, k in
              (([u.dst for u in us], "acc"), ([u.src for u in us], "inp"),
               ([u.wgt for u in us], "wgt"))]
        (dfo, dfi), (sfo, sfi), (wfo, wfi) = (d(s) for s in fo)
        return Gemm(d(st.integers(0, 3)) == 0, bgn, end, io, ii, dfo, dfi, sfo, sfi, wfo, wfi)

    def alu(self) -> Alu:
        d = self.draw
        bgn, end, us = self._uop_range()
        io, ii = d(st.integers(1, 3)), d(st.integers(1, 3))
        dfo, dfi = d(_loop_fields([u.dst for u in us], self.depth["acc"], io, ii))
        sfo, sfi = d(_loop_fields([u.src for u in us], self.depth["acc"], io, ii))
        op = d(st.sampled_from(list(AluOp)))
        use_imm = d(st.booleans())
        lim = 1 << (self.hw.alu.imm_bits - 1)
        imm = d(st.integers(-40, 40) | st.integers(-lim, lim - 1)) if use_imm else 0
        reset = d(st.integers(0, 7)) == 0
        return Alu(op, reset, bgn, end, io, ii, dfo, dfi, sfo, sfi, use_imm, imm)


def _with(insn: Instruction, **flags: bool) -> Instruction:
    from vta.sim.examples import with_deps
    return with_deps(insn, **flags)


@st.composite
def programs(draw: st.DrawFn, hw: HwConfig) -> Program:
    """A valid, race-free program for ``hw`` (see the module docstring)."""
    b = ProgramBuilder(hw)
    for name, kind in (("A", "inp"), ("W", "wgt"), ("C", "acc"), ("O", "out")):
        b.alloc(name, kind, DRAM_ELEMS)
    b.alloc("U", "uop", 0)
    depth = {k: hw.depth(k) for k in ("inp", "wgt", "acc")}
    n_uops = draw(st.integers(1, 16))
    words = [Uop(draw(_index(depth["acc"] - 1)),
                 draw(_index(min(depth["inp"], depth["acc"]) - 1)),
                 draw(_index(depth["wgt"] - 1))) for _ in range(n_uops)]
    b.add_uops("U", words)
    gen = _Gen(draw, hw, b, words)
    phases = draw(st.integers(1, 3))
    for p in range(phases):
        loads: list[Instruction] = []
        for _ in range(draw(st.integers(1, 3))):
            mem = draw(st.sampled_from([MemType.INP, MemType.WGT]))
            loads.append(gen.load(mem, "A" if mem == MemType.INP else "W"))
        computes: list[Instruction] = [gen.uop_prologue()] if p == 0 else []
        for _ in range(draw(st.integers(1, 5))):
            kind = draw(st.sampled_from(["uop", "acc", "acc", "gemm", "gemm", "alu", "alu"]))
            computes.append(gen.load(MemType.UOP, "U") if kind == "uop" else
                            gen.load(MemType.ACC, "C") if kind == "acc" else
                            gen.gemm() if kind == "gemm" else gen.alu())
        stores: list[Instruction] = [gen.store() for _ in range(draw(st.integers(1, 2)))]
        last = p == phases - 1
        if last:  # dump the out scratchpad, so that every computed entry is compared
            o = b._allocs[3]
            stores.append(Store(MemType.OUT, 0, o.base, 1, DRAM_ELEMS, DRAM_ELEMS))
        loads[0] = _with(loads[0], pop_next=p > 0)
        loads[-1] = _with(loads[-1], push_next=True)
        computes[0] = _with(computes[0], pop_prev=True, pop_next=p > 0)
        computes[-1] = _with(computes[-1], push_prev=not last, push_next=True)
        stores[0] = _with(stores[0], pop_prev=True)
        stores[-1] = _with(stores[-1], push_prev=True)
        b.extend(loads + computes + stores)
    if draw(st.booleans()):
        b.emit(Finish(Deps(pop_next=True)))
    return b.build()
