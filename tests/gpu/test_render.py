"""CUDA rendering: hand-built PrimFuncs in the docs/ir.md form, lowered and compiled by nvcc."""

from __future__ import annotations

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import CudaRenderError
from vta.gpu.cuda import render_cuda
from vta.gpu.dialect import LaunchConfig
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import GpuLoweringError, lower_for_gpu


def _for(v: E.Var, n: int, body: S.Stmt, kind: S.ForKind = S.ForKind.SERIAL,
         thread: str | None = None) -> S.For:
    return S.For(v, E.IntImm(0), E.IntImm(n), body, kind, thread)


def hand_matmul(m: int, n: int, k: int) -> S.PrimFunc:
    """A naive bound matmul, written by hand: C[i, j] = sum_k int32(A[i, k]) * int32(B[j, k])
    with a local accumulator and a shared copy of B's rows (one per threadIdx.x)."""
    A = S.Buffer("A", (m, k), "int8")
    B = S.Buffer("B", (n, k), "int8")
    C = S.Buffer("C", (m, n), "int32")
    acc = S.Buffer("acc", (1,), "int32", "local")
    Bs = S.Buffer("B_shared", (n, k), "int8", "shared")
    i, j, kk, r, _c = (E.Var(x) for x in "ijkrc")
    copy = _for(r, k, Bs.store(B.load(j, r), j, r))
    red = _for(kk, k, acc.store(acc.load(0) + A.load(i, kk).astype("int32")
                                * Bs.load(j, kk).astype("int32"), 0))
    body = S.Allocate(acc, S.seq(acc.store(E.IntImm(0), 0), red, C.store(acc.load(0), i, j)))
    body = S.Allocate(Bs, _for(j, n, S.seq(copy, body), S.ForKind.THREAD_BINDING, "threadIdx.x"))
    body = _for(i, m, body, S.ForKind.THREAD_BINDING, "blockIdx.x")
    return S.PrimFunc("hand_matmul", (A, B, C), body)


def test_hand_built_matmul_renders_compiles_and_runs(nvcc_check) -> None:
    f = lower_for_gpu(hand_matmul(8, 32, 24))
    k = render_cuda(f)
    assert k.launch == LaunchConfig((8, 1, 1), (32, 1, 1), 32 * 24)
    assert "__syncthreads();" in k.source
    assert 'extern "C" __global__ void __launch_bounds__(32) hand_matmul(' in k.source
    nvcc_check([k.source])
    rng = np.random.default_rng(1)
    a = rng.integers(-128, 128, (8, 24), dtype=np.int8)
    b = rng.integers(-128, 128, (32, 24), dtype=np.int8)
    c = np.zeros((8, 32), np.int32)
    Emulator(f).run(a, b, c)
    assert np.array_equal(c, a.astype(np.int32) @ b.astype(np.int32).T)


def test_render_is_pure_and_deterministic() -> None:
    f = lower_for_gpu(hand_matmul(4, 32, 8))
    assert render_cuda(f).source == render_cuda(f).source


def test_render_needs_lowered_function() -> None:
    with pytest.raises(CudaRenderError, match="lower_for_gpu"):
        render_cuda(hand_matmul(4, 4, 4))


def test_semantics_helpers_render(nvcc_check) -> None:
    """Floor division of possibly negative values, casts, shifts, select and fp16 math."""
    X = S.Buffer("X", (64,), "int32")
    H = S.Buffer("H", (64,), "float16")
    Y = S.Buffer("Y", (64,), "int8")
    Z = S.Buffer("Z", (64,), "float16")
    t = E.Var("t")
    v = X.load(t) - 1000
    y = E.Cast("int8", E.Select(E.Cmp("<", t, E.IntImm(32)), (v // 7) + (v % 5), v >> 3))
    z = E.Max(H.load(t) * H.load(t), E.FloatImm(0.5, "float16"), "float16")
    body = _for(t, 64, S.seq(Y.store(y, t), Z.store(z, t)), S.ForKind.THREAD_BINDING,
                "threadIdx.x")
    f = lower_for_gpu(S.PrimFunc("semantics", (X, H, Y, Z), body))
    src = render_cuda(f).source
    assert "vta_floordiv" in src and "vta_floormod" in src and "__hmax" in src
    nvcc_check([src])
    x = np.arange(64, dtype=np.int32) * 37
    h = np.linspace(-2, 2, 64).astype(np.float16)
    yy = np.zeros(64, np.int8)
    zz = np.zeros(64, np.float16)
    Emulator(f).run(x, h, yy, zz)
    vv = x.astype(np.int64) - 1000
    want = np.where(np.arange(64) < 32, vv // 7 + vv % 5, vv >> 3).astype(np.int8)
    assert np.array_equal(yy, want)
    assert np.array_equal(zz, np.maximum(h * h, np.float16(0.5)))


def test_nested_bindings_must_agree() -> None:
    A = S.Buffer("A", (64,), "int32")
    t, u = E.Var("t"), E.Var("u")
    inner = _for(u, 64, A.store(E.IntImm(1), u), S.ForKind.THREAD_BINDING, "threadIdx.x")
    body = _for(t, 32, inner, S.ForKind.THREAD_BINDING, "threadIdx.x")
    with pytest.raises(GpuLoweringError, match="nested bindings"):
        lower_for_gpu(S.PrimFunc("bad", (A,), body))


def test_too_many_threads() -> None:
    A = S.Buffer("A", (2048,), "int32")
    t = E.Var("t")
    body = _for(t, 2048, A.store(E.IntImm(1), t), S.ForKind.THREAD_BINDING, "threadIdx.x")
    with pytest.raises(GpuLoweringError, match="1024"):
        lower_for_gpu(S.PrimFunc("big", (A,), body))
