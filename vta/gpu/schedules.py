"""Default GPU schedules for matmul/dense and conv2d, written out as loop-nest IR.

Each builder returns the ``PrimFunc`` that the schedule primitives describe, in the form
docs/ir.md fixes for ``lower(sch, args)`` - ``THREAD_BINDING`` loops from ``bind``, ``Allocate``
of ``shared`` stages from ``cache_read`` (copy bodies ``cache[idx - base] = select(in_bounds,
T[idx], 0)``), a ``local`` accumulator from ``cache_write`` with its copy-out stage, ``UNROLLED``
loops from ``unroll``, every stage under ``AttrStmt("stage")`` - so the GPU pipeline
(``vta.gpu.lower_gpu``) treats them exactly like the output of a user's schedule. No barrier is
written here: ``insert_barriers`` places them.

Both ops are one *implicit GEMM*: ``C[m, n] = sum_k A(m, k) * B(n, k)`` where, for conv2d,
``m`` runs over (image, output row, output column), ``n`` over output channels and ``k`` over
(input channel, kernel row, kernel column), and ``A`` gathers the padded input window on the fly
(padding is the ``select``). The fused epilogue of ``vta.compiler.ops.epilogue`` (shift right,
per-channel bias, clip, narrowing cast) runs on the register tile before the only global store.

SIMT schedule (``simt_gemm``): a block computes a ``bm x bn`` tile with ``(bm/tm) x (bn/tn)``
threads; each thread a ``tm x tn`` register tile; per ``bk`` slice of K the block stages A and B
tiles in shared memory (k-major, so the compute reads are broadcast / conflict-free) and every
thread streams them through register fragments ``A_reg[tm]``, ``B_reg[tn]``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from vta.compiler import expr as E
from vta.compiler import stmt as S
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import VtaError

__all__ = ["SimtKnobs", "GemmProblem", "simt_gemm", "matmul_problem", "conv2d_problem",
           "matmul_simt", "conv2d_simt", "ScheduleError", "ACC_DTYPE", "WmmaKnobs", "wmma_gemm",
           "matmul_wmma", "conv2d_wmma"]

#: accumulator type for each input type
ACC_DTYPE = {"int8": "int32", "float16": "float32", "float32": "float32"}


class ScheduleError(VtaError):
    """Schedule knobs that do not fit the problem or the hardware; the message names the knob."""


@dataclass(frozen=True)
class SimtKnobs:
    """Tile sizes of the SIMT schedule (block tile, K slice, per-thread register tile)."""

    bm: int = 64
    bn: int = 64
    bk: int = 16
    tm: int = 4
    tn: int = 4
    unroll: bool = True

    def check(self) -> None:
        for f in ("bm", "bn", "bk", "tm", "tn"):
            if getattr(self, f) < 1:
                raise ScheduleError(f"SIMT knob {f} must be >= 1, got {getattr(self, f)}")
        if self.bm % self.tm or self.bn % self.tn:
            raise ScheduleError(f"SIMT knobs: bm={self.bm} must be a multiple of tm={self.tm} and "
                                f"bn={self.bn} of tn={self.tn}")
        threads = (self.bm // self.tm) * (self.bn // self.tn)
        if threads > 1024:
            raise ScheduleError(f"SIMT knobs give {threads} threads per block (limit 1024)")


@dataclass(frozen=True)
class GemmProblem:
    """An implicit GEMM: sizes, parameter buffers and how to read A, B and write C."""

    name: str
    m: int
    n: int
    k: int
    params: tuple[S.Buffer, ...]
    #: (m, k) -> (value, in-bounds condition or None); reads only global params
    a_at: Callable[[E.Expr, E.Expr], tuple[E.Expr, E.Expr | None]]
    b_at: Callable[[E.Expr, E.Expr], tuple[E.Expr, E.Expr | None]]
    #: (m, n, accumulator value) -> the store of the finished element (epilogue included)
    c_store: Callable[[E.Expr, E.Expr, E.Expr], S.Stmt]
    in_dtype: str
    acc_dtype: str
    #: A (B) is read along k from consecutive addresses (vector loads are legal)
    a_contiguous: bool = True
    b_contiguous: bool = True


def _stage(name: str, body: S.Stmt) -> S.Stmt:
    return S.AttrStmt("stage", name, body)


def _for(v: E.Var, extent: int, body: S.Stmt, kind: S.ForKind = S.ForKind.SERIAL,
         thread: str | None = None) -> S.Stmt:
    return S.For(v, E.IntImm(0), E.IntImm(extent), body, kind, thread)


def _and(*conds: E.Expr | None) -> E.Expr | None:
    out: E.Expr | None = None
    for c in conds:
        if c is None:
            continue
        out = c if out is None else E.And(out, c)
    return out


def _guarded(value: E.Expr, cond: E.Expr | None, dtype: str) -> E.Expr:
    zero = E.const(0, dtype) if not dtype.startswith("float") else E.FloatImm(0.0, dtype)
    return value if cond is None else E.Select(cond, value, zero, dtype)


def _epilogue(acc: E.Expr, bias: E.Expr | None, epi: Epilogue | None, out_dtype: str) -> E.Expr:
    """The fused epilogue in IR: ``out(clip((acc >> shift) + bias, lo, hi))``."""
    if epi is None:
        return acc.astype(out_dtype)
    x = E.Shr(acc, E.IntImm(epi.shift), "int32")
    if epi.bias and bias is not None:
        x = E.Add(x, bias, "int32")
    x = E.Min(E.Max(x, E.IntImm(epi.clip_lo), "int32"), E.IntImm(epi.clip_hi), "int32")
    return E.Cast(out_dtype, x)


# ---------------------------------------------------------------------------- problems


def matmul_problem(spec: MatmulSpec, dtype: str = "int8", epi: Epilogue | None = None,
                   out_dtype: str | None = None) -> GemmProblem:
    """``Y = epilogue(X @ W.T)``; X (M, K), W (N, K); bias (N,) int32 when the epilogue has one."""
    acc = ACC_DTYPE[dtype]
    out = out_dtype or ("int8" if epi is not None else acc)
    X = S.Buffer("X", (spec.m, spec.k), dtype)
    W = S.Buffer("W", (spec.n, spec.k), dtype)
    Y = S.Buffer("Y", (spec.m, spec.n), out)
    bias = S.Buffer("bias", (spec.n,), "int32") if epi is not None and epi.bias else None
    params = (X, W) + ((bias,) if bias is not None else ()) + (Y,)

    def a_at(m: E.Expr, k: E.Expr) -> tuple[E.Expr, E.Expr | None]:
        return X.load(m, k), _and(E.Cmp("<", m, E.IntImm(spec.m)), E.Cmp("<", k, E.IntImm(spec.k)))

    def b_at(n: E.Expr, k: E.Expr) -> tuple[E.Expr, E.Expr | None]:
        return W.load(n, k), _and(E.Cmp("<", n, E.IntImm(spec.n)), E.Cmp("<", k, E.IntImm(spec.k)))

    def c_store(m: E.Expr, n: E.Expr, v: E.Expr) -> S.Stmt:
        val = _epilogue(v, bias.load(n) if bias is not None else None, epi, out)
        return S.IfThenElse(E.And(E.Cmp("<", m, E.IntImm(spec.m)), E.Cmp("<", n, E.IntImm(spec.n))),
                            Y.store(val, m, n))

    return GemmProblem("matmul", spec.m, spec.n, spec.k, params, a_at, b_at, c_store, dtype, acc)


def conv2d_problem(spec: Conv2dSpec, dtype: str = "int8", epi: Epilogue | None = None,
                   out_dtype: str | None = None) -> GemmProblem:
    """NCHW conv2d as an implicit GEMM (see the module docstring); out (N, OC, OH, OW). The
    kernel parameter is the OIHW weight reshaped to (OC, IC*KH*KW) (a view, no copy)."""
    acc = ACC_DTYPE[dtype]
    out = out_dtype or ("int8" if epi is not None else acc)
    s = spec
    data = S.Buffer("data", (s.n, s.ic, s.h, s.w), dtype)
    # the weights as the GEMM's B matrix: OIHW flattened to (OC, IC*KH*KW), a free reshape
    Wt = S.Buffer("kernel", (s.oc, s.ic * s.kh * s.kw), dtype)
    res = S.Buffer("res", (s.n, s.oc, s.oh, s.ow), out)
    bias = S.Buffer("bias", (s.oc,), "int32") if epi is not None and epi.bias else None
    params = (data, Wt) + ((bias,) if bias is not None else ()) + (res,)
    M, K = s.n * s.oh * s.ow, s.ic * s.kh * s.kw
    khw = s.kh * s.kw

    def a_at(m: E.Expr, k: E.Expr) -> tuple[E.Expr, E.Expr | None]:
        img, p, q = m // (s.oh * s.ow), (m // s.ow) % s.oh, m % s.ow
        c, r, t = k // khw, (k // s.kw) % s.kh, k % s.kw
        h = p * s.stride + r - s.pad
        w = q * s.stride + t - s.pad
        cond = _and(E.Cmp("<", m, E.IntImm(M)), E.Cmp("<", k, E.IntImm(K)))
        if s.pad:
            cond = _and(cond, E.Cmp(">=", h, E.IntImm(0)), E.Cmp("<", h, E.IntImm(s.h)),
                        E.Cmp(">=", w, E.IntImm(0)), E.Cmp("<", w, E.IntImm(s.w)))
        return data.load(img, c, h, w), cond

    def b_at(n: E.Expr, k: E.Expr) -> tuple[E.Expr, E.Expr | None]:
        return Wt.load(n, k), _and(E.Cmp("<", n, E.IntImm(s.oc)), E.Cmp("<", k, E.IntImm(K)))

    def c_store(m: E.Expr, n: E.Expr, v: E.Expr) -> S.Stmt:
        img, p, q = m // (s.oh * s.ow), (m // s.ow) % s.oh, m % s.ow
        val = _epilogue(v, bias.load(n) if bias is not None else None, epi, out)
        return S.IfThenElse(E.And(E.Cmp("<", m, E.IntImm(M)), E.Cmp("<", n, E.IntImm(s.oc))),
                            res.store(val, img, n, p, q))

    return GemmProblem("conv2d", M, s.oc, K, params, a_at, b_at, c_store, dtype, acc,
                       a_contiguous=False, b_contiguous=True)


# ---------------------------------------------------------------------------- SIMT schedule


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


def simt_gemm(prob: GemmProblem, knobs: SimtKnobs = SimtKnobs(), name: str | None = None
              ) -> S.PrimFunc:
    """The SIMT schedule of an implicit GEMM (see the module docstring)."""
    kb = knobs
    kb.check()
    ty_n, tx_n = kb.bm // kb.tm, kb.bn // kb.tn
    nthreads = ty_n * tx_n
    unroll = S.ForKind.UNROLLED if kb.unroll else S.ForKind.SERIAL
    by, bx = E.Var("by"), E.Var("bx")
    ty, tx = E.Var("ty"), E.Var("tx")
    ko, kk = E.Var("ko"), E.Var("kk")
    acc_t, in_t = prob.acc_dtype, prob.in_dtype
    C_loc = S.Buffer("C_local", (kb.tm, kb.tn), acc_t, "local")
    A_sh = S.Buffer("A_shared", (kb.bk, kb.bm), in_t, "shared")
    B_sh = S.Buffer("B_shared", (kb.bk, kb.bn), in_t, "shared")
    A_reg = S.Buffer("A_local", (kb.tm,), in_t, "local")
    B_reg = S.Buffer("B_local", (kb.tn,), in_t, "local")
    zero = E.IntImm(0, acc_t) if acc_t == "int32" else E.FloatImm(0.0, acc_t)

    # C.init (cache_write local): the register tile starts at zero
    i, j = E.Var("i"), E.Var("j")
    init = _stage("C.local.init", _for(i, kb.tm, _for(j, kb.tn, C_loc.store(zero, i, j), unroll),
                                       unroll))

    def copy(name: str, buf: S.Buffer, rows: int, base_row: E.Expr, at: Callable) -> S.Stmt:
        # cooperative fetch: thread t copies elements t, t + nthreads, ...; consecutive threads
        # read consecutive k (the contiguous dimension of X and W)
        e = E.Var("e")
        total = rows * kb.bk
        flat = e * nthreads + (ty * tx_n + tx)
        r, c = flat // kb.bk, flat % kb.bk
        val, cond = at(base_row + r, ko * kb.bk + c)
        body: S.Stmt = buf.store(_guarded(val, cond, in_t), c, r)
        if total % nthreads:
            body = S.IfThenElse(E.Cmp("<", flat, E.IntImm(total)), body)
        return _stage(name, _for(e, _ceil(total, nthreads), body, unroll))

    load_a = copy("A.shared", A_sh, kb.bm, by * kb.bm, prob.a_at)
    load_b = copy("B.shared", B_sh, kb.bn, bx * kb.bn, prob.b_at)

    # C.update: stream the shared tiles through register fragments (cache_read local)
    ii, jj, i2, j2 = E.Var("i"), E.Var("j"), E.Var("i"), E.Var("j")
    fetch_a = _for(ii, kb.tm, A_reg.store(A_sh.load(kk, ii * ty_n + ty), ii), unroll)
    fetch_b = _for(jj, kb.tn, B_reg.store(B_sh.load(kk, jj * tx_n + tx), jj), unroll)
    prod = E.Mul(A_reg.load(i2).astype(acc_t), B_reg.load(j2).astype(acc_t), acc_t)
    fma = C_loc.store(E.Add(C_loc.load(i2, j2), prod, acc_t), i2, j2)
    update = _stage("C.update", _for(kk, kb.bk, S.seq(
        _stage("A.local", fetch_a), _stage("B.local", fetch_b),
        _for(i2, kb.tm, _for(j2, kb.tn, fma, unroll), unroll)), unroll))

    kloop = _for(ko, _ceil(prob.k, kb.bk), S.seq(load_a, load_b, update))
    staged = S.Allocate(A_sh, S.Allocate(B_sh, S.Allocate(A_reg, S.Allocate(B_reg, kloop))))

    # C.store (copy-out of the cache_write stage) with the fused epilogue
    i3, j3 = E.Var("i"), E.Var("j")
    m = by * kb.bm + i3 * ty_n + ty
    n = bx * kb.bn + j3 * tx_n + tx
    store = _stage("C.store", _for(i3, kb.tm, _for(j3, kb.tn,
                                                   prob.c_store(m, n, C_loc.load(i3, j3)), unroll),
                                   unroll))
    body = S.Allocate(C_loc, S.seq(init, staged, store))
    body = _for(tx, tx_n, body, S.ForKind.THREAD_BINDING, "threadIdx.x")
    body = _for(ty, ty_n, body, S.ForKind.THREAD_BINDING, "threadIdx.y")
    body = _for(bx, _ceil(prob.n, kb.bn), body, S.ForKind.THREAD_BINDING, "blockIdx.x")
    body = _for(by, _ceil(prob.m, kb.bm), body, S.ForKind.THREAD_BINDING, "blockIdx.y")
    fname = name or f"{prob.name}_{prob.in_dtype}_simt"
    return S.PrimFunc(fname, prob.params, body, (("target", "cuda"), ("knobs", kb)))


def matmul_simt(spec: MatmulSpec, dtype: str = "int8", epi: Epilogue | None = None,
                knobs: SimtKnobs = SimtKnobs(), out_dtype: str | None = None) -> S.PrimFunc:
    return simt_gemm(matmul_problem(spec, dtype, epi, out_dtype), knobs)


def conv2d_simt(spec: Conv2dSpec, dtype: str = "int8", epi: Epilogue | None = None,
                knobs: SimtKnobs = SimtKnobs(), out_dtype: str | None = None) -> S.PrimFunc:
    return simt_gemm(conv2d_problem(spec, dtype, epi, out_dtype), knobs)


# ---------------------------------------------------------------------------- tensor cores


@dataclass(frozen=True)
class WmmaKnobs:
    """The tensor-core schedule: a ``bm x bn`` block tile computed by ``warps_m x warps_n``
    warps, each holding a register tile of (bm/16/warps_m) x (bn/16/warps_n) accumulator
    fragments; K advances by ``bk``; shared rows are padded by ``pad`` elements (bank
    conflicts); ``double_buffer`` stages the next K slice (global -> registers) while the
    current one is multiplied; copies move ``vec`` contiguous elements at once (16 bytes)."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 4
    pad: int = 8
    double_buffer: bool = True
    vec: int = 8

    def check(self, prob: GemmProblem) -> None:
        t = 16
        if self.bm % (t * self.warps_m) or self.bn % (t * self.warps_n) or self.bk % t:
            raise ScheduleError(f"WMMA knobs: bm={self.bm} must be a multiple of 16*warps_m, "
                                f"bn={self.bn} of 16*warps_n, bk={self.bk} of 16")
        if 32 * self.warps_m * self.warps_n > 1024:
            raise ScheduleError("WMMA knobs: more than 1024 threads per block")
        if self.vec > 1 and (prob.k % self.vec or self.bk % self.vec):
            raise ScheduleError(f"WMMA knobs: vec={self.vec} needs K={prob.k} and bk={self.bk} "
                                f"to be multiples of it")
        esize = 1 if prob.in_dtype == "int8" else 2
        if ((self.bk + self.pad) * esize) % 16:
            raise ScheduleError(f"WMMA knobs: a shared row of bk+pad={self.bk + self.pad} "
                                f"elements is not a multiple of 16 bytes")


