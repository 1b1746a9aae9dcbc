"""Small facts of the shared IR that scheduling relies on."""

from __future__ import annotations

import dataclasses

import pytest

from vta.compiler.accel.insn_intrin import vta_gemm_intrinsic
from vta.compiler.ir import expr as E
from vta.compiler.ir.intrin import TensorIntrinsic, for_target, gemm_decl, get, register
from vta.compiler.ir.tensor import compute, input_tensors, placeholder, reduce_axis
from vta.errors import IntrinError


def test_input_tensors_are_direct_reads_only() -> None:
    A = placeholder((4,), "int8", "A")
    B = compute((4,), lambda i: A[i] + 1, "B")
    C = compute((4,), lambda i: B[i] * 2, "C")
    assert input_tensors(C.op) == [B]


def test_itervar_in_expressions() -> None:
    r = reduce_axis(3, "r")
    y = E.Var("y")
    e = y * 2 + r
    assert isinstance(e, E.Add) and e.b is r.var
    assert (r - 1).a is r.var


def test_select_types_follow_the_branches() -> None:
    A = placeholder((4,), "int8", "A")
    i = E.Var("i")
    s = E.select(i < 2, A[i], 0)
    assert s.dtype == "int8" and s.f == E.IntImm(0, "int8")


def test_intrinsic_registry(pynq) -> None:
    g = vta_gemm_intrinsic(pynq)
    assert g is vta_gemm_intrinsic(pynq)  # one object per GEMM shape
    assert g.decl.shape == (1, 16) and g.op.reduce_axes[0].extent == 16
    assert g.decl.dtype == "int32"
    again = dataclasses.replace(g)  # an equal definition, another object
    register(again, replace_existing=True)
    assert get(g.name) is again and again in for_target("vta")
    register(g, replace_existing=True)
    other = TensorIntrinsic(g.name, "vta", gemm_decl(1, 4, 4, "int8", "int8", "int32"))
    with pytest.raises(IntrinError, match="already registered"):
        register(other)
    with pytest.raises(IntrinError, match="no intrinsic named 'nope'"):
        get("nope")
