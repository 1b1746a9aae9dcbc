"""drain_tail's store-side cut (``room``): a tail whose store pieces alone add up to the best
tail's time is not laid out further (its later pieces are never made), and the chosen split is
the one every part count laid out in full gives."""

from __future__ import annotations

import math

import pytest
from _accel_ir import PYNQ, isa, stream, uops

from vta.compiler.accel.passes import drain_tail as D
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir.builder import buf
from vta.compiler.ir.structural import assert_structural_equal

RES = buf("res", (64, 1, 16), "int8")
ACC = buf("c_acc", (64, 1, 16), "int32", "acc")
ROWS = uops(*((k, k, 0) for k in range(64)))  # one micro-op per entry
ALU, STORE = isa("ALU.MAX uop=0:64 iter=1,1 dst=0,0 src=0,0 imm=0\n"
                 "STORE.OUT sram=0 dram=0 y=8 x=8 stride=8")


def _tail() -> tuple[Insn, list[Insn], list[object]]:
    split, after = Insn(ALU, None, ROWS), [Insn(STORE, RES)]
    return split, after, D._last_writers(D._dst_entries(split), after)


def test_pieces_past_the_room_are_not_made() -> None:
    split, after, tops = _tail()
    full: D.Made = {}
    layout = D._layout(split, after, tops, 8, PYNQ, full)  # type: ignore[arg-type]
    assert layout is not None
    pieces = [p for row in layout[1] for p in row]
    assert len(pieces) == 8
    first = pieces[0][4]
    cut: D.Made = {}
    assert D._layout(split, after, tops, 8, PYNQ, cut, first + 1) is None  # type: ignore[arg-type]
    assert len(cut) == 2  # the first two pieces: together they fill the room
    assert D._layout(split, after, tops, 8, PYNQ, {}, layout[3] + 1) is not None  # type: ignore[arg-type]


def test_the_choice_is_that_of_every_layout_in_full(monkeypatch: pytest.MonkeyPatch) -> None:
    before = stream([RES], [ACC], Insn(ALU, None, ROWS), Insn(STORE, RES))
    D._chosen.cache_clear()
    cut = D.drain_tail(before, PYNQ)
    layout = D._layout

    rooms: list[float] = []

    def in_full(last, stores, tops, m, hw, made, room=math.inf):  # type: ignore[no-untyped-def]
        rooms.append(room)
        return layout(last, stores, tops, m, hw, made)

    monkeypatch.setattr(D, "_layout", in_full)
    D._chosen.cache_clear()
    assert_structural_equal(D.drain_tail(before, PYNQ), cut)
    D._chosen.cache_clear()
    assert any(r < math.inf for r in rooms)  # the cut was offered
