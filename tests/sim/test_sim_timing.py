"""Per-instruction timing under both timing models, each number derived by hand in the docstring
from the rules docs/simulator.md states (and cites):

* pynq (``hls``): 8-byte beats, latency 32, bursts of 16 beats, 4 reads in flight, writes in
  flight as reads with one command cycle; row overhead 1; pads written after the transfer;
  micro-ops 4 bytes a master beat; GEMM/ALU pipeline depth 4, refilled on every entry of the
  micro-op loop; ALU II 2 for every operand.
* pynq_tsim (``chisel``): the same port with bursts of 256 beats and 16 reads in flight; stores
  one burst at a time (two command cycles, one re-read cycle per 16-byte entry, then the write
  response after ``latency``); pads written while data streams; one drain per instruction;
  ALU II 1 with an immediate, 2 with a register operand.

A read burst issued at cycle ``t`` delivers its beats from ``max(t + 32, channel free)``; bursts
issue one a cycle while fewer than the limit are outstanding. A DMA takes
``max(port, overlap) + after`` (``vta.isa.timing``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vta.config import HwConfig
from vta.isa import Alu, AluOp, Finish, Gemm, Load, MemType, ProgramBuilder, Store
from vta.isa.memport import Channel, Port, Transfer, alone
from vta.isa.timing import duration, fetch_cycles, loop_cycles
from vta.sim import simulate

ROOT = Path(__file__).resolve().parents[2]
HLS = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
CHISEL = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_tsim.yaml")
BOTH = pytest.mark.parametrize("hw", [HLS, CHISEL], ids=["hls", "chisel"])


def _by_model(hw: HwConfig, hls: int, chisel: int) -> int:
    return hls if hw.timing_model == "hls" else chisel


# ---------------------------------------------------------------------------------- DMA


@BOTH
def test_load_inp_one_row(hw: HwConfig) -> None:
    """4 inp entries = 64 B: one burst of 8 beats, issued at 0, data 32..40 (port 40); then one
    row of address generation: 41 in both models."""
    assert duration(hw, Load(MemType.INP, 0, 0, 1, 4, 4)) == 41


@BOTH
def test_load_padded_strided(hw: HwConfig) -> None:
    """2 rows of 3 entries (48 B each, x_stride 5: rows are separate bursts), pads 1 on every
    side: a 4 x 5 image of 20 entries, 14 of them pads. Bursts of 6 beats issue at 0 and 1:
    data 32..38 and 38..44 (port 44).
    HLS: pads written after the data (reset_mem in the row loop): 44 + 2 rows + 14 pads = 60.
    Chisel: pads written while data is awaited: max(44, 12 beats + 14 pads = 26) + 2 = 46."""
    insn = Load(MemType.INP, 0, 0, 2, 3, 5, 1, 1, 1, 1)
    assert duration(hw, insn) == _by_model(hw, 60, 46)


@BOTH
def test_load_wgt_splits_into_bursts(hw: HwConfig) -> None:
    """2 wgt entries = 512 B in one row.
    HLS: four 16-beat bursts issued at 0..3: data 32..48, 48..64, 64..80, 80..96; + 1 = 97.
    Chisel: one 64-beat burst: 32..96; + 1 = 97 (same: the port is the bound)."""
    assert duration(hw, Load(MemType.WGT, 0, 0, 1, 2, 2)) == 97


@BOTH
def test_load_acc(hw: HwConfig) -> None:
    """4 acc entries = 256 B: HLS two 16-beat bursts (32..48, 48..64), Chisel one of 32 beats
    (32..64): 64 + 1 = 65."""
    assert duration(hw, Load(MemType.ACC, 0, 0, 1, 4, 4)) == 65


@BOTH
def test_load_uop_width(hw: HwConfig) -> None:
    """100 micro-ops = 400 B.
    HLS: the 32-bit micro-op master bursts 16 of its 4-byte beats (64 B = 8 bus beats), six of
    them and one of 16 B (2 beats); four in flight: issued at 0..3, data 32..40, 40..48, 48..56,
    56..64; the fifth issues when the first completes (40): data 72..80, the sixth at 48:
    80..88, the seventh at 56: 88..90 (port 90). The master itself takes a cycle per micro-op:
    max(90, 100) + 1 = 101.
    Chisel: two micro-ops a bus beat: one 50-beat burst, 32..82; + 1 = 83."""
    assert duration(hw, Load(MemType.UOP, 0, 0, 1, 100, 100)) == _by_model(hw, 101, 83)


@BOTH
def test_store(hw: HwConfig) -> None:
    """2 rows of 8 out entries (128 B = 16 beats each).
    HLS: write bursts stream: the first issues at 0, its data 1..17 (one command cycle), the
    second at 1, data 17..33; each is outstanding until its response 32 cycles after its last
    beat: 65; + 2 rows = 67.
    Chisel (TensorStoreNarrowVME): one burst at a time, 2 command cycles, 16 beats plus one
    re-read cycle per entry (8): the first issues at 0, data 2..26, response 58; the second
    issues at 58, data 60..84, response 116; + 2 rows = 118."""
    assert duration(hw, Store(MemType.OUT, 0, 0, 2, 8, 8)) == _by_model(hw, 67, 118)


@BOTH
def test_empty_dma_is_one_cycle(hw: HwConfig) -> None:
    """A LOAD or STORE of no rows and no pads (VTA's token carrier) takes one cycle and no
    port; so does a weight LOAD of no rows, whose pads vta.cc ignores (``load_2d``)."""
    assert duration(hw, Load(MemType.INP, 0, 0, 0, 4, 4)) == 1
    assert duration(hw, Load(MemType.WGT, 0, 0, 0, 4, 4, 1, 1, 1, 1)) == 1
    assert duration(hw, Store(MemType.OUT, 0, 0, 1, 0, 0)) == 1


@BOTH
def test_pads_without_data_take_a_cycle_each(hw: HwConfig) -> None:
    """An INP LOAD of no rows still writes its pads (vta.cc ``load_pad_2d``: ``reset_mem`` of
    ``y_offset_0`` and ``y_offset_1`` = (1 + 1) rows x (1 + 4 + 1) entries = 12), one entry a
    cycle (``reset_mem``'s loop) and no port."""
    assert duration(hw, Load(MemType.INP, 0, 0, 0, 4, 4, 1, 1, 1, 1)) == 12


@BOTH
def test_latency_bound_load_counts_each_batch(hw: HwConfig) -> None:
    """8 rows of one inp entry (16 B = 2 beats each): eight 2-beat bursts.
    4 in flight (HLS): issued 0..3, data 32..34, 34..36, 36..38, 38..40; the next four issue as
    those complete (34, 36, 38, 40): data 66..68 .. 72..74. Port 74: two round trips and the
    last batch's beats; + 8 rows = 82.
    16 in flight (Chisel): all issue at 0..7, data 32..48; + 8 = 56.
    One in flight: each burst 32 + 2: 8 * 34 = 272; + 8 = 280."""
    insn = Load(MemType.INP, 0, 0, 8, 1, 1)
    assert duration(hw, insn) == _by_model(hw, 82, 56)
    one = hw.with_changes(**{"memory.outstanding": 1})
    assert duration(one, insn) == 8 * 34 + 8


def test_fetch() -> None:
    """2 instruction words = 32 B: 4 beats, one burst: 32 + 4 + 1 row = 37."""
    assert fetch_cycles(HLS, 2) == 37 and fetch_cycles(CHISEL, 2) == 37


# ---------------------------------------------------------------------------------- GEMM/ALU


@BOTH
def test_gemm_with_and_without_reset(hw: HwConfig) -> None:
    """4 micro-ops, iter 2 x 3 (24 executions at II=1, depth 4).
    HLS: the micro-op loop is entered 6 times, each filling the pipeline: 6 * (4 + 4) = 48.
    Chisel: one flattened loop, one drain: 24 + 4 = 28. A reset costs the same."""
    g = Gemm(False, 0, 4, 2, 3, 0, 0, 0, 0, 0, 0)
    r = Gemm(True, 0, 4, 2, 3, 0, 0, 0, 0, 0, 0)
    assert duration(hw, g) == duration(hw, r) == _by_model(hw, 48, 28)


@BOTH
def test_alu_immediate_and_register(hw: HwConfig) -> None:
    """ADD over 4 micro-ops x 2 x 3; one issue per micro-op (16 lanes).
    HLS: II 2 for both forms (vta.cc alu(): PIPELINE II = 2): 6 * (4 * 2 + 4) = 72 each.
    Chisel: immediate II 1: 24 + 4 = 28; register II 2 (the src read stutters): 48 + 4 = 52.
    With 4 lanes a 16-wide vector takes 4 issues: Chisel register 24 * 4 * 2 + 4 = 196."""
    imm = Alu(AluOp.ADD, False, 0, 4, 2, 3, 0, 0, 0, 0, True, 5)
    reg = Alu(AluOp.ADD, False, 0, 4, 2, 3, 0, 0, 0, 0, False, 0)
    assert duration(hw, imm) == _by_model(hw, 72, 28)
    assert duration(hw, reg) == _by_model(hw, 72, 52)
    if hw is CHISEL:
        assert duration(hw.with_changes(**{"alu.lanes": 4}), reg) == 24 * 4 * 2 + 4


@BOTH
def test_loop_cycles_of_a_wide_unit(hw: HwConfig) -> None:
    """``loop_cycles`` with ``per_issue`` (a user's unit taking several micro-ops an issue, as
    the depthwise MAC example does): 5 micro-ops x 2 x 3, 4 per issue at II 3, depth 2.
    HLS: each of the 6 loop entries issues ceil(5/4) = 2 and refills: 6 * (2 * 3 + 2) = 48.
    Chisel: 30 micro-ops flattened, ceil(30/4) = 8 issues, one drain: 8 * 3 + 2 = 26.
    One per issue is the GEMM's rule: HLS 6 * (5 * 3 + 2) = 102, Chisel 30 * 3 + 2 = 92."""
    g = Gemm(False, 0, 5, 2, 3, 0, 0, 0, 0, 0, 0)
    assert loop_cycles(g, hw, 3, 2, per_issue=4) == _by_model(hw, 48, 26)
    assert loop_cycles(g, hw, 3, 2) == _by_model(hw, 102, 92)


@BOTH
def test_no_microop_is_one_cycle(hw: HwConfig) -> None:
    """An instruction that executes no micro-op (a token relay) takes one cycle."""
    assert duration(hw, Alu(AluOp.ADD, False, 0, 0, 1, 1, 0, 0, 0, 0, True, 0)) == 1


# ---------------------------------------------------------------------------------- machine


def _program(hw: HwConfig, insns: list) -> object:
    b = ProgramBuilder(hw)
    b.alloc("A", "inp", 64)
    b.alloc("B", "acc", 8)
    b.alloc("O", "out", 64)
    b.extend(insns)
    return b.build()


@BOTH
def test_finish_drains_load_and_store(hw: HwConfig) -> None:
    """LOAD.INP (4 entries), STORE (8 entries, one row), FINISH. Fetch reads the 3 words (48 B:
    6 beats, 32 + 6 + 1 = 39) and routes them at 39. The LOAD (read channel) and the STORE
    (write channel) run side by side: the LOAD ends at 39 + 41 = 80.
    HLS store: data 40..56, response 88 (port 49) + 1 row: ends 89. FINISH waits for both
    units and takes one cycle: 90.
    Chisel store: 16 beats + 8 re-reads after 2 command cycles: data 41..65, response 97
    (port 58) + 1: ends 98; FINISH: 99."""
    p = _program(hw, [Load(MemType.INP, 0, 0, 1, 4, 4),
                      Store(MemType.OUT, 0, 16, 1, 8, 8), Finish()])
    r = simulate(p, hw)  # type: ignore[arg-type]
    assert r.cycles == _by_model(hw, 90, 99)
    u = r.stats.units
    assert u["load"].busy == 41 and u["load"].memory == 0 and u["load"].queue == 39
    assert u["store"].busy == _by_model(hw, 50, 59) and u["store"].memory == 0
    assert r.stats.bytes["inp"] == 64 and r.stats.bytes["out"] == 128


@BOTH
def test_port_contention_interleaves_bursts(hw: HwConfig) -> None:
    """A LOAD.INP (load unit) and a LOAD.ACC (compute unit) of 256 B each both start at 39
    (after the fetch of 3 words). Alone each takes 32 + 32 + 1 = 65.
    HLS, two 16-beat bursts each, taking turns burst by burst (round robin): the INP bursts
    issue at 39 and 41, the ACC bursts at 40 and 42; data INP 71..87, ACC 87..103, INP 103..119,
    ACC 119..135. The INP load ends at 119 + 1 = 120 (81 cycles: busy 65, 16 of them memory
    stall), the ACC load at 136 (97: busy 65, 32 memory). Holding the port through a whole DMA
    would have ended them at 104 and 169.
    Chisel, one 32-beat burst each: INP issues at 39, data 71..103, ends 104 (no stall); ACC
    issues at 40, data 103..135, ends 136 (97 cycles: busy 65, 32 memory).
    FINISH (on compute, after the LOAD.ACC) waits for the load unit, then one cycle: 137. With
    a port per unit they do not meet: 39 + 65 + 1 = 105."""
    insns = [Load(MemType.INP, 0, 0, 1, 16, 16), Load(MemType.ACC, 0, 0, 1, 4, 4), Finish()]
    shared = simulate(_program(hw, insns), hw)  # type: ignore[arg-type]
    u = shared.stats.units
    assert (u["load"].busy, u["load"].memory) == (65, _by_model(hw, 16, 0))
    # FINISH is one busy cycle of compute
    assert (u["compute"].busy - 1, u["compute"].memory) == (65, 32)
    assert shared.cycles == 137
    split_hw = hw.with_changes(**{"memory.shared_port": False})
    split = simulate(_program(split_hw, insns), split_hw)  # type: ignore[arg-type]
    assert split.cycles == 105 and split.stats.units["load"].memory == 0


@BOTH
def test_reads_and_writes_use_their_own_channels(hw: HwConfig) -> None:
    """A LOAD and a STORE issued together do not wait for each other (AXI's read and write
    channels are independent): the machine ends when the slower, the STORE, has (see
    ``test_finish_drains_load_and_store``)."""
    p = _program(hw, [Load(MemType.INP, 0, 0, 1, 64, 64), Store(MemType.OUT, 0, 0, 1, 64, 64),
                      Finish()])
    r = simulate(p, hw)  # type: ignore[arg-type]
    assert r.stats.units["store"].memory == 0 and r.stats.units["load"].memory == 0


def test_idle_machine_gemm() -> None:
    """Fetch of 2 words (37), one GEMM of 1 micro-op x 2 x 3 (HLS: 6 * (1 + 4) = 30), FINISH
    (1): 68 cycles; 6 cycles of tensor ops."""
    p = _program(HLS, [Gemm(False, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0), Finish()])
    r = simulate(p, HLS)  # type: ignore[arg-type]
    assert r.cycles == 37 + 30 + 1
    assert r.stats.gemm_cycles == 6 and r.stats.utilization == 6 / r.cycles


# ---------------------------------------------------------------------------------- memport


def test_memport_alone_and_round_robin() -> None:
    """The port model on its own: one transfer alone, and two that share the channel."""
    ch = Channel(latency=32, in_flight=4)
    assert alone(ch, Transfer((16,))) == 48
    assert alone(ch, Transfer((2,) * 8)) == 74  # two round trips and the last batch's beats
    port = Port(ch, Channel(32, 4, 1, write=True))
    a = port.submit(Transfer((16, 16)), 0)
    b = port.submit(Transfer((16, 16)), 0)
    assert port.predictions() == {a: 80, b: 96}
    assert port.next_completion() == 80
    assert port.finish(80) == [a] and port.next_completion() == 96
    # a transfer arriving later joins the rotation for the bursts not yet issued
    port2 = Port(ch, Channel(32, 4, 1, write=True))
    x = port2.submit(Transfer((16,) * 4), 0)
    y = port2.submit(Transfer((16,)), 2)  # x issued at 0 and 1; y takes the turn at 2
    assert port2.predictions() == {x: 32 + 5 * 16, y: 32 + 3 * 16}
