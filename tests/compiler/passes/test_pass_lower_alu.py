"""lower_alu: element-wise epilogue stages on acc become ALU ``ComputeNest``s."""

import pytest
from _accel_ir import PYNQ, sram

from vta.compiler.accel.passes.lower_alu import lower_alu
from vta.compiler.accel.vta_ir import ComputeNest
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop, seq, stage
from vta.compiler.ir.structural import assert_structural_equal
from vta.errors import CompileError
from vta.isa import AluOp
from vta.isa.builtins import ALU

RES = buf("res", (2, 1, 16), "int8")
C = buf("c_acc", (2, 1, 16), "int32", "acc")
BIAS = buf("bias_acc", (1, 1, 16), "int32", "acc")
TABLE = sram((BIAS, 0, 1), (C, 1, 2))


def _stage(name: str, value: object) -> S.Stmt:
    """``for x, b, j: c[x, b, j] = value(c[x, b, j], b, j)`` as stage ``name``."""
    return stage(name, loop(2, lambda x: loop(1, lambda b: loop(16, lambda j: C.store(
        value(C.load(x, b, j), b, j), x, b, j), name="j"), name="b"), name="x"))


def test_epilogue_stages_become_alu_instructions_in_order() -> None:
    before = func("f", [RES], alloc(BIAS, alloc(C, seq(
        _stage("res_shr", lambda c, b, j: c >> 8),
        _stage("res_bias", lambda c, b, j: c + BIAS.load(0, b, j)),
        _stage("res_clip", lambda c, b, j: E.min_(E.max_(c, 0), 127))))), sram=TABLE)
    xs = [E.Var("x") for _ in range(4)]  # each nest binds its own loop variable

    def alu(op: AluOp, x: E.Var, params: tuple, src: bool = False) -> ComputeNest:
        if src:
            return ComputeNest(ALU[op], False, ((x, 2),), ("dst", "src"), (1 + x, E.IntImm(0)),
                               params, (C, BIAS))
        return ComputeNest(ALU[op], False, ((x, 2),), ("dst",), (1 + x,), params, (C,))

    expected = func("f", [RES], alloc(BIAS, alloc(C, seq(
        stage("res_shr", alu(AluOp.SHR, xs[0], (("imm", 8), ("use_imm", True)))),
        stage("res_bias", alu(AluOp.ADD, xs[1], (("use_imm", False),), src=True)),
        stage("res_clip", alu(AluOp.MAX, xs[2], (("imm", 0), ("use_imm", True))),
              alu(AluOp.MIN, xs[3], (("imm", 127), ("use_imm", True))))))), sram=TABLE)
    assert_structural_equal(lower_alu(before, PYNQ), expected)


def test_a_bare_copy_is_not_the_alus() -> None:
    other = buf("d_acc", (2, 1, 16), "int32", "acc")
    f = func("f", [RES], alloc(C, alloc(other, stage("copy", loop(2, lambda x: loop(
        1, lambda b: loop(16, lambda j: other.store(C.load(x, b, j), x, b, j))))))),
        sram=sram((C, 0, 2), (other, 2, 2)))
    assert_structural_equal(lower_alu(f, PYNQ), f)


def test_an_operation_the_alu_lacks_is_refused_naming_what_exists() -> None:
    f = func("f", [RES], alloc(C, _stage("res_mul", lambda c, b, j: c * 3)), sram=TABLE)
    with pytest.raises(CompileError, match=(
            r"f: stage res_mul: no instruction of pynq computes c_acc\[x, b, j\] \* 3 in place; "
            r"available: ALU.ADD, ALU.MAX, ALU.MIN, ALU.SHR \(alu.ops: min, max, add, shr\)")):
        lower_alu(f, PYNQ)
