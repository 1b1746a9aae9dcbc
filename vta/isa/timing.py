"""How long an instruction occupies its unit: pure functions of its fields and the HwConfig,
under one of two named timing models.

These are the timing facts every layer reads: the simulator charges them, the compiler's cost
model predicts with them. Each instruction's ``duration`` lives on its definition
(``vta.isa.builtins`` for the built-ins); the shared formulas are here, and the memory port's
burst scheduling in ``vta.isa.memport``.

Two timing models (``HwConfig.timing_model``), one per implementation of VTA; docs/simulator.md
cites the source file and function each rule follows:

* ``hls``: VTA's HLS design (hardware/xilinx/src/vta.cc), which the PYNQ bitstream is built
  from. Only the innermost micro-op loop of GEMM and ALU is pipelined (``#pragma HLS PIPELINE``
  on ``READ_GEMM_UOP`` / ``READ_ALU_UOP``; the ``iter_out``/``iter_in`` loops around it are not
  perfectly nested), so the pipeline fills and drains on every entry of that loop. Micro-ops
  are read over their own 32-bit port (``uop_T``, 4 bytes a beat). Pads are written by
  ``reset_mem`` in the same loop as the row copies, one entry a cycle, serially with them.
  Stores stream their bursts without waiting for each write response.
* ``chisel``: VTA's Chisel design (hardware/chisel, what tsim runs). GEMM and ALU issue from
  one flattened counter (``TensorGemmIndexGenerator``, ``TensorAluIndexGenerator``) and drain
  once per instruction. Micro-ops arrive a full bus beat at a time (``LoadUop``: two per 64-bit
  beat). ``ZeroPadding`` writes pads in the cycles no data arrives (``canWriteMem :=
  !vmeDataFirePipe``). ``TensorStoreNarrowVME`` issues one write burst at a time, waits for its
  response (``sWriteAck``), spends two cycles on the command (``sWriteCmd``, then the VME's
  ``sWriteAddr``) and one cycle re-reading the scratchpad after each entry (``sReadMem``).

Numbers that differ between the models and that a design may change (ALU II for immediates,
reads in flight, burst length) are config fields whose defaults depend on the model
(``vta.config.MODEL_DEFAULTS``); the behaviours above are the model's.

DMA (LOAD, STORE, instruction fetch; ``dma_timing``). A transfer of ``rows`` rows of
``row_bytes`` bytes is split into bursts (``burst_bytes``; bursts never cross rows) of beats of
``bus_bytes``; HLS's micro-op master is 32 bits wide: its bursts of 16 four-byte beats are
packed into bus beats by the interconnect, and the master takes a cycle per four bytes. How
bursts share the port, and how long a transfer takes alone, is ``vta.isa.memport``. The
instruction takes ``max(port, overlap) + after`` cycles: ``overlap`` is the work done while
data streams (the master's own beats; Chisel: also every pad entry, written between the data
beats), ``after`` follows the transfer (each row's ``row_overhead`` of address generation; HLS:
every pad entry). An empty LOAD or STORE (``x_size`` or ``y_size`` 0: VTA's token carrier) takes
one cycle and does not use the port.

Micro-op instructions (GEMM, ALU, a user's unit; ``loop_cycles``): with ``n`` micro-ops,
``issue`` cycles each (``gemm.ii``; the ALU: ``ceil(batch * block_out / alu.lanes)`` issues at
``alu.ii_imm`` with an immediate, ``alu.ii`` with a register operand) and pipeline depth ``d``:
HLS ``iter_out * iter_in * (n * issue + d)``, Chisel ``iter_out * iter_in * n * issue + d``; an
instruction that executes no micro-op takes one cycle. FINISH: one cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from vta.config import HwConfig
from vta.isa.defs import definition_of
from vta.isa.memport import Channel, Transfer, alone

__all__ = ["INSN_BYTES", "TimingModel", "MODELS", "model_of", "DmaTiming", "read_channel",
           "write_channel", "dma_timing", "dma_cycles", "fetch_timing", "fetch_cycles",
           "alu_issues", "loop_cycles", "microop_cycles", "duration"]

#: bytes of one instruction word in DRAM
INSN_BYTES = 16


@dataclass(frozen=True, slots=True)
class TimingModel:
    """The behaviours that tell VTA's two implementations apart (the module docstring)."""

    name: str
    #: the pipeline fills and drains on each entry of the micro-op loop (else once per insn)
    fill_per_loop: bool
    #: bytes of micro-ops one beat carries (None: a full bus beat)
    uop_beat_bytes: int | None
    #: pads are written while the data streams in (else serially with it)
    pads_overlap: bool
    #: STORE: one write burst in flight, with a scratchpad re-read cycle after each entry
    store_serial: bool
    #: cycles from a write burst's issue to its first beat
    write_command: int


