"""LOAD and STORE copy bytes between DRAM and the scratchpads unconverted where the
scratchpad is laid out as DRAM (``Sram.raw``; ``kernels.load_copy``, ``exec_store``): the
same entries, pads, DRAM bytes and returned range as the general path (without
``Sram.raw``: typed entries, an image built, converted to DRAM's dtype), whatever the memory
type, pads, stride (overlapping rows too), DRAM end, batch and entry width."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.errors import AddressError
from vta.isa import Load, MemType, ProgramBuilder, Store
from vta.sim.dram import Dram, random_inputs
from vta.sim.kernels import Ctx, Sram, exec_load, exec_store
from vta.testing import small_hw

_DATA = [MemType.INP, MemType.WGT, MemType.ACC]


def _outcome(sram: Sram, dram: Dram, insn: Load, ctx: Ctx) -> object:
    try:
        return exec_load(sram, dram, insn, ctx)
    except AddressError as e:
        return str(e)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(_DATA), st.integers(1, 2), st.integers(0, 5), st.integers(0, 5),
       st.integers(0, 10), st.integers(0, 70), st.tuples(*[st.integers(0, 2)] * 4),
       st.integers(0, 40), st.integers(0, 2**32 - 1))
def test_byte_load_writes_what_the_general_path_writes(
        mem: MemType, batch: int, rows: int, cols: int, stride: int, dram_base: int,
        pads: tuple[int, int, int, int], sram_base: int, seed: int) -> None:
    """Every stride (rows back to back, apart, overlapping: the byte path copies rows lying
    back to back as one run of bytes) and DRAM end: for a LOAD reaching past the DRAM image
    the same error text, with the scratchpads untouched (nothing written before the
    check)."""
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


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 2), st.sampled_from(["int8", "int32"]), st.integers(1, 4),
       st.integers(1, 5), st.integers(0, 8), st.integers(0, 3), st.integers(0, 40),
       st.integers(0, 2**32 - 1))
def test_byte_store_writes_what_the_general_path_writes(
        batch: int, out_dtype: str, rows: int, cols: int, stride: int, dram_base: int,
        sram_base: int, seed: int) -> None:
    hw = small_hw(batch=batch, block=4, depth=128)
    if out_dtype != "int8":  # out entries as wide as acc's (the scratchpad then holds as many)
        hw = hw.with_changes(**{"gemm.out_dtype": out_dtype,
                                "scratchpad.out": hw.scratchpad.acc})
    b = ProgramBuilder(hw)
    b.alloc("Y", "out", 64)
    program = b.build()
    insn = Store(MemType.OUT, sram_base, dram_base, rows, cols, stride)
    fast, general = Sram(hw), Sram(hw)
    assert "out" in fast.raw
    general.raw = {}
    drams = []
    for s in (fast, general):
        r = np.random.default_rng(seed)
        s.data["out"][...] = r.integers(-100, 100, size=s.data["out"].shape)
        dram = Dram(program, hw)
        dram.buf[...] = r.integers(0, 256, size=dram.buf.shape)
        exec_store(s, dram, insn, Ctx(0, insn, program))
        drams.append(dram.buf)
    np.testing.assert_array_equal(drams[0], drams[1])
