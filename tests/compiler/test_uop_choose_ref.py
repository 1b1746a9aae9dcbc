"""``uop_gen._choose`` against its former code (kept below as the reference): the folded
loops' extents divided out once each, the hazard test as one expression, the cost model
unpacked once per nest. The same options in the same order with the same scores."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from vta.compiler.accel.passes import uop_gen as U
from vta.compiler.ir import expr as E

_V = E.Var("v")


def _ref_choose(merged: list[U.Loop], field_bits: tuple[int, ...], hazard_lag: int,
                max_uops: int, reduce_ok: bool, max_iter: int,
                cost: U.Cost | None) -> list[U.Option]:
    cands = list(range(len(merged)))
    limits = tuple(1 << b for b in field_bits)

    def fits(k: int) -> bool:
        n, c = merged[k][1], merged[k][2]
        return n <= max_iter and all(0 <= c[f] < limits[f] for f in range(len(c)))

    ok_k = [k for k in cands if fits(k)]
    scored: list[U.Option] = []
    options: list[tuple[int | None, int | None]] = [(None, None)]
    options += [(None, k) for k in ok_k]
    options += list(itertools.permutations(ok_k, 2))
    ext = [lp[1] for lp in merged]
    red = [lp[2][0] == 0 for lp in merged]
    all_n = math.prod(ext)
    all_spatial = math.prod(n for n, r in zip(ext, red, strict=True) if not r)
    all_red = sum(red)
    peeled: dict[frozenset[int | None], tuple[int, int]] = {}
    for fo, fi in options:
        n_rem, spatial, reds = all_n, all_spatial, all_red
        for k in (fo, fi):
            if k is not None:
                n_rem //= ext[k]
                if red[k]:
                    reds -= 1
                else:
                    spatial //= ext[k]
        ok = True
        if reduce_ok:
            if reds > 0 and spatial < hazard_lag:
                ok = False
            if fi is not None and red[fi] and n_rem < hazard_lag:
                ok = False
            if (fo is not None and red[fo]
                    and n_rem * (ext[fi] if fi is not None else 1) < hazard_lag):
                ok = False
        cycles = 0.0
        if cost is not None:
            insn_cycles, load_cycles, times = cost
            if n_rem <= max_uops:
                n_uops, copies = n_rem, 1
            else:
                key = frozenset((fo, fi))
                hit = peeled.get(key)
                if hit is None:
                    kept, outer = U._peel([k for k in cands if k != fo and k != fi], ext, red,
                                          max_uops)
                    hit = peeled[key] = (math.prod(ext[k] for k in kept),
                                         math.prod(ext[k] for k in outer))
                n_uops, copies = hit
            n_o = ext[fo] if fo is not None else 1
            n_i = ext[fi] if fi is not None else 1
            cycles = times * copies * insn_cycles(n_o, n_i, n_uops) \
                + load_cycles(n_uops * copies)
        scored.append(((ok, -cycles, -n_rem, fo is not None and fi is not None), fo, fi,
                       merged))
    return scored


_loops = st.lists(st.tuples(st.sampled_from([2, 3, 4, 7, 8, 14, 16, 56, 64, 3000]),
                            st.tuples(st.sampled_from([0, 1, 2, 16, 64, 5000]),
                                      st.integers(0, 40), st.integers(0, 40))),
                  min_size=0, max_size=5)


def _cost(fill: int, times: int) -> U.Cost:
    return ((lambda o, i, n: float(fill + o * i * n + n * fill)),
            (lambda n: float(2 * n + fill)), times)


@settings(max_examples=400, deadline=None)
@given(_loops, st.sampled_from([(4, 11, 11), (14, 14, 14), (0, 3, 3)]), st.integers(1, 12),
       st.sampled_from([1, 8, 64, 4096]), st.booleans(), st.sampled_from([255, 16383]),
       st.one_of(st.none(), st.tuples(st.integers(0, 40), st.integers(1, 9))))
def test_choose_is_its_reference(loops: list[tuple[int, tuple[int, int, int]]],
                                 bits: tuple[int, ...], lag: int, max_uops: int,
                                 reduce_ok: bool, max_iter: int,
                                 model: tuple[int, int] | None) -> None:
    merged: list[U.Loop] = [(_V, n, c) for n, c in loops]
    cost = None if model is None else _cost(*model)
    got = U._choose(merged, bits, lag, max_uops, reduce_ok, max_iter, cost)
    want = _ref_choose(merged, bits, lag, max_uops, reduce_ok, max_iter, cost)
    assert got == want
    assert [type(o[0][0]) for o in got] == [bool] * len(got)
    assert all(o[3] is merged for o in got)
