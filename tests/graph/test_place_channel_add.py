"""An add of a constant that varies along the channels only (BERT's bias ``QLinearAdd``s): the
integer form with one offset per channel (``ort_add.fit_channel_add``), proven on all 256
inputs of every channel value against ONNX Runtime's table (``qlinear_add_table``, itself
checked against onnxruntime on every pair in ``test_mobilenet.py``), fused into the dense layer
that produces its operand on the accelerator and the GPU path."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest

from vta.errors import GraphError
from vta.graph import interp
from vta.graph.builder import GraphBuilder
from vta.graph.compile import compile_graph
from vta.graph.ir import Add, Graph, TensorType, Value
from vta.graph.ort_add import apply_channel_form, fit_channel_add, qlinear_add_table
from vta.graph.passes.fuse import fuse, group_nodes
from vta.graph.verify import verify_graph
from vta.run.graph import compile_for, run_graph
from vta.run.targets import CudaEmuTarget

from .conftest import hw
from .test_mobilenet import SCALES

ALL = np.arange(-128, 128)


@pytest.mark.parametrize("params", SCALES)
def test_the_channel_form_is_onnx_runtimes_on_every_input_of_every_channel(
        params: tuple[Any, ...]) -> None:
    """Exhaustive over the 256 activation values and all 256 constant values."""
    sa, za, _, _, sc, zc, unsigned = params
    off = 128 if unsigned else 0
    table = qlinear_add_table(*params) - off  # int8 forms, rows: the activation
    form = fit_channel_add(table, za - off, zc - off, sa / sc, ALL)
    assert form is not None, params
    assert form.shift <= 24 and set(form.offsets) == set(ALL.tolist())
    for c in ALL.tolist():
        got = apply_channel_form(form, ALL.astype(np.int64), za - off, c, zc - off)
        assert np.array_equal(got, table[:, c + 128]), (params, c)


def test_a_table_no_channel_form_gives_is_refused() -> None:
    """Not monotone in the activation: no multiplier and offset reproduce it."""
    table = np.random.default_rng(0).integers(-128, 128, (256, 256))
    assert fit_channel_add(table, 0, 0, 1.0, np.array([0, 5])) is None


def _graph() -> tuple[Graph, dict[str, np.ndarray], np.ndarray]:
    """dense + requantize, then ORT's add of a per-channel constant (as the importer writes
    it: ``add_channels``); the inputs and the table's columns of the channels' values."""
    sa, za, _, _, sc, zc, _ = SCALES[1]
    rng = np.random.default_rng(7)
    b = GraphBuilder("bias")
    x = b.input("x", (32, 48), 0.05)
    w = b.const("w", rng.integers(-100, 100, (64, 48), dtype=np.int8), 0.01)
    y = b.requantize(b.dense(x, w, b.const("b", rng.integers(-99, 99, 64).astype(np.int32))),
                     ratio=0.05 * 0.01 / sa, zero=za, name="y")
    table = qlinear_add_table(*SCALES[1])
    chan = rng.integers(-128, 128, 64)
    form = fit_channel_add(table, za, zc, sa / sc, chan)
    assert form is not None
    z = b.add_channels(y, form, chan, sc, name="z", zero=zc)
    return b.build([z]), {"x": rng.integers(-128, 128, (32, 48), dtype=np.int8)}, \
        table[:, chan + 128]


def test_the_interpreter_computes_the_table() -> None:
    g, ins, cols = _graph()
    env = interp.run_graph(g, ins)
    y, z = env[g.nodes[1].output], env[g.outputs[0]]
    want = cols[y.astype(np.int64) + 128, np.arange(64)[None, :]]
    assert np.array_equal(z, want)


def test_the_add_joins_its_dense_layer() -> None:
    """An add of a tensor with itself reads it once: it fuses like any epilogue."""
    g, _, _ = _graph()
    assert [[m.op for m in group_nodes(n)] for n in fuse(g).nodes] == [
        ["dense", "requantize", "add"]]


def test_the_channel_add_runs_on_the_accelerator_and_the_gpu() -> None:
    g, ins, _ = _graph()
    cg = compile_graph(g, hw("pynq_mul"), refine=1)
    assert not cg.host_ops and len(cg.kernels) == 1
    r = run_graph(cg, ins)
    assert r.passed, r.summary()["mismatched_tensors"]
    rg = run_graph(compile_for(g, CudaEmuTarget()), ins)
    assert rg.passed, rg.summary()["mismatched_tensors"]
    assert [row["ops"] for row in rg.summary()["steps"]] == [["dense", "requantize", "add"]]


def test_offsets_of_the_wrong_shape_are_named() -> None:
    g, _, _ = _graph()
    add = g.nodes[-1]
    assert isinstance(add, Add) and add.offsets is not None
    bad = Value(add.offsets.name, TensorType((3,), "int32", "C"), np.zeros(3, np.int32))
    nodes = [*g.nodes[:-1], dataclasses.replace(add, offsets=bad)]
    with pytest.raises(GraphError, match=r"offsets \S+ must be an int32 constant with one "
                                         r"entry per channel"):
        verify_graph(g.with_nodes(nodes))
