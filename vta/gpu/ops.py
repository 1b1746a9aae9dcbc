"""GPU-layout definitions of matmul and conv2d in the tensor IR (``vta.compiler.ir.tensor``).

The accelerator's computes (``vta.compiler.ops``) use its packed NCHWnc blocks; a GPU wants the
plain layouts, so the kernels here are defined over them. Both are one *implicit GEMM*::

    C[m, n] = sum_k A[m, k] * B[n, k]          (int8 -> int32, or fp16 -> fp32)

- matmul: ``A`` is X (M, K), ``B`` is W (N, K) (parameters ``data`` and ``kernel``, the names
  the accelerator's op gives them).
- conv2d (NCHW): ``m`` = (image, output row, output column), ``n`` = output channel, ``k`` =
  (input channel, kernel row, kernel column). ``A`` is an im2col *compute* over a padding
  compute (``data_pad``); the schedule inlines both into the shared-memory copy, so the window
  is gathered on the fly and padding is a ``select``. ``B`` is the OIHW weight reshaped to
  (OC, IC*KH*KW) (a free reshape of the caller's array).

The requantizing epilogue (``vta.compiler.ops.epilogue.Epilogue``: shift right, per-channel
bias, clip, narrowing cast) is element-wise computes after ``C``; the schedules inline them into
the output stage, so they run on the accumulator tile before the only global store. A fused
chain (``vta.compiler.ops.chain.Chain``: graph-level fusion's requantize, residual add, ReLU)
follows the epilogue, stated once for both targets: its stages are element-wise computes in
the output's layout, reading their operands (a residual branch, int8 like the output) at the
output's index; ``GemmDef.epilogue`` lists every epilogue compute, so post-scheduling fusion
(``attach_epilogue``) can inline whatever a user's anchor schedule left untouched.

``pad = (pm, pn, pk)`` rounds M, N and K up to multiples of the schedule's tiles with
``select(in range, ., 0)`` inside A and B: the tensor-core schedule multiplies whole 16x16
tiles, so every tile it loads must exist, with zeros past the tensor (the output stage still
stores only the real M x N).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from vta.compiler.ir import expr as E
from vta.compiler.ir.schedule import Schedule
from vta.compiler.ir.tensor import IterVar, Tensor, compute, placeholder, reduce_axis, sum_
from vta.compiler.ops.chain import CHANNEL, POSITION, TABLE, TABLE_SIZE, Chain, ew
from vta.compiler.ops.conv2d import Conv2dSpec
from vta.compiler.ops.epilogue import Epilogue
from vta.compiler.ops.matmul import MatmulSpec
from vta.gpu import requant  # noqa: F401 - registers the requant_f32 call a chain may make

__all__ = ["ACC_DTYPE", "GemmDef", "matmul_gemm", "conv2d_gemm", "requantize",
           "attach_epilogue", "chain_operands"]

#: accumulator type for each input type
ACC_DTYPE = {"int8": "int32", "float16": "float32", "float32": "float32"}


@dataclass(frozen=True, eq=False)
class GemmDef:
    """An implicit GEMM in the tensor IR (``m, n, k`` its padded sizes): ``args`` for
    ``lower`` (inputs, then the output), the GEMM's operands ``a`` (M, K) and ``b`` (N, K),
    its reduction ``c`` (M, N), the stages
    the schedules inline (padding, im2col, epilogue), the ``out`` tensor, and ``gemm_axes``
    which gives the (m, n) leaf axes of the output stage (fusing conv2d's image/pixel axes)."""

    name: str
    m: int
    n: int
    k: int
    args: tuple[Tensor, ...]
    a: Tensor
    b: Tensor
    c: Tensor
    out: Tensor
    inline: tuple[Tensor, ...]
    gemm_axes: Callable[[Schedule], tuple[IterVar, IterVar]]
    in_dtype: str
    #: rows of A are contiguous along k in global memory (vector copies are legal)
    a_contiguous: bool = True
    #: the epilogue's computes (a subset of ``inline``: the rest is the prologue, the padding
    #: and im2col the anchor's schedule owns)
    epilogue: tuple[Tensor, ...] = ()

    @property
    def prologue(self) -> tuple[Tensor, ...]:
        return tuple(t for t in self.inline if all(t is not e for e in self.epilogue))


def _zero(dtype: str) -> E.Expr:
    return E.const(0.0 if dtype.startswith("float") else 0, dtype)


def _up(x: int, m: int) -> int:
    return -(-x // m) * m


def _in_range(r: E.Expr, c: E.Expr, rows: int, cols: int, rp: int, cp: int) -> E.Expr | None:
    conds = ([r < rows] if rp != rows else []) + ([c < cols] if cp != cols else [])
    return None if not conds else conds[0] if len(conds) == 1 else E.And(conds[0], conds[1])


def _padded(src: Tensor, rp: int, cp: int, name: str) -> tuple[Tensor, list[Tensor]]:
    """``src`` (rows, cols) or its zero extension to (rp, cp) as a compute (to be inlined)."""
    rows, cols = src.shape
    if (rp, cp) == (rows, cols):
        return src, []

    def body(r: E.Expr, c: E.Expr) -> E.Expr:
        cond = _in_range(r, c, rows, cols, rp, cp)
        assert cond is not None
        return E.select(cond, src[r, c], _zero(src.dtype))

    t = compute((rp, cp), body, name)
    return t, [t]


def _stage(fn: Callable[[E.Expr, E.Expr | None], E.Expr], y: Tensor,
           bias: Tensor | None) -> Callable[[E.Expr, E.Expr], E.Expr]:
    """``(m, n) -> fn(y[m, n], bias[n])``: one epilogue stage over the GEMM's (M, N) layout."""
    return lambda m, n: fn(y[m, n], bias[n] if bias is not None else None)


def chain_operands(chain: Chain | None, out_shape: tuple[int, ...]) -> list[Tensor]:
    """The placeholders of a chain's operands in the GPU layouts: an int8 tensor shaped like
    the output, an int32 vector over the output's channels (axis 1), an int32 tensor shaped
    like the output (a per-position bias), or an int8 (256, 256) table."""
    if not chain:
        return []
    return [placeholder((out_shape[1],), "int32", o.name) if o.kind == CHANNEL
            else placeholder((TABLE_SIZE, TABLE_SIZE), "int8", o.name) if o.kind == TABLE
            else placeholder(out_shape, "int32" if o.kind == POSITION else "int8", o.name)
            for o in chain.operands]


def requantize(acc: Tensor, bias: Tensor | None, epi: Epilogue | None, out_dtype: str,
               out_shape: tuple[int, ...], at: Callable[..., tuple[E.Expr, ...]],
               chain: Chain | None = None, operands: Sequence[Tensor] = ()
               ) -> tuple[Tensor, list[Tensor]]:
    """The epilogue as element-wise computes over ``acc`` (M, N) (bias indexed by n): the
    stages of ``Epilogue.stages`` (no clip when ``epi.clip`` is false: the cast then wraps,
    as the accelerator's STORE narrows), the same the accelerator's op is built from. The last
    compute has ``out_shape`` and reads the GEMM element ``at(*its axes) -> (m, n)`` (conv2d's
    NCHW layout); a fused ``chain`` then runs in that layout, its ``operands``
    (``chain_operands``) read at the output's index (a channel vector at axis 1). Returns
    (output, the intermediate computes to inline)."""
    stages: list[Tensor] = []
    x = acc
    if epi is not None:
        for name, fn in epi.stages(with_bias=bias is not None):
            x = compute(acc.shape, _stage(fn, x, bias), name)
            stages.append(x)
    if chain:
        prev = x
        cur = ew(out_shape, lambda *ax: prev[at(*ax)], "fused_in")
        stages.append(cur)
        for st in chain.stages:
            src = cur
            reads = [(chain.operands[k], operands[k]) for k in st.reads]

            def stage(*ax: E.Var, src: Tensor = src, st: Any = st,
                      reads: list[Any] = reads) -> E.Expr:
                vals: list[Any] = []
                for o, t in reads:
                    if o.kind == TABLE:  # read at computed indices
                        vals.append(lambda i, j, t=t: t[i, j].astype("int32"))
                        continue
                    v = t[ax[1]] if o.kind == CHANNEL else \
                        t[ax] if o.kind == POSITION else t[ax].astype("int32")
                    vals.append(o.prep(v) if o.prep is not None and o.kind != CHANNEL else v)
                return st.fn(src[ax], *vals)

            cur = ew(out_shape, stage, f"fused_{st.name}")
            stages.append(cur)
        done = cur
        return ew(out_shape, lambda *ax: done[ax].astype(out_dtype), "res"), stages
    last = x

    def body(*ax: E.Expr) -> E.Expr:
        return last[at(*ax)].astype(out_dtype)

    body.__signature__ = inspect.signature(at)  # type: ignore[attr-defined]  # axis names
    return compute(out_shape, body, "res"), stages


def _gemm(name: str, a: Tensor, b: Tensor, kp: int, acc: str) -> Tensor:
    k = reduce_axis(kp, "k")
    return compute((a.shape[0], b.shape[0]),
                   lambda m, n: sum_(a[m, k].astype(acc) * b[n, k].astype(acc), k), name)


def matmul_gemm(spec: MatmulSpec, dtype: str = "int8", epi: Epilogue | None = None,
                out_dtype: str | None = None, pad: tuple[int, int, int] = (1, 1, 1),
                chain: Chain | None = None) -> GemmDef:
    """``Y = epilogue(X @ W.T)``; X (M, K), W (N, K), bias (N,) int32 when the epilogue has
    one; M, N, K padded to multiples of ``pad`` inside the computation; ``chain`` fused after
    the epilogue (its operands are parameters after the bias)."""
    acc = ACC_DTYPE[dtype]
    out_t = out_dtype or ("int8" if epi is not None else acc)
    M, N, K = spec.m, spec.n, spec.k
    mp, np_, kp = _up(M, pad[0]), _up(N, pad[1]), _up(K, pad[2])
    X = placeholder((M, K), dtype, "data")  # the accelerator's names for the same tensors
    W = placeholder((N, K), dtype, "kernel")
    bias = placeholder((N,), "int32", "bias") if epi is not None and epi.bias else None
    A, ia = _padded(X, mp, kp, "X_pad")
    B, ib = _padded(W, np_, kp, "W_pad")
    C = _gemm("C", A, B, kp, acc)
    ops = chain_operands(chain, (M, N))
    Y, epis = requantize(C, bias, epi, out_t, (M, N), lambda m, n: (m, n), chain, ops)
    args = (X, W) + ((bias,) if bias is not None else ()) + (*ops, Y)

    def axes(s: Schedule) -> tuple[IterVar, IterVar]:
        m, n = s[Y].axis
        return m, n

    return GemmDef("matmul", mp, np_, kp, args, A, B, C, Y, (*ia, *ib, *epis), axes, dtype,
                   epilogue=tuple(epis))


def conv2d_gemm(spec: Conv2dSpec, dtype: str = "int8", epi: Epilogue | None = None,
                out_dtype: str | None = None, pad: tuple[int, int, int] = (1, 1, 1),
                chain: Chain | None = None) -> GemmDef:
    """NCHW conv2d as an implicit GEMM (module docstring); out (N, OC, OH, OW); the kernel
    parameter is the OIHW weight reshaped to (OC, IC*KH*KW)."""
    s = spec
    acc = ACC_DTYPE[dtype]
    out_t = out_dtype or ("int8" if epi is not None else acc)
    M, K = s.n * s.oh * s.ow, s.ic * s.kh * s.kw
    mp, np_, kp = _up(M, pad[0]), _up(s.oc, pad[1]), _up(K, pad[2])
    data = placeholder((s.n, s.ic, s.h, s.w), dtype, "data")
    kernel = placeholder((s.oc, K), dtype, "kernel")
    bias = placeholder((s.oc,), "int32", "bias") if epi is not None and epi.bias else None
    inline: list[Tensor] = []
    src = data
    if s.pad:
        p = s.pad

        def padded(n: E.Expr, c: E.Expr, h: E.Expr, w: E.Expr) -> E.Expr:
            inside = E.And(E.And(h >= p, h < s.h + p), E.And(w >= p, w < s.w + p))
            return E.select(inside, data[n, c, h - p, w - p], _zero(dtype))

        src = compute((s.n, s.ic, s.h + 2 * p, s.w + 2 * p), padded, "data_pad")
        inline.append(src)
    khw, ohw = s.kh * s.kw, s.oh * s.ow
    pix = src

    def im2col(m: E.Expr, k: E.Expr) -> E.Expr:
        img, oh, ow = m // ohw, (m // s.ow) % s.oh, m % s.ow
        c, r, t = k // khw, (k // s.kw) % s.kh, k % s.kw
        v = pix[img, c, oh * s.stride + r, ow * s.stride + t]
        cond = _in_range(m, k, M, K, mp, kp)
        return v if cond is None else E.select(cond, v, _zero(dtype))

    # past M or K the window index is out of range, but select evaluates only the chosen side
    A = compute((mp, kp), im2col, "im2col")
    inline.append(A)
    B, ib = _padded(kernel, np_, kp, "kernel_pad")
    inline += ib
    C = _gemm("C", A, B, kp, acc)
    oshape = (s.n, s.oc, s.oh, s.ow)
    ops = chain_operands(chain, oshape)
    res, epis = requantize(C, bias, epi, out_t, oshape,
                           lambda n, o, p, q: ((n * s.oh + p) * s.ow + q, o), chain, ops)
    inline += epis
    args = (data, kernel) + ((bias,) if bias is not None else ()) + (*ops, res)

    def axes(sch: Schedule) -> tuple[IterVar, IterVar]:
        st = sch[res]
        n, o, p, q = st.axis
        st.reorder(n, p, q, o)
        return st.fuse(st.fuse(n, p), q), o

    return GemmDef("conv2d", mp, np_, kp, args, A, B, C, res, tuple(inline), axes, dtype,
                   a_contiguous=False, epilogue=tuple(epis))


def attach_epilogue(s: Schedule, g: GemmDef) -> Schedule:
    """Post-scheduling fusion on the GPU: every epilogue compute of ``g`` (the requantization
    and any fused chain) that the schedule of the anchor left untouched is inlined into the
    output stage, so it runs on the accumulator tile before the only global store, whatever
    the anchor's tiling; returns ``s``."""
    for t in g.epilogue:
        st = s[t]
        if st.attach is None and st.scope == "global" and not st.relations:
            st.compute_inline()
    if g.c is not g.out and s[g.c].attach is None and s[g.c].scope == "global":
        s[g.c].compute_inline()  # the accumulator's copy-out, read by the epilogue
    return s
