"""LOAD's byte path (``kernels._load_fast``: a padded image zeroed whole, the data copied as
one run of bytes where its rows lie back to back) against the general path over every DRAM
stride, overlapping rows (a stride below the row) and DRAM ends included: the same entries,
the same returned range, and for a LOAD reaching past the DRAM image the same error text
with the scratchpads untouched (nothing written before the check)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.errors import AddressError
from vta.isa import Load, MemType, ProgramBuilder
from vta.sim.dram import Dram, random_inputs
from vta.sim.kernels import Ctx, Sram, exec_load
from vta.testing import small_hw


def _outcome(sram: Sram, dram: Dram, insn: Load, ctx: Ctx) -> object:
    try:
        return exec_load(sram, dram, insn, ctx)
    except AddressError as e:
        return str(e)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([MemType.INP, MemType.WGT, MemType.ACC]), st.integers(1, 2),
       st.integers(1, 5), st.integers(1, 5), st.integers(0, 7), st.integers(0, 70),
       st.tuples(*[st.integers(0, 2)] * 4), st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_byte_load_matches_the_general_path_at_every_stride_and_end(
        mem: MemType, batch: int, rows: int, cols: int, stride: int, dram_base: int,
        pads: tuple[int, int, int, int], sram_base: int, seed: int) -> None:
    hw = small_hw(batch=batch, block=4, depth=128)
    b = ProgramBuilder(hw)
    b.alloc("D", mem.kind, 64)
    program = b.build()
    dram = Dram(program, hw)
    dram.write_all(random_inputs(program, hw, seed))
    insn = Load(mem, sram_base, dram_base, rows, cols, stride, *pads)
    fast, general = Sram(hw), Sram(hw)
    assert mem.kind in fast.raw  # a little-endian host: the byte path is taken
    general.raw = {}
    for s in (fast, general):  # the same garbage, so that every pad written shows
        r = np.random.default_rng(seed)
        for a in s.data.values():
            a[...] = r.integers(-100, 100, size=a.shape)
    before = {k: a.copy() for k, a in fast.data.items()}
    ctx = Ctx(3, insn, program)
    got, want = _outcome(fast, dram, insn, ctx), _outcome(general, dram, insn, ctx)
    assert got == want
    for kind, a in general.data.items():
        np.testing.assert_array_equal(fast.data[kind], a, err_msg=kind)
    if isinstance(got, str):  # refused: nothing written
        for kind, a in before.items():
            np.testing.assert_array_equal(fast.data[kind], a, err_msg=kind)
