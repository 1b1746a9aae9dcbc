"""Tensor-core intrinsics (WMMA m16n16k16) and the pass that lowers ``tensorize`` regions to them.

Two tensorize patterns are registered with the shared registry (``vta.compiler.ir.intrin``) for
target ``cuda``: ``wmma.m16n16k16.s8s8s32`` (int8 x int8 -> exact int32) and
``wmma.m16n16k16.f16f16f32`` (fp16 x fp16 -> fp32 accumulate), each declaring its computation in
the tensor IR (``decl``). Each is realised by a ``GpuIntrinsic`` (``vta.gpu.intrinsic``) of the
same name: the ``WmmaMma`` statement's CUDA render rule (``wmma::mma_sync``) and emulate rule,
its shape and dtypes, and its numpy semantics on one 16x16x16 tile (``wmma_reference``). The
fragment statements ``WmmaFill``/``WmmaLoad``/``WmmaStore`` are registered the same way
(``wmma.fill``, ``wmma.load``, ``wmma.store``).

Matched region (what the schedule writes under ``AttrStmt(TENSORIZE, <intrinsic>)``)::

    for i in 16: for j in 16: for k in 16:
        C[f.., i, j] = C[f.., i, j] + acc(A[fa.., i, k]) * acc(B[fb.., k, j])

where ``C``, ``A`` and ``B`` are ``local`` buffers (the schedule's ``cache_write``/``cache_read``
into registers) whose trailing two dimensions are the tile. ``lower_tensorize`` makes them WMMA
fragments (accumulator / matrix_a / matrix_b) and rewrites their other uses, which must be 16x16
copy nests: ``C[.., r, c] = 0`` becomes ``fill_fragment``, ``A[.., r, c] = S[...]`` becomes
``load_matrix_sync`` (row- or column-major from the strides of ``S``'s indices, ``ldm`` the other
stride), ``D[...] = C[.., r, c]`` becomes ``store_matrix_sync``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.compiler.ir.intrin import TensorIntrinsic, TensorizeRegion
from vta.compiler.ir.intrin import register as register_intrinsic
from vta.compiler.ir.tensor import Tensor, compute, placeholder, reduce_axis, sum_
from vta.errors import EmulatorError, EmulatorRaceError, GpuLoweringError
from vta.gpu.dialect import (
    WMMA_FRAGMENT,
    FragmentInfo,
    WmmaFill,
    WmmaLoad,
    WmmaMma,
    WmmaStore,
    flat_index,
)
from vta.gpu.emulator import NP_DTYPES, Emulator, ExprFn, StmtFn, _Ctx
from vta.gpu.intrinsic import GpuIntrinsic, for_pattern, register_gpu_intrinsic

__all__ = ["WMMA_INT8", "WMMA_FP16", "WMMA_MMA_INT8", "WMMA_MMA_FP16", "wmma_intrinsic",
           "lower_tensorize", "wmma_reference", "fragment_tile"]

TILE = 16


def _decl(in_dtype: str, acc_dtype: str) -> Tensor:
    a = placeholder((TILE, TILE), in_dtype, "A")
    k = reduce_axis(TILE, "k")
    b = placeholder((TILE, TILE), in_dtype, "B")  # (n, k): the GEMM's B[n, k] = W
    return compute((TILE, TILE), lambda i, j: sum_(a[i, k].astype(acc_dtype)
                                                   * b[j, k].astype(acc_dtype), k), "C")


def wmma_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """The intrinsic's semantics on one tile (or a batch of tiles): ``a @ b + c``, exact int32
    (wrapping) for int8, fp32 accumulation for fp16."""
    if a.dtype == np.int8:
        p = np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.int64)
        return (p + c.astype(np.int64)).astype(np.int32)
    return (np.matmul(a.astype(np.float32), b.astype(np.float32)) + c.astype(np.float32))


# ---------------------------------------------------------------------------- the intrinsics

#: what the CUDA of every WMMA statement needs
_HEADERS = ("#include <mma.h>", "using namespace nvcuda;")


def _render_fill(s: WmmaFill, r: Any, ind: int) -> list[str]:
    val = s.value if s.value.dtype == s.frag.dtype else E.Cast(s.frag.dtype, s.value)
    return [f"{'  ' * ind}wmma::fill_fragment({r.frag(s.frag, s.index)}, {r.expr(val)});"]


def _render_load(s: WmmaLoad, r: Any, ind: int) -> list[str]:
    ptr = f"&{r.name(s.src)}[{r.expr(flat_index(s.src, s.offset))}]"
    return [f"{'  ' * ind}wmma::load_matrix_sync({r.frag(s.frag, s.index)}, {ptr}, {s.ldm});"]


def _render_mma(s: WmmaMma, r: Any, ind: int) -> list[str]:
    return [f"{'  ' * ind}wmma::mma_sync({r.frag(s.d, s.d_index)}, {r.frag(s.a, s.a_index)}, "
            f"{r.frag(s.b, s.b_index)}, {r.frag(s.c, s.c_index)});"]


def _render_store(s: WmmaStore, r: Any, ind: int) -> list[str]:
    ptr = f"&{r.name(s.dst)}[{r.expr(flat_index(s.dst, s.offset))}]"
    lay = "wmma::mem_row_major" if s.layout == "row_major" else "wmma::mem_col_major"
    return [f"{'  ' * ind}wmma::store_matrix_sync({ptr}, {r.frag(s.frag, s.index)}, {s.ldm}, "
            f"{lay});"]


# the emulate rules: a whole warp's fragment operation at once (lanes Wk..Wk+W-1 are warp k)

def _emu_wmma_fill(s: WmmaFill, em: Emulator) -> StmtFn:
    idx = [em.expr(i) for i in s.index]
    val = em.expr(s.value)

    def run(ctx: _Ctx, m: Any) -> None:
        warps = em.active_warps(ctx, m, "wmma.fill")
        iv = em.warp_uniform(ctx, idx, m, "wmma.fill")
        (v,) = em.warp_uniform(ctx, [val], m, "wmma.fill")
        ctx.mem[s.frag][em._frag_sel(ctx, s.frag, iv, warps)] = em._pick(v, warps)
    return run


def _emu_tile_index(em: Emulator, ctx: _Ctx, buf: S.Buffer, offset: list[ExprFn], ldm: int,
                    layout: str, rows: int, cols: int, m: Any, warps: np.ndarray, what: str
                    ) -> np.ndarray:
    base_fns = offset
    ov = em.warp_uniform(ctx, base_fns, m, what)
    flat: Any = 0
    for v, d in zip(ov, buf.shape, strict=False):
        flat = flat * d + em._pick(v, warps)
    r = np.arange(rows)[:, None]
    c = np.arange(cols)[None, :]
    tile = r * ldm + c if layout == "row_major" else c * ldm + r
    inner = np.asarray(flat, np.int64).reshape(-1, 1, 1) + tile[None]
    if inner.size and (inner.min() < 0 or inner.max() >= buf.size):
        raise EmulatorError(f"{em.func.name}: {what} {buf.name}: tile out of bounds "
                            f"for shape {buf.shape}")
    if buf.scope == "shared":
        blk = warps // ctx.wpb
        inner = inner + (blk.astype(np.int64) * buf.size).reshape(-1, 1, 1)
    elif buf.scope != "global":
        raise EmulatorError(f"{what}: {buf.name} must be in shared or global memory")
    return inner


def _emu_frag_shape(em: Emulator, b: S.Buffer) -> tuple[int, int]:
    return b.shape[-2], b.shape[-1]


def _emu_wmma_load(s: WmmaLoad, em: Emulator) -> StmtFn:
    idx = [em.expr(i) for i in s.index]
    off = [em.expr(i) for i in s.offset]

    def run(ctx: _Ctx, m: Any) -> None:
        warps = em.active_warps(ctx, m, "wmma.load")
        rows, cols = _emu_frag_shape(em, s.frag)
        where = _emu_tile_index(em, ctx, s.src, off, s.ldm, s.layout, rows, cols, m, warps,
                                 "wmma.load from")
        if em.check_races and s.src.scope == "shared":
            _emu_warp_read(em, ctx, s.src, where, warps)
        iv = em.warp_uniform(ctx, idx, m, "wmma.load")
        tiles = em.storage(ctx, s.src)[where]
        ctx.mem[s.frag][em._frag_sel(ctx, s.frag, iv, warps)] = tiles
    return run


def _emu_warp_lanes(em: Emulator, ctx: _Ctx, warps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    lo = (warps % ctx.wpb) * ctx.W
    return lo.reshape(-1, 1, 1), (lo + ctx.W - 1).reshape(-1, 1, 1)


def _emu_warp_read(em: Emulator, ctx: _Ctx, b: S.Buffer, where: np.ndarray, warps: np.ndarray
                   ) -> None:
    lo, hi = _emu_warp_lanes(em, ctx, warps)
    w = ctx.writer[b][where]
    if np.any((w != -1) & ((w < lo) | (w > hi))):
        raise EmulatorRaceError(f"{em.func.name}: shared-memory race on {b.name}: a warp "
                                f"loads a tile written by another warp with no barrier")
    r = ctx.reader[b]
    cur = r[where]
    new = np.where(cur == -1, np.broadcast_to(lo, where.shape), -2).astype(np.int32)
    new = np.where((cur >= lo) & (cur <= hi), cur, new)
    r[where] = new


def _emu_wmma_mma(s: WmmaMma, em: Emulator) -> StmtFn:
    fi = {k: [em.expr(i) for i in getattr(s, f"{k}_index")] for k in "dabc"}
    semantics = getattr(s.intrin, "semantics", None)
    if semantics is None:
        raise EmulatorError(f"{em.func.name}: wmma.mma names no GPU intrinsic with "
                            f"semantics (its intrin is {s.intrin!r})")

    def run(ctx: _Ctx, m: Any) -> None:
        warps = em.active_warps(ctx, m, "wmma.mma")
        sel = {k: em._frag_sel(ctx, getattr(s, k),
                                 em.warp_uniform(ctx, fi[k], m, "wmma.mma"), warps)
               for k in "dabc"}
        a = ctx.mem[s.a][sel["a"]]
        b = ctx.mem[s.b][sel["b"]]
        c = ctx.mem[s.c][sel["c"]]
        d = semantics(a, b, c)  # the intrinsic's own numpy semantics
        ctx.mem[s.d][sel["d"]] = d.astype(NP_DTYPES[s.d.dtype])
    return run


def _emu_wmma_store(s: WmmaStore, em: Emulator) -> StmtFn:
    idx = [em.expr(i) for i in s.index]
    off = [em.expr(i) for i in s.offset]

    def run(ctx: _Ctx, m: Any) -> None:
        warps = em.active_warps(ctx, m, "wmma.store")
        rows, cols = _emu_frag_shape(em, s.frag)
        where = _emu_tile_index(em, ctx, s.dst, off, s.ldm, s.layout, rows, cols, m, warps,
                                 "wmma.store to")
        iv = em.warp_uniform(ctx, idx, m, "wmma.store")
        val = ctx.mem[s.frag][em._frag_sel(ctx, s.frag, iv, warps)]
        if em.check_races and s.dst.scope == "shared":
            lo, hi = _emu_warp_lanes(em, ctx, warps)
            lo_b = np.broadcast_to(lo, where.shape)
            em.check_write(ctx, s.dst, where, lo_b, lo_b, np.broadcast_to(hi, where.shape))
        em.storage(ctx, s.dst)[where] = val.astype(NP_DTYPES[s.dst.dtype])
    return run


def _fragment_op(name: str, stmt: type[S.Stmt], render: Any, emulate: Any, writes: Any
                 ) -> GpuIntrinsic:
    """A fragment statement (fill, load, store): no arithmetic, a whole warp executes it."""
    return register_gpu_intrinsic(GpuIntrinsic(
        name, stmt, render, emulate, shapes=((TILE, TILE, TILE),), warp_wide=True,
        headers=_HEADERS, counted_as=name, writes=writes), replace_existing=True)


WMMA_FILL = _fragment_op("wmma.fill", WmmaFill, _render_fill, _emu_wmma_fill,
                         lambda s: (s.frag,))
WMMA_LOAD = _fragment_op("wmma.load", WmmaLoad, _render_load, _emu_wmma_load,
                         lambda s: (s.frag,))
WMMA_STORE = _fragment_op("wmma.store", WmmaStore, _render_store, _emu_wmma_store,
                          lambda s: (s.dst,))


def _make(name: str, in_dtype: str, acc_dtype: str) -> GpuIntrinsic:
    """A WMMA MMA: its tensorize pattern (registered in the shared registry: the tensor-IR
    declaration ``tensorize`` matches) and the GPU intrinsic that realises it (``WmmaMma``:
    render and emulate rules, shape, dtypes, ``wmma_reference`` semantics)."""
    ti = TensorIntrinsic(name=name, target="cuda", decl=_decl(in_dtype, acc_dtype))
    register_intrinsic(ti, replace_existing=True)
    return register_gpu_intrinsic(GpuIntrinsic(
        name, WmmaMma, _render_mma, _emu_wmma_mma, shapes=((TILE, TILE, TILE),),
        dtypes=((in_dtype, acc_dtype),), semantics=wmma_reference, pattern=ti, warp_wide=True,
        headers=_HEADERS, counted_as="wmma.mma", writes=lambda s: (s.d,)),
        replace_existing=True)


WMMA_MMA_INT8 = _make("wmma.m16n16k16.s8s8s32", "int8", "int32")
WMMA_MMA_FP16 = _make("wmma.m16n16k16.f16f16f32", "float16", "float32")
#: the tensorize patterns (what a schedule's ``tensorize`` takes)
WMMA_INT8: TensorIntrinsic = WMMA_MMA_INT8.pattern  # type: ignore[assignment]
WMMA_FP16: TensorIntrinsic = WMMA_MMA_FP16.pattern  # type: ignore[assignment]


def wmma_intrinsic(in_dtype: str) -> TensorIntrinsic:
    """The registered WMMA tensorize pattern for an input type (int8 or float16)."""
    if in_dtype == "int8":
        return WMMA_INT8
    if in_dtype == "float16":
        return WMMA_FP16
    raise GpuLoweringError(f"no tensor-core intrinsic for {in_dtype} (int8 and float16 exist)")


def _gpu_mma(v: Any) -> GpuIntrinsic | None:
    """The fragment (WMMA) GPU intrinsic a tensorize annotation's pattern is realised by, by
    the intrinsic's definition (its statement), not its name; None for any other region."""
    if not isinstance(v, TensorizeRegion) or v.intrin.target != "cuda":
        return None
    g = for_pattern(v.intrin)
    return g if g is not None and g.stmt is WmmaMma else None


