"""Round half to even by a power of two (ONNX Runtime's rounding) on VTA's stock ALU.

* ``ops.chain.even_rounding``'s two tensor-IR halves, evaluated on every int32 value of a wide
  span (ties of both parities, the int32 ends), equal ``vta.float_scale.rne_shift`` (itself
  proven against numpy's ``rint`` in tests/graph/test_quant_even.py);
* on ``hwconfigs/pynq.yaml`` (ALU MIN/MAX/ADD/SHR) a convolution's requantize and a stand-alone
  add with ``even`` run on the accelerator, bit-exact against the graph interpreter, with
  ties on most values (shift 1 and 2); the cuda-emu target runs the same graphs;
* the instructions one accumulator entry costs: a reset, the copy's ADD, ADD / SHR / SHR on
  the copy, ADD / MAX / SHR on the value (then the zero point and the clip, as half up has);
  the schedule model counts the copy's acc tile (``ChainCost.copies``);
* a shift the ALU's immediates cannot hold (16 and more) is named and goes to the host;
* the built-in graphs (``Requantize.even`` False) keep half up and their instructions.
"""

from __future__ import annotations

import numpy as np
import pytest
from _vta_helpers import ROOT

from tests.graph.conftest import even_add_graph, even_conv_graph
from vta.compiler.accel.ops.chain_plan import chain_cost, chain_instructions, chain_plan
from vta.compiler.ir import expr as E
from vta.compiler.ops.chain import (
    EVEN_ROUND_MAX_SHIFT,
    Chain,
    even_round_stage,
    even_rounding,
    round_clip_stage,
)
from vta.config import HwConfig
from vta.errors import CompileError, GraphError
from vta.float_scale import rne_shift
from vta.gpu.nvcc import compile_ptx_batch, find_nvcc
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.ir import Add, Graph, Requantize
from vta.graph.place import HostOp, Kernel
from vta.graph.quant import EVEN_SHIFT_ALU_OPS
from vta.graph.verify import infer_type
from vta.run.graph import compile_for, run_graph
from vta.run.targets import CudaEmuTarget


def hw(name: str = "pynq") -> HwConfig:
    return HwConfig.from_yaml(ROOT / "hwconfigs" / f"{name}.yaml")


def _eval(e: E.Expr, env: dict[E.Var, np.ndarray]) -> np.ndarray:
    """``e`` (ADD, MAX, SHR, SHL of variables and constants) on int64 arrays, each step
    wrapped to int32 as the ALU's arithmetic is."""
    if isinstance(e, E.Var):
        return env[e]
    if isinstance(e, E.IntImm):
        return np.int64(e.value)  # type: ignore[return-value]
    if isinstance(e, E.Cast):
        return _eval(e.value, env)
    a, b = _eval(e.a, env), _eval(e.b, env)  # type: ignore[attr-defined]
    ops = {E.Add: np.add, E.Max: np.maximum, E.Min: np.minimum, E.Shr: np.right_shift,
           E.Shl: np.left_shift}
    r = ops[type(e)](a, b)
    return ((r + 2**31) % 2**32) - 2**31  # type: ignore[no-any-return]


@pytest.mark.parametrize("shift", [1, 2, 3, 7, 9, 15])
def test_even_rounding_is_rne_shift(shift: int) -> None:
    side, join = even_rounding(shift)
    x, u = E.Var("x", "int32"), E.Var("u", "int32")
    span = 1 << (shift + 3)
    t = np.concatenate([np.arange(-span, span + 1),
                        [2**30, -2**31 + 2**shift, 2**31 - 2**shift - 1]]).astype(np.int64)
    copy = _eval(side(E.const(0, "int32"), x), {x: t})
    assert np.array_equal(_eval(join(x, u), {x: t, u: copy}), rne_shift(t, shift))


def test_even_rounding_refuses_shift_0() -> None:
    with pytest.raises(CompileError, match=r"1\.\.31"):
        even_rounding(0)