MODELS: dict[str, TimingModel] = {
    "hls": TimingModel("hls", fill_per_loop=True, uop_beat_bytes=4, pads_overlap=False,
                       store_serial=False, write_command=1),
    "chisel": TimingModel("chisel", fill_per_loop=False, uop_beat_bytes=None, pads_overlap=True,
                          store_serial=True, write_command=2),
}


def model_of(hw: HwConfig) -> TimingModel:
    """The timing model ``hw`` names."""
    return MODELS[hw.timing_model]


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


# ------------------------------------------------------------------------------ memory port


def read_channel(hw: HwConfig) -> Channel:
    """The port's read channel: ``memory.latency`` to the first beat, ``memory.outstanding``
    bursts in flight."""
    m = hw.memory
    assert m.outstanding is not None
    return Channel(m.latency, m.outstanding)


def write_channel(hw: HwConfig) -> Channel:
    """The write channel: bursts in flight as reads (HLS) or one at a time (Chisel), each
    outstanding until its response ``memory.latency`` after its last beat."""
    m, tm = hw.memory, model_of(hw)
    assert m.outstanding is not None
    return Channel(m.latency, 1 if tm.store_serial else m.outstanding, tm.write_command,
                   write=True)


@dataclass(frozen=True, slots=True)
class DmaTiming:
    """A DMA's timing: its bursts on a channel, the scratchpad work that overlaps them and the
    cycles after them (the module docstring)."""

    transfer: Transfer
    channel: Channel
    overlap: int = 0
    after: int = 0

    def cycles(self, port: int) -> int:
        """The instruction's cycles when its transfer took ``port`` cycles."""
        return max(1, max(port, self.overlap) + self.after)

    @property
    def alone(self) -> int:
        """Its cycles on an idle port: the instruction's duration."""
        return self.cycles(alone(self.channel, self.transfer))


