"""The functional reference interpreter: the executable definition of the ISA, no timing.

Instructions run one after another in program order (the order a correctly synchronised
program's dependency tokens guarantee) until the first FINISH, or the end of the program if
there is none. The meaning of each instruction is in ``vta.sim.kernels``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
from numpy.typing import ArrayLike

from vta.config import HwConfig
from vta.isa import Alu, Finish, Gemm, Load, Program, Store
from vta.sim.dram import Dram
from vta.sim.kernels import Ctx, Sram, exec_alu, exec_load, exec_store, gemm_reference

__all__ = ["run_reference", "reference_dram"]


def reference_dram(program: Program, hw: HwConfig,
                   inputs: Mapping[str, ArrayLike] | None = None) -> Dram:
    """Run ``program`` and return the final DRAM image."""
    dram = Dram(program, hw)
    dram.write_all(inputs or {})
    sram = Sram(hw)
    for index, insn in enumerate(program.instructions):
        ctx = Ctx(index, insn, program)
        if isinstance(insn, Load):
            exec_load(sram, dram, insn, ctx)
        elif isinstance(insn, Store):
            exec_store(sram, dram, insn, ctx)
        elif isinstance(insn, Gemm):
            gemm_reference(sram, insn, ctx)
        elif isinstance(insn, Alu):
            exec_alu(sram, insn, ctx)
        elif isinstance(insn, Finish):
            break
    return dram


def run_reference(program: Program, hw: HwConfig,
                  inputs: Mapping[str, ArrayLike] | None = None) -> dict[str, np.ndarray]:
    """Run ``program`` on ``inputs`` (arrays by allocation name; missing ones are zero).

    Returns the final contents of *every* allocation by name (inputs included, micro-op
    allocations as uint32 words), shaped ``(elems, *entry shape)`` as ``vta.sim.dram``
    describes.
    """
    return reference_dram(program, hw, inputs).outputs()
