"""The lean event engine (vta/sim/engine.py) against simpy, its reference: the same event order
on random process scenarios, and the same cycles, per-unit statistics, timeline slices, DRAM
bytes and errors on whole programs: the golden assembly programs, hypothesis-drawn random
programs on many configs, the same with their dependency tokens scrambled (deadlocks and races
included), and accumulator-bank contention on a separate ALU pipeline."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import simpy
from hypothesis import event, given, settings
from hypothesis import strategies as st
from strategies import hw_configs, programs

from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.workloads import Workload
from vta.config import HwConfig
from vta.errors import SimError
from vta.isa import (
    Alu,
    AluOp,
    Deps,
    Finish,
    Gemm,
    Load,
    MemType,
    Program,
    ProgramBuilder,
    Store,
    Uop,
    assemble,
)
from vta.isa.memport import Transfer, alone
from vta.isa.timing import read_channel
from vta.run.targets import AccelTarget
from vta.sim import engine, random_inputs, simulate
from vta.sim.examples import with_deps
from vta.sim.machine import _PortServer

ROOT = Path(__file__).resolve().parents[2]
PYNQ = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq.yaml")
OVERLAP = HwConfig.from_yaml(ROOT / "hwconfigs" / "pynq_overlap.yaml")
GOLDEN_ASM = sorted((ROOT / "tests" / "golden" / "data" / "isa").glob("*.asm"))

SIMPY = SimpleNamespace(Environment=simpy.Environment, Store=simpy.Store,
                        Resource=simpy.Resource, AllOf=simpy.AllOf)
LEAN = SimpleNamespace(Environment=engine.Environment, Store=engine.Store,
                       Resource=engine.Resource, AllOf=engine.AllOf)


# ------------------------------------------------------------------ the engine alone

_STEP = st.one_of(
    st.tuples(st.just("wait"), st.integers(0, 4)),
    st.tuples(st.just("put"), st.integers(0, 1)),
    st.tuples(st.just("get"), st.integers(0, 1)),
    st.tuples(st.just("hold"), st.integers(0, 1), st.integers(0, 3)),
    st.tuples(st.just("any"), st.integers(0, 5), st.integers(0, 2)),
    st.tuples(st.just("fire"), st.integers(0, 2)),
    st.tuples(st.just("all"), st.integers(0, 2), st.integers(0, 2)),
)


def _scenario(sim: Any, scripts: list[list[tuple[Any, ...]]], caps: tuple[int, int],
              shortcuts: bool = False) -> list[tuple[Any, ...]]:
    """Run ``scripts`` (one process each) on ``sim``'s classes; the log of every step: when
    it resumed, which process, what it did and the value it got. ``shortcuts``: waits, puts
    and gets take the lean engine's no-event shortcuts where they apply (``skip``, ``give``,
    ``take``), as the machine does."""
    env = sim.Environment()
    stores = [sim.Store(env, capacity=c) for c in caps]
    res = [sim.Resource(env, capacity=1) for _ in range(2)]
    flags = [env.event() for _ in range(3)]
    log: list[tuple[Any, ...]] = []

    def proc(pid: int, script: list[tuple[Any, ...]]) -> Any:
        for k, step in enumerate(script):
            kind = step[0]
            got: Any = None
            if kind == "wait":
                if shortcuts and env.skip(step[1]):
                    got = (pid, k)
                else:
                    got = yield env.timeout(step[1], value=(pid, k))
            elif kind == "put":
                if not (shortcuts and stores[step[1]].give((pid, k))):
                    got = yield stores[step[1]].put((pid, k))
            elif kind == "get":
                got = stores[step[1]].take() if shortcuts else engine.MISS
                if got is engine.MISS:
                    got = yield stores[step[1]].get()
            elif kind == "hold":
                req = res[step[1]].request()
                yield req
                yield env.timeout(step[2])
                res[step[1]].release(req)
            elif kind == "any":
                yield env.timeout(step[1]) | flags[step[2]]
            elif kind == "fire":
                if not flags[step[1]].triggered:
                    flags[step[1]].succeed((pid, k))
            else:
                yield sim.AllOf(env, [flags[step[1]], flags[step[2]]])
            log.append((int(env.now), pid, k, kind, got))

    procs = [env.process(proc(p, s)) for p, s in enumerate(scripts)]
    env.run()
    log.append(("end", int(env.now), tuple(p.is_alive for p in procs),
                tuple(len(s.items) for s in stores)))
    return log


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_STEP, max_size=12), min_size=1, max_size=5),
       st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_engine_orders_events_as_simpy(scripts: list[list[tuple[Any, ...]]],
                                       caps: tuple[int, int]) -> None:
    assert _scenario(LEAN, scripts, caps) == _scenario(SIMPY, scripts, caps)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.lists(_STEP, max_size=12), min_size=1, max_size=5),
       st.tuples(st.integers(1, 3), st.integers(1, 3)))
def test_engine_shortcuts_order_events_as_simpy(scripts: list[list[tuple[Any, ...]]],
                                                caps: tuple[int, int]) -> None:
    """A wait, put or get done without its event where it would be the next one processed
    (``skip``, ``give``, ``take``) leaves every step where simpy's yields put it."""
    assert _scenario(LEAN, scripts, caps, shortcuts=True) == _scenario(SIMPY, scripts, caps)


