"""region_inference: the box of every on-chip access, checked against the buffer's shape."""

import pytest
from _accel_ir import PYNQ

from vta.compiler.accel.passes.region_inference import RegionError, infer_regions
from vta.compiler.ir import expr as E
from vta.compiler.ir.builder import alloc, buf, func, loop
from vta.compiler.ir.structural import assert_structural_equal

A = buf("A", (4, 1, 16), "int8")


def _copy(t: object, offset: int = 0) -> object:
    return loop(2, lambda i: loop(16, lambda k: t.store(A.load(i, 0, k), i + offset, 0, k)))


def test_bounds_attribute_is_the_box_of_every_access() -> None:
    t = buf("t", (3, 1, 16), "int8", "inp")
    body = alloc(t, _copy(t, 1))
    before = func("f", [A], body)
    expected = func("f", [A], body, bounds=((t, ((1, 2), (0, 0), (0, 15))),))
    assert_structural_equal(infer_regions(before, PYNQ), expected)


def test_access_past_the_buffer_names_buffer_dimension_and_range() -> None:
    t = buf("t", (2, 1, 16), "int8", "inp")
    f = func("f", [A], alloc(t, _copy(t, 1)))
    with pytest.raises(RegionError, match=r"f: t dimension 0 accessed over \[1, 2\], outside "
                                          r"its extent 2"):
        infer_regions(f, PYNQ)


def test_index_bound_by_no_loop_is_refused() -> None:
    t = buf("t", (2, 1, 16), "int8", "inp")
    n = E.Var("n")
    f = func("f", [A], alloc(t, loop(16, lambda k: t.store(0, n, 0, k))))
    with pytest.raises(RegionError, match=r"uses \['n'\], bound by no loop"):
        infer_regions(f, PYNQ)
