"""The values pass's shortcuts of round 14 (issue 22): a GEMM reset whose entries' last
executions all read one inp and one wgt entry computes that one product (``gemm._one_product``,
no shadow brought up to date); an ALU instruction whose src entries form a grid reads them
through a strided view of acc (``kernels.grid_entries``) instead of a gather; a dense layer's
GEMM (every entry its own weights over one input sequence) is one stacked product
(``gemm._per_entry``). Each gives the reference interpreter's outputs, and takes its path."""

from __future__ import annotations

import numpy as np
import pytest
from _sim_helpers import counting_calls, run_both

from tests.sim.test_sim_gemm_paths import gemm_program
from vta import isa
from vta.config import HwConfig
from vta.isa import Deps, Gemm, Load, MemType, ProgramBuilder, Store, Uop
from vta.sim import kernels, random_inputs
from vta.sim.gemm import FastGemm, _im2col, _plan


def _reset_program(hw: HwConfig, uops: list[Uop], iter_in: int, dst_fi: int, n_acc: int):
    """LOAD uops, inp, wgt and acc (the old accumulators), one GEMM reset over ``uops``
    (``iter_in`` times, dst advancing ``dst_fi``), STORE out[0:n_acc]."""
    b = ProgramBuilder(hw)
    b.alloc("A", "inp", 64)
    b.alloc("W", "wgt", 16)
    b.alloc("X", "acc", n_acc)
    b.alloc("C", "out", n_acc)
    b.alloc("U", "uop", 0)
    b.add_uops("U", uops)
    p = b.build()
    b.extend([
        Load(MemType.UOP, 0, p.allocation("U").base, 1, len(uops), len(uops)),
        Load(MemType.INP, 0, 0, 1, 64, 64),
        Load(MemType.WGT, 0, p.allocation("W").base, 1, 16, 16, deps=Deps(push_next=True)),
        Load(MemType.ACC, 0, p.allocation("X").base, 1, n_acc, n_acc),  # (the compute unit's)
        Gemm(True, 0, len(uops), 1, iter_in, 0, dst_fi, 0, 0, 0, 0,
             Deps(pop_prev=True, push_next=True)),
        Store(MemType.OUT, 0, p.allocation("C").base, 1, n_acc, n_acc, Deps(pop_prev=True)),
        isa.Finish(),
    ])
    return b.build()


@pytest.mark.parametrize("uops,iter_in,dst_fi,one", [
    ([Uop(0, 5, 3)], 8, 1, True),                       # each entry once: old acc + product
    ([Uop(0, 5, 3), Uop(0, 5, 3)], 8, 1, True),        # each twice: the 0 an earlier wrote
    ([Uop(0, 5, 3), Uop(1, 5, 3), Uop(0, 5, 3)], 3, 2, True),  # some once, some twice
    ([Uop(0, 5, 3), Uop(1, 6, 3)], 4, 2, False),       # two inp entries: the general path
    ([Uop(0, 5, 3), Uop(1, 5, 4)], 4, 2, False),       # two wgt entries: the general path
])
def test_a_reset_of_one_product_computes_it_once(pynq: HwConfig, monkeypatch, uops: list[Uop],
                                                 iter_in: int, dst_fi: int, one: bool) -> None:
    """A ``sum`` reset (pynq: vta.cc's GEMM) writes out what each entry's last execution
    computed; where all of them read one inp and one wgt entry, that product is computed
    once from the scratchpads (no shadow made: ``_sync`` never runs), with the same outputs
    as the reference interpreter (full-range inputs, old accumulators loaded)."""
    n_acc = max(u.dst for u in uops) + (iter_in - 1) * dst_fi + 1
    program = _reset_program(pynq, uops, iter_in, dst_fi, n_acc)
    calls = counting_calls(monkeypatch, FastGemm, ("_sync",))
    run_both(program, pynq, random_inputs(program, pynq, len(uops) + iter_in))
    assert (calls["_sync"] == 0) is one


def _alu_program(hw: HwConfig, op: isa.AluOp, loop: tuple[int, int, int, int, int, int],
                 src: int, n_acc: int):
    """LOAD acc[0:n_acc], one register ALU ``op`` (``loop``: iter_out, iter_in, dst factors,
    src factors; one micro-op: dst 0, src ``src``), STORE out[0:n_acc]."""
    b = ProgramBuilder(hw)
    x = b.alloc("X", "acc", n_acc)
    y = b.alloc("Y", "out", n_acc)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [Uop(0, src, 0)])
    b.extend([Load(MemType.UOP, 0, u.base, 1, 1, 1), Load(MemType.ACC, 0, x.base, 1, n_acc, n_acc),
              isa.Alu(op, False, 0, 1, *loop, False, 0, deps=Deps(push_next=True)),
              Store(MemType.OUT, 0, y.base, 1, n_acc, n_acc, deps=Deps(pop_prev=True)),
              isa.Finish()])
    return b.build()


@pytest.mark.parametrize("op", [isa.AluOp.ADD, isa.AluOp.MAX, isa.AluOp.MIN])
@pytest.mark.parametrize("loop,src,n_acc,grid", [
    ((1, 8, 0, 1, 0, 0), 9, 10, True),     # one entry added to eight (a bias): step 0
    ((1, 4, 0, 1, 0, 2), 5, 13, True),     # every second entry (a pooling window's step)
    ((1, 4, 0, 1, 0, 2), 0, 8, True),      # src overlaps dst: read as before the instruction
    ((2, 3, 3, 1, 5, 2), 10, 21, True),    # two levels: rows of a tile
    ((1, 6, 0, 1, 0, 1), 2, 8, False),     # src one run itself: a slice, no grid
])
def test_an_alu_reads_a_grid_of_src_entries_through_a_view(pynq: HwConfig, monkeypatch,
                                                           op: isa.AluOp, loop, src: int,
                                                           n_acc: int, grid: bool) -> None:
    """A register ALU instruction whose destinations are one run and whose src entries (in
    the destinations' order) are an affine grid reads them through ``grid_entries``' strided
    view of acc (numpy reads an input overlapping the output as it was before: the gather's
    values); the outputs stay the reference interpreter's."""
    program = _alu_program(pynq, op, loop, src, n_acc)
    seen = []
    real = kernels.grid_entries
    monkeypatch.setattr(kernels, "grid_entries", lambda a, g: seen.append(g) or real(a, g))
    run_both(program, pynq, random_inputs(program, pynq, src + n_acc))
    assert bool(seen) is grid


