"""An update plan whose destinations are one run of entries in some order and read nothing
else (``kernels.permuted_run``: the compiler's epilogues, micro-ops ``s`` apart interleaved
by an inner loop) is what the general plan gives: the same indices, hazards (none), order
decision, slices and ALU shortcut. ``permuted_run`` is held to its definition (the sorted
destinations are ``lo .. lo + n - 1``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vta.sim.kernels as K
from vta.isa import Alu, AluOp
from vta.isa.builtins import ALU
from vta.sim.kernels import Ctx, Sram, _micro_plan, permuted_run
from vta.testing import small_hw


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=1, max_size=14))
def test_permuted_run_is_its_definition(values: list[int]) -> None:
    a = np.array(values, dtype=np.int64)
    lo = min(values)
    want = lo if sorted(values) == list(range(lo, lo + len(values))) else None
    assert permuted_run(a) == want


def _plan_fields(p: K._MicroPlan) -> tuple[object, ...]:
    sel = None if p.sel is None else {k: v if isinstance(v, slice) else v.tolist()
                                      for k, v in p.sel.items()}
    return ({k: v.tolist() for k, v in p.idx.items()}, p.mode, p.hazards, sel, p.ordered,
            p.order, p.starts, p.entries, p.alu is None)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from([AluOp.MIN, AluOp.MAX, AluOp.ADD, AluOp.SHR]), st.booleans(),
       st.integers(1, 6), st.integers(1, 3), st.integers(1, 3), st.integers(0, 3),
       st.integers(0, 3), st.integers(0, 20), st.booleans(), st.data())
def test_run_plan_is_the_general_plan(op: AluOp, use_imm: bool, n: int, iter_out: int,
                                      iter_in: int, f_out: int, f_in: int, first: int,
                                      epilogue: bool, data: st.DataObject) -> None:
    """Micro-ops ``iter_in`` apart interleaved by a stride-1 inner loop (a run, when the loop
    fits the gap), or drawn at random (a run by chance, duplicates, gaps)."""
    hw = small_hw(batch=1, block=4, depth=128)
    if epilogue:
        dst = [first + k * iter_in for k in range(n)]
        f_in = 1
    else:
        dst = data.draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    src = data.draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    insn = Alu(op, False, 0, n, iter_out, iter_in, f_out, f_in, f_out, f_in, use_imm, 3)
    plans = []
    for fast in (True, False):
        K.shared_plans.cache_clear()
        sram = Sram(hw)
        sram.uop[0, :n], sram.uop[1, :n] = dst, src
        with pytest.MonkeyPatch.context() as mp:
            if not fast:
                mp.setattr(K, "permuted_run", lambda a: None)
            plans.append(_plan_fields(_micro_plan(sram, insn, ALU[op], Ctx(0, insn, None), 1)))
    assert plans[0] == plans[1]
