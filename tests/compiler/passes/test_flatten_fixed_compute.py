"""flatten's run of a micro-op instruction whose bases are constants (``flatten._fixed_compute``:
the instruction made at its first execution and kept) against the general run (its base's
variables' values looked up at every execution), on the IR flatten gets for ResNet-18's layers:
the same function with each constant base wrapped in a cast (an expression that is no
``IntImm``, so the general run takes it, with no variables) flattens to the same instruction
stream."""

from __future__ import annotations

import dataclasses

import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.passes import flatten as F
from vta.compiler.accel.passes._common import map_stmt
from vta.compiler.accel.vta_ir import ComputeInsn, Insn, UopTable
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig

HW = HwConfig.from_yaml("hwconfigs/pynq.yaml")


def _general(func: S.PrimFunc) -> S.PrimFunc:
    """``func`` with every constant base of a compute instruction cast to its own type."""
    def rewrite(s: S.Stmt) -> S.Stmt | None:
        if isinstance(s, ComputeInsn):
            base = tuple(E.Cast(b.dtype, b) if isinstance(b, E.IntImm) else b
                         for b in s.uops.base)
            return dataclasses.replace(s, uops=UopTable(base, s.uops.offsets))  # type: ignore[arg-type]
        return None
    return func.with_body(map_stmt(func.body, rewrite))


def _stream(func: S.PrimFunc) -> list[tuple[object, ...]]:
    body = func.body
    while isinstance(body, S.Allocate):
        body = body.body
    out: list[tuple[object, ...]] = []
    for i in body.stmts if isinstance(body, S.SeqStmt) else (body,):
        assert isinstance(i, Insn)
        out.append((i.insn, i.uops, i.thread, i.dram))
    return out


@pytest.mark.parametrize("layer", ["C1", "C6", "C11"])
def test_constant_bases_flatten_as_the_general_run(layer: str,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    w = resolve(f"resnet18:{layer}")
    func = driver.build(w, HW, driver.default_points(w, HW)[0]).result.ir["virtual_thread"]
    fixed: list[int] = []
    real = F._fixed_compute

    def counting(*args):  # type: ignore[no-untyped-def]
        fixed.append(1)
        return real(*args)

    monkeypatch.setattr(F, "_fixed_compute", counting)
    fast = _stream(F.flatten(func, HW))
    assert fixed  # the fast run was taken
    n = len(fixed)
    general = _stream(F.flatten(_general(func), HW))
    assert len(fixed) == n  # and not for the cast bases
    assert fast == general
