"""``vta run``'s reference (the interpreter's run every tensor is checked against) is the
compiled graph's: ``accelerator_graph`` (the passes ``compile_graph`` applies first) is the
identity on its own result, so the CLI can interpret it while the workers compile; and a
``Reference`` made on another graph (the graph before those passes, whose values the passes
replace) is not used to check the compiled one's steps (it once failed with a KeyError on
BERT-tiny and MobileNet-V2, whose pads and attention matmuls the passes rewrite)."""

from __future__ import annotations

import numpy as np

from tests.graph.conftest import hw
from tests.graph.test_place_matmul_zero import _attention
from tests.graph.test_place_pad import _conv_graph
from vta.graph import interp
from vta.graph.compile import accelerator_graph, compile_graph
from vta.run.graph import Reference, run_graph


def test_accelerator_graph_is_the_identity_on_its_result() -> None:
    g, _ = _conv_graph(1, 1, zero=-7)
    once = accelerator_graph(g)
    assert once is not g  # the zero-point pad is folded
    assert accelerator_graph(once) is once
    cg = compile_graph(once, hw("pynq_mul"), refine=1)
    assert cg.graph is once


def test_a_reference_on_the_graph_before_its_passes_is_not_used() -> None:
    """An attention matmul with zero points: ``split_matmuls`` adds host steps (take,
    transpose, stack) whose outputs the original graph does not have."""
    g, ins = _attention(-128, 9)
    cg = compile_graph(g, hw("pynq_mul"), refine=1)
    assert cg.graph is not g and cg.host_ops
    stale = Reference(g, ins)
    r = run_graph(cg, ins, reference=stale)
    assert r.passed
    want = interp.run_graph(g, ins)[g.outputs[0]]
    assert np.array_equal(r.outputs[cg.graph.outputs[0]], want)


def test_the_compiled_graphs_reference_is_used() -> None:
    g, x = _conv_graph(32, 2, zero=-128)
    prepared = accelerator_graph(g)
    ref = Reference(prepared, {"x": x})
    ref.compute()
    cg = compile_graph(prepared, hw("pynq_mul"), refine=1)
    r = run_graph(cg, {"x": x}, reference=ref)
    assert r.passed and r.reference is ref.values
