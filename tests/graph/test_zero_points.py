"""Zero points in the graph IR (asymmetric int8 and uint8-as-int8 tensors): each operator's
integer semantics against the real-valued formula it stands for, the host-side ``pad`` with
the zero point, and the accelerator's and the GPU path's bit-exactness with the interpreter on
a graph where every operator carries a zero point."""

from __future__ import annotations

import numpy as np
import pytest

from vta.errors import GraphError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.ir import Add, GlobalAvgPool, Graph, Requantize
from vta.graph.printer import format_graph
from vta.graph.verify import verify_graph
from vta.run.graph import compile_for, run_graph
from vta.run.targets import CudaEmuTarget

from .conftest import hw


def zero_graph() -> tuple[Graph, np.ndarray]:
    """Input zero point -7; padded conv (host pad with -7) + requantize to zero point -128 +
    ReLU (a clip at the zero point); conv + add of two asymmetric tensors; global average pool
    of an asymmetric tensor; dense of it (its zero point folded into the bias)."""
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, (1, 16, 8, 8), dtype=np.int8)
    b = GraphBuilder("zeros")
    xv = b.input("x", x.shape, 0.02, zero=-7)
    w1 = rng.integers(-40, 40, (16, 16, 3, 3), dtype=np.int8)
    bias1 = rng.integers(-300, 300, 16).astype(np.int64) + 7 * w1.reshape(16, -1).sum(axis=1)
    c1 = b.conv2d(b.pad(xv, 1, -7), b.const("w1", w1, 0.01),
                  b.const("b1", bias1.astype(np.int32)), pad=0, name="c1")
    r1 = b.requantize(c1, ratio=0.02 * 0.01 / 0.05, zero=-128, name="r1")
    y1 = b.clip(r1, -128, 127, name="y1")
    w2 = rng.integers(-40, 40, (16, 16, 1, 1), dtype=np.int8)
    bias2 = (128 * w2.reshape(16, -1).sum(axis=1)).astype(np.int32)
    c2 = b.requantize(b.conv2d(y1, b.const("w2", w2, 0.02), b.const("b2", bias2), name="c2"),
                      ratio=0.05 * 0.02 / 0.06, zero=9, name="r2")
    s = b.add(c2, y1, 0.08, ratios=(0.06 / 0.08, 0.05 / 0.08), zero=-20, name="s")
    g = b.global_avg_pool(s, 0.03, ratio=0.08 / (64 * 0.03), zero=5, name="gap")
    wf = rng.integers(-60, 60, (10, 16), dtype=np.int8)
    bf = (-5 * wf.astype(np.int64).sum(axis=1)).astype(np.int32)
    out = b.requantize(b.dense(g, b.const("wf", wf, 0.01), b.const("bf", bf), name="fc"),
                       ratio=0.03 * 0.01 / 0.1, zero=3, name="logits")
    return b.build([out]), x


def test_each_operator_computes_its_real_valued_formula() -> None:
    """Dequantized, every output is the rounded real-valued result of its dequantized inputs
    (within one unit of the fixed-point multiplier's rounding)."""
    g, x = zero_graph()
    env = interp.run_graph(g, {"x": x})
    for n in g.nodes:
        out = env[n.output].astype(np.float64)
        t = n.output.type
        if isinstance(n, Requantize):
            acc = env[n.x].astype(np.float64) * n.x.type.scale
            want = np.clip(np.rint(acc / t.scale) + t.zero, -128, 127)
        elif isinstance(n, Add):
            real = sum((env[v].astype(np.float64) - v.type.zero) * v.type.scale
                       for v in (n.a, n.b))
            want = np.clip(np.rint(real / t.scale) + t.zero, -128, 127)
        elif isinstance(n, GlobalAvgPool):
            real = ((env[n.x].astype(np.float64) - n.x.type.zero) * n.x.type.scale).mean(
                axis=(2, 3))
            want = np.clip(np.rint(real / t.scale) + t.zero, -128, 127)
        else:
            continue
        assert np.abs(out - want).max() <= 1, n.op


