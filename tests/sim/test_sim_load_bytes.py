"""A LOAD's fast path copies DRAM's bytes into the scratchpad unconverted (``kernels._load_fast``
through ``Sram.raw``): the same entries, pads and returned range as the general path
(``exec_load`` without ``Sram.raw``, which builds the image from typed entries), whatever
the memory type, pads, stride, batch and entry width."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.isa import Load, MemType, ProgramBuilder
from vta.sim.dram import Dram, random_inputs
from vta.sim.kernels import Ctx, Sram, exec_load
from vta.testing import small_hw

_DATA = [MemType.INP, MemType.WGT, MemType.ACC]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(_DATA), st.integers(1, 2), st.integers(0, 4), st.integers(0, 5),
       st.integers(0, 5), st.integers(0, 3), st.tuples(*[st.integers(0, 2)] * 4),
       st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_byte_load_writes_what_the_general_path_writes(
        mem: MemType, batch: int, rows: int, cols: int, extra: int, dram_base: int,
        pads: tuple[int, int, int, int], sram_base: int, seed: int) -> None:
    hw = small_hw(batch=batch, block=4, depth=128)
    b = ProgramBuilder(hw)
    b.alloc("D", mem.kind, 64)
    program = b.build()
    dram = Dram(program, hw)
    dram.write_all(random_inputs(program, hw, seed))
    insn = Load(mem, sram_base, dram_base, rows, cols, cols + extra, *pads)
    fast, general = Sram(hw), Sram(hw)
    assert mem.kind in fast.raw  # a little-endian host: the byte path is taken
    general.raw = {}
    for s in (fast, general):  # the same garbage, so that every pad written shows
        r = np.random.default_rng(seed)
        for a in s.data.values():
            a[...] = r.integers(-100, 100, size=a.shape)
    ctx = Ctx(0, insn, program)
    assert exec_load(fast, dram, insn, ctx) == exec_load(general, dram, insn, ctx)
    for kind, a in general.data.items():
        np.testing.assert_array_equal(fast.data[kind], a, err_msg=kind)
