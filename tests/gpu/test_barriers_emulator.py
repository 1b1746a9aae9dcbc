"""Barrier insertion and the SIMT emulator's model: races, divergence, bounds, speed."""

from __future__ import annotations

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import EmulatorError, EmulatorRaceError
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import GpuLoweringError, lower_for_gpu
from vta.gpu.schedules import SimtKnobs, WmmaKnobs, matmul_simt, matmul_wmma


def _strip_barriers(s: S.Stmt) -> S.Stmt:
    def fn(n: object) -> object:
        if isinstance(n, S.SeqStmt):
            kept = [_strip_barriers(x) for x in n.stmts if not isinstance(x, S.Barrier)]
            return S.seq(*kept)
        return None

    return E.substitute(s, fn)


def _count(func: S.PrimFunc, cls: type) -> int:
    return sum(isinstance(n, cls) for n in E.walk(func.body))


def _loop(func: S.PrimFunc, name: str) -> S.For:
    return next(n for n in E.walk(func.body) if isinstance(n, S.For) and n.var.name == name)


def _operands(m: int, n: int, k: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    return (rng.integers(-128, 128, (m, k), dtype=np.int8),
            rng.integers(-128, 128, (n, k), dtype=np.int8), np.zeros((m, n), np.int32))


def test_simt_gets_raw_and_war_barriers() -> None:
    f = lower_for_gpu(matmul_simt(MatmulSpec(64, 64, 64), "int8", None, SimtKnobs(32, 32, 8, 2, 2)))
    ko = _loop(f, "k_o")
    # copy A, copy B, barrier (RAW), update, barrier (WAR, loop-carried)
    assert sum(isinstance(n, S.Barrier) for n in E.walk(ko.body)) == 2


def test_double_buffering_needs_one_barrier_per_iteration() -> None:
    f = lower_for_gpu(matmul_wmma(MatmulSpec(64, 64, 128), "float16", None,
                                  WmmaKnobs(64, 64, 32, 2, 2)))
    ko = _loop(f, "k_o")
    assert sum(isinstance(n, S.Barrier) for n in E.walk(ko.body)) == 1
    single = lower_for_gpu(matmul_wmma(MatmulSpec(64, 64, 128), "float16", None,
                                       WmmaKnobs(64, 64, 32, 2, 2, double_buffer=False)))
    assert sum(isinstance(n, S.Barrier) for n in E.walk(_loop(single, "k_o").body)) == 2


@pytest.mark.parametrize("wmma", [False, True])
def test_missing_barrier_is_reported_as_a_race(wmma: bool) -> None:
    spec = MatmulSpec(64, 64, 64)
    f = (matmul_wmma(spec, "int8", None, WmmaKnobs(64, 64, 32, 2, 2, vec=16)) if wmma
         else matmul_simt(spec, "int8", None, SimtKnobs(32, 32, 8, 2, 2)))
    good = lower_for_gpu(f)
    Emulator(good).run(*_operands(64, 64, 64))
    bad = good.with_body(_strip_barriers(good.body))
    assert _count(bad, S.Barrier) == 0
    with pytest.raises(EmulatorRaceError, match="race on"):
        Emulator(bad).run(*_operands(64, 64, 64))


def _thread_loop(n: int, body_of: object) -> S.Stmt:
    t = E.Var("t")
    return S.For(t, E.IntImm(0), E.IntImm(n), body_of(t), S.ForKind.THREAD_BINDING,  # type: ignore[operator]
                 "threadIdx.x")


def test_barrier_under_thread_condition_is_refused() -> None:
    A = S.Buffer("A", (32,), "int32")
    sh = S.Buffer("sh", (32,), "int32", "shared")

    def body(t: E.Var) -> S.Stmt:
        inner = S.seq(sh.store(t, t), A.store(sh.load((t + 1) % 32), t))
        return S.IfThenElse(E.Cmp("<", t, E.IntImm(16)), inner)

    f = S.PrimFunc("div", (A,), S.Allocate(sh, _thread_loop(32, body)))
    with pytest.raises(GpuLoweringError, match="thread-dependent condition"):
        lower_for_gpu(f)


def test_out_of_bounds_access_is_an_error() -> None:
    A = S.Buffer("A", (32,), "int32")
    f = lower_for_gpu(S.PrimFunc("oob", (A,), _thread_loop(32, lambda t: A.store(t, t + 1))))
    with pytest.raises(EmulatorError, match="out of bounds"):
        Emulator(f).run(np.zeros(32, np.int32))


def test_padding_select_issues_no_out_of_bounds_load() -> None:
    A = S.Buffer("A", (32,), "int32")
    B = S.Buffer("B", (32,), "int32")

    def body(t: E.Var) -> S.Stmt:
        src = t - 1
        val = E.Select(E.Cmp(">=", src, E.IntImm(0)), A.load(src), E.IntImm(-7))
        return B.store(val, t)

    f = lower_for_gpu(S.PrimFunc("shift", (A, B), _thread_loop(32, body)))
    a = np.arange(32, dtype=np.int32)
    b = np.zeros(32, np.int32)
    Emulator(f).run(a, b)
    assert b[0] == -7 and np.array_equal(b[1:], a[:-1])


def test_int8_wraps_and_shifts_are_arithmetic() -> None:
    A = S.Buffer("A", (64,), "int32")
    B = S.Buffer("B", (64,), "int8")
    f = lower_for_gpu(S.PrimFunc("wrap", (A, B), _thread_loop(
        64, lambda t: B.store(E.Cast("int8", A.load(t) >> 2), t))))
    a = (np.arange(64, dtype=np.int32) - 32) * 97
    b = np.zeros(64, np.int8)
    Emulator(f).run(a, b)
    assert np.array_equal(b, (a >> 2).astype(np.int8))


def test_emulator_128_cubed_int8_gemm_is_exact() -> None:
    """The default SIMT schedule of a 128x128x128 int8 GEMM, with race checking (its speed is
    measured by bench/emulator_speed.py, not asserted here)."""
    f = lower_for_gpu(matmul_simt(MatmulSpec(128, 128, 128), "int8"))
    x, w, y = _operands(128, 128, 128)
    Emulator(f).run(x, w, y)
    assert np.array_equal(y, (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32))