def _is_wmma(v: Any) -> bool:
    """Whether a tensorize annotation is a region matched to a fragment (WMMA) intrinsic."""
    return _gpu_mma(v) is not None


# ---------------------------------------------------------------------------- matching helpers


def _flat_stride(b: S.Buffer, idx: tuple[E.Expr, ...], v: E.Var) -> int | None:
    total, stride = 0, 1
    for i, d in reversed(list(zip(idx, b.shape, strict=False))):
        c = poly.coefficient(i, v)
        if c is None:
            return None
        total += c * stride
        stride *= d
    return total


def _strip_cast(e: E.Expr) -> E.Expr:
    return e.value if isinstance(e, E.Cast) else e


def _tile_loops(s: S.Stmt, tile: int) -> tuple[list[E.Var], S.Stmt] | None:
    """A perfect nest of constant-``tile`` loops starting at 0: (vars, innermost body). A guard
    around the body (the last tile of a split that does not divide) is looked through: a
    fragment operation covers the whole tile; rows and columns past the tensor are computed
    and discarded, and the stores to global memory keep their guards."""
    vs: list[E.Var] = []
    while isinstance(s, S.For) and E.is_const(s.min, 0) and E.is_const(s.extent, tile):
        vs.append(s.var)
        s = s.body
    while vs and isinstance(s, S.IfThenElse) and s.else_case is None:
        s = s.then_case
    return (vs, s) if vs else None


