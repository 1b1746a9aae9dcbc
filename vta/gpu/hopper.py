"""Hopper (sm_90a) statements of the GPU dialect: ``mbarrier``, TMA loads and ``wgmma``.

Each statement is a frozen dataclass of the loop-nest IR that prints itself (``render``),
exposes its expressions and buffers to the verifier, has a CUDA render rule (``_render``:
inline PTX) and an emulate rule (``_emulate``), registered as GPU intrinsics
(``HOPPER_INTRINSICS``, ``vta.gpu.intrinsic``) exactly as the warp-level statements of
``vta.gpu.mma`` are. Semantics follow the PTX ISA 8.x (sections 9.7.13.15 ``mbarrier``,
9.7.9.27 ``cp.async.bulk.tensor``, 9.7.15 ``wgmma``):

- ``mbarrier`` (a 64-bit object in shared memory): ``MbarrierInit(count)`` sets the expected
  arrivals of each phase; ``MbarrierArrive`` is one arrival; ``MbarrierExpectTx(n)`` is
  ``arrive.expect_tx``: it raises the phase's transaction count by ``n`` bytes and arrives. A
  TMA copy signalling the barrier performs ``complete_tx`` of its bytes when it lands. The
  phase completes when its pending arrivals and its transaction count are both zero; the
  barrier then moves to the next phase with ``count`` arrivals pending.
  ``MbarrierWait(parity)`` is the ``try_wait.parity`` loop: it returns once the phase of that
  parity has completed, i.e. while the current phase's parity differs from ``parity`` (so a
  wait with parity 1 on a fresh barrier returns at once: the producer's first pass over the
  "empty" barriers).
- ``TmaLoad``: ``cp.async.bulk.tensor.2d`` of a ``rows x cols`` box of a row-major global
  matrix (tensor map ``maps[index]``, made on the host by ``encode_tensor_maps``) into shared
  memory with the 128-byte swizzle, elements outside the matrix filled with zeros; the full box
  counts as ``complete_tx`` bytes on the barrier (also its zero-filled part).
- 128-byte swizzle (``CU_TENSOR_MAP_SWIZZLE_128B`` and the matrix descriptor's mode 1 are the
  same function of the shared address): the 16-byte unit at byte address ``a`` is stored at
  ``a ^ (((a >> 7) & 7) << 4)``; tiles are 1024-byte aligned, so in a tile of 128-byte rows
  unit ``u`` of row ``r`` lands at unit ``u ^ (r % 8)``.
- ``Wgmma``: ``wgmma.mma_async.sync.aligned.m64nNkK`` for one warpgroup (4 consecutive warps,
  128 threads): ``D(64 x N) += A(64 x K) B(N x K)^T`` with A and B read from shared memory
  through matrix descriptors (K-major, 128-byte swizzle, 8-row core-matrix groups 1024 bytes
  apart: stride byte offset 1024; the leading byte offset is unused in this mode). The
  accumulator fragment: thread ``t`` of the warpgroup (warp ``w = t // 32``, ``g = t % 32 // 4``,
  ``q = t % 4``) holds ``d[4 j + e]`` = element ``(16 w + g + 8 (e // 2), 8 j + 2 q + (e % 2))``.
  f16/bf16 products accumulate exactly and round once to f32 per instruction (as
  ``vta.gpu.mma``'s ``mma.sync``); s8 products accumulate exactly into s32 with wraparound.
  ``WgmmaFence`` / ``WgmmaCommit`` / ``WgmmaWait(n)`` are the warpgroup fence, commit and
  wait; the emulator executes a ``wgmma`` at issue but keeps its shared-memory reads *pending*
  until the wait that retires its group: a TMA write over them is an ``EmulatorRaceError`` (so
  is a ``wgmma`` read of a tile whose TMA copy no completed ``mbarrier`` wait has covered).

The emulator runs blocks in lockstep, so in one instruction stream it executes pipelines whose
waits are satisfied by arrivals earlier in program order (a producer thread and the consumers
together, CUTLASS's non-warp-specialised "KernelTma" schedule); a wait that can never complete
in that order is an ``EmulatorError`` naming the barrier, not a hang. Inside the roles of a
``warp_roles`` split (``vta.gpu.emulator_roles``: a producer warpgroup and consumer
warpgroups) a wait that cannot complete yet hands over to another role, and one no role can
complete is a deadlock error naming each role's wait.
- ``SetMaxNReg``: ``setmaxnreg`` moves registers between the warpgroups of a warp-specialised
  kernel (the producer's 40, the consumers' 232).
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.compiler.ir.stmt import Buffer, Stmt
from vta.errors import EmulatorRaceError, GpuLoweringError, GpuUnavailableError
from vta.gpu.emulator_roles import ROLES_STATE
from vta.gpu.intrinsic import GpuIntrinsic, register_gpu_intrinsic
from vta.gpu.mma import _check_scope, _emu_error, _lane_regs, _regs, _smem_addr
from vta.gpu.target import WARP_LANES

if TYPE_CHECKING:
    from vta.gpu.cuda import _Renderer
    from vta.gpu.emulator import Emulator, _Ctx

__all__ = ["WgmmaShape", "WGMMA_SHAPES", "WARPGROUP", "SWIZZLE_BYTES", "ATOM_BYTES",
           "TensorMapSpec", "swizzle128", "smem_descriptor", "MbarrierInit", "MbarrierArrive",
           "MbarrierExpectTx", "MbarrierWait", "FenceProxyAsync", "SmemAlignCheck", "TmaLoad",
           "TensorMapAcquire",
           "WgmmaFence", "WgmmaCommit", "WgmmaWait", "Wgmma", "HOPPER_STMTS", "HOPPER_INTRINSICS",
           "wgmma_fragment", "encode_tensor_maps", "ARCH", "TENSOR_MAPS", "WGMMA_N",
           "SetMaxNReg", "PRODUCER_REGISTERS", "CONSUMER_REGISTERS", "ClusterSync",
           "FenceMbarrierInit"]

#: the architecture these statements need (``wgmma`` exists only on sm_90a)
ARCH = "sm_90a"
#: threads of a warpgroup (4 warps execute one ``wgmma``)
WARPGROUP = 4 * WARP_LANES
#: the swizzle span: a tile row of K holds 128 bytes
SWIZZLE_BYTES = 128
#: one swizzle atom: 8 rows of 128 bytes (the descriptor's stride byte offset)
ATOM_BYTES = 8 * SWIZZLE_BYTES
#: the matrix descriptor's swizzle mode field for 128-byte swizzle (bits 62-63)
_DESC_SWIZZLE_128B = 1
#: ``CUtensorMapDataType`` by element bytes (cuda.h: UINT8 = 0, UINT16 = 1; the copy moves
#: bytes, and with zero fill the element type matters only for its size) and
#: ``CUtensorMapSwizzle`` / ``CUtensorMapL2promotion`` values
_TMA_DTYPE = {1: 0, 2: 1}
_TMA_SWIZZLE_128B = 3
_TMA_L2_PROMOTION_256B = 3


# ---------------------------------------------------------------------------- shapes and layouts


@dataclass(frozen=True)
class WgmmaShape:
    """One ``wgmma`` operand type: ``k`` per instruction, the IR dtype carrying the operands
    (bf16 travels as its 16-bit patterns in ``int16`` buffers: the IR has no bfloat16), the
    accumulator dtype and the PTX type suffix."""

    operand: str
    k: int
    buf_dtype: str
    acc_dtype: str
    types: str

    def ptx(self, n: int) -> str:
        return f"wgmma.mma_async.sync.aligned.m64n{n}k{self.k}.{self.types}"

    @property
    def item(self) -> int:
        return DTYPES[self.buf_dtype] // 8


WGMMA_SHAPES: dict[str, WgmmaShape] = {
    "float16": WgmmaShape("float16", 16, "float16", "float32", "f32.f16.f16"),
    "bfloat16": WgmmaShape("bfloat16", 16, "int16", "float32", "f32.bf16.bf16"),
    "int8": WgmmaShape("int8", 32, "int8", "int32", "s32.s8.s8"),
}

#: the N a ``wgmma`` may have (multiples of 8 up to 256 for f16/bf16, of 8/16 for s8; the
#: kernels use multiples of 16)
WGMMA_N = tuple(range(16, 257, 16))


def swizzle128(addr: np.ndarray) -> np.ndarray:
    """Physical byte address of logical byte address ``addr`` under the 128-byte swizzle."""
    return addr ^ (((addr >> 7) & 7) << 4)


def smem_descriptor(addr: int) -> int:
    """The 64-bit ``wgmma`` matrix descriptor of a K-major 128-byte-swizzled operand at shared
    byte address ``addr`` (PTX ISA "matrix descriptor format": start address >> 4 in bits
    0-13, leading byte offset >> 4 in 16-29 (unused here: 1), stride byte offset >> 4 in
    32-45, base offset 0 in 49-51, swizzle mode in 62-63)."""
    return (((addr & 0x3FFFF) >> 4) | (1 << 16) | ((ATOM_BYTES >> 4) << 32)
            | (_DESC_SWIZZLE_128B << 62))


def wgmma_fragment(n: int) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of accumulator register ``i`` of warpgroup thread ``t``, two (128, n/2)
    arrays (module docstring)."""
    t = np.arange(WARPGROUP)[:, None]
    i = np.arange(n // 2)[None, :]
    w, g, q = t // WARP_LANES, (t % WARP_LANES) // 4, t % 4
    e, j = i % 4, i // 4
    return 16 * w + g + 8 * (e // 2), 8 * j + 2 * q + (e % 2)


@dataclass(frozen=True)
class TensorMapSpec:
    """What tensor map ``index`` of a kernel describes: ``src`` (a row-major 2-D global
    matrix) read in ``rows x cols`` boxes with the 128-byte swizzle and zero fill; the kernel
    attribute ``TENSOR_MAPS`` lists them and ``encode_tensor_maps`` builds them on the host."""

    src: Buffer
    rows: int
    cols: int
    operand: str

    @property
    def box_bytes(self) -> int:
        return self.rows * self.cols * DTYPES[self.src.dtype] // 8


#: on a kernel using TMA: the ``TensorMapSpec`` of each entry of its ``maps`` parameter
TENSOR_MAPS: S.AttrKey[tuple[TensorMapSpec, ...]] = S.AttrKey("tensor_maps", __name__)


# ---------------------------------------------------------------------------- helpers

Render = Callable[[Any], str]


def _idx(r: Render, idx: tuple[E.Expr, ...]) -> str:
    return ", ".join(r(i) for i in idx)


def _ref(nm: Any, b: Buffer, r: Render, idx: tuple[E.Expr, ...]) -> str:
    return f"{nm(b, b.name)}[{_idx(r, idx)}]"


def _asm(ind: int, text: str, outs: str = "", ins: str = "", clobber: str = '"memory"'
         ) -> str:
    return f'{"  " * ind}asm volatile("{text}" : {outs} : {ins} : {clobber});'


def _lanes(ctx: _Ctx, m: Any) -> np.ndarray:
    return np.arange(ctx.L) if m is None else np.nonzero(m)[0]


def _per_lane(ctx: _Ctx, v: Any, lanes: np.ndarray) -> np.ndarray:
    return np.broadcast_to(np.asarray(v, np.int64), (ctx.L,))[lanes]


def _check_barrier(b: Buffer, what: str) -> None:
    _check_scope(b, "shared", what)
    if b.dtype != "int64" or len(b.shape) != 1:
        raise GpuLoweringError(f"{what}: {b.name} must be a 1-D int64 shared array of "
                               f"mbarriers, not {b.dtype}{list(b.shape)}")


class _Barriers:
    """The mbarrier objects of a batch: per (block, barrier) arrival count, pending
    arrivals, transaction bytes, completed phases, and the TMA copies each phase carries."""

    def __init__(self, nblocks: int, n: int) -> None:
        self.count = np.zeros((nblocks, n), np.int64)
        self.pending = np.zeros((nblocks, n), np.int64)
        self.tx = np.zeros((nblocks, n), np.int64)
        self.phase = np.zeros((nblocks, n), np.int64)
        self.live = np.zeros((nblocks, n), bool)
        #: (block, barrier, phase, shared buffer, storage indices) of copies not yet waited on
        self.copies: list[tuple[int, int, int, Buffer, np.ndarray]] = []

    def settle(self, blk: np.ndarray, idx: np.ndarray) -> None:
        """Complete the phase of each touched barrier whose arrivals and bytes are all in."""
        done = self.live[blk, idx] & (self.pending[blk, idx] == 0) & (self.tx[blk, idx] == 0)
        for b, i in set(zip(blk[done].tolist(), idx[done].tolist(), strict=True)):
            self.phase[b, i] += 1
            self.pending[b, i] = self.count[b, i]


def _barriers(em: Emulator, ctx: _Ctx, bar: Buffer, what: str) -> _Barriers:
    st: dict[Buffer, _Barriers] = ctx.dialect.setdefault("mbarrier", {})
    if bar not in st:
        st[bar] = _Barriers(ctx.B, bar.size)
    return st[bar]


def _bar_index(em: Emulator, ctx: _Ctx, bar: Buffer, fn: Any, m: Any, lanes: np.ndarray,
               what: str, need_live: bool = True) -> tuple[_Barriers, np.ndarray, np.ndarray]:
    st = _barriers(em, ctx, bar, what)
    idx = _per_lane(ctx, fn(ctx, m), lanes)
    if idx.size and (idx.min() < 0 or idx.max() >= bar.size):
        raise _emu_error(em, f"{what}: mbarrier {bar.name}[{int(idx.max())}] out of bounds for "
                             f"shape {bar.shape}")
    blk = ctx.blk[lanes].astype(np.int64)
    if need_live and not st.live[blk, idx].all():
        raise _emu_error(em, f"{what}: mbarrier {bar.name} used before mbarrier.init")
    return st, blk, idx


def _wgmma_state(ctx: _Ctx) -> dict[str, Any]:
    st: dict[str, Any] | None = ctx.dialect.get("wgmma")
    if st is None:
        st = ctx.dialect["wgmma"] = {"open": np.zeros(ctx.L // WARPGROUP + 1, np.int64),
                                     "pending": [], "reading": {}}
    return st


def _warpgroups(em: Emulator, ctx: _Ctx, m: Any, what: str) -> np.ndarray:
    """Indices (over the batch) of the warpgroups executing; each must be wholly active."""
    if ctx.T % WARPGROUP:
        raise _emu_error(em, f"{what} needs whole warpgroups ({WARPGROUP} threads), but a block "
                             f"has {ctx.T}")
    if m is None:
        return np.arange(ctx.L // WARPGROUP)
    act = m.reshape(-1, WARPGROUP)
    some, full = act.any(axis=1), act.all(axis=1)
    if np.any(some & ~full):
        raise _emu_error(em, f"{what} executed by part of a warpgroup (it is .sync.aligned)")
    return np.nonzero(full)[0]


def _uniform(em: Emulator, ctx: _Ctx, v: Any, groups: np.ndarray, what: str) -> np.ndarray:
    """A value per warpgroup: every thread of the group must agree."""
    full = np.broadcast_to(np.asarray(v, np.int64), (ctx.L,)).reshape(-1, WARPGROUP)[groups]
    if np.any(full != full[:, :1]):
        raise _emu_error(em, f"{what}: an operand differs between the threads of a warpgroup")
    return full[:, 0]


# ---------------------------------------------------------------------------- mbarrier


@dataclass(frozen=True, slots=True)
class MbarrierInit(Stmt):
    """``mbarrier.init.shared::cta.b64 [bar[index]], count`` (one thread per barrier)."""

    bar: Buffer
    index: E.Expr
    count: int

    def __post_init__(self) -> None:
        _check_barrier(self.bar, "mbarrier.init")
        if not 0 < self.count < (1 << 20):
            raise GpuLoweringError(f"mbarrier.init: count {self.count} outside 1 .. 2^20 - 1")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"mbarrier.init({_ref(nm, self.bar, r, (self.index,))}, {self.count})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (self.index,)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.bar,)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "mbarrier.init.shared::cta.b64 [%0], %1;", "",
                     f'"r"({_smem_addr(rd, self.bar, (self.index,))}), "r"({self.count})')]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        fn, count = em.expr(self.index), self.count

        def run(ctx: _Ctx, m: Any) -> None:
            lanes = _lanes(ctx, m)
            st, blk, idx = _bar_index(em, ctx, self.bar, fn, m, lanes, "mbarrier.init", False)
            st.count[blk, idx] = count
            st.pending[blk, idx] = count
            st.tx[blk, idx] = 0
            st.phase[blk, idx] = 0
            st.live[blk, idx] = True
        return run


@dataclass(frozen=True, slots=True)
class MbarrierArrive(Stmt):
    """``mbarrier.arrive.shared::cta.b64 _, [bar[index]]``: one arrival per executing thread.
    With ``cta`` (a block's rank in its thread-block cluster): the arrival is on that block's
    barrier (``mapa`` + ``mbarrier.arrive.shared::cluster``), how a consumer releases a slot a
    peer block's multicast copy writes."""

    bar: Buffer
    index: E.Expr
    cta: E.Expr | None = None

    def __post_init__(self) -> None:
        _check_barrier(self.bar, "mbarrier.arrive")

    def render(self, r: Render, nm: Any) -> list[str]:
        where = "" if self.cta is None else f" in cta {r(self.cta)}"
        return [f"mbarrier.arrive({_ref(nm, self.bar, r, (self.index,))}{where})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (self.index,) if self.cta is None else (self.index, self.cta)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.bar,)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        addr = _smem_addr(rd, self.bar, (self.index,))
        if self.cta is None:
            return [_asm(ind, "mbarrier.arrive.shared::cta.b64 _, [%0];", "", f'"r"({addr})')]
        return [_asm(ind, "{\\n .reg .b32 ra;\\n mapa.shared::cluster.u32 ra, %0, %1;\\n "
                          "mbarrier.arrive.shared::cluster.b64 _, [ra];\\n}\\n", "",
                     f'"r"({addr}), "r"({rd.expr(self.cta)})')]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        fn = em.expr(self.index)
        cf = em.expr(self.cta) if self.cta is not None else None

        def run(ctx: _Ctx, m: Any) -> None:
            lanes = _lanes(ctx, m)
            st, blk, idx = _bar_index(em, ctx, self.bar, fn, m, lanes, "mbarrier.arrive")
            if cf is not None:
                blk = _peer_blocks(em, ctx, blk, _per_lane(ctx, cf(ctx, m), lanes),
                                   "mbarrier.arrive")
                if not st.live[blk, idx].all():
                    raise _emu_error(em, f"mbarrier.arrive on {self.bar.name} of a peer block "
                                         f"before its mbarrier.init (no cluster sync?)")
            np.subtract.at(st.pending, (blk, idx), 1)
            if np.any(st.pending[blk, idx] < 0):
                raise _emu_error(em, f"mbarrier.arrive on {self.bar.name}: more arrivals than "
                                     f"the count it was initialised with")
            st.settle(blk, idx)
        return run


def _peer_blocks(em: Emulator, ctx: _Ctx, blk: np.ndarray, cta: np.ndarray,
                 what: str) -> np.ndarray:
    """Batch indices of the blocks of rank ``cta`` in the clusters of blocks ``blk`` (a batch
    holds whole clusters of ``em.cluster`` consecutive blocks)."""
    c = em.cluster
    if np.any((cta < 0) | (cta >= c)):
        raise _emu_error(em, f"{what}: cluster rank {int(cta.max())} outside 0 .. {c - 1} "
                             f"(cluster of {c} blocks)")
    rank = (blk + ctx.first_block) % c
    return blk - rank + cta


@dataclass(frozen=True, slots=True)
class MbarrierExpectTx(Stmt):
    """``mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar[index]], nbytes``: the phase waits
    for ``nbytes`` more bytes of asynchronous copies, and the thread arrives."""

    bar: Buffer
    index: E.Expr
    nbytes: int

    def __post_init__(self) -> None:
        _check_barrier(self.bar, "mbarrier.expect_tx")
        if not 0 < self.nbytes < (1 << 20):
            raise GpuLoweringError(f"mbarrier.expect_tx: {self.nbytes} bytes outside 1 .. 2^20-1")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"mbarrier.arrive.expect_tx({_ref(nm, self.bar, r, (self.index,))}, "
                f"{self.nbytes} B)"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (self.index,)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.bar,)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;", "",
                     f'"r"({_smem_addr(rd, self.bar, (self.index,))}), "r"({self.nbytes})')]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        fn, nbytes = em.expr(self.index), self.nbytes

        def run(ctx: _Ctx, m: Any) -> None:
            lanes = _lanes(ctx, m)
            st, blk, idx = _bar_index(em, ctx, self.bar, fn, m, lanes, "mbarrier.expect_tx")
            np.add.at(st.tx, (blk, idx), nbytes)
            np.subtract.at(st.pending, (blk, idx), 1)
            if np.any(st.pending[blk, idx] < 0):
                raise _emu_error(em, f"mbarrier.arrive.expect_tx on {self.bar.name}: more "
                                     f"arrivals than the count it was initialised with")
            st.settle(blk, idx)
        return run


