"""An implicit-GEMM conv2d on tensor cores, written with task mappings, for NCHW activations.

``out[n, o, y, x] = epilogue(sum_{r, t, c} data[n, c, y s + r - p, x s + t - p] w[o, r, t, c])``
with the weight in OHWI order flattened to (OC, KH*KW*IC) (the layout tensor-core implicit
GEMMs use: a K-slice of one tap is IC contiguous channels; the runner transposes the constant
OIHW weight once, as the accelerator's runtime packs it), ``data`` (N, IC, H, W), ``bias``
(OC,), ``out`` (N, OC, OH, OW): int8 through the fused requantizing epilogue, or float16 in and
float32/float16 out.

GEMM view: M = output pixels, N = output channels, K = (tap, channel). A block computes
``TH x TW`` output pixels of one image (whole output rows when they fit in ``bm``) for ``bn``
output channels; K advances by a *step* = (channel block of ``bk`` channels, one tap).

Why a patch. In NCHW consecutive K (channels) are a plane apart and the same input bytes are
read by up to KH*KW taps, so gathering the A tile straight from global memory would fetch
every sector several times. Instead, once per channel block the block's *input patch* (the
``bk`` channels x the input rows and columns its output pixels read) is copied into shared
memory with ``cp.async`` (or element copies when rows are not 4-byte aligned), as contiguous
global ranges - whole planes, whole rows, or row segments, whichever the block covers - in
sector-aligned windows: every input sector a block needs is fetched once per channel block.
For each tap the block then *expands* the patch into the A tile (``bm x bk``, pixel-major,
XOR-swizzled): lanes take consecutive pixels (conflict-free gathers), each gathers 16 bytes of
channels into registers and stores them as one 16-byte vector. The weights' tile for the step
(``bn x bk``, contiguous in OHWI) comes through the same ``cp.async`` ring as the GEMM's, and
``ldmatrix`` + ``mma.sync`` run as in ``vta.gpu.kernels.gemm`` (fragments double-buffered over
the step's 32-byte k-chunks).

Pipeline per step: ``wait_group(stages - 2)`` + barrier (this step's weights and, at a channel
block's first tap, its patch have landed; the previous step's A tile is consumed); issue the
copies of step ``t + stages - 1`` (its patch too at a block's first tap, into one of ``NP``
patch buffers, enough that none is overwritten while a step still expands from it);
expand; barrier; fragments and MMAs. Epilogue: bias and requantization in registers, the
``bn x bm`` tile staged (channel-major, layout chosen with the bank model), then written as the
output planes' contiguous pixel ranges in sector-aligned windows (vectors where aligned).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.compiler.ops.chain import POSITION, TENSOR, Chain
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.errors import GpuLoweringError
from vta.gpu.dialect import KERNEL, KNOBS, PATCH
from vta.gpu.kernels.common import alloc, finish
from vta.gpu.kernels.copy import copy_mapping, vector_bytes, window_mapping, window_offset
from vta.gpu.kernels.gemm import ChainSite, GemmBody, MmaKnobs, chain_buffers, check_chain
from vta.gpu.kernels.smem_layout import Pattern, SwizzledTile, Tile, choose_layout, storage_shape
from vta.gpu.mma import MMA_SHAPES, CpAsync, CpAsyncCommit, CpAsyncWait
from vta.gpu.profile import SECTOR
from vta.gpu.target import WARP_LANES
from vta.gpu.taskmap import repeat, spatial

__all__ = ["mma_conv2d", "ohwi_weight", "conv_knobs", "nhwc_knobs", "tile_knobs", "CONV_KNOBS",
           "LAYOUTS", "NhwcConvBody"]

#: the largest tiles: 128 pixels x 128 channels per block, 4 warps, 3 stages; ``bk`` =
#: channels per step (0: 64 for int8, 32 for float16 - two 32-byte k-chunks)
CONV_KNOBS = MmaKnobs(128, 128, 0, 2, 2, 3)

#: tiles tried by ``conv_knobs``, largest first
_TILES = ((128, 128), (128, 64), (64, 128), (64, 64), (64, 32), (32, 64), (32, 32))

#: blocks that fill every SM of the GPUs targeted once (A100: 108 SMs, H100/H200: 132)
WAVE_BLOCKS = 132

#: shared memory per block that still lets two blocks share an SM on A100 (164 KiB)
TWO_BLOCKS_SHARED = 80 * 1024


def conv_knobs(spec: Conv2dSpec, dtype: str = "int8") -> MmaKnobs:
    """Tiles for one layer: the largest that still give a full wave of blocks (batch-1
    ResNet layers have few pixels) within ``TWO_BLOCKS_SHARED`` of shared memory; else the
    one giving the most blocks."""
    best: tuple[int, MmaKnobs] | None = None
    for bm, bn in _TILES:
        kb = MmaKnobs(bm, bn, 0, 2, 2, 3)
        geo = _geometry(spec, bm, DTYPES[dtype] // 8)
        blocks = spec.n * geo.nrt * geo.nct * -(-spec.oc // bn)
        if _shared(spec, dtype, kb.resolved(dtype), geo) > TWO_BLOCKS_SHARED:
            continue
        if blocks >= WAVE_BLOCKS:
            return kb
        if best is None or blocks > best[0]:
            best = (blocks, kb)
    return best[1] if best is not None else CONV_KNOBS


def _shared(spec: Conv2dSpec, dtype: str, kb: MmaKnobs, geo: _Geometry) -> int:
    """Shared bytes of the kernel's main buffers (patches, A tile, weight ring, staging)."""
    item = DTYPES[dtype] // 8
    taps = spec.kh * spec.kw
    npatch = -(-(kb.stages - 1) // taps) + 1
    pce = max(1, vector_bytes(spec.w * item, 16) // item)
    pws = spec.w if geo.mode != "segments" else geo.pw + pce
    return ((npatch * kb.bk * geo.ph * pws + kb.bm * kb.bk + kb.stages * kb.bn * kb.bk) * item
            + kb.bn * kb.bm * 4)


def ohwi_weight(w: np.ndarray) -> np.ndarray:
    """The kernel's weight layout from an OIHW weight: (OC, KH*KW*IC), channels fastest."""
    oc = w.shape[0]
    return np.ascontiguousarray(w.transpose(0, 2, 3, 1).reshape(oc, -1))


@dataclass(frozen=True)
class _Geometry:
    """Static tiling of the output and the patch (see the module docstring)."""

    tw: int  # output columns per block
    th: int  # output rows per block
    nct: int  # column tiles
    nrt: int  # row tiles
    ph: int  # patch rows
    pw: int  # patch columns (the input columns the block's pixels read)
    gapped: bool  # stride > kernel height: only the rows the taps read are kept
    mode: str  # how the patch is copied: "planes", "rows" or "segments"


def _geometry(s: Conv2dSpec, bm: int, item: int) -> _Geometry:
    """The block tiling and how its patch is copied. Input bytes the taps skip are loaded
    anyway when they are fewer than a sector between used ones (they cost no extra sector and
    keep the copied ranges long): unused rows of a strided 1x1 kernel, the columns or rows
    past the last window, so rows and whole planes become contiguous ranges."""
    tw = min(s.ow, bm)
    th = max(1, min(s.oh, bm // tw))
    nct, nrt = -(-s.ow // tw), -(-s.oh // th)
    row_bytes = s.w * item
    gapped = s.kh < s.stride and (s.stride - s.kh) * row_bytes >= SECTOR
    ph = th * s.kh if gapped else (th - 1) * s.stride + s.kh
    pw = (tw - 1) * s.stride + s.kw
    # the fewest input columns (rows) any block's windows read: when the rest of the image
    # row (plane) is under a sector, whole rows (planes) cost no extra sector
    w_used = min(_span(t * tw, min(tw, s.ow - t * tw), s.stride, s.kw, s.pad, s.w)
                 for t in range(nct))
    h_used = min(_span(t * th, min(th, s.oh - t * th), s.stride, s.kh, s.pad, s.h)
                 for t in range(nrt))
    full_w = (s.w - w_used) * item < SECTOR
    full_h = (s.h - h_used) * row_bytes < SECTOR
    mode = "segments"
    if full_w and not gapped:
        mode = "planes" if full_h else "rows"
    if mode == "planes":
        ph = max(ph, s.h + s.pad)  # every input row, stored from row -pad
    return _Geometry(tw, th, nct, nrt, ph, pw, gapped, mode)


def _span(o0: int, n: int, stride: int, k: int, pad: int, size: int) -> int:
    """How many of an input dimension's ``size`` positions the windows of outputs
    ``o0 .. o0 + n - 1`` read."""
    lo = o0 * stride - pad
    return max(0, min(size, lo + (n - 1) * stride + k) - max(0, lo))


def mma_conv2d(spec: Conv2dSpec, dtype: str = "int8", epi: Epilogue | None = None,
               knobs: MmaKnobs | None = None, out_dtype: str | None = None,
               layout: str = "NCHW", chain: Chain | None = None) -> S.PrimFunc:
    """The lowered conv2d kernel (module docstring; ``layout="NHWC"``: ``nhwc_body``'s
    channels-last kernel); params ``data, weight_ohwi[, bias], *chain operands, out``, the
    chain's tensor operands laid out like ``out``. ``knobs`` default to ``conv_knobs`` (NCHW)
    or ``nhwc_knobs``."""
    if dtype not in MMA_SHAPES:
        raise GpuLoweringError(f"mma_conv2d: no mma.sync shape for {dtype} (int8, float16)")
    if epi is not None and dtype != "int8":
        raise GpuLoweringError("mma_conv2d: the requantizing epilogue is for int8")
    if layout not in LAYOUTS:
        raise GpuLoweringError(f"mma_conv2d: layout must be one of {', '.join(LAYOUTS)}, got "
                               f"{layout!r}")
    sh = MMA_SHAPES[dtype]
    out_t = out_dtype or ("int8" if epi is not None or chain else sh.acc_dtype)
    check_chain(chain, dtype, out_t, "mma_conv2d")
    if layout == "NHWC":
        return _nhwc_conv2d(spec, dtype, epi, knobs, out_t, chain)
    if knobs is None:
        knobs = conv_knobs(spec, dtype)
    kb = knobs.resolved(dtype)
    kb.check(dtype)
    geo = _geometry(spec, kb.bm, DTYPES[dtype] // 8)
    data = S.Buffer("data", (spec.n, spec.ic, spec.h, spec.w), dtype)
    weight = S.Buffer("weight", (spec.oc, spec.kh * spec.kw * spec.ic), dtype)
    bias = S.Buffer("bias", (spec.oc,), "int32") if epi is not None and epi.bias else None
    out = S.Buffer("out", (spec.n, spec.oc, spec.oh, spec.ow), out_t)
    opnds = tuple(S.Buffer(b.name, out.shape, b.dtype)
                  if len(b.shape) == 2 and o.kind in (TENSOR, POSITION) else b
                  for o, b in zip(chain.operands if chain else (),
                                  chain_buffers(chain, 1, spec.oc, "mma_conv2d"), strict=True))
    params = (data, weight) + ((bias,) if bias is not None else ()) + opnds + (out,)
    c = ConvBody(spec, dtype, kb, geo, data, weight, bias, out, epi, chain, opnds)
    grid = (spec.n * geo.nrt * geo.nct, -(-spec.oc // kb.bn))
    return finish(f"conv2d_mma_{dtype}", params, c.body, grid, kb.threads,
                  ((KNOBS, kb), (KERNEL, "task-mapping"), (PATCH, geo.mode)))


#: activation layouts ``mma_conv2d`` takes
LAYOUTS = ("NCHW", "NHWC")


def nhwc_knobs(spec: Conv2dSpec, dtype: str = "int8") -> MmaKnobs:
    """Tiles for one channels-last layer (``tile_knobs`` of its GEMM)."""
    return tile_knobs(spec.n * spec.oh * spec.ow, spec.oc, dtype)


def tile_knobs(m: int, n: int, dtype: str = "int8") -> MmaKnobs:
    """Tiles for an ``m x n`` task-mapping GEMM: the largest of ``_TILES`` giving a full wave
    of blocks (``WAVE_BLOCKS``) within ``TWO_BLOCKS_SHARED`` of ring; else the one giving the
    most blocks."""
    best: tuple[int, MmaKnobs] | None = None
    item = DTYPES[dtype] // 8
    for bm, bn in _TILES:
        kb = MmaKnobs(bm, bn, 0, 2, 2, 3).resolved(dtype)
        if kb.stages * (bm + bn) * kb.bk * item > TWO_BLOCKS_SHARED:
            continue
        blocks = -(-m // bm) * -(-n // bn)
        if blocks >= WAVE_BLOCKS:
            return MmaKnobs(bm, bn, 0, 2, 2, 3)
        if best is None or blocks > best[0]:
            best = (blocks, MmaKnobs(bm, bn, 0, 2, 2, 3))
    return best[1] if best is not None else CONV_KNOBS


def _nhwc_conv2d(spec: Conv2dSpec, dtype: str, epi: Epilogue | None, knobs: MmaKnobs | None,
                 out_t: str, chain: Chain | None) -> S.PrimFunc:
    """The channels-last kernel: params ``data (N, H, W, IC), weight (OC, KH*KW*IC)[, bias],
    *chain operands (N*OH*OW, OC), out (N*OH*OW, OC)`` (NHWC, pixels flattened)."""
    kb = (knobs or nhwc_knobs(spec, dtype)).resolved(dtype)
    kb.check(dtype)
    m = spec.n * spec.oh * spec.ow
    data = S.Buffer("data", (spec.n, spec.h, spec.w, spec.ic), dtype)
    weight = S.Buffer("weight", (spec.oc, spec.kh * spec.kw * spec.ic), dtype)
    bias = S.Buffer("bias", (spec.oc,), "int32") if epi is not None and epi.bias else None
    out = S.Buffer("out", (m, spec.oc), out_t)
    opnds = chain_buffers(chain, m, spec.oc, "mma_conv2d")
    params = (data, weight) + ((bias,) if bias is not None else ()) + opnds + (out,)
    c = NhwcConvBody(spec, dtype, kb, data, weight, bias, out, epi, chain, opnds)
    grid = (-(-spec.oc // kb.bn), -(-m // kb.bm))
    return finish(f"conv2d_nhwc_mma_{dtype}", params, c.body, grid, kb.threads,
                  ((KNOBS, kb), (KERNEL, "task-mapping"), (PATCH, "nhwc")))


class NhwcConvBody(GemmBody):
    """The channels-last conv2d: the GEMM of ``vta.gpu.kernels.gemm`` with M = output pixels
    (all images, row-major), N = output channels, K = (tap, channel) (OHWI weights), whose A
    tile is gathered straight from the NHWC input: a 16-byte chunk of A is 16 consecutive
    channels of one input pixel at one tap, contiguous in global memory, so each is one
    ``cp.async`` into the swizzled ring, zero-filled in the padding and past the image or the
    channels (``cp.async``'s source size 0). No patch, no expansion pass, no byte gathers:
    the main loop is the GEMM's. Rows of channels not 4-byte aligned (the first layer's 3
    channels) take element copies. The output is the GEMM's ``(M, N)``: NHWC."""

    def __init__(self, spec: Conv2dSpec, dtype: str, kb: MmaKnobs, data: S.Buffer,
                 weight: S.Buffer, bias: S.Buffer | None, out: S.Buffer,
                 epi: Epilogue | None, chain: Chain | None, opnds: tuple[S.Buffer, ...]
                 ) -> None:
        s = spec
        super().__init__(s.n * s.oh * s.ow, s.oc, s.kh * s.kw * s.ic, dtype, kb, data, weight,
                         bias, out, epi, chain, opnds)
        self.spec = s
        # a chunk never crosses a tap: the widest dividing one pixel's channels
        self.chunk = vector_bytes(s.ic * self.item, 16)

    def tap_source(self, m: E.Expr, k: E.Expr) -> tuple[tuple[E.Expr, ...], E.Expr]:
        """The input element A[m, k] reads and whether it lies inside the image (else 0)."""
        s = self.spec
        img, pix = m // (s.oh * s.ow), m % (s.oh * s.ow)
        y, x = pix // s.ow, pix % s.ow
        tap, ch = k // s.ic, k % s.ic
        h = y * s.stride - s.pad + tap // s.kw
        w = x * s.stride - s.pad + tap % s.kw
        ok = E.And(E.And(m < self.M, k < self.K),
                   E.And(E.And(h >= 0, h < s.h), E.And(w >= 0, w < s.w)))
        return (img, h, w, ch), ok

    def _tile_copy(self, dst: S.Buffer, lay: SwizzledTile, src: S.Buffer, r0: E.Expr,
                   k0: E.Expr, rows_total: int, tid: E.Expr, stage: E.Expr, what: str
                   ) -> S.Stmt:
        if dst is not self.As:  # the weights: the GEMM's B copy
            return super()._tile_copy(dst, lay, src, r0, k0, rows_total, tid, stage, what)
        kb = self.kb
        if self.chunk >= 4:
            ce = self.chunk // self.item
            tm = copy_mapping(kb.bm, kb.bk // ce, kb.threads, "A tile copy")

            def cp(t: tuple[E.Expr, ...]) -> S.Stmt:
                r, c = t[0], t[1] * ce
                at, ok = self.tap_source(r0 + r, k0 + c)
                return CpAsync(dst, self.a_at(stage, r, lay.col(r, c)), src, at, self.chunk,
                               ok)
            return tm.emit(tid, cp, workers=kb.threads, name="cA")
        # channels not 4-byte aligned: element copies through registers (synchronous)
        tm = copy_mapping(kb.bm, kb.bk, kb.threads, "A tile copy")
        zero = E.const(0, self.dtype) if self.dtype == "int8" else E.FloatImm(0.0, "float16")

        def st(t: tuple[E.Expr, ...]) -> S.Stmt:
            r, c = t[0], t[1]
            at, ok = self.tap_source(r0 + r, k0 + c)
            return dst.store(E.select(ok, src.load(*at), zero),
                             *self.a_at(stage, r, lay.col(r, c)))
        return tm.emit(tid, st, workers=kb.threads, name="cA")


class ConvBody(GemmBody):
    """The conv2d body: the GEMM's fragments, MMAs and knobs, its own operand staging."""

    def __init__(self, spec: Conv2dSpec, dtype: str, kb: MmaKnobs, geo: _Geometry,
                 data: S.Buffer, weight: S.Buffer, bias: S.Buffer | None, out: S.Buffer,
                 epi: Epilogue | None, chain: Chain | None = None,
                 opnds: tuple[S.Buffer, ...] = ()) -> None:
        s = spec
        super().__init__(s.n * s.oh * s.ow, s.oc, s.kh * s.kw * s.ic, dtype, kb, data, weight,
                         bias, out, epi, chain, opnds)
        self.spec, self.geo = s, geo
        self.taps = s.kh * s.kw
        self.ncb = -(-s.ic // kb.bk)
        self.kt = self.ncb * self.taps  # steps
        # patch copies: the widest chunk keeping every input row aligned (else elements)
        pv = vector_bytes(s.w * self.item, 16)
        self.pce = pv // self.item if pv >= 4 else 1
        # weights: one step is bk channels of one tap, contiguous in OHWI
        self.chunk = vector_bytes(self.K * self.item, s.ic * self.item, 16)
        self.np_ = -(-(kb.stages - 1) // self.taps) + 1  # patch buffers in flight
        self.pws = self._patch_cols()
        self.Ps = S.Buffer("Ps", (self.np_, kb.bk, geo.ph, self.pws), dtype, "shared")
        self.ta = SwizzledTile(kb.bm, kb.bk, dtype)
        self.As = S.Buffer("At", (kb.bm * kb.bk,), dtype, "shared")

    def _patch_cols(self) -> int:
        """Columns a patch row holds: the whole input row, or a chunk-aligned window."""
        if self.geo.mode != "segments":
            return -(-self.spec.w // self.pce) * self.pce
        return -(-(self.geo.pw + self.pce - 1) // self.pce) * self.pce

    # ------------------------------------------------------------------ block geometry
    def block(self, bx: E.Expr) -> tuple[E.Expr, E.Expr, E.Expr]:
        """(image, first output row, first output column) of block ``bx``."""
        g = self.geo
        return bx // (g.nct * g.nrt), (bx // g.nct) % g.nrt * g.th, bx % g.nct * g.tw

    def patch_row(self, pr: E.ExprLike, oh0: E.Expr) -> E.Expr:
        """Input row of patch row ``pr``."""
        s, pr = self.spec, E.as_expr(pr)
        base = oh0 * s.stride - s.pad
        if self.geo.gapped:
            return base + pr // s.kh * s.stride + pr % s.kh
        return base + pr

    def col_base(self, ow0: E.Expr) -> E.Expr:
        """Input column stored at patch column 0."""
        if self.geo.mode != "segments":
            return E.IntImm(0)
        lo = E.max_(ow0 * self.spec.stride - self.spec.pad, 0)
        return lo // self.pce * self.pce

    # ------------------------------------------------------------------ global -> shared
    def patch_copy(self, tid: E.Expr, img: E.Expr, oh0: E.Expr, ow0: E.Expr, cb: E.Expr,
                   slot: E.Expr) -> S.Stmt:
        """Copy channel block ``cb``'s patch into patch buffer ``slot`` (module docstring)."""
        s, g, kb = self.spec, self.geo, self.kb
        c0 = cb * kb.bk
        hw = s.h * s.w
        ce = self.pce
        if g.mode == "planes":
            nq, max_len = 1, kb.bk * hw
        elif g.mode == "rows":
            nq, max_len = kb.bk, g.ph * s.w
        else:
            nq, max_len = kb.bk * g.ph, self.pws
        tm, _ = window_mapping(nq, max_len, ce, self.item, kb.threads, "patch copy")
        wbase = self.col_base(ow0)
        h_base = oh0 * s.stride - s.pad

        def task(t: tuple[E.Expr, ...]) -> S.Stmt:
            q = t[0]
            if g.mode == "planes":
                start = (img * s.ic + c0) * hw
                length: E.Expr = E.min_(s.ic - c0, kb.bk) * hw

                def where(e: E.Expr) -> tuple[E.Expr, E.Expr, E.Expr]:
                    return e // hw, (e // s.w) % s.h, e % s.w
                ok: E.Expr = E.IntImm(1, "bool")
            elif g.mode == "rows":
                h_lo = E.max_(h_base, 0)
                h_hi = E.min_(h_base + g.ph, s.h)
                start = ((img * s.ic + c0 + q) * s.h + h_lo) * s.w
                length = E.max_(h_hi - h_lo, 0) * s.w

                def where(e: E.Expr) -> tuple[E.Expr, E.Expr, E.Expr]:
                    return q, h_lo + e // s.w, e % s.w
                ok = c0 + q < s.ic
            else:
                cq, pr = q // g.ph, q % g.ph
                h = self.patch_row(pr, oh0)
                w_lo = wbase
                w_hi = E.min_(ow0 * s.stride - s.pad + g.pw, s.w)
                w_hi = E.min_((w_hi + ce - 1) // ce * ce, s.w) if ce > 1 else w_hi
                start = ((img * s.ic + c0 + cq) * s.h + h) * s.w + w_lo
                length = E.max_(w_hi - w_lo, 0)

                def where(e: E.Expr) -> tuple[E.Expr, E.Expr, E.Expr]:
                    return cq, h, w_lo + e
                ok = E.And(E.And(c0 + cq < s.ic, h >= 0), h < s.h)
            e = window_offset(t[1], start, ce, self.item)
            c, h, w = where(e)
            pr = self.patch_index(h, oh0)
            dst = (slot, c, pr, w - wbase)
            src = (img, c0 + c, h, w)
            inside = E.And(ok, E.And(e >= 0, e < length))
            if ce > 1:
                copy: S.Stmt = CpAsync(self.Ps, dst, self.X, src, ce * self.item)
            else:
                copy = self.Ps.store(self.X.load(*src), *dst)
            return S.IfThenElse(inside, copy)

        return tm.emit(tid, task, workers=kb.threads, name="pc")

    def patch_index(self, h: E.Expr, oh0: E.Expr) -> E.Expr:
        """Patch row holding input row ``h`` (one the block reads): whole planes keep every
        row (from row ``-pad``); otherwise rows count from the block's first window row,
        and gapped patches keep only the taps' rows."""
        s = self.spec
        if self.geo.mode == "planes":
            return h + s.pad
        d = h - (oh0 * s.stride - s.pad)
        if self.geo.gapped:
            return d // s.stride * s.kh + d % s.stride
        return d

    def weight_copy(self, tid: E.Expr, bx: E.Expr, by: E.Expr, step: E.Expr, slot: E.Expr
                    ) -> S.Stmt:
        """The step's weight tile: ``bn`` output channels x ``bk`` channels of its tap."""
        kb = self.kb
        cb, tap = step // self.taps, step % self.taps
        k0 = tap * self.spec.ic + cb * kb.bk
        if self.chunk < 4:  # channel runs not 4-byte aligned: element copies (synchronous)
            tm = copy_mapping(kb.bn, kb.bk, kb.threads, "weight copy")
            zero = E.const(0, self.dtype) if self.dtype == "int8" else \
                E.FloatImm(0.0, "float16")

            def st(t: tuple[E.Expr, ...]) -> S.Stmt:
                r, c = t[0], t[1]
                ok = E.And(by * kb.bn + r < self.N, cb * kb.bk + c < self.spec.ic)
                return self.Bs.store(E.select(ok, self.W.load(by * kb.bn + r, k0 + c), zero),
                                     slot, r, self.tb.col(r, c))
            return tm.emit(tid, st, workers=kb.threads, name="wc")
        ce = self.chunk // self.item
        tm = copy_mapping(kb.bn, kb.bk // ce, kb.threads, "weight copy")

        def cp(t: tuple[E.Expr, ...]) -> S.Stmt:
            r, c = t[0], t[1] * ce
            ok = E.And(by * kb.bn + r < self.N, cb * kb.bk + c < self.spec.ic)
            return CpAsync(self.Bs, (slot, r, self.tb.col(r, c)), self.W,
                           (by * kb.bn + r, k0 + c), self.chunk, ok)
        return tm.emit(tid, cp, workers=kb.threads, name="wc")

    def issue(self, tid: E.Expr, bx: E.Expr, by: E.Expr, step: E.Expr) -> S.Stmt:
        """Every copy of ``step``: its weight tile, and its patch at a channel block's start."""
        img, oh0, ow0 = self.block(bx)
        cb = step // self.taps
        patch = self.patch_copy(tid, img, oh0, ow0, cb, cb % self.np_)
        pstmt: S.Stmt | None
        if isinstance(step, E.IntImm):
            pstmt = patch if step.value % self.taps == 0 else None
        else:
            pstmt = S.IfThenElse((step % self.taps).eq(0), patch)
        return S.seq(self.weight_copy(tid, bx, by, step, step % self.kb.stages), pstmt)

    # ------------------------------------------------------------------ the A tile
    def expand(self, tid: E.Expr, bx: E.Expr, step: E.Expr) -> S.Stmt:
        """A[p, c] = the input value pixel ``p`` meets at the step's tap, channel ``c`` (zero
        in the padding, past the image or the channels): a 16-byte vector a task."""
        s, g, kb = self.spec, self.geo, self.kb
        _, oh0, ow0 = self.block(bx)
        cb, tap = step // self.taps, step % self.taps
        r, t_ = tap // s.kw, tap % s.kw
        ue = self.ta.unit_elems
        units = kb.bk // ue
        # lanes along pixels (consecutive lanes gather neighbouring input bytes of one channel)
        if kb.threads <= kb.bm:
            if kb.bm % kb.threads:
                raise GpuLoweringError(f"mma_conv2d: bm={kb.bm} pixels must be a multiple of "
                                       f"the {kb.threads} threads")
            tm = repeat(kb.bm // kb.threads, units) * spatial(kb.threads, 1)
        else:  # more threads than pixels: the rest spread over the channel units
            k = math.gcd(kb.threads // kb.bm, units)
            tm = repeat(1, units // k) * spatial(kb.bm, k, ranks=[1, 0])
        vec = S.Buffer("gather", (ue,), self.dtype, "local")
        wbase = self.col_base(ow0)
        slot = cb % self.np_
        zero = E.const(0, self.dtype) if self.dtype == "int8" else E.FloatImm(0.0, "float16")

        def task(tk: tuple[E.Expr, ...]) -> S.Stmt:
            p, u = tk[0], tk[1]
            th, tw = p // g.tw, p % g.tw
            h = oh0 * s.stride - s.pad + th * s.stride + r
            pr = th * s.kh + r if g.gapped else self.patch_index(h, oh0)
            w = ow0 * s.stride - s.pad + tw * s.stride + t_
            pix_ok = E.And(E.And(p < g.th * g.tw, oh0 + th < s.oh), ow0 + tw < s.ow)
            img_ok = E.And(E.And(h >= 0, h < s.h), E.And(w >= 0, w < s.w))
            i = E.Var("i")
            c = u * ue + i
            val = E.select(E.And(E.And(pix_ok, img_ok), cb * kb.bk + c < s.ic),
                           self.Ps.load(slot, c, pr, w - wbase), zero)
            v = E.Var("v")
            return S.seq(
                S.For(i, E.IntImm(0), E.IntImm(ue), vec.store(val, i), S.ForKind.UNROLLED),
                S.For(v, E.IntImm(0), E.IntImm(ue),
                      self.As.store(vec.load(v), *self.a_at(0, p, self.ta.col(p, u * ue) + v)),
                      S.ForKind.VECTORIZED))
        return S.Allocate(vec, tm.emit(tid, task, workers=kb.threads, name="x"))

    # ------------------------------------------------------------------ the kernel
    def body(self, tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        kb = self.kb
        lane, warp = E.Var("lane"), E.Var("warp")
        wy, wx = E.Var("wy"), E.Var("wx")
        nst = kb.stages
        zero = E.const(0, "int32") if self.sh.acc_dtype == "int32" else \
            E.FloatImm(0.0, "float32")
        init = repeat(self.fm, self.fn, 4).emit(0, lambda t: self.acc.store(zero, *t), name="z")
        prologue: list[S.Stmt] = []
        for st in range(nst - 1):
            if st < self.kt:
                prologue.append(self.issue(tid, bx, by, E.IntImm(st)))
            prologue.append(CpAsyncCommit())
        kt = E.Var("kt")
        frags: list[S.Stmt] = [self.load_frags(lane, wy, wx, 0, kt % nst, 0, E.IntImm(0))]
        for kc in range(self.kc):
            if kc + 1 < self.kc:
                frags.append(self.load_frags(lane, wy, wx, (kc + 1) % 2, kt % nst, kc + 1,
                                             E.IntImm(0)))
            frags.append(self.mmas(kc % 2))
        ahead = kt + (nst - 1)
        step = S.seq(CpAsyncWait(nst - 2), S.Barrier(),
                     S.IfThenElse(ahead < self.kt, self.issue(tid, bx, by, ahead)),
                     CpAsyncCommit(), self.expand(tid, bx, kt), S.Barrier(), *frags)
        main = S.For(kt, E.IntImm(0), E.IntImm(self.kt), step)
        body = S.seq(init, *prologue, main, CpAsyncWait(0),
                     self.conv_epilogue(tid, lane, wy, wx, bx, by))
        body = alloc([self.Ps, self.As, self.Bs, self.acc, self.af, self.bf], body)
        return S.LetStmt(lane, tid % WARP_LANES, S.LetStmt(warp, tid // WARP_LANES, S.LetStmt(
            wy, warp // kb.warps_n, S.LetStmt(wx, warp % kb.warps_n, body))))

    # ------------------------------------------------------------------ epilogue
    def conv_epilogue(self, tid: E.Expr, lane: E.Expr, wy: E.Expr, wx: E.Expr, bx: E.Expr,
                      by: E.Expr) -> S.Stmt:
        s, g, kb = self.spec, self.geo, self.kb
        out_t = self.Y.dtype
        eo = DTYPES[out_t] // 8
        img, oh0, ow0 = self.block(bx)
        n0 = by * kb.bn
        pre, bufs, bias_s = self.stage_bias(tid, n0)
        # output ranges: whole planes (the block covers the image), rows, or row segments
        ohw = s.oh * s.ow
        if g.nrt == 1 and g.nct == 1:
            kind, nq, max_len = "planes", 1, kb.bn * ohw
            vb = vector_bytes(ohw * eo, 16)
        elif g.nct == 1:
            kind, nq, max_len = "rows", kb.bn, g.th * s.ow
            vb = vector_bytes(ohw * eo, g.th * s.ow * eo, 16)
            fewest = min(g.th, s.oh - (g.nrt - 1) * g.th)
            if (ohw - fewest * s.ow) * eo < SECTOR:
                # the other blocks' pixels between two channels' rows are under a sector:
                # one range over all the block's channels, those pixels masked, so no sector
                # is written by two of this block's requests
                kind, nq, max_len = "strided", 1, (kb.bn - 1) * ohw + g.th * s.ow
        else:
            kind, nq, max_len = "segments", kb.bn * g.th, g.tw
            vb = vector_bytes(s.ow * eo, g.tw * eo, 16)
        ce = vb // eo if vb >= 4 else 1
        lay = self.stage_layout(eo, ce, kind, max_len)
        cs = S.Buffer("Cs", storage_shape(lay), out_t, "shared")
        bufs.append(cs)
        q_, gq = lane % 4, lane // 4
        writes: list[S.Stmt] = []
        for i in range(self.fm):
            for j in range(self.fn):
                for h in range(2):
                    for e in range(2):
                        col = wx * self.wn + j * 8 + 2 * q_ + e
                        row = wy * self.wm + i * 16 + gq + 8 * h
                        val = self.requant(self.acc.load(E.IntImm(i), E.IntImm(j),
                                                         E.IntImm(2 * h + e)), bias_s, col,
                                           self.pixel_site(img, oh0, ow0, row, n0 + col))
                        writes.append(cs.store(val, col, lay.col(col, row)))
        tm, _ = window_mapping(nq, max_len, ce, eo, kb.threads, "output copy")
        rows_valid = E.min_(g.th, s.oh - oh0)
        cols_valid = E.min_(g.tw, s.ow - ow0)

        def task(t: tuple[E.Expr, ...]) -> S.Stmt:
            q = t[0]
            # per kind: the range's first flat element and length, and for element e of it
            # (channel, staged pixel, output row, output column) and whether it is the block's
            if kind in ("planes", "strided"):
                start = ((img * s.oc + n0) * s.oh + oh0) * s.ow
                rows = E.IntImm(s.oh) if kind == "planes" else rows_valid
                length: E.Expr = (E.min_(s.oc - n0, kb.bn) - 1) * ohw + rows * s.ow

                def where(e: E.Expr) -> tuple[E.Expr, E.Expr, E.Expr, E.Expr, E.Expr]:
                    rel = e % ohw  # strided: the pixels of other blocks' rows are masked
                    ok = E.IntImm(1, "bool") if kind == "planes" else rel < rows_valid * s.ow
                    return e // ohw, rel, oh0 + rel // s.ow, rel % s.ow, ok
            elif kind == "rows":
                start = ((img * s.oc + n0 + q) * s.oh + oh0) * s.ow
                length = rows_valid * s.ow

                def where(e: E.Expr) -> tuple[E.Expr, E.Expr, E.Expr, E.Expr, E.Expr]:
                    return q, e, oh0 + e // s.ow, e % s.ow, n0 + q < s.oc
            else:
                oc, th = q // g.th, q % g.th
                start = ((img * s.oc + n0 + oc) * s.oh + oh0 + th) * s.ow + ow0
                length = cols_valid

                def where(e: E.Expr) -> tuple[E.Expr, E.Expr, E.Expr, E.Expr, E.Expr]:
                    return (oc, th * g.tw + e, oh0 + th, ow0 + e,
                            E.And(n0 + oc < s.oc, th < rows_valid))
            e = window_offset(t[1], start, ce, eo)
            oc_, p, y, x, ok = where(e)
            v = E.Var("v")
            body = S.For(v, E.IntImm(0), E.IntImm(ce),
                         self.Y.store(cs.load(oc_, lay.col(oc_, p) + v), img, n0 + oc_, y,
                                      x + v),
                         S.ForKind.VECTORIZED if ce > 1 else S.ForKind.SERIAL)
            return S.IfThenElse(E.And(E.And(e >= 0, e < length), ok), body)

        copy = tm.emit(tid, task, workers=kb.threads, name="oc")
        return alloc(bufs, S.seq(*pre, S.Barrier(), *writes, S.Barrier(), copy))

    def pixel_site(self, img: E.Expr, oh0: E.Expr, ow0: E.Expr, p: E.Expr, n: E.Expr
                   ) -> ChainSite:
        """Where the block's pixel ``p``, channel ``n`` reads the chain's operands (NCHW
        tensors like ``out``)."""
        s, g = self.spec, self.geo
        y, x = oh0 + p // g.tw, ow0 + p % g.tw
        inside = E.And(E.And(p < g.th * g.tw, n < s.oc), E.And(y < s.oh, x < s.ow))
        return ChainSite(inside, (img, n, y, x), n, n < s.oc)

    def stage_layout(self, eo: int, ce: int, kind: str, max_len: int) -> Tile:
        """Layout of the ``bn x bm`` channel-major staging tile: conflict-free fragment
        element stores (4 channels x 8 pixels a warp) and copy-out reads (windows of
        ``ce``-element vectors along pixels, crossing into the next channel's row where the
        output ranges are whole planes), for a few windows and window shifts."""
        s = self.spec
        lanes = np.arange(WARP_LANES)
        gq, q = lanes // 4, lanes % 4
        on = np.ones(WARP_LANES, bool)
        pats: list[Pattern] = [(wx * self.wn + 2 * q + e, wy * self.wm + gq + 8 * h, on, eo)
                               for wx in range(self.kb.warps_n)
                               for wy in range(self.kb.warps_m)
                               for e in range(2) for h in range(2)]
        spe = SECTOR // eo
        ohw = s.oh * s.ow
        for w in range(min(4, -(-max_len // (WARP_LANES * ce)))):
            for shift in range(0, spe, max(ce, spe // 4)):
                e = ce * (WARP_LANES * w + lanes) - shift
                act = (e >= 0) & (e < max_len)
                e = np.clip(e, 0, max_len - 1)
                if kind in ("planes", "strided"):
                    row, col = e // ohw, e % ohw
                else:  # one channel's pixels (rows), or one output row's (segments)
                    row, col = np.zeros(WARP_LANES, int), e
                act &= (row < self.kb.bn) & (col < self.kb.bm)
                pats.append((np.minimum(row, self.kb.bn - 1), np.minimum(col, self.kb.bm - 1),
                             act, ce * eo))
        return choose_layout(self.kb.bn, self.kb.bm, self.Y.dtype, pats,
                             align=max(16, ce * eo))
