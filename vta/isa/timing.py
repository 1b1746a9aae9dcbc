"""How long an instruction occupies its unit: pure functions of its fields and the HwConfig.

These are the timing facts every layer reads: the simulator charges them, the compiler's cost
model predicts with them. Each instruction's ``duration`` lives on its definition
(``vta.isa.builtins`` for the built-ins); the shared formulas are here.

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

Micro-op instructions (GEMM, ALU, a user's unit): ``iter_out * iter_in * nuops * issue +
pipeline_depth``, where ``issue`` is the cycles one micro-op execution occupies the unit:
``gemm.ii`` for GEMM; ``ceil(batch * block_out / alu.lanes) * ii`` for the ALU with ``ii =
alu.ii_imm`` for an immediate operand, ``alu.ii`` for a register one.
FINISH: one cycle.
"""

from __future__ import annotations

from typing import Any

from vta.config import HwConfig
from vta.isa.defs import definition_of

__all__ = ["INSN_BYTES", "transfer_cycles", "dma_cycles", "fetch_cycles", "alu_issues",
           "microop_cycles", "duration"]

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


def dma_cycles(hw: HwConfig, rows: int, cols: int, elem_bytes: int, pad_entries: int = 0) -> int:
    """Duration of a 2-D DMA of ``rows`` x ``cols`` entries of ``elem_bytes`` bytes that also
    writes ``pad_entries`` zero entries (see the module docstring)."""
    return max(1, transfer_cycles(hw, rows, cols * elem_bytes) + pad_entries)


def fetch_cycles(hw: HwConfig, n_insns: int) -> int:
    """Reading ``n_insns`` consecutive instruction words: one row of ``16 * n`` bytes."""
    return max(1, transfer_cycles(hw, 1, INSN_BYTES * n_insns))


def alu_issues(hw: HwConfig) -> int:
    """Issues one ALU micro-op needs: a ``batch x block_out`` accumulator vector over
    ``alu.lanes`` lanes."""
    g = hw.gemm
    return _ceil(g.batch * g.block_out, hw.alu.lanes)


def microop_cycles(n_ops: int, issue: int, pipeline_depth: int) -> int:
    """A micro-op loop instruction: ``n_ops`` executions ``issue`` cycles apart, then the
    pipeline drains."""
    return n_ops * issue + pipeline_depth


def duration(hw: HwConfig, insn: Any) -> int:
    """Cycles ``insn`` occupies its unit once it has its tokens (and the memory port): its
    definition's ``duration``."""
    return definition_of(insn).duration(insn, hw)