@dataclass(frozen=True, slots=True)
class MbarrierWait(Stmt):
    """Each executing thread spins on ``mbarrier.try_wait.parity.shared::cta.b64`` until the
    phase of parity ``parity`` of ``bar[index]`` has completed."""

    bar: Buffer
    index: E.Expr
    parity: E.Expr

    def __post_init__(self) -> None:
        _check_barrier(self.bar, "mbarrier.try_wait")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"mbarrier.wait({_ref(nm, self.bar, r, (self.index,))}, parity={r(self.parity)})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (self.index, self.parity)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.bar,)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        # labels are local to the braces, so the loop may be inlined many times (as CUTLASS)
        text = ("{\\n .reg .pred P1;\\n LAB_WAIT:\\n mbarrier.try_wait.parity.shared::cta.b64 "
                "P1, [%0], %1;\\n @P1 bra DONE;\\n bra LAB_WAIT;\\n DONE:\\n}\\n")
        return [_asm(ind, text, "", f'"r"({_smem_addr(rd, self.bar, (self.index,))}), '
                                    f'"r"({rd.expr(self.parity)})')]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        fn, pf = em.expr(self.index), em.expr(self.parity)

        def run(ctx: _Ctx, m: Any) -> None:
            lanes = _lanes(ctx, m)
            if not lanes.size:
                return
            st, blk, idx = _bar_index(em, ctx, self.bar, fn, m, lanes, "mbarrier.try_wait")
            par = _per_lane(ctx, pf(ctx, m), lanes)
            if np.any((par != 0) & (par != 1)):
                raise _emu_error(em, f"mbarrier.try_wait.parity on {self.bar.name}: parity "
                                     f"must be 0 or 1")
            open_ = (st.phase[blk, idx] & 1) == par
            sched = ctx.dialect.get(ROLES_STATE)
            if open_.any() and sched is not None:  # another warp role may complete it
                k = int(np.argmax(open_))
                sched.block(lambda: not np.any((st.phase[blk, idx] & 1) == par),
                            f"{self.bar.name}[{int(idx[k])}] parity {int(par[k])}")
                open_ = (st.phase[blk, idx] & 1) == par
            if open_.any():
                k = int(np.argmax(open_))
                b, i = int(blk[k]), int(idx[k])
                raise _emu_error(em, f"mbarrier.try_wait.parity on {self.bar.name}[{i}] (block "
                                     f"{b + ctx.first_block}): the phase of parity {par[k]} "
                                     f"never completes in program order ({st.pending[b, i]} "
                                     f"arrivals and {st.tx[b, i]} bytes outstanding): deadlock")
            _retire_copies(ctx, st, set(zip(blk.tolist(), idx.tolist(), strict=True)))
        return run


