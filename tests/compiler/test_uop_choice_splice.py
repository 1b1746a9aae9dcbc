"""``uop_gen._choice`` scores a split's foldings on facts spliced from the nest's (extents,
reductions, which loops fit) instead of building the split's loops (``_split``, a new
variable each) and scoring them from scratch (``_choose``); the foldings to score come from
one memo per pattern (``_pairs``). The same choice as scoring every split with ``_choose``
(ties kept in order: ``_best`` takes the first of the best)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_uop_choose_ref import _cost
from test_uop_split_options import _ref_choice

from vta.compiler.accel.passes import uop_gen as U
from vta.compiler.ir import expr as E

_V = E.Var("v")

_loops = st.lists(st.tuples(st.sampled_from([2, 3, 4, 6, 8, 12, 14, 16, 56, 64, 3000]),
                            st.tuples(st.sampled_from([0, 1, 2, 16, 64, 5000]),
                                      st.integers(0, 40), st.integers(0, 40))),
                  min_size=0, max_size=4)


@settings(max_examples=300, deadline=None)
@given(_loops, st.sampled_from([(4, 11, 11), (14, 14, 14), (0, 3, 3), (2, 5, 1)]),
       st.integers(1, 12), st.sampled_from([1, 8, 64, 4096]), st.booleans(),
       st.sampled_from([7, 255, 16383]), st.tuples(st.integers(0, 40), st.integers(1, 9)))
def test_spliced_as_built(loops: list[tuple[int, tuple[int, int, int]]], bits: tuple[int, ...],
                          lag: int, max_uops: int, reduce_ok: bool, max_iter: int,
                          model: tuple[int, int]) -> None:
    merged: list[U.Loop] = [(_V, n, c) for n, c in loops]
    args = (bits, lag, max_uops, reduce_ok, max_iter, _cost(*model))
    want = _ref_choice(merged, *args)
    with pytest.MonkeyPatch.context() as mp:  # fails where a split's loops are built
        mp.setattr(U, "_split", None)
        mp.setattr(U, "_choose", None)
        assert U._choice(merged, *args) == want


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 5), unique=True, max_size=5).map(sorted),
       st.one_of(st.none(), st.integers(0, 4).map(lambda p: (p, p + 1))))
def test_pairs(ok_k: list[int], touch: tuple[int, int] | None) -> None:
    """None, iter_in alone, the ordered pairs; with a split's pieces, those folding one."""
    every = [(None, None), *[(None, k) for k in ok_k], *itertools.permutations(ok_k, 2)]
    want = every if touch is None else [
        (i, j) for i in (None, *ok_k) for j in ok_k if i != j and (i in touch or j in touch)]
    assert list(U._pairs(tuple(ok_k), touch)) == want


@settings(max_examples=300, deadline=None)
@given(st.tuples(st.integers(0, 70), st.integers(0, 70), st.integers(0, 70)),
       st.sampled_from([(4, 11, 11), (14, 14, 14), (0, 3, 3), (6, 1, 7)]),
       st.integers(2, 5000))
def test_factor_max(c: tuple[int, int, int], bits: tuple[int, ...], b: int) -> None:
    """The outer piece's coefficients (``b`` times a fitting loop's) fit up to ``b_max``."""
    limits = tuple(1 << x for x in bits)
    if U._coef_fit(c, limits):
        assert (b <= U._factor_max(c, limits)) == U._coef_fit(tuple(x * b for x in c), limits)



def test_repeated_foldings_scored_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """One spatial loop of 64: a split's foldings of its outer piece at ``b`` are those of its
    inner piece at ``64 / b``; each (``iter_out``, ``iter_in``) reaches ``_best`` once, the
    first (fails without ``seen``: 22 options, 10 of them repeats)."""
    merged: list[U.Loop] = [(_V, 64, (1, 1, 0))]
    args = ((14, 14, 14), 1, 4096, False, 16383, _cost(3, 2))
    real = U._best
    got: list[list[U.Option]] = []

    def best(options: list[U.Option]) -> U.Option:
        got.append(options)
        return real(options)

    monkeypatch.setattr(U, "_best", best)
    choice = U._choice(merged, *args)
    monkeypatch.setattr(U, "_best", real)
    (options,) = got

    def extent(tag: tuple[int, int] | None, k: int | None) -> int:
        if k is None:
            return 1
        return 64 if tag is None else (64 // tag[1], tag[1])[k]

    folded = [(extent(tag, fo), extent(tag, fi)) for _s, fo, fi, tag in options]
    every = len(U._choose(merged, *args)) + sum(
        len(U._choose(U._split(merged, 0, b), *args, 0)) for b in U._divisors(64))
    assert len(set(folded)) == len(folded) == 12 and every == 22
    assert choice == _ref_choice(merged, *args)
