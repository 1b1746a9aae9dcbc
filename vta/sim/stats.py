"""What a simulation reports: frozen ``SimStats`` (numbers) inside a frozen ``SimResult``.

Definitions (all in cycles of the board clock):

* ``cycles``: the cycle at which FINISH completes (FINISH waits until the load and store units
  have completed every instruction fetched before it, then takes one cycle); a program without
  FINISH ends when its last instruction completes.
* per unit: ``busy`` (executing instructions: each its definition's duration, the cycles it
  takes alone on the memory port), ``token`` (waiting to pop a dependency token), ``queue``
  (waiting on its command queue: empty for load/compute/alu/store, full for fetch; or on a full
  token queue when pushing), ``memory`` (the cycles a DMA took beyond its duration because
  other transfers shared the port), ``conflict`` (waiting for an accumulator bank the other
  pipeline holds), ``idle`` (the rest: done, or FINISH waiting for the other units to drain).
* ``bytes``: bytes that crossed the memory port per buffer kind (pads excluded), plus ``insn``
  for instruction fetch.
* ``gemm_cycles``: cycles the GEMM array did tensor ops, ``sum(n_ops * gemm.ii)`` over GEMMs
  without reset; ``utilization = gemm_cycles / cycles``.
* ``ops``: ``2 * batch * block_in * block_out`` per tensor op (multiply and add).
* ``acc_hazards``: micro-ops reading an acc entry that an earlier micro-op of the same GEMM/ALU
  instruction is still writing (closer than the pipeline depth); ``None`` in timing-only runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import ArrayLike

from vta.isa import Program, Unit

__all__ = ["UNITS", "units_of", "UnitStats", "Slice", "SimStats", "SimResult"]

#: every unit a machine may have, in timeline order: the fetch unit, then the modules
#: instructions run on (``vta.isa.Unit``; ``alu`` only on hardware whose ALU is a separate
#: pipeline: ``units_of``)
UNITS: tuple[str, ...] = ("fetch", *(u.label for u in (Unit.LOAD, Unit.COMPUTE, Unit.ALU,
                                                        Unit.STORE)))


def units_of(separate_alu: bool) -> tuple[str, ...]:
    """The units of a machine (with the ALU module or without)."""
    return tuple(u for u in UNITS if u != "alu" or separate_alu)


@dataclass(frozen=True, slots=True)
class UnitStats:
    """Where one unit's cycles went: ``busy``, ``token``, ``queue``, ``memory``, ``conflict``
    and ``idle`` sum to the run's total cycles."""

    busy: int
    token: int
    queue: int
    memory: int
    idle: int
    insns: int
    #: waiting for an accumulator bank the other pipeline holds (separate ALU pipeline)
    conflict: int = 0

    def to_dict(self) -> dict[str, int]:
        return asdict(self)


class Slice(NamedTuple):
    """One interval on a unit's timeline: an instruction (``kind='insn'``) or a wait.

    A typed named tuple rather than a frozen dataclass: a run makes one per instruction and
    per wait (tens of thousands for a network), and a frozen dataclass's ``__init__`` costs
    about three times as much per object (a guarded ``__setattr__`` per field)."""

    unit: str
    kind: str  # insn, token, queue, memory
    start: int
    end: int
    #: instruction index (the first of the batch, for fetch); it hides ``tuple.index``,
    #: which no caller of a slice uses
    index: int  # type: ignore[assignment]
    label: str


@dataclass(frozen=True)
class SimStats:
    """The numbers of one run (see the module docstring for definitions)."""

    cycles: int
    clock_mhz: float
    units: Mapping[str, UnitStats]
    bytes: Mapping[str, int]
    insn_counts: Mapping[str, int]
    gemm_ops: int
    gemm_cycles: int
    alu_ops: int
    ops: int
    acc_hazards: int | None

    @property
    def time_us(self) -> float:
        return self.cycles / self.clock_mhz

    @property
    def utilization(self) -> float:
        return self.gemm_cycles / self.cycles if self.cycles else 0.0

    @property
    def gops(self) -> float:
        """Achieved GOP/s at the board clock."""
        return self.ops / (self.time_us * 1e3) if self.cycles else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "cycles": self.cycles,
            "clock_mhz": self.clock_mhz,
            "time_us": self.time_us,
            "gops": self.gops,
            "utilization": self.utilization,
            "gemm_ops": self.gemm_ops,
            "gemm_cycles": self.gemm_cycles,
            "alu_ops": self.alu_ops,
            "ops": self.ops,
            "acc_hazards": self.acc_hazards,
            "units": {k: v.to_dict() for k, v in self.units.items()},
            "bytes": dict(self.bytes),
            "insn_counts": dict(self.insn_counts),
        }


@dataclass(frozen=True)
class SimResult:
    """A cycle-level run: its statistics, timeline and (unless timing-only) final DRAM."""

    hw_name: str
    program: Program = field(repr=False)
    stats: SimStats
    slices: tuple[Slice, ...] = field(repr=False)
    #: the inputs as given to ``simulate`` (or the random ones it drew)
    inputs: Mapping[str, ArrayLike] = field(repr=False)
    #: final contents of every allocation (as ``run_reference`` returns); empty if timing-only
    outputs: Mapping[str, np.ndarray] = field(repr=False)
    #: the final DRAM image (None if timing-only)
    dram: np.ndarray | None = field(repr=False)
    timing_only: bool = False

    @property
    def cycles(self) -> int:
        return self.stats.cycles

    @property
    def time_us(self) -> float:
        return self.stats.time_us

    def to_dict(self) -> dict[str, Any]:
        return {"hw": self.hw_name, "timing_only": self.timing_only, **self.stats.to_dict()}
