"""``cost.program_bound`` is a lower bound on the simulator's cycles, and ``driver.fastest``
(branch and bound over the timed candidates) chooses what timing every candidate chooses.

The bound is what lets ``compile_workload`` and ``compile_window`` skip timing a candidate, so
it is held, program by program, to the timing-only simulator: every candidate of ResNet-18's
eleven layers (the model's ``REFINE`` best, ``driver.default_points``) on the stock and two
differently timed configs here, on every shipped config and for every candidate of the whole
ResNet-18 graph's kernels (convolutions, pools, the stand-alone adds) under ``slow``. The
chosen schedules and programs themselves are pinned by ``tests/golden``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vta.compiler.accel import driver
from vta.compiler.accel.cost import instruction_cycles, program_bound
from vta.compiler.ops.workloads import RESNET18, resolve
from vta.config import HwConfig
from vta.graph.compile import compile_graph
from vta.graph.models import MODELS
from vta.isa import Deps, Finish, Gemm, Load, MemType, Program, ProgramBuilder, Store, Uop
from vta.isa.timing import fetch_cycles
from vta.sim import simulate

HWDIR = Path(__file__).resolve().parents[2] / "hwconfigs"
CONFIGS = sorted(p.stem for p in HWDIR.glob("*.yaml"))
#: the stock HLS board, a separate ALU pipeline, the Chisel timing model
QUICK = ("pynq", "pynq_overlap", "pynq_tsim")


def _hw(name: str) -> HwConfig:
    return HwConfig.load(str(HWDIR / f"{name}.yaml"))


_PYNQ = _hw("pynq")


def _cycles(program: Program, hw: HwConfig) -> int:
    return int(simulate(program, hw, timing_only=True).stats.cycles)


def test_bound_by_hand() -> None:
    """LOAD.UOP (on the compute module) beside LOAD.INP (the load module, a token to
    compute); the GEMM pops it and pushes one to the STORE; FINISH waits for every unit. The
    bound: the first fetch batch, the longer of the two loads, then GEMM, STORE and FINISH
    one after another, each at its definition's cycles; the simulator takes no fewer."""
    hw = _PYNQ
    b = ProgramBuilder(hw)
    inp, out, ua = b.alloc("I", "inp", 4), b.alloc("O", "out", 4), b.alloc("U", "uop", 0)
    pos = b.add_uops("U", [Uop(i, i, 0) for i in range(4)])
    uload = Load(MemType.UOP, 0, ua.base + pos, 1, 4, 4)
    iload = Load(MemType.INP, 0, inp.base, 1, 4, 4, deps=Deps(push_next=True))
    gemm = Gemm(False, 0, 4, 1, 1, 0, 0, 0, 0, 0, 0, deps=Deps(pop_prev=True, push_next=True))
    store = Store(MemType.OUT, 0, out.base, 1, 4, 4, deps=Deps(pop_prev=True))
    b.extend([uload, iload, gemm, store, Finish()])
    prog = b.build()
    d = [instruction_cycles(x, hw) for x in prog.instructions]
    want = fetch_cycles(hw, 5, 0) + max(d[0], d[1]) + d[2] + d[3] + d[4]
    assert program_bound(prog, hw) == want
    assert want <= _cycles(prog, hw)


def _candidates_hold(cfg: str) -> None:
    hw = _hw(cfg)
    for layer in RESNET18:
        w = resolve(f"resnet18:{layer}")
        for p in driver.default_points(w, hw):
            prog = driver.build(w, hw, p).program
            bound, cycles = program_bound(prog, hw), _cycles(prog, hw)
            assert 0 < bound <= cycles, (cfg, layer, p, bound, cycles)


@pytest.mark.parametrize("cfg", QUICK)
def test_bound_below_every_candidate(cfg: str) -> None:
    _candidates_hold(cfg)


@pytest.mark.slow
@pytest.mark.parametrize("cfg", [c for c in CONFIGS if c not in QUICK])
def test_bound_below_every_candidate_all_configs(cfg: str) -> None:
    _candidates_hold(cfg)


@pytest.mark.slow
def test_bound_below_every_graph_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every program a kernel of the ResNet-18 graph chose among (timed, or pruned by its
    bound) on pynq: bound <= simulated cycles."""
    hw = _hw("pynq")
    seen: list[Program] = []

    def recording_bound(program: Program, hw_: HwConfig) -> int:
        seen.append(program)
        return program_bound(program, hw_)

    def cost(program: Program) -> int:
        seen.append(program)
        return _cycles(program, hw)

    monkeypatch.setattr(driver, "program_bound", recording_bound)
    compile_graph(MODELS["resnet18"](batch=1), hw, cost=cost)
    assert len(seen) > 20
    for prog in {id(p): p for p in seen}.values():
        assert program_bound(prog, hw) <= _cycles(prog, hw)


class _Prog:
    """A stand-in compiled candidate: ``program`` is what the fake oracle reads."""

    def __init__(self, program: object) -> None:
        self.program = program


def test_fastest_skips_what_cannot_win(monkeypatch: pytest.MonkeyPatch) -> None:
    """Times the lowest bound first, then the others in bound order while a bound is below
    the best; of equal times the earlier candidate wins."""
    cycles = {"a": 100, "b": 100, "c": 90, "d": 90}
    bounds = {"a": 95, "b": 100, "c": 85, "d": 80}
    monkeypatch.setattr(driver, "program_bound", lambda p, hw: bounds[p])
    timed: list[str] = []

    def cost(p: object) -> int:
        timed.append(str(p))
        return cycles[str(p)]

    got = driver.fastest(list("abcd"), _Prog, cost, _hw("pynq"))  # type: ignore[arg-type]
    assert got.program == "c"
    assert timed == ["d", "c"]


@given(st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), min_size=1, max_size=6))
def test_fastest_chooses_what_timing_all_chooses(pairs: list[tuple[int, int]]) -> None:
    """Any bounds below the cycles: the earliest candidate of the fewest cycles, with ties
    (equal bounds, bound equal to the best) drawn often."""
    cycles = {f"p{k}": b + extra for k, (b, extra) in enumerate(pairs)}
    bounds = {f"p{k}": b for k, (b, _) in enumerate(pairs)}
    names = list(cycles)
    want = min(names, key=lambda n: (cycles[n], names.index(n)))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(driver, "program_bound", lambda p, hw: bounds[p])
        got = driver.fastest(names, _Prog, lambda p: cycles[str(p)], _PYNQ)  # type: ignore
    assert got.program == want


def test_fastest_needs_a_candidate() -> None:
    with pytest.raises(ValueError, match="no candidate"):
        driver.fastest([], _Prog, lambda p: 0, _hw("pynq"))  # type: ignore[arg-type]
