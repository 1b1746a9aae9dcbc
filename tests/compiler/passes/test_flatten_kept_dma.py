"""flatten keeps a DMA statement's instruction per values of its varying fields
(``flatten._dma_factory``'s ``kept``): an execution whose fields evaluate as an earlier one's
adds a new ``Insn`` around the instruction made then. Compared with the definition before the
table (``_uncached_factory``: the instruction made at every execution) on the IR flatten gets
for ResNet-18's layers: the same instruction stream."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from vta.compiler.accel import driver
from vta.compiler.accel.passes import flatten as F
from vta.compiler.accel.vta_ir import Insn
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import buf
from vta.compiler.ops.workloads import resolve
from vta.config import HwConfig
from vta.isa import Load, MemType

HW = HwConfig.from_yaml("hwconfigs/pynq.yaml")
ROW = E.Var("i")


@functools.lru_cache(maxsize=64)
def _uncached_factory(varying: tuple[bool, ...]) -> Any:
    """``_dma_factory`` as it was before the table: every execution makes its instruction."""
    arg = [f"a{k}(env)" if v else f"a{k}" for k, v in enumerate(varying)]
    params = ", ".join(f"a{k}" for k in range(len(varying)))
    fields = ", ".join(["y" if k == 2 else "x" if k == 3 else a for k, a in enumerate(arg)])
    src = (f"def factory(add, insn, make, mem, dram, thread, env, deps, {params}):\n"
           f"    def run():\n"
           f"        y = {arg[2]}\n"
           f"        x = {arg[3]}\n"
           f"        if y > 0 and x > 0:\n"
           f"            add(insn(make(mem, {fields}, deps), dram, (), thread, ''))\n"
           f"    return run\n")
    scope: dict[str, Any] = {}
    exec(src, scope)
    return scope["factory"]


def _stream(func: S.PrimFunc) -> list[Insn]:
    body = func.body
    while isinstance(body, S.Allocate):
        body = body.body
    out: list[Insn] = []
    for i in body.stmts if isinstance(body, S.SeqStmt) else (body,):
        assert isinstance(i, Insn)
        out.append(i)
    return out


def test_an_execution_with_the_same_fields_gets_the_instruction_made_before() -> None:
    c = E.IntImm
    exprs = (c(3), ROW * 16, c(1), c(2), c(16), c(0), c(0), c(1), c(0))
    out: list[Insn] = []
    env = {ROW: 2}
    run = F._dma_run(F._LOAD, MemType.INP, exprs, buf("A", (4, 1, 16), "int8"), 1,
                     out.append, env)
    run()
    run()
    env[ROW] = 3
    run()
    a, b, other = out
    assert a is not b and a.insn is b.insn and a == b
    assert a.insn == Load(MemType.INP, 3, 32, 1, 2, 16, 0, 0, 1, 0, a.insn.deps)
    assert other.insn == Load(MemType.INP, 3, 48, 1, 2, 16, 0, 0, 1, 0, a.insn.deps)


@pytest.mark.parametrize("layer", ["C1", "C6", "C11"])
def test_the_stream_is_the_one_made_without_the_table(layer: str,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    w = resolve(f"resnet18:{layer}")
    func = driver.build(w, HW, driver.default_points(w, HW)[0]).result.ir["virtual_thread"]
    kept = _stream(F.flatten(func, HW))
    monkeypatch.setattr(F, "_dma_factory", _uncached_factory)
    made = _stream(F.flatten(func, HW))
    assert [(i.insn, i.uops, i.thread, i.dram) for i in kept] == \
        [(i.insn, i.uops, i.thread, i.dram) for i in made]
    dmas = [i.insn for i in kept if not i.uops]
    assert len({id(x) for x in dmas}) < len(dmas)  # some instructions were kept
