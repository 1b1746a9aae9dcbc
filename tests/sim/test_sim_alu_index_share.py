"""A built-in ALU function's instructions over the same micro-ops and loops share one index
plan (``kernels._index_plan``, shared by ``kernels._plan_key``): an epilogue's shift, clip
and add differ in their function and immediate alone, which only ``_with_alu`` reads. Each
instruction still computes its own function: the outputs stay the reference interpreter's,
a register function without a shortcut (SHR) does not read the shared plan's grid, and
the immediate and register variants (other operands read) get a plan each."""

from __future__ import annotations

import pytest
from _sim_helpers import run_both

from vta import isa
from vta.config import HwConfig
from vta.isa import AluOp, Deps, Load, MemType, ProgramBuilder, Store, Uop
from vta.sim import kernels, random_inputs

#: (function, use_imm, immediate) of the program's ALU instructions, in order
_ALUS = [(AluOp.SHR, True, 3), (AluOp.MIN, True, 100), (AluOp.MAX, True, -100),
         (AluOp.ADD, True, 7), (AluOp.ADD, False, 0), (AluOp.MAX, False, 0),
         (AluOp.SHR, False, 0), (AluOp.MIN, False, 0)]


def _program(hw: HwConfig, alus: list[tuple[AluOp, bool, int]], reset: bool = False):
    """LOAD acc[0:16]; each of ``alus`` over micro-op (dst 0, src 8) for 8 entries (dst
    0..7, src entry 8 each: a grid of step 0); STORE out[0:16]."""
    b = ProgramBuilder(hw)
    x = b.alloc("X", "acc", 16)
    y = b.alloc("Y", "out", 16)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [Uop(0, 8, 0)])
    last = len(alus) - 1
    b.extend([Load(MemType.UOP, 0, u.base, 1, 1, 1), Load(MemType.ACC, 0, x.base, 1, 16, 16),
              *(isa.Alu(op, reset, 0, 1, 1, 8, 0, 1, 0, 0, use_imm, imm,
                        deps=Deps(push_next=k == last))
                for k, (op, use_imm, imm) in enumerate(alus)),
              Store(MemType.OUT, 0, y.base, 1, 16, 16, deps=Deps(pop_prev=True)),
              isa.Finish()])
    return b.build()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The index plans built from now on (``_index_plan``'s calls), with every plan cache
    empty."""
    built: list[object] = []
    real = kernels._index_plan
    monkeypatch.setattr(kernels, "_index_plan", lambda *a: built.append(a[1]) or real(*a))
    kernels.shared_plans.cache_clear()
    return built


def test_alu_functions_over_the_same_loops_share_one_index_plan(
        pynq: HwConfig, monkeypatch: pytest.MonkeyPatch) -> None:
    """Four immediate functions: one plan; four register functions (ADD, MAX and MIN read the
    src grid through a view, SHR gathers: no shortcut): one more. Reference outputs."""
    built = _counting(monkeypatch)
    grids = []
    real = kernels.grid_entries
    monkeypatch.setattr(kernels, "grid_entries", lambda a, g: grids.append(g) or real(a, g))
    program = _program(pynq, _ALUS)
    run_both(program, pynq, random_inputs(program, pynq, 5))
    assert len(built) == 2
    assert len(grids) == 3  # ADD, MAX, MIN by register; not SHR


@pytest.mark.parametrize("alus", [_ALUS[:4], _ALUS[4:], _ALUS[::-1]])
def test_each_alu_computes_its_own_function(pynq: HwConfig, alus) -> None:
    """Whichever instruction builds the shared plan first, each computes its function: the
    reference interpreter's outputs on full-range inputs, with and without the reset flag."""
    kernels.shared_plans.cache_clear()
    for reset in (False, True):
        program = _program(pynq, alus, reset)
        run_both(program, pynq, random_inputs(program, pynq, 11))


def test_other_loops_get_their_own_plan(pynq: HwConfig,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A reset flag or another loop is another plan (the key holds the loop fields)."""
    built = _counting(monkeypatch)
    for reset in (False, True):
        program = _program(pynq, _ALUS[:2], reset)
        run_both(program, pynq, random_inputs(program, pynq, 2))
    assert len(built) == 2
