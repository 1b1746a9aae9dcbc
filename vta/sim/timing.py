"""How long each instruction occupies its unit: pure functions of its fields and the HwConfig.

DMA (LOAD, STORE, instruction fetch). A transfer of ``rows`` rows of ``row_bytes`` bytes:

* each row is split into ``ceil(row_bytes / burst_bytes)`` bursts (bursts never cross rows);
* the bus moves ``bus_bytes`` per cycle: ``beats = rows * ceil(row_bytes / bus_bytes)``;
* up to ``outstanding`` bursts are in flight, each answering ``latency`` cycles after issue, so
  the data arrives after ``max(latency + beats, ceil(bursts / outstanding) * latency)`` cycles:
  bandwidth-bound when enough requests are in flight to hide the latency, latency-bound
  (one round trip per ``outstanding`` bursts) otherwise;
* each row costs ``row_overhead`` cycles of address generation;
* a LOAD writes its zero pads into SRAM at one entry per cycle.

``dma = max(1, transfer + rows * row_overhead + pad_entries)``; an empty transfer (a LOAD or
STORE with ``x_size`` or ``y_size`` 0, VTA's token carrier) takes one cycle and does not use
the memory port. The unit holds the memory port for the whole DMA.

GEMM: ``iter_out * iter_in * nuops * gemm.ii + gemm.pipeline_depth``.
ALU: ``iter_out * iter_in * nuops * ceil(batch * block_out / alu.lanes) * ii + alu.pipeline_depth``
with ``ii = alu.ii_imm`` for an immediate operand, ``alu.ii`` for a register one.
FINISH: one cycle.
"""

from __future__ import annotations

from vta.config import HwConfig
from vta.isa import Alu, Finish, Gemm, Instruction, Load, Store

__all__ = ["INSN_BYTES", "transfer_cycles", "dma_cycles", "fetch_cycles", "gemm_cycles",
           "alu_cycles", "duration", "dma_bytes", "uses_memory"]

#: bytes of one instruction word in DRAM
INSN_BYTES = 16


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def transfer_cycles(hw: HwConfig, rows: int, row_bytes: int) -> int:
    """Cycles for ``rows`` rows of ``row_bytes`` bytes to cross the memory port."""
    if rows == 0 or row_bytes == 0:
        return 0
    m = hw.memory
    beats = rows * _ceil(row_bytes, m.bus_bytes)
    bursts = rows * _ceil(row_bytes, m.burst_bytes)
    return max(m.latency + beats, _ceil(bursts, m.outstanding) * m.latency) + rows * m.row_overhead


def dma_bytes(hw: HwConfig, insn: Load | Store) -> int:
    """Bytes an instruction moves across the memory port (pads excluded)."""
    return insn.y_size * insn.x_size * hw.elem_bytes(insn.mem.kind)


def uses_memory(insn: Instruction) -> bool:
    """Whether the instruction needs the memory port (a non-empty LOAD or STORE)."""
    return isinstance(insn, (Load, Store)) and insn.y_size > 0 and insn.x_size > 0


def dma_cycles(hw: HwConfig, insn: Load | Store) -> int:
    """Duration of a LOAD or STORE (see the module docstring)."""
    row_bytes = insn.x_size * hw.elem_bytes(insn.mem.kind)
    pads = insn.sram_elems - insn.y_size * insn.x_size if isinstance(insn, Load) else 0
    return max(1, transfer_cycles(hw, insn.y_size, row_bytes) + pads)


def fetch_cycles(hw: HwConfig, n_insns: int) -> int:
    """Reading ``n_insns`` consecutive instruction words: one row of ``16 * n`` bytes."""
    return max(1, transfer_cycles(hw, 1, INSN_BYTES * n_insns))


def gemm_cycles(hw: HwConfig, insn: Gemm) -> int:
    return insn.n_ops * hw.gemm.ii + hw.gemm.pipeline_depth


def alu_cycles(hw: HwConfig, insn: Alu) -> int:
    a, g = hw.alu, hw.gemm
    issues = _ceil(g.batch * g.block_out, a.lanes)
    return insn.n_ops * issues * (a.ii_imm if insn.use_imm else a.ii) + a.pipeline_depth


def duration(hw: HwConfig, insn: Instruction) -> int:
    """Cycles ``insn`` occupies its unit once it has its tokens (and the memory port)."""
    if isinstance(insn, (Load, Store)):
        return dma_cycles(hw, insn)
    if isinstance(insn, Gemm):
        return gemm_cycles(hw, insn)
    if isinstance(insn, Alu):
        return alu_cycles(hw, insn)
    if isinstance(insn, Finish):
        return 1
    raise TypeError(f"not an instruction: {insn!r}")  # pragma: no cover
