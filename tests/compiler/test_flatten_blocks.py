"""flatten's micro-op blocks across calls (``flatten._block``): a later compile whose table
shares an offsets object and bases gets the ``Uop`` objects made before, in a tuple of its
own; an offsets object that is not the one recorded (a dead one's id reused) is not."""

from __future__ import annotations

from vta.compiler.accel.passes import flatten as F
from vta.compiler.accel.vta_ir import Offsets


def test_a_block_is_shared_across_calls_in_a_tuple_of_its_own(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    made: list[int] = []
    real = F.make_uops

    def counting(d, s, w, offsets):  # type: ignore[no-untyped-def]
        made.append(d)
        return real(d, s, w, offsets)

    monkeypatch.setattr(F, "make_uops", counting)
    monkeypatch.setattr(F, "_MADE", {})
    offs = Offsets(((0, 0, 0), (1, 1, 0)))
    first = F._block(offs, 4, 0, 0)
    again = F._block(offs, 4, 0, 0)
    assert made == [4]
    assert again == first and again is not first
    assert all(a is b for a, b in zip(again, first, strict=True))
    other = F._block(offs, 6, 0, 0)  # other bases: made
    assert made == [4, 6] and [u.dst for u in other] == [6, 7]


def test_an_entry_of_another_offsets_object_is_not_reused(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The entry keeps its offsets object; a key whose id matches another object's is a
    miss (here forced by planting an entry under the new object's id)."""
    monkeypatch.setattr(F, "_MADE", {})
    old = Offsets(((0, 0, 0),))
    new = Offsets(((5, 0, 0),))
    F._MADE[(id(new), 0, 0, 0)] = (old, F.make_uops(0, 0, 0, old))
    got = F._block(new, 0, 0, 0)
    assert [u.dst for u in got] == [5]
    assert F._MADE[(id(new), 0, 0, 0)][0] is new


def test_the_table_is_emptied_past_its_micro_op_budget(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(F, "_MADE", {})
    monkeypatch.setattr(F, "_made_count", [0])
    monkeypatch.setattr(F, "_MADE_UOPS", 3)
    a, b = Offsets(((0, 0, 0), (1, 0, 0))), Offsets(((0, 0, 0), (2, 0, 0)))
    F._block(a, 0, 0, 0)
    F._block(b, 0, 0, 0)  # 2 + 2 > 3: emptied first
    assert list(F._MADE) == [(id(b), 0, 0, 0)] and F._made_count == [2]
