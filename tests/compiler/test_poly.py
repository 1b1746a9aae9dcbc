"""Integer analysis on its own: footprints (strided, windowed, padded, matmul tiles) with exact
extents, affine forms, capacity errors and dependence checks."""

from __future__ import annotations

import islpy as isl
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir.stmt import Buffer


def test_matmul_tile_footprint() -> None:
    io, ko, ii, ki = E.Var("io"), E.Var("ko"), E.Var("ii"), E.Var("ki")
    box = poly.footprint([io * 16 + ii, ko * 8 + ki], {ii: 16, ki: 8})
    assert box.extents == (16, 8)
    assert [str(m) for m in box.mins] == ["io * 16", "ko * 8"]
    assert box.at({io: 2, ko: 3}) == ((32, 16), (24, 8))


def test_strided_windowed_conv_halo() -> None:
    """An output tile of 4 rows at stride 2 with a 3-row window reads 2*3 + 3 = 9 rows."""
    to, y, r = E.Var("to"), E.Var("y"), E.Var("r")
    box = poly.footprint([(to * 4 + y) * 2 + r], {y: 4, r: 3})
    assert box.extents == (9,)
    assert str(box.mins[0]) == "to * 8"


def test_footprint_of_split_with_guard_has_exact_extent() -> None:
    """Parameters with ranges: the box of a tile is the largest over all tiles."""
    o, i = E.Var("o"), E.Var("i")
    box = poly.footprint([o * 3 + i], {i: 3}, params={o: 4})
    assert box.extents == (3,) and str(box.mins[0]) == "o * 3"


