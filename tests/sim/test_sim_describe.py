"""The machine describes a DMA once per timing key (issue 22): a tiled program's LOADs and
STOREs differ mostly in addresses that change no timing. Held here: the key covers what the
description reads (two DMAs with one key get equal descriptions, on every config), a DMA's
timing depends on its addresses only modulo the burst boundary (``dma_timing`` computes it
once per residue), and a program whose instructions share keys but not fields still has each
one's fields checked (the error names the instruction, not the one it shares a key with)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.config import HwConfig
from vta.errors import SimError
from vta.isa import Deps, Load, MemType, ProgramBuilder, Store, definition_of
from vta.isa.timing import _dma_timing, dma_timing
from vta.sim import simulate
from vta.sim.machine import _described, _Refused, _timed

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {p.stem: HwConfig.from_yaml(p) for p in sorted((ROOT / "hwconfigs").glob("*.yaml"))}
PYNQ = CONFIGS["pynq"]


@st.composite
def _dma_pair(draw: st.DrawFn, hw: HwConfig) -> tuple[Load | Store, Load | Store]:
    """A LOAD or STORE and another like it at other addresses: the DRAM base either moved by
    a multiple of the burst boundary (the same key) or anywhere (usually another key)."""
    w = hw.isa
    deps = Deps(*(draw(st.booleans()) for _ in range(4)))
    size = st.integers(0, 12)
    y, x, stride = draw(size), draw(size), draw(st.integers(0, 300))
    dram = draw(st.integers(0, 1 << 20))
    moved = dram + draw(st.integers(0, 8)) * (hw.memory.burst_boundary or 1) \
        if draw(st.booleans()) else draw(st.integers(0, 1 << 20))
    sram = st.integers(0, (1 << w.sram_addr) - 1)
    if draw(st.booleans()):
        return (Store(MemType.OUT, draw(sram), dram, y, x, stride, deps),
                Store(MemType.OUT, draw(sram), moved, y, x, stride, deps))
    mem = draw(st.sampled_from([MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC]))
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    return (Load(mem, draw(sram), dram, y, x, stride, *pads, deps=deps),
            Load(mem, draw(sram), moved, y, x, stride, *pads, deps=deps))


def _timed_or_refusal(insn: Load | Store, hw: HwConfig) -> object:
    try:
        return _timed(insn, hw, definition_of(insn))
    except _Refused as e:
        return str(e)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_one_key_one_description(name: str, data: st.DataObject) -> None:
    hw = CONFIGS[name]
    a, b = data.draw(_dma_pair(hw))
    d = definition_of(a)
    assert d.timing_key is not None
    if d.timing_key(a, hw) == d.timing_key(b, hw):
        assert _timed_or_refusal(a, hw) == _timed_or_refusal(b, hw)
    if a.dram_base % (hw.memory.burst_boundary or 1) == b.dram_base % (
            hw.memory.burst_boundary or 1):
        assert d.timing_key(a, hw) == d.timing_key(b, hw)


@settings(max_examples=200, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 700), e=st.sampled_from([1, 4, 16, 64]),
       addr=st.integers(0, 1 << 24), stride=st.integers(0, 1 << 16),
       kind=st.sampled_from(["inp", "wgt", "acc", "uop", "out"]), write=st.booleans())
def test_dma_timing_reads_addresses_modulo_the_boundary(rows: int, cols: int, e: int,
                                                        addr: int, stride: int, kind: str,
                                                        write: bool) -> None:
    """The cached timing at the residues equals the one computed at the raw addresses (each
    row's offset within its boundary is the same either way)."""
    raw = _dma_timing.__wrapped__(PYNQ, rows, cols, e, (0, 1, 2, 0), kind, write, addr, stride)
    assert dma_timing(PYNQ, rows, cols, e, (0, 1, 2, 0), kind=kind, write=write, addr=addr,
                      stride=stride) == raw


def test_instructions_sharing_a_key_are_each_checked() -> None:
    """The second LOAD shares the first's timing key but its SRAM base does not fit: refused
    by name, as before the descriptions were shared."""
    b = ProgramBuilder(PYNQ)
    base = b.alloc("A", "inp", 64).base
    ok = Load(MemType.INP, 0, base, 1, 4, 4)
    bad = Load(MemType.INP, 1 << PYNQ.isa.sram_addr, base, 1, 4, 4)
    b.extend([ok, ok, bad])
    with pytest.raises(SimError, match=r"instruction 2 .*sram_base="):
        simulate(b.build(), PYNQ, timing_only=True)


def test_describing_hashes_no_instruction(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_lookup`` keys an instruction by its values (``values_of``), not by the
    instruction: neither its Python ``__hash__`` nor its ``__eq__`` runs, even for equal
    instructions that are other objects (found by value, described once)."""
    b = ProgramBuilder(PYNQ)
    base = b.alloc("A", "inp", 64).base
    b.extend([Load(MemType.INP, 0, base, 1, 4, 4), Load(MemType.INP, 0, base, 1, 4, 4),
              Store(MemType.OUT, 0, base, 1, 4, 4)])
    program = b.build()
    want = simulate(program, PYNQ, timing_only=True).cycles

    def refuse(*_: object) -> bool:
        raise AssertionError("an instruction was hashed or compared")

    for cls in (Load, Store, Deps):
        monkeypatch.setattr(cls, "__hash__", refuse)
        monkeypatch.setattr(cls, "__eq__", refuse)
    _described.cache_clear()
    assert simulate(program, PYNQ, timing_only=True).cycles == want