def _retire_copies(ctx: _Ctx, st: _Barriers, seen: set[tuple[int, int]]) -> None:
    """The TMA copies of completed phases waited on are visible: no longer in flight."""
    rest = []
    for b, i, ph, dst, where in st.copies:
        if (b, i) in seen and ph < st.phase[b, i]:
            np.subtract.at(ctx.inflight[dst], where, 1)
        else:
            rest.append((b, i, ph, dst, where))
    st.copies = rest


@dataclass(frozen=True, slots=True)
class FenceProxyAsync(Stmt):
    """``fence.proxy.async.shared::cta``: the executing thread's shared-memory writes (an
    ``mbarrier.init``) become visible to the async proxy (TMA, ``wgmma``)."""

    def render(self, r: Render, nm: Any) -> list[str]:
        return ["fence.proxy.async.shared::cta()"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "fence.proxy.async.shared::cta;", "", "")]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        return lambda ctx, m: None  # the emulator's memory has one proxy


@dataclass(frozen=True, slots=True)
class SmemAlignCheck(Stmt):
    """Trap unless ``buf`` starts at a shared address that is a multiple of ``align`` (the
    128-byte swizzle is a function of the address: a tile must sit on a 1024-byte boundary;
    the CUDA renderer carves dynamic shared memory 128-byte aligned, so the kernel checks)."""

    buf: Buffer
    align: int = ATOM_BYTES

    def __post_init__(self) -> None:
        _check_scope(self.buf, "shared", "alignment check")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"assert_aligned({nm(self.buf, self.buf.name)}, {self.align})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.buf,)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        addr = _smem_addr(rd, self.buf, tuple(E.IntImm(0) for _ in self.buf.shape))
        return [f"{'  ' * ind}if ({addr} % {self.align}u != 0u) __trap();"]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        return lambda ctx, m: None  # the emulator's shared buffers each start at address 0