def test_process_now_processes_a_pending_event_at_once() -> None:
    """``Event.process_now`` does what the run loop does when it pops the event (its
    callbacks in order, with its value, at the current cycle), without scheduling it; an
    event already triggered is refused (it is in the queue)."""
    env = engine.Environment()
    ev, log = env.event(), []
    ev.callbacks.append(lambda e: log.append(("first", e.value, env.now)))  # type: ignore[union-attr]
    ev.callbacks.append(lambda e: log.append(("second", e.processed)))  # type: ignore[union-attr]
    ev.process_now(7)
    assert log == [("first", 7, 0), ("second", True)]
    assert ev.triggered and ev.processed and not env._queue
    with pytest.raises(RuntimeError, match="already been triggered"):
        ev.process_now()
    late = env.event().succeed()
    with pytest.raises(RuntimeError, match="already been triggered"):
        late.process_now()


@pytest.mark.parametrize("shortcuts", [True, False])
def test_port_request_on_a_quiet_cycle_is_served_at_once(shortcuts: bool) -> None:
    """A DMA's request with nothing else scheduled at its cycle: on the lean engine's
    shortcuts the port server is woken at once (``process_now``: no event left at that cycle,
    only the wait for the completion), else through its ``wake`` event; either way the
    transfer completes when the port predicts, as on simpy."""
    transfer = Transfer((4, 4, 3), lead=2)
    expect = alone(read_channel(PYNQ), transfer)
    got = {}
    for name, env in (("lean", engine.Environment()), ("simpy", simpy.Environment())):
        server = _PortServer(env, PYNQ, shortcuts and name == "lean")
        done = server.request(transfer)
        if name == "lean":
            at_now = [e for e in env._queue if e[0] == 0]
            assert (not at_now) if shortcuts else len(at_now) == 1
        env.run()
        assert done.processed
        got[name] = env.now
    assert got == {"lean": expect, "simpy": expect}


def test_engine_refuses_a_negative_delay() -> None:
    with pytest.raises(ValueError, match="Negative delay"):
        engine.Environment().timeout(-1)


def test_an_unknown_engine_is_a_named_error() -> None:
    prog = assemble(GOLDEN_ASM[0].read_text(), PYNQ)
    with pytest.raises(SimError, match=r"unknown simulation engine 'fast'.*lean, simpy"):
        simulate(prog, PYNQ, timing_only=True, engine="fast")


# ------------------------------------------------------------------ whole programs


