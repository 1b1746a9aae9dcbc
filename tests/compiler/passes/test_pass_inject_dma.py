"""inject_dma: copy nests between DRAM and a scratchpad become 2-D DMAs."""

import pytest
from _accel_ir import PYNQ, sram

from vta.compiler.accel.passes.inject_dma import _may_copy, inject_dma
from vta.compiler.accel.vta_ir import SRAM, DmaLoad, DmaStore
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import alloc, buf, func, loop, stage
from vta.compiler.ir.structural import assert_structural_equal
from vta.errors import CompileError

Z = E.IntImm(0)


def _i(v: int) -> E.Expr:
    return E.IntImm(v)


def test_load_of_a_column_window_is_rows_of_a_strided_dma() -> None:
    """3 of 4 columns of 2 rows: rows of 3 entries, 4 apart in DRAM, at SRAM entry 5."""
    g = buf("A", (2, 4, 1, 16), "int8")
    t = buf("a_inp", (2, 3, 1, 16), "int8", "inp")
    copy = loop(2, lambda y: loop(3, lambda x: loop(1, lambda b: loop(16, lambda k: t.store(
        g.load(y, x, b, k), y, x, b, k)))))
    before = func("f", [g], alloc(t, stage("a_inp", copy)), sram=sram((t, 5, 6)))
    dma = DmaLoad("inp", t, _i(5), g, Z, _i(2), _i(3), _i(4), Z, Z, Z, Z)
    expected = func("f", [g], alloc(t, stage("a_inp", dma)), sram=before.attr(SRAM))
    assert_structural_equal(inject_dma(before, PYNQ), expected)


def test_copy_out_inside_a_tile_loop_is_a_store_at_the_tile_offset() -> None:
    res = buf("res", (4, 1, 16), "int8")
    acc = buf("c_acc", (2, 1, 16), "int32", "acc")
    before = func("f", [res], loop(2, lambda o: alloc(acc, loop(2, lambda x: loop(
        1, lambda b: loop(16, lambda k: res.store(acc.load(x, b, k).astype("int8"),
                                                  o * 2 + x, b, k)))))), sram=sram((acc, 0, 2)))
    expected = func("f", [res], loop(2, lambda o: alloc(acc, stage("res", DmaStore(
        acc, Z, res, o * 2, _i(1), _i(2), _i(2))))), sram=before.attr(SRAM))
    assert_structural_equal(inject_dma(before, PYNQ), expected)


def test_padding_select_becomes_the_dma_pads() -> None:
    """Rows -1..2 of a 2x2 image: one row of zero padding above and below. A padded row
    dimension is the DMA's y (its pads are rows); the contiguous columns are x."""
    g = buf("A", (2, 2, 1, 16), "int8")
    t = buf("a_inp", (4, 2, 1, 16), "int8", "inp")

    def elem(y: E.Var, x: E.Var, b: E.Var, k: E.Var) -> object:
        r = y - 1
        return t.store(E.select((r >= 0) & (r < 2), g.load(r, x, b, k), E.IntImm(0, "int8")),
                       y, x, b, k)

    copy = loop(4, lambda y: loop(2, lambda x: loop(1, lambda b: loop(16, lambda k: elem(
        y, x, b, k)))))
    before = func("f", [g], alloc(t, stage("a_inp", copy)), sram=sram((t, 0, 8)))
    dma = DmaLoad("inp", t, Z, g, Z, _i(2), _i(2), _i(2), _i(1), _i(1), Z, Z)
    expected = func("f", [g], alloc(t, stage("a_inp", dma)), sram=before.attr(SRAM))
    assert_structural_equal(inject_dma(before, PYNQ), expected)


def test_a_padded_single_loop_pads_the_row() -> None:
    """One padded loop, contiguous in SRAM and DRAM, is the DMA's x: pads left and right."""
    g = buf("A", (2, 1, 16), "int8")
    t = buf("a_inp", (4, 1, 16), "int8", "inp")

    def elem(y: E.Var, b: E.Var, k: E.Var) -> object:
        r = y - 1
        return t.store(E.select((r >= 0) & (r < 2), g.load(r, b, k), E.IntImm(0, "int8")),
                       y, b, k)

    copy = loop(4, lambda y: loop(1, lambda b: loop(16, lambda k: elem(y, b, k))))
    before = func("f", [g], alloc(t, stage("a_inp", copy)), sram=sram((t, 0, 4)))
    dma = DmaLoad("inp", t, Z, g, Z, _i(1), _i(2), _i(4), Z, Z, _i(1), _i(1))
    expected = func("f", [g], alloc(t, stage("a_inp", dma)), sram=before.attr(SRAM))
    assert_structural_equal(inject_dma(before, PYNQ), expected)


def test_select_that_is_not_a_bound_is_refused() -> None:
    g = buf("A", (2, 1, 16), "int8")
    t = buf("a_inp", (2, 1, 16), "int8", "inp")
    copy = loop(2, lambda y: loop(1, lambda b: loop(16, lambda k: t.store(
        E.select(y.eq(0), g.load(y, b, k), E.IntImm(0, "int8")), y, b, k))), name="y")
    f = func("f", [g], alloc(t, stage("a_inp", copy)), sram=sram((t, 0, 2)))
    with pytest.raises(CompileError, match=r"f: stage a_inp: select condition y == 0 is not a "
                                           r"bound of A"):
        inject_dma(f, PYNQ)


def test_only_a_store_reading_the_copy_source_may_be_a_copy() -> None:
    """``_may_copy``: a scratchpad store reading a global buffer, or a global store reading an
    acc one, may be a copy; a compute nest's store (acc from inp and wgt) and a global store
    of an inp buffer never are, so their loops are not substituted to find out."""
    g = buf("A", (2, 1, 16), "int8")
    inp = buf("a_inp", (2, 1, 16), "int8", "inp")
    acc = buf("c_acc", (2, 1, 16), "int32", "acc")
    load = inp.store(g.load(0, 0, 0), 0, 0, 0)
    out = g.store(acc.load(0, 0, 0).astype("int8"), 0, 0, 0)
    gemm = acc.store(acc.load(0, 0, 0) + inp.load(0, 0, 0).astype("int32"), 0, 0, 0)
    wrong = g.store(inp.load(0, 0, 0), 0, 0, 0)
    seen: dict[int, tuple[S.BufferStore, bool]] = {}
    assert [_may_copy(s, seen) for s in (load, out, gemm, wrong)] == [True, True, False, False]
    assert len(seen) == 4
