"""``cost.program_bound`` prices each distinct instruction once per process (``_bound_facts``:
by value, then by its definition's ``timing_key``), with the bound of the plain definition:
one pass over the program, each instruction's unit, cycles and token queues asked of its
definition where it stands."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from vta.compiler.accel import cost, driver
from vta.compiler.accel.cost import program_bound
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.isa import Deps, Finish, Load, MemType, Program, ProgramBuilder, Store, definition_of
from vta.isa.defs import pops_of, pushes_of
from vta.isa.timing import fetch_cycles

HWDIR = Path(__file__).resolve().parents[2] / "hwconfigs"


def _plain_bound(program: Program, hw: HwConfig) -> int:
    """The bound as ``program_bound``'s docstring defines it, every fact asked of the
    instruction's definition at each place (no cache, no identity)."""
    insns = program.instructions
    first = insns[:hw.queues.fetch_batch or 1]
    first = first[:next((j + 1 for j, x in enumerate(first) if definition_of(x).drains),
                        len(first))]
    fetched = fetch_cycles(hw, len(first), 0) if first else 0
    free: dict[Any, int] = {}
    pushed: dict[Any, list[int]] = {}
    popped: dict[Any, int] = {}
    for insn in insns:
        d = definition_of(insn)
        unit = d.unit_of(insn, hw)
        start = free.get(unit, fetched)
        for q in pops_of(insn, hw, unit):
            k = popped.get(q, 0)
            popped[q] = k + 1
            if k < len(pushed.get(q, [])):
                start = max(start, pushed[q][k])
        if d.drains:
            start = max([start, *(free.get(m, 0) for m in d.drains)])
        end = free[unit] = start + int(d.duration(insn, hw))
        for q in pushes_of(insn, hw, unit):
            pushed.setdefault(q, []).append(end)
        if d.drains:
            return end
    return max(free.values(), default=0)


@pytest.mark.parametrize("cfg", ["pynq", "pynq_overlap", "pynq_tsim"])
def test_bound_is_the_plain_definitions(cfg: str) -> None:
    """Every candidate of two layers, bounded one after another in one process (the facts of
    the first shared by the later): the plain definition's bound, program by program."""
    hw = HwConfig.load(str(HWDIR / f"{cfg}.yaml"))
    for layer in ("C1", "C11"):
        w = resolve(f"resnet18:{layer}")
        for p in driver.default_points(w, hw):
            prog = driver.build(w, hw, p).program
            assert program_bound(prog, hw) == _plain_bound(prog, hw), (cfg, layer, p)


def test_a_dma_moved_in_dram_is_priced_once() -> None:
    """Two LOADs that differ in their DRAM address alone (the same burst offsets: the same
    ``timing_key``) are priced once: one entry by timing key beside one per value, and the
    bound is the plain one (fails when each distinct value is priced)."""
    hw = HwConfig.load(str(HWDIR / "pynq.yaml"))
    cost._bound_facts.cache_clear()
    b = ProgramBuilder(hw)
    inp, out = b.alloc("I", "inp", 64), b.alloc("O", "out", 4)
    loads = [Load(MemType.INP, 0, inp.base + 16 * k, 1, 4, 4) for k in range(2)]
    store = Store(MemType.OUT, 0, out.base, 1, 4, 4, deps=Deps())
    b.extend([*loads, store, Finish()])
    prog = b.build()
    d = definition_of(loads[0])
    assert d.timing_key is not None
    assert d.timing_key(loads[0], hw) == d.timing_key(loads[1], hw)
    assert program_bound(prog, hw) == _plain_bound(prog, hw)
    facts = cost._bound_facts(hw).facts
    timed = [k for k in facts if isinstance(k[0], tuple) and k[1] is d]
    by_value = [k for k in facts if k[0] is d]
    assert len(timed) == 1 and len(by_value) == 2
