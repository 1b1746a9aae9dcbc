"""``poly.footprint_at``: the concrete box of an access whose variables are all ranged, in
closed form for affine indices: the same ``(min, extent)`` per dimension as ``footprint``'s
box at no parameters (and isl's own box of the text it writes), any index included."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly

VARS = [E.Var(f"v{k}") for k in range(3)]


@st.composite
def _index(draw: st.DrawFn) -> E.Expr:
    """An index over ``VARS``: an affine sum (coefficients of either sign, a constant), at
    times under a floor division or a modulus (not affine: ``footprint`` answers it)."""
    e: E.Expr = E.IntImm(draw(st.integers(-20, 20)))
    for v in VARS:
        c = draw(st.integers(-4, 4))
        if c:
            e = e + v * c if draw(st.booleans()) else e - v * -c
    wrap = draw(st.sampled_from(["", "", "div", "mod"]))
    if wrap == "div":
        e = E.FloorDiv(e, E.IntImm(draw(st.integers(2, 4))), "int32")
    elif wrap == "mod":
        e = E.FloorMod(e, E.IntImm(draw(st.integers(2, 4))), "int32")
    return e


@given(st.lists(_index(), min_size=1, max_size=3),
       st.lists(st.integers(1, 6), min_size=3, max_size=3))
def test_footprint_at_is_footprints_box(indices: list[E.Expr], extents: list[int]) -> None:
    ranges = dict(zip(VARS, extents, strict=True))
    want = poly.footprint(indices, ranges).at({})
    assert poly.footprint_at(indices, ranges) == want
    text = poly.region_text(indices, ranges, [])
    assert want == tuple((d.lo_min, d.extent) for d in poly.isl_set_box(text))


def test_an_empty_range_goes_to_isl() -> None:
    x = E.Var("x")
    with pytest.raises(poly.PolyError, match="empty region"):
        poly.footprint_at((x * 2,), {x: 0})


def test_affine_indices_write_no_isl_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The closed form reads the linear forms: no text is written (``region_text``) for an
    affine access; a floor division is written and answered as before."""
    x, y = E.Var("x"), E.Var("y")
    texts: list[str] = []
    real = poly.region_text

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        texts.append(real(*a, **k))
        return texts[-1]

    monkeypatch.setattr(poly, "region_text", spy)
    assert poly.footprint_at((x * 2 + y - 3, y * -1 + 5), {x: 4, y: 3}) == ((-3, 9), (3, 3))
    assert texts == []
    assert poly.footprint_at((E.FloorDiv(x, E.IntImm(2), "int32"),), {x: 5}) == ((0, 3),)
    assert len(texts) == 1
