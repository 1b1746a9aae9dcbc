"""Passes hand information on through typed keys (``stmt.AttrKey``), each defined once."""

from __future__ import annotations

import pickle

import pytest

from vta.compiler.accel.vta_ir import SRAM, VTHREAD
from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.builder import buf, func
from vta.gpu.dialect import LAUNCH, LaunchConfig

A = buf("A", (4,), "int32")


def test_a_bare_string_key_is_refused() -> None:
    with pytest.raises(TypeError, match=r"AttrStmt: the key must be an AttrKey .* got 'stage'"):
        S.AttrStmt("stage", "s", A.store(0, 0))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"PrimFunc f: the key must be an AttrKey"):
        S.PrimFunc("f", (A,), A.store(0, 0), (("sram", ()),))  # type: ignore[arg-type]


def test_a_name_is_defined_once() -> None:
    with pytest.raises(ValueError, match=r"'launch' is already defined \(in vta.gpu.dialect\)"):
        S.AttrKey("launch", __name__)
    assert S.AttrKey.named("vthread") is VTHREAD
    with pytest.raises(KeyError, match=r"no attribute key 'stages'"):
        S.AttrKey.named("stages")


def test_attr_returns_the_value_and_with_attr_replaces_it() -> None:
    launch = LaunchConfig((2, 1, 1), (64, 1, 1))
    f = func("k", [A], A.store(0, 0)).with_attr(LAUNCH, launch).with_attr(S.TARGET, "cuda")
    assert f.attr(LAUNCH) is launch and f.attr(SRAM) is None
    g = f.with_attr(LAUNCH, LaunchConfig((1, 1, 1), (32, 1, 1)))
    assert [k for k, _ in g.attrs] == [S.TARGET, LAUNCH]
    assert g.attr(LAUNCH) == LaunchConfig((1, 1, 1), (32, 1, 1))


def test_keys_survive_pickling_as_the_same_object() -> None:
    s = S.AttrStmt(VTHREAD, 1, A.store(0, E.IntImm(0)))
    assert pickle.loads(pickle.dumps(s)).key is VTHREAD
    assert pickle.loads(pickle.dumps(LAUNCH)) is LAUNCH
