"""Shared by the simulator's tests: run a program on both simulators and hold them equal, a
small ALU program, and a count of the calls of memoised methods."""

from __future__ import annotations

from typing import Any

import numpy as np

from vta import isa
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


def alu_program(hw: HwConfig) -> Program:
    """LOAD.ACC 8 entries, ALU.ADD imm 5 over them, STORE to Y (allocations X, Y, U)."""
    b = isa.ProgramBuilder(hw)
    x = b.alloc("X", "acc", 8)
    y = b.alloc("Y", "out", 8)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [isa.Uop(0, 0, 0)])
    acc, out = isa.MemType.ACC, isa.MemType.OUT
    b.extend([isa.Load(isa.MemType.UOP, 0, u.base, 1, 1, 1), isa.Load(acc, 0, x.base, 1, 8, 8),
              isa.Alu(isa.AluOp.ADD, False, 0, 1, 8, 1, 1, 0, 0, 0, True, 5,
                      deps=isa.Deps(push_next=True)),
              isa.Store(out, 0, y.base, 1, 8, 8, deps=isa.Deps(pop_prev=True)), isa.Finish()])
    return b.build()


def counting_calls(monkeypatch: Any, cls: type, names: tuple[str, ...]) -> dict[str, int]:
    """Count the calls of ``cls``'s methods ``names`` (patched through ``monkeypatch``,
    arguments passed through): how often a memoised step really ran."""
    calls = dict.fromkeys(names, 0)

    def counting(name: str) -> Any:
        method = getattr(cls, name)

        def counted(self: Any, *args: Any) -> Any:
            calls[name] += 1
            return method(self, *args)
        return counted

    for name in names:
        monkeypatch.setattr(cls, name, counting(name))
    return calls
