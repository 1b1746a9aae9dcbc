"""The interpreter: exact integer semantics, lazy selects, errors, and vectorised speed."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.interp import run_func
from vta.errors import InterpError


def one_loop(n: int, body) -> tuple[S.PrimFunc, S.Buffer, S.Buffer]:
    x = S.Buffer("x", (n,), "int32")
    y = S.Buffer("y", (n,), "int32")
    i = E.Var("i")
    f = S.PrimFunc("f", (x, y), S.For(i, E.const(0), E.const(n), y.store(body(x.load(i), i), i)))
    return f, x, y


@pytest.mark.parametrize("op,ref", [
    (lambda a: a // 3, lambda a: a // 3),
    (lambda a: a % 3, lambda a: a % 3),
    (lambda a: a >> 2, lambda a: a >> 2),
    (lambda a: (a * 100000) * 100000, lambda a: (a.astype(np.int64) * 10 ** 10).astype(np.int32)),
    (lambda a: a.astype("int8").astype("int32"), lambda a: a.astype(np.int8).astype(np.int32)),
    (lambda a: E.min_(E.max_(a, -5), 5), lambda a: np.clip(a, -5, 5)),
])
def test_integer_semantics(op, ref) -> None:
    f, _, _ = one_loop(9, lambda v, i: op(v))
    x = np.array([-7, -6, -1, 0, 1, 5, 200, 2 ** 31 - 1, -2 ** 31], np.int32)
    y = np.zeros(9, np.int32)
    run_func(f, {"x": x, "y": y})
    assert np.array_equal(y, ref(x))


def test_scalar_path_matches_vectorised_path() -> None:
    """A loop whose iterations depend on each other (prefix sum) runs in order."""
    x = S.Buffer("x", (6,), "int32")
    i = E.Var("i")
    prev = E.select(i > 0, x.load(i - 1), 0)
    f = S.PrimFunc("f", (x,), S.For(i, E.const(0), E.const(6), x.store(x.load(i) + prev, i)))
    a = np.arange(1, 7, dtype=np.int32)
    run_func(f, {"x": a})
    assert a.tolist() == [1, 3, 6, 10, 15, 21]


def test_select_does_not_load_unselected_lanes() -> None:
    _f, _, _ = one_loop(4, lambda v, i: E.select(i < 2, v, 7))
    x = S.Buffer("x", (2,), "int32")
    y = S.Buffer("y", (4,), "int32")
    i = E.Var("i")
    g = S.PrimFunc("g", (x, y), S.For(i, E.const(0), E.const(4),
                                      y.store(E.select(i < 2, x.load(i), 7), i)))
    out = np.zeros(4, np.int32)
    run_func(g, {"x": np.array([3, 4], np.int32), "y": out})
    assert out.tolist() == [3, 4, 7, 7]


def test_out_of_bounds_is_an_error() -> None:
    x = S.Buffer("x", (4,), "int32")
    i = E.Var("i")
    f = S.PrimFunc("f", (x,), S.For(i, E.const(0), E.const(5), x.store(1, i)))
    with pytest.raises(InterpError, match="store to x: index 4 out of range"):
        run_func(f, {"x": np.zeros(4, np.int32)})


def test_argument_errors() -> None:
    f, _, _ = one_loop(3, lambda v, i: v)
    with pytest.raises(InterpError, match="no array given for parameter y"):
        run_func(f, {"x": np.zeros(3, np.int32)})
    with pytest.raises(InterpError, match=r"parameter y expects int32\[3\], got int8\[3\]"):
        run_func(f, {"x": np.zeros(3, np.int32), "y": np.zeros(3, np.int8)})


@dataclass(frozen=True)
class Mystery(S.Stmt):
    """A target dialect statement the interpreter does not know."""

    n: int = 0


def test_unknown_dialect_statement_is_an_error() -> None:
    f = S.PrimFunc("f", (), S.AttrStmt(S.STAGE, "s", Mystery()))
    with pytest.raises(InterpError, match="cannot execute Mystery statements"):
        run_func(f, {})


def test_allocation_is_not_zeroed() -> None:
    """Reading a fresh buffer before writing it gives garbage, so a missing init shows."""
    y = S.Buffer("y", (2,), "int32")
    t = S.Buffer("t", (2,), "int32", "acc")
    i = E.Var("i")
    f = S.PrimFunc("f", (y,), S.Allocate(t, S.For(i, E.const(0), E.const(2),
                                                  y.store(t.load(i), i))))
    out = np.zeros(2, np.int32)
    run_func(f, {"y": out})
    assert (out != 0).all()


def test_matmul_64_is_fast() -> None:
    from vta.compiler.ir.lower import lower
    from vta.compiler.ir.schedule import create_schedule
    from vta.compiler.ir.tensor import compute, placeholder, reduce_axis, sum_

    A = placeholder((64, 64), "int8", "A")
    B = placeholder((64, 64), "int8", "B")
    k = reduce_axis(64, "k")
    C = compute((64, 64), lambda i, j: sum_(A[i, k].astype("int32") * B[j, k].astype("int32"),
                                            k), "C")
    s = create_schedule(C)
    s[C].tile(*s[C].axis, 16, 16)
    f = lower(s, [A, B, C])
    rng = np.random.default_rng(0)
    a = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    b = rng.integers(-128, 128, (64, 64), dtype=np.int8)
    c = np.zeros((64, 64), np.int32)
    run_func(f, {"A": a, "B": b, "C": c})  # its speed: bench/emulator_speed.py
    assert np.array_equal(c, a.astype(np.int32) @ b.astype(np.int32).T)