# ---------------------------------------------------------------------------- TMA


@dataclass(frozen=True, slots=True)
class TensorMapAcquire(Stmt):
    """``fence.proxy.tensormap::generic.acquire.gpu`` on ``maps[index]`` (128 bytes): the tensor
    map, written to global memory through the generic proxy (a host copy), is what the TMA unit
    reads (the maps travel in global memory: the renderer's parameters are arrays)."""

    maps: Buffer
    index: int

    def __post_init__(self) -> None:
        _check_scope(self.maps, "global", "tensor-map fence")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"fence.proxy.tensormap.acquire({nm(self.maps, self.maps.name)}[{self.index}])"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.maps,)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "fence.proxy.tensormap::generic.acquire.gpu [%0], 128;", "",
                     f'"l"(&{rd.name(self.maps)}[{16 * self.index}])')]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        return lambda ctx, m: None  # the emulator reads the TensorMapSpec, not the bytes



@dataclass(frozen=True, slots=True)
class TmaLoad(Stmt):
    """``cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes``: the
    box of tensor map ``maps[spec index]`` whose first element is ``(row, col)`` of
    ``spec.src`` lands in ``dst`` from ``dst_index`` on (128-byte swizzled, zero-filled
    outside the matrix) and completes ``spec.box_bytes`` bytes on ``bar[bar_index]``."""

    dst: Buffer
    dst_index: tuple[E.Expr, ...]
    maps: Buffer
    map_index: int
    spec: TensorMapSpec
    row: E.Expr
    col: E.Expr
    bar: Buffer
    bar_index: E.Expr
    #: a bit per block of the cluster (by rank) that receives the box at the same shared
    #: offset, completing its bytes on its own ``bar[bar_index]`` (``.multicast::cluster``);
    #: 0: this block only
    multicast: int = 0

    def __post_init__(self) -> None:
        _check_scope(self.dst, "shared", "TMA destination")
        if not 0 <= self.multicast < (1 << 16):
            raise GpuLoweringError(f"TMA: multicast mask {self.multicast} outside 0 .. 2^16-1")
        _check_scope(self.maps, "global", "TMA tensor maps")
        _check_barrier(self.bar, "TMA barrier")
        sp = self.spec
        if self.dst.dtype != sp.src.dtype:
            raise GpuLoweringError(f"TMA: {self.dst.name} is {self.dst.dtype}, "
                                   f"{sp.src.name} {sp.src.dtype}")
        if sp.cols * DTYPES[sp.src.dtype] // 8 != SWIZZLE_BYTES:
            raise GpuLoweringError(f"TMA: a 128-byte-swizzled box row must be 128 bytes, not "
                                   f"{sp.cols} x {sp.src.dtype}")
        if not 0 < sp.rows <= 256:
            raise GpuLoweringError(f"TMA: box of {sp.rows} rows (1 .. 256)")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"tma.load({_ref(nm, self.dst, r, self.dst_index)}, "
                f"{nm(self.spec.src, self.spec.src.name)}[{r(self.row)}:+{self.spec.rows}, "
                f"{r(self.col)}:+{self.spec.cols}] via map {self.map_index}, "
                f"{_ref(nm, self.bar, r, (self.bar_index,))})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (*self.dst_index, self.row, self.col, self.bar_index)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.dst, self.maps, self.bar)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        tmap = f"&{rd.name(self.maps)}[{16 * self.map_index}]"  # 128-byte CUtensorMap
        ins = (f'"r"({_smem_addr(rd, self.dst, self.dst_index)}), "l"({tmap}), '
               f'"r"({rd.expr(self.col)}), "r"({rd.expr(self.row)}), '
               f'"r"({_smem_addr(rd, self.bar, (self.bar_index,))})')
        if self.multicast:
            return [_asm(ind, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                              "complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], "
                              "[%4], %5;", "", f'{ins}, "h"((unsigned short){self.multicast})')]
        return [_asm(ind, "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::"
                          "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];", "", ins)]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        dfi = em.flat_index(self.dst, self.dst_index)
        rf, cf, bf = em.expr(self.row), em.expr(self.col), em.expr(self.bar_index)
        sp, dst = self.spec, self.dst
        item = DTYPES[dst.dtype] // 8
        R, C = sp.rows, sp.cols
        rr, cc = np.meshgrid(np.arange(R), np.arange(C), indexing="ij")
        box_elems = swizzle128(rr * SWIZZLE_BYTES + cc * item) // item  # (R, C)
        M, K = sp.src.shape
        mcast = self.multicast

        def run(ctx: _Ctx, m: Any) -> None:
            lanes = _lanes(ctx, m)
            if not lanes.size:
                return
            st, blk, idx = _bar_index(em, ctx, self.bar, bf, m, lanes, "TMA")
            d = _per_lane(ctx, dfi(ctx, m), lanes)
            r0 = _per_lane(ctx, rf(ctx, m), lanes)
            c0 = _per_lane(ctx, cf(ctx, m), lanes)
            if np.any((d * item) % ATOM_BYTES):
                raise _emu_error(em, f"TMA into {dst.name}: the box must start on a "
                                     f"{ATOM_BYTES}-byte boundary (128-byte swizzle)")
            if d.min() < 0 or d.max() + R * C > dst.size:
                raise _emu_error(em, f"TMA: box of {R}x{C} out of bounds of {dst.name} "
                                     f"{dst.shape}")
            src = em.storage(ctx, sp.src)
            store = em.storage(ctx, dst)
            fl = ctx.inflight.setdefault(dst, np.zeros(store.size, np.int16))
            reading = _wgmma_state(ctx)["reading"].get(dst)
            ranks = [c for c in range(16) if mcast >> c & 1]
            if ranks and ranks[-1] >= em.cluster:
                raise _emu_error(em, f"TMA multicast mask {mcast:#x} names blocks outside the "
                                     f"cluster of {em.cluster}")
            for k in range(lanes.size):
                rows, cols = r0[k] + rr, c0[k] + cc
                ok = (rows >= 0) & (rows < M) & (cols >= 0) & (cols < K)
                vals = np.zeros((R, C), store.dtype)
                vals[ok] = src[rows[ok] * K + cols[ok]]
                targets = [int(blk[k])] if not ranks else _peer_blocks(
                    em, ctx, np.full(len(ranks), blk[k]), np.array(ranks), "TMA").tolist()
                i = int(idx[k])
                for b in targets:
                    if not st.live[b, i]:
                        raise _emu_error(em, f"TMA multicast into a block before its "
                                             f"mbarrier.init of {self.bar.name} (no cluster "
                                             f"sync?)")
                    where = b * dst.size + d[k] + box_elems
                    if np.any(fl[where] > 0):
                        raise EmulatorRaceError(f"{em.func.name}: TMA into {dst.name} over a "
                                                f"copy still in flight (no completed mbarrier "
                                                f"wait)")
                    if reading is not None and np.any(reading[where] > 0):
                        raise EmulatorRaceError(f"{em.func.name}: TMA into {dst.name} over data "
                                                f"a wgmma still reads (missing "
                                                f"wgmma.wait_group before the stage was "
                                                f"released)")
                    store[where] = vals
                    fl[where] += 1
                    st.copies.append((b, i, int(st.phase[b, i]), dst, where.ravel()))
                    st.tx[b, i] -= sp.box_bytes  # complete_tx as the copy lands
                    st.settle(np.array([b]), np.array([i]))
            if em.profile is not None:
                em.profile.count("tma", lanes.size)
        return run


