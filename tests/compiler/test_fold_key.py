"""``expr._fold`` is memoised by the operator's class, whose hash is built in, not by its
``semantics.Op`` (``Enum.__hash__``, a Python call per lookup): folding constants hashes no
``Op``, and gives what ``semantics`` defines."""

from __future__ import annotations

import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import semantics as sem


def test_folding_hashes_no_op(monkeypatch: pytest.MonkeyPatch) -> None:
    E._fold.cache_clear()

    def fold() -> None:
        assert E.IntImm(3) * E.IntImm(5) == E.IntImm(15)
        assert E.IntImm(7) - E.IntImm(9) == E.IntImm(-2)

    fold()  # the misses: computed through semantics' tables (keyed by Op)
    hashed: list[object] = []
    real = sem.Op.__hash__
    monkeypatch.setattr(sem.Op, "__hash__", lambda self: hashed.append(self) or real(self))
    fold()  # the hits
    assert E._fold.cache_info().hits >= 2
    assert hashed == []


@pytest.mark.parametrize("cls", [E.Add, E.Sub, E.Mul, E.FloorDiv, E.FloorMod, E.Min, E.Max,
                                 E.Shr, E.Shl, E.BitAnd, E.BitOr, E.BitXor])
@pytest.mark.parametrize("dtype", ["int8", "int32", "uint8"])
def test_folds_as_semantics_defines(cls: type[E.BinOp], dtype: str) -> None:
    t = sem.DTYPES[dtype]
    for x in (-7, 0, 3, 100):
        for y in (-2, 0, 1, 5):
            why = sem.undefined(cls.op, x, y, t)
            want = None if why is not None else sem.binary(cls.op, x, y, t)
            assert E._fold(cls, x, y, dtype) == want