def test_even_round_costs_seven_alu_instructions_and_a_reset() -> None:
    h = hw()
    even = Chain((even_round_stage(9, -128, 127),))
    up = Chain((round_clip_stage(0, 9, -128, 127),))
    names = [s.intrin.instruction.name for s in chain_plan(even, h)]
    assert names == ["ALU.ADD", "ALU.ADD", "ALU.SHR", "ALU.SHR", "ALU.ADD", "ALU.MAX",
                     "ALU.SHR", "ALU.MAX", "ALU.MIN"]
    assert len(names) - 2 == EVEN_SHIFT_ALU_OPS  # less the clip both forms have
    assert [s.intrin.instruction.name for s in chain_plan(up, h)] == \
        ["ALU.ADD", "ALU.SHR", "ALU.MAX", "ALU.MIN"]
    insns = chain_instructions(even, h)
    assert insns[0][0].name == "GEMM" and insns[0][1]["reset"] is True  # the copy's reset
    cost = chain_cost(even, h)
    assert cost.copies == 1 and cost.positions == 0 and chain_cost(up, h).copies == 0


def test_even_round_beyond_the_immediates_is_named() -> None:
    with pytest.raises(CompileError, match="round_even"):
        chain_plan(Chain((even_round_stage(EVEN_ROUND_MAX_SHIFT + 1, -128, 127),)), hw())


def _inputs(g: Graph, seed: int = 3) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {v.name: rng.integers(-128, 128, v.type.shape, dtype=np.int8) for v in g.inputs}


@pytest.mark.parametrize("ratio", [0.5, 0.25, 2.0**-9])
def test_conv_requantize_even_on_stock_pynq(ratio: float) -> None:
    g = even_conv_graph(ratio)
    (rq,) = [n for n in g.nodes if isinstance(n, Requantize)]
    assert rq.even and rq.mult == 1
    cg = compile_graph(g, hw(), refine=1)
    assert [type(s) for s in cg.steps] == [Kernel]
    r = run_graph(cg, _inputs(g))
    assert r.passed
    assert run_graph(compile_for(g, CudaEmuTarget()), _inputs(g)).passed


def test_add_even_on_stock_pynq_ties_everywhere() -> None:
    g = even_add_graph()
    (add,) = [n for n in g.nodes if isinstance(n, Add)]
    assert add.even and add.shift == 1  # every odd sum is a tie
    cg = compile_graph(g, hw(), refine=1)
    assert [type(s) for s in cg.steps] == [Kernel]
    inputs = _inputs(g)
    r = run_graph(cg, inputs)
    assert r.passed
    s = inputs["x"].astype(np.int64) + inputs["y"]
    assert np.array_equal(r.outputs[g.outputs[0]].astype(np.int64),
                          np.clip(np.rint(s / 2), -128, 127))
    assert run_graph(compile_for(g, CudaEmuTarget()), inputs).passed


def test_even_kernels_compile_with_nvcc() -> None:
    """The GPU kernels of both graphs (the even stage inlined) compile to PTX."""
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed: the kernels cannot be compiled to PTX")
    sources = [k.source for g in (even_conv_graph(2.0**-9), even_add_graph())
               for k, _ in filter(None, compile_for(g, CudaEmuTarget()).kernels)]
    assert sources and any("max(" in s for s in sources)
    compile_ptx_batch(sources, "sm_80")


def test_half_even_costs_cycles_over_half_up() -> None:
    """The same convolution with its requantize rounding half up and half to even: the even
    one costs more cycles, and the half-up one is what it was (its graph has no even)."""
    cyc = {}
    for even in (False, True):
        g = even_conv_graph(2.0**-9, even=even)
        cyc[even] = run_graph(compile_graph(g, hw(), refine=1), _inputs(g)).summary()["cycles"]
    assert cyc[True] > cyc[False]


def test_a_shift_beyond_the_immediates_runs_on_the_host_by_name() -> None:
    g = even_conv_graph(2.0**-17)
    cg = compile_graph(g, hw(), refine=1)
    (step,) = cg.steps
    assert isinstance(step, HostOp) and "round_even" in step.reason
    assert run_graph(cg, _inputs(g)).passed


def test_even_needs_a_shift_alone() -> None:
    b = GraphBuilder("bad")
    x = b.input("x", (1, 16), 1 / 128)
    w = b.const("w", np.ones((16, 16), np.int8), 1 / 128)
    bias = b.const("b", np.zeros(16, np.int32))
    q = b.requantize(b.dense(x, w, bias), ratio=0.3, even=True)  # not a power of two
    g = b.build([q])
    (rq,) = [n for n in g.nodes if isinstance(n, Requantize)]
    assert not rq.even  # half up where the multiplier is not 1
    with pytest.raises(GraphError, match="a shift alone"):
        infer_type(Requantize, (rq.x,), {**rq.attrs(), "even": True}, "requantize q")
