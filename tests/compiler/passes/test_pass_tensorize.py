"""tensorize: a matched GEMM region and its init nest become GEMM ``ComputeNest``s."""

import pytest
from _accel_ir import PYNQ, gemm_region, sram

from vta.compiler.accel.passes.tensorize import TensorizeError, tensorize
from vta.compiler.accel.vta_ir import ComputeNest
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, attr, buf, func, loop, seq, stage
from vta.compiler.ir.structural import assert_structural_equal
from vta.isa.builtins import GEMM

RES = buf("res", (2, 1, 16), "int8")


def _gemm(c: S.Buffer, a: S.Buffer, w: S.Buffer, x: E.Var) -> S.Stmt:
    """``for b, j, k: c[x, b, j] += a[x, b, k] * w[0, j, k]`` under its tensorize mark."""
    vs: list[E.Var] = []

    def body(b: E.Var, j: E.Var, k: E.Var) -> S.Stmt:
        vs.extend((b, j, k))
        return c.store(c.load(x, b, j) + a.load(x, b, k).astype("int32")
                       * w.load(0, j, k).astype("int32"), x, b, j)

    nest = loop(1, lambda b: loop(16, lambda j: loop(16, lambda k: body(b, j, k))))
    return attr("tensorize", gemm_region(c, a, w, *vs), nest)


def test_region_and_init_nest_become_gemm_nests() -> None:
    c = buf("c_acc", (2, 1, 16), "int32", "acc")
    a = buf("a_inp", (2, 1, 16), "int8", "inp")
    w = buf("w_wgt", (1, 16, 16), "int8", "wgt")
    table = sram((c, 1, 2), (a, 0, 2), (w, 0, 1))
    before = func("f", [RES], alloc(c, alloc(a, alloc(w, seq(
        stage("c_acc", loop(2, lambda x: loop(1, lambda b: loop(16, lambda j: c.store(
            0, x, b, j))))),
        loop(2, lambda x: _gemm(c, a, w, x)))))), sram=table)

    def init(x: E.Var) -> S.Stmt:
        return ComputeNest(GEMM, True, ((x, 2),), ("dst",), (1 + x,), (), (c,))

    def update(x: E.Var) -> S.Stmt:
        return ComputeNest(GEMM, False, ((x, 2),), ("dst", "src", "wgt"), (1 + x, x, E.IntImm(0)),
                           (), (c, a, w))

    xs = [E.Var("x"), E.Var("x")]
    expected = func("f", [RES], alloc(c, alloc(a, alloc(w, seq(
        stage("c_acc", stage("c_acc.init", init(xs[0]))),
        stage("c_acc.update", update(xs[1])))))), sram=table)
    assert_structural_equal(tensorize(before, PYNQ), expected)


def test_operand_in_the_wrong_scratchpad_is_named() -> None:
    c = buf("c_acc", (2, 1, 16), "int32", "acc")
    a = buf("a_acc", (2, 1, 16), "int8", "acc")
    w = buf("w_wgt", (1, 16, 16), "int8", "wgt")
    f = func("f", [RES], alloc(c, alloc(a, alloc(w, loop(2, lambda x: _gemm(c, a, w, x))))),
             sram=sram((c, 1, 2), (a, 0, 2), (w, 0, 1)))
    with pytest.raises(TensorizeError, match=r"operand src of GEMM lives in the inp scratchpad, "
                                             r"but a_acc is in acc"):
        tensorize(f, PYNQ)
