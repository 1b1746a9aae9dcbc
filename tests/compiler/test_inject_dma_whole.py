"""DMA insertion keeps a perfect nest around a store that is not a copy whole
(``inject_dma._STORE``): whether a nest is a copy depends on its store alone, so its inner
loops are not peeled and refused again one by one, nor a copy stage's loops once more after its
``AttrStmt``. Each store of ResNet-18's C1 and C7 candidates is reached by one successful peel,
and the result is the pass's as before (the IR after it)."""

from __future__ import annotations

import pytest

from vta.compiler.accel import driver, pipeline
from vta.compiler.accel.passes import inject_dma as ID
from vta.compiler.accel.schedules.build import lower_op
from vta.compiler.ir import stmt as S
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig

HW = HwConfig.from_yaml("hwconfigs/pynq.yaml")


def _inputs() -> list[S.PrimFunc]:
    """The IR each candidate's ``inject_dma`` gets."""
    out = []
    for layer in ("C1", "C7"):
        w = resolve(f"resnet18:{layer}")
        problem = driver.space_of(w, HW)
        for p in driver.default_points(w, HW):
            fold, sch = problem.schedule(p)
            func = lower_op(driver.op_compute(w, HW, sch, w.epilogue, fold), HW, sch)
            out.append(pipeline.compile_func(func, HW).ir["scratchpad_alloc"])
    return out


def test_each_store_is_peeled_once(monkeypatch: pytest.MonkeyPatch) -> None:
    peeled: list[int] = []
    loop_nest = ID.loop_nest

    def counted(s):  # type: ignore[no-untyped-def]
        loops, body = loop_nest(s)
        if isinstance(body, S.BufferStore):
            peeled.append(id(body))
        return loops, body

    funcs = _inputs()
    before = [str(ID.inject_dma(f, HW)) for f in funcs]
    monkeypatch.setattr(ID, "loop_nest", counted)
    after = [str(ID.inject_dma(f, HW)) for f in funcs]
    assert after == before
    assert peeled and len(peeled) == len(set(peeled))
