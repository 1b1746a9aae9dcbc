"""``vta.graph.link.link_program``: every DMA moved from its kernel-local allocation to the
allocation's linked place, before/expected on a hand-made program."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from vta.errors import ProgramError
from vta.graph.link import link_program
from vta.isa import Allocation, Load, MemType, Program, Store


class _Memory:
    """The part of a ``MemoryPlan`` linking reads: activations at fixed byte offsets, the
    step's constants after ``const_base``."""

    def __init__(self, offsets: dict[str, int], const_base: int,
                 const_offsets: dict[tuple[int, str], int]) -> None:
        self.offsets, self.const_base, self.const_offsets = offsets, const_base, const_offsets
        self.shared_consts: dict[str, int] = {}

    def offset(self, t: Any) -> int:
        return self.offsets[t.name]


def _program(*insns: Any) -> Program:
    allocs = (Allocation("data", "inp", 64, 0, 1), Allocation("res", "inp", 32, 64, 1),
              Allocation("kernel", "wgt", 4, 0, 256), Allocation("out", "out", 16, 0, 1))
    return Program(tuple(insns), allocs, {})


def _link(prog: Program) -> Program:
    bind: Any = {"data": SimpleNamespace(name="x"), "res": SimpleNamespace(name="r"),
                 "out": SimpleNamespace(name="y")}
    memory: Any = _Memory({"x": 1000, "r": 2000, "y": 3000}, 4096, {(3, "kernel"): 512})
    return link_program(prog, 3, bind, memory)


def test_each_dma_moves_with_the_allocation_it_falls_in() -> None:
    first = Load(MemType.INP, 0, 10, 1, 8, 8)
    again = Load(MemType.INP, 0, 70, 1, 8, 8)  # in ``res``, the second inp allocation
    wgt = Load(MemType.WGT, 0, 2, 1, 1, 1)
    out = Store(MemType.OUT, 0, 4, 1, 4, 4)
    linked = _link(_program(first, again, first, wgt, out))
    got = [i.dram_base for i in linked.instructions]
    # data 0 -> byte 1000; res element 64 -> byte 2000; the weights (256-byte elements)
    # at byte 4096 + 512 = element 18; out 0 -> 3000
    assert got == [1010, 2000 + 6, 1010, 18 + 2, 3004]
    assert linked.instructions[0] is linked.instructions[2]  # a repeat relocated once
    assert {a.name: a.offset for a in linked.allocations} == {
        "x": 1000, "r": 2000, "s3#kernel": 4608, "y": 3000}


def test_an_empty_dma_outside_every_allocation_carries_its_tokens_unchanged() -> None:
    token = Load(MemType.INP, 0, 500, 0, 0, 0)
    assert _link(_program(token)).instructions == (token,)


def test_a_dma_outside_every_allocation_is_refused() -> None:
    with pytest.raises(ProgramError, match="Load at element 500 of inp is in no allocation"):
        _link(_program(Load(MemType.INP, 0, 500, 1, 1, 1)))
