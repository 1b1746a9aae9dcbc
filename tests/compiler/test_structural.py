"""vta.compiler.ir.structural: equality up to variable and buffer identity, readable failures."""

import pytest

from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop, stage
from vta.compiler.ir.structural import (
    assert_structural_equal,
    first_difference,
    structural_equal,
)
from vta.isa import Load, MemType


def _copy(n: int = 4) -> S.PrimFunc:
    a, b = buf("A", (n,)), buf("B", (n,))
    return func("copy", [a, b], loop(n, lambda i: b.store(a.load(i) + 1, i)))


def test_separately_built_functions_are_equal() -> None:
    assert structural_equal(_copy(), _copy())
    assert_structural_equal(_copy(), _copy())


def test_names_are_hints_not_identity() -> None:
    a, b = buf("A", (4,)), buf("B", (4,))
    x, y = buf("X", (4,)), buf("Y", (4,))
    f = func("f", [a, b], loop(4, lambda i: b.store(a.load(i), i), name="i"))
    g = func("f", [x, y], loop(4, lambda k: y.store(x.load(k), k), name="k"))
    assert structural_equal(f, g)


def test_variables_pair_one_to_one() -> None:
    a = buf("A", (4, 4))
    # the same variable for both indices is not two different ones
    f = loop(4, lambda i: loop(4, lambda j: a.store(0, i, j)))
    g = loop(4, lambda i: loop(4, lambda j: a.store(0, j, i)))
    h = loop(4, lambda i: loop(4, lambda j: a.store(0, i, i)))
    assert structural_equal(f, f) and not structural_equal(f, g)
    assert not structural_equal(f, h) and not structural_equal(h, f)


def test_buffers_pair_one_to_one_and_compare_shape_dtype_scope() -> None:
    a, b = buf("A", (4,)), buf("B", (4,))
    assert not structural_equal(S.seq(a.store(0, 0), b.store(0, 0)),
                                S.seq(a.store(0, 0), a.store(0, 0)))
    assert not structural_equal(a.store(0, 0), buf("A", (4,), scope="acc").store(0, 0))
    assert not structural_equal(a.store(0, 0), buf("A", (8,)).store(0, 0))
    assert not structural_equal(a.store(0, 0), buf("A", (4,), "int8").store(0, 0))


def test_a_shared_subtree_under_differently_paired_loops_differs() -> None:
    a = buf("A", (4,))
    i = E.Var("i")
    body = a.store(0, i)
    assert not structural_equal(S.For(i, E.IntImm(0), E.IntImm(4), body),
                                S.For(E.Var("j"), E.IntImm(0), E.IntImm(4), body))


def test_constants_dtypes_kinds_and_attrs_are_compared() -> None:
    a = buf("A", (4,))
    assert not structural_equal(E.IntImm(1), E.IntImm(1, "int8"))
    assert not structural_equal(loop(4, lambda i: a.store(0, i)),
                                loop(4, lambda i: a.store(0, i), kind=S.ForKind.UNROLLED))
    assert not structural_equal(stage("x", a.store(0, 0)), stage("y", a.store(0, 0)))
    f, g = _copy(), _copy()
    assert not structural_equal(S.PrimFunc(f.name, f.params, f.body, ((S.TARGET, "cuda"),)), g)


def test_dialect_statements_compare_fields_but_not_notes() -> None:
    a = buf("A", (4, 1, 16), "int8")
    ld = Load(MemType.INP, 0, 0, 1, 4, 4)
    assert structural_equal(Insn(ld, a, note="x"), Insn(ld, a, note="y"))
    assert not structural_equal(Insn(ld, a), Insn(Load(MemType.INP, 0, 4, 1, 4, 4), a))


def test_failure_names_the_place_and_shows_a_diff() -> None:
    with pytest.raises(AssertionError) as e:
        assert_structural_equal(_copy(4), _copy(8))
    text = str(e.value)
    assert "params[0]: buffer A shape (4,) != A (8,)" in text
    assert "-def copy(A: int32[8], B: int32[8]):" in text
    assert "+def copy(A: int32[4], B: int32[4]):" in text
    a = buf("A", (4,), scope="acc")
    where = first_difference(alloc(a, loop(4, lambda i: a.store(1, i))),
                             alloc(a, loop(4, lambda i: a.store(2, i))))
    assert where == "body.body.value.value: 1 != 2"
