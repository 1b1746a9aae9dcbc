"""The warp-level PTX statements (vta.gpu.mma): each lane layout against a direct numpy
statement of the PTX ISA's definition, run in the SIMT emulator, rendered and compiled to PTX
for sm_80 and sm_90; cp.async groups and the races the emulator reports."""

from __future__ import annotations

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.errors import EmulatorRaceError
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.kernels.common import finish
from vta.gpu.mma import (
    MMA_SHAPES,
    CpAsync,
    CpAsyncCommit,
    CpAsyncWait,
    LdMatrix,
    MmaSync,
)

NP = {"int8": np.int8, "float16": np.float16}

# ---------------------------------------------------------------------------- PTX ISA, in numpy
# The definitions below restate the PTX ISA text (9.7.14.5.15 ldmatrix; 9.7.14.5.8 and
# 9.7.14.5.10 the mma fragments) lane by lane, independently of vta.gpu.mma's tables.


def ldmatrix_reference(mats: np.ndarray, trans: bool) -> np.ndarray:
    """mats: (num, 8, 8) uint16 matrices -> (32, num) uint32: lane t, register i holds the
    elements (row t/4, col 2(t%4)) (low half) and (row t/4, col 2(t%4)+1) of matrix i (of its
    transpose with .trans)."""
    out = np.zeros((32, len(mats)), np.uint32)
    for i, mat in enumerate(mats):
        m = mat.T if trans else mat
        for t in range(32):
            lo, hi = int(m[t // 4, 2 * (t % 4)]), int(m[t // 4, 2 * (t % 4) + 1])
            out[t, i] = lo | (hi << 16)
    return out


def fragment_rc(dtype: str, operand: str, t: int, i: int) -> tuple[int, int]:
    """(row, col) of element i held by lane t, transcribed from the PTX ISA."""
    group, tig = t >> 2, t % 4
    if operand == "c":
        return (group if i < 2 else group + 8), tig * 2 + (i & 0x1)
    if dtype == "float16":  # m16n8k16, .f16
        if operand == "a":
            row = group if (0 <= i < 2 or 4 <= i < 6) else group + 8
            col = tig * 2 + (i & 0x1) + (8 if i >= 4 else 0)
            return row, col
        row = tig * 2 + (i & 0x1) + (8 if i >= 2 else 0)
        return row, group
    if operand == "a":  # m16n8k32, .s8
        row = group if (i < 4 or 8 <= i < 12) else group + 8
        col = tig * 4 + (i & 0x3) + (16 if i >= 8 else 0)
        return row, col
    row = tig * 4 + (i & 0x3) + (16 if i >= 4 else 0)
    return row, group


def to_fragments(mat: np.ndarray, dtype: str, operand: str, nelem: int) -> np.ndarray:
    """(32, nelem) elements of ``mat`` each lane holds."""
    return np.array([[mat[fragment_rc(dtype, operand, t, i)] for i in range(nelem)]
                     for t in range(32)])


def from_fragments(frag: np.ndarray, dtype: str, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), frag.dtype)
    for t in range(32):
        for i in range(frag.shape[1]):
            out[fragment_rc(dtype, "c", t, i)] = frag[t, i]
    return out


# ---------------------------------------------------------------------------- kernels


def ldmatrix_kernel(dtype: str, num: int, trans: bool, pitch: int) -> S.PrimFunc:
    """One warp: copy X (rows, pitch) into shared memory, ldmatrix with lane l pointing at row
    l of the stacked matrices (8 rows each, 16 bytes = 8 b16 wide), store the registers."""
    rows = 8 * num
    X = S.Buffer("X", (rows, pitch), dtype)
    out = S.Buffer("out", (32, num), "uint32")
    sh = S.Buffer("Xs", (rows, pitch), dtype, "shared")
    reg = S.Buffer("r", (num,), "uint32", "local")

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        j = E.Var("j")
        per = (rows * pitch) // 32
        copy = S.For(j, E.IntImm(0), E.IntImm(per), sh.store(
            X.load((tid * per + j) // pitch, (tid * per + j) % pitch),
            (tid * per + j) // pitch, (tid * per + j) % pitch))
        row = E.min_(tid, rows - 1)  # lanes past 8*num give no address (x1, x2)
        ld = LdMatrix(reg, (E.IntImm(0),), sh, (row, E.IntImm(0)), num, trans)
        i = E.Var("i")
        st = S.For(i, E.IntImm(0), E.IntImm(num), out.store(reg.load(i), tid, i))
        return S.Allocate(sh, S.Allocate(reg, S.seq(copy, S.Barrier(), ld, st)))

    return finish(f"ldm_x{num}{'t' if trans else ''}_{dtype}", (X, out), body, (1, 1), 32)


@pytest.mark.parametrize("dtype", ["float16", "int8"])
@pytest.mark.parametrize("num", [1, 2, 4])
@pytest.mark.parametrize("trans", [False, True])
def test_ldmatrix_lane_layout(dtype: str, num: int, trans: bool, nvcc_check) -> None:
    item = np.dtype(NP[dtype]).itemsize
    pitch = 32 // item  # rows 32 bytes apart: the matrices' 16 bytes are the first half
    func = ldmatrix_kernel(dtype, num, trans, pitch)
    rng = np.random.default_rng(num)
    x = (rng.integers(-128, 128, (8 * num, pitch), dtype=np.int8) if dtype == "int8"
         else rng.standard_normal((8 * num, pitch)).astype(np.float16))
    out = np.zeros((32, num), np.uint32)
    Emulator(func).run(x, out)
    mats = x.view(np.uint8)[:, :16].copy().view(np.uint16).reshape(num, 8, 8)
    np.testing.assert_array_equal(out, ldmatrix_reference(mats, trans))
    nvcc_check([render_cuda(func).source])


def mma_kernel(dtype: str) -> S.PrimFunc:
    sh = MMA_SHAPES[dtype]
    A = S.Buffer("A", (32, sh.a_regs), "uint32")
    B = S.Buffer("B", (32, sh.b_regs), "uint32")
    C = S.Buffer("C", (32, 4), sh.acc_dtype)
    D = S.Buffer("D", (32, 4), sh.acc_dtype)
    a = S.Buffer("a", (sh.a_regs,), "uint32", "local")
    b = S.Buffer("b", (sh.b_regs,), "uint32", "local")
    c = S.Buffer("c", (4,), sh.acc_dtype, "local")

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        loads = [a.store(A.load(tid, i), i) for i in range(sh.a_regs)]
        loads += [b.store(B.load(tid, i), i) for i in range(sh.b_regs)]
        loads += [c.store(C.load(tid, i), i) for i in range(4)]
        z = (E.IntImm(0),)
        mma = MmaSync(sh, c, z, a, z, b, z, c, z)
        return S.Allocate(a, S.Allocate(b, S.Allocate(c, S.seq(
            *loads, mma, *[D.store(c.load(i), tid, i) for i in range(4)]))))

    return finish(f"mma_{sh.name}", (A, B, C, D), body, (1, 1), 32)


@pytest.mark.parametrize("dtype", ["int8", "float16"])
def test_mma_fragment_layouts(dtype: str, nvcc_check) -> None:
    sh = MMA_SHAPES[dtype]
    rng = np.random.default_rng(3)
    if dtype == "int8":
        a = rng.integers(-128, 128, (sh.m, sh.k), dtype=np.int8)
        b = rng.integers(-128, 128, (sh.k, sh.n), dtype=np.int8)
        c = rng.integers(-(1 << 31), 1 << 31, (sh.m, sh.n), dtype=np.int64).astype(np.int32)
    else:
        a = rng.standard_normal((sh.m, sh.k)).astype(np.float16)
        b = rng.standard_normal((sh.k, sh.n)).astype(np.float16)
        c = rng.standard_normal((sh.m, sh.n)).astype(np.float32)
    fa = to_fragments(a, dtype, "a", sh.a_regs * sh.per_reg)
    fb = to_fragments(b, dtype, "b", sh.b_regs * sh.per_reg)
    fc = to_fragments(c, dtype, "c", 4)
    A = np.ascontiguousarray(fa).view(np.uint32)  # elements low to high in each register
    B = np.ascontiguousarray(fb).view(np.uint32)
    D = np.zeros((32, 4), fc.dtype)
    func = mma_kernel(dtype)
    Emulator(func).run(A, B, np.ascontiguousarray(fc), D)
    got = from_fragments(D, dtype, sh.m, sh.n)
    if dtype == "int8":  # exact, with s32 wraparound
        want = (a.astype(np.int64) @ b.astype(np.int64) + c).astype(np.int32)
        np.testing.assert_array_equal(got, want)
    else:
        exact = a.astype(np.float64) @ b.astype(np.float64) + c
        bound = 2 * sh.k * 2.0 ** -24 * (np.abs(a).astype(np.float64) @ np.abs(b) + np.abs(c))
        assert np.all(np.abs(got - exact) <= bound)
    nvcc_check([render_cuda(func).source])


# ---------------------------------------------------------------------------- cp.async


def cp_kernel(n: int, wait_first: bool = True, barrier: bool = True, shift: int = 0
              ) -> S.PrimFunc:
    """Each of 32 threads copies 16 bytes (4 int32) of X into shared memory when its chunk
    lies below ``n`` (zeros otherwise), commits, waits, and thread t then reads the chunk of
    thread t + shift."""
    X = S.Buffer("X", (128,), "int32")
    Y = S.Buffer("Y", (128,), "int32")
    sh = S.Buffer("Xs", (128,), "int32", "shared")

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        cp = CpAsync(sh, (tid * 4,), X, (tid * 4,), 16, tid * 4 < n)
        src = (tid + shift) % 32
        i = E.Var("i")
        read = S.For(i, E.IntImm(0), E.IntImm(4), Y.store(sh.load(src * 4 + i), tid * 4 + i))
        steps: list[S.Stmt] = [cp, CpAsyncCommit()]
        if wait_first:
            steps.append(CpAsyncWait(0))
        if barrier:
            steps.append(S.Barrier())
        steps.append(read)
        return S.Allocate(sh, S.seq(*steps))

    return finish("cp_async", (X, Y), body, (1, 1), 32)


def test_cp_async_copies_and_zero_fills(nvcc_check) -> None:
    x = np.arange(128, dtype=np.int32) + 1
    y = np.zeros(128, np.int32)
    func = cp_kernel(50, shift=1)
    Emulator(func).run(x, y)
    want = np.where(np.arange(128) < 52, x, 0)  # chunks of 4 starting below 50
    np.testing.assert_array_equal(y, np.roll(want, -4))
    nvcc_check([render_cuda(func).source])


def test_reading_before_the_wait_is_a_race() -> None:
    with pytest.raises(EmulatorRaceError, match="in flight"):
        Emulator(cp_kernel(128, wait_first=False)).run(np.ones(128, np.int32),
                                                       np.zeros(128, np.int32))


def test_reading_another_threads_copy_without_a_barrier_is_a_race() -> None:
    with pytest.raises(EmulatorRaceError, match="race"):
        Emulator(cp_kernel(128, barrier=False, shift=1)).run(np.ones(128, np.int32),
                                                             np.zeros(128, np.int32))
    # its own chunk needs no barrier
    y = np.zeros(128, np.int32)
    Emulator(cp_kernel(128, barrier=False, shift=0)).run(np.ones(128, np.int32), y)
    assert (y == 1).all()


def test_wait_group_keeps_the_newest_groups_in_flight() -> None:
    """Two groups: wait_group(1) completes the first only; the second is still in flight."""
    X = S.Buffer("X", (256,), "int32")
    Y = S.Buffer("Y", (256,), "int32")
    sh = S.Buffer("Xs", (256,), "int32", "shared")

    def body(read_second: bool):  # type: ignore[no-untyped-def]
        def f(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
            off = 128 if read_second else 0
            return S.Allocate(sh, S.seq(
                CpAsync(sh, (tid * 4,), X, (tid * 4,), 16), CpAsyncCommit(),
                CpAsync(sh, (128 + tid * 4,), X, (128 + tid * 4,), 16), CpAsyncCommit(),
                CpAsyncWait(1), Y.store(sh.load(off + tid * 4), tid * 4)))
        return f

    x = np.arange(256, dtype=np.int32)
    y = np.zeros(256, np.int32)
    Emulator(finish("g1", (X, Y), body(False), (1, 1), 32)).run(x, y)
    assert y[4] == 4
    with pytest.raises(EmulatorRaceError, match="in flight"):
        Emulator(finish("g2", (X, Y), body(True), (1, 1), 32)).run(x, y)


# ---------------------------------------------------------------------------- bad input


def test_statements_built_wrongly_are_named_errors() -> None:
    from vta.errors import GpuLoweringError

    g = S.Buffer("G", (64,), "int8")
    sh = S.Buffer("Sh", (64,), "int8", "shared")
    regs = S.Buffer("r", (4,), "uint32", "local")
    z = (E.IntImm(0),)
    with pytest.raises(GpuLoweringError, match="4, 8 or 16 bytes, not 12"):
        CpAsync(sh, z, g, z, 12)
    with pytest.raises(GpuLoweringError, match="destination: G must be in shared memory"):
        CpAsync(g, z, g, z, 16)
    with pytest.raises(GpuLoweringError, match="1, 2 or 4 matrices, not 3"):
        LdMatrix(regs, z, sh, z, 3)
    with pytest.raises(GpuLoweringError, match="registers Sh"):
        LdMatrix(S.Buffer("Sh", (4,), "int32", "local"), z, sh, z, 4)
    acc = S.Buffer("acc", (4,), "float32", "local")
    with pytest.raises(GpuLoweringError, match="acc must be int32"):
        MmaSync(MMA_SHAPES["int8"], acc, z, regs, z, regs, z, acc, z)


def test_misaligned_ldmatrix_row_is_an_emulator_error() -> None:
    from vta.errors import EmulatorError

    X = S.Buffer("X", (64,), "int8")
    out = S.Buffer("out", (32, 4), "uint32")
    sh = S.Buffer("Xs", (512,), "int8", "shared")
    reg = S.Buffer("r", (4,), "uint32", "local")

    def body(tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        ld = LdMatrix(reg, (E.IntImm(0),), sh, (tid * 16 + 4,), 4)  # 4 bytes past 16
        return S.Allocate(sh, S.Allocate(reg, S.seq(
            ld, *[out.store(reg.load(i), tid, i) for i in range(4)])))

    func = finish("ldm_bad", (X, out), body, (1, 1), 32)
    with pytest.raises(EmulatorError, match="not 16-byte aligned"):
        Emulator(func).run(np.zeros(64, np.int8), np.zeros((32, 4), np.uint32))


def test_mma_by_part_of_a_warp_is_an_emulator_error() -> None:
    from vta.errors import EmulatorError

    func = mma_kernel("int8")
    body = func.body  # wrap the whole body in "if tid < 16": half a warp runs the mma
    inner = body.body.body.body  # under the three thread-index lets
    tid = body.var
    cut = S.LetStmt(tid, body.value, S.LetStmt(body.body.var, body.body.value, S.LetStmt(
        body.body.body.var, body.body.body.value, S.IfThenElse(tid < 16, inner))))
    bad = S.PrimFunc(func.name, func.params, cut, func.attrs)
    sh = MMA_SHAPES["int8"]
    with pytest.raises(EmulatorError, match="part of a warp"):
        Emulator(bad).run(np.zeros((32, sh.a_regs), np.uint32), np.zeros((32, 2), np.uint32),
                          np.zeros((32, 4), np.int32), np.zeros((32, 4), np.int32))
