"""What describing a program reads, keyed by no more than that (issue 22, round 10): a DMA
none of whose rows crosses a burst boundary times as at address 0 (``dma_offsets``, one
timing and one timing key for all its addresses), ``_crosses`` agrees with the row-by-row
reading it shortcuts, and a definition's compiled range check (``_fits_of``) answers as the
comparisons of its fields it replaces, its code kept across processes (``code_of``); the
simulator's description key (``values_of``) tells instructions apart exactly as their
equality does."""

from __future__ import annotations

from dataclasses import replace
from operator import le
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_isa import CONFIGS, PYNQ, insn_strategy

from vta import _dataclass_code as dc
from vta.isa import Deps, Load, MemType, Store, definition_of
from vta.isa.encoding import _compiled, _fits_of, _fits_source, _slots
from vta.isa.insn import values_of
from vta.isa.timing import _crosses, dma_offsets, dma_timing


def _crosses_row_by_row(rows: int, row_bytes: int, boundary: int, addr: int,
                        stride: int) -> bool:
    return any((addr + r * stride) % boundary + row_bytes > boundary for r in range(rows))


def test_crosses_is_the_row_by_row_reading() -> None:
    """Every DMA of up to 5 rows on a 16-byte boundary, every offset and stride."""
    for rows in range(1, 6):
        for row_bytes in range(1, 20):
            for addr in range(16):
                for stride in range(16):
                    assert _crosses(rows, row_bytes, 16, addr, stride) == \
                        _crosses_row_by_row(rows, row_bytes, 16, addr, stride), \
                        (rows, row_bytes, addr, stride)


def test_rows_within_a_boundary_time_as_at_address_zero() -> None:
    """Two rows of 64 bytes anywhere inside one 4 KiB boundary: one timing object for every
    such address (the machine then plans its bursts once), another for rows that cross."""
    b = PYNQ.memory.burst_boundary
    assert b is not None
    inside = [dma_timing(PYNQ, 2, 4, 16, addr=a, stride=64) for a in (0, 128, b - 128, 3 * b)]
    assert all(t is inside[0] for t in inside)
    assert dma_offsets(PYNQ, 2, 64, b - 128, 64) == (0, 0)
    assert dma_offsets(PYNQ, 2, 64, b - 96, 64) == (b - 96, 64)  # the second row crosses
    assert dma_timing(PYNQ, 2, 4, 16, addr=b - 96, stride=64) != inside[0]


def test_dmas_whose_rows_stay_within_a_boundary_share_a_timing_key() -> None:
    """LOADs and STOREs at different DRAM residues but no row crossing: one key each kind
    (before, the key held the residues, and each was timed again)."""
    loads = [Load(MemType.INP, 0, base, 2, 4, 8, deps=Deps(pop_next=True))
             for base in (0, 1, 37, 100)]
    stores = [Store(MemType.OUT, 0, base, 3, 2, 5) for base in (0, 9, 64)]
    for same in (loads, stores):
        d = definition_of(same[0])
        assert d.timing_key is not None
        assert len({d.timing_key(x, PYNQ) for x in same}) == 1


def _fits_by_comparison(insn: Any, hw: Any) -> bool:
    """The reading ``_fits_of`` compiles: every lower bound, then every upper one, False
    where a value does not compare."""
    slots = [s for s in _slots(definition_of(insn), hw.isa) if s.const is None]
    try:
        vals = [getattr(insn.deps if s.on_deps else insn, s.name) for s in slots]
        return all(map(le, [s.lo for s in slots], vals)) and \
            all(map(le, vals, [s.hi for s in slots]))
    except TypeError:
        return False


_WIDE = st.integers(-(1 << 40), 1 << 40)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_compiled_range_check_is_the_comparisons(name: str, data: st.DataObject) -> None:
    """A valid instruction with one field (or flag) replaced by any integer, or by text."""
    hw = CONFIGS[name]
    insn = data.draw(insn_strategy(hw))
    slots = [s for s in _slots(definition_of(insn), hw.isa) if s.const is None]
    if slots:
        s = data.draw(st.sampled_from(slots))
        value = data.draw(st.one_of(_WIDE, st.sampled_from([s.lo - 1, s.hi + 1, "7"])))
        if s.on_deps:
            insn = replace(insn, deps=replace(insn.deps, **{s.name: value}))
        else:
            insn = replace(insn, **{s.name: value})
    assert _fits_of(definition_of(insn), hw)(insn) == _fits_by_comparison(insn, hw)



@settings(max_examples=200, deadline=None)
@given(a=insn_strategy(PYNQ), b=insn_strategy(PYNQ))
def test_values_of_equal_exactly_when_the_instructions_are(a: Any, b: Any) -> None:
    """``values_of`` (the simulator's description key): two instructions of one class have
    equal value tuples exactly when they are equal, their flags included; a flag flipped or a
    field changed is another tuple."""
    if type(a) is not type(b):
        return
    get = values_of(type(a))
    assert (get(a) == get(b)) == (a == b)
    assert get(a) == get(replace(a))
    flipped = replace(a, deps=replace(a.deps, push_next=not a.deps.push_next))
    assert get(flipped) != get(a)
    for slot in (s for s in _slots(definition_of(a), PYNQ.isa)
                 if s.const is None and not s.on_deps):
        changed = replace(a, **{slot.name: int(getattr(a, slot.name)) + 1})
        assert get(changed) != get(a)


def test_range_checks_are_compiled_through_the_kept_code() -> None:
    """A range check's text is compiled by ``vta._dataclass_code.code_of`` (kept beside the
    bytecode with the dataclass methods, so the next process compiles none of it)."""
    d = definition_of(Load(MemType.INP, 0, 0, 1, 1, 1))
    slots = _slots(d, PYNQ.isa)
    own = [s for s in slots if s.const is None and not s.on_deps]
    flags = [s for s in slots if s.on_deps]
    src = _fits_source(own, flags, True)
    _compiled.cache_clear()
    dc._used.pop(src, None)
    assert _compiled(src) is not None
    assert src in dc._used
