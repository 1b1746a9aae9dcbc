"""A tensor-core GEMM written with task mappings: ``Y = epilogue(X @ W.T)``.

``X`` (M, K) and ``W`` (N, K) int8 or float16; ``Y`` (M, N): int8 through the fused
requantizing epilogue (``Epilogue.stages``: ``int8(clip((acc >> shift) + bias[n], lo, hi))``
or the fixed-point form, as every other backend), or the accumulator type / float16 without
one. Any M, N, K (tails are zero-filled on
the way in and guarded on the way out).

Structure (Hidet's and CUTLASS's multi-stage design, every loop a task mapping):

- A block computes a ``bm x bn`` tile with ``warps_m x warps_n`` warps; a warp a
  ``(bm / warps_m) x (bn / warps_n)`` tile of ``m16n8`` accumulators (``mma.sync``
  ``m16n8k16`` f16 / ``m16n8k32`` s8). K advances ``bk`` per *stage*.
- Global -> shared: ``cp.async`` of 16-byte chunks (8 or 4 when K's rows are not 16-byte
  aligned; plain loads when not even 4) into a ring of ``stages`` shared buffers, one
  ``commit_group`` per stage; consecutive lanes take consecutive chunks of a row (coalesced);
  rows and K past the matrix are zero-filled. Tiles use the XOR swizzle of
  ``vta.gpu.kernels.smem_layout`` (no bank conflicts for the copies or ``ldmatrix``).
- The main loop: at the first k-chunk of stage ``t`` the copy of stage ``t + stages - 1`` is
  issued; at the last, ``cp.async.wait_group(stages - 2)`` and one barrier make stage
  ``t + 1`` visible. Fragments are double-buffered in registers: ``ldmatrix`` of the next
  32-byte k-chunk (``x4`` for A, ``x4``/``x2`` for pairs of B tiles) is issued before the
  ``mma.sync`` of the current one.
- Epilogue: bias (once per block, through shared memory), the requantization and a fused
  ``chain`` (``vta.compiler.ops.chain``: graph fusion's requantize, residual add, ReLU, clip)
  are applied to the accumulators in registers; each warp stages one 16-row slice at a time in
  a padded shared tile (pitch chosen with the bank model) and writes it out with vector stores
  of up to 16 bytes, lanes along rows (coalesced). The chain's int8 tensor operands (``(M,
  N)`` like ``Y``: a residual branch) come in the same way backwards: each slice is loaded
  with the output's vector mapping into a tile of the same layout before the registers read
  it (channel operands, and tensors whose rows are not 4-byte aligned, are read from global
  memory per element). When the output has the operands' type and they fit, those tiles live
  in the A ring's bytes (dead once the last MMA's fragments are in registers; the epilogue's
  first barrier orders it): the ring is one flat shared buffer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.compiler.ops.chain import CHANNEL, POSITION, TABLE, TABLE_SIZE, TENSOR, Chain
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import GpuLoweringError
from vta.gpu import requant  # noqa: F401 - registers the requant_f32 call a chain may make
from vta.gpu.dialect import KERNEL, KNOBS
from vta.gpu.kernels.common import alloc, finish
from vta.gpu.kernels.copy import copy_mapping, sector_windows, vector_bytes
from vta.gpu.kernels.smem_layout import Pattern, SwizzledTile, Tile, choose_layout, storage_shape
from vta.gpu.mma import MMA_SHAPES, CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrix, MmaSync
from vta.gpu.profile import SECTOR
from vta.gpu.target import DEFAULT_TARGET, WARP_LANES
from vta.gpu.taskmap import repeat

__all__ = ["MmaKnobs", "ChainSite", "mma_gemm", "chain_buffers", "check_chain"]


@dataclass(frozen=True)
class ChainSite:
    """Where one output element reads a fused chain's operands: ``inside`` the output (else
    zeros are read), its ``index`` in a tensor operand, its ``channel`` (a channel operand's
    index) and whether that channel exists; tensor operands the epilogue staged in shared
    memory give their value instead (``staged``)."""

    inside: E.Expr
    index: tuple[E.Expr, ...]
    channel: E.Expr
    channel_ok: E.Expr
    #: tensor operands' values already staged in shared memory: (operand number, value)
    staged: tuple[tuple[int, E.Expr], ...] = ()


@dataclass(frozen=True)
class MmaKnobs:
    """Tiles of the task-mapping kernels: block ``bm x bn``, ``bk`` per stage (0: 32 bytes of
    K twice, i.e. 32 for float16 and 64 for int8), ``warps_m x warps_n`` warps, ``stages``
    shared buffers in the ``cp.async`` ring."""

    bm: int = 128
    bn: int = 128
    bk: int = 0
    warps_m: int = 2
    warps_n: int = 2
    stages: int = 3

    def resolved(self, dtype: str) -> MmaKnobs:
        """``bk`` defaulted to two ``mma`` k-steps (register double buffering within a stage)."""
        return self if self.bk else replace(self, bk=2 * MMA_SHAPES[dtype].k)

    def check(self, dtype: str) -> None:
        sh = MMA_SHAPES[dtype]
        if self.bm % (16 * self.warps_m) or self.bn % (8 * self.warps_n):
            raise GpuLoweringError(f"mma knobs: bm={self.bm} must be a multiple of 16*warps_m "
                                   f"and bn={self.bn} of 8*warps_n")
        if self.bk % sh.k or self.bk < sh.k:
            raise GpuLoweringError(f"mma knobs: bk={self.bk} must be a multiple of {sh.k} "
                                   f"(the {dtype} mma.sync {sh.name} k)")
        if self.stages < 2:
            raise GpuLoweringError(f"mma knobs: stages={self.stages} must be >= 2")
        if WARP_LANES * self.warps_m * self.warps_n > DEFAULT_TARGET.max_threads:
            raise GpuLoweringError(f"mma knobs: more than {DEFAULT_TARGET.max_threads} threads "
                                   f"per block")

    @property
    def threads(self) -> int:
        return WARP_LANES * self.warps_m * self.warps_n


def chain_buffers(chain: Chain | None, rows: int, cols: int, what: str
                  ) -> tuple[S.Buffer, ...]:
    """The kernel parameters of a chain's operands, by the chain's names: an int8 tensor
    ``(rows, cols)`` laid out like the output, an int32 vector over the ``cols`` channels, an
    int32 ``(rows, cols)`` tensor (a per-position bias, read from global memory), or an int8
    ``(256, 256)`` table (read at computed indices from global memory)."""
    if not chain:
        return ()
    return tuple(S.Buffer(o.name, (cols,), "int32") if o.kind == CHANNEL
                 else S.Buffer(o.name, (TABLE_SIZE, TABLE_SIZE), "int8") if o.kind == TABLE
                 else S.Buffer(o.name, (rows, cols), "int32" if o.kind == POSITION else "int8")
                 for o in chain.operands)


def check_chain(chain: Chain | None, dtype: str, out_t: str, what: str) -> None:
    """A fused chain runs on the int32 accumulators of an int8 kernel with an int8 output."""
    if chain and (dtype != "int8" or out_t != "int8"):
        raise GpuLoweringError(f"{what}: a fused chain needs int8 operands and an int8 output, "
                               f"got {dtype} -> {out_t}")


def mma_gemm(spec: MatmulSpec, dtype: str = "float16", epi: Epilogue | None = None,
             knobs: MmaKnobs = MmaKnobs(), out_dtype: str | None = None,
             chain: Chain | None = None) -> S.PrimFunc:
    """The lowered GEMM kernel (module docstring); params ``X, W[, bias], *chain operands,
    Y``."""
    if dtype not in MMA_SHAPES:
        raise GpuLoweringError(f"mma_gemm: no mma.sync shape for {dtype} (int8, float16)")
    kb = knobs.resolved(dtype)
    kb.check(dtype)
    sh = MMA_SHAPES[dtype]
    acc_t = sh.acc_dtype
    out_t = out_dtype or ("int8" if epi is not None or chain else acc_t)
    if epi is not None and dtype != "int8":
        raise GpuLoweringError("mma_gemm: the requantizing epilogue is for int8 GEMMs")
    check_chain(chain, dtype, out_t, "mma_gemm")
    M, N, K = spec.m, spec.n, spec.k
    X = S.Buffer("X", (M, K), dtype)
    W = S.Buffer("W", (N, K), dtype)
    bias = S.Buffer("bias", (N,), "int32") if epi is not None and epi.bias else None
    Y = S.Buffer("Y", (M, N), out_t)
    opnds = chain_buffers(chain, M, N, "mma_gemm")
    params = (X, W) + ((bias,) if bias is not None else ()) + opnds + (Y,)
    g = GemmBody(M, N, K, dtype, kb, X, W, bias, Y, epi, chain, opnds)
    grid = (-(-N // kb.bn), -(-M // kb.bm))
    return finish(f"gemm_mma_{dtype}", params, g.body, grid, kb.threads,
                  ((KNOBS, kb), (KERNEL, "task-mapping")))


class GemmBody:
    """The kernel body's builder (one instance per kernel)."""

    def __init__(self, M: int, N: int, K: int, dtype: str, kb: MmaKnobs, X: S.Buffer,
                 W: S.Buffer, bias: S.Buffer | None, Y: S.Buffer, epi: Epilogue | None,
                 chain: Chain | None = None, opnds: tuple[S.Buffer, ...] = ()) -> None:
        self.M, self.N, self.K, self.dtype, self.kb = M, N, K, dtype, kb
        self.X, self.W, self.bias, self.Y, self.epi = X, W, bias, Y, epi
        self.chain, self.opnds = chain, opnds
        self.sh = MMA_SHAPES[dtype]
        self.item = DTYPES[dtype] // 8
        self.wm, self.wn = kb.bm // kb.warps_m, kb.bn // kb.warps_n
        self.fm, self.fn = self.wm // 16, self.wn // 8
        self.kc = kb.bk // self.sh.k  # k-chunks (one mma k each) per stage
        self.kt = -(-K // kb.bk)  # stages over K
        self.ta = SwizzledTile(kb.bm, kb.bk, dtype)
        self.tb = SwizzledTile(kb.bn, kb.bk, dtype)
        # cp.async chunk: the widest that keeps every row start aligned
        self.chunk = vector_bytes(K * self.item, 16)
        S_ = kb.stages
        # the A ring, flat (``a_at``): the epilogue's staging tile may alias it
        self.As = S.Buffer("As", (S_ * kb.bm * kb.bk,), dtype, "shared")
        self.Bs = S.Buffer("Bs", (S_, kb.bn, kb.bk), dtype, "shared")
        self.acc = S.Buffer("acc", (self.fm, self.fn, 4), self.sh.acc_dtype, "local")
        self.af = S.Buffer("af", (2, self.fm, self.sh.a_regs), "uint32", "local")
        self.bf = S.Buffer("bf", (2, self.fn, self.sh.b_regs), "uint32", "local")

    def a_at(self, slot: E.ExprLike, r: E.ExprLike, c: E.ExprLike) -> tuple[E.Expr, ...]:
        """The flat index in ``As`` of element ``(r, c)`` (physical column) of A slot
        ``slot``."""
        rows, cols = self.kb.bm, self.kb.bk
        return (E.as_expr(slot) * (rows * cols) + E.as_expr(r) * cols + E.as_expr(c),)

    # ------------------------------------------------------------------ global -> shared
    def load_stage(self, tid: E.Expr, bx: E.Expr, by: E.Expr, stage: E.Expr, kt: E.Expr
                   ) -> S.Stmt:
        """Issue the copies of K-stage ``kt`` into ring slot ``stage`` (predicated on kt)."""
        kb = self.kb
        k0 = kt * kb.bk
        return S.seq(
            self._tile_copy(self.As, self.ta, self.X, by * kb.bm, k0, self.M, tid, stage, "A"),
            self._tile_copy(self.Bs, self.tb, self.W, bx * kb.bn, k0, self.N, tid, stage, "B"))

    def _tile_copy(self, dst: S.Buffer, lay: SwizzledTile, src: S.Buffer, r0: E.Expr,
                   k0: E.Expr, rows_total: int, tid: E.Expr, stage: E.Expr, what: str
                   ) -> S.Stmt:
        kb = self.kb
        rows = lay.rows
        if self.chunk >= 4:
            ce = self.chunk // self.item
            tm = copy_mapping(rows, kb.bk // ce, kb.threads, f"{what} tile copy")

            def cp(t: tuple[E.Expr, ...]) -> S.Stmt:
                r, c = t[0], t[1] * ce
                ok = E.And(r0 + r < rows_total, k0 + c < self.K)
                return CpAsync(dst, self._at(dst, stage, r, lay.col(r, c)), src,
                               (r0 + r, k0 + c), self.chunk, ok)
            return tm.emit(tid, cp, workers=kb.threads, name=f"c{what}")
        # rows not even 4-byte aligned: element copies through registers (synchronous), each
        # warp request one sector-aligned window of the row (no sector fetched twice)
        win = sector_windows(kb.bk, self.item)
        tm = copy_mapping(rows, win, kb.threads, f"{what} tile copy")

        def st(t: tuple[E.Expr, ...]) -> S.Stmt:
            r = t[0]
            c = t[1] - ((r0 + r) * self.K + k0) % (SECTOR // self.item)
            ok = E.And(E.And(c >= 0, c < kb.bk), E.And(r0 + r < rows_total, k0 + c < self.K))
            zero = E.const(0, self.dtype) if self.dtype == "int8" else \
                E.FloatImm(0.0, "float16")
            return S.IfThenElse(E.And(c >= 0, c < kb.bk), dst.store(
                E.select(ok, src.load(r0 + r, k0 + c), zero),
                *self._at(dst, stage, r, lay.col(r, c))))
        return tm.emit(tid, st, workers=kb.threads, name=f"c{what}")

    def _at(self, dst: S.Buffer, slot: E.ExprLike, r: E.ExprLike, c: E.ExprLike
            ) -> tuple[E.Expr, ...]:
        """Index of ``(slot, r, c)`` in ring ``dst`` (the flat A ring or the 3-D B ring)."""
        if dst is self.As:
            return self.a_at(slot, r, c)
        return (E.as_expr(slot), E.as_expr(r), E.as_expr(c))

    # ------------------------------------------------------------------ shared -> registers
    def load_frags(self, lane: E.Expr, wy: E.Expr, wx: E.Expr, buf: int, stage: E.Expr,
                   kc: int, a_stage: E.Expr | None = None) -> S.Stmt:
        """``ldmatrix`` the fragments of k-chunk ``kc`` of ring slot ``stage`` into ``buf``
        (A from slot ``a_stage`` when given: the conv2d's A tile is not a ring)."""
        a_slot = stage if a_stage is None else a_stage
        out: list[S.Stmt] = []
        upc = self.sh.k * self.item // 16  # 16-byte units of a k-chunk (ldmatrix rows)
        assert upc == 2, "both mma.sync shapes take 32 bytes of K: two x4 matrix columns"
        u0 = upc * kc
        ue = self.ta.unit_elems
        for i in range(self.fm):  # A: x4, lanes 0-15 rows at unit 0, 16-31 at unit 1
            r = wy * self.wm + i * 16 + lane % 16
            c = (u0 + lane // 16) * ue
            out.append(LdMatrix(self.af, (E.IntImm(buf), E.IntImm(i), E.IntImm(0)), self.As,
                                self.a_at(a_slot, r, self.ta.col(r, c)), 4))
        j = 0
        while j < self.fn:  # B: pairs of n8 tiles with x4, a last odd one with x2
            pair = j + 1 < self.fn
            r = wx * self.wn + (j + (lane // 16 if pair else 0)) * 8 + lane % 8
            c = (u0 + (lane // 8) % 2) * ue
            out.append(LdMatrix(self.bf, (E.IntImm(buf), E.IntImm(j), E.IntImm(0)), self.Bs,
                                (stage, r, self.tb.col(r, c)), 4 if pair else 2))
            j += 2 if pair else 1
        return S.seq(*out)

    def mmas(self, buf: int) -> S.Stmt:
        z = E.IntImm(0)
        return S.seq(*[MmaSync(self.sh, self.acc, (E.IntImm(i), E.IntImm(j), z), self.af,
                               (E.IntImm(buf), E.IntImm(i), z), self.bf,
                               (E.IntImm(buf), E.IntImm(j), z), self.acc,
                               (E.IntImm(i), E.IntImm(j), z))
                       for i in range(self.fm) for j in range(self.fn)])

    # ------------------------------------------------------------------ the kernel
    def body(self, tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        kb = self.kb
        lane, warp = E.Var("lane"), E.Var("warp")
        wy, wx = E.Var("wy"), E.Var("wx")
        nst = kb.stages
        zero = E.const(0, self.sh.acc_dtype) if self.sh.acc_dtype == "int32" else \
            E.FloatImm(0.0, "float32")
        init = repeat(self.fm, self.fn, 4).emit(
            0, lambda t: self.acc.store(zero, *t), name="z")
        prologue = []
        for s in range(nst - 1):
            prologue += [self.load_stage(tid, bx, by, E.IntImm(s), E.IntImm(s)),
                         CpAsyncCommit()]
        prologue += [CpAsyncWait(nst - 2), S.Barrier(),
                     self.load_frags(lane, wy, wx, 0, E.IntImm(0), 0)]
        kt = E.Var("kt")
        steps: list[S.Stmt] = []
        for kc in range(self.kc):
            last = kc == self.kc - 1
            if last:  # the next stage must have landed and be visible to every warp
                steps.append(S.IfThenElse(kt + 1 < self.kt,
                                          S.seq(CpAsyncWait(nst - 2), S.Barrier())))
            if kc == 0:  # refill the ring slot stage kt - 1 used (read before that barrier)
                ahead = kt + (nst - 1)
                steps += [S.IfThenElse(ahead < self.kt,
                                       self.load_stage(tid, bx, by, ahead % nst, ahead)),
                          CpAsyncCommit()]
            # register double buffering: the next k-chunk's fragments (the next stage's first
            # after the last chunk) load before this chunk's MMAs, unless they would land in
            # the registers those MMAs read (an odd number of chunks a stage)
            target = 0 if last else (kc + 1) % 2
            nxt: S.Stmt = self.load_frags(lane, wy, wx, target,
                                          (kt + 1) % nst if last else kt % nst,
                                          0 if last else kc + 1)
            if last:
                nxt = S.IfThenElse(kt + 1 < self.kt, nxt)
            mma = self.mmas(kc % 2)
            steps += [nxt, mma] if target != kc % 2 else [mma, nxt]
        main = S.For(kt, E.IntImm(0), E.IntImm(self.kt), S.seq(*steps))
        body = S.seq(init, *prologue, main, CpAsyncWait(0), self.epilogue(tid, lane, warp,
                                                                          wy, wx, bx, by))
        body = alloc([self.As, self.Bs, self.acc, self.af, self.bf], body)
        return S.LetStmt(lane, tid % WARP_LANES, S.LetStmt(warp, tid // WARP_LANES, S.LetStmt(
            wy, warp // kb.warps_n, S.LetStmt(wx, warp % kb.warps_n, body))))

    # ------------------------------------------------------------------ epilogue
    def stage_bias(self, tid: E.Expr, n0: E.Expr
                   ) -> tuple[list[S.Stmt], list[S.Buffer], S.Buffer | None]:
        """The bias of the block's ``kb.bn`` columns from ``n0``, once, through shared memory:
        the statements that stage it, the buffers they need, and the shared copy (None without
        a bias)."""
        kb = self.kb
        if self.bias is None:
            return [], [], None
        bias, bs = self.bias, S.Buffer("bias_s", (kb.bn,), "int32", "shared")
        tmb = copy_mapping(1, kb.bn, kb.threads, "bias copy")
        stage = tmb.emit(tid, lambda t: bs.store(
            E.select(n0 + t[1] < self.N, bias.load(n0 + t[1]), 0), t[1]),
            workers=kb.threads, name="bb")
        return [stage], [bs], bs

    def epilogue(self, tid: E.Expr, lane: E.Expr, warp: E.Expr, wy: E.Expr, wx: E.Expr,
                 bx: E.Expr, by: E.Expr) -> S.Stmt:
        kb = self.kb
        out_t = self.Y.dtype
        eo = DTYPES[out_t] // 8
        n0 = bx * kb.bn
        pre, bufs, bias_s = self.stage_bias(tid, n0)
        vb = vector_bytes(self.N * eo, kb.bn * eo)
        lay = self.staging_layout(eo, vb)
        srows, pitch = storage_shape(lay)
        # the chain's int8 tensor operands come through shared memory too, a slice at a time,
        # with the output's vector mapping (coalesced), when rows are vector-aligned
        staged = [k for k, o in enumerate(self.chain.operands if self.chain else ())
                  if o.kind == TENSOR] if vb >= 4 else []
        tile = kb.warps_m * srows * pitch
        views: list[tuple[S.Buffer, Callable[..., tuple[E.Expr, ...]]]] = []
        alias = out_t == self.As.dtype and (1 + len(staged)) * tile <= self.As.size
        for t_ in range(1 + len(staged)):
            if alias:  # in the A ring's bytes (module docstring)
                views.append((self.As, lambda w, r, c, o=t_ * tile: (
                    o + (w * srows + r) * pitch + c,)))
            else:
                buf = S.Buffer("Cs" if t_ == 0 else f"Rs{t_ - 1}",
                               (kb.warps_m, srows, pitch), out_t, "shared")
                bufs.append(buf)
                views.append((buf, lambda w, r, c: (w, r, c)))
        cs, cs_at = views[0]
        pair = S.Buffer("pair", (2,), out_t, "local")
        bufs.append(pair)
        g, q = lane // 4, lane % 4
        # the block's 16-row slices leave as whole bn-wide rows: vectors of vb bytes, or
        # (rows not 4-byte aligned) elements in sector-aligned windows
        per_vec = vb // eo if vb >= 4 else 1
        spe = SECTOR // eo
        chunks = kb.bn // per_vec if vb >= 4 else sector_windows(kb.bn, eo)
        out_map = copy_mapping(kb.warps_m * 16, chunks, kb.threads, "output copy")
        slices: list[S.Stmt] = []
        for i in range(self.fm):
            writes: list[S.Stmt] = []
            for j in range(self.fn):
                for h in range(2):
                    col = wx * self.wn + j * 8 + 2 * q
                    row = g + 8 * h
                    m_g = by * kb.bm + wy * self.wm + i * 16 + row
                    vals = [self.requant(self.acc.load(E.IntImm(i), E.IntImm(j),
                                                       E.IntImm(2 * h + e)), bias_s, col + e,
                                         self.site(m_g, n0 + col + e, {
                                             k: rb.load(*r_at(wy, row, lay.col(row, col) + e))
                                             for k, (rb, r_at) in zip(staged, views[1:],
                                                                      strict=True)}))
                            for e in range(2)]
                    v = E.Var("v")
                    writes += [pair.store(vals[0], 0), pair.store(vals[1], 1),
                               S.For(v, E.IntImm(0), E.IntImm(2),
                                     cs.store(pair.load(v), *cs_at(wy, row, lay.col(row, col) + v)),
                                     S.ForKind.VECTORIZED)]

            def store(t: tuple[E.Expr, ...], i: int = i) -> S.Stmt:
                gy, r = t[0] // 16, t[0] % 16
                m = by * kb.bm + gy * self.wm + i * 16 + r
                if vb >= 4:
                    c = t[1] * per_vec
                    inside: E.Expr = E.And(m < self.M, n0 + c < self.N)
                else:
                    c = t[1] - (m * self.N + n0) % spe
                    inside = E.And(E.And(c >= 0, c < kb.bn), E.And(m < self.M, n0 + c < self.N))
                v = E.Var("e")
                vec = S.For(v, E.IntImm(0), E.IntImm(per_vec),
                            self.Y.store(cs.load(*cs_at(gy, r, lay.col(r, c) + v)), m, n0 + c + v),
                            S.ForKind.VECTORIZED if per_vec > 1 else S.ForKind.SERIAL)
                return S.IfThenElse(inside, vec)

            def stage(t: tuple[E.Expr, ...], i: int = i) -> S.Stmt:
                gy, r = t[0] // 16, t[0] % 16
                m, c = by * kb.bm + gy * self.wm + i * 16 + r, t[1] * per_vec
                inside = E.And(m < self.M, n0 + c < self.N)
                loops = []
                for k, (rb, r_at) in zip(staged, views[1:], strict=True):
                    v = E.Var("e")  # one loop variable per operand: each bound once
                    loops.append(S.For(v, E.IntImm(0), E.IntImm(per_vec), rb.store(
                        E.select(inside, self.opnds[k].load(m, n0 + c + v),
                                 E.const(0, "int8")),
                        *r_at(gy, r, lay.col(r, c) + v)), S.ForKind.VECTORIZED))
                return S.seq(*loops)

            if staged:  # the operands' slice, visible to every warp before the writes read it
                slices += [out_map.emit(tid, stage, workers=kb.threads, name="r"), S.Barrier()]
            slices += [*writes, S.Barrier(),
                       out_map.emit(tid, store, workers=kb.threads, name="o"), S.Barrier()]
        return alloc(bufs, S.seq(*pre, S.Barrier(), *slices))

    def requant(self, acc: E.Expr, bias_s: S.Buffer | None, col: E.Expr,
                at: ChainSite | None = None) -> E.Expr:
        """The epilogue and the fused chain on one accumulator (``col``: the column within the
        block tile; ``at``: where the chain's operands are read for it)."""
        out_t = self.Y.dtype
        if self.epi is None and not self.chain:
            return acc if acc.dtype == out_t else E.Cast(out_t, acc)
        x, b = acc, (bias_s.load(col) if bias_s is not None else None)
        if self.epi is not None:
            for _name, stage in self.epi.stages(with_bias=bias_s is not None):
                x = stage(x, b)  # the epilogue's one statement (Epilogue.stages), every target
        if self.chain:
            assert at is not None, "a fused chain reads its operands at the element"
            x = self.apply_chain(x, at)
        return E.Cast(out_t, x)

    def site(self, m: E.Expr, n: E.Expr, staged: dict[int, E.Expr] | None = None
             ) -> ChainSite:
        """Where GEMM element ``(m, n)`` reads the chain's operands (tensor operands laid out
        like ``Y``; ``staged``: the values of those already in shared memory, by operand)."""
        return ChainSite(E.And(m < self.M, n < self.N), (m, n), n, n < self.N,
                         tuple((staged or {}).items()))

    def apply_chain(self, x: E.Expr, at: ChainSite) -> E.Expr:
        """The chain's stages on ``x`` (the same formulas as ``vta.gpu.ops.requantize``):
        tensor operands read at ``at.index`` as int32 and scaled by their ``prep``, channel
        operands at ``at.channel``; nothing is read outside the output (the tile's padding
        rows and columns are computed but never stored)."""
        assert self.chain is not None
        vals: list[Any] = []
        staged = dict(at.staged)
        for k, (o, buf) in enumerate(zip(self.chain.operands, self.opnds, strict=True)):
            if o.kind == TABLE:  # indices computed by the stage (each an int8 value + 128)
                vals.append(lambda i, j, buf=buf: E.Cast("int32", buf.load(i, j)))
                continue
            if o.kind == CHANNEL:
                v = E.select(at.channel_ok, buf.load(at.channel), 0)
            else:
                v = E.Cast("int32", staged[k]) if k in staged else \
                    E.select(at.inside, E.Cast("int32", buf.load(*at.index)), 0)
                v = o.prep(v) if o.prep is not None else v
            vals.append(v)
        for st in self.chain.stages:
            x = st.fn(x, *[vals[k] for k in st.reads])
        return x

    def staging_layout(self, eo: int, vb: int) -> Tile:
        """Layout of the 16 x bn staging rows (one set per warp row): no bank conflicts for
        the fragment pairs going in (2 elements a lane, one access when 4 or 8 bytes; every
        warp column) nor the vectors going out (lanes along a row)."""
        lanes = np.arange(WARP_LANES)
        g, q = lanes // 4, lanes % 4
        pair_w = 2 * eo if 2 * eo in (4, 8) else eo
        per_row = min(self.kb.bn * eo // vb, WARP_LANES)
        on = np.ones(WARP_LANES, bool)
        pats: list[Pattern] = [(g + 8 * h, wx * self.wn + j * 8 + 2 * q, on, pair_w)
                               for wx in range(self.kb.warps_n)
                               for j in range(min(self.fn, 2)) for h in range(2)]
        r = lanes // per_row
        pats.append((np.minimum(r, 15), (lanes % per_row) * (vb // eo), r < 16, vb))
        return choose_layout(16, self.kb.bn, self.Y.dtype, pats, align=max(16, vb))