def _outcome(program: Program, hw: HwConfig, inputs: dict[str, np.ndarray] | None,
             engine_name: str, timing_only: bool = False) -> tuple[Any, ...]:
    """Everything a run reports (or its error's type and text)."""
    try:
        r = simulate(program, hw, inputs, timing_only=timing_only, engine=engine_name)
    except SimError as e:
        return ("error", type(e).__name__, str(e))
    dram = None if r.dram is None else r.dram.tobytes()
    return (r.cycles, r.stats, r.slices, dram)


def _same_on_both(program: Program, hw: HwConfig, seed: int = 0) -> tuple[Any, ...]:
    try:
        inputs = random_inputs(program, hw, seed)
    except SimError:
        inputs = None
    for timing_only in (False, True):
        lean = _outcome(program, hw, inputs, "lean", timing_only)
        ref = _outcome(program, hw, inputs, "simpy", timing_only)
        assert lean == ref
    return lean


def _note(outcome: tuple[Any, ...]) -> None:
    """What a hypothesis run exercised (``--hypothesis-show-statistics``)."""
    if outcome[0] == "error":
        event(f"error: {'deadlock' if 'deadlock' in outcome[2] else outcome[1]}")
    else:
        conflicts = any(u.conflict for u in outcome[1].units.values())
        event("ran" + (", bank conflicts" if conflicts else ""))


@pytest.mark.parametrize("path", GOLDEN_ASM, ids=[p.stem for p in GOLDEN_ASM])
def test_golden_programs_same_on_both_engines(path: Path) -> None:
    got = _same_on_both(assemble(path.read_text(), PYNQ, source=path.name), PYNQ)
    assert got[0] != "error" and got[0] > 0


@settings(max_examples=60, deadline=None)
@given(st.data(), st.integers(0, 2**32 - 1))
def test_random_programs_same_on_both_engines(data: st.DataObject, seed: int) -> None:
    hw = data.draw(hw_configs(), label="hw")
    _note(_same_on_both(data.draw(programs(hw), label="program"), hw, seed))


def _shallow(hw: HwConfig, command: int, token: int, batch: int) -> HwConfig:
    """``hw`` with command queues ``command`` deep, token queues ``token`` deep and
    ``batch`` instructions fetched per request: full queues block their puts."""
    return replace(hw, queues=replace(hw.queues, command_depth=command, token_depth=token,
                                      fetch_batch=batch))


@settings(max_examples=60, deadline=None)
@given(st.data(), st.integers(0, 2**32 - 1), st.integers(1, 4), st.integers(1, 3),
       st.integers(1, 16))
def test_shallow_queues_same_on_both_engines(data: st.DataObject, seed: int, command: int,
                                             token: int, batch: int) -> None:
    """Random programs with shallow command and token queues and a random fetch batch: the
    fetch unit and the units block on full queues, which the lean engine's shortcuts must
    leave to the events (a put on a full queue, a get on an empty one)."""
    hw = _shallow(data.draw(hw_configs(), label="hw"), command, token, batch)
    _note(_same_on_both(data.draw(programs(hw), label="program"), hw, seed))


@pytest.mark.parametrize("queues", [(512, 1024, None), (2, 2, 1), (3, 2, 5), (1, 1, 1)],
                         ids=["stock", "shallow", "odd", "deadlock"])
def test_compiled_conv_same_on_both_engines(queues: tuple[int, int, int | None]) -> None:
    """A compiled, latency-hidden conv2d (virtual threads: load, compute and store overlap on
    the shared port) on pynq, with its stock queues, with shallow ones, and with queues so
    shallow that it deadlocks (the same error text on both)."""
    w = Workload("conv2d", Conv2dSpec(n=1, ic=32, h=14, w=14, oc=32, kh=3, kw=3, pad=1))
    program = AccelTarget(PYNQ).compile_layer(w).program
    hw = PYNQ if queues[2] is None else _shallow(PYNQ, *queues)
    got = _same_on_both(program, hw)
    if queues == (1, 1, 1):
        assert got[0] == "error" and got[1] == "DeadlockError"
    else:
        assert got[0] != "error" and got[1].units["load"].insns > 0