def wmma_gemm(prob: GemmProblem, knobs: WmmaKnobs = WmmaKnobs(), name: str | None = None
              ) -> S.PrimFunc:
    """The tensor-core schedule of an implicit GEMM (int8 -> int32 or fp16 -> fp32).

    Shape (what ``lower_tensorize`` + ``insert_barriers`` make of it): per block, the K loop is
    software-pipelined - the next A/B slices are fetched from global memory into registers
    (``cache_read`` local, ``vec``-wide loads) while the warps multiply the current slices held
    in shared memory (``cache_read`` shared, two stages), then the registers are written to the
    other stage and one barrier ends the iteration. Each warp loads its A and B fragments from
    shared memory (``cache_read`` into fragments) and issues fm x fn ``mma_sync`` (the
    ``tensorize`` region). The accumulators are staged through shared memory one 16x16 tile per
    warp at a time, and each lane applies the fused epilogue to 8 elements before storing.
    """
    from vta.gpu.intrinsics import wmma_intrinsic

    kb = knobs
    kb.check(prob)
    intrin = wmma_intrinsic(prob.in_dtype)
    T = 16
    nwarps = kb.warps_m * kb.warps_n
    NT = 32 * nwarps
    fm, fn = kb.bm // (T * kb.warps_m), kb.bn // (T * kb.warps_n)
    nst = 2 if kb.double_buffer else 1
    ld = kb.bk + kb.pad
    KT = _ceil(prob.k, kb.bk)
    acc_t, in_t = prob.acc_dtype, prob.in_dtype
    unroll = S.ForKind.UNROLLED

    by, bx, t, ko = E.Var("by"), E.Var("bx"), E.Var("tx"), E.Var("ko")
    warp = t // 32
    wy, wx, lane = warp // kb.warps_n, warp % kb.warps_n, t % 32
    C_frag = S.Buffer("C_frag", (fm, fn, T, T), acc_t, "local")
    A_frag = S.Buffer("A_frag", (fm, T, T), in_t, "local")
    B_frag = S.Buffer("B_frag", (fn, T, T), in_t, "local")
    A_sh = S.Buffer("A_shared", (nst, kb.bm, ld), in_t, "shared")
    B_sh = S.Buffer("B_shared", (nst, kb.bn, ld), in_t, "shared")
    C_st = S.Buffer("C_stage", (nwarps, T, T), acc_t, "shared")

    def chunks(rows: int, vec: int) -> int:
        return _ceil(rows * kb.bk, NT * vec)

    vec_a = kb.vec if prob.a_contiguous else 1
    vec_b = kb.vec if prob.b_contiguous else 1
    A_ld = S.Buffer("A_local", (chunks(kb.bm, vec_a) * vec_a,), in_t, "local")
    B_ld = S.Buffer("B_local", (chunks(kb.bn, vec_b) * vec_b,), in_t, "local")

    def fetch(buf: S.Buffer, rows: int, vec: int, base_row: E.Expr, k0: E.Expr,
              at: Callable) -> S.Stmt:
        """global -> registers: thread t moves chunks t, t + NT, ... of ``vec`` elements."""
        c, v = E.Var("c"), E.Var("v")
        per_row = kb.bk // vec
        flat = c * NT + t
        r, col = flat // per_row, (flat % per_row) * vec
        val, _ = at(base_row + r, k0 + col + v)
        _, cond = at(base_row + r, k0 + col)  # whole vectors are in or out (K % vec == 0)
        body: S.Stmt = buf.store(_guarded(val, cond, in_t), c * vec + v)
        inner = _for(v, vec, body, S.ForKind.VECTORIZED if vec > 1 else S.ForKind.SERIAL)
        if (rows * kb.bk) % (NT * vec):
            inner = S.IfThenElse(E.Cmp("<", flat, E.IntImm(rows * per_row)), inner)
        return _for(c, chunks(rows, vec), inner, unroll)

    def stash(buf: S.Buffer, sh: S.Buffer, rows: int, vec: int, stage: E.Expr) -> S.Stmt:
        """registers -> shared stage ``stage``."""
        c, v = E.Var("c"), E.Var("v")
        per_row = kb.bk // vec
        flat = c * NT + t
        r, col = flat // per_row, (flat % per_row) * vec
        body: S.Stmt = sh.store(buf.load(c * vec + v), stage, r, col + v)
        inner = _for(v, vec, body, S.ForKind.VECTORIZED if vec > 1 else S.ForKind.SERIAL)
        if (rows * kb.bk) % (NT * vec):
            inner = S.IfThenElse(E.Cmp("<", flat, E.IntImm(rows * per_row)), inner)
        return _for(c, chunks(rows, vec), inner, unroll)

    def load_slices(k0: E.Expr) -> S.Stmt:
        return S.seq(_stage("A.local", fetch(A_ld, kb.bm, vec_a, by * kb.bm, k0, prob.a_at)),
                     _stage("B.local", fetch(B_ld, kb.bn, vec_b, bx * kb.bn, k0, prob.b_at)))

    def store_slices(stage: E.Expr) -> S.Stmt:
        return S.seq(_stage("A.shared", stash(A_ld, A_sh, kb.bm, vec_a, stage)),
                     _stage("B.shared", stash(B_ld, B_sh, kb.bn, vec_b, stage)))

    def compute(stage: E.Expr) -> S.Stmt:
        kf, fi, fj, fi1 = E.Var("kf"), E.Var("fi"), E.Var("fj"), E.Var("fi")
        r, c = E.Var("r"), E.Var("c")
        a_row = wy * (fm * T) + fi1 * T
        load_a = _for(fi1, fm, _for(r, T, _for(c, T, A_frag.store(
            A_sh.load(stage, a_row + r, kf * T + c), fi1, r, c))), unroll)
        r2, c2, fj2 = E.Var("r"), E.Var("c"), E.Var("fj")
        b_row = wx * (fn * T) + fj2 * T
        load_b = _for(fj2, fn, _for(r2, T, _for(c2, T, B_frag.store(
            B_sh.load(stage, b_row + c2, kf * T + r2), fj2, r2, c2))), unroll)
        i, j, k = E.Var("i"), E.Var("j"), E.Var("k")
        prod = E.Mul(A_frag.load(fi, i, k).astype(acc_t), B_frag.load(fj, k, j).astype(acc_t),
                     acc_t)
        upd = C_frag.store(E.Add(C_frag.load(fi, fj, i, j), prod, acc_t), fi, fj, i, j)
        region = S.AttrStmt("tensorize", intrin, _for(i, T, _for(j, T, _for(k, T, upd))))
        mma = _for(fi, fm, _for(fj, fn, region, unroll), unroll)
        return _stage("C.update", _for(kf, kb.bk // T, S.seq(
            _stage("A.frag", load_a), _stage("B.frag", load_b), mma), unroll))

    fi, fj, r, c = E.Var("fi"), E.Var("fj"), E.Var("r"), E.Var("c")
    zero = E.IntImm(0, acc_t) if acc_t == "int32" else E.FloatImm(0.0, acc_t)
    init = _stage("C.frag.init", _for(fi, fm, _for(fj, fn, _for(r, T, _for(c, T, C_frag.store(
        zero, fi, fj, r, c))), unroll), unroll))

    if kb.double_buffer:
        nxt = ko + 1
        has_next = E.Cmp("<", nxt, E.IntImm(KT))
        body = S.seq(S.IfThenElse(has_next, load_slices(nxt * kb.bk)),
                     compute(ko % 2),
                     S.IfThenElse(has_next, store_slices(nxt % 2)))
        kloop = S.seq(load_slices(E.IntImm(0)), store_slices(E.IntImm(0)), _for(ko, KT, body))
    else:
        kloop = _for(ko, KT, S.seq(load_slices(ko * kb.bk), store_slices(E.IntImm(0)),
                                    compute(E.IntImm(0))))

    # copy-out: each warp stages one accumulator tile in shared memory, its lanes apply the
    # epilogue to 8 elements each
    fi2, fj2, r2, c2, e = E.Var("fi"), E.Var("fj"), E.Var("r"), E.Var("c"), E.Var("e")
    stage_out = _for(r2, T, _for(c2, T, C_st.store(C_frag.load(fi2, fj2, r2, c2), warp, r2, c2)))
    idx = e * 32 + lane
    rr, cc = idx // T, idx % T
    m = by * kb.bm + wy * (fm * T) + fi2 * T + rr
    n = bx * kb.bn + wx * (fn * T) + fj2 * T + cc
    apply = _for(e, T * T // 32, prob.c_store(m, n, C_st.load(warp, rr, cc)), unroll)
    # fragment indices must be compile-time constants (else fragments spill): unroll
    out = _stage("C.store", _for(fi2, fm, _for(fj2, fn, S.seq(stage_out, apply), unroll), unroll))

    staged = S.Allocate(A_sh, S.Allocate(B_sh, S.Allocate(A_ld, S.Allocate(B_ld, S.Allocate(
        A_frag, S.Allocate(B_frag, kloop))))))
    body_all: S.Stmt = S.Allocate(C_frag, S.seq(init, staged, S.Allocate(C_st, out)))
    body_all = _for(t, NT, body_all, S.ForKind.THREAD_BINDING, "threadIdx.x")
    body_all = _for(bx, _ceil(prob.n, kb.bn), body_all, S.ForKind.THREAD_BINDING, "blockIdx.x")
    body_all = _for(by, _ceil(prob.m, kb.bm), body_all, S.ForKind.THREAD_BINDING, "blockIdx.y")
    fname = name or f"{prob.name}_{prob.in_dtype}_wmma"
    return S.PrimFunc(fname, prob.params, body_all, (("target", "cuda"), ("knobs", kb)))


def matmul_wmma(spec: MatmulSpec, dtype: str = "float16", epi: Epilogue | None = None,
                knobs: WmmaKnobs | None = None, out_dtype: str | None = None) -> S.PrimFunc:
    if knobs is None:
        knobs = WmmaKnobs(pad=16, vec=16) if dtype == "int8" else WmmaKnobs()
        knobs = replace(knobs, vec=_widest_vec(knobs.vec, spec.k))
    return wmma_gemm(matmul_problem(spec, dtype, epi, out_dtype), knobs)


def _widest_vec(vec: int, k: int) -> int:
    """The widest copy (at most ``vec`` elements) that divides K: whole vectors stay in bounds."""
    while vec > 1 and k % vec:
        vec //= 2
    return vec


def conv2d_wmma(spec: Conv2dSpec, dtype: str = "int8", epi: Epilogue | None = None,
                knobs: WmmaKnobs | None = None, out_dtype: str | None = None) -> S.PrimFunc:
    if knobs is None:
        base = WmmaKnobs(pad=16, vec=16) if dtype == "int8" else WmmaKnobs()
        k = spec.ic * spec.kh * spec.kw
        vec = _widest_vec(base.vec, k)
        knobs = WmmaKnobs(bm=64, bn=64, bk=32, warps_m=2, warps_n=2, pad=base.pad, vec=vec)
    return wmma_gemm(conv2d_problem(spec, dtype, epi, out_dtype), knobs)