def _bursts(hw: HwConfig, rows: int, row_bytes: int, beat_bytes: int,
            entry_bytes: int | None = None) -> tuple[int, ...]:
    """Channel cycles of each burst of ``rows`` rows of ``row_bytes``. A master ``beat_bytes``
    wide bursts as many of its beats as ``memory.burst_bytes`` holds bus beats (HLS's
    ``max_read_burst_length``); a narrower master's beats are packed into full bus beats by
    the interconnect's upsizer, so a burst occupies the channel ``ceil(bytes / bus_bytes)``
    cycles. With ``entry_bytes``, one more cycle per entry (Chisel's store re-reads the
    scratchpad after each entry)."""
    m = hw.memory
    assert m.burst_bytes is not None
    per_burst = (m.burst_bytes // m.bus_bytes) * beat_bytes
    out: list[int] = []
    for _ in range(rows):
        left = row_bytes
        while left > 0:
            chunk = min(left, per_burst)
            beats = _ceil(chunk, m.bus_bytes)
            if entry_bytes is not None:
                beats += _ceil(chunk, entry_bytes)
            out.append(beats)
            left -= chunk
    return tuple(out)


@lru_cache(maxsize=65536)
def dma_timing(hw: HwConfig, rows: int, cols: int, elem_bytes: int, pad_entries: int = 0, *,
               kind: str = "inp", write: bool = False) -> DmaTiming | None:
    """The timing of a 2-D DMA of ``rows`` x ``cols`` entries of ``elem_bytes`` bytes of buffer
    ``kind`` that also writes ``pad_entries`` zero entries (None: an empty DMA)."""
    if rows <= 0 or cols <= 0:
        return None
    tm, m = model_of(hw), hw.memory
    beat = tm.uop_beat_bytes if kind == "uop" and tm.uop_beat_bytes else m.bus_bytes
    entry = elem_bytes if write and tm.store_serial else None
    transfer = Transfer(_bursts(hw, rows, cols * elem_bytes, beat, entry), write)
    after = rows * m.row_overhead
    #: the master itself takes a cycle per beat of its own width
    own = rows * _ceil(cols * elem_bytes, beat)
    channel = write_channel(hw) if write else read_channel(hw)
    if tm.pads_overlap:
        return DmaTiming(transfer, channel, overlap=max(own, transfer.beats) + pad_entries,
                         after=after)
    return DmaTiming(transfer, channel, overlap=own, after=after + pad_entries)


def dma_cycles(hw: HwConfig, rows: int, cols: int, elem_bytes: int, pad_entries: int = 0, *,
               kind: str = "inp", write: bool = False) -> int:
    """Duration of a 2-D DMA alone on the port (one cycle for an empty one)."""
    t = dma_timing(hw, rows, cols, elem_bytes, pad_entries, kind=kind, write=write)
    return 1 if t is None else t.alone


def fetch_timing(hw: HwConfig, n_insns: int) -> DmaTiming:
    """Reading ``n_insns`` consecutive instruction words: one row of ``16 * n`` bytes."""
    t = dma_timing(hw, 1, n_insns, INSN_BYTES, kind="insn")
    assert t is not None
    return t


def fetch_cycles(hw: HwConfig, n_insns: int) -> int:
    """Cycles of fetching ``n_insns`` words alone on the port."""
    return fetch_timing(hw, n_insns).alone


# ------------------------------------------------------------------------------ micro-op loops


def alu_issues(hw: HwConfig) -> int:
    """Issues one ALU micro-op needs: a ``batch x block_out`` accumulator vector over
    ``alu.lanes`` lanes."""
    g = hw.gemm
    return _ceil(g.batch * g.block_out, hw.alu.lanes)


def loop_cycles(insn: Any, hw: HwConfig, issue: int, pipeline_depth: int,
                per_issue: int = 1) -> int:
    """A micro-op loop instruction under ``hw``'s timing model (the module docstring):
    ``per_issue`` micro-ops issue together every ``issue`` cycles (a unit ``per_issue`` vectors
    wide, e.g. a user's depthwise MAC), the pipeline filling per loop entry (HLS) or once per
    instruction (Chisel)."""
    nuops = max(0, insn.uop_end - insn.uop_bgn)
    loops = insn.iter_out * insn.iter_in
    if loops * nuops == 0:
        return 1
    if model_of(hw).fill_per_loop:
        return loops * (_ceil(nuops, per_issue) * issue + pipeline_depth)
    return _ceil(loops * nuops, per_issue) * issue + pipeline_depth


def microop_cycles(n_ops: int, issue: int, pipeline_depth: int) -> int:
    """``n_ops`` executions ``issue`` cycles apart, then one drain of the pipeline (the Chisel
    rule whatever the config's timing model; ``loop_cycles`` follows the model)."""
    return n_ops * issue + pipeline_depth


def duration(hw: HwConfig, insn: Any) -> int:
    """Cycles ``insn`` occupies its unit once it has its tokens, alone on the memory port: its
    definition's ``duration``."""
    return definition_of(insn).duration(insn, hw)
