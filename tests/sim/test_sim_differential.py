"""Random valid programs: the cycle-level machine and the reference agree on every DRAM byte,
and timing-only runs give the same cycle counts."""

from __future__ import annotations

import numpy as np
from hypothesis import event, given
from hypothesis import strategies as st
from strategies import hw_configs, programs

from vta.isa import assemble, disassemble
from vta.sim import random_inputs, reference_dram, simulate


@given(st.data(), st.integers(0, 2**32 - 1))
def test_machine_matches_reference(data, seed):
    hw = data.draw(hw_configs(), label="hw")
    program = data.draw(programs(hw), label="program")
    inputs = random_inputs(program, hw, seed)
    expect = reference_dram(program, hw, inputs).buf
    result = simulate(program, hw, inputs)
    np.testing.assert_array_equal(result.dram, expect)
    computed = any(result.outputs[a.name].any() for a in program.allocations if a.kind == "out")
    event("out: computed values" if computed else "out: all zero")  # --hypothesis-show-statistics
    timing = simulate(program, hw, inputs, timing_only=True)
    assert timing.cycles == result.cycles
    assert timing.stats.units == result.stats.units
    for u in result.stats.units.values():
        assert min(u.busy, u.token, u.queue, u.memory, u.idle) >= 0


@given(st.data())
def test_generated_programs_round_trip_through_assembly(data):
    hw = data.draw(hw_configs(), label="hw")
    program = data.draw(programs(hw), label="program")
    assert assemble(disassemble(program), hw) == program
