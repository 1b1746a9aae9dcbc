"""``Lut2`` (ONNX Runtime's element-wise add or product given by its 256 x 256 table) on the
GPU path fused into the kernel that produces one of its operands (``passes.fuse``'s
``lut2_after``): the fused groups before and after, the accelerator's fusion unchanged (no
accelerator instruction indexes a table: the lookup stays a host step there), and whole graphs
bit-exact on cuda-emu with no table kernel of its own."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.gpu_place import LUT2_ANCHORS
from vta.graph.ir import Fused, Graph, Lut2
from vta.graph.passes.fuse import fuse, group_nodes
from vta.run.graph import compile_for, run_graph
from vta.run.targets import CudaEmuTarget

from .conftest import hw


def _graph(swap: bool = False) -> tuple[Graph, dict[str, np.ndarray]]:
    """dense + requantize, ``lut2`` with a constant tensor (a bias add's table; ``swap``: the
    dense output is the table's second index), a stand-alone relu, ``lut2`` of two activations
    (a product's table) fused after that relu, then a requantizing dense."""
    rng = np.random.default_rng(4)
    b = GraphBuilder("luts")
    x = b.input("x", (32, 48), 0.05)
    w = b.const("w", rng.integers(-100, 100, (64, 48), dtype=np.int8), 0.01)
    y = b.requantize(b.dense(x, w, b.const("b", rng.integers(-99, 99, 64).astype(np.int32))),
                     ratio=0.05 * 0.01 / 0.1, name="y")
    c = b.const("c", rng.integers(-128, 128, (32, 64), dtype=np.int8), 0.1)
    t1 = rng.integers(-128, 128, (256, 256), dtype=np.int8)
    s = b.lut2(c, y, t1, 0.1, "bias_add") if swap else b.lut2(y, c, t1, 0.1, "bias_add")
    r = b.relu(s, name="r")
    p = b.lut2(r, s, rng.integers(-128, 128, (256, 256), dtype=np.int8), 0.1, "prod")
    w2 = b.const("w2", rng.integers(-100, 100, (16, 64), dtype=np.int8), 0.01)
    out = b.requantize(b.dense(p, w2, b.const("b2", np.zeros(16, np.int32))),
                       ratio=0.1 * 0.01 / 0.2, name="out")
    return b.build([out]), {"x": rng.integers(-128, 128, (32, 48), dtype=np.int8)}


def _ops(g: Graph) -> list[list[str]]:
    return [[m.op for m in group_nodes(n)] for n in g.nodes]


def test_a_lut2_joins_the_gpu_kernel_that_produces_its_operand() -> None:
    g, _ = _graph()
    assert _ops(fuse(g)) == [["dense", "requantize"], ["lut2"], ["relu"], ["lut2"],
                             ["dense", "requantize"]]
    assert _ops(fuse(g, lut2_after=LUT2_ANCHORS)) == [
        ["dense", "requantize", "lut2"], ["relu", "lut2"], ["dense", "requantize"]]
    assert _ops(fuse(g, "requant", lut2_after=LUT2_ANCHORS)) == _ops(fuse(g, "requant"))


def test_a_lut2_after_a_host_operator_keeps_its_own_group() -> None:
    """Only the named anchors take a table: after a layout operator (host) it stays apart."""
    rng = np.random.default_rng(0)
    b = GraphBuilder("t")
    x = b.input("x", (4, 8), 0.1)
    t = b.transpose(x, (1, 0))
    c = b.const("c", rng.integers(-128, 128, (8, 4), dtype=np.int8), 0.1)
    g = b.build([b.lut2(t, c, rng.integers(-128, 128, (256, 256), dtype=np.int8), 0.1, "l")])
    assert _ops(fuse(g, lut2_after=LUT2_ANCHORS)) == [["transpose"], ["lut2"]]


@pytest.mark.parametrize("swap", [False, True])
def test_fused_tables_run_bit_exact_on_the_gpu_path(swap: bool) -> None:
    g, ins = _graph(swap)
    r = run_graph(compile_for(g, CudaEmuTarget()), ins)
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    kernels = [row["kernel"] for row in s["steps"]]
    assert "host" not in kernels and "lut2_window" not in kernels, kernels
    assert [row["ops"] for row in s["steps"]] == [
        ["dense", "requantize", "lut2"], ["relu", "lut2"], ["dense", "requantize"]]


def test_the_accelerator_keeps_the_tables_on_the_host() -> None:
    g, ins = _graph()
    cg = compile_graph(g, hw("pynq_mul"), refine=1)
    assert [type(h.group) for h in cg.host_ops] == [Lut2, Lut2]
    assert not any(isinstance(n, Fused) and any(isinstance(m, Lut2) for m in n.nodes)
                   for n in cg.fused.nodes)
    assert run_graph(cg, ins).passed