def test_the_pad_writes_the_zero_point_and_the_graph_prints_it() -> None:
    g, x = zero_graph()
    env = interp.run_graph(g, {"x": x})
    pad = g.nodes[0]
    padded = env[pad.output]
    assert padded.shape == (1, 16, 10, 10)
    assert (padded[:, :, 0, :] == -7).all() and (padded[:, :, 1:-1, 1:-1] == x).all()
    text = format_graph(g)
    assert "zero=-7" in text and "pad(%x, pad=1, value=-7)" in text
    assert "zero_a=9, zero_b=-128, zero=-20" in text


def test_a_symmetric_graph_prints_no_zero_point() -> None:
    b = GraphBuilder("sym")
    xv = b.input("x", (1, 4), 0.1)
    y = b.requantize(b.dense(xv, b.const("w", np.ones((2, 4), np.int8), 0.1),
                             b.const("b", np.zeros(2, np.int32))), 0.5)
    assert "zero" not in format_graph(b.build([y]))


def test_an_add_whose_zero_points_are_not_its_operands_is_refused() -> None:
    g, _ = zero_graph()
    add = next(n for n in g.nodes if isinstance(n, Add))
    bad = Add(add.a, add.b, add.mult_a, add.mult_b, add.shift, add.lo, add.hi, add.out,
              zero_a=0, zero_b=add.zero_b, zero=add.zero)
    with pytest.raises(GraphError, match="zero_a is 0, but r2 has zero point 9"):
        verify_graph(g.with_nodes([bad if n is add else n for n in g.nodes]))


def test_zero_points_run_bit_exact_on_the_accelerator() -> None:
    """pynq_mul (the scales need ALU MUL): every stored tensor equal to the interpreter's,
    every MAC on the accelerator, no host step (the zero-point pad folded into its
    convolution: ``passes.fold_pad``)."""
    g, x = zero_graph()
    r = run_graph(compile_graph(g, hw("pynq_mul"), refine=1), {"x": x})
    s = r.summary()
    assert r.passed, s["verdict"]
    assert s["mac_share"] == 1.0
    assert [st["ops"] for st in s["steps"] if st["placement"] == "cpu"] == []


def test_zero_points_run_bit_exact_on_the_gpu_path() -> None:
    g, x = zero_graph()
    r = run_graph(compile_for(g, CudaEmuTarget()), {"x": x})
    assert r.passed, r.summary()["mismatched_tensors"]


def per_channel_graph() -> tuple[Graph, np.ndarray]:
    """A padded conv of an asymmetric input, requantized per output channel (32 different
    ratios) to an asymmetric output, then its ReLU (a clip at the zero point)."""
    rng = np.random.default_rng(1)
    x = rng.integers(-128, 128, (1, 16, 8, 8), dtype=np.int8)
    b = GraphBuilder("per_channel")
    xv = b.input("x", x.shape, 0.02, zero=3)
    w = rng.integers(-50, 50, (32, 16, 3, 3), dtype=np.int8)
    c = b.conv2d(b.pad(xv, 1, 3), b.const("w", w, 0.01),
                 b.const("b", rng.integers(-99, 99, 32).astype(np.int32)))
    ratios = [float(r) for r in 0.02 * rng.uniform(0.005, 0.02, 32) / 0.05]
    r = b.requantize_channels(c, ratios, 0.05, zero=-4)
    return b.build([b.clip(r, -4, 127)]), x


def test_per_channel_multipliers_approximate_each_ratio() -> None:
    g, x = per_channel_graph()
    rq = next(n for n in g.nodes if isinstance(n, Requantize))
    assert rq.mults is not None and rq.mults.data is not None and rq.mult == 1
    env = interp.run_graph(g, {"x": x})
    acc = env[rq.x].astype(np.float64)
    ratio = rq.mults.data.astype(np.float64) / 2 ** rq.shift
    want = np.clip(np.rint(acc * ratio[None, :, None, None]) - 4, -128, 127)
    assert np.abs(env[rq.output] - want).max() <= 1
    assert len(set(rq.mults.data.tolist())) > 1


def test_per_channel_runs_bit_exact_on_the_accelerator_and_the_gpu_path() -> None:
    g, x = per_channel_graph()
    r = run_graph(compile_graph(g, hw("pynq_mul"), refine=1), {"x": x})
    assert r.passed and r.summary()["mac_share"] == 1.0
    assert run_graph(compile_for(g, CudaEmuTarget()), {"x": x}).passed
