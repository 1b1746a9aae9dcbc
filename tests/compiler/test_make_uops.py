"""``vta_ir.make_uops`` (flatten's micro-op builder, filling ``Uop``'s slots directly) makes
the same objects ``Uop(...)`` makes: equal, equally hashed, frozen, pickled alike."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vta.compiler.accel import vta_ir
from vta.compiler.accel.vta_ir import make_uops
from vta.isa import Uop

ints = st.integers(-2**20, 2**20)


@given(ints, ints, ints, st.lists(st.tuples(ints, ints, ints), max_size=20))
def test_same_as_the_constructor(d: int, s: int, w: int,
                                 offs: list[tuple[int, int, int]]) -> None:
    got = make_uops(d, s, w, offs)
    want = tuple(Uop(d + a, s + b, w + c) for a, b, c in offs)
    assert type(got) is tuple and got == want
    assert [hash(u) for u in got] == [hash(u) for u in want]
    assert all(type(u) is Uop for u in got)
    assert pickle.loads(pickle.dumps(got)) == want


def test_uses_the_slots_and_stays_frozen() -> None:
    assert vta_ir._UOP_SLOTS is not None  # Uop is the slotted dataclass it expects
    (u,) = make_uops(1, 2, 3, [(0, 0, 0)])
    assert (u.dst, u.src, u.wgt) == (1, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        u.dst = 5  # type: ignore[misc]
