"""Warp-level PTX statements of the GPU dialect: ``cp.async``, ``ldmatrix`` and ``mma.sync``.

Each statement is a frozen dataclass of the loop-nest IR (docs/ir.md, "target dialects") that
prints itself (``render``) and exposes its expressions and buffers to the verifier. Each is a
GPU intrinsic (``vta.gpu.intrinsic.GpuIntrinsic``, registered at the end of this module): its
render rule (``_render``: inline PTX) and emulate rule (``_emulate``: a closure for the SIMT
emulator) enter the renderer's and the emulator's tables with its shapes and dtypes. The
semantics follow the PTX ISA (version 8.x, sections 9.7.9.25 ``cp.async``, 9.7.14.5.15
``ldmatrix``, 9.7.14.5.8-10 the ``mma`` fragment layouts):

- ``CpAsync``: each thread copies 4, 8 or 16 bytes from global to shared memory asynchronously
  (``cp.async.ca`` / ``.cg`` for 16); where ``valid`` is false it reads nothing and writes
  zeros (the ``src-size`` operand 0). ``CpAsyncCommit`` closes the thread's current group;
  ``CpAsyncWait(n)`` waits until at most ``n`` of the thread's committed groups are pending.
  The emulator copies at issue but marks the destination *in flight* until the wait that
  completes its group: any access to it before then is an ``EmulatorRaceError`` (so is a read
  by another thread without a barrier after the wait).
- ``LdMatrix``: ``num`` (1, 2, 4) 8x8 matrices of 16-bit elements from shared memory; lanes
  ``8i..8i+7`` give the 16-byte-aligned addresses of matrix ``i``'s rows; lane ``t`` receives in
  register ``i`` the elements ``(t // 4, 2 (t % 4))`` and ``(t // 4, 2 (t % 4) + 1)`` of matrix
  ``i`` (``.trans``: of its transpose), the first in the low half. For int8 data a 16-bit element
  is a pair of bytes, which is exactly the ``mma`` int8 fragment layout.
- ``MmaSync``: ``D = A B + C`` for one warp, ``m16n8k16`` (f16 x f16 -> f32) or ``m16n8k32``
  (s8 x s8 -> s32, wrapping), A row-major and B column-major, each thread holding the
  fragment elements given by ``FRAGMENTS`` (PTX ISA: ``groupID = lane >> 2``,
  ``threadID_in_group = lane % 4``). The int8 product is exact; the fp16 product accumulates
  exactly (float64) and rounds once to float32 per instruction.

CUDA: inline PTX. ``cp.async`` and ``ldmatrix`` carry no memory clobber (as in CUTLASS): the
barriers and ``wait_group`` (which has one) order them against ordinary shared accesses.

Operand registers live in ``local`` buffers: A/B fragments as ``uint32`` words (packed pairs
of f16 or quadruples of s8, low element first), accumulators as ``int32``/``float32``. An
operand's registers are the consecutive elements starting at its index.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir.expr import DTYPES
from vta.compiler.ir.stmt import Buffer, Stmt
from vta.errors import EmulatorError, GpuLoweringError
from vta.gpu.dialect import flat_index
from vta.gpu.intrinsic import GpuIntrinsic, register_gpu_intrinsic
from vta.gpu.target import WARP_LANES

if TYPE_CHECKING:
    from vta.gpu.cuda import _Renderer
    from vta.gpu.emulator import Emulator, _Ctx

__all__ = ["MmaShape", "MMA_SHAPES", "FRAGMENTS", "CpAsync", "CpAsyncCommit", "CpAsyncWait",
           "LdMatrix", "MmaSync", "bitxor", "PTX_STMTS", "PTX_INTRINSICS"]


# ---------------------------------------------------------------------------- fragment layouts


@dataclass(frozen=True)
class MmaShape:
    """One ``mma.sync`` variant: shape, operand types, registers per thread and the PTX name."""

    name: str
    m: int
    n: int
    k: int
    in_dtype: str
    acc_dtype: str
    a_regs: int
    b_regs: int
    ptx: str

    @property
    def per_reg(self) -> int:
        """Input elements per 32-bit register."""
        return 32 // DTYPES[self.in_dtype]


MMA_SHAPES: dict[str, MmaShape] = {
    "float16": MmaShape("m16n8k16", 16, 8, 16, "float16", "float32", 4, 2,
                        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"),
    "int8": MmaShape("m16n8k32", 16, 8, 32, "int8", "int32", 4, 2,
                     "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"),
}


def _layout(shape: MmaShape, operand: str) -> tuple[np.ndarray, np.ndarray]:
    """(row, col) of fragment element ``i`` held by lane ``t``, as two (lanes, elems) arrays, from
    the PTX ISA's formulas for the operand ("a", "b" or "c")."""
    t = np.arange(WARP_LANES)[:, None]
    g, q = t >> 2, t % 4
    if operand == "c":  # accumulators of both shapes: c0, c1 row g; c2, c3 row g + 8
        i = np.arange(4)[None, :]
        return g + 8 * (i // 2), q * 2 + (i & 1)
    if shape.in_dtype == "float16":
        if operand == "a":  # a0..a7: rows g, g, g+8, g+8, g, g, g+8, g+8; cols 2q (+1) (+8)
            i = np.arange(8)[None, :]
            return g + 8 * ((i // 2) % 2), q * 2 + (i & 1) + 8 * (i // 4)
        i = np.arange(4)[None, :]  # b0..b3: rows 2q (+1) (+8), col g
        return q * 2 + (i & 1) + 8 * (i // 2), np.broadcast_to(g, (WARP_LANES, 4))
    if operand == "a":  # int8 a0..a15: rows g (a0-3, a8-11), g + 8; cols 4q + (i & 3) (+16)
        i = np.arange(16)[None, :]
        return g + 8 * ((i // 4) % 2), q * 4 + (i & 3) + 16 * (i // 8)
    i = np.arange(8)[None, :]  # b0..b7: rows 4q + (i & 3) (+16), col g
    return q * 4 + (i & 3) + 16 * (i // 4), np.broadcast_to(g, (WARP_LANES, 8))


#: per shape and operand, (row, col) of each lane's fragment elements (see ``_layout``)
FRAGMENTS: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] = {
    (dt, op): _layout(sh, op) for dt, sh in MMA_SHAPES.items() for op in "abc"}


def bitxor(a: E.ExprLike, b: E.ExprLike) -> E.Expr:
    """Integer ``a ^ b`` (a typed ``BitXor`` node, not folded: the swizzle stays visible)."""
    return E.BitXor(E.as_expr(a), E.as_expr(b), "int32")


# ---------------------------------------------------------------------------- helpers

Render = Callable[[Any], str]


def _idx(r: Render, idx: tuple[E.Expr, ...]) -> str:
    return ", ".join(r(i) for i in idx)


def _regs(rd: _Renderer, b: Buffer, idx: tuple[E.Expr, ...], n: int) -> list[str]:
    """C lvalues of ``n`` consecutive registers of ``b`` starting at ``idx``."""
    flat = flat_index(b, idx)
    return [f"{rd.name(b)}[{rd.expr(flat + i)}]" for i in range(n)]


def _smem_addr(rd: _Renderer, b: Buffer, idx: tuple[E.Expr, ...]) -> str:
    return (f"(unsigned)__cvta_generic_to_shared(&{rd.name(b)}"
            f"[{rd.expr(flat_index(b, idx))}])")


def _lowering_error(msg: str) -> Exception:
    """A statement built wrongly: a ``GpuLoweringError`` (a ``VtaError``) naming it."""
    return GpuLoweringError(msg)


def _check_scope(b: Buffer, scope: str, what: str) -> None:
    if b.scope != scope:
        raise _lowering_error(f"{what}: {b.name} must be in {scope} memory, not {b.scope}")


def _lane_regs(em: Emulator, ctx: _Ctx, m: Any, b: Buffer, fns: list[Any], n: int,
               warps: np.ndarray, what: str) -> np.ndarray:
    """Storage indices (warps, lanes, n) of each lane's ``n`` consecutive registers of ``b``."""
    flat: Any = 0
    for fn, d in zip(fns, b.shape, strict=True):
        flat = flat * d + fn(ctx, m)
    flat = np.broadcast_to(np.asarray(flat, np.int64), (ctx.L,))
    if flat.size and (flat.min() < 0 or flat.max() + n > b.size):
        raise _emu_error(em, f"{what}: registers {b.name}[{int(flat.min())}..+{n}] out of "
                             f"bounds for shape {b.shape}")
    lanes = warps[:, None] * ctx.W + np.arange(ctx.W)
    base = ctx.base("local", b.size)[lanes] + flat[lanes]
    return base[:, :, None] + np.arange(n)


def _emu_error(em: Emulator, msg: str) -> Exception:
    return EmulatorError(f"{em.func.name}: {msg}")


def _whole_warps(em: Emulator, ctx: _Ctx, m: Any, what: str) -> np.ndarray:
    if ctx.T % ctx.W:
        raise _emu_error(em, f"{what} needs whole warps, but a block has {ctx.T} threads")
    return em.active_warps(ctx, m, what)


# ---------------------------------------------------------------------------- cp.async


@dataclass(frozen=True, slots=True)
class CpAsync(Stmt):
    """``cp.async``: this thread copies ``nbytes`` (4, 8, 16) bytes from ``src[src_index]``
    (global) to ``dst[dst_index]`` (shared) asynchronously; zeros where ``valid`` is false."""

    dst: Buffer
    dst_index: tuple[E.Expr, ...]
    src: Buffer
    src_index: tuple[E.Expr, ...]
    nbytes: int
    valid: E.Expr | None = None

    def __post_init__(self) -> None:
        if self.nbytes not in (4, 8, 16):
            raise _lowering_error(f"cp.async copies 4, 8 or 16 bytes, not {self.nbytes}")
        _check_scope(self.dst, "shared", "cp.async destination")
        _check_scope(self.src, "global", "cp.async source")
        if self.nbytes % (DTYPES[self.dst.dtype] // 8):
            raise _lowering_error(f"cp.async: {self.nbytes} bytes is not whole {self.dst.dtype}s")

    @property
    def elems(self) -> int:
        return self.nbytes // (DTYPES[self.dst.dtype] // 8)

    def render(self, r: Render, nm: Any) -> list[str]:
        guard = f" if {r(self.valid)} else zeros" if self.valid is not None else ""
        return [f"cp.async({nm(self.dst, self.dst.name)}[{_idx(r, self.dst_index)}], "
                f"{nm(self.src, self.src.name)}[{_idx(r, self.src_index)}], "
                f"{self.nbytes} B{guard})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (*self.dst_index, *self.src_index,
                *((self.valid,) if self.valid is not None else ()))

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.dst, self.src)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        pad = "  " * ind
        src = f"&{rd.name(self.src)}[{rd.expr(flat_index(self.src, self.src_index))}]"
        size = str(self.nbytes)
        if self.valid is not None:  # nothing is read where invalid: point at the buffer start
            cond = rd.expr(self.valid)
            src = f"({cond} ? {src} : {rd.name(self.src)})"
            size = f"({cond} ? {self.nbytes} : 0)"
        op = "cp.async.cg.shared.global" if self.nbytes == 16 else "cp.async.ca.shared.global"
        return [f'{pad}asm volatile("{op} [%0], [%1], {self.nbytes}, %2;\\n" :: '
                f'"r"({_smem_addr(rd, self.dst, self.dst_index)}), "l"({src}), "r"({size}));']

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        dfi, sfi = em.flat_index(self.dst, self.dst_index), em.flat_index(self.src,
                                                                             self.src_index)
        vfn = em.expr(self.valid) if self.valid is not None else None
        n, dst, src = self.elems, self.dst, self.src

        def run(ctx: _Ctx, m: Any) -> None:
            lanes = np.arange(ctx.L) if m is None else np.nonzero(m)[0]
            if not lanes.size:
                return
            ok = np.ones(lanes.size, bool)
            if vfn is not None:
                ok = np.broadcast_to(np.asarray(vfn(ctx, m), bool), (ctx.L,))[lanes]
            d = np.broadcast_to(np.asarray(dfi(ctx, m), np.int64), (ctx.L,))[lanes]
            sidx = np.broadcast_to(np.asarray(sfi(ctx, m), np.int64), (ctx.L,))[lanes]
            if np.any(d % n) or np.any(sidx[ok] % n):
                raise _emu_error(em, f"cp.async of {self.nbytes} B: address not aligned to "
                                     f"{self.nbytes} bytes in {dst.name} or {src.name}")
            if d.size and (d.min() < 0 or d.max() + n > dst.size):
                raise _emu_error(em, f"cp.async: {dst.name} index out of bounds for shape "
                                     f"{dst.shape}")
            if ok.any() and (sidx[ok].min() < 0 or sidx[ok].max() + n > src.size):
                raise _emu_error(em, f"cp.async: {src.name} index out of bounds for shape "
                                     f"{src.shape}")
            where = (ctx.base("shared", dst.size)[lanes] + d)[:, None] + np.arange(n)
            vals = np.zeros((lanes.size, n), em.storage(ctx, dst).dtype)
            if ok.any():
                vals[ok] = em.storage(ctx, src)[sidx[ok][:, None] + np.arange(n)]
            tid = ctx.tid[lanes]
            if em.check_races:
                t2 = np.broadcast_to(tid[:, None], where.shape)
                em.check_write(ctx, dst, where, t2, t2, t2)
            if ctx.inflight.get(dst) is not None and np.any(ctx.inflight[dst][where] > 0):
                raise _emu_error(em, f"cp.async into {dst.name} over a cp.async still in "
                                     f"flight")
            em.storage(ctx, dst)[where] = vals
            st = _groups(ctx)
            fl = ctx.inflight.setdefault(dst, np.zeros(em.storage(ctx, dst).size, np.int16))
            fl[where] += 1
            st["pending"].append((dst, where, lanes, st["open"][lanes].copy()))
            prof = em.profile
            if prof is not None:
                full = np.full(ctx.L, -1, np.int64)
                full[lanes[ok]] = sidx[ok]
                mk = full >= 0
                em.observe(ctx, src, np.maximum(full, 0), mk, self.nbytes, False, "cp.async")
                dfull = np.zeros(ctx.L, np.int64)
                dfull[lanes] = ctx.base("shared", dst.size)[lanes] + d
                act = np.zeros(ctx.L, bool)
                act[lanes] = True
                em.observe(ctx, dst, dfull, act, self.nbytes, True, "")  # same instruction
        return run


def _groups(ctx: _Ctx) -> dict[str, Any]:
    """Per-lane cp.async bookkeeping of a batch: the open group's number and the copies."""
    st: dict[str, Any] | None = ctx.dialect.get("cp.async")
    if st is None:
        st = ctx.dialect["cp.async"] = {"open": np.zeros(ctx.L, np.int64), "pending": []}
    return st


@dataclass(frozen=True, slots=True)
class CpAsyncCommit(Stmt):
    """``cp.async.commit_group``: the thread's copies issued since the last commit form a group."""

    def render(self, r: Render, nm: Any) -> list[str]:
        return ["cp.async.commit_group()"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return ["  " * ind + 'asm volatile("cp.async.commit_group;\\n" ::: "memory");']

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        def run(ctx: _Ctx, m: Any) -> None:
            st = _groups(ctx)
            if m is None:
                st["open"] += 1
            else:
                st["open"][m] += 1
            if em.profile is not None:
                em.profile.count("cp.async.commit", ctx.warps(m))
                em.profile.close_interval()  # a group is one stage's tiles
        return run


@dataclass(frozen=True, slots=True)
class CpAsyncWait(Stmt):
    """``cp.async.wait_group n``: wait until at most ``n`` of the thread's committed groups are
    still pending (``n = 0``: all of them)."""

    n: int

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"cp.async.wait_group({self.n})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return ()

    def buffers(self) -> tuple[Buffer, ...]:
        return ()

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        return ["  " * ind + f'asm volatile("cp.async.wait_group {self.n};\\n" ::: "memory");']

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        keep = self.n

        def run(ctx: _Ctx, m: Any) -> None:
            st = _groups(ctx)
            waiting = np.ones(ctx.L, bool) if m is None else m
            rest = []
            for dst, where, lanes, group in st["pending"]:
                # complete: committed groups older than the newest ``keep`` ones
                done = waiting[lanes] & (group < st["open"][lanes] - keep)
                if done.any():
                    np.subtract.at(ctx.inflight[dst], where[done].ravel(), 1)
                if not done.all():
                    nd = ~done
                    rest.append((dst, where[nd], lanes[nd], group[nd]))
            st["pending"] = rest
            if em.profile is not None:
                em.profile.count("cp.async.wait", ctx.warps(m))
        return run


# ---------------------------------------------------------------------------- ldmatrix


@dataclass(frozen=True, slots=True)
class LdMatrix(Stmt):
    """``ldmatrix.sync.aligned.m8n8.x{num}[.trans].shared.b16``: this lane's row address is
    ``src[src_index]`` (used by lanes ``0 .. 8 num - 1``); the ``num`` result registers go to
    ``dst[dst_index ...]`` (a ``uint32`` local buffer)."""

    dst: Buffer
    dst_index: tuple[E.Expr, ...]
    src: Buffer
    src_index: tuple[E.Expr, ...]
    num: int = 4
    trans: bool = False

    def __post_init__(self) -> None:
        if self.num not in (1, 2, 4):
            raise _lowering_error(f"ldmatrix loads 1, 2 or 4 matrices, not {self.num}")
        _check_scope(self.src, "shared", "ldmatrix source")
        _check_scope(self.dst, "local", "ldmatrix destination")
        if self.dst.dtype != "uint32":
            raise _lowering_error(f"ldmatrix: registers {self.dst.name} must be uint32")

    @property
    def ptx(self) -> str:
        return (f"ldmatrix.sync.aligned.m8n8.x{self.num}{'.trans' if self.trans else ''}"
                f".shared.b16")

    def render(self, r: Render, nm: Any) -> list[str]:
        return [f"ldmatrix.x{self.num}{'.trans' if self.trans else ''}("
                f"{nm(self.dst, self.dst.name)}[{_idx(r, self.dst_index)}], "
                f"&{nm(self.src, self.src.name)}[{_idx(r, self.src_index)}])"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (*self.dst_index, *self.src_index)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.dst, self.src)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        regs = _regs(rd, self.dst, self.dst_index, self.num)
        outs = ", ".join(f'"=r"({x})' for x in regs)
        ops = ", ".join(f"%{i}" for i in range(self.num))
        return [f'{"  " * ind}asm volatile("{self.ptx} {{{ops}}}, [%{self.num}];\\n" : '
                f'{outs} : "r"({_smem_addr(rd, self.src, self.src_index)}));']

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        sfi = em.flat_index(self.src, self.src_index)
        dfns = [em.expr(i) for i in self.dst_index]
        src, num, trans = self.src, self.num, self.trans
        item = DTYPES[src.dtype] // 8

        def run(ctx: _Ctx, m: Any) -> None:
            warps = _whole_warps(em, ctx, m, "ldmatrix")
            if not warps.size:
                return
            lanes = warps[:, None] * ctx.W + np.arange(8 * num)  # the lanes giving addresses
            flat = np.broadcast_to(np.asarray(sfi(ctx, m), np.int64), (ctx.L,))[lanes]
            rows_bytes = 16 // item
            if np.any(flat * item % 16):
                raise _emu_error(em, f"ldmatrix: a row address in {src.name} is not 16-byte "
                                     f"aligned")
            if flat.min() < 0 or flat.max() + rows_bytes > src.size:
                raise _emu_error(em, f"ldmatrix: a row of {src.name} is out of bounds for "
                                     f"shape {src.shape}")
            where = ctx.base("shared", src.size)[lanes] + flat  # (W, 8 num) first elements
            elems = where[:, :, None] + np.arange(rows_bytes)
            if ctx.inflight:
                em.check_inflight(ctx, src, elems.ravel(), None, "ldmatrix reads")
            if em.check_races:
                _warp_read(em, ctx, src, elems, lanes)
            rows = em.storage(ctx, src).view(np.uint8).reshape(-1, item)[elems.reshape(-1)]
            rows = rows.reshape(len(warps), num, 8, 16)  # bytes of each matrix row
            h = rows.view(np.uint16).reshape(len(warps), num, 8, 8)  # b16 elements
            if trans:
                h = np.ascontiguousarray(h.transpose(0, 1, 3, 2))
            words = h.view(np.uint32).reshape(len(warps), num, 8, 4)  # [.., row g, pair q]
            regs = words.transpose(0, 2, 3, 1).reshape(len(warps), WARP_LANES, num)  # lane 4g + q
            dst = _lane_regs(em, ctx, m, self.dst, dfns, num, warps, "ldmatrix")
            em.storage(ctx, self.dst)[dst] = regs
            if em.profile is not None:
                full = np.zeros(ctx.L, np.int64)
                act = np.zeros(ctx.L, bool)
                for i in range(num):  # one 16-byte row address per lane, 8 lanes a matrix
                    li = lanes[:, 8 * i:8 * i + 8].ravel()
                    full[li] = where[:, 8 * i:8 * i + 8].ravel()
                    act[li] = True
                em.observe(ctx, src, full, act, 16, False, "ldmatrix")
        return run


def _warp_read(em: Emulator, ctx: _Ctx, b: Buffer, elems: np.ndarray, lanes: np.ndarray
               ) -> None:
    """Race-check a warp's read of shared elements (each attributed to the lane that gave the
    row address): data written by another thread since the last barrier is a race."""
    tid = np.broadcast_to(ctx.tid[lanes][:, :, None], elems.shape).ravel()
    em.check_read_lanes(ctx, b, elems.ravel(), tid)


# ---------------------------------------------------------------------------- mma.sync


@dataclass(frozen=True, slots=True)
class MmaSync(Stmt):
    """``mma.sync.aligned`` of ``shape`` for one warp: ``d = a b + c`` on register fragments
    (``a``, ``b``: ``uint32`` words; ``c``, ``d``: accumulators; see the module docstring)."""

    shape: MmaShape
    d: Buffer
    d_index: tuple[E.Expr, ...]
    a: Buffer
    a_index: tuple[E.Expr, ...]
    b: Buffer
    b_index: tuple[E.Expr, ...]
    c: Buffer
    c_index: tuple[E.Expr, ...]

    def __post_init__(self) -> None:
        for buf, dt in ((self.a, "uint32"), (self.b, "uint32"), (self.c, self.shape.acc_dtype),
                        (self.d, self.shape.acc_dtype)):
            _check_scope(buf, "local", "mma.sync operand")
            if buf.dtype != dt:
                raise _lowering_error(f"mma.sync {self.shape.name}: {buf.name} must be {dt}, not "
                                 f"{buf.dtype}")

    def render(self, r: Render, nm: Any) -> list[str]:
        def f(b: Buffer, i: tuple[E.Expr, ...]) -> str:
            return f"{nm(b, b.name)}[{_idx(r, i)}]"

        return [f"mma.{self.shape.name}.{self.shape.in_dtype}({f(self.d, self.d_index)}, "
                f"{f(self.a, self.a_index)}, {f(self.b, self.b_index)}, "
                f"{f(self.c, self.c_index)})"]

    def exprs(self) -> tuple[E.Expr, ...]:
        return (*self.d_index, *self.a_index, *self.b_index, *self.c_index)

    def buffers(self) -> tuple[Buffer, ...]:
        return (self.d, self.a, self.b, self.c)

    def _render(self, rd: _Renderer, ind: int) -> list[str]:
        sh = self.shape
        cons = "f" if sh.acc_dtype == "float32" else "r"
        d = _regs(rd, self.d, self.d_index, 4)
        a = _regs(rd, self.a, self.a_index, sh.a_regs)
        b = _regs(rd, self.b, self.b_index, sh.b_regs)
        c = _regs(rd, self.c, self.c_index, 4)
        inplace = d == c
        n_out = 4
        ops_a = ", ".join(f"%{n_out + i}" for i in range(sh.a_regs))
        ops_b = ", ".join(f"%{n_out + sh.a_regs + i}" for i in range(sh.b_regs))
        base_c = n_out + sh.a_regs + sh.b_regs
        ops_c = ", ".join(f"%{i}" for i in range(4)) if inplace else ", ".join(
            f"%{base_c + i}" for i in range(4))
        outs = ", ".join(f'"{"+" if inplace else "="}{cons}"({x})' for x in d)
        ins = [f'"r"({x})' for x in a + b] + ([] if inplace else [f'"{cons}"({x})' for x in c])
        return [f'{"  " * ind}asm volatile("{sh.ptx} {{%0, %1, %2, %3}}, {{{ops_a}}}, '
                f'{{{ops_b}}}, {{{ops_c}}};\\n" : {outs} : {", ".join(ins)});']

    def _emulate(self, em: Emulator) -> Callable[[_Ctx, Any], None]:
        sh = self.shape
        fns = {k: [em.expr(i) for i in getattr(self, f"{k}_index")] for k in "abcd"}
        ra, ca = FRAGMENTS[(sh.in_dtype, "a")]
        rb, cb = FRAGMENTS[(sh.in_dtype, "b")]
        rc, cc = FRAGMENTS[(sh.in_dtype, "c")]
        in_np = np.int8 if sh.in_dtype == "int8" else np.float16
        exact_int = sh.acc_dtype == "int32"

        def run(ctx: _Ctx, m: Any) -> None:
            warps = _whole_warps(em, ctx, m, "mma.sync")
            if not warps.size:
                return
            w = len(warps)
            regs = {k: _lane_regs(em, ctx, m, getattr(self, k), fns[k], n, warps, "mma.sync")
                    for k, n in (("a", sh.a_regs), ("b", sh.b_regs), ("c", 4), ("d", 4))}
            av = em.storage(ctx, self.a)[regs["a"]].astype(np.uint32).view(in_np)  # (w,lanes,e)
            bv = em.storage(ctx, self.b)[regs["b"]].astype(np.uint32).view(in_np)
            cv = em.storage(ctx, self.c)[regs["c"]]
            A = np.zeros((w, sh.m, sh.k), np.float64)
            B = np.zeros((w, sh.k, sh.n), np.float64)
            A[:, ra, ca] = av.reshape(w, WARP_LANES, -1)
            B[:, rb, cb] = bv.reshape(w, WARP_LANES, -1)
            prod = np.matmul(A, B)  # exact: integer or fp16 products, sums of <= 32 terms
            if exact_int:
                C = np.zeros((w, sh.m, sh.n), np.int64)
                C[:, rc, cc] = cv
                D = (prod.astype(np.int64) + C).astype(np.int32)  # s32 accumulation wraps
            else:
                C64 = np.zeros((w, sh.m, sh.n), np.float64)
                C64[:, rc, cc] = cv
                D = (prod + C64).astype(np.float32)
            em.storage(ctx, self.d)[regs["d"]] = D[:, rc, cc]
            if em.profile is not None:
                em.profile.count("mma.sync", w)
        return run


#: the statements of this module (the dialect's warp-level PTX)
PTX_STMTS = (CpAsync, CpAsyncCommit, CpAsyncWait, LdMatrix, MmaSync)


def _ptx(name: str, stmt: Any, warp_wide: bool = False,
         shapes: tuple[tuple[int, int, int], ...] = (),
         dtypes: tuple[tuple[str, str], ...] = ()) -> GpuIntrinsic:
    """Register one statement of this module as a GPU intrinsic (its ``_render`` and
    ``_emulate`` rules; the rules count their own profile events). What it writes: the first
    of its buffers, where it has any (``dst`` or ``d``)."""
    return register_gpu_intrinsic(GpuIntrinsic(
        name, stmt, stmt._render, stmt._emulate, shapes=shapes, dtypes=dtypes,
        warp_wide=warp_wide, writes=lambda s: s.buffers()[:1]), replace_existing=True)


#: the GPU intrinsics of this module: copies and groups (per thread), ldmatrix and one mma.sync
#: per input type (per warp), with the shapes and types ``MMA_SHAPES`` gives
PTX_INTRINSICS: tuple[GpuIntrinsic, ...] = (
    _ptx("cp.async", CpAsync),
    _ptx("cp.async.commit_group", CpAsyncCommit),
    _ptx("cp.async.wait_group", CpAsyncWait),
    _ptx("ldmatrix", LdMatrix, warp_wide=True),
    *(_ptx(f"mma.sync.{sh.name}.{dt}", MmaSync, True, ((sh.m, sh.n, sh.k),),
           ((sh.in_dtype, sh.acc_dtype),)) for dt, sh in MMA_SHAPES.items()),
)