def test_floordiv_mod_access() -> None:
    f = E.Var("f")
    p = E.Var("p")
    box = poly.footprint([(p * 8 + f) // 4, (p * 8 + f) % 4], {f: 8})
    assert box.extents == (2, 4)
    assert box.at({p: 3}) == ((6, 2), (0, 4))


@pytest.mark.parametrize("tile,expect", [
    # tile 0 of a pad-1 conv: one zero row/column before the data
    (0, {"mins": (0, 0), "extents": (4, 5), "pad_before": (1, 0), "pad_after": (0, 0)}),
    (1, {"mins": (3, 0), "extents": (5, 5), "pad_before": (0, 0), "pad_after": (0, 0)}),
    # the last tile runs past the image: 5 rows wanted, only 1 left, 4 rows of padding after
    (2, {"mins": (7, 0), "extents": (1, 5), "pad_before": (0, 0), "pad_after": (4, 0)}),
])
def test_padded_tile_splits_into_data_and_pads(tile: int, expect: dict) -> None:
    """Rows ``t*4 + y - 1`` of an 8-row image (pad 1) for 4-row tiles and a 2-row window: the
    DMA reads the in-bounds rows and zero-fills ``pad_before``/``pad_after``."""
    t, y, r, x = E.Var("t"), E.Var("y"), E.Var("r"), E.Var("x")
    box = poly.footprint([t * 4 + y + r - 1, x], {y: 4, r: 2, x: 5})
    assert box.extents == (5, 5)
    got = box.clamp([0, 0], [8, 5]).at({t: tile})
    assert got == expect


def test_linear_form_and_simplify() -> None:
    x, y = E.Var("x"), E.Var("y")
    e = (x * 4 + y) - x * 4 + 3 - 3
    assert poly.simplify(e) is y
    terms, c = poly.linear_form(x * 2 - (y - 5) * 3)
    assert terms == {x: 2, y: -3} and c == 15
    assert str(poly.simplify((x + 1) // 2 + 0)) == "(x + 1) // 2"


def test_not_affine_is_reported() -> None:
    x, y = E.Var("x"), E.Var("y")
    with pytest.raises(poly.PolyError, match="not affine"):
        poly.footprint([x * y], {x: 4, y: 4})


def test_capacity_errors_name_buffer_and_bytes(pynq) -> None:
    ok = Buffer("A_inp", (16, 16, 16), "int8", "inp")  # 4 KiB of 32 KiB
    poly.check_capacity([ok, Buffer("C", (1 << 20,), "int8", "global")], pynq)
    big = Buffer("W_wgt", (300, 16, 16, 16), "int8", "wgt")  # 1.2 MB > 256 KiB
    with pytest.raises(poly.CapacityError, match=r"scratchpad 'wgt' of pynq: needs 1228800 bytes "
                                                 r"\(W_wgt\[300, 16, 16, 16\] int8 = 1228800 B\), "
                                                 r"262144 available"):
        poly.check_capacity([ok, big], pynq)
    acc = Buffer("C_acc", (16, 16, 16, 16), "int32", "acc")  # 256 KiB x 2 copies > 128 KiB
    with pytest.raises(poly.CapacityError, match="x 2 copies"):
        poly.check_capacity([acc], pynq, copies=2)


def test_dependences_and_violations() -> None:
    dom = "{ S[i, j] : 0 <= i < 4 and 0 <= j < 4 }"
    deps = poly.dependences(dom, "{ S[i, j] -> T[i, j] }", "{ S[i, j] -> T[i - 1, j + 1] }")
    assert not deps.flow.is_empty() and deps.output.is_empty()
    same = isl.Map("{ S[i, j] -> [i, j] }")
    swap = isl.Map("{ S[i, j] -> [j, i] }")
    assert poly.violations(deps.all(), same).is_empty()
    assert not poly.violations(deps.all(), swap).is_empty()
    assert poly.carries(deps.all(), same, 0) and not poly.carries(deps.all(), same, 1)


def test_isl_results_are_cached() -> None:
    a, b = E.Var("a"), E.Var("b")
    poly.set_box.cache_clear()
    poly.footprint([a * 4 + b], {b: 4})
    poly.footprint([a * 4 + b], {b: 4})
    assert poly.set_box.cache_info().hits == 1


def _same_box(text: str) -> None:
    """``set_box``'s closed form gives exactly isl's box (the bounds, and the lower bound as
    the same expression)."""
    fast, ref = poly.box_closed_form(text), poly.isl_set_box(text)
    assert fast is not None
    names = text[1:text.index("]")].split(", ")
    by_name = {n: E.Var(n) for n in names if n}
    assert len(fast) == len(ref)
    for a, b in zip(fast, ref, strict=True):
        assert (a.lo_min, a.lo_max, a.hi_max, a.extent) == (b.lo_min, b.lo_max, b.hi_max,
                                                            b.extent)
        assert b.lo is not None and a.lo is not None
        assert poly.aff_to_expr(a.lo, by_name) == poly.aff_to_expr(b.lo, by_name)


@pytest.mark.parametrize("text", [
    # a strided window under two tile parameters (a conv input tile), with implied checks
    "[p0, p1] -> { [o0, o1] : exists (l2, l3 : 0 <= p0 < 4 and 0 <= p1 < 2 and 0 <= l2 < 7 "
    "and 0 <= l3 < 3 and 0 <= ((p1 * 16) + l2) < 32 and o0 = (((p0 * 7) + l2) * 2) + l3 "
    "and o1 = (0 + 0)) }",
    # a parameter with one value is that value (isl leaves it out of the bound)
    "[p0, p1] -> { [o0] : exists (l : 0 <= p0 < 1 and 0 <= p1 < 3 and 0 <= l < 4 "
    "and o0 = 3*p1 + 5*p0 + l) }",
    # negative coefficients
    "[p0] -> { [o0] : exists (l : 0 <= p0 < 5 and 0 <= l < 4 and o0 = 20 - 3*p0 - l) }",
    # a union of readers with the same parameter part: the lowest start, the widest span
    "[p0] -> { [o0] : exists (l : 0 <= p0 < 3 and 0 <= l < 4 and o0 = 4*p0 + l); "
    "[o0] : exists (l : 0 <= p0 < 3 and 0 <= l < 2 and o0 = 4*p0 + l + 3) }",
    # no existentials
    "[p0, p1] -> { [o0, o1] : 0 <= p0 < 2 and 0 <= p1 < 6 and o0 = 2*p0 and o1 = p1 + 1 }",
    # unbounded parameters (a DMA's outer loops, ``footprint`` without ``params``): the
    # lower bound keeps them, its range is unbounded where they appear (C1's padded input)
    "[p0, p1, p2, p3] -> { [o0, o1, o2, o3] : exists (v4, v5 : 0 <= v4 < 29 and 0 <= v5 < 17 "
    "and o0 = 0 and o1 = p0 and o2 = ((((p2 * 56) + (p1 * 28)) + v4) - 1) and o3 = (((p3 * 16) "
    "+ v5) - 1)) }",
    "[p0] -> { [o0] : exists (l : 0 <= l < 4 and o0 = p0 + l) }",
    "[p0] -> { [o0, o1] : exists (l : 0 <= l < 4 and o0 = 7 - 2*p0 - l and o1 = l) }",
    # an unbounded parameter beside a ranged one and one of a single value
    "[p0, p1, p2] -> { [o0] : exists (l : 0 <= p1 < 3 and 0 <= p2 < 1 and 0 <= l < 2 "
    "and o0 = 3*p0 + 4*p1 + 5*p2 + l) }",
    # an unbounded parameter without existentials
    "[p0, p1] -> { [o0, o1] : 0 <= p1 < 6 and o0 = 2*p0 and o1 = p1 + 1 }",
])
def test_box_closed_form_is_isls_box(text: str) -> None:
    _same_box(text)
    poly.set_box.cache_clear()
    assert poly.set_box(text) == poly.box_closed_form(text)


@pytest.mark.parametrize("text", [
    # a range check that cuts the box (the last tile at the tensor's end)
    "[p0] -> { [o0] : exists (l : 0 <= p0 < 3 and 0 <= l < 16 and 0 <= 16*p0 + l < 40 "
    "and o0 = 16*p0 + l) }",
    # a division
    "[p0] -> { [o0] : exists (l : 0 <= p0 < 3 and 0 <= l < 4 and o0 = floor((4*p0 + l)/2)) }",
    # an existential defined by an equality (a fused loop)
    "[p0] -> { [o0] : exists (l, x : 0 <= p0 < 3 and 0 <= l < 4 and x = 4*p0 + l "
    "and o0 = x) }",
    # readers whose starts differ by parameter: a piecewise minimum
    "[p0] -> { [o0] : exists (l : 0 <= p0 < 3 and 0 <= l < 4 and o0 = 4*p0 + l); "
    "[o0] : exists (l : 0 <= p0 < 3 and 0 <= l < 4 and o0 = 2*p0 + l) }",
    # a range check on an unbounded parameter cuts the box
    "[p0] -> { [o0] : exists (l : 0 <= l < 4 and 0 <= p0 + l < 8 and o0 = p0 + l) }",
    # a parameter ranged in one reader and not in the other
    "[p0] -> { [o0] : exists (l : 0 <= p0 < 3 and 0 <= l < 4 and o0 = p0 + l); "
    "[o0] : exists (l : 0 <= l < 4 and o0 = p0 + l) }",
])
def test_box_closed_form_leaves_other_sets_to_isl(text: str) -> None:
    assert poly.box_closed_form(text) is None


@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8"])
def test_simplify_keeps_a_variable_or_constant_itself(dtype: str) -> None:
    """A bare variable or constant comes back as itself (no affine round trip), equal to what
    the round trip through its linear form builds."""
    x = E.Var("x", dtype)
    for e in (x, E.IntImm(7, dtype), E.IntImm(-3, dtype)):
        assert poly.simplify(e) is e
        assert poly.from_linear(*poly.linear_form(e), e.dtype) == e