def encode_tensor_maps(specs: Sequence[TensorMapSpec], pointers: Sequence[int]) -> np.ndarray:
    """The kernel's ``maps`` argument: one 128-byte ``CUtensorMap`` per spec (an (n, 16) int64
    array) for the device matrices at ``pointers``, made by the driver's
    ``cuTensorMapEncodeTiled`` (libcuda, through ctypes: CuPy exposes no tensor-map call).
    Needs a CUDA driver; the emulator reads the specs instead and ignores the array."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as err:
        raise GpuUnavailableError(f"tensor maps need the CUDA driver (libcuda.so.1): {err}"
                                  ) from None
    fn = cuda.cuTensorMapEncodeTiled
    fn.restype = ctypes.c_int
    # CUtensorMap is 64-byte aligned in cuda.h: encode into an aligned view
    raw = np.zeros(len(specs) * 16 + 8, np.int64)
    skip = (-raw.ctypes.data % 64) // 8
    out = raw[skip:skip + len(specs) * 16].reshape(len(specs), 16)
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    for n, (sp, ptr) in enumerate(zip(specs, pointers, strict=True)):
        rows, cols = sp.src.shape
        item = DTYPES[sp.src.dtype] // 8
        if (cols * item) % 16 or ptr % 16:
            raise GpuLoweringError(f"TMA: rows of {sp.src.name} must be 16-byte aligned "
                                   f"({cols} x {sp.src.dtype})")
        dims, strides = (u64 * 2)(cols, rows), (u64 * 1)(cols * item)
        box, elem_strides = (u32 * 2)(sp.cols, sp.rows), (u32 * 2)(1, 1)
        rc = fn(ctypes.c_void_p(out[n].ctypes.data), ctypes.c_int(_TMA_DTYPE[item]),
                u32(2), ctypes.c_void_p(ptr), dims, strides, box, elem_strides,
                ctypes.c_int(0), ctypes.c_int(_TMA_SWIZZLE_128B),
                ctypes.c_int(_TMA_L2_PROMOTION_256B), ctypes.c_int(0))
        if rc != 0:
            raise GpuUnavailableError(f"cuTensorMapEncodeTiled failed for {sp.src.name} "
                                      f"({rows}x{cols}, box {sp.rows}x{sp.cols}): CUresult {rc}")
    return np.ascontiguousarray(out)


# ---------------------------------------------------------------------------- wgmma


@dataclass(frozen=True, slots=True)
class WgmmaFence(Stmt):
    """``wgmma.fence.sync.aligned``: order the warpgroup's register and shared accesses before
    the ``wgmma`` that follow."""

    def render(self, r: Render, nm: Any) -> list[str]:
        return ["wgmma.fence()"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "wgmma.fence.sync.aligned;", "", "")]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        def run(ctx: _Ctx, m: Any) -> None:
            _warpgroups(em, ctx, m, "wgmma.fence")
        return run


@dataclass(frozen=True, slots=True)
class WgmmaCommit(Stmt):
    """``wgmma.commit_group.sync.aligned``: the warpgroup's uncommitted ``wgmma`` form a group."""

    def render(self, r: Render, nm: Any) -> list[str]:
        return ["wgmma.commit_group()"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "wgmma.commit_group.sync.aligned;", "", "")]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        def run(ctx: _Ctx, m: Any) -> None:
            groups = _warpgroups(em, ctx, m, "wgmma.commit_group")
            _wgmma_state(ctx)["open"][groups] += 1
        return run


