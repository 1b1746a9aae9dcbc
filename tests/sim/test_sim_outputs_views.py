"""A run's outputs are its DRAM image's own typed views where the entry dtype is native
(``Dram.outputs``: no converting copy of the image): ``Dram.read``'s values, dtypes and
shapes, sharing the result's image, and untouched by a later run of the same program."""

from __future__ import annotations

import numpy as np

from vta.isa import Alu, AluOp, Deps, Finish, Load, MemType, ProgramBuilder, Store, Uop
from vta.sim import random_inputs, simulate
from vta.sim.dram import Dram
from vta.testing import small_hw


def test_outputs_are_the_images_views_and_stay_a_runs_own() -> None:
    hw = small_hw(batch=1, block=4, depth=128)
    b = ProgramBuilder(hw)
    x = b.alloc("X", "acc", 8)
    y = b.alloc("Y", "out", 8)
    u = b.alloc("U", "uop", 0)
    b.add_uops("U", [Uop(0, 0, 0)])
    b.extend([Load(MemType.UOP, 0, u.base, 1, 1, 1), Load(MemType.ACC, 0, x.base, 1, 8, 8),
              Alu(AluOp.ADD, False, 0, 1, 8, 1, 1, 0, 0, 0, True, 5,
                  deps=Deps(push_next=True)),
              Store(MemType.OUT, 0, y.base, 1, 8, 8, deps=Deps(pop_prev=True)), Finish()])
    program = b.build()
    first = simulate(program, hw, random_inputs(program, hw, 1))
    kept = {k: v.copy() for k, v in first.outputs.items()}
    dram = Dram(program, hw)
    dram.buf[...] = first.dram
    for name, v in first.outputs.items():
        want = dram.read(name)
        assert v.dtype == want.dtype and v.shape == want.shape
        np.testing.assert_array_equal(v, want)
        assert np.shares_memory(v, first.dram)
    simulate(program, hw, random_inputs(program, hw, 2))  # a later run: its own image
    for name, v in kept.items():
        np.testing.assert_array_equal(first.outputs[name], v)
