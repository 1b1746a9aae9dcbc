"""Lowering walks each stage's definition once for its tensor reads (``regions.tensor_reads``):
the input check, which stages read which, and every attached stage's pieces (closed form and
isl text alike) read that one list, in pre-order, instead of walking the definitions again per
question. Same IR as before (the pipeline digests); here: one walk per stage, and the reads
each route sees are the walk's."""

from __future__ import annotations

import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import regions
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import create_schedule
from vta.compiler.ir.tensor import TensorRead, compute, placeholder, reduce_axis, sum_
from vta.errors import LowerError


def _matmul():  # type: ignore[no-untyped-def]
    m, n, k = 32, 32, 16
    a = placeholder((m, k), "int8", "A")
    b = placeholder((k, n), "int8", "B")
    r = reduce_axis(k, "r")
    c = compute((m, n), lambda i, j: sum_(a[i, r].astype("int32") * b[r, j].astype("int32"), r),
                "C")
    s = create_schedule(c)
    cl = s.cache_write(c, "local")
    i, j = s[c].axis
    io, ii = s[c].split(i, 8)
    jo, ji = s[c].split(j, 8)
    s[c].reorder(io, jo, ii, ji)
    s[cl].compute_at(s[c], jo)
    al = s.cache_read(a, "local", [cl])
    s[al].compute_at(s[cl], s[cl].reduce_axis[0])
    return s, (a, b, c)


def test_each_definition_is_walked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[int] = []
    walk = E.walk

    def counted(node):  # type: ignore[no-untyped-def]
        if not isinstance(node, TensorRead):
            walked.append(id(node))
        return walk(node)

    monkeypatch.setattr(E, "walk", counted)
    s, args = _matmul()
    f = lower(s, list(args))
    assert "A_local" in str(f)
    assert len(walked) == len(set(walked)), "a stage's definition walked twice"


def test_reads_are_in_pre_order() -> None:
    a = placeholder((4,), "int32", "A")
    b = placeholder((4,), "int32", "B")
    c = compute((4,), lambda i: a[i] + b[i] * a[3 - i], "C")
    reads = regions.tensor_reads(c.op.body)  # type: ignore[attr-defined]
    assert [r.tensor.name for r in reads] == ["A", "B", "A"]


def test_an_input_missing_from_args_is_still_named() -> None:
    s, (a, b, c) = _matmul()
    with pytest.raises(LowerError, match="reads input B, which is not in args"):
        lower(s, [a, c])
