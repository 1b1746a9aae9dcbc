"""The sm_90a GEMM: ``Y = epilogue(X @ W.T)`` with ``wgmma``, TMA and an ``mbarrier`` pipeline.

``X`` (M, K) and ``W`` (N, K), float16, bfloat16 (as 16-bit patterns in ``int16`` arrays: the
IR has no bfloat16) or int8; ``Y`` (M, N) in the accumulator type (float32 / int32), float16
for a float16 GEMM that asks for it, or int8 through the fused requantizing epilogue
(``Epilogue.stages``, as ``vta.gpu.kernels.gemm`` and every other backend). Any M and N; K a
multiple of 16 bytes of elements (TMA's global stride rule; otherwise a ``GpuLoweringError``).

Structure (CUTLASS's non-warp-specialised sm90 "KernelTma" mainloop, every statement from
``vta.gpu.hopper``):

- A block computes a ``bm x bn`` tile with ``bm / 64`` consumer warpgroups; warpgroup ``g``
  owns rows ``64 g .. 64 g + 63`` and issues ``wgmma m64n{bn}`` (f16/bf16 k16, s8 k32) on
  them: ``bn / 2`` accumulator registers a thread. K advances 128 bytes a stage (64 f16 or
  128 s8), one 128-byte-swizzled row of the shared tiles; the k-steps inside a stage advance
  the matrix descriptors' start address by 32 bytes (the swizzle is a function of the
  address).
- Loads: TMA (``cp.async.bulk.tensor.2d`` with a host-made ``CUtensorMap``, 128-byte swizzle,
  zero fill past the matrix) of the ``bm x 128 B`` A box and the ``bn x 128 B`` B box into a
  ring of ``stages`` slots. Chosen over 1-D ``cp.async.bulk``: a bulk copy moves contiguous
  bytes, so it cannot write the swizzled rows (unit ``u`` of row ``r`` at ``u ^ r % 8``)
  except 16 bytes at a time, and only the swizzle lets ``wgmma`` read shared memory without
  bank conflicts; the tensor map's hardware does it for the whole box.
- Pipeline: slot ``s`` has a "full" barrier (count 1: thread 0's ``arrive.expect_tx`` of the
  stage's bytes; the two copies ``complete_tx``) and an "empty" barrier (count: the block's
  warps, lane 0 of each arrives when its warpgroup no longer reads the slot). Thread 0 fills
  ``stages`` slots ahead. Iteration ``kt`` waits on ``full[kt % stages]`` (parity
  ``kt / stages % 2``), issues its ``wgmma`` group, waits until at most this group is in flight
  (``wait_group 1``: the previous stage's group is done), releases the previous slot, and
  thread 0 refills it with stage ``kt - 1 + stages`` once every warp has released it.
- Epilogue: after ``wait_group 0`` each thread applies the epilogue (bias from global memory)
  to its accumulators and stores each pair of neighbouring columns (one vector store when N
  is even), guarded at the matrix edge.

Warp-specialised (``WgmmaKnobs(producer=True)``, CUTLASS's KernelTmaWarpSpecializedCooperative;
``_Body.specialised``): warpgroup 0 is the producer (``setmaxnreg.dec`` to 40 registers; its
thread 0 alone issues every TMA copy, waiting on each slot's "empty" barrier), the others the
consumers (``setmaxnreg.inc``; wait on "full", ``wgmma``, release), written as ``warp_roles``
so the emulator runs them concurrently. ``persistent``: a block loops over tiles in a grouped
order, the producer running ahead into the next tile while the consumers store. ``cluster=2``:
pairs of blocks share the B tile through TMA multicast and release each other's slots.
"""

from __future__ import annotations

