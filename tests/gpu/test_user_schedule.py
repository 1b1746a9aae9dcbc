"""A user's GPU schedules, written from scratch the way one writes them in TVM.

Each schedule here uses only the public primitives (``create_schedule``, ``split``/``reorder``/
``fuse``, ``bind`` to blockIdx/threadIdx, ``cache_read`` into ``shared`` computed at the K-tile
loop, ``cache_write`` into ``local`` computed at the innermost thread loop, ``unroll``), is
lowered with ``vta.compiler.ir.lower.lower`` and the GPU pipeline, rendered, compiled to PTX for
sm_80 and sm_90, and run in the SIMT emulator bit-exact against numpy. Then the refusals a user
meets on a GPU: binding a reduction axis, too much shared memory, too many threads; and the
barrier a user never writes (``insert_barriers`` adds it).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import Schedule, Stage, create_schedule
from vta.compiler.ir.tensor import IterVar, Tensor, compute, placeholder, reduce_axis, sum_
from vta.errors import EmulatorRaceError, ScheduleError
from vta.gpu.cuda import render_cuda
from vta.gpu.emulator import Emulator
from vta.gpu.lower_gpu import GpuLoweringError, lower_for_gpu

NvccCheck = Callable[[list[str]], None]


def _bind(st: Stage, *pairs: tuple[IterVar, str]) -> None:
    for axis, tag in pairs:
        st.bind(axis, tag)


def _cooperative(st: Stage, *threads: int) -> None:
    """Spread a copy stage over the block's threads (counts along threadIdx.x, .y, .z): fuse
    every axis, split off one loop per thread index."""
    f = st.axis[0]
    for a in st.axis[1:]:
        f = st.fuse(f, a)
    for n, tag in zip(threads, ("threadIdx.x", "threadIdx.y", "threadIdx.z")[:len(threads)],
                      strict=True):
        f, t = st.split(f, n)
        st.bind(t, tag)
    st.unroll(f)


# ---------------------------------------------------------------------------- matmul


def matmul(m: int, n: int, k: int, dtype: str = "int8") -> tuple[Tensor, Tensor, Tensor]:
    acc = "float32" if dtype.startswith("float") else "int32"
    A = placeholder((m, k), dtype, "A")
    B = placeholder((n, k), dtype, "B")
    r = reduce_axis(k, "k")
    C = compute((m, n), lambda i, j: sum_(A[i, r].astype(acc) * B[j, r].astype(acc), r), "C")
    return A, B, C


def schedule_matmul(A: Tensor, B: Tensor, C: Tensor, bm: int = 32, bn: int = 32, bk: int = 8,
                    tm: int = 4, tn: int = 2) -> Schedule:
    """A block tile ``bm x bn`` in shared memory per ``bk`` slice, ``tm x tn`` per thread."""
    s = create_schedule(C)
    CL = s.cache_write(C, "local")
    AS = s.cache_read(A, "shared", [CL])
    BS = s.cache_read(B, "shared", [CL])
    AL = s.cache_read(AS, "local", [CL])
    BL = s.cache_read(BS, "local", [CL])

    i, j = s[C].axis
    bi, ii = s[C].split(i, bm)
    ti, ri = s[C].split(ii, tm)
    bj, jj = s[C].split(j, bn)
    tj, rj = s[C].split(jj, tn)
    s[C].reorder(bi, bj, ti, tj, ri, rj)
    _bind(s[C], (bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"),
          (tj, "threadIdx.x"))
    s[C].unroll(ri)
    s[C].unroll(rj)

    s[CL].compute_at(s[C], tj)
    ci, cj = s[CL].axis
    ko, ki = s[CL].split(s[CL].reduce_axis[0], bk)
    s[CL].reorder(ko, ki, ci, cj)
    s[CL].unroll(ci)
    s[CL].unroll(cj)
    for sh in (AS, BS):
        s[sh].compute_at(s[CL], ko)
        _cooperative(s[sh], bn // tn, bm // tm)
    for loc in (AL, BL):
        s[loc].compute_at(s[CL], ki)
    return s


def _int8(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(-128, 128, shape, dtype=np.int8)


def test_user_matmul_schedule_renders_compiles_and_matches(nvcc_check: NvccCheck) -> None:
    M, N, K = 70, 52, 90  # no dimension is a multiple of its tile: guards everywhere
    A, B, C = matmul(M, N, K)
    f = lower_for_gpu(lower(schedule_matmul(A, B, C), [A, B, C], "user_matmul"))
    kernel = render_cuda(f)
    src = kernel.source
    assert kernel.launch.grid == (2, 3, 1) and kernel.launch.block == (16, 8, 1)
    assert "__shared__" in src and "int C_local[8];" in src and "#pragma unroll" in src
    nvcc_check([src])
    rng = np.random.default_rng(7)
    a, b = _int8(rng, (M, K)), _int8(rng, (N, K))
    c = np.zeros((M, N), np.int32)
    Emulator(f).run(a, b, c)
    assert np.array_equal(c, a.astype(np.int32) @ b.astype(np.int32).T)


def test_user_matmul_gets_its_barriers(nvcc_check: NvccCheck) -> None:
    """The user writes no barrier: one goes between the shared copies and their readers (RAW)
    and one at the end of the K-tile loop before the next copy overwrites them (WAR). Without
    them the emulator's race check fires."""
    A, B, C = matmul(64, 64, 32)
    f = lower_for_gpu(lower(schedule_matmul(A, B, C), [A, B, C], "user_matmul_sync"))
    src = render_cuda(f).source
    copy_a = src.index("A_shared[")
    read = src.index("= A_shared[")
    body = src[copy_a:]
    assert src.index("__syncthreads();", copy_a) < read  # RAW: copies, barrier, then reads
    assert body.count("__syncthreads();") == 2  # and the loop-carried WAR one
    ko = next(n for n in E.walk(f.body) if isinstance(n, S.For) and n.var.name == "k_o")
    assert sum(isinstance(n, S.Barrier) for n in E.walk(ko.body)) == 2
    nvcc_check([src])

    def strip(s: S.Stmt) -> S.Stmt:
        def fn(n: object) -> object:
            if isinstance(n, S.SeqStmt):
                return S.seq(*(strip(x) for x in n.stmts if not isinstance(x, S.Barrier)))
            return None

        return E.substitute(s, fn)

    racy = S.PrimFunc(f.name, f.params, strip(f.body), f.attrs)
    rng = np.random.default_rng(0)
    with pytest.raises(EmulatorRaceError):
        Emulator(racy).run(_int8(rng, (64, 32)), _int8(rng, (64, 32)),
                           np.zeros((64, 64), np.int32))


