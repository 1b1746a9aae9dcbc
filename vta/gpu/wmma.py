"""Tensor-core intrinsics (WMMA m16n16k16) and the pass that lowers ``tensorize`` regions to them.

Two intrinsics are registered with the shared registry (``vta.compiler.ir.intrin``) for target
``cuda``: ``wmma.m16n16k16.s8s8s32`` (int8 x int8 -> exact int32) and ``wmma.m16n16k16.f16f16f32``
(fp16 x fp16 -> fp32 accumulate). Each declares its computation in the tensor IR (``decl``) and
carries hooks: ``cuda`` (the statement that replaces a matched region) and ``emulate`` (numpy
semantics on one 16x16x16 tile, used by the SIMT emulator and by tests).

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
from types import MappingProxyType
from typing import Any

import numpy as np

from vta.compiler.ir import expr as E
from vta.compiler.ir import poly
from vta.compiler.ir import stmt as S
from vta.compiler.ir.expr import DTYPES
from vta.compiler.ir.intrin import TensorIntrinsic, TensorizeRegion
from vta.compiler.ir.intrin import register as register_intrinsic
from vta.compiler.ir.tensor import Tensor, compute, placeholder, reduce_axis, sum_
from vta.errors import GpuLoweringError
from vta.gpu.dialect import WMMA_FRAGMENT, FragmentInfo, WmmaFill, WmmaLoad, WmmaMma, WmmaStore

__all__ = ["WMMA_INT8", "WMMA_FP16", "wmma_intrinsic", "lower_tensorize", "wmma_reference",
           "fragment_tile"]

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


def _make(name: str, in_dtype: str, acc_dtype: str) -> TensorIntrinsic:
    """A WMMA intrinsic, defined like every other through the shared type: its pattern (the
    tensor-IR declaration ``tensorize`` matches), and hooks for the layers that implement it:
    ``cuda`` (the call the renderer emits), ``emulate`` (the numpy semantics the SIMT emulator
    runs), ``fragment`` (lowered to warp fragments), ``shape`` (m, n, k) and ``dtypes``."""
    hooks = {"cuda": "wmma::mma_sync", "emulate": wmma_reference, "fragment": True,
             "shape": (TILE, TILE, TILE), "dtypes": (in_dtype, acc_dtype)}
    ti = TensorIntrinsic(name=name, target="cuda", decl=_decl(in_dtype, acc_dtype),
                         hooks=MappingProxyType(hooks))
    return register_intrinsic(ti, replace_existing=True)


WMMA_INT8 = _make("wmma.m16n16k16.s8s8s32", "int8", "int32")
WMMA_FP16 = _make("wmma.m16n16k16.f16f16f32", "float16", "float32")


def wmma_intrinsic(in_dtype: str) -> Any:
    """The registered WMMA intrinsic for an input type (int8 or float16)."""
    if in_dtype == "int8":
        return WMMA_INT8
    if in_dtype == "float16":
        return WMMA_FP16
    raise GpuLoweringError(f"no tensor-core intrinsic for {in_dtype} (int8 and float16 exist)")


def _is_wmma(v: Any) -> bool:
    """Whether a tensorize annotation is a region matched to a fragment (WMMA) intrinsic: by the
    intrinsic's definition (target and hooks), not its name."""
    return (isinstance(v, TensorizeRegion) and v.intrin.target == "cuda"
            and v.intrin.hooks.get("fragment", False))


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
    shapes = {tuple(n.value.intrin.hooks["shape"]) for n in E.walk(func.body)
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
        ins, acc = attr.value.intrin.hooks["dtypes"]
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
                       tuple(st.indices[:-2]), attr.value.intrin)

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
