"""The index plans shared between runs (``kernels.shared_plans``): a program simulated again
builds none, and a plan is found by the micro-ops' contents, not by where they sit: another
program with the same instruction fields over other micro-ops gets its own plan, and both runs
give the reference interpreter's results."""

from __future__ import annotations

import numpy as np
import pytest

import vta.sim.gemm
import vta.sim.kernels
from vta.isa import Alu, AluOp, Deps, Finish, Gemm, Load, MemType, ProgramBuilder, Store, Uop
from vta.sim import random_inputs, reference_dram, simulate
from vta.testing import small_hw

PUSH, POP = Deps(push_next=True), Deps(pop_prev=True)


def _program(hw, uops: list[Uop]):
    """LOAD uops, inp, wgt; reset acc 0..7; one GEMM over ``uops`` (4 iterations); ALU.ADD
    imm 3 over acc 0..7; STORE 8 entries."""
    b = ProgramBuilder(hw)
    a = b.alloc("A", "inp", 16)
    w = b.alloc("W", "wgt", 4)
    y = b.alloc("Y", "out", 8)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [*uops, Uop(0, 0, 0)])
    n = len(uops)
    b.extend([Load(MemType.UOP, 0, u.base, 1, n + 1, n + 1),
              Load(MemType.INP, 0, a.base, 1, 16, 16),
              Load(MemType.WGT, 0, w.base, 1, 4, 4, deps=PUSH),
              Gemm(True, n, n + 1, 1, 8, 0, 1, 0, 0, 0, 0, deps=POP),
              Gemm(False, 0, n, 4, 1, 2, 0, 2, 0, 0, 0),
              Alu(AluOp.ADD, False, n, n + 1, 8, 1, 1, 0, 1, 0, True, 3, deps=PUSH),
              Store(MemType.OUT, 0, y.base, 1, 8, 8, deps=POP), Finish()])
    return b.build()


def _exact(program, hw) -> bool:
    inputs = random_inputs(program, hw, 3)
    return bool(np.array_equal(simulate(program, hw, inputs).dram,
                               reference_dram(program, hw, inputs).buf))


def test_a_program_simulated_again_builds_no_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    hw = small_hw()
    vta.sim.kernels.shared_plans.cache_clear()
    p = _program(hw, [Uop(0, 0, 0), Uop(1, 1, 1)])
    assert _exact(p, hw)

    def refused(*a: object) -> None:
        raise AssertionError("a plan was built again")

    monkeypatch.setattr(vta.sim.kernels, "_micro_plan", refused)
    monkeypatch.setattr(vta.sim.gemm, "_plan", refused)
    monkeypatch.setattr(vta.sim.gemm, "_reset_plan", refused)
    assert _exact(p, hw)


def test_plans_are_found_by_the_micro_ops_contents() -> None:
    """The same instructions (fields, micro-op range) over other micro-ops: other entries
    accumulate, so a plan found by the instruction alone would give wrong values."""
    hw = small_hw()
    vta.sim.kernels.shared_plans.cache_clear()
    assert _exact(_program(hw, [Uop(0, 0, 0), Uop(1, 1, 1)]), hw)
    assert _exact(_program(hw, [Uop(1, 3, 2), Uop(0, 2, 3)]), hw)
    # the reset's and the ALU's micro-op (the last, Uop(0, 0, 0)) is the same in both: one
    # plan each; the GEMM's differ: two
    assert len(vta.sim.kernels.shared_plans(hw).plans) == 4


def test_shared_plans_start_afresh_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """The shared plans are bounded (``_MAX_SHARED`` plans): a run that needs more than that
    starts the cache afresh and still gives the reference's results."""
    hw = small_hw()
    vta.sim.kernels.shared_plans.cache_clear()
    monkeypatch.setattr(vta.sim.kernels, "_MAX_SHARED", 2)
    assert _exact(_program(hw, [Uop(0, 0, 0), Uop(1, 1, 1)]), hw)  # 3 plans
    assert len(vta.sim.kernels.shared_plans(hw).plans) <= 2
