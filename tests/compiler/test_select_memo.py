"""Instruction selection's memos (``select.candidates`` per configuration and registry,
``_Matcher.imm_only`` per pattern node and intrinsic): asked again, the same answers without
recomputing them; a registry that changed is read again."""

from __future__ import annotations

import pytest

from vta.compiler.accel import select
from vta.compiler.ir import expr as E
from vta.compiler.ir.tensor import TensorRead
from vta.config import HwConfig

HW = HwConfig.from_yaml("hwconfigs/pynq.yaml")


def test_candidates_are_memoised_per_config_and_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    select._CANDIDATES.clear()
    asked: list[object] = []
    usable = select.usable

    def counting(d, hw, **fields):  # type: ignore[no-untyped-def]
        asked.append(d)
        return usable(d, hw, **fields)

    monkeypatch.setattr(select, "usable", counting)
    first = select.candidates(HW)
    n = len(asked)
    assert n and first
    again = select.candidates(HW)
    assert again == first and again is not first and len(asked) == n  # not asked again
    # a registry with one definition fewer: read again, that definition's patterns gone
    defs = select.registered()
    gone = first[0].instruction
    monkeypatch.setattr(select, "registered", lambda: tuple(d for d in defs if d is not gone))
    fewer = select.candidates(HW)
    assert len(asked) > n and fewer == [i for i in first if i.instruction is not gone]


def test_imm_only_memo_answers_as_the_definition() -> None:
    select._IMM_ONLY.clear()
    for intrin in select.candidates(HW):
        m = select._Matcher(intrin, lambda e: False)
        for p in E.walk(intrin.op.body):
            reads = [n for n in E.walk(p) if isinstance(n, TensorRead)]
            want = bool(reads) and all(m.roles.get(r.tensor) not in ("dst", "src", "wgt")
                                       for r in reads)
            assert m.imm_only(p) == want
            assert select._IMM_ONLY[(id(p), id(intrin))][2] == want
            assert select._Matcher(intrin, lambda e: False).imm_only(p) == want  # memo hit