@dataclass(frozen=True, slots=True)
class WgmmaWait(Stmt):
    """``wgmma.wait_group.sync.aligned n``: wait until at most ``n`` of the warpgroup's
    committed groups are pending. ``acc`` (the accumulators, when given) are pinned after the
    wait (an empty ``asm`` reading and writing each: the compiler may not move their uses
    above it, as CUTLASS's ``warpgroup_fence_operand``)."""

    n: int
    acc: Buffer | None = None

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"wgmma.wait_group({self.n})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.acc,) if self.acc is not None else ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        out = [_asm(ind, f"wgmma.wait_group.sync.aligned {self.n};", "", "")]
        if self.acc is not None:
            cons = "f" if self.acc.dtype == "float32" else "r"
            regs = _regs(rd, self.acc, tuple(E.IntImm(0) for _ in self.acc.shape),
                         self.acc.size)
            out += [f'{"  " * ind}asm volatile("" : "+{cons}"({x}) :: "memory");' for x in regs]
        return out

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        keep = self.n

        def run(ctx: _Ctx, m: Any) -> None:
            groups = _warpgroups(em, ctx, m, "wgmma.wait_group")
            st = _wgmma_state(ctx)
            waiting = np.zeros(st["open"].size, bool)
            waiting[groups] = True
            rest = []
            for wg, group, buf, where in st["pending"]:
                done = waiting[wg] & (group < st["open"][wg] - keep)
                if done.any():
                    np.subtract.at(st["reading"][buf], where[done], 1)
                if not done.all():
                    nd = ~done
                    rest.append((wg[nd], group[nd], buf, where[nd]))
            st["pending"] = rest
        return run


