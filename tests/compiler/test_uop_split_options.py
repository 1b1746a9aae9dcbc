"""``uop_gen._choose`` on a nest with one loop split in two (``pieces``) leaves out the
foldings that fold neither piece and peel nothing: each scores exactly as the same folding of
the unsplit loops, scored earlier, so ``_choice`` chooses as when it scored them all (ties
kept in order: ``_best`` takes the first of the best)."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from test_uop_choose_ref import _cost  # a cost model with many ties among foldings

from vta.compiler.accel.passes import uop_gen as U
from vta.compiler.ir import expr as E

_V = E.Var("v")


def _ref_choice(merged: list[U.Loop], bits: tuple[int, ...], lag: int, max_uops: int,
                reduce_ok: bool, max_iter: int, cost: U.Cost) -> U.Choice:
    """``_choice`` scoring every folding of every split (the code before ``pieces``)."""
    every = U._choose(merged, bits, lag, max_uops, reduce_ok, max_iter, cost)
    splits: dict[int, tuple[int, int]] = {}
    for k, (_v, n, c) in enumerate(merged):
        if c[0] == 0:
            continue
        for b in U._divisors(n):
            split = U._split(merged, k, b)
            splits[id(split)] = (k, b)
            every += U._choose(split, bits, lag, max_uops, reduce_ok, max_iter, cost)
    _, fo, fi, chosen = U._best(every)
    return splits.get(id(chosen)), fo, fi


_loops = st.lists(st.tuples(st.sampled_from([2, 3, 4, 6, 8, 12, 14, 16, 56, 64]),
                            st.tuples(st.sampled_from([0, 1, 2, 16, 64, 5000]),
                                      st.integers(0, 40), st.integers(0, 40))),
                  min_size=0, max_size=4)


def _rem(loops: list[U.Loop], fo: int | None, fi: int | None) -> int:
    """The micro-ops of the loops a folding leaves (before any peeling)."""
    return math.prod(lp[1] for j, lp in enumerate(loops) if j not in (fo, fi))


def _back(j: int | None, k: int) -> int | None:
    """Loop ``j`` of a nest with loop ``k`` split, among the unsplit loops (not a piece)."""
    return j if j is None or j < k else j - 1


_args = (_loops, st.sampled_from([(4, 11, 11), (14, 14, 14), (0, 3, 3)]), st.integers(1, 12),
         st.sampled_from([1, 8, 64, 4096]), st.booleans(), st.sampled_from([255, 16383]),
         st.tuples(st.integers(0, 40), st.integers(1, 9)))


@settings(max_examples=300, deadline=None)
@given(*_args)
def test_choice_as_scoring_all(loops: list[tuple[int, tuple[int, int, int]]],
                               bits: tuple[int, ...], lag: int, max_uops: int,
                               reduce_ok: bool, max_iter: int, model: tuple[int, int]) -> None:
    merged: list[U.Loop] = [(_V, n, c) for n, c in loops]
    args = (bits, lag, max_uops, reduce_ok, max_iter, _cost(*model))
    assert U._choice(merged, *args) == _ref_choice(merged, *args)


@settings(max_examples=300, deadline=None)
@given(*_args)
def test_left_out_scored_before(loops: list[tuple[int, tuple[int, int, int]]],
                                bits: tuple[int, ...], lag: int, max_uops: int,
                                reduce_ok: bool, max_iter: int, model: tuple[int, int]) -> None:
    """The options a split leaves out are those folding neither piece and peeling nothing,
    each scored as the unsplit loops' same folding; the rest in their order."""
    merged: list[U.Loop] = [(_V, n, c) for n, c in loops]
    args = (bits, lag, max_uops, reduce_ok, max_iter, _cost(*model))
    unsplit = {(fo, fi): s for s, fo, fi, _m in U._choose(merged, *args)}
    for k, (_v, n, c) in enumerate(merged):
        if c[0] == 0:
            continue
        for b in U._divisors(n):
            split = U._split(merged, k, b)
            every = U._choose(split, *args)
            kept = U._choose(split, *args, k)
            assert [o for o in every if o in kept] == kept
            for s, fo, fi, _m in every:
                left_out = (s, fo, fi, split) not in kept
                assert left_out == (fo not in (k, k + 1) and fi not in (k, k + 1)
                                    and _rem(split, fo, fi) <= max_uops)
                if left_out:  # the same folding unsplit: indices past the split move back
                    assert unsplit[_back(fo, k), _back(fi, k)] == s


def test_split_leaves_out() -> None:
    """Three fitting spatial loops, the first split: of its foldings only those folding a
    piece remain (fails without ``pieces``: all 17 remain)."""
    merged: list[U.Loop] = [(_V, 4, (64, 4, 0)), (_V, 4, (16, 1, 0)), (_V, 16, (1, 0, 1))]
    args = ((14, 14, 14), 1, 4096, False, 16383, _cost(3, 2))
    split = U._split(merged, 0, 2)
    assert len(U._choose(split, *args)) == 1 + 4 + 12
    kept = U._choose(split, *args, 0)
    assert [(fo, fi) for _s, fo, fi, _m in kept] == [
        (None, 0), (None, 1), (0, 1), (0, 2), (0, 3), (1, 0), (1, 2), (1, 3),
        (2, 0), (2, 1), (3, 0), (3, 1)]
