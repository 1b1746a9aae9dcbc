"""The graph IR: builder typing, the verifier's named errors, the printer, quantization."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from vta.errors import GraphError
from vta.graph.builder import GraphBuilder
from vta.graph.ir import Add, Conv2d, Graph, Relu, TensorType, Value, node_macs, split_shift
from vta.graph.printer import format_graph
from vta.graph.quant import fixed_point, fixed_point_pair
from vta.graph.verify import verify_graph


def _tiny() -> tuple[GraphBuilder, Value]:
    rng = np.random.default_rng(0)
    b = GraphBuilder("tiny")
    x = b.input("x", (1, 16, 6, 6), 1 / 128)
    w = b.const("w", rng.integers(-50, 50, (32, 16, 3, 3), dtype=np.int8), 0.01)
    bias = b.const("b", rng.integers(-100, 100, (32,), dtype=np.int32))
    return b, b.conv2d(x, w, bias, stride=2, pad=1)


def test_builder_types_every_value() -> None:
    b, c = _tiny()
    assert c.type == TensorType((1, 32, 3, 3), "int32", "NCHW", (1 / 128) * 0.01)
    q = b.requantize(c, scale=0.05, lo=0)
    assert q.type.dtype == "int8" and q.type.shape == (1, 32, 3, 3)
    # the output scale is the one the fixed-point pair gives
    node = b.nodes[-1]
    assert math.isclose(q.type.scale, c.type.scale * 2 ** node.shift / node.mult)
    assert abs(q.type.scale / 0.05 - 1) < 1e-3
    r = b.relu(q)
    p = b.max_pool2d(r, 2, 2)
    a = b.global_avg_pool(p, scale=0.05)
    g = b.build([a])
    assert [n.op for n in g.nodes] == ["conv2d", "requantize", "relu", "max_pool2d",
                                        "global_avg_pool"]
    assert a.type.shape == (1, 32) and a.type.layout == "NC"
    assert node_macs(g.nodes[0]) == 32 * 3 * 3 * 16 * 9 == g.macs


def test_builder_refuses_mismatched_operands_by_name() -> None:
    b, c = _tiny()
    x2 = b.input("y", (1, 8, 6, 6), 1 / 128)
    with pytest.raises(GraphError, match=r"add bad: operands conv_q \[1, 32, 3, 3\] and y_relu "
                       r".* differ in shape"):
        b.add(b.requantize(c, scale=0.1), b.relu(x2), scale=0.1, name="bad")
    w = b.const("w2", np.zeros((4, 3, 3, 3), np.int8), 0.01)
    bias = b.const("b2", np.zeros((4,), np.int32))
    with pytest.raises(GraphError, match="conv2d c2: weight w2 has 3 input channels, input y"):
        b.conv2d(x2, w, bias, name="c2")
    with pytest.raises(GraphError, match="pad must be an integer in \\[0, 2\\], got 3"):
        b.conv2d(b.inputs[0], b.const("w3", np.zeros((4, 16, 3, 3), np.int8), 0.1),
                 bias, pad=3)
    with pytest.raises(GraphError, match=r"requantize .* input .* must be int32"):
        b.requantize(x2, scale=0.1)


def test_verifier_names_what_is_wrong() -> None:
    b, c = _tiny()
    q = b.requantize(c, scale=0.1)
    g = b.build([q])
    conv, rq = g.nodes
    # a node reading a value nobody defines
    ghost = Value("ghost", TensorType((1, 32, 3, 3), "int8", "NCHW", 0.1))
    bad = Relu(ghost, Value("r", ghost.type))
    with pytest.raises(GraphError, match="reads ghost, which is not an input"):
        verify_graph(Graph("g", g.inputs, (bad.out,), (*g.nodes, bad)))
    # nodes out of order
    with pytest.raises(GraphError, match="reads conv, which is not"):
        verify_graph(Graph("g", g.inputs, g.outputs, (rq, conv)))
    # a value defined twice
    with pytest.raises(GraphError, match="defined twice"):
        verify_graph(Graph("g", g.inputs, g.outputs, (conv, conv, rq)))
    # an output type that does not follow the operator's rule
    wrong = Relu(q, Value("r2", TensorType((1, 32, 3, 3), "int32", "NCHW", 0.1)))
    with pytest.raises(GraphError, match=r"output r2 is int32.*the operator gives int8"):
        verify_graph(Graph("g", g.inputs, (wrong.out,), (*g.nodes, wrong)))
    # a constant whose data does not match its type
    w = conv.weight
    fake = Value(w.name, w.type, np.zeros((1,), np.int8))
    c2 = Conv2d(conv.x, fake, conv.bias, conv.stride, conv.pad, conv.out)
    with pytest.raises(GraphError, match="constant w holds int8\\[1\\]"):
        verify_graph(Graph("g", g.inputs, g.outputs, (c2, rq)))
    # an output nobody computes
    with pytest.raises(GraphError, match="output ghost is not computed"):
        verify_graph(Graph("g", g.inputs, (ghost,), g.nodes))


def test_printer_shows_every_node_with_its_type() -> None:
    b, c = _tiny()
    q = b.requantize(c, scale=0.1, lo=0)
    a = b.add(q, q, scale=0.2)
    text = format_graph(b.build([a]))
    lines = text.splitlines()
    assert lines[0] == "graph tiny(%x: int8[1, 16, 6, 6] NCHW scale=0.0078125) {"
    assert lines[1].startswith("  %conv = conv2d(%x, @w, @b, stride=2, pad=1) : int32[1, 32, 3, 3]")
    assert "%add = add(%conv_q, %conv_q, mult_a=" in text
    assert lines[-2:] == ["  return %add", "}"]


@given(st.floats(1e-6, 0.9), st.integers(1, 1 << 24))
def test_fixed_point_is_precise_and_cannot_overflow(ratio: float, bound: int) -> None:
    mult, shift = fixed_point(ratio, bound)
    assert 1 <= shift <= 31 and 0 < mult < 1 << 15
    _, post = split_shift(shift)
    assert bound * mult + (1 << (post - 1)) < 1 << 31  # no int32 wrap for any |x| <= bound
    # as precise as a 15-bit multiplier allows under the bound
    err = abs(mult / 2 ** shift - ratio) / ratio
    assert err <= 2 ** -(min(14, math.floor(math.log2((2 ** 31 - 1) / bound))) - 1) or \
        shift == 31


def test_fixed_point_refuses_what_it_cannot_represent() -> None:
    with pytest.raises(GraphError, match="cannot be represented"):
        fixed_point(1e6, 1 << 20)
    with pytest.raises(GraphError, match="positive finite"):
        fixed_point(-1.0, 10)
    ma, mb, shift = fixed_point_pair((0.5, 0.25), (128, 128))
    assert ma == 2 * mb and ma / 2 ** shift == 0.5


def test_add_node_fields() -> None:
    b, c = _tiny()
    q = b.requantize(c, scale=0.1)
    a = b.add(q, q, scale=0.1)
    node = b.nodes[-1]
    assert isinstance(node, Add) and node.a is q and node.b is q and a is node.out
    assert node.attrs().keys() == {"mult_a", "mult_b", "shift", "lo", "hi"}


def test_magnitudes_are_the_int64_sums_of_the_weights() -> None:
    """``magnitude`` and ``channel_magnitudes`` of a convolution's output: per channel
    ``sum |w| * 128 + |b|`` as an int64 copy of every weight gives it (int8 weights are taken
    in int16: -128 included), capped at int32's largest."""
    rng = np.random.default_rng(1)
    b = GraphBuilder("m")
    x = b.input("x", (1, 8, 4, 4), 1 / 128)
    wd = rng.integers(-128, 128, (4, 8, 3, 3)).astype(np.int8)
    wd[0] = -128
    bd = np.array([5, -(1 << 30), 7, -3], dtype=np.int32)
    c = b.conv2d(x, b.const("w", wd, 0.01), b.const("b", bd), pad=1)
    want = (np.abs(wd.astype(np.int64)).reshape(4, -1).sum(axis=1) * 128
            + np.abs(bd.astype(np.int64)))
    assert b.channel_magnitudes(c) == [int(min(v, 2**31 - 1)) for v in want]
    assert b.magnitude(c) == int(min(want.max(), 2**31 - 1))
    assert b.magnitude(x) == 128
