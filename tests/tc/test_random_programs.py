"""Differential tests on random TC programs (``tc_strategies.tc_programs``): the compiled
results on the simulated accelerator (automatic mapping: GEMM, ALU, CPU fallback) and in the
SIMT emulator (automatic GPU mapping) equal the TC interpreter bit for bit, and the tensor IR
lowered with a plain schedule equals it too."""

from __future__ import annotations

import numpy as np
from hypothesis import assume, given, settings
from tc_strategies import tc_programs

from vta.compiler import create_schedule, run_func
from vta.compiler.ir.lower import lower
from vta.compiler.tc import TcRangeError, load
from vta.compiler.tc.frontend import Definition, random_inputs
from vta.compiler.tc.interp import NP_DTYPE
from vta.compiler.tc.ranges import Concrete
from vta.config import HwConfig
from vta.run.targets import AccelTarget, CudaEmuTarget
from vta.run.tc import run_gpu, run_vta

#: both targets compile and run every drawn program: half of the profile's examples
EXAMPLES = max(5, settings().max_examples // 2)


def _instantiate(src: str, sizes: dict[str, int]) -> tuple[Definition, Concrete]:
    """The definition at its sizes; a draw whose statement tensor empties a later range is
    rejected (the strategy cannot rule that out without doing range inference itself)."""
    d = load(src, "rand.tc")
    try:
        return d, d.at(sizes)
    except TcRangeError:
        assume(False)
        raise


@settings(max_examples=EXAMPLES)
@given(tc_programs())
def test_random_programs_on_both_targets(pynq: HwConfig, prog: tuple[str, dict[str, int]]
                                         ) -> None:
    src, sizes = prog
    d, c = _instantiate(src, sizes)
    ins = random_inputs(d, c, seed=7)
    r = run_vta(d, sizes, AccelTarget(pynq), ins)
    assert r.passed, (src, sizes, r.mismatches, [t.line() for t in r.tasks])
    g = run_gpu(d, sizes, CudaEmuTarget(), inputs=ins)
    assert g.passed, (src, sizes, g.mismatches)


@settings(max_examples=EXAMPLES)
@given(tc_programs())
def test_random_programs_lower_to_equivalent_ir(prog: tuple[str, dict[str, int]]) -> None:
    src, sizes = prog
    d, c = _instantiate(src, sizes)
    ins = random_inputs(d, c, seed=3)
    ref = d.interpret(c, ins)
    f = d.to_ir(sizes)
    func = lower(create_schedule(list(f.outputs)), f.args, d.name)
    arrays = {**{k: v.copy() for k, v in ins.items()},
              **{o: np.zeros(c.shapes[o], NP_DTYPE[d.cdef.tensors[o].dtype])
                 for o in d.cdef.outputs}}
    run_func(func, arrays)
    for o in d.cdef.outputs:
        assert np.array_equal(arrays[o], ref[o]), (src, sizes, o)
