"""Per-instruction durations, computed by hand from the documented formulas."""

from __future__ import annotations

from vta.isa import Alu, AluOp, Finish, Gemm, Load, MemType, ProgramBuilder, Store
from vta.isa.timing import duration, fetch_cycles, transfer_cycles
from vta.sim import simulate


def test_load_small_row(pynq):
    # 4 inp entries = 64 B: 8 beats, 1 burst -> max(32 + 8, 1 * 32) + 1 row overhead
    assert duration(pynq, Load(MemType.INP, 0, 0, 1, 4, 4)) == 41


def test_padded_strided_load(pynq):
    # 2 rows of 3 entries (48 B): 12 beats, 2 bursts -> max(32 + 12, 32) + 2 rows = 46;
    # image 4 x 5 = 20 entries, 6 from DRAM, 14 pads at one cycle each
    insn = Load(MemType.INP, 0, 0, 2, 3, 5, 1, 1, 1, 1)
    assert duration(pynq, insn) == 46 + 14


def test_latency_bound_transfer(pynq):
    one = pynq.with_changes(**{"memory.outstanding": 1})
    # 4 rows of 16 B: 8 beats but 4 bursts, one in flight: 4 * 32 latency + 4 rows
    assert transfer_cycles(one, 4, 16) == 4 * 32 + 4
    # with 4 outstanding the latency overlaps: 32 + 8 beats + 4 rows
    assert transfer_cycles(pynq, 4, 16) == 32 + 8 + 4


def test_long_row_splits_into_bursts(pynq):
    # one 1024 B row: 128 beats, 8 bursts of 128 B, 4 in flight -> max(160, 2 * 32) + 1
    assert transfer_cycles(pynq, 1, 1024) == 161


def test_store_and_empty_dma(pynq):
    assert duration(pynq, Store(MemType.OUT, 0, 0, 2, 8, 8)) == 32 + 2 * 16 + 2
    assert duration(pynq, Load(MemType.INP, 0, 0, 0, 4, 4, 1, 1, 1, 1)) == 1


def test_gemm_and_alu(pynq):
    g = Gemm(False, 0, 4, 2, 3, 0, 0, 0, 0, 0, 0)
    assert duration(pynq, g) == 2 * 3 * 4 * 1 + 4
    reg = Alu(AluOp.ADD, False, 0, 4, 2, 3, 0, 0, 0, 0, False, 0)
    imm = Alu(AluOp.ADD, False, 0, 4, 2, 3, 0, 0, 0, 0, True, 5)
    assert duration(pynq, reg) == 24 * 1 * 2 + 4
    assert duration(pynq, imm) == 24 * 1 * 1 + 4
    narrow = pynq.with_changes(**{"alu.lanes": 4})  # a 16-wide vector takes 4 issues
    assert duration(narrow, reg) == 24 * 4 * 2 + 4


def test_fetch(pynq):
    # 2 instructions = 32 B: 4 beats, one burst -> max(36, 32) + 1
    assert fetch_cycles(pynq, 2) == 37


def _single(pynq, insn):
    b = ProgramBuilder(pynq)
    b.alloc("A", "inp", 8)
    b.alloc("O", "out", 8)
    b.extend([insn, Finish()])
    return b.build()


def test_idle_machine_load(pynq):
    # fetch both words (37), LOAD (41), FINISH after the load unit drains (+1)
    r = simulate(_single(pynq, Load(MemType.INP, 0, 0, 1, 4, 4)), pynq)
    assert r.cycles == 37 + 41 + 1
    assert r.stats.units["load"].busy == 41
    assert r.stats.units["load"].queue == 37
    assert r.stats.bytes["inp"] == 64 and r.stats.bytes["insn"] == 32


def test_idle_machine_gemm(pynq):
    r = simulate(_single(pynq, Gemm(False, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0)), pynq)
    assert r.cycles == 37 + (6 + 4) + 1
    assert r.stats.gemm_cycles == 6
    assert r.stats.utilization == 6 / r.cycles


def test_memory_port_contention(pynq):
    """A LOAD and a STORE issued together: on a shared port the store waits for the load."""
    def prog(hw):
        b = ProgramBuilder(hw)
        b.alloc("A", "inp", 64)
        b.alloc("O", "out", 64)
        b.extend([Load(MemType.INP, 0, 0, 1, 64, 64), Store(MemType.OUT, 0, 64, 1, 64,
                                                              64), Finish()])
        return b.build()
    shared = simulate(prog(pynq), pynq)
    split_hw = pynq.with_changes(**{"memory.shared_port": False})
    split = simulate(prog(split_hw), split_hw)
    load = 32 + 128 + 1  # 1024 B: 128 beats
    assert shared.stats.units["store"].memory == load
    assert split.stats.units["store"].memory == 0
    assert shared.cycles == split.cycles + load
