"""Attention matmuls with zero points on the accelerator: ``passes.split_matmul`` folds
``sum_k (a - z_a)(b - z_b)`` into one dense layer per head over an extended reduction (``[a |
a | -z_a]`` times ``[b^T | -z_b | b^T]``, bias ``K z_a z_b``): the pass against the matmul's
own semantics over every zero-point case (128 included), and whole graphs bit-exact on the
accelerator and the GPU path with the MACs counted once."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.ir import Concat, Dense, Graph, MatMul, node_macs
from vta.graph.passes.split_matmul import int8_parts, split_matmuls
from vta.run.graph import compile_for, run_graph
from vta.run.targets import CudaEmuTarget

from .conftest import hw


def _attention(za: int, zb: int, batch: tuple[int, ...] = (2,), m: int = 16, k: int = 32,
               n: int = 16, seed: int = 0) -> tuple[Graph, dict[str, np.ndarray]]:
    """``requantize(a @ b)`` of two asymmetric int8 activations (zero points ``za``, ``zb``)."""
    rng = np.random.default_rng(seed)
    b = GraphBuilder("attn")
    av = b.input("a", (*batch, m, k), 0.05, zero=za)
    bv = b.input("b", (*batch, k, n), 0.04, zero=zb)
    mm = b.matmul(av, bv, name="mm")
    out = b.requantize(mm, ratio=0.05 * 0.04 / 2.0, zero=7, name="y")
    ins = {"a": rng.integers(-128, 128, (*batch, m, k), dtype=np.int8),
           "b": rng.integers(-128, 128, (*batch, k, n), dtype=np.int8)}
    return b.build([out]), ins


def test_a_negated_zero_point_splits_into_int8_parts() -> None:
    assert int8_parts(0) == ()
    assert int8_parts(5) == (5,) and int8_parts(-127) == (-127,)
    assert int8_parts(128) == (127, 1)
    assert all(sum(int8_parts(-z)) == -z for z in range(-128, 128))


@pytest.mark.parametrize("za,zb", [(0, 0), (-128, 0), (0, -128), (-128, -128), (37, -5),
                                   (127, 127), (-1, 64)])
def test_the_split_computes_the_matmul_with_its_zero_points(za: int, zb: int) -> None:
    """Every value the split graph shares with the original is the same, and a matmul with
    zero points becomes per head one dense layer over ``K' = K * (1 + parts)``."""
    g, ins = _attention(za, zb)
    s = split_matmuls(g)
    assert not any(isinstance(n, MatMul) for n in s.nodes)
    dense = [n for n in s.nodes if isinstance(n, Dense)]
    assert len(dense) == 2
    parts = len(int8_parts(-za)) + len(int8_parts(-zb))
    assert all(d.x.type.shape[1] == 32 * (1 + parts) for d in dense)
    assert all(d.useful_k == (32 if parts else 0) for d in dense)
    assert sum(node_macs(d) for d in dense) == node_macs(g.nodes[0])
    assert all(isinstance(s.producer(d.x), Concat) for d in dense) == bool(parts)
    eg, es = interp.run_graph(g, ins), interp.run_graph(s, ins)
    assert np.array_equal(eg[g.outputs[0]], es[s.outputs[0]])
    # the matmul's int32 sums against the real formula, per head
    a = ins["a"].astype(np.int64) - za
    b = ins["b"].astype(np.int64) - zb
    assert np.array_equal(eg[g.nodes[0].output], a @ b)


def test_a_rank4_product_with_zero_points_splits_per_head() -> None:
    g, ins = _attention(-128, 3, batch=(1, 2), m=16, k=16, n=32)
    s = split_matmuls(g)
    assert sum(isinstance(n, Dense) for n in s.nodes) == 2
    assert np.array_equal(interp.run_graph(g, ins)[g.outputs[0]],
                          interp.run_graph(s, ins)[s.outputs[0]])


@pytest.mark.parametrize("za,zb", [(-128, 0), (-128, 9), (23, -128)])
def test_matmuls_with_zero_points_run_on_the_accelerator(za: int, zb: int) -> None:
    """pynq_mul: every MAC of the product on the accelerator (counted once), every stored
    tensor equal to the interpreter's, the output equal to the unsplit graph's; the host only
    moves bytes (take, transpose, concat, stack, reshape)."""
    g, ins = _attention(za, zb)
    cg = compile_graph(g, hw("pynq_mul"), refine=1)
    assert cg.accelerated_macs == cg.macs == node_macs(g.nodes[0])
    assert {h.group.op for h in cg.host_ops} <= {"take", "transpose", "concat", "stack", "reshape"}
    r = run_graph(cg, ins)
    s = r.summary()
    assert r.passed, s["mismatched_tensors"]
    assert s["mac_share"] == 1.0
    assert np.array_equal(r.outputs[cg.graph.outputs[0]],
                          interp.run_graph(g, ins)[g.outputs[0]])


def test_matmuls_with_zero_points_run_on_the_gpu_path() -> None:
    g, ins = _attention(-128, 9)
    r = run_graph(compile_for(g, CudaEmuTarget()), ins)
    assert r.passed, r.summary()["mismatched_tensors"]
    assert np.array_equal(r.outputs[r.graph.outputs[0]], interp.run_graph(g, ins)[g.outputs[0]])
