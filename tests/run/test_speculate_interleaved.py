"""When the interpreter's run is computed already (a cold ``vta run``: it ran while the workers
compiled), ``vta.run.graph._speculate`` packs each kernel's inputs as it hands the kernel out,
longest first: the first worker starts while this process packs the next kernels' inputs; the
kernels, their order and the run are those of packing them all first."""

from __future__ import annotations

import numpy as np
import pytest

from vta.graph.compile import CompiledGraph
from vta.run import graph as run_graph_module
from vta.run.graph import Reference, run_graph
from vta.run.targets import AccelTarget


def test_each_kernel_is_packed_as_it_is_handed_out(
        compiled: tuple[CompiledGraph, AccelTarget, np.ndarray],
        monkeypatch: pytest.MonkeyPatch) -> None:
    cg, t, image = compiled
    events: list[tuple[str, int]] = []
    real_guess = run_graph_module._guess
    real_submit = run_graph_module._Speculation.submit

    def guess(cg_: CompiledGraph, k: int, *rest: object) -> dict[str, np.ndarray]:
        events.append(("guess", k))
        return real_guess(cg_, k, *rest)  # type: ignore[arg-type]

    def submit(self: run_graph_module._Speculation, k: int, inputs: dict[str, np.ndarray]
               ) -> None:
        events.append(("submit", k))
        real_submit(self, k, inputs)

    monkeypatch.setattr(run_graph_module, "_guess", guess)
    monkeypatch.setattr(run_graph_module._Speculation, "submit", submit)
    ref = Reference(cg.graph, image)
    ref.compute()
    side = run_graph(cg, image, target=t, jobs=2, reference=ref)
    kernels = [s.index for s in side.steps if s.execution is not None]
    order = sorted(kernels, key=lambda k: -run_graph_module._program_size(cg, k))
    assert events == [e for k in order for e in (("guess", k), ("submit", k))]
    alone = run_graph(cg, image, target=t, jobs=1)
    assert alone.cycles == side.cycles and alone.passed and side.passed
    for a, b in zip(alone.steps, side.steps, strict=True):
        assert a.check == b.check and a.cycles == b.cycles
