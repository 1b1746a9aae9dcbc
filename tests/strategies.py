"""Shared hypothesis strategies: valid, race-free VTA programs (hardware configs come from
``vta.testing``, the public home of the strategies, and are re-exported here).

``programs(hw)`` draws a program of 1-4 *phases*; each phase is a group of load-unit LOADs
(inp/wgt), a group of compute-unit instructions (LOAD.UOP, LOAD.ACC, GEMM, ALU) and a group of
STOREs, with random shapes, pads, strides and in-bounds indices (the generator tracks the
micro-ops in SRAM so every derived GEMM/ALU index is in range).

So that most programs compute real, data-dependent values, indices are drawn mostly from a
small *hot window* at the start of each scratchpad (now and then from the whole range, to reach
the edges), and the first phase usually fills that window of inp, wgt and acc from DRAM.

Dependency tokens order the phases as VTA's runtime does (RAW load->compute->store, WAR
compute->load and store->compute) with ``nbuf`` buffer sets on the load side and ``sbuf`` on
the store side: loads of phase ``t`` wait only for the compute of phase ``t - nbuf`` (they run
ahead), computes for the stores of phase ``t - sbuf``. The generator keeps this race-free by
tracking the SRAM entries each phase reads and writes: a load (or GEMM/ALU) that would
overwrite what a still-running phase reads is redrawn, or replaced by an empty LOAD. So the
cycle-level machine must match the in-order reference. The random STOREs write allocation
``O``; the last phase then dumps every out entry a GEMM/ALU wrote (at least ``DRAM_ELEMS``)
to allocation ``D``, so both are compared.
"""

from __future__ import annotations

import functools
from typing import Any

from hypothesis import strategies as st

import vta.testing as vt
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

__all__ = ["small_hw", "hw_configs", "random_hw", "shipped_hw", "programs", "DRAM_ELEMS"]

#: elements of every data allocation the generated programs use
DRAM_ELEMS = 48


@functools.lru_cache(maxsize=4096)
def _index(hi: int, hot: int = 8) -> st.SearchStrategy[int]:
    """An index in ``0..hi``: mostly in ``0..hot`` so that instructions meet, else anywhere."""
    near = st.integers(0, min(hi, hot))
    return st.one_of(near, near, near, st.integers(0, hi))


#: the hardware strategies live in vta.testing (public, installed): re-exported here
small_hw, shipped_hw, random_hw = vt.small_hw, vt.shipped_hw, vt.random_hw


def hw_configs() -> st.SearchStrategy[HwConfig]:
    """Small fixed configs, every shipped config whose modules are VTA's, and small random
    valid ones (random programs carry tokens for VTA's module chain; hardware with a separate
    ALU pipeline routes them differently and is exercised by compiled programs:
    tests/compiler/test_overlap.py)."""
    return vt.hw_configs(separate_alu=False)


