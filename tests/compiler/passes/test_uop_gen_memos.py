"""uop_gen reads what depends on the instruction alone from memos, not per nest: the operand
plan (which index each micro-op field reads, the factor widths, the table's field order) and
the prototype with its hazard lag; and a nest shape's folding layout (``_peel`` and the
micro-op order) with its choice. Nests of one instruction, ``instance`` and ``hazard_lag``
asked once (fails where each nest builds its own)."""

from __future__ import annotations

from typing import Any

import pytest
from _accel_ir import PYNQ

from vta.compiler.accel.passes import uop_gen
from vta.compiler.accel.passes.uop_gen import generate_uops
from vta.compiler.accel.vta_ir import ComputeInsn, ComputeNest
from vta.compiler.ir import expr as E
from vta.compiler.ir.builder import buf, func, loop, seq
from vta.isa import AluOp
from vta.isa.builtins import ALU, GEMM

C = buf("c_acc", (64, 1, 16), "int32", "acc")
PARAMS = (("imm", 8), ("use_imm", True))


def _nest(t: E.Var, n: int) -> ComputeNest:
    x = E.Var("x")
    return ComputeNest(ALU[AluOp.SHR], False, ((x, n),), ("dst",), (t * 8 + x,), PARAMS, (C,))


def test_an_instructions_nests_share_its_plan_and_prototype(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    for memo in (uop_gen._operand_plan, uop_gen._prototype, uop_gen._nest_choice):
        memo.cache_clear()
    made: list[Any] = []
    real = uop_gen.instance

    def counted(d: Any, **kw: Any) -> Any:
        made.append(d)
        return real(d, **kw)

    monkeypatch.setattr(uop_gen, "instance", counted)
    got = generate_uops(func("f", [], seq(loop(2, lambda t: _nest(t, 4)),
                                          loop(3, lambda t: _nest(t, 8)))), PYNQ)
    assert len(made) == 1  # one prototype for the two nests (two shapes, two choices)
    assert uop_gen._operand_plan.cache_info().misses == 1
    assert uop_gen._nest_choice.cache_info().misses == 2
    first, second = (s.body for s in got.body.stmts)
    assert isinstance(first, ComputeInsn) and isinstance(second, ComputeInsn)
    # the immediate form's src reads the dst's index; each nest its own loop variable
    assert first.uops.base[0] is first.uops.base[1]
    assert first.uops.base[0] is not second.uops.base[0]


def test_the_operand_plan() -> None:
    """An ALU immediate's src is its dst (index 0 of the nest's), its wgt unused; a reset
    reads no src; GEMM reads each operand's own index."""
    alu = ALU[AluOp.SHR]
    read, bits, order, factored = uop_gen._operand_plan(alu, PYNQ, ("dst",), False)
    assert read == (0, 0) and order == (0, 1, None)
    assert [name for name, _k in factored] == ["dst", "src"] and len(bits) == 2
    assert uop_gen._operand_plan(alu, PYNQ, ("dst",), True)[0] == (0, None)
    read, _bits, order, _f = uop_gen._operand_plan(GEMM, PYNQ, ("wgt", "dst", "src"), False)
    assert read == (1, 2, 0) and order == (0, 1, 2)
