"""lower_tensorize: a WMMA region and the copies of its fragments become WMMA statements."""

import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, attr, buf, func, loop, seq
from vta.compiler.ir.intrin import Match, TensorizeRegion
from vta.compiler.ir.structural import assert_structural_equal
from vta.gpu.dialect import FragmentInfo, WmmaFill, WmmaLoad, WmmaMma, WmmaStore
from vta.gpu.wmma import WMMA_INT8, WMMA_MMA_INT8, GpuLoweringError, lower_tensorize

AG = buf("A", (16, 32), "int8")
BG = buf("B", (16, 16), "int8")
D = buf("D", (16, 16), "int32")
C = buf("c_local", (1, 1, 16, 16), "int32", "local")
AL = buf("a_local", (1, 1, 16, 16), "int8", "local")
BL = buf("b_local", (1, 1, 16, 16), "int8", "local")
REGION = TensorizeRegion(WMMA_INT8, Match({}, {}), {}, {})


def _tile(body: object) -> S.Stmt:
    return loop(16, lambda r: loop(16, lambda c: body(r, c), name="c"), name="r")


def _mma(value: object) -> S.Stmt:
    return attr("tensorize", REGION, loop(16, lambda i: loop(16, lambda j: loop(
        16, lambda k: C.store(value(i, j, k), 0, 0, i, j)))))


def _product(i: E.Var, j: E.Var, k: E.Var) -> E.Expr:
    return C.load(0, 0, i, j) + AL.load(0, 0, i, k).astype("int32") \
        * BL.load(0, 0, k, j).astype("int32")


def _before(value: object = _product) -> S.PrimFunc:
    return func("k", [AG, BG, D], alloc(C, alloc(AL, alloc(BL, seq(
        _tile(lambda r, c: C.store(0, 0, 0, r, c)),
        _tile(lambda r, c: AL.store(AG.load(r, c + 16), 0, 0, r, c)),
        _tile(lambda r, c: BL.store(BG.load(c, r), 0, 0, r, c)),
        _mma(value),
        _tile(lambda r, c: D.store(C.load(0, 0, r, c), r, c)))))))


def test_region_and_fragment_copies_become_wmma_statements() -> None:
    """A's tile is rows of A (row-major, 32 apart, from column 16), B's is read transposed
    (column-major, 16 apart); the accumulator is filled with 0 and stored row-major."""
    z = E.IntImm(0)
    body = seq(WmmaFill(C, (z, z), z),
               WmmaLoad(AL, (z, z), AG, (z, E.IntImm(16)), 32, "row_major"),
               WmmaLoad(BL, (z, z), BG, (z, z), 16, "col_major"),
               WmmaMma(C, (z, z), AL, (z, z), BL, (z, z), C, (z, z), WMMA_MMA_INT8),
               WmmaStore(D, (z, z), C, (z, z), 16, "row_major"))

    def frag(b: S.Buffer, role: str, layout: str, inner: S.Stmt) -> S.Stmt:
        return attr("wmma.fragment", FragmentInfo(role, 16, 16, 16, layout), alloc(b, inner))

    expected = func("k", [AG, BG, D], frag(C, "accumulator", "", frag(
        AL, "matrix_a", "row_major", frag(BL, "matrix_b", "col_major", body))))
    assert_structural_equal(lower_tensorize(_before()), expected)


def test_a_region_that_is_not_a_product_sum_is_refused() -> None:
    with pytest.raises(GpuLoweringError, match=r"k: tensorize: region body is not C = C \+ A \* B"):
        lower_tensorize(_before(lambda i, j, k: C.load(0, 0, i, j) + AL.load(0, 0, i, k).astype(
            "int32")))


def test_without_wmma_regions_the_function_is_returned_unchanged() -> None:
    f = func("k", [D], _tile(lambda r, c: D.store(0, r, c)))
    assert lower_tensorize(f) is f
