"""The values pass of round 15 (issue 22): an accumulating GEMM whose sums wait is issued
through what its first issue found (``gemm._Waiting``), and a pending sum's float32 bound is
one limit on its tensor ops (``FastGemm._single_limit``). Each gives the reference
interpreter's values."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tests.sim._sim_helpers import counting_calls
from tests.sim.test_sim_gemm_paths import gemm_program
from vta.config import HwConfig
from vta.isa import Deps, Uop
from vta.sim import random_inputs, run_reference, simulate
from vta.sim.gemm import FastGemm
from vta.sim.kernels import Sram


def _repeated(hw: HwConfig, n: int):
    """``n`` accumulating GEMMs of three taps onto acc entries 0..7, then a STORE."""
    uops = [Uop(dst=0, src=t, wgt=t) for t in range(3)]
    base = gemm_program(hw, uops, 2, 4, (4, 1, 8, 1, 0, 0), 8)
    insns = list(base.instructions)
    g = insns[4]
    insns[4:5] = [replace(g, deps=Deps())] * (n - 1) + [g]
    return replace(base, instructions=tuple(insns))


@pytest.mark.parametrize("n", [1, 4, 21, 22])
def test_a_waiting_gemm_is_issued_through_its_first_issue(pynq: HwConfig, monkeypatch,
                                                          n: int) -> None:
    """``n`` GEMMs onto one acc run (``m`` = 3 tensor ops each): the plan is asked once per
    instruction object and its layout likewise (the first issue's ``_Waiting`` serves the
    rest, where every issue used to ask ``_layout``), each issue adds to the pending sum,
    which holds ``3 n`` ops when applied up to float32's exact bound (63 ops on pynq: 21
    GEMMs; the 22nd starts a new sum), and the values are the reference interpreter's."""
    calls = counting_calls(monkeypatch, FastGemm, ("_defer", "_layout", "_fields_plan"))
    ops: list[int] = []
    apply = FastGemm._apply

    def noted(self: FastGemm, p) -> None:
        ops.append(p.m)
        apply(self, p)

    monkeypatch.setattr(FastGemm, "_apply", noted)
    program = _repeated(pynq, n)
    inputs = random_inputs(program, pynq, n)
    got = simulate(program, pynq, inputs).outputs["C"]
    np.testing.assert_array_equal(got, run_reference(program, pynq, inputs)["C"])
    # (two instruction objects: the first n - 1 issues' and the last's)
    assert calls == {"_defer": n, "_layout": min(n, 2), "_fields_plan": min(n, 2)}
    assert ops == ([63, 3] if n == 22 else [3 * n])


def test_the_single_limit_is_the_float32_bound() -> None:
    """``FastGemm._single`` (through ``_single_limit``) answers ``m * block_in * biggest <
    2**24`` on float64 wide shadows, and no ``m`` on int64 ones."""
    from vta.isa.builtins import GEMM
    from vta.testing import small_hw

    g = FastGemm(Sram(small_hw()), True, GEMM)
    bound = [m for m in range(1, 5000) if m * g.bi * g.biggest < 2**24]
    assert [m for m in range(1, 5000) if g._single(m)] == bound
    g.dtype = np.int64
    assert not any(g._single(m) for m in range(0, 5000))
