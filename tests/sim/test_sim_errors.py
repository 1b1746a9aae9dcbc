"""Deadlocks, out-of-range accesses and bad inputs: one clear error naming the culprit."""

from __future__ import annotations

import numpy as np
import pytest

from vta.isa import Deps, Finish, Gemm, Load, MemType, ProgramBuilder, Store, Uop
from vta.sim import AddressError, DeadlockError, InputError, SimError, run_reference, simulate
from vta.sim.dram import Dram, random_inputs


def _program(hw, insns, uops=()):
    b = ProgramBuilder(hw)
    b.alloc("A", "inp", 4)
    b.alloc("C", "acc", 4)
    b.alloc("O", "out", 4)
    b.alloc("U", "uop", 0)
    b.add_uops("U", uops)
    b.extend(insns)
    return b.build()


def test_pop_without_push_deadlocks(pynq):
    p = _program(pynq, [Load(MemType.INP, 0, 0, 1, 4, 4, deps=Deps(pop_next=True)), Finish()])
    with pytest.raises(DeadlockError) as e:
        simulate(p, pynq)
    msg = str(e.value)
    assert "load unit waits on token queue compute->load (empty)" in msg
    assert "instruction 0 (LOAD.INP sram=0 dram=A+0" in msg
    assert "compute unit waits on the load and store units to drain (FINISH)" in msg


def test_overfilled_token_queue_deadlocks(pynq):
    hw = pynq.with_changes(**{"queues.token_depth": 1})
    push = Deps(push_next=True)
    insns = [Gemm(True, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0, deps=push)] * 2 + [Finish()]
    with pytest.raises(DeadlockError, match=r"compute unit waits on token queue compute->store "
                                            r"\(full\) at instruction 1 \(GEMM reset"):
        simulate(_program(hw, insns), hw)


def test_full_command_queue_is_reported(pynq):
    hw = pynq.with_changes(**{"queues.command_depth": 1})
    wait = Load(MemType.INP, 0, 0, 1, 1, 1, deps=Deps(pop_next=True))
    with pytest.raises(DeadlockError, match=r"fetch unit waits on command queue load \(full\)"):
        simulate(_program(hw, [wait, wait, wait, Finish()]), hw)


def test_flag_without_queue(pynq):
    p = _program(pynq, [Load(MemType.INP, 0, 0, 1, 4, 4, deps=Deps(pop_prev=True))])
    with pytest.raises(SimError, match=r"instruction 0 .*pop_prev has no token queue on the load"):
        simulate(p, pynq)


@pytest.mark.parametrize("run", ["reference", "machine"])
@pytest.mark.parametrize("insn,uops,pattern", [
    (Gemm(False, 0, 1, 3, 1, 1000, 0, 0, 0, 0, 0), [Uop(100, 0, 0)],
     r"instruction 1 \(GEMM uop=0:1 iter=3,1 dst=1000,0 src=0,0 wgt=0,0\): acc index 2100 out "
     r"of range \(size 2048\) at iteration o=2, i=0, uop 0"),
    (Gemm(False, 0, 1, 1, 1, 0, 0, 0, 0, 0, 0), [Uop(0, 0, 1023)], None),  # in range: no error
    (Gemm(False, 0, 2, 1, 2, 0, 0, 0, 0, 0, 1000), [Uop(0, 0, 0), Uop(0, 0, 100)],
     r"wgt index 1100 out of range \(size 1024\) at iteration o=0, i=1, uop 1"),
    (Gemm(False, 8190, 8193, 1, 1, 0, 0, 0, 0, 0, 0), [],
     r"GEMM uop=8190:8193 .*uop index 8192 out of range \(size 8192\)"),
    (Load(MemType.INP, 2044, 0, 2, 4, 4, 0, 0, 0, 0), [],
     r"LOAD.INP sram=2044 .*inp index 2051 .*entries 2044..2051"),
    (Load(MemType.INP, 2040, 0, 2, 4, 4, 0, 1, 0, 0), [],
     r"inp index 2051 out of range \(size 2048\)"),
    (Load(MemType.INP, 0, 2, 2, 4, 20), [], r"instruction 1 \(LOAD.INP sram=0 dram=A\+2 y=2 "
     r"x=4 stride=20\): DRAM inp element 25 \(byte 415\) is outside the DRAM image"),
    (Store(MemType.OUT, 2047, 0, 1, 2, 2), [], r"STORE.OUT .*out index 2048"),
])
def test_out_of_range_names_the_instruction(pynq, run, insn, uops, pattern):
    b = ProgramBuilder(pynq)
    b.alloc("A", "inp", 16)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", uops)
    b.extend([Load(MemType.UOP, 0, u.base, 1, len(uops), len(uops)), insn, Finish()])
    p = b.build()
    go = (lambda: run_reference(p, pynq)) if run == "reference" else (lambda: simulate(p, pynq))
    if pattern is None:
        go()
        return
    with pytest.raises(AddressError, match=pattern):
        go()


