"""The fast GEMM kernel's three paths (im2col classes, per-weight groups, one batched matmul)
each give the reference interpreter's exact accumulators, whatever the micro-op pattern."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from _sim_helpers import counting_calls
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.config import HwConfig
from vta.isa import Deps, Finish, Gemm, Load, MemType, ProgramBuilder, Store, Uop
from vta.isa.builtins import GEMM
from vta.sim import random_inputs, run_reference, simulate
from vta.sim.gemm import FastGemm, _Grid, _im2col, _peel_rows, _plan, affine_grid, unique_rows
from vta.testing import small_hw


def gemm_program(hw: HwConfig, uops: list[Uop], iter_out: int, iter_in: int,
                 factors: tuple[int, int, int, int, int, int], n_acc: int):
    """LOAD uops/inp/wgt, reset acc[0:n_acc], one accumulating GEMM, STORE acc[0:n_acc]."""
    b = ProgramBuilder(hw)
    n_inp, n_wgt = hw.inp_depth, hw.wgt_depth
    b.alloc("A", "inp", n_inp)
    b.alloc("W", "wgt", n_wgt)
    b.alloc("C", "out", n_acc)
    b.alloc("U", "uop", 0)
    b.add_uops("U", [*uops, Uop(0, 0, 0)])
    u = len(uops)
    # tokens: load -> compute once both are there (the reset reads inp and wgt too: vta.cc
    # writes the low bits of acc + inp . wgt to out), compute -> store (acc is final)
    b.extend([
        Load(MemType.UOP, 0, b.build().allocation("U").base, 1, u + 1, u + 1),
        Load(MemType.INP, 0, 0, 1, n_inp, n_inp),
        Load(MemType.WGT, 0, b.build().allocation("W").base, 1, n_wgt, n_wgt,
             deps=Deps(push_next=True)),
        Gemm(True, u, u + 1, 1, n_acc, 0, 1, 0, 0, 0, 0, Deps(pop_prev=True)),  # reset acc
        Gemm(False, 0, u, iter_out, iter_in, *factors, Deps(push_next=True)),
        Store(MemType.OUT, 0, b.build().allocation("C").base, 1, n_acc, n_acc,
              Deps(pop_prev=True)),
        Finish(),
    ])
    return b.build()


@st.composite
def gemm_case(draw: st.DrawFn, hw: HwConfig):
    kind = draw(st.sampled_from(["conv", "random"]))
    if kind == "conv":
        # a conv-like pattern: `classes` output-channel blocks x `taps` kernel taps per entry
        classes = draw(st.integers(1, 4))
        taps = draw(st.integers(1, 9))
        uops = [Uop(dst=c * 64, src=t, wgt=c * taps + t) for c in range(classes)
                for t in range(taps)]
        # reduction innermost in uops, spatial in iter: dst advances with iter, weights don't
        factors = (8, 1, 8, 1, 0, 0)
        return uops, draw(st.integers(1, 4)), draw(st.integers(1, 8)), factors, 4 * 64
    n = draw(st.integers(1, 12))
    uops = [Uop(draw(st.integers(0, 31)), draw(st.integers(0, 63)), draw(st.integers(0, 15)))
            for _ in range(n)]
    factors = tuple(draw(st.integers(0, 3)) for _ in range(6))
    return uops, draw(st.integers(1, 3)), draw(st.integers(1, 3)), factors, 64


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_every_gemm_path_matches_reference(pynq: HwConfig, data: st.DataObject) -> None:
    uops, io, ii, factors, n_acc = data.draw(gemm_case(pynq))
    program = gemm_program(pynq, uops, io, ii, factors, n_acc)
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    inputs = {"A": rng.integers(-128, 128, (pynq.inp_depth, 1, 16), dtype=np.int8),
              "W": rng.integers(-128, 128, (pynq.wgt_depth, 16, 16), dtype=np.int8)}
    ref = run_reference(program, pynq, inputs)["C"]
    got = simulate(program, pynq, inputs).outputs["C"]
    np.testing.assert_array_equal(got, ref)


def test_conv_pattern_takes_the_im2col_path() -> None:
    # 4 output-channel blocks x 9 taps, 32 spatial positions: 4 classes of 32 entries
    a = np.repeat(np.arange(4)[:, None] * 64 + np.arange(32)[None, :], 9).ravel()
    w = np.tile(np.arange(9), 4 * 32) + np.repeat(np.arange(4) * 9, 32 * 9)
    x = np.arange(a.size)
    col = _im2col(a, x, w)
    assert col is not None
    entries, classes = col
    assert len(classes) == 4 and entries.size == 128
    assert all(c.w.size == 9 for c in classes)
    plan = _plan(a, x, w, 0)
    assert plan.cols is not None
    # the classes read different inp entries here (x is all distinct): no stacked product
    assert plan.stack is None
    # a conv reading the same pixels for each output-channel block: one stacked product
    shared = np.tile(np.arange(32 * 9), 4)
    stacked = _plan(a, shared, w, 0).stack
    assert stacked is not None and stacked.w.shape == (4, 9) and stacked.rows is None
    # a pattern where entries receive different op counts cannot use it
    assert _im2col(np.array([0, 0, 1]), np.arange(3), np.array([0, 1, 0])) is None


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 9), st.sampled_from([1, 2, 4]), st.integers(1, 4),
       st.integers(0, 2**32 - 1))
def test_stacked_im2col_matches_reference_with_batch(classes: int, taps: int, batch: int,
                                                    iter_out: int, seed: int) -> None:
    """Output-channel blocks reading the same pixels (one gather, ``_ColStack``) on a config
    with ``batch`` rows per entry (the im2col matrix interleaves them)."""
    hw = small_hw(batch=batch, block=4, depth=128)
    uops = [Uop(dst=c * 16, src=t, wgt=c * taps + t) for c in range(classes)
            for t in range(taps)]
    program = gemm_program(hw, uops, iter_out, 2, (4, 1, 4, 1, 0, 0), classes * 16)
    inputs = random_inputs(program, hw, seed)
    ref = run_reference(program, hw, inputs)["C"]
    np.testing.assert_array_equal(simulate(program, hw, inputs).outputs["C"], ref)


@pytest.mark.parametrize("classify", [unique_rows, _peel_rows], ids=lambda f: f.__name__)
@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(1, 6), st.integers(1, 4), st.integers(0, 70),
       st.integers(0, 2**32 - 1))
def test_unique_rows_is_numpys_unique(classify: Any, n: int, m: int, spread: int, limit: int,
                                      seed: int) -> None:
    """``unique_rows`` (the im2col classification's fast path, by keys) and its fallback
    ``_peel_rows`` each give ``np.unique(axis=0, return_inverse=True)``'s rows and inverse
    exactly, or None when more than ``limit`` rows are distinct."""
    rng = np.random.default_rng(seed)
    seq = rng.integers(-spread, spread + 1, size=(n, m))
    uniq, inverse = np.unique(seq, axis=0, return_inverse=True)
    got = classify(seq, limit)
    if uniq.shape[0] > limit:
        assert got is None
        return
    assert got is not None
    np.testing.assert_array_equal(got[0], uniq)
    np.testing.assert_array_equal(got[1], inverse.reshape(-1))


def _expand(grid: _Grid) -> np.ndarray:
    """Every index of ``grid`` in C order (the sequence it stands for)."""
    out = np.full(1, grid.first, dtype=np.int64)
    for n, step in zip(grid.shape, grid.steps, strict=True):
        out = (out[:, None] + step * np.arange(n)[None, :]).ravel()
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5), st.integers(-70, 70)), min_size=0, max_size=4),
       st.integers(0, 500), st.integers(-1, 30), st.integers(0, 2**32 - 1))
def test_affine_grid_reproduces_its_sequence(dims: list[tuple[int, int]], first: int,
                                             poke: int, seed: int) -> None:
    """``affine_grid`` finds a grid for every sequence that is one (nested runs of constant
    step: a conv's pixels and taps) and never returns a grid that differs from its sequence
    in any entry (one entry changed at ``poke``, when in range, usually breaks the grid)."""
    seq = _expand(_Grid(first, tuple(n for n, _ in dims), tuple(s for _, s in dims)))
    got = affine_grid(seq)
    assert got is not None
    np.testing.assert_array_equal(_expand(got), seq)
    if 0 <= poke < seq.size:
        seq = seq.copy()
        seq[poke] += int(np.random.default_rng(seed).integers(1, 9))
        got = affine_grid(seq)
        if got is not None:
            np.testing.assert_array_equal(_expand(got), seq)


def test_conv_pattern_gathers_by_strided_views() -> None:
    """A conv's stacked im2col (output pixels in rows of a padded image, 3x3 taps, 2
    output-channel blocks) has grid indices, and the views ``FastGemm`` copies hold exactly
    the elements the row-by-row gathers read, in the same order."""
    pix = (np.arange(4)[:, None] * 58 + np.arange(56)[None, :]).ravel() + 348
    taps = (np.arange(3)[:, None] * 58 + np.arange(3)[None, :]).ravel()
    x = (pix[:, None] + taps[None, :]).ravel()
    w = np.arange(2)[:, None] * 9 + np.arange(9)[None, :] + 5
    a = np.repeat(np.arange(2 * pix.size), 9)
    stack = _plan(a, np.tile(x, 2), w.repeat(pix.size, axis=0).ravel(), 0).stack
    assert stack is not None and stack.x_grid is not None and stack.w_grid is not None
    rng = np.random.default_rng(0)
    for batch in (1, 2):
        inp = rng.integers(-128, 128, (1024, batch, 16)).astype(np.float32)
        wgt_t = rng.integers(-128, 128, (64, 16, 16)).astype(np.float32)
        xv, wv = FastGemm._grid_views(stack, inp, wgt_t)
        assert xv is not None and wv is not None
        m, e = 9, pix.size
        cols = np.take(inp, stack.x, axis=0).reshape(e, m, batch, 16).transpose(0, 2, 1, 3)
        np.testing.assert_array_equal(xv.reshape(e * batch, m * 16),
                                      cols.reshape(e * batch, m * 16))
        wm = np.take(wgt_t, stack.w, axis=0).transpose(1, 2, 0, 3).reshape(m * 16, 2 * 16)
        np.testing.assert_array_equal(wv.reshape(m * 16, 2 * 16), wm)


def test_wgt_shadow_mirrors_the_sram_and_is_read_transposed() -> None:
    """The wgt shadows are laid out as the SRAM (a LOAD's entries convert in one contiguous
    pass, ``FastGemm._sync``); the products read ``wgt_t``/``wgt_t32``, views of them as
    ``(entries, block_in, block_out)``, which follow later LOADs in place."""
    from vta.sim.kernels import Sram

    hw = small_hw()
    sram = Sram(hw)
    rng = np.random.default_rng(0)
    wgt = sram.data["wgt"]
    wgt[...] = rng.integers(-128, 128, wgt.shape)
    g = FastGemm(sram, True, GEMM)
    for view, dtype in ((g.wgt_t32, np.float32), (g.wgt_t, np.float64)):
        assert view.dtype == dtype and view.base is not None
        np.testing.assert_array_equal(view, np.swapaxes(wgt, 1, 2))
    wgt[1:3] = rng.integers(-128, 128, wgt[1:3].shape)  # a LOAD of entries 1..2
    g.refresh(sram, "wgt", 1, 3)
    shadow = g._sync("wgt", False)
    assert shadow.shape == wgt.shape and shadow.flags.c_contiguous
    np.testing.assert_array_equal(shadow, wgt)
    np.testing.assert_array_equal(g.wgt_t, np.swapaxes(wgt, 1, 2))


def test_to_acc_makes_a_transposed_view_contiguous() -> None:
    """``_to_acc`` of a transposed view (the stacked product's class-major rows) is one
    C-contiguous copy with the same integers, so the caller's reshape copies nothing more."""
    from vta.sim.gemm import _to_acc

    sums = np.arange(2 * 6 * 4, dtype=np.float32).reshape(6, 2, 4).transpose(1, 0, 2)
    for single in (True, False):
        got = _to_acc(sums, single, np.dtype(np.int32))
        assert got.flags.c_contiguous and got.dtype == np.int32
        np.testing.assert_array_equal(got, sums.astype(np.int64))
        assert np.shares_memory(got.reshape(12, 1, 4), got)


def test_a_reissued_gemm_reads_its_plan_and_layout_once(pynq: HwConfig, monkeypatch) -> None:
    """A tiled program issues one GEMM object many times: its plan is looked up by its fields
    once per micro-op version (``FastGemm._fields_plan``; an equal object, or one differing
    only in its flags, once more each) and the stacked product's layout is found once
    (``FastGemm._stack_layout``), with the reference interpreter's accumulators."""
    from dataclasses import replace

    calls = counting_calls(monkeypatch, FastGemm, ("_fields_plan", "_stack_layout"))
    uops = [Uop(dst=c * 64, src=t, wgt=c * 3 + t) for c in range(2) for t in range(3)]
    base = gemm_program(pynq, uops, 2, 4, (8, 1, 8, 1, 0, 0), 4 * 64)
    insns = list(base.instructions)
    g = insns[4]
    quiet = replace(g, deps=Deps())
    insns[4:5] = [quiet, quiet, quiet, replace(quiet), g]  # the same object thrice
    program = replace(base, instructions=tuple(insns))
    inputs = random_inputs(program, pynq, 0)
    got = simulate(program, pynq, inputs).outputs["C"]
    np.testing.assert_array_equal(got, run_reference(program, pynq, inputs)["C"])
    assert calls == {"_fields_plan": 3, "_stack_layout": 1}