def _split_tile(e: E.Expr, tile: int) -> tuple[E.Expr, E.Expr]:
    """``e`` as ``tile * hi + lo`` with ``lo`` the one term of coefficient 1 that is not a
    multiple of ``tile`` (the tile loop), when the form allows; else ``(e // tile, e % tile)``."""
    terms, const = poly.linear_form(e)
    odd = [a for a, c in terms.items() if c % tile]
    if len(odd) == 1 and terms[odd[0]] == 1 and isinstance(odd[0], E.Var) and not const % tile:
        rest = {a: c // tile for a, c in terms.items() if a is not odd[0]}
        return poly.from_linear(rest, const // tile, e.dtype), odd[0]
    return e // tile, e % tile


def fragment_tile(func: S.PrimFunc) -> int:
    """The fragment edge of the function's WMMA regions, from their intrinsics' ``shape``
    hook (every region of one kernel shares it; this lowering handles square shapes)."""
    shapes = {_gpu_mma(n.value).shape for n in E.walk(func.body)  # type: ignore[union-attr]
              if isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE and _is_wmma(n.value)}
    if not shapes:
        return TILE
    if len(shapes) > 1 or len(set(next(iter(shapes)))) != 1:
        raise GpuLoweringError(f"{func.name}: tensorize: the fragment lowering takes one square "
                               f"m x n x k shape per kernel, got {sorted(shapes)}")
    return int(next(iter(shapes))[0])


def _tile_fragments(body: S.Stmt, tile: int) -> S.Stmt:
    """Give the 2-D register tiles that ``lower`` makes (``C_local[fi*16 + i, fj*16 + j]``)
    the fragment form ``[fi, fj, i, j]``: shape (R/16, C/16, 16, 16). An operand read as
    ``[j, k]`` in the product (the GEMM's ``B[n, k]``) is tiled transposed, ``[.., k, j]``,
    so every region reads ``C[.., i, j] += A[.., i, k] * B[.., k, j]``."""
    plan: dict[S.Buffer, bool] = {}  # buffer -> tile transposed
    for n in E.walk(body):
        if not (isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE and _is_wmma(n.value)):
            continue
        m = _tile_loops(n.body, tile)
        if m is None or not isinstance(m[1], S.BufferStore) or len(m[0]) != 3:
            continue
        st = m[1]
        if not (isinstance(st.value, E.Add) and isinstance(st.value.b, E.Mul)):
            continue
        la, lb = _strip_cast(st.value.b.a), _strip_cast(st.value.b.b)
        if not (isinstance(la, S.BufferLoad) and isinstance(lb, S.BufferLoad)):
            continue
        if len(st.indices) != 2:
            continue
        ij = E.free_vars(st.indices[0]) | E.free_vars(st.indices[1])
        k = {v for v in m[0] if v not in ij}
        plan[st.buffer] = False
        # the tile of A is [i, k], of B [k, j]: transposed when k is (is not) the first index
        if len(la.indices) == 2:
            plan[la.buffer] = bool(k & E.free_vars(la.indices[0]))
        if len(lb.indices) == 2:
            plan[lb.buffer] = not k & E.free_vars(lb.indices[0])
    plan = {b: t for b, t in plan.items()
            if b.scope == "local" and len(b.shape) == 2 and not b.shape[0] % tile
            and not b.shape[1] % tile}
    if not plan:
        return body
    new = {b: S.Buffer(b.name, (b.shape[0] // tile, b.shape[1] // tile, tile, tile), b.dtype,
                       b.scope) for b in plan}

    def index(b: S.Buffer, idx: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
        (h0, l0), (h1, l1) = (_split_tile(x, tile) for x in idx)
        return (h0, h1, l1, l0) if plan[b] else (h0, h1, l0, l1)

    def fn(n: object) -> object:
        if isinstance(n, S.BufferLoad) and n.buffer in new:
            return S.BufferLoad(new[n.buffer], index(n.buffer, n.indices), n.dtype)
        if isinstance(n, S.BufferStore):
            val = E.substitute(n.value, fn)
            if n.buffer in new:
                return S.BufferStore(new[n.buffer], val, index(n.buffer, n.indices))
            return S.BufferStore(n.buffer, val, n.indices)
        if isinstance(n, S.Allocate) and n.buffer in new:
            return S.Allocate(new[n.buffer], E.substitute(n.body, fn))
        return None

    return E.substitute(body, fn)


@dataclass
class _Frag:
    role: str
    layout: str = ""


class _Lowerer:
    def __init__(self, func: S.PrimFunc) -> None:
        self.func = func
        self.tile = fragment_tile(func)
        self.frags: dict[S.Buffer, _Frag] = {}
        self.intrin_of: dict[S.Buffer, Any] = {}

    def fail(self, msg: str) -> GpuLoweringError:
        return GpuLoweringError(f"{self.func.name}: tensorize: {msg}")

    # pass 1: the mma regions decide which buffers are fragments
    def mma(self, attr: S.AttrStmt) -> S.Stmt:
        t = self.tile
        m = _tile_loops(attr.body, t)
        if m is None or len(m[0]) != 3 or not isinstance(m[1], S.BufferStore):
            raise self.fail(f"region for {attr.value.name} is not a {t}x{t}x{t} loop nest "
                            f"around one store")
        (v1, v2, v3), st = m[0], m[1]
        c = st.buffer
        if not (isinstance(st.value, E.Add) and isinstance(st.value.a, S.BufferLoad)
                and st.value.a.buffer is c and isinstance(st.value.b, E.Mul)):
            raise self.fail(f"region body is not C = C + A * B: {st}")
        la, lb = _strip_cast(st.value.b.a), _strip_cast(st.value.b.b)
        if not (isinstance(la, S.BufferLoad) and isinstance(lb, S.BufferLoad)):
            raise self.fail("operands of the product must be buffer loads")
        n = len(c.shape)
        i, j = st.indices[n - 2], st.indices[n - 1]
        if not (isinstance(i, E.Var) and isinstance(j, E.Var)):
            raise self.fail("the accumulator's last two indices must be the tile loops")
        k = next(v for v in (v1, v2, v3) if v is not i and v is not j)
        if tuple(la.indices[-2:]) != (i, k) or tuple(lb.indices[-2:]) != (k, j):
            raise self.fail("A must be indexed [.., i, k] and B [.., k, j]")
        gi = _gpu_mma(attr.value)
        assert gi is not None  # only WMMA regions reach here
        ins, acc = gi.dtypes[0]
        if la.buffer.dtype != ins or lb.buffer.dtype != ins or c.dtype != acc:
            raise self.fail(f"{attr.value.name} needs {ins} operands and a {acc} accumulator")
        for b, role in ((c, "accumulator"), (la.buffer, "matrix_a"), (lb.buffer, "matrix_b")):
            if b.scope != "local" or b.shape[-2:] != (t, t):
                raise self.fail(f"{b.name} must be a local buffer ending in {t}x{t} (a register "
                                f"tile from cache_read/cache_write)")
            prev = self.frags.get(b)
            if prev is not None and prev.role != role:
                raise self.fail(f"{b.name} is used as {prev.role} and as {role}")
            self.frags[b] = prev or _Frag(role)
        lead = lambda ld: tuple(ld.indices[:-2])  # noqa: E731
        return WmmaMma(c, tuple(st.indices[:-2]), la.buffer, lead(la), lb.buffer, lead(lb), c,
                       tuple(st.indices[:-2]), gi)

    # pass 2: copies into / out of fragments
    def copy(self, s: S.For) -> S.Stmt | None:
        m = _tile_loops(s, self.tile)
        if m is None or len(m[0]) != 2 or not isinstance(m[1], S.BufferStore):
            return None
        (r, c), st = m
        assert isinstance(st, S.BufferStore)
        dst = st.buffer
        if dst in self.frags and tuple(st.indices[-2:]) == (c, r):
            r, c = c, r  # a transposed tile (matrix_b from B[n, k]): rows are the inner loop
        src0 = st.value
        if (isinstance(src0, S.BufferLoad) and src0.buffer in self.frags
                and tuple(src0.indices[-2:]) == (c, r)):
            r, c = c, r
        if dst in self.frags:
            if tuple(st.indices[-2:]) != (r, c):
                raise self.fail(f"copy into fragment {dst.name} must index [.., r, c]")
            lead = tuple(st.indices[:-2])
            val = st.value
            if isinstance(val, (E.IntImm, E.FloatImm)) or (
                    isinstance(val, E.Cast) and isinstance(val.value, (E.IntImm, E.FloatImm))):
                return WmmaFill(dst, lead, val)
            if not isinstance(val, S.BufferLoad) or val.buffer.scope not in ("shared", "global"):
                raise self.fail(f"fragment {dst.name} must be filled with a constant or loaded "
                                f"from shared/global memory")
            lay, ldm = self.layout(val.buffer, val.indices, r, c, dst.name)
            info = self.frags[dst]
            if info.role == "accumulator":
                raise self.fail(f"loading accumulator {dst.name} from memory is not supported")
            if info.layout and info.layout != lay:
                raise self.fail(f"fragment {dst.name} is loaded both {info.layout} and {lay}")
            info.layout = lay
            off = tuple(E.substitute(x, {r: E.IntImm(0), c: E.IntImm(0)}) for x in val.indices)
            return WmmaLoad(dst, lead, val.buffer, off, ldm, lay)
        src = st.value
        if isinstance(src, S.BufferLoad) and src.buffer in self.frags:
            if tuple(src.indices[-2:]) != (r, c):
                raise self.fail(f"copy out of fragment {src.buffer.name} must index [.., r, c]")
            if self.frags[src.buffer].role != "accumulator":
                raise self.fail(f"only accumulators are stored, not {src.buffer.name}")
            if dst.scope not in ("shared", "global") or dst.dtype != src.buffer.dtype:
                raise self.fail(f"accumulator {src.buffer.name} must be stored unconverted to "
                                f"shared/global memory (apply the epilogue after staging)")
            lay, ldm = self.layout(dst, st.indices, r, c, dst.name)
            off = tuple(E.substitute(x, {r: E.IntImm(0), c: E.IntImm(0)}) for x in st.indices)
            return WmmaStore(dst, off, src.buffer, tuple(src.indices[:-2]), ldm, lay)
        return None

    def layout(self, b: S.Buffer, idx: tuple[E.Expr, ...], r: E.Var, c: E.Var, what: str
               ) -> tuple[str, int]:
        sr, sc = _flat_stride(b, idx, r), _flat_stride(b, idx, c)
        if sc == 1 and sr is not None and sr >= self.tile:
            lay, ldm = "row_major", sr
        elif sr == 1 and sc is not None and sc >= self.tile:
            lay, ldm = "col_major", sc
        else:
            raise self.fail(f"{what}: tile access of {b.name} is neither row- nor column-major "
                            f"with unit stride (strides {sr}, {sc})")
        if (ldm * DTYPES[b.dtype] // 8) % 16:
            raise self.fail(f"{what}: leading dimension {ldm} of {b.name} is not a multiple of "
                            f"16 bytes, as WMMA requires")
        return lay, ldm

    def run(self) -> S.PrimFunc:
        def first(n: Any) -> Any:
            if isinstance(n, S.AttrStmt) and n.key is S.TENSORIZE and _is_wmma(n.value):
                return self.mma(n)
            return None

        body = E.substitute(_tile_fragments(self.func.body, self.tile), first)
        if not self.frags:
            return self.func

        def second(n: Any) -> Any:
            if isinstance(n, S.For):
                return self.copy(n)
            return None

        body = E.substitute(body, second)
        for n in E.walk(body):  # every use of a fragment must now be a WMMA statement
            if isinstance(n, S.BufferStore) and n.buffer in self.frags:
                raise self.fail(f"fragment {n.buffer.name} is written by a scalar store: {n}")
            if isinstance(n, S.BufferLoad) and n.buffer in self.frags:
                raise self.fail(f"fragment {n.buffer.name} is read by a scalar load")

        def third(n: Any) -> Any:
            if isinstance(n, S.Allocate) and n.buffer in self.frags:
                f = self.frags[n.buffer]
                if f.role != "accumulator" and not f.layout:
                    raise self.fail(f"fragment {n.buffer.name} is never loaded")
                inner = E.substitute(n.body, third)
                t = self.tile
                return S.AttrStmt(WMMA_FRAGMENT, FragmentInfo(f.role, t, t, t, f.layout),
                                  S.Allocate(n.buffer, inner))
            return None

        body = E.substitute(body, third)
        return self.func.with_body(body)


def lower_tensorize(func: S.PrimFunc) -> S.PrimFunc:
    """Pass: replace WMMA ``tensorize`` regions and their fragment copies by WMMA statements.

    Before: regions under ``AttrStmt(TENSORIZE, <wmma intrinsic>)`` as in the module
    docstring; no thread binding lowered yet. After: no such region; fragment buffers are
    allocated under ``AttrStmt(WMMA_FRAGMENT, FragmentInfo)`` and touched only by
    ``WmmaFill``/``WmmaLoad``/``WmmaMma``/``WmmaStore``. Functions without WMMA regions are
    returned unchanged.
    """
    return _Lowerer(func).run()


Hook = Callable[..., Any]
