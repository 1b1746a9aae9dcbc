"""Tensorize finds the regions by a walk of the statements alone (``tensorize._statements``):
the same statements, in the same order, as a walk of every node keeps of its statements, on
the IR tensorize receives for ResNet-18's layers."""

from __future__ import annotations

import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.passes.tensorize import _statements
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig

HW = HwConfig.from_yaml("hwconfigs/pynq.yaml")


@pytest.mark.parametrize("layer", ["C1", "C6", "C11"])
def test_statements_are_the_walks_statements(layer: str) -> None:
    w = resolve(f"resnet18:{layer}")
    c = driver.build(w, HW, driver.default_points(w, HW)[0])
    body = c.result.ir["inject_dma"].body  # tensorize's input
    walked = [n for n in E.walk(body) if isinstance(n, S.Stmt)]
    got = list(_statements(body))
    assert len(got) == len(walked) and all(a is b for a, b in zip(got, walked, strict=True))
    assert any(isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE for n in got)