def test_user_matmul_with_an_elementwise_epilogue(nvcc_check: NvccCheck) -> None:
    """cache_write of a reduction that an element-wise stage reads: the register tile feeds
    the epilogue, inlined into the output stage."""
    M, N, K = 33, 40, 48
    A, B, C = matmul(M, N, K)
    D = compute((M, N), lambda i, j: E.min_(E.max_(C[i, j] >> 6, -128), 127).astype("int8"),
                "D")
    s = create_schedule(D)
    CL = s.cache_write(C, "local")
    AS = s.cache_read(A, "shared", [CL])
    BS = s.cache_read(B, "shared", [CL])
    s[C].compute_inline()
    i, j = s[D].axis
    bi, bj, ti, tj = s[D].tile(i, j, 16, 16)
    ti, ri = s[D].split(ti, 2)
    tj, rj = s[D].split(tj, 2)
    s[D].reorder(ti, tj, ri, rj)
    _bind(s[D], (bi, "blockIdx.y"), (bj, "blockIdx.x"), (ti, "threadIdx.y"),
          (tj, "threadIdx.x"))
    s[CL].compute_at(s[D], tj)
    ko, _ = s[CL].split(s[CL].reduce_axis[0], 16)
    for sh in (AS, BS):
        s[sh].compute_at(s[CL], ko)
        _cooperative(s[sh], 8, 8)
    f = lower_for_gpu(lower(s, [A, B, D], "user_matmul_epi"))
    src = render_cuda(f).source
    assert "int C_local[4];" in src
    nvcc_check([src])
    rng = np.random.default_rng(3)
    a, b = _int8(rng, (M, K)), _int8(rng, (N, K))
    d = np.zeros((M, N), np.int8)
    Emulator(f).run(a, b, d)
    want = np.clip((a.astype(np.int32) @ b.astype(np.int32).T) >> 6, -128, 127).astype(np.int8)
    assert np.array_equal(d, want)


# ---------------------------------------------------------------------------- conv2d