def test_input_errors(pynq):
    p = _program(pynq, [Finish()])
    with pytest.raises(InputError, match="no DRAM allocation named 'B'"):
        Dram(p, pynq).write("B", np.zeros(1))
    with pytest.raises(InputError, match=r"input 'A' \(inp\): expected shape \(4, 1, 16\) of "
                                         r"int8 \(64 values\), got shape \(3, 16\)"):
        simulate(p, pynq, {"A": np.zeros((3, 16), dtype=np.int8)})
    with pytest.raises(InputError, match=r"values must lie in -128..127, got 0..300"):
        simulate(p, pynq, {"A": np.arange(64) * 300 // 63})
    with pytest.raises(InputError, match="got dtype float64"):
        run_reference(p, pynq, {"A": np.zeros(64)})
    with pytest.raises(InputError, match="micro-ops, which come from the program"):
        run_reference(p, pynq, {"U": np.zeros(0, dtype=np.uint32)})
    # any integer array of the right size and range is accepted, whatever its shape
    out = run_reference(p, pynq, {"A": np.arange(-32, 32, dtype=np.int64).reshape(8, 8)})
    assert out["A"].dtype == np.int8 and out["A"].shape == (4, 1, 16)
    assert out["A"].ravel().tolist() == list(range(-32, 32))


def test_random_inputs_cover_the_range(pynq):
    p = _program(pynq, [Finish()])
    ins = random_inputs(p, pynq, seed=3)
    assert set(ins) == {"A", "C"}
    assert ins["A"].dtype == np.int8 and ins["C"].dtype == np.int32
    assert ins["C"].min() < -2**30 and ins["C"].max() > 2**30
    assert np.array_equal(random_inputs(p, pynq, seed=3)["C"], ins["C"])


@pytest.mark.parametrize("engine", ["lean", "simpy"])
def test_an_execution_error_before_a_deadlock_is_the_one_raised(pynq, engine):
    """The arithmetic runs after the event loop in completion order (``Machine._values``):
    an out-of-range LOAD that completes before the program deadlocks is what is reported, as
    when it ran at its completion and stopped the run; timing-only, which executes nothing,
    reports the deadlock."""
    bad = Load(MemType.INP, 2040, 0, 1, 16, 16)  # entries 2040..2055 of 2048
    stuck = Store(MemType.OUT, 0, 8, 1, 1, 1, deps=Deps(pop_prev=True))  # never pushed
    p = _program(pynq, [bad, stuck, Finish()])
    with pytest.raises(AddressError, match=r"instruction 0 \(LOAD.INP sram=2040 .*inp index "
                                           r"2055 out of range \(size 2048\)"):
        simulate(p, pynq, engine=engine)
    with pytest.raises(DeadlockError, match=r"store unit waits on token queue compute->store "
                                            r"\(empty\) at instruction 1"):
        simulate(p, pynq, timing_only=True, engine=engine)
