"""lower_alu's cover memo (``_cover``): a stage of the same shape as one covered before (other
buffers, other loop variables) is given the same plan with its own loads, without covering it
again; a different shape (a constant, which loads are equal, a register operand that is not
one) is covered anew; a refusal is the same the second time."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from _accel_ir import PYNQ, sram

from vta.compiler.accel import select
from vta.compiler.accel.passes import lower_alu as la
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop, stage
from vta.compiler.ir.structural import assert_structural_equal
from vta.errors import CompileError

RES = buf("res", (2, 1, 16), "int8")


def _layer(tag: str, value: Callable[[E.Expr, E.Expr, E.Var, E.Var], E.Expr]) -> S.PrimFunc:
    """A function of its own buffers with one epilogue stage ``c[x, b, j] = value(c[x, b, j],
    bias[0, b, j], b, j)``."""
    c = buf(f"c_{tag}", (2, 1, 16), "int32", "acc")
    bias = buf(f"bias_{tag}", (1, 1, 16), "int32", "acc")
    body = stage("res_ep", loop(2, lambda x: loop(1, lambda b: loop(16, lambda j: c.store(
        value(c.load(x, b, j), bias.load(0, b, j), b, j), x, b, j), name="j"), name="b"),
        name="x"))
    return func("f", [RES], alloc(bias, alloc(c, body)), sram=sram((bias, 0, 1), (c, 1, 2)))


@pytest.fixture
def covers(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The values ``select.cover`` is asked to cover from here on (an empty memo)."""
    la._COVERS.clear()
    asked: list[object] = []

    def counting(value, *args):  # type: ignore[no-untyped-def]
        asked.append(value)
        return select.cover(value, *args)

    monkeypatch.setattr(la, "cover", counting)
    return asked


def _direct(f: S.PrimFunc) -> S.PrimFunc:
    """``lower_alu`` covering every stage itself (no memo)."""
    la._COVERS.clear()
    out = la.lower_alu(f, PYNQ)
    la._COVERS.clear()
    return out


def _epilogue(c: E.Expr, bias: E.Expr, b: E.Var, j: E.Var) -> E.Expr:
    return E.min_(E.max_((c >> 8) + bias, 0), 127)


def test_a_stage_of_the_same_shape_is_not_covered_again(covers: list[object]) -> None:
    first, second = _layer("a", _epilogue), _layer("b", _epilogue)
    expected = _direct(second)
    covers.clear()
    la.lower_alu(first, PYNQ)
    assert len(covers) == 1
    assert_structural_equal(la.lower_alu(second, PYNQ), expected)
    assert len(covers) == 1  # the plan of the first, with the second's loads


def test_another_constant_is_another_shape(covers: list[object]) -> None:
    other = _layer("b", lambda c, bias, b, j: E.min_(E.max_((c >> 9) + bias, 0), 127))
    expected = _direct(other)
    la.lower_alu(_layer("a", _epilogue), PYNQ)
    covers.clear()
    assert_structural_equal(la.lower_alu(other, PYNQ), expected)
    assert len(covers) == 1


def test_a_load_at_other_lanes_is_not_a_register_operand(covers: list[object]) -> None:
    """``bias[0, b, 0]`` is an acc entry at other lanes than the destination's: not a register
    operand, so nothing covers ``c + bias[0, b, 0]``, though the expression has the shape of
    ``c + bias[0, b, j]``, which one ADD covers."""
    la.lower_alu(_layer("a", lambda c, bias, b, j: c + bias), PYNQ)
    fixed = _layer("b", lambda c, bias, b, j: c + S.BufferLoad(
        bias.buffer, (*bias.indices[:-1], E.IntImm(0)), bias.dtype))  # type: ignore[attr-defined]
    with pytest.raises(CompileError, match="no instruction of pynq computes"):
        la.lower_alu(fixed, PYNQ)
    assert len(covers) == 2


def test_equal_loads_are_one_class() -> None:
    """Two loads of one entry are one class; two entries, two."""
    c = buf("c", (2, 16), "int32", "acc")
    i = E.Var("i")
    loads: dict[E.Expr, int] = {}
    same = la._shape(c.load(i, 0) + c.load(i, 0), loads, lambda e: True)
    assert len(loads) == 1
    loads.clear()
    other = la._shape(c.load(i, 0) + c.load(i, 1), loads, lambda e: True)
    assert len(loads) == 2 and same != other


def test_a_refusal_is_the_same_from_the_memo(covers: list[object]) -> None:
    def times_three(c: E.Expr, bias: E.Expr, b: E.Var, j: E.Var) -> E.Expr:
        return c * 3

    messages = []
    for tag in ("a", "b"):
        with pytest.raises(CompileError) as e:
            la.lower_alu(_layer(tag, times_three), PYNQ)
        messages.append(str(e.value).replace("c_b", "c_a"))
    assert len(covers) == 1 and messages[0] == messages[1]
