"""A run's outputs are its DRAM image's own typed views where the entry dtype is native
(``Dram.outputs``: no converting copy of the image): ``Dram.read``'s values, dtypes and
shapes, sharing the result's image, and untouched by a later run of the same program."""

from __future__ import annotations

import numpy as np
import pytest
from _sim_helpers import alu_program

from vta.sim import random_inputs, simulate
from vta.sim.dram import Dram
from vta.testing import small_hw


def test_outputs_are_the_images_views_and_stay_a_runs_own() -> None:
    hw = small_hw(batch=1, block=4, depth=128)
    program = alu_program(hw)
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


def test_outputs_are_read_only_and_the_image_is_not() -> None:
    """An in-place edit of an output would change the image it views (and every other view):
    each output refuses it; the result's image itself, and a copy, stay writable."""
    hw = small_hw(batch=1, block=4, depth=128)
    program = alu_program(hw)
    res = simulate(program, hw, random_inputs(program, hw, 3))
    assert res.outputs
    for name, v in res.outputs.items():
        assert not v.flags.writeable, name
        with pytest.raises(ValueError, match="read-only"):
            v[...] = 0
        mine = np.array(v)
        mine[...] = 0  # a copy is the caller's own
    before = res.dram.copy()
    res.dram[:1] = res.dram[:1]  # the image stays writable
    np.testing.assert_array_equal(res.dram, before)
