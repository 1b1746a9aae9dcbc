"""flatten's DMA fields (issue 22, round 12): an expression compiled before (an equal one, in
this call or an earlier one) is not compiled again, and a DMA's constant fields are values in
its run, not calls: the instruction is the one the fields evaluate to, and a DMA that moves
nothing (a size not positive) reads no other field."""

from __future__ import annotations

from typing import Any

import pytest

from vta.compiler.accel.passes import flatten as F
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import expr as E
from vta.compiler.ir.builder import buf
from vta.errors import CompileError
from vta.isa import Load, MemType

ROW = E.Var("i")
COL = E.Var("j")


def test_an_equal_expression_is_compiled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    compiled: list[Any] = []
    real = F.compile_int

    def counting(e: Any) -> Any:
        compiled.append(e)
        return real(e)

    monkeypatch.setattr(F, "compile_int", counting)
    monkeypatch.setattr(F, "_COMPILED", {})
    a = F._compiled(ROW * 4 + 1)
    b = F._compiled(ROW * 4 + 1)  # equal, another object
    c = F._compiled(COL * 4 + 1)  # another variable
    assert a is b and c is not a and len(compiled) == 2
    assert a({ROW: 2}) == 9 and c({COL: 3}) == 13


def _run(exprs: tuple[E.Expr, ...], env: dict[E.Var, int]) -> list[Insn]:
    out: list[Insn] = []
    dram = buf("A", (4, 1, 16), "int8")
    F._dma_run(F._LOAD, MemType.INP, exprs, dram, 2, out.append, env)()
    return out


def test_constant_and_varying_fields_make_the_instruction() -> None:
    c = E.IntImm
    exprs = (c(3), ROW * 16 + COL, c(1), COL + 1, c(16), c(0), c(0), c(1), c(0))
    (got,) = _run(exprs, {ROW: 2, COL: 1})
    assert got.insn == Load(MemType.INP, 3, 33, 1, 2, 16, 0, 0, 1, 0)
    assert got.thread == 2 and got.uops == () and got.dram is not None


def test_a_dma_moving_nothing_reads_no_other_field() -> None:
    c = E.IntImm
    unbound = E.Var("unbound")
    exprs = (unbound, unbound, c(1), COL - 1, c(16), c(0), c(0), c(0), c(0))
    assert _run(exprs, {COL: 1}) == []  # x is 0: the unbound fields are never read
    with pytest.raises(CompileError, match="unbound"):
        _run(exprs, {COL: 2})
