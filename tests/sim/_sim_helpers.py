"""Shared by the simulator's tests: run a program on both simulators and hold them equal."""

from __future__ import annotations

import numpy as np

from vta.config import HwConfig
from vta.isa import Program, assemble
from vta.sim import run_reference, simulate


def run_both(program: Program | str, hw: HwConfig,
             inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The reference interpreter's outputs of ``program`` (assembly text is assembled for
    ``hw``), after checking that the cycle-level machine gives the same arrays."""
    if isinstance(program, str):
        program = assemble(program, hw)
    ref = run_reference(program, hw, inputs)
    mach = simulate(program, hw, inputs).outputs
    for name in ref:
        np.testing.assert_array_equal(ref[name], mach[name], err_msg=name)
    return ref
