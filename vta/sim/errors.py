"""Errors the simulators raise. All derive from ``SimError`` (a ``VtaError``), so the CLI prints
them as one line and exits non-zero."""

from __future__ import annotations

from vta.errors import VtaError
from vta.isa import Instruction, Program, format_insn

__all__ = ["SimError", "BoundsError", "DeadlockError", "InputError", "where"]


class SimError(VtaError):
    """Base of every error raised while preparing or running a simulation."""


class InputError(SimError, ValueError):
    """An input array does not match its allocation (unknown name, wrong size or values)."""


class BoundsError(SimError, IndexError):
    """An instruction addressed an SRAM entry or DRAM byte outside its buffer."""


class DeadlockError(SimError):
    """The machine ran out of events while a unit still waited on a queue, token or barrier."""


def where(index: int, insn: Instruction, program: Program | None) -> str:
    """``instruction 7 (GEMM uop=0:4 ...)``: how every per-instruction error names its culprit."""
    return f"instruction {index} ({format_insn(insn, program)})"