@dataclass(frozen=True, slots=True)
class Wgmma(Stmt):
    """``wgmma.mma_async`` m64 x ``n`` x ``shape.k`` for one warpgroup: the accumulators
    ``acc[acc_index ...]`` (``n / 2`` registers a thread, fragment of ``wgmma_fragment``) +=
    A B^T, A the 64 x k tile whose first element is ``a[a_index]`` and B the n x k tile at
    ``b[b_index]``, both K-major with the 128-byte swizzle (rows 128 bytes apart, 8-row groups
    1024 bytes apart)."""

    shape: WgmmaShape
    n: int
    acc: Buffer
    acc_index: tuple[E.Expr, ...]
    a: Buffer
    a_index: tuple[E.Expr, ...]
    b: Buffer
    b_index: tuple[E.Expr, ...]

    def __post_init__(self) -> None:
        if self.n not in WGMMA_N:
            raise GpuLoweringError(f"wgmma: n={self.n} must be a multiple of 16 up to 256")
        _check_scope(self.acc, "local", "wgmma accumulator")
        if self.acc.dtype != self.shape.acc_dtype:
            raise GpuLoweringError(f"wgmma {self.shape.operand}: accumulators {self.acc.name} "
                                   f"must be {self.shape.acc_dtype}, not {self.acc.dtype}")
        for buf in (self.a, self.b):
            _check_scope(buf, "shared", "wgmma operand")
            if buf.dtype != self.shape.buf_dtype:
                raise GpuLoweringError(f"wgmma {self.shape.operand}: {buf.name} must be "
                                       f"{self.shape.buf_dtype}, not {buf.dtype}")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"wgmma.m64n{self.n}k{self.shape.k}.{self.shape.operand}("
                f"{_ref(nm, self.acc, r, self.acc_index)}, {_ref(nm, self.a, r, self.a_index)}, "
                f"{_ref(nm, self.b, r, self.b_index)})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (*self.acc_index, *self.a_index, *self.b_index)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.acc, self.a, self.b)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        nreg = self.n // 2
        cons = "f" if self.shape.acc_dtype == "float32" else "r"
        d = _regs(rd, self.acc, self.acc_index, nreg)
        pad = "  " * ind

        def desc(b: Buffer, idx: tuple[E.Expr, ...]) -> str:
            return (f"((unsigned long long)(({_smem_addr(rd, b, idx)} & 0x3FFFFu) >> 4) | "
                    f"(1ull << 16) | ({ATOM_BYTES >> 4}ull << 32) | "
                    f"({_DESC_SWIZZLE_128B}ull << 62))")

        regs = ", ".join(f"%{i}" for i in range(nreg))
        tail = ", p, 1, 1, 0, 0;" if self.shape.acc_dtype == "float32" else ", p;"
        text = (f"{{\\n .reg .pred p;\\n setp.ne.b32 p, %{nreg + 2}, 0;\\n "
                f"{self.shape.ptx(self.n)} {{{regs}}}, %{nreg}, %{nreg + 1}{tail}\\n}}\\n")
        outs = ", ".join(f'"+{cons}"({x})' for x in d)
        return [f"{pad}{{",
                f"{pad}  const unsigned long long vta_da = {desc(self.a, self.a_index)};",
                f"{pad}  const unsigned long long vta_db = {desc(self.b, self.b_index)};",
                f'{pad}  asm volatile("{text}" : {outs} : "l"(vta_da), "l"(vta_db), "r"(1));',
                f"{pad}}}"]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        sh, n = self.shape, self.n
        fa, fb = em.flat_index(self.a, self.a_index), em.flat_index(self.b, self.b_index)
        facc = [em.expr(i) for i in self.acc_index]
        item = sh.item
        kb = sh.k * item  # bytes of K per instruction: 32
        rows_a = np.arange(64)[:, None]
        rows_b = np.arange(n)[:, None]
        kk = np.arange(kb // item)[None, :] * item
        # logical byte offsets in a K-major swizzled tile (8-row groups 1024 bytes apart)
        off_a = (rows_a // 8) * ATOM_BYTES + (rows_a % 8) * SWIZZLE_BYTES + kk
        off_b = (rows_b // 8) * ATOM_BYTES + (rows_b % 8) * SWIZZLE_BYTES + kk
        fr, fc = wgmma_fragment(n)
        np_in = {"float16": np.float16, "int16": np.int16, "int8": np.int8}[sh.buf_dtype]
        exact_int = sh.acc_dtype == "int32"

        def operand(ctx: _Ctx, buf: Buffer, start: np.ndarray, off: np.ndarray,
                    groups: np.ndarray, st: dict[str, Any]) -> np.ndarray:
            sb = start * item
            if np.any(sb % 16) or np.any((sb % ATOM_BYTES) >= SWIZZLE_BYTES):
                raise _emu_error(em, f"wgmma: descriptor start in {buf.name} must be 16-byte "
                                     f"aligned within the first row of a {ATOM_BYTES}-byte "
                                     f"swizzle atom")
            phys = swizzle128(sb[:, None, None] + off[None]) // item  # (G, rows, k)
            if phys.min() < 0 or phys.max() >= buf.size:
                raise _emu_error(em, f"wgmma: operand tile out of bounds of {buf.name} "
                                     f"{buf.shape}")
            blk = (groups * WARPGROUP) // ctx.T
            where = blk[:, None, None] * buf.size + phys
            fl = ctx.inflight.get(buf)
            if fl is not None and np.any(fl[where] > 0):
                raise EmulatorRaceError(f"{em.func.name}: wgmma reads {buf.name} before the "
                                        f"copy into it completed (no completed mbarrier wait "
                                        f"on its phase)")
            rd = st["reading"].setdefault(buf, np.zeros(em.storage(ctx, buf).size, np.int32))
            flat = where.ravel()
            np.add.at(rd, flat, 1)
            st["pending"].append((np.repeat(groups, where[0].size),
                                  np.repeat(st["open"][groups], where[0].size), buf, flat))
            raw = em.storage(ctx, buf)[where]
            if sh.operand == "bfloat16":
                return (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
            return raw.view(np_in)

        def run(ctx: _Ctx, m: Any) -> None:
            groups = _warpgroups(em, ctx, m, "wgmma")
            if not groups.size:
                return
            st = _wgmma_state(ctx)
            sa = _uniform(em, ctx, fa(ctx, m), groups, "wgmma")
            sb_ = _uniform(em, ctx, fb(ctx, m), groups, "wgmma")
            A = operand(ctx, self.a, sa, off_a, groups, st).astype(np.float64)
            B = operand(ctx, self.b, sb_, off_b, groups, st).astype(np.float64)
            warps = (groups[:, None] * 4 + np.arange(4)).ravel()
            regs = _lane_regs(em, ctx, m, self.acc, facc, n // 2, warps, "wgmma")
            regs = regs.reshape(groups.size, WARPGROUP, n // 2)
            cv = em.storage(ctx, self.acc)[regs]
            prod = np.matmul(A, B.transpose(0, 2, 1))  # exact: <= 32 products per element
            if exact_int:
                C = np.zeros((groups.size, 64, n), np.int64)
                C[:, fr, fc] = cv
                D = (prod.astype(np.int64) + C).astype(np.int32)  # s32 accumulation wraps
            else:
                C64 = np.zeros((groups.size, 64, n), np.float64)
                C64[:, fr, fc] = cv
                D = (prod + C64).astype(np.float32)
            em.storage(ctx, self.acc)[regs] = D[:, fr, fc]
            if em.profile is not None:
                em.profile.count("wgmma", groups.size)
        return run


# ---------------------------------------------------------------------------- warp specialisation


#: register budgets of a warp-specialised kernel (CUTLASS's sm90 values): the producer
#: warpgroup, which only issues TMA, gives its registers back; the consumer warpgroups, which
#: hold the accumulators, take them (``setmaxnreg``: a multiple of 8 in 24 .. 256)
PRODUCER_REGISTERS = 40
CONSUMER_REGISTERS = 232


@dataclass(frozen=True, slots=True)
class SetMaxNReg(Stmt):
    """``setmaxnreg.{inc,dec}.sync.aligned.u32 regs``: the executing warpgroup's threads
    release (``dec``) or request (``inc``) registers so each has ``regs`` (PTX ISA 9.7.17.1);
    a warp-specialised kernel moves the producer's registers to the consumers. The kernel must
    be compiled for one block an SM at most (``__launch_bounds__(threads, 1)``: the renderer
    adds it) so ptxas knows the pool. The emulator has no register file: it checks that whole
    warpgroups execute it."""

    regs: int
    inc: bool

    def __post_init__(self) -> None:
        if not 24 <= self.regs <= 256 or self.regs % 8:
            raise GpuLoweringError(f"setmaxnreg: {self.regs} registers must be a multiple of "
                                   f"8 in 24 .. 256")

    @property
    def op(self) -> str:
        return "inc" if self.inc else "dec"

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"setmaxnreg.{self.op}({self.regs})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, f"setmaxnreg.{self.op}.sync.aligned.u32 {self.regs};", "", "", "")]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        def run(ctx: _Ctx, m: Any) -> None:
            _warpgroups(em, ctx, m, f"setmaxnreg.{self.op}")
        return run



# ---------------------------------------------------------------------------- clusters


@dataclass(frozen=True, slots=True)
class ClusterSync(Stmt):
    """``barrier.cluster.arrive.aligned`` + ``barrier.cluster.wait.aligned``: every thread of
    every block of the thread-block cluster arrives, then waits for all (PTX ISA 9.7.12.3): a
    peer block's barriers are initialised before this block arrives on them or multicasts into
    them, and no block exits while a peer may still write its shared memory. The emulator runs
    a batch's blocks (whole clusters) in lockstep: it checks that every thread executes it."""

    def render(self, r: Render, nm: Any) -> list[str]:
        return ["barrier.cluster.sync()"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "barrier.cluster.arrive.aligned;\\n barrier.cluster.wait.aligned;",
                     "", "")]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        def run(ctx: _Ctx, m: Any) -> None:
            if m is not None and not m.all():
                raise _emu_error(em, "barrier.cluster reached by only some threads")
        return run


@dataclass(frozen=True, slots=True)
class FenceMbarrierInit(Stmt):
    """``fence.mbarrier_init.release.cluster``: the executing thread's ``mbarrier.init`` are
    visible to the cluster's other blocks (before the ``ClusterSync`` that publishes them)."""

    def render(self, r: Render, nm: Any) -> list[str]:
        return ["fence.mbarrier_init.release.cluster()"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return [_asm(ind, "fence.mbarrier_init.release.cluster;", "", "")]

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        return lambda ctx, m: None  # the emulator's shared memory has one proxy and no delay

#: the statements of this module (the dialect's sm_90a part)
HOPPER_STMTS = (MbarrierInit, MbarrierArrive, MbarrierExpectTx, MbarrierWait, FenceProxyAsync,
                SmemAlignCheck, TensorMapAcquire, TmaLoad, WgmmaFence, WgmmaCommit, WgmmaWait,
                Wgmma, SetMaxNReg, ClusterSync, FenceMbarrierInit)


def _sm90(name: str, stmt: Any, warp_wide: bool = False,
          shapes: tuple[tuple[int, int, int], ...] = (),
          dtypes: tuple[tuple[str, str], ...] = ()) -> GpuIntrinsic:
    """Register one statement of this module as a GPU intrinsic (its ``_render`` and
    ``_emulate`` rules, which count their own profile events). What it writes: the first of its
    buffers, where it has any (the barrier, the shared tile, the accumulator)."""
    return register_gpu_intrinsic(GpuIntrinsic(
        name, stmt, stmt._render, stmt._emulate, shapes=shapes, dtypes=dtypes,
        warp_wide=warp_wide, writes=lambda s: s.buffers()[:1]), replace_existing=True)


#: the GPU intrinsics of this module: the mbarrier operations, fences and the tensor-map copy
#: (per thread), and the warpgroup's wgmma with its fence, commit and wait (whole warps)
HOPPER_INTRINSICS: tuple[GpuIntrinsic, ...] = (
    _sm90("mbarrier.init", MbarrierInit),
    _sm90("mbarrier.arrive", MbarrierArrive),
    _sm90("mbarrier.expect_tx", MbarrierExpectTx),
    _sm90("mbarrier.try_wait.parity", MbarrierWait),
    _sm90("fence.proxy.async", FenceProxyAsync),
    _sm90("smem.align_check", SmemAlignCheck),
    _sm90("fence.proxy.tensormap.acquire", TensorMapAcquire),
    _sm90("cp.async.bulk.tensor.2d", TmaLoad),
    _sm90("wgmma.fence", WgmmaFence, warp_wide=True),
    _sm90("wgmma.commit_group", WgmmaCommit, warp_wide=True),
    _sm90("wgmma.wait_group", WgmmaWait, warp_wide=True),
    _sm90("wgmma.mma_async", Wgmma, warp_wide=True),
    _sm90("setmaxnreg", SetMaxNReg, warp_wide=True),
    _sm90("barrier.cluster", ClusterSync, warp_wide=True),
    _sm90("fence.mbarrier_init", FenceMbarrierInit),
)
