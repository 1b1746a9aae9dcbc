"""The GEMM kernel's per-run shortcuts (round 11 of issue 22): the im2col classes split by one
stable sort, the stacked check by one comparison, a reissued reset's plan looked up by the
instruction object, and a stacked product that asks no ``_sync`` while no LOAD came since its
last run. Each gives what the plain way gives (the classes by their definition, the
reference interpreter's accumulators)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from _sim_helpers import counting_calls
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sim.test_sim_gemm_paths import gemm_program
from vta.config import HwConfig
from vta.isa import Deps, Uop
from vta.sim import random_inputs, run_reference, simulate
from vta.sim.gemm import FastGemm, _im2col, _stack, unique_rows
from vta.sim.kernels import run_heads


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5), st.integers(1, 6), st.integers(1, 4), st.integers(0, 2**16 - 1),
       st.booleans())
def test_im2col_classes_are_their_definition(classes: int, taps: int, per: int, seed: int,
                                             shared: bool) -> None:
    """Each class holds, in ascending order, the positions of the entries whose weight
    sequence is its row of ``unique_rows`` (``(inverse == c).nonzero()``), and those entries'
    inp sequences gathered in that order; ``_stack`` accepts them when every class reads the
    same inp sequence (``shared``) and refuses them otherwise."""
    rng = np.random.default_rng(seed)
    entries = classes * per * 4  # at least four entries a class (``_im2col``'s limit)
    weights = rng.permutation(64)[:classes * taps].reshape(classes, taps)
    cls = rng.permutation(np.repeat(np.arange(classes), per * 4))  # each entry's class
    a = np.repeat(rng.permutation(200)[:entries], taps)
    w = weights[cls].reshape(-1)
    pixels = rng.integers(0, 50, (per * 4, taps))
    if shared:  # the k-th entry of each class reads the k-th pixel's taps
        rank = np.empty(entries, dtype=np.intp)
        for c in range(classes):
            mine = (cls == c).nonzero()[0]
            order = np.argsort(a[::taps][mine], kind="stable")
            rank[mine[order]] = np.arange(mine.size)
        x = pixels[rank].reshape(-1)
    else:
        x = rng.integers(0, 50, a.size)
    got = _im2col(a, x, w)
    assert got is not None
    sorted_entries, cols = got
    by_acc = a.argsort(kind="stable")
    starts = run_heads(a[by_acc]).nonzero()[0]
    np.testing.assert_array_equal(sorted_entries, a[by_acc][starts])
    seq = w[by_acc].reshape(starts.size, taps)
    found = unique_rows(seq, 64)
    assert found is not None
    uniq, inverse = found
    xs = x[by_acc].reshape(starts.size, taps)
    assert len(cols) == uniq.shape[0]
    for c, col in enumerate(cols):
        rows = (inverse == c).nonzero()[0]
        np.testing.assert_array_equal(col.rows, rows)
        assert col.rows.dtype == rows.dtype
        np.testing.assert_array_equal(col.x, xs[rows].reshape(-1))
        np.testing.assert_array_equal(col.w, uniq[c])
    stack = _stack(cols)
    same = all(np.array_equal(c.x, cols[0].x) for c in cols[1:])
    assert (stack is not None) == same
    if stack is not None:
        np.testing.assert_array_equal(stack.w, uniq)
        np.testing.assert_array_equal(stack.x, cols[0].x)


def test_a_reissued_reset_reads_its_plan_once(pynq: HwConfig, monkeypatch) -> None:
    """A reset issued again as the same object finds its plan by identity, not by reading and
    hashing its fields (``FastGemm._fields_reset_plan`` once per object and micro-op
    version); an equal object looks its fields up once more. The accumulators stay the
    reference interpreter's."""
    calls = counting_calls(monkeypatch, FastGemm, ("_fields_reset_plan",))
    uops = [Uop(dst=c * 64, src=t, wgt=c * 3 + t) for c in range(2) for t in range(3)]
    base = gemm_program(pynq, uops, 2, 4, (8, 1, 8, 1, 0, 0), 4 * 64)
    insns = list(base.instructions)
    r = insns[3]
    assert r.reset
    quiet = replace(r, deps=Deps())
    insns[3:4] = [quiet, quiet, quiet, replace(quiet), r]  # the same object thrice
    program = replace(base, instructions=tuple(insns))
    inputs = random_inputs(program, pynq, 0)
    got = simulate(program, pynq, inputs).outputs["C"]
    np.testing.assert_array_equal(got, run_reference(program, pynq, inputs)["C"])
    assert calls == {"_fields_reset_plan": 3}


def test_a_stacked_product_syncs_only_after_a_load(pynq: HwConfig, monkeypatch) -> None:
    """A stacked product issued again with no LOAD since its last run reads its views as they
    are (no ``_sync``: both shadows' lists of LOADs not yet mirrored are empty). The
    accumulators stay the reference interpreter's."""
    calls = counting_calls(monkeypatch, FastGemm, ("_sync",))
    uops = [Uop(dst=c * 64, src=t, wgt=c * 3 + t) for c in range(2) for t in range(3)]
    base = gemm_program(pynq, uops, 2, 4, (8, 1, 8, 1, 0, 0), 4 * 64)
    insns = list(base.instructions)
    g = insns[4]
    quiet = replace(g, deps=Deps())
    insns[4:5] = [quiet, quiet, quiet, g]
    program = replace(base, instructions=tuple(insns))
    inputs = random_inputs(program, pynq, 0)
    got = simulate(program, pynq, inputs).outputs["C"]
    np.testing.assert_array_equal(got, run_reference(program, pynq, inputs)["C"])
    # the layout's two shadow reads on the first run (the reset's one product reads the
    # scratchpads: ``gemm._one_product``); none in the four runs (two each without the
    # check: 10 in all)
    assert calls == {"_sync": 2}