_FLAGS = ("pop_prev", "pop_next", "push_prev", "push_next")


@settings(max_examples=60, deadline=None)
@given(st.data(), st.integers(0, 2**32 - 1))
def test_scrambled_tokens_same_on_both_engines(data: st.DataObject, seed: int) -> None:
    """Random programs with dependency flags added at random: unordered scratchpad accesses,
    token queues that fill up or run dry (deadlocks), instructions the hardware refuses; on
    the same or another config (a separate ALU pipeline routes tokens differently)."""
    hw = data.draw(hw_configs(), label="hw")
    program = data.draw(programs(hw), label="program")
    insns = list(program.instructions)
    for _ in range(data.draw(st.integers(1, 6), label="changes")):
        k = data.draw(st.integers(0, len(insns) - 1))
        flag = data.draw(st.sampled_from(_FLAGS))
        insns[k] = with_deps(insns[k], **{flag: True})
    scrambled = Program(tuple(insns), program.allocations, program.uops)
    target = data.draw(st.sampled_from([hw, OVERLAP]), label="run on")
    if target.gemm != hw.gemm:  # another tensor shape: the program's layout means nothing
        target = hw
    _note(_same_on_both(scrambled, target, seed))


def _bank_program(gemm_dst: int, alu_dst: int, n: int, io: int, deps: tuple[bool, ...]
                  ) -> Program:
    """LOAD.UOP, a GEMM over ``n`` acc entries at ``gemm_dst`` and an ALU over ``n`` at
    ``alu_dst`` (the ALU on its own pipeline), then a STORE of the GEMM's entries and FINISH;
    ``deps`` orders the ALU after the GEMM or not."""
    b = ProgramBuilder(OVERLAP)
    out = b.alloc("O", "out", n)
    ua = b.alloc("U", "uop", 0)
    pos = b.add_uops("U", [Uop(gemm_dst + i, 0, 0) for i in range(n)]
                     + [Uop(alu_dst + i, 0, 0) for i in range(n)])
    alu_deps = Deps(pop_prev=True, push_next=deps[0])
    b.extend([Load(MemType.UOP, 0, ua.base + pos, 1, 2 * n, 2 * n, deps=Deps(push_next=True)),
              Gemm(False, 0, n, io, 1, 0, 0, 0, 0, 0, 0, deps=Deps(push_next=deps[1])),
              Alu(AluOp.SHR, False, n, 2 * n, io, 1, 0, 0, 0, 0, True, 1, deps=alu_deps),
              Store(MemType.OUT, gemm_dst, out.base, 1, n, n,
                    deps=Deps(pop_prev=deps[0] or deps[1])),
              Finish()])
    return b.build()


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 1800), st.integers(0, 1800), st.integers(1, 128), st.integers(1, 4),
       st.tuples(st.booleans(), st.booleans()))
def test_accumulator_banks_same_on_both_engines(gemm_dst: int, alu_dst: int, n: int, io: int,
                                                deps: tuple[bool, bool]) -> None:
    """The GEMM and the separate ALU pipeline contending (or not) for accumulator banks."""
    _note(_same_on_both(_bank_program(gemm_dst, alu_dst, n, io, deps), OVERLAP))


def test_compiled_overlap_program_same_on_both_engines() -> None:
    """A compiled conv2d on the separate-ALU config: GEMM, ALU epilogue and resets on two
    pipelines sharing the accumulator banks."""
    w = Workload("conv2d", Conv2dSpec(n=1, ic=32, h=14, w=14, oc=32, kh=3, kw=3, pad=1))
    program = AccelTarget(OVERLAP).compile_layer(w).program
    got = _same_on_both(program, OVERLAP)
    assert got[0] != "error" and got[1].units["alu"].insns > 0