from dataclasses import dataclass

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.errors import GpuLoweringError
from vta.gpu.dialect import CLUSTER, KERNEL, KNOBS
from vta.gpu.emulator_roles import warp_roles
from vta.gpu.hopper import (
    CONSUMER_REGISTERS,
    PRODUCER_REGISTERS,
    SWIZZLE_BYTES,
    TENSOR_MAPS,
    WARPGROUP,
    WGMMA_N,
    WGMMA_SHAPES,
    ClusterSync,
    FenceMbarrierInit,
    FenceProxyAsync,
    MbarrierArrive,
    MbarrierExpectTx,
    MbarrierInit,
    MbarrierWait,
    SetMaxNReg,
    SmemAlignCheck,
    TensorMapAcquire,
    TensorMapSpec,
    TmaLoad,
    Wgmma,
    WgmmaCommit,
    WgmmaFence,
    WgmmaWait,
)
from vta.gpu.kernels.common import alloc, finish
from vta.gpu.target import TARGETS, WARP_LANES
from vta.gpu.taskmap import repeat

#: the target these kernels are built for (wgmma and TMA are sm_90a instructions)
SM90 = TARGETS["sm_90a"]

__all__ = ["WgmmaKnobs", "wgmma_gemm", "OUT_DTYPES"]

#: registers a consumer thread needs beside its accumulators (descriptors, addresses, loop
#: counters, the epilogue's pair): ptxas's 168 for the 128 accumulators of bn=256 with nvcc 13
#: leaves 40; a budget under accumulators + 32 is refused rather than left to spill
_ADDRESS_REGISTERS = 32

#: the output dtypes each operand type may have (the first is the default without an epilogue)
OUT_DTYPES: dict[str, tuple[str, ...]] = {
    "float16": ("float32", "float16"), "bfloat16": ("float32",), "int8": ("int32", "int8")}


