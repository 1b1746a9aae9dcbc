"""Per-instruction timing under both timing models, each number derived by hand in the docstring
from the rules vta/isa/timing.py states and cites (``vta.cc:N``: apache/tvm-vta@d4a15f6
hardware/xilinx/src/vta.cc; ``X.scala:N``: hardware/chisel/src/main/scala at that commit):

* pynq (``hls``): 8-byte beats, latency 32, bursts of 16 beats, 4 in flight (reads and
  writes), a write burst's data one command cycle after its issue, its response 32 after its
  last beat. One call of the module per instruction (vta.cc:189, 453, 532): 1 control cycle
  before and 1 after (assumption); a LOAD into inp/wgt also waits 4 cycles for its y_offset
  multiplies (vta.cc:200-204, ``Mul_LUT latency = 4``). Rows one after another
  (``memory.row_overlap: false``, vta.cc:62-71, 547-557): per row 1 cycle of row overhead,
  the left pads, the row's bursts (in flight together), the right pads; top pads before the
  first row, bottom pads after the last, one entry a cycle (``reset_mem``, vta.cc:32-44).
  Micro-ops 4 bytes a cycle (vta.cc:428). GEMM/ALU: each entry of the micro-op loop costs its
  issues + a fill of 4 (``gemm.fill``, ``alu.fill``: an assumption); ALU II 2 for every operand
  (vta.cc:351). FINISH 2.
* pynq_tsim (``chisel``): bursts of 256 beats ending at 2 KiB boundaries, 16 reads in flight,
  fetch before micro-ops before inp before wgt before acc on the read channel (VME.scala:242).
  LOAD: 2 cycles before the first command (the module's idle cycle, Load.scala:64-72, and the
  VME's command queue, VME.scala:216) plus one per top pad row (TensorLoadNarrowVME.scala:
  649-658), 2 after the last beat (VME.scala:297-302, the in-flight counter 87-99, 292) plus 1
  for an entry wider than a beat (67-70); pads written between data beats. STORE: 1 idle cycle,
  then one burst at a time: 2 command cycles, the beats with a re-read cycle between entries
  (TensorStoreNarrowVME.scala:116-127), the response 32 after the last beat and a cycle taking
  it (128-131). GEMM/ALU: 2 cycles to start (Compute.scala:99-107, 162, 180), the flattened
  issues, a drain of 4 (TensorGemm.scala:561, 637, 641; TensorAlu.scala:226-229), 1 to see
  ``done``; ALU II 1 with an immediate, 2 with a register operand (TensorAlu.scala:122).
  FINISH and token carriers 2 (Compute.scala:94, 99-116; Load.scala:66-76).

A read burst issued at cycle ``t`` delivers its beats from ``max(t + 32, channel free)``; bursts
issue one a cycle while fewer than the limit are outstanding. A DMA takes
``max(port, overlap) + after`` (``vta.isa.timing``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from vta.config import HwConfig
from vta.errors import AsmError
from vta.isa import Alu, AluOp, Finish, Gemm, Load, MemType, ProgramBuilder, Store, assemble
from vta.isa.memport import Channel, Port, Transfer, alone
from vta.isa.timing import dma_timing, duration, fetch_cycles, loop_cycles
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
    """4 inp entries = 64 B: one burst of 8 beats.
    HLS: 1 control + 4 setup + 1 row overhead = lead 6; data 38..46; + 1 control = 47.
    Chisel: lead 2; data 34..42; + 2 + 1 (a 16-byte entry on 8-byte beats) = 45."""
    assert duration(hw, Load(MemType.INP, 0, 0, 1, 4, 4)) == _by_model(hw, 47, 45)


@BOTH
def test_load_inp_padded_strided(hw: HwConfig) -> None:
    """2 rows of 3 entries (48 B = 6 beats each, x_stride 5), pads 1 on every side: a 5-wide
    image, 14 pad entries.
    HLS: lead 1 + 4 + 5 (top pad row) + 1 (row overhead) + 1 (left pad) = 12; row 0 data
    44..50; gap 1 (right pad) + 1 + 1 (left pad) = 3: row 1 issues at 53, data 85..91; then the
    right pad and the bottom row (1 + 5) and 1 control: 98.
    Chisel: lead 2 + 1 (one top pad row) = 3; both rows' bursts issue at 3 and 4: data 35..41,
    41..47; the pads fit between (3 + 12 beats + 14 pads = 29 < 47); + 3 = 50."""
    insn = Load(MemType.INP, 0, 0, 2, 3, 5, 1, 1, 1, 1)
    assert duration(hw, insn) == _by_model(hw, 98, 50)


def test_the_brief_examples() -> None:
    """C2's 9-row input load (15 entries = 240 B a row, x_stride 56, top and left pad) and a
    4-row store of 14 entries (224 B a row) on pynq.
    LOAD: lead 1 + 4 + 16 (top pad row of 1 + 15) + 1 + 1 = 23; each row two bursts (16 and
    14 beats) issued a cycle apart: data +32..+48, +48..+62: 62 a row; gap 0 + 1 + 1 = 2:
    23 + 9 * 62 + 8 * 2 = 597; + 1 control = 598 (every row's bursts in flight together,
    ``memory.row_overlap: true``: 342).
    STORE: lead 1 + 1 (row overhead); each row two bursts (16 and 12 beats) issued a cycle
    apart, data +1..+17, +17..+29, responses +49, +61: 61 a row; gap 1: 2 + 4 * 61 + 3 = 249;
    + 1 control = 250 (rows in flight together: 151)."""
    load = Load(MemType.INP, 0, 0, 9, 15, 56, 1, 0, 1, 0)
    store = Store(MemType.OUT, 4, 14864, 4, 14, 56)
    assert duration(HLS, load) == 598 and duration(HLS, store) == 250
    overlap = HLS.with_changes(**{"memory.row_overlap": True})
    assert duration(overlap, load) == 342 and duration(overlap, store) == 151


@BOTH
def test_load_wgt_splits_into_bursts(hw: HwConfig) -> None:
    """2 wgt entries = 512 B in one row.
    HLS: lead 6; four 16-beat bursts issued at 6..9: data 38..54 .. 86..102; + 1 = 103.
    Chisel: one 64-beat burst issued at 2: data 34..98; + 3 = 101."""
    assert duration(hw, Load(MemType.WGT, 0, 0, 1, 2, 2)) == _by_model(hw, 103, 101)


@BOTH
def test_load_wgt_rows(hw: HwConfig) -> None:
    """2 rows of one wgt entry (256 B), x_stride 4.
    HLS (rows one after another): lead 6; row 0 bursts at 6, 7: data 38..54, 54..70; gap 1:
    row 1 at 71, 72: data 103..119, 119..135; + 1 = 136.
    Chisel (rows in flight together): one 32-beat burst a row, issued at 2 and 3: data 34..66,
    66..98; + 3 = 101."""
    assert duration(hw, Load(MemType.WGT, 0, 0, 2, 1, 4)) == _by_model(hw, 136, 101)


@BOTH
def test_load_acc(hw: HwConfig) -> None:
    """4 acc entries = 256 B on the compute module (no setup).
    HLS: lead 1 + 1; two 16-beat bursts at 2, 3: data 34..50, 50..66; + 1 = 67.
    Chisel: lead 2; one 32-beat burst: 34..66; + 3 = 69."""
    assert duration(hw, Load(MemType.ACC, 0, 0, 1, 4, 4)) == _by_model(hw, 67, 69)


@BOTH
def test_load_acc_padded(hw: HwConfig) -> None:
    """2 rows of 2 acc entries (128 B each, x_stride 2), one top pad row and a right pad: a
    3-wide image, 5 pad entries.
    HLS: lead 1 + 3 (top pad row) + 1 = 5; row 0 one 16-beat burst: data 37..53; gap 1 (right
    pad) + 1 = 2: row 1 at 55, data 87..103; then the right pad and 1 control: 105.
    Chisel: lead 2 + 1 (top pad row) = 3; bursts at 3, 4: data 35..51, 51..67; pads between;
    + 3 = 70."""
    insn = Load(MemType.ACC, 0, 0, 2, 2, 2, 1, 0, 0, 1)
    assert duration(hw, insn) == _by_model(hw, 105, 70)


@BOTH
def test_load_uop_width(hw: HwConfig) -> None:
    """100 micro-ops = 400 B.
    HLS: the 32-bit micro-op master (vta.cc:428) takes 4 bytes a cycle: bursts of 16 of its
    beats (64 B, 16 cycles), six and one of 16 B (4 cycles); lead 1 + 1 = 2; four in flight:
    issued at 2..5, data 34..50, 50..66, 66..82, 82..98; the fifth issues when the first
    completes (50): data 98..114, the sixth at 66: 114..130, the seventh at 82: 130..134;
    + 1 = 135.
    Chisel: two micro-ops a bus beat: one 50-beat burst at 2, data 34..84; + 2 = 86.
    HLS with a 64-bit micro-op port (``memory.uop_beat_bytes: 8``, pynq_uop64): bursts of 16
    eight-byte beats (128 B): three and one of 16 B, issued at 2..5: data 34..50, 50..66,
    66..82, 82..84; + 1 = 85."""
    insn = Load(MemType.UOP, 0, 0, 1, 100, 100)
    assert duration(hw, insn) == _by_model(hw, 135, 86)
    if hw is HLS:
        assert duration(HwConfig.load("pynq_uop64"), insn) == 85


@BOTH
def test_store(hw: HwConfig) -> None:
    """2 rows of 8 out entries (128 B = 16 beats each).
    HLS: lead 1 + 1; row 0 issues at 2, data 3..19, response 51; gap 1: row 1 at 52, data
    53..69, response 101; + 1 = 102.
    Chisel: lead 1; one burst at a time: the first issues at 1, data 3..26 (16 beats and 7
    re-reads between its 8 entries), response 58, taken at 58: free at 59; the second issues at
    59, data 61..84, free at 117 = 117."""
    assert duration(hw, Store(MemType.OUT, 0, 0, 2, 8, 8)) == _by_model(hw, 102, 117)


@BOTH
def test_empty_dma(hw: HwConfig) -> None:
    """A LOAD or STORE that moves nothing (VTA's token carrier) uses no port.
    HLS: the module's call still runs: 1 + 1, and a LOAD into inp/wgt its 4 setup cycles: 6, 2.
    Chisel: ``sSync`` (x_size 0, Decode.scala:178,206,228): the idle cycle and the sync cycle:
    2. Under Chisel a LOAD of y_size 0 but x_size 4 is refused (it would never finish)."""
    carrier = Load(MemType.INP, 0, 0, 1, 0, 4)
    assert duration(hw, carrier) == _by_model(hw, 6, 2)
    assert duration(hw, Load(MemType.ACC, 0, 0, 1, 0, 4)) == 2
    assert duration(hw, Store(MemType.OUT, 0, 0, 1, 0, 0)) == 2
    zero_rows = Load(MemType.INP, 0, 0, 0, 4, 4)
    if hw is CHISEL:
        with pytest.raises(AsmError, match=r"y_size 0 but x_size 4.*never finish"):
            assemble("LOAD.INP sram=0 dram=0 y=0 x=4 stride=4", hw)
    else:
        assert duration(hw, zero_rows) == 6


@BOTH
def test_latency_bound_load(hw: HwConfig) -> None:
    """8 rows of one inp entry (16 B = 2 beats each).
    HLS, rows one after another: lead 6; each row a round trip, 32 + 2 = 34; gap 1:
    6 + 8 * 34 + 7 = 285; + 1 = 286. With the rows in flight together (4 at once): lead 1 + 4;
    issued 5..8, data 37..39 .. 43..45, the next four as those complete: data 71..73 ..
    77..79; then 8 row overheads and 1 control: 88.
    Chisel, 16 in flight: issued 2..9, data 34..50; + 3 = 53. One in flight: 2 + 8 * 34 + 3 =
    277."""
    insn = Load(MemType.INP, 0, 0, 8, 1, 1)
    assert duration(hw, insn) == _by_model(hw, 286, 53)
    if hw is HLS:
        assert duration(hw.with_changes(**{"memory.row_overlap": True}), insn) == 88
    else:
        assert duration(hw.with_changes(**{"memory.outstanding": 1}), insn) == 277


def test_bursts_end_at_the_boundary() -> None:
    """A 256-B row at byte 1920 (inp entry 120): Chisel's bursts end at the next multiple of
    2 KiB (TensorLoadNarrowVME.scala:577): 128 B (16 beats) then 128 B; the same row at byte 0
    is one 32-beat burst. HLS bursts (16 beats) end at 4 KiB multiples: a row of 256 B at byte
    4032 is 64 B (8 beats) + 128 B + 64 B."""
    def bursts(hw: HwConfig, addr: int) -> tuple[int, ...]:
        t = dma_timing(hw, 1, 16, 16, addr=addr)
        assert t is not None
        return t.transfer.bursts
    assert bursts(CHISEL, 1920) == (16, 16) and bursts(CHISEL, 0) == (32,)
    assert bursts(HLS, 4032) == (8, 16, 8) and bursts(HLS, 0) == (16, 16)


def test_fetch() -> None:
    """2 instruction words = 32 B: 4 beats, one burst: 32 + 4, and the row overhead: HLS 37,
    Chisel 36. Chisel's fetch reads 128 words a request (FetchVME64.scala:57): 2 KiB, one
    256-beat burst: 32 + 256 = 288."""
    assert fetch_cycles(HLS, 2) == 37 and fetch_cycles(CHISEL, 2) == 36
    assert CHISEL.queues.fetch_batch == 128 and fetch_cycles(CHISEL, 128) == 288


# ---------------------------------------------------------------------------------- GEMM/ALU


@BOTH
def test_gemm_with_and_without_reset(hw: HwConfig) -> None:
    """4 micro-ops, iter 2 x 3 (24 executions at II=1, fill 4).
    HLS: the micro-op loop is entered 6 times, each paying the fill: 6 * (4 + 4) = 48; + 2
    control = 50.
    Chisel: one flattened loop: 2 to start, 24 issues, a drain of 4, 1 to see done = 31. A
    reset costs the same."""
    g = Gemm(False, 0, 4, 2, 3, 0, 0, 0, 0, 0, 0)
    r = Gemm(True, 0, 4, 2, 3, 0, 0, 0, 0, 0, 0)
    assert duration(hw, g) == duration(hw, r) == _by_model(hw, 50, 31)


@BOTH
def test_alu_immediate_and_register(hw: HwConfig) -> None:
    """ADD over 4 micro-ops x 2 x 3; one issue per micro-op (16 lanes).
    HLS: II 2 for both forms (vta.cc:351): 6 * (4 * 2 + 4) + 2 = 74 each.
    Chisel: immediate II 1: 2 + 24 + 4 + 1 = 31; register II 2 (the src read stutters):
    2 + 48 + 4 + 1 = 55. With 4 lanes a 16-wide vector takes 4 issues: Chisel register
    2 + 24 * 4 * 2 + 4 + 1 = 199."""
    imm = Alu(AluOp.ADD, False, 0, 4, 2, 3, 0, 0, 0, 0, True, 5)
    reg = Alu(AluOp.ADD, False, 0, 4, 2, 3, 0, 0, 0, 0, False, 0)
    assert duration(hw, imm) == _by_model(hw, 74, 31)
    assert duration(hw, reg) == _by_model(hw, 74, 55)
    if hw is CHISEL:
        assert duration(hw.with_changes(**{"alu.lanes": 4}), reg) == 2 + 24 * 4 * 2 + 4 + 1


def test_fill_and_flat_loop_are_knobs() -> None:
    """The HLS fill is a named assumption (``gemm.fill``, default ``pipeline_depth``): GEMM of 4
    micro-ops x 2 x 3 with fill 0: 6 * 4 + 2 = 26; fill 8: 6 * 12 + 2 = 74. Flattened
    (``gemm.flat_loop``: one fill per instruction, a co-design variant of the HLS design):
    2 + 24 + 4 = 30."""
    g = Gemm(False, 0, 4, 2, 3, 0, 0, 0, 0, 0, 0)
    assert duration(HLS.with_changes(**{"gemm.fill": 0}), g) == 26
    assert duration(HLS.with_changes(**{"gemm.fill": 8}), g) == 74
    assert duration(HLS.with_changes(**{"gemm.flat_loop": True}), g) == 30
    assert HLS.with_changes(**{"gemm.pipeline_depth": 6}).gemm.fill == 6  # follows the depth


@BOTH
def test_loop_cycles_of_a_wide_unit(hw: HwConfig) -> None:
    """``loop_cycles`` with ``per_issue`` (a user's unit taking several micro-ops an issue, as
    the depthwise MAC example does): 5 micro-ops x 2 x 3, 4 per issue at II 3, fill 2.
    HLS: each of the 6 loop entries issues ceil(5/4) = 2 and fills: 6 * (2 * 3 + 2) + 2 = 50.
    Chisel: 30 micro-ops flattened, ceil(30/4) = 8 issues, one drain: 3 + 8 * 3 + 2 = 29.
    One per issue is the GEMM's rule: HLS 6 * (5 * 3 + 2) + 2 = 104, Chisel 3 + 30 * 3 + 2 =
    95."""
    g = Gemm(False, 0, 5, 2, 3, 0, 0, 0, 0, 0, 0)
    assert loop_cycles(g, hw, 3, 2, per_issue=4) == _by_model(hw, 50, 29)
    assert loop_cycles(g, hw, 3, 2) == _by_model(hw, 104, 95)


@BOTH
def test_no_microop(hw: HwConfig) -> None:
    """An instruction that executes no micro-op (a token relay): HLS, the call alone (the loops
    do not run): 2. Chisel's counters would wrap (``uop_end - 1``, TensorGemm.scala:268): the
    Chisel config refuses it by name."""
    relay = Alu(AluOp.ADD, False, 0, 0, 1, 1, 0, 0, 0, 0, True, 0)
    if hw is HLS:
        assert duration(hw, relay) == 2
    else:
        with pytest.raises(AsmError, match=r"executes no micro-op.*counters past zero"):
            assemble("ALU.ADD uop=0:0 iter=1,1 dst=0,0 src=0,0 imm=0", hw)
        with pytest.raises(AsmError, match=r"iter 0 x 1.*counters past zero"):
            assemble("GEMM uop=0:4 iter=0,1 dst=0,0 src=0,0 wgt=0,0", hw)


@BOTH
def test_finish(hw: HwConfig) -> None:
    """FINISH: HLS a call of compute that sets done (vta.cc:470-472): 2; Chisel the idle cycle
    and one sExe cycle (Compute.scala:94): 2."""
    assert duration(hw, Finish()) == 2


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
    6 beats; HLS 32 + 6 + 1 = 39, Chisel 38) and routes them. The LOAD (read channel) and the
    STORE (write channel) run side by side.
    HLS: the LOAD takes 47 (ends 86); the STORE's burst issues at 39 + 2, data 42..58, response
    90, + 1: ends 91 (busy 52). FINISH waits for both units and takes 2: 93.
    Chisel: the LOAD takes 45; the STORE issues at 39, data 41..64 (16 beats and 7 re-reads),
    response 96, taken: 97 (busy 59); FINISH: 99."""
    p = _program(hw, [Load(MemType.INP, 0, 0, 1, 4, 4),
                      Store(MemType.OUT, 0, 16, 1, 8, 8), Finish()])
    r = simulate(p, hw)  # type: ignore[arg-type]
    assert r.cycles == _by_model(hw, 93, 99)
    u = r.stats.units
    fetch = _by_model(hw, 39, 38)
    assert u["load"].busy == _by_model(hw, 47, 45) and u["load"].memory == 0
    assert u["load"].queue == fetch
    assert u["store"].busy == _by_model(hw, 52, 59) and u["store"].memory == 0
    assert r.stats.bytes["inp"] == 64 and r.stats.bytes["out"] == 128


@BOTH
def test_port_contention_interleaves_bursts(hw: HwConfig) -> None:
    """A LOAD.INP (load unit, 256 B) and a LOAD.ACC (compute unit, 256 B) both start when the 3
    words are fetched (HLS 39, Chisel 38).
    HLS: alone the INP load takes 6 + 32 + 32 + 1 = 71, the ACC load 2 + 32 + 32 + 1 = 67. The
    ACC load is ready first (lead 2): its bursts issue at 41, 42 (data 73..89, 89..105); the INP
    bursts at 45, 46 take the channel after them: 105..121, 121..137. ACC ends 106 (no stall),
    INP 138 (99 cycles: busy 71, 28 memory stall). FINISH (on compute) waits for the load unit,
    then 2: 140. With a port per unit: 39 + 71 + 2 = 112.
    Chisel: both ready at 40; the fixed-priority arbiter serves inp before acc (VME.scala:242;
    Core.scala:76-78): INP data 72..104, ends 107 (alone 69); ACC issues at 41, data 104..136,
    ends 139 (101 cycles: busy 69, 32 memory). FINISH: 141; a port per unit: 38 + 69 + 2 =
    109."""
    insns = [Load(MemType.INP, 0, 0, 1, 16, 16), Load(MemType.ACC, 0, 0, 1, 4, 4), Finish()]
    shared = simulate(_program(hw, insns), hw)  # type: ignore[arg-type]
    u = shared.stats.units
    assert (u["load"].busy, u["load"].memory) == _by_model(hw, (71, 28), (69, 0))
    # FINISH is two busy cycles of compute
    assert (u["compute"].busy - 2, u["compute"].memory) == _by_model(hw, (67, 0), (69, 32))
    assert shared.cycles == _by_model(hw, 140, 141)
    split_hw = hw.with_changes(**{"memory.shared_port": False})
    split = simulate(_program(split_hw, insns), split_hw)  # type: ignore[arg-type]
    assert split.cycles == _by_model(hw, 112, 109)
    assert split.stats.units["load"].memory == 0


@BOTH
def test_reads_and_writes_use_their_own_channels(hw: HwConfig) -> None:
    """A LOAD and a STORE issued together do not wait for each other (AXI's read and write
    channels are independent): neither stalls on the port."""
    p = _program(hw, [Load(MemType.INP, 0, 0, 1, 64, 64), Store(MemType.OUT, 0, 0, 1, 64, 64),
                      Finish()])
    r = simulate(p, hw)  # type: ignore[arg-type]
    assert r.stats.units["store"].memory == 0 and r.stats.units["load"].memory == 0


def test_idle_machine_gemm() -> None:
    """Fetch of 2 words (37), one GEMM of 1 micro-op x 2 x 3 (HLS: 6 * (1 + 4) + 2 = 32),
    FINISH (2): 71 cycles; 6 cycles of tensor ops."""
    p = _program(HLS, [Gemm(False, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0), Finish()])
    r = simulate(p, HLS)  # type: ignore[arg-type]
    assert r.cycles == 37 + 32 + 2
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


def test_memport_rows_one_after_another() -> None:
    """A grouped transfer: two rows of two 4-beat bursts, lead 3, gap 2. Row 0 issues at 3 and
    4: data 35..39, 39..43; row 1 waits for 43 + 2 = 45: data 77..81, 81..85."""
    ch = Channel(latency=32, in_flight=4)
    assert alone(ch, Transfer((4, 4, 4, 4), groups=(2, 2), lead=3, gap=2)) == 85
    assert alone(ch, Transfer((4, 4, 4, 4), lead=3)) == 3 + 32 + 16


def test_memport_priority_arbiter() -> None:
    """One burst in flight; a (priority 3, four 4-beat bursts) arrives at 0, b (priority 2, two
    bursts) at 1. Round robin alternates: a0 at 0 (data 32..36), b0 at 36, a1 at 72, b1 at
    108: b completes at 144. Fixed priority serves b first once it is there: a0 at 0, b0 at 36,
    b1 at 72 (data 104..108): b completes at 108, a's three others at 108, 144, 180: 216."""
    rr = Port(Channel(32, 1), Channel(32, 1, 1, write=True))
    a = rr.submit(Transfer((4,) * 4, priority=3), 0)
    rr.finish(1)
    b = rr.submit(Transfer((4, 4), priority=2), 1)
    assert rr.predictions()[b] == 144
    pr = Port(Channel(32, 1, priority=True), Channel(32, 1, 1, write=True))
    a = pr.submit(Transfer((4,) * 4, priority=3), 0)
    pr.finish(1)
    b = pr.submit(Transfer((4, 4), priority=2), 1)
    assert pr.predictions() == {a: 216, b: 108}


def test_pads_without_data_after_the_call() -> None:
    """An INP LOAD of no rows still writes its pads (vta.cc ``load_pad_2d``: ``reset_mem`` of
    ``y_offset_0`` and ``y_offset_1``, lines 60 and 72: (1 + 1) rows x (1 + 4 + 1) entries =
    12), one entry a cycle and no port, after the load module's call (1 + 1) and setup (4):
    6 + 12 = 18. A weight LOAD ignores its pads (``load_2d``): 6."""
    assert duration(HLS, Load(MemType.INP, 0, 0, 0, 4, 4, 1, 1, 1, 1)) == 18
    assert duration(HLS, Load(MemType.WGT, 0, 0, 0, 4, 4, 1, 1, 1, 1)) == 6
