"""uop_gen's micro-op tables and index analysis (issue 22, round 12): the offsets of micro-op
loops whose coefficients are in the instruction's field order come out in ``(dst, src, wgt)``
order, an unused field 0, as enumerating in field order and reordering each offset would give
them; a nest's index expressions are analysed once per expression object."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from vta.compiler.accel.passes import uop_gen as U
from vta.compiler.ir import expr as E


def _by_hand(loops: tuple[tuple[int, tuple[int, ...]], ...], order: tuple[int | None, ...]
             ) -> list[tuple[int, ...]]:
    """Enumerate in the instruction's field order (earlier loops outer), then reorder."""
    out = []
    for js in itertools.product(*(range(n) for n, _ in loops)):
        v = [sum(j * c[f] for j, (_, c) in zip(js, loops, strict=True))
             for f in range(len(loops[0][1]))]
        out.append(tuple(0 if k is None else v[k] for k in order))
    return out


@pytest.mark.parametrize("order", [(0, 1, 2), (0, None, 1), (1, 0, None), (0, None, None)])
def test_offsets_in_dst_src_wgt_order(order: tuple[int | None, ...]) -> None:
    width = 1 + max(k for k in order if k is not None)
    loops = ((2, (1, 4, 7)[:width]), (3, (10, 0, 2)[:width]), (2, (0, 5, 1)[:width]))
    got = U._table_offsets.__wrapped__(loops, order)
    assert list(got) == _by_hand(loops, order)
    assert all(type(o) is tuple and len(o) == 3 for o in got)


def test_an_index_object_is_analysed_once(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    real = U.affine

    def counting(e: Any, vars_: Any) -> Any:
        seen.append(e)
        return real(e, vars_)

    monkeypatch.setattr(U, "affine", counting)
    i = E.Var("i")
    dst = i * 4 + 1
    parts = U._affine_parts([dst, dst, U._ZERO, U._ZERO], [i])
    assert seen == [dst, U._ZERO]
    assert parts[0] is parts[1] and parts[0][0] == {i: 4} and parts[2][0] == {}