@dataclass(frozen=True)
class WgmmaKnobs:
    """Tiles and schedule of the sm_90a GEMM: ``warpgroups`` consumer warpgroups of 64 rows
    each (block tile ``64 warpgroups x bn``), ``bn`` the ``wgmma`` N (a multiple of 16, at most
    256), ``stages`` slots in the TMA ring (K advances 128 bytes a stage).

    ``producer``: warp-specialised (CUTLASS's KernelTmaWarpSpecializedCooperative): one more
    warpgroup, the producer, whose elected thread issues every TMA copy and which gives its
    registers to the consumers (``setmaxnreg``); the consumers only wait, multiply and store.
    ``persistent``: launch that many blocks (the GPU's SM count), each looping over output
    tiles ``blockIdx.x, blockIdx.x + persistent, ...`` so the producer loads the next tile while
    the consumers store this one (0: one block a tile). ``group``: with ``producer``, tiles are
    visited in groups of ``group`` tile rows (all of a group's columns before the next group),
    so concurrently running blocks share A and B tiles in L2. ``cluster``: with ``producer``,
    blocks run in thread-block clusters of 2 along M: the pair computes two vertically adjacent
    tiles of the same columns, each block's producer loads half of the shared B tile and
    multicasts it to both (``.multicast::cluster``), halving B's L2 traffic."""

    warpgroups: int = 2
    bn: int = 128
    stages: int = 4
    producer: bool = False
    persistent: int = 0
    group: int = 8
    cluster: int = 1

    @property
    def bm(self) -> int:
        return 64 * self.warpgroups

    @property
    def threads(self) -> int:
        return WARPGROUP * (self.warpgroups + int(self.producer))

    @property
    def consumer_registers(self) -> int:
        """Registers a consumer thread asks for with ``setmaxnreg.inc``: CUTLASS's 232, or
        what the register file leaves after the producer's (a multiple of 8)."""
        left = SM90.registers_per_sm - WARPGROUP * PRODUCER_REGISTERS
        return min(CONSUMER_REGISTERS, left // (WARPGROUP * self.warpgroups) // 8 * 8)

    def check(self) -> None:
        if self.bn not in WGMMA_N:
            raise GpuLoweringError(f"wgmma knobs: bn={self.bn} must be a multiple of 16 up to "
                                   f"256 (the wgmma N)")
        if self.warpgroups < 1 or self.threads > SM90.max_threads or 64 * self.warpgroups > 256:
            raise GpuLoweringError(f"wgmma knobs: warpgroups={self.warpgroups} must be 1 .. 4 "
                                   f"(a TMA box has at most 256 rows)")
        if self.stages < 2:
            raise GpuLoweringError(f"wgmma knobs: stages={self.stages} must be >= 2")
        if self.persistent < 0:
            raise GpuLoweringError(f"wgmma knobs: persistent={self.persistent} must be >= 0 "
                                   f"(blocks of a persistent launch; 0: a block a tile)")
        if self.persistent and not self.producer:
            raise GpuLoweringError("wgmma knobs: persistent needs producer=True (only the "
                                   "warp-specialised kernel loads the next tile during the "
                                   "epilogue)")
        if self.group < 1:
            raise GpuLoweringError(f"wgmma knobs: group={self.group} must be >= 1")
        if self.cluster not in (1, 2):
            raise GpuLoweringError(f"wgmma knobs: cluster={self.cluster} must be 1 or 2")
        if self.cluster > 1 and not self.producer:
            raise GpuLoweringError("wgmma knobs: cluster=2 needs producer=True (the multicast "
                                   "ring is the warp-specialised one)")
        if self.persistent and self.persistent < self.cluster:
            raise GpuLoweringError(f"wgmma knobs: persistent={self.persistent} blocks cannot "
                                   f"hold a cluster of {self.cluster}")
        if self.producer and self.consumer_registers < self.bn // 2 + _ADDRESS_REGISTERS:
            raise GpuLoweringError(f"wgmma knobs: {self.warpgroups} consumer warpgroups get "
                                   f"{self.consumer_registers} registers a thread, too few for "
                                   f"{self.bn // 2} accumulators")


def wgmma_gemm(spec: MatmulSpec, dtype: str = "float16", epi: Epilogue | None = None,
               knobs: WgmmaKnobs = WgmmaKnobs(), out_dtype: str | None = None) -> S.PrimFunc:
    """The lowered sm_90a GEMM kernel (module docstring); params ``X, W[, bias], Y, maps``
    (``maps``: the (2, 16) int64 tensor maps of X and W, ``hopper.encode_tensor_maps`` of the
    function's ``TENSOR_MAPS`` attribute; the emulator ignores its contents)."""
    if dtype not in WGMMA_SHAPES:
        raise GpuLoweringError(f"wgmma_gemm: no wgmma shape for {dtype} "
                               f"({', '.join(WGMMA_SHAPES)})")
    knobs.check()
    if epi is not None and dtype != "int8":
        raise GpuLoweringError("wgmma_gemm: the requantizing epilogue is for int8 GEMMs")
    out_t = out_dtype or ("int8" if epi is not None else OUT_DTYPES[dtype][0])
    if out_t not in OUT_DTYPES[dtype]:
        raise GpuLoweringError(f"wgmma_gemm: a {dtype} GEMM writes "
                               f"{' or '.join(OUT_DTYPES[dtype])}, not {out_t}")
    if (out_t == "int8") != (epi is not None):
        raise GpuLoweringError("wgmma_gemm: int8 output needs the requantizing epilogue (and "
                               "the epilogue writes int8)")
    sh = WGMMA_SHAPES[dtype]
    M, N, K = spec.m, spec.n, spec.k
    if min(M, N, K) < 1:
        raise GpuLoweringError(f"wgmma_gemm: empty GEMM {M}x{N}x{K}")
    if (K * sh.item) % 16:
        raise GpuLoweringError(f"wgmma_gemm: rows of K={K} {dtype} are not a multiple of 16 "
                               f"bytes (TMA's global stride rule)")
    X = S.Buffer("X", (M, K), sh.buf_dtype)
    W = S.Buffer("W", (N, K), sh.buf_dtype)
    bias = S.Buffer("bias", (N,), "int32") if epi is not None and epi.bias else None
    Y = S.Buffer("Y", (M, N), out_t)
    maps = S.Buffer("maps", (2, 16), "int64")
    params = (X, W) + ((bias,) if bias is not None else ()) + (Y, maps)
    g = _Body(M, N, K, dtype, knobs, X, W, bias, Y, maps, epi)
    if knobs.producer:
        name, body = f"gemm_wgmma_ws_{dtype}", g.specialised
        grid = (g.blocks, 1)
    else:
        name, body = f"gemm_wgmma_{dtype}", g.body
        grid = (g.tiles_n, g.tiles_m)
    cluster = ((CLUSTER, knobs.cluster),) if knobs.cluster > 1 else ()
    return finish(name, params, body, grid, knobs.threads,
                  ((KNOBS, knobs), (KERNEL, "wgmma"), (TENSOR_MAPS, g.specs), *cluster),
                  target=SM90)


class _Body:
    """The kernel body's builder (one instance per kernel)."""

    def __init__(self, M: int, N: int, K: int, dtype: str, kb: WgmmaKnobs, X: S.Buffer,
                 W: S.Buffer, bias: S.Buffer | None, Y: S.Buffer, maps: S.Buffer,
                 epi: Epilogue | None) -> None:
        self.M, self.N, self.K, self.kb = M, N, K, kb
        self.X, self.W, self.bias, self.Y, self.maps, self.epi = X, W, bias, Y, maps, epi
        self.sh = WGMMA_SHAPES[dtype]
        self.bk = SWIZZLE_BYTES // self.sh.item  # K elements a stage: one swizzled row
        self.kt = -(-K // self.bk)
        st = kb.stages
        self.As = S.Buffer("As", (st, kb.bm, self.bk), self.sh.buf_dtype, "shared")
        self.Bs = S.Buffer("Bs", (st, kb.bn, self.bk), self.sh.buf_dtype, "shared")
        self.full = S.Buffer("full", (st,), "int64", "shared")
        self.empty = S.Buffer("empty", (st,), "int64", "shared")
        self.acc = S.Buffer("acc", (kb.bn // 2,), self.sh.acc_dtype, "local")
        # in a cluster each block loads 1/cluster of the B tile's rows and multicasts them
        self.specs = (TensorMapSpec(X, kb.bm, self.bk, dtype),
                      TensorMapSpec(W, kb.bn // kb.cluster, self.bk, dtype))
        #: bytes landing in a block's slot a stage: its A box and the whole B tile
        self.stage_bytes = self.specs[0].box_bytes + self.specs[1].box_bytes * kb.cluster
        self.tiles_m, self.tiles_n = -(-M // kb.bm), -(-N // kb.bn)
        self.tiles = self.tiles_m * self.tiles_n
        #: units of work of a cluster: ``cluster`` vertically adjacent tiles (the last row of
        #: clusters may reach past M: its TMA boxes are zero-filled, its stores guarded)
        self.ctiles_m = -(-self.tiles_m // kb.cluster)
        self.ctiles = self.ctiles_m * self.tiles_n
        #: clusters of the launch (warp-specialised kernel): one a unit, or the persistent ones
        self.clusters = min(kb.persistent // kb.cluster, self.ctiles) if kb.persistent \
            else self.ctiles
        self.blocks = self.clusters * kb.cluster

    def load(self, slot: E.ExprLike, kt: E.ExprLike, bx: E.Expr, by: E.Expr,
             rank: E.Expr | None = None) -> S.Stmt:
        """Thread 0's issue of K-stage ``kt`` into ring slot ``slot``; in a cluster (``rank``:
        the block's rank) its part of the B tile, multicast to every block of the cluster."""
        slot, kt = E.as_expr(slot), E.as_expr(kt)
        z = E.IntImm(0)
        k0 = kt * self.bk
        c = self.kb.cluster
        part = self.kb.bn // c
        r = rank if rank is not None else z
        return S.seq(
            MbarrierExpectTx(self.full, slot, self.stage_bytes),
            TmaLoad(self.As, (slot, z, z), self.maps, 0, self.specs[0], by * self.kb.bm, k0,
                    self.full, slot),
            TmaLoad(self.Bs, (slot, r * part, z), self.maps, 1, self.specs[1],
                    bx * self.kb.bn + r * part, k0, self.full, slot,
                    (1 << c) - 1 if c > 1 else 0))

    def body(self, tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        kb, nst = self.kb, self.kb.stages
        wg, lane = E.Var("wg"), E.Var("lane")
        leader = tid.eq(0)
        nwarps = kb.threads // WARP_LANES
        zero = E.const(0, "int32") if self.sh.acc_dtype == "int32" else E.FloatImm(0.0, "float32")
        setup = S.seq(
            S.IfThenElse(leader, S.seq(
                SmemAlignCheck(self.As),
                TensorMapAcquire(self.maps, 0), TensorMapAcquire(self.maps, 1),
                *[S.seq(MbarrierInit(self.full, E.IntImm(s), 1),
                        MbarrierInit(self.empty, E.IntImm(s), nwarps)) for s in range(nst)],
                FenceProxyAsync())),
            S.Barrier(),
            S.IfThenElse(leader, S.seq(*[self.load(s, s, bx, by)
                                         for s in range(min(nst, self.kt))])),
            repeat(kb.bn // 2).emit(0, lambda t: self.acc.store(zero, *t), name="z"))
        kt = E.Var("kt")
        # the previous stage's slot and the parity of its release, written without a
        # negative operand (kt >= 1 where used) so the CUDA text needs no floor helpers
        slot, prev = kt % nst, (kt + nst - 1) % nst
        prev_parity = ((kt + nst - 1) // nst + 1) % 2
        z = E.IntImm(0)
        mmas = [Wgmma(self.sh, kb.bn, self.acc, (z,), self.As,
                      (slot, wg * 64, E.IntImm(kk * self.sh.k)), self.Bs,
                      (slot, z, E.IntImm(kk * self.sh.k)))
                for kk in range(self.bk // self.sh.k)]
        refill = S.IfThenElse(E.And(leader, kt - 1 + nst < self.kt), S.seq(
            MbarrierWait(self.empty, prev, prev_parity),
            self.load(prev, kt - 1 + nst, bx, by)))
        release = S.IfThenElse(kt > 0, S.seq(
            S.IfThenElse(lane.eq(0), MbarrierArrive(self.empty, prev)), refill))
        main = S.For(kt, z, E.IntImm(self.kt), S.seq(
            MbarrierWait(self.full, slot, (kt // nst) % 2), WgmmaFence(), *mmas, WgmmaCommit(),
            WgmmaWait(1), release))
        body = S.seq(setup, main, WgmmaWait(0, self.acc), self.epilogue(tid, wg, bx, by))
        body = alloc([self.As, self.Bs, self.full, self.empty, self.acc], body)
        return S.LetStmt(wg, tid // WARPGROUP, S.LetStmt(lane, tid % WARP_LANES, body))

    def tile(self, t: E.Expr) -> tuple[E.Expr, E.Expr]:
        """(cluster row, tile column) of a cluster's linear unit ``t`` in the grouped order:
        ``group`` rows at a time (the last group may be shorter), down each column of the group
        before the next column, so the blocks running together read few distinct A and B
        tiles. A block's tile row is ``cluster row * cluster + its rank``."""
        g = min(self.kb.group, self.ctiles_m)
        per = g * self.tiles_n
        first = (t // per) * g
        size = E.min_(self.ctiles_m - first, g)
        return first + (t % per) % size, (t % per) // size

    def my_tile(self, cid: E.Expr, rank: E.Expr, i: E.Expr) -> tuple[E.Expr, E.Expr]:
        """(tile row, tile column) of the ``i``-th unit of cluster ``cid`` for block ``rank``."""
        cm, tn = self.tile(cid + i * self.clusters)
        return (cm * self.kb.cluster + rank if self.kb.cluster > 1 else cm), tn

    def specialised(self, tid: E.Var, bx: E.Var, by: E.Var) -> S.Stmt:
        """The warp-specialised body (module docstring): barrier set-up by thread 0, then the
        producer warpgroup (0) and the consumer warpgroups (1 ..) as ``warp_roles``."""
        kb, nst, c = self.kb, self.kb.stages, self.kb.cluster
        wg, lane = E.Var("wg"), E.Var("lane")
        # every consumer warp of every block of the cluster releases each slot (a peer's
        # multicast writes it)
        nwarps = kb.warpgroups * WARPGROUP // WARP_LANES * c
        setup = S.seq(
            S.IfThenElse(tid.eq(0), S.seq(
                SmemAlignCheck(self.As),
                TensorMapAcquire(self.maps, 0), TensorMapAcquire(self.maps, 1),
                *[S.seq(MbarrierInit(self.full, E.IntImm(s), 1),
                        MbarrierInit(self.empty, E.IntImm(s), nwarps)) for s in range(nst)],
                FenceProxyAsync(), *([FenceMbarrierInit()] if c > 1 else []))),
            ClusterSync() if c > 1 else S.Barrier())
        # this cluster's units: cid, cid + clusters, ... (one when not persistent)
        cid, rank = (bx // c, bx % c) if c > 1 else (bx, E.IntImm(0))
        my_tiles = (self.ctiles - 1 - cid) // self.clusters + 1
        roles = warp_roles([(wg.eq(0), self.producer_role(tid, cid, rank, my_tiles)),
                            (None, self.consumer_role(tid, wg - 1, lane, cid, rank, my_tiles))])
        # no block leaves while a peer may still multicast into it or arrive on its barriers
        body = S.seq(setup, roles, *([ClusterSync()] if c > 1 else []))
        body = alloc([self.As, self.Bs, self.full, self.empty], body)
        return S.LetStmt(wg, tid // WARPGROUP, S.LetStmt(lane, tid % WARP_LANES, body))

    def producer_role(self, tid: E.Var, cid: E.Expr, rank: E.Expr, my_tiles: E.Expr
                      ) -> S.Stmt:
        """Warpgroup 0: gives back registers; its thread 0 fills the ring, waiting for each
        slot's release ("empty", parity of the previous pass; a fresh barrier passes)."""
        nst = self.kb.stages
        i, kt = E.Var("pi"), E.Var("pk")
        tm, tn = self.my_tile(cid, rank, i)
        it = i * self.kt + kt
        fill = S.For(kt, E.IntImm(0), E.IntImm(self.kt), S.seq(
            MbarrierWait(self.empty, it % nst, ((it // nst) + 1) % 2),
            self.load(it % nst, kt, tn, tm, rank if self.kb.cluster > 1 else None)))
        return S.seq(SetMaxNReg(PRODUCER_REGISTERS, inc=False), S.IfThenElse(
            tid.eq(0), S.For(i, E.IntImm(0), my_tiles, fill)))

    def consumer_role(self, tid: E.Var, cwg: E.Expr, lane: E.Var, cid: E.Expr, rank: E.Expr,
                      my_tiles: E.Expr) -> S.Stmt:
        """Warpgroups 1 ..: take registers; per tile, zero the accumulators, multiply each
        stage once its copy landed, release the previous stage's slot once its ``wgmma``
        retired (``wait_group 1``), the last one after ``wait_group 0``, and store."""
        nst = self.kb.stages
        i, kt = E.Var("ci"), E.Var("ck")
        tm, tn = self.my_tile(cid, rank, i)
        it = i * self.kt + kt
        z = E.IntImm(0)
        zero = E.const(0, "int32") if self.sh.acc_dtype == "int32" else E.FloatImm(0.0, "float32")
        slot = it % nst
        mmas = [Wgmma(self.sh, self.kb.bn, self.acc, (z,), self.As,
                      (slot, cwg * 64, E.IntImm(kk * self.sh.k)), self.Bs,
                      (slot, z, E.IntImm(kk * self.sh.k)))
                for kk in range(self.bk // self.sh.k)]
        release = S.IfThenElse(E.And(kt > 0, lane.eq(0)), self.release((it + nst - 1) % nst))
        main = S.For(kt, z, E.IntImm(self.kt), S.seq(
            MbarrierWait(self.full, slot, (it // nst) % 2), WgmmaFence(), *mmas, WgmmaCommit(),
            WgmmaWait(1), release))
        last = (i * self.kt + self.kt - 1) % nst
        tile = S.seq(
            repeat(self.kb.bn // 2).emit(0, lambda t: self.acc.store(zero, *t), name="z"),
            main, WgmmaWait(0, self.acc),
            S.IfThenElse(lane.eq(0), self.release(last)),
            self.epilogue(tid, cwg, tn, tm))
        return S.seq(SetMaxNReg(self.kb.consumer_registers, inc=True),
                     alloc([self.acc], S.For(i, z, my_tiles, tile)))

    def release(self, slot: E.Expr) -> S.Stmt:
        """A consumer warp's release of ``slot``: on its own "empty" barrier, and in a cluster
        on every block's (each block's producer multicasts into all of them)."""
        c = self.kb.cluster
        if c == 1:
            return MbarrierArrive(self.empty, slot)
        return S.seq(*[MbarrierArrive(self.empty, slot, E.IntImm(r)) for r in range(c)])

    def epilogue(self, tid: E.Expr, wg: E.Expr, bx: E.Expr, by: E.Expr) -> S.Stmt:
        """Each thread's accumulators through the epilogue into ``Y`` (fragment layout of
        ``hopper.wgmma_fragment``), guarded at the matrix edge: the two neighbouring columns
        a thread holds leave as one vector store when N is even (aligned pairs), else one by
        one."""
        t = tid % WARPGROUP
        w, g, q = t // WARP_LANES, (t % WARP_LANES) // 4, t % 4
        pair = S.Buffer("pair", (2,), self.Y.dtype, "local")

        def store(ix: tuple[E.Expr, ...]) -> S.Stmt:
            j, h = ix
            row = by * self.kb.bm + wg * 64 + w * 16 + g + h * 8
            col = bx * self.kb.bn + j * 8 + q * 2
            vals = [self.requant(self.acc.load(j * 4 + h * 2 + e), col + e) for e in range(2)]
            if self.N % 2 == 0:  # col even, N even: both inside or both outside, aligned
                v = E.Var("v")
                return S.seq(pair.store(vals[0], 0), pair.store(vals[1], 1), S.IfThenElse(
                    E.And(row < self.M, col < self.N),
                    S.For(v, E.IntImm(0), E.IntImm(2), self.Y.store(pair.load(v), row, col + v),
                          S.ForKind.VECTORIZED)))
            return S.seq(*[S.IfThenElse(E.And(row < self.M, col + e < self.N),
                                        self.Y.store(vals[e], row, col + e)) for e in range(2)])
        return alloc([pair], repeat(self.kb.bn // 8, 2).emit(0, store, name="o"))

    def requant(self, acc: E.Expr, col: E.Expr) -> E.Expr:
        """The epilogue on one accumulator of column ``col``."""
        out_t = self.Y.dtype
        if self.epi is None:
            return acc if acc.dtype == out_t else E.Cast(out_t, acc)
        # the pair is computed before the edge guard: the bias is read only inside the matrix
        b = E.select(col < self.N, self.bias.load(col), 0) if self.bias is not None else None
        x = acc
        for _name, stage in self.epi.stages(with_bias=self.bias is not None):
            x = stage(x, b)
        return E.Cast(out_t, x)

