"""Both pipelines verify the IR after every pass: a pass that breaks it is a VerifyError naming
the pass, on the accelerator (``compile_func``) and on the GPU (``lower_for_gpu``)."""

from __future__ import annotations

import pytest
from _accel_ir import PYNQ

from vta.compiler.accel import pipeline
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import buf, func, loop
from vta.errors import VerifyError
from vta.gpu import lower_gpu
from vta.isa import Program

A = buf("A", (4,), "int32")


def _breaks_the_ir(f: S.PrimFunc, *_: object) -> S.PrimFunc:
    """A pass that stores through a variable no loop or let binds."""
    return f.with_body(A.store(0, E.Var("ghost")))


def test_accelerator_pipeline_names_the_pass_that_broke_the_ir(
        monkeypatch: pytest.MonkeyPatch) -> None:
    first, *_rest = pipeline.PASSES
    monkeypatch.setattr(pipeline, "PASSES", (first, ("breaker", _breaks_the_ir, "test")))
    f = func("f", [A], loop(4, lambda i: A.store(0, i)))
    with pytest.raises(VerifyError, match=r"after pass breaker: f: .*ghost"):
        pipeline.compile_func(f, PYNQ)


def test_accelerator_pipeline_verifies_its_input() -> None:
    with pytest.raises(VerifyError, match=r"ghost") as info:
        pipeline.compile_func(func("f", [A], A.store(0, E.Var("ghost"))), PYNQ)
    assert "after pass" not in str(info.value)


def test_gpu_pipeline_names_the_pass_that_broke_the_ir(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lower_gpu, "PIPELINE", [("breaker", _breaks_the_ir, "test")])
    f = func("k", [A], loop(4, lambda i: A.store(0, i)))
    with pytest.raises(VerifyError, match=r"after pass breaker: k: .*ghost"):
        lower_gpu.lower_for_gpu(f)


@pytest.mark.parametrize("every", [True, False])
def test_checking_once_names_the_pass_that_broke_the_ir(monkeypatch: pytest.MonkeyPatch,
                                                        every: bool) -> None:
    """With per-pass checking off (a production compile), the IR is verified once after the
    last pass, and a broken result still names the pass that broke it (the pipeline is run
    again from its input checking after every pass), also when later passes ran on it."""
    first, *_rest = pipeline.PASSES
    monkeypatch.setattr(pipeline, "PASSES", (first, ("breaker", _breaks_the_ir, "test"),
                                             ("later", lambda f, hw: f, "test")))
    f = func("f", [A], loop(4, lambda i: A.store(0, i)))
    with pytest.raises(VerifyError, match=r"after pass breaker: f: .*ghost"):
        pipeline.compile_func(f, PYNQ, verify_every_pass=every)


def _copies(f: S.PrimFunc, *_: object) -> S.PrimFunc:
    """A pass that returns a new, equivalent function (so the pipeline checks it)."""
    return f.with_body(S.SeqStmt((f.body,)))


def test_the_tests_verify_after_every_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """tests/conftest.py turns per-pass checking on for the whole session; a production compile
    (the default) checks the input and the result only: ``verify_after`` runs once."""
    assert pipeline.VERIFY_EVERY_PASS
    calls: list[str] = []

    def counted(name: str, f: S.PrimFunc) -> S.PrimFunc:
        calls.append(name)
        return f
    monkeypatch.setattr(pipeline, "verify_after", counted)
    monkeypatch.setattr(pipeline, "PASSES", (("one", _copies, "test"), ("two", _copies, "test"),
                                             ("three", _copies, "test")))
    monkeypatch.setattr(pipeline, "emit_program", lambda f, hw: Program(()))
    f = func("f", [A], loop(4, lambda i: A.store(0, i)))
    pipeline.compile_func(f, PYNQ, verify_every_pass=False)
    assert calls == ["three"]
    calls.clear()
    pipeline.compile_func(f, PYNQ)
    assert calls == ["one", "two", "three"]