def conv2d(n: int, ic: int, h: int, w: int, oc: int, k: int, stride: int,
           pad: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """NCHW conv2d with OIHW weights, zero padding as a compute, int8 -> int32."""
    oh, ow = (h + 2 * pad - k) // stride + 1, (w + 2 * pad - k) // stride + 1
    data = placeholder((n, ic, h, w), "int8", "data")
    kernel = placeholder((oc, ic, k, k), "int8", "kernel")

    def padded(b: E.Expr, c: E.Expr, y: E.Expr, x: E.Expr) -> E.Expr:
        inside = E.And(E.And(y >= pad, y < h + pad), E.And(x >= pad, x < w + pad))
        return E.select(inside, data[b, c, y - pad, x - pad], E.const(0, "int8"))

    dpad = compute((n, ic, h + 2 * pad, w + 2 * pad), padded, "data_pad")
    rc, ry, rx = reduce_axis(ic, "rc"), reduce_axis(k, "ry"), reduce_axis(k, "rx")
    out = compute((n, oc, oh, ow),
                  lambda b, o, y, x: sum_(dpad[b, rc, y * stride + ry, x * stride + rx]
                                          .astype("int32") * kernel[o, rc, ry, rx]
                                          .astype("int32"), [rc, ry, rx]), "conv")
    return data, kernel, dpad, out


def schedule_conv2d(data_pad: Tensor, kernel: Tensor, out: Tensor, fused: bool) -> Schedule:
    """Block: 8 output channels x 4 output rows of one image (``fused``: a 4x4 pixel tile, the
    tiles of the image fused into blockIdx.x); thread: 2 channels x 1 pixel; input channels in
    slices of 2 staged in shared memory."""
    s = create_schedule(out)
    OL = s.cache_write(out, "local")
    DS = s.cache_read(data_pad, "shared", [OL])
    KS = s.cache_read(kernel, "shared", [OL])
    s[data_pad].compute_inline()  # the padding becomes a select in the shared copy

    b, o, y, x = s[out].axis
    bo, oi = s[out].split(o, 8)
    to, ro = s[out].split(oi, 2)
    by, ty = s[out].split(y, 4)
    if fused:  # partial tiles at the bottom and right edges, behind fused indices
        bx, tx = s[out].split(x, 4)
        s[out].reorder(b, bo, by, bx, to, ty, tx, ro)
        pix, tp = s[out].fuse(by, bx), s[out].fuse(ty, tx)
        _bind(s[out], (b, "blockIdx.z"), (bo, "blockIdx.y"), (pix, "blockIdx.x"),
              (to, "threadIdx.y"), (tp, "threadIdx.x"))
        threads: tuple[int, ...] = (16, 4)
    else:
        s[out].reorder(b, bo, by, to, ty, x, ro)
        _bind(s[out], (b, "blockIdx.z"), (bo, "blockIdx.y"), (by, "blockIdx.x"),
              (to, "threadIdx.z"), (ty, "threadIdx.y"), (x, "threadIdx.x"))
        tp = x
        threads = (out.shape[3], 4, 4)
    s[out].unroll(ro)

    s[OL].compute_at(s[out], tp)
    rc, ry, rx = s[OL].reduce_axis
    rco, rci = s[OL].split(rc, 2)
    ob, oo, oy, ox = s[OL].axis
    s[OL].reorder(rco, rci, ry, rx, ob, oo, oy, ox)
    s[OL].unroll(rx)
    s[OL].unroll(oo)
    for sh in (DS, KS):
        s[sh].compute_at(s[OL], rco)
        _cooperative(s[sh], *threads)
    return s


@pytest.mark.parametrize("fused", [False, True], ids=["split", "fused"])
def test_user_conv2d_schedule_renders_compiles_and_matches(nvcc_check: NvccCheck,
                                                           fused: bool) -> None:
    """NCHW, padding 1, stride 2, 3x3; output 7x6 so the last pixel tiles overhang. Each
    thread's register tile is exactly its 2 channels x 1 pixel, fused indices included."""
    n, ic, h, w, oc, k, stride, pad = 2, 5, 13, 11, 20, 3, 2, 1
    data, kernel, dpad, out = conv2d(n, ic, h, w, oc, k, stride, pad)
    f = lower_for_gpu(lower(schedule_conv2d(dpad, kernel, out, fused), [data, kernel, out],
                            "user_conv2d"))
    kern = render_cuda(f)
    src = kern.source
    oh, ow = out.shape[2], out.shape[3]
    assert (oh, ow) == (7, 6)
    assert kern.launch.grid == ((4, 3, 2) if fused else (2, 3, 2))
    assert kern.launch.block == ((16, 4, 1) if fused else (6, 4, 4))
    assert "int conv_local[2];" in src and "__syncthreads();" in src
    assert "? " in src  # padding is a select in the shared copy, never an out-of-range load
    nvcc_check([src])
    rng = np.random.default_rng(11)
    x, wt = _int8(rng, (n, ic, h, w)), _int8(rng, (oc, ic, k, k))
    got = np.zeros(out.shape, np.int32)
    Emulator(f).run(x, wt, got)
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    want = np.zeros((n, oc, oh, ow), np.int64)
    for r in range(k):
        for t in range(k):
            win = xp[:, :, r:r + stride * oh:stride, t:t + stride * ow:stride]
            want += np.einsum("nchw,oc->nohw", win, wt[:, :, r, t].astype(np.int64))
    assert np.array_equal(got, want.astype(np.int32))


# ---------------------------------------------------------------------------- refusals


def test_binding_a_reduction_axis_is_refused() -> None:
    C = matmul(32, 32, 64)[2]
    s = create_schedule(C)
    CL = s.cache_write(C, "local")
    with pytest.raises(ScheduleError, match=r"bind to threadIdx.x on stage C_local axis k: "
                                            r"a reduction axis"):
        s[CL].bind(s[CL].reduce_axis[0], "threadIdx.x")
    ko, _ = s[CL].split(s[CL].reduce_axis[0], 8)
    with pytest.raises(ScheduleError, match="k_o: a reduction axis"):
        s[CL].bind(ko, "blockIdx.x")


def test_too_much_shared_memory_is_refused() -> None:
    """fp32 128x128 block tiles with 64-wide K slices: 2 x 32 KiB of shared memory."""
    A, B, C = matmul(256, 256, 128, "float32")
    s = schedule_matmul(A, B, C, bm=128, bn=128, bk=64, tm=8, tn=8)
    func = lower(s, [A, B, C], "big_tiles")
    with pytest.raises(GpuLoweringError) as err:
        lower_for_gpu(func)
    msg = str(err.value)
    assert ("big_tiles: shared memory of 65536 B per block exceeds the static limit of 49152 B "
            "on sm_80") in msg
    assert "A_shared[128, 64] float32 = 32768 B" in msg
    assert "B_shared[128, 64] float32 = 32768 B" in msg


def test_too_many_threads_is_refused() -> None:
    """A 64x32 block tile with one element per thread: 2048 threads."""
    A, B, C = matmul(128, 128, 16)
    s = schedule_matmul(A, B, C, bm=32, bn=64, bk=16, tm=1, tn=1)
    with pytest.raises(GpuLoweringError) as err:
        lower_for_gpu(lower(s, [A, B, C], "many_threads"))
    msg = str(err.value)
    assert ("many_threads: 64x32x1 = 2048 threads per block exceed the CUDA limit of 1024 "
            "on sm_80") in msg
    assert "threadIdx.x = 64 (loop j_i_o of stage C)" in msg
    assert "threadIdx.y = 32 (loop i_i_o of stage C)" in msg


def test_default_schedules_tile_registers_with_cache_write() -> None:
    """The library's SIMT and tensor-core schedules use the same idiom: the accumulator is
    ``cache_write(C, "local")``, one thread's (SIMT) or warp's (WMMA) tile."""
    from vta.compiler.ops.matmul import MatmulSpec
    from vta.gpu.schedules import SimtKnobs, WmmaKnobs, matmul_simt, matmul_wmma

    def local_tiles(func: S.PrimFunc) -> dict[str, tuple[int, ...]]:
        return {n.buffer.name: n.buffer.shape for n in E.walk(func.body)
                if isinstance(n, S.Allocate) and n.buffer.scope == "local"}

    simt = matmul_simt(MatmulSpec(50, 40, 30), "int8", None, SimtKnobs(32, 32, 8, 4, 2))
    assert local_tiles(simt)["C_local"] == (4, 2)
    wmma = matmul_wmma(MatmulSpec(64, 64, 32), "int8", None, WmmaKnobs(64, 64, 32, 2, 2))
    assert local_tiles(wmma)["C_local"] == (32, 32)
