"""The run's parent packs each DRAM tensor once (``vta.run.graph._speculate`` and
``_in_order``): the graph's input, which the workers' guesses pack (``_guess``), is the very
array the run in order hands its first kernel (``_Speculation.packed_of``), not packed again;
a kernel's inputs are worked out once (``_reads``), not at every step of the interpreter."""

from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np
import pytest

from vta.graph.compile import CompiledGraph
from vta.run import graph as run_graph_module
from vta.run.graph import _Speculation, run_graph
from vta.run.targets import AccelTarget


def test_every_dram_tensor_is_packed_once_with_workers(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With workers, the input is packed by the guesses and taken from there by the run in
    order: each tensor packed once (twice for the input before), the same run as serially."""
    cg, t, image = compiled
    real = run_graph_module.pack
    packed: Counter[int] = Counter()

    def counting(x: np.ndarray, *a: Any, **k: Any) -> np.ndarray:
        packed[id(x)] += 1
        return real(x, *a, **k)

    serial = run_graph(cg, image, target=t, jobs=1)
    monkeypatch.setattr(run_graph_module, "pack", counting)
    spread = run_graph(cg, image, target=t, jobs=2)
    assert packed and max(packed.values()) == 1
    assert spread.cycles == serial.cycles and spread.passed
    for v, arr in serial.outputs.items():
        assert np.array_equal(arr, spread.outputs[v])


def test_packed_of_answers_only_the_array_it_packed() -> None:
    """``packed_of`` gives the packed array only for the very array it was packed from (an
    equal copy, or another name, is packed again by the caller)."""
    spec = _Speculation(None)
    x = np.arange(6, dtype=np.int8)
    done = x[::-1].copy()
    spec.packed["in"] = (x, done)
    assert spec.packed_of("in", x) is done
    assert spec.packed_of("in", x.copy()) is None
    assert spec.packed_of("other", x) is None


def test_a_kernel_reading_an_unnamed_tensor_is_not_guessed(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray]) -> None:
    """``_reads``: a kernel's input allocations with the tensor or constant each reads; None
    for an allocation that is neither (that kernel runs in order, never guessed)."""
    cg, _, _ = compiled
    tensors = {t.name: t for t in cg.layouts.tensors}
    k = next(k for k, p in enumerate(cg.programs) if p is not None)
    reads = run_graph_module._reads(cg, k, tensors)
    prog = cg.programs[k]
    assert prog is not None and reads is not None
    assert [n for n, _ in reads] == [a.name for a in prog.inputs]
    assert any(not isinstance(r, str) for _, r in reads)  # an activation among them
    assert run_graph_module._reads(cg, k, {}) is None
