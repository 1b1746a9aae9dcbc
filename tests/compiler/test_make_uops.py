"""``vta_ir.make_uops`` (flatten's micro-op builder, filling ``Uop``'s slots directly) makes
the same objects ``Uop(...)`` makes: equal, equally hashed, frozen, pickled alike; and
``vta_ir.maker``, the same for any slotted frozen dataclass."""

from __future__ import annotations

import dataclasses
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vta.compiler.accel import vta_ir
from vta.compiler.accel.vta_ir import Insn, make_uops
from vta.isa import Load, MemType, Uop
from vta.isa.insn import NO_DEPS

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


@given(ints, ints, ints, ints, ints, ints)
def test_maker_builds_what_the_constructor_builds(a: int, b: int, c: int, y: int, x: int,
                                                   s: int) -> None:
    """``vta_ir.maker`` (flatten's instruction and ``Insn`` builders) makes objects equal to,
    hashed and printed like the dataclass's own constructor's, frozen."""
    load = vta_ir.maker(Load)(MemType.INP, a, b, y, x, s, 1, 0, 2, 0, NO_DEPS)
    assert load == Load(MemType.INP, a, b, y, x, s, 1, 0, 2, 0) and type(load) is Load
    assert hash(load) == hash(Load(MemType.INP, a, b, y, x, s, 1, 0, 2, 0))
    ins = vta_ir.maker(Insn)(load, None, (), c, "")
    assert repr(ins) == repr(Insn(load, None, (), c))
    with pytest.raises(dataclasses.FrozenInstanceError):
        ins.thread = 5  # type: ignore[misc]


def test_maker_is_the_class_where_filling_slots_would_differ() -> None:
    """A dataclass with a ``__post_init__`` (or without slots) is built by its constructor."""
    @dataclasses.dataclass(frozen=True, slots=True)
    class Checked:
        v: int

        def __post_init__(self) -> None:
            assert self.v >= 0

    @dataclasses.dataclass(frozen=True)
    class Plain:
        v: int

    assert vta_ir.maker(Checked) is Checked and vta_ir.maker(Plain) is Plain
    assert vta_ir.slot_setters(Checked) is None and vta_ir.slot_setters(Plain) is None
    assert vta_ir.slot_setters(Load) is not None
