"""A DMA is timed once when the machine describes it (issue 22): ``_timed`` takes its duration
from the DMA timing in hand (``InstructionDef.dma_timing``: the duration is that timing alone
on the port) instead of asking the definition's ``duration``, which would time it again. Held
here: the built-ins keep that contract (the description's cycles equal ``duration`` on every
config, empty DMAs included), and ``_timed`` asks a DMA's definition for its duration only
when it has no timing. Likewise its token queues come from a table by (module, dependency
flags, separate ALU): equal to ``pops_of``/``pushes_of`` (their errors included) and asked of
them once per entry."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vta.config import HwConfig
from vta.isa import Deps, Load, MemType, Store, Unit, definition_of, pops_of, pushes_of
from vta.sim import machine
from vta.sim.machine import _queues, _Refused, _timed

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = {p.stem: HwConfig.from_yaml(p) for p in sorted((ROOT / "hwconfigs").glob("*.yaml"))}
PYNQ = CONFIGS["pynq"]


@st.composite
def _dma(draw: st.DrawFn, hw: HwConfig) -> Load | Store:
    """A LOAD or STORE of any shape (empty ones included) at any address."""
    w = hw.isa
    deps = Deps(*(draw(st.booleans()) for _ in range(4)))
    y, x = draw(st.integers(0, 12)), draw(st.integers(0, 12))
    stride, dram = draw(st.integers(0, 300)), draw(st.integers(0, 1 << 20))
    sram = draw(st.integers(0, (1 << w.sram_addr) - 1))
    if draw(st.booleans()):
        return Store(MemType.OUT, sram, dram, y, x, stride, deps)
    mem = draw(st.sampled_from([MemType.UOP, MemType.WGT, MemType.INP, MemType.ACC]))
    pads = [draw(st.integers(0, 3)) for _ in range(4)]
    return Load(mem, sram, dram, y, x, stride, *pads, deps=deps)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_described_cycles_are_the_duration(name: str, data: st.DataObject) -> None:
    hw = CONFIGS[name]
    insn = data.draw(_dma(hw))
    d = definition_of(insn)
    try:
        got = _timed(insn, hw, d)
    except _Refused:
        return
    assert got.cycles == d.duration(insn, hw)
    if got.timing is not None:
        assert got.cycles == got.timing.alone


def _counting(d: Any) -> tuple[Any, dict[str, int]]:
    """``d`` with its timing and duration counting their calls."""
    calls = {"dma_timing": 0, "duration": 0}

    def timing(insn: Any, hw: HwConfig) -> Any:
        calls["dma_timing"] += 1
        return d.dma_timing(insn, hw)

    def duration(insn: Any, hw: HwConfig) -> int:
        calls["duration"] += 1
        return int(d.duration(insn, hw))

    return replace(d, dma_timing=timing, duration=duration), calls


def test_a_dma_is_timed_once() -> None:
    load = Load(MemType.INP, 0, 1000, 4, 8, 8, 1, 1, 1, 1)
    d, calls = _counting(definition_of(load))
    got = _timed(load, PYNQ, d)
    assert calls == {"dma_timing": 1, "duration": 0}
    assert got.cycles == definition_of(load).duration(load, PYNQ)


def test_an_empty_dma_asks_its_duration() -> None:
    store = Store(MemType.OUT, 0, 0, 0, 4, 4)
    d, calls = _counting(definition_of(store))
    got = _timed(store, PYNQ, d)
    assert calls == {"dma_timing": 1, "duration": 1}
    assert got.timing is None and got.cycles == definition_of(store).duration(store, PYNQ)


@pytest.mark.parametrize("name", sorted(CONFIGS))
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_token_queues_as_pops_and_pushes(name: str, data: st.DataObject) -> None:
    hw = CONFIGS[name]
    insn = data.draw(_dma(hw))
    module = data.draw(st.sampled_from(list(Unit)))

    def asked(f: Any) -> object:
        try:
            return f()
        except ValueError as e:
            return str(e)

    want = asked(lambda: (tuple(pops_of(insn, hw, module)), tuple(pushes_of(insn, hw, module))))
    assert asked(lambda: _queues(insn, hw, module)) == want
    assert asked(lambda: _queues(insn, hw, module)) == want  # from the table the second time


def test_token_queues_asked_once_per_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    monkeypatch.setattr(machine, "_QUEUES", {})
    monkeypatch.setattr(machine, "pops_of", lambda *a: calls.append(a) or pops_of(*a))
    deps = Deps(pop_next=True, push_next=True)
    a = Load(MemType.INP, 0, 0, 2, 2, 2, deps=deps)
    b = Load(MemType.INP, 64, 4096, 3, 5, 9, deps=deps)
    assert _timed(a, PYNQ, definition_of(a)).pops == _timed(b, PYNQ, definition_of(b)).pops
    assert len(calls) == 1
