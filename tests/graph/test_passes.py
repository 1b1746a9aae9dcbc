"""Graph passes: fusion (groups, levels, semantics kept), layout and memory planning."""

from __future__ import annotations

import numpy as np
import pytest

from vta.errors import GraphError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.ir import Fused, Graph
from vta.graph.passes.fuse import fuse, group_nodes


def _ops(g: Graph) -> list[str]:
    return ["+".join(n.op for n in group_nodes(m)) for m in g.nodes]


def test_full_fusion_of_resnet18(small_resnet: Graph) -> None:
    f = fuse(small_resnet)
    ops = _ops(f)
    # stem, max-pool, 8 blocks (conv+relu, conv+add+relu; a 1x1 shortcut in 3 of them),
    # average pool, classifier
    assert ops[:4] == ["conv2d+requantize+relu", "max_pool2d", "conv2d+requantize+relu",
                       "conv2d+requantize+add+relu"]
    assert ops.count("conv2d+requantize+add+relu") == 8
    assert ops.count("conv2d+requantize") == 3  # the downsampling shortcuts
    assert ops[-2:] == ["global_avg_pool", "dense+requantize"]
    assert len(f.nodes) == 23
    # every value a group reads is computed before it
    seen = {id(v) for v in f.inputs}
    for n in f.nodes:
        assert all(v.is_const or id(v) in seen for v in n.inputs)
        seen.add(id(n.output))


def test_fusion_levels(small_resnet: Graph) -> None:
    assert set(_ops(fuse(small_resnet, "requant"))) == {
        "conv2d+requantize", "relu", "max_pool2d", "add", "global_avg_pool",
        "dense+requantize"}
    assert all(not isinstance(n, Fused) for n in fuse(small_resnet, "none").nodes)
    with pytest.raises(GraphError, match="fusion level must be one of"):
        fuse(small_resnet, "max")


def test_fusion_keeps_every_value(small_resnet: Graph, small_image: np.ndarray) -> None:
    """The fused graph computes the same integers (the interpreter runs the chains)."""
    want = interp.run_graph(small_resnet, {"image": small_image})
    got = interp.run_graph(fuse(small_resnet), {"image": small_image})
    for v, a in want.items():
        assert np.array_equal(got[v], a), v.name


def test_add_joins_the_later_operand_and_shared_values_stay() -> None:
    """An add joins the group of an operand computed after the other one; a value with two
    readers (or a graph output) ends its group."""
    rng = np.random.default_rng(1)
    b = GraphBuilder("t")
    x = b.input("x", (1, 16, 4, 4), 0.01)

    def conv(name: str):  # type: ignore[no-untyped-def]
        w = b.const(f"{name}_w", rng.integers(-9, 9, (16, 16, 1, 1), dtype=np.int8), 0.01)
        bias = b.const(f"{name}_b", np.zeros(16, np.int32))
        return b.requantize(b.conv2d(x, w, bias, name=name), scale=0.02)

    p = conv("p")
    q = conv("q")
    s = b.add(p, q, scale=0.03)  # q's group was made after p's: the add joins q's
    r = b.relu(s)
    t = b.add(r, x, scale=0.05)  # r has a second reader below: t starts its own group
    g = b.build([t, r])
    f = fuse(g)
    assert _ops(f) == ["conv2d+requantize", "conv2d+requantize+add+relu", "add"]


def test_plans(compiled_small) -> None:  # type: ignore[no-untyped-def]
    """Layouts: one pack at the input, one unpack at the output; every tensor in the exact
    packed layout; memory: live tensors never overlap, freed space is reused."""
    cg = compiled_small
    h = cg.hw
    assert [(t.kind, t.tensor.name, t.at) for t in cg.layouts.transforms] == [
        ("pack", "image", 0), ("unpack", "logits", len(cg.steps))]
    img = cg.layouts.tensors[0]
    assert img.value is cg.graph.inputs[0] and img.layout.fold is not None  # conv1 is folded
    for t in cg.layouts.tensors[1:]:
        n, c = t.value.type.shape[:2]
        assert t.layout.fold is None and t.layout.shape[:2] == (n, -(-c // 16))
    mem = cg.memory
    live = [(mem.lifetimes[id(t)], mem.offset(t), t.nbytes(h)) for t in cg.layouts.tensors]
    for i, ((a0, a1), o1, n1) in enumerate(live):
        for (b0, b1), o2, n2 in live[i + 1:]:
            if a0 <= b1 and b0 <= a1:  # alive together
                assert o1 + n1 <= o2 or o2 + n2 <= o1
    assert mem.peak_bytes < mem.naive_bytes  # space was reused
    assert mem.peak_bytes >= max(t.nbytes(h) for t in cg.layouts.tensors)
    assert mem.total_bytes == mem.peak_bytes + mem.const_bytes
