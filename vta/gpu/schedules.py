"""Default GPU schedules of matmul/dense and conv2d, written with the schedule primitives.

The kernels are the tensor-IR implicit GEMMs of ``vta.gpu.ops``; a schedule here is a list of
primitives (``vta.compiler.ir.schedule``) and ``lower`` (``vta.compiler.ir.lower``) makes the loop
nest, exactly as for the accelerator. The GPU pipeline (``vta.gpu.lower_gpu``) then binds
threads, places barriers and lowers the tensor-core regions; nothing here writes IR by hand.

SIMT (``simt_schedule``): a block computes a ``bm x bn`` tile of the output with
``(bm/tm) x (bn/tn)`` threads (``bind``), each a ``tm x tn`` register tile of the accumulator
(``cache_write(C, "local")`` + ``compute_at`` the thread loop; ``C`` itself becomes the
copy-out, inlined into the output stage); per ``bk`` slice of K the block copies A and B tiles
into shared memory (``cache_read`` shared, a cooperative copy bound to the same threads) and
every thread streams them through registers (``cache_read`` local). The epilogue computes are
inlined into the output stage: they run on the register tile.

Tensor cores (``wmma_schedule``): a ``bm x bn x bk`` block tile, ``warps_m x warps_n`` warps
(``threadIdx.z``/``threadIdx.y``; ``threadIdx.x`` the lanes of a warp), each warp a register tile of
``fm x fn`` 16x16 accumulator fragments (``tensorize`` with the registered WMMA intrinsic over
``local`` caches: ``cache_read`` of A and B, ``cache_write`` of C). A and B slices are staged
in shared memory, double-buffered (``double_buffer``: one barrier per K step) and copied with
``vec``-wide moves (``vectorize``). The accumulators leave through a per-warp 16x16 staging
tile (``cache_read`` into scope ``warp``), where the lanes apply the fused epilogue, 8 elements
each.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.ir import stmt as S
from vta.compiler.ir.lower import lower
from vta.compiler.ir.schedule import Schedule, Stage, create_schedule
from vta.compiler.ir.tensor import IterVar
from vta.compiler.ops.chain import Chain
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import ScheduleError
from vta.gpu.dialect import KNOBS
from vta.gpu.ops import ACC_DTYPE, GemmDef, conv2d_gemm, matmul_gemm
from vta.gpu.target import DEFAULT_TARGET, WARP_LANES
from vta.gpu.wmma import wmma_intrinsic

__all__ = ["SimtKnobs", "WmmaKnobs", "ScheduleError", "ACC_DTYPE", "simt_schedule",
           "wmma_schedule", "matmul_simt", "conv2d_simt", "matmul_wmma", "conv2d_wmma"]


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
        if threads > DEFAULT_TARGET.max_threads:
            raise ScheduleError(f"SIMT knobs give {threads} threads per block (limit "
                                f"{DEFAULT_TARGET.max_threads})")


@dataclass(frozen=True)
class WmmaKnobs:
    """The tensor-core schedule: a ``bm x bn`` block tile computed by ``warps_m x warps_n``
    warps, each holding (bm/16/warps_m) x (bn/16/warps_n) accumulator fragments; K advances by
    ``bk``; ``double_buffer`` alternates two shared stages; copies move ``vec`` contiguous
    elements at once."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    warps_m: int = 2
    warps_n: int = 4
    double_buffer: bool = True
    vec: int = 8

    def check(self) -> None:
        t = 16
        if self.bm % (t * self.warps_m) or self.bn % (t * self.warps_n) or self.bk % t:
            raise ScheduleError(f"WMMA knobs: bm={self.bm} must be a multiple of 16*warps_m, "
                                f"bn={self.bn} of 16*warps_n, bk={self.bk} of 16")
        if WARP_LANES * self.warps_m * self.warps_n > DEFAULT_TARGET.max_threads:
            raise ScheduleError(f"WMMA knobs: more than {DEFAULT_TARGET.max_threads} threads "
                                f"per block")
        if self.vec < 1 or self.bk % self.vec:
            raise ScheduleError(f"WMMA knobs: vec={self.vec} must divide bk={self.bk}")


def _maybe_unroll(st: Stage, on: bool, *axes: IterVar) -> None:
    if on:
        for a in axes:
            st.unroll(a)


def _cooperative_copy(st: Stage, threads: list[tuple[str, int]], vec: int = 1,
                      unroll: bool = True) -> None:
    """Spread a 2-D copy stage over the block's threads (``threads`` innermost first:
    ``[("threadIdx.x", WARP_LANES), ...]``): the rows times ``vec``-element chunks of each row are
    fused and split over the threads; each thread moves whole chunks (``vectorize``)."""
    r, c = st.axis
    v = None
    if vec > 1:
        c, v = st.split(c, vec)
    f = st.fuse(r, c)
    bound = []
    for tag, n in threads:
        f, t = st.split(f, n)
        bound.append((t, tag))
    st.reorder(f, *(t for t, _ in reversed(bound)), *((v,) if v is not None else ()))
    for t, tag in bound:
        st.bind(t, tag)
    _maybe_unroll(st, unroll, f)
    if v is not None:
        st.vectorize(v)


