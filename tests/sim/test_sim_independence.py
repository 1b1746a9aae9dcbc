"""The reference shares no loop, index or batching code with the machine, so a bug planted in one
of the machine's kernels makes the differential comparison fail instead of being copied into
the oracle. (What one execution computes is the instruction definition's semantics, which both
call by design: one definition per instruction. A bug there is caught by the comparisons with
numpy, ``test_a_bug_in_the_shared_semantics_is_caught_by_numpy``.)"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest
from _sim_helpers import alu_program
from strategies import small_hw

import vta.sim.gemm
import vta.sim.kernels
import vta.sim.reference
from vta.isa import Alu, AluOp, Deps, Finish, Gemm, Load, MemType, ProgramBuilder, Store, Uop
from vta.sim import random_inputs, reference_dram, simulate

PUSH, POP = Deps(push_next=True), Deps(pop_prev=True)


def test_reference_imports_no_machine_code():
    tree = ast.parse(Path(vta.sim.reference.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported.isdisjoint({"vta.sim.kernels", "vta.sim.gemm", "vta.sim.machine"})
    assert not {"vta.sim.kernels", "vta.sim.gemm"} & {
        getattr(v, "__module__", None) for v in vars(vta.sim.reference).values()}


@pytest.fixture(scope="module")
def hw():
    return small_hw()


def _gemm_program(hw):
    """LOAD inp, wgt, uops; reset + accumulate 4 acc entries over 2 weights; STORE."""
    b = ProgramBuilder(hw)
    a = b.alloc("A", "inp", 8)
    w = b.alloc("W", "wgt", 2)
    y = b.alloc("Y", "out", 4)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [Uop(0, 0, 0), Uop(0, 4, 1)])
    b.extend([Load(MemType.UOP, 0, u.base, 1, 2, 2), Load(MemType.INP, 0, a.base, 1, 8, 8),
              Load(MemType.WGT, 0, w.base, 1, 2, 2, deps=PUSH),
              Gemm(True, 0, 1, 4, 1, 1, 0, 0, 0, 0, 0, deps=POP),
              Gemm(False, 0, 2, 4, 1, 1, 0, 1, 0, 0, 0, deps=PUSH),
              Store(MemType.OUT, 0, y.base, 1, 4, 4, deps=POP), Finish()])
    return b.build()


def _agree(program, hw) -> bool:
    # plans are shared between runs (``kernels.shared_plans``): this run builds its own, so
    # that a bug planted after an earlier run is in the plans it uses
    vta.sim.kernels.shared_plans.cache_clear()
    inputs = random_inputs(program, hw, 7)
    expect = reference_dram(program, hw, inputs).buf
    return bool(np.array_equal(simulate(program, hw, inputs).dram, expect))


def test_a_bug_in_the_machines_alu_is_caught(hw, monkeypatch):
    p = alu_program(hw)
    assert _agree(p, hw)
    fast = vta.sim.kernels.alu_shortcut

    def off_by_one(insn, dt, hw):
        fn = fast(insn, dt, hw)
        return lambda dst, src, out: np.add(fn(dst, src, out), 1, out=out)

    monkeypatch.setattr(vta.sim.kernels, "alu_shortcut", off_by_one)
    assert not _agree(p, hw)


def test_a_bug_in_the_machines_generic_alu_path_is_caught(hw, monkeypatch):
    """The path of an ALU function the acc dtype cannot compute directly (a user's, or
    ``alu_shortcut`` declining)."""
    p = alu_program(hw)
    monkeypatch.setattr(vta.sim.kernels, "alu_shortcut", lambda *a: None)
    assert _agree(p, hw)
    real = vta.sim.kernels._set
    monkeypatch.setattr(vta.sim.kernels, "_set",
                        lambda sram, entries, exact: real(sram, entries, exact + 1))
    assert not _agree(p, hw)


def _chainedalu_program(hw):
    """ALU.ADD with a register operand reading the entry the previous execution wrote: the
    executions depend on each other, so they must run in loop order."""
    b = ProgramBuilder(hw)
    x = b.alloc("X", "acc", 8)
    y = b.alloc("Y", "out", 8)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [Uop(1, 0, 0)])  # acc[o + 1] += acc[o]
    b.extend([Load(MemType.UOP, 0, u.base, 1, 1, 1), Load(MemType.ACC, 0, x.base, 1, 8, 8),
              Alu(AluOp.ADD, False, 0, 1, 7, 1, 1, 0, 1, 0, False, 0, deps=PUSH),
              Store(MemType.OUT, 0, y.base, 1, 8, 8, deps=POP), Finish()])
    return b.build()


def test_a_bug_in_the_machines_execution_order_is_caught(hw, monkeypatch):
    p = _chainedalu_program(hw)
    assert _agree(p, hw)
    monkeypatch.setattr(vta.sim.kernels, "_needs_order", lambda *a: False)
    assert not _agree(p, hw)


def test_a_bug_in_the_machines_gemm_is_caught(hw, monkeypatch):
    p = _gemm_program(hw)
    assert _agree(p, hw)
    real, wrapped = vta.sim.gemm.apply_sums, vta.sim.gemm.add_wrapped
    monkeypatch.setattr(vta.sim.gemm, "apply_sums",
                        lambda sram, entries, sums: real(sram, entries, sums + 1))
    monkeypatch.setattr(vta.sim.gemm, "add_wrapped",
                        lambda sram, entries, sums: wrapped(sram, entries, sums + 1))
    assert not _agree(p, hw)


def test_a_bug_in_the_machines_dma_is_caught(hw, monkeypatch):
    p = _gemm_program(hw)
    real = vta.sim.kernels.dram_rows

    real_run = vta.sim.kernels.dram_run

    def shifted(dram, ctx, kind, base, *rest):  # inp loads read one element too far
        return real(dram, ctx, kind, base + (kind == "inp"), *rest)

    def shifted_run(dram, ctx, kind, base, *rest):  # (a run of rows back to back)
        return real_run(dram, ctx, kind, base + (kind == "inp"), *rest)

    monkeypatch.setattr(vta.sim.kernels, "dram_rows", shifted)
    monkeypatch.setattr(vta.sim.kernels, "dram_run", shifted_run)
    assert not _agree(p, hw)