@st.composite
def _loop_fields(draw: st.DrawFn, bases: list[int], depth: int, io: int,
                 ii: int) -> tuple[int, int]:
    """(factor_out, factor_in) keeping ``max(bases) + (io-1)*f_out + (ii-1)*f_in < depth``."""
    slack = depth - 1 - max(bases, default=0)
    f_out = draw(_index(slack // (io - 1), 2)) if io > 1 else draw(st.integers(0, 3))
    slack -= (io - 1) * f_out
    f_in = draw(_index(slack // (ii - 1), 2)) if ii > 1 else draw(st.integers(0, 3))
    return f_out, f_in


def _touched(insn: Gemm | Alu, us: list[Uop]) -> dict[str, set[int]]:
    """SRAM entries a GEMM/ALU reads (``inp``, ``wgt``, ``acc_src``) and writes (``acc``,
    which is also the out entry it narrows to)."""
    t: dict[str, set[int]] = {"acc": set(), "inp": set(), "wgt": set(), "acc_src": set()}
    for o in range(insn.iter_out):
        for i in range(insn.iter_in):
            for u in us:
                t["acc"].add(u.dst + o * insn.dst_factor_out + i * insn.dst_factor_in)
                src = u.src + o * insn.src_factor_out + i * insn.src_factor_in
                if isinstance(insn, Gemm):
                    t["inp"].add(src)
                    t["wgt"].add(u.wgt + o * insn.wgt_factor_out + i * insn.wgt_factor_in)
                else:
                    t["acc_src"].add(src)
    return t


class _Gen:
    """Draws instructions while tracking the micro-ops in SRAM."""

    def __init__(self, draw: st.DrawFn, hw: HwConfig, b: ProgramBuilder, uop_words: list[Uop],
                 hot: int):
        self.draw, self.hw, self.b, self.hot = draw, hw, b, hot
        self.depth = {k: hw.depth(k) for k in ("uop", "inp", "wgt", "acc", "out")}
        #: VTA's Chisel design refuses empty micro-op loops and DMAs of zero rows but some
        #: columns (``vta.isa.timing.chisel_refusal``): its token carriers have x_size 0
        self.chisel = hw.timing_model == "chisel"
        self.sram_uops = [Uop(0, 0, 0)] * self.depth["uop"]
        self.dram_uops = uop_words
        self.written_out: set[int] = set()

    def _alloc(self, name: str) -> Any:
        return self.b._allocs[[a.name for a in self.b._allocs].index(name)]

    def load(self, mem: MemType, alloc: str, fill: bool = False) -> Load:
        """A random LOAD; ``fill``: one that covers entries ``0..2*hot+1`` of the scratchpad."""
        d = self.draw
        dram = self._alloc(alloc)
        if fill:
            n = min(2 * self.hot + 2, self.depth[mem.kind], dram.elems)  # loops reach past hot
            y = d(st.integers(1, 3))
            x = -(-n // y)
            stride = d(st.integers(x, x + 2)) if y > 1 else x
            if (y - 1) * stride + x > dram.elems or y * x > self.depth[mem.kind]:
                y, x, stride = 1, n, n
            off = d(st.integers(0, dram.elems - (y - 1) * stride - x))
            return Load(mem, 0, dram.base + off, y, x, stride)
        empty = d(st.integers(0, 7)) == 7  # an empty LOAD: VTA's token carrier
        y = 0 if empty and not self.chisel else d(st.integers(1, 3))
        x = d(st.integers(1, min(4, len(self.dram_uops)) if mem == MemType.UOP else 4))
        if empty and self.chisel:
            x = 0
        stride = d(st.integers(0, x + 3)) if y > 1 else x
        pads = [d(st.sampled_from([0, 0, 0, 1, 2])) for _ in range(4)]  # zeros: sparing
        shape = Load(mem, 0, 0, y, x, stride, *pads)  # what this memory type reads of them
        span = (shape.data_rows - 1) * stride + x if shape.data_elems else 0
        off = d(st.integers(0, dram.elems - span))
        base = d(_index(self.depth[mem.kind] - shape.sram_elems, self.hot))
        if mem == MemType.UOP:  # x_size micro-ops, whatever y_size and the pads say (vta.cc)
            self.sram_uops[base:base + x] = self.dram_uops[off:off + x]
        return Load(mem, base, dram.base + off, y, x, stride, *pads)

    def uop_prologue(self) -> Load:
        """Load every micro-op to SRAM entry 0 (as a compiled program starts)."""
        n = len(self.dram_uops)
        self.sram_uops[:n] = self.dram_uops
        return Load(MemType.UOP, 0, self._alloc("U").base, 1, n, n)

    def store(self) -> Store:
        d = self.draw
        y, x = d(st.integers(1, 3)), d(st.integers(1, 4))
        stride = d(st.integers(0, x + 3)) if y > 1 else x
        span = (y - 1) * stride + x
        out = self._alloc("O")
        return Store(MemType.OUT, d(_index(self.depth["out"] - y * x, self.hot)),
                     out.base + d(st.integers(0, out.elems - span)), y, x, stride)

    def _uop_range(self, nonempty: bool = False) -> tuple[int, int, list[Uop]]:
        n = len(self.dram_uops)  # mostly the micro-ops loaded by the prologue
        bgn = self.draw(st.one_of(st.integers(0, n - 1), st.integers(0, n - 1), st.integers(0, n)))
        end = self.draw(st.integers(bgn + nonempty, bgn + 4))
        return bgn, end, self.sram_uops[bgn:end]

    def gemm(self, accumulate: bool = False) -> tuple[Gemm, list[Uop]]:
        """A random GEMM; ``accumulate``: one that runs at least once, without reset."""
        d = self.draw
        bgn, end, us = self._uop_range(accumulate or self.chisel)
        io = d(st.integers(1, 3)) if accumulate or self.chisel \
            else (d(st.integers(0, 3)) + 1) % 4  # 0: no-op
        ii = d(st.integers(1, 3))
        fo = [_loop_fields(bases, self.depth[k], max(io, 1), ii) for bases, k in
              (([u.dst for u in us], "acc"), ([u.src for u in us], "inp"),
               ([u.wgt for u in us], "wgt"))]
        (dfo, dfi), (sfo, sfi), (wfo, wfi) = (d(s) for s in fo)
        reset = not accumulate and d(st.integers(0, 3)) == 3
        insn = Gemm(reset, bgn, end, io, ii, dfo, dfi, sfo, sfi, wfo, wfi)
        return insn, us

    def alu(self) -> tuple[Alu, list[Uop]]:
        d = self.draw
        bgn, end, us = self._uop_range(self.chisel)
        io, ii = d(st.integers(1, 3)), d(st.integers(1, 3))
        dfo, dfi = d(_loop_fields([u.dst for u in us], self.depth["acc"], io, ii))
        sfo, sfi = d(_loop_fields([u.src for u in us], self.depth["acc"], io, ii))
        op = d(st.sampled_from([o for o in AluOp if o.name.lower() in self.hw.alu.ops]))
        use_imm = d(st.booleans())
        lim = 1 << (self.hw.alu.imm_bits - 1)
        imm = d(st.integers(-40, 40) | st.integers(-lim, lim - 1)) if use_imm else 0
        reset = d(st.integers(0, 7)) == 7
        return Alu(op, reset, bgn, end, io, ii, dfo, dfi, sfo, sfi, use_imm, imm), us


def _with(insn: Instruction, **flags: bool) -> Instruction:
    from vta.sim.examples import with_deps
    return with_deps(insn, **flags)


def _load_writes(insn: Load) -> set[int]:
    return set(range(insn.sram_base, insn.sram_base + insn.sram_elems))


#: redraws of a LOAD or GEMM/ALU that would race with a running phase before giving up
_TRIES = 3


@st.composite
def programs(draw: st.DrawFn, hw: HwConfig) -> Program:
    """A valid, race-free program for ``hw`` (see the module docstring)."""
    b = ProgramBuilder(hw)
    for name, kind in (("A", "inp"), ("W", "wgt"), ("C", "acc"), ("O", "out")):
        b.alloc(name, kind, DRAM_ELEMS)
    b.alloc("U", "uop", 0)
    depth = {k: hw.depth(k) for k in ("inp", "wgt", "acc")}
    hot = draw(st.sampled_from([3, 7, 15]))
    n_uops = draw(st.integers(1, 16))
    words = [Uop(draw(_index(depth["acc"] - 1, hot)),
                 draw(_index(min(depth["inp"], depth["acc"]) - 1, hot)),
                 draw(_index(depth["wgt"] - 1, hot))) for _ in range(n_uops)]
    b.add_uops("U", words)
    gen = _Gen(draw, hw, b, words, hot)
    phases = draw(st.integers(1, 4))
    # buffer sets: no more than twice the token queue depth (else full queues can deadlock)
    cap = min(3, 2 * hw.queues.token_depth)
    nbuf, sbuf = draw(st.integers(1, cap)), draw(st.integers(1, min(2, cap)))
    reads: list[dict[str, set[int]]] = []  # per phase: inp/wgt entries its computes read
    store_reads: list[set[int]] = []  # per phase: out entries its stores read
    tokens = []
    for p in range(phases):
        # loads of phase p run alongside the computes of phases p-nbuf+1 .. p-1
        busy = {k: set().union(*(r[k] for r in reads[max(0, p - nbuf + 1):p]))
                for k in ("inp", "wgt")}
        loads: list[Instruction] = []
        if p == 0 and draw(st.integers(0, 7)) < 7:
            loads += [gen.load(MemType.INP, "A", fill=True), gen.load(MemType.WGT, "W", fill=True)]
        for _ in range(draw(st.integers(0 if loads else 1, 3))):
            mem = draw(st.sampled_from([MemType.INP, MemType.WGT]))
            alloc = "A" if mem == MemType.INP else "W"
            for _ in range(_TRIES):
                ld = gen.load(mem, alloc)
                if not _load_writes(ld) & busy[mem.kind]:
                    break
            else:  # an empty LOAD (Chisel's token carriers have x_size 0)
                y, x = (1, 0) if gen.chisel else (0, 1)
                ld = Load(mem, 0, b._allocs[0 if alloc == "A" else 1].base, y, x, 1)
            loads.append(ld)
        # computes of phase p run alongside the stores of phases p-sbuf+1 .. p-1
        storing = set().union(*store_reads[max(0, p - sbuf + 1):p])
        computes: list[Instruction] = [gen.uop_prologue()] if p == 0 else []
        if p == 0 and draw(st.integers(0, 7)) < 7:
            computes.append(gen.load(MemType.ACC, "C", fill=True))
        read = {"inp": set(), "wgt": set()}
        kinds = [draw(st.sampled_from(["gemm", "alu", "gemm", "alu", "gemm", "acc", "uop"]))
                 for _ in range(draw(st.integers(1, 5)))]
        if p == 0 and draw(st.integers(0, 7)) < 7:
            kinds.insert(0, "gemm+")  # one GEMM that surely computes on the filled window
        for kind in kinds:
            if kind in ("uop", "acc"):
                computes.append(gen.load(MemType.UOP, "U") if kind == "uop" else
                                gen.load(MemType.ACC, "C"))
                continue
            for _ in range(_TRIES):
                insn, us = gen.alu() if kind == "alu" else gen.gemm(kind == "gemm+")
                touched = _touched(insn, us)
                if not touched["acc"] & storing:
                    break
            else:  # an empty LOAD.ACC in its place (Chisel's token carriers have x_size 0)
                y, x = (1, 0) if gen.chisel else (0, 1)
                insn, touched = Load(MemType.ACC, 0, b._allocs[2].base, y, x, 1), None
            computes.append(insn)
            if touched:
                read["inp"] |= touched["inp"]
                read["wgt"] |= touched["wgt"]
                gen.written_out |= touched["acc"]
        reads.append(read)
        stores: list[Instruction] = [gen.store() for _ in range(draw(st.integers(1, 2)))]
        store_reads.append(set().union(*(range(s.sram_base, s.sram_base + s.sram_elems)
                                         for s in stores if isinstance(s, Store))))
        tokens.append((loads, computes, stores))
    # dump the out scratchpad, so that every computed entry is compared
    n_dump = max(DRAM_ELEMS, 1 + max(gen.written_out, default=0))
    dump = b.alloc("D", "out", n_dump)
    tokens[-1][2].append(Store(MemType.OUT, 0, dump.base, 1, n_dump, n_dump))
    for t, (loads, computes, stores) in enumerate(tokens):
        loads[0] = _with(loads[0], pop_next=t >= nbuf)
        loads[-1] = _with(loads[-1], push_next=True)
        computes[0] = _with(computes[0], pop_prev=True, pop_next=t >= sbuf)
        computes[-1] = _with(computes[-1], push_prev=t + nbuf < phases, push_next=True)
        stores[0] = _with(stores[0], pop_prev=True)
        stores[-1] = _with(stores[-1], push_prev=t + sbuf < phases or t == phases - 1)
        b.extend(loads + computes + stores)
    if draw(st.booleans()):
        b.emit(Finish(Deps(pop_next=True)))
    return b.build()