# ---------------------------------------------------------------------------- SIMT


def simt_schedule(g: GemmDef, kb: SimtKnobs = SimtKnobs()) -> Schedule:
    """The SIMT schedule of an implicit GEMM (module docstring)."""
    kb.check()
    s = create_schedule(g.out)
    CL = s.cache_write(g.c, "local")  # the register tile; g.c becomes its copy-out
    AS = s.cache_read(g.a, "shared", [CL])
    BS = s.cache_read(g.b, "shared", [CL])
    AL = s.cache_read(AS, "local", [CL])
    BL = s.cache_read(BS, "local", [CL])
    for t in g.inline:
        s[t].compute_inline()
    if g.c is not g.out:  # the copy-out runs in the output stage, after the epilogue
        s[g.c].compute_inline()
    out = s[g.out]
    m, n = g.gemm_axes(s)
    by, mi = out.split(m, kb.bm)
    ty, i = out.split(mi, kb.tm)
    bx, ni = out.split(n, kb.bn)
    tx, j = out.split(ni, kb.tn)
    out.reorder(by, bx, ty, tx, i, j)
    out.bind(by, "blockIdx.y")
    out.bind(bx, "blockIdx.x")
    out.bind(ty, "threadIdx.y")
    out.bind(tx, "threadIdx.x")
    _maybe_unroll(out, kb.unroll, i, j)

    sc = s[CL]
    sc.compute_at(out, tx)
    ci, cj = sc.axis
    ko, kk = sc.split(sc.reduce_axis[0], kb.bk)
    sc.reorder(ko, kk, ci, cj)
    _maybe_unroll(sc, kb.unroll, kk, ci, cj)
    threads = [("threadIdx.x", kb.bn // kb.tn), ("threadIdx.y", kb.bm // kb.tm)]
    for sh in (AS, BS):
        s[sh].compute_at(sc, ko)
        _cooperative_copy(s[sh], threads, unroll=kb.unroll)
    for loc in (AL, BL):
        s[loc].compute_at(sc, kk)
        _maybe_unroll(s[loc], kb.unroll, s[loc].axis[0])
    return s


# ---------------------------------------------------------------------------- tensor cores


def wmma_schedule(g: GemmDef, kb: WmmaKnobs = WmmaKnobs()) -> Schedule:
    """The tensor-core schedule of an implicit GEMM (module docstring); the GEMM must be
    padded to whole tiles (``pad=(bm, bn, bk)``), the output stage stores only M x N."""
    kb.check()
    if g.m % kb.bm or g.n % kb.bn or g.k % kb.bk:
        raise ScheduleError(f"WMMA schedule: the GEMM {g.m}x{g.n}x{g.k} is not a multiple of "
                            f"the tile {kb.bm}x{kb.bn}x{kb.bk} (define it with pad=(bm, bn, bk))")
    T = 16
    fm, fn = kb.bm // (T * kb.warps_m), kb.bn // (T * kb.warps_n)
    s = create_schedule(g.out)
    C = s.cache_write(g.c, "local")  # the accumulator fragments; g.c becomes their copy-out
    AS = s.cache_read(g.a, "shared", [C])
    BS = s.cache_read(g.b, "shared", [C])
    AF = s.cache_read(AS, "local", [C])
    BF = s.cache_read(BS, "local", [C])
    CS = s.cache_read(C, "warp", [g.c])  # the per-warp staging tile the lanes read
    for t in g.inline:
        s[t].compute_inline()
    if g.c is not g.out:
        s[g.c].compute_inline()

    # the output: block tile -> warp tile -> 16x16 fragments -> 8 elements per lane
    out = s[g.out]
    m, n = g.gemm_axes(s)
    by, mi = out.split(m, kb.bm)
    wy, mw = out.split(mi, fm * T)
    fi, r = out.split(mw, T)
    bx, ni = out.split(n, kb.bn)
    wx, nw = out.split(ni, fn * T)
    fj, c = out.split(nw, T)
    out.reorder(by, bx, wy, wx, fi, fj, r, c)
    e, lane = out.split(out.fuse(r, c), WARP_LANES)
    out.bind(by, "blockIdx.y")
    out.bind(bx, "blockIdx.x")
    out.bind(wy, "threadIdx.z")
    out.bind(wx, "threadIdx.y")
    out.bind(lane, "threadIdx.x")
    # fragment indices must be compile-time constants (else fragments spill): unroll
    _maybe_unroll(out, True, fi, fj, e)
    s[CS].compute_at(out, fj)

    # the warp's accumulators: fm x fn fragments, K in bk slices of bk/16 WMMA steps
    sc = s[C]
    sc.compute_at(out, wx)
    ci, cj = sc.axis
    cfi, ci16 = sc.split(ci, T)
    cfj, cj16 = sc.split(cj, T)
    ko, kr = sc.split(sc.reduce_axis[0], kb.bk)
    kf, kk = sc.split(kr, T)
    sc.reorder(ko, kf, cfi, cfj, ci16, cj16, kk)
    sc.tensorize(ci16, wmma_intrinsic(g.in_dtype))
    _maybe_unroll(sc, True, kf, cfi, cfj)

    threads = [("threadIdx.x", WARP_LANES), ("threadIdx.y", kb.warps_n),
               ("threadIdx.z", kb.warps_m)]
    for sh, contiguous in ((AS, g.a_contiguous), (BS, True)):
        s[sh].compute_at(sc, ko)
        if kb.double_buffer:
            s[sh].double_buffer()
        _cooperative_copy(s[sh], threads, kb.vec if contiguous else 1)
    for frag in (AF, BF):
        st = s[frag]
        st.compute_at(sc, kf)
        f, _ = st.split(st.axis[0], T)
        st.unroll(f)
    return s


# ---------------------------------------------------------------------------- entry points


def _func(g: GemmDef, s: Schedule, kind: str, knobs: object) -> S.PrimFunc:
    f = lower(s, list(g.args), f"{g.name}_{g.in_dtype}_{kind}")
    return S.PrimFunc(f.name, f.params, f.body, ((S.TARGET, "cuda"), (KNOBS, knobs)))


def matmul_simt(spec: MatmulSpec, dtype: str = "int8", epi: Epilogue | None = None,
                knobs: SimtKnobs = SimtKnobs(), out_dtype: str | None = None,
                chain: Chain | None = None) -> S.PrimFunc:
    g = matmul_gemm(spec, dtype, epi, out_dtype, chain=chain)
    return _func(g, simt_schedule(g, knobs), "simt", knobs)


def conv2d_simt(spec: Conv2dSpec, dtype: str = "int8", epi: Epilogue | None = None,
                knobs: SimtKnobs = SimtKnobs(), out_dtype: str | None = None,
                chain: Chain | None = None) -> S.PrimFunc:
    g = conv2d_gemm(spec, dtype, epi, out_dtype, chain=chain)
    return _func(g, simt_schedule(g, knobs), "simt", knobs)


def _widest_vec(vec: int, k: int) -> int:
    """The widest copy (at most ``vec`` elements) that divides K: whole vectors stay aligned."""
    while vec > 1 and k % vec:
        vec //= 2
    return vec


def fit_knobs(kb: WmmaKnobs, m: int, n: int, k: int) -> WmmaKnobs:
    """Shrink the warp tiles of ``kb`` to the problem: bound inference sizes a warp's
    accumulator tile by what the output reads, so a warp tile must not exceed M x N (rounded
    down to 16); copies get the widest vector that divides K."""
    if m < 16 or n < 16:
        raise ScheduleError(f"WMMA schedule: M={m} and N={n} must be at least 16 (one tile); "
                            f"use the SIMT schedule")
    fm = max(1, min(kb.bm // (16 * kb.warps_m), m // 16))
    fn = max(1, min(kb.bn // (16 * kb.warps_n), n // 16))
    return WmmaKnobs(16 * fm * kb.warps_m, 16 * fn * kb.warps_n, kb.bk, kb.warps_m, kb.warps_n,
                     kb.double_buffer, _widest_vec(kb.vec, k))


def matmul_wmma(spec: MatmulSpec, dtype: str = "float16", epi: Epilogue | None = None,
                knobs: WmmaKnobs | None = None, out_dtype: str | None = None,
                chain: Chain | None = None) -> S.PrimFunc:
    if knobs is None:
        knobs = WmmaKnobs(vec=16 if dtype == "int8" else 8)
    kb = fit_knobs(knobs, spec.m, spec.n, spec.k)
    g = matmul_gemm(spec, dtype, epi, out_dtype, pad=(kb.bm, kb.bn, kb.bk), chain=chain)
    return _func(g, wmma_schedule(g, kb), "wmma", kb)


def conv2d_wmma(spec: Conv2dSpec, dtype: str = "int8", epi: Epilogue | None = None,
                knobs: WmmaKnobs | None = None, out_dtype: str | None = None,
                chain: Chain | None = None) -> S.PrimFunc:
    if knobs is None:
        knobs = WmmaKnobs(bm=64, bn=64, bk=32, warps_m=2, warps_n=2,
                          vec=16 if dtype == "int8" else 8)
    kb = fit_knobs(knobs, spec.n * spec.oh * spec.ow, spec.oc, spec.ic * spec.kh * spec.kw)
    g = conv2d_gemm(spec, dtype, epi, out_dtype, pad=(kb.bm, kb.bn, kb.bk), chain=chain)
    return _func(g, wmma_schedule(g, kb), "wmma", kb)