def test_grid_entries_are_the_gathered_entries() -> None:
    """``grid_entries`` of a grid holds the entries ``a[seq]`` gathers, shaped by the grid,
    and shares ``a``'s memory."""
    a = np.arange(40 * 2 * 3, dtype=np.int32).reshape(40, 2, 3)
    for seq in ([7] * 5, [1, 3, 5, 7], [0, 2, 4, 10, 12, 14], [30, 20, 10], [4]):
        g = kernels.affine_grid(np.array(seq))
        assert g is not None
        view = kernels.grid_entries(a, g)
        assert view.shape == (*g.shape, 2, 3) and np.shares_memory(view, a)
        np.testing.assert_array_equal(view.reshape(len(seq), 2, 3), a[seq])


def _dense(n: int, m: int, shared: bool) -> tuple[list[Uop], int]:
    """A dense layer's micro-ops: ``n`` output entries of ``m`` ops each, entry ``e`` op ``k``
    reading inp ``k`` (or ``k + e`` where not ``shared``) and its own wgt ``e * m + k``."""
    return [Uop(dst=e, src=k if shared else k + e, wgt=e * m + k)
            for e in range(n) for k in range(m)], n


@pytest.mark.parametrize("n,m,shared,stacked", [
    (21, 4, True, True),     # more weight sequences than ``_im2col`` classifies: one each
    (8, 3, True, True),
    (21, 4, False, False),   # entries reading different inp: not one product
    (65, 2, True, False),    # beyond ``_MAX_CLASSES``
])
def test_a_dense_layer_is_one_stacked_product(pynq: HwConfig, monkeypatch, n: int, m: int,
                                              shared: bool, stacked: bool) -> None:
    """Entries that each get their own weight sequence but all read one inp sequence (a
    dense layer) are ``_im2col``'s classes of one entry each, which ``_stack`` makes one
    product (``FastGemm._products``' batched matmul is not asked); the outputs stay the
    reference interpreter's."""
    uops, n_acc = _dense(n, m, shared)
    a = np.array([u.dst for u in uops])
    x = np.array([u.src for u in uops])
    w = np.array([u.wgt for u in uops])
    plan = _plan(a, x, w, 0)
    assert (plan.stack is not None) is stacked
    if stacked:
        got = _im2col(a, x, w)
        assert got is not None
        entries, classes = got
        np.testing.assert_array_equal(entries, np.arange(n))
        assert [c.rows.tolist() for c in classes] == [[e] for e in range(n)]
    program = gemm_program(pynq, uops, 1, 1, (0, 0, 0, 0, 0, 0), n_acc)
    calls = counting_calls(monkeypatch, FastGemm, ("_products",))
    run_both(program, pynq, random_inputs(program, pynq, n + m))
    assert (calls["_products"] == 0) is stacked



@pytest.mark.parametrize("fields", [
    (3, 2, 3, 4, 1, 0, 1, 1),   # padded on three sides, rows apart in DRAM
    (3, 2, 3, 3, 0, 1, 1, 0),   # padded, rows back to back in DRAM, the image's rows apart
    (0, 1, 5, 5, 1, 1, 0, 0),   # one row, padded above and below
    (8, 3, 4, 4, 0, 0, 0, 0),   # no pads, rows back to back: one run on both sides
    (8, 3, 2, 6, 0, 0, 0, 0),   # no pads, rows apart in DRAM
])
def test_loads_differing_in_their_dram_address_share_their_place(monkeypatch,
                                                                 fields) -> None:
    """LOADs with the same fields but their DRAM address (a tiled loop's next tile) find the
    scratchpad's side of their copy once per run (``load_place``, ``Sram.places``) and each
    reads its own DRAM bytes: the same scratchpad as the general path's ``load_image``
    (a scratchpad whose entries are not DRAM's bytes to the copy: ``Sram.raw`` empty)."""
    from vta.isa import Load, ProgramBuilder
    from vta.sim.dram import Dram
    from vta.sim.kernels import Ctx, Sram, exec_load
    from vta.testing import small_hw

    hw = small_hw(batch=1, block=4, depth=128)
    b = ProgramBuilder(hw)
    b.alloc("D", "inp", 96)
    program = b.build()
    dram = Dram(program, hw)
    dram.write_all(random_inputs(program, hw, 5))
    found = []
    real = kernels.load_place
    monkeypatch.setattr(kernels, "load_place", lambda *a: found.append(a[0]) or real(*a))
    sram, plain = Sram(hw), Sram(hw)
    plain.raw.clear()
    sram_base, *rest = fields
    for dram_base in (0, 7, 20, 33):
        insn = Load(MemType.INP, sram_base, dram_base, *rest)
        ctx = Ctx(0, insn, program)
        assert exec_load(sram, dram, insn, ctx) == exec_load(plain, dram, insn, ctx)
        np.testing.assert_array_equal(sram.data["inp"], plain.data["inp"])
    assert [s is sram for s in found] == [True, False]  # once per scratchpad
