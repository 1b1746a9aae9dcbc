"""The timing half's lean paths: ``cycles_of`` (the compiler's cost oracle without the
result it would drop), the port server processing a lone completion's event at once, and
``energy_of`` visiting each instruction object once (by class for the DMAs) with its rows
ordered by one index array. Each against what it replaces: ``simulate``'s timing-only
cycles and errors, the simpy reference's events, and a plain loop adding every
instruction's energy one by one."""

from __future__ import annotations

import copy
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_energy import energy_one_by_one

from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import SimError
from vta.isa import Program, assemble
from vta.isa.insn import Finish, Gemm, Load, Store
from vta.run.targets import AccelTarget
from vta.sim import engine, simulate
from vta.sim.energy import (
    _plain_classes,
    _row_order,
    energy_of,
)
from vta.sim.examples import matmul_program
from vta.sim.machine import cycles_of

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
GOLDEN_ASM = sorted((ROOT / "tests" / "golden" / "data" / "isa").glob("*.asm"))


def _conv_program() -> Program:
    """A compiled, latency-hidden conv2d: load, compute and store overlap on the shared
    port."""
    w = Workload("conv2d", Conv2dSpec(n=1, ic=32, h=14, w=14, oc=32, kh=3, kw=3, pad=1))
    return AccelTarget(PYNQ).compile_layer(w).program


def _shallow(hw: HwConfig, command: int, token: int, batch: int) -> HwConfig:
    return replace(hw, queues=replace(hw.queues, command_depth=command, token_depth=token,
                                      fetch_batch=batch))


def _programs() -> list[Program]:
    return [_conv_program(), matmul_program(PYNQ, 32, 64, 64, 16, 2),
            *(assemble(p.read_text(), PYNQ, source=p.name) for p in GOLDEN_ASM)]


def test_cycles_of_is_the_timing_only_cycles() -> None:
    target = AccelTarget(PYNQ)
    for program in _programs():
        want = simulate(program, PYNQ, timing_only=True).cycles
        assert cycles_of(program, PYNQ) == want
        assert cycles_of(program, PYNQ, "simpy") == want
        assert target.cycles(program) == want


def test_cycles_of_raises_as_simulate() -> None:
    program = _conv_program()
    stuck = _shallow(PYNQ, 1, 1, 1)  # deadlocks (tests/sim/test_sim_engine.py)
    with pytest.raises(SimError) as want:
        simulate(program, stuck, timing_only=True)
    with pytest.raises(SimError) as got:
        cycles_of(program, stuck)
    assert (type(got.value), str(got.value)) == (type(want.value), str(want.value))
    with pytest.raises(SimError, match="unknown simulation engine"):
        cycles_of(program, PYNQ, "nope")


def test_lone_completion_is_processed_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """On the lean engine a transfer that completes alone on the port resumes its unit at
    once (``_PortServer._waited``: no event scheduled for it), and the run reports what
    simpy's does."""
    at_once = [0]
    process_now = engine.Event.process_now

    def counted(self: Any, value: Any = None) -> None:
        if sys._getframe(1).f_code.co_name == "_waited":
            at_once[0] += 1
        process_now(self, value)

    monkeypatch.setattr(engine.Event, "process_now", counted)
    program = _conv_program()
    for hw in (PYNQ, _shallow(PYNQ, 2, 2, 1)):
        at_once[0] = 0
        lean = simulate(program, hw, timing_only=True)
        assert at_once[0] > 0
        ref = simulate(program, hw, timing_only=True, engine="simpy")
        assert (lean.cycles, lean.stats, lean.slices) == (ref.cycles, ref.stats, ref.slices)


def _variants(program: Program) -> list[Program]:
    """``program``; with every instruction a copy of its own (equal values, other objects);
    with its instructions repeated after FINISH (never run); with its FINISH dropped."""
    insns = program.instructions
    return [program, replace(program, instructions=tuple(copy.copy(i) for i in insns)),
            replace(program, instructions=insns + insns),
            replace(program, instructions=tuple(i for i in insns if not isinstance(i, Finish)))]


def test_energy_is_the_one_by_one_sum() -> None:
    moved = {"inp": 4096, "wgt": 8192, "acc": 64, "uop": 96, "out": 2048, "insn": 1600}
    for program in _programs():
        for variant in _variants(program):
            got = energy_of(variant, moved, PYNQ).pj
            want = energy_one_by_one(variant, moved, PYNQ)
            assert {k: v.hex() for k, v in got.items()} == {k: v.hex() for k, v in want.items()}


def test_plain_classes_are_the_dmas() -> None:
    plain = _plain_classes()
    assert {Load, Store} <= plain
    assert not {Gemm, Finish} & plain


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 4)), max_size=30))
def test_row_order_concatenates_the_ranges(spans: list[tuple[int, int]]) -> None:
    want = [r for first, n in spans for r in range(first, first + n)]
    got = _row_order([f for f, _ in spans], [n for _, n in spans])
    assert got.dtype == np.intp and got.tolist() == want


def test_a_run_without_its_timeline_reports_the_same(tmp_path: Path) -> None:
    """``timeline=False`` leaves the slices out and nothing else: the same cycles, statistics
    and outputs, on both engines; a trace records the timeline regardless."""
    program = _conv_program()
    for engine_name in ("lean", "simpy"):
        full = simulate(program, PYNQ, seed=3, engine=engine_name)
        lean = simulate(program, PYNQ, seed=3, engine=engine_name, timeline=False)
        assert full.slices and lean.slices == ()
        assert (lean.cycles, lean.stats) == (full.cycles, full.stats)
        assert lean.outputs.keys() == full.outputs.keys()
        for name in full.outputs:
            np.testing.assert_array_equal(lean.outputs[name], full.outputs[name])
    traced = simulate(program, PYNQ, seed=3, timeline=False,
                      trace_path=str(tmp_path / "t.json"))
    assert traced.slices == full.slices
    arrays = dict(full.inputs)
    got = AccelTarget(PYNQ).execute(program, arrays, timeline=False)
    assert got.sim is not None and got.sim.slices == () and got.stats == full.stats
